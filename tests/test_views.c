/* Views (start/shape/step, negative steps, views of views) and reshapes: they share the
 * parent's memory, outlive it, read the right elements (checked through gw_copy), and bad
 * views fail. Column-major wraps copied to row-major. */
#include "test.h"

static const gw_memkind kinds[4] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};

/* An array of `kind` filled with random data; *host gets a copy (C order). */
static gw_array *random_array(gw_context *ctx, gw_memkind kind, gw_dtype t, int ndim,
                              const int64_t *shape, unsigned char **host) {
  gw_array *a = NULL;
  gw_status s = gw_alloc(ctx, kind, t, ndim, shape, &a);
  if (s == GW_ENOTSUP && kind == GW_MEM_MANAGED && !tst_is_cpu()) return NULL;
  ASSERT_OK(s);
  size_t n = tst_array_bytes(a);
  *host = malloc(n ? n : 1);
  tst_random_fill(*host, n);
  tst_write(a, *host);
  return a;
}

/* Check that view v of an array whose C-order contents are `parent` (shape pshape) holds
 * parent[start + i*step]. */
static void check_view(const gw_array *v, const unsigned char *parent, int ndim,
                       const int64_t *pshape, const int64_t *start, const int64_t *step) {
  size_t e = gw_dtype_size(gw_array_dtype(v));
  int64_t n = gw_numel(v), ps[GW_MAX_DIMS], idx[GW_MAX_DIMS] = {0};
  unsigned char *got = malloc(n ? (size_t)n * e : 1), *want = malloc(n ? (size_t)n * e : 1);
  tst_c_strides(ndim, pshape, ps);
  tst_read(v, got);
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++) off += (start[d] + idx[d] * (step ? step[d] : 1)) * ps[d];
    memcpy(want + i * e, parent + off * e, e);
    tst_nd_next(ndim, gw_shape(v), idx);
  }
  ASSERT_ELEMS_EQ(got, want, (size_t)n, e);
  free(got);
  free(want);
}

