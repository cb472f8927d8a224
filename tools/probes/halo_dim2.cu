// Probe (not part of the build): what the dim-2 (contiguous dim) periodic halo copy of
// diffusion3d --overlap costs after the interior kernel, and what would cut it. 258^3
// float64 (256^3 + halo), the example's stencil kernel, one stream unless the variant says
// otherwise; each variant 300 steps timed with CUDA events, three repetitions. Results
// (H200, 2026-12-01): docs/BENCHMARKS.md, "closing session".
//   nvcc -O3 -arch=sm_90 -o halo_dim2 tools/probes/halo_dim2.cu && ./halo_dim2
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
constexpr int N = 258;
constexpr long SX = (long)N * N, SY = N;
constexpr double R = 0.1;
constexpr int BX = 64, BY = 4;

__global__ void __launch_bounds__(BX *BY) sten(const double *__restrict__ u, double *__restrict__ v, long lo0, long lo1, long lo2, long hi1, long hi2, int fuse) {
  long k = lo2 + (long)blockIdx.x * BX + threadIdx.x, j = lo1 + (long)blockIdx.y * BY + threadIdx.y, i = lo0 + blockIdx.z;
  if (j >= hi1 || k >= hi2) return;
  long c = i * SX + j * SY + k;
  double r = u[c] + R * ((u[c - SX] + u[c + SX]) + (u[c - SY] + u[c + SY]) + (u[c - 1] + u[c + 1]) - 6.0 * u[c]);
  v[c] = r;
  if (fuse) {
    if (k == 1) v[c + N - 2] = r;
    if (k == N - 2) v[c - (N - 2)] = r;
  }
}
// like the library's batch: two items, each its own blocks, one element per thread
__global__ void copy_items(double *v, int nb) {
  int item = blockIdx.x >= nb;
  long row = (long)(blockIdx.x - item * nb) * blockDim.x + threadIdx.x;
  if (row >= (long)N * N) return;
  double *p = v + row * N;
  if (item == 0) p[0] = p[N - 2];
  else p[N - 1] = p[1];
}
template <int PDL> __global__ void copy_row(double *v, long r0 = 0, long r1 = (long)N * N) {
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  long row = r0 + (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= r1) return;
  double *p = v + row * N;
  double a = p[N - 2], b = p[1];
  p[0] = a;
  p[N - 1] = b;
}

