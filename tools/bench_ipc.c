/*
 * bench section "ipc": memory from another process (docs/IPC.md).
 *
 * A peer process, this tool started again with exec (fork is no use: a forked child cannot
 * use the parent's CUDA), allocates a device buffer, exports it and writes the handle to a
 * pipe, then waits for the pipe's other end to close. Rows:
 *   "open+release, mapped": gw_ipc_open + gw_release of an allocation this process has
 *     mapped already (another opened array holds it): the import table's look-up alone.
 *     No raw side: a runtime has no "already mapped" open (CUDA refuses a second one).
 *   "first open+release": an allocation not mapped yet: the open maps it, the release
 *     closes it; raw side cuIpcOpenMemHandle + cuIpcCloseMemHandle (CUDA; none on the CPU
 *     model, whose runtime calls have no public raw form).
 * The peer is selected by GW_BENCH_IPC_PEER in the environment (backend:device:bytes),
 * handled before main() so that the tool's command line stays as it is.
 */
#include "bench.h"

#include <dlfcn.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define PEER_ENV "GW_BENCH_IPC_PEER"

/* The peer: export one device buffer on stdout, hold it until stdin closes. */
__attribute__((constructor)) static void peer_main(void) {
  const char *spec = getenv(PEER_ENV);
  if (!spec) return;
  int backend = 0, device = 0;
  unsigned long long bytes = 0;
  int rc = 1;
  gw_context *ctx = NULL;
  gw_array *a = NULL;
  gw_ipc_handle h;
  int64_t n;
  if (sscanf(spec, "%d:%d:%llu", &backend, &device, &bytes) != 3) goto out;
  n = (int64_t)bytes;
  if (gw_context_create((gw_backend)backend, device, &ctx) != GW_OK ||
      gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT8, 1, &n, &a) != GW_OK || gw_ipc_export(a, &h) != GW_OK)
    goto out;
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

static int peer_start(gw_bench *b, size_t bytes, peer *p, gw_ipc_handle *h) {
  int in[2], out[2];
  if (pipe(in) || pipe(out)) return -1;
  char spec[96];
  snprintf(spec, sizeof spec, PEER_ENV "=%d:%d:%zu", (int)b->backend, b->device, bytes);
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

/* Raw CUDA IPC through the driver API (libcuda.so.1, already loaded by the plugin). */
typedef struct {
  unsigned char reserved[64];
} cu_ipc_handle;
typedef int (*cu_ipc_open_fn)(unsigned long long *, cu_ipc_handle, unsigned);
typedef int (*cu_ipc_close_fn)(unsigned long long);

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

typedef struct {
  gw_context *ctx;
  const gw_ipc_handle *h;
  cu_ipc_open_fn cu_open;
  cu_ipc_close_fn cu_close;
} ipc_args;

static int gw_open_release(void *arg) {
  ipc_args *a = arg;
  gw_array *x = NULL;
  if (gw_ipc_open(a->ctx, a->h, &x) != GW_OK) return -1;
  gw_release(x);
  return 0;
}

static int raw_open_close(void *arg) {
  ipc_args *a = arg;
  cu_ipc_handle rh;
  /* the runtime's handle inside a version 2 handle (docs/IPC.md, "Handle layout (version 2)";
   * src/core/ipc_handle.c, OFF_RT) */
  memcpy(rh.reserved, a->h->bytes + 73, sizeof rh.reserved);
  unsigned long long p = 0;
  if (a->cu_open(&p, rh, 1 /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */) != 0) return -1;
  return a->cu_close(p) != 0;
}

void gw_bench_ipc(gw_bench *b) {
  size_t bytes = 4 << 20;
  peer p;
  gw_ipc_handle h;
  if (peer_start(b, bytes, &p, &h) != 0) {
    gw_bench_error(b, "ipc: the exporting peer process did not start or export");
    return;
  }
  ipc_args a = {.ctx = b->ctx, .h = &h};
  int reps = b->quick ? 9 : 31, batch = b->quick ? 200 : 2000;
  gw_bench_progress_plan("ipc", 2); /* open of a mapped allocation, first open */
  gw_bench_progress("ipc: open+release, mapped");
  gw_array *hold = NULL;
  if (gw_ipc_open(b->ctx, &h, &hold) != GW_OK) {
    gw_bench_error(b, "ipc: gw_ipc_open: %s", gw_last_error());
  } else {
    gw_result *r = gw_bench_add(b, "ipc", "open+release, mapped", 0, GW_UNIT_LATENCY);
    snprintf(r->note, sizeof r->note, "allocation mapped already; raw: none");
    r->gw = time_loop(b, reps, batch, gw_open_release, &a);
    gw_release(hold);
  }
  gw_bench_progress("ipc: first open+release");
  gw_result *r = gw_bench_add(b, "ipc", "first open+release", bytes, GW_UNIT_LATENCY);
  int first_batch = b->quick ? 20 : 100;
  r->gw = time_loop(b, reps, first_batch, gw_open_release, &a);
  if (b->backend == GW_BACKEND_CUDA) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (lib) {
      /* Through void **, as raw_cuda.c does: ISO C has no object-to-function pointer cast. */
      *(void **)&a.cu_open = dlsym(lib, "cuIpcOpenMemHandle_v2");
      if (!a.cu_open) *(void **)&a.cu_open = dlsym(lib, "cuIpcOpenMemHandle");
      *(void **)&a.cu_close = dlsym(lib, "cuIpcCloseMemHandle");
    }
    if (a.cu_open && a.cu_close) {
      snprintf(r->note, sizeof r->note,
               "maps and closes; raw: cuIpcOpenMemHandle + cuIpcCloseMemHandle");
      r->raw = time_loop(b, reps, first_batch, raw_open_close, &a);
    } else {
      snprintf(r->note, sizeof r->note, "maps and closes; raw: cuIpc* not found in libcuda.so.1");
    }
    if (lib) dlclose(lib);
  } else {
    snprintf(r->note, sizeof r->note, "maps and closes; raw: none on the CPU model");
  }
  gw_bench_progress_done();
  peer_stop(&p);
}
