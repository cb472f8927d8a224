/*
 * gpuwrap inside graph captures (src/core/transfer.c "Capture", gpuwrap.h "Graphs").
 *
 * A stream made outside gpuwrap (as PyTorch's capture stream) is captured; gpuwrap's
 * asynchronous calls on it either record their work, which a launch of the graph then runs
 * (every test launches >= 50 times, fresh inputs and poisoned outputs each time, every
 * element checked), or are refused with GW_ENOTSUP before anything is queued, the capture
 * still valid and instantiable. Another thread's gpuwrap calls during a global-mode capture
 * leave it valid.
 *
 * The capture control is the CPU model's (gpuwrap/cpu.h) on the cpu backend; built with
 * GWT_GRAPH_CUDA (tests/gpu) the same tests drive CUDA's (cudaStreamBeginCapture ...).
 * On the model, "nothing queued" is also counted: no copy/fill call reached the backend and
 * no item was recorded.
 */
#include "test.h"

#include "private.h"

#include <pthread.h>

#define N 1031 /* odd: no loop happens to be a multiple of it */
#define LAUNCHES 50

static const int32_t POISON = (int32_t)0x7eadbeef;

/* ---- the capture driver ---------------------------------------------------------------- */

enum { MODE_GLOBAL, MODE_THREAD_LOCAL, MODE_RELAXED };

#ifdef GWT_GRAPH_CUDA
#include <cuda_runtime.h>
typedef struct {
  cudaGraph_t g;
  cudaGraphExec_t x;
} drv_graph;
static gw_status cu(cudaError_t e) {
  if (e == cudaSuccess) return GW_OK;
  (void)cudaGetLastError();
  fprintf(stderr, "  cuda: %s\n", cudaGetErrorName(e));
  return GW_EBACKEND;
}
static void *drv_stream(int nonblocking) {
  cudaStream_t s = NULL;
  if (cudaStreamCreateWithFlags(&s, nonblocking ? cudaStreamNonBlocking : cudaStreamDefault) !=
      cudaSuccess)
    TST_FAIL("cudaStreamCreateWithFlags");
  return s;
}
static void drv_stream_destroy(void *s) { (void)cudaStreamDestroy((cudaStream_t)s); }
static gw_status drv_begin(void *s, int mode) {
  enum cudaStreamCaptureMode m = mode == MODE_GLOBAL         ? cudaStreamCaptureModeGlobal
                                 : mode == MODE_THREAD_LOCAL ? cudaStreamCaptureModeThreadLocal
                                                             : cudaStreamCaptureModeRelaxed;
  return cu(cudaStreamBeginCapture((cudaStream_t)s, m));
}
/* End and instantiate: a capture that is valid gives an executable graph. */
static gw_status drv_end(void *s, drv_graph **out) {
  drv_graph *g = calloc(1, sizeof *g);
  gw_status st = cu(cudaStreamEndCapture((cudaStream_t)s, &g->g));
  if (st == GW_OK) st = cu(cudaGraphInstantiate(&g->x, g->g, 0));
  if (st != GW_OK) {
    if (g->g) (void)cudaGraphDestroy(g->g);
    free(g);
    g = NULL;
  }
  *out = g;
  return st;
}
static gw_status drv_launch(drv_graph *g, void *s) {
  return cu(cudaGraphLaunch(g->x, (cudaStream_t)s));
}
static void drv_graph_destroy(drv_graph *g) {
  if (!g) return;
  (void)cudaGraphExecDestroy(g->x);
  (void)cudaGraphDestroy(g->g);
  free(g);
}
static int drv_items(void *s) {
  (void)s;
  return -1;
} /* not counted on CUDA */
static long drv_backend_calls(void) { return -1; }
#define DRV_RUNTIME "cuda"
#else
typedef gw_cpu_graph drv_graph;
static void *drv_stream(int nonblocking) {
  void *s = NULL;
  ASSERT_OK(gw_cpu_stream_create_external(0, nonblocking, &s));
  return s;
}
static void drv_stream_destroy(void *s) { ASSERT_OK(gw_cpu_stream_destroy_external(s)); }
static gw_status drv_begin(void *s, int mode) {
  return gw_cpu_stream_capture_begin(s, mode == MODE_GLOBAL         ? GW_CPU_CAPTURE_GLOBAL
                                        : mode == MODE_THREAD_LOCAL ? GW_CPU_CAPTURE_THREAD_LOCAL
                                                                    : GW_CPU_CAPTURE_RELAXED);
}
static gw_status drv_end(void *s, drv_graph **out) { return gw_cpu_stream_capture_end(s, out); }
static gw_status drv_launch(drv_graph *g, void *s) { return gw_cpu_graph_launch(g, s); }
static void drv_graph_destroy(drv_graph *g) { gw_cpu_graph_destroy(g); }
static int drv_items(void *s) { return gw_cpu_stream_capture_items(s); }
/* Copies and fills that reached the backend (recorded or run). */
static long drv_backend_calls(void) {
  return gw_cpu_op_calls(GW_CPU_OP_COPY) + gw_cpu_op_calls(GW_CPU_OP_FILL);
}
#define DRV_RUNTIME "cpu"
#endif

