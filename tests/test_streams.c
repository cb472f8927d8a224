/* Streams: gw_copy_async / gw_fill_async ordered on a stream, then gw_stream_synchronize;
 * two streams; bad arguments. */
#include "test.h"

TEST_IMPL(copy_fill_async) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  int64_t shape[2] = {64, 65};
  size_t n = 64 * 65;
  gw_array *p = NULL, *d = NULL, *d2 = NULL, *dv = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT32, 2, shape, &p));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 2, shape, &d));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 2, shape, &d2));
  float *in = malloc(n * 4), *want = malloc(n * 4);
  for (int rep = 0; rep < 5; rep++) {
    tst_random_fill(in, n * 4);
    memcpy(gw_host_data(p), in, n * 4);
    float v;
    tst_random_fill(&v, 4);
    int64_t st[2] = {10, 3}, vs[2] = {20, 30}, step[2] = {2, 2};
    ASSERT_OK(gw_copy_async(d, p, s)); /* pinned -> device */
    ASSERT_OK(gw_view(d, st, vs, step, &dv));
    ASSERT_OK(gw_fill_async(dv, &v, s)); /* strided fill on the device */
    ASSERT_OK(gw_copy_async(d2, d, s));  /* device -> device */
    ASSERT_OK(gw_copy_async(p, d2, s));  /* device -> pinned */
    ASSERT_OK(gw_stream_synchronize(s));
    gw_release(dv);
    memcpy(want, in, n * 4);
    for (int i = 0; i < 20; i++)
      for (int j = 0; j < 30; j++) want[(10 + 2 * i) * 65 + 3 + 2 * j] = v;
    ASSERT_ELEMS_EQ((float *)gw_host_data(p), want, n, 4);
  }
  /* pageable memory on a stream: completes before returning */
  float *pg = malloc(n * 4);
  gw_array *h = NULL;
  ASSERT_OK(gw_wrap(ctx, pg, GW_FLOAT32, 2, shape, NULL, GW_WRAP_NO_REGISTER, &h));
  ASSERT_OK(gw_copy_async(h, d2, s));
  ASSERT_ELEMS_EQ(pg, want, n, 4);
  ASSERT_OK(gw_stream_synchronize(s));
  gw_release(h);
  free(pg);
  free(in);
  free(want);
  gw_release(p);
  gw_release(d);
  gw_release(d2);
  gw_stream_destroy(s);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(two_streams) {
  gw_context *ctx = tst_open(0);
  gw_stream *s1 = NULL, *s2 = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s1));
  ASSERT_OK(gw_stream_create(ctx, &s2));
  int64_t shape[1] = {100000};
  gw_array *a = NULL, *b = NULL, *ha = NULL, *hb = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT64, 1, shape, &a));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT64, 1, shape, &b));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_INT64, 1, shape, &ha));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_INT64, 1, shape, &hb));
  int64_t va = (int64_t)tst_rand64(), vb = (int64_t)tst_rand64();
  ASSERT_OK(gw_fill_async(a, &va, s1));
  ASSERT_OK(gw_fill_async(b, &vb, s2));
  ASSERT_OK(gw_copy_async(ha, a, s1));
  ASSERT_OK(gw_copy_async(hb, b, s2));
  ASSERT_OK(gw_stream_synchronize(s2));
  ASSERT_ALL_EQ(gw_host_data(hb), &vb, 100000, 8);
  ASSERT_OK(gw_stream_synchronize(s1));
  ASSERT_ALL_EQ(gw_host_data(ha), &va, 100000, 8);
  /* destroy waits for the stream's work */
  int64_t vc = (int64_t)tst_rand64();
  ASSERT_OK(gw_fill_async(a, &vc, s1));
  ASSERT_OK(gw_copy_async(ha, a, s1));
  gw_stream_destroy(s1);
  ASSERT_ALL_EQ(gw_host_data(ha), &vc, 100000, 8);
  gw_stream_destroy(s2);
  gw_stream_destroy(NULL);
  gw_release(a);
  gw_release(b);
  gw_release(ha);
  gw_release(hb);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(stream_invalid) {
  gw_context *ctx = tst_open(0);
  gw_stream *s = NULL;
  ASSERT_STATUS(gw_stream_create(NULL, &s), GW_EINVAL);
  ASSERT_STATUS(gw_stream_create(ctx, NULL), GW_EINVAL);
  ASSERT_OK(gw_stream_create(ctx, &s));
  int64_t shape[1] = {4};
  gw_array *a = NULL, *b = NULL, *r = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, shape, &a));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT16, 1, shape, &b));
  ASSERT_OK(gw_wrap(ctx, gw_data(a), GW_INT32, 1, shape, NULL, GW_WRAP_READONLY, &r));
  int32_t v = 1;
  ASSERT_STATUS(gw_copy_async(a, b, s), GW_EINVAL);
  ASSERT_STATUS(gw_copy_async(r, a, s), GW_EREADONLY);
  ASSERT_STATUS(gw_fill_async(r, &v, s), GW_EREADONLY);
  ASSERT_STATUS(gw_fill_async(a, NULL, s), GW_EINVAL);
  ASSERT_STATUS(gw_stream_synchronize(NULL), GW_EINVAL);
  ASSERT_OK(gw_stream_synchronize(s));
  gw_release(r);
  gw_release(a);
  gw_release(b);
  gw_stream_destroy(s);
  gw_context_destroy(ctx);
  return 0;
}
