/*
 * Memory from another process on CUDA and HIP (one source, through the shim): the
 * runtime's legacy IPC. The core (src/core/ipc.c) hands over allocation bases only, opens
 * each allocation once per process and never opens a handle in the process that made it
 * (the runtimes refuse both).
 *
 * Memory of a stream-ordered pool with a POSIX file descriptor handle type (found by
 * ipc_pool: the pointer's MEMPOOL_HANDLE and ALLOWED_HANDLE_TYPES attributes) is shared
 * through its pool: the pool's descriptor (MemPoolExportToShareableHandle), made once per
 * pool and kept open for the life of the process so that importers can take it with
 * pidfd_getfd (the core's call), and each allocation's 64 bytes of export data
 * (MemPoolExportPointer). The importer imports the pool once (MemPoolImportFromShareable-
 * Handle; the core's table), each pointer (MemPoolImportPointer), frees it and destroys
 * the pool after its last.
 *
 * Legacy IPC cannot export other pool memory or VMM memory; they fail with GW_ENOTSUP
 * naming why: on CUDA found before the call from the pointer's attributes
 * (IS_LEGACY_CUDA_IPC_CAPABLE, MEMPOOL_HANDLE, ALLOWED_HANDLE_TYPES), on HIP from the
 * runtime's refusal (invalid value), each message saying how to allocate the memory
 * shareable (a POSIX file descriptor handle type at creation).
 *
 * VMM memory with a POSIX file descriptor handle type (vmm_chunk) is shared chunk by
 * chunk: the chunks covering the array, one descriptor each (MemRetainAllocationHandle +
 * MemExportToShareableHandle, kept open: chunk_fd), at most GW__IPC_VMM_MAX_CHUNKS; the
 * importer (gwg_ipc_vmm_open, given descriptors the core took with pidfd_getfd) imports,
 * reserves, maps and sets access; gwg_ipc_vmm_close synchronizes, unmaps, frees the range.
 *
 * One source for CUDA and HIP: the vendor shim names the driver-level calls (cu* / hip*),
 * ROCm 5.2 declares all of them. On HIP this is compiled, never run on AMD hardware
 * (docs/IPC.md says so).
 */
#include "gpu_internal.h"
#include "vec.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The pool of ptr when it is one whose memory can be shared (MEMPOOL_HANDLE set and a
 * POSIX fd among its ALLOWED_HANDLE_TYPES), else NULL. */
static gwv_mempool ipc_pool(const void *ptr) {
  void *pool = NULL;
  unsigned long long types = 0;
  if (gwv_PointerGetAttribute(&pool, GWV_PA_MEMPOOL_HANDLE, ptr) != GWV_DRV_SUCCESS || !pool ||
      gwv_PointerGetAttribute(&types, GWV_PA_ALLOWED_HANDLE_TYPES, ptr) != GWV_DRV_SUCCESS ||
      !(types & (unsigned long long)GWV_MEM_HANDLE_POSIX_FD)) {
    gwv_drv_clear();
    return NULL;
  }
  return (gwv_mempool)pool;
}

_Static_assert(sizeof(gwv_pool_ptr_data) <= GW__IPC_RT_BYTES,
               "a pool pointer's export data must fit gw_ipc_handle's 64 bytes for it");

/* The pools this process exported: their descriptors, kept open for the life of the
 * process (an importer may take one at any time; a pool's memory is never given back while
 * it is exported anyway). A pool destroyed and another made at the same handle would be
 * served the old descriptor: its pointers' import then fails in the importer (the export
 * data names the new pool), never maps the wrong memory. */
typedef struct {
  gwv_mempool pool;
  int fd;
  uint64_t id;
} exported_pool;
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static exported_pool *pools; /* pools_lock */
static size_t npools, cap_pools;
static uint64_t pool_ids; /* pools_lock */

