// Probe (not part of the build): what cutting a 1 MiB pinned DMA into 2, 4 or 8 costs (the
// staging pipeline's chunks), with and without an event after each piece, on the legacy
// and on a non-blocking stream: GPU time between events around them, the host's time to
// issue them, and issue to synchronised. Results (H200, 2026-12-01): docs/BENCHMARKS.md,
// "closing session".
//   nvcc -O3 -arch=sm_90 -o staging_dma tools/probes/staging_dma.cu && ./staging_dma
#include <cstdio>
#include <chrono>
#include <cuda_runtime.h>
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count() * 1e6; }
int main() {
  const size_t MB = 1 << 20;
  char *h, *d; cudaHostAlloc(&h, 16 * MB, cudaHostAllocMapped | cudaHostAllocPortable); cudaMalloc(&d, 16 * MB);
  cudaStream_t nb; cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
  cudaEvent_t e0, e1, ev[8]; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 8; i++) cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming);
  for (int rep = 0; rep < 2; rep++)
  for (int dir = 0; dir < 2; dir++)
  for (int sidx = 0; sidx < 2; sidx++) {
    cudaStream_t s = sidx ? nb : cudaStreamLegacy;
    for (int v = 0; v < 5; v++) {
      int k = v == 0 ? 1 : v == 1 ? 4 : v == 2 ? 4 : v == 3 ? 2 : 8; int evs = v == 2 || v == 3 || v == 4;
      size_t part = MB / k;
      double gsum = 0, hsum = 0, tsum = 0; const int N = 300;
      for (int it = 0; it < N; it++) {
        cudaEventRecord(e0, s);
        double a = now();
        for (int c = 0; c < k; c++) {
          if (dir == 0) cudaMemcpyAsync(d + c * part, h + c * part, part, cudaMemcpyHostToDevice, s);
          else cudaMemcpyAsync(h + c * part, d + c * part, part, cudaMemcpyDeviceToHost, s);
          if (evs) cudaEventRecord(ev[c], s);
        }
        double b = now();
        cudaEventRecord(e1, s); cudaEventSynchronize(e1);
        double c2 = now();
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        gsum += ms * 1e3; hsum += b - a; tsum += c2 - a;
      }
      printf("rep %d %s %s %d x %4zu KiB%s: GPU %.1f us, host issue %.1f us, issue->synced %.1f us\n", rep, dir ? "D2H" : "H2D",
             sidx ? "nonblocking" : "legacy     ", k, part >> 10, evs ? " +event each" : "            ", gsum / N, hsum / N, tsum / N);
    }
  }
  return 0;
}
