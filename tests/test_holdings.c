/* A release drops exactly the registry references its acquire took (issue 13 items 4, 5,
 * 12): memory someone else pinned inside a wrap's span, unpinned later and registered
 * through another wrap, is never unregistered by the first wrap's release; a failed
 * unregister of a trial registration leaves nothing unrecorded; GW_WRAP_NO_REGISTER means
 * the same for gpuwrap's own pins and someone else's. CPU model: the foreign owner is the
 * modelled runtime's raw calls (an MPI registration cache does the same on CUDA). */
#include "test.h"

static gw_array *wrap_bytes(gw_context *ctx, char *p, size_t n, unsigned flags) {
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)n};
  gw_status s = gw_wrap(ctx, p, GW_UINT8, 1, shape, NULL, flags, &a);
  if (s != GW_OK)
    TST_FAIL("wrap of [%p, +%zu): %s: %s", (void *)p, n, gw_err_name(s), gw_last_error());
  return a;
}

static int registered_by_gpuwrap(gw_context *ctx, const void *p) {
  gw_ptrinfo i;
  ASSERT_OK(gw_pointer_query(ctx, p, &i));
  return i.kind == GW_MEM_PINNED && (i.flags & GW_PTR_GPUWRAP_REGISTERED);
}

static int pinned(gw_context *ctx, const void *p) {
  gw_ptrinfo i;
  ASSERT_OK(gw_pointer_query(ctx, p, &i));
  return i.kind == GW_MEM_PINNED;
}

/* The bytes of w reach the device and back, every one of them. */
static void check_device_roundtrip(gw_array *w) {
  size_t n = (size_t)gw_numel(w);
  unsigned char *want = malloc(n), *got = malloc(n);
  tst_random_fill(want, n);
  memcpy(gw_host_data(w), want, n);
  gw_array *d = NULL;
  ASSERT_OK(gw_alloc(gw_array_context(w), GW_MEM_DEVICE, GW_UINT8, 1, gw_shape(w), &d));
  ASSERT_OK(gw_copy(d, w));
  tst_poison(gw_host_data(w), n);
  ASSERT_OK(gw_copy(w, d));
  memcpy(got, gw_host_data(w), n);
  ASSERT_ELEMS_EQ(got, want, n, 1);
  gw_release(d);
  free(want);
  free(got);
}

/* Item 4 through wraps: A covers [0, 3000) around a foreign [1000, 2000); the foreign owner
 * unregisters; C wraps [1000, 2000) (gpuwrap registers it now); releasing A leaves C's
 * range registered. */
TEST_IMPL(release_keeps_later_range_in_hole) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  char *buf = tst_pages(2);
  ASSERT_OK(gw_cpu_runtime_register(buf + 1000, 1000));
  gw_array *a = wrap_bytes(ctx, buf, 3000, 0);
  ASSERT_TRUE(registered_by_gpuwrap(ctx, buf));
  ASSERT_TRUE(registered_by_gpuwrap(ctx, buf + 2000));
  ASSERT_TRUE(!registered_by_gpuwrap(ctx, buf + 1000)); /* someone else's */
  ASSERT_OK(gw_cpu_runtime_unregister(buf + 1000));
  gw_array *c = wrap_bytes(ctx, buf + 1000, 1000, 0);
  ASSERT_TRUE(registered_by_gpuwrap(ctx, buf + 1000));
  gw_release(a);
  /* A's two ranges are gone, C's stays page-locked while C lives */
  ASSERT_TRUE(!pinned(ctx, buf));
  ASSERT_TRUE(!pinned(ctx, buf + 2000));
  ASSERT_TRUE(registered_by_gpuwrap(ctx, buf + 1000));
  ASSERT_TRUE(registered_by_gpuwrap(ctx, buf + 1999));
  check_device_roundtrip(c);
  gw_release(c);
  ASSERT_TRUE(!pinned(ctx, buf + 1000));
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

/* Item 4 through gw_pin/gw_unpin, and the other order: C first pinned, A released last. */
TEST_IMPL(unpin_keeps_later_range_in_hole) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  char *buf = tst_pages(2);
  ASSERT_OK(gw_cpu_runtime_register(buf + 1000, 1000));
  ASSERT_OK(gw_pin(ctx, buf, 3000));
  ASSERT_OK(gw_cpu_runtime_unregister(buf + 1000));
  ASSERT_OK(gw_pin(ctx, buf + 1000, 1000));
  ASSERT_OK(gw_unpin(ctx, buf, 3000));
  ASSERT_TRUE(registered_by_gpuwrap(ctx, buf + 1000));
  ASSERT_TRUE(!pinned(ctx, buf));
  ASSERT_OK(gw_unpin(ctx, buf + 1000, 1000));
  ASSERT_TRUE(!pinned(ctx, buf + 1000));

  /* the same bytes pinned twice, once around the foreign part and once after it went:
   * each unpin drops what its own pin took, in any order of the two */
  ASSERT_OK(gw_cpu_runtime_register(buf + 1000, 1000));
  ASSERT_OK(gw_pin(ctx, buf, 3000));
  ASSERT_OK(gw_cpu_runtime_unregister(buf + 1000));
  ASSERT_OK(gw_pin(ctx, buf, 3000)); /* takes [0,1000) and [2000,3000), registers the hole */
  ASSERT_TRUE(registered_by_gpuwrap(ctx, buf + 1500));
  ASSERT_OK(gw_unpin(ctx, buf, 3000));
  ASSERT_TRUE(pinned(ctx, buf));
  ASSERT_OK(gw_unpin(ctx, buf, 3000));
  ASSERT_TRUE(!pinned(ctx, buf));
  ASSERT_TRUE(!pinned(ctx, buf + 1500));
  ASSERT_TRUE(!pinned(ctx, buf + 2500));
  ASSERT_STATUS(gw_unpin(ctx, buf, 3000), GW_ENOTREG);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

