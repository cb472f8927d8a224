// A delay for the stream tests (test_streams_cuda.c): one thread spins on the GPU's
// global timer, so that work queued behind it on the same stream starts late and an
// ordering mistake (a copy on the wrong stream, a missing wait) reads the poison instead of
// the data. No cudaLaunchHostFunc: the delay is device work, as a long kernel of PyTorch's
// would be.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// `ns` of wall time by the global timer; also capped at `max_cycles` SM cycles, so a
// global timer that does not advance (some virtualised GPUs) cannot hang the test.
__global__ void spin(uint64_t ns, long long max_cycles) {
  uint64_t t0 = global_ns();
  long long c0 = clock64();
  while (global_ns() - t0 < ns && clock64() - c0 < max_cycles) {
  }
}

} // namespace

extern "C" int gwt_delay(cudaStream_t s, unsigned ms) {
  // 5e6 cycles per ms is 2.5x the H200's 2 GHz boost clock: the cap never cuts a working
  // timer short.
  spin<<<1, 1, 0, s>>>((uint64_t)ms * 1000000ull, (long long)ms * 5000000ll);
  return (int)cudaGetLastError();
}
