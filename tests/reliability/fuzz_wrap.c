/*
 * libFuzzer target: gw_wrap / gw_wrap_with_deleter / gw_view / gw_reshape argument
 * validation, driven by the fuzz bytes (CPU backend).
 *
 * Memory: a fresh 4-page pageable buffer, a 4 KiB device/pinned/managed allocation of the
 * modelled runtime, pageable memory with a foreign registration on its second page, NULL,
 * or an address that is not memory at all (never touched). The bytes choose the pointer
 * offset, dtype, ndim, shape, strides (or NULL), flags, deleter, then a view (start, shape,
 * step) and a reshape.
 * Invariants checked:
 *   - a failed call returns a negative status, says why in gw_last_error(), leaves *out
 *     untouched, and leaves nothing registered, allocated or referenced (the CPU model's
 *     live registrations/allocations and gpuwrap's registry ranges are as before);
 *   - a successful wrap reports the given ndim/shape/strides; on backend memory its byte
 *     span lies inside the allocation; a view lies inside its parent; a reshape keeps the
 *     element count; where the span is inside real memory, a fill of it is done (so ASan
 *     sees every byte written);
 *   - a deleter runs exactly once, at the last release, never on failure;
 *   - after the releases everything is back to the state before the input.
 */
#include "gpuwrap.h"
#include "gpuwrap/cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGES 4

__extension__ typedef __int128 i128; /* exact spans, whatever the int64 inputs */

#include "fuzz_reader.h"

/* Mostly small extents, sometimes the edges. */
static int64_t rd_extent(reader *r) {
  uint8_t sel = rd8(r);
  switch (sel % 12) {
  case 0: return 0;
  case 1: return -(int64_t)(rd8(r) % 4) - 1;
  case 2: return (int64_t)rd(r, 8);
  case 3: return (int64_t)1 << (rd8(r) % 63);
  case 4: return INT64_MAX - (int64_t)(rd8(r) % 4);
  default: return 1 + (sel >> 4) % 8;
  }
}
static int64_t rd_stride(reader *r) {
  uint8_t sel = rd8(r);
  switch (sel % 10) {
  case 0: return 0;
  case 1: return (int64_t)rd(r, 8);
  case 2: return INT64_MIN + (int64_t)(rd8(r) % 4);
  case 3: return (int64_t)1 << (rd8(r) % 63);
  case 4: return -((int64_t)1 << (rd8(r) % 62));
  default: return (int64_t)((sel >> 4) % 17) - 8;
  }
}

