// Probe (not part of the build): the contiguous fill kernel's own speed, device time only.
// At 256 MiB - 1 GiB gw_fill float64 (k_fill_contig) runs at 0.97-0.99x of the bench's raw
// PTX fill while gw_fill float32 (the driver's memset) runs at 1.05x of it, so the kernel
// itself leaves bandwidth unused. Each variant fills the same buffer; one sample is R
// back-to-back launches between two events on one stream (no host round trip in the
// time); variants interleaved sample by sample; median [min..max] GB/s of the samples:
//   P   the bench's raw fill (tools/raw_cuda.c's PTX, grid capped at SMs x 8 blocks of 256)
//   K0  k_fill_contig's loop without its head and tail, on gwk_fill's grid until now
//       (grid-stride, capped at SMs x 8)
//   K1  K0 with streaming stores (st.global.cs)
//   K2  K0 unrolled: 4 stores per loop trip, a grid apart
//   K3  one 16-byte store per thread, no grid-stride (grid = n16 / 256)
//   K4  4 stores per thread, 256 apart within the block's 4096 words (grid = n16 / 1024)
//   K5  K4 with streaming stores
//   K6  grid-stride, capped at SMs x 4
//   M   cuMemsetD32Async
// Build and run on the GPU machine from the repository root:
//   nvcc -O3 -arch=sm_90 -o fill_kernels tools/probes/fill_kernels.cu -lcuda && ./fill_kernels
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>

#include "../raw_fill_ptx.h" // fill_ptx: the bench's raw fill kernel

struct alignas(16) V16 { uint64_t a, b; };

__device__ __forceinline__ void st(V16 *q, V16 v, bool cs) {
  if (cs) {
    int4 w;
    w.x = (int)v.a; w.y = (int)(v.a >> 32); w.z = (int)v.b; w.w = (int)(v.b >> 32);
    __stcs(reinterpret_cast<int4 *>(q), w);
  } else {
    *q = v;
  }
}

template <bool CS>
__global__ void __launch_bounds__(256) k_stride(V16 *q, uint64_t n16, V16 body) {
  uint64_t gid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  for (uint64_t i = gid; i < n16; i += (uint64_t)gridDim.x * blockDim.x) st(q + i, body, CS);
}

__global__ void __launch_bounds__(256) k_unroll4(V16 *q, uint64_t n16, V16 body) {
  uint64_t g = (uint64_t)gridDim.x * blockDim.x;
  uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  for (; i + 3 * g < n16; i += 4 * g) {
    q[i] = body; q[i + g] = body; q[i + 2 * g] = body; q[i + 3 * g] = body;
  }
  for (; i < n16; i += g) q[i] = body;
}

__global__ void __launch_bounds__(256) k_one(V16 *q, uint64_t n16, V16 body) {
  uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (i < n16) q[i] = body;
}

template <bool CS>
__global__ void __launch_bounds__(256) k_four(V16 *q, uint64_t n16, V16 body) {
  uint64_t base = blockIdx.x * 1024ull + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; k++)
    if (base + 256 * k < n16) st(q + base + 256 * k, body, CS);
}

#define CK(x) do { auto e_ = (x); if (e_) { fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)e_); exit(1); } } while (0)

int main() {
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CUmodule mod;
  CUfunction raw;
  CK(cuModuleLoadData(&mod, fill_ptx));
  CK(cuModuleGetFunction(&raw, mod, "gw_raw_fill16"));
  const size_t maxb = (size_t)1 << 30;
  char *buf;
  CK(cudaMalloc(&buf, maxb));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const char *names[] = {"P  raw PTX, cap SMs x 8", "K0 k_fill_contig, cap SMs x 8", "K1 K0 + st.cs",
                         "K2 K0 unrolled x4", "K3 1 store/thread, no cap", "K4 4 stores/thread, no cap",
                         "K5 K4 + st.cs", "K6 grid-stride, cap SMs x 4", "M  cuMemsetD32Async"};
  const int NV = 9, SAMPLES = 25;
  V16 body = {0x3ff0000000000000ull, 0x3ff0000000000000ull};
  uint32_t word = 0x3f800000u;
  printf("device time per fill, GB/s median [min..max] of %d samples, variants interleaved\n", SAMPLES);
  for (size_t mb : {4, 16, 64, 256, 1024}) {
    size_t bytes = mb << 20;
    uint64_t n16 = bytes / 16;
    int R = mb <= 16 ? 20 : mb <= 256 ? 5 : 2;
    unsigned cap8 = (unsigned)sms * 8, cap4 = (unsigned)sms * 4;
    auto capped = [&](unsigned cap) { uint64_t b = (n16 + 255) / 256; return (unsigned)std::max<uint64_t>(1, std::min<uint64_t>(b, cap)); };
    std::vector<std::vector<double>> t(NV);
    for (int smp = 0; smp < SAMPLES + 2; smp++) {
      for (int v = 0; v < NV; v++) {
        CK(cudaEventRecord(e0, s));
        for (int r = 0; r < R; r++) {
          V16 *q = (V16 *)buf;
          switch (v) {
          case 0: {
            CUdeviceptr d = (CUdeviceptr)buf;
            unsigned long long n = n16;
            void *args[3] = {&d, &n, &word};
            CK(cuLaunchKernel(raw, capped(cap8), 1, 1, 256, 1, 1, 0, (CUstream)s, args, NULL));
            break;
          }
          case 1: k_stride<false><<<capped(cap8), 256, 0, s>>>(q, n16, body); break;
          case 2: k_stride<true><<<capped(cap8), 256, 0, s>>>(q, n16, body); break;
          case 3: k_unroll4<<<capped(cap8), 256, 0, s>>>(q, n16, body); break;
          case 4: k_one<<<(unsigned)((n16 + 255) / 256), 256, 0, s>>>(q, n16, body); break;
          case 5: k_four<false><<<(unsigned)((n16 + 1023) / 1024), 256, 0, s>>>(q, n16, body); break;
          case 6: k_four<true><<<(unsigned)((n16 + 1023) / 1024), 256, 0, s>>>(q, n16, body); break;
          case 7: k_stride<false><<<capped(cap4), 256, 0, s>>>(q, n16, body); break;
          case 8: CK(cuMemsetD32Async((CUdeviceptr)buf, word, bytes / 4, (CUstream)s)); break;
          }
        }
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (smp >= 2) t[v].push_back(bytes * (double)R / (ms * 1e-3) / 1e9);
      }
    }
    printf("%zu MiB (R=%d):\n", mb, R);
    for (int v = 0; v < NV; v++) {
      std::sort(t[v].begin(), t[v].end());
      printf("  %-30s %8.1f [%7.1f..%7.1f]  %.3fx P\n", names[v], t[v][t[v].size() / 2], t[v].front(),
             t[v].back(), t[v][t[v].size() / 2] / t[0][t[0].size() / 2]);
    }
  }
  // every variant wrote the whole buffer: check the last one's first and last words
  uint32_t w[2];
  CK(cudaMemcpy(&w[0], buf, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&w[1], buf + maxb - 4, 4, cudaMemcpyDeviceToHost));
  printf("check: %08x %08x (want 3f800000)\n", w[0], w[1]);
  return 0;
}
