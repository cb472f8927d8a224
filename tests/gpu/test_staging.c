/*
 * Staged copies between pageable host memory and device/managed memory
 * (src/backends/gpu/gpu_staging.c) through the public API: pageable memory wrapped with
 * GW_WRAP_NO_REGISTER (so it stays pageable), device memory from gw_alloc. Random data,
 * every byte compared, guard bytes around each destination checked, device contents read
 * and written with the test's own CUDA runtime (an independent path). Sizes 1 B .. 256 MiB,
 * odd sizes and odd offsets on both sides. Each case sets its GPUWRAP_STAGING_* variables
 * before making its context (they are read on the context's first pageable copy).
 * "bandwidth" prints GB/s of gw_copy and of cudaMemcpy on the same pageable buffers, and
 * "ceiling" what the host's memcpy and the DMA engine allow a staged copy (each alone and
 * both at once); they never fail on timing. Every case skips (77) without a CUDA device.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime */

#include "gpuwrap.h"

#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_assert.h"

#define GUARD 64
#define MiB ((size_t)1 << 20)

static int ndev;

/* Skips the test without a CUDA device. */
static void require_cuda(void) {
  int n = 0;
  if (gw_backend_device_count(GW_BACKEND_CUDA, &n) != GW_OK || n < 1) TEST_SKIP("no CUDA device");
  ndev = n;
}

/* Configure staging for the next context ("" = unset). */
static void env(const char *min, const char *chunk, const char *threads, const char *buffers) {
  const char *names[4] = {"GPUWRAP_STAGING_MIN", "GPUWRAP_STAGING_CHUNK", "GPUWRAP_STAGING_THREADS",
                          "GPUWRAP_STAGING_BUFFERS"};
  const char *vals[4] = {min, chunk, threads, buffers};
  for (int i = 0; i < 4; i++) {
    if (vals[i] && *vals[i])
      setenv(names[i], vals[i], 1);
    else
      unsetenv(names[i]);
  }
  unsetenv("GPUWRAP_STAGING"); /* the defaults, unless a case sets them */
  unsetenv("GPUWRAP_STAGING_SPINS");
  unsetenv("GPUWRAP_STAGING_NT_UP_MAX");
  unsetenv("GPUWRAP_STAGING_EDGE_TAIL");
}

/* Fresh bytes each run: the state starts from test.h's seeded generator (a failure prints
 * the seed; GPUWRAP_TEST_SEED replays it). */
static uint64_t rng_state;
static void fill_random(unsigned char *p, size_t n) {
  uint64_t x = rng_state ? rng_state : (tst_rand64() | 1);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    memcpy(p + i, &x, 8);
  }
  for (; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (unsigned char)x;
  }
  rng_state = x;
}

static int first_diff(const unsigned char *a, const unsigned char *b, size_t n, size_t *at) {
  if (memcmp(a, b, n) == 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) {
      *at = i;
      return 1;
    }
  return 0;
}

