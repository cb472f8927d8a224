// Probe (not part of the build): where a synchronous gw_fill's extra ~1 us over
// the bench's raw fill goes. One process, every variant interleaved rep by rep, wall clock
// (host) medians [p10..p90] of launch + synchronize:
//   A  the bench's raw fill: the PTX kernel of tools/raw_cuda.c, cuLaunchKernel + cuStreamSynchronize
//   B  gpuwrap's contiguous fill kernel (k_fill_contig's body, 5 parameters, nvcc), cuLaunchKernel
//      of its cudaGetKernel handle + cuStreamSynchronize
//   C  the same kernel, cudaLaunchKernel + cudaStreamSynchronize (gpuwrap's launch)
//   D  the same body with the raw kernel's 3 parameters, cuLaunchKernel + cuStreamSynchronize
//   E  gw_fill of a float64 view (gpuwrap's kernel path)
//   F  gw_fill of a float32 view (gpuwrap's memset path)
//   G  cuMemsetD32Async + cuStreamSynchronize
//   H  an empty kernel, cuLaunchKernel + cuStreamSynchronize (the round trip alone)
//   I  G as gw_fill's memset path calls it: cudaGetDevice + cuCtxGetCurrent + cuMemsetD32Async
//      + cudaStreamSynchronize(cudaStreamLegacy)
//   J  gwk_fill's kernel for a fill without head or tail (k_fill16: pointer, count, 16-byte
//      pattern), cudaLaunchKernel + cudaStreamSynchronize: against C, what the head and
//      tail code and two parameters cost
// and, first, the host cost of single calls (idle GPU, tight loops): cudaGetDevice,
// cuCtxGetCurrent, the two synchronizes of an idle stream, gw_pointer_query; last, the launch
// call alone of B and C (the time until it returns), to set against gw_fill's own launch.
// Variants A-H ran twice on the H200 (2026-12-01 18:50 UTC, run log in git history, commit 7f3ae15;
// the table is in docs/BENCHMARKS.md). Variant I and the single-call costs were added after
// that start, to tell which of gw_fill's runtime calls holds the rest; they have not run yet.
// Built by CMake with -DGW_PROBES=ON -DGW_CUDA=ON (tools/probes/CMakeLists.txt); run:
//   GPUWRAP_BACKEND=cuda <build>/bin/fill_gap
// With -DGW_TRACE=ON as well, the plugin's gw_fill prints its own spans at exit (exec_for
// + gwg_enter, plan + issue, synchronize, gwg_leave; src/core/trace.h), float64 fills
// (the kernel) apart from the others (the memset), as fill_trace.patch once did.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <time.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include "gpuwrap.h"

#include "../raw_fill_ptx.h" // fill_ptx: the bench's raw fill kernel

struct alignas(16) V16 {
  uint64_t a, b;
};
__device__ __forceinline__ char body_byte(V16 body, uint64_t k) {
  uint64_t w = (k & 8) ? body.b : body.a;
  return (char)(w >> (8 * (k & 7)));
}
__global__ void __launch_bounds__(256)
    kfill5(char *p, uint32_t head, uint64_t n16, uint32_t tail, V16 body) {
  uint64_t gid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  char *b = p + head;
  V16 *q = reinterpret_cast<V16 *>(b);
  for (uint64_t i = gid; i < n16; i += (uint64_t)gridDim.x * blockDim.x) q[i] = body;
  if (gid < head) p[gid] = body_byte(body, 16 - head + gid);
  if (gid < tail) b[16 * n16 + gid] = body_byte(body, gid);
}
__global__ void kfill3(char *p, uint64_t n16, uint32_t w) {
  uint64_t gid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  uint4 v = make_uint4(w, w, w, w);
  uint4 *q = reinterpret_cast<uint4 *>(p);
  for (uint64_t i = gid; i < n16; i += (uint64_t)gridDim.x * blockDim.x) q[i] = v;
}
// gwk_fill's kernel for fills without a head or tail (kernels.cu's k_fill16): 3 parameters,
// the pattern as 16 bytes.
__global__ void __launch_bounds__(256) kfill16(V16 *q, uint64_t n16, V16 body) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n16;
       i += (uint64_t)gridDim.x * blockDim.x)
    q[i] = body;
}
__global__ void kempty() {}

