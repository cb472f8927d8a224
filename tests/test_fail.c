/* Failure injection into each backend operation of the CPU model: the call returns the
 * injected status, gw_last_error() says something, out-parameters stay untouched and
 * nothing is left registered, allocated or referenced. CPU backend only. */
#include "private.h"
#include "test.h"

#define SENT ((gw_array *)(uintptr_t)0xfeed)

static gw_context *open_cpu(void) {
  TEST_REQUIRE_CPU();
  return tst_open(0);
}

static void expect_injected(gw_status got, gw_status want, long injected_before, const char *what) {
  if (got != want)
    TST_FAIL("%s: returned %s (%d), injected %s; last error \"%s\"", what, gw_err_name(got),
             (int)got, gw_err_name(want), gw_last_error());
  if (gw_last_error() == NULL || gw_last_error()[0] == '\0')
    TST_FAIL("%s: failed with %s but gw_last_error() is empty", what, gw_err_name(got));
  if (gw_cpu_failures_injected() != injected_before + 1)
    TST_FAIL("%s: %ld failures injected, expected 1", what,
             gw_cpu_failures_injected() - injected_before);
}
#define EXPECT_INJECTED(call, want)               \
  do {                                            \
    long inj_ = gw_cpu_failures_injected();       \
    expect_injected((call), (want), inj_, #call); \
  } while (0)

TEST_IMPL(fail_register) {
  gw_context *ctx = open_cpu();
  tst_leaks before = tst_leak_snapshot();
  char *buf = tst_pages(3);
  int64_t shape[1] = {(int64_t)(3 * tst_page())};
  gw_array *a = SENT;
  gw_cpu_fail_op(GW_CPU_OP_REGISTER, 1, GW_ENOMEM);
  EXPECT_INJECTED(gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a), GW_ENOMEM);
  ASSERT_EQ_PTR(a, SENT);
  ASSERT_NO_LEAK(before);
  gw_cpu_fail_op(GW_CPU_OP_REGISTER, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_pin(ctx, buf, 100), GW_EBACKEND);
  ASSERT_NO_LEAK(before);
  ASSERT_STATUS(gw_unpin(ctx, buf, 100), GW_ENOTREG); /* the failed pin took nothing */
  /* works once the failure is spent */
  ASSERT_OK(gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a));
  gw_release(a);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(fail_second_register_undoes_first) {
  gw_context *ctx = open_cpu();
  size_t pg = tst_page();
  char *buf = tst_pages(5);
  tst_leaks before = tst_leak_snapshot();
  /* a wrap of [0,5) around a pinned middle page [2,3) needs two registrations */
  ASSERT_OK(gw_pin(ctx, buf + 2 * pg, pg));
  tst_leaks pinned = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER);
  int64_t shape[1] = {(int64_t)(5 * pg)};
  gw_array *a = SENT;
  gw_cpu_fail_op(GW_CPU_OP_REGISTER, 2, GW_ENOMEM);
  EXPECT_INJECTED(gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a), GW_ENOMEM);
  ASSERT_EQ_PTR(a, SENT);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs + 2);
  ASSERT_NO_LEAK(pinned); /* the first new registration was undone; the pin stays */
  gw_ptrinfo i;
  ASSERT_OK(gw_pointer_query(ctx, buf, &i));
  ASSERT_EQ_INT(i.kind, GW_MEM_HOST);
  ASSERT_OK(gw_pointer_query(ctx, buf + 2 * pg, &i));
  ASSERT_TRUE(i.flags & GW_PTR_GPUWRAP_REGISTERED);
  /* same with someone else's registration in the middle */
  ASSERT_OK(gw_unpin(ctx, buf + 2 * pg, pg));
  ASSERT_NO_LEAK(before);
  ASSERT_OK(gw_cpu_runtime_register(buf + 2 * pg, pg));
  tst_leaks foreign = tst_leak_snapshot();
  gw_cpu_fail_op(GW_CPU_OP_REGISTER, 2, GW_EBACKEND);
  EXPECT_INJECTED(gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a), GW_EBACKEND);
  ASSERT_NO_LEAK(foreign);
  ASSERT_OK(gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a));
  gw_release(a);
  ASSERT_NO_LEAK(foreign);
  ASSERT_OK(gw_cpu_runtime_unregister(buf + 2 * pg));
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(fail_alloc) {
  gw_context *ctx = open_cpu();
  tst_leaks before = tst_leak_snapshot();
  gw_memkind kinds[3] = {GW_MEM_DEVICE, GW_MEM_PINNED, GW_MEM_MANAGED};
  int64_t shape[2] = {10, 10};
  for (int k = 0; k < 3; k++) {
    gw_array *a = SENT;
    gw_cpu_fail_op(GW_CPU_OP_ALLOC, 1, GW_ENOMEM);
    EXPECT_INJECTED(gw_alloc(ctx, kinds[k], GW_FLOAT32, 2, shape, &a), GW_ENOMEM);
    ASSERT_EQ_PTR(a, SENT);
    ASSERT_NO_LEAK(before);
  }
  void *p = NULL;
  gw_cpu_fail_op(GW_CPU_OP_ALLOC, 1, GW_ENOMEM);
  EXPECT_INJECTED(gw_cpu_runtime_alloc(GW_MEM_DEVICE, 0, 100, &p), GW_ENOMEM);
  ASSERT_NULL(p);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(fail_query) {
  gw_context *ctx = open_cpu();
  tst_leaks before = tst_leak_snapshot();
  char *buf = tst_pages(2);
  int64_t shape[1] = {100};
  gw_array *a = SENT, *d = NULL;
  gw_ptrinfo info;
  memset(&info, 0x3c, sizeof info);
  gw_ptrinfo copy = info;
  gw_cpu_fail_op(GW_CPU_OP_QUERY, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_pointer_query(ctx, buf, &info), GW_EBACKEND);
  ASSERT_TRUE(memcmp(&info, &copy, sizeof info) == 0); /* untouched */
  gw_cpu_fail_op(GW_CPU_OP_QUERY, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a), GW_EBACKEND);
  ASSERT_EQ_PTR(a, SENT);
  ASSERT_NO_LEAK(before);
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT8, 1, shape, &d));
  tst_leaks with_d = tst_leak_snapshot();
  gw_cpu_fail_op(GW_CPU_OP_QUERY, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_wrap(ctx, gw_data(d), GW_UINT8, 1, shape, NULL, 0, &a), GW_EBACKEND);
  ASSERT_EQ_PTR(a, SENT);
  ASSERT_NO_LEAK(with_d);
  gw_cpu_fail_op(GW_CPU_OP_QUERY, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_pin(ctx, buf, 100), GW_EBACKEND);
  ASSERT_NO_LEAK(with_d);
  gw_release(d);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(fail_copy_fill_sync) {
  gw_context *ctx = open_cpu();
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[1] = {1000};
  gw_array *d = NULL, *h = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, shape, &d));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_INT32, 1, shape, &h));
  int32_t v = 7;
  gw_cpu_fail_op(GW_CPU_OP_COPY, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_copy(d, h), GW_EBACKEND);
  gw_cpu_fail_op(GW_CPU_OP_COPY, 1, GW_EDEVICE);
  EXPECT_INJECTED(gw_copy(h, d), GW_EDEVICE);
  gw_cpu_fail_op(GW_CPU_OP_FILL, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_fill(d, &v), GW_EBACKEND);
  gw_cpu_fail_op(GW_CPU_OP_SYNCHRONIZE, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_synchronize(ctx), GW_EBACKEND);
  /* everything works afterwards */
  ASSERT_OK(gw_fill(d, &v));
  ASSERT_OK(gw_copy(h, d));
  ASSERT_ALL_EQ(gw_host_data(h), &v, 1000, 4);
  ASSERT_OK(gw_synchronize(ctx));
  gw_release(d);
  gw_release(h);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(fail_streams) {
  gw_context *ctx = open_cpu();
  tst_leaks before = tst_leak_snapshot();
  gw_stream *s = (gw_stream *)(uintptr_t)0xbeef;
  gw_cpu_fail_op(GW_CPU_OP_STREAM_CREATE, 1, GW_ENOMEM);
  EXPECT_INJECTED(gw_stream_create(ctx, &s), GW_ENOMEM);
  ASSERT_EQ_PTR(s, (gw_stream *)(uintptr_t)0xbeef);
  ASSERT_OK(gw_stream_create(ctx, &s));
  int64_t shape[1] = {100};
  gw_array *d = NULL, *h = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT8, 1, shape, &d));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_INT8, 1, shape, &h));
  int8_t v = 5;
  gw_cpu_fail_op(GW_CPU_OP_FILL, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_fill_async(d, &v, s), GW_EBACKEND);
  gw_cpu_fail_op(GW_CPU_OP_COPY, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_copy_async(h, d, s), GW_EBACKEND);
  gw_cpu_fail_op(GW_CPU_OP_STREAM_SYNCHRONIZE, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_stream_synchronize(s), GW_EBACKEND);
  ASSERT_OK(gw_fill_async(d, &v, s));
  ASSERT_OK(gw_copy_async(h, d, s));
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_ALL_EQ(gw_host_data(h), &v, 100, 1);
  /* a failing destroy cannot be reported, but must not crash or leak the context */
  long inj = gw_cpu_failures_injected();
  gw_cpu_fail_op(GW_CPU_OP_STREAM_DESTROY, 1, GW_EBACKEND);
  gw_stream_destroy(s);
  ASSERT_EQ_INT(gw_cpu_failures_injected(), inj + 1);
  gw_release(d);
  gw_release(h);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(fail_context_init) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = (gw_context *)(uintptr_t)0xc0c0;
  gw_cpu_fail_op(GW_CPU_OP_CONTEXT_INIT, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_context_create(GW_BACKEND_CPU, 0, &ctx), GW_EBACKEND);
  ASSERT_EQ_PTR(ctx, (gw_context *)(uintptr_t)0xc0c0);
  ASSERT_OK(gw_context_create(GW_BACKEND_CPU, 0, &ctx));
  gw_context_destroy(ctx);
  return 0;
}