static int all_equal(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

/* The working set of one case: pageable host buffers (wrapped, not registered) and a
 * device (or managed) buffer, each `cap` bytes plus guards. */
typedef struct {
  gw_context *ctx;
  size_t cap;
  unsigned char *h, *ref; /* h: the wrapped pageable buffer; ref: the test's own */
  gw_array *ha, *da;
  unsigned char *d;
  gw_memkind dkind;
} rig;

static int rig_make(rig *r, gw_memkind dkind, size_t cap) {
  memset(r, 0, sizeof *r);
  r->cap = cap;
  r->dkind = dkind;
  ASSERT_OK(gw_context_create(GW_BACKEND_CUDA, 0, &r->ctx));
  size_t all = cap + 3 * GUARD; /* room for offsets < GUARD past cap bytes */
  r->h = malloc(all);
  r->ref = malloc(all);
  ASSERT_TRUE(r->h && r->ref);
  memset(r->h, 0x5a, all);
  int64_t shape[1] = {(int64_t)all};
  ASSERT_OK(gw_wrap(r->ctx, r->h, GW_UINT8, 1, shape, NULL, GW_WRAP_NO_REGISTER, &r->ha));
  ASSERT_EQ_INT(gw_kind(r->ha), GW_MEM_HOST); /* still pageable */
  ASSERT_OK(gw_alloc(r->ctx, dkind, GW_UINT8, 1, shape, &r->da));
  r->d = gw_data(r->da);
  ASSERT_TRUE(r->d != NULL);
  return 0;
}

static void rig_free(rig *r) {
  gw_release(r->ha);
  gw_release(r->da);
  free(r->h);
  free(r->ref);
  if (r->ctx) gw_context_destroy(r->ctx);
  memset(r, 0, sizeof *r);
}

static gw_array *view(gw_array *a, size_t off, size_t n) {
  int64_t st[1] = {(int64_t)off}, sh[1] = {(int64_t)n};
  gw_array *v = NULL;
  if (gw_view(a, st, sh, NULL, &v) != GW_OK)
    TST_FAIL("gw_view(%zu, %zu): %s", off, n, gw_last_error());
  return v;
}

/* Host [ho, ho+n) -> device [dof, dof+n) and back into host [ho2, ho2+n); every byte and
 * the guards checked. Offsets are below GUARD. */
static int roundtrip(rig *r, size_t n, size_t ho, size_t dof, size_t ho2) {
  size_t all = r->cap + 3 * GUARD;
  unsigned char *src = r->h + GUARD + ho;
  /* host -> device: poison the device, random source */
  { /* cudaMemset works on the current device's memory only: switch for it, then back */
    struct cudaPointerAttributes pa;
    int cur = 0;
    ASSERT_CUDA(cudaPointerGetAttributes(&pa, r->d));
    ASSERT_CUDA(cudaGetDevice(&cur));
    ASSERT_CUDA(cudaSetDevice(pa.device));
    ASSERT_CUDA(cudaMemset(r->d, 0xa5, all));
    ASSERT_CUDA(cudaSetDevice(cur));
  }
  fill_random(src, n);
  memcpy(r->ref, src, n); /* the expected bytes */
  gw_array *hv = view(r->ha, GUARD + ho, n), *dv = view(r->da, GUARD + dof, n);
  ASSERT_TRUE(hv && dv);
  gw_status s = gw_copy(dv, hv);
  if (s != GW_OK) {
    TST_FAIL("h2d %zu bytes (host+%zu -> dev+%zu): %s", n, ho, dof, gw_last_error());
  }
  gw_release(hv);
  gw_release(dv);
  unsigned char *chk = malloc(n + 2 * GUARD);
  ASSERT_TRUE(chk);
  ASSERT_CUDA(cudaMemcpy(chk, r->d + dof, n + 2 * GUARD, cudaMemcpyDefault));
  size_t at = 0;
  if (first_diff(chk + GUARD, r->ref, n, &at))
    TST_FAIL("h2d %zu bytes (host+%zu -> dev+%zu): byte %zu is %02x, want %02x", n, ho, dof, at,
             chk[GUARD + at], r->ref[at]);
  if (!all_equal(chk, GUARD, 0xa5) || !all_equal(chk + GUARD + n, GUARD, 0xa5))
    TST_FAIL("h2d %zu bytes (host+%zu -> dev+%zu): wrote outside the destination", n, ho, dof);

  /* device -> host: fresh random device contents through our runtime, poisoned host */
  fill_random(r->ref, n);
  ASSERT_CUDA(cudaMemcpy(r->d + GUARD + dof, r->ref, n, cudaMemcpyDefault));
  memset(r->h, 0x5a, all);
  hv = view(r->ha, GUARD + ho2, n);
  dv = view(r->da, GUARD + dof, n);
  ASSERT_TRUE(hv && dv);
  s = gw_copy(hv, dv);
  gw_release(hv);
  gw_release(dv);
  if (s != GW_OK) {
    TST_FAIL("d2h %zu bytes (dev+%zu -> host+%zu): %s", n, dof, ho2, gw_last_error());
  }
  unsigned char *dst = r->h + GUARD + ho2;
  if (first_diff(dst, r->ref, n, &at))
    TST_FAIL("d2h %zu bytes (dev+%zu -> host+%zu): byte %zu is %02x, want %02x", n, dof, ho2, at,
             dst[at], r->ref[at]);
  if (!all_equal(r->h, GUARD + ho2, 0x5a) || !all_equal(dst + n, GUARD, 0x5a))
    TST_FAIL("d2h %zu bytes (dev+%zu -> host+%zu): wrote outside the destination", n, dof, ho2);
  free(chk);
  return 0;
}

static const size_t small_sizes[] = {1,    2,     3,     7,      100,        4095,   4096,
                                     4097, 65535, 65537, 262143, 262144 + 5, 1048575};
static const size_t big_sizes[] = {
    1048576,          1048577,          3 * 1048576 + 13, 4 * 1048576 - 1, 16 * 1048576 + 4093,
    33 * 1048576 + 1, 64 * 1048576 + 7, 256 * 1048576};

static int sweep(rig *r, size_t maxn) {
  static const size_t offs[][3] = {{0, 0, 0}, {1, 3, 7}, {7, 0, 1}, {3, 5, 0}};
  for (size_t i = 0; i < sizeof small_sizes / sizeof *small_sizes; i++)
    for (size_t k = 0; k < 4; k++)
      if (small_sizes[i] <= maxn &&
          roundtrip(r, small_sizes[i], offs[k][0], offs[k][1], offs[k][2]))
        return 1;
  for (size_t i = 0; i < sizeof big_sizes / sizeof *big_sizes; i++) {
    size_t n = big_sizes[i];
    if (n > maxn) continue;
    for (size_t k = 0; k < (n > 32 * MiB ? 2u : 4u); k++)
      if (roundtrip(r, n, offs[k][0], offs[k][1], offs[k][2])) return 1;
  }
  return 0;
}

/* sweep() on a fresh context made with the present environment, up to maxn bytes. */
static int sweep_ctx(size_t maxn) {
  rig r;
  int rc = rig_make(&r, GW_MEM_DEVICE, maxn);
  if (!rc) rc = sweep(&r, maxn);
  rig_free(&r);
  return rc;
}

/* Defaults (staging from 1 MiB, 4 MiB chunks): every size 1 B .. 256 MiB. */
TEST_IMPL(sizes) {
  require_cuda();
  env("", "", "", "");
  rig r;
  int rc = rig_make(&r, GW_MEM_DEVICE, 256 * MiB + 64);
  if (!rc) rc = sweep(&r, 256 * MiB);
  rig_free(&r);
  return rc;
}

/* Everything staged, tiny chunks, 2 buffers: many chunks, ragged last chunk, buffer reuse
 * (one piece per chunk here). */
TEST_IMPL(small_chunks) {
  require_cuda();
  env("0", "4096", "3", "2");
  return sweep_ctx(4 * MiB);
}

/* Everything staged, 1 MiB chunks split over 5 threads (ragged pieces), 4 buffers; then a
 * deep ring (16 buffers of 64 KiB, 7 threads: the ring wraps many times while pieces of two
 * chunks are in progress). */
TEST_IMPL(threads) {
  require_cuda();
  env("0", "1M", "5", "4");
  int rc = sweep_ctx(40 * MiB);
  env("0", "64K", "7", "16");
  if (!rc) rc = sweep_ctx(40 * MiB);
  return rc;
}

/* The host-to-device bounce fills' stores, every byte checked in both directions: 1 MiB
 * chunks over 4 buffers filled with plain stores but for the last two chunks of a copy,
 * demoted after their memcpy (GPUWRAP_STAGING_NT_UP_MAX=0, GPUWRAP_STAGING_EDGE_TAIL=2;
 * by default copies up to 32 MiB stream every chunk); then the same with 4 demoted chunks;
 * then 4 MiB chunks over 3 buffers streamed at every size, with workers that yield at once
 * (GPUWRAP_STAGING_SPINS=1). */
TEST_IMPL(stores) {
  require_cuda();
  env("0", "1M", "5", "4");
  setenv("GPUWRAP_STAGING_NT_UP_MAX", "0", 1);
  setenv("GPUWRAP_STAGING_EDGE_TAIL", "2", 1);
  int rc = sweep_ctx(24 * MiB);
  setenv("GPUWRAP_STAGING_EDGE_TAIL", "4", 1);
  if (!rc) rc = sweep_ctx(24 * MiB);
  env("0", "4M", "7", "3");
  setenv("GPUWRAP_STAGING_SPINS", "1", 1);
  setenv("GPUWRAP_STAGING_NT_UP_MAX", "1G", 1);
  if (!rc) rc = sweep_ctx(40 * MiB);
  env("", "", "", "");
  return rc;
}

/* Staging off: the runtime's path, same checks. */
TEST_IMPL(off) {
  require_cuda();
  env("", "", "", "");
  setenv("GPUWRAP_STAGING", "0", 1);
  rig r;
  int rc = rig_make(&r, GW_MEM_DEVICE, 20 * MiB);
  if (!rc) rc = sweep(&r, 20 * MiB);
  rig_free(&r);
  return rc;
}

/* Pageable <-> managed. */
TEST_IMPL(managed) {
  require_cuda();
  env("0", "1M", "4", "3");
  rig r;
  int rc = rig_make(&r, GW_MEM_MANAGED, 24 * MiB);
  if (!rc) rc = sweep(&r, 24 * MiB);
  rig_free(&r);
  return rc;
}

/* gw_copy_async on a gw_stream: ordered after the stream's earlier work (a fill), complete
 * on return (pageable memory). */
TEST_IMPL(stream) {
  require_cuda();
  env("", "2M", "", "");
  rig r;
  if (rig_make(&r, GW_MEM_DEVICE, 24 * MiB)) {
    rig_free(&r);
    return 1;
  }
  gw_stream *s = NULL;
  int rc = 0;
  if (gw_stream_create(r.ctx, &s) != GW_OK) {
    TST_FAIL("gw_stream_create: %s", gw_last_error());
  }
  size_t n = 24 * MiB - 5;
  for (int it = 0; it < 3 && !rc; it++) {
    unsigned char v = (unsigned char)(0x11 * (it + 1));
    gw_array *dv = view(r.da, 3, n), *hv = view(r.ha, 1, n);
    /* fill on the stream, then copy back on it: the copy must see the fill */
    if (gw_fill_async(dv, &v, s) != GW_OK || gw_copy_async(hv, dv, s) != GW_OK) {
      TST_FAIL("fill/copy on a stream: %s", gw_last_error());
      rc = 1;
    } else if (!all_equal(r.h + 1, n, v)) {
      TST_FAIL("d2h on a stream after a fill: not all bytes are %02x", v);
      rc = 1;
    }
    /* upload random data on the stream, read it back with our runtime */
    fill_random(r.h + 1, n);
    if (!rc && gw_copy_async(dv, hv, s) != GW_OK) {
      TST_FAIL("h2d on a stream: %s", gw_last_error());
      rc = 1;
    }
    if (!rc) {
      unsigned char *chk = malloc(n);
      if (!chk || cudaMemcpy(chk, r.d + 3, n, cudaMemcpyDefault) != cudaSuccess ||
          memcmp(chk, r.h + 1, n) != 0) {
        TST_FAIL("h2d on a stream: contents differ (%d)", it);
        rc = 1;
      }
      free(chk);
    }
    gw_release(dv);
    gw_release(hv);
  }
  gw_stream_destroy(s);
  rig_free(&r);
  return rc;
}

/* Several threads copying through one context at once (one stages, the others may take
 * the runtime's path): all right. */
typedef struct {
  gw_context *ctx;
  int id, failed;
} job;

static void *copier(void *arg) {
  job *j = arg;
  size_t n = 12 * MiB + (size_t)j->id * 4099;
  unsigned char *a = malloc(n), *b = malloc(n);
  int64_t sh[1] = {(int64_t)n};
  gw_array *ha = NULL, *hb = NULL, *d = NULL;
  if (!a || !b || gw_wrap(j->ctx, a, GW_UINT8, 1, sh, NULL, GW_WRAP_NO_REGISTER, &ha) != GW_OK ||
      gw_wrap(j->ctx, b, GW_UINT8, 1, sh, NULL, GW_WRAP_NO_REGISTER, &hb) != GW_OK ||
      gw_alloc(j->ctx, GW_MEM_DEVICE, GW_UINT8, 1, sh, &d) != GW_OK) {
    j->failed = 1;
  }
  uint64_t x = 0x1234567ull * (uint64_t)(j->id + 1);
  for (int it = 0; it < 8 && !j->failed; it++) {
    for (size_t i = 0; i < n; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      a[i] = (unsigned char)x;
    }
    memset(b, 0, n);
    if (gw_copy(d, ha) != GW_OK || gw_copy(hb, d) != GW_OK || memcmp(a, b, n) != 0) j->failed = 1;
  }
  gw_release(ha);
  gw_release(hb);
  gw_release(d);
  free(a);
  free(b);
  return NULL;
}

TEST_IMPL(concurrent) {
  require_cuda();
  env("", "", "", "");
  gw_context *ctx = NULL;
  ASSERT_OK(gw_context_create(GW_BACKEND_CUDA, 0, &ctx));
  enum { T = 4 };
  pthread_t t[T];
  job j[T];
  int started[T];
  for (int i = 0; i < T; i++) {
    j[i].ctx = ctx;
    j[i].id = i;
    j[i].failed = 0;
    started[i] = pthread_create(&t[i], NULL, copier, &j[i]) == 0;
    if (!started[i]) j[i].failed = 1;
  }
  for (int i = 0; i < T; i++) {
    if (started[i]) pthread_join(t[i], NULL);
    ASSERT_EQ_INT(j[i].failed, 0);
  }
  gw_context_destroy(ctx);
  return 0;
}

/* The caller's current device is given back (device 1 current, context on device 0). */
TEST_IMPL(current_device) {
  require_cuda();
  if (ndev < 2) TEST_SKIP("needs two CUDA devices");
  env("", "", "", "");
  rig r;
  int rc = rig_make(&r, GW_MEM_DEVICE, 8 * MiB);
  if (!rc) {
    ASSERT_CUDA(cudaSetDevice(1));
    rc = roundtrip(&r, 8 * MiB - 3, 1, 2, 3);
    int d = -1;
    ASSERT_CUDA(cudaGetDevice(&d));
    ASSERT_EQ_INT(d, 1);
    ASSERT_CUDA(cudaSetDevice(0));
  }
  rig_free(&r);
  return rc;
}

/* GB/s of gw_copy (staged) and cudaMemcpy on the same pageable buffers; prints, never
 * fails on timing. GPUWRAP_STAGING_* from the environment are honoured here (to measure
 * another setting against the defaults). */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

TEST_IMPL(bandwidth) {
  require_cuda();
  const size_t sizes[] = {256 << 10, 512 << 10, 1 * MiB,  2 * MiB,
                          4 * MiB,   16 * MiB,  64 * MiB, 256 * MiB};
  rig r;
  if (rig_make(&r, GW_MEM_DEVICE, 256 * MiB)) {
    rig_free(&r);
    return 1;
  }
  fill_random(r.h, r.cap);
  fprintf(stderr, "%10s %10s %10s %7s %10s %10s %7s\n", "bytes", "h2d raw", "h2d gw", "ratio",
          "d2h raw", "d2h gw", "ratio");
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t n = sizes[i];
    int reps = n >= 64 * MiB ? 7 : 25;
    double t[4][32];
    gw_array *hv = view(r.ha, GUARD, n), *dv = view(r.da, GUARD, n);
    ASSERT_TRUE(hv && dv);
    for (int k = -2; k < reps; k++) {
      double t0 = now();
      ASSERT_CUDA(cudaMemcpy(r.d + GUARD, r.h + GUARD, n, cudaMemcpyHostToDevice));
      double t1 = now();
      ASSERT_OK(gw_copy(dv, hv));
      double t2 = now();
      ASSERT_CUDA(cudaMemcpy(r.h + GUARD, r.d + GUARD, n, cudaMemcpyDeviceToHost));
      double t3 = now();
      ASSERT_OK(gw_copy(hv, dv));
      double t4 = now();
      if (k >= 0) {
        t[0][k] = t1 - t0, t[1][k] = t2 - t1, t[2][k] = t3 - t2, t[3][k] = t4 - t3;
      }
    }
    gw_release(hv);
    gw_release(dv);
    double g[4];
    for (int q = 0; q < 4; q++) {
      qsort(t[q], (size_t)reps, sizeof(double), cmp_double);
      g[q] = (double)n / t[q][reps / 2] / 1e9;
    }
    fprintf(stderr, "%10zu %10.2f %10.2f %7.2f %10.2f %10.2f %7.2f\n", n, g[0], g[1], g[1] / g[0],
            g[2], g[3], g[3] / g[2]);
  }
  rig_free(&r);
  return 0;
}

