/* The rules under the wrap table: deleters, double ownership, extent checks, bad input
 * (GW_EINVAL naming the argument), and nothing left behind by a failed call. */
#include "test.h"

typedef struct {
  gw_context *ctx;
  int calls;
  void *ptr;
  int was_registered; /* the pointer was still registered by gpuwrap when the deleter ran */
} del_state;

static void checking_deleter(void *ptr, void *user) {
  del_state *d = user;
  gw_ptrinfo info;
  d->calls++;
  d->ptr = ptr;
  if (gw_pointer_query(d->ctx, ptr, &info) == GW_OK && (info.flags & GW_PTR_GPUWRAP_REGISTERED))
    d->was_registered = 1;
}

TEST_IMPL(deleter_once_after_views) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  for (int order = 0; order < 3; order++) {
    float *buf = malloc(6 * 10 * sizeof(float));
    for (int i = 0; i < 60; i++) buf[i] = (float)i;
    int64_t shape[2] = {6, 10}, st[2] = {1, 2}, vs[2] = {3, 4}, rs[3] = {3, 2, 10};
    del_state d = {ctx, 0, NULL, 0};
    gw_array *a = NULL, *v = NULL, *r = NULL, *rv = NULL;
    ASSERT_OK(
        gw_wrap_with_deleter(ctx, buf, GW_FLOAT32, 2, shape, NULL, 0, checking_deleter, &d, &a));
    ASSERT_OK(gw_view(a, st, vs, NULL, &v));
    ASSERT_OK(gw_reshape(a, 3, rs, &r));
    int64_t st3[3] = {1, 0, 0}, vs3[3] = {2, 2, 5}, step3[3] = {1, 1, 2};
    ASSERT_OK(gw_view(r, st3, vs3, step3, &rv));
    gw_retain(a);
    gw_release(a);
    gw_array *first[3][4] = {{a, v, r, rv}, {rv, r, v, a}, {v, a, rv, r}};
    for (int k = 0; k < 4; k++) {
      ASSERT_EQ_INT(d.calls, 0);
      if (k == 3) { /* the survivor still reads the right data */
        gw_array *last = first[order][k];
        float out[60];
        tst_read(last, out);
        (void)out;
      }
      gw_release(first[order][k]);
    }
    ASSERT_EQ_INT(d.calls, 1);
    ASSERT_EQ_PTR(d.ptr, buf);
    ASSERT_EQ_INT(d.was_registered, 0); /* registrations dropped before the deleter */
    ASSERT_NO_LEAK(before);
    free(buf);
  }
  /* device memory with a deleter */
  gw_array *dev = NULL, *w = NULL, *v = NULL;
  int64_t s1[1] = {100}, st[1] = {10}, vs[1] = {5};
  del_state d = {ctx, 0, NULL, 0};
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT8, 1, s1, &dev));
  ASSERT_OK(
      gw_wrap_with_deleter(ctx, gw_data(dev), GW_INT8, 1, s1, NULL, 0, checking_deleter, &d, &w));
  ASSERT_EQ_INT(gw_kind(w), GW_MEM_DEVICE);
  ASSERT_OK(gw_view(w, st, vs, NULL, &v));
  gw_release(w);
  ASSERT_EQ_INT(d.calls, 0);
  gw_release(v);
  ASSERT_EQ_INT(d.calls, 1);
  ASSERT_EQ_PTR(d.ptr, gw_data(dev));
  gw_release(dev);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(deleter_not_called_on_failure) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  char *buf = malloc(256);
  int64_t good[1] = {64}, neg[1] = {-3};
  tst_deleter_state d = {0, NULL};
  gw_array *a = NULL;
  ASSERT_STATUS(gw_wrap_with_deleter(ctx, buf, GW_FLOAT32, 1, neg, NULL, 0, tst_deleter, &d, &a),
                GW_EINVAL);
  ASSERT_STATUS(
      gw_wrap_with_deleter(ctx, buf, GW_FLOAT32, 1, good, NULL, GW_WRAP_OWN, tst_deleter, &d, &a),
      GW_EINVAL);
  ASSERT_STATUS(gw_wrap_with_deleter(ctx, NULL, GW_FLOAT32, 1, good, NULL, 0, tst_deleter, &d, &a),
                GW_EINVAL);
  ASSERT_STATUS(gw_wrap_with_deleter(NULL, buf, GW_FLOAT32, 1, good, NULL, 0, tst_deleter, &d, &a),
                GW_EINVAL);
  ASSERT_STATUS(gw_wrap_with_deleter(ctx, buf, GW_FLOAT32, 1, good, NULL, 0, tst_deleter, &d, NULL),
                GW_EINVAL);
  ASSERT_NULL(a);
  ASSERT_EQ_INT(d.calls, 0);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(double_own_portable) {
  /* gw_alloc's array owns its memory: a second owner is refused */
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_memkind kinds[3] = {GW_MEM_DEVICE, GW_MEM_PINNED, GW_MEM_MANAGED};
  int64_t shape[1] = {512};
  for (int k = 0; k < 3; k++) {
    gw_array *a = NULL, *w = (gw_array *)(uintptr_t)0x42;
    gw_status s = gw_alloc(ctx, kinds[k], GW_INT32, 1, shape, &a);
    if (s == GW_ENOTSUP && kinds[k] == GW_MEM_MANAGED && !tst_is_cpu()) continue;
    ASSERT_OK(s);
    void *p = kinds[k] == GW_MEM_DEVICE ? gw_data(a) : gw_host_data(a);
    ASSERT_STATUS(gw_wrap(ctx, p, GW_INT32, 1, shape, NULL, GW_WRAP_OWN, &w), GW_EOWNED);
    ASSERT_EQ_PTR(w, (gw_array *)(uintptr_t)0x42);
    ASSERT_OK(gw_wrap(ctx, p, GW_INT32, 1, shape, NULL, 0, &w)); /* borrowing is fine */
    gw_release(w);
    gw_release(a);
    ASSERT_NO_LEAK(before);
  }
  gw_context_destroy(ctx);
  return 0;
}