/* DEVICE_ADDRESS may or may not be used by a path; where it is, its failure must surface
 * and undo what the call did. */
static int device_address_paths(gw_context *ctx) {
  tst_leaks before = tst_leak_snapshot();
  int used = 0;
  size_t pg = tst_page();
  char *buf = tst_pages(2), *foreign = tst_pages(1);
  ASSERT_OK(gw_cpu_runtime_register(foreign, pg));
  gw_array *p = NULL;
  int64_t pshape[1] = {256};
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_UINT8, 1, pshape, &p));
  tst_leaks base = tst_leak_snapshot();
  for (int path = 0; path < 3; path++) {
    char *ptr = path == 0 ? buf : path == 1 ? foreign : (char *)gw_host_data(p);
    int64_t shape[1] = {path == 2 ? 256 : (int64_t)pg};
    long calls = gw_cpu_op_calls(GW_CPU_OP_DEVICE_ADDRESS);
    gw_array *a = SENT;
    gw_cpu_fail_op(GW_CPU_OP_DEVICE_ADDRESS, 1, GW_EBACKEND);
    gw_status s = gw_wrap(ctx, ptr, GW_UINT8, 1, shape, NULL, 0, &a);
    int called = gw_cpu_op_calls(GW_CPU_OP_DEVICE_ADDRESS) != calls;
    gw_cpu_fail_reset();
    printf("  path %d: device_address %s, wrap %s\n", path, called ? "called" : "not called",
           gw_err_name(s));
    if (called) {
      used = 1;
      ASSERT_STATUS(s, GW_EBACKEND);
      ASSERT_EQ_PTR(a, SENT);
    } else {
      ASSERT_OK(s);
      gw_release(a);
    }
    ASSERT_NO_LEAK(base);
  }
  gw_release(p);
  ASSERT_OK(gw_cpu_runtime_unregister(foreign));
  ASSERT_NO_LEAK(before);
  free(buf);
  free(foreign);
  return used;
}

