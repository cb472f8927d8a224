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
 *   - neither exports through legacy IPC (IS_LEGACY_CUDA_IPC_CAPABLE = 0). A pool made with
 *     GW_CPU_HANDLE_POSIX_FD is IPC-capable, as cudaMemPoolCreate's with handleTypes =
 *     cudaMemHandleTypePosixFileDescriptor: its memory is a memfd ("gw-cpu-pool-<id>": a
 *     header page set, then the pool's bytes) that the pool keeps open while it lives
 *     (cudaMemPoolExportToShareableHandle gives that descriptor), an allocation's 64 bytes
 *     of export data name the pool, the offset, size and the allocation's serial
 *     (cudaMemPoolExportPointer), and the header holds, per page, the serial of the live
 *     allocation starting there, so that an import of a freed allocation is refused
 *     (cudaMemPoolImportPointer: invalid value). An importer maps the pool once
 *     (cudaMemPoolImportFromShareableHandle, given a descriptor of its own: the core takes
 *     it with pidfd_getfd) and each pointer is that mapping plus its offset, device memory
 *     of the model until freed. IPC pools never give memory back (trim is a no-op on them,
 *     as on CUDA's export pools). Other pools, VMM memory, are refused naming how to
 *     allocate the memory shareable (handle_types at creation).
 *   - VMM chunks made with GW_CPU_HANDLE_POSIX_FD export as cuMemExportToShareableHandle
 *     does: the chunk's memfd ("gw-cpu-vmm-<id>", open while the chunk lives) is its
 *     descriptor; the chunks covering an array (at most GW__IPC_VMM_MAX_CHUNKS) are
 *     imported by mapping each taken descriptor back to back in a PROT_NONE reservation
 *     (cuMemImportFromShareableHandle + cuMemAddressReserve + cuMemMap + cuMemSetAccess),
 *     adopted as device memory until closed; a descriptor whose memfd is not the named
 *     chunk (id, size) is refused (stale).
 *
 * Tables: few entries, unsorted, guarded by one leaf mutex; live_objects lets the model's
 * query of pageable memory skip the lock when nothing here exists.
 */
#include "codec.h"
#include "cpu_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct gw_cpu_vmm_chunk_s {
  int fd;
  size_t bytes;
  int device;
  unsigned handle_types;
  int refs;    /* the creator's (until gw_cpu_vmm_release) and one per mapping; lock */
  uint64_t id; /* never reused in the process; the memfd is named "gw-cpu-vmm-<id>" */
};
static uint64_t chunk_ids; /* lock */

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
  uint64_t serial;   /* IPC pools: the allocation's serial (in the header too) */
} palloc;

/* An IPC pool's memfd header (page multiples, before the pool's bytes): these words, then
 * one per pool page: the serial of the live allocation starting there, 0 if none. */
enum { HDR_MAGIC, HDR_BYTES, HDR_POOL_ID, HDR_PAGES };
#define POOL_MAGIC 0x4c4f4f5055504347ull /* "GCPUPOOL" */
#define POOL_PREFIX "gw-cpu-pool-"