static void double_own_runtime(gw_context *ctx, gw_memkind kind) {
  tst_leaks before = tst_leak_snapshot();
  void *p = NULL, *q = NULL;
  int64_t shape[1] = {256}, st[1] = {10}, vs[1] = {20};
  gw_array *w1 = NULL, *w2 = NULL, *v = NULL, *b = NULL;
  ASSERT_OK(gw_cpu_runtime_alloc(kind, 0, 1024, &p));
  ASSERT_OK(gw_wrap(ctx, p, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &w1));
  w2 = (gw_array *)(uintptr_t)0x42;
  ASSERT_STATUS(gw_wrap(ctx, p, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &w2), GW_EOWNED);
  ASSERT_EQ_PTR(w2, (gw_array *)(uintptr_t)0x42);
  ASSERT_OK(gw_wrap(ctx, p, GW_FLOAT32, 1, shape, NULL, 0, &b));
  ASSERT_OK(gw_view(w1, st, vs, NULL, &v));
  gw_release(w1);
  /* the view keeps the owner alive: still owned, not freed */
  ASSERT_EQ_SIZE(gw_cpu_live_allocations(), before.allocs + 1);
  ASSERT_STATUS(gw_wrap(ctx, p, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &w2), GW_EOWNED);
  gw_release(b);
  ASSERT_EQ_SIZE(gw_cpu_live_allocations(), before.allocs + 1);
  gw_release(v);
  ASSERT_EQ_SIZE(gw_cpu_live_allocations(), before.allocs); /* freed exactly once, now */
  /* after the owner is gone, owning (memory at that address) again works */
  ASSERT_OK(gw_cpu_runtime_alloc(kind, 0, 1024, &q));
  printf("  %s: new allocation %s the freed address\n", gw_memkind_name(kind),
         q == p ? "reuses" : "does not reuse");
  ASSERT_OK(gw_wrap(ctx, q, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &w1));
  gw_release(w1);
  ASSERT_NO_LEAK(before);
}

TEST_IMPL(double_own_runtime) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  double_own_runtime(ctx, GW_MEM_DEVICE);
  double_own_runtime(ctx, GW_MEM_PINNED);
  double_own_runtime(ctx, GW_MEM_MANAGED);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(double_own_pageable) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t bytes = 3000 * 8;
  int64_t shape[1] = {3000};
  for (int rep = 0; rep < 4; rep++) {
    double *p = malloc(bytes);
    gw_array *w1 = NULL, *w2 = (gw_array *)(uintptr_t)0x42;
    ASSERT_OK(gw_wrap(ctx, p, GW_FLOAT64, 1, shape, NULL, GW_WRAP_OWN, &w1));
    ASSERT_STATUS(gw_wrap(ctx, p, GW_FLOAT64, 1, shape, NULL, GW_WRAP_OWN, &w2), GW_EOWNED);
    ASSERT_EQ_PTR(w2, (gw_array *)(uintptr_t)0x42);
    gw_release(w1); /* frees p; the next malloc often returns the same address */
    ASSERT_NO_LEAK(before);
  }
  gw_context_destroy(ctx);
  return 0;
}

