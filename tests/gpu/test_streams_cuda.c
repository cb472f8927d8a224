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

#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_assert.h"

/* streams_delay.cu: a one-thread kernel that spins for `ms` on stream s; the launch error. */
int gwt_delay(cudaStream_t s, unsigned ms);

/* Long enough that everything the host queues behind the delay (a few calls, microseconds
 * each) is queued while it still runs; short enough to keep each test well under a second. */
#define DELAY_MS 200u
#define DELAY(s) ASSERT_CUDA((cudaError_t)gwt_delay((s), DELAY_MS))

/* Elements of the arrays (uint32): 64 MiB, large enough that a copy or fill takes real
 * time, small enough to check every element quickly. */
#define N ((size_t)16 << 20)
#define POISON_DEV 0xFFFFFFFFu  /* device buffers: cudaMemset 0xFF */
#define POISON_HOST 0xA5A5A5A5u /* host buffers: memset 0xA5 */

static gw_context *ctx;

static void setup(int need) {
  int n = 0;
  if (gw_backend_device_count(GW_BACKEND_CUDA, &n) != GW_OK || n < need) {
    printf("%d CUDA device(s), need %d (%s)\n", n, need, gw_last_error());
    TEST_SKIP("not enough CUDA devices");
  }
  ASSERT_OK(gw_context_create(GW_BACKEND_CUDA, 0, &ctx));
  /* Warm-up: load the delay kernel and the plugin's fill kernel now. With lazy module
   * loading (CUDA's default) the first launch of a kernel may wait for the context to go
   * idle, i.e. for a running delay, which would let the delay finish before the work under
   * test is queued (CTest also sets CUDA_MODULE_LOADING=EAGER). */
  gw_array *w = NULL;
  int64_t shape[1] = {1024};
  uint32_t v = 0;
  ASSERT_CUDA((cudaError_t)gwt_delay(NULL, 0));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &w));
  ASSERT_OK(gw_fill(w, &v));
  gw_release(w);
  ASSERT_CUDA(cudaDeviceSynchronize());
}

/* Fresh data each run: test.h's generator, whose seed a failure prints (GPUWRAP_TEST_SEED
 * replays it). */
