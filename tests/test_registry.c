/* The registration registry: one registration per buffer however often it is wrapped,
 * overlapping and adjacent pieces, memory registered by someone else inside a span,
 * gw_pin/gw_unpin, and a device that cannot use host addresses of registered memory. */
#include "test.h"

static gw_array *wrap_bytes(gw_context *ctx, char *p, size_t n) {
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)n};
  gw_status s = gw_wrap(ctx, p, GW_UINT8, 1, shape, NULL, 0, &a);
  if (s != GW_OK)
    TST_FAIL("wrap of [%p, +%zu): %s: %s", (void *)p, n, gw_err_name(s), gw_last_error());
  return a;
}

static gw_ptrinfo query(gw_context *ctx, const void *p) {
  gw_ptrinfo i;
  gw_status s = gw_pointer_query(ctx, p, &i);
  if (s != GW_OK) TST_FAIL("query %p: %s: %s", p, gw_err_name(s), gw_last_error());
  return i;
}

/* The wrapped bytes are reachable from the device: copy them to device memory and back. */
static void check_through_device(gw_array *w) {
  gw_array *d = NULL;
  size_t n = (size_t)gw_numel(w);
  unsigned char *out = malloc(n);
  ASSERT_OK(gw_alloc(gw_array_context(w), GW_MEM_DEVICE, GW_UINT8, 1, gw_shape(w), &d));
  ASSERT_OK(gw_copy(d, w));
  tst_read(d, out);
  ASSERT_ELEMS_EQ(out, gw_host_data(w), n, 1);
  /* and the device's writes reach the host */
  unsigned char v = (unsigned char)tst_rand64();
  ASSERT_OK(gw_fill(d, &v));
  ASSERT_OK(gw_copy(w, d));
  ASSERT_ALL_EQ(gw_host_data(w), &v, n, 1);
  gw_release(d);
  free(out);
}