TEST_IMPL(device_address) {
  gw_context *ctx = open_cpu();
  device_address_paths(ctx);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(device_address_nohostptr) {
  /* without host pointers for registered memory the device address must be asked for */
  gw_context *ctx = open_cpu();
  int used = device_address_paths(ctx);
  ASSERT_TRUE(used);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(fail_free) {
  gw_context *ctx = open_cpu();
  tst_leaks before = tst_leak_snapshot();
  void *p = NULL;
  ASSERT_OK(gw_cpu_runtime_alloc(GW_MEM_DEVICE, 0, 64, &p));
  gw_cpu_fail_op(GW_CPU_OP_FREE, 1, GW_EBACKEND);
  EXPECT_INJECTED(gw_cpu_runtime_free(p), GW_EBACKEND);
  /* the model keeps the allocation after a failed free */
  ASSERT_EQ_SIZE(gw_cpu_live_allocations(), before.allocs + 1);
  /* gw_release of an owner whose free fails: no crash, the owner entry is dropped */
  gw_array *a = NULL;
  int64_t shape[1] = {16};
  ASSERT_OK(gw_wrap(ctx, p, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &a));
  long inj = gw_cpu_failures_injected();
  gw_cpu_fail_op(GW_CPU_OP_FREE, 1, GW_EBACKEND);
  gw_release(a);
  ASSERT_EQ_INT(gw_cpu_failures_injected(), inj + 1);
  /* the memory is still the runtime's: it can be owned again and freed for real */
  ASSERT_OK(gw_wrap(ctx, p, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &a));
  gw_release(a);
  ASSERT_NO_LEAK(before);
  /* gw_alloc's array too */
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT32, 1, shape, &a));
  gw_cpu_fail_op(GW_CPU_OP_FREE, 1, GW_EBACKEND);
  gw_release(a);
  gw_cpu_fail_reset();
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(fail_unregister) {
  gw_context *ctx = open_cpu();
  tst_leaks before = tst_leak_snapshot();
  size_t pg = tst_page();
  char *buf = tst_pages(2);
  int64_t shape[1] = {(int64_t)(2 * pg)};
  gw_array *a = NULL;
  /* gw_unpin reports it */
  ASSERT_OK(gw_pin(ctx, buf, 2 * pg));
  gw_cpu_fail_op(GW_CPU_OP_UNREGISTER, 1, GW_EBACKEND);
  long inj0 = gw_cpu_failures_injected();
  gw_status us = gw_unpin(ctx, buf, 2 * pg);
  ASSERT_EQ_INT(gw_cpu_failures_injected(), inj0 + 1);
  printf("  gw_unpin with a failing unregister: %s (%s)\n", gw_err_name(us), gw_last_error());
  if (us != GW_OK) /* reporting it is better; it must then be the runtime's status */
    ASSERT_STATUS(us, GW_EBACKEND);
  /* whatever state that left, the buffer can be wrapped and released, and cleaned up */
  ASSERT_OK(gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a));
  gw_release(a);
  (void)gw_unpin(ctx, buf, 2 * pg); /* GW_OK if the reference was kept, else GW_ENOTREG */
  gw_ptrinfo i;
  ASSERT_OK(gw_pointer_query(ctx, buf, &i));
  if (i.kind == GW_MEM_PINNED) /* the runtime kept the registration: gpuwrap forgot it */
    ASSERT_OK(gw_cpu_runtime_unregister(buf));
  ASSERT_NO_LEAK(before);
  /* gw_release cannot report it: no crash, the registry forgets the range */
  ASSERT_OK(gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a));
  long inj = gw_cpu_failures_injected();
  gw_cpu_fail_op(GW_CPU_OP_UNREGISTER, 1, GW_EBACKEND);
  gw_release(a);
  ASSERT_EQ_INT(gw_cpu_failures_injected(), inj + 1);
  ASSERT_EQ_SIZE(gw_registry_ranges(), before.ranges);
  ASSERT_OK(gw_pointer_query(ctx, buf, &i));
  if (i.kind == GW_MEM_PINNED) ASSERT_OK(gw_cpu_runtime_unregister(buf));
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(env_fail_register) {
  /* GPUWRAP_CPU_FAIL=register:1 makes the first registration fail */
  gw_context *ctx = open_cpu();
  tst_leaks before = tst_leak_snapshot();
  char *buf = malloc(1000);
  int64_t shape[1] = {1000};
  gw_array *a = SENT;
  gw_status s = gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a);
  ASSERT_TRUE(s < 0);
  ASSERT_TRUE(strlen(gw_last_error()) > 0);
  ASSERT_EQ_PTR(a, SENT);
  ASSERT_EQ_INT(gw_cpu_failures_injected(), 1);
  ASSERT_NO_LEAK(before);
  ASSERT_OK(gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a));
  gw_release(a);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- a runtime failure at each step of an asynchronous call ----
 *
 * Work already queued on a stream cannot be taken back (a GPU runtime has no such call), so
 * an asynchronous call that fails part-way may have queued some of its pieces (gpuwrap.h,
 * "Streams": what a failed asynchronous call leaves). What must hold at every failure point:
 * the call returns the injected status with a message, everything it took (events,
 * temporaries, slots) is given back, and the stream stays usable and in order: the next
 * call on it gives the right data. Each step is the n-th backend call of the operation. */

