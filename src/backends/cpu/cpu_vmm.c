/*
 * The CPU model of the memory modern frameworks hand over that is neither cudaMalloc nor
 * host memory: VMM memory (cuMemAddressReserve + cuMemCreate + cuMemMap, PyTorch's
 * expandable segments) and stream-ordered pools (cudaMallocAsync's default pool, pools of
 * cudaMemPoolCreate). The controls are testing-only (gpuwrap/cpu_testing.h); what gpuwrap
 * itself sees is the model's pointer query (gw__cpu_vmm_query, asked by cpu_model.c) and
 * the IPC refusal (gw__cpu_vmm_refusal, asked by cpu_ipc.c).
 *
 * How it answers, as CUDA does (docs/IPC.md, the allocator table):
 *   - a reservation is an anonymous PROT_NONE mapping; a chunk is a memfd; mapping it puts
 *     the memfd MAP_SHARED|MAP_FIXED inside the reservation, unmapping puts PROT_NONE back.
 *     A mapped byte is device memory of the chunk's device; its extent is the CONTIGUOUS
 *     MAPPED RANGE around it (back-to-back mappings of one reservation, up to a hole or
 *     the reservation's end), never the reservation (CUDA's RANGE_* attributes) and never
 *     one chunk when the next is mapped right after it. A byte of a hole is not device
 *     memory (what the runtime knows nothing about: pageable, as any unknown address).
 *   - a pool is a PROT_NONE reservation whose pages are backed (read-write) as allocations
 *     need them; an allocation is first-fit at page granularity, so a free followed by an
 *     allocation reuses the address. A byte of a live allocation is device memory with
 *     that allocation's base and extent (interior pointers too); a freed byte whose page is
 *     still backed is device memory with no extent (the pool keeps it, as CUDA's pools do
 *     until trimmed: never a stale extent); trimmed or destroyed, it is not device memory.
 *   - the pool calls are synchronous (as if the stream-ordered work had completed).
 *   - neither exports through legacy IPC (IS_LEGACY_CUDA_IPC_CAPABLE = 0): gpuwrap's IPC of
 *     them is the next step; today the export is refused naming how to allocate the memory
 *     shareable (handle_types at creation).
 *
 * Tables: few entries, unsorted, guarded by one leaf mutex; live_objects lets the model's
 * query of pageable memory skip the lock when nothing here exists.
 */
#include "cpu_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct gw_cpu_vmm_chunk_s {
  int fd;
  size_t bytes;
  int device;
  unsigned handle_types;
  int refs; /* the creator's (until gw_cpu_vmm_release) and one per mapping; lock */
};

typedef struct {
  uintptr_t base;
  size_t bytes;
} resv;

typedef struct {
  uintptr_t at;
  size_t bytes;
  uintptr_t resv_base; /* the reservation holding it */
  gw_cpu_vmm_chunk chunk;
} vmap;

typedef struct {
  size_t off, bytes; /* page multiples */
} palloc;

