/*
 * Streams on the CUDA backend: borrowed caller streams (gw_stream_wrap), the native handle
 * of gpuwrap's own streams (gw_stream_native), and pending work handed to another stream
 * (gw_array_wait), against streams the test makes with the CUDA runtime itself.
 *
 * Every ordering case puts a delay kernel (streams_delay.cu, DELAY_MS of device time) in
 * front of the work under test, so the work starts late: an operation on the wrong stream,
 * or a missing wait, runs before it and reads the poison. Data is fresh random data (the
 * seed is printed), outputs are poisoned first, every element is checked. Each test skips
 * (77) without a CUDA device; wrong_device without two. foreign_handle forks, so it must
 * run before anything in its process touches CUDA: it comes first, and CTest runs each
 * test in a process of its own.
 */
#define _POSIX_C_SOURCE 200809L /* fork, waitpid */

#include "gpuwrap.h"
#include "gwt.h"

#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gwt_cuda.h"

/* streams_delay.cu: a one-thread kernel that spins for `ms` on stream s; the launch error. */
int gwt_delay(cudaStream_t s, unsigned ms);

/* Long enough that everything the host queues behind the delay (a few calls, microseconds
 * each) is queued while it still runs; short enough to keep each test well under a second. */
#define DELAY_MS 200u
#define DELAY(s) CK((cudaError_t)gwt_delay((s), DELAY_MS))

/* Elements of the arrays (uint32): 64 MiB, large enough that a copy or fill takes real
 * time, small enough to check every element quickly. */
#define N ((size_t)16 << 20)
#define POISON_DEV 0xFFFFFFFFu  /* device buffers: cudaMemset 0xFF */
#define POISON_HOST 0xA5A5A5A5u /* host buffers: memset 0xA5 */

static gw_context *ctx;

static int setup(int need) {
  int n = 0;
  if (gw_backend_device_count(GW_BACKEND_CUDA, &n) != GW_OK || n < need) {
    fprintf(stderr, "skip: %d CUDA device(s), need %d (%s)\n", n, need, gw_last_error());
    return GWT_SKIP;
  }
  if (gw_context_create(GW_BACKEND_CUDA, 0, &ctx) != GW_OK) {
    GWT_FAIL_("gw_context_create(CUDA, 0): %s", gw_last_error());
    return 1;
  }
  /* Warm-up: load the delay kernel and the plugin's fill kernel now. With lazy module
   * loading (CUDA's default) the first launch of a kernel may wait for the context to go
   * idle, i.e. for a running delay, which would let the delay finish before the work under
   * test is queued (CTest also sets CUDA_MODULE_LOADING=EAGER). */
  gw_array *w = NULL;
  int64_t shape[1] = {1024};
  uint32_t v = 0;
  CK((cudaError_t)gwt_delay(NULL, 0));
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &w));
  GW_OK_(gw_fill(w, &v));
  gw_release(w);
  CK(cudaDeviceSynchronize());
  return 0;
}
#define SETUP(need)                                                                        \
  do {                                                                                     \
    int r_ = setup(need);                                                                  \
    if (r_)                                                                                \
      return r_;                                                                           \
  } while (0)

/* Fresh data each run; the seed is printed so a failure can be replayed
 * (GWT_SEED=<seed>). */
static uint32_t rng;
static void seed_rng(void) {
  const char *s = getenv("GWT_SEED");
  rng = s ? (uint32_t)strtoul(s, NULL, 0) : (uint32_t)time(NULL) ^ ((uint32_t)getpid() << 16);
  if (!rng)
    rng = 1;
  fprintf(stderr, "seed: GWT_SEED=%u\n", rng);
}
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 17;
  rng ^= rng << 5;
  return rng;
}
/* A random value that is neither poison. */
static uint32_t rnd_value(void) {
  uint32_t v;
  do
    v = rnd();
  while (v == POISON_DEV || v == POISON_HOST);
  return v;
}

/* Every element of got[] against want[] (or the single value *one): count mismatches and
 * report the first. */
