/*
 * diffusion3d: explicit 3-D heat diffusion (7-point stencil, float64) on a global grid
 * split over MPI ranks, with gpuwrap arrays and the gpuwrap halo exchange.
 *
 *   mpirun -np 4 ./diffusion3d -n 64 -s 100 --check
 *
 * Each rank owns an n^3 block of the global grid (gw_grid_create_local: MPI_Dims_create
 * picks the rank grid, so the global grid is dims*n; the grid gives the Cartesian
 * communicator, this rank's offset and its device), held with a halo of one cell in two
 * arrays u and v (one halo plan each). A step is: exchange u's halo, v = u + r*laplacian(u), swap. Boundaries are
 * Dirichlet (u = 0 outside: the boundary halo cells are set to 0 and the exchange never
 * writes them) or, with --periodic, periodic.
 *
 * Where the stencil runs (--stencil auto|host|gpu):
 *   gpu   a CUDA kernel (diffusion3d_cuda.cu, built when CUDA is available: D3D_HAVE_CUDA)
 *         on gw_data() of the arrays, which are device memory by default. The default when
 *         the context's backend is CUDA and the example has the kernel. Each step is: halo
 *         exchange (complete when it returns), kernel, device synchronize. With --overlap:
 *         shell slabs on the kernels' stream, the interior on a second stream, and the
 *         exchange of the step's output ordered on the device (gw_halo_start_on /
 *         gw_halo_finish_on on the borrowed kernel stream), no synchronisation per step.
 *         When dim 2 (the contiguous one) is not split over ranks, its boundary is not cut
 *         out (--shell-k 0): slabs normal to it hold one cell per row, which makes them
 *         cost more to compute apart than that dim's exchange (local copies) costs after
 *         the interior; dims 0 and 1 are still exchanged behind the interior. Where dim 2
 *         has one rank, it needs no exchange at all: none with Dirichlet boundaries, and
 *         periodic the kernels store cells 1 and n in the ghost cells across as they
 *         compute them, so nothing but the next step waits for the interior.
 *   host  through gw_host_data(). On the CPU backend the arrays are pageable host memory;
 *         on another GPU backend (HIP, or CUDA with --stencil host, or a build without the
 *         kernel) they are managed memory by default (the halo copies run on the GPU, the
 *         stencil on the host). --mem device with the host stencil needs --halo-only (the
 *         stencil is skipped: only the exchange of device arrays is timed).
 *
 * The initial condition is a function of the global coordinate only, and every cell is
 * computed by the same function in the same order of operations, so the field on N ranks
 * equals the one-rank result bit for bit; --check verifies that (gathers the field to rank
 * 0 with gw_grid_gather and runs a one-rank reference there, on the whole global grid).
 * --halo-bench times the update and its raw stages in the same run (see halo_bench()). The GPU kernel computes
 * the same expression in the same order with no fused multiply-add (-fmad=false, as
 * -ffp-contract=off here), so --check holds for it too.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpuwrap.h"
#include "gpuwrap/halo.h"

#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef D3D_HAVE_CUDA /* diffusion3d_cuda.cu */
const char *d3d_cuda_error(void);
int d3d_cuda_init(int device);
void d3d_cuda_fini(void);
int d3d_cuda_stencil(const double *u, double *v, const int64_t strides[3], const int64_t lo[3],
                     const int64_t hi[3]);
int d3d_cuda_sync(void);
void *d3d_cuda_stream(void);
int d3d_cuda_stencil_interior(const double *u, double *v, const int64_t strides[3],
                              const int64_t lo[3], const int64_t hi[3], int64_t wrap2);
int d3d_cuda_interior_after_main(void);
int d3d_cuda_interior_wait_main(void);
int d3d_cuda_stencil_shell(const double *u, double *v, const int64_t strides[3], int64_t m,
                           const int bw[3], int64_t wrap2);
int d3d_cuda_main_after_interior(void);
int d3d_cuda_memcpy(void *dst, const void *src, size_t bytes);
int d3d_cuda_capture_begin(void);
int d3d_cuda_capture_end(int slot);
int d3d_cuda_graph_launch(int slot);
#define HAVE_KERNEL 1
#else
#define HAVE_KERNEL 0
#endif

enum { STENCIL_AUTO, STENCIL_HOST, STENCIL_GPU };

typedef struct {
  int64_t n; /* local interior extent per dim */
  int steps;
  int periodic;
  int check;
  int overlap; /* split-phase update, interior computed while the halo is in flight */
  int graph;   /* --graph: one step per parity captured into a CUDA graph, then replayed */
  int halo_only;
  int halo_bench; /* time the update and its raw stages side by side, print the ratio */
  gw_memkind mem; /* GW_MEM_UNKNOWN: pick from the backend */
  gw_halo_path path;
  double t1_ms; /* --t1: the one-rank time/step, for the weak-scaling efficiency line */
  int stencil;  /* STENCIL_*: AUTO picks the GPU kernel on the CUDA backend when built */
  int shell_k;  /* --overlap: cells of the boundary slabs along dim 2 (the contiguous one);
                     0: none, dim 2's exchange runs after the interior; -1: auto (see main) */
} options;

static const char weak_note[] =
    "Weak scaling: keep -n (cells per rank) fixed and run on 1 and on N ranks (one GPU each),\n"
    "  e.g. mpirun -np 1 diffusion3d -n 256 -s 100 --periodic, then -np N with the same -n;\n"
    "  efficiency(N) = t1 / tN, t = the \"time/step\" line of each run (1.0 = perfect: the\n"
    "  global grid grows with N, the work per rank does not). --periodic gives every rank the\n"
    "  same halo traffic, so N = 1 already pays for the exchange (local copies).\n";

static void usage(FILE *f, const char *argv0) {
  fprintf(
      f,
      "usage: %s [options]\n"
      "  -n N            local grid per rank: N^3 cells (default 64)\n"
      "  -s S            time steps (default 100)\n"
      "  --periodic      periodic boundaries (default: Dirichlet, u = 0 outside)\n"
      "  --check         gather the field to rank 0 and compare it, bit for bit, with a\n"
      "                  one-rank reference computed there\n"
      "  --overlap       hide the exchange behind the interior: shell slabs, gw_halo_start_on,\n"
      "                  interior (another stream), gw_halo_finish_on; also times the stencil\n"
      "                  and the update alone and prints time/step / max(stencil, halo)\n"
      "  --shell-k K     --overlap: the boundary slabs are K cells thick along dim 2 (the\n"
      "                  contiguous one), 1 along the others. 0: no slabs along dim 2: the\n"
      "                  interior kernel computes those cells and dim 2's exchange runs after\n"
      "                  it (not hidden). Default: 0 when dim 2 is not split over ranks (its\n"
      "                  exchange is local copies or nothing), else 1\n"
      "  --graph         capture one time step (stencil and halo update; with --overlap the\n"
      "                  interior stream forked and joined inside the graph) into a CUDA graph\n"
      "                  once per parity (u->v, v->u), then replay it every step; also times\n"
      "                  the eager step in the same run. Needs the GPU stencil (the host\n"
      "                  stencil is no stream work a graph can hold: exit 2 otherwise) and a\n"
      "                  halo plan whose update is device work (one rank's local copies, or\n"
      "                  the NCCL path; the MPI paths refuse a capture)\n"
      "  --halo-only     skip the stencil: time the halo exchange alone\n"
      "  --halo-bench    time the update and, in the same run, its raw stages (face copy out\n"
      "                  to pinned memory, MPI_Sendrecv of the same bytes between host\n"
      "                  buffers, face copy in); prints update / sum of the stages, and the\n"
      "                  host path's and the IPC path's updates beside the plan's (IPC:\n"
      "                  device fields, e.g. --mem device; else the line says why not)\n"
      "  --stencil S     auto | host | gpu: where the stencil runs (default auto: the CUDA\n"
      "                  kernel when the backend is CUDA and this build has it (%s), else host)\n"
      "  --mem KIND      host | pinned | managed | device (default: device for the GPU stencil,\n"
      "                  host on the CPU backend, managed otherwise; device with the host\n"
      "                  stencil needs --halo-only)\n"
      "  --path P        auto | host | device | nccl | ipc: halo data path (default auto: NCCL\n"
      "                  when it loads and every rank has device memory on its own GPU; IPC\n"
      "                  between ranks of one node with device memory when NCCL cannot serve,\n"
      "                  MPI is not GPU-aware and IPC pays: ranks on GPUs of their own, or\n"
      "                  ranks sharing one under MPS; else host)\n"
      "  --t1 MS         the one-rank time/step (ms) of the same -n: prints the weak-scaling\n"
      "                  efficiency t1/tN of this run, at any rank count\n"
      "  --weak          print the weak-scaling note below and exit\n"
      "  -h, --help      this text\n"
      "Output: time/step (device synchronized each step), stencil and halo time/step,\n"
      "effective memory throughput (16 B per cell per step: read u, write v), bytes sent per\n"
      "rank per halo update.\n"
      "Environment: GPUWRAP_BACKEND=cpu|cuda|hip; GPUWRAP_HALO_GPU_AWARE=0|1. Each rank uses\n"
      "device (node-local rank mod device count).\n"
      "Exit status: 0 ok, 1 a failed call or --check mismatch, 2 bad usage (a bad option, or\n"
      "an option this run cannot honour: --graph, --stencil gpu, --mem), from every rank.\n"
      "%s",
      argv0, HAVE_KERNEL ? "built" : "not built", weak_note);
}

