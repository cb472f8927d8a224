/*
 * The CPU backend's model of a GPU runtime's memory (the rules measured on CUDA, see
 * shared/baselines/h200-*-2026-11-30.txt):
 *   - "device", "pinned" and "managed" allocations are real host memory (256-byte aligned,
 *     as cudaMalloc), recorded in one table; device memory is not host-accessible through
 *     the API, as on a GPU;
 *   - host registrations are exact byte ranges (CUDA tracks bytes, not pages: two disjoint
 *     ranges on one page are fine); any overlapping byte is "already registered" (712),
 *     also over a pinned/device/managed allocation; adjacent ranges are fine;
 *   - unregistering needs the exact base: an interior pointer is "invalid value", an
 *     unknown one "not registered" (713); pinned free of registered memory is "invalid
 *     value" and leaves the registration intact;
 *   - a registration outlives free()/munmap of its memory (stale), as on CUDA;
 *   - read-only memory (H200, driver 580.159.04): a plain registration of pages the
 *     process cannot write is "invalid value"; cudaHostRegisterReadOnly registers them
 *     (PROT_READ MAP_SHARED file mappings, mprotect'ed anonymous memory), except a
 *     MAP_PRIVATE file mapping, on which it never returns. The model reads the pages'
 *     protection from /proc/self/maps (gw__host_mapping) and, instead of hanging, fails
 *     the call and counts it (gw_cpu_model_hangs), so tests can assert that gpuwrap never
 *     hands such memory to a runtime. Unmapped bytes are not refused (tests register
 *     stale memory on purpose).
 * Both tables are sorted arrays of non-overlapping ranges, searched by bisection under
 * one process-wide mutex.
 */
#include "cpu_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

/* ---- tables ---- */

typedef struct {
  uintptr_t base;
  size_t size; /* bytes, >= 1 */
  gw_memkind kind;
  int device;
  bool imported; /* another process's allocation mapped here (cpu_ipc.c) */
} range;

typedef struct {
  range *v;
  size_t n, cap;
} table;

static pthread_mutex_t model_lock = PTHREAD_MUTEX_INITIALIZER;
void gw__cpu_model_lock(int on) {
  on ? pthread_mutex_lock(&model_lock) : pthread_mutex_unlock(&model_lock);
}
static table allocs; /* model_lock */
static table regs;   /* model_lock */
/* allocs.n + regs.n, so a query of pageable memory with empty tables skips the lock. */
static atomic_size_t live_ranges;

/* Index of the last range with base <= p, or -1. Branchless (the comparison becomes a
 * conditional move): queries of unrelated pointers mispredict every branch of a classic
 * bisection, which costs more than the search itself. */
static ptrdiff_t floor_index(const table *t, uintptr_t p) {
  size_t n = t->n;
  if (n == 0) return -1;
  const range *v = t->v;
  size_t lo = 0;
  while (n > 1) {
    size_t half = n / 2;
    lo = v[lo + half].base <= p ? lo + half : lo;
    n -= half;
  }
  return v[lo].base <= p ? (ptrdiff_t)lo : -1;
}

static range *containing(const table *t, uintptr_t p) {
  ptrdiff_t i = floor_index(t, p);
  if (i < 0) return NULL;
  range *r = &t->v[i];
  return p - r->base < r->size ? r : NULL;
}

/* A range sharing a byte with [b, e), e > b. The ranges of one table do not overlap, so
 * the last one starting before e has the greatest end of those that could. */
static range *overlapping(const table *t, uintptr_t b, uintptr_t e) {
  ptrdiff_t i = floor_index(t, e - 1);
  if (i < 0) return NULL;
  range *r = &t->v[i];
  return r->base + r->size > b ? r : NULL;
}

/* Make room for one more, so that the insert after it cannot fail. */
static int reserve(table *t) {
  if (t->n < t->cap) return 0;
  size_t cap = t->cap ? 2 * t->cap : 64;
  range *v = realloc(t->v, cap * sizeof *v);
  if (!v) return -1;
  t->v = v;
  t->cap = cap;
  return 0;
}

static void insert(table *t, range r) {
  size_t i = (size_t)(floor_index(t, r.base) + 1);
  memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof *t->v);
  t->v[i] = r;
  t->n++;
  atomic_fetch_add_explicit(&live_ranges, 1, memory_order_relaxed);
}

static void erase(table *t, range *r) {
  size_t i = (size_t)(r - t->v);
  memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof *t->v);
  t->n--;
  atomic_fetch_sub_explicit(&live_ranges, 1, memory_order_relaxed);
}

/* ---- rules ---- */