/* The descriptor and id of pool, exported now if it was not yet. device current. */
static gw_status pool_fd(gwv_mempool pool, int *fd, uint64_t *id) {
  gw_status s = GW_OK;
  pthread_mutex_lock(&pools_lock);
  size_t i = 0;
  while (i < npools && pools[i].pool != pool) i++;
  if (i == npools) {
    int f = -1;
    gwv_err e = gwv_MemPoolExportToShareableHandle(&f, pool, GWV_HANDLE_POSIX_FD, 0);
    if (e != GWV_SUCCESS) {
      s = gwg_fail(e, GWV_CALL("MemPoolExportToShareableHandle(PosixFileDescriptor)"));
    } else {
      exported_pool *grown = gw__vec_room(pools, npools, &cap_pools, sizeof *pools);
      if (!grown) {
        close(f);
        s = gwg_host->fail(GW_ENOMEM, "gw_ipc_export: out of host memory");
      } else {
        pools = grown;
      }
    }
    if (s == GW_OK) pools[npools++] = (exported_pool){pool, f, ++pool_ids};
  }
  if (s == GW_OK) {
    *fd = pools[i].fd;
    *id = pools[i].id;
  }
  pthread_mutex_unlock(&pools_lock);
  return s;
}

static gw_status pool_export(gwv_mempool pool, void *base, int device,
                             unsigned char rt[GW__IPC_RT_BYTES], uint64_t *alloc_id,
                             gw__ipc_share *sh) {
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  int fd = -1;
  uint64_t id = 0;
  s = pool_fd(pool, &fd, &id);
  gwv_pool_ptr_data data;
  memset(&data, 0, sizeof data);
  if (s == GW_OK) {
    gwv_err e = gwv_MemPoolExportPointer(&data, base);
    if (e != GWV_SUCCESS) s = gwg_fail(e, GWV_CALL("MemPoolExportPointer(%p)"), base);
  }
  gwg_leave(prev);
  if (s != GW_OK) return s;
  memset(rt, 0, GW__IPC_RT_BYTES);
  memcpy(rt, &data, sizeof data);
  *alloc_id = gwv_buffer_id(base);
  *sh = (gw__ipc_share){.kind = GW__IPC_POOL, .fd = fd, .pool_id = id};
  return GW_OK;
}

_Static_assert(sizeof(gwv_ipc_handle) <= GW__IPC_RT_BYTES,
               "the runtime's IPC handle must fit gw_ipc_handle's 64 bytes for it");

/* Whether ptr is VMM memory whose chunk can be exported as a POSIX descriptor: its chunk
 * [*base, +*size) and buffer id (0 where the runtime gives none). 0 when it is not VMM
 * memory (MemRetainAllocationHandle refuses a plain allocation's) or its properties cannot
 * be read; *shareable 0 when it has no such handle type. */
static int vmm_chunk(uintptr_t ptr, uintptr_t *base, size_t *size, uint64_t *id, int *shareable) {
  gwv_mem_handle h;
  if (gwv_MemRetainAllocationHandle(&h, (void *)ptr) != GWV_DRV_SUCCESS) {
    gwv_drv_clear();
    return 0;
  }
  gwv_mem_prop prop;
  memset(&prop, 0, sizeof prop);
  int ok = gwv_MemGetAllocationPropertiesFromHandle(&prop, h) == GWV_DRV_SUCCESS;
  (void)gwv_MemRelease(h); /* the retain only */
  gwv_devptr b = 0;
  size_t n = 0;
  if (!ok || gwv_MemGetAddressRange(&b, &n, (gwv_devptr)ptr) != GWV_DRV_SUCCESS) {
    gwv_drv_clear();
    return 0;
  }
  *base = (uintptr_t)b;
  *size = n;
  *id = gwv_buffer_id((void *)ptr);
  *shareable = ((unsigned)GWV_PROP_HANDLE_TYPES(prop) & (unsigned)GWV_MEM_HANDLE_POSIX_FD) != 0;
  return 1;
}

/* The chunk at ptr as a new POSIX descriptor (retain + export; the retain is dropped, the
 * descriptor keeps the memory). 0 or the driver's code, *call naming the call. */
static int vmm_export_fd(uintptr_t ptr, int *fd, const char **call) {
  gwv_mem_handle h;
  int r = (int)gwv_MemRetainAllocationHandle(&h, (void *)ptr);
  *call = GWV_DRV("MemRetainAllocationHandle");
  if (r != GWV_DRV_SUCCESS) return r;
  r = (int)gwv_MemExportToShareableHandle(fd, h, GWV_MEM_HANDLE_POSIX_FD, 0);
  *call = GWV_DRV("MemExportToShareableHandle(POSIX file descriptor)");
  (void)gwv_MemRelease(h);
  return r;
}

