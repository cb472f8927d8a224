/*
 * Strided N-d copy and fill on the host: the CPU backend's "kernels".
 *
 * The core normalises a transfer first (backend.h: dims outermost first, extent-1 dims
 * dropped, mergeable dims merged, byte strides), so the common cases arrive as one
 * contiguous run and take a single memmove/memset. Otherwise the innermost dim is the
 * inner loop (one memcpy per row when it is contiguous on both sides, else element by
 * element with a fixed-size memcpy the compiler turns into a move), and the outer dims are
 * walked with an odometer. Source and destination never overlap here: the core copies
 * overlapping arrays through a temporary (transfer.c) and skips a copy of an array onto
 * itself, so the row copies may use memcpy; the one-run case uses memmove all the same,
 * as it costs nothing there.
 */
#include "cpu_internal.h"

#include <string.h>

static gw_status check_dims(const char *who, int ndim, size_t elem, const int64_t *shape,
                            int *empty) {
  if (ndim < 0 || ndim > GW_MAX_DIMS)
    return gw__fail(GW_EINVAL, "%s: ndim %d outside 0..%d", who, ndim, GW_MAX_DIMS);
  if (elem == 0) return gw__fail(GW_EINVAL, "%s: element size 0", who);
  *empty = 0;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return gw__fail(GW_EINVAL, "%s: dim %d has negative extent %lld", who, d,
                      (long long)shape[d]);
    if (shape[d] == 0) *empty = 1;
  }
  return GW_OK;
}

/* ---- copy ---- */

#define COPY_ELEMS(N)                                                \
  for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, N); \
  break

static void copy_row(char *d, const char *s, int64_t n, int64_t ds, int64_t ss, size_t elem) {
  switch (elem) {
  case 1: COPY_ELEMS(1);
  case 2: COPY_ELEMS(2);
  case 4: COPY_ELEMS(4);
  case 8: COPY_ELEMS(8);
  case 16: COPY_ELEMS(16);
  default: COPY_ELEMS(elem);
  }
}

gw_status gw__cpu_copy_check(const gw__xfer *x) {
  int empty = 0;
  return check_dims("copy", x->ndim, x->elem, x->shape, &empty);
}

gw_status gw__cpu_copy(const gw__xfer *x) {
  int empty = 0;
  gw_status st = check_dims("copy", x->ndim, x->elem, x->shape, &empty);
  if (st || empty) return st;
  const int nd = x->ndim;
  const size_t elem = x->elem;
  if (nd == 0) {
    memmove(x->dst, x->src, elem);
    return GW_OK;
  }
  const int64_t n = x->shape[nd - 1];
  const int64_t ds = x->dst_stride[nd - 1], ss = x->src_stride[nd - 1];
  const int contiguous = ds == (int64_t)elem && ss == (int64_t)elem;
  if (nd == 1 && contiguous) {
    memmove(x->dst, x->src, (size_t)n * elem);
    return GW_OK;
  }
  int64_t idx[GW_MAX_DIMS] = {0};
  char *d = x->dst;
  const char *s = x->src;
  for (;;) {
    if (contiguous)
      memcpy(d, s, (size_t)n * elem);
    else
      copy_row(d, s, n, ds, ss, elem);
    int k = nd - 2;
    for (; k >= 0; k--) {
      if (++idx[k] < x->shape[k]) {
        d += x->dst_stride[k];
        s += x->src_stride[k];
        break;
      }
      idx[k] = 0;
      d -= x->dst_stride[k] * (x->shape[k] - 1);
      s -= x->src_stride[k] * (x->shape[k] - 1);
    }
    if (k < 0) return GW_OK;
  }
}

/* ---- fill ---- */

#define FILL_ELEMS(N)                                       \
  for (int64_t i = 0; i < n; i++, d += ds) memcpy(d, v, N); \
  break

static void fill_strided(char *d, int64_t n, int64_t ds, const unsigned char *v, size_t elem) {
  switch (elem) {
  case 1: FILL_ELEMS(1);
  case 2: FILL_ELEMS(2);
  case 4: FILL_ELEMS(4);
  case 8: FILL_ELEMS(8);
  default: FILL_ELEMS(16);
  }
}

/* Below this many elements a plain loop beats the doubling copies' call overhead. */
#define FILL_LOOP_MAX 64

/* n contiguous elements: one memset when every byte of the value is equal (zero, all
 * ones, any 1-byte type), else write a few elements and double the written prefix with
 * memcpy, O(log n) calls at memcpy speed. */
static void fill_contiguous(char *d, int64_t n, const unsigned char *v, size_t elem, int uniform) {
  size_t total = (size_t)n * elem;
  if (uniform) {
    memset(d, v[0], total);
    return;
  }
  if (n <= FILL_LOOP_MAX) {
    fill_strided(d, n, (int64_t)elem, v, elem);
    return;
  }
  fill_strided(d, FILL_LOOP_MAX, (int64_t)elem, v, elem);
  size_t done = FILL_LOOP_MAX * elem;
  while (done < total) {
    size_t chunk = done < total - done ? done : total - done;
    memcpy(d + done, d, chunk);
    done += chunk;
  }
}

gw_status gw__cpu_fill_check(const gw__fillspec *f, int *empty) {
  const size_t elem = f->elem;
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8 && elem != 16)
    return gw__fail(GW_EINVAL, "fill: element size %zu is not 1, 2, 4, 8 or 16 bytes", elem);
  return check_dims("fill", f->ndim, elem, f->shape, empty);
}

gw_status gw__cpu_fill(const gw__fillspec *f) {
  const size_t elem = f->elem;
  int empty = 0;
  gw_status st = gw__cpu_fill_check(f, &empty);
  if (st || empty) return st;
  const unsigned char *v = f->value;
  int uniform = 1;
  for (size_t i = 1; i < elem; i++) uniform &= v[i] == v[0];
  const int nd = f->ndim;
  if (nd == 0) {
    memcpy(f->dst, v, elem);
    return GW_OK;
  }
  const int64_t n = f->shape[nd - 1];
  const int64_t ds = f->stride[nd - 1];
  const int contiguous = ds == (int64_t)elem;
  int64_t idx[GW_MAX_DIMS] = {0};
  char *d = f->dst;
  for (;;) {
    if (contiguous)
      fill_contiguous(d, n, v, elem, uniform);
    else
      fill_strided(d, n, ds, v, elem);
    int k = nd - 2;
    for (; k >= 0; k--) {
      if (++idx[k] < f->shape[k]) {
        d += f->stride[k];
        break;
      }
      idx[k] = 0;
      d -= f->stride[k] * (f->shape[k] - 1);
    }
    if (k < 0) return GW_OK;
  }
}