struct gw_cpu_pool_s {
  uintptr_t base;
  size_t bytes; /* reserved */
  int device;
  unsigned handle_types;
  bool is_default, destroyed;
  unsigned char *backed; /* per page: 1 = read-write */
  int fd;                /* IPC pools: the memfd (the shareable handle), else -1 */
  uint64_t id;           /* IPC pools: never reused in the process */
  uint64_t *hdr;         /* IPC pools: the header, mapped read-write */
  size_t hdr_bytes;
  palloc *live; /* sorted by off */
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
    snprintf(buf, n, "VMM memory (cuMemCreate + cuMemMap) is not legacy-IPC capable%s",
             (m->chunk->handle_types & GW_CPU_HANDLE_POSIX_FD)
                 ? ""
                 : "; this chunk has no shareable handle type: allocate it with cuMemCreate "
                   "and requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR "
                   "(model: gw_cpu_vmm_create with GW_CPU_HANDLE_POSIX_FD) so that it can be "
                   "shared");
  else if (pl && !(pl->handle_types & GW_CPU_HANDLE_POSIX_FD))
    snprintf(buf, n,
             "stream-ordered pool memory (cudaMallocAsync / cudaMallocFromPoolAsync) is not "
             "legacy-IPC capable, and %s",
             pl->is_default
                 ? "a device's default pool has no shareable handle type: allocate "
                   "from a pool made by cudaMemPoolCreate with handleTypes = "
                   "cudaMemHandleTypePosixFileDescriptor (model: gw_cpu_pool_create "
                   "with GW_CPU_HANDLE_POSIX_FD) so that it can be shared"
                 : "this pool has no shareable handle type: create it with "
                   "cudaMemPoolCreate and handleTypes = "
                   "cudaMemHandleTypePosixFileDescriptor (model: gw_cpu_pool_create with "
                   "GW_CPU_HANDLE_POSIX_FD) so that it can be shared");
  else
    pl = NULL; /* an IPC pool's memory: gw__cpu_pool_export's */
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
  pthread_mutex_lock(&lock);
  c->id = ++chunk_ids;
  pthread_mutex_unlock(&lock);
  char name[48];
  snprintf(name, sizeof name, "gw-cpu-vmm-%" PRIu64, c->id);
  c->fd = gw__cpu_shm_create(name, bytes, &p);
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

static size_t hdr_bytes_of(size_t bytes) {
  size_t pg = page();
  return ((HDR_PAGES + bytes / pg) * sizeof(uint64_t) + pg - 1) / pg * pg;
}

static uint64_t pool_ids; /* lock */

/* An IPC pool's memory: a memfd of header + bytes, the header mapped read-write at *hdr,
 * the pool's bytes PROT_NONE at *p (pages opened as allocations need them). */
static int ipc_pool_memory(size_t bytes, uint64_t id, uint64_t **hdr, size_t *hdr_len, void **p) {
  char name[64];
  snprintf(name, sizeof name, POOL_PREFIX "%" PRIu64, id);
  size_t hb = hdr_bytes_of(bytes);
  void *h = NULL;
  int fd = gw__cpu_shm_create(name, hb + bytes, &h);
  if (fd < 0) return -1;
  (void)munmap(h, hb + bytes);
  h = mmap(NULL, hb, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  void *d = h == MAP_FAILED ? MAP_FAILED : mmap(NULL, bytes, PROT_NONE, MAP_SHARED, fd, (off_t)hb);
  if (d == MAP_FAILED) {
    if (h != MAP_FAILED) munmap(h, hb);
    close(fd);
    return -1;
  }
  *hdr = h;
  (*hdr)[HDR_MAGIC] = POOL_MAGIC;
  (*hdr)[HDR_BYTES] = bytes;
  (*hdr)[HDR_POOL_ID] = id;
  *hdr_len = hb;
  *p = d;
  return fd;
}

static gw_status pool_make(const char *who, int device, size_t bytes, unsigned handle_types,
                           bool is_default, gw_cpu_pool *out) {
  gw_cpu_pool pl = calloc(1, sizeof *pl);
  unsigned char *backed = calloc(bytes / page(), 1);
  void *p = MAP_FAILED;
  uint64_t *hdr = NULL;
  size_t hb = 0;
  int fd = -1;
  uint64_t id = 0;
  if (pl && backed && (handle_types & GW_CPU_HANDLE_POSIX_FD)) {
    id = ++pool_ids;
    fd = ipc_pool_memory(bytes, id, &hdr, &hb, &p);
  } else if (pl && backed) {
    p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  if (p == MAP_FAILED || !gw__cpu_grow((void **)&pools, npools, &cap_pools, sizeof *pools)) {
    if (p != MAP_FAILED) munmap(p, bytes);
    if (hdr) munmap(hdr, hb);
    if (fd >= 0) close(fd);
    free(backed);
    free(pl);
    return gw__fail(GW_ENOMEM, "%s: cannot reserve a pool of %zu bytes", who, bytes);
  }
  *pl = (struct gw_cpu_pool_s){.base = (uintptr_t)p,
                               .bytes = bytes,
                               .device = device,
                               .handle_types = handle_types,
                               .is_default = is_default,
                               .backed = backed,
                               .fd = fd,
                               .id = id,
                               .hdr = hdr,
                               .hdr_bytes = hb};
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
  if (pl->hdr) munmap(pl->hdr, pl->hdr_bytes);
  if (pl->fd >= 0) close(pl->fd);
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
    static uint64_t alloc_serials; /* lock */
    pool->live[i] = (palloc){off, need, ++alloc_serials};
    if (pool->hdr) pool->hdr[HDR_PAGES + off / pg] = pool->live[i].serial;
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
    if (pl->hdr) pl->hdr[HDR_PAGES + pl->live[i].off / page()] = 0;
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
  if (pool->fd >= 0) return; /* an IPC pool never gives memory back (CUDA's export pools) */
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

/* ---- IPC of pool memory (cpu_ipc.c asks; the core's table opens each once) ---- */

#define PTR_MAGIC "GWCPUPL"
enum { PD_POOL_ID = 8, PD_OFF = 16, PD_BYTES = 24, PD_SERIAL = 32, PD_END = 40 };
_Static_assert(PD_END <= GW__IPC_RT_BYTES, "the export data fits the runtime's bytes");

bool gw__cpu_pool_export(void *base, unsigned char rt[GW__IPC_RT_BYTES], uint64_t *alloc_id,
                         gw__ipc_share *sh, gw_status *st) {
  if (atomic_load_explicit(&live_objects, memory_order_relaxed) == 0) return false;
  uintptr_t p = (uintptr_t)base;
  pthread_mutex_lock(&lock);
  gw_cpu_pool pl = map_at(p) ? NULL : pool_at(p);
  if (!pl || pl->fd < 0) {
    pthread_mutex_unlock(&lock);
    return false; /* not an IPC pool's: the refusal says what it is */
  }
  const palloc *a = live_at(pl, p - pl->base);
  if (!a || pl->base + a->off != p) {
    pthread_mutex_unlock(&lock);
    *st = gw__fail(GW_EINVAL,
                   "model cudaMemPoolExportPointer(%p): not the base of a live allocation of "
                   "its pool (invalid value)",
                   base);
    return true;
  }
  memset(rt, 0, GW__IPC_RT_BYTES);
  memcpy(rt, PTR_MAGIC, 8);
  gw__put_le64(rt + PD_POOL_ID, pl->id);
  gw__put_le64(rt + PD_OFF, a->off);
  gw__put_le64(rt + PD_BYTES, a->bytes);
  gw__put_le64(rt + PD_SERIAL, a->serial);
  *alloc_id = a->serial;
  *sh = (gw__ipc_share){.kind = GW__IPC_POOL, .fd = pl->fd, .pool_id = pl->id};
  pthread_mutex_unlock(&lock);
  *st = GW_OK;
  return true;
}

/* A pool of another process mapped here, and the pointers imported from it. */
typedef struct {
  int device;
  uint64_t id;
  char *base; /* the pool's bytes */
  size_t bytes;
  uint64_t *hdr; /* read-only */
  size_t hdr_bytes;
  long ptrs;     /* lock */
  bool released; /* destroyed with pointers left: goes with the last (lock) */
} imported_pool;

/* Unmap an imported pool (no pointer left, lock not needed). */
static void imported_pool_drop(imported_pool *ip) {
  munmap(ip->base, ip->bytes);
  munmap(ip->hdr, ip->hdr_bytes);
  free(ip);
}

typedef struct {
  uintptr_t at;
  imported_pool *pool;
} imported_ptr;

/* Imported VMM ranges of this process: reservation and size. */
typedef struct {
  uintptr_t base;
  size_t bytes;
} imported_vmm;
static imported_vmm *ivmm; /* lock */
static size_t nivmm, cap_ivmm;

static imported_ptr *iptrs; /* lock */
static size_t niptrs, cap_iptrs, nipools;

gw_status gw__cpu_pool_import(int fd, int device, void **out) {
  const char *who = "model cudaMemPoolImportFromShareableHandle";
  char path[64], link[128];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, link, sizeof link - 1);
  if (n < 0)
    return gw__fail(GW_EINVAL, "%s: descriptor %d: %s (invalid value)", who, fd, strerror(errno));
  link[n] = '\0';
  uint64_t id = 0;
  if (sscanf(link, "/memfd:" POOL_PREFIX "%" SCNu64, &id) != 1 || id == 0)
    return gw__fail(GW_EINVAL,
                    "%s: descriptor %d is %s, not a pool's shareable handle (invalid value)", who,
                    fd, link);
  size_t pg = page();
  uint64_t *first = mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, 0);
  if (first == MAP_FAILED) return gw__fail(GW_EBACKEND, "%s: mmap: %s", who, strerror(errno));
  uint64_t magic = first[HDR_MAGIC], bytes = first[HDR_BYTES], hid = first[HDR_POOL_ID];
  munmap(first, pg);
  if (magic != POOL_MAGIC || hid != id || bytes == 0 || bytes % pg)
    return gw__fail(GW_EINVAL, "%s: descriptor %d: not a pool of the model (invalid value)", who,
                    fd);
  imported_pool *ip = calloc(1, sizeof *ip);
  if (!ip) return gw__fail(GW_ENOMEM, "%s: out of host memory", who);
  ip->hdr_bytes = hdr_bytes_of((size_t)bytes);
  ip->hdr = mmap(NULL, ip->hdr_bytes, PROT_READ, MAP_SHARED, fd, 0);
  void *d = ip->hdr == MAP_FAILED ? MAP_FAILED
                                  : mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                                         fd, (off_t)ip->hdr_bytes);
  if (d == MAP_FAILED) {
    int e = errno;
    if (ip->hdr != MAP_FAILED) munmap(ip->hdr, ip->hdr_bytes);
    free(ip);
    return gw__fail(GW_ENOMEM, "%s: mmap: %s", who, strerror(e));
  }
  ip->device = device;
  ip->id = id;
  ip->base = d;
  ip->bytes = (size_t)bytes;
  pthread_mutex_lock(&lock);
  nipools++;
  pthread_mutex_unlock(&lock);
  *out = ip;
  return GW_OK;
}

gw_status gw__cpu_pool_import_pointer(void *pool, const unsigned char rt[GW__IPC_RT_BYTES],
                                      int device, size_t extent, void **out) {
  const char *who = "model cudaMemPoolImportPointer";
  imported_pool *ip = pool;
  uint64_t id = gw__get_le64(rt + PD_POOL_ID), off = gw__get_le64(rt + PD_OFF),
           bytes = gw__get_le64(rt + PD_BYTES), serial = gw__get_le64(rt + PD_SERIAL);
  size_t pg = page();
  if (memcmp(rt, PTR_MAGIC, 8) != 0 || id != ip->id || off % pg || bytes == 0 || off > ip->bytes ||
      bytes > ip->bytes - off || extent > bytes || device != ip->device)
    return gw__fail(GW_EINVAL, "%s: export data of another pool or device (invalid value)", who);
  /* The exporter's header: a freed allocation's page no longer holds its serial. */
  if (atomic_load((_Atomic uint64_t *)&ip->hdr[HDR_PAGES + off / pg]) != serial)
    return gw__fail(GW_EBACKEND,
                    "%s: allocation %" PRIu64 " of the exporting process's pool was freed "
                    "(a stale handle; invalid value)",
                    who, serial);
  char *p = ip->base + off;
  gw_status st = GW_OK;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < niptrs && st == GW_OK; i++)
    if (iptrs[i].at == (uintptr_t)p)
      st = gw__fail(GW_EBACKEND, "%s: allocation %" PRIu64 " is imported already (invalid value)",
                    who, serial);
  if (st == GW_OK && !gw__cpu_grow((void **)&iptrs, niptrs, &cap_iptrs, sizeof *iptrs))
    st = gw__fail(GW_ENOMEM, "%s: out of host memory", who);
  pthread_mutex_unlock(&lock);
  if (st != GW_OK) return st;
  st = gw__cpu_model_adopt(who, device, p, (size_t)bytes);
  if (st != GW_OK) return st;
  pthread_mutex_lock(&lock);
  iptrs[niptrs++] = (imported_ptr){(uintptr_t)p, ip}; /* room was made; only opens add */
  ip->ptrs++;
  pthread_mutex_unlock(&lock);
  *out = p;
  return GW_OK;
}

