/*
 * libFuzzer target: DLPack import of malformed tensors (gw_from_dlpack and
 * gw_from_dlpack_legacy), CPU backend.
 *
 * The bytes build a producer's managed tensor: version, flags, ndim (also negative or huge),
 * shape and strides arrays of exactly max(ndim, 0) entries (up to 64; a larger ndim gets a
 * 64-entry array, which the importer must refuse before reading), or NULL; dtype code,
 * bits and lanes; byte_offset; device type and id; data: a real pageable buffer (at an
 * offset), a device allocation of the modelled runtime, NULL, or an address that is not
 * memory (never touched).
 * Invariants checked:
 *   - the producer's deleter is called exactly once ALWAYS: during a failed import, or at
 *     the release of the last array or view on success (never before);
 *   - a failed import returns a negative status with a reason and leaves nothing
 *     registered; a successful one reports the tensor's dtype, ndim and shape, and a
 *     read-only tensor gives a read-only array;
 *   - a successful import is exported again (gw_to_dlpack) and the export's fields match;
 *   - afterwards nothing is registered, allocated, or in gpuwrap's registry.
 */
#include "gpuwrap.h"
#include "gpuwrap/cpu.h"
#include "gpuwrap/dlpack.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_reader.h"

static void die(const char *what) {
  fprintf(stderr, "fuzz_dlpack: invariant broken: %s (last error: \"%s\")\n", what,
          gw_last_error());
  abort();
}
#define CHECK(c)       \
  do {                 \
    if (!(c)) die(#c); \
  } while (0)

#define MAXD 64

/* The producer: one heap block per tensor, freed by its deleter. */
typedef struct {
  union {
    DLManagedTensorVersioned v;
    DLManagedTensor l;
  } t;
  int *calls;
  int64_t *shape, *strides;
} producer;

static void free_producer(producer *p) {
  (*p->calls)++;
  if (*p->calls > 1) die("deleter called twice");
  free(p->shape);
  free(p->strides);
  free(p);
}
static void del_versioned(DLManagedTensorVersioned *self) {
  free_producer((producer *)(void *)self);
}
static void del_legacy(DLManagedTensor *self) { free_producer((producer *)(void *)self); }

static gw_context *ctx;

static int64_t rd_dim(reader *r) {
  uint8_t sel = rd8(r);
  switch (sel % 10) {
  case 0: return 0;
  case 1: return -1 - (int64_t)(rd8(r) % 3);
  case 2: return (int64_t)rd(r, 8);
  case 3: return (int64_t)1 << (rd8(r) % 63);
  default: return 1 + (sel >> 4) % 6;
  }
}
static int64_t rd_stride(reader *r) {
  uint8_t sel = rd8(r);
  switch (sel % 8) {
  case 0: return 0;
  case 1: return (int64_t)rd(r, 8);
  case 2: return -(int64_t)(rd8(r) % 9);
  default: return 1 + (sel >> 3) % 12;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!ctx && gw_context_create(GW_BACKEND_CPU, 0, &ctx) != GW_OK) die("context");
  reader r = {data, size};
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t regs0 = gw_cpu_live_registrations(), allocs0 = gw_cpu_live_allocations();
  size_t ranges0 = gw_registry_ranges();

  int legacy = rd8(&r) & 1;
  int calls = 0;
  producer *p = calloc(1, sizeof *p);
  p->calls = &calls;

  /* data */
  char *mem = NULL, *bogus = (char *)(uintptr_t)0x20000;
  size_t memsize = 0;
  int memkind = rd8(&r) % 4;
  if (memkind == 0) {
    memsize = 3 * page;
    mem = aligned_alloc(page, memsize);
    memset(mem, 0, memsize);
  } else if (memkind == 1) {
    memsize = 4096;
    if (gw_cpu_runtime_alloc(GW_MEM_DEVICE, 0, memsize, (void **)&mem) != GW_OK) die("alloc");
  }
  void *dataptr = memkind == 2   ? NULL
                  : memkind == 3 ? (void *)bogus
                                 : (void *)(mem + rd(&r, 1) % 64);

  /* the tensor */
  int32_t ndim = (int32_t)(rd8(&r) % 20);
  uint8_t nsel = rd8(&r);
  if (nsel % 16 == 0)
    ndim = (int32_t)rd(&r, 4);
  else if (nsel % 16 == 1)
    ndim = -(int32_t)(rd8(&r) % 3) - 1;
  int entries = ndim <= 0 ? 0 : ndim > MAXD ? MAXD : ndim;
  int shape_null = rd8(&r) % 16 == 0, strides_null = rd8(&r) % 4 == 0;
  if (!shape_null) {
    p->shape = malloc((size_t)(entries ? entries : 1) * sizeof(int64_t));
    for (int d = 0; d < entries; d++) p->shape[d] = rd_dim(&r);
  }
  if (!strides_null) {
    p->strides = malloc((size_t)(entries ? entries : 1) * sizeof(int64_t));
    for (int d = 0; d < entries; d++) p->strides[d] = rd_stride(&r);
  }
  static const uint8_t codes[] = {kDLInt,     kDLUInt, kDLFloat,        kDLBfloat,
                                  kDLComplex, kDLBool, kDLOpaqueHandle, kDLFloat8_e4m3fn};
  static const uint8_t bits[] = {8, 16, 32, 64, 128, 1, 4, 0};
  DLDataType dt = {codes[rd8(&r) % 8], bits[rd8(&r) % 8], 1};
  uint8_t lsel = rd8(&r);
  if (lsel % 8 == 0) dt.lanes = (uint16_t)rd(&r, 2);
  if (lsel % 8 == 1) dt.code = rd8(&r), dt.bits = rd8(&r);
  static const int32_t devtypes[] = {kDLCPU,  kDLCPU,         kDLCPU,    kDLCUDA, kDLCUDAHost,
                                     kDLROCM, kDLCUDAManaged, kDLOneAPI, 0,       99};
  DLDevice dev = {(DLDeviceType)devtypes[rd8(&r) % 10], 0};
  uint8_t isel = rd8(&r);
  if (isel % 8 == 0)
    dev.device_id = (int32_t)rd(&r, 4);
  else if (isel % 8 == 1)
    dev.device_id = -1;
  uint64_t byte_offset = 0;
  uint8_t osel = rd8(&r);
  if (osel % 4 == 1)
    byte_offset = rd8(&r) % 128;
  else if (osel % 4 == 2)
    byte_offset = rd(&r, 8);
  else if (osel % 4 == 3)
    byte_offset = UINT64_MAX - rd8(&r);
  uint64_t flags = rd8(&r) % 4 == 0 ? rd(&r, 8) : (rd8(&r) & 1);
  DLPackVersion ver = {1, rd8(&r) % 4};
  uint8_t vsel = rd8(&r);
  if (vsel % 8 == 0)
    ver.major = 0;
  else if (vsel % 8 == 1)
    ver.major = (uint32_t)rd(&r, 4);

  DLTensor t = {.data = dataptr,
                .device = dev,
                .ndim = ndim,
                .dtype = dt,
                .shape = p->shape,
                .strides = p->strides,
                .byte_offset = byte_offset};
  gw_array *a = (gw_array *)(uintptr_t)0x1;
  gw_status s;
  if (legacy) {
    p->t.l.dl_tensor = t;
    p->t.l.manager_ctx = p;
    p->t.l.deleter = del_legacy;
    s = gw_from_dlpack_legacy(ctx, &p->t.l, &a);
  } else {
    p->t.v.version = ver;
    p->t.v.manager_ctx = p;
    p->t.v.deleter = del_versioned;
    p->t.v.flags = flags;
    p->t.v.dl_tensor = t;
    s = gw_from_dlpack(ctx, &p->t.v, &a);
  }
  /* p may be freed from here on */

  if (s != GW_OK) {
    CHECK(s < 0);
    CHECK(calls == 1);
    CHECK(a == (gw_array *)(uintptr_t)0x1);
    CHECK(gw_last_error()[0] != '\0');
  } else {
    CHECK(calls == 0);
    CHECK(gw_ndim(a) == ndim);
    /* READ_ONLY tensors import read-only; others too only over memory the process cannot
     * write (a const buffer of this binary, or a span reaching a read-only mapping such as
     * [vvar] where ASLR put it: a host-only array, the message says why, in the registry's
     * words or the runtime's) */
    if (!legacy)
      CHECK(gw_is_readonly(a) == !!(flags & DLPACK_FLAG_BITMASK_READ_ONLY) ||
            (gw_is_readonly(a) && !gw_data(a) &&
             (strstr(gw_last_error(), "page-locked") ||
              strstr(gw_last_error(), "pages the process cannot write"))));
    /* view of the first element keeps the memory alive past the array */
    gw_array *v = NULL;
    int64_t zeros[GW_MAX_DIMS] = {0}, ones[GW_MAX_DIMS];
    for (int d = 0; d < GW_MAX_DIMS; d++) ones[d] = 1;
    if (gw_numel(a) > 0 && gw_view(a, zeros, ones, NULL, &v) != GW_OK) die("view of element 0");
    DLManagedTensorVersioned *e = NULL;
    if (gw_to_dlpack(a, &e) == GW_OK) {
      CHECK(e->dl_tensor.ndim == ndim);
      for (int d = 0; d < ndim; d++) CHECK(e->dl_tensor.shape[d] == gw_shape(a)[d]);
      CHECK(e->dl_tensor.dtype.lanes == 1);
      gw_array *back = NULL;
      if (gw_from_dlpack(ctx, e, &back) == GW_OK) gw_release(back); /* e's deleter ran */
    }
    gw_release(a);
    CHECK(calls == (v ? 0 : 1));
    gw_release(v);
    CHECK(calls == 1);
  }

  if (memkind == 0)
    free(mem);
  else if (memkind == 1 && gw_cpu_runtime_free(mem) != GW_OK)
    die("free");
  CHECK(gw_registry_ranges() == ranges0);
  CHECK(gw_cpu_live_registrations() == regs0);
  CHECK(gw_cpu_live_allocations() == allocs0);
  return 0;
}
