/*
 * bench section "ipc": memory from another process (docs/IPC.md).
 *
 * A peer process, this tool started again with exec (fork is no use: a forked child cannot
 * use the parent's CUDA), allocates device memory of one allocator, exports it and writes
 * the handle to a pipe, then waits for the pipe's other end to close. This process opens it
 * (the parent opens what its child exported: Yama's ptrace_scope 1 lets a parent take its
 * child's descriptors with pidfd_getfd). Three allocators, rows for each:
 *   legacy  gw_alloc (cudaMalloc), version-2 handles;
 *   pool    an allocation of an IPC pool (a POSIX-fd handle type: cuMemPoolCreate on CUDA,
 *           gw_cpu_pool_create on the CPU model), version-3 handles;
 *   vmm     one array over 2 VMM chunks with a POSIX-fd handle type mapped back to back
 *           (cuMemCreate + cuMemMap; gw_cpu_vmm_* on the CPU model).
 *   "... open+release, mapped": gw_ipc_open + gw_release of an allocation this process has
 *     mapped already (another opened array holds it): the import table's look-up alone.
 *     No raw side: a runtime has no "already mapped" open.
 *   "... first open+release": an allocation not mapped yet: the open maps it, the release
 *     closes it. Raw side, timed in alternating rounds with gpuwrap's (paired, so --strict
 *     judges the per-round ratios), the same driver calls made directly on the same handle:
 *       legacy  cuIpcOpenMemHandle + cuIpcCloseMemHandle;
 *       pool    pidfd_open + pidfd_getfd of the pool's descriptor, cuMemPoolImportFrom-
 *               ShareableHandle, close, cuMemPoolImportPointer; cuMemFree + cuMemPoolDestroy
 *               (the driver calls cudaMemPoolImportFromShareableHandle / ...ImportPointer /
 *               cudaFree / cudaMemPoolDestroy make);
 *       vmm     pidfd_open + pidfd_getfd of each chunk's descriptor, cuMemAddressReserve,
 *               cuMemImportFromShareableHandle + cuMemMap + cuMemRelease per chunk,
 *               cuMemSetAccess, close; cuCtxSynchronize + cuMemUnmap + cuMemAddressFree.
 *     The CPU model's runtime calls have no public raw form: there gpuwrap's side alone.
 * The peer is selected by GW_BENCH_IPC_PEER in the environment (backend:device:bytes:kind),
 * handled before main() so that the tool's command line stays as it is.
 */
#include "bench.h"

#include <gpuwrap/cpu_testing.h>

#include <dlfcn.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

extern char **environ;

#define PEER_ENV "GW_BENCH_IPC_PEER"

enum { ALLOC_LEGACY = 0, ALLOC_POOL = 1, ALLOC_VMM = 2 };
static const char *const alloc_name[3] = {"", "pool: ", "vmm: "};

/* ---- the CUDA driver calls (libcuda.so.1, loaded by the plugin already) --------------- */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef void *CUmemoryPool;
typedef void *CUcontext;
/* Layouts and values of cuda.h (stable ABI); the tool includes no CUDA header. */
typedef struct {
  int type, id;
} cu_location;
typedef struct {
  int type, requestedHandleTypes;
  cu_location location;
  void *win32HandleMetaData;
  unsigned char allocFlags[8];
} cu_alloc_prop;
typedef struct {
  int allocType, handleTypes;
  cu_location location;
  void *win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
} cu_pool_props;
typedef struct {
  cu_location location;
  int flags;
} cu_access_desc;
typedef struct {
  unsigned char reserved[64];
} cu_bytes64; /* CUipcMemHandle, CUmemPoolPtrExportData */
enum {
  CU_ALLOC_PINNED = 1,
  CU_HANDLE_POSIX_FD = 1,
  CU_LOCATION_DEVICE = 1,
  CU_ACCESS_READWRITE = 3,
  CU_IPC_LAZY_PEER = 1,
};

