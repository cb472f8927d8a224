/*
 * diffusion3d: explicit 3-D heat diffusion (7-point stencil, float64) on a global grid
 * split over MPI ranks, with gpuwrap arrays and the gpuwrap halo exchange.
 *
 *   mpirun -np 4 ./diffusion3d -n 64 -s 100 --check
 *
 * Each rank owns an n^3 block of the global grid (MPI_Dims_create picks the rank grid, so
 * the global grid is dims*n), held with a halo of one cell in two arrays u and v (one halo
 * plan each). A step is: exchange u's halo, v = u + r*laplacian(u), swap. Boundaries are
 * Dirichlet (u = 0 outside: the boundary halo cells are set to 0 and the exchange never
 * writes them) or, with --periodic, periodic.
 *
 * Where the stencil runs (--stencil auto|host|gpu):
 *   gpu   a CUDA kernel (diffusion3d_cuda.cu, built when CUDA is available: D3D_HAVE_CUDA)
 *         on gw_data() of the arrays, which are device memory by default. The default when
 *         the context's backend is CUDA and the example has the kernel. Each step is: halo
 *         exchange (complete when it returns), kernel, device synchronize.
 *   host  through gw_host_data(). On the CPU backend the arrays are pageable host memory;
 *         on another GPU backend (HIP, or CUDA with --stencil host, or a build without the
 *         kernel) they are managed memory by default (the halo copies run on the GPU, the
 *         stencil on the host). --mem device with the host stencil needs --halo-only (the
 *         stencil is skipped: only the exchange of device arrays is timed).
 *
 * The initial condition is a function of the global coordinate only, and every cell is
 * computed by the same function in the same order of operations, so the field on N ranks
 * equals the one-rank result bit for bit; --check verifies that (gathers the field to rank
 * 0 and runs a one-rank reference there, on the whole global grid). The GPU kernel computes
 * the same expression in the same order with no fused multiply-add (-fmad=false, as
 * -ffp-contract=off here), so --check holds for it too.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpuwrap.h"
#include "gpuwrap/halo.h"

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
#define HAVE_KERNEL 1
#else
#define HAVE_KERNEL 0
#endif

enum { STENCIL_AUTO, STENCIL_HOST, STENCIL_GPU };

typedef struct {
  int64_t n;        /* local interior extent per dim */
  int steps;
  int periodic;
  int check;
  int overlap;      /* split-phase update, interior computed while the halo is in flight */
  int halo_only;
  gw_memkind mem;   /* GW_MEM_UNKNOWN: pick from the backend */
  gw_halo_path path;
  int stencil;      /* STENCIL_*: AUTO picks the GPU kernel on the CUDA backend when built */
} options;