static int
    g_rank; /* this rank in the grid's communicator (MPI_COMM_WORLD's until the grid exists) */

/* A bad command line: which argument and why (rank 0 says it), then where the usage is. */
static int bad(const char *opt, const char *val, const char *why) {
  if (g_rank == 0)
    fprintf(stderr, "diffusion3d: %s%s%s: %s\n", opt, val ? " " : "", val ? val : "", why);
  return -1;
}

/* A whole decimal integer in [lo, hi], or 0. */
static int int_arg(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){.n = 64,
                 .steps = 100,
                 .mem = GW_MEM_UNKNOWN,
                 .path = GW_HALO_PATH_AUTO,
                 .stencil = STENCIL_AUTO,
                 .shell_k = -1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
    if (!strcmp(a, "--weak")) return 3;
    if (!strcmp(a, "--periodic"))
      o->periodic = 1;
    else if (!strcmp(a, "--check"))
      o->check = 1;
    else if (!strcmp(a, "--overlap"))
      o->overlap = 1;
    else if (!strcmp(a, "--graph"))
      o->graph = 1;
    else if (!strcmp(a, "--halo-only"))
      o->halo_only = 1;
    else if (!strcmp(a, "--halo-bench"))
      o->halo_bench = 1;
    else if (val && !strcmp(a, "-n")) {
      long long v;
      if (!int_arg(argv[++i], 3, 1LL << 20, &v))
        return bad(a, val, "cells per dim must be an integer >= 3");
      o->n = v;
    } else if (val && !strcmp(a, "-s")) {
      long long v;
      if (!int_arg(argv[++i], 0, INT_MAX, &v)) return bad(a, val, "steps must be an integer >= 0");
      o->steps = (int)v;
    } else if (val && !strcmp(a, "--shell-k")) {
      long long v;
      if (!int_arg(argv[++i], 0, INT_MAX, &v))
        return bad(a, val, "a cell count >= 0 (0: no slabs along dim 2)");
      o->shell_k = (int)v;
    } else if (val && !strcmp(a, "--t1")) {
      char *end;
      o->t1_ms = strtod(argv[++i], &end);
      if (end == val || *end || !(o->t1_ms > 0) || !isfinite(o->t1_ms))
        return bad(a, val, "a finite time in ms > 0");
    } else if (val && !strcmp(a, "--mem")) {
      static const char *names[] = {"", "host", "pinned", "device", "managed"};
      o->mem = (gw_memkind)-1;
      for (int k = 1; k <= 4; k++)
        if (!strcmp(val, names[k])) o->mem = (gw_memkind)k;
      i++;
      if ((int)o->mem < 0) return bad(a, val, "one of host, pinned, device, managed");
    } else if (val && !strcmp(a, "--path")) {
      o->path = !strcmp(val, "host")     ? GW_HALO_PATH_HOST
                : !strcmp(val, "device") ? GW_HALO_PATH_DEVICE
                : !strcmp(val, "nccl")   ? GW_HALO_PATH_NCCL
                : !strcmp(val, "ipc")    ? GW_HALO_PATH_IPC
                : !strcmp(val, "auto")   ? GW_HALO_PATH_AUTO
                                         : (gw_halo_path)-1;
      i++;
      if ((int)o->path < 0) return bad(a, val, "one of auto, host, device, nccl, ipc");
    } else if (val && !strcmp(a, "--stencil")) {
      o->stencil = !strcmp(val, "auto")   ? STENCIL_AUTO
                   : !strcmp(val, "host") ? STENCIL_HOST
                   : !strcmp(val, "gpu")  ? STENCIL_GPU
                                          : -1;
      i++;
      if (o->stencil < 0) return bad(a, val, "one of auto, host, gpu");
    } else {
      static const char *with_value[] = {"-n",    "-s",     "--shell-k", "--t1",
                                         "--mem", "--path", "--stencil"};
      for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
        if (!strcmp(a, with_value[k])) return bad(a, NULL, "needs a value");
      return bad(a, NULL, "unknown option");
    }
  }
  if (o->graph && (o->halo_only || o->halo_bench))
    return bad("--graph", NULL,
               "captures the stencil with the exchange: not with --halo-only or --halo-bench");
  if (2 * (int64_t)o->shell_k > o->n) {
    if (g_rank == 0)
      fprintf(stderr,
              "diffusion3d: --shell-k %d: the two slabs along dim 2 would overlap (at most n/2 = "
              "%lld)\n",
              o->shell_k, (long long)(o->n / 2));
    return -1;
  }
  return 0;
}

/* ---- the numerics: shared by the distributed run and the reference --------------------- */

#define R 0.125 /* D*dt/h^2, stable below 1/6 */

static double initial(int64_t gx, int64_t gy, int64_t gz, const int64_t N[3]) {
  double x = (gx + 0.5) / N[0] - 0.5, y = (gy + 0.5) / N[1] - 0.5, z = (gz + 0.5) / N[2] - 0.5;
  return exp(-40.0 * (x * x + y * y + z * z)) + 0.25 * (double)((gx * 7 + gy * 3 + gz) % 5);
}

/* v = u + R*laplacian(u) on cells [lo, hi) of arrays with extents n (halo of one included),
 * C order. Every cell is computed by this one expression, wherever it runs. */
static void stencil(const double *restrict u, double *restrict v, const int64_t n[3],
                    const int64_t lo[3], const int64_t hi[3]) {
  const int64_t sy = n[2], sx = n[1] * n[2];
  for (int64_t i = lo[0]; i < hi[0]; i++)
    for (int64_t j = lo[1]; j < hi[1]; j++)
      for (int64_t k = lo[2]; k < hi[2]; k++) {
        int64_t c = i * sx + j * sy + k;
        v[c] = u[c] + R * ((u[c - sx] + u[c + sx]) + (u[c - sy] + u[c + sy]) +
                           (u[c - 1] + u[c + 1]) - 6.0 * u[c]);
      }
}