static int check(const char *what, const uint32_t *got, const uint32_t *want, const uint32_t *one,
                 size_t n) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t w = want ? want[i] : *one;
    if (got[i] != w && bad++ == 0)
      first = i;
  }
  if (bad) {
    uint32_t w = want ? want[first] : *one;
    GWT_FAIL_("%s: %zu of %zu elements wrong; first [%zu] = %#x, want %#x%s", what, bad, n, first,
              got[first], w,
              got[first] == POISON_DEV || got[first] == POISON_HOST ? " (poison: read too early)" : "");
  }
  return bad == 0;
}

/* ---- (1) a borrowed non-blocking stream ------------------------------------------------------ */

/*
 * The caller's non-blocking stream (PyTorch's and CuPy's side streams are): a delay, then
 * the caller writes its data on it; gw_copy_async on the borrowed stream must run after
 * that write. A non-blocking stream is ordered with nothing else, so a copy gpuwrap put on
 * any other stream (its own, the legacy one) would read the poison. gw_stream_destroy of
 * the borrowed handle neither waits for nor destroys the native stream.
 */
static int test_borrow_nonblocking(void) {
  SETUP(1);
  seed_rng();
  cudaStream_t ns = NULL;
  CK(cudaStreamCreateWithFlags(&ns, cudaStreamNonBlocking));
  uint32_t *h = NULL, *back = NULL, *dsrc = NULL;
  CK(cudaMallocHost((void **)&h, N * 4)); /* pinned, so the caller's write is asynchronous */
  CK(cudaMallocHost((void **)&back, N * 4));
  CK(cudaMalloc((void **)&dsrc, N * 4));
  gw_array *src = NULL, *dst = NULL;
  int64_t shape[1] = {(int64_t)N};
  GW_OK_(gw_wrap(ctx, dsrc, GW_UINT32, 1, shape, NULL, 0, &src));
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &dst));
  for (size_t i = 0; i < N; i++)
    h[i] = rnd();
  memset(back, 0xA5, N * 4);
  CK(cudaMemset(dsrc, 0xFF, N * 4));
  CK(cudaMemset(gw_data(dst), 0xFF, N * 4));
  CK(cudaDeviceSynchronize());

  gw_stream *bs = NULL;
  GW_OK_(gw_stream_wrap(ctx, ns, &bs));
  EXPECT_EQ_PTR(gw_stream_native(bs), ns);

  DELAY(ns);
  CK(cudaMemcpyAsync(dsrc, h, N * 4, cudaMemcpyHostToDevice, ns)); /* the caller's write */
  GW_OK_(gw_copy_async(dst, src, bs));
  /* The delay still runs: the copy was queued, not done (else this test proves nothing). */
  EXPECT_EQ_INT(cudaStreamQuery(ns), cudaErrorNotReady);
  EXPECT_EQ_INT(gw_array_pending(dst), 1);

  gw_stream_destroy(bs); /* borrowed: no wait, no destroy */
  cudaError_t q = cudaStreamQuery(ns);
  EXPECT_EQ_INT(q, cudaErrorNotReady); /* still valid, and gw_stream_destroy did not wait */
  CK(cudaStreamSynchronize(ns));
  CK(cudaStreamQuery(ns));
  CK(cudaMemcpy(back, gw_data(dst), N * 4, cudaMemcpyDeviceToHost));
  check("gw_copy_async on a borrowed non-blocking stream", back, h, NULL, N);
  EXPECT_EQ_INT(gw_array_pending(dst), 0);

  gw_release(dst);
  gw_release(src);
  CK(cudaStreamDestroy(ns)); /* the native stream is still ours to destroy */
  CK(cudaFree(dsrc));
  CK(cudaFreeHost(h));
  CK(cudaFreeHost(back));
  gw_context_destroy(ctx);
  return 0;
}

/* ---- (2) the native handle of a gpuwrap stream ----------------------------------------------- */

/*
 * gw_stream_native of a gpuwrap stream is the stream gpuwrap's work runs on: the caller's
 * cudaMemcpyAsync on it comes after gw_fill_async on the gw_stream (and the fill after the
 * caller's delay). gpuwrap's streams are blocking (cudaStreamDefault), as documented.
 */