static gw_context *open_ctx(void) {
#ifdef GWT_GRAPH_CUDA
  if (tst_backend() != GW_BACKEND_CUDA) TEST_SKIP("built for the cuda capture driver");
#else
  if (!tst_is_cpu())
    TEST_SKIP("the capture control of GPU backends is tests/gpu's (GWT_GRAPH_CUDA)");
#endif
  return tst_open(0);
}

/* ---- helpers ------------------------------------------------------------------------------- */

static gw_array *alloc1(gw_context *ctx, gw_memkind kind) {
  int64_t n = N;
  gw_array *a = NULL;
  ASSERT_OK(gw_alloc(ctx, kind, GW_INT32, 1, &n, &a));
  return a;
}
static int32_t *h32(gw_array *a) { return (int32_t *)gw_host_data(a); }
static void poison_host(gw_array *a) {
  for (int i = 0; i < N; i++) h32(a)[i] = POISON;
}
static int32_t fresh_value(void) {
  int32_t v;
  do v = (int32_t)tst_rand64();
  while (v == POISON);
  return v;
}

/* What the capture recorded and what reached the backend, to show a refusal queued
 * nothing. */
typedef struct {
  int items;
  long calls;
} queued;
static queued queued_now(void *s) { return (queued){drv_items(s), drv_backend_calls()}; }
#define ASSERT_NOTHING_QUEUED(s, before)       \
  do {                                         \
    queued now_ = queued_now(s);               \
    ASSERT_EQ_INT(now_.items, (before).items); \
    ASSERT_TRUE(now_.calls == (before).calls); \
  } while (0)

/* ---- every capturable call, recorded and replayed ------------------------------------------ */

/*
 * One graph: pinned `in` -> device a (copy), a -> managed m, m -> pinned out (copies through
 * every capturable kind), fill of device b with v, b -> pinned out2, and a batch (private
 * ABI, the halo's local copies) of a's two halves into c's two halves swapped, c -> out3.
 * Each launch: fresh `in`, b and every output poisoned, then every element checked.
 */
TEST_IMPL(replay) {
  gw_context *ctx = open_ctx();
  tst_leaks before = tst_leak_snapshot();
  void *nat = drv_stream(1);
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, nat, &s));
  gw_array *in = alloc1(ctx, GW_MEM_PINNED), *a = alloc1(ctx, GW_MEM_DEVICE),
           *m = alloc1(ctx, GW_MEM_MANAGED), *out = alloc1(ctx, GW_MEM_PINNED),
           *b = alloc1(ctx, GW_MEM_DEVICE), *out2 = alloc1(ctx, GW_MEM_PINNED),
           *c = alloc1(ctx, GW_MEM_DEVICE), *out3 = alloc1(ctx, GW_MEM_PINNED);
  const int64_t half = N / 2, rest = N - N / 2, z = 0, h = N / 2, r = N - N / 2;
  gw_array *a_lo = NULL, *a_hi = NULL, *c_lo = NULL, *c_hi = NULL;
  ASSERT_OK(gw_view(a, &z, &half, NULL, &a_lo));
  ASSERT_OK(gw_view(a, &h, &rest, NULL, &a_hi));
  ASSERT_OK(gw_view(c, &z, &rest, NULL, &c_lo));
  ASSERT_OK(gw_view(c, &r, &half, NULL, &c_hi));
  gw_array *bdst[2] = {c_hi, c_lo};
  const gw_array *bsrc[2] = {a_lo, a_hi};
  int32_t v = fresh_value();

  ASSERT_OK(drv_begin(nat, MODE_GLOBAL));
  ASSERT_OK(gw_copy_async(a, in, s));
  ASSERT_OK(gw_copy_async(m, a, s));
  ASSERT_OK(gw_copy_async(out, m, s));
  ASSERT_OK(gw_fill_async(b, &v, s));
  ASSERT_OK(gw_copy_async(out2, b, s));
  ASSERT_OK(gw__copy_many(bdst, bsrc, 2, s));
  ASSERT_OK(gw_array_wait(c, s)); /* its own stream's captured work: nothing to wait for */
  ASSERT_OK(gw_copy_async(out3, c, s));
  if (tst_is_cpu()) ASSERT_EQ_INT(drv_items(nat), 7);
  drv_graph *g = NULL;
  ASSERT_OK(drv_end(nat, &g));
  /* Captured, not launched: nothing is pending (gpuwrap.h, "Graphs"). */
  ASSERT_EQ_INT(gw_array_pending(a), 0);
  ASSERT_EQ_INT(gw_array_pending(out), 0);

  for (int k = 0; k < LAUNCHES; k++) {
    tst_random_fill(h32(in), N * sizeof(int32_t));
    ASSERT_OK(gw_fill(b, &POISON));
    ASSERT_OK(gw_fill(c, &POISON));
    poison_host(out);
    poison_host(out2);
    poison_host(out3);
    ASSERT_OK(drv_launch(g, nat));
    ASSERT_OK(gw_stream_synchronize(s));
    ASSERT_ELEMS_EQ(h32(out), h32(in), N, sizeof(int32_t));
    ASSERT_ALL_EQ(h32(out2), &v, N, sizeof(int32_t));
    for (int i = 0; i < N; i++) {
      int32_t want = i < rest ? h32(in)[half + i] : h32(in)[i - rest];
      if (h32(out3)[i] != want)
        TST_FAIL("launch %d: out3[%d] = %d, want %d", k, i, h32(out3)[i], want);
    }
  }
  drv_graph_destroy(g);
  gw_array *all[] = {in, a, m, out, b, out2, c, out3, a_lo, a_hi, c_lo, c_hi};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gw_release(all[i]);
  gw_stream_destroy(s);
  drv_stream_destroy(nat);
  gw_context_destroy(ctx);
  ASSERT_NO_LEAK(before);
  return 0;
}