void gw__cpu_model_query(const void *ptr, gw_ptrinfo *out) {
  uintptr_t p = (uintptr_t)ptr;
  gw_ptrinfo info = {.kind = GW_MEM_HOST, .device = -1, .host_ptr = (void *)ptr};
  if (atomic_load_explicit(&live_ranges, memory_order_relaxed) != 0) {
    pthread_mutex_lock(&model_lock);
    /* Allocations first: a live allocation can land on a stale registration's bytes
     * (user free()d registered memory), and the allocation is what the memory is now. */
    const range *r = containing(&allocs, p);
    if (r) {
      info.kind = r->kind;
      info.device = r->device;
      info.base = (void *)r->base;
      info.extent = r->size;
      info.device_ptr = (void *)ptr;
      info.host_ptr = r->kind == GW_MEM_DEVICE ? NULL : (void *)ptr;
    } else if ((r = containing(&regs, p)) != NULL) {
      info.kind = GW_MEM_PINNED;
      info.device = r->device;
      info.base = (void *)r->base;
      info.extent = r->size;
      info.device_ptr = (void *)ptr;
      info.flags = GW_PTR_HOST_REGISTERED;
    }
    pthread_mutex_unlock(&model_lock);
    if (info.kind == GW_MEM_HOST && !info.flags && gw__cpu_vmm_query(ptr, out)) return;
  } else if (gw__cpu_vmm_query(ptr, out)) {
    return; /* VMM memory and pools are not in these tables (cpu_vmm.c) */
  }
  /* Pageable memory is device-accessible where it is on a device that reads pageable
   * memory directly (HMM/ATS), as CUDA's answer is classified (gpu_classify.h). */
  if (info.kind == GW_MEM_HOST && gw__cpu_config_get()->pageable_access)
    info.device_ptr = (void *)ptr;
  *out = info;
}

gw_status gw__cpu_model_alloc(const char *who, gw_memkind kind, int device, size_t bytes,
                              void **out) {
  gw_status cg = gw__cpu_capture_guard("cudaMalloc");
  if (cg != GW_OK) return cg;
  if (kind != GW_MEM_DEVICE && kind != GW_MEM_PINNED && kind != GW_MEM_MANAGED)
    return gw__fail(GW_EINVAL, "%s: kind %d (%s) is not device, pinned or managed memory", who,
                    (int)kind, gw_memkind_name(kind));
  if (!out) return gw__fail(GW_EINVAL, "%s: out is NULL", who);
  /* A zero-byte request still gets a distinct, classifiable pointer. */
  size_t size = bytes ? bytes : 1;
  void *p = NULL;
  /* Whole pages, as a real runtime hands out: a page shared with malloc'd memory would make
   * a neighbour's page-aligned registration overlap this allocation. */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  /* Device memory is shareable with other processes (cpu_shm.c), as a GPU's is. */
  int rc = kind == GW_MEM_DEVICE ? ((p = gw__cpu_devmem_alloc(size)) == NULL)
                                 : posix_memalign(&p, page, (size + page - 1) / page * page);
  if (rc != 0)
    return gw__fail(GW_ENOMEM, "%s: cannot allocate %zu bytes of %s memory on cpu device %d", who,
                    bytes, gw_memkind_name(kind), device);
  pthread_mutex_lock(&model_lock);
  const range *clash = overlapping(&allocs, (uintptr_t)p, (uintptr_t)p + size);
  if (clash || reserve(&allocs)) {
    gw_status st =
        clash
            ? gw__fail(GW_EBACKEND,
                       "%s: new memory [%p, +%zu) overlaps live %s allocation [%p, +%zu) "
                       "(was backend memory released with free()?)",
                       who, p, size, gw_memkind_name(clash->kind), (void *)clash->base, clash->size)
            : gw__fail(GW_ENOMEM, "%s: cannot grow the allocation table", who);
    pthread_mutex_unlock(&model_lock);
    kind == GW_MEM_DEVICE ? gw__cpu_devmem_free(p) : free(p);
    return st;
  }
  insert(&allocs, (range){(uintptr_t)p, size, kind, device, false});
  pthread_mutex_unlock(&model_lock);
  *out = p;
  return GW_OK;
}