struct gw_cpu_pool_s {
  uintptr_t base;
  size_t bytes; /* reserved */
  int device;
  unsigned handle_types;
  bool is_default, destroyed;
  unsigned char *backed; /* per page: 1 = read-write */
  palloc *live;          /* sorted by off */
  size_t nlive, cap_live;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static resv *resvs; /* lock */
static size_t nresvs, cap_resvs;
static vmap *maps; /* lock */
static size_t nmaps, cap_maps;
static gw_cpu_pool *pools; /* lock */
static size_t npools, cap_pools;
static gw_cpu_pool default_pools[GW__CPU_MAX_DEVICES]; /* lock */
/* Mappings plus pools: the query skips the lock at 0. */
static atomic_size_t live_objects;

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Pages named by the test are whole pages, as cuMemGetAllocationGranularity's are. */
GW_API size_t gw_cpu_vmm_granularity(void) { return page(); }

/* ---- the query and the refusal (called by cpu_model.c and cpu_ipc.c) ---- */

static vmap *map_at(uintptr_t p) {
  for (size_t i = 0; i < nmaps; i++)
    if (p - maps[i].at < maps[i].bytes) return &maps[i];
  return NULL;
}

static gw_cpu_pool pool_at(uintptr_t p) {
  for (size_t i = 0; i < npools; i++)
    if (p - pools[i]->base < pools[i]->bytes) return pools[i];
  return NULL;
}

static const palloc *live_at(gw_cpu_pool pl, size_t off) {
  for (size_t i = 0; i < pl->nlive; i++)
    if (off - pl->live[i].off < pl->live[i].bytes) return &pl->live[i];
  return NULL;
}

bool gw__cpu_vmm_query(const void *ptr, gw_ptrinfo *out) {
  if (atomic_load_explicit(&live_objects, memory_order_relaxed) == 0) return false;
  uintptr_t p = (uintptr_t)ptr;
  bool found = false;
  pthread_mutex_lock(&lock);
  const vmap *m = map_at(p);
  gw_cpu_pool pl;
  if (m) {
    /* The contiguous mapped range: neighbours of the same reservation, back to back. */
    uintptr_t lo = m->at, hi = m->at + m->bytes;
    for (const vmap *n; (n = map_at(hi)) != NULL && n->resv_base == m->resv_base && n->at == hi;)
      hi += n->bytes;
    for (const vmap *n; lo > m->resv_base && (n = map_at(lo - 1)) != NULL &&
                        n->resv_base == m->resv_base && n->at + n->bytes == lo;)
      lo = n->at;
    *out = (gw_ptrinfo){.kind = GW_MEM_DEVICE,
                        .device = m->chunk->device,
                        .base = (void *)lo,
                        .extent = hi - lo,
                        .device_ptr = (void *)ptr};
    found = true;
  } else if ((pl = pool_at(p)) != NULL) {
    size_t off = p - pl->base;
    const palloc *a = live_at(pl, off);
    if (a || pl->backed[off / page()]) {
      *out = (gw_ptrinfo){.kind = GW_MEM_DEVICE,
                          .device = pl->device,
                          .base = a ? (void *)(pl->base + a->off) : NULL,
                          .extent = a ? a->bytes : 0,
                          .device_ptr = (void *)ptr};
      found = true;
    }
  }
  pthread_mutex_unlock(&lock);
  return found;
}

const char *gw__cpu_vmm_refusal(const void *ptr, char *buf, size_t n) {
  if (atomic_load_explicit(&live_objects, memory_order_relaxed) == 0) return NULL;
  uintptr_t p = (uintptr_t)ptr;
  const char *why = NULL;
  pthread_mutex_lock(&lock);
  const vmap *m = map_at(p);
  gw_cpu_pool pl = m ? NULL : pool_at(p);
  if (m)
    snprintf(buf, n,
             "VMM memory (cuMemCreate + cuMemMap) is not legacy-IPC capable and gpuwrap does "
             "not share it yet (planned)%s",
             (m->chunk->handle_types & GW_CPU_HANDLE_POSIX_FD)
                 ? ""
                 : "; this chunk has no shareable handle type: allocate it with cuMemCreate "
                   "and requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR "
                   "(model: gw_cpu_vmm_create with GW_CPU_HANDLE_POSIX_FD) so that it can be "
                   "shared");
  else if (pl)
    snprintf(buf, n,
             "stream-ordered pool memory (cudaMallocAsync / cudaMallocFromPoolAsync) is not "
             "legacy-IPC capable and gpuwrap does not share it yet (planned)%s",
             (pl->handle_types & GW_CPU_HANDLE_POSIX_FD) ? ""
             : pl->is_default
                 ? "; a device's default pool has no shareable handle type: allocate "
                   "from a pool made by cudaMemPoolCreate with handleTypes = "
                   "cudaMemHandleTypePosixFileDescriptor (model: gw_cpu_pool_create "
                   "with GW_CPU_HANDLE_POSIX_FD) so that it can be shared"
                 : "; this pool has no shareable handle type: create it with "
                   "cudaMemPoolCreate and handleTypes = "
                   "cudaMemHandleTypePosixFileDescriptor (model: gw_cpu_pool_create with "
                   "GW_CPU_HANDLE_POSIX_FD) so that it can be shared");
  if (m || pl) why = buf;
  pthread_mutex_unlock(&lock);
  return why;
}

/* ---- VMM controls ---- */

static gw_status bad_device(const char *who, int device) {
  const gw__cpu_config *c = gw__cpu_config_get();
  if (device >= 0 && device < c->devices) return GW_OK;
  return gw__fail(GW_ENODEV, "%s: device: no cpu device %d (%d modelled)", who, device, c->devices);
}

static bool aligned(uintptr_t v) { return (v & (page() - 1)) == 0; }

GW_API gw_status gw_cpu_vmm_reserve(size_t bytes, void **base) {
  if (!base) return gw__fail(GW_EINVAL, "gw_cpu_vmm_reserve: base is NULL");
  if (bytes == 0 || !aligned(bytes))
    return gw__fail(GW_EINVAL,
                    "gw_cpu_vmm_reserve: bytes: %zu is not a positive multiple of the "
                    "granularity %zu (invalid value)",
                    bytes, page());
  void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return gw__fail(GW_ENOMEM, "gw_cpu_vmm_reserve: cannot reserve %zu bytes: %s", bytes,
                    strerror(errno));
  pthread_mutex_lock(&lock);
  bool ok = gw__cpu_grow((void **)&resvs, nresvs, &cap_resvs, sizeof *resvs);
  if (ok) resvs[nresvs++] = (resv){(uintptr_t)p, bytes};
  pthread_mutex_unlock(&lock);
  if (!ok) {
    munmap(p, bytes);
    return gw__fail(GW_ENOMEM, "gw_cpu_vmm_reserve: cannot grow the reservation table");
  }
  *base = p;
  return GW_OK;
}

GW_API gw_status gw_cpu_vmm_free(void *base, size_t bytes) {
  uintptr_t b = (uintptr_t)base;
  gw_status st = GW_OK;
  pthread_mutex_lock(&lock);
  size_t i = 0;
  while (i < nresvs && resvs[i].base != b) i++;
  if (i == nresvs || resvs[i].bytes != bytes)
    st = gw__fail(GW_EINVAL,
                  "gw_cpu_vmm_free: [%p, +%zu) is not a reservation of gw_cpu_vmm_reserve "
                  "(base and size must be exact; invalid value)",
                  base, bytes);
  else
    for (size_t k = 0; k < nmaps && st == GW_OK; k++)
      if (maps[k].resv_base == b)
        st = gw__fail(GW_EBUSY,
                      "gw_cpu_vmm_free: [%p, +%zu) still has [%p, +%zu) mapped: unmap it first",
                      base, bytes, (void *)maps[k].at, maps[k].bytes);
  if (st == GW_OK) {
    resvs[i] = resvs[--nresvs];
    munmap(base, bytes);
  }
  pthread_mutex_unlock(&lock);
  return st;
}

GW_API gw_status gw_cpu_vmm_create(int device, size_t bytes, unsigned handle_types,
                                   gw_cpu_vmm_chunk *chunk) {
  gw_status st = bad_device("gw_cpu_vmm_create", device);
  if (st != GW_OK) return st;
  if (!chunk) return gw__fail(GW_EINVAL, "gw_cpu_vmm_create: chunk is NULL");
  if (bytes == 0 || !aligned(bytes))
    return gw__fail(GW_EINVAL,
                    "gw_cpu_vmm_create: bytes: %zu is not a positive multiple of the "
                    "granularity %zu (invalid value)",
                    bytes, page());
  if (handle_types & ~(unsigned)GW_CPU_HANDLE_POSIX_FD)
    return gw__fail(GW_EINVAL, "gw_cpu_vmm_create: handle_types: unknown bits %#x",
                    handle_types & ~(unsigned)GW_CPU_HANDLE_POSIX_FD);
  gw_cpu_vmm_chunk c = calloc(1, sizeof *c);
  if (!c) return gw__fail(GW_ENOMEM, "gw_cpu_vmm_create: out of memory");
  void *p = NULL;
  c->fd = gw__cpu_shm_create("gw-cpu-vmm", bytes, &p);
  if (c->fd < 0) {
    int e = errno;
    free(c);
    return gw__fail(GW_ENOMEM, "gw_cpu_vmm_create: cannot make %zu bytes of chunk memory: %s",
                    bytes, strerror(e));
  }
  munmap(p, bytes); /* the chunk is its descriptor; mappings are made by gw_cpu_vmm_map */
  c->bytes = bytes;
  c->device = device;
  c->handle_types = handle_types;
  c->refs = 1;
  *chunk = c;
  return GW_OK;
}

/* Drop a reference (lock held): the chunk goes with the last. */
static void chunk_unref(gw_cpu_vmm_chunk c) {
  if (--c->refs > 0) return;
  close(c->fd);
  free(c);
}

GW_API gw_status gw_cpu_vmm_release(gw_cpu_vmm_chunk chunk) {
  if (!chunk) return gw__fail(GW_EINVAL, "gw_cpu_vmm_release: chunk is NULL");
  pthread_mutex_lock(&lock);
  chunk_unref(chunk);
  pthread_mutex_unlock(&lock);
  return GW_OK;
}

GW_API gw_status gw_cpu_vmm_map(void *at, size_t bytes, gw_cpu_vmm_chunk chunk) {
  uintptr_t a = (uintptr_t)at;
  if (!chunk) return gw__fail(GW_EINVAL, "gw_cpu_vmm_map: chunk is NULL");
  if (bytes != chunk->bytes || !aligned(a))
    return gw__fail(GW_EINVAL,
                    "gw_cpu_vmm_map: [%p, +%zu): the model maps whole chunks (%zu bytes) at "
                    "granularity-aligned addresses (invalid value)",
                    at, bytes, chunk->bytes);
  gw_status st = GW_OK;
  pthread_mutex_lock(&lock);
  const resv *r = NULL;
  for (size_t i = 0; i < nresvs && !r; i++)
    if (a - resvs[i].base < resvs[i].bytes && bytes <= resvs[i].bytes - (a - resvs[i].base))
      r = &resvs[i];
  const vmap *clash = NULL;
  for (size_t i = 0; i < nmaps && !clash; i++)
    if (a < maps[i].at + maps[i].bytes && maps[i].at < a + bytes) clash = &maps[i];
  if (!r)
    st = gw__fail(GW_EINVAL,
                  "gw_cpu_vmm_map: [%p, +%zu) is not inside one reservation of "
                  "gw_cpu_vmm_reserve (invalid value)",
                  at, bytes);
  else if (clash)
    st = gw__fail(GW_EINVAL, "gw_cpu_vmm_map: [%p, +%zu) overlaps mapping [%p, +%zu)", at, bytes,
                  (void *)clash->at, clash->bytes);
  else if (!gw__cpu_grow((void **)&maps, nmaps, &cap_maps, sizeof *maps))
    st = gw__fail(GW_ENOMEM, "gw_cpu_vmm_map: cannot grow the mapping table");
  else if (mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, chunk->fd, 0) ==
           MAP_FAILED)
    st = gw__fail(GW_ENOMEM, "gw_cpu_vmm_map: [%p, +%zu): mmap: %s", at, bytes, strerror(errno));
  else {
    maps[nmaps++] = (vmap){a, bytes, r->base, chunk};
    chunk->refs++;
    atomic_fetch_add(&live_objects, 1);
  }
  pthread_mutex_unlock(&lock);
  return st;
}

