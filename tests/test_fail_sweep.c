/* Every failure point of a realistic sequence: for each backend operation that reports a
 * status and each n, make the n-th call of it fail; the sequence must stop with that status
 * and a message, and after cleaning up what succeeded nothing is left behind. CPU only. */
#include "test.h"

static char *g_buf, *g_foreign;
static size_t g_pg;

#define STEP(call)     \
  do {                 \
    st = (call);       \
    if (st != GW_OK) { \
      *where = #call;  \
      goto out;        \
    }                  \
  } while (0)

/* Returns the first failure (where says which call), or GW_OK after checking the data. */
static gw_status scenario(const char **where) {
  gw_status st = GW_OK;
  gw_context *ctx = NULL;
  gw_array *w = NULL, *d = NULL, *v = NULL, *p = NULL, *r = NULL;
  gw_stream *s = NULL;
  int pinned = 0;
  size_t n = 6 * g_pg;
  int64_t shape[1] = {(int64_t)(n / 4)}, vst[1] = {(int64_t)(n / 4 - 1)}, vsh[1] = {100},
          vstep[1] = {-3};
  unsigned char *want = malloc(n), *got = malloc(n);
  int32_t val = (int32_t)tst_rand64();
  *where = "";
  tst_random_fill(g_buf, n);
  memcpy(want, g_buf, n);

  STEP(gw_context_create(GW_BACKEND_CPU, 0, &ctx));
  STEP(gw_pin(ctx, g_buf + g_pg, g_pg));
  pinned = 1;
  /* spans a page pinned by gpuwrap and a page registered by someone else */
  STEP(gw_wrap(ctx, g_buf, GW_INT32, 1, shape, NULL, 0, &w));
  STEP(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, shape, &d));
  STEP(gw_alloc(ctx, GW_MEM_PINNED, GW_INT32, 1, vsh, &p));
  STEP(gw_copy(d, w));
  STEP(gw_view(d, vst, vsh, vstep, &v));
  STEP(gw_fill(v, &val));
  STEP(gw_stream_create(ctx, &s));
  STEP(gw_copy_async(p, v, s));
  STEP(gw_stream_synchronize(s));
  STEP(gw_copy(w, d));
  STEP(gw_synchronize(ctx));
  for (int64_t i = 0; i < 100; i++) memcpy(want + (size_t)(n / 4 - 1 - 3 * i) * 4, &val, 4);
  ASSERT_ELEMS_EQ(g_buf, want, n / 4, 4);
  ASSERT_ALL_EQ(gw_host_data(p), &val, 100, 4);
  {
    gw_ptrinfo info;
    STEP(gw_pointer_query(ctx, g_buf + 3 * g_pg, &info));
    ASSERT_EQ_INT(info.kind, GW_MEM_PINNED);
  }
  (void)r;
out:
  gw_cpu_fail_reset(); /* cleanup runs without injected failures */
  gw_stream_destroy(s);
  gw_release(v);
  gw_release(p);
  gw_release(d);
  gw_release(w);
  if (pinned) {
    gw_status u = gw_unpin(ctx, g_buf + g_pg, g_pg);
    if (u != GW_OK) TST_FAIL("cleanup gw_unpin: %s: %s", gw_err_name(u), gw_last_error());
  }
  gw_context_destroy(ctx);
  free(want);
  free(got);
  return st;
}

TEST_IMPL(every_failure_point) {
  TEST_REQUIRE_CPU();
  g_pg = tst_page();
  g_buf = tst_pages(6);
  g_foreign = g_buf + 3 * g_pg;
  ASSERT_OK(gw_cpu_runtime_register(g_foreign, g_pg));
  tst_leaks before = tst_leak_snapshot();
  const char *where;
  ASSERT_OK(scenario(&where)); /* clean run */
  ASSERT_NO_LEAK(before);
  static const gw_cpu_op ops[] = {GW_CPU_OP_CONTEXT_INIT,   GW_CPU_OP_QUERY,
                                  GW_CPU_OP_ALLOC,          GW_CPU_OP_REGISTER,
                                  GW_CPU_OP_DEVICE_ADDRESS, GW_CPU_OP_COPY,
                                  GW_CPU_OP_FILL,           GW_CPU_OP_SYNCHRONIZE,
                                  GW_CPU_OP_STREAM_CREATE,  GW_CPU_OP_STREAM_SYNCHRONIZE};
  int points = 0;
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    for (long nth = 1; nth < 1000; nth++) {
      long inj = gw_cpu_failures_injected();
      gw_cpu_fail_op(ops[o], nth, GW_EBACKEND);
      gw_status s = scenario(&where);
      int fired = gw_cpu_failures_injected() != inj;
      gw_cpu_fail_reset();
      if (!fired) {
        if (s != GW_OK)
          TST_FAIL("%s #%ld not reached but the scenario failed at %s: %s: %s",
                   gw_cpu_op_name(ops[o]), nth, where, gw_err_name(s), gw_last_error());
        break;
      }
      points++;
      if (s != GW_EBACKEND)
        TST_FAIL("%s #%ld failed: scenario returned %s at \"%s\" (%s)", gw_cpu_op_name(ops[o]), nth,
                 gw_err_name(s), where, gw_last_error());
      printf("  %s #%ld -> %s fails: %s\n", gw_cpu_op_name(ops[o]), nth, where, gw_last_error());
      ASSERT_NO_LEAK(before);
    }
  }
  ASSERT_TRUE(points >= 10);
  ASSERT_OK(gw_cpu_runtime_unregister(g_foreign));
  free(g_buf);
  return 0;
}
