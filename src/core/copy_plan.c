/*
 * Copy planning, shared by every backend: turn two arrays' geometry into the smallest
 * equivalent strided transfer, so a backend sees "one contiguous block" or "rows of a 2-D /
 * 3-D block" whenever the data allows it, and can pick a DMA copy over a kernel.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

void gw__xfer_normalise(gw__xfer *x) {
  int n = 0;
  /* drop extent-1 dims */
  for (int d = 0; d < x->ndim; d++) {
    if (x->shape[d] == 1) continue;
    x->shape[n] = x->shape[d];
    x->dst_stride[n] = x->dst_stride[d];
    x->src_stride[n] = x->src_stride[d];
    n++;
  }
  x->ndim = n;
  /* Where both sides step backwards, walk forwards from the other end instead. */
  for (int d = 0; d < n; d++) {
    if (x->dst_stride[d] < 0 && x->src_stride[d] < 0) {
      x->dst += x->dst_stride[d] * (x->shape[d] - 1);
      x->src += x->src_stride[d] * (x->shape[d] - 1);
      x->dst_stride[d] = -x->dst_stride[d];
      x->src_stride[d] = -x->src_stride[d];
    }
  }
  /* Order dims outermost first by the destination's stride (insertion sort: n <= 16),
   * ties broken by the source's, so the innermost dim is the densest. */
  for (int i = 1; i < n; i++) {
    for (int j = i; j > 0; j--) {
      int64_t a = abs64(x->dst_stride[j - 1]), b = abs64(x->dst_stride[j]);
      int swap = a < b || (a == b && abs64(x->src_stride[j - 1]) < abs64(x->src_stride[j]));
      if (!swap) break;
      int64_t t;
      t = x->shape[j];
      x->shape[j] = x->shape[j - 1];
      x->shape[j - 1] = t;
      t = x->dst_stride[j];
      x->dst_stride[j] = x->dst_stride[j - 1];
      x->dst_stride[j - 1] = t;
      t = x->src_stride[j];
      x->src_stride[j] = x->src_stride[j - 1];
      x->src_stride[j - 1] = t;
    }
  }
  /* merge an outer dim into the next inner one where both sides are dense across them */
  int m = 0;
  for (int d = 0; d < n; d++) {
    if (m > 0) {
      int i = m - 1; /* the current outer candidate */
      if (x->dst_stride[i] == x->dst_stride[d] * x->shape[d] &&
          x->src_stride[i] == x->src_stride[d] * x->shape[d]) {
        x->shape[i] *= x->shape[d];
        x->dst_stride[i] = x->dst_stride[d];
        x->src_stride[i] = x->src_stride[d];
        continue;
      }
    }
    x->shape[m] = x->shape[d];
    x->dst_stride[m] = x->dst_stride[d];
    x->src_stride[m] = x->src_stride[d];
    m++;
  }
  x->ndim = m;
  if (m == 0) { /* a single element: one contiguous block */
    x->ndim = 1;
    x->shape[0] = 1;
    x->dst_stride[0] = x->src_stride[0] = (int64_t)x->elem;
  }
}

/* The address a copy should use for an array: the device's where the device can reach it,
 * the host's for memory only the host can (pageable, unregistered). */
static char *address_of(const gw_array *a) { return a->dev0 ? a->dev0 : a->host0; }

/* Check that src can be copied into dst (dtype and shape) and, unless it is empty, plan
 * the transfer. Whether dst may be written at all is the caller's check (transfer.c). */
gw_status gw__plan_copy(const gw_array *dst, const gw_array *src, gw__xfer *x) {
  if (dst->dtype != src->dtype)
    return gw__fail(GW_EINVAL, "src: dtype %s, dst has %s", gw_dtype_name(src->dtype),
                    gw_dtype_name(dst->dtype));
  if (dst->ndim != src->ndim)
    return gw__fail(GW_EINVAL, "src: %d dims, dst has %d", src->ndim, dst->ndim);
  for (int d = 0; d < dst->ndim; d++)
    if (dst->shape[d] != src->shape[d])
      return gw__fail(GW_EINVAL, "src: shape[%d] = %lld, dst has %lld", d, (long long)src->shape[d],
                      (long long)dst->shape[d]);
  /* Nothing to move: the strides of an empty array are never used and may be anything
   * (INT64_MAX / 2 from a wrap or a DLPack tensor of shape {0}), so no arithmetic on them.
   * The caller (transfer.c) checks that dst may be written and returns. */
  if (gw__numel(dst->ndim, dst->shape) == 0) {
    *x = (gw__xfer){.ndim = 0};
    return GW_OK;
  }
  const gw_array *dr = gw__root(dst), *sr = gw__root(src);
  size_t e = gw_dtype_size(dst->dtype);
  /* Field by field: a compound literal would zero the dims' arrays whole first (see
   * gw__plan_fill). */
  x->ndim = dst->ndim;
  x->elem = e;
  x->dst = address_of(dst);
  x->src = address_of(src);
  x->dst_kind = dr->kind;
  x->src_kind = sr->kind;
  x->dst_device = dr->device;
  x->src_device = sr->device;
  for (int d = 0; d < dst->ndim; d++) {
    x->shape[d] = dst->shape[d];
    /* A dim of extent 1 may carry any stride (never stepped over): keep it out of the
     * arithmetic, normalisation drops it anyway. */
    bool one = dst->shape[d] == 1;
    x->dst_stride[d] = one ? 0 : dst->strides[d] * (int64_t)e;
    x->src_stride[d] = one ? 0 : src->strides[d] * (int64_t)e;
  }
  gw__xfer_normalise(x);
  return GW_OK;
}

/* Only the first ndim entries of the dims' arrays (and elem bytes of the value) are
 * written, here and in the normaliser; nothing reads past them (backend.h). Zeroing the
 * scratch gw__xfer and the gw__fillspec whole (two `rep stos` of ~700 bytes, where the
 * structs were compound literals) and copying the arrays whole was most of a fill's
 * planning, a visible part of a small gw_fill (see docs/BENCHMARKS.md, 'Measurements
 * behind the code's choices'). */
void gw__plan_fill(const gw_array *dst, const void *value, gw__fillspec *f) {
  /* Reuse the copy normaliser with the destination on both sides. */
  gw__xfer x;
  x.ndim = dst->ndim;
  x.elem = gw_dtype_size(dst->dtype);
  x.dst = address_of(dst);
  x.src = x.dst;
  for (int d = 0; d < dst->ndim; d++) {
    x.shape[d] = dst->shape[d];
    x.dst_stride[d] = x.src_stride[d] = dst->shape[d] == 1 ? 0 : dst->strides[d] * (int64_t)x.elem;
  }
  gw__xfer_normalise(&x);
  const gw_array *r = gw__root(dst);
  f->ndim = x.ndim;
  f->elem = x.elem;
  f->dst = x.dst;
  f->kind = r->kind;
  f->device = r->device;
  for (int d = 0; d < x.ndim; d++) {
    f->shape[d] = x.shape[d];
    f->stride[d] = x.dst_stride[d];
  }
  memcpy(f->value, value, x.elem);
}
