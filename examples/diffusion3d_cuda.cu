/*
 * diffusion3d_cuda.cu: the GPU stencil of diffusion3d (built only when CUDA is available).
 *
 * The kernel computes, for every cell of a box [lo, hi) of a 3-D float64 array, exactly the
 * expression of the host stencil in diffusion3d.c, in the same order of operations:
 *
 *   v[c] = u[c] + R * ((u[c-sx] + u[c+sx]) + (u[c-sy] + u[c+sy]) + (u[c-sz] + u[c+sz]) - 6.0 * u[c])
 *
 * This file is compiled with -fmad=false (the nvcc counterpart of the host's
 * -ffp-contract=off): no multiply-add is fused, every operation is one IEEE-754 rounding,
 * so the GPU field equals the host reference bit for bit.
 *
 * The arrays come from gpuwrap (gw_data(): a device-usable address; gw_strides(): element
 * strides). gpuwrap's CUDA plugin links its own (static) CUDA runtime; this file uses the
 * shared one. Both work in the device's primary context, so pointers are shared; this
 * runtime is pointed at the gpuwrap context's device by d3d_cuda_init.
 *
 * Kernels run on non-blocking streams of their own, so they never serialise with the
 * copies gpuwrap's halo exchange makes. With --overlap the shell (six slabs, one launch;
 * four with --shell-k 0, when dim 2's exchange follows the interior or, with one rank
 * along dim 2, is not needed: wrap2) runs on the main stream, at the highest priority,
 * which the halo plan borrows
 * (gw_stream_wrap of d3d_cuda_stream()): the plan packs after it and makes the stream wait
 * for its unpacks (a plan without messages queues its copies on the stream itself), all on
 * the device; the interior runs on a second stream meanwhile, joined by events.
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>

#define R 0.125 /* D*dt/h^2: the same constant as diffusion3d.c */

namespace {

cudaStream_t g_stream;   /* shell slabs and blocking steps; handed to the halo plan (borrowed) */
cudaStream_t g_interior; /* the interior kernel of --overlap, concurrent with the exchange */
cudaEvent_t g_ev_slabs, g_ev_interior; /* joins of the two streams, on the device */
cudaGraphExec_t g_exec[2];             /* --graph: the step of each parity (u->v, v->u) */
char g_err[256];

int fail(cudaError_t e, const char *what) {
  snprintf(g_err, sizeof g_err, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  return -1;
}

/* Threads: x along dim 2 (the contiguous one), y along dim 1, grid z along dim 0. */
constexpr int BX = 64, BY = 4;

/* A rank that is its own neighbour along dim 2 (periodic, dim 2 not split over ranks) has
 * ghost cells k = 0 and m+1 equal to its cells m and 1: with wrap2 = m the kernel that
 * computes cell 1 or m also stores it in the ghost cell across, so dim 2 needs no
 * exchange at all (and the step no join before one). 0: no such stores. */
__device__ __forceinline__ void store(double *__restrict__ v, int64_t c, int64_t k, int64_t sz,
                                      int64_t wrap2, double x) {
  v[c] = x;
  if (wrap2) {
    if (k == 1) v[c + wrap2 * sz] = x;
    if (k == wrap2) v[c - wrap2 * sz] = x;
  }
}

__global__ void __launch_bounds__(BX *BY)
    stencil_kernel(const double *__restrict__ u, double *__restrict__ v, int64_t sx, int64_t sy,
                   int64_t sz, int64_t lo0, int64_t lo1, int64_t lo2, int64_t hi1, int64_t hi2,
                   int64_t wrap2) {
  int64_t k = lo2 + (int64_t)blockIdx.x * BX + threadIdx.x;
  int64_t j = lo1 + (int64_t)blockIdx.y * BY + threadIdx.y;
  int64_t i = lo0 + (int64_t)blockIdx.z;
  if (j >= hi1 || k >= hi2) return;
  int64_t c = i * sx + j * sy + k * sz;
  store(v, c, k, sz, wrap2,
        u[c] + R * ((u[c - sx] + u[c + sx]) + (u[c - sy] + u[c + sy]) + (u[c - sz] + u[c + sz]) -
                    6.0 * u[c]));
}

/* The six slabs of a box's shell (diffusion3d.c's shell_box), as one launch: a 1-D grid
 * over their cells, slab after slab, the contiguous dim fastest within each. */
struct Shell {
  int64_t lo[6][3], ext[6][3];
  int64_t first[7]; /* cells before slab q; first[6]: all */
};

__global__ void __launch_bounds__(256)
    shell_kernel(const double *__restrict__ u, double *__restrict__ v, int64_t sx, int64_t sy,
                 int64_t sz, const Shell sh, int64_t wrap2) {
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < sh.first[6];
       t += (int64_t)gridDim.x * blockDim.x) {
    int q = 0;
    while (t >= sh.first[q + 1]) q++;
    uint32_t r = (uint32_t)(t - sh.first[q]); /* a slab has < 2^32 cells: 32-bit divisions */
    uint32_t e2 = (uint32_t)sh.ext[q][2], e1 = (uint32_t)sh.ext[q][1];
    int64_t k = sh.lo[q][2] + r % e2;
    r /= e2;
    int64_t j = sh.lo[q][1] + r % e1;
    int64_t i = sh.lo[q][0] + r / e1;
    int64_t c = i * sx + j * sy + k * sz;
    store(v, c, k, sz, wrap2,
          u[c] + R * ((u[c - sx] + u[c + sx]) + (u[c - sy] + u[c + sy]) + (u[c - sz] + u[c + sz]) -
                      6.0 * u[c]));
  }
}

} // namespace