/* The boundary of [1, m+1)^3, bw[d] cells thick along dim d (the cells that read halo
 * cells, and those the faces hold, are in it when bw >= 1), as six slabs; slab (d, side)
 * is [lo, hi). The rest, [1 + bw, m + 1 - bw), is the interior (interior_box). */
static void shell_box(int d, int side, int64_t m, const int bw[3], int64_t lo[3], int64_t hi[3]) {
  for (int e = 0; e < 3; e++) {
    /* slab d: the whole extent along dims after d, the inner part along dims before */
    lo[e] = e < d ? 1 + bw[e] : 1;
    hi[e] = e < d ? m + 1 - bw[e] : m + 1;
  }
  lo[d] = side ? m + 1 - bw[d] : 1;
  hi[d] = side ? m + 1 : 1 + bw[d];
}

static void interior_box(int64_t m, const int bw[3], int64_t lo[3], int64_t hi[3]) {
  for (int e = 0; e < 3; e++) {
    lo[e] = 1 + bw[e];
    hi[e] = m + 1 - bw[e];
  }
}

static void stencil_shell(const double *u, double *v, const int64_t n[3], const int bw[3]) {
  int64_t m = n[0] - 2;
  for (int d = 0; d < 3; d++)
    for (int side = 0; side < 2; side++) {
      int64_t lo[3], hi[3];
      shell_box(d, side, m, bw, lo, hi);
      stencil(u, v, n, lo, hi);
    }
}

/* One-rank reference over the whole global grid N (halo of one), on rank 0. */
static double *reference(const int64_t N[3], int steps, int periodic) {
  int64_t n[3] = {N[0] + 2, N[1] + 2, N[2] + 2}, total = n[0] * n[1] * n[2];
  double *u = calloc((size_t)total, sizeof *u), *v = calloc((size_t)total, sizeof *v);
  if (!u || !v) return NULL;
  for (int64_t i = 1; i <= N[0]; i++)
    for (int64_t j = 1; j <= N[1]; j++)
      for (int64_t k = 1; k <= N[2]; k++)
        u[(i * n[1] + j) * n[2] + k] = initial(i - 1, j - 1, k - 1, N);
  const int64_t lo[3] = {1, 1, 1}, hi[3] = {N[0] + 1, N[1] + 1, N[2] + 1};
  for (int s = 0; s < steps; s++) {
    if (periodic) /* the faces are all a 7-point stencil reads */
      for (int64_t i = 0; i < n[0]; i++)
        for (int64_t j = 0; j < n[1]; j++)
          for (int64_t k = 0; k < n[2]; k++) {
            int64_t a = i, b = j, c = k;
            int out =
                (a == 0 || a == n[0] - 1) + (b == 0 || b == n[1] - 1) + (c == 0 || c == n[2] - 1);
            if (out != 1) continue;
            a = a == 0 ? N[0] : a == n[0] - 1 ? 1 : a;
            b = b == 0 ? N[1] : b == n[1] - 1 ? 1 : b;
            c = c == 0 ? N[2] : c == n[2] - 1 ? 1 : c;
            u[(i * n[1] + j) * n[2] + k] = u[(a * n[1] + b) * n[2] + c];
          }
    stencil(u, v, n, lo, hi);
    double *t = u;
    u = v;
    v = t;
  }
  free(v);
  return u;
}

/* ---- the distributed run -------------------------------------------------------------- */

#define CHECK(expr)                                                                             \
  do {                                                                                          \
    gw_status st_ = (expr);                                                                     \
    if (st_ != GW_OK) {                                                                         \
      fprintf(stderr, "[rank %d] %s failed: %s: %s%s%s\n", g_rank, #expr, gw_err_name(st_),     \
              gw_last_error(), *gw_halo_last_error() ? " / halo: " : "", gw_halo_last_error()); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                             \
    }                                                                                           \
  } while (0)

#ifdef D3D_HAVE_CUDA
#define CUDA_CHECK(expr)                                                             \
  do {                                                                               \
    if ((expr) != 0) {                                                               \
      fprintf(stderr, "[rank %d] %s failed: %s\n", g_rank, #expr, d3d_cuda_error()); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
    }                                                                                \
  } while (0)
#endif

static double max_over(double t, MPI_Comm c) {
  double m = t;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, c);
  return m;
}

/*
 * --halo-bench: the update and its raw stages, measured in the same run with every rank
 * running each stage at the same time (a barrier before each), each the slowest rank's
 * mean over `iters`:
 *   update   gw_halo_update of u (blocking, the plan's path), and beside it, in the same
 *            run, the same update through the host path and through the IPC path (plans
 *            made here; IPC where it can serve: device fields, ranks on one node; its
 *            creation fails on every rank alike otherwise, and the line says why);
 *   out      each face a rank sends, copied as contiguous bytes from the field's kind of
 *            memory into pinned host memory (gw_copy; cudaMemcpy too with the CUDA build):
 *            the copy engine's speed, the floor of any pack;
 *   mpi      MPI_Sendrecv of the same bytes between pinned host buffers, per dim both ways;
 *   in       the same bytes back from pinned memory (gw_copy; cudaMemcpy);
 *   local    the self-neighbour faces (periodic dims of one rank) as contiguous
 *            device-to-device copies of the same bytes.
 * The ratio printed is update / (out + mpi + in + local) with the raw copies (cudaMemcpy
 * where built, gw_copy otherwise): below 1 only when the stages overlap (pipelining).
 */
/* Blocking updates of h: the slowest rank's mean over iters, after a warm-up. */
static double time_updates(gw_halo *h, MPI_Comm cart, int iters) {
  for (int k = 0; k < 5; k++) CHECK(gw_halo_update(h));
  MPI_Barrier(cart);
  double t0 = MPI_Wtime();
  for (int k = 0; k < iters; k++) CHECK(gw_halo_update(h));
  return max_over((MPI_Wtime() - t0) / iters, cart);
}

/* Time per iteration (the slowest rank's) of one gw_copy dst[d] <- src[d] per neighbour:
 * those on other ranks (`remote`: along dims split over ranks) or those that are this
 * rank itself (periodic dims of one rank). */
static double time_face_copies(MPI_Comm cart, int iters, int remote, const int dims[3],
                               int peer[3][2], gw_array *dst[3], gw_array *src[3]) {
  MPI_Barrier(cart);
  double t0 = MPI_Wtime();
  for (int k = 0; k < iters; k++)
    for (int d = 0; d < 3; d++)
      for (int s = 0; s < 2; s++)
        if ((dims[d] > 1) == remote && peer[d][s] != MPI_PROC_NULL) CHECK(gw_copy(dst[d], src[d]));
  return max_over((MPI_Wtime() - t0) / iters, cart);
}