#define DRV_FUNCS(X)                                                                               \
  X(cuDeviceGet, "cuDeviceGet", (int *, int))                                                      \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, int))                      \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext))                                               \
  X(cuCtxSynchronize, "cuCtxSynchronize", (void))                                                  \
  X(cuStreamSynchronize, "cuStreamSynchronize", (void *))                                          \
  X(cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2", (CUdeviceptr *, cu_bytes64, unsigned))            \
  X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle", (CUdeviceptr))                                     \
  X(cuMemPoolCreate, "cuMemPoolCreate", (CUmemoryPool *, const cu_pool_props *))                   \
  X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync",                                            \
    (CUdeviceptr *, size_t, CUmemoryPool, void *))                                                 \
  X(cuMemPoolImportFromShareableHandle, "cuMemPoolImportFromShareableHandle",                      \
    (CUmemoryPool *, void *, int, unsigned long long))                                             \
  X(cuMemPoolImportPointer, "cuMemPoolImportPointer", (CUdeviceptr *, CUmemoryPool, cu_bytes64 *)) \
  X(cuMemPoolDestroy, "cuMemPoolDestroy", (CUmemoryPool))                                          \
  X(cuMemFree, "cuMemFree_v2", (CUdeviceptr))                                                      \
  X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity",                                \
    (size_t *, const cu_alloc_prop *, int))                                                        \
  X(cuMemCreate, "cuMemCreate",                                                                    \
    (CUmemGenericAllocationHandle *, size_t, const cu_alloc_prop *, unsigned long long))           \
  X(cuMemRelease, "cuMemRelease", (CUmemGenericAllocationHandle))                                  \
  X(cuMemAddressReserve, "cuMemAddressReserve",                                                    \
    (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))                              \
  X(cuMemAddressFree, "cuMemAddressFree", (CUdeviceptr, size_t))                                   \
  X(cuMemMap, "cuMemMap",                                                                          \
    (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))               \
  X(cuMemUnmap, "cuMemUnmap", (CUdeviceptr, size_t))                                               \
  X(cuMemSetAccess, "cuMemSetAccess", (CUdeviceptr, size_t, const cu_access_desc *, size_t))       \
  X(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle",                              \
    (CUmemGenericAllocationHandle *, void *, int))

static struct {
#define DRV_FIELD(field, sym, params) CUresult(*field) params;
  DRV_FUNCS(DRV_FIELD)
#undef DRV_FIELD
} drv;

/* The driver's entry points, and this thread's context the device's primary one (the
 * context gpuwrap's CUDA backend uses). 0 when all are there. */
static int drv_load(int device, char *why, size_t n) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(why, n, "libcuda.so.1: %s", dlerror());
    return -1;
  }
  /* Through void **, as raw_cuda.c does: ISO C has no object-to-function pointer cast. The
   * library stays loaded (the plugin holds it anyway). */
#define DRV_LOAD(field, sym, params)                       \
  if (!(*(void **)&drv.field = dlsym(lib, sym))) {         \
    snprintf(why, n, "%s not found in libcuda.so.1", sym); \
    return -1;                                             \
  }
  DRV_FUNCS(DRV_LOAD)
#undef DRV_LOAD
  int d = 0;
  CUcontext c = NULL;
  if (drv.cuDeviceGet(&d, device) || drv.cuDevicePrimaryCtxRetain(&c, d) ||
      drv.cuCtxSetCurrent(c)) {
    snprintf(why, n, "the primary context of device %d", device);
    return -1;
  }
  return 0;
}

static cu_alloc_prop vmm_prop(int device) {
  cu_alloc_prop p;
  memset(&p, 0, sizeof p);
  p.type = CU_ALLOC_PINNED;
  p.requestedHandleTypes = CU_HANDLE_POSIX_FD;
  p.location = (cu_location){CU_LOCATION_DEVICE, device};
  return p;
}

/* ---- the peer: export one allocation on stdout, hold it until stdin closes ---------------- */

