/* gw_fill for every dtype with random value bytes: on a wrapped pageable array (seen by the
 * host after gw_synchronize), on device memory (copied back), on pinned and managed memory,
 * and on strided views (elements outside the view untouched). */
#include "test.h"

TEST_IMPL(every_dtype_pageable_wrap) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  for (int t = 0; t < GW_DTYPE_COUNT; t++) {
    gw_dtype dt = tst_all_dtypes[t];
    size_t e = gw_dtype_size(dt), n = 1031;
    unsigned char *buf = malloc(n * e + 64);
    tst_poison(buf, n * e + 64);
    int64_t shape[1] = {(int64_t)n};
    gw_array *a = NULL;
    ASSERT_OK(gw_wrap(ctx, buf + 16, dt, 1, shape, NULL, 0, &a));
    unsigned char v[16];
    tst_random_value(dt, v);
    ASSERT_OK(gw_fill(a, v));
    ASSERT_OK(gw_synchronize(ctx));
    ASSERT_ALL_EQ(buf + 16, v, n, e);
    unsigned char poison[16];
    tst_poison(poison, 16);
    ASSERT_ELEMS_EQ(buf, poison, 16, 1);                  /* before: untouched */
    ASSERT_ELEMS_EQ(buf + 16 + n * e, poison + 0, 16, 1); /* after: untouched */
    ASSERT_ELEMS_EQ(buf + 32 + n * e, poison + 0, 16, 1);
    gw_release(a);
    free(buf);
    ASSERT_NO_LEAK(before);
  }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(every_dtype_every_kind) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_memkind kinds[4] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};
  int64_t shape[3] = {3, 11, 13};
  size_t n = 3 * 11 * 13;
  for (int k = 0; k < 4; k++) {
    for (int t = 0; t < GW_DTYPE_COUNT; t++) {
      gw_dtype dt = tst_all_dtypes[t];
      size_t e = gw_dtype_size(dt);
      gw_array *a = NULL;
      gw_status s = gw_alloc(ctx, kinds[k], dt, 3, shape, &a);
      if (s == GW_ENOTSUP && kinds[k] == GW_MEM_MANAGED && !tst_is_cpu()) continue;
      ASSERT_OK(s);
      unsigned char *out = malloc(n * e), v[16];
      tst_poison(out, n * e);
      tst_write(a, out);
      tst_random_value(dt, v);
      ASSERT_OK(gw_fill(a, v));
      tst_read(a, out);
      ASSERT_ALL_EQ(out, v, n, e);
      if (gw_host_data(a)) {
        ASSERT_OK(gw_synchronize(ctx));
        ASSERT_ALL_EQ((unsigned char *)gw_host_data(a), v, n, e);
      }
      free(out);
      gw_release(a);
      ASSERT_NO_LEAK(before);
    }
  }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(strided_views) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_memkind kinds[4] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};
  int64_t shape[3] = {7, 8, 9}, cs[3];
  tst_c_strides(3, shape, cs);
  struct {
    int64_t start[3], shape[3], step[3];
  } views[] = {
      {{1, 1, 1}, {3, 3, 3}, {2, 3, 3}},
      {{6, 7, 8}, {7, 4, 3}, {-1, -2, -4}},
      {{0, 2, 0}, {7, 1, 9}, {1, 1, 1}},
      {{3, 0, 4}, {1, 8, 1}, {1, 1, 1}},
  };
  size_t n = 7 * 8 * 9;
  for (int k = 0; k < 4; k++) {
    for (size_t c = 0; c < sizeof views / sizeof views[0]; c++) {
      gw_dtype dt = tst_all_dtypes[(k * 4 + c * 5) % GW_DTYPE_COUNT];
      size_t e = gw_dtype_size(dt);
      gw_array *a = NULL, *v = NULL;
      gw_status s = gw_alloc(ctx, kinds[k], dt, 3, shape, &a);
      if (s == GW_ENOTSUP && kinds[k] == GW_MEM_MANAGED && !tst_is_cpu()) continue;
      ASSERT_OK(s);
      unsigned char *orig = malloc(n * e), *out = malloc(n * e), val[16];
      tst_random_fill(orig, n * e);
      if (dt == GW_BOOL)
        for (size_t i = 0; i < n; i++) orig[i] &= 1;
      tst_write(a, orig);
      ASSERT_OK(gw_view(a, views[c].start, views[c].shape, views[c].step, &v));
      tst_random_value(dt, val);
      ASSERT_OK(gw_fill(v, val));
      int64_t idx[3] = {0, 0, 0};
      do {
        int64_t off = 0;
        for (int d = 0; d < 3; d++) off += (views[c].start[d] + idx[d] * views[c].step[d]) * cs[d];
        memcpy(orig + off * e, val, e);
      } while (tst_nd_next(3, views[c].shape, idx));
      tst_read(a, out);
      ASSERT_ELEMS_EQ(out, orig, n, e);
      gw_release(v);
      gw_release(a);
      free(orig);
      free(out);
      ASSERT_NO_LEAK(before);
    }
  }
  /* a strided wrap of a pageable buffer: every other element */
  int64_t s1[1] = {500}, st1[1] = {2};
  uint64_t *buf = malloc(1000 * 8), orig[1000], v = tst_rand64();
  tst_random_fill(orig, sizeof orig);
  memcpy(buf, orig, sizeof orig);
  gw_array *a = NULL;
  ASSERT_OK(gw_wrap(ctx, buf + 1, GW_UINT64, 1, s1, st1, 0, &a));
  ASSERT_OK(gw_fill(a, &v));
  ASSERT_OK(gw_synchronize(ctx));
  for (int i = 0; i < 1000; i++)
    if (buf[i] != (i % 2 ? v : orig[i]))
      TST_FAIL("element %d: %" PRIx64 ", want %" PRIx64, i, buf[i], i % 2 ? v : orig[i]);
  gw_release(a);
  free(buf);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* Values that repeat every 1, 2 or 4 bytes (a float64 or complex128 whose words are alike,
 * bytes alike), on views that start and end at every alignment: a GPU backend writes these
 * with the runtime's 8/16/32-bit memsets, whose word and count are derived from the value's
 * period, not its size. Every element checked, the elements around the view too. */