enum {
  STEP_WAIT,
  STEP_COPY,
  STEP_FILL,
  STEP_OVERLAP,
  STEP_PAGEABLE,
  STEP_MANY,
  STEP_ORDER,
  STEP_KINDS
};
static const char *const step_names[STEP_KINDS] = {
    "gw_array_wait (3 streams pending)",
    "gw_copy_async device -> pinned",
    "gw_fill_async",
    "gw_copy_async of overlapping views (staged)",
    "gw_copy_async pageable -> device",
    "gw__copy_many (3 pairs and an overlapping one: one by one)",
    "gw__stream_order (a writer's stream before s)"};

/* One run of operation `op` with its nth call of backend operation fop failing (nth 0:
 * none). Returns the number of failures injected into it (0: it made fewer such calls). */
static long async_step(gw_context *ctx, int op, gw_cpu_op fop, long nth) {
  enum { N = 3000 };
  int64_t shape[1] = {N}, third[1] = {N / 3}, one[1] = {1};
  gw_array *a = NULL, *b = NULL, *h = NULL, *chk = NULL, *part[3] = {NULL, NULL, NULL};
  gw_array *many_d[4] = {NULL, NULL, NULL, NULL}, *many_s[4] = {NULL, NULL, NULL, NULL};
  gw_stream *s = NULL, *w[3] = {NULL, NULL, NULL};
  int32_t *pageable = malloc(N * sizeof *pageable), *want = malloc(N * sizeof *want);
  ASSERT_NOT_NULL(pageable);
  ASSERT_NOT_NULL(want);
  ASSERT_OK(gw_stream_create(ctx, &s));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, shape, &a));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, shape, &b));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_INT32, 1, shape, &h));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, shape, &chk));
  /* a: three thirds written by three delayed streams, so that their work is pending */
  for (int k = 0; k < 3; k++) {
    int64_t start[1] = {k * (N / 3)};
    int32_t v = 100 + k;
    ASSERT_OK(gw_stream_create(ctx, &w[k]));
    ASSERT_OK(gw_view(a, start, third, one, &part[k]));
    ASSERT_OK(gw_fill_async(part[k], &v, w[k]));
    for (int i = 0; i < N / 3; i++) want[k * (N / 3) + i] = v;
  }
  for (int i = 0; i < N; i++) pageable[i] = (int32_t)(i * 7 + 1);
  gw_array *pw = NULL;
  ASSERT_OK(gw_wrap(ctx, pageable, GW_INT32, 1, shape, NULL, GW_WRAP_NO_REGISTER, &pw));
  gw_array *lo = NULL, *hi = NULL;
  int64_t lo_start[1] = {0}, hi_start[1] = {1}, shorter[1] = {N - 1};
  ASSERT_OK(gw_view(b, lo_start, shorter, one, &lo));
  ASSERT_OK(gw_view(b, hi_start, shorter, one, &hi));
  for (int k = 0; k < 3; k++) {
    ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, third, &many_d[k]));
    many_s[k] = gw_retain(part[k]);
  }
  many_d[3] = gw_retain(hi); /* overlaps its src: the batch runs pair by pair */
  many_s[3] = gw_retain(lo);
  if (op == STEP_OVERLAP || op == STEP_MANY) { /* b: a known ramp, complete */
    ASSERT_OK(gw_copy(b, pw));
  }
  if (op != STEP_WAIT && op != STEP_ORDER)
    ASSERT_OK(gw_array_wait(a, s)); /* the operation reads or writes a */

  long inj = gw_cpu_failures_injected();
  if (nth > 0) gw_cpu_fail_op(fop, nth, GW_EBACKEND);
  int32_t fv = -5;
  gw_status st = GW_OK;
  switch (op) {
  case STEP_WAIT: st = gw_array_wait(a, s); break;
  case STEP_COPY: st = gw_copy_async(h, a, s); break;
  case STEP_FILL: st = gw_fill_async(a, &fv, s); break;
  case STEP_OVERLAP: st = gw_copy_async(hi, lo, s); break;
  case STEP_PAGEABLE: st = gw_copy_async(b, pw, s); break;
  case STEP_MANY: st = gw__copy_many(many_d, (const gw_array *const *)many_s, 4, s); break;
  case STEP_ORDER:
    st = gw__stream_order(w[0], s);
    if (st == GW_OK) st = gw__stream_order(w[1], s);
    if (st == GW_OK) st = gw__stream_order(w[2], s);
    break;
  }
  gw_cpu_fail_reset();
  long got = gw_cpu_failures_injected() - inj;
  const char *fname = gw_cpu_op_name(fop);
  TEST_CONTEXT("%s, %s call #%ld failing", step_names[op], fname ? fname : "?", nth);
  if (st != GW_OK) {
    ASSERT_EQ_INT(got, 1);
    if (st != GW_EBACKEND)
      TST_FAIL("returned %s, injected GW_EBACKEND (%s)", gw_err_name(st), gw_last_error());
    ASSERT_ERROR_MENTIONS("injected");
  }
  /* The stream is usable and in order: wait for a's writers, copy a through s, and read
   * it back; each third must hold its value (a read before them gives zeros). */
  ASSERT_OK(gw_array_wait(a, s));
  if (op == STEP_FILL && st == GW_OK)
    for (int i = 0; i < N; i++) want[i] = fv;
  ASSERT_OK(gw_copy_async(chk, a, s));
  ASSERT_OK(gw_copy_async(h, chk, s));
  ASSERT_OK(gw_stream_synchronize(s));
  if (op != STEP_FILL || st == GW_OK) ASSERT_ELEMS_EQ(gw_host_data(h), want, N, 4);
  /* A call that succeeded (its failed call absorbed, e.g. an event) did its work. */
  if (st == GW_OK && (op == STEP_OVERLAP || op == STEP_PAGEABLE || op == STEP_MANY)) {
    ASSERT_OK(gw_copy(h, b));
    const int32_t *hb = gw_host_data(h);
    for (int i = 0; i < N; i++) {
      int32_t e = op == STEP_PAGEABLE ? pageable[i] : i == 0 ? pageable[0] : pageable[i - 1];
      if (hb[i] != e) TST_FAIL("b[%d] = %d, want %d", i, hb[i], e);
    }
  }
  if (st == GW_OK && op == STEP_MANY) {
    for (int k = 0; k < 3; k++) {
      ASSERT_OK(gw_array_wait(many_d[k], s));
      gw_array *hk = NULL;
      ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_INT32, 1, third, &hk));
      ASSERT_OK(gw_copy_async(hk, many_d[k], s));
      ASSERT_OK(gw_stream_synchronize(s));
      ASSERT_ELEMS_EQ(gw_host_data(hk), want + k * (N / 3), N / 3, 4);
      gw_release(hk);
    }
  }
  /* Nothing dangles: once every stream ran, nothing is pending. */
  for (int k = 0; k < 3; k++) ASSERT_OK(gw_stream_synchronize(w[k]));
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_EQ_INT(gw_array_pending(a), 0);
  ASSERT_EQ_INT(gw_array_pending(b), 0);
  ASSERT_EQ_INT(gw_array_pending(h), 0);
  for (int k = 0; k < 4; k++) {
    gw_release(many_d[k]);
    gw_release(many_s[k]);
  }
  for (int k = 0; k < 3; k++) {
    gw_release(part[k]);
    gw_stream_destroy(w[k]);
  }
  gw_release(lo);
  gw_release(hi);
  gw_release(pw);
  gw_release(a);
  gw_release(b);
  gw_release(h);
  gw_release(chk);
  gw_stream_destroy(s);
  free(pageable);
  free(want);
  tst_context[0] = '\0';
  return got;
}