/* ---- refused before queueing, the capture still valid ----------------------------------------- */

static void *plain_malloc(size_t bytes) {
  void *p = malloc(bytes);
  if (!p) TST_FAIL("malloc");
  return p;
}

TEST_IMPL(refused) {
  gw_context *ctx = open_ctx();
  tst_leaks before = tst_leak_snapshot();
  void *nat = drv_stream(1);
  gw_stream *s = NULL, *other = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, nat, &s));
  ASSERT_OK(gw_stream_create(ctx, &other));
  gw_array *a = alloc1(ctx, GW_MEM_DEVICE), *out = alloc1(ctx, GW_MEM_PINNED),
           *busy = alloc1(ctx, GW_MEM_DEVICE);
  int64_t n = N;
  int32_t *pg = plain_malloc(N * sizeof(int32_t));
  gw_array *pageable = NULL;
  ASSERT_OK(gw_wrap(ctx, pg, GW_INT32, 1, &n, NULL, GW_WRAP_NO_REGISTER, &pageable));
  const int64_t z = 0, one = 1, nm1 = N - 1;
  gw_array *lo = NULL, *hi = NULL;
  ASSERT_OK(gw_view(a, &z, &nm1, NULL, &lo));
  ASSERT_OK(gw_view(a, &one, &nm1, NULL, &hi));
  gw_array *pdst[2] = {out, a};
  const gw_array *psrc[2] = {a, pageable};
  gw__batch *wait_batch = NULL;
  gw_array *wdst[1] = {out};
  const gw_array *wsrc[1] = {a};
  ASSERT_OK(gw__batch_make(wdst, wsrc, 1, &wait_batch));
  int32_t v = fresh_value(), w = fresh_value();
  /* Work queued outside the capture, still running when the capture waits for it (the
   * model delays every queued item: its environment in tests/test_list.h; on a GPU it may have finished). */
  ASSERT_OK(gw_fill_async(busy, &w, other));

  ASSERT_OK(drv_begin(nat, MODE_GLOBAL));
  ASSERT_OK(gw_fill_async(a, &v, s)); /* one recorded item before the refusals */
  queued q0 = queued_now(nat);
  ASSERT_STATUS(gw_copy_async(pageable, a, s), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("pageable");
  ASSERT_ERROR_MENTIONS("captured into a graph");
  ASSERT_NOTHING_QUEUED(nat, q0);
  ASSERT_STATUS(gw_copy_async(a, pageable, s), GW_ENOTSUP);
  ASSERT_NOTHING_QUEUED(nat, q0);
  /* The host fills pageable memory the device cannot reach (the model's default, the
   * H200): refused. A device that reads pageable memory would record it. */
  ASSERT_STATUS(gw_fill_async(pageable, &v, s), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("pageable");
  ASSERT_NOTHING_QUEUED(nat, q0);
  ASSERT_STATUS(gw_copy_async(hi, lo, s), GW_ENOTSUP); /* overlapping: through a temporary */
  ASSERT_ERROR_MENTIONS("overlap");
  ASSERT_NOTHING_QUEUED(nat, q0);
  ASSERT_STATUS(gw__copy_many(pdst, psrc, 2, s), GW_ENOTSUP); /* one pageable pair: none */
  ASSERT_NOTHING_QUEUED(nat, q0);
  ASSERT_STATUS(gw__batch_run_wait(wait_batch, s), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("synchronizes");
  ASSERT_NOTHING_QUEUED(nat, q0);
  ASSERT_STATUS(gw_stream_synchronize(s), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("synchronize");
  ASSERT_NOTHING_QUEUED(nat, q0);
  if (gw_array_pending(busy)) {
    ASSERT_STATUS(gw_array_wait(busy, s), GW_ENOTSUP);
    ASSERT_ERROR_MENTIONS("outside the capture");
    ASSERT_NOTHING_QUEUED(nat, q0);
  } else if (tst_is_cpu()) {
    TST_FAIL("the delayed fill on the other stream completed before the capture's wait");
  }
  ASSERT_OK(gw_copy_async(out, a, s)); /* recording still works after the refusals */
  drv_graph *g = NULL;
  ASSERT_OK(drv_end(nat, &g)); /* valid and instantiable */
  ASSERT_OK(gw_stream_synchronize(other));

  for (int k = 0; k < LAUNCHES; k++) {
    ASSERT_OK(gw_fill(a, &POISON));
    poison_host(out);
    ASSERT_OK(drv_launch(g, nat));
    ASSERT_OK(gw_stream_synchronize(s));
    ASSERT_ALL_EQ(h32(out), &v, N, sizeof(int32_t));
  }
  drv_graph_destroy(g);
  gw__batch_free(wait_batch);
  gw_array *all[] = {a, out, busy, pageable, lo, hi};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gw_release(all[i]);
  free(pg);
  gw_stream_destroy(s);
  gw_stream_destroy(other);
  drv_stream_destroy(nat);
  gw_context_destroy(ctx);
  ASSERT_NO_LEAK(before);
  return 0;
}

/* The legacy default stream cannot take work while a blocking stream of its device is
 * captured (the runtime would invalidate that capture): refused, the capture valid. */
TEST_IMPL(legacy_while_blocking_captures) {
  gw_context *ctx = open_ctx();
  tst_leaks before = tst_leak_snapshot();
  void *nat = drv_stream(0); /* blocking */
  gw_stream *s = NULL, *legacy = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, nat, &s));
  ASSERT_OK(gw_stream_wrap(ctx, NULL, &legacy));
  gw_array *a = alloc1(ctx, GW_MEM_DEVICE), *out = alloc1(ctx, GW_MEM_PINNED);
  int32_t v = fresh_value();
  ASSERT_OK(drv_begin(nat, MODE_THREAD_LOCAL));
  ASSERT_OK(gw_fill_async(a, &v, s));
  queued q0 = queued_now(nat);
  ASSERT_STATUS(gw_fill_async(a, &v, legacy), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("legacy default stream");
  ASSERT_NOTHING_QUEUED(nat, q0);
  ASSERT_OK(gw_copy_async(out, a, s));
  drv_graph *g = NULL;
  ASSERT_OK(drv_end(nat, &g));
  for (int k = 0; k < LAUNCHES; k++) {
    ASSERT_OK(gw_fill(a, &POISON));
    poison_host(out);
    ASSERT_OK(drv_launch(g, nat));
    ASSERT_OK(gw_stream_synchronize(s));
    ASSERT_ALL_EQ(h32(out), &v, N, sizeof(int32_t));
  }
  drv_graph_destroy(g);
  gw_release(a);
  gw_release(out);
  gw_stream_destroy(s);
  gw_stream_destroy(legacy);
  drv_stream_destroy(nat);
  gw_context_destroy(ctx);
  ASSERT_NO_LEAK(before);
  return 0;
}

/* An array captured in one graph, then used in another capture on another stream: the
 * first capture's event (a node of the FIRST graph) is never waited on by the second (on
 * CUDA that is a dependency across captures, which invalidates the second; the model
 * refuses it), and the second capture records and replays its own work. */
TEST_IMPL(two_captures) {
  gw_context *ctx = open_ctx();
  tst_leaks before = tst_leak_snapshot();
  void *n1 = drv_stream(1), *n2 = drv_stream(1);
  gw_stream *s1 = NULL, *s2 = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, n1, &s1));
  ASSERT_OK(gw_stream_wrap(ctx, n2, &s2));
  gw_array *a = alloc1(ctx, GW_MEM_DEVICE), *out1 = alloc1(ctx, GW_MEM_PINNED),
           *out2 = alloc1(ctx, GW_MEM_PINNED);
  int32_t v1 = fresh_value(), v2 = fresh_value();
  drv_graph *g1 = NULL, *g2 = NULL;
  ASSERT_OK(drv_begin(n1, MODE_GLOBAL));
  ASSERT_OK(gw_fill_async(a, &v1, s1));
  ASSERT_OK(gw_copy_async(out1, a, s1));
  ASSERT_OK(drv_end(n1, &g1));
  ASSERT_OK(drv_begin(n2, MODE_GLOBAL));
  ASSERT_OK(gw_array_wait(a, s2)); /* nothing of this capture, nothing queued: no wait */
  ASSERT_OK(gw_fill_async(a, &v2, s2));
  ASSERT_OK(gw_copy_async(out2, a, s2));
  ASSERT_OK(drv_end(n2, &g2));
  for (int k = 0; k < LAUNCHES; k++) {
    poison_host(out1);
    poison_host(out2);
    ASSERT_OK(drv_launch(g1, n1));
    ASSERT_OK(gw_stream_synchronize(s1));
    ASSERT_OK(drv_launch(g2, n2));
    ASSERT_OK(gw_stream_synchronize(s2));
    ASSERT_ALL_EQ(h32(out1), &v1, N, sizeof(int32_t));
    ASSERT_ALL_EQ(h32(out2), &v2, N, sizeof(int32_t));
  }
  drv_graph_destroy(g1);
  drv_graph_destroy(g2);
  gw_release(a);
  gw_release(out1);
  gw_release(out2);
  gw_stream_destroy(s1);
  gw_stream_destroy(s2);
  drv_stream_destroy(n1);
  drv_stream_destroy(n2);
  gw_context_destroy(ctx);
  ASSERT_NO_LEAK(before);
  return 0;
}