#define DEVPTR_AT(va, off) ((gwv_devptr)((uintptr_t)(va) + (off)))

/* Import n chunks, reserve their total, map each at its offset, give `device` read-write
 * access (the current device). Each chunk's handle is released once mapped (the mapping
 * holds its own reference, as UCX does), so a close is unmap + address free. On a
 * failure nothing is left. */
static int vmm_import(int device, int n, const int *fds, const uint64_t *bytes, void **out,
                      const char **call) {
  size_t total = 0;
  for (int i = 0; i < n; i++) total += (size_t)bytes[i];
  gwv_devptr va = 0;
  int r = (int)gwv_MemAddressReserve(&va, total, 0, (gwv_devptr)0, 0);
  *call = GWV_DRV("MemAddressReserve");
  if (r != GWV_DRV_SUCCESS) return r;
  size_t off = 0;
  for (int mapped = 0; mapped < n; mapped++) {
    gwv_mem_handle h;
    r = (int)gwv_MemImportFromShareableHandle(&h, (void *)(intptr_t)fds[mapped],
                                              GWV_MEM_HANDLE_POSIX_FD);
    *call = GWV_DRV("MemImportFromShareableHandle");
    if (r != GWV_DRV_SUCCESS) break;
    r = (int)gwv_MemMap(DEVPTR_AT(va, off), (size_t)bytes[mapped], 0, h, 0);
    *call = GWV_DRV("MemMap");
    (void)gwv_MemRelease(h);
    if (r != GWV_DRV_SUCCESS) break;
    off += (size_t)bytes[mapped];
  }
  if (r == GWV_DRV_SUCCESS) {
    gwv_access_desc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = GWV_MEM_LOCATION_DEVICE;
    acc.location.id = device;
    acc.flags = GWV_MEM_ACCESS_RW;
    r = (int)gwv_MemSetAccess(va, total, &acc, 1);
    *call = GWV_DRV("MemSetAccess");
  }
  if (r != GWV_DRV_SUCCESS) {
    if (off) (void)gwv_MemUnmap(va, off);
    (void)gwv_MemAddressFree(va, total);
    return r;
  }
  *out = (void *)(uintptr_t)va;
  return 0;
}

/* Synchronize (a VMM unmap does not wait, unlike a free), unmap, free the range. */
static int vmm_close(void *base, size_t total, const char **call) {
  int r = (int)gwv_CtxSynchronize();
  *call = GWV_CTX_SYNC_NAME;
  if (r == GWV_DRV_SUCCESS) {
    r = (int)gwv_MemUnmap(DEVPTR_AT(base, 0), total);
    *call = GWV_DRV("MemUnmap");
  }
  if (r == GWV_DRV_SUCCESS) {
    r = (int)gwv_MemAddressFree(DEVPTR_AT(base, 0), total);
    *call = GWV_DRV("MemAddressFree");
  }
  return r;
}

/* VMM chunks this process exported: one descriptor per chunk (cuMemExportToShareableHandle),
 * kept open so that importers can take it with pidfd_getfd at any time. The driver does not
 * tell when a chunk is released, so a descriptor stays until the chunk's address is
 * exported again as another allocation (another buffer id: the old descriptor is closed
 * then) or the process ends; meanwhile it pins the chunk's physical memory (docs/IPC.md). */
typedef struct {
  uintptr_t base;
  size_t size;
  uint64_t id;
  int fd;
} exported_chunk;
static exported_chunk *chunks; /* pools_lock */
static size_t nchunks, cap_chunks;

/* The descriptor of the chunk [base, +size) of buffer id, made now if not yet. device
 * current; pools_lock held. */
