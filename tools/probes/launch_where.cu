// Probe (not part of the build): does a launch + synchronize cost more from a shared object
// than from the executable? In fill_gap (H200, 2026-12-02, two starts) gpuwrap's plugin spent
// 0.3 us longer in its cudaLaunchKernel of k_fill_contig than the probe's own call of the
// same kernel, and that is what is left of gw_fill's gap to the raw fill once the core's and
// the plugin's own steps are counted. The plugin is a dlopen'ed shared object holding the
// static CUDA runtime, whose thread state then goes through __tls_get_addr (two calls per
// access in its accessor) where an executable's is a fixed offset. One source, built three
// ways, each running the same loop (a 16-byte-store fill kernel, 5 parameters, launch +
// synchronize on the legacy stream, host wall clock per call), variants interleaved:
//   X   in the executable (static runtime)
//   S   in a dlopen'ed .so with the static runtime (as libgpuwrap-cuda.so)
//   SD  the same .so, driver API: cuLaunchKernel of the cudaGetFuncBySymbol handle + cuStreamSynchronize
//   R   in a dlopen'ed .so linked against the shared runtime (libcudart.so)
// Build and run on the GPU machine (from the repository root):
//   nvcc -O3 -arch=sm_90 -Xcompiler -fPIC -shared -DAS_LIB -o /tmp/lw_static.so tools/probes/launch_where.cu -lcuda
//   nvcc -O3 -arch=sm_90 -Xcompiler -fPIC -shared -DAS_LIB -cudart shared -o /tmp/lw_shared.so tools/probes/launch_where.cu -lcuda
//   nvcc -O3 -arch=sm_90 -o /tmp/lw tools/probes/launch_where.cu -lcuda -ldl && /tmp/lw /tmp/lw_static.so /tmp/lw_shared.so
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <dlfcn.h>
#include <time.h>
#include <cuda.h>
#include <cuda_runtime.h>

struct alignas(16) V16 { uint64_t a, b; };

__global__ void __launch_bounds__(256) kfill(char *p, uint32_t head, uint64_t n16, uint32_t tail, V16 body) {
  uint64_t gid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  V16 *q = reinterpret_cast<V16 *>(p + head);
  for (uint64_t i = gid; i < n16; i += (uint64_t)gridDim.x * blockDim.x) q[i] = body;
  if (gid < tail) p[head + 16 * n16 + gid] = 0;
}

static double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

// `reps` launch + synchronize calls of a fill of `bytes` at p; each call's wall time into out.
// driver: cuLaunchKernel + cuStreamSynchronize instead of the runtime's calls. 0 on success.
extern "C" __attribute__((visibility("default"))) int lw_run(void *p, size_t bytes, int reps, int driver, double *out) {
  static CUfunction fn;
  if (driver && !fn && cudaGetFuncBySymbol(&fn, (const void *)kfill) != cudaSuccess) return 1;
  char *d = (char *)p;
  uint32_t head = 0, tail = 0;
  uint64_t n16 = bytes / 16;
  V16 body = {1, 2};
  unsigned grid = (unsigned)std::min<uint64_t>(std::max<uint64_t>((n16 + 255) / 256, 1), 132 * 8);
  void *args[] = {&d, &head, &n16, &tail, &body};
  for (int r = 0; r < reps; r++) {
    double t0 = now_us();
    if (driver) {
      if (cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, CU_STREAM_LEGACY, args, NULL) != CUDA_SUCCESS) return 2;
      if (cuStreamSynchronize(CU_STREAM_LEGACY) != CUDA_SUCCESS) return 3;
    } else {
      if (cudaLaunchKernel((const void *)kfill, dim3(grid), dim3(256), args, 0, cudaStreamLegacy) != cudaSuccess) return 2;
      if (cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess) return 3;
    }
    out[r] = now_us() - t0;
  }
  return 0;
}

#ifndef AS_LIB
typedef int (*run_fn)(void *, size_t, int, int, double *);

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s STATIC_RUNTIME.so SHARED_RUNTIME.so\n", argv[0]);
    return 2;
  }
  run_fn fns[4] = {lw_run, nullptr, nullptr, nullptr};
  for (int k = 0; k < 2; k++) {
    void *h = dlopen(argv[1 + k], RTLD_NOW | RTLD_LOCAL);
    if (!h || !(fns[k == 0 ? 1 : 3] = (run_fn)dlsym(h, "lw_run"))) {
      fprintf(stderr, "%s: %s\n", argv[1 + k], dlerror());
      return 1;
    }
  }
  fns[2] = fns[1];
  const char *names[4] = {"X  executable, static runtime", "S  .so, static runtime (the plugin's)",
                          "SD .so, static runtime, driver launch + sync", "R  .so, shared runtime"};
  const int driver[4] = {0, 0, 1, 0};
  void *p;
  if (cudaMalloc(&p, (size_t)16 << 20) != cudaSuccess) return 1;
  const int REPS = 20, ROUNDS = 60;
  for (size_t bytes : {(size_t)4096, (size_t)4 << 20, (size_t)16 << 20}) {
    std::vector<double> t[4];
    double buf[REPS];
    for (int round = 0; round < ROUNDS + 2; round++)
      for (int v = 0; v < 4; v++) {
        int e = fns[v](p, bytes, REPS, driver[v], buf);
        if (e) {
          fprintf(stderr, "variant %d failed (%d)\n", v, e);
          return 1;
        }
        if (round >= 2) t[v].insert(t[v].end(), buf, buf + REPS);
      }
    printf("%zu bytes: launch + synchronize, host us, median [p10..p90] of %d, interleaved\n", bytes, REPS * ROUNDS);
    for (int v = 0; v < 4; v++) {
      std::sort(t[v].begin(), t[v].end());
      size_t n = t[v].size();
      printf("  %-46s %6.2f [%6.2f..%6.2f]  %+5.2f us vs X\n", names[v], t[v][n / 2], t[v][n / 10], t[v][n * 9 / 10],
             t[v][n / 2] - t[0][n / 2]);
    }
  }
  return 0;
}
#endif