static void halo_bench(gw_context *ctx, gw_halo *h, gw_array *field, MPI_Comm cart, int64_t m,
                       int iters, gw_memkind kind, int gpu) {
  int dims[3], periods[3], coords[3], peer[3][2];
  MPI_Cart_get(cart, 3, dims, periods, coords);
  int64_t face[3], maxface = 1;
  for (int d = 0; d < 3; d++) {
    face[d] = 8; /* float64, width 1: the plan's face along d */
    for (int e = 0; e < 3; e++)
      if (e != d) face[d] *= e < d ? m + 2 : m;
    if (face[d] > maxface) maxface = face[d];
    MPI_Cart_shift(cart, d, 1, &peer[d][0], &peer[d][1]);
  }
  gw_array *dev, *dev2, *pin_send, *pin_recv, *dv[3], *dv2[3], *ps[3], *pr[3];
  CHECK(gw_alloc(ctx, kind, GW_UINT8, 1, &maxface, &dev));
  CHECK(gw_alloc(ctx, kind, GW_UINT8, 1, &maxface, &dev2));
  CHECK(gw_alloc(ctx, GW_MEM_PINNED, GW_UINT8, 1, &maxface, &pin_send));
  CHECK(gw_alloc(ctx, GW_MEM_PINNED, GW_UINT8, 1, &maxface, &pin_recv));
  memset(gw_host_data(pin_send), 1, (size_t)maxface);
  memset(gw_host_data(pin_recv), 2, (size_t)maxface);
  CHECK(gw_copy(dev, pin_send));
  CHECK(gw_copy(dev2, pin_send));
  const int64_t zero = 0;
  for (int d = 0; d < 3; d++) {
    CHECK(gw_view(dev, &zero, &face[d], NULL, &dv[d]));
    CHECK(gw_view(dev2, &zero, &face[d], NULL, &dv2[d]));
    CHECK(gw_view(pin_send, &zero, &face[d], NULL, &ps[d]));
    CHECK(gw_view(pin_recv, &zero, &face[d], NULL, &pr[d]));
  }
  (void)gpu;
  double t_upd, t_out, t_in, t_mpi, t_loc, t_out_raw = -1, t_in_raw = -1, t0;
  size_t remote_bytes = 0, local_bytes = 0;
  int faces = 0;
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 2; s++)
      if (peer[d][s] != MPI_PROC_NULL) {
        if (dims[d] > 1)
          remote_bytes += (size_t)face[d], faces++;
        else
          local_bytes += (size_t)face[d];
      }

  t_upd = time_updates(h, cart, iters);
  gw_halo_info info = {.struct_size = sizeof info};
  CHECK(gw_halo_query(h, &info));
  /* the host and IPC paths' updates beside the plan's own, where it takes another path;
   * -1: not measured, -2: IPC cannot serve (why in ipc_why) */
  double t_host = -1, t_ipc = -1;
  char ipc_why[200] = "";
  gw_halo_field f = {field, {1, 1, 1}};
  gw_halo *other;
  if (info.path != GW_HALO_PATH_HOST) {
    CHECK(gw_halo_create_multi(&f, 1, cart, GW_HALO_PATH_HOST, &other));
    t_host = time_updates(other, cart, iters);
    gw_halo_destroy(other);
  }
  if (info.path != GW_HALO_PATH_IPC) {
    /* collective: it fails on every rank alike, or on none */
    if (gw_halo_create_multi(&f, 1, cart, GW_HALO_PATH_IPC, &other) == GW_OK) {
      t_ipc = time_updates(other, cart, iters);
      gw_halo_destroy(other);
    } else {
      t_ipc = -2;
      snprintf(ipc_why, sizeof ipc_why, "%s", gw_halo_last_error());
    }
  }
  if (info.path == GW_HALO_PATH_HOST) t_host = t_upd;
  if (info.path == GW_HALO_PATH_IPC) t_ipc = t_upd;

  t_out = time_face_copies(cart, iters, 1, dims, peer, ps, dv);

  MPI_Barrier(cart);
  t0 = MPI_Wtime();
  for (int k = 0; k < iters; k++)
    for (int d = 0; d < 3; d++) {
      if (dims[d] == 1) continue;
      int b = (int)face[d];
      /* toward high, then toward low: every message of an update, once each way */
      MPI_Sendrecv(gw_host_data(ps[d]), b, MPI_BYTE, peer[d][1], 901, gw_host_data(pr[d]), b,
                   MPI_BYTE, peer[d][0], 901, cart, MPI_STATUS_IGNORE);
      MPI_Sendrecv(gw_host_data(ps[d]), b, MPI_BYTE, peer[d][0], 902, gw_host_data(pr[d]), b,
                   MPI_BYTE, peer[d][1], 902, cart, MPI_STATUS_IGNORE);
    }
  t_mpi = max_over((MPI_Wtime() - t0) / iters, cart);

  t_in = time_face_copies(cart, iters, 1, dims, peer, dv, pr);
  t_loc = time_face_copies(cart, iters, 0, dims, peer, dv2, dv);

#ifdef D3D_HAVE_CUDA
  if (gpu && gw_data(dev)) {
    MPI_Barrier(cart);
    t0 = MPI_Wtime();
    for (int k = 0; k < iters; k++)
      for (int d = 0; d < 3; d++)
        for (int s = 0; s < 2; s++)
          if (dims[d] > 1 && peer[d][s] != MPI_PROC_NULL)
            CUDA_CHECK(d3d_cuda_memcpy(gw_host_data(ps[d]), gw_data(dv[d]), (size_t)face[d]));
    t_out_raw = max_over((MPI_Wtime() - t0) / iters, cart);
    MPI_Barrier(cart);
    t0 = MPI_Wtime();
    for (int k = 0; k < iters; k++)
      for (int d = 0; d < 3; d++)
        for (int s = 0; s < 2; s++)
          if (dims[d] > 1 && peer[d][s] != MPI_PROC_NULL)
            CUDA_CHECK(d3d_cuda_memcpy(gw_data(dv[d]), gw_host_data(pr[d]), (size_t)face[d]));
    t_in_raw = max_over((MPI_Wtime() - t0) / iters, cart);
  }