#ifndef GWT_GRAPH_CUDA
/*
 * Two streams in one capture (diffusion3d --overlap's shape): s2 forks from s1 (the
 * caller's own event, as with any capture), gw_array_wait orders s2 after a's captured copy
 * on s1 and s1 after b's captured copy on s2 (joins inside the capture: stream waits the
 * model sees), a fill runs on s1 meanwhile. Outside the capture gw_array_wait ignores
 * captured work (it has not been queued): no wait.
 */
TEST_IMPL(join_two_streams) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = open_ctx();
  tst_leaks before = tst_leak_snapshot();
  void *n1 = drv_stream(1), *n2 = drv_stream(1), *n3 = drv_stream(1);
  gw_stream *s1 = NULL, *s2 = NULL, *s3 = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, n1, &s1));
  ASSERT_OK(gw_stream_wrap(ctx, n2, &s2));
  ASSERT_OK(gw_stream_wrap(ctx, n3, &s3));
  gw_array *in = alloc1(ctx, GW_MEM_PINNED), *a = alloc1(ctx, GW_MEM_DEVICE),
           *b = alloc1(ctx, GW_MEM_DEVICE), *c = alloc1(ctx, GW_MEM_DEVICE),
           *out = alloc1(ctx, GW_MEM_PINNED), *out2 = alloc1(ctx, GW_MEM_PINNED);
  int32_t v = fresh_value();
  ASSERT_OK(drv_begin(n1, MODE_GLOBAL));
  ASSERT_OK(gw_copy_async(a, in, s1));
  long waits = gw_cpu_op_calls(GW_CPU_OP_STREAM_WAIT_EVENT);
  ASSERT_OK(gw_array_wait(a, s3)); /* s3 is in no capture: captured work is no work */
  ASSERT_TRUE(gw_cpu_op_calls(GW_CPU_OP_STREAM_WAIT_EVENT) == waits);
  ASSERT_OK(gw_cpu_stream_wait_stream(n2, n1)); /* fork: s2 joins the capture */
  ASSERT_OK(gw_array_wait(a, s2));              /* join a's copy on s1 */
  ASSERT_TRUE(gw_cpu_op_calls(GW_CPU_OP_STREAM_WAIT_EVENT) == waits + 1);
  ASSERT_OK(gw_copy_async(b, a, s2));
  ASSERT_OK(gw_fill_async(c, &v, s1));
  ASSERT_OK(gw_array_wait(b, s1)); /* join back: b's copy on s2 */
  ASSERT_TRUE(gw_cpu_op_calls(GW_CPU_OP_STREAM_WAIT_EVENT) == waits + 2);
  ASSERT_OK(gw_copy_async(out, b, s1));
  ASSERT_OK(gw_copy_async(out2, c, s1));
  ASSERT_EQ_INT(drv_items(n1), 5);
  drv_graph *g = NULL;
  ASSERT_OK(drv_end(n1, &g));
  ASSERT_EQ_INT(drv_items(n2), -1); /* left the capture with it */
  for (int k = 0; k < LAUNCHES; k++) {
    tst_random_fill(h32(in), N * sizeof(int32_t));
    ASSERT_OK(gw_fill(b, &POISON));
    ASSERT_OK(gw_fill(c, &POISON));
    poison_host(out);
    poison_host(out2);
    ASSERT_OK(drv_launch(g, n1));
    ASSERT_OK(gw_stream_synchronize(s1));
    ASSERT_ELEMS_EQ(h32(out), h32(in), N, sizeof(int32_t));
    ASSERT_ALL_EQ(h32(out2), &v, N, sizeof(int32_t));
  }
  drv_graph_destroy(g);
  gw_array *all[] = {in, a, b, c, out, out2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gw_release(all[i]);
  gw_stream_destroy(s1);
  gw_stream_destroy(s2);
  gw_stream_destroy(s3);
  drv_stream_destroy(n1);
  drv_stream_destroy(n2);
  drv_stream_destroy(n3);
  gw_context_destroy(ctx);
  ASSERT_NO_LEAK(before);
  return 0;
}
#endif