TEST_IMPL(periodic_values) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_memkind kinds[4] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};
  gw_dtype dts[5] = {GW_FLOAT64, GW_COMPLEX128, GW_INT16, GW_UINT8, GW_FLOAT32};
  size_t periods[3] = {1, 2, 4};
  const int64_t total = 4099;
  for (int k = 0; k < 4; k++)
    for (int t = 0; t < 5; t++) {
      size_t e = gw_dtype_size(dts[t]);
      gw_array *a = NULL;
      gw_status s = gw_alloc(ctx, kinds[k], dts[t], 1, &total, &a);
      if (s == GW_ENOTSUP && kinds[k] == GW_MEM_MANAGED && !tst_is_cpu()) continue;
      ASSERT_OK(s);
      unsigned char *orig = malloc((size_t)total * e), *out = malloc((size_t)total * e);
      for (int p = 0; p < 3; p++) {
        if (e % periods[p]) continue; /* a 2-byte element cannot repeat every 4 bytes */
        for (int64_t start = 0; start < 4; start++) {
          int64_t len = total - start - (int64_t)(tst_rand64() % 5);
          unsigned char word[4], val[16];
          tst_random_fill(word, sizeof word); /* any bits: fills copy bytes, not values */
          for (size_t i = 0; i < e; i++) val[i] = word[i % periods[p]];
          tst_random_fill(orig, (size_t)total * e);
          tst_write(a, orig);
          gw_array *v = NULL;
          ASSERT_OK(gw_view(a, &start, &len, NULL, &v));
          ASSERT_OK(gw_fill(v, val));
          for (int64_t i = start; i < start + len; i++) memcpy(orig + (size_t)i * e, val, e);
          tst_read(a, out);
          ASSERT_ELEMS_EQ(out, orig, (size_t)total, e);
          gw_release(v);
        }
      }
      free(orig);
      free(out);
      gw_release(a);
      ASSERT_NO_LEAK(before);
    }
  /* Rows whose starts are not all word-aligned: (5, 7) int16 and (5, 7) float32 viewed as
   * [:, c0:c0+w] (a row stride of 14 or 28 bytes), each filled with a value of period 2:
   * a backend that memsets row by row must check every row's alignment, not the first's. */
  gw_dtype dts2[2] = {GW_INT16, GW_FLOAT32};
  for (int k = 0; k < 4; k++)
    for (int t = 0; t < 2; t++)
      for (int64_t c0 = 0; c0 < 3; c0++) {
        size_t e = gw_dtype_size(dts2[t]);
        int64_t shape2[2] = {5, 7}, start2[2] = {0, c0}, vshape[2] = {5, 4};
        gw_array *a = NULL, *v = NULL;
        gw_status s = gw_alloc(ctx, kinds[k], dts2[t], 2, shape2, &a);
        if (s == GW_ENOTSUP && kinds[k] == GW_MEM_MANAGED && !tst_is_cpu()) continue;
        ASSERT_OK(s);
        unsigned char orig[5 * 7 * 4], out[5 * 7 * 4], word[2], val[4];
        tst_random_fill(word, sizeof word);
        for (size_t i = 0; i < e; i++) val[i] = word[i % 2];
        tst_random_fill(orig, 35 * e);
        tst_write(a, orig);
        ASSERT_OK(gw_view(a, start2, vshape, NULL, &v));
        ASSERT_OK(gw_fill(v, val));
        for (int64_t i = 0; i < 5; i++)
          for (int64_t j = c0; j < c0 + 4; j++) memcpy(orig + (size_t)(i * 7 + j) * e, val, e);
        tst_read(a, out);
        ASSERT_ELEMS_EQ(out, orig, 35, e);
        gw_release(v);
        gw_release(a);
        ASSERT_NO_LEAK(before);
      }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(fill_invalid) {
  gw_context *ctx = tst_open(0);
  int64_t shape[1] = {10};
  gw_array *a = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, shape, &a));
  int32_t v = 3;
  ASSERT_STATUS(gw_fill(a, NULL), GW_EINVAL);
  ASSERT_STATUS(gw_fill(NULL, &v), GW_EINVAL);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}