#endif
  if (g_rank == 0) {
    double out = t_out_raw >= 0 ? t_out_raw : t_out, in = t_in_raw >= 0 ? t_in_raw : t_in;
    double sum = out + t_mpi + in + t_loc;
    printf("halo-bench: %d iterations, rank 0 sends %d faces (%zu bytes) to other ranks, copies "
           "%zu bytes locally, holds %zu bytes of buffers; "
           "path %s%s\n",
           iters, faces, remote_bytes, local_bytes, info.buffer_bytes, gw_halo_path_name(info.path),
           info.shared_memory
               ? " (shared-memory window: faces copied into the neighbour's buffer, MPI tokens)"
               : "");
    printf("  update (gw_halo_update)            %9.4f ms   (path %s: this run's plan)\n",
           t_upd * 1e3, gw_halo_path_name(info.path));
    if (t_host >= 0) printf("  update, host path                  %9.4f ms\n", t_host * 1e3);
    if (t_ipc >= 0)
      printf("  update, IPC path                   %9.4f ms   (IPC / host update = %.3f; target <= "
             "0.25)\n",
             t_ipc * 1e3, t_host > 0 ? t_ipc / t_host : 0.0);
    else
      printf("  update, IPC path                   unavailable: %s\n", ipc_why);
    printf("  raw: copy out to pinned (gw_copy)  %9.4f ms", t_out * 1e3);
    if (t_out_raw >= 0) printf("   (cudaMemcpy %.4f ms)", t_out_raw * 1e3);
    printf("\n  raw: MPI_Sendrecv host buffers     %9.4f ms\n", t_mpi * 1e3);
    printf("  raw: copy in from pinned (gw_copy) %9.4f ms", t_in * 1e3);
    if (t_in_raw >= 0) printf("   (cudaMemcpy %.4f ms)", t_in_raw * 1e3);
    printf("\n  raw: local device copies (gw_copy) %9.4f ms\n", t_loc * 1e3);
    printf("  sum of raw stages                  %9.4f ms (%s copies)\n", sum * 1e3,
           t_out_raw >= 0 ? "cudaMemcpy" : "gw_copy");
    printf("  update / sum of raw stages         %9.3f   (target <= 0.8 with MPI; <= 0.02 ms per "
           "update one rank "
           "periodic 256^3)\n",
           sum > 0 ? t_upd / sum : 0.0);
  }
  for (int d = 0; d < 3; d++) {
    gw_release(dv[d]);
    gw_release(dv2[d]);
    gw_release(ps[d]);
    gw_release(pr[d]);
  }
  gw_release(dev);
  gw_release(dev2);
  gw_release(pin_send);
  gw_release(pin_recv);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  options o;
  int pr = parse(argc, argv, &o);
  if (pr != 0) {
    if (g_rank == 0) {
      if (pr == 3)
        fputs(weak_note, stdout);
      else if (pr > 0)
        usage(stdout, argv[0]);
      else
        fprintf(stderr, "Run '%s --help' for the usage.\n",
                argv[0]); /* the error said what is wrong */
    }
    MPI_Finalize();
    return pr > 0 ? 0 : 2;
  }

  /* The grid (gpuwrap's init_global_grid): n^3 cells per rank, MPI_Dims_create's rank grid,
   * a reordered Cartesian communicator, this rank's offset in the global grid. */
  const int64_t m = o.n, loc[3] = {m, m, m};
  int periods[3] = {o.periodic, o.periodic, o.periodic};
  gw_grid *grid;
  CHECK(gw_grid_create_local(MPI_COMM_WORLD, 3, loc, periods, NULL, &grid));
  gw_grid_info gi = {.struct_size = sizeof gi};
  CHECK(gw_grid_query(grid, &gi));
  g_rank = gi.rank; /* rank in the grid's communicator: rank 0 reports and checks */
  MPI_Comm cart = gw_grid_comm(grid);
  const int64_t *N = gi.global;
  const int *dims = gi.dims;

  /* context: AUTO (or GPUWRAP_BACKEND), one device per node-local rank */
  gw_context *ctx;
  CHECK(gw_grid_context_create(grid, GW_BACKEND_AUTO, &ctx));
  gw_backend backend = gw_context_backend(ctx);

  /* the stencil: the CUDA kernel when the backend is CUDA and this build has it */
  if (o.stencil == STENCIL_GPU && (!HAVE_KERNEL || backend != GW_BACKEND_CUDA)) {
    if (g_rank == 0) {
      fprintf(stderr, "diffusion3d: --stencil gpu: %s\n",
              !HAVE_KERNEL ? "this build has no CUDA stencil (built without CUDA)"
                           : "needs the CUDA backend (GPUWRAP_BACKEND=cuda)");
      fprintf(stderr, "Run '%s --help' for the usage.\n", argv[0]);
    }
    gw_context_destroy(ctx);
    gw_grid_destroy(grid);
    MPI_Finalize();
    return 2;
  }
  const int gpu = o.stencil == STENCIL_GPU ||
                  (o.stencil == STENCIL_AUTO && HAVE_KERNEL && backend == GW_BACKEND_CUDA);
  if (o.graph && !gpu) {
    /* The host stencil is a loop on the host, not stream work: a graph cannot hold it. */
    if (g_rank == 0) {
      fprintf(stderr,
              "diffusion3d: --graph: needs the GPU stencil (the CUDA backend and a build with the "
              "CUDA kernel; this run's stencil is the host's: %s)\n",
              !HAVE_KERNEL                 ? "built without CUDA"
              : backend != GW_BACKEND_CUDA ? "the backend is not CUDA"
                                           : "--stencil host");
      fprintf(stderr, "Run '%s --help' for the usage.\n", argv[0]);
    }
    gw_context_destroy(ctx);
    gw_grid_destroy(grid);
    MPI_Finalize();
    return 2;
  }
  if (o.mem == GW_MEM_UNKNOWN)
    o.mem = gpu ? GW_MEM_DEVICE : backend == GW_BACKEND_CPU ? GW_MEM_HOST : GW_MEM_MANAGED;
#ifdef D3D_HAVE_CUDA
  if (gpu) CUDA_CHECK(d3d_cuda_init(gw_context_device(ctx)));
#endif
  const int64_t n[3] = {m + 2, m + 2, m + 2}, cells = n[0] * n[1] * n[2];
  const int no_stencil = o.halo_only || o.halo_bench;

  /* u and v in the chosen memory, initialised through a host image */
  gw_array *u, *v, *img;
  CHECK(gw_alloc(ctx, o.mem, GW_FLOAT64, 3, n, &u));
  CHECK(gw_alloc(ctx, o.mem, GW_FLOAT64, 3, n, &v));
  CHECK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT64, 3, n, &img));
  /* A --mem the stencil cannot use: a usage error, as the parser's are (one line from rank
   * 0, the pointer at --help, exit status 2 from every rank through MPI_Finalize; never
   * MPI_Abort, whose banner buries the line). Every rank decides alike; the allreduce
   * makes sure none goes on alone. */
  const char *mem_why = NULL;
  if (!no_stencil && gpu && (!gw_data(u) || !gw_data(v)))
    mem_why = "the GPU cannot reach this memory; use --mem device, managed or pinned";
  else if (!no_stencil && !gpu && (!gw_host_data(u) || !gw_host_data(v)))
    mem_why = "the host cannot compute on this memory; use --stencil gpu (CUDA), --mem "
              "managed, or --halo-only";
  int mem_bad = mem_why != NULL, any_bad = 0;
  MPI_Allreduce(&mem_bad, &any_bad, 1, MPI_INT, MPI_MAX, cart);
  if (any_bad) {
    if (g_rank == 0) {
      fprintf(stderr, "diffusion3d: --mem %s: %s\n", gw_memkind_name(o.mem),
              mem_why ? mem_why : "another rank cannot use this memory");
      fprintf(stderr, "Run '%s --help' for the usage.\n", argv[0]);
    }
#ifdef D3D_HAVE_CUDA
    if (gpu) d3d_cuda_fini();
#endif
    gw_release(u);
    gw_release(v);
    gw_release(img);
    gw_context_destroy(ctx);
    gw_grid_destroy(grid);
    MPI_Finalize();
    return 2;
  }
  double *h0 = gw_host_data(img);
  memset(h0, 0, (size_t)cells * sizeof *h0); /* Dirichlet: boundary halo cells stay 0 */
  for (int64_t i = 1; i <= m; i++)
    for (int64_t j = 1; j <= m; j++)
      for (int64_t k = 1; k <= m; k++)
        h0[(i * n[1] + j) * n[2] + k] =
            initial(gi.offset[0] + i - 1, gi.offset[1] + j - 1, gi.offset[2] + k - 1, N);
  CHECK(gw_copy(u, img));
  CHECK(gw_copy(v, img));

  /* one plan per field: a step exchanges one of them */
  gw_halo_field fu = {u, {1, 1, 1}}, fv = {v, {1, 1, 1}};
  gw_halo *hu, *hv;
  CHECK(gw_halo_create_multi(&fu, 1, cart, o.path, &hu));
  CHECK(gw_halo_create_multi(&fv, 1, cart, o.path, &hv));
  /* --overlap without slabs along dim 2 (--shell-k 0; the default when dim 2 is not split
   * over ranks): each field's exchange in two plans, dims 0 and 1 (hidden behind the
   * interior), then dim 2 (after it). Widths 0 turn a dim off; the dims still run in order
   * 0, 1, 2 over the whole extents, so wherever dim 2 exchanges, the edges and corners get
   * the same values as from the one plan (where it does not, at a Dirichlet boundary, an
   * edge cell may take the neighbour's boundary value: 0 as well, and never read by the
   * 7-point stencil). */
  if (o.shell_k < 0) o.shell_k = dims[2] > 1 ? 1 : 0;
  const int split_dim2 = o.overlap && !o.halo_only && !o.halo_bench && o.shell_k == 0;
  /* The GPU step where dim 2 is not split over ranks needs no dim-2 exchange at all: with
   * Dirichlet boundaries there is none, and periodic the rank is its own neighbour, so the
   * kernels that compute cells k = 1 and m also store them in the ghost cells across
   * (wrap2 = m). Then nothing waits for the interior but the next step's slabs: the
   * overlapped step is the @hide_communication one with the dims-0-and-1 plans. */
  const int alone2 = split_dim2 && gpu && dims[2] == 1;
  const int64_t wrap2 = alone2 && o.periodic ? m : 0;
  (void)wrap2; /* (the kernels' argument: unused in a build without CUDA) */
  gw_halo *hu01 = NULL, *hv01 = NULL, *hu2 = NULL, *hv2 = NULL;
  if (split_dim2) {
    gw_halo_field f01[2] = {{u, {1, 1, 0}}, {v, {1, 1, 0}}},
                  f2[2] = {{u, {0, 0, 1}}, {v, {0, 0, 1}}};
    CHECK(gw_halo_create_multi(&f01[0], 1, cart, o.path, &hu01));
    CHECK(gw_halo_create_multi(&f01[1], 1, cart, o.path, &hv01));
    if (!alone2) {
      CHECK(gw_halo_create_multi(&f2[0], 1, cart, o.path, &hu2));
      CHECK(gw_halo_create_multi(&f2[1], 1, cart, o.path, &hv2));
    }
  }
  gw_halo_info info = {.struct_size = sizeof info};
  CHECK(gw_halo_query(hu, &info));

  if (o.halo_bench) {
    halo_bench(ctx, hu, u, cart, m, o.steps > 0 ? o.steps : 1, o.mem, gpu);
    gw_halo_destroy(hu);
    gw_halo_destroy(hv);
#ifdef D3D_HAVE_CUDA
    if (gpu) d3d_cuda_fini();
#endif
    gw_release(u);
    gw_release(v);
    gw_release(img);
    gw_context_destroy(ctx);
    gw_grid_destroy(grid);
    MPI_Finalize();
    return 0;
  }

  /* --overlap: with the GPU stencil the plans order themselves with its main stream
   * (borrowed: the kernels' own cudaStream_t). */
  gw_stream *main_s = NULL;
  const int overlap = o.overlap && !o.halo_only;