TEST_IMPL(two_wraps_register_once) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER), unregs = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER);
  size_t pg = tst_page();
  char *buf = tst_pages(4);
  tst_random_fill(buf, 4 * pg);
  gw_array *a = wrap_bytes(ctx, buf, 4 * pg);
  gw_array *b = wrap_bytes(ctx, buf, 4 * pg);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 1);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs + 1);
  ASSERT_EQ_SIZE(gw_registry_ranges(), before.ranges + 1);
  check_through_device(b);
  gw_release(a);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 1); /* b still uses it */
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unregs);
  ASSERT_TRUE(query(ctx, buf + 5).flags & GW_PTR_GPUWRAP_REGISTERED);
  check_through_device(b);
  gw_release(b);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unregs + 1);
  ASSERT_EQ_INT(query(ctx, buf + 5).kind, GW_MEM_HOST);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(interior_pieces_one_page) {
  /* two wraps of disjoint bytes of one page: registrations are byte ranges (as CUDA tracks
   * them), so each wrap registers exactly its bytes and neither touches the other's */
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  char *buf = tst_pages(1);
  gw_array *a = wrap_bytes(ctx, buf + 8, 100);
  gw_array *b = wrap_bytes(ctx, buf + 1000, 200);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 2);
  ASSERT_EQ_INT(query(ctx, buf + 500).kind, GW_MEM_HOST); /* the bytes between: untouched */
  ASSERT_EQ_PTR(query(ctx, buf + 1000).base, buf + 1000);
  ASSERT_EQ_SIZE(query(ctx, buf + 1000).extent, 200);
  gw_release(a);
  check_through_device(b);
  gw_release(b);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(overlapping_wraps) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t pg = tst_page();
  char *buf = tst_pages(8);
  tst_random_fill(buf, 8 * pg);
  /* [0,3) then [2,5) then [1,7): the later ones take the registered part and register
   * the rest; the runtime never sees an overlapping registration */
  gw_array *a = wrap_bytes(ctx, buf, 3 * pg);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 1);
  gw_array *b = wrap_bytes(ctx, buf + 2 * pg + 100, 3 * pg - 200);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 2);
  gw_array *c = wrap_bytes(ctx, buf + pg + 1, 6 * pg - 2);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 3);
  for (size_t p = 0; p < 7; p++)
    ASSERT_TRUE(query(ctx, buf + p * pg).flags & GW_PTR_GPUWRAP_REGISTERED);
  ASSERT_EQ_INT(query(ctx, buf + 7 * pg).kind, GW_MEM_HOST);
  check_through_device(a);
  check_through_device(b);
  check_through_device(c);
  gw_release(a); /* page 0 unused now, but its registration also holds pages 1-2 */
  ASSERT_EQ_INT(query(ctx, buf + pg).kind, GW_MEM_PINNED);
  check_through_device(c);
  gw_release(c);
  check_through_device(b);
  ASSERT_EQ_INT(query(ctx, buf + 3 * pg).kind, GW_MEM_PINNED);
  gw_release(b);
  for (size_t p = 0; p < 8; p++) ASSERT_EQ_INT(query(ctx, buf + p * pg).kind, GW_MEM_HOST);
  ASSERT_NO_LEAK(before);
  /* the other order of releases */
  a = wrap_bytes(ctx, buf, 3 * pg);
  b = wrap_bytes(ctx, buf + 2 * pg, 3 * pg);
  c = wrap_bytes(ctx, buf + pg, 6 * pg);
  gw_release(c);
  gw_release(b);
  check_through_device(a);
  gw_release(a);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(adjacent_wraps) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t pg = tst_page();
  char *buf = tst_pages(6);
  tst_random_fill(buf, 6 * pg);
  gw_array *a = wrap_bytes(ctx, buf, 2 * pg);
  gw_array *b = wrap_bytes(ctx, buf + 2 * pg, 2 * pg);
  gw_array *c = wrap_bytes(ctx, buf + 4 * pg, 2 * pg);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 3);
  gw_release(b);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 2);
  ASSERT_EQ_INT(query(ctx, buf + 3 * pg).kind, GW_MEM_HOST);
  check_through_device(a);
  check_through_device(c);
  gw_release(a);
  gw_release(c);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(foreign_registration_in_span) {
  /* someone else registered the middle: gpuwrap registers around it, never touches it */
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t pg = tst_page();
  char *buf = tst_pages(5);
  tst_random_fill(buf, 5 * pg);
  ASSERT_OK(gw_cpu_runtime_register(buf + 2 * pg, pg));
  tst_leaks before = tst_leak_snapshot();
  long unregs = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER);
  for (int rep = 0; rep < 2; rep++) {
    gw_array *a = wrap_bytes(ctx, buf + 10, 5 * pg - 20);
    ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 2); /* [0,2) and [3,5) */
    gw_ptrinfo mid = query(ctx, buf + 2 * pg + 1);
    ASSERT_EQ_INT(mid.kind, GW_MEM_PINNED);
    ASSERT_EQ_INT(mid.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
    ASSERT_TRUE(query(ctx, buf + pg).flags & GW_PTR_GPUWRAP_REGISTERED);
    ASSERT_TRUE(query(ctx, buf + 4 * pg).flags & GW_PTR_GPUWRAP_REGISTERED);
    check_through_device(a);
    gw_release(a);
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unregs + 2 * (rep + 1));
    ASSERT_NO_LEAK(before);
    ASSERT_EQ_INT(query(ctx, buf + 2 * pg).kind, GW_MEM_PINNED); /* still the owner's */
  }
  /* the foreign part alone: nothing registered */
  gw_array *m = wrap_bytes(ctx, buf + 2 * pg, pg);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs);
  gw_release(m);
  ASSERT_NO_LEAK(before);
  ASSERT_OK(gw_cpu_runtime_unregister(buf + 2 * pg)); /* still there, exactly once */
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(foreign_registration_at_start) {
  /* the span starts inside someone else's registration and goes on into pageable memory:
   * that registration is used as it is, the rest is registered by gpuwrap (gap rule 2/3),
   * which is not an extent error: registered memory is not an allocation */
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t pg = tst_page();
  char *buf = tst_pages(4);
  tst_random_fill(buf, 4 * pg);
  ASSERT_OK(gw_cpu_runtime_register(buf + pg, pg));
  tst_leaks before = tst_leak_snapshot();
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)(2 * pg)};
  ASSERT_OK(gw_wrap(ctx, buf + pg + 8, GW_UINT8, 1, shape, NULL, 0, &a));
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 1);
  check_through_device(a);
  gw_release(a);
  ASSERT_NO_LEAK(before);
  ASSERT_OK(gw_cpu_runtime_unregister(buf + pg));
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(gpuwrap_registration_at_start) {
  /* the same with a range gpuwrap registered (pinned): the wrap extends the registry */
  gw_context *ctx = tst_open(0);
  size_t pg = tst_page();
  char *buf = tst_pages(4);
  tst_random_fill(buf, 4 * pg);
  tst_leaks before = tst_leak_snapshot();
  ASSERT_OK(gw_pin(ctx, buf + pg, pg));
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)(2 * pg)};
  ASSERT_OK(gw_wrap(ctx, buf + pg + 8, GW_UINT8, 1, shape, NULL, 0, &a));
  if (tst_is_cpu()) ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 2);
  check_through_device(a);
  ASSERT_OK(gw_unpin(ctx, buf + pg, pg));
  check_through_device(a);
  gw_release(a);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(foreign_unaligned_registration) {
  /* someone registered a few bytes in the middle of a page (CUDA tracks byte ranges). A
   * wrap over that page cannot register the whole page. It must either work (data correct)
   * or fail cleanly; either way nothing of gpuwrap's stays and the foreign registration
   * stays intact. */
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t pg = tst_page();
  char *buf = tst_pages(3);
  tst_random_fill(buf, 3 * pg);
  ASSERT_OK(gw_cpu_runtime_register(buf + pg + 128, 256));
  tst_leaks before = tst_leak_snapshot();
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)(3 * pg)};
  gw_status s = gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &a);
  printf("  wrap over a partly foreign-registered page: %s %s\n", gw_err_name(s), gw_last_error());
  if (s == GW_OK) {
    check_through_device(a);
    gw_release(a);
  } else {
    ASSERT_NULL(a);
    ASSERT_TRUE(strlen(gw_last_error()) > 0);
  }
  ASSERT_NO_LEAK(before);
  ASSERT_EQ_INT(query(ctx, buf + pg + 130).kind, GW_MEM_PINNED);
  ASSERT_OK(gw_cpu_runtime_unregister(buf + pg + 128));
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pin_loop_registers_once) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER), unregs = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER);
  size_t n = 3 * tst_page() + 123;
  char *buf = malloc(n);
  tst_random_fill(buf, n);
  ASSERT_OK(gw_pin(ctx, buf, n));
  ASSERT_TRUE(query(ctx, buf).flags & GW_PTR_GPUWRAP_REGISTERED);
  for (int i = 0; i < 50; i++) {
    size_t off = (size_t)tst_rand_below(n / 2), len = 1 + (size_t)tst_rand_below(n - off - 1);
    gw_array *a = wrap_bytes(ctx, buf + off, len);
    if (i % 10 == 0) check_through_device(a);
    gw_release(a);
  }
  if (tst_is_cpu()) {
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs + 1);
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unregs);
    ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 1);
  }
  /* pinning twice takes two references */
  ASSERT_OK(gw_pin(ctx, buf, n));
  ASSERT_OK(gw_unpin(ctx, buf, n));
  ASSERT_TRUE(query(ctx, buf).flags & GW_PTR_GPUWRAP_REGISTERED);
  ASSERT_OK(gw_unpin(ctx, buf, n));
  ASSERT_EQ_INT(query(ctx, buf).kind, GW_MEM_HOST);
  if (tst_is_cpu()) ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unregs + 1);
  ASSERT_NO_LEAK(before);
  /* a wrap alive across the unpin keeps the pages */
  ASSERT_OK(gw_pin(ctx, buf, n));
  gw_array *a = wrap_bytes(ctx, buf, n);
  ASSERT_OK(gw_unpin(ctx, buf, n));
  ASSERT_TRUE(query(ctx, buf + n - 1).flags & GW_PTR_GPUWRAP_REGISTERED);
  check_through_device(a);
  gw_release(a);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(unpin_errors) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t pg = tst_page();
  char *buf = tst_pages(4);
  ASSERT_STATUS(gw_unpin(ctx, buf, 2 * pg), GW_ENOTREG);
  /* wrapped but not pinned: unpin is still an error and leaves the wrap alone */
  gw_array *a = wrap_bytes(ctx, buf, 2 * pg);
  ASSERT_STATUS(gw_unpin(ctx, buf, 2 * pg), GW_ENOTREG);
  ASSERT_TRUE(query(ctx, buf).flags & GW_PTR_GPUWRAP_REGISTERED);
  gw_release(a);
  ASSERT_NO_LEAK(before);
  /* unpin once too often */
  ASSERT_OK(gw_pin(ctx, buf, pg));
  ASSERT_OK(gw_unpin(ctx, buf, pg));
  ASSERT_STATUS(gw_unpin(ctx, buf, pg), GW_ENOTREG);
  ASSERT_NO_LEAK(before);
  /* bad arguments to pin */
  ASSERT_STATUS(gw_pin(ctx, NULL, pg), GW_EINVAL);
  ASSERT_STATUS(gw_pin(ctx, buf, 0), GW_EINVAL);
  ASSERT_STATUS(gw_pin(NULL, buf, pg), GW_EINVAL);
  ASSERT_STATUS(gw_unpin(NULL, buf, pg), GW_EINVAL);
  gw_array *d = NULL;
  int64_t shape[1] = {4096};
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT8, 1, shape, &d));
  ASSERT_STATUS(gw_pin(ctx, gw_data(d), 4096), GW_EINVAL);
  gw_release(d);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(two_registrations_nohostptr) {
  /* The device cannot use host addresses of registered memory: a wrap spanning two
   * registrations must give one contiguous device address or fail with GW_ENOTSUP. */
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t pg = tst_page();
  char *buf = tst_pages(4);
  tst_random_fill(buf, 4 * pg);
  gw_array *a = wrap_bytes(ctx, buf, 2 * pg);
  gw_array *b = wrap_bytes(ctx, buf + 2 * pg, 2 * pg);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 2);
  check_through_device(a);
  check_through_device(b);
  gw_array *c = NULL;
  int64_t shape[1] = {(int64_t)(4 * pg)};
  gw_status s = gw_wrap(ctx, buf, GW_UINT8, 1, shape, NULL, 0, &c);
  printf("  wrap across two registrations: %s %s\n", gw_err_name(s), gw_last_error());
  if (s == GW_OK) {
    ASSERT_EQ_PTR(gw_data(c), gw_data(a));
    ASSERT_EQ_PTR((char *)gw_data(c) + 2 * pg, gw_data(b));
    check_through_device(c);
    gw_release(c);
  } else {
    ASSERT_STATUS(s, GW_ENOTSUP);
    ASSERT_NULL(c);
  }
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 2);
  gw_release(a);
  gw_release(b);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(single_registration_nohostptr) {
  /* one registration: the device address is the runtime's, not the host's, and works */
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t n = 5000;
  char *buf = malloc(n);
  tst_random_fill(buf, n);
  gw_array *a = wrap_bytes(ctx, buf, n);
  ASSERT_NOT_NULL(gw_data(a));
  ASSERT_EQ_PTR(gw_host_data(a), buf);
  gw_ptrinfo i = query(ctx, buf + 10);
  ASSERT_EQ_INT(i.kind, GW_MEM_PINNED);
  ASSERT_EQ_PTR(i.host_ptr, buf + 10);
  ASSERT_EQ_PTR(i.device_ptr, (char *)gw_data(a) + 10);
  check_through_device(a);
  /* pinned allocations too */
  gw_array *p = NULL, *w = NULL;
  int64_t shape[1] = {777};
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_UINT8, 1, shape, &p));
  ASSERT_OK(gw_wrap(ctx, gw_host_data(p), GW_UINT8, 1, shape, NULL, 0, &w));
  ASSERT_EQ_PTR(gw_data(w), gw_data(p));
  tst_random_fill(gw_host_data(w), 777);
  check_through_device(w);
  gw_release(w);
  gw_release(p);
  gw_release(a);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}