gw_status gw__cpu_pool_free_imported(void *pool, void *ptr) {
  pthread_mutex_lock(&lock);
  size_t i = 0;
  while (i < niptrs && (iptrs[i].at != (uintptr_t)ptr || iptrs[i].pool != pool)) i++;
  if (i == niptrs) {
    pthread_mutex_unlock(&lock);
    return gw__fail(GW_EINVAL,
                    "model cudaFree(%p): not a pointer cudaMemPoolImportPointer gave (invalid "
                    "value)",
                    ptr);
  }
  iptrs[i] = iptrs[--niptrs];
  imported_pool *ip = pool;
  bool last = --ip->ptrs == 0 && ip->released;
  if (last) nipools--;
  pthread_mutex_unlock(&lock);
  gw_status st = gw__cpu_model_unadopt("model cudaFree", ptr);
  if (last) imported_pool_drop(ip);
  return st;
}

gw_status gw__cpu_pool_release_imported(void *pool) {
  /* As cudaMemPoolDestroy: pointers not yet freed keep the pool until they are. */
  imported_pool *ip = pool;
  pthread_mutex_lock(&lock);
  bool now = ip->ptrs == 0;
  if (now)
    nipools--;
  else
    ip->released = true;
  pthread_mutex_unlock(&lock);
  if (now) imported_pool_drop(ip);
  return GW_OK;
}