/* Item 5: memory someone else registered inside one page makes the wrap search for it
 * with trial registrations; whichever unregister call fails, the runtime ends as it was:
 * the wrap either fails with nothing registered, or succeeds and its release unregisters
 * everything it registered. */
TEST_IMPL(failed_unregister_leaves_nothing) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  char *buf = tst_pages(2);
  ASSERT_OK(gw_cpu_runtime_register(buf + 1000, 24));
  tst_leaks before = tst_leak_snapshot();
  int failures_seen = 0;
  for (long nth = 1; nth <= 64; nth++) {
    gw_cpu_fail_op(GW_CPU_OP_UNREGISTER, nth, GW_EBACKEND);
    long injected = gw_cpu_failures_injected();
    gw_array *a = NULL;
    int64_t shape[1] = {3000};
    gw_status s = gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a);
    int hit = gw_cpu_failures_injected() > injected;
    gw_cpu_fail_reset();
    if (s == GW_OK) {
      ASSERT_TRUE(!registered_by_gpuwrap(ctx, buf + 1010)); /* still someone else's */
      check_device_roundtrip(a);
      gw_release(a);
    } else {
      ASSERT_EQ_INT(s, GW_EBACKEND);
    }
    ASSERT_NO_LEAK(before); /* same registrations in the runtime, no range of ours */
    failures_seen += hit;
    if (!hit) break; /* past the wrap's last unregister call */
  }
  ASSERT_TRUE(failures_seen > 0); /* the search did make trial registrations */
  ASSERT_OK(gw_cpu_runtime_unregister(buf + 1000));
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

/* Item 12: NO_REGISTER registers nothing and uses memory that is already page-locked, by
 * gw_pin as by someone else, the same way: device-accessible. Pageable memory stays a
 * host-only array. */
TEST_IMPL(no_register_uses_any_pinning) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t pg = tst_page();
  char *buf = tst_pages(3);
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER);

  ASSERT_OK(gw_cpu_runtime_register(buf, pg)); /* someone else's */
  gw_array *f = wrap_bytes(ctx, buf, pg, GW_WRAP_NO_REGISTER);
  ASSERT_EQ_INT(gw_kind(f), GW_MEM_PINNED);
  ASSERT_NOT_NULL(gw_data(f));
  check_device_roundtrip(f);

  ASSERT_OK(gw_pin(ctx, buf + pg, pg)); /* gpuwrap's own */
  regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER);
  gw_array *o = wrap_bytes(ctx, buf + pg, pg, GW_WRAP_NO_REGISTER);
  ASSERT_EQ_INT(gw_kind(o), GW_MEM_PINNED);
  ASSERT_NOT_NULL(gw_data(o));
  /* the wrap holds a reference: the pin's undo does not unregister under it */
  ASSERT_OK(gw_unpin(ctx, buf + pg, pg));
  ASSERT_TRUE(registered_by_gpuwrap(ctx, buf + pg));
  check_device_roundtrip(o);
  gw_release(o);
  ASSERT_TRUE(!pinned(ctx, buf + pg));

  /* pageable: host-only, nothing registered */
  gw_array *h = wrap_bytes(ctx, buf + 2 * pg, pg, GW_WRAP_NO_REGISTER);
  ASSERT_EQ_INT(gw_kind(h), GW_MEM_HOST);
  ASSERT_NULL(gw_data(h));
  /* partly pinned by gpuwrap, partly pageable: host-only too */
  ASSERT_OK(gw_pin(ctx, buf + pg, pg));
  gw_array *m = wrap_bytes(ctx, buf + pg, 2 * pg, GW_WRAP_NO_REGISTER);
  ASSERT_EQ_INT(gw_kind(m), GW_MEM_HOST);
  ASSERT_NULL(gw_data(m));
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs + 1); /* only the gw_pin */
  gw_release(m);
  gw_release(h);
  ASSERT_OK(gw_unpin(ctx, buf + pg, pg));
  gw_release(f);
  ASSERT_OK(gw_cpu_runtime_unregister(buf));
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

/* A warm wrap of gpuwrap's registration with NO_REGISTER, on every backend: the array is
 * device-accessible and the bytes round-trip through the device. */
TEST_IMPL(no_register_of_pinned_roundtrip) {
  gw_context *ctx = tst_open(0);
  size_t n = 3 * tst_page() + 123;
  char *buf = malloc(n);
  ASSERT_OK(gw_pin(ctx, buf, n));
  gw_array *w = wrap_bytes(ctx, buf, n, GW_WRAP_NO_REGISTER);
  ASSERT_EQ_INT(gw_kind(w), GW_MEM_PINNED);
  ASSERT_NOT_NULL(gw_data(w));
  ASSERT_OK(gw_unpin(ctx, buf, n));
  check_device_roundtrip(w);
  gw_release(w);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}
