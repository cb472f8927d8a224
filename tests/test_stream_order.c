/*
 * Stream ordering on the asynchronous CPU model (gpuwrap.h "Streams", gpuwrap/cpu.h).
 *
 * Each stream of the model is a queue run by a worker thread, and with
 * GPUWRAP_CPU_STREAM_DELAY_US every queued copy or fill sleeps before it runs, so a race
 * has a known outcome: work queued on a stream runs after the host's (and other
 * streams' undelayed) next steps. Each ordering case is checked both ways: with the wait
 * the data is right in every element; without it the reader sees the stale data or the
 * poison — which shows that the model is asynchronous, so that a missing wait fails here.
 *
 * Data: fresh random inputs, outputs poisoned first, every element compared.
 * The delay is 150 ms: far above the host's steps between two calls (microseconds, a few
 * ms under valgrind), so the outcomes below do not depend on the scheduler.
 */
#include "test.h"

#include <sys/wait.h>

#include "gpuwrap/dlpack.h"

#define N 4099 /* odd: no loop happens to be a multiple of it */

static const int32_t POISON = (int32_t)0x7eadbeef;

/* A pinned (host-readable, device-accessible) int32 array of N elements. */
static gw_array *pinned(gw_context *ctx) {
  int64_t n = N;
  gw_array *a = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_INT32, 1, &n, &a));
  return a;
}
static gw_array *device(gw_context *ctx) {
  int64_t n = N;
  gw_array *a = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, &n, &a));
  return a;
}
static int32_t *host(gw_array *a) { return (int32_t *)gw_host_data(a); }

/* Fresh random data, synchronously (complete on return). */
static void randomize(gw_array *a) { tst_random_fill(host(a), N * sizeof(int32_t)); }
/* A random value that differs from v (so "stale" and "new" cannot be confused). */
static int32_t other_than(int32_t v) {
  int32_t w;
  do w = (int32_t)tst_rand64();
  while (w == v || w == POISON);
  return w;
}

/* (1) Two streams with a dependency: A writes buf, B reads it. */
TEST_IMPL(missing_wait) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_stream *a = NULL, *b = NULL;
  ASSERT_OK(gw_stream_create(ctx, &a));
  ASSERT_OK(gw_stream_create(ctx, &b));
  gw_array *in = pinned(ctx), *scratch = device(ctx), *buf = device(ctx), *out = pinned(ctx);
  int32_t stale = other_than(POISON);

  for (int with_wait = 1; with_wait >= 0; with_wait--) {
    randomize(in);
    ASSERT_OK(gw_fill(buf, &stale)); /* synchronous: buf holds stale data on return */
    ASSERT_OK(gw_fill(out, &POISON));
    /* A: two items (each delayed), the second writes buf: buf is written at ~2 delays. */
    ASSERT_OK(gw_copy_async(scratch, in, a));
    ASSERT_OK(gw_copy_async(buf, in, a));
    /* B reads buf at ~1 delay unless it waits for A's pending work on buf.
     * Removing the next line (the gw_array_wait) makes the with_wait case fail: B's copy
     * then runs before A's write, and out holds the stale value (the case below). */
    if (with_wait) ASSERT_OK(gw_array_wait(buf, b));
    ASSERT_OK(gw_copy_async(out, buf, b));
    ASSERT_OK(gw_stream_synchronize(b));
    if (with_wait) {
      ASSERT_ELEMS_EQ(host(out), host(in), N, 4);
    } else {
      /* the model is asynchronous: without the wait, B read buf before A wrote it */
      ASSERT_ALL_EQ(host(out), &stale, N, 4);
    }
    ASSERT_OK(gw_stream_synchronize(a));
    /* A's copy did land in buf either way */
    ASSERT_OK(gw_copy(out, buf));
    ASSERT_ELEMS_EQ(host(out), host(in), N, 4);
  }
  gw_release(in);
  gw_release(scratch);
  gw_release(buf);
  gw_release(out);
  gw_stream_destroy(a);
  gw_stream_destroy(b);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* (2) Reading a stream's result on the host before synchronizing it. */