extern "C" {

/* The last failure's text. */
const char *d3d_cuda_error(void) { return g_err; }

/* Use `device` (the gpuwrap context's device) in this runtime and make the kernels' stream.
 * 0 on success, -1 (see d3d_cuda_error). */
int d3d_cuda_init(int device) {
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return fail(e, "cudaSetDevice");
  /* The main stream (shell and exchange, the critical path of --overlap) at the highest
   * priority: its blocks are scheduled ahead of the interior's waiting ones, so the
   * exchange does not queue behind a kernel that fills the GPU. */
  int least = 0, greatest = 0;
  if ((e = cudaDeviceGetStreamPriorityRange(&least, &greatest)) != cudaSuccess)
    return fail(e, "cudaDeviceGetStreamPriorityRange");
  if (!g_stream &&
      (e = cudaStreamCreateWithPriority(&g_stream, cudaStreamNonBlocking, greatest)) != cudaSuccess)
    return fail(e, "cudaStreamCreateWithPriority");
  if (!g_interior &&
      (e = cudaStreamCreateWithFlags(&g_interior, cudaStreamNonBlocking)) != cudaSuccess)
    return fail(e, "cudaStreamCreateWithFlags");
  /* timing-free events: a join costs a record and a device-side wait, nothing more */
  if (!g_ev_slabs &&
      (e = cudaEventCreateWithFlags(&g_ev_slabs, cudaEventDisableTiming)) != cudaSuccess)
    return fail(e, "cudaEventCreateWithFlags");
  if (!g_ev_interior &&
      (e = cudaEventCreateWithFlags(&g_ev_interior, cudaEventDisableTiming)) != cudaSuccess)
    return fail(e, "cudaEventCreateWithFlags");
  return 0;
}

/* Release the streams and events (after a final d3d_cuda_sync). */
void d3d_cuda_fini(void) {
  for (int k = 0; k < 2; k++)
    if (g_exec[k]) cudaGraphExecDestroy(g_exec[k]);
  g_exec[0] = g_exec[1] = 0;
  if (g_ev_slabs) cudaEventDestroy(g_ev_slabs);
  if (g_ev_interior) cudaEventDestroy(g_ev_interior);
  if (g_interior) cudaStreamDestroy(g_interior);
  if (g_stream) cudaStreamDestroy(g_stream);
  g_stream = g_interior = 0;
  g_ev_slabs = g_ev_interior = 0;
}

/* The main stream's native handle, for gw_stream_wrap (the halo plan orders its packs
 * after the slabs queued here and makes it wait for the unpacks). */
void *d3d_cuda_stream(void) { return (void *)g_stream; }

/* --overlap joins, on the device (no host wait). Call after queueing a step's slabs: the
 * interior stream waits for the PREVIOUS step's slabs (they read the cells this step's
 * interior overwrites; this step's slabs write only the shell, so the interior runs
 * alongside them and the exchange), then the event moves to this step's slabs. A wait on
 * an event never recorded (step 0) waits for nothing. */
int d3d_cuda_interior_after_main(void) {
  cudaError_t e = cudaStreamWaitEvent(g_interior, g_ev_slabs, 0);
  if (e == cudaSuccess) e = cudaEventRecord(g_ev_slabs, g_stream);
  return e == cudaSuccess ? 0 : fail(e, "joining the interior stream");
}
/* --overlap with --shell-k 0: the interior stream waits for everything queued on the main
 * stream so far (the previous step's slabs and its dim-2 exchange, which wrote cells the
 * interior reads); the slabs queued after this run beside the interior. */
int d3d_cuda_interior_wait_main(void) {
  cudaError_t e = cudaEventRecord(g_ev_slabs, g_stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(g_interior, g_ev_slabs, 0);
  return e == cudaSuccess ? 0 : fail(e, "joining the interior stream");
}
/* The main stream waits for the interior queued so far (the next step's slabs read it and
 * overwrite what it read). */
int d3d_cuda_main_after_interior(void) {
  cudaError_t e = cudaEventRecord(g_ev_interior, g_interior);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(g_stream, g_ev_interior, 0);
  return e == cudaSuccess ? 0 : fail(e, "joining the main stream");
}

/* --graph: capture the main stream (global mode, as torch.cuda.graph: gpuwrap's own runtime
 * calls run in the relaxed mode and leave it valid), then end the capture and instantiate
 * the step of parity `slot`, replayed by d3d_cuda_graph_launch(slot) on the main stream. */
int d3d_cuda_capture_begin(void) {
  cudaError_t e = cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal);
  return e == cudaSuccess ? 0 : fail(e, "cudaStreamBeginCapture");
}
int d3d_cuda_capture_end(int slot) {
  cudaGraph_t g = 0;
  cudaError_t e = cudaStreamEndCapture(g_stream, &g);
  if (e != cudaSuccess) return fail(e, "cudaStreamEndCapture");
  if (g_exec[slot]) cudaGraphExecDestroy(g_exec[slot]);
  g_exec[slot] = 0;
  e = cudaGraphInstantiate(&g_exec[slot], g, 0);
  cudaGraphDestroy(g); /* the executable graph holds what it needs */
  return e == cudaSuccess ? 0 : fail(e, "cudaGraphInstantiate");
}
int d3d_cuda_graph_launch(int slot) {
  cudaError_t e = cudaGraphLaunch(g_exec[slot], g_stream);
  return e == cudaSuccess ? 0 : fail(e, "cudaGraphLaunch");
}

/* cudaMemcpy (any direction, cudaMemcpyDefault): the raw copy stage of --halo-bench. */
int d3d_cuda_memcpy(void *dst, const void *src, size_t bytes) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  return e == cudaSuccess ? 0 : fail(e, "cudaMemcpy");
}