gw_status gw__cpu_model_free(const char *who, gw_memkind kind, int device, void *ptr) {
  if (!ptr) return GW_OK; /* as cudaFree(NULL) and free(NULL) */
  uintptr_t p = (uintptr_t)ptr;
  gw_status st = GW_OK;
  pthread_mutex_lock(&model_lock);
  range *r = containing(&allocs, p);
  const range *reg;
  if (r && !r->imported && r->base == p && (kind == GW_MEM_UNKNOWN || kind == r->kind) &&
      (device < 0 || device == r->device)) {
    gw_memkind was = r->kind;
    erase(&allocs, r);
    pthread_mutex_unlock(&model_lock);
    was == GW_MEM_DEVICE ? gw__cpu_devmem_free(ptr) : free(ptr);
    return GW_OK;
  }
  if (r && r->imported)
    st = gw__fail(GW_EINVAL,
                  "%s: %p is another process's allocation mapped with cudaIpcOpenMemHandle: "
                  "cudaIpcCloseMemHandle unmaps it, a free cannot (invalid value)",
                  who, ptr);
  else if (r && r->base != p)
    st = gw__fail(GW_EINVAL,
                  "%s: %p is inside %s allocation [%p, +%zu), not its base (invalid value)", who,
                  ptr, gw_memkind_name(r->kind), (void *)r->base, r->size);
  else if (r && kind != GW_MEM_UNKNOWN && kind != r->kind)
    st = gw__fail(GW_EINVAL, "%s: %p is a %s allocation, not %s memory (invalid value)", who, ptr,
                  gw_memkind_name(r->kind), gw_memkind_name(kind));
  else if (r)
    st = gw__fail(GW_EINVAL, "%s: %p belongs to cpu device %d, not device %d (invalid value)", who,
                  ptr, r->device, device);
  else if ((reg = containing(&regs, p)) != NULL)
    st = gw__fail(GW_EINVAL,
                  "%s: %p is registered host memory [%p, +%zu), not an allocation (invalid "
                  "value, as cudaFreeHost returns on CUDA; the registration stays)",
                  who, ptr, (void *)reg->base, reg->size);
  else
    st = gw__fail(GW_EINVAL, "%s: %p is not a live backend allocation (invalid value)", who, ptr);
  pthread_mutex_unlock(&model_lock);
  return st;
}

/* Calls of the runtime with the read-only flag on a private file mapping: each one would
 * never have returned on CUDA. */
static atomic_long hangs;

GW_API long gw_cpu_model_hangs(void) { return atomic_load(&hangs); }

/* " (hole [lo, hi))" when the map's first finding is a hole (hostmap.c notes a read-only or
 * private file mapping before it), else "" (then some byte is still unmapped). */
static const char *hole_text(const gw__hostmap *m, char *buf, size_t n) {
  if (strcmp(m->what_perms, "----") != 0 || m->what_path[0]) return "";
  snprintf(buf, n, " (hole [%#" PRIxPTR ", %#" PRIxPTR "))", m->what_lo, m->what_hi);
  return buf;
}