TEST_IMPL(host_read_before_sync) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  gw_array *in = pinned(ctx), *out = pinned(ctx);
  randomize(in);
  ASSERT_OK(gw_fill(out, &POISON));
  ASSERT_OK(gw_copy_async(out, in, s));
  /* Too early: the copy is still queued (the mistake gw_stream_synchronize prevents). */
  ASSERT_ALL_EQ(host(out), &POISON, N, 4);
  ASSERT_EQ_INT(gw_array_pending(out), 1);
  ASSERT_EQ_INT(gw_array_pending(in), 1); /* still being read */
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_ELEMS_EQ(host(out), host(in), N, 4);
  ASSERT_EQ_INT(gw_array_pending(out), 0);
  /* the same for a fill */
  int32_t v = other_than(POISON);
  ASSERT_OK(gw_fill(out, &POISON));
  ASSERT_OK(gw_fill_async(out, &v, s));
  ASSERT_ALL_EQ(host(out), &POISON, N, 4);
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_ALL_EQ(host(out), &v, N, 4);
  gw_release(in);
  gw_release(out);
  gw_stream_destroy(s);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* (3) Borrowed streams: gpuwrap's own native handle, an external non-blocking stream,
 * bad handles, and the legacy default stream. */
TEST_IMPL(borrowed) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  gw_context *ctx1 = tst_open(1);
  tst_leaks before = tst_leak_snapshot();
  gw_array *in = pinned(ctx), *buf = device(ctx), *out = pinned(ctx);
  int32_t stale = other_than(POISON);

  /* gw_stream_native of a gpuwrap stream, wrapped back: the same queue, so FIFO with it.
   * Were it another queue, w's copy (one delay) would run before s's write (two). */
  gw_stream *s = NULL, *w = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  void *nat = gw_stream_native(s);
  ASSERT_NOT_NULL(nat);
  ASSERT_OK(gw_stream_wrap(ctx, nat, &w));
  ASSERT_EQ_PTR(gw_stream_native(w), nat);
  randomize(in);
  ASSERT_OK(gw_fill(buf, &stale));
  ASSERT_OK(gw_fill(out, &POISON));
  ASSERT_OK(gw_fill_async(out, &stale, s));
  ASSERT_OK(gw_copy_async(buf, in, s));
  ASSERT_OK(gw_copy_async(out, buf, w));
  ASSERT_OK(gw_stream_synchronize(w)); /* only w: it is s */
  ASSERT_ELEMS_EQ(host(out), host(in), N, 4);
  gw_stream_destroy(w); /* the handle only: s keeps working */
  ASSERT_OK(gw_fill_async(out, &stale, s));
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_ALL_EQ(host(out), &stale, N, 4);

  /* An external non-blocking stream (a PyTorch/CuPy side stream), borrowed. */
  void *ext = NULL;
  ASSERT_OK(gw_cpu_stream_create_external(0, 1, &ext));
  ASSERT_NOT_NULL(ext);
  for (int round = 0; round < 2; round++) {
    gw_stream *e = NULL;
    ASSERT_OK(gw_stream_wrap(ctx, ext, &e));
    ASSERT_EQ_PTR(gw_stream_native(e), ext);
    int32_t v = other_than(POISON);
    randomize(in);
    ASSERT_OK(gw_fill(out, &POISON));
    ASSERT_OK(gw_fill_async(buf, &v, e));
    ASSERT_OK(gw_copy_async(out, buf, e));
    ASSERT_ALL_EQ(host(out), &POISON, N, 4); /* queued, not run */
    ASSERT_OK(gw_stream_synchronize(e));
    ASSERT_ALL_EQ(host(out), &v, N, 4);
    ASSERT_OK(gw_copy_async(buf, in, e));
    ASSERT_OK(gw_copy_async(out, buf, e));
    ASSERT_OK(gw_stream_synchronize(e));
    ASSERT_ELEMS_EQ(host(out), host(in), N, 4);
    /* the second round shows that this left the external stream usable */
    gw_stream_destroy(e);
  }
  ASSERT_OK(gw_cpu_stream_destroy_external(ext));
  gw_stream *e = NULL;
  ASSERT_STATUS(gw_stream_wrap(ctx, ext, &e), GW_EINVAL); /* destroyed: no longer a stream */
  ASSERT_STATUS(gw_cpu_stream_destroy_external(ext), GW_EINVAL);
  ASSERT_STATUS(gw_cpu_stream_destroy_external(nat), GW_EINVAL); /* gpuwrap's own */

  /* Garbage handles: never dereferenced. */
  int local;
  void *heap = malloc(64);
  void *garbage[] = {&local,          heap, (void *)(uintptr_t)0x1, (void *)(uintptr_t)0xdeadbeef0,
                     (char *)nat + 8, in};
  for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
    ASSERT_STATUS(gw_stream_wrap(ctx, garbage[i], &e), GW_EINVAL);
    ASSERT_ERROR_MENTIONS("not a stream of the cpu backend");
  }
  free(heap);
  /* Another device's streams (GPUWRAP_CPU_DEVICES=2). */
  gw_stream *s1 = NULL;
  ASSERT_OK(gw_stream_create(ctx1, &s1));
  ASSERT_STATUS(gw_stream_wrap(ctx, gw_stream_native(s1), &e), GW_EDEVICE);
  ASSERT_OK(gw_stream_wrap(ctx1, gw_stream_native(s1), &e));
  gw_stream_destroy(e);
  void *ext1 = NULL;
  ASSERT_OK(gw_cpu_stream_create_external(1, 1, &ext1));
  ASSERT_STATUS(gw_stream_wrap(ctx, ext1, &e), GW_EDEVICE);
  ASSERT_OK(gw_cpu_stream_destroy_external(ext1));
  gw_stream_destroy(s1);
  ASSERT_STATUS(gw_cpu_stream_create_external(2, 1, &ext1), GW_ENODEV);
  ASSERT_STATUS(gw_cpu_stream_create_external(0, 1, NULL), GW_EINVAL);
  /* NULL arguments */
  ASSERT_STATUS(gw_stream_wrap(NULL, nat, &e), GW_EINVAL);
  ASSERT_STATUS(gw_stream_wrap(ctx, nat, NULL), GW_EINVAL);
  ASSERT_NULL(gw_stream_native(NULL));

  /* Borrowed NULL is the legacy default stream: its work comes before a following
   * synchronous copy (legacy-stream work itself), and blocks gpuwrap's blocking streams. */
  gw_stream *l = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, NULL, &l));
  ASSERT_NULL(gw_stream_native(l));
  randomize(in);
  ASSERT_OK(gw_fill(buf, &stale));
  ASSERT_OK(gw_fill(out, &POISON));
  ASSERT_OK(gw_copy_async(buf, in, l));
  ASSERT_ALL_EQ(host(out), &POISON, N, 4);
  ASSERT_OK(gw_copy(out, buf)); /* waits for the legacy stream's copy */
  ASSERT_ELEMS_EQ(host(out), host(in), N, 4);
  gw_stream_destroy(l); /* the handle only */
  ASSERT_OK(gw_stream_wrap(ctx, NULL, &l));
  ASSERT_OK(gw_stream_synchronize(l));
  gw_stream_destroy(l);

  gw_release(in);
  gw_release(buf);
  gw_release(out);
  gw_stream_destroy(s);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx1);
  gw_context_destroy(ctx);
  return 0;
}