static uint32_t rnd(void) { return (uint32_t)tst_rand64(); }
/* A random value that is neither poison. */
static uint32_t rnd_value(void) {
  uint32_t v;
  do v = rnd();
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
    if (got[i] != w && bad++ == 0) first = i;
  }
  if (bad) {
    uint32_t w = want ? want[first] : *one;
    TST_FAIL("%s: %zu of %zu elements wrong; first [%zu] = %#x, want %#x%s", what, bad, n, first,
             got[first], w,
             got[first] == POISON_DEV || got[first] == POISON_HOST ? " (poison: read too early)"
                                                                   : "");
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
TEST_IMPL(borrow_nonblocking) {
  setup(1);
  cudaStream_t ns = NULL;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&ns, cudaStreamNonBlocking));
  uint32_t *h = NULL, *back = NULL, *dsrc = NULL;
  ASSERT_CUDA(
      cudaMallocHost((void **)&h, N * 4)); /* pinned, so the caller's write is asynchronous */
  ASSERT_CUDA(cudaMallocHost((void **)&back, N * 4));
  ASSERT_CUDA(cudaMalloc((void **)&dsrc, N * 4));
  gw_array *src = NULL, *dst = NULL;
  int64_t shape[1] = {(int64_t)N};
  ASSERT_OK(gw_wrap(ctx, dsrc, GW_UINT32, 1, shape, NULL, 0, &src));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &dst));
  for (size_t i = 0; i < N; i++) h[i] = rnd();
  memset(back, 0xA5, N * 4);
  ASSERT_CUDA(cudaMemset(dsrc, 0xFF, N * 4));
  ASSERT_CUDA(cudaMemset(gw_data(dst), 0xFF, N * 4));
  ASSERT_CUDA(cudaDeviceSynchronize());

  gw_stream *bs = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, ns, &bs));
  ASSERT_EQ_PTR(gw_stream_native(bs), ns);

  DELAY(ns);
  ASSERT_CUDA(cudaMemcpyAsync(dsrc, h, N * 4, cudaMemcpyHostToDevice, ns)); /* the caller's write */
  ASSERT_OK(gw_copy_async(dst, src, bs));
  /* The delay still runs: the copy was queued, not done (else this test proves nothing). */
  ASSERT_EQ_INT(cudaStreamQuery(ns), cudaErrorNotReady);
  ASSERT_EQ_INT(gw_array_pending(dst), 1);

  gw_stream_destroy(bs); /* borrowed: no wait, no destroy */
  cudaError_t q = cudaStreamQuery(ns);
  ASSERT_EQ_INT(q, cudaErrorNotReady); /* still valid, and gw_stream_destroy did not wait */
  ASSERT_CUDA(cudaStreamSynchronize(ns));
  ASSERT_CUDA(cudaStreamQuery(ns));
  ASSERT_CUDA(cudaMemcpy(back, gw_data(dst), N * 4, cudaMemcpyDeviceToHost));
  check("gw_copy_async on a borrowed non-blocking stream", back, h, NULL, N);
  ASSERT_EQ_INT(gw_array_pending(dst), 0);

  gw_release(dst);
  gw_release(src);
  ASSERT_CUDA(cudaStreamDestroy(ns)); /* the native stream is still ours to destroy */
  ASSERT_CUDA(cudaFree(dsrc));
  ASSERT_CUDA(cudaFreeHost(h));
  ASSERT_CUDA(cudaFreeHost(back));
  gw_context_destroy(ctx);
  return 0;
}

/* ---- (2) the native handle of a gpuwrap stream ----------------------------------------------- */

/*
 * gw_stream_native of a gpuwrap stream is the stream gpuwrap's work runs on: the caller's
 * cudaMemcpyAsync on it comes after gw_fill_async on the gw_stream (and the fill after the
 * caller's delay). gpuwrap's streams are blocking (cudaStreamDefault), as documented.
 */