static void extent_checks(gw_context *ctx, char *base, size_t bytes, tst_leaks before, int own) {
  gw_array *a = NULL;
  int64_t n[1] = {(int64_t)bytes}, n1[1] = {(int64_t)bytes + 1};
  int64_t ni[1] = {(int64_t)bytes - 16}, ni1[1] = {(int64_t)bytes - 15};
  ASSERT_OK(gw_wrap(ctx, base, GW_UINT8, 1, n, NULL, 0, &a));
  gw_release(a);
  a = NULL;
  ASSERT_STATUS(gw_wrap(ctx, base, GW_UINT8, 1, n1, NULL, 0, &a), GW_ERANGE);
  ASSERT_NULL(a);
  /* interior pointer + span */
  ASSERT_OK(gw_wrap(ctx, base + 16, GW_UINT8, 1, ni, NULL, 0, &a));
  gw_release(a);
  a = NULL;
  ASSERT_STATUS(gw_wrap(ctx, base + 16, GW_UINT8, 1, ni1, NULL, 0, &a), GW_ERANGE);
  ASSERT_NULL(a);
  /* strides reaching past the end */
  int64_t s2[2] = {2, (int64_t)bytes / 8}, st2[2] = {(int64_t)bytes / 4, 1};
  ASSERT_STATUS(gw_wrap(ctx, base, GW_FLOAT32, 2, s2, st2, 0, &a), GW_ERANGE);
  st2[0] = (int64_t)bytes / 8;
  ASSERT_OK(gw_wrap(ctx, base, GW_FLOAT32, 2, s2, st2, 0, &a));
  gw_release(a);
  a = NULL;
  /* negative strides reaching before the start */
  int64_t sn[1] = {2}, stn[1] = {-1};
  ASSERT_STATUS(gw_wrap(ctx, base, GW_FLOAT32, 1, sn, stn, 0, &a), GW_ERANGE);
  ASSERT_OK(gw_wrap(ctx, base + 4, GW_FLOAT32, 1, sn, stn, 0, &a));
  gw_release(a);
  a = NULL;
  /* an OWN wrap past the end is refused too, and leaves no owner behind */
  if (own) {
    ASSERT_STATUS(gw_wrap(ctx, base, GW_UINT8, 1, n1, NULL, GW_WRAP_OWN, &a), GW_ERANGE);
    ASSERT_NULL(a);
  }
  ASSERT_NO_LEAK(before);
}

TEST_IMPL(extent) {
  gw_context *ctx = tst_open(0);
  gw_memkind kinds[3] = {GW_MEM_DEVICE, GW_MEM_PINNED, GW_MEM_MANAGED};
  int64_t shape[1] = {4096};
  for (int k = 0; k < 3; k++) {
    gw_array *a = NULL;
    gw_status s = gw_alloc(ctx, kinds[k], GW_UINT8, 1, shape, &a);
    if (s == GW_ENOTSUP && kinds[k] == GW_MEM_MANAGED && !tst_is_cpu()) continue;
    ASSERT_OK(s);
    tst_leaks before = tst_leak_snapshot();
    char *p = kinds[k] == GW_MEM_DEVICE ? gw_data(a) : gw_host_data(a);
    extent_checks(ctx, p, 4096, before, 0);
    gw_release(a);
  }
  if (tst_is_cpu()) {
    tst_leaks before = tst_leak_snapshot();
    void *p = NULL;
    ASSERT_OK(gw_cpu_runtime_alloc(GW_MEM_DEVICE, 0, 1000, &p));
    extent_checks(ctx, p, 1000, tst_leak_snapshot(), 1);
    ASSERT_OK(gw_cpu_runtime_free(p));
    ASSERT_OK(gw_cpu_runtime_alloc(GW_MEM_PINNED, 0, 1000, &p));
    extent_checks(ctx, p, 1000, tst_leak_snapshot(), 1);
    ASSERT_OK(gw_cpu_runtime_free(p));
    ASSERT_NO_LEAK(before);
  }
  gw_context_destroy(ctx);
  return 0;
}

#define SENTINEL ((gw_array *)(uintptr_t)0x5e5e)

#define EXPECT_EINVAL(call, names)                                              \
  do {                                                                          \
    out = SENTINEL;                                                             \
    ASSERT_STATUS(call, GW_EINVAL);                                             \
    ASSERT_ERROR_MENTIONS_ANY(names);                                           \
    ASSERT_EQ_PTR(out, SENTINEL);                                               \
    ASSERT_NO_LEAK(before);                                                     \
    if (tst_is_cpu()) ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs); \
  } while (0)