/* ---- "ceiling": what the host and the link allow a staged copy, measured alone ---------
 * A staged copy moves every byte twice, concurrently: the copy threads' memcpy between the
 * caller's pageable memory and the pinned bounce buffers, and the DMA between the bounce
 * buffers and the device. Its throughput is at most the slower of the two *while both run*
 * (the DMA engine and the memcpy threads share the host's memory). This case measures,
 * per direction, with the staging's default thread count (GPUWRAP_STAGING_THREADS
 * honoured), 4 MiB chunks over 6 bounce buffers as the pipeline uses them:
 *   memcpy alone, DMA alone, and both at once (each one's rate while the other runs).
 * Prints only (label perf); the staged copy's own rate is the "bandwidth" case's. */
typedef struct {
  int id, nthreads, up, *stop;
  unsigned char *host, **bounce;
  size_t chunk, nchunks, nbuf;
  double bytes;
} ceil_job;

static void *ceil_worker(void *arg) {
  ceil_job *j = arg;
  size_t piece = j->chunk / (size_t)j->nthreads, off = (size_t)j->id * piece;
  double moved = 0;
  /* One pass over the caller's buffer when stop is NULL, else passes until stop is set. */
  do {
    for (size_t c = 0; c < j->nchunks; c++) {
      unsigned char *b = j->bounce[c % j->nbuf] + off, *h = j->host + c * j->chunk + off;
      if (j->up)
        memcpy(b, h, piece);
      else
        memcpy(h, b, piece);
      moved += (double)piece;
      if (j->stop && __atomic_load_n(j->stop, __ATOMIC_ACQUIRE)) break;
    }
  } while (j->stop && !__atomic_load_n(j->stop, __ATOMIC_ACQUIRE));
  j->bytes = moved;
  return NULL;
}