#ifdef D3D_HAVE_CUDA
  if ((overlap || o.graph) && gpu) CHECK(gw_stream_wrap(ctx, d3d_cuda_stream(), &main_s));
#endif

  const int64_t lo[3] = {1, 1, 1}, hi[3] = {m + 1, m + 1, m + 1};
  /* --overlap: the boundary is one cell thick, --shell-k cells along the contiguous dim
   * (0: none there, the interior spans that dim) */
  const int bw[3] = {1, 1, o.shell_k};
  int64_t ilo[3], ihi[3];
  interior_box(m, bw, ilo, ihi);
  double t_halo = 0, t_sten = 0, t0;
#ifdef D3D_HAVE_CUDA
  if (gpu && !o.halo_only) { /* warm-up: loads the kernel (lazy loading); step 0 rewrites v */
    CUDA_CHECK(d3d_cuda_stencil(gw_data(u), gw_data(v), gw_strides(u), lo, hi));
    CUDA_CHECK(d3d_cuda_sync());
  }
#endif

  /* --overlap also measures, in this run, the stencil alone and the update alone (then
   * restores the fields), so the report compares the overlapped step with max(both). */
  double alone_sten = 0, alone_halo = 0, alone_split = 0;
  if (overlap) {
    int k_steps = o.steps > 0 ? o.steps : 1;
    for (int k = 0; k < 3; k++) CHECK(gw_halo_update(hu)); /* warm-up */
    MPI_Barrier(cart);
    t0 = MPI_Wtime();
    for (int k = 0; k < k_steps; k++) CHECK(gw_halo_update(hu));
    alone_halo = max_over((MPI_Wtime() - t0) / k_steps, cart);
    MPI_Barrier(cart);
    t0 = MPI_Wtime();
    for (int k = 0; k < k_steps; k++) {
      if (gpu) {
#ifdef D3D_HAVE_CUDA
        CUDA_CHECK(d3d_cuda_stencil(gw_data(u), gw_data(v), gw_strides(u), lo, hi));
#endif
      } else {
        stencil(gw_host_data(u), gw_host_data(v), n, lo, hi);
      }
    }
#ifdef D3D_HAVE_CUDA
    if (gpu) CUDA_CHECK(d3d_cuda_sync());
#endif
    alone_sten = max_over((MPI_Wtime() - t0) / k_steps, cart);
#ifdef D3D_HAVE_CUDA
    /* The split stencil alone (shell launch + interior on its own stream, the same joins,
     * no exchange): what the overlapped step costs when the exchange is free, so the report
     * can tell the split's own price from the exchange's. */
    if (gpu) {
      MPI_Barrier(cart);
      t0 = MPI_Wtime();
      for (int k = 0; k < k_steps; k++) {
        gw_array *a = k % 2 ? v : u, *b = k % 2 ? u : v;
        if (split_dim2 && !alone2) {
          CUDA_CHECK(d3d_cuda_interior_wait_main());
          CUDA_CHECK(d3d_cuda_stencil_interior(gw_data(a), gw_data(b), gw_strides(a), ilo, ihi, 0));
          CUDA_CHECK(d3d_cuda_stencil_shell(gw_data(a), gw_data(b), gw_strides(a), m, bw, 0));
          CUDA_CHECK(d3d_cuda_main_after_interior());
          continue;
        }
        CUDA_CHECK(d3d_cuda_main_after_interior());
        CUDA_CHECK(d3d_cuda_stencil_shell(gw_data(a), gw_data(b), gw_strides(a), m, bw, wrap2));
        CUDA_CHECK(d3d_cuda_interior_after_main());
        CUDA_CHECK(
            d3d_cuda_stencil_interior(gw_data(a), gw_data(b), gw_strides(a), ilo, ihi, wrap2));
      }
      CUDA_CHECK(d3d_cuda_sync());
      alone_split = max_over((MPI_Wtime() - t0) / k_steps, cart);
    }
#endif
    CHECK(gw_copy(u, img));
    CHECK(gw_copy(v, img));
    if (split_dim2) { /* warm the two-part plans too (first use); any exchange of v is rewritten */
      gw_halo *warm[4] = {hu01, hu2, hv01, hv2};
      for (int k = 0; k < 4; k++)
        if (warm[k]) CHECK(gw_halo_update(warm[k]));
    }
    /* each overlapped step exchanges its output: the input's halo is exchanged once here */
    CHECK(gw_halo_update(hu));
  }

  /* --graph: the eager step in this run (blocking: the overlap's reference is measured
   * above), then the fields restored; the steps at s = -2 and -1 below are the captures of
   * the two parities' steps, queued on the kernels' main stream as an eager step is,
   * whose graphs the steps from 0 on replay. */
  double eager_step = 0;
#ifdef D3D_HAVE_CUDA
  if (o.graph && !overlap) {
    int k_steps = o.steps > 0 ? o.steps : 1;
    CHECK(gw_halo_update(hu)); /* warm-up */
    MPI_Barrier(cart);
    t0 = MPI_Wtime();
    for (int k = 0; k < k_steps; k++) {
      CHECK(gw_halo_update(k % 2 ? hv : hu));
      CUDA_CHECK(
          d3d_cuda_stencil(gw_data(k % 2 ? v : u), gw_data(k % 2 ? u : v), gw_strides(u), lo, hi));
      CUDA_CHECK(d3d_cuda_sync());
    }
    eager_step = max_over((MPI_Wtime() - t0) / k_steps, cart);
    CHECK(gw_copy(u, img));
    CHECK(gw_copy(v, img));
  }