/* Device memory of `kind`, at least `bytes`, in *p (*size its bytes). 0 on success. */
static int peer_alloc(int backend, int device, int kind, size_t bytes, void **p, size_t *size) {
  if (backend == GW_BACKEND_CPU) {
    size_t g = gw_cpu_vmm_granularity(), cs = (bytes / 2 + g - 1) / g * g;
    if (kind == ALLOC_POOL) {
      gw_cpu_pool pool;
      *size = bytes;
      return gw_cpu_pool_create(device, (bytes + g - 1) / g * g + 16 * g, GW_CPU_HANDLE_POSIX_FD,
                                &pool) != GW_OK ||
             gw_cpu_pool_alloc(pool, bytes, p) != GW_OK;
    }
    gw_cpu_vmm_chunk c[2];
    if (gw_cpu_vmm_reserve(2 * cs, p) != GW_OK) return -1;
    for (int i = 0; i < 2; i++)
      if (gw_cpu_vmm_create(device, cs, GW_CPU_HANDLE_POSIX_FD, &c[i]) != GW_OK ||
          gw_cpu_vmm_map((char *)*p + i * cs, cs, c[i]) != GW_OK || gw_cpu_vmm_release(c[i]))
        return -1;
    *size = 2 * cs;
    return 0;
  }
  char why[128];
  if (drv_load(device, why, sizeof why)) return -1;
  CUdeviceptr d = 0;
  if (kind == ALLOC_POOL) {
    cu_pool_props pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_ALLOC_PINNED;
    pp.handleTypes = CU_HANDLE_POSIX_FD;
    pp.location = (cu_location){CU_LOCATION_DEVICE, device};
    CUmemoryPool pool = NULL;
    if (drv.cuMemPoolCreate(&pool, &pp) || drv.cuMemAllocFromPoolAsync(&d, bytes, pool, NULL) ||
        drv.cuStreamSynchronize(NULL))
      return -1;
    *p = (void *)(uintptr_t)d;
    *size = bytes;
    return 0;
  }
  cu_alloc_prop prop = vmm_prop(device);
  size_t g = 0;
  if (drv.cuMemGetAllocationGranularity(&g, &prop, 0 /* MINIMUM */) || !g) return -1;
  size_t cs = (bytes / 2 + g - 1) / g * g;
  if (drv.cuMemAddressReserve(&d, 2 * cs, 0, 0, 0)) return -1;
  for (int i = 0; i < 2; i++) {
    CUmemGenericAllocationHandle h;
    if (drv.cuMemCreate(&h, cs, &prop, 0) || drv.cuMemMap(d + i * cs, cs, 0, h, 0) ||
        drv.cuMemRelease(h))
      return -1;
  }
  cu_access_desc acc = {{CU_LOCATION_DEVICE, device}, CU_ACCESS_READWRITE};
  if (drv.cuMemSetAccess(d, 2 * cs, &acc, 1)) return -1;
  *p = (void *)(uintptr_t)d;
  *size = 2 * cs;
  return 0;
}

__attribute__((constructor)) static void peer_main(void) {
  const char *spec = getenv(PEER_ENV);
  if (!spec) return;
  int backend = 0, device = 0, kind = 0;
  unsigned long long bytes = 0;
  int rc = 1;
  gw_context *ctx = NULL;
  gw_array *a = NULL;
  gw_ipc_handle h;
  int64_t n;
  if (sscanf(spec, "%d:%d:%llu:%d", &backend, &device, &bytes, &kind) != 4) goto out;
  if (gw_context_create((gw_backend)backend, device, &ctx) != GW_OK) goto out;
  if (kind == ALLOC_LEGACY) {
    n = (int64_t)bytes;
    if (gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT8, 1, &n, &a) != GW_OK) goto out;
  } else {
    /* The allocator's memory, wrapped (not owned: the process's end frees it, after the
     * importer closed its mappings) */
    void *p = NULL;
    size_t size = 0;
    if (peer_alloc(backend, device, kind, (size_t)bytes, &p, &size)) goto out;
    n = (int64_t)size;
    if (gw_wrap(ctx, p, GW_UINT8, 1, &n, NULL, 0, &a) != GW_OK) goto out;
  }
  if (gw_ipc_export(a, &h) != GW_OK) goto out;
  if (write(1, h.bytes, sizeof h.bytes) != (ssize_t)sizeof h.bytes) goto out;
  char c;
  while (read(0, &c, 1) > 0) {
  }
  rc = 0;