TEST_IMPL(native_of_created) {
  setup(1);
  gw_stream *gs = NULL;
  ASSERT_OK(gw_stream_create(ctx, &gs));
  cudaStream_t native = (cudaStream_t)gw_stream_native(gs);
  ASSERT_TRUE(native != NULL);
  unsigned flags = 99;
  ASSERT_CUDA(cudaStreamGetFlags(native, &flags));
  ASSERT_EQ_INT(flags, cudaStreamDefault);

  uint32_t *back = NULL;
  ASSERT_CUDA(cudaMallocHost((void **)&back, N * 4));
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)N};
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &a));
  memset(back, 0xA5, N * 4);
  ASSERT_CUDA(cudaMemset(gw_data(a), 0xFF, N * 4));
  ASSERT_CUDA(cudaDeviceSynchronize());
  uint32_t v = rnd_value();

  DELAY(native);                       /* the caller's own kernel on gpuwrap's stream */
  ASSERT_OK(gw_fill_async(a, &v, gs)); /* behind it */
  ASSERT_CUDA(
      cudaMemcpyAsync(back, gw_data(a), N * 4, cudaMemcpyDeviceToHost, native)); /* after it */
  ASSERT_EQ_INT(cudaStreamQuery(native), cudaErrorNotReady);
  ASSERT_EQ_INT(gw_array_pending(a), 1);
  ASSERT_CUDA(cudaStreamSynchronize(native));
  check("caller's copy on gw_stream_native after gw_fill_async", back, NULL, &v, N);
  ASSERT_EQ_INT(gw_array_pending(a), 0);

  gw_release(a);
  gw_stream_destroy(gs);
  ASSERT_CUDA(cudaFreeHost(back));
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
TEST_IMPL(array_wait) {
  setup(1);
  cudaStream_t ns = NULL;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&ns, cudaStreamNonBlocking));
  gw_stream *gs = NULL, *bs = NULL;
  ASSERT_OK(gw_stream_create(ctx, &gs));
  ASSERT_OK(gw_stream_wrap(ctx, ns, &bs));
  uint32_t *back = NULL;
  ASSERT_CUDA(cudaMallocHost((void **)&back, N * 4));
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)N};
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &a));
  memset(back, 0xA5, N * 4);
  ASSERT_CUDA(cudaMemset(gw_data(a), 0xFF, N * 4));
  ASSERT_CUDA(cudaDeviceSynchronize());
  ASSERT_EQ_INT(gw_array_pending(a), 0);
  ASSERT_OK(gw_array_wait(a, bs)); /* nothing pending: OK, no wait */
  uint32_t v = rnd_value();

  DELAY((cudaStream_t)gw_stream_native(gs));
  ASSERT_OK(gw_fill_async(a, &v, gs));
  ASSERT_EQ_INT(gw_array_pending(a), 1);
  ASSERT_OK(gw_array_wait(a, bs)); /* the line whose removal makes this test fail */
  /* gw_array_wait did not wait on the host: the fill's stream is still busy. */
  ASSERT_EQ_INT(cudaStreamQuery((cudaStream_t)gw_stream_native(gs)), cudaErrorNotReady);
  ASSERT_CUDA(cudaMemcpyAsync(back, gw_data(a), N * 4, cudaMemcpyDeviceToHost, ns));
  ASSERT_EQ_INT(gw_array_pending(a), 1);
  ASSERT_CUDA(cudaStreamSynchronize(ns)); /* only the consumer's stream */
  check("copy on a non-blocking stream after gw_array_wait", back, NULL, &v, N);
  /* The consumer's stream waited for the fill, so the fill is complete too. */
  ASSERT_EQ_INT(gw_array_pending(a), 0);

  gw_release(a);
  gw_stream_destroy(bs);
  gw_stream_destroy(gs);
  ASSERT_CUDA(cudaStreamDestroy(ns));
  ASSERT_CUDA(cudaFreeHost(back));
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
  ASSERT_CUDA(cudaMemset(gw_data(a), 0xFF, N * 4));
  ASSERT_CUDA(cudaMemset(gw_data(b), 0xFF, N * 4));
  ASSERT_CUDA(cudaDeviceSynchronize());
  DELAY(cs);
  ASSERT_OK(gw_fill_async(a, &v, s));
  ASSERT_OK(gw_copy_async(b, a, s));
  ASSERT_CUDA(cudaMemcpyAsync(back, gw_data(b), N * 4, cudaMemcpyDeviceToHost, cs));
  ASSERT_EQ_INT(cudaStreamQuery(cs), cudaErrorNotReady);
  ASSERT_CUDA(cudaStreamSynchronize(cs));
  check(what, back, NULL, &v, N);
  ASSERT_EQ_INT(gw_array_pending(a), 0);
  ASSERT_EQ_INT(gw_array_pending(b), 0);
  return 0;
}

/* NULL (the legacy default stream; given back as NULL), cudaStreamLegacy and
 * cudaStreamPerThread (given back as themselves) work for gw_fill_async/gw_copy_async. */