/* Every operation a failed call can take back or live with; a failed free or unregister
 * leaves the memory the runtime's (fail_free), which no caller can take back either. */
static const gw_cpu_op async_fail_ops[] = {GW_CPU_OP_QUERY,
                                           GW_CPU_OP_ALLOC,
                                           GW_CPU_OP_REGISTER,
                                           GW_CPU_OP_COPY,
                                           GW_CPU_OP_FILL,
                                           GW_CPU_OP_SYNCHRONIZE,
                                           GW_CPU_OP_STREAM_SYNCHRONIZE,
                                           GW_CPU_OP_EVENT_CREATE,
                                           GW_CPU_OP_EVENT_RECORD,
                                           GW_CPU_OP_STREAM_WAIT_EVENT,
                                           GW_CPU_OP_DEVICE_ADDRESS};

TEST_IMPL(fail_async_each_step) {
  gw_context *ctx = open_cpu();
  tst_leaks before = tst_leak_snapshot();
  for (int op = 0; op < STEP_KINDS; op++) {
    long steps = 0;
    for (size_t f = 0; f < sizeof async_fail_ops / sizeof async_fail_ops[0]; f++)
      for (long nth = 1; nth < 64 && async_step(ctx, op, async_fail_ops[f], nth) > 0; nth++) {
        steps++;
        TEST_CONTEXT("%s, %s call #%ld failing", step_names[op], gw_cpu_op_name(async_fail_ops[f]),
                     nth);
        ASSERT_NO_LEAK(before);
      }
    if (steps == 0) TST_FAIL("%s: no failure point", step_names[op]);
    (void)async_step(ctx, op, GW_CPU_OP_COPY, 0);
    ASSERT_NO_LEAK(before);
  }
  gw_context_destroy(ctx);
  return 0;
}