GW_API gw_status gw_cpu_vmm_unmap(void *at, size_t bytes) {
  uintptr_t a = (uintptr_t)at;
  gw_status st = GW_OK;
  pthread_mutex_lock(&lock);
  size_t i = 0;
  while (i < nmaps && maps[i].at != a) i++;
  if (i == nmaps || maps[i].bytes != bytes)
    st = gw__fail(GW_EINVAL,
                  "gw_cpu_vmm_unmap: [%p, +%zu) is not a mapping of gw_cpu_vmm_map (the model "
                  "unmaps whole mappings; invalid value)",
                  at, bytes);
  else if (mmap(at, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
                0) == MAP_FAILED)
    st =
        gw__fail(GW_EBACKEND, "gw_cpu_vmm_unmap: [%p, +%zu): mmap: %s", at, bytes, strerror(errno));
  else {
    chunk_unref(maps[i].chunk);
    maps[i] = maps[--nmaps];
    atomic_fetch_sub(&live_objects, 1);
  }
  pthread_mutex_unlock(&lock);
  return st;
}

/* ---- pools ---- */

/* The default pool's reservation: room enough for tests, pages backed only when used. */
#define DEFAULT_POOL_BYTES ((size_t)64 << 20)

static gw_status pool_make(const char *who, int device, size_t bytes, unsigned handle_types,
                           bool is_default, gw_cpu_pool *out) {
  gw_cpu_pool pl = calloc(1, sizeof *pl);
  unsigned char *backed = calloc(bytes / page(), 1);
  void *p = MAP_FAILED;
  if (pl && backed)
    p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED || !gw__cpu_grow((void **)&pools, npools, &cap_pools, sizeof *pools)) {
    if (p != MAP_FAILED) munmap(p, bytes);
    free(backed);
    free(pl);
    return gw__fail(GW_ENOMEM, "%s: cannot reserve a pool of %zu bytes", who, bytes);
  }
  *pl = (struct gw_cpu_pool_s){.base = (uintptr_t)p,
                               .bytes = bytes,
                               .device = device,
                               .handle_types = handle_types,
                               .is_default = is_default,
                               .backed = backed};
  pools[npools++] = pl;
  atomic_fetch_add(&live_objects, 1);
  *out = pl;
  return GW_OK;
}