TEST_IMPL(borrow_default) {
  setup(1);
  ASSERT_EQ_INT(gw_stream_wrap(NULL, NULL, &(gw_stream *){NULL}), GW_EINVAL);
  ASSERT_EQ_INT(gw_stream_wrap(ctx, NULL, NULL), GW_EINVAL);
  ASSERT_EQ_PTR(gw_stream_native(NULL), NULL);

  uint32_t *back = NULL;
  ASSERT_CUDA(cudaMallocHost((void **)&back, N * 4));
  gw_array *a = NULL, *b = NULL;
  int64_t shape[1] = {(int64_t)N};
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &a));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &b));

  gw_stream *s0 = NULL, *sl = NULL, *sp = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, NULL, &s0));
  ASSERT_EQ_PTR(gw_stream_native(s0), NULL);
  if (special_case("borrowed NULL (legacy) stream", cudaStreamLegacy, s0, a, b, back)) return 1;
  ASSERT_OK(gw_stream_wrap(ctx, cudaStreamLegacy, &sl));
  ASSERT_EQ_PTR(gw_stream_native(sl), cudaStreamLegacy);
  if (special_case("borrowed cudaStreamLegacy", cudaStreamLegacy, sl, a, b, back)) return 1;
  ASSERT_OK(gw_stream_wrap(ctx, cudaStreamPerThread, &sp));
  ASSERT_EQ_PTR(gw_stream_native(sp), cudaStreamPerThread);
  if (special_case("borrowed cudaStreamPerThread", cudaStreamPerThread, sp, a, b, back)) return 1;
  ASSERT_OK(gw_stream_synchronize(s0));
  ASSERT_OK(gw_stream_synchronize(sp));
  gw_stream_destroy(s0);
  gw_stream_destroy(sl);
  gw_stream_destroy(sp);
  ASSERT_CUDA(cudaStreamQuery(cudaStreamPerThread)); /* the special streams are untouched */

  gw_release(a);
  gw_release(b);
  ASSERT_CUDA(cudaFreeHost(back));
  gw_context_destroy(ctx);
  return 0;
}

/* A stream of device 1 borrowed into a device-0 context: GW_EDEVICE naming both devices;
 * nothing is made, the current device is left alone. */
TEST_IMPL(wrong_device) {
  setup(2);
  cudaStream_t s1 = NULL;
  ASSERT_CUDA(cudaSetDevice(1));
  ASSERT_CUDA(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  ASSERT_CUDA(cudaSetDevice(0));
  gw_stream *out = NULL;
  ASSERT_EQ_INT(gw_stream_wrap(ctx, s1, &out), GW_EDEVICE);
  const char *err = gw_last_error();
  fprintf(stderr, "wrong device: %s\n", err);
  ASSERT_TRUE(strstr(err, "device 1") != NULL);
  ASSERT_TRUE(strstr(err, "device 0") != NULL);
  ASSERT_EQ_PTR(out, NULL);
  int cur = -1;
  ASSERT_CUDA(cudaGetDevice(&cur));
  ASSERT_EQ_INT(cur, 0);
  /* The same stream is fine for a device-1 context. */
  gw_context *c1 = NULL;
  ASSERT_OK(gw_context_create(GW_BACKEND_CUDA, 1, &c1));
  ASSERT_OK(gw_stream_wrap(c1, s1, &out));
  ASSERT_EQ_PTR(gw_stream_native(out), s1);
  gw_stream_destroy(out);
  gw_context_destroy(c1);
  ASSERT_CUDA(cudaSetDevice(1));
  ASSERT_CUDA(cudaStreamDestroy(s1));
  ASSERT_CUDA(cudaSetDevice(0));
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
  setup(1);
  void *h = (void *)(uintptr_t)0x10;
  gw_context *cpu = NULL;
  gw_stream *cs = NULL;
  if (which == FOREIGN_CPU_HANDLE) {
    ASSERT_OK(gw_context_create(GW_BACKEND_CPU, 0, &cpu));
    ASSERT_OK(gw_stream_create(cpu, &cs));
    h = gw_stream_native(cs);
    ASSERT_TRUE(h != NULL);
  }
  gw_stream *out = NULL;
  gw_status s = gw_stream_wrap(ctx, h, &out);
  fprintf(stderr, "foreign handle %p: %s: %s\n", h, gw_err_name(s), s ? gw_last_error() : "");
  ASSERT_EQ_INT(s, GW_EINVAL);
  ASSERT_EQ_PTR(out, NULL);
  if (out) gw_stream_destroy(out);
  if (cs) gw_stream_destroy(cs);
  if (cpu) gw_context_destroy(cpu);
  gw_context_destroy(ctx);
  return 0;
}

static int run_isolated(int which, const char *what) {
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    TST_FAIL("fork: %s", "failed");
  }
  if (pid == 0) _exit(foreign_child(which));
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) {
    TST_FAIL("waitpid for %s", what);
  }
  if (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)
    TST_FAIL("%s: the child process aborted (a failed check above, or the runtime)", what);
  if (WIFSIGNALED(st)) {
    TST_FAIL("%s: the process died of signal %d inside gw_stream_wrap: the CUDA runtime cannot "
             "check this handle, so gpuwrap must refuse it before the runtime sees it",
             what, WTERMSIG(st));
  }
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  if (rc == TEST_SKIP_CODE) return TEST_SKIP_CODE;
  if (rc != 0) TST_FAIL("%s: not refused with GW_EINVAL (see above)", what);
  return 0;
}

