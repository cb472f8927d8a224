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
 * four with --shell-k 0, when dim 2's exchange follows the interior) runs on the main stream, at the highest priority, which the halo plan borrows
 * (gw_stream_wrap of d3d_cuda_stream()): the plan packs after it and makes the stream wait
 * for its unpacks (a plan without messages queues its copies on the stream itself), all on
 * the device; the interior runs on a second stream meanwhile, joined by events.
 */
#include <cuda.h> /* types of the driver's stream memory operations (no link: see below) */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

__global__ void __launch_bounds__(BX *BY)
    stencil_kernel(const double *__restrict__ u, double *__restrict__ v, int64_t sx, int64_t sy,
                   int64_t sz, int64_t lo0, int64_t lo1, int64_t lo2, int64_t hi1, int64_t hi2) {
  int64_t k = lo2 + (int64_t)blockIdx.x * BX + threadIdx.x;
  int64_t j = lo1 + (int64_t)blockIdx.y * BY + threadIdx.y;
  int64_t i = lo0 + (int64_t)blockIdx.z;
  if (j >= hi1 || k >= hi2) return;
  int64_t c = i * sx + j * sy + k * sz;
  v[c] = u[c] + R * ((u[c - sx] + u[c + sx]) + (u[c - sy] + u[c + sy]) + (u[c - sz] + u[c + sz]) -
                     6.0 * u[c]);
}

/* The six slabs of a box's shell (diffusion3d.c's shell_box), as one launch: a 1-D grid
 * over their cells, slab after slab, the contiguous dim fastest within each. */
struct Shell {
  int64_t lo[6][3], ext[6][3];
  int64_t first[7]; /* cells before slab q; first[6]: all */
};

__global__ void __launch_bounds__(256)
    shell_kernel(const double *__restrict__ u, double *__restrict__ v, int64_t sx, int64_t sy,
                 int64_t sz, const Shell sh) {
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
    v[c] = u[c] + R * ((u[c - sx] + u[c + sx]) + (u[c - sy] + u[c + sy]) + (u[c - sz] + u[c + sz]) -
                       6.0 * u[c]);
  }
}

/*
 * --overlap-by signal: the whole stencil in ONE launch whose blocks take the boundary tiles
 * first (the tiles holding a cell the halo exchange reads: any cell on a face of the box),
 * then the rest. Each boundary block, once its cells are written, counts itself; the last
 * one sets a flag word in device memory, on which the main stream waits
 * (cuStreamWaitValue32) before the exchange: the exchange starts while the kernel still
 * computes the inner tiles, and the stencil is not cut into separately launched pieces
 * (which cost 1.115x the one-kernel stencil by themselves: docs/HALO.md). Tiles are 32
 * cells along dim 2 so that the two tiles of a row holding its ends are a quarter of it.
 * The count and the flag are reset by the device (the last block, the main stream after
 * its wait), so a captured step replays as it ran.
 */
constexpr int OBX = 32, OBY = 8;

__global__ void __launch_bounds__(OBX *OBY)
    ordered_kernel(const double *__restrict__ u, double *__restrict__ v, int64_t sx, int64_t sy,
                   int64_t sz, const uint32_t *__restrict__ tiles, uint32_t nboundary,
                   uint32_t ntj, uint32_t ntk, int64_t m, unsigned *count, unsigned *flag) {
  uint32_t t = tiles[blockIdx.x];
  int64_t k = 1 + (int64_t)(t % ntk) * OBX + threadIdx.x;
  int64_t j = 1 + (int64_t)((t / ntk) % ntj) * OBY + threadIdx.y;
  int64_t i = 1 + (int64_t)(t / ntk / ntj);
  if (j <= m && k <= m) {
    int64_t c = i * sx + j * sy + k * sz;
    v[c] = u[c] + R * ((u[c - sx] + u[c + sx]) + (u[c - sy] + u[c + sy]) + (u[c - sz] + u[c + sz]) -
                       6.0 * u[c]);
  }
  if (blockIdx.x >= nboundary) return;
  __threadfence(); /* this thread's cell, visible device-wide before the block counts */
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && atomicAdd(count, 1u) == nboundary - 1) {
    atomicExch(count, 0u); /* every boundary block has counted: ready for the next step */
    __threadfence();
    atomicExch(flag, 1u);
  }
}

/* The ordered launch's state: the tile list (boundary tiles first), the count and flag
 * words, and the driver's stream memory operations, taken from the driver through the
 * runtime (cudaGetDriverEntryPointByVersion): the example never links libcuda, so it
 * starts on machines without a driver (the CPU backend's runs). */
struct Signal {
  int64_t m;
  uint32_t *tiles;
  uint32_t ntiles, nboundary, ntj, ntk;
  unsigned *words; /* [0] count, [1] flag */
  CUresult (*wait32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  CUresult (*write32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
} g_sig;

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
  if (g_sig.tiles) cudaFree(g_sig.tiles);
  if (g_sig.words) cudaFree(g_sig.words);
  g_sig = Signal{};
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
                  const int64_t lo[3], const int64_t hi[3]) {
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
                                         lo[2], hi[1], hi[2]);
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? 0 : fail(err, "stencil kernel launch");
}

int d3d_cuda_stencil(const double *u, double *v, const int64_t strides[3], const int64_t lo[3],
                     const int64_t hi[3]) {
  return launch(g_stream, u, v, strides, lo, hi);
}

/* The boundary of [1, m+1)^3, bw[d] cells thick along dim d (the six slabs of
 * diffusion3d.c's shell_box), on the main stream, in ONE launch. */