/* memcpy by `nt` threads: one pass (stop NULL) or passes until *stop; team_join returns
 * the GB/s over the time they ran. */
typedef struct {
  ceil_job job[64];
  pthread_t tid[64];
  int nt;
  double t0;
} ceil_team;

static int team_start(ceil_team *t, int nt, int up, unsigned char *host, unsigned char **bounce,
                      size_t chunk, size_t nchunks, size_t nbuf, int *stop) {
  t->nt = nt;
  t->t0 = now();
  for (int i = 0; i < nt; i++) {
    t->job[i] = (ceil_job){.id = i,
                           .nthreads = nt,
                           .up = up,
                           .stop = stop,
                           .host = host,
                           .bounce = bounce,
                           .chunk = chunk,
                           .nchunks = nchunks,
                           .nbuf = nbuf};
    if (pthread_create(&t->tid[i], NULL, ceil_worker, &t->job[i]) != 0) return -1;
  }
  return 0;
}

static double team_join(ceil_team *t) {
  double bytes = 0;
  for (int i = 0; i < t->nt; i++) {
    pthread_join(t->tid[i], NULL);
    bytes += t->job[i].bytes;
  }
  return bytes / (now() - t->t0) / 1e9;
}

static int dma_pass(int up, unsigned char *dev, unsigned char **bounce, size_t chunk,
                    size_t nchunks, size_t nbuf, cudaStream_t s) {
  for (size_t c = 0; c < nchunks; c++) {
    if (up)
      ASSERT_CUDA(
          cudaMemcpyAsync(dev + c * chunk, bounce[c % nbuf], chunk, cudaMemcpyHostToDevice, s));
    else
      ASSERT_CUDA(
          cudaMemcpyAsync(bounce[c % nbuf], dev + c * chunk, chunk, cudaMemcpyDeviceToHost, s));
  }
  return 0;
}