/* (4) Blocking and non-blocking streams against the legacy stream (synchronous calls). */
TEST_IMPL(blocking) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_array *in = pinned(ctx), *buf = device(ctx), *out = pinned(ctx);
  int32_t stale = other_than(POISON);
  gw_stream *s = NULL, *e = NULL, *l = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  void *ext = NULL;
  ASSERT_OK(gw_cpu_stream_create_external(0, 1, &ext));
  ASSERT_OK(gw_stream_wrap(ctx, ext, &e));
  ASSERT_OK(gw_stream_wrap(ctx, NULL, &l));

  /* gpuwrap's stream is blocking: a synchronous copy waits for its earlier fill. */
  int32_t v = other_than(stale);
  ASSERT_OK(gw_fill(buf, &stale));
  ASSERT_OK(gw_fill_async(buf, &v, s));
  ASSERT_OK(gw_copy(out, buf));
  ASSERT_ALL_EQ(host(out), &v, N, 4);
  /* A non-blocking stream is not waited for: the synchronous copy reads stale data. */
  int32_t v2 = other_than(stale);
  ASSERT_OK(gw_fill(buf, &stale));
  ASSERT_OK(gw_fill_async(buf, &v2, e));
  ASSERT_OK(gw_copy(out, buf));
  ASSERT_ALL_EQ(host(out), &stale, N, 4);
  ASSERT_OK(gw_stream_synchronize(e));
  ASSERT_OK(gw_copy(out, buf));
  ASSERT_ALL_EQ(host(out), &v2, N, 4);

  /* The other direction: work on the legacy stream comes before a blocking stream's later
   * work, not before a non-blocking stream's. */
  gw_array *out2 = pinned(ctx), *scratch = device(ctx);
  for (int nonblocking = 0; nonblocking <= 1; nonblocking++) {
    randomize(in);
    ASSERT_OK(gw_fill(buf, &stale));
    ASSERT_OK(gw_fill(out2, &POISON));
    ASSERT_OK(gw_fill_async(scratch, &stale, l)); /* puts the write one delay later */
    ASSERT_OK(gw_copy_async(buf, in, l));
    ASSERT_OK(gw_copy_async(out2, buf, nonblocking ? e : s));
    ASSERT_OK(gw_stream_synchronize(nonblocking ? e : s));
    if (nonblocking)
      ASSERT_ALL_EQ(host(out2), &stale, N, 4);
    else
      ASSERT_ELEMS_EQ(host(out2), host(in), N, 4);
    ASSERT_OK(gw_stream_synchronize(l));
  }
  gw_release(out2);
  gw_release(scratch);
  gw_stream_destroy(l);
  gw_stream_destroy(e);
  ASSERT_OK(gw_cpu_stream_destroy_external(ext));
  gw_stream_destroy(s);
  gw_release(in);
  gw_release(buf);
  gw_release(out);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* (5) gw_array_pending, gw_array_wait without history, gw_synchronize drains all. */