gw_status gw__cpu_model_register(const char *who, int device, void *base, size_t bytes,
                                 unsigned flags) {
  gw_status cg = gw__cpu_capture_guard("cudaHostRegister");
  if (cg != GW_OK) return cg;
  uintptr_t b = (uintptr_t)base;
  if (!base || bytes == 0)
    return gw__fail(GW_EINVAL, "%s: [%p, +%zu): %s (invalid value)", who, base, bytes,
                    base ? "zero bytes" : "NULL pointer");
  if (bytes > UINTPTR_MAX - b)
    return gw__fail(GW_EINVAL, "%s: [%p, +%zu) wraps around the address space", who, base, bytes);
  if (flags & ~GW__REG_READONLY)
    return gw__fail(GW_EINVAL, "%s: unknown registration flags %#x (invalid value)", who, flags);
  bool readonly = (flags & GW__REG_READONLY) != 0;
  if (readonly && !gw__cpu_config_get()->readonly_register)
    return gw__fail(GW_ENOTSUP,
                    "%s: [%p, +%zu): cudaHostRegisterReadOnly is not supported on this device "
                    "(cudaDevAttrHostRegisterReadOnlySupported = 0: "
                    "GPUWRAP_CPU_NO_READONLY_REGISTER)",
                    who, base, bytes);
  uintptr_t e = b + bytes;
  /* The pages' protection, as the runtime sees it when it pins them. Read before taking
   * the model's lock (it is a system call's worth of work); a map that cannot be read
   * (no /proc) leaves the call unchecked, as the model cannot tell. */
  gw__hostmap m;
  bool known = gw__host_mapping(b, e, &m) == GW_OK;
  if (known && readonly && m.private_file) {
    /* Checked before the tables: on CUDA the call hangs whatever else holds, so handing
     * such memory to the runtime at all is the mistake the counter catches. */
    atomic_fetch_add(&hangs, 1);
    return gw__fail(GW_EBACKEND,
                    "model: cudaHostRegister(ReadOnly) of a private file mapping never returns "
                    "on CUDA (%s: [%p, +%zu) holds %s mapping [%#" PRIxPTR ", %#" PRIxPTR
                    ") of '%s')",
                    who, base, bytes, m.what_perms, m.what_lo, m.what_hi, m.what_path);
  }
  gw_status st = GW_OK;
  char hole[64];
  pthread_mutex_lock(&model_lock);
  const range *r;
  if ((r = overlapping(&regs, b, e)) != NULL)
    st = gw__fail(GW_EALREADY,
                  "%s: [%p, +%zu) overlaps registration [%p, +%zu) (already registered: "
                  "cudaErrorHostMemoryAlreadyRegistered, 712)",
                  who, base, bytes, (void *)r->base, r->size);
  else if ((r = overlapping(&allocs, b, e)) != NULL)
    st = gw__fail(GW_EALREADY,
                  "%s: [%p, +%zu) overlaps %s allocation [%p, +%zu) (already registered: "
                  "cudaErrorHostMemoryAlreadyRegistered, 712)",
                  who, base, bytes, gw_memkind_name(r->kind), (void *)r->base, r->size);
  else if (known && !m.mapped)
    /* Measured on the H200 (driver 580.159.04): an unmapped range, or one with a hole, is
     * "invalid value" with or without the read-only flag. Registered anyway, the model
     * would hand out "pinned" memory whose first touch is SIGSEGV. */
    st = gw__fail(GW_EINVAL,
                  "%s: [%p, +%zu) reaches memory that is not mapped%s: cudaHostRegister "
                  "refuses it (invalid value, as on CUDA)",
                  who, base, bytes, hole_text(&m, hole, sizeof hole));
  else if (known && readonly && m.noaccess)
    /* Measured on the H200 (driver 580.159.04): PROT_NONE pages are "invalid value" for
     * cudaHostRegisterReadOnly too: the runtime must be able to read what it pins. */
    st = gw__fail(GW_EINVAL,
                  "%s: [%p, +%zu) holds pages the process cannot read (%s mapping [%#" PRIxPTR
                  ", %#" PRIxPTR ")): cudaHostRegisterReadOnly refuses them (invalid value, "
                  "as on CUDA)",
                  who, base, bytes, m.what_perms, m.what_lo, m.what_hi);
  else if (known && !readonly && m.readonly)
    st = gw__fail(GW_EINVAL,
                  "%s: [%p, +%zu) holds pages the process cannot write (%s mapping [%#" PRIxPTR
                  ", %#" PRIxPTR ") of '%s'): cudaHostRegister without "
                  "cudaHostRegisterReadOnly refuses them (invalid value, as on CUDA)",
                  who, base, bytes, m.what_perms, m.what_lo, m.what_hi, m.what_path);
  else if (reserve(&regs))
    st = gw__fail(GW_ENOMEM, "%s: cannot grow the registration table", who);
  else
    insert(&regs, (range){b, bytes, GW_MEM_PINNED, device, false});
  pthread_mutex_unlock(&model_lock);
  return st;
}

gw_status gw__cpu_model_unregister(const char *who, void *base) {
  gw_status st = gw__cpu_capture_guard("cudaHostUnregister");
  if (st != GW_OK) return st;
  uintptr_t b = (uintptr_t)base;
  pthread_mutex_lock(&model_lock);
  range *r = base ? containing(&regs, b) : NULL;
  const range *a;
  if (r && r->base == b)
    erase(&regs, r);
  else if (r)
    st = gw__fail(GW_EINVAL,
                  "%s: %p is inside registration [%p, +%zu), not its base (invalid value; "
                  "unregistering needs the exact base)",
                  who, base, (void *)r->base, r->size);
  else if (base && (a = containing(&allocs, b)) != NULL)
    st = gw__fail(GW_ENOTREG,
                  "%s: %p is in a %s allocation [%p, +%zu), not a registration (not "
                  "registered: cudaErrorHostMemoryNotRegistered, 713)",
                  who, base, gw_memkind_name(a->kind), (void *)a->base, a->size);
  else
    st = gw__fail(GW_ENOTREG,
                  "%s: %p is not registered (cudaErrorHostMemoryNotRegistered, 713: never "
                  "registered, or unregistered already)",
                  who, base);
  pthread_mutex_unlock(&model_lock);
  return st;
}