static int test_native_of_created(void) {
  SETUP(1);
  seed_rng();
  gw_stream *gs = NULL;
  GW_OK_(gw_stream_create(ctx, &gs));
  cudaStream_t native = (cudaStream_t)gw_stream_native(gs);
  ASSERT_TRUE(native != NULL);
  unsigned flags = 99;
  CK(cudaStreamGetFlags(native, &flags));
  EXPECT_EQ_INT(flags, cudaStreamDefault);

  uint32_t *back = NULL;
  CK(cudaMallocHost((void **)&back, N * 4));
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)N};
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &a));
  memset(back, 0xA5, N * 4);
  CK(cudaMemset(gw_data(a), 0xFF, N * 4));
  CK(cudaDeviceSynchronize());
  uint32_t v = rnd_value();

  DELAY(native);                  /* the caller's own kernel on gpuwrap's stream */
  GW_OK_(gw_fill_async(a, &v, gs)); /* behind it */
  CK(cudaMemcpyAsync(back, gw_data(a), N * 4, cudaMemcpyDeviceToHost, native)); /* after it */
  EXPECT_EQ_INT(cudaStreamQuery(native), cudaErrorNotReady);
  EXPECT_EQ_INT(gw_array_pending(a), 1);
  CK(cudaStreamSynchronize(native));
  check("caller's copy on gw_stream_native after gw_fill_async", back, NULL, &v, N);
  EXPECT_EQ_INT(gw_array_pending(a), 0);

  gw_release(a);
  gw_stream_destroy(gs);
  CK(cudaFreeHost(back));
  gw_context_destroy(ctx);
  return 0;
}

/* ---- (3) pending work handed to another stream ----------------------------------------------- */

/*
 * gw_fill_async on a gpuwrap stream behind a delay; gw_array_wait(a, borrowed non-blocking
 * stream); a cudaMemcpyAsync on that non-blocking stream then reads the filled values,
 * with no host synchronisation in between: the wait is on the device. Removing the
 * gw_array_wait line below makes the test fail: the non-blocking stream's copy runs at
 * once and reads the poison (0xffffffff) while the delay still holds the fill back.
 */
static int test_array_wait(void) {
  SETUP(1);
  seed_rng();
  cudaStream_t ns = NULL;
  CK(cudaStreamCreateWithFlags(&ns, cudaStreamNonBlocking));
  gw_stream *gs = NULL, *bs = NULL;
  GW_OK_(gw_stream_create(ctx, &gs));
  GW_OK_(gw_stream_wrap(ctx, ns, &bs));
  uint32_t *back = NULL;
  CK(cudaMallocHost((void **)&back, N * 4));
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)N};
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &a));
  memset(back, 0xA5, N * 4);
  CK(cudaMemset(gw_data(a), 0xFF, N * 4));
  CK(cudaDeviceSynchronize());
  EXPECT_EQ_INT(gw_array_pending(a), 0);
  GW_OK_(gw_array_wait(a, bs)); /* nothing pending: OK, no wait */
  uint32_t v = rnd_value();

  DELAY((cudaStream_t)gw_stream_native(gs));
  GW_OK_(gw_fill_async(a, &v, gs));
  EXPECT_EQ_INT(gw_array_pending(a), 1);
  GW_OK_(gw_array_wait(a, bs)); /* the line whose removal makes this test fail */
  /* gw_array_wait did not wait on the host: the fill's stream is still busy. */
  EXPECT_EQ_INT(cudaStreamQuery((cudaStream_t)gw_stream_native(gs)), cudaErrorNotReady);
  CK(cudaMemcpyAsync(back, gw_data(a), N * 4, cudaMemcpyDeviceToHost, ns));
  EXPECT_EQ_INT(gw_array_pending(a), 1);
  CK(cudaStreamSynchronize(ns)); /* only the consumer's stream */
  check("copy on a non-blocking stream after gw_array_wait", back, NULL, &v, N);
  /* The consumer's stream waited for the fill, so the fill is complete too. */
  EXPECT_EQ_INT(gw_array_pending(a), 0);

  gw_release(a);
  gw_stream_destroy(bs);
  gw_stream_destroy(gs);
  CK(cudaStreamDestroy(ns));
  CK(cudaFreeHost(back));
  gw_context_destroy(ctx);
  return 0;
}