TEST_IMPL(pending) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_stream *s1 = NULL, *s2 = NULL, *e = NULL, *l = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s1));
  ASSERT_OK(gw_stream_create(ctx, &s2));
  void *ext = NULL;
  ASSERT_OK(gw_cpu_stream_create_external(0, 1, &ext));
  ASSERT_OK(gw_stream_wrap(ctx, ext, &e));
  ASSERT_OK(gw_stream_wrap(ctx, NULL, &l));
  gw_stream *all[4] = {s1, s2, e, l};
  gw_array *in[4], *out[4];
  for (int k = 0; k < 4; k++) {
    in[k] = pinned(ctx);
    out[k] = pinned(ctx);
    randomize(in[k]);
    ASSERT_OK(gw_fill(out[k], &POISON));
  }
  /* no asynchronous history: nothing to wait for */
  ASSERT_EQ_INT(gw_array_pending(in[0]), 0);
  ASSERT_OK(gw_array_wait(in[0], s1));
  ASSERT_STATUS(gw_array_wait(NULL, s1), GW_EINVAL);
  ASSERT_STATUS(gw_array_wait(in[0], NULL), GW_EINVAL);
  ASSERT_EQ_INT(gw_array_pending(NULL), 0);
  for (int k = 0; k < 4; k++) ASSERT_OK(gw_copy_async(out[k], in[k], all[k]));
  for (int k = 0; k < 4; k++) {
    ASSERT_EQ_INT(gw_array_pending(out[k]), 1);
    ASSERT_ALL_EQ(host(out[k]), &POISON, N, 4);
  }
  ASSERT_OK(gw_synchronize(ctx)); /* every stream of the device, non-blocking ones too */
  for (int k = 0; k < 4; k++) {
    ASSERT_EQ_INT(gw_array_pending(out[k]), 0);
    ASSERT_EQ_INT(gw_array_pending(in[k]), 0);
    ASSERT_ELEMS_EQ(host(out[k]), host(in[k]), N, 4);
  }
  /* complete work: a wait is GW_OK and queues nothing that could block */
  ASSERT_OK(gw_array_wait(out[2], s1));
  ASSERT_OK(gw_stream_synchronize(s1));
  for (int k = 0; k < 4; k++) {
    gw_release(in[k]);
    gw_release(out[k]);
  }
  gw_stream_destroy(l);
  gw_stream_destroy(e);
  ASSERT_OK(gw_cpu_stream_destroy_external(ext));
  gw_stream_destroy(s1);
  gw_stream_destroy(s2);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* (6) DLPack hand-over: gpuwrap's work pending on an exported array, a consumer stream
 * (non-blocking, as a PyTorch side stream) made to wait with gw_array_wait. */