gw_status gw__cpu_model_device_address(const char *who, void *host, void **dev) {
  uintptr_t p = (uintptr_t)host;
  gw_status st = GW_OK;
  pthread_mutex_lock(&model_lock);
  const range *r = containing(&allocs, p);
  if (r && r->kind == GW_MEM_DEVICE)
    st = gw__fail(GW_EINVAL, "%s: %p is device memory, not host memory (invalid value)", who, host);
  else if (!r && !containing(&regs, p))
    st = gw__fail(GW_EINVAL,
                  "%s: %p is neither registered nor pinned/managed memory (invalid value)", who,
                  host);
  pthread_mutex_unlock(&model_lock);
  if (st == GW_OK)
    *dev = host; /* one address space: the device sees host memory where the host does */
  return st;
}

gw_status gw__cpu_model_adopt(const char *who, int device, void *base, size_t bytes) {
  uintptr_t b = (uintptr_t)base;
  gw_status st = GW_OK;
  pthread_mutex_lock(&model_lock);
  const range *clash = overlapping(&allocs, b, b + bytes);
  if (clash)
    st = gw__fail(GW_EBACKEND, "%s: mapping [%p, +%zu) overlaps live %s allocation [%p, +%zu)", who,
                  base, bytes, gw_memkind_name(clash->kind), (void *)clash->base, clash->size);
  else if (reserve(&allocs))
    st = gw__fail(GW_ENOMEM, "%s: cannot grow the allocation table", who);
  else
    insert(&allocs, (range){b, bytes, GW_MEM_DEVICE, device, true});
  pthread_mutex_unlock(&model_lock);
  return st;
}

gw_status gw__cpu_model_unadopt(const char *who, void *base) {
  gw_status st = GW_OK;
  pthread_mutex_lock(&model_lock);
  range *r = containing(&allocs, (uintptr_t)base);
  if (r && r->imported && r->base == (uintptr_t)base)
    erase(&allocs, r);
  else
    st = gw__fail(GW_EINVAL, "%s: %p is not a mapping cudaIpcOpenMemHandle gave (invalid value)",
                  who, base);
  pthread_mutex_unlock(&model_lock);
  return st;
}

/* ---- counters ---- */

GW_API size_t gw_cpu_live_allocations(void) {
  pthread_mutex_lock(&model_lock);
  size_t n = allocs.n;
  pthread_mutex_unlock(&model_lock);
  return n;
}

GW_API size_t gw_cpu_live_registrations(void) {
  pthread_mutex_lock(&model_lock);
  size_t n = regs.n;
  pthread_mutex_unlock(&model_lock);
  return n;
}

/* ---- the raw runtime, as a user calls it outside gpuwrap (cudaMalloc, ...) ---- */

GW_API gw_status gw_cpu_runtime_alloc(gw_memkind kind, int device, size_t bytes, void **out) {
  gw_status st = gw__cpu_check(GW_CPU_OP_ALLOC);
  if (st) return st;
  const gw__cpu_config *c = gw__cpu_config_get();
  if (device < 0 || device >= c->devices)
    return gw__fail(GW_ENODEV, "gw_cpu_runtime_alloc: no cpu device %d (%d modelled)", device,
                    c->devices);
  return gw__cpu_model_alloc("gw_cpu_runtime_alloc", kind, device, bytes, out);
}

GW_API gw_status gw_cpu_runtime_free(void *ptr) {
  gw_status st = gw__cpu_check(GW_CPU_OP_FREE);
  if (st) return st;
  if ((st = gw__cpu_capture_guard("cudaFree")) != GW_OK) return st;
  gw__cpu_streams_quiesce(-1); /* cudaFree synchronizes the device first */
  return gw__cpu_model_free("gw_cpu_runtime_free", GW_MEM_UNKNOWN, -1, ptr);
}

GW_API gw_status gw_cpu_runtime_register(void *ptr, size_t bytes) {
  gw_status st = gw__cpu_check(GW_CPU_OP_REGISTER);
  if (st) return st;
  /* A user's cudaHostRegister runs on the current device, device 0 unless set. */
  return gw__cpu_model_register("gw_cpu_runtime_register", 0, ptr, bytes, 0);
}

GW_API gw_status gw_cpu_runtime_register_readonly(void *ptr, size_t bytes) {
  gw_status st = gw__cpu_check(GW_CPU_OP_REGISTER);
  if (st) return st;
  return gw__cpu_model_register("gw_cpu_runtime_register_readonly", 0, ptr, bytes,
                                GW__REG_READONLY);
}

GW_API gw_status gw_cpu_runtime_unregister(void *ptr) {
  gw_status st = gw__cpu_check(GW_CPU_OP_UNREGISTER);
  if (st) return st;
  return gw__cpu_model_unregister("gw_cpu_runtime_unregister", ptr);
}