TEST_IMPL(foreign_handle) {
  /* No CUDA call in this process: the children start from scratch. */
  if (run_isolated(FOREIGN_SMALL_INT, "a small integer as a stream") == TEST_SKIP_CODE)
    TEST_SKIP("no CUDA device");
  run_isolated(FOREIGN_CPU_HANDLE, "a CPU-backend stream handle");
  return 0;
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
TEST_IMPL(borrow_staged) {
  setup(1);
  cudaStream_t ns = NULL;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&ns, cudaStreamNonBlocking));
  gw_stream *bs = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, ns, &bs));
  uint32_t *pin = NULL, *back = NULL, *h = malloc(N * 4);
  ASSERT_TRUE(h != NULL);
  ASSERT_CUDA(cudaMallocHost((void **)&pin, N * 4));
  ASSERT_CUDA(cudaMallocHost((void **)&back, N * 4));
  gw_array *ha = NULL, *da = NULL;
  int64_t shape[1] = {(int64_t)N};
  ASSERT_OK(gw_wrap(ctx, h, GW_UINT32, 1, shape, NULL, GW_WRAP_NO_REGISTER, &ha));
  ASSERT_EQ_INT(gw_kind(ha), GW_MEM_HOST);
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &da));

  /* down */
  for (size_t i = 0; i < N; i++) pin[i] = rnd();
  memset(h, 0xA5, N * 4);
  ASSERT_CUDA(cudaMemset(gw_data(da), 0xFF, N * 4));
  ASSERT_CUDA(cudaDeviceSynchronize());
  DELAY(ns);
  ASSERT_CUDA(cudaMemcpyAsync(gw_data(da), pin, N * 4, cudaMemcpyHostToDevice, ns));
  ASSERT_OK(gw_copy_async(ha, da, bs)); /* complete on return: pageable */
  check("staged device->pageable on a borrowed stream", h, pin, NULL, N);

  /* up */
  for (size_t i = 0; i < N; i++) h[i] = rnd();
  memset(back, 0xA5, N * 4);
  ASSERT_CUDA(cudaMemset(gw_data(da), 0xFF, N * 4));
  ASSERT_CUDA(cudaDeviceSynchronize());
  DELAY(ns);
  ASSERT_OK(gw_copy_async(da, ha, bs));
  ASSERT_CUDA(cudaMemcpyAsync(back, gw_data(da), N * 4, cudaMemcpyDeviceToHost, ns));
  ASSERT_CUDA(cudaStreamSynchronize(ns));
  check("staged pageable->device on a borrowed stream", back, h, NULL, N);

  gw_release(da);
  gw_release(ha);
  gw_stream_destroy(bs);
  ASSERT_CUDA(cudaStreamDestroy(ns));
  ASSERT_CUDA(cudaFreeHost(pin));
  ASSERT_CUDA(cudaFreeHost(back));
  free(h);
  gw_context_destroy(ctx);
  return 0;
}