static const char weak_note[] =
    "Weak scaling: keep -n (cells per rank) fixed and run on 1 and on N ranks (one GPU each),\n"
    "  e.g. mpirun -np 1 diffusion3d -n 256 -s 100 --periodic, then -np N with the same -n;\n"
    "  efficiency(N) = t1 / tN, t = the \"time/step\" line of each run (1.0 = perfect: the\n"
    "  global grid grows with N, the work per rank does not). --periodic gives every rank the\n"
    "  same halo traffic, so N = 1 already pays for the exchange (local copies).\n";

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s [options]\n"
          "  -n N            local grid per rank: N^3 cells (default 64)\n"
          "  -s S            time steps (default 100)\n"
          "  --periodic      periodic boundaries (default: Dirichlet, u = 0 outside)\n"
          "  --check         gather the field to rank 0 and compare it, bit for bit, with a\n"
          "                  one-rank reference computed there\n"
          "  --overlap       split-phase halo update: compute the interior while it is in flight\n"
          "  --halo-only     skip the stencil: time the halo exchange alone\n"
          "  --stencil S     auto | host | gpu: where the stencil runs (default auto: the CUDA\n"
          "                  kernel when the backend is CUDA and this build has it (%s), else host)\n"
          "  --mem KIND      host | pinned | managed | device (default: device for the GPU stencil,\n"
          "                  host on the CPU backend, managed otherwise; device with the host\n"
          "                  stencil needs --halo-only)\n"
          "  --path P        auto | host | device: halo data path (default auto)\n"
          "  --weak          print the weak-scaling note below and exit\n"
          "  -h, --help      this text\n"
          "Output: time/step (device synchronized each step), stencil and halo time/step,\n"
          "effective memory throughput (16 B per cell per step: read u, write v), bytes sent per\n"
          "rank per halo update.\n"
          "Environment: GPUWRAP_BACKEND=cpu|cuda|hip; GPUWRAP_HALO_GPU_AWARE=0|1. Each rank uses\n"
          "device (node-local rank mod device count).\n"
          "%s",
          argv0, HAVE_KERNEL ? "built" : "not built", weak_note);
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){.n = 64, .steps = 100, .mem = GW_MEM_UNKNOWN, .path = GW_HALO_PATH_AUTO, .stencil = STENCIL_AUTO};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
    if (!strcmp(a, "--weak")) return 3;
    if (!strcmp(a, "--periodic")) o->periodic = 1;
    else if (!strcmp(a, "--check")) o->check = 1;
    else if (!strcmp(a, "--overlap")) o->overlap = 1;
    else if (!strcmp(a, "--halo-only")) o->halo_only = 1;
    else if (val && !strcmp(a, "-n")) o->n = atoll(argv[++i]);
    else if (val && !strcmp(a, "-s")) o->steps = atoi(argv[++i]);
    else if (val && !strcmp(a, "--mem")) {
      static const char *names[] = {"", "host", "pinned", "device", "managed"};
      o->mem = (gw_memkind)-1;
      for (int k = 1; k <= 4; k++)
        if (!strcmp(val, names[k])) o->mem = (gw_memkind)k;
      i++;
      if ((int)o->mem < 0) return -1;
    } else if (val && !strcmp(a, "--path")) {
      o->path = !strcmp(val, "host") ? GW_HALO_PATH_HOST : !strcmp(val, "device") ? GW_HALO_PATH_DEVICE
              : !strcmp(val, "auto") ? GW_HALO_PATH_AUTO : (gw_halo_path)-1;
      i++;
      if ((int)o->path < 0) return -1;
    } else if (val && !strcmp(a, "--stencil")) {
      o->stencil = !strcmp(val, "auto") ? STENCIL_AUTO : !strcmp(val, "host") ? STENCIL_HOST
                 : !strcmp(val, "gpu") ? STENCIL_GPU : -1;
      i++;
      if (o->stencil < 0) return -1;
    } else return -1;
  }
  return o->n >= 3 && o->steps >= 0 ? 0 : -1;
}

/* ---- the numerics: shared by the distributed run and the reference --------------------- */

#define R 0.125 /* D*dt/h^2, stable below 1/6 */

static double initial(int64_t gx, int64_t gy, int64_t gz, const int64_t N[3]) {
  double x = (gx + 0.5) / N[0] - 0.5, y = (gy + 0.5) / N[1] - 0.5, z = (gz + 0.5) / N[2] - 0.5;
  return exp(-40.0 * (x * x + y * y + z * z)) + 0.25 * (double)((gx * 7 + gy * 3 + gz) % 5);
}

/* v = u + R*laplacian(u) on cells [lo, hi) of arrays with extents n (halo of one included),
 * C order. Every cell is computed by this one expression, wherever it runs. */
static void stencil(const double *restrict u, double *restrict v, const int64_t n[3], const int64_t lo[3],
                    const int64_t hi[3]) {
  const int64_t sy = n[2], sx = n[1] * n[2];
  for (int64_t i = lo[0]; i < hi[0]; i++)
    for (int64_t j = lo[1]; j < hi[1]; j++)
      for (int64_t k = lo[2]; k < hi[2]; k++) {
        int64_t c = i * sx + j * sy + k;
        v[c] = u[c] + R * ((u[c - sx] + u[c + sx]) + (u[c - sy] + u[c + sy]) + (u[c - 1] + u[c + 1]) - 6.0 * u[c]);
      }
}

/* The cells of [1, m+1)^3 outside [2, m)^3 (the ones that read halo cells) are six slabs;
 * slab (d, side) is [lo, hi). */
static void shell_box(int d, int side, int64_t m, int64_t lo[3], int64_t hi[3]) {
  for (int e = 0; e < 3; e++) {
    /* slab d: the whole extent along dims after d, the inner part along dims before */
    lo[e] = e < d ? 2 : 1;
    hi[e] = e < d ? m : m + 1;
  }
  lo[d] = side ? m : 1;
  hi[d] = side ? m + 1 : 2;
}