GW_API size_t gw_cpu_ipc_pool_mappings(void) {
  pthread_mutex_lock(&lock);
  size_t n = nipools + niptrs + nivmm;
  pthread_mutex_unlock(&lock);
  return n;
}

/* ---- IPC of VMM memory ---- */

bool gw__cpu_vmm_export(uintptr_t lo, uintptr_t hi, uint64_t *alloc_id, gw__ipc_share *sh,
                        gw_status *st) {
  const char *who = "model cuMemExportToShareableHandle";
  if (atomic_load_explicit(&live_objects, memory_order_relaxed) == 0) return false;
  pthread_mutex_lock(&lock);
  const vmap *m = map_at(lo);
  if (!m) {
    pthread_mutex_unlock(&lock);
    return false;
  }
  /* The chunks covering [lo, hi), mapped back to back (what the query's extent promised). */
  int n = 0;
  uintptr_t at = m->at;
  sh->span_base = m->at;
  *st = GW_OK;
  while (*st == GW_OK && at < hi) {
    const vmap *c = map_at(at);
    if (!c || c->at != at)
      *st = gw__fail(GW_EINVAL, "%s: %p: no chunk mapped there (invalid value)", who, (void *)at);
    else if (!(c->chunk->handle_types & GW_CPU_HANDLE_POSIX_FD))
      *st = gw__fail(GW_ENOTSUP,
                     "%s: chunk %d of the array's span, [%p, +%zu), has no shareable handle "
                     "type: allocate it with cuMemCreate and requestedHandleTypes = "
                     "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (model: gw_cpu_vmm_create with "
                     "GW_CPU_HANDLE_POSIX_FD) so that it can be shared",
                     who, n, (void *)c->at, c->bytes);
    else if (n == GW__IPC_VMM_MAX_CHUNKS)
      *st = gw__fail(GW_ENOTSUP,
                     "%s: the array's bytes [%p, %p) span more than %d chunks, which a handle's "
                     "manifest cannot list; export a smaller view (or map larger chunks)",
                     who, (void *)lo, (void *)hi, GW__IPC_VMM_MAX_CHUNKS);
    else if ((c->bytes & 4095) != 0)
      *st =
          gw__fail(GW_ENOTSUP, "%s: chunk of %zu bytes is not a multiple of 4 KiB", who, c->bytes);
    else {
      /* The chunk's memfd is its shareable descriptor, open while the chunk lives. */
      sh->chunk_fd[n] = c->chunk->fd;
      sh->chunk_bytes[n] = c->bytes;
      if (n == 0) sh->pool_id = c->chunk->id;
      n++;
      at += c->bytes;
    }
  }
  pthread_mutex_unlock(&lock);
  if (*st == GW_OK) {
    sh->kind = GW__IPC_VMM;
    sh->nchunks = n;
    *alloc_id = sh->pool_id;
  }
  return true;
}

