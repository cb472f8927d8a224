// Probe (not part of the build): the staged pageable copy, chunk by chunk. Copies of 16, 64 and
// 256 MiB host->device and device->host, 10 in a row each, two rounds; prints the median time of
// the first 9. The per-chunk trace (GPUWRAP_STAGING_TRACE=10: when each chunk was free,
// filled, issued and seen done, and when its DMA ran) came from a patch to gpu_staging.c that
// no longer applies (git history, commit f749a6b; its results: docs/STAGING.md).
// Build, from a build tree `b`:
//   nvcc -O2 -arch=sm_90 -I include -I b/include -o staging_timeline tools/probes/staging_timeline.cu \
//        -L b/lib -lgpuwrap -Xlinker -rpath,$PWD/b/lib
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <time.h>
#include <sys/mman.h>
#include <cuda_runtime.h>
#include "gpuwrap.h"
static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec * 1e-3; }
#define CKG(x) do { gw_status s_ = (x); if (s_ != GW_OK) { fprintf(stderr, "%s: %s\n", #x, gw_last_error()); return 1; } } while (0)
int main() {
  gw_context *ctx;
  CKG(gw_context_create(GW_BACKEND_CUDA, 0, &ctx));
  const size_t arena = (size_t)1 << 30;
  char *h = (char *)mmap(NULL, arena, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memset(h, 1, arena);
  char *d;
  if (cudaMalloc(&d, arena) != cudaSuccess) return 1;
  int64_t n = (int64_t)(arena / 4);
  gw_array *ah, *ad;
  CKG(gw_wrap(ctx, h, GW_FLOAT32, 1, &n, NULL, GW_WRAP_NO_REGISTER, &ah));
  CKG(gw_wrap(ctx, d, GW_FLOAT32, 1, &n, NULL, 0, &ad));
  size_t sizes[] = {(size_t)16 << 20, (size_t)64 << 20, (size_t)256 << 20};
  for (int round = 0; round < 2; round++)
  for (size_t s : sizes)
    for (int up = 1; up >= 0; up--) {
      std::vector<double> t;
      size_t slots = arena / s;
      for (int r = 0; r < 10; r++) {
        int64_t st = (int64_t)((r % slots) * s / 4), sh = (int64_t)(s / 4);
        gw_array *vh, *vd;
        CKG(gw_view(ah, &st, &sh, NULL, &vh));
        CKG(gw_view(ad, &st, &sh, NULL, &vd));
        double t0 = now();
        CKG(up ? gw_copy(vd, vh) : gw_copy(vh, vd));
        t.push_back(now() - t0);
        gw_release(vh);
        gw_release(vd);
      }
      std::vector<double> u(t.begin(), t.end() - 1);  // the 10th is traced
      std::sort(u.begin(), u.end());
      printf("round %d %s %zu MiB: median %.1f us (%.2f GB/s), min %.1f, max %.1f; traced rep %.1f us\n", round,
             up ? "H2D" : "D2H", s >> 20, u[u.size() / 2], s / u[u.size() / 2] / 1e3, u[0], u.back(), t.back());
    }
  gw_release(ah);
  gw_release(ad);
  gw_context_destroy(ctx);
  return 0;
}