int main() {
  size_t bytes = sizeof(double) * N * N * N;
  double *u, *v;
  CK(cudaMalloc(&u, bytes));
  CK(cudaMalloc(&v, bytes));
  double *h = (double *)malloc(bytes);
  for (size_t i = 0; i < (size_t)N * N * N; i++) h[i] = rand() / (double)RAND_MAX;
  CK(cudaMemcpy(u, h, bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(v, h, bytes, cudaMemcpyHostToDevice));
  cudaStream_t s, s2;
  int lo, hi;
  CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t e0, e1, ja, jb;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  CK(cudaEventCreateWithFlags(&ja, cudaEventDisableTiming)); CK(cudaEventCreateWithFlags(&jb, cudaEventDisableTiming));
  dim3 blk(BX, BY), grd_full((256 + BX - 1) / BX, 256 / BY, 256), grd_int((256 + BX - 1) / BX, 254 / BY + 1, 254);
  int rows = N * N, nb = (rows + 255) / 256;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3(nb); cfg.blockDim = dim3(256); cfg.stream = s; cfg.attrs = at; cfg.numAttrs = 1;
  const int IT = 300;
  const char *names[] = {"full stencil (one kernel)", "interior (k whole) alone", "copy_items alone", "copy_row alone",
                         "interior + copy_items", "interior + copy_row", "interior + copy_row PDL",
                         "interior fused with the k copies", "interior s2 -> join -> copy_items s (+ join back)",
                         "interior s2 -> join -> copy_row s (+ join back)",
                         "chunked K=2: interior chunks s2, copy of each chunk's rows s", "chunked K=4", "chunked K=8",
                         "interior s2 -> join -> copy_row s, 2nd event for the join back"};
  cudaEvent_t ec[8];
  for (int c = 0; c < 8; c++) CK(cudaEventCreateWithFlags(&ec[c], cudaEventDisableTiming));
  for (int rep = 0; rep < 3; rep++)
    for (int var = 0; var < 14; var++) {
      for (int w = 0; w < 2; w++) {
        CK(cudaEventRecord(e0, s));
        for (int it = 0; it < IT; it++) {
          double *a = it % 2 ? v : u, *b = it % 2 ? u : v;
          switch (var) {
          case 0: sten<<<grd_full, blk, 0, s>>>(a, b, 1, 1, 1, 257, 257, 0); break;
          case 1: sten<<<grd_int, blk, 0, s>>>(a, b, 2, 2, 1, 256, 257, 0); break;
          case 2: copy_items<<<2 * nb, 256, 0, s>>>(b, nb); break;
          case 3: copy_row<0><<<nb, 256, 0, s>>>(b); break;
          case 4: sten<<<grd_int, blk, 0, s>>>(a, b, 2, 2, 1, 256, 257, 0); copy_items<<<2 * nb, 256, 0, s>>>(b, nb); break;
          case 5: sten<<<grd_int, blk, 0, s>>>(a, b, 2, 2, 1, 256, 257, 0); copy_row<0><<<nb, 256, 0, s>>>(b); break;
          case 6: sten<<<grd_int, blk, 0, s>>>(a, b, 2, 2, 1, 256, 257, 0); CK(cudaLaunchKernelEx(&cfg, copy_row<1>, b, 0L, (long)N * N)); break;
          case 7: sten<<<grd_int, blk, 0, s>>>(a, b, 2, 2, 1, 256, 257, 1); break;
          case 8: case 9:
            CK(cudaEventRecord(jb, s)); CK(cudaStreamWaitEvent(s2, jb, 0));
            sten<<<grd_int, blk, 0, s2>>>(a, b, 2, 2, 1, 256, 257, 0);
            CK(cudaEventRecord(ja, s2)); CK(cudaStreamWaitEvent(s, ja, 0));
            if (var == 8) copy_items<<<2 * nb, 256, 0, s>>>(b, nb); else copy_row<0><<<nb, 256, 0, s>>>(b);
            break;
          case 10: case 11: case 12: {
            int K = var == 10 ? 2 : var == 11 ? 4 : 8;
            CK(cudaEventRecord(jb, s)); CK(cudaStreamWaitEvent(s2, jb, 0));
            for (int c = 0; c < K; c++) {
              long i0 = 2 + 254L * c / K, i1 = 2 + 254L * (c + 1) / K;
              dim3 g(grd_int.x, grd_int.y, (unsigned)(i1 - i0));
              sten<<<g, blk, 0, s2>>>(a, b, i0, 2, 1, 256, 257, 0);
              CK(cudaEventRecord(ec[c], s2));
            }
            for (int c = 0; c < K; c++) {
              long i0 = c == 0 ? 0 : 2 + 254L * c / K, i1 = c == K - 1 ? N : 2 + 254L * (c + 1) / K;
              CK(cudaStreamWaitEvent(s, ec[c], 0));
              copy_row<0><<<(unsigned)(((i1 - i0) * N + 255) / 256), 256, 0, s>>>(b, i0 * N, i1 * N);
            }
            break;
          }
          case 13:
            CK(cudaEventRecord(jb, s)); CK(cudaStreamWaitEvent(s2, jb, 0));
            sten<<<grd_int, blk, 0, s2>>>(a, b, 2, 2, 1, 256, 257, 0);
            CK(cudaEventRecord(ec[0], s2)); CK(cudaStreamWaitEvent(s, ec[0], 0));
            copy_row<0><<<nb, 256, 0, s>>>(b);
            break;
          }
        }
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (w == 1) printf("probe rep %d: %-52s %7.2f us\n", rep, names[var], ms * 1e3 / IT);
      }
    }
  return 0;
}