static double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
#define CKC(x)                                  \
  do {                                          \
    CUresult r_ = (x);                          \
    if (r_ != CUDA_SUCCESS) {                   \
      fprintf(stderr, "%s: %d\n", #x, (int)r_); \
      return 1;                                 \
    }                                           \
  } while (0)
#define CKR(x)                                               \
  do {                                                       \
    cudaError_t r_ = (x);                                    \
    if (r_ != cudaSuccess) {                                 \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorName(r_)); \
      return 1;                                              \
    }                                                        \
  } while (0)
#define CKG(x)                                          \
  do {                                                  \
    gw_status s_ = (x);                                 \
    if (s_ != GW_OK) {                                  \
      fprintf(stderr, "%s: %s\n", #x, gw_last_error()); \
      return 1;                                         \
    }                                                   \
  } while (0)

int main() {
  gw_context *ctx;
  CKG(gw_context_create(GW_BACKEND_CUDA, 0, &ctx));
  CKR(cudaFree(0));
  CUmodule mod;
  CUfunction raw;
  CKC(cuModuleLoadData(&mod, fill_ptx));
  CKC(cuModuleGetFunction(&raw, mod, "gw_raw_fill16"));
  cudaKernel_t k5, k3, ke;
  CKR(cudaGetKernel(&k5, (const void *)kfill5));
  CKR(cudaGetKernel(&k3, (const void *)kfill3));
  CKR(cudaGetKernel(&ke, (const void *)kempty));
  const size_t total = 64u << 20;
  char *p;
  CKR(cudaMalloc(&p, total));
  int64_t n64 = (int64_t)(total / 8), n32 = (int64_t)(total / 4);
  gw_array *a64, *a32;
  CKG(gw_wrap(ctx, p, GW_FLOAT64, 1, &n64, NULL, 0, &a64));
  CKG(gw_wrap(ctx, p, GW_FLOAT32, 1, &n32, NULL, 0, &a32));
  const char *names[] = {
      "A raw PTX, cuLaunch+cuSync",          "B nvcc 5-param, cuLaunch+cuSync",
      "C nvcc 5-param, cudaLaunch+cudaSync", "D nvcc 3-param, cuLaunch+cuSync",
      "E gw_fill float64 (kernel)",          "F gw_fill float32 (memset)",
      "G cuMemsetD32Async+cuSync",           "H empty kernel, cuLaunch+cuSync",
      "I G as gw_fill calls it (runtime)",   "J nvcc (ptr,n16,V16), cudaLaunch+cudaSync"};
  const int NV = 10;
  {
    const int N = 200000;
    int dev;
    CUcontext cur;
    gw_ptrinfo info = {sizeof info};
    const char *what[] = {"cudaGetDevice",
                          "cuCtxGetCurrent",
                          "cudaStreamSynchronize(legacy), idle",
                          "cuStreamSynchronize(NULL), idle",
                          "gw_pointer_query(device pointer)",
                          "cudaGetLastError"};
    for (int rep = 0; rep < 2; rep++)
      for (int k = 0; k < 6; k++) {
        double t0 = now();
        for (int i = 0; i < N; i++) {
          switch (k) {
          case 0: (void)cudaGetDevice(&dev); break;
          case 1: (void)cuCtxGetCurrent(&cur); break;
          case 2: (void)cudaStreamSynchronize(cudaStreamLegacy); break;
          case 3: (void)cuStreamSynchronize(NULL); break;
          case 4: (void)gw_pointer_query(ctx, p, &info); break;
          case 5: (void)cudaGetLastError(); break;
          }
        }
        printf("call %-40s %7.1f ns\n", what[k], (now() - t0) / N * 1e3);
      }
  }
  size_t sizes[] = {4096, 4u << 20, 16u << 20};
  for (size_t n : sizes) {
    const int reps = 600;
    std::vector<std::vector<double>> t(NV, std::vector<double>(reps)),
        tlaunch(NV, std::vector<double>(reps));
    CUdeviceptr dp = (CUdeviceptr)(uintptr_t)p;
    unsigned long long n16 = n / 16;
    unsigned w = 0x3fc00000u;
    uint32_t h = 0, tl = 0;
    V16 body = {0x3ff8000000000000ull, 0x3ff8000000000000ull};
    void *a3[] = {&dp, &n16, &w};
    char *pp = p;
    void *a5[] = {&pp, &h, &n16, &tl, &body};
    V16 *qq = reinterpret_cast<V16 *>(p);
    void *a16[] = {&qq, &n16, &body};
    unsigned grid = (unsigned)std::min<unsigned long long>((n16 + 255) / 256, 132 * 8);
    if (!grid) grid = 1;
    int64_t z = 0, e64 = (int64_t)(n / 8), e32 = (int64_t)(n / 4);
    gw_array *v64, *v32;
    CKG(gw_view(a64, &z, &e64, NULL, &v64));
    CKG(gw_view(a32, &z, &e32, NULL, &v32));
    const double d = 1.5;
    const float f = 1.5f;
    for (int r = -30; r < reps; r++) {
      for (int k0 = 0; k0 < NV; k0++) {
        int k = (k0 + (r < 0 ? 0 : r)) % NV; // rotate the order rep by rep
        double t0 = now(), tmid = -1;
        switch (k) {
        case 0:
          CKC(cuLaunchKernel(raw, grid, 1, 1, 256, 1, 1, 0, NULL, a3, NULL));
          CKC(cuStreamSynchronize(NULL));
          break;
        case 1:
          CKC(cuLaunchKernel((CUfunction)k5, grid, 1, 1, 256, 1, 1, 0, NULL, a5, NULL));
          tmid = now();
          CKC(cuStreamSynchronize(NULL));
          break;
        case 2:
          CKR(cudaLaunchKernel((const void *)kfill5, dim3(grid), dim3(256), a5, 0,
                               cudaStreamLegacy));
          tmid = now();
          CKR(cudaStreamSynchronize(cudaStreamLegacy));
          break;
        case 3:
          CKC(cuLaunchKernel((CUfunction)k3, grid, 1, 1, 256, 1, 1, 0, NULL, a3, NULL));
          CKC(cuStreamSynchronize(NULL));
          break;
        case 4: CKG(gw_fill(v64, &d)); break;
        case 5: CKG(gw_fill(v32, &f)); break;
        case 6:
          CKC(cuMemsetD32Async(dp, w, n / 4, NULL));
          CKC(cuStreamSynchronize(NULL));
          break;
        case 7:
          CKC(cuLaunchKernel((CUfunction)ke, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
          CKC(cuStreamSynchronize(NULL));
          break;
        case 9:
          CKR(cudaLaunchKernel((const void *)kfill16, dim3(grid), dim3(256), a16, 0,
                               cudaStreamLegacy));
          CKR(cudaStreamSynchronize(cudaStreamLegacy));
          break;
        case 8: {
          int dv;
          CUcontext cc;
          CKR(cudaGetDevice(&dv));
          CKC(cuCtxGetCurrent(&cc));
          CKC(cuMemsetD32Async(dp, w, n / 4, (CUstream)cudaStreamLegacy));
          CKR(cudaStreamSynchronize(cudaStreamLegacy));
          break;
        }
        }
        double t1 = now();
        if (r >= 0) t[k][r] = t1 - t0;
        if (r >= 0 && tmid > 0) tlaunch[k][r] = tmid - t0;
      }
    }
    printf("%zu bytes (grid %u): host wall clock us, median [p10..p90] of %d, interleaved\n", n,
           grid, reps);
    for (int k = 0; k < NV; k++) {
      std::sort(t[k].begin(), t[k].end());
      printf("  %-38s %7.2f [%6.2f..%6.2f]\n", names[k], t[k][reps / 2], t[k][reps / 10],
             t[k][reps * 9 / 10]);
    }
    for (int k = 1; k <= 2; k++) { // the launch call alone, of B and C (the rest is the sync)
      std::sort(tlaunch[k].begin(), tlaunch[k].end());
      printf("  %c: its launch call alone%15s %7.2f [%6.2f..%6.2f]\n", names[k][0], "",
             tlaunch[k][reps / 2], tlaunch[k][reps / 10], tlaunch[k][reps * 9 / 10]);
    }
    gw_release(v64);
    gw_release(v32);
  }
  gw_release(a64);
  gw_release(a32);
  cudaFree(p);
  gw_context_destroy(ctx);
  return 0;
}