gw_status gw__cpu_vmm_import(int device, int n, const int *fds, const uint64_t *bytes, uint64_t id,
                             void **out) {
  const char *who = "model cuMemImportFromShareableHandle";
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    /* The descriptor must be the chunk the handle names: a chunk's memfd carries its id
     * (the first) and its size (all); a descriptor number reused by other memory is
     * refused (stale handle). */
    char path[64], link[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[i]);
    ssize_t len = readlink(path, link, sizeof link - 1);
    if (len < 0)
      return gw__fail(GW_EINVAL, "%s: descriptor %d: %s (invalid value)", who, fds[i],
                      strerror(errno));
    link[len] = '\0';
    uint64_t cid = 0;
    struct stat stt;
    if (sscanf(link, "/memfd:gw-cpu-vmm-%" SCNu64, &cid) != 1 || (i == 0 && cid != id) ||
        fstat(fds[i], &stt) != 0 || (uint64_t)stt.st_size != bytes[i])
      return gw__fail(GW_EBACKEND,
                      "%s: chunk %d: the exporter's descriptor is now %s, not the chunk the "
                      "handle names (released, its descriptor number reused: a stale handle)",
                      who, i, link);
    total += (size_t)bytes[i];
  }
  gw_status st = GW_OK;
  pthread_mutex_lock(&lock);
  if (!gw__cpu_grow((void **)&ivmm, nivmm, &cap_ivmm, sizeof *ivmm))
    st = gw__fail(GW_ENOMEM, "%s: out of host memory", who);
  pthread_mutex_unlock(&lock);
  if (st != GW_OK) return st;
  char *base = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED)
    return gw__fail(GW_ENOMEM, "model cuMemAddressReserve(%zu): %s", total, strerror(errno));
  size_t off = 0;
  for (int i = 0; i < n && st == GW_OK; i++) {
    if (mmap(base + off, (size_t)bytes[i], PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fds[i],
             0) == MAP_FAILED)
      st = gw__fail(GW_ENOMEM, "model cuMemMap: %s", strerror(errno));
    off += (size_t)bytes[i];
  }
  if (st == GW_OK) st = gw__cpu_model_adopt("model cuMemSetAccess", device, base, total);
  if (st != GW_OK) {
    munmap(base, total);
    return st;
  }
  pthread_mutex_lock(&lock);
  ivmm[nivmm++] = (imported_vmm){(uintptr_t)base, total};
  pthread_mutex_unlock(&lock);
  *out = base;
  return GW_OK;
}