/* Launch v = u + R*laplacian(u) on cells [lo, hi) of float64 arrays whose element strides
 * are `strides` (u and v alike, halo included); asynchronous. 0, or -1 on a launch error. */
static int launch(cudaStream_t st, const double *u, double *v, const int64_t strides[3],
                  const int64_t lo[3], const int64_t hi[3], int64_t wrap2) {
  int64_t e0 = hi[0] - lo[0], e1 = hi[1] - lo[1], e2 = hi[2] - lo[2];
  if (e0 <= 0 || e1 <= 0 || e2 <= 0) return 0;
  if (e0 > 65535 || (e1 + BY - 1) / BY > 65535) {
    snprintf(g_err, sizeof g_err, "d3d_cuda_stencil: box %lld x %lld x %lld too large for the grid",
             (long long)e0, (long long)e1, (long long)e2);
    return -1;
  }
  dim3 block(BX, BY, 1);
  dim3 grid((unsigned)((e2 + BX - 1) / BX), (unsigned)((e1 + BY - 1) / BY), (unsigned)e0);
  stencil_kernel<<<grid, block, 0, st>>>(u, v, strides[0], strides[1], strides[2], lo[0], lo[1],
                                         lo[2], hi[1], hi[2], wrap2);
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? 0 : fail(err, "stencil kernel launch");
}

int d3d_cuda_stencil(const double *u, double *v, const int64_t strides[3], const int64_t lo[3],
                     const int64_t hi[3]) {
  return launch(g_stream, u, v, strides, lo, hi, 0);
}

/* The boundary of [1, m+1)^3, bw[d] cells thick along dim d (the six slabs of
 * diffusion3d.c's shell_box), on the main stream, in ONE launch. wrap2: m to store the
 * cells k = 1 and m in the periodic ghost cells across as well (stencil_kernel), else 0. */
int d3d_cuda_stencil_shell(const double *u, double *v, const int64_t strides[3], int64_t m,
                           const int bw[3], int64_t wrap2) {
  Shell sh;
  int64_t total = 0;
  for (int d = 0, q = 0; d < 3; d++)
    for (int side = 0; side < 2; side++, q++) {
      for (int e = 0; e < 3; e++) { /* slab d: whole along dims after d, inner before */
        sh.lo[q][e] = e < d ? 1 + bw[e] : 1;
        sh.ext[q][e] = e < d ? m - 2 * bw[e] : m;
      }
      sh.lo[q][d] = side ? m + 1 - bw[d] : 1;
      sh.ext[q][d] = bw[d];
      sh.first[q] = total;
      total += sh.ext[q][0] * sh.ext[q][1] * sh.ext[q][2];
    }
  sh.first[6] = total;
  if (total <= 0) return 0;
  int64_t blocks = (total + 255) / 256;
  if (blocks > 65535) blocks = 65535;
  shell_kernel<<<(unsigned)blocks, 256, 0, g_stream>>>(u, v, strides[0], strides[1], strides[2], sh,
                                                       wrap2);
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? 0 : fail(err, "shell kernel launch");
}

/* As d3d_cuda_stencil, on the interior stream (--overlap); wrap2 as for the shell. */
int d3d_cuda_stencil_interior(const double *u, double *v, const int64_t strides[3],
                              const int64_t lo[3], const int64_t hi[3], int64_t wrap2) {
  return launch(g_interior, u, v, strides, lo, hi, wrap2);
}

/* Wait for the device: every kernel launched here and anything else on it. 0 or -1. */
int d3d_cuda_sync(void) {
  cudaError_t e = cudaDeviceSynchronize();
  return e == cudaSuccess ? 0 : fail(e, "cudaDeviceSynchronize");
}

} /* extern "C" */
