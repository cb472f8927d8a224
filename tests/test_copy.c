/* gw_copy between every pair of kinds (host, pinned, device, managed, a wrapped registered
 * pageable array): contiguous, a 3-D strided sub-block with a negative step, transposed
 * (strided wraps); mismatches, read-only destinations, two devices. */
#include "test.h"

#include "test_kinds.h"

static unsigned char *random_bytes(size_t n, gw_dtype t) {
  unsigned char *p = malloc(n ? n : 1);
  tst_random_fill(p, n);
  if (t == GW_BOOL)
    for (size_t i = 0; i < n; i++) p[i] &= 1;
  return p;
}

TEST_IMPL(pairs_contiguous) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[2] = {3, 257};
  int pair = 0;
  for (int s = 0; s < K_COUNT; s++) {
    for (int d = 0; d < K_COUNT; d++, pair++) {
      gw_dtype t = tst_all_dtypes[pair % GW_DTYPE_COUNT];
      size_t e = gw_dtype_size(t), n = 3 * 257;
      gw_array *src = tst_make_kind(ctx, s, t, 2, shape), *dst = tst_make_kind(ctx, d, t, 2, shape);
      if (!src || !dst) {
        gw_release(src);
        gw_release(dst);
        continue;
      }
      unsigned char *in = random_bytes(n * e, t), *out = malloc(n * e), *poison = malloc(n * e);
      tst_poison(poison, n * e);
      tst_write(src, in);
      tst_write(dst, poison);
      ASSERT_OK(gw_copy(dst, src));
      tst_read(dst, out);
      printf("  %s -> %s (%s)\n", kname[s], kname[d], gw_dtype_name(t));
      ASSERT_ELEMS_EQ(out, in, n, e);
      if (gw_host_data(dst)) { /* the host sees it right away */
        ASSERT_OK(gw_synchronize(ctx));
        ASSERT_ELEMS_EQ((unsigned char *)gw_host_data(dst), in, n, e);
      }
      tst_read(src, out); /* the source is untouched */
      ASSERT_ELEMS_EQ(out, in, n, e);
      free(in);
      free(out);
      free(poison);
      gw_release(src);
      gw_release(dst);
      ASSERT_NO_LEAK(before);
    }
  }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pairs_strided_subblock) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[3] = {6, 7, 9}, sstart[3] = {1, 1, 8}, vshape[3] = {4, 3, 5}, sstep[3] = {1, 2, -1};
  int64_t dstart[3] = {2, 4, 2}, dstep[3] = {1, 1, 1}, cs[3];
  tst_c_strides(3, shape, cs);
  const size_t n = 6 * 7 * 9;
  int pair = 0;
  for (int s = 0; s < K_COUNT; s++) {
    for (int d = 0; d < K_COUNT; d++, pair++) {
      gw_dtype t = tst_all_dtypes[(pair * 4 + 1) % GW_DTYPE_COUNT];
      size_t e = gw_dtype_size(t);
      gw_array *src = tst_make_kind(ctx, s, t, 3, shape), *dst = tst_make_kind(ctx, d, t, 3, shape);
      if (!src || !dst) {
        gw_release(src);
        gw_release(dst);
        continue;
      }
      unsigned char *sin = random_bytes(n * e, t), *din = random_bytes(n * e, t),
                    *out = malloc(n * e);
      tst_write(src, sin);
      tst_write(dst, din);
      gw_array *sv = NULL, *dv = NULL;
      ASSERT_OK(gw_view(src, sstart, vshape, sstep, &sv));
      ASSERT_OK(gw_view(dst, dstart, vshape, pair % 2 ? dstep : NULL, &dv));
      ASSERT_OK(gw_copy(dv, sv));
      /* expected: din with the block replaced */
      int64_t idx[3] = {0, 0, 0};
      do {
        int64_t so = 0, dof = 0;
        for (int k = 0; k < 3; k++) {
          so += (sstart[k] + idx[k] * sstep[k]) * cs[k];
          dof += (dstart[k] + idx[k] * dstep[k]) * cs[k];
        }
        memcpy(din + dof * e, sin + so * e, e);
      } while (tst_nd_next(3, vshape, idx));
      tst_read(dst, out);
      printf("  %s -> %s 3-D block (%s)\n", kname[s], kname[d], gw_dtype_name(t));
      ASSERT_ELEMS_EQ(out, din, n, e); /* the block copied, everything else untouched */
      /* strided to contiguous, and contiguous to strided */
      gw_array *c = tst_make_kind(ctx, (s + d) % K_COUNT, t, 3, vshape);
      if (c) {
        size_t vn = 4 * 3 * 5;
        unsigned char *vout = malloc(vn * e), *want = malloc(vn * e);
        ASSERT_OK(gw_copy(c, sv));
        tst_read(c, vout);
        tst_read(sv, want);
        ASSERT_ELEMS_EQ(vout, want, vn, e);
        idx[0] = idx[1] = idx[2] = 0;
        size_t i = 0;
        do { /* check sv itself against the source data */
          int64_t so = 0;
          for (int k = 0; k < 3; k++) so += (sstart[k] + idx[k] * sstep[k]) * cs[k];
          if (memcmp(want + i * e, sin + so * e, e) != 0) TST_FAIL("view element %zu wrong", i);
          i++;
        } while (tst_nd_next(3, vshape, idx));
        tst_random_fill(want, vn * e);
        if (t == GW_BOOL)
          for (size_t j = 0; j < vn; j++) want[j] &= 1;
        tst_write(c, want);
        ASSERT_OK(gw_copy(sv, c));
        tst_read(sv, vout);
        ASSERT_ELEMS_EQ(vout, want, vn, e);
        free(vout);
        free(want);
        gw_release(c);
      }
      gw_release(sv);
      gw_release(dv);
      free(sin);
      free(din);
      free(out);
      gw_release(src);
      gw_release(dst);
      ASSERT_NO_LEAK(before);
    }
  }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pairs_transposed) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  const int64_t R = 13, C = 17;
  int64_t shape[2] = {R, C}, tshape[2] = {C, R}, tstrides[2] = {1, C};
  int pair = 0;
  for (int s = 0; s < K_COUNT; s++) {
    for (int d = 0; d < K_COUNT; d++, pair++) {
      gw_dtype t = tst_all_dtypes[(pair * 2 + 3) % GW_DTYPE_COUNT];
      size_t e = gw_dtype_size(t), n = (size_t)(R * C);
      gw_array *src = tst_make_kind(ctx, s, t, 2, shape),
               *dst = tst_make_kind(ctx, d, t, 2, tshape);
      if (!src || !dst) {
        gw_release(src);
        gw_release(dst);
        continue;
      }
      unsigned char *in = random_bytes(n * e, t), *out = malloc(n * e), *want = malloc(n * e);
      tst_write(src, in);
      unsigned flags;
      void *p = tst_wrap_addr(src, s, &flags);
      gw_array *tr = NULL;
      ASSERT_OK(gw_wrap(ctx, p, t, 2, tshape, tstrides, flags, &tr)); /* src transposed */
      ASSERT_OK(gw_copy(dst, tr));
      for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++)
          memcpy(want + (size_t)(j * R + i) * e, in + (size_t)(i * C + j) * e, e);
      tst_read(dst, out);
      printf("  %s -> %s transposed (%s)\n", kname[s], kname[d], gw_dtype_name(t));
      ASSERT_ELEMS_EQ(out, want, n, e);
      /* transposed destination: dst^T = tr^T = src, so src's data comes back */
      unsigned dflags;
      void *dp = tst_wrap_addr(dst, d, &dflags);
      gw_array *dtr = NULL, *back = tst_make_kind(ctx, s, t, 2, shape);
      ASSERT_NOT_NULL(back);
      ASSERT_OK(gw_wrap(ctx, dp, t, 2, shape, (int64_t[2]){1, R}, dflags, &dtr));
      ASSERT_OK(gw_copy(back, dtr));
      tst_read(back, out);
      ASSERT_ELEMS_EQ(out, in, n, e);
      /* strided to strided */
      tst_random_fill(in, n * e);
      if (t == GW_BOOL)
        for (size_t j = 0; j < n * e; j++) in[j] &= 1;
      tst_write(back, in);
      gw_array *bv = NULL;
      int64_t bst[2] = {R - 1, 0}, bstep[2] = {-1, 1};
      ASSERT_OK(gw_view(back, bst, shape, bstep, &bv)); /* bv(i,j) = back(R-1-i, j) */
      ASSERT_OK(gw_copy(dtr, bv));                      /* dst(j,i) = dtr(i,j) */
      for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++)
          memcpy(want + (size_t)(j * R + i) * e, in + (size_t)((R - 1 - i) * C + j) * e, e);
      tst_read(dst, out);
      ASSERT_ELEMS_EQ(out, want, n, e);
      gw_release(bv);
      gw_release(dtr);
      gw_release(back);
      gw_release(tr);
      free(in);
      free(out);
      free(want);
      gw_release(src);
      gw_release(dst);
      ASSERT_NO_LEAK(before);
    }
  }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(mismatch_and_readonly) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t s1[2] = {4, 5}, s2[2] = {5, 4}, s3[1] = {20}, s4[3] = {4, 5, 1};
  gw_array *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *f = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 2, s1, &a));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 2, s1, &b));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 2, s2, &c));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 1, s3, &d));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 3, s4, &e));
  ASSERT_STATUS(gw_copy(a, b), GW_EINVAL); /* dtype */
  ASSERT_STATUS(gw_copy(a, c), GW_EINVAL); /* shape */
  ASSERT_STATUS(gw_copy(a, d), GW_EINVAL); /* ndim, same count */
  ASSERT_STATUS(gw_copy(a, e), GW_EINVAL);
  ASSERT_STATUS(gw_copy(NULL, a), GW_EINVAL);
  ASSERT_STATUS(gw_copy(a, NULL), GW_EINVAL);
  /* read-only destination */
  float in[20], out[20], orig[20];
  tst_random_fill(orig, sizeof orig);
  tst_write(a, orig);
  ASSERT_OK(gw_wrap(ctx, gw_data(a), GW_FLOAT32, 2, s1, NULL, GW_WRAP_READONLY, &f));
  ASSERT_EQ_INT(gw_is_readonly(f), 1);
  ASSERT_EQ_INT(gw_is_readonly(a), 0);
  gw_array *g = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT32, 2, s1, &g));
  tst_random_fill(in, sizeof in);
  memcpy(gw_host_data(g), in, sizeof in);
  ASSERT_STATUS(gw_copy(f, g), GW_EREADONLY);
  float v = 1.5f;
  ASSERT_STATUS(gw_fill(f, &v), GW_EREADONLY);
  tst_read(a, out);
  ASSERT_ELEMS_EQ(out, orig, 20, 4); /* untouched */
  /* reading from it is fine */
  ASSERT_OK(gw_copy(g, f));
  ASSERT_ELEMS_EQ((float *)gw_host_data(g), orig, 20, 4);
  /* views and reshapes of a read-only array are read-only */
  gw_array *fv = NULL, *fr = NULL;
  int64_t st[2] = {1, 1}, vs[2] = {2, 2}, r1[1] = {20};
  ASSERT_OK(gw_view(f, st, vs, NULL, &fv));
  ASSERT_EQ_INT(gw_is_readonly(fv), 1);
  ASSERT_STATUS(gw_fill(fv, &v), GW_EREADONLY);
  ASSERT_OK(gw_reshape(f, 1, r1, &fr));
  ASSERT_EQ_INT(gw_is_readonly(fr), 1);
  ASSERT_STATUS(gw_copy(fr, d), GW_EREADONLY);
  tst_read(a, out);
  ASSERT_ELEMS_EQ(out, orig, 20, 4);
  /* read-only pageable wrap */
  float *hb = tst_pages(1);
  memcpy(hb, in, sizeof in);
  gw_array *h = NULL;
  ASSERT_OK(gw_wrap(ctx, hb, GW_FLOAT32, 2, s1, NULL, GW_WRAP_READONLY, &h));
  ASSERT_STATUS(gw_copy(h, a), GW_EREADONLY);
  ASSERT_ELEMS_EQ(hb, in, 20, 4);
  ASSERT_OK(gw_copy(a, h));
  tst_read(a, out);
  ASSERT_ELEMS_EQ(out, in, 20, 4);
  gw_release(h);
  free(hb);
  gw_release(fv);
  gw_release(fr);
  gw_release(g);
  gw_release(f);
  gw_release(a);
  gw_release(b);
  gw_release(c);
  gw_release(d);
  gw_release(e);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(scalars_and_empty) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_array *a = NULL, *b = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_COMPLEX128, 0, NULL, &a));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_COMPLEX128, 0, NULL, &b));
  unsigned char in[16], out[16];
  tst_random_fill(in, 16);
  tst_write(a, in);
  ASSERT_OK(gw_copy(b, a));
  ASSERT_ELEMS_EQ((unsigned char *)gw_host_data(b), in, 1, 16);
  tst_read(a, out);
  ASSERT_ELEMS_EQ(out, in, 1, 16);
  gw_release(a);
  gw_release(b);
  int64_t z[2] = {0, 5};
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT8, 2, z, &a));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_INT8, 2, z, &b));
  ASSERT_OK(gw_copy(b, a));
  gw_release(a);
  gw_release(b);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(two_devices_2dev) {
  gw_context *c0 = tst_open(0), *c1 = tst_open(1);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[3] = {5, 6, 7}, st[3] = {1, 0, 6}, vs[3] = {3, 6, 4}, step[3] = {1, 1, -2};
  gw_array *a = NULL, *b = NULL, *w = NULL, *av = NULL, *bv = NULL;
  ASSERT_OK(gw_alloc(c0, GW_MEM_DEVICE, GW_FLOAT64, 3, shape, &a));
  ASSERT_OK(gw_alloc(c1, GW_MEM_DEVICE, GW_FLOAT64, 3, shape, &b));
  double in[210], out[210];
  tst_random_fill(in, sizeof in);
  tst_write(a, in);
  ASSERT_OK(gw_copy(b, a)); /* device 0 -> device 1 */
  tst_read(b, out);
  ASSERT_ELEMS_EQ(out, in, 210, 8);
  /* device 1's memory wrapped in device 0's context, written from device 0 */
  ASSERT_OK(gw_wrap(c0, gw_data(b), GW_FLOAT64, 3, shape, NULL, 0, &w));
  ASSERT_EQ_INT(gw_device(w), 1);
  tst_random_fill(in, sizeof in);
  tst_write(a, in);
  ASSERT_OK(gw_copy(w, a));
  tst_read(b, out);
  ASSERT_ELEMS_EQ(out, in, 210, 8);
  /* strided across devices */
  ASSERT_OK(gw_view(a, st, vs, step, &av));
  ASSERT_OK(gw_view(w, st, vs, step, &bv));
  double blk[72], blk2[72];
  tst_random_fill(blk, sizeof blk);
  tst_write(bv, blk);
  ASSERT_OK(gw_copy(av, bv));
  tst_read(av, blk2);
  ASSERT_ELEMS_EQ(blk2, blk, 72, 8);
  gw_release(av);
  gw_release(bv);
  gw_release(w);
  gw_release(a);
  gw_release(b);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(c1);
  gw_context_destroy(c0);
  return 0;
}