/* Unmap the pool and forget it (lock held). */
static void pool_drop(gw_cpu_pool pl) {
  for (size_t i = 0; i < npools; i++)
    if (pools[i] == pl) {
      pools[i] = pools[--npools];
      break;
    }
  munmap((void *)pl->base, pl->bytes);
  atomic_fetch_sub(&live_objects, 1);
  free(pl->backed);
  free(pl->live);
  free(pl);
}

GW_API gw_status gw_cpu_pool_create(int device, size_t max_bytes, unsigned handle_types,
                                    gw_cpu_pool *pool) {
  gw_status st = bad_device("gw_cpu_pool_create", device);
  if (st != GW_OK) return st;
  if (!pool) return gw__fail(GW_EINVAL, "gw_cpu_pool_create: pool is NULL");
  if (max_bytes == 0 || !aligned(max_bytes))
    return gw__fail(GW_EINVAL,
                    "gw_cpu_pool_create: max_bytes: %zu is not a positive multiple of the "
                    "granularity %zu",
                    max_bytes, page());
  if (handle_types & ~(unsigned)GW_CPU_HANDLE_POSIX_FD)
    return gw__fail(GW_EINVAL, "gw_cpu_pool_create: handle_types: unknown bits %#x",
                    handle_types & ~(unsigned)GW_CPU_HANDLE_POSIX_FD);
  pthread_mutex_lock(&lock);
  st = pool_make("gw_cpu_pool_create", device, max_bytes, handle_types, false, pool);
  pthread_mutex_unlock(&lock);
  return st;
}