static gw_status chunk_fd(uintptr_t base, size_t size, uint64_t id, int *fd) {
  for (size_t i = 0; i < nchunks; i++) {
    if (chunks[i].base != base) continue;
    /* id 0: the runtime gives no buffer id (HIP), so a chunk cannot be told from a later
     * one at its address: a new descriptor each export, never one that may be stale */
    if (id && chunks[i].id == id && chunks[i].size == size) {
      *fd = chunks[i].fd;
      return GW_OK;
    }
    close(chunks[i].fd); /* a released chunk's: its address now holds another */
    chunks[i] = chunks[--nchunks];
    break;
  }
  exported_chunk *grown = gw__vec_room(chunks, nchunks, &cap_chunks, sizeof *chunks);
  if (!grown) return gwg_host->fail(GW_ENOMEM, "gw_ipc_export: out of host memory");
  chunks = grown;
  const char *call = "";
  int f = -1, r = vmm_export_fd(base, &f, &call);
  if (r != 0)
    return gwg_host->fail(GW_EBACKEND, "%s of the VMM chunk [%p, +%zu): %s (%s)", call,
                          (void *)base, size, gwv_query_error_name(r), gwv_query_error_text(r));
  chunks[nchunks++] = (exported_chunk){base, size, id, f};
  *fd = f;
  return GW_OK;
}

/* VMM memory: the chunks covering [sh->lo, sh->hi), mapped back to back, each with a POSIX
 * descriptor handle type. 0 when base is not VMM memory (then *st is untouched). */
static int vmm_export(void *base, int device, uint64_t *alloc_id, gw__ipc_share *sh,
                      gw_status *st) {
  uintptr_t cb = 0, lo = sh->lo ? sh->lo : (uintptr_t)base, hi = sh->hi ? sh->hi : lo + 1;
  size_t cs = 0;
  uint64_t id = 0;
  int shareable = 0;
  gwg_prev prev;
  *st = gwg_enter(device, &prev);
  if (*st != GW_OK) return 1;
  if (!vmm_chunk(lo, &cb, &cs, &id, &shareable)) {
    gwg_leave(prev);
    return 0;
  }
  gw__ipc_share out = {.kind = GW__IPC_VMM, .span_base = cb, .pool_id = id};
  uintptr_t at = cb;
  pthread_mutex_lock(&pools_lock);
  while (*st == GW_OK && at < hi) {
    if (at != cb && !vmm_chunk(at, &cb, &cs, &id, &shareable))
      *st = gwg_host->fail(GW_EINVAL, "a: %p: no VMM chunk mapped there", (void *)at);
    else if (cb != at)
      *st = gwg_host->fail(GW_EINVAL, "a: %p: not the start of a VMM chunk", (void *)at);
    else if (!shareable)
      *st = gwg_host->fail(GW_ENOTSUP,
                           "a: chunk %d of the array's span, [%p, +%zu), has no shareable "
                           "handle type: allocate it with cuMemCreate and requestedHandleTypes "
                           "= CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR so that it can be shared",
                           out.nchunks, (void *)cb, cs);
    else if (out.nchunks == GW__IPC_VMM_MAX_CHUNKS)
      *st = gwg_host->fail(
          GW_ENOTSUP,
          "a: the array's bytes [%p, %p) span more than %d VMM chunks, which "
          "a handle's manifest cannot list; export a smaller view (or map larger chunks)",
          (void *)lo, (void *)hi, GW__IPC_VMM_MAX_CHUNKS);
    else if (cs % 4096)
      *st = gwg_host->fail(GW_ENOTSUP, "a: VMM chunk of %zu bytes is not a multiple of 4 KiB", cs);
    else {
      *st = chunk_fd(cb, cs, id, &out.chunk_fd[out.nchunks]);
      out.chunk_bytes[out.nchunks++] = cs;
      at = cb + cs;
    }
  }
  pthread_mutex_unlock(&pools_lock);
  gwg_leave(prev);
  if (*st == GW_OK) {
    out.lo = sh->lo;
    out.hi = sh->hi;
    *sh = out;
    *alloc_id = out.pool_id;
  }
  return 1;
}