int d3d_cuda_stencil_shell(const double *u, double *v, const int64_t strides[3], int64_t m,
                           const int bw[3]) {
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
  shell_kernel<<<(unsigned)blocks, 256, 0, g_stream>>>(u, v, strides[0], strides[1], strides[2],
                                                       sh);
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? 0 : fail(err, "shell kernel launch");
}

/* As d3d_cuda_stencil, on the interior stream (--overlap). */
int d3d_cuda_stencil_interior(const double *u, double *v, const int64_t strides[3],
                              const int64_t lo[3], const int64_t hi[3]) {
  return launch(g_interior, u, v, strides, lo, hi);
}

/* --overlap-by signal: prepare the ordered launch of an m^3 box ([1, m] per dim). 0, or -1
 * (the driver lacks the stream memory operations, or out of memory). */
int d3d_cuda_signal_init(int64_t m) {
  if (g_sig.tiles && g_sig.m == m) return 0;
  cudaError_t e;
  cudaDriverEntryPointQueryResult q;
  void *fn = NULL;
  if (!g_sig.wait32) {
    if ((e = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault,
                                              &q)) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return fail(e, "cudaGetDriverEntryPointByVersion(cuStreamWaitValue32)");
    g_sig.wait32 = (CUresult(*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int))fn;
    if ((e = cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault,
                                              &q)) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return fail(e, "cudaGetDriverEntryPointByVersion(cuStreamWriteValue32)");
    g_sig.write32 = (CUresult(*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int))fn;
  }
  uint32_t ntj = (uint32_t)((m + OBY - 1) / OBY), ntk = (uint32_t)((m + OBX - 1) / OBX);
  uint64_t n = (uint64_t)m * ntj * ntk;
  if (n > 0x7fffffffu) {
    snprintf(g_err, sizeof g_err, "d3d_cuda_signal_init: %lld^3 is too large for one launch",
             (long long)m);
    return -1;
  }
  uint32_t *host = (uint32_t *)malloc(n * sizeof *host);
  if (!host) {
    snprintf(g_err, sizeof g_err, "d3d_cuda_signal_init: out of host memory");
    return -1;
  }
  uint32_t nb = 0, ni = 0;
  for (int pass = 0; pass < 2; pass++) /* boundary tiles, then the others */
    for (uint32_t t = 0; t < n; t++) {
      uint32_t tk = t % ntk, tj = (t / ntk) % ntj, ti = t / ntk / ntj;
      int edge = ti == 0 || ti == m - 1 || tj == 0 || tj == ntj - 1 || tk == 0 || tk == ntk - 1;
      if (pass == 0 && edge) host[nb++] = t;
      if (pass == 1 && !edge) host[nb + ni++] = t;
    }
  if (g_sig.tiles) cudaFree(g_sig.tiles);
  g_sig.tiles = NULL;
  e = cudaMalloc((void **)&g_sig.tiles, n * sizeof *host);
  if (e == cudaSuccess) e = cudaMemcpy(g_sig.tiles, host, n * sizeof *host, cudaMemcpyHostToDevice);
  free(host);
  if (e != cudaSuccess) return fail(e, "d3d_cuda_signal_init: the tile list");
  if (!g_sig.words) {
    if ((e = cudaMalloc((void **)&g_sig.words, 2 * sizeof(unsigned))) != cudaSuccess)
      return fail(e, "cudaMalloc (count and flag)");
    if ((e = cudaMemset(g_sig.words, 0, 2 * sizeof(unsigned))) != cudaSuccess)
      return fail(e, "cudaMemset (count and flag)");
  }
  g_sig.m = m;
  g_sig.ntiles = (uint32_t)n;
  g_sig.nboundary = nb;
  g_sig.ntj = ntj;
  g_sig.ntk = ntk;
  return 0;
}

/* The boundary tiles' share of the ordered launch (for the report). */
double d3d_cuda_signal_boundary_share(void) {
  return g_sig.ntiles ? (double)g_sig.nboundary / g_sig.ntiles : 0.0;
}

/* --overlap-by signal: the whole stencil of u -> v on the interior stream, after
 * everything queued on the main stream so far (the previous exchange wrote the halo it
 * reads), boundary tiles first; then the main stream waits (on the device) until the
 * boundary tiles are written and clears the flag. What the caller queues on the main
 * stream next (the exchange of v's halo) runs beside the rest of the kernel. */
int d3d_cuda_stencil_signalled(const double *u, double *v, const int64_t strides[3]) {
  if (d3d_cuda_interior_wait_main()) return -1;
  ordered_kernel<<<g_sig.ntiles, dim3(OBX, OBY, 1), 0, g_interior>>>(
      u, v, strides[0], strides[1], strides[2], g_sig.tiles, g_sig.nboundary, g_sig.ntj,
      g_sig.ntk, g_sig.m, &g_sig.words[0], &g_sig.words[1]);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return fail(err, "ordered stencil kernel launch");
  CUdeviceptr flag = (CUdeviceptr)(uintptr_t)&g_sig.words[1];
  CUresult r = g_sig.wait32((CUstream)g_stream, flag, 1, CU_STREAM_WAIT_VALUE_GEQ);
  if (r == CUDA_SUCCESS) r = g_sig.write32((CUstream)g_stream, flag, 0, 0);
  if (r != CUDA_SUCCESS) {
    snprintf(g_err, sizeof g_err, "cuStreamWaitValue32/cuStreamWriteValue32: CUresult %d",
             (int)r);
    return -1;
  }
  return 0;
}

/* Wait for the device: every kernel launched here and anything else on it. 0 or -1. */
int d3d_cuda_sync(void) {
  cudaError_t e = cudaDeviceSynchronize();
  return e == cudaSuccess ? 0 : fail(e, "cudaDeviceSynchronize");
}

} /* extern "C" */