out:
  gw_bench_release(a);
  gw_context_destroy(ctx);
  _exit(rc);
}

typedef struct {
  pid_t pid;
  int to_peer; /* closing it lets the peer go */
} peer;

static int peer_start(gw_bench *b, size_t bytes, int kind, peer *p, gw_ipc_handle *h) {
  int in[2], out[2];
  if (pipe(in) || pipe(out)) return -1;
  char spec[96];
  snprintf(spec, sizeof spec, PEER_ENV "=%d:%d:%zu:%d", (int)b->backend, b->device, bytes, kind);
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 2, sizeof *env);
  if (!env) return -1;
  memcpy(env, environ, n * sizeof *env);
  env[n] = spec;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  char exe[] = "/proc/self/exe";
  char *argv[] = {exe, NULL};
  int rc = posix_spawn(&p->pid, exe, &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  close(in[0]);
  close(out[1]);
  p->to_peer = in[1];
  size_t got = 0;
  while (rc == 0 && got < sizeof h->bytes) {
    ssize_t r = read(out[0], h->bytes + got, sizeof h->bytes - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(out[0]);
  if (rc == 0 && got == sizeof h->bytes) return 0;
  close(p->to_peer);
  if (rc == 0) waitpid(p->pid, NULL, 0);
  return -1;
}

static void peer_stop(peer *p) {
  close(p->to_peer);
  waitpid(p->pid, NULL, 0);
}

/* ---- the operations timed --------------------------------------------------------------- */

/* Little-endian fields of a handle (docs/IPC.md, "Handle layout"; src/core/ipc_handle.c). */
static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
enum {
  OFF_PID = 13,   /* exporter's pid */
  OFF_RT = 73,    /* the runtime's bytes: IPC handle / pool export data / chunks */
  OFF_SHARE = 240 /* version 3: the pool's descriptor; VMM: the chunk count */
};

typedef struct {
  gw_context *ctx;
  const gw_ipc_handle *h;
  int kind;
} ipc_args;

static int gw_open_release(void *arg) {
  ipc_args *a = arg;
  gw_array *x = NULL;
  if (gw_ipc_open(a->ctx, a->h, &x) != GW_OK) return -1;
  gw_release(x);
  return 0;
}

/* The exporter's descriptors fds[0..n) as this process's, into out. 0 on success. */
static int take_fds(pid_t pid, int n, const int *fds, int *out) {
  int pfd = (int)syscall(SYS_pidfd_open, pid, 0), i = 0;
  if (pfd < 0) return -1;
  for (; i < n; i++)
    if ((out[i] = (int)syscall(SYS_pidfd_getfd, pfd, fds[i], 0)) < 0) break;
  close(pfd);
  if (i == n) return 0;
  while (i-- > 0) close(out[i]);
  return -1;
}

static int raw_legacy(const ipc_args *a) {
  cu_bytes64 rh;
  memcpy(rh.reserved, a->h->bytes + OFF_RT, sizeof rh.reserved);
  CUdeviceptr p = 0;
  if (drv.cuIpcOpenMemHandle(&p, rh, CU_IPC_LAZY_PEER)) return -1;
  return drv.cuIpcCloseMemHandle(p) != 0;
}

static int raw_pool(const ipc_args *a) {
  const unsigned char *hb = a->h->bytes;
  int src = (int)le32(hb + OFF_SHARE), fd = -1;
  if (take_fds((pid_t)le32(hb + OFF_PID), 1, &src, &fd)) return -1;
  CUmemoryPool pool = NULL;
  CUresult r =
      drv.cuMemPoolImportFromShareableHandle(&pool, (void *)(intptr_t)fd, CU_HANDLE_POSIX_FD, 0);
  close(fd);
  if (r) return -1;
  cu_bytes64 data;
  memcpy(data.reserved, hb + OFF_RT, sizeof data.reserved);
  CUdeviceptr p = 0;
  r = drv.cuMemPoolImportPointer(&p, pool, &data);
  if (!r) r = drv.cuMemFree(p);
  return (drv.cuMemPoolDestroy(pool) || r) ? -1 : 0;
}

static int raw_vmm(const ipc_args *a) {
  const unsigned char *hb = a->h->bytes;
  int n = (int)le32(hb + OFF_SHARE), src[8], fds[8];
  size_t bytes[8], total = 0;
  if (n < 1 || n > 8) return -1;
  for (int i = 0; i < n; i++) {
    src[i] = (int)le32(hb + OFF_RT + 8 * i);
    bytes[i] = (size_t)le32(hb + OFF_RT + 8 * i + 4) * 4096;
    total += bytes[i];
  }
  if (take_fds((pid_t)le32(hb + OFF_PID), n, src, fds)) return -1;
  CUdeviceptr va = 0;
  size_t off = 0;
  CUresult r = drv.cuMemAddressReserve(&va, total, 0, 0, 0);
  for (int i = 0; i < n && !r; i++) {
    CUmemGenericAllocationHandle h;
    r = drv.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fds[i], CU_HANDLE_POSIX_FD);
    if (r) break;
    r = drv.cuMemMap(va + off, bytes[i], 0, h, 0);
    (void)drv.cuMemRelease(h);
    if (!r) off += bytes[i];
  }
  if (!r) {
    cu_access_desc acc = {{CU_LOCATION_DEVICE, gw_context_device(a->ctx)}, CU_ACCESS_READWRITE};
    r = drv.cuMemSetAccess(va, total, &acc, 1);
  }
  for (int i = 0; i < n; i++) close(fds[i]);
  if (!r) r = drv.cuCtxSynchronize();
  if (off) r |= drv.cuMemUnmap(va, off);
  if (va) r |= drv.cuMemAddressFree(va, total);
  return r ? -1 : 0;
}

static int raw_open_close(void *arg) {
  const ipc_args *a = arg;
  switch (a->kind) {
  case ALLOC_POOL: return raw_pool(a);
  case ALLOC_VMM: return raw_vmm(a);
  default: return raw_legacy(a);
  }
}

static gw_stat time_loop(gw_bench *b, int reps, int batch, int (*op)(void *), void *arg) {
  double *v = calloc((size_t)reps, sizeof *v);
  gw_stat st = {0};
  if (!v) return st;
  int failed = op(arg) || op(arg); /* warm-up */
  for (int r = 0; r < reps && !failed; r++) {
    double t0 = gw_tool_now();
    for (int k = 0; k < batch && !failed; k++) failed = op(arg);
    v[r] = (gw_tool_now() - t0) / batch;
  }
  if (!failed)
    st = gw_stat_of(v, reps);
  else
    gw_bench_error(b, "ipc: %s", gw_last_error());
  free(v);
  return st;
}

/* gpuwrap's first open and the raw one, a batch of each per round, which goes first
 * alternating round by round: r->gw, r->raw and the per-round ratios r->paired. */
static void time_paired(gw_bench *b, gw_result *r, int reps, int batch, ipc_args *a) {
  double *v = calloc(2 * (size_t)reps, sizeof *v), *raw = v + reps;
  if (!v) return;
  int (*ops[2])(void *) = {gw_open_release, raw_open_close};
  int failed = 0, who = -1;
  for (int k = 0; k < 2 && !failed; k++) /* warm-up */
    for (int s = 0; s < 2 && !failed; s++)
      if ((failed = ops[s](a))) who = s;
  for (int i = 0; i < reps && !failed; i++) {
    for (int j = 0; j < 2 && !failed; j++) {
      int s = (i + j) % 2;
      double t0 = gw_tool_now();
      for (int k = 0; k < batch && !failed; k++)
        if ((failed = ops[s](a))) who = s;
      (s ? raw : v)[i] = (gw_tool_now() - t0) / batch;
    }
  }
  if (failed) {
    gw_bench_error(b, "ipc: %s%s", who ? "the raw import sequence failed" : "gw_ipc_open: ",
                   who ? "" : gw_last_error());
  } else {
    r->paired = gw_paired_of(raw, v, reps, 0);
    r->raw = gw_stat_of(raw, reps);
    r->gw = gw_stat_of(v, reps);
  }
  free(v);
}

static const char *const raw_what[3] = {
    "cuIpcOpenMemHandle + cuIpcCloseMemHandle",
    "pidfd_getfd, cuMemPoolImport{FromShareableHandle,Pointer}, cuMemFree, cuMemPoolDestroy",
    "pidfd_getfd x2, reserve, import+map x2, set access; sync, unmap, free"};

/* The two rows of one allocator. */
static void bench_alloc(gw_bench *b, int kind, size_t bytes, int drv_ok, const char *drv_why) {
  char path[64];
  peer p;
  gw_ipc_handle h;
  if (peer_start(b, bytes, kind, &p, &h) != 0) {
    gw_bench_error(b, "ipc: the exporting peer process (%s) did not start or export",
                   kind == ALLOC_POOL  ? "pool"
                   : kind == ALLOC_VMM ? "vmm"
                                       : "legacy");
    return;
  }
  ipc_args a = {.ctx = b->ctx, .h = &h, .kind = kind};
  int reps = b->quick ? 9 : 31, batch = b->quick ? 200 : 2000;
  gw_bench_progress("ipc: %sopen+release, mapped", alloc_name[kind]);
  gw_array *hold = NULL;
  if (gw_ipc_open(b->ctx, &h, &hold) != GW_OK) {
    gw_bench_error(b, "ipc: gw_ipc_open: %s", gw_last_error());
  } else {
    snprintf(path, sizeof path, "%sopen+release, mapped", alloc_name[kind]);
    gw_result *r = gw_bench_add(b, "ipc", path, 0, GW_UNIT_LATENCY);
    snprintf(r->note, sizeof r->note, "allocation mapped already; raw: none");
    r->gw = time_loop(b, reps, batch, gw_open_release, &a);
    gw_release(hold);
  }
  gw_bench_progress("ipc: %sfirst open+release", alloc_name[kind]);
  snprintf(path, sizeof path, "%sfirst open+release", alloc_name[kind]);
  gw_result *r = gw_bench_add(b, "ipc", path, bytes, GW_UNIT_LATENCY);
  int first_batch = b->quick ? 20 : 100;
  if (b->backend == GW_BACKEND_CUDA && drv_ok) {
    snprintf(r->note, sizeof r->note, "maps and closes; raw: %s", raw_what[kind]);
    time_paired(b, r, reps, first_batch, &a);
  } else {
    snprintf(r->note, sizeof r->note, "maps and closes; raw: %s",
             b->backend == GW_BACKEND_CUDA ? drv_why : "none on the CPU model");
    r->gw = time_loop(b, reps, first_batch, gw_open_release, &a);
  }
  peer_stop(&p);
}

void gw_bench_ipc(gw_bench *b) {
  char why[96] = "";
  int drv_ok = b->backend == GW_BACKEND_CUDA && drv_load(b->device, why, sizeof why) == 0;
  gw_bench_progress_plan("ipc", 6); /* per allocator: open of a mapped allocation, first open */
  bench_alloc(b, ALLOC_LEGACY, 4 << 20, drv_ok, why);
  bench_alloc(b, ALLOC_POOL, 4 << 20, drv_ok, why);
  bench_alloc(b, ALLOC_VMM, 4 << 20, drv_ok, why);
  gw_bench_progress_done();
}