static void die(const char *what) {
  fprintf(stderr, "fuzz_wrap: invariant broken: %s (last error: \"%s\")\n", what, gw_last_error());
  abort();
}
#define CHECK(c)       \
  do {                 \
    if (!(c)) die(#c); \
  } while (0)

static gw_context *ctx;
static size_t page;

typedef struct {
  int calls;
} dstate;
static void deleter(void *ptr, void *user) {
  (void)ptr;
  ((dstate *)user)->calls++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!ctx) {
    if (gw_context_create(GW_BACKEND_CPU, 0, &ctx) != GW_OK) die("context");
    page = (size_t)sysconf(_SC_PAGESIZE);
  }
  reader r = {data, size};
  size_t regs0 = gw_cpu_live_registrations(), allocs0 = gw_cpu_live_allocations();
  size_t ranges0 = gw_registry_ranges();

  /* ---- the memory ---- */
  enum { K_PAGEABLE, K_DEVICE, K_PINNED, K_MANAGED, K_FOREIGN, K_NULL, K_BOGUS, K_COUNT };
  int kind = rd8(&r) % K_COUNT;
  char *mem = NULL;
  size_t memsize = 0;
  int foreign_registered = 0;
  switch (kind) {
  case K_PAGEABLE:
  case K_FOREIGN:
    memsize = PAGES * page;
    mem = aligned_alloc(page, memsize);
    memset(mem, 0, memsize);
    if (kind == K_FOREIGN && gw_cpu_runtime_register(mem + page, page) == GW_OK)
      foreign_registered = 1;
    break;
  case K_DEVICE:
  case K_PINNED:
  case K_MANAGED: {
    gw_memkind mk = kind == K_DEVICE   ? GW_MEM_DEVICE
                    : kind == K_PINNED ? GW_MEM_PINNED
                                       : GW_MEM_MANAGED;
    memsize = 4096;
    if (gw_cpu_runtime_alloc(mk, 0, memsize, (void **)&mem) != GW_OK) die("runtime alloc");
    break;
  }
  case K_NULL: break;
  case K_BOGUS:
    mem = (char *)(uintptr_t)0x10000;
    memsize = 1 << 20;
    break; /* never touched */
  }
  int real = mem && kind != K_BOGUS;
  int64_t off = (int64_t)(rd(&r, 2) % (memsize + 129)) - 64;
  if (rd8(&r) % 4 == 0) off = 0;
  char *ptr = mem ? mem + off : NULL;

  /* ---- the wrap ---- */
  gw_dtype dtype = (gw_dtype)(rd8(&r) % (GW_DTYPE_COUNT + 2));
  int ndim = rd8(&r) % (GW_MAX_DIMS + 3);
  if (rd8(&r) % 8 == 0) ndim = -(int)(rd8(&r) % 3) - 1;
  int64_t shape[GW_MAX_DIMS + 3], strides[GW_MAX_DIMS + 3];
  int dims = ndim > 0 ? ndim : 0;
  for (int d = 0; d < dims; d++) shape[d] = rd_extent(&r);
  int use_strides = rd8(&r) & 1;
  for (int d = 0; d < dims; d++) strides[d] = rd_stride(&r);
  unsigned flags = rd8(&r) & 0xF;
  int with_deleter = rd8(&r) % 3 == 0;
  /* Owning memory this input does not own would be a user error, not a library one: only
   * a pageable buffer's own base may be given away, and a pointer inside a backend
   * allocation (its interior is refused by gw_wrap itself, which is checked; a pointer
   * outside it is pageable memory to the runtime, which free() would not accept). */
  int inside = off >= 0 && (size_t)off < memsize;
  if ((flags & GW_WRAP_OWN) &&
      !(((kind == K_DEVICE || kind == K_PINNED || kind == K_MANAGED) && inside) ||
        (kind == K_PAGEABLE && off == 0)))
    flags &= ~GW_WRAP_OWN;

  dstate ds = {0};
  gw_array *a = (gw_array *)(uintptr_t)0x1;
  gw_status s =
      with_deleter ? gw_wrap_with_deleter(ctx, ptr, dtype, ndim, shape,
                                          use_strides ? strides : NULL, flags, deleter, &ds, &a)
                   : gw_wrap(ctx, ptr, dtype, ndim, shape, use_strides ? strides : NULL, flags, &a);
  int memory_given = 0;
  if (s != GW_OK) {
    CHECK(s < 0);
    CHECK(a == (gw_array *)(uintptr_t)0x1);
    CHECK(gw_last_error()[0] != '\0');
    CHECK(ds.calls == 0);
    CHECK(gw_registry_ranges() == ranges0);
    CHECK(gw_cpu_live_registrations() == regs0 + (size_t)foreign_registered);
    CHECK(gw_cpu_live_allocations() == allocs0 + (real && kind != K_PAGEABLE && kind != K_FOREIGN));
    goto cleanup;
  }
  CHECK(a != NULL && a != (gw_array *)(uintptr_t)0x1);
  CHECK(gw_ndim(a) == ndim);
  CHECK(gw_array_dtype(a) == dtype);
  memory_given = (flags & GW_WRAP_OWN) && gw_owns(a);
  i128 numel = 1, lo = 0, hi = 0;
  int any_zero = 0; /* a 0 extent empties the array whatever the others (they may be huge) */
  for (int d = 0; d < ndim; d++) any_zero |= shape[d] == 0;
  for (int d = 0; d < ndim; d++) {
    CHECK(gw_shape(a)[d] == shape[d]);
    if (use_strides) CHECK(gw_strides(a)[d] == strides[d]);
    numel = any_zero ? 0 : numel * shape[d];
  }
  CHECK(gw_numel(a) == (int64_t)numel);
  size_t elem = gw_dtype_size(dtype);
  int fits = 0;
  if (numel > 0) {
    for (int d = 0; d < ndim; d++) {
      i128 reach = (i128)(shape[d] - 1) * gw_strides(a)[d];
      if (reach < 0)
        lo += reach;
      else
        hi += reach;
    }
    lo *= (i128)elem;
    hi = hi * (i128)elem + (i128)elem;
    CHECK(ptr != NULL);
    i128 first = (i128)(intptr_t)(ptr - (char *)mem);
    fits = real && first + lo >= 0 && first + hi <= (i128)memsize;
    /* ptr inside backend memory: a success means the span fits the allocation (a ptr
     * before or after it is pageable memory to the runtime) */
    if ((kind == K_DEVICE || kind == K_PINNED || kind == K_MANAGED) && inside) CHECK(fits);
  }
  /* (stride-0 dims make huge element counts over a few bytes: fill only modest ones) */
  if (fits && numel <= 65536) fits = 2;
  if (fits == 2 && !(flags & GW_WRAP_READONLY)) {
    uint64_t v[2] = {rd(&r, 8), rd(&r, 8)};
    if (dtype == GW_BOOL) v[0] &= 1;
    gw_status fs = gw_fill(a, v);
    /* an array whose elements overlap in memory (a zero stride) is refused, nothing else */
    CHECK(fs == GW_OK || (fs == GW_EINVAL && strstr(gw_last_error(), "overlap")));
  }

  /* ---- a view ---- */
  int64_t vstart[GW_MAX_DIMS], vshape[GW_MAX_DIMS], vstep[GW_MAX_DIMS];
  for (int d = 0; d < ndim; d++) {
    vstart[d] = rd8(&r) % 8 == 0 ? (int64_t)rd(&r, 8) : (int64_t)(rd8(&r) % 9) - 1;
    vshape[d] = rd8(&r) % 8 == 0 ? rd_extent(&r) : (int64_t)(rd8(&r) % 6);
    vstep[d] = rd8(&r) % 8 == 0 ? rd_stride(&r) : (int64_t)(rd8(&r) % 7) - 3;
  }
  int use_step = rd8(&r) & 1;
  gw_array *v = (gw_array *)(uintptr_t)0x1;
  s = gw_view(a, vstart, vshape, use_step ? vstep : NULL, &v);
  if (s != GW_OK) {
    CHECK(s < 0 && v == (gw_array *)(uintptr_t)0x1 && gw_last_error()[0]);
  } else {
    int empty = gw_numel(v) == 0; /* an empty view may start anywhere (its strides are
                                     * never used) */
    for (int d = 0; d < ndim; d++) {
      CHECK(gw_shape(v)[d] == vshape[d]);
      if (empty) continue;
      i128 st = use_step ? vstep[d] : 1;
      i128 last = vstart[d] + (vshape[d] - 1) * st;
      CHECK(vstart[d] >= 0 && vstart[d] < shape[d] && last >= 0 && last < shape[d]);
    }
    if (fits == 2 && !(flags & GW_WRAP_READONLY) && gw_numel(v) > 0) {
      uint64_t val[2] = {0, 0};
      gw_status fs = gw_fill(v, val);
      /* a view whose elements overlap in memory (a zero stride) is refused, nothing else */
      CHECK(fs == GW_OK || (fs == GW_EINVAL && strstr(gw_last_error(), "overlap")));
    }
  }

  /* ---- a reshape ---- */
  int rnd = rd8(&r) % (GW_MAX_DIMS + 2);
  int64_t rshape[GW_MAX_DIMS + 2];
  for (int d = 0; d < rnd; d++)
    rshape[d] = rd8(&r) % 8 == 0 ? rd_extent(&r) : (int64_t)(rd8(&r) % 5);
  gw_array *rs = (gw_array *)(uintptr_t)0x1;
  s = gw_reshape(s == GW_OK && (rd8(&r) & 1) ? v : a, rnd, rshape, &rs);
  if (s != GW_OK) {
    CHECK(s < 0 && rs == (gw_array *)(uintptr_t)0x1 && gw_last_error()[0]);
    rs = NULL;
  } else {
    i128 rn = 1;
    int rzero = 0;
    for (int d = 0; d < rnd; d++) rzero |= rshape[d] == 0;
    for (int d = 0; d < rnd; d++) rn = rzero ? 0 : rn * rshape[d];
    CHECK(gw_numel(rs) == (int64_t)rn);
  }

  /* ---- releases: the deleter runs at the last one ---- */
  if (v != (gw_array *)(uintptr_t)0x1) gw_release(v);
  gw_release(a);
  CHECK(ds.calls == 0 || !rs); /* the reshape (if any) still holds the memory */
  gw_release(rs);
  CHECK(ds.calls == with_deleter);

cleanup:
  if (foreign_registered && gw_cpu_runtime_unregister(mem + page) != GW_OK)
    die("unregister foreign");
  if (!memory_given) {
    if (kind == K_PAGEABLE || kind == K_FOREIGN)
      free(mem);
    else if (real && gw_cpu_runtime_free(mem) != GW_OK)
      die("runtime free");
  }
  CHECK(gw_registry_ranges() == ranges0);
  CHECK(gw_cpu_live_registrations() == regs0);
  CHECK(gw_cpu_live_allocations() == allocs0);
  return 0;
}