/* ---- good neighbours: another thread's calls during a global-mode capture ------------------ */

typedef struct {
  gw_context *ctx;
  gw_array *dev, *pin;
  int32_t want;
  int rc;
  int mode_after; /* the model's per-thread mode after the calls (cpu only) */
} neighbour;

/* What another thread does while the main thread captures: synchronous copies and fills,
 * queries, a wrap of pageable memory (registration) and its release, an allocation, an
 * asynchronous copy on a stream of its own, its pending-work query and wait. */
static void *neighbour_main(void *arg) {
  neighbour *nb = arg;
  nb->rc = 1;
  gw_ptrinfo info;
  ASSERT_OK(gw_pointer_query(nb->ctx, gw_data(nb->dev), &info));
  ASSERT_EQ_INT(info.kind, GW_MEM_DEVICE);
  ASSERT_OK(gw_fill(nb->dev, &nb->want));
  ASSERT_OK(gw_copy(nb->pin, nb->dev)); /* device -> pinned: the H200's failing case */
  ASSERT_ALL_EQ(h32(nb->pin), &nb->want, N, sizeof(int32_t));
  int64_t n = N;
  int32_t *pg = plain_malloc(N * sizeof(int32_t));
  gw_array *wrapped = NULL, *tmp = NULL;
  ASSERT_OK(gw_wrap(nb->ctx, pg, GW_INT32, 1, &n, NULL, 0, &wrapped)); /* registers */
  ASSERT_OK(gw_copy(wrapped, nb->dev));
  ASSERT_ALL_EQ(pg, &nb->want, N, sizeof(int32_t));
  gw_stream *mine = NULL;
  ASSERT_OK(gw_stream_create(nb->ctx, &mine));
  ASSERT_OK(gw_copy_async(nb->pin, nb->dev, mine));
  (void)gw_array_pending(nb->pin); /* an event query */
  ASSERT_OK(gw_stream_synchronize(mine));
  gw_stream_destroy(mine);
#ifndef GWT_GRAPH_CUDA
  /* The model also lets allocation, free and a device synchronize through in the relaxed
   * mode; whether CUDA does during another thread's capture was not measured (cudaFree
   * and cudaDeviceSynchronize synchronize the device), so the CUDA run leaves them out. */
  ASSERT_OK(gw_alloc(nb->ctx, GW_MEM_DEVICE, GW_INT32, 1, &n, &tmp));
  ASSERT_OK(gw_copy(tmp, nb->dev));
  ASSERT_OK(gw_synchronize(nb->ctx));
  gw_release(tmp); /* a free */
#else
  (void)tmp;
#endif
  gw_release(wrapped); /* an unregistration */
  free(pg);
#ifndef GWT_GRAPH_CUDA
  nb->mode_after = (int)gw_cpu_thread_capture_mode();
#endif
  nb->rc = 0;
  return NULL;
}