TEST_IMPL(dlpack_handover) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_stream *prod = NULL, *cons = NULL;
  ASSERT_OK(gw_stream_create(ctx, &prod));
  void *ext = NULL;
  ASSERT_OK(gw_cpu_stream_create_external(0, 1, &ext));
  ASSERT_OK(gw_stream_wrap(ctx, ext, &cons));
  gw_array *in = pinned(ctx), *a = device(ctx), *out = pinned(ctx), *scratch = device(ctx);
  int32_t stale = other_than(POISON);
  for (int with_wait = 1; with_wait >= 0; with_wait--) {
    randomize(in);
    ASSERT_OK(gw_fill(a, &stale));
    ASSERT_OK(gw_fill(out, &POISON));
    ASSERT_OK(gw_fill_async(scratch, &POISON, prod)); /* puts the write one delay later */
    ASSERT_OK(gw_copy_async(a, in, prod));
    ASSERT_EQ_INT(gw_array_pending(a), 1);
    DLManagedTensorVersioned *t = NULL;
    ASSERT_OK(gw_to_dlpack(a, &t));
    /* The consumer imports the tensor (its own array of the same memory, with no history
     * of its own) and reads it on its stream. Removing the gw_array_wait line makes the
     * with_wait case fail: the consumer's copy reads the stale value (the case below). */
    gw_array *b = NULL;
    ASSERT_OK(gw_from_dlpack(ctx, t, &b));
    ASSERT_EQ_INT(gw_array_pending(b), 0);
    if (with_wait) ASSERT_OK(gw_array_wait(a, cons));
    ASSERT_OK(gw_copy_async(out, b, cons));
    ASSERT_OK(gw_stream_synchronize(cons));
    if (with_wait)
      ASSERT_ELEMS_EQ(host(out), host(in), N, 4);
    else
      ASSERT_ALL_EQ(host(out), &stale, N, 4);
    ASSERT_OK(gw_stream_synchronize(prod));
    gw_release(b);
  }
  gw_release(in);
  gw_release(a);
  gw_release(out);
  gw_release(scratch);
  gw_stream_destroy(cons);
  ASSERT_OK(gw_cpu_stream_destroy_external(ext));
  gw_stream_destroy(prod);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* Events and waits with injected failures: each new injection point fails its call with
 * nothing queued, and the core falls back to waiting (gw__pending_note). No delay. */