gw_status gwg_ipc_vmm_open(void *state, int device, int n, const int *fds, const uint64_t *bytes,
                           uint64_t id, void **base) {
  (void)state;
  (void)id;
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  const char *call = "";
  int r = vmm_import(device, n, fds, bytes, base, &call);
  gwg_leave(prev);
  if (r != 0)
    return gwg_host->fail(GW_EBACKEND,
                          "%s of %d VMM chunks on device %d: %s (%s) (is the exporting "
                          "process alive, its chunks not released?)",
                          call, n, device, gwv_query_error_name(r), gwv_query_error_text(r));
  return GW_OK;
}

gw_status gwg_ipc_vmm_close(void *state, int device, void *base, size_t total) {
  (void)state;
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  const char *call = "";
  int r = vmm_close(base, total, &call);
  gwg_leave(prev);
  return r == 0 ? GW_OK
                : gwg_host->fail(GW_EBACKEND, "%s of the imported VMM range [%p, +%zu): %s", call,
                                 base, total, gwv_query_error_name(r));
}

gw_status gwg_ipc_export(void *state, void *base, size_t extent, int device,
                         unsigned char rt[GW__IPC_RT_BYTES], uint64_t *alloc_id,
                         gw__ipc_share *sh) {
  (void)state;
  (void)extent;
  if (gwv_legacy_ipc_capable(base) != 1) { /* pool or VMM memory, or the driver cannot say */
    gwv_mempool pool = ipc_pool(base);
    if (pool) return pool_export(pool, base, device, rt, alloc_id, sh);
    gw_status vs;
    if (vmm_export(base, device, alloc_id, sh, &vs)) {
      memset(rt, 0, GW__IPC_RT_BYTES);
      return vs;
    }
  }
  const char *why = gwv_ipc_refusal(base);
  if (why) return gwg_host->fail(GW_ENOTSUP, "a: %p: %s", base, why);
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  gwv_ipc_handle h;
  memset(&h, 0, sizeof h);
  gwv_err e = gwv_IpcGetMemHandle(&h, base);
  gwg_leave(prev);
  if (e != GWV_SUCCESS) {
    if (GWV_IS_INVALID_VALUE(e))
      return gwg_fail_as(GW_ENOTSUP, e,
                         GWV_CALL("IpcGetMemHandle(%p)") " refused the allocation: legacy IPC "
                                                         "exports plain device allocations only "
                                                         "(not stream-ordered pool or VMM "
                                                         "memory; allocate those with "
                                                         "a POSIX file descriptor handle type "
                                                         "(a pool created with it, or "
                                                         "MemCreate's requestedHandleTypes) so "
                                                         "that they can be shared)",
                         base);
    return gwg_fail(e, GWV_CALL("IpcGetMemHandle(%p)"), base);
  }
  memset(rt, 0, GW__IPC_RT_BYTES);
  memcpy(rt, &h, sizeof h);
  *alloc_id = gwv_buffer_id(base);
  *sh = (gw__ipc_share){.kind = GW__IPC_LEGACY};
  return GW_OK;
}

gw_status gwg_ipc_pool_import(void *state, int fd, int device, void **pool) {
  (void)state;
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  gwv_mempool p = NULL;
  gwv_err e =
      gwv_MemPoolImportFromShareableHandle(&p, (void *)(intptr_t)fd, GWV_HANDLE_POSIX_FD, 0);
  gwg_leave(prev);
  if (e != GWV_SUCCESS)
    return gwg_fail(e, GWV_CALL("MemPoolImportFromShareableHandle") " on device %d", device);
  *pool = (void *)p;
  return GW_OK;
}

gw_status gwg_ipc_pool_release(void *state, int device, void *pool) {
  (void)state;
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  gwv_err e = gwv_MemPoolDestroy((gwv_mempool)pool);
  gwg_leave(prev);
  return e == GWV_SUCCESS ? GW_OK : gwg_fail(e, GWV_CALL("MemPoolDestroy") " (imported)");
}

/* A pointer of an imported pool: its export data, imported (no wait: the consumer orders
 * its use after the producer's allocating stream, as for the data). */