TEST_IMPL(other_thread_global) {
  gw_context *ctx = open_ctx();
  tst_leaks before = tst_leak_snapshot();
  void *nat = drv_stream(1);
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, nat, &s));
  gw_array *a = alloc1(ctx, GW_MEM_DEVICE), *out = alloc1(ctx, GW_MEM_PINNED);
  neighbour nb = {ctx, alloc1(ctx, GW_MEM_DEVICE), alloc1(ctx, GW_MEM_PINNED), fresh_value(), 1,
                  -1};
  int32_t v = fresh_value();
  ASSERT_OK(drv_begin(nat, MODE_GLOBAL));
  ASSERT_OK(gw_fill_async(a, &v, s));
  pthread_t t;
  if (pthread_create(&t, NULL, neighbour_main, &nb) != 0) TST_FAIL("pthread_create");
  pthread_join(t, NULL);
  ASSERT_EQ_INT(nb.rc, 0);
#ifndef GWT_GRAPH_CUDA
  ASSERT_EQ_INT(nb.mode_after, GW_CPU_CAPTURE_GLOBAL); /* restored after each call */
#endif
  ASSERT_OK(gw_copy_async(out, a, s));
  drv_graph *g = NULL;
  ASSERT_OK(drv_end(nat, &g)); /* still valid */
  for (int k = 0; k < LAUNCHES; k++) {
    ASSERT_OK(gw_fill(a, &POISON));
    poison_host(out);
    ASSERT_OK(drv_launch(g, nat));
    ASSERT_OK(gw_stream_synchronize(s));
    ASSERT_ALL_EQ(h32(out), &v, N, sizeof(int32_t));
  }
  drv_graph_destroy(g);
  gw_array *all[] = {a, out, nb.dev, nb.pin};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) gw_release(all[i]);
  gw_stream_destroy(s);
  drv_stream_destroy(nat);
  gw_context_destroy(ctx);
  ASSERT_NO_LEAK(before);
  return 0;
}

/* ---- the model itself: its rules bite (so the tests above can fail) ------------------------ */

#ifndef GWT_GRAPH_CUDA
/* A user's own cudaHostRegister / cudaHostUnregister, in the thread's (global) mode:
 * arg->want_ok says whether the model must allow it. */
typedef struct {
  int32_t *p;
  int want_ok;
} raw_arg;
static void *raw_register(void *arg) {
  raw_arg *r = arg;
  gw_status st = gw_cpu_runtime_register(r->p, N * sizeof(int32_t));
  if (r->want_ok) {
    if (st != GW_OK) TST_FAIL("raw register refused: %s", gw_last_error());
    if (gw_cpu_runtime_unregister(r->p) != GW_OK) TST_FAIL("raw unregister: %s", gw_last_error());
  } else if (st != GW_EBACKEND) {
    TST_FAIL("raw register during a capture that prohibits it: %s", gw_err_name(st));
  }
  return NULL;
}
static void in_thread(raw_arg *r) {
  pthread_t t;
  if (pthread_create(&t, NULL, raw_register, r) != 0) TST_FAIL("pthread_create");
  pthread_join(t, NULL);
}