TEST_IMPL(inject_stream_ops) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  ASSERT_STR_CONTAINS(gw_cpu_op_name(GW_CPU_OP_STREAM_BORROW), "stream_borrow");
  ASSERT_STR_CONTAINS(gw_cpu_op_name(GW_CPU_OP_EVENT_CREATE), "event_create");
  ASSERT_STR_CONTAINS(gw_cpu_op_name(GW_CPU_OP_EVENT_RECORD), "event_record");
  ASSERT_STR_CONTAINS(gw_cpu_op_name(GW_CPU_OP_STREAM_WAIT_EVENT), "stream_wait_event");
  gw_stream *s = NULL, *w = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  gw_cpu_fail_op(GW_CPU_OP_STREAM_BORROW, 1, GW_EBACKEND);
  ASSERT_STATUS(gw_stream_wrap(ctx, gw_stream_native(s), &w), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS("stream_borrow");
  ASSERT_OK(gw_stream_wrap(ctx, gw_stream_native(s), &w));
  gw_array *in = pinned(ctx), *out = pinned(ctx);
  for (int k = 0; k < 2; k++) {
    randomize(in);
    ASSERT_OK(gw_fill(out, &POISON));
    /* no event for the array: the copy still succeeds, and nothing stays pending */
    gw_cpu_fail_op(k ? GW_CPU_OP_EVENT_RECORD : GW_CPU_OP_EVENT_CREATE, 1, GW_ENOMEM);
    ASSERT_OK(gw_copy_async(out, in, s));
    ASSERT_EQ_INT(gw_array_pending(out), 0);
    ASSERT_ELEMS_EQ(host(out), host(in), N, 4);
  }
  gw_cpu_fail_reset();
  ASSERT_OK(gw_copy_async(out, in, s));
  gw_cpu_fail_op(GW_CPU_OP_STREAM_WAIT_EVENT, 1, GW_EBACKEND);
  gw_status st = gw_array_wait(out, w);
  /* on the same queue, or already complete, no wait is made; otherwise it fails */
  ASSERT_TRUE(st == GW_OK || st == GW_EBACKEND);
  gw_cpu_fail_reset();
  ASSERT_OK(gw_stream_synchronize(s));
  gw_release(in);
  gw_release(out);
  gw_stream_destroy(w);
  gw_stream_destroy(s);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* fork() while work is queued: the child has no worker threads (it must not join the
 * parent's, nor start new ones: TSan refuses threads after a multi-threaded fork); its
 * callers run the queued work, so it can synchronize, use and destroy its streams; the
 * parent's work is unaffected. */
TEST_IMPL(fork_child) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  gw_array *in = pinned(ctx), *out = pinned(ctx);
  randomize(in);
  ASSERT_OK(gw_fill(out, &POISON));
  ASSERT_OK(gw_copy_async(out, in, s)); /* still queued (delayed) at the fork */
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    int bad = gw_stream_synchronize(s) != GW_OK;
    bad |= memcmp(host(out), host(in), N * 4) != 0;
    int32_t v = other_than(POISON);
    bad |= gw_fill_async(out, &v, s) != GW_OK;
    bad |= gw_synchronize(ctx) != GW_OK;
    for (int i = 0; i < N; i++) bad |= host(out)[i] != v;
    gw_stream_destroy(s);
    gw_release(in); /* the child's copies of the arrays (valgrind checks its leaks too) */
    gw_release(out);
    gw_context_destroy(ctx);
    _exit(bad ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ_INT(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ_INT(WEXITSTATUS(status), 0);
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_ELEMS_EQ(host(out), host(in), N, 4);
  gw_release(in);
  gw_release(out);
  gw_stream_destroy(s);
  gw_context_destroy(ctx);
  return 0;
}

/* (9) Releasing an array while a stream still writes its memory: when the release gives
 * something up that the work needs (memory it frees: a deleter's, a DLPack producer's
 * buffer, an owning wrap's; a registration gpuwrap made), it waits for that work first (the
 * buffer was handed back at once: the producer freed it under the queued fill, a crash from
 * Python). The deleter checks that every element holds the fill's value when it runs, and
 * the registration is still there when the fill runs (the CPU model fails a copy into
 * memory no longer pinned). A borrowing wrap that holds nothing does not wait. */
typedef struct {
  int32_t want;
  int calls, complete;
} owner;
static void owner_free(void *p, void *user) {
  owner *o = user;
  o->calls++;
  o->complete = 1;
  for (int i = 0; i < N; i++) o->complete &= ((int32_t *)p)[i] == o->want;
  free(p);
}
TEST_IMPL(release_waits) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  int64_t n = N;
  /* malloc'd memory, registered by the wrap (so the fill is queued on s), owned by a
   * deleter / by GW_WRAP_OWN / borrowed (the registration alone) */
  for (int how = 0; how < 3; how++) {
    owner o = {other_than(POISON), 0, 0};
    int32_t *buf = malloc(N * sizeof(int32_t));
    for (int i = 0; i < N; i++) buf[i] = POISON;
    gw_array *a = NULL;
    if (how == 0)
      ASSERT_OK(gw_wrap_with_deleter(ctx, buf, GW_INT32, 1, &n, NULL, 0, owner_free, &o, &a));
    else
      ASSERT_OK(gw_wrap(ctx, buf, GW_INT32, 1, &n, NULL, how == 1 ? GW_WRAP_OWN : 0, &a));
    ASSERT_EQ_INT(gw_kind(a), GW_MEM_PINNED);
    /* the CPU model's streams start each item 150 ms late: the fill is still queued */
    ASSERT_OK(gw_fill_async(a, &o.want, s));
    ASSERT_EQ_INT(gw_array_pending(a), 1);
    gw_release(a); /* waits for the fill: then unregisters, frees or hands to the deleter */
    if (how == 0) {
      ASSERT_EQ_INT(o.calls, 1);
      ASSERT_EQ_INT(o.complete, 1);
    }
    if (how == 2) { /* borrowed: still ours, and filled by the time the release returned */
      ASSERT_ALL_EQ(buf, &o.want, N, 4);
      free(buf);
    }
    ASSERT_EQ_SIZE(gw_cpu_live_registrations(), 0);
    ASSERT_OK(gw_stream_synchronize(s)); /* nothing failed on the stream */
  }
  /* memory pinned by someone else, borrowed: gpuwrap holds nothing, the release does not wait */
  void *pin = NULL;
  ASSERT_OK(gw_cpu_runtime_alloc(GW_MEM_PINNED, 0, N * sizeof(int32_t), &pin));
  int32_t *mine = pin;
  for (int i = 0; i < N; i++) mine[i] = POISON;
  gw_array *b = NULL;
  ASSERT_OK(gw_wrap(ctx, mine, GW_INT32, 1, &n, NULL, 0, &b));
  int32_t v = other_than(POISON);
  ASSERT_OK(gw_fill_async(b, &v, s));
  gw_release(b);
  ASSERT_EQ_INT(mine[N - 1], POISON); /* still queued: the release did not wait */
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_ALL_EQ(mine, &v, N, 4);
  ASSERT_OK(gw_cpu_runtime_free(pin));
  gw_stream_destroy(s);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* (10) Releasing an array that two streams still read: s1 is kept busy (three delayed
 * fills of another array queued first), then both streams queue a copy out of the array,
 * s2's last. The release must wait for both reads: the array knows the pending work of
 * every stream that touched it, not only the last one recorded (which was s2's: the
 * deleter then freed the buffer under s1's queued read). The deleter checks that both
 * copies are complete when it runs and that each destination holds every element; the
 * registration (all three ways) must outlive both reads, or the model fails s1's copy. */
typedef struct {
  gw_array *dst[2];
  const int32_t *want;
  int calls, pending, complete;
} readers;
static void readers_free(void *p, void *user) {
  readers *r = user;
  r->calls++;
  r->pending = gw_array_pending(r->dst[0]) + gw_array_pending(r->dst[1]);
  r->complete = r->pending == 0 && memcmp(p, r->want, N * sizeof(int32_t)) == 0;
  for (int k = 0; k < 2 && r->pending == 0; k++)
    for (int i = 0; i < N; i++) r->complete &= host(r->dst[k])[i] == r->want[i];
  free(p);
}
TEST_IMPL(release_two_readers) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_stream *s1 = NULL, *s2 = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s1));
  ASSERT_OK(gw_stream_create(ctx, &s2));
  gw_array *busy = pinned(ctx);
  int64_t n = N;
  int32_t *want = malloc(N * sizeof(int32_t));
  ASSERT_TRUE(want != NULL);
  /* a deleter / GW_WRAP_OWN / borrowed (the registration alone) */
  for (int how = 0; how < 3; how++) {
    tst_random_fill(want, N * sizeof(int32_t));
    readers r = {{pinned(ctx), pinned(ctx)}, want, 0, -1, 0};
    for (int k = 0; k < 2; k++) ASSERT_OK(gw_fill(r.dst[k], &POISON));
    int32_t *buf = malloc(N * sizeof(int32_t));
    ASSERT_TRUE(buf != NULL);
    memcpy(buf, want, N * sizeof(int32_t));
    gw_array *a = NULL;
    if (how == 0)
      ASSERT_OK(gw_wrap_with_deleter(ctx, buf, GW_INT32, 1, &n, NULL, 0, readers_free, &r, &a));
    else
      ASSERT_OK(gw_wrap(ctx, buf, GW_INT32, 1, &n, NULL, how == 1 ? GW_WRAP_OWN : 0, &a));
    ASSERT_EQ_INT(gw_kind(a), GW_MEM_PINNED); /* registered: the copies are queued */
    int32_t v = other_than(POISON);
    for (int k = 0; k < 3; k++) ASSERT_OK(gw_fill_async(busy, &v, s1));
    ASSERT_OK(gw_copy_async(r.dst[0], a, s1));
    ASSERT_OK(gw_copy_async(r.dst[1], a, s2));
    ASSERT_EQ_INT(gw_array_pending(a), 1);
    gw_release(a); /* waits for both reads */
    if (how == 0) {
      ASSERT_EQ_INT(r.calls, 1);
      ASSERT_EQ_INT(r.pending, 0);
      ASSERT_EQ_INT(r.complete, 1);
    }
    if (how == 2) { /* borrowed: ours again, and both reads done when the release returned */
      ASSERT_EQ_INT(gw_array_pending(r.dst[0]) + gw_array_pending(r.dst[1]), 0);
      ASSERT_ELEMS_EQ(buf, want, N, 4);
      free(buf);
    }
    ASSERT_EQ_SIZE(gw_cpu_live_registrations(), 0);
    ASSERT_OK(gw_stream_synchronize(s1)); /* nothing failed on either stream */
    ASSERT_OK(gw_stream_synchronize(s2));
    for (int k = 0; k < 2; k++) {
      ASSERT_ELEMS_EQ(host(r.dst[k]), want, N, 4);
      gw_release(r.dst[k]);
    }
    ASSERT_ALL_EQ(host(busy), &v, N, 4);
  }
  free(want);
  gw_release(busy);
  gw_stream_destroy(s1);
  gw_stream_destroy(s2);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* (11) A writer after two readers: one gw_array_wait orders the writer's stream after the
 * reads of both streams (s1 kept busy, s2's read queued last). Waiting for the last read
 * only let the write land before s1's read: dst[0] then held the new value. With the wait
 * for every stream each reader gets the old data, every element. */
TEST_IMPL(wait_two_readers) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_stream *s[3] = {NULL, NULL, NULL};
  for (int k = 0; k < 3; k++) ASSERT_OK(gw_stream_create(ctx, &s[k]));
  gw_array *a = pinned(ctx), *busy = pinned(ctx), *dst[2] = {pinned(ctx), pinned(ctx)};
  randomize(a);
  int32_t *old = malloc(N * sizeof(int32_t));
  ASSERT_TRUE(old != NULL);
  memcpy(old, host(a), N * sizeof(int32_t));
  for (int k = 0; k < 2; k++) ASSERT_OK(gw_fill(dst[k], &POISON));
  int32_t v = other_than(POISON), w = other_than(POISON);
  for (int k = 0; k < 3; k++) ASSERT_OK(gw_fill_async(busy, &v, s[0]));
  ASSERT_OK(gw_copy_async(dst[0], a, s[0]));
  ASSERT_OK(gw_copy_async(dst[1], a, s[1]));
  ASSERT_OK(gw_array_wait(a, s[2]));
  ASSERT_OK(gw_fill_async(a, &w, s[2]));
  for (int k = 0; k < 3; k++) ASSERT_OK(gw_stream_synchronize(s[k]));
  ASSERT_EQ_INT(gw_array_pending(a), 0);
  ASSERT_ELEMS_EQ(host(dst[0]), old, N, 4);
  ASSERT_ELEMS_EQ(host(dst[1]), old, N, 4);
  ASSERT_ALL_EQ(host(a), &w, N, 4);
  ASSERT_ALL_EQ(host(busy), &v, N, 4);
  free(old);
  gw_release(a);
  gw_release(busy);
  for (int k = 0; k < 2; k++) gw_release(dst[k]);
  for (int k = 0; k < 3; k++) gw_stream_destroy(s[k]);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}