TEST_IMPL(bad_input) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER);
  char *buf = tst_pages(2);
  gw_array *out = NULL;
  int64_t s1[1] = {16}, neg[2] = {4, -1}, many[GW_MAX_DIMS + 1];
  for (int d = 0; d <= GW_MAX_DIMS; d++) many[d] = 1;
  int64_t ovf_elems[2] = {INT64_C(1) << 32, INT64_C(1) << 32};
  int64_t ovf_elems3[3] = {INT64_C(1) << 31, INT64_C(1) << 31, 4}; /* 2^64 */
  int64_t ovf_bytes[1] = {INT64_C(1) << 61};                       /* * 8 bytes = 2^64 */
  int64_t ovf_bytes2[1] = {INT64_C(1) << 60};                      /* * 16 bytes */
  int64_t two[1] = {2}, huge_stride[1] = {INT64_MAX}, huge_neg_stride[1] = {INT64_MIN};
  int64_t big_stride[1] = {INT64_C(1) << 62};

  EXPECT_EINVAL(gw_wrap(ctx, NULL, GW_FLOAT32, 1, s1, NULL, 0, &out), "ptr|pointer|NULL");
  EXPECT_EINVAL(gw_wrap(ctx, NULL, GW_FLOAT32, 0, NULL, NULL, 0, &out), "ptr|pointer|NULL");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_FLOAT32, 2, neg, NULL, 0, &out), "shape|dim");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_FLOAT32, GW_MAX_DIMS + 1, many, NULL, 0, &out), "ndim");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_FLOAT32, -1, s1, NULL, 0, &out), "ndim");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_FLOAT32, 1, NULL, NULL, 0, &out), "shape");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_UINT8, 2, ovf_elems, NULL, 0, &out), "shape|overflow");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_UINT8, 3, ovf_elems3, NULL, 0, &out), "shape|overflow");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_FLOAT64, 1, ovf_bytes, NULL, 0, &out), "shape|overflow|size");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_COMPLEX128, 1, ovf_bytes2, NULL, 0, &out),
                "shape|overflow|size");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_FLOAT32, 1, two, huge_stride, 0, &out), "stride|overflow");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_FLOAT32, 1, two, huge_neg_stride, 0, &out), "stride|overflow");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_FLOAT64, 1, two, big_stride, 0, &out), "stride|overflow");
  EXPECT_EINVAL(gw_wrap(ctx, buf + 1, GW_FLOAT32, 1, s1, NULL, 0, &out), "ptr|pointer|align");
  EXPECT_EINVAL(gw_wrap(ctx, buf + 4, GW_FLOAT64, 1, s1, NULL, 0, &out), "ptr|pointer|align");
  EXPECT_EINVAL(gw_wrap(ctx, buf + 2, GW_INT32, 1, s1, NULL, 0, &out), "ptr|pointer|align");
  EXPECT_EINVAL(gw_wrap(ctx, buf + 1, GW_INT16, 1, s1, NULL, 0, &out), "ptr|pointer|align");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_FLOAT32, 1, s1, NULL, 1u << 7, &out), "flag");
  EXPECT_EINVAL(gw_wrap(ctx, buf, GW_FLOAT32, 1, s1, NULL, 0x80000000u, &out), "flag");
  EXPECT_EINVAL(gw_wrap(ctx, buf, (gw_dtype)GW_DTYPE_COUNT, 1, s1, NULL, 0, &out), "dtype|type");
  EXPECT_EINVAL(gw_wrap(ctx, buf, (gw_dtype)-1, 1, s1, NULL, 0, &out), "dtype|type");
  EXPECT_EINVAL(gw_wrap(NULL, buf, GW_FLOAT32, 1, s1, NULL, 0, &out), "ctx|context");
  out = SENTINEL;
  ASSERT_STATUS(gw_wrap(ctx, buf, GW_FLOAT32, 1, s1, NULL, 0, NULL), GW_EINVAL);
  ASSERT_ERROR_MENTIONS_ANY("out");
  ASSERT_NO_LEAK(before);
  ASSERT_STATUS(gw_wrap_with_deleter(ctx, buf, GW_FLOAT32, 1, s1, NULL, 0, tst_deleter, NULL, NULL),
                GW_EINVAL);
  ASSERT_ERROR_MENTIONS_ANY("out");
  /* unaligned bytes are fine for 1-byte types; a good call still works after all that */
  ASSERT_OK(gw_wrap(ctx, buf + 1, GW_UINT8, 1, s1, NULL, GW_WRAP_NO_REGISTER, &out));
  gw_release(out);
  ASSERT_OK(gw_wrap(ctx, buf, GW_FLOAT32, 1, s1, NULL, 0, &out));
  gw_release(out);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}