TEST_IMPL(model_rules) {
  TEST_REQUIRE_CPU();
  tst_leaks before = tst_leak_snapshot();
  void *nat = drv_stream(1);
  raw_arg r = {plain_malloc(N * sizeof(int32_t)), 0};
  drv_graph *g = NULL;

  /* GLOBAL: another thread's raw call, not relaxed, invalidates the capture. */
  ASSERT_OK(drv_begin(nat, MODE_GLOBAL));
  in_thread(&r);
  ASSERT_STATUS(drv_end(nat, &g), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS("invalidated");
  ASSERT_NULL(g);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs);

  /* THREAD_LOCAL: another thread's calls are allowed, the capturing thread's are not. */
  ASSERT_OK(drv_begin(nat, MODE_THREAD_LOCAL));
  r.want_ok = 1;
  in_thread(&r);
  ASSERT_OK(drv_end(nat, &g));
  gw_cpu_graph_destroy(g);
  g = NULL;
  ASSERT_OK(drv_begin(nat, MODE_THREAD_LOCAL));
  r.want_ok = 0;
  raw_register(&r);
  ASSERT_STATUS(drv_end(nat, &g), GW_EBACKEND);

  /* A thread in the relaxed mode may (what gpuwrap's backend calls run in). */
  ASSERT_OK(drv_begin(nat, MODE_GLOBAL));
  ASSERT_EQ_INT(gw_cpu_thread_capture_mode(), GW_CPU_CAPTURE_GLOBAL);
  ASSERT_OK(drv_end(nat, &g));
  ASSERT_EQ_INT(gw_cpu_graph_items(g), 0);
  gw_cpu_graph_destroy(g);
  free(r.p);
  drv_stream_destroy(nat);
  ASSERT_NO_LEAK(before);
  return 0;
}
#endif

/* ---- failure injection: a captured event that cannot be made --------------------------------- */

#ifndef GWT_GRAPH_CUDA
TEST_IMPL(captured_event_fails) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = open_ctx();
  tst_leaks before = tst_leak_snapshot();
  void *nat = drv_stream(1);
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, nat, &s));
  gw_array *a = alloc1(ctx, GW_MEM_DEVICE), *out = alloc1(ctx, GW_MEM_PINNED);
  int32_t v = fresh_value();
  ASSERT_OK(drv_begin(nat, MODE_GLOBAL));
  gw_cpu_fail_op(GW_CPU_OP_EVENT_CREATE, 1, GW_ENOMEM);
  ASSERT_STATUS(gw_fill_async(a, &v, s), GW_ENOMEM);
  ASSERT_ERROR_MENTIONS("recorded into the stream's capture");
  gw_cpu_fail_reset();
  ASSERT_OK(gw_copy_async(out, a, s));
  drv_graph *g = NULL;
  ASSERT_OK(drv_end(nat, &g)); /* no host wait was attempted: still valid */
  for (int k = 0; k < LAUNCHES; k++) {
    ASSERT_OK(gw_fill(a, &POISON));
    poison_host(out);
    ASSERT_OK(drv_launch(g, nat));
    ASSERT_OK(gw_stream_synchronize(s));
    ASSERT_ALL_EQ(h32(out), &v, N, sizeof(int32_t));
  }
  drv_graph_destroy(g);
  gw_release(a);
  gw_release(out);
  gw_stream_destroy(s);
  drv_stream_destroy(nat);
  gw_context_destroy(ctx);
  ASSERT_NO_LEAK(before);
  return 0;
}
#endif

/* ---- a capture another thread begins between gpuwrap's check and its enqueue ---------------- */

#ifndef GWT_GRAPH_CUDA
typedef struct {
  void *nat;
  gw_status st;
} begin_arg;
static void *begin_thread(void *p) {
  begin_arg *b = p;
  b->st = gw_cpu_stream_capture_begin(b->nat, GW_CPU_CAPTURE_GLOBAL);
  return NULL;
}
/* The hook (gw_cpu_after_capture_query): another thread begins a global capture, done
 * before gpuwrap acts on the answer it just had. */
static void begin_in_another_thread(void *p) {
  pthread_t t;
  if (pthread_create(&t, NULL, begin_thread, p) != 0) TST_FAIL("pthread_create");
  pthread_join(t, NULL);
}

/*
 * gpuwrap checks a stream's capture once per call and then queues; no runtime can make the
 * two one step (there is no conditional enqueue), and a capture another thread begins on
 * the SAME stream meanwhile is the program's own race, as for the runtime's own calls
 * (gpuwrap.h, "Graphs"): the work then lands in the capture. What gpuwrap owes is that its
 * records stay right: the work is the capture's, not pending, never waited for outside it
 * (before: its event, recorded in the capture but filed as queued work, left the array
 * "pending" for good and made a wait on another stream fail on a node of an ended
 * capture). And a capture begun at that moment on ANOTHER stream is never invalidated by
 * the call (the relaxed capture mode), even when the call runs host work.
 */