#endif
  const int graph = o.graph && gpu;
  MPI_Barrier(cart);
  double t_start = MPI_Wtime();
  for (int s = graph ? -2 : 0; s < o.steps; s++) {
    const int p = (s + 2) % 2; /* the step's parity; s < 0: the capture of that parity's step */
#ifdef D3D_HAVE_CUDA
    if (graph && s >= 0) {
      if (s == 0) { /* the captures are not part of the steps' time */
        MPI_Barrier(cart);
        t_start = MPI_Wtime();
      }
      CUDA_CHECK(d3d_cuda_graph_launch(p));
      continue;
    }
    if (graph) CUDA_CHECK(d3d_cuda_capture_begin());
#endif
    gw_halo *h = p ? hv : hu, *hb = p ? hu : hv;
    gw_halo *hb01 = p ? hu01 : hv01, *hb2 = p ? hu2 : hv2;
    gw_array *a = p ? v : u, *b = p ? u : v;
    if (overlap && gpu && split_dim2 && !alone2) {
      /* The interior (all of dim 2) after everything queued on the main stream so far: the
       * previous step's slabs and its dim-2 exchange, which wrote cells it reads. This
       * step's slabs (dims 0 and 1) and their exchange run beside it on the main stream;
       * dim 2's exchange needs the interior's cells at both ends of every row, so it
       * comes after the join (main_after_interior, which also orders the next step's
       * slabs after the cells this interior reads). Measured alternatives (H200,
       * docs/BENCHMARKS.md): dim 2's exchange on the interior stream instead, between one
       * interior and the next, so no join between streams is on the critical path: no
       * faster (1.14-1.15 against 1.13-1.14x); the latency of that one copy is the cost.
       * Captured, the step is the same: it forks the interior stream from the main one
       * first and joins it back before dim 2's exchange, inside the graph. */
#ifdef D3D_HAVE_CUDA
      CUDA_CHECK(d3d_cuda_interior_wait_main());
      CUDA_CHECK(d3d_cuda_stencil_interior(gw_data(a), gw_data(b), gw_strides(a), ilo, ihi, 0));
      CUDA_CHECK(d3d_cuda_stencil_shell(gw_data(a), gw_data(b), gw_strides(a), m, bw, 0));
      CHECK(gw_halo_start_on(hb01, main_s));
      CHECK(gw_halo_finish_on(hb01, main_s));
      CUDA_CHECK(d3d_cuda_main_after_interior());
      CHECK(gw_halo_start_on(hb2, main_s));
      CHECK(gw_halo_finish_on(hb2, main_s));
#endif
    } else if (overlap && gpu) {
      /* ParallelStencil's @hide_communication: the shell of b (the cells its faces hold)
       * on the main stream, the interior of b (which neither feeds the faces nor reads the
       * halo) on another stream, and the exchange of b's halo ordered after the shell on
       * the device (start_on); finish_on makes the main stream wait for the unpacks. The
       * host waits only for packs MPI must send (none on one rank). */
#ifdef D3D_HAVE_CUDA
      /* Captured, the step is whole within its graph: the interior stream forks from the
       * main one at its start and joins it at its end (a capture must join every stream
       * it forked; a launch of the graph runs after the previous launch as a whole, which
       * orders the slabs after the previous interior). */
      if (graph)
        CUDA_CHECK(d3d_cuda_interior_wait_main()); /* fork */
      else
        CUDA_CHECK(d3d_cuda_main_after_interior()); /* the slabs read the previous interior
                                                          and overwrite what it read */
      CUDA_CHECK(d3d_cuda_stencil_shell(gw_data(a), gw_data(b), gw_strides(a), m, bw,
                                        wrap2)); /* the six slabs (four with alone2) */
      if (!graph)
        CUDA_CHECK(d3d_cuda_interior_after_main()); /* the interior after the previous slabs */
      /* the interior is queued before start_on: start_on waits on the host for the first
       * packs to land (MPI needs them), and the GPU should not idle meanwhile */
      CUDA_CHECK(d3d_cuda_stencil_interior(gw_data(a), gw_data(b), gw_strides(a), ilo, ihi, wrap2));
      gw_halo *hidden = alone2 ? hb01 : hb; /* alone2: dim 2 has nothing to exchange */
      CHECK(gw_halo_start_on(hidden, main_s));
      CHECK(gw_halo_finish_on(hidden, main_s));
      if (graph) CUDA_CHECK(d3d_cuda_main_after_interior()); /* join */
#endif
    } else if (overlap) {
      /* The host computes: the host orders the work, so the host-ordered split phase is
       * the one to use (a stream would only add hand-offs to the backend's threads). With
       * --shell-k 0 the exchange behind the interior is dims 0 and 1's, dim 2's follows. */
      gw_halo *hidden = split_dim2 ? hb01 : hb;
      stencil_shell(gw_host_data(a), gw_host_data(b), n, bw);
      CHECK(gw_halo_start(hidden));
      stencil(gw_host_data(a), gw_host_data(b), n, ilo, ihi);
      CHECK(gw_halo_finish(hidden));
      if (split_dim2) CHECK(gw_halo_update(hb2));
    } else if (graph) {
      /* the blocking step, captured: the exchange ordered on the kernels' stream (recorded:
       * the plan's update is device work, or the call refuses the capture) */
#ifdef D3D_HAVE_CUDA
      CHECK(gw_halo_update_on(h, main_s));
      CUDA_CHECK(d3d_cuda_stencil(gw_data(a), gw_data(b), gw_strides(a), lo, hi));
#endif
    } else {
      t0 = MPI_Wtime();
      CHECK(gw_halo_update(h));
      t_halo += MPI_Wtime() - t0;
      if (o.halo_only) continue;
      t0 = MPI_Wtime();
      if (gpu) {
#ifdef D3D_HAVE_CUDA
        CUDA_CHECK(d3d_cuda_stencil(gw_data(a), gw_data(b), gw_strides(a), lo, hi));
        CUDA_CHECK(d3d_cuda_sync());
#endif
      } else {
        stencil(gw_host_data(a), gw_host_data(b), n, lo, hi);
      }
      t_sten += MPI_Wtime() - t0;
    }
#ifdef D3D_HAVE_CUDA
    if (graph) CUDA_CHECK(d3d_cuda_capture_end(p));
#endif
  }
  if (backend != GW_BACKEND_CPU) CHECK(gw_synchronize(ctx));
#ifdef D3D_HAVE_CUDA
  if (gpu) CUDA_CHECK(d3d_cuda_sync());