/* ---- (4) special handles, wrong devices, foreign handles ------------------------------------- */

/*
 * A delay on native stream `cs`, then gw_fill_async(a) and gw_copy_async(b <- a) on the
 * borrowed `s`, then the caller's copy of b on `cs`: everything must come out in order.
 */
static int special_case(const char *what, cudaStream_t cs, gw_stream *s, gw_array *a, gw_array *b,
                        uint32_t *back) {
  uint32_t v = rnd_value();
  memset(back, 0xA5, N * 4);
  CK(cudaMemset(gw_data(a), 0xFF, N * 4));
  CK(cudaMemset(gw_data(b), 0xFF, N * 4));
  CK(cudaDeviceSynchronize());
  DELAY(cs);
  GW_OK_(gw_fill_async(a, &v, s));
  GW_OK_(gw_copy_async(b, a, s));
  CK(cudaMemcpyAsync(back, gw_data(b), N * 4, cudaMemcpyDeviceToHost, cs));
  EXPECT_EQ_INT(cudaStreamQuery(cs), cudaErrorNotReady);
  CK(cudaStreamSynchronize(cs));
  check(what, back, NULL, &v, N);
  EXPECT_EQ_INT(gw_array_pending(a), 0);
  EXPECT_EQ_INT(gw_array_pending(b), 0);
  return 0;
}

/* NULL (the legacy default stream; given back as NULL), cudaStreamLegacy and
 * cudaStreamPerThread (given back as themselves) work for gw_fill_async/gw_copy_async. */
static int test_borrow_default(void) {
  SETUP(1);
  seed_rng();
  EXPECT_EQ_INT(gw_stream_wrap(NULL, NULL, &(gw_stream *){NULL}), GW_EINVAL);
  EXPECT_EQ_INT(gw_stream_wrap(ctx, NULL, NULL), GW_EINVAL);
  EXPECT_EQ_PTR(gw_stream_native(NULL), NULL);

  uint32_t *back = NULL;
  CK(cudaMallocHost((void **)&back, N * 4));
  gw_array *a = NULL, *b = NULL;
  int64_t shape[1] = {(int64_t)N};
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &a));
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &b));

  gw_stream *s0 = NULL, *sl = NULL, *sp = NULL;
  GW_OK_(gw_stream_wrap(ctx, NULL, &s0));
  EXPECT_EQ_PTR(gw_stream_native(s0), NULL);
  if (special_case("borrowed NULL (legacy) stream", cudaStreamLegacy, s0, a, b, back))
    return 1;
  GW_OK_(gw_stream_wrap(ctx, cudaStreamLegacy, &sl));
  EXPECT_EQ_PTR(gw_stream_native(sl), cudaStreamLegacy);
  if (special_case("borrowed cudaStreamLegacy", cudaStreamLegacy, sl, a, b, back))
    return 1;
  GW_OK_(gw_stream_wrap(ctx, cudaStreamPerThread, &sp));
  EXPECT_EQ_PTR(gw_stream_native(sp), cudaStreamPerThread);
  if (special_case("borrowed cudaStreamPerThread", cudaStreamPerThread, sp, a, b, back))
    return 1;
  GW_OK_(gw_stream_synchronize(s0));
  GW_OK_(gw_stream_synchronize(sp));
  gw_stream_destroy(s0);
  gw_stream_destroy(sl);
  gw_stream_destroy(sp);
  CK(cudaStreamQuery(cudaStreamPerThread)); /* the special streams are untouched */

  gw_release(a);
  gw_release(b);
  CK(cudaFreeHost(back));
  gw_context_destroy(ctx);
  return 0;
}