TEST_IMPL(capture_begins_after_check) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = open_ctx();
  tst_leaks before = tst_leak_snapshot();
  void *nat = drv_stream(1), *other = drv_stream(1);
  gw_stream *s = NULL, *s2 = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, nat, &s));
  ASSERT_OK(gw_stream_create(ctx, &s2));
  gw_array *a = alloc1(ctx, GW_MEM_DEVICE), *b = alloc1(ctx, GW_MEM_DEVICE);
  gw_array *out = alloc1(ctx, GW_MEM_PINNED);
  int32_t v = fresh_value(), w = fresh_value();
  ASSERT_OK(gw_fill(b, &v));
  ASSERT_OK(gw_fill(a, &POISON));

  /* 1. On the call's own stream. */
  begin_arg ba = {nat, GW_EINVAL};
  gw_cpu_after_capture_query(begin_in_another_thread, &ba);
  ASSERT_OK(gw_copy_async(a, b, s));
  ASSERT_OK(ba.st);
  ASSERT_TRUE(drv_items(nat) >= 1); /* the copy was recorded, not run */
  drv_graph *g = NULL;
  ASSERT_OK(drv_end(nat, &g));
  ASSERT_EQ_INT(gw_array_pending(a), 0);
  ASSERT_EQ_INT(gw_array_pending(b), 0);
  ASSERT_OK(gw_array_wait(a, s2));
  ASSERT_OK(gw_array_wait(b, s2));
  ASSERT_OK(gw_copy_async(out, a, s2));
  ASSERT_OK(gw_stream_synchronize(s2));
  ASSERT_ALL_EQ(h32(out), &POISON, N, sizeof(int32_t)); /* only captured: nothing ran */
  for (int k = 0; k < LAUNCHES; k++) {
    ASSERT_OK(gw_fill(a, &POISON));
    poison_host(out);
    ASSERT_OK(drv_launch(g, nat));
    ASSERT_OK(gw_stream_synchronize(s));
    ASSERT_OK(gw_copy(out, a));
    ASSERT_ALL_EQ(h32(out), &v, N, sizeof(int32_t));
  }
  drv_graph_destroy(g);
  /* The stream's eager work after the capture is followed as before. */
  ASSERT_OK(gw_fill_async(a, &w, s));
  ASSERT_EQ_INT(gw_array_pending(a), 1); /* delayed by the model: still queued */
  ASSERT_OK(gw_array_wait(a, s2));
  ASSERT_OK(gw_copy_async(out, a, s2));
  ASSERT_OK(gw_stream_synchronize(s2));
  ASSERT_ALL_EQ(h32(out), &w, N, sizeof(int32_t));
  ASSERT_EQ_INT(gw_array_pending(a), 0);

  /* 2. Another stream's global capture, begun between the check and a host-run copy. */
  int32_t *pg = malloc(N * sizeof *pg);
  ASSERT_NOT_NULL(pg);
  for (int i = 0; i < N; i++) pg[i] = fresh_value();
  int64_t n = N;
  gw_array *pw = NULL;
  ASSERT_OK(gw_wrap(ctx, pg, GW_INT32, 1, &n, NULL, GW_WRAP_NO_REGISTER, &pw));
  ba = (begin_arg){other, GW_EINVAL};
  gw_cpu_after_capture_query(begin_in_another_thread, &ba);
  ASSERT_OK(gw_copy_async(a, pw, s)); /* pageable: the host runs it */
  ASSERT_OK(ba.st);
  ASSERT_OK(drv_end(other, &g)); /* still valid */
  drv_graph_destroy(g);
  ASSERT_OK(gw_copy(out, a));
  ASSERT_ELEMS_EQ(h32(out), pg, N, sizeof(int32_t));

  /* 3. An interprocess event recorded on the stream as its capture begins: the model's
   * runtime takes no interprocess event into a graph and refuses the record at the
   * enqueue (GW_ENOTSUP), the capture going on. */
  gw__ipc_event *ev = NULL;
  gw__ipc_event_handle eh;
  ASSERT_OK(gw__ipc_event_create(ctx, &ev, &eh));
  ba = (begin_arg){nat, GW_EINVAL};
  gw_cpu_after_capture_query(begin_in_another_thread, &ba);
  ASSERT_STATUS(gw__ipc_event_record(ev, s), GW_ENOTSUP);
  ASSERT_OK(ba.st);
  ASSERT_OK(drv_end(nat, &g));
  ASSERT_EQ_INT(gw_cpu_graph_items(g), 0);
  drv_graph_destroy(g);
  gw__ipc_event_destroy(ev);

  gw_release(pw);
  free(pg);
  gw_release(a);
  gw_release(b);
  gw_release(out);
  gw_stream_destroy(s2);
  gw_stream_destroy(s);
  drv_stream_destroy(other);
  drv_stream_destroy(nat);
  gw_context_destroy(ctx);
  ASSERT_NO_LEAK(before);
  return 0;
}
#endif