gw_status gw__cpu_vmm_close_imported(void *base, size_t total) {
  pthread_mutex_lock(&lock);
  size_t i = 0;
  while (i < nivmm && (ivmm[i].base != (uintptr_t)base || ivmm[i].bytes != total)) i++;
  bool found = i < nivmm;
  if (found) ivmm[i] = ivmm[--nivmm];
  pthread_mutex_unlock(&lock);
  if (!found)
    return gw__fail(GW_EINVAL, "model cuMemUnmap(%p, %zu): not an imported VMM range", base, total);
  gw_status st = gw__cpu_model_unadopt("model cuMemUnmap", base);
  munmap(base, total);
  return st;
}

/* Everything the model made here, gone (the test harness's leak checks). */
GW_API size_t gw_cpu_vmm_live(void) { return atomic_load(&live_objects); }

/* fork(): a leaf lock (nothing else is taken while it is held), so taken innermost:
 * registered before the streams' handlers (priority 200), its prepare runs after theirs.
 * The child keeps the tables: the mappings and pools are inherited with the memory. */
static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_release(void) { pthread_mutex_unlock(&lock); }
/* The child forgets the pools and pointers it inherited imported, as the core's table
 * does (gw__ipc_child): they stay mapped for the arrays that hold them, and a new open maps
 * anew. */
static void fork_child(void) {
  niptrs = 0;
  nivmm = 0;
  nipools = 0;
  pthread_mutex_unlock(&lock);
}
__attribute__((constructor(199))) static void install(void) {
  pthread_atfork(fork_prepare, fork_release, fork_child);
}