/* A stream of device 1 borrowed into a device-0 context: GW_EDEVICE naming both devices;
 * nothing is made, the current device is left alone. */
static int test_wrong_device(void) {
  SETUP(2);
  cudaStream_t s1 = NULL;
  CK(cudaSetDevice(1));
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaSetDevice(0));
  gw_stream *out = NULL;
  EXPECT_EQ_INT(gw_stream_wrap(ctx, s1, &out), GW_EDEVICE);
  const char *err = gw_last_error();
  fprintf(stderr, "wrong device: %s\n", err);
  EXPECT_TRUE(strstr(err, "device 1") != NULL);
  EXPECT_TRUE(strstr(err, "device 0") != NULL);
  EXPECT_EQ_PTR(out, NULL);
  int cur = -1;
  CK(cudaGetDevice(&cur));
  EXPECT_EQ_INT(cur, 0);
  /* The same stream is fine for a device-1 context. */
  gw_context *c1 = NULL;
  GW_OK_(gw_context_create(GW_BACKEND_CUDA, 1, &c1));
  GW_OK_(gw_stream_wrap(c1, s1, &out));
  EXPECT_EQ_PTR(gw_stream_native(out), s1);
  gw_stream_destroy(out);
  gw_context_destroy(c1);
  CK(cudaSetDevice(1));
  CK(cudaStreamDestroy(s1));
  CK(cudaSetDevice(0));
  gw_context_destroy(ctx);
  return 0;
}

/*
 * Handles that are not CUDA streams, each tried in a child process (forked before this
 * process touches CUDA) so that a crash in the runtime is reported as what it is:
 *   - a small integer (no memory mapped there): the backend refuses it before the runtime
 *     sees it;
 *   - a CPU-backend stream handle (gw_stream_native of a CPU context's stream): live host
 *     memory, which the CUDA runtime's stream lookup dereferences. Only a check that knows
 *     CPU handles (the core, which has the CPU backend) can refuse it for certain; a crash
 *     or an acceptance here means that check is missing.
 * Each must give GW_EINVAL with a message, and no crash.
 */
enum { FOREIGN_SMALL_INT, FOREIGN_CPU_HANDLE };

static int foreign_child(int which) {
  int r = setup(1);
  if (r)
    return r;
  void *h = (void *)(uintptr_t)0x10;
  gw_context *cpu = NULL;
  gw_stream *cs = NULL;
  if (which == FOREIGN_CPU_HANDLE) {
    GW_OK_(gw_context_create(GW_BACKEND_CPU, 0, &cpu));
    GW_OK_(gw_stream_create(cpu, &cs));
    h = gw_stream_native(cs);
    ASSERT_TRUE(h != NULL);
  }
  gw_stream *out = NULL;
  gw_status s = gw_stream_wrap(ctx, h, &out);
  fprintf(stderr, "foreign handle %p: %s: %s\n", h, gw_err_name(s), s ? gw_last_error() : "");
  EXPECT_EQ_INT(s, GW_EINVAL);
  EXPECT_EQ_PTR(out, NULL);
  if (out)
    gw_stream_destroy(out);
  if (cs)
    gw_stream_destroy(cs);
  if (cpu)
    gw_context_destroy(cpu);
  gw_context_destroy(ctx);
  return gwt_failures ? 1 : 0;
}

static int run_isolated(int which, const char *what) {
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    GWT_FAIL_("fork: %s", "failed");
    return 1;
  }
  if (pid == 0)
    _exit(foreign_child(which));
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) {
    GWT_FAIL_("waitpid for %s", what);
    return 1;
  }
  if (WIFSIGNALED(st)) {
    GWT_FAIL_("%s: the process died of signal %d inside gw_stream_wrap: the CUDA runtime cannot "
              "check this handle, so gpuwrap must refuse it before the runtime sees it",
              what, WTERMSIG(st));
    return 1;
  }
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  if (rc == GWT_SKIP)
    return GWT_SKIP;
  if (rc != 0)
    GWT_FAIL_("%s: not refused with GW_EINVAL (see above)", what);
  return rc ? 1 : 0;
}