TEST_IMPL(ceiling) {
  require_cuda();
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = cpus > 1 ? (int)(cpus * 3 / 4) : 1; /* the staging's default (gpu_staging.c) */
  if (nt > 12) nt = 12;
  const char *e = getenv("GPUWRAP_STAGING_THREADS");
  if (e && atoi(e) > 0) nt = atoi(e) > 64 ? 64 : atoi(e);
  const size_t chunk = 4 * MiB, nbuf = 6, total = 256 * MiB, nchunks = total / chunk;
  unsigned char *host = malloc(total), *bounce[6] = {0}, *dev = NULL;
  ASSERT_TRUE(host != NULL);
  fill_random(host, total);
  for (size_t i = 0; i < nbuf; i++)
    ASSERT_CUDA(cudaHostAlloc((void **)&bounce[i], chunk, cudaHostAllocPortable));
  ASSERT_CUDA(cudaMalloc((void **)&dev, total));
  cudaStream_t s;
  cudaEvent_t e0, e1;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ASSERT_CUDA(cudaEventCreate(&e0));
  ASSERT_CUDA(cudaEventCreate(&e1));
  fprintf(stderr,
          "ceiling: %d copy threads, %zu MiB per pass in 4 MiB chunks over %zu bounce buffers "
          "(GB/s, median of 5)\n",
          nt, total >> 20, nbuf);
  fprintf(stderr, "%6s %14s %12s %18s %16s %10s\n", "dir", "memcpy alone", "DMA alone",
          "memcpy during DMA", "DMA during memcpy", "ceiling");
  for (int up = 1; up >= 0; up--) {
    double r[4][5];
    for (int k = -1; k < 5; k++) {
      ceil_team t;
      ASSERT_TRUE(team_start(&t, nt, up, host, bounce, chunk, nchunks, nbuf, NULL) == 0);
      double a = team_join(&t);
      float ms = 0;
      ASSERT_CUDA(cudaEventRecord(e0, s));
      if (dma_pass(up, dev, bounce, chunk, nchunks, nbuf, s)) return 1;
      ASSERT_CUDA(cudaEventRecord(e1, s));
      ASSERT_CUDA(cudaEventSynchronize(e1));
      ASSERT_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      double b = (double)total / (ms * 1e-3) / 1e9;
      /* Together: the DMA runs three passes while the threads copy until it is done; the
       * threads' rate is over that window, the DMA's over its own events. */
      int stop = 0;
      ASSERT_CUDA(cudaEventRecord(e0, s));
      for (int p = 0; p < 3; p++)
        if (dma_pass(up, dev, bounce, chunk, nchunks, nbuf, s)) return 1;
      ASSERT_CUDA(cudaEventRecord(e1, s));
      ASSERT_TRUE(team_start(&t, nt, up, host, bounce, chunk, nchunks, nbuf, &stop) == 0);
      ASSERT_CUDA(cudaEventSynchronize(e1));
      __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
      double c = team_join(&t);
      ASSERT_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      double d = 3.0 * (double)total / (ms * 1e-3) / 1e9;
      if (k >= 0) r[0][k] = a, r[1][k] = b, r[2][k] = c, r[3][k] = d;
    }
    double m[4];
    for (int q = 0; q < 4; q++) {
      qsort(r[q], 5, sizeof(double), cmp_double);
      m[q] = r[q][2];
    }
    fprintf(stderr, "%6s %14.2f %12.2f %18.2f %16.2f %10.2f\n", up ? "h2d" : "d2h", m[0], m[1],
            m[2], m[3], m[2] < m[3] ? m[2] : m[3]);
  }
  ASSERT_CUDA(cudaEventDestroy(e0));
  ASSERT_CUDA(cudaEventDestroy(e1));
  ASSERT_CUDA(cudaStreamDestroy(s));
  ASSERT_CUDA(cudaFree(dev));
  for (size_t i = 0; i < nbuf; i++) ASSERT_CUDA(cudaFreeHost(bounce[i]));
  free(host);
  return 0;
}
