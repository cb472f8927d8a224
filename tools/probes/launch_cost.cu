// Probe (not part of the build): the host cost of the runtime's kernel launch
// (cudaLaunchKernel, gpuwrap's fill path) against the driver's (cuLaunchKernel of the same
// function, the bench's raw fill), and launch + synchronize round trips of an empty kernel
// and of a 4 MiB fill. Results (H200, 2026-12-01): docs/BENCHMARKS.md, "closing session".
//   nvcc -O3 -arch=sm_90 -o launch_cost tools/probes/launch_cost.cu -lcuda && ./launch_cost
#include <cstdio>
#include <cstdint>
#include <chrono>
#include <cuda.h>
#include <cuda_runtime.h>
struct alignas(16) V16 { uint64_t a, b; };
__global__ void kempty() {}
__global__ void __launch_bounds__(256) kfill(char *p, uint32_t head, uint64_t n16, uint32_t tail, V16 body) {
  uint64_t gid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  V16 *q = reinterpret_cast<V16 *>(p + head);
  for (uint64_t i = gid; i < n16; i += (uint64_t)gridDim.x * blockDim.x) q[i] = body;
}
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  cudaFree(0);
  cudaFunction_t fe, ff;
  cudaGetFuncBySymbol(&fe, (const void *)kempty);
  cudaGetFuncBySymbol(&ff, (const void *)kfill);
  char *p; size_t bytes = 4 << 20; cudaMalloc(&p, 64 << 20);
  uint32_t h = 0, t = 0; uint64_t n16 = bytes / 16; V16 body = {1, 2};
  void *fa[] = {&p, &h, &n16, &t, &body};
  unsigned grid = (unsigned)((n16 + 255) / 256); if (grid > 1056) grid = 1056;
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int rep = 0; rep < 3; rep++) {
    const int N = 20000;
    double t0 = now();
    for (int i = 0; i < N; i++) cudaLaunchKernel((const void *)kempty, dim3(1), dim3(32), nullptr, 0, cudaStreamLegacy);
    double t1 = now(); cudaDeviceSynchronize();
    double t2 = now();
    for (int i = 0; i < N; i++) cuLaunchKernel((CUfunction)fe, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_LEGACY, nullptr, nullptr);
    double t3 = now(); cudaDeviceSynchronize();
    printf("rep %d: launch host cost: runtime %.0f ns, driver %.0f ns\n", rep, (t1 - t0) / N * 1e9, (t3 - t2) / N * 1e9);
    const int M = 3000;
    for (int v = 0; v < 4; v++) {
      double best = 1e9, sum = 0; float gsum = 0;
      for (int i = 0; i < M; i++) {
        cudaEventRecord(e0, cudaStreamLegacy);
        double a = now();
        if (v == 0) cudaLaunchKernel((const void *)kfill, dim3(grid), dim3(256), fa, 0, cudaStreamLegacy);
        else if (v == 1) cuLaunchKernel((CUfunction)ff, grid, 1, 1, 256, 1, 1, 0, CU_STREAM_LEGACY, fa, nullptr);
        else if (v == 2) cudaLaunchKernel((const void *)kempty, dim3(1), dim3(32), nullptr, 0, cudaStreamLegacy);
        else cuLaunchKernel((CUfunction)fe, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_LEGACY, nullptr, nullptr);
        if (v % 2 == 0) cudaStreamSynchronize(cudaStreamLegacy); else cuStreamSynchronize(CU_STREAM_LEGACY);
        double b = now();
        cudaEventRecord(e1, cudaStreamLegacy); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); gsum += ms;
        sum += b - a; if (b - a < best) best = b - a;
      }
      const char *nm[] = {"fill 4 MiB runtime launch+sync", "fill 4 MiB driver launch+sync", "empty runtime launch+sync", "empty driver launch+sync"};
      printf("rep %d: %-34s host mean %.2f us min %.2f us, event-timed mean %.2f us\n", rep, nm[v], sum / M * 1e6, best * 1e6, gsum / M * 1e3);
    }
  }
  return 0;
}