static void stencil_shell(const double *u, double *v, const int64_t n[3]) {
  int64_t m = n[0] - 2;
  for (int d = 0; d < 3; d++)
    for (int side = 0; side < 2; side++) {
      int64_t lo[3], hi[3];
      shell_box(d, side, m, lo, hi);
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
      for (int64_t k = 1; k <= N[2]; k++) u[(i * n[1] + j) * n[2] + k] = initial(i - 1, j - 1, k - 1, N);
  const int64_t lo[3] = {1, 1, 1}, hi[3] = {N[0] + 1, N[1] + 1, N[2] + 1};
  for (int s = 0; s < steps; s++) {
    if (periodic) /* the faces are all a 7-point stencil reads */
      for (int64_t i = 0; i < n[0]; i++)
        for (int64_t j = 0; j < n[1]; j++)
          for (int64_t k = 0; k < n[2]; k++) {
            int64_t a = i, b = j, c = k;
            int out = (a == 0 || a == n[0] - 1) + (b == 0 || b == n[1] - 1) + (c == 0 || c == n[2] - 1);
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

static int g_rank;

#define CHECK(expr)                                                                         \
  do {                                                                                      \
    gw_status st_ = (expr);                                                                 \
    if (st_ != GW_OK) {                                                                     \
      fprintf(stderr, "[rank %d] %s failed: %s: %s%s%s\n", g_rank, #expr, gw_err_name(st_),    \
              gw_last_error(), *gw_halo_last_error() ? " / halo: " : "", gw_halo_last_error()); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
    }                                                                                       \
  } while (0)

#ifdef D3D_HAVE_CUDA
#define CUDA_CHECK(expr)                                                                    \
  do {                                                                                      \
    if ((expr) != 0) {                                                                      \
      fprintf(stderr, "[rank %d] %s failed: %s\n", g_rank, #expr, d3d_cuda_error());         \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
    }                                                                                       \
  } while (0)
#endif

static int local_rank(void) {
  MPI_Comm node;
  int r;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &r);
  MPI_Comm_free(&node);
  return r;
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
      if (pr == 3) fputs(weak_note, stdout);
      else usage(pr > 0 ? stdout : stderr, argv[0]);
    }
    MPI_Finalize();
    return pr > 0 ? 0 : 2;
  }

  /* context: AUTO (or GPUWRAP_BACKEND), one device per node-local rank */
  gw_context *ctx;
  int lr = local_rank(), ndev = 0;
  CHECK(gw_context_create(GW_BACKEND_AUTO, 0, &ctx));
  gw_backend backend = gw_context_backend(ctx);
  if (gw_backend_device_count(backend, &ndev) == GW_OK && ndev > 1) {
    gw_context_destroy(ctx);
    CHECK(gw_context_create(backend, lr % ndev, &ctx));
  }

  /* the stencil: the CUDA kernel when the backend is CUDA and this build has it */
  if (o.stencil == STENCIL_GPU && (!HAVE_KERNEL || backend != GW_BACKEND_CUDA)) {
    if (g_rank == 0)
      fprintf(stderr, "--stencil gpu: %s\n", !HAVE_KERNEL ? "this build has no CUDA stencil (built without CUDA)"
                                                           : "needs the CUDA backend (GPUWRAP_BACKEND=cuda)");
    gw_context_destroy(ctx);
    MPI_Finalize();
    return 2;
  }
  const int gpu = o.stencil == STENCIL_GPU || (o.stencil == STENCIL_AUTO && HAVE_KERNEL && backend == GW_BACKEND_CUDA);
  if (o.mem == GW_MEM_UNKNOWN)
    o.mem = gpu ? GW_MEM_DEVICE : backend == GW_BACKEND_CPU ? GW_MEM_HOST : GW_MEM_MANAGED;
#ifdef D3D_HAVE_CUDA
  if (gpu) CUDA_CHECK(d3d_cuda_init(gw_context_device(ctx)));
#endif

  int dims[3] = {0, 0, 0}, periods[3] = {o.periodic, o.periodic, o.periodic}, coords[3];
  MPI_Comm cart;
  MPI_Dims_create(size, 3, dims);
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
  MPI_Cart_coords(cart, g_rank, 3, coords);
  const int64_t m = o.n, N[3] = {dims[0] * m, dims[1] * m, dims[2] * m};
  const int64_t n[3] = {m + 2, m + 2, m + 2}, cells = n[0] * n[1] * n[2];

  /* u and v in the chosen memory, initialised through a host image */
  gw_array *u, *v, *img;
  CHECK(gw_alloc(ctx, o.mem, GW_FLOAT64, 3, n, &u));
  CHECK(gw_alloc(ctx, o.mem, GW_FLOAT64, 3, n, &v));
  CHECK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT64, 3, n, &img));
  if (!o.halo_only && gpu && (!gw_data(u) || !gw_data(v))) {
    if (g_rank == 0)
      fprintf(stderr, "--mem %s: the GPU cannot reach this memory; use --mem device, managed or pinned\n",
              gw_memkind_name(o.mem));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (!o.halo_only && !gpu && (!gw_host_data(u) || !gw_host_data(v))) {
    if (g_rank == 0)
      fprintf(stderr, "--mem %s: the host cannot compute on this memory; use --stencil gpu (CUDA), "
                      "--mem managed, or --halo-only\n", gw_memkind_name(o.mem));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  double *h0 = gw_host_data(img);
  memset(h0, 0, (size_t)cells * sizeof *h0); /* Dirichlet: boundary halo cells stay 0 */
  for (int64_t i = 1; i <= m; i++)
    for (int64_t j = 1; j <= m; j++)
      for (int64_t k = 1; k <= m; k++)
        h0[(i * n[1] + j) * n[2] + k] = initial(coords[0] * m + i - 1, coords[1] * m + j - 1, coords[2] * m + k - 1, N);
  CHECK(gw_copy(u, img));
  CHECK(gw_copy(v, img));

  const int width[3] = {1, 1, 1};
  gw_halo *hu, *hv;
  CHECK(gw_halo_create(u, cart, width, o.path, &hu));
  CHECK(gw_halo_create(v, cart, width, o.path, &hv));
  gw_halo_info info;
  CHECK(gw_halo_query(hu, &info));

  const int64_t lo[3] = {1, 1, 1}, hi[3] = {m + 1, m + 1, m + 1};
  const int64_t ilo[3] = {2, 2, 2}, ihi[3] = {m, m, m};
  /* Per step: the halo exchange (complete when it returns), then the stencil; with the GPU
   * kernel the device is synchronized before the step ends, so the times are the GPU's. With
   * --overlap the interior kernel runs while gw_halo_finish is in flight: its time then
   * counts as halo time, and stencil time is the launch plus the shell and the sync. */
  double t_halo = 0, t_sten = 0, t0;
#ifdef D3D_HAVE_CUDA
  if (gpu && !o.halo_only) { /* warm-up: loads the kernel (lazy loading); step 0 rewrites v */
    CUDA_CHECK(d3d_cuda_stencil(gw_data(u), gw_data(v), gw_strides(u), lo, hi));
    CUDA_CHECK(d3d_cuda_sync());
  }
#endif
  MPI_Barrier(cart);
  double t_start = MPI_Wtime();
  for (int s = 0; s < o.steps; s++) {
    gw_halo *h = s % 2 ? hv : hu;
    gw_array *a = s % 2 ? v : u, *b = s % 2 ? u : v;
    if (o.overlap && !o.halo_only) {
      t0 = MPI_Wtime();
      CHECK(gw_halo_start(h));
      t_halo += MPI_Wtime() - t0;
      t0 = MPI_Wtime();
      if (gpu) {
#ifdef D3D_HAVE_CUDA
        CUDA_CHECK(d3d_cuda_stencil(gw_data(a), gw_data(b), gw_strides(a), ilo, ihi));
#endif
      } else {
        stencil(gw_host_data(a), gw_host_data(b), n, ilo, ihi);
      }
      t_sten += MPI_Wtime() - t0;
      t0 = MPI_Wtime();
      CHECK(gw_halo_finish(h));
      t_halo += MPI_Wtime() - t0;
      t0 = MPI_Wtime();
      if (gpu) {
#ifdef D3D_HAVE_CUDA
        for (int d = 0; d < 3; d++)
          for (int side = 0; side < 2; side++) {
            int64_t slo[3], shi[3];
            shell_box(d, side, m, slo, shi);
            CUDA_CHECK(d3d_cuda_stencil(gw_data(a), gw_data(b), gw_strides(a), slo, shi));
          }
        CUDA_CHECK(d3d_cuda_sync());
#endif
      } else {
        stencil_shell(gw_host_data(a), gw_host_data(b), n);
      }
      t_sten += MPI_Wtime() - t0;
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
  }
  if (backend != GW_BACKEND_CPU) CHECK(gw_synchronize(ctx));
#ifdef D3D_HAVE_CUDA
  if (gpu) CUDA_CHECK(d3d_cuda_sync());
#endif
  double t_total = MPI_Wtime() - t_start, t_max, halo_max, sten_max;
  MPI_Reduce(&t_total, &t_max, 1, MPI_DOUBLE, MPI_MAX, 0, cart);
  MPI_Reduce(&t_halo, &halo_max, 1, MPI_DOUBLE, MPI_MAX, 0, cart);
  MPI_Reduce(&t_sten, &sten_max, 1, MPI_DOUBLE, MPI_MAX, 0, cart);
  unsigned long long sent = info.bytes_sent, sent_max;
  MPI_Reduce(&sent, &sent_max, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, 0, cart);

  if (g_rank == 0) {
    int steps = o.steps > 0 ? o.steps : 1;
    double per = t_max / steps, hper = halo_max / steps, sper = sten_max / steps;
    double bytes = 2.0 * 8.0 * (double)(m * m * m) * size; /* read u, write v, per cell */
    printf("diffusion3d: %d ranks (%d x %d x %d), local %lld^3, global %lld x %lld x %lld, %s, %d steps\n",
           size, dims[0], dims[1], dims[2], (long long)m, (long long)N[0], (long long)N[1], (long long)N[2],
           o.periodic ? "periodic" : "Dirichlet", o.steps);
    printf("  backend %s, memory %s, stencil %s, halo path %s (MPI GPU-aware: %s), %s\n", gw_backend_name(backend),
           gw_memkind_name(o.mem), o.halo_only ? "none" : gpu ? "gpu (CUDA kernel)" : "host",
           gw_halo_path_name(info.path), info.gpu_aware ? "yes" : "no",
           o.halo_only ? "halo only" : o.overlap ? "split-phase overlap" : "blocking update");
    printf("  time/step %.3f ms   effective throughput %.2f GB/s (all ranks, 16 B/cell/step)\n", per * 1e3,
           o.halo_only || per <= 0 ? 0.0 : bytes / per / 1e9);
    printf("  stencil/step %.3f ms (%.1f%% of the step)   %.2f GB/s per rank in the stencil\n", sper * 1e3,
           per > 0 ? 100.0 * sper / per : 0.0, o.halo_only || sper <= 0 ? 0.0 : bytes / size / sper / 1e9);
    printf("  halo/step %.3f ms (%.1f%% of the step)   %llu bytes sent per rank per update (max)   %.2f GB/s\n",
           hper * 1e3, per > 0 ? 100.0 * hper / per : 0.0, sent_max, hper > 0 ? (double)sent_max / hper / 1e9 : 0.0);
  }

  int rc = 0;
  if (o.check) {
    /* gather the interiors to rank 0 and compare with the one-rank reference */
    gw_array *last = o.steps % 2 ? v : u;
    CHECK(gw_copy(img, last));
    double *mine = malloc((size_t)(m * m * m) * sizeof *mine), *all = NULL;
    int64_t mm = m * m * m;
    if (!mine) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < m; j++)
        memcpy(mine + (i * m + j) * m, h0 + ((i + 1) * n[1] + j + 1) * n[2] + 1, (size_t)m * sizeof *mine);
    if (mm > 1 << 30 || (g_rank == 0 && !(all = malloc((size_t)(mm * size) * sizeof *all))))
      MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Gather(mine, (int)mm, MPI_DOUBLE, all, (int)mm, MPI_DOUBLE, 0, cart);
    if (g_rank == 0) {
      double *ref = reference(N, o.steps, o.periodic);
      if (!ref) MPI_Abort(MPI_COMM_WORLD, 1);
      int64_t rn[3] = {N[0] + 2, N[1] + 2, N[2] + 2}, bad = 0;
      double maxdiff = 0;
      for (int r = 0; r < size; r++) {
        int c[3];
        MPI_Cart_coords(cart, r, 3, c);
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < m; j++)
            for (int64_t k = 0; k < m; k++) {
              double got = all[r * mm + (i * m + j) * m + k];
              double want = ref[((c[0] * m + i + 1) * rn[1] + c[1] * m + j + 1) * rn[2] + c[2] * m + k + 1];
              if (memcmp(&got, &want, sizeof got)) {
                if (!bad) fprintf(stderr, "check: rank %d cell (%lld,%lld,%lld): %.17g != %.17g\n", r, (long long)i,
                                  (long long)j, (long long)k, got, want);
                bad++;
                if (fabs(got - want) > maxdiff) maxdiff = fabs(got - want);
              }
            }
      }
      if (bad) {
        printf("check: FAILED, %lld of %lld cells differ from the one-rank reference (max |diff| %.3g)\n",
               (long long)bad, (long long)(mm * size), maxdiff);
        rc = 1;
      } else {
        printf("check: ok, %lld cells equal the one-rank reference bit for bit\n", (long long)(mm * size));
      }
      free(ref);
    }
    free(mine);
    free(all);
    MPI_Bcast(&rc, 1, MPI_INT, 0, cart);
  }

  gw_halo_destroy(hu);
  gw_halo_destroy(hv);
#ifdef D3D_HAVE_CUDA
  if (gpu) d3d_cuda_fini();
#endif
  gw_release(u);
  gw_release(v);
  gw_release(img);
  gw_context_destroy(ctx);
  MPI_Comm_free(&cart);
  MPI_Finalize();
  return rc;
}