static int test_foreign_handle(void) {
  /* No CUDA call in this process: the children start from scratch. */
  int r1 = run_isolated(FOREIGN_SMALL_INT, "a small integer as a stream");
  if (r1 == GWT_SKIP)
    return GWT_SKIP;
  int r2 = run_isolated(FOREIGN_CPU_HANDLE, "a CPU-backend stream handle");
  return r1 || r2;
}

/* ---- staged pageable copies on a borrowed stream --------------------------------------------- */

/*
 * Pageable host memory (GW_WRAP_NO_REGISTER keeps it pageable; copies of 64 MiB take the
 * staging pipeline, gpu_staging.c) to and from device memory on a borrowed non-blocking
 * stream. Such copies complete on return, and their DMAs go on the borrowed stream:
 *   down: after a delay and the caller's write on the stream, gw_copy_async(host <- dev)
 *         returns with the caller's data in the host buffer (checked with no further sync);
 *   up:   gw_copy_async(dev <- host) behind a delay, then the caller's copy of dev on the
 *         stream reads the uploaded data.
 */
static int test_borrow_staged(void) {
  SETUP(1);
  seed_rng();
  cudaStream_t ns = NULL;
  CK(cudaStreamCreateWithFlags(&ns, cudaStreamNonBlocking));
  gw_stream *bs = NULL;
  GW_OK_(gw_stream_wrap(ctx, ns, &bs));
  uint32_t *pin = NULL, *back = NULL, *h = malloc(N * 4);
  ASSERT_TRUE(h != NULL);
  CK(cudaMallocHost((void **)&pin, N * 4));
  CK(cudaMallocHost((void **)&back, N * 4));
  gw_array *ha = NULL, *da = NULL;
  int64_t shape[1] = {(int64_t)N};
  GW_OK_(gw_wrap(ctx, h, GW_UINT32, 1, shape, NULL, GW_WRAP_NO_REGISTER, &ha));
  EXPECT_EQ_INT(gw_kind(ha), GW_MEM_HOST);
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &da));

  /* down */
  for (size_t i = 0; i < N; i++)
    pin[i] = rnd();
  memset(h, 0xA5, N * 4);
  CK(cudaMemset(gw_data(da), 0xFF, N * 4));
  CK(cudaDeviceSynchronize());
  DELAY(ns);
  CK(cudaMemcpyAsync(gw_data(da), pin, N * 4, cudaMemcpyHostToDevice, ns));
  GW_OK_(gw_copy_async(ha, da, bs)); /* complete on return: pageable */
  check("staged device->pageable on a borrowed stream", h, pin, NULL, N);

  /* up */
  for (size_t i = 0; i < N; i++)
    h[i] = rnd();
  memset(back, 0xA5, N * 4);
  CK(cudaMemset(gw_data(da), 0xFF, N * 4));
  CK(cudaDeviceSynchronize());
  DELAY(ns);
  GW_OK_(gw_copy_async(da, ha, bs));
  CK(cudaMemcpyAsync(back, gw_data(da), N * 4, cudaMemcpyDeviceToHost, ns));
  CK(cudaStreamSynchronize(ns));
  check("staged pageable->device on a borrowed stream", back, h, NULL, N);

  gw_release(da);
  gw_release(ha);
  gw_stream_destroy(bs);
  CK(cudaStreamDestroy(ns));
  CK(cudaFreeHost(pin));
  CK(cudaFreeHost(back));
  free(h);
  gw_context_destroy(ctx);
  return 0;
}

int main(int argc, char **argv) {
  static const gwt_case cases[] = {
      {"foreign_handle", test_foreign_handle}, /* first: it forks before any CUDA call */
      {"borrow_nonblocking", test_borrow_nonblocking},
      {"native_of_created", test_native_of_created},
      {"array_wait", test_array_wait},
      {"borrow_default", test_borrow_default},
      {"wrong_device", test_wrong_device},
      {"borrow_staged", test_borrow_staged},
  };
  return gwt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