TEST_IMPL(view_steps_all_kinds) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[3] = {5, 6, 7};
  struct {
    int64_t start[3], shape[3], step[3];
  } cases[] = {
      {{0, 0, 0}, {5, 6, 7}, {1, 1, 1}},    {{1, 2, 3}, {3, 2, 4}, {1, 1, 1}},
      {{4, 5, 6}, {5, 6, 7}, {-1, -1, -1}}, {{0, 5, 1}, {3, 3, 3}, {2, -2, 2}},
      {{4, 0, 6}, {2, 2, 2}, {-3, 5, -6}},  {{2, 3, 0}, {1, 1, 7}, {1, 1, 1}},
      {{2, 3, 4}, {0, 2, 2}, {1, 1, 1}},
  };
  for (int k = 0; k < 4; k++) {
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      gw_dtype t = tst_all_dtypes[(k * 7 + c) % GW_DTYPE_COUNT];
      unsigned char *host = NULL;
      gw_array *a = random_array(ctx, kinds[k], t, 3, shape, &host);
      if (!a) continue;
      gw_array *v = NULL;
      ASSERT_OK(gw_view(a, cases[c].start, cases[c].shape, cases[c].step, &v));
      ASSERT_EQ_INT(gw_ndim(v), 3);
      ASSERT_EQ_INT(gw_kind(v), kinds[k]);
      ASSERT_EQ_INT(gw_array_dtype(v), t);
      for (int d = 0; d < 3; d++) ASSERT_EQ_INT(gw_shape(v)[d], cases[c].shape[d]);
      if (c % 2) gw_release(a); /* the view outlives its parent */
      check_view(v, host, 3, shape, cases[c].start, cases[c].step);
      /* a view of the view */
      if (gw_numel(v) > 0 && cases[c].shape[2] >= 2) {
        int64_t s2[3] = {0, 0, 1},
                sh2[3] = {cases[c].shape[0], cases[c].shape[1], cases[c].shape[2] - 1};
        int64_t st2[3] = {1, 1, 1}, comb_start[3], comb_step[3];
        gw_array *vv = NULL;
        ASSERT_OK(gw_view(v, s2, sh2, st2, &vv));
        for (int d = 0; d < 3; d++) {
          comb_start[d] = cases[c].start[d] + s2[d] * cases[c].step[d];
          comb_step[d] = cases[c].step[d] * st2[d];
        }
        gw_release(v);
        v = vv;
        check_view(v, host, 3, shape, comb_start, comb_step);
      }
      gw_release(v);
      if (c % 2 == 0) gw_release(a);
      free(host);
      ASSERT_NO_LEAK(before);
    }
  }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(view_of_wrapped_pageable_outlives) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[2] = {40, 50}, start[2] = {39, 3}, vshape[2] = {20, 10}, step[2] = {-2, 4};
  int32_t *buf = malloc(40 * 50 * 4);
  tst_random_fill(buf, 40 * 50 * 4);
  unsigned char *copy = malloc(40 * 50 * 4);
  memcpy(copy, buf, 40 * 50 * 4);
  gw_array *a = NULL, *v = NULL;
  ASSERT_OK(gw_wrap(ctx, buf, GW_INT32, 2, shape, NULL, GW_WRAP_OWN, &a));
  ASSERT_OK(gw_view(a, start, vshape, step, &v));
  gw_release(a); /* buf stays (owned by the root, kept alive by v), registered */
  if (tst_is_cpu()) ASSERT_TRUE(gw_cpu_live_registrations() > before.regs);
  ASSERT_EQ_PTR(gw_host_data(v), buf + 39 * 50 + 3);
  check_view(v, copy, 2, shape, start, step);
  gw_release(v); /* unregisters and frees buf */
  ASSERT_NO_LEAK(before);
  free(copy);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(view_invalid) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[2] = {4, 5};
  gw_array *a = NULL, *v = (gw_array *)(uintptr_t)0x99;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 2, shape, &a));
  struct {
    int64_t start[2], shape[2], step[2];
  } bad[] = {
      {{0, 0}, {5, 5}, {1, 1}},   /* too long */
      {{4, 0}, {1, 1}, {1, 1}},   /* start out of range */
      {{-1, 0}, {1, 1}, {1, 1}},  /* negative start */
      {{0, 0}, {-1, 1}, {1, 1}},  /* negative shape */
      {{0, 0}, {2, 2}, {0, 1}},   /* zero step */
      {{1, 0}, {3, 1}, {-1, 1}},  /* negative step before the start */
      {{0, 0}, {3, 3}, {2, 2}},   /* 0,2,4: past the end */
      {{0, 4}, {1, 2}, {1, 1}},   /* 4,5: past the end */
      {{3, 4}, {4, 5}, {-1, -1}}, /* ok for 4x5 ... */
  };
  for (size_t i = 0; i + 1 < sizeof bad / sizeof bad[0]; i++) {
    ASSERT_STATUS(gw_view(a, bad[i].start, bad[i].shape, bad[i].step, &v), GW_EINVAL);
    ASSERT_EQ_PTR(v, (gw_array *)(uintptr_t)0x99);
  }
  ASSERT_OK(gw_view(a, bad[8].start, bad[8].shape, bad[8].step, &v));
  gw_release(v);
  int64_t s[2] = {0, 0}, sh[2] = {1, 1};
  ASSERT_STATUS(gw_view(NULL, s, sh, NULL, &v), GW_EINVAL);
  ASSERT_STATUS(gw_view(a, NULL, sh, NULL, &v), GW_EINVAL);
  ASSERT_STATUS(gw_view(a, s, NULL, NULL, &v), GW_EINVAL);
  ASSERT_STATUS(gw_view(a, s, sh, NULL, NULL), GW_EINVAL);
  gw_release(a);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(reshape) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  for (int k = 0; k < 4; k++) {
    int64_t shape[2] = {6, 20}, r3[3] = {2, 3, 20}, r1[1] = {120}, r4[4] = {5, 4, 3, 2};
    unsigned char *host = NULL;
    gw_array *a = random_array(ctx, kinds[k], GW_INT16, 2, shape, &host);
    if (!a) continue;
    gw_array *r = NULL, *rr = NULL;
    ASSERT_OK(gw_reshape(a, 3, r3, &r));
    gw_release(a);
    ASSERT_EQ_INT(gw_ndim(r), 3);
    ASSERT_EQ_INT(gw_strides(r)[0], 60);
    ASSERT_EQ_INT(gw_strides(r)[1], 20);
    ASSERT_EQ_INT(gw_strides(r)[2], 1);
    unsigned char got[240];
    tst_read(r, got);
    ASSERT_ELEMS_EQ(got, host, 120, 2);
    ASSERT_OK(gw_reshape(r, 4, r4, &rr));
    gw_release(r);
    tst_read(rr, got);
    ASSERT_ELEMS_EQ(got, host, 120, 2);
    ASSERT_OK(gw_reshape(rr, 1, r1, &r));
    gw_release(rr);
    /* writes through the reshape land in the original order */
    tst_random_fill(host, 240);
    tst_write(r, host);
    tst_read(r, got);
    ASSERT_ELEMS_EQ(got, host, 120, 2);
    /* a contiguous view (rows 2..3 of 6x20) reshapes too */
    int64_t p2[2] = {6, 20}, st[2] = {2, 0}, vs[2] = {2, 20};
    gw_array *m = NULL, *v = NULL, *vr = NULL;
    ASSERT_OK(gw_reshape(r, 2, p2, &m));
    ASSERT_OK(gw_view(m, st, vs, NULL, &v));
    int64_t r40[1] = {40};
    ASSERT_OK(gw_reshape(v, 1, r40, &vr));
    tst_read(vr, got);
    ASSERT_ELEMS_EQ(got, host + 2 * 20 * 2, 40, 2);
    gw_release(vr);
    gw_release(v);
    gw_release(m);
    gw_release(r);
    free(host);
    ASSERT_NO_LEAK(before);
  }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(reshape_invalid) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[2] = {6, 20};
  gw_array *a = NULL, *v = NULL, *r = (gw_array *)(uintptr_t)0x99;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 2, shape, &a));
  int64_t bad[2] = {7, 20}, neg[2] = {-6, -20}, ok1[1] = {120};
  ASSERT_STATUS(gw_reshape(a, 2, bad, &r), GW_EINVAL);
  ASSERT_STATUS(gw_reshape(a, 2, neg, &r), GW_EINVAL);
  ASSERT_STATUS(gw_reshape(a, GW_MAX_DIMS + 1, ok1, &r), GW_EINVAL);
  ASSERT_STATUS(gw_reshape(NULL, 1, ok1, &r), GW_EINVAL);
  ASSERT_STATUS(gw_reshape(a, 1, ok1, NULL), GW_EINVAL);
  ASSERT_EQ_PTR(r, (gw_array *)(uintptr_t)0x99);
  /* non-contiguous views */
  int64_t st[2] = {0, 0}, vs[2] = {6, 10}, step[2] = {1, 2}, r60[1] = {60};
  ASSERT_OK(gw_view(a, st, vs, step, &v));
  ASSERT_STATUS(gw_reshape(v, 1, r60, &r), GW_EINVAL);
  gw_release(v);
  int64_t st2[2] = {0, 0}, vs2[2] = {6, 10};
  ASSERT_OK(gw_view(a, st2, vs2, NULL, &v)); /* columns 0..9 of each row: not contiguous */
  ASSERT_STATUS(gw_reshape(v, 1, r60, &r), GW_EINVAL);
  gw_release(v);
  int64_t st3[2] = {5, 19}, vs3[2] = {6, 20}, step3[2] = {-1, -1}, r120[1] = {120};
  ASSERT_OK(gw_view(a, st3, vs3, step3, &v)); /* reversed */
  ASSERT_STATUS(gw_reshape(v, 1, r120, &r), GW_EINVAL);
  gw_release(v);
  ASSERT_EQ_PTR(r, (gw_array *)(uintptr_t)0x99);
  /* column-major wrap of the same memory is not C-contiguous */
  int64_t cm[2] = {20, 6}, cms[2] = {1, 20};
  gw_array *c = NULL;
  ASSERT_OK(gw_wrap(ctx, gw_data(a), GW_FLOAT32, 2, cm, cms, 0, &c));
  ASSERT_STATUS(gw_reshape(c, 1, r120, &r), GW_EINVAL);
  gw_release(c);
  gw_release(a);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(column_major_to_row_major) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  const int64_t R = 37, C = 23;
  for (int k = 0; k < 4; k++) {
    for (int t = 0; t < GW_DTYPE_COUNT; t += 3) {
      gw_dtype dt = tst_all_dtypes[t];
      size_t e = gw_dtype_size(dt);
      /* Fortran/Julia array A(R, C): element (i, j) at i + j*R */
      int64_t flat[1] = {R * C};
      unsigned char *colmaj = NULL;
      gw_array *mem = random_array(ctx, kinds[k], dt, 1, flat, &colmaj);
      if (!mem) continue;
      void *p = gw_host_data(mem) ? gw_host_data(mem) : gw_data(mem);
      int64_t shape[2] = {R, C}, strides[2] = {1, R};
      gw_array *cmw = NULL, *rm = NULL;
      ASSERT_OK(gw_wrap(ctx, p, dt, 2, shape, strides,
                        kinds[k] == GW_MEM_HOST ? GW_WRAP_NO_REGISTER : 0, &cmw));
      ASSERT_EQ_INT(gw_strides(cmw)[0], 1);
      ASSERT_EQ_INT(gw_strides(cmw)[1], R);
      ASSERT_OK(gw_alloc(ctx,
                         kinds[(k + 2) % 4] == GW_MEM_MANAGED && !tst_is_cpu() ? GW_MEM_DEVICE
                                                                               : kinds[(k + 2) % 4],
                         dt, 2, shape, &rm));
      ASSERT_OK(gw_copy(rm, cmw));
      unsigned char *got = malloc((size_t)(R * C) * e), *want = malloc((size_t)(R * C) * e);
      for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++)
          memcpy(want + (size_t)(i * C + j) * e, colmaj + (size_t)(i + j * R) * e, e);
      tst_read(rm, got);
      ASSERT_ELEMS_EQ(got, want, (size_t)(R * C), e);
      /* and back: row-major into the column-major array */
      tst_random_fill(want, (size_t)(R * C) * e);
      tst_write(rm, want);
      ASSERT_OK(gw_copy(cmw, rm));
      tst_read(mem, got);
      for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++)
          if (memcmp(got + (size_t)(i + j * R) * e, want + (size_t)(i * C + j) * e, e) != 0)
            TST_FAIL("column-major element (%lld, %lld) wrong after copy back", (long long)i,
                     (long long)j);
      free(got);
      free(want);
      free(colmaj);
      gw_release(rm);
      gw_release(cmw);
      gw_release(mem);
      ASSERT_NO_LEAK(before);
    }
  }
  gw_context_destroy(ctx);
  return 0;
}