static gw_status pool_open(const unsigned char rt[GW__IPC_RT_BYTES], int device, void *pool,
                           void **base) {
  gwv_pool_ptr_data data;
  memcpy(&data, rt, sizeof data);
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  void *p = NULL;
  gwv_err e = gwv_MemPoolImportPointer(&p, (gwv_mempool)pool, &data);
  gwg_leave(prev);
  if (e != GWV_SUCCESS)
    return gwg_fail(e,
                    GWV_CALL("MemPoolImportPointer") " on device %d (is the allocation still "
                                                     "live in the exporting process?)",
                    device);
  *base = p;
  return GW_OK;
}

gw_status gwg_ipc_open(void *state, const unsigned char rt[GW__IPC_RT_BYTES], int device,
                       size_t extent, void *pool, void **base) {
  (void)state;
  (void)extent;
  if (pool) return pool_open(rt, device, pool, base);
  gwv_ipc_handle h;
  memcpy(&h, rt, sizeof h);
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  void *p = NULL;
  gwv_err e = gwv_IpcOpenMemHandle(&p, h, GWV_IPC_OPEN_FLAGS);
  gwg_leave(prev);
  if (e != GWV_SUCCESS)
    return gwg_fail(e,
                    GWV_CALL("IpcOpenMemHandle") " on device %d (is the exporting process "
                                                 "alive, and its memory not freed?)",
                    device);
  *base = p;
  return GW_OK;
}

gw_status gwg_ipc_close(void *state, int device, void *pool, void *base) {
  (void)state;
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  /* An imported pool pointer is freed (before the exporter frees it: the importer's
   * arrays are released first, docs/IPC.md); a legacy mapping is closed. */
  gwv_err e = pool ? gwv_Free(base) : gwv_IpcCloseMemHandle(base);
  gwg_leave(prev);
  return e == GWV_SUCCESS ? GW_OK
                          : gwg_fail(e,
                                     pool ? GWV_CALL("Free(%p) (imported pool pointer)")
                                          : GWV_CALL("IpcCloseMemHandle(%p)"),
                                     base);
}

/* The device's UUID without a context on it (cuDeviceGetUuid / hipDeviceGetUuid need
 * none): gw_ipc_open maps a handle's device to this process's ordinal with it. */
gw_status gwg_device_uuid(int device, unsigned char uuid[16]) {
  gwv_device_uuid(device, uuid);
  return GW_OK;
}

/* Interprocess events: made and opened on the context's device. The handle is the
 * runtime's (64 bytes). */
gw_status gwg_ipc_event_create(void *state, void **event, unsigned char rt[GW__IPC_RT_BYTES]) {
  const gwg_ctx *c = state;
  gwg_prev prev;
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) return s;
  gwv_event ev = NULL;
  gwv_ipc_event_handle h;
  memset(&h, 0, sizeof h);
  gwv_err e = gwv_EventCreateWithFlags(&ev, GWV_EVENT_IPC_FLAGS);
  if (e != GWV_SUCCESS) {
    gwg_leave(prev);
    return gwg_fail(e, GWV_CALL("EventCreateWithFlags(Interprocess)") " on device %d", c->device);
  }
  e = gwv_IpcGetEventHandle(&h, ev);
  if (e != GWV_SUCCESS) {
    (void)gwv_EventDestroy(ev);
    gwg_leave(prev);
    return gwg_fail(e, GWV_CALL("IpcGetEventHandle") " on device %d", c->device);
  }
  gwg_leave(prev);
  _Static_assert(sizeof h <= GW__IPC_RT_BYTES, "the runtime's event handle fits");
  memset(rt, 0, GW__IPC_RT_BYTES);
  memcpy(rt, &h, sizeof h);
  *event = (void *)ev;
  return GW_OK;
}

gw_status gwg_ipc_event_open(void *state, const unsigned char rt[GW__IPC_RT_BYTES], void **event) {
  const gwg_ctx *c = state;
  gwv_ipc_event_handle h;
  memcpy(&h, rt, sizeof h);
  gwg_prev prev;
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) return s;
  gwv_event ev = NULL;
  gwv_err e = gwv_IpcOpenEventHandle(&ev, h);
  gwg_leave(prev);
  if (e != GWV_SUCCESS)
    return gwg_fail(e,
                    GWV_CALL("IpcOpenEventHandle") " on device %d (is the process that made "
                                                   "the event alive?)",
                    c->device);
  *event = (void *)ev;
  return GW_OK;
}