#endif
  if (main_s) CHECK(gw_stream_synchronize(main_s));
  double t_total = MPI_Wtime() - t_start, t_max, halo_max, sten_max;
  MPI_Reduce(&t_total, &t_max, 1, MPI_DOUBLE, MPI_MAX, 0, cart);
  MPI_Reduce(&t_halo, &halo_max, 1, MPI_DOUBLE, MPI_MAX, 0, cart);
  MPI_Reduce(&t_sten, &sten_max, 1, MPI_DOUBLE, MPI_MAX, 0, cart);
  /* The shares of a step are one rank's: the slowest's halo and stencil over its own step
   * (maxima taken over ranks separately can come from different ranks and sum past 100%). */
  struct {
    double t;
    int rank;
  } slow_in = {t_total, g_rank}, slow;
  MPI_Allreduce(&slow_in, &slow, 1, MPI_DOUBLE_INT, MPI_MAXLOC, cart);
  double slow_parts[2] = {t_sten, t_halo};
  MPI_Bcast(slow_parts, 2, MPI_DOUBLE, slow.rank, cart);
  unsigned long long sent = info.bytes_sent, sent_max;
  MPI_Reduce(&sent, &sent_max, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, 0, cart);

  if (g_rank == 0) {
    int steps = o.steps > 0 ? o.steps : 1;
    double per = t_max / steps, hper = halo_max / steps, sper = sten_max / steps;
    if (overlap) { /* the overlapped step has no separate parts: report the ones measured alone */
      hper = alone_halo;
      sper = alone_sten;
    }
    double bytes = 2.0 * 8.0 * (double)(m * m * m) * size; /* read u, write v, per cell */
    printf("diffusion3d: %d ranks (%d x %d x %d), local %lld^3, global %lld x %lld x %lld, %s, %d "
           "steps\n",
           size, dims[0], dims[1], dims[2], (long long)m, (long long)N[0], (long long)N[1],
           (long long)N[2], o.periodic ? "periodic" : "Dirichlet", o.steps);
    /* AUTO may pick per mode (ranks sharing a GPU under MPS): the host-ordered calls'
     * path, the stream-ordered calls', and the one this run's steps take */
    char halo_path[160];
    const char *shm = info.shared_memory ? " via shared memory" : "";
    if (info.path_stream_ordered == info.path)
      snprintf(halo_path, sizeof halo_path, "%s%s", gw_halo_path_name(info.path), shm);
    else
      snprintf(halo_path, sizeof halo_path,
               "%s (blocking) / %s%s (stream-ordered), AUTO per mode, this run's steps: %s",
               gw_halo_path_name(info.path), gw_halo_path_name(info.path_stream_ordered), shm,
               gw_halo_path_name(main_s ? info.path_stream_ordered : info.path));
    printf("  backend %s, memory %s, stencil %s, halo path %s (MPI GPU-aware: %s), %s\n",
           gw_backend_name(backend), gw_memkind_name(o.mem),
           o.halo_only ? "none"
           : gpu       ? "gpu (CUDA kernel)"
                       : "host",
           halo_path, info.gpu_aware ? "yes" : "no",
           o.halo_only ? "halo only"
           : graph     ? (overlap ? "overlap (stream-ordered split phase), replayed as a CUDA graph"
                                  : "blocking update_on + stencil, replayed as a CUDA graph")
           : main_s    ? "overlap (stream-ordered split phase)"
           : overlap   ? "overlap (host-ordered split phase)"
                       : "blocking update");
    if (overlap)
      printf("  overlap: boundary slabs %d x %d x %d cells thick; %s\n", bw[0], bw[1], bw[2],
             alone2 ? (o.periodic ? "dims 0 and 1 exchanged behind the interior; dim 2 needs no "
                                    "exchange (one rank along it: the kernels store its "
                                    "periodic ghost cells)"
                                  : "dims 0 and 1 exchanged behind the interior; dim 2 has no "
                                    "neighbour")
             : split_dim2
                 ? "dims 0 and 1 exchanged behind the interior, dim 2 after it (--shell-k 0)"
                 : "every dim exchanged behind the interior");
    printf("  time/step %.3f ms   effective throughput %.2f GB/s (all ranks, 16 B/cell/step)\n",
           per * 1e3, o.halo_only || per <= 0 ? 0.0 : bytes / per / 1e9);
    /* Overlapped, the parts are timed in runs of their own and run at the same time in the
     * step: as ratios to the step they sum past 1 by as much as they overlap, so they are
     * given as such, not as shares. Blocking, they are shares of the slowest rank's step. */
    char sshare[64], hshare[64];
    if (overlap) {
      snprintf(sshare, sizeof sshare, "%.2fx the overlapped step", per > 0 ? sper / per : 0.0);
      snprintf(hshare, sizeof hshare, "%.2fx the overlapped step", per > 0 ? hper / per : 0.0);
    } else {
      snprintf(sshare, sizeof sshare, "%.1f%% of the slowest rank's step",
               slow.t > 0 ? 100.0 * slow_parts[0] / slow.t : 0.0);
      snprintf(hshare, sizeof hshare, "%.1f%% of it",
               slow.t > 0 ? 100.0 * slow_parts[1] / slow.t : 0.0);
    }
    printf("  stencil/step %.3f ms%s (%s)   %.2f GB/s per rank in the stencil\n", sper * 1e3,
           overlap ? " alone" : "", sshare,
           o.halo_only || sper <= 0 ? 0.0 : bytes / size / sper / 1e9);
    printf("  halo/step %.3f ms%s (%s)   %llu bytes sent per rank per update (max)   %.2f GB/s\n",
           hper * 1e3, overlap ? " alone" : "", hshare, sent_max,
           hper > 0 ? (double)sent_max / hper / 1e9 : 0.0);
    /* t1/tN for any N (N = 1 too: the run against its own reference) */
    if (o.t1_ms > 0 && per > 0)
      printf("  weak scaling: t1 %.3f ms, t%d %.3f ms, efficiency t1/t%d = %.3f (%d ranks, %lld^3 "
             "cells each)\n",
             o.t1_ms, size, per * 1e3, size, o.t1_ms / (per * 1e3), size, (long long)m);
    if (overlap) {
      double floor = sper > hper ? sper : hper;
      printf("  overlap: time/step / max(stencil, halo) = %.3f (target <= %s); blocking would be "
             "~%.3f ms\n",
             floor > 0 ? per / floor : 0.0, graph ? "1.02 as a graph" : "1.05",
             (sper + hper) * 1e3);
      if (alone_split > 0)
        printf("  split stencil alone (shell + interior, no exchange) %.3f ms = %.3f x the stencil "
               "alone\n",
               alone_split * 1e3, sper > 0 ? alone_split / sper : 0.0);
    }
  }

  if (g_rank == 0 && graph && !overlap) {
    double per = t_max / (o.steps > 0 ? o.steps : 1);
    printf("  graph: time/step %.3f ms = %.3f x the eager blocking step in this run (%.3f ms; "
           "target <= 0.95)\n",
           per * 1e3, eager_step > 0 ? per / eager_step : 0.0, eager_step * 1e3);
  }

  int rc = 0;
  if (o.check) {
    /* gather the interiors to rank 0 (gw_grid_gather) and compare with the one-rank
     * reference computed there */
    gw_array *last = o.steps % 2 ? v : u, *glob = NULL;
    if (g_rank == 0) CHECK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT64, 3, N, &glob));
    CHECK(gw_grid_gather(grid, last, NULL, glob, 0));
    if (g_rank == 0) {
      double *ref = reference(N, o.steps, o.periodic), *all = gw_host_data(glob);
      if (!ref) MPI_Abort(MPI_COMM_WORLD, 1);
      int64_t rn[3] = {N[0] + 2, N[1] + 2, N[2] + 2}, bad = 0;
      double maxdiff = 0;
      for (int64_t i = 0; i < N[0]; i++)
        for (int64_t j = 0; j < N[1]; j++)
          for (int64_t k = 0; k < N[2]; k++) {
            double got = all[(i * N[1] + j) * N[2] + k];
            double want = ref[((i + 1) * rn[1] + j + 1) * rn[2] + k + 1];
            if (memcmp(&got, &want, sizeof got)) {
              if (!bad)
                fprintf(stderr, "check: global cell (%lld,%lld,%lld): %.17g != %.17g\n",
                        (long long)i, (long long)j, (long long)k, got, want);
              bad++;
              if (fabs(got - want) > maxdiff) maxdiff = fabs(got - want);
            }
          }
      int64_t total = N[0] * N[1] * N[2];
      if (bad) {
        printf("check: FAILED, %lld of %lld cells differ from the one-rank reference (max |diff| "
               "%.3g)\n",
               (long long)bad, (long long)total, maxdiff);
        rc = 1;
      } else {
        printf("check: ok, %lld cells equal the one-rank reference bit for bit\n",
               (long long)total);
      }
      free(ref);
    }
    gw_release(glob);
    MPI_Bcast(&rc, 1, MPI_INT, 0, cart);
  }

  gw_stream_destroy(main_s);
  gw_halo_destroy(hu);
  gw_halo_destroy(hv);
  gw_halo_destroy(hu01);
  gw_halo_destroy(hv01);
  gw_halo_destroy(hu2);
  gw_halo_destroy(hv2);
#ifdef D3D_HAVE_CUDA
  if (gpu) d3d_cuda_fini();
#endif
  gw_release(u);
  gw_release(v);
  gw_release(img);
  gw_context_destroy(ctx);
  gw_grid_destroy(grid);
  MPI_Finalize();
  return rc;
}