/* A reshape to 0 dims of a one-element array, with shape NULL (allowed for ndim 0): the
 * scalar view reads and writes that element (make_view passed NULL to memcpy: UBSan). */
TEST_IMPL(reshape_to_scalar_null_shape) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t one = 1;
  gw_array *a = NULL, *s = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT64, 1, &one, &a));
  ASSERT_OK(gw_reshape(a, 0, NULL, &s));
  ASSERT_EQ_INT(gw_ndim(s), 0);
  ASSERT_EQ_INT(gw_numel(s), 1);
  double v = (double)(tst_rand64() % 1000) + 0.5, got = -1;
  ASSERT_OK(gw_fill(s, &v));
  tst_read(a, &got);
  ASSERT_TRUE(got == v);
  gw_release(s);
  gw_release(a);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* A reshape that only adds or removes extent-1 dims is a view of any layout (the Python
 * face's a[:, 3] of a strided array): the other dims keep their strides, every element read
 * and written lands where the parent has it; a non-contiguous array still refuses any
 * other new shape. */
TEST_IMPL(reshape_unit_dims_of_strided) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  for (int k = 0; k < 4; k++) {
    int64_t shape[3] = {5, 7, 6};
    unsigned char *host = NULL;
    gw_array *a = random_array(ctx, kinds[k], GW_INT32, 3, shape, &host);
    if (!a) continue;
    /* a[4:0:-2, 3, 1::2] as NumPy has it: a view with an extent-1 dim 1, then that dim gone */
    int64_t start[3] = {4, 3, 1}, vs[3] = {2, 1, 3}, step[3] = {-2, 1, 2};
    gw_array *v = NULL, *r = NULL, *back = NULL;
    ASSERT_OK(gw_view(a, start, vs, step, &v));
    int64_t r2[2] = {2, 3};
    ASSERT_OK(gw_reshape(v, 2, r2, &r));
    ASSERT_EQ_INT(gw_ndim(r), 2);
    ASSERT_EQ_INT(gw_strides(r)[0], -2 * 42);
    ASSERT_EQ_INT(gw_strides(r)[1], 2);
    ASSERT_EQ_PTR(gw_data(r), gw_data(v));
    ASSERT_EQ_PTR(gw_host_data(r), gw_host_data(v));
    int32_t got[6], want[6];
    tst_read(r, got);
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++)
        memcpy(&want[i * 3 + j], host + 4 * ((4 - 2 * i) * 42 + 3 * 6 + 1 + 2 * j), 4);
    ASSERT_ELEMS_EQ(got, want, 6, 4);
    /* extent-1 dims put back anywhere, and the view written through */
    int64_t r5[5] = {1, 2, 1, 3, 1};
    ASSERT_OK(gw_reshape(r, 5, r5, &back));
    ASSERT_EQ_INT(gw_strides(back)[1], -2 * 42);
    ASSERT_EQ_INT(gw_strides(back)[3], 2);
    int32_t fresh[6];
    tst_random_fill((unsigned char *)fresh, sizeof fresh);
    tst_write(back, fresh);
    tst_read(v, got);
    ASSERT_ELEMS_EQ(got, fresh, 6, 4);
    /* not only extent-1 dims: still refused (it would need a copy) */
    int64_t r6[1] = {6}, r32[2] = {3, 2};
    gw_array *bad = (gw_array *)(uintptr_t)0x99;
    ASSERT_STATUS(gw_reshape(r, 1, r6, &bad), GW_EINVAL);
    ASSERT_STATUS(gw_reshape(r, 2, r32, &bad), GW_EINVAL);
    ASSERT_EQ_PTR(bad, (gw_array *)(uintptr_t)0x99);
    gw_release(back);
    gw_release(r);
    gw_release(v);
    gw_release(a);
    free(host);
  }
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}