GW_API gw_status gw_cpu_pool_default(int device, gw_cpu_pool *pool) {
  gw_status st = bad_device("gw_cpu_pool_default", device);
  if (st != GW_OK) return st;
  if (!pool) return gw__fail(GW_EINVAL, "gw_cpu_pool_default: pool is NULL");
  pthread_mutex_lock(&lock);
  if (!default_pools[device])
    st = pool_make("gw_cpu_pool_default", device, DEFAULT_POOL_BYTES, 0, true,
                   &default_pools[device]);
  if (st == GW_OK) *pool = default_pools[device];
  pthread_mutex_unlock(&lock);
  return st;
}

GW_API gw_status gw_cpu_pool_alloc(gw_cpu_pool pool, size_t bytes, void **out) {
  if (!pool || !out)
    return gw__fail(GW_EINVAL, "gw_cpu_pool_alloc: %s is NULL", pool ? "out" : "pool");
  size_t pg = page();
  size_t need = (bytes ? bytes : 1);
  need = (need + pg - 1) / pg * pg;
  gw_status st = GW_OK;
  pthread_mutex_lock(&lock);
  /* First fit between the live allocations (sorted): a freed address is reused. */
  size_t off = 0, i = 0;
  for (; i < pool->nlive; i++) {
    if (pool->live[i].off - off >= need) break;
    off = pool->live[i].off + pool->live[i].bytes;
  }
  if (pool->destroyed)
    st = gw__fail(GW_EINVAL, "gw_cpu_pool_alloc: the pool was destroyed (invalid value)");
  else if (need > pool->bytes || off > pool->bytes - need)
    st = gw__fail(GW_ENOMEM,
                  "gw_cpu_pool_alloc: %zu bytes do not fit the pool's %zu (out of memory)", bytes,
                  pool->bytes);
  else if (!gw__cpu_grow((void **)&pool->live, pool->nlive, &pool->cap_live, sizeof *pool->live))
    st = gw__fail(GW_ENOMEM, "gw_cpu_pool_alloc: cannot grow the pool's table");
  else if (mprotect((void *)(pool->base + off), need, PROT_READ | PROT_WRITE) != 0)
    st = gw__fail(GW_ENOMEM, "gw_cpu_pool_alloc: mprotect: %s", strerror(errno));
  else {
    memmove(&pool->live[i + 1], &pool->live[i], (pool->nlive - i) * sizeof *pool->live);
    pool->live[i] = (palloc){off, need};
    pool->nlive++;
    memset(pool->backed + off / pg, 1, need / pg);
    *out = (void *)(pool->base + off);
  }
  pthread_mutex_unlock(&lock);
  return st;
}

GW_API gw_status gw_cpu_pool_free(void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  gw_status st = GW_OK;
  pthread_mutex_lock(&lock);
  gw_cpu_pool pl = pool_at(p);
  size_t i = 0;
  while (pl && i < pl->nlive && pl->base + pl->live[i].off != p) i++;
  if (!pl || i == pl->nlive)
    st = gw__fail(GW_EINVAL,
                  "gw_cpu_pool_free: %p is not the base of a live pool allocation (invalid value)",
                  ptr);
  else {
    memmove(&pl->live[i], &pl->live[i + 1], (pl->nlive - i - 1) * sizeof *pl->live);
    pl->nlive--;
    /* A destroyed pool goes with its last allocation (cudaMemPoolDestroy's deferred release). */
    if (pl->destroyed && pl->nlive == 0) pool_drop(pl);
  }
  pthread_mutex_unlock(&lock);
  return st;
}

/* Give back the pages no live allocation holds, from the top down, until keep_bytes are
 * left backed (lock held). */
static void trim_locked(gw_cpu_pool pool, size_t keep_bytes) {
  size_t pg = page(), npg = pool->bytes / pg;
  size_t backed = 0;
  for (size_t k = 0; k < npg; k++) backed += pool->backed[k];
  for (size_t k = npg; k-- > 0 && backed * pg > keep_bytes;) {
    if (!pool->backed[k] || live_at(pool, k * pg)) continue;
    void *a = (void *)(pool->base + k * pg);
    (void)madvise(a, pg, MADV_DONTNEED);
    (void)mprotect(a, pg, PROT_NONE);
    pool->backed[k] = 0;
    backed--;
  }
}

GW_API gw_status gw_cpu_pool_trim(gw_cpu_pool pool, size_t keep_bytes) {
  if (!pool) return gw__fail(GW_EINVAL, "gw_cpu_pool_trim: pool is NULL");
  pthread_mutex_lock(&lock);
  trim_locked(pool, keep_bytes);
  pthread_mutex_unlock(&lock);
  return GW_OK;
}

GW_API gw_status gw_cpu_pool_destroy(gw_cpu_pool pool) {
  if (!pool) return gw__fail(GW_EINVAL, "gw_cpu_pool_destroy: pool is NULL");
  gw_status st = GW_OK;
  pthread_mutex_lock(&lock);
  if (pool->is_default)
    st = gw__fail(GW_EINVAL, "gw_cpu_pool_destroy: a device's default pool cannot be destroyed "
                             "(invalid value)");
  else if (pool->destroyed)
    st = gw__fail(GW_EINVAL, "gw_cpu_pool_destroy: the pool was destroyed already");
  else if (pool->nlive) {
    /* As cudaMemPoolDestroy: outstanding allocations keep the pool until they are freed;
     * its free memory goes now. */
    pool->destroyed = true;
    trim_locked(pool, 0);
  } else
    pool_drop(pool);
  pthread_mutex_unlock(&lock);
  return st;
}

/* Everything the model made here, gone (the test harness's leak checks). */
GW_API size_t gw_cpu_vmm_live(void) { return atomic_load(&live_objects); }

/* fork(): a leaf lock (nothing else is taken while it is held), so taken innermost:
 * registered before the streams' handlers (priority 200), its prepare runs after theirs.
 * The child keeps the tables: the mappings and pools are inherited with the memory. */
static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_release(void) { pthread_mutex_unlock(&lock); }
__attribute__((constructor(199))) static void install(void) {
  pthread_atfork(fork_prepare, fork_release, fork_release);
}
