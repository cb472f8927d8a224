/*
 * GPU backend: executing the core's copy and fill plans (gw__xfer, gw__fillspec: dims
 * outermost first, extent-1 dims dropped, mergeable dims merged, byte strides).
 *
 * Copies, fastest first:
 *   1. contiguous on both sides: one MemcpyAsync (cudaMemcpyDefault: UVA finds the kinds);
 *   2. rows contiguous and the outer strides fit a pitched layout: one Memcpy2DAsync or
 *      Memcpy3DAsync, when the rows are wide enough for DMA to beat a kernel;
 *   3. both sides reachable by a kernel on the executing device: the strided-copy kernel;
 *   4. otherwise a loop of 3-D/2-D/1-D copies over the outer dims (pageable host memory,
 *      memory on another device, builds without kernels).
 * Fills: where the memory is device-accessible, the runtime's memset for one contiguous
 * row of the device's own memory whose value repeats every 1, 2 or 4 bytes (memset_how),
 * else a kernel; without kernels, the memsets where they apply, else a small device
 * pattern buffer copied into place; pageable memory the device cannot reach is filled by
 * the host.
 *
 * Each operation runs on the memory's device (the device side's, else the context's) or
 * the stream's device, and gives the caller's current device back. Without a stream the
 * work goes to the legacy default stream, so it is ordered after the caller's earlier
 * work exactly as cudaMemcpy is, and is complete on return.
 *
 * With a stream, every path (kernels, DMA copies, the staging pipeline, host fills) takes
 * the vendor handle from the gwg_stream (gwg_stream.s), created or borrowed alike; the
 * stream's device is current while it is used, which is what makes the borrowed special
 * handles (legacy, per-thread) name the right device's stream. The streams and events
 * themselves are in gpu_streams.c.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, in trace builds (src/core/trace.h) */
#include "gpu_internal.h"
#include "trace.h"

#include <stdlib.h>
#include <string.h>

/* Below this row width a kernel beats a pitched DMA copy (DMA moves rows one at a time;
 * narrow rows leave the copy engine idle). */
#define GWG_DMA_MIN_ROW 512
/* Size of the device pattern buffer of kernel-less fills. */
#define GWG_PATTERN_BYTES ((size_t)1 << 20)

/* ---- helpers ------------------------------------------------------------------------------ */

static int64_t numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

static int elem_size_ok(size_t e) { return e == 1 || e == 2 || e == 4 || e == 8 || e == 16; }

/* Can a kernel running on device `exec` read/write memory of this kind and device? */
static int reachable(const gwg_ctx *c, gw_memkind k, int device, int exec) {
  switch (k) {
  case GW_MEM_DEVICE: return device == exec; /* peers would need peer access enabled */
  case GW_MEM_MANAGED: return 1;
  case GW_MEM_PINNED: return 1; /* mapped and portable */
  case GW_MEM_HOST: return c->caps.pageable_access;
  default: return 0;
  }
}

static int pitch_ok(const gwg_ctx *c, int64_t pitch, size_t width) {
  return pitch > 0 && (uint64_t)pitch >= width && (uint64_t)pitch <= c->max_pitch;
}

/* A 3-D pitched side: rows of `width` bytes at `pitch`, slices at pitch*ysize. */
static int slice_ok(const gwg_ctx *c, int64_t slice, int64_t pitch, int64_t rows, size_t width,
                    size_t *ysize) {
  if (!pitch_ok(c, pitch, width) || slice <= 0 || slice % pitch != 0 || slice / pitch < rows)
    return 0;
  *ysize = (size_t)(slice / pitch);
  return 1;
}

/* Where a synchronous operation runs and on which stream. */
typedef struct {
  int device;
  gwv_stream s;
  int sync; /* complete before returning */
} exec_t;

static exec_t exec_for(const gwg_ctx *c, const gwg_stream *st, int dev_hint) {
  exec_t e;
  if (st) {
    e.device = st->device;
    e.s = st->s;
    e.sync = 0;
  } else {
    e.device = dev_hint >= 0 ? dev_hint : c->device;
    e.s = GWV_SYNC_STREAM;
    e.sync = 1;
  }
  return e;
}

/* ---- copies --------------------------------------------------------------------------------- */

/* Reverse dims that run backwards on both sides: same element pairs, positive pitches. */
static void flip_common_negative(gw__xfer *x) {
  for (int d = 0; d < x->ndim; d++) {
    if (x->dst_stride[d] < 0 && x->src_stride[d] < 0) {
      x->dst += x->dst_stride[d] * (x->shape[d] - 1);
      x->src += x->src_stride[d] * (x->shape[d] - 1);
      x->dst_stride[d] = -x->dst_stride[d];
      x->src_stride[d] = -x->src_stride[d];
    }
  }
}

typedef enum { BLK_3D, BLK_2D, BLK_ROW, BLK_2D_ELEMS, BLK_ELEM } blk_kind;

typedef struct {
  blk_kind kind;
  int outer;            /* dims iterated in C, before the block's dims */
  size_t width;         /* bytes per row */
  size_t height, depth; /* rows, slices */
  size_t dpitch, spitch, dysize, sysize;
} blk_t;

/* The largest block one DMA call can move, given the layout of the innermost dims. */
static blk_t plan_block(const gwg_ctx *c, const gw__xfer *x) {
  blk_t b = {0};
  int n = x->ndim, l = n - 1;
  if (n == 0) { /* a single element */
    b.kind = BLK_ROW;
    b.outer = 0;
    b.width = x->elem;
    return b;
  }
  if (x->dst_stride[l] == (int64_t)x->elem && x->src_stride[l] == (int64_t)x->elem) {
    b.width = (size_t)x->shape[l] * x->elem;
    if (n >= 3 &&
        slice_ok(c, x->dst_stride[n - 3], x->dst_stride[n - 2], x->shape[n - 2], b.width,
                 &b.dysize) &&
        slice_ok(c, x->src_stride[n - 3], x->src_stride[n - 2], x->shape[n - 2], b.width,
                 &b.sysize)) {
      b.kind = BLK_3D;
      b.outer = n - 3;
      b.height = (size_t)x->shape[n - 2];
      b.depth = (size_t)x->shape[n - 3];
      b.dpitch = (size_t)x->dst_stride[n - 2];
      b.spitch = (size_t)x->src_stride[n - 2];
    } else if (n >= 2 && pitch_ok(c, x->dst_stride[n - 2], b.width) &&
               pitch_ok(c, x->src_stride[n - 2], b.width)) {
      b.kind = BLK_2D;
      b.outer = n - 2;
      b.height = (size_t)x->shape[n - 2];
      b.dpitch = (size_t)x->dst_stride[n - 2];
      b.spitch = (size_t)x->src_stride[n - 2];
    } else {
      b.kind = BLK_ROW;
      b.outer = n - 1;
    }
  } else if (pitch_ok(c, x->dst_stride[l], x->elem) && pitch_ok(c, x->src_stride[l], x->elem)) {
    /* Strided innermost dim: a 2-D copy whose rows are single elements. */
    b.kind = BLK_2D_ELEMS;
    b.outer = n - 1;
    b.width = x->elem;
    b.height = (size_t)x->shape[l];
    b.dpitch = (size_t)x->dst_stride[l];
    b.spitch = (size_t)x->src_stride[l];
  } else {
    /* Opposite signs or zero strides: element by element (weird layouts, no kernel). */
    b.kind = BLK_ELEM;
    b.outer = n;
    b.width = x->elem;
  }
  return b;
}

static gwv_err run_block(const blk_t *b, char *d, const char *s, gwv_stream st) {
  switch (b->kind) {
  case BLK_3D:
    return gwv_memcpy3d_async(d, b->dpitch, b->dysize, s, b->spitch, b->sysize, b->width, b->height,
                              b->depth, st);
  case BLK_2D:
  case BLK_2D_ELEMS:
    return gwv_Memcpy2DAsync(d, b->dpitch, s, b->spitch, b->width, b->height, GWV_MEMCPY_DEFAULT,
                             st);
  default: return gwv_MemcpyAsync(d, s, b->width, GWV_MEMCPY_DEFAULT, st);
  }
}

static const char *block_call(const blk_t *b) {
  switch (b->kind) {
  case BLK_3D: return GWV_CALL("Memcpy3DAsync");
  case BLK_2D:
  case BLK_2D_ELEMS: return GWV_CALL("Memcpy2DAsync");
  default: return GWV_CALL("MemcpyAsync");
  }
}

/* Bytes from p to the end of the host registration holding it (SIZE_MAX if none). */
static size_t registration_left(const gwg_ctx *c, const char *p) {
  gwc_attrs a;
  gwv_query(p, &a);
  gw_ptrinfo r;
  if (gwc_classify(p, &a, &c->ccaps, &r) != GW_OK || r.kind != GW_MEM_PINNED || !r.base ||
      !r.extent)
    return SIZE_MAX;
  return (size_t)((const char *)r.base + r.extent - p);
}

/* One row in pieces that never cross the end of a host registration. */
static gwv_err split_row(const gwg_ctx *c, char *d, const char *s, size_t w, gwv_stream st) {
  while (w > 0) {
    size_t n = w, ls = registration_left(c, s), ld = registration_left(c, d);
    if (ls < n) n = ls;
    if (ld < n) n = ld;
    gwv_err e = gwv_MemcpyAsync(d, s, n, GWV_MEMCPY_DEFAULT, st);
    if (e != GWV_SUCCESS) return e;
    d += n;
    s += n;
    w -= n;
  }
  return GWV_SUCCESS;
}

/*
 * The runtime refuses ("invalid value") a DMA copy whose host side spans two registrations,
 * as wraps of overlapping pieces of one buffer leave them (measured on the H200, CUDA 13):
 * redo the block row by row, each row split at registration ends.
 */
static gwv_err run_block_split(const gwg_ctx *c, const blk_t *b, char *d, const char *s,
                               gwv_stream st) {
  size_t depth = b->kind == BLK_3D ? b->depth : 1;
  size_t height =
      (b->kind == BLK_3D || b->kind == BLK_2D || b->kind == BLK_2D_ELEMS) ? b->height : 1;
  for (size_t z = 0; z < depth; z++)
    for (size_t y = 0; y < height; y++) {
      size_t dofs = z * b->dpitch * b->dysize + y * b->dpitch;
      size_t sofs = z * b->spitch * b->sysize + y * b->spitch;
      gwv_err e = split_row(c, d + dofs, s + sofs, b->width, st);
      if (e != GWV_SUCCESS) return e;
    }
  return GWV_SUCCESS;
}

/* One block per index of the outer dims (an odometer over dims [0, b->outer)). */
static gw_status copy_blocks(const gwg_ctx *c, const gw__xfer *x, const blk_t *b, gwv_stream st) {
  const int pinned = x->dst_kind == GW_MEM_PINNED || x->src_kind == GW_MEM_PINNED;
  int64_t idx[GW_MAX_DIMS] = {0};
  int64_t count = numel(b->outer, x->shape);
  char *d = x->dst;
  const char *s = x->src;
  for (int64_t it = 0; it < count; it++) {
    gwv_err e = run_block(b, d, s, st);
    if (e != GWV_SUCCESS && pinned && GWV_IS_INVALID_VALUE(e)) {
      (void)gwv_GetLastError();
      e = run_block_split(c, b, d, s, st);
    }
    if (e != GWV_SUCCESS)
      return gwg_fail(e, "%s(dst %p, src %p, %zu bytes/row)", block_call(b), (void *)d,
                      (const void *)s, b->width);
    for (int k = b->outer - 1; k >= 0; k--) {
      d += x->dst_stride[k];
      s += x->src_stride[k];
      if (++idx[k] < x->shape[k]) break;
      d -= x->dst_stride[k] * x->shape[k];
      s -= x->src_stride[k] * x->shape[k];
      idx[k] = 0;
    }
  }
  return GW_OK;
}

static int pick_copy_device(const gwg_ctx *c, const gw__xfer *x) {
  if (x->dst_kind == GW_MEM_DEVICE && x->dst_device >= 0) return x->dst_device;
  if (x->src_kind == GW_MEM_DEVICE && x->src_device >= 0) return x->src_device;
  if (x->dst_kind == GW_MEM_MANAGED && x->dst_device >= 0) return x->dst_device;
  if (x->src_kind == GW_MEM_MANAGED && x->src_device >= 0) return x->src_device;
  return c->device;
}

static gw_status copy_on(const gwg_ctx *c, const gw__xfer *x, const exec_t *ex) {
  blk_t b = plan_block(c, x);
  int single = b.outer == 0 && b.kind != BLK_ELEM && b.kind != BLK_2D_ELEMS;
  int contiguous = single && b.kind == BLK_ROW;
#if GW_HAVE_KERNELS
  int kernel = elem_size_ok(x->elem) && reachable(c, x->dst_kind, x->dst_device, ex->device) &&
               reachable(c, x->src_kind, x->src_device, ex->device);
  if (kernel && !contiguous && !(single && b.width >= GWG_DMA_MIN_ROW)) {
    int e = gwk_copy(x, (void *)ex->s, c->max_blocks);
    if (e != 0)
      return gwg_fail((gwv_err)e, "strided copy kernel (%d dims, %zu-byte elements)", x->ndim,
                      x->elem);
    return GW_OK;
  }
#else
  (void)contiguous;
  (void)elem_size_ok;
  (void)reachable;
#endif
  gw_status s = copy_blocks(c, x, &b, ex->s);
#if GW_HAVE_KERNELS
  /* The runtime refuses a DMA copy of host memory that spans two registrations (wraps of
   * overlapping pieces of one buffer leave adjacent ranges) with "invalid value"; a kernel
   * reaches every registered byte through its mapped address, so it does the copy. */
  if (s != GW_OK && kernel && (x->dst_kind == GW_MEM_PINNED || x->src_kind == GW_MEM_PINNED)) {
    (void)gwv_GetLastError();
    if (gwk_copy(x, (void *)ex->s, c->max_blocks) == 0) return GW_OK;
    (void)gwv_GetLastError();
  }
#endif
  return s;
}

gw_status gwg_copy(void *state, const gw__xfer *xin, void *stream) {
  const gwg_ctx *c = state;
  const gwg_stream *st = stream;
  if (xin->ndim < 0 || xin->ndim > GW_MAX_DIMS)
    return gwg_host->fail(GW_EINVAL, "copy: %d dims", xin->ndim);
  if (numel(xin->ndim, xin->shape) == 0) return GW_OK;
  gw__xfer x = *xin;
  flip_common_negative(&x);
  exec_t ex = exec_for(c, st, pick_copy_device(c, &x));
  gwg_prev prev;
  gw_status s = gwg_enter(ex.device, &prev);
  if (s != GW_OK) return s;
  if (!gwg_staging_copy(state, &x, ex.device, ex.s, &s)) /* pageable, large: staged */
    s = copy_on(c, &x, &ex);
  /* Pageable memory: the API promises completion (the caller may free or reuse it). */
  if (s == GW_OK && (ex.sync || x.dst_kind == GW_MEM_HOST || x.src_kind == GW_MEM_HOST)) {
    gwv_err e = gwv_StreamSynchronize(ex.s);
    if (e != GWV_SUCCESS) s = gwg_fail(e, GWV_CALL("StreamSynchronize") " after a copy");
  }
  gwg_leave(prev);
  return s;
}

/*
 * A batch of independent transfers (backend.h: copy_batch). With kernels, the transfers
 * that a kernel on the executing device reaches on both sides (device, managed, pinned;
 * never pageable memory, which goes through gwg_copy's staging and completes on return)
 * and that fit a batch descriptor go in ONE launch (GWK_BATCH_MAX per launch); the rest,
 * and every transfer of a build without kernels, one by one through gwg_copy. Their order
 * does not matter: the core guarantees they are independent.
 */
gw_status gwg_copy_batch(void *state, const gw__xfer *x, int n, void *stream) {
  const gwg_ctx *c = state;
  const gwg_stream *st = stream;
  if (n < 0) return gwg_host->fail(GW_EINVAL, "copy_batch: n is %d", n);
  for (int i = 0; i < n; i++)
    if (x[i].ndim < 0 || x[i].ndim > GW_MAX_DIMS)
      return gwg_host->fail(GW_EINVAL, "copy_batch: transfer %d has %d dims", i, x[i].ndim);
#if GW_HAVE_KERNELS
  gw__xfer stack[GWK_BATCH_MAX];
  const gw__xfer *ptrs[GWK_BATCH_MAX];
  gw__xfer *fl = n <= GWK_BATCH_MAX ? stack : malloc((size_t)n * sizeof *fl);
  const gw__xfer **p = n <= GWK_BATCH_MAX ? ptrs : malloc((size_t)n * sizeof *p);
  unsigned char in_stack[GWK_BATCH_MAX] = {0}; /* 1: in the launch */
  unsigned char *in = n <= GWK_BATCH_MAX ? in_stack : calloc((size_t)n, 1);
  gw_status s = GW_OK;
  if (!fl || !p || !in) {
    s = gwg_host->fail(GW_ENOMEM, "copy_batch: out of host memory for %d transfers", n);
    goto out;
  }
  /* The executing device: the stream's, else the first transfer's (as gwg_copy picks). */
  int m = 0, dev = -1;
  for (int i = 0; i < n; i++) {
    if (numel(x[i].ndim, x[i].shape) == 0) {
      in[i] = 1; /* nothing to copy */
      continue;
    }
    if (dev < 0) dev = st ? st->device : pick_copy_device(c, &x[i]);
    if (!GWK_BATCH_FITS(&x[i]) || !elem_size_ok(x[i].elem) || x[i].dst_kind == GW_MEM_HOST ||
        x[i].src_kind == GW_MEM_HOST || !reachable(c, x[i].dst_kind, x[i].dst_device, dev) ||
        !reachable(c, x[i].src_kind, x[i].src_device, dev))
      continue;
    fl[m] = x[i];
    flip_common_negative(&fl[m]);
    p[m] = &fl[m];
    m++;
    in[i] = 1;
  }
  if (m >= 2) { /* one transfer alone keeps gwg_copy's choice (DMA for wide rows) */
    exec_t ex = exec_for(c, st, dev);
    gwg_prev prev;
    s = gwg_enter(ex.device, &prev);
    if (s == GW_OK) {
      int e = gwk_copy_batch(p, m, (void *)ex.s, c->max_blocks);
      if (e != 0) s = gwg_fail((gwv_err)e, "batched copy kernel (%d transfers)", m);
      if (s == GW_OK && ex.sync) {
        gwv_err se = gwv_StreamSynchronize(ex.s);
        if (se != GWV_SUCCESS)
          s = gwg_fail(se, GWV_CALL("StreamSynchronize") " after a batched copy");
      }
      gwg_leave(prev);
    }
  } else {
    memset(in, 0, (size_t)n);
  }
  for (int i = 0; s == GW_OK && i < n; i++)
    if (!in[i]) s = gwg_copy(state, &x[i], stream);
out:
  if (fl != stack) free(fl);
  if (p != ptrs) free((void *)p);
  if (in != in_stack) free(in);
  return s;
#else
  (void)c, (void)st; /* without kernels every transfer goes through gwg_copy */
  gw_status s = GW_OK;
  for (int i = 0; s == GW_OK && i < n; i++) s = gwg_copy(state, &x[i], stream);
  return s;
#endif
}

/*
 * A signalled batch (backend.h: xfer_copy_batch_signalled): the transfers and the words
 * in one kernel launch on the stream. Only where one launch serves every transfer (the
 * kernel reaches both sides of each, the descriptors fit); otherwise GW_ENOTSUP with
 * nothing queued, and the caller signals another way.
 */
gw_status gwg_copy_batch_signalled(void *state, const gw__xfer *x, int n, void *stream,
                                   const gw__signals *sig) {
  const gwg_ctx *c = state;
  const gwg_stream *st = stream;
  if (n < 0) return gwg_host->fail(GW_EINVAL, "copy_batch_signalled: n is %d", n);
  if (!st || !sig)
    return gwg_host->fail(GW_EINVAL, "copy_batch_signalled: %s is NULL", !st ? "stream" : "sig");
#if GW_HAVE_KERNELS
  _Static_assert(GWK_BATCH_MAX == GW__SIGNAL_MAX_TRANSFERS &&
                     GWK_BATCH_DIMS - 1 == GW__SIGNAL_MAX_DIMS,
                 "signals.h's limits (what every backend takes) must be the kernel's");
  if (n > GWK_BATCH_MAX)
    return gwg_host->fail(GW_ENOTSUP, "copy_batch_signalled: %d transfers (one launch takes %d)", n,
                          GWK_BATCH_MAX);
  gw__xfer fl[GWK_BATCH_MAX];
  const gw__xfer *p[GWK_BATCH_MAX];
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (x[i].ndim < 0 || x[i].ndim > GW_MAX_DIMS)
      return gwg_host->fail(GW_EINVAL, "copy_batch_signalled: transfer %d has %d dims", i,
                            x[i].ndim);
    if (numel(x[i].ndim, x[i].shape) == 0) continue;
    if (!GWK_BATCH_FITS(&x[i]) || !elem_size_ok(x[i].elem) || x[i].dst_kind == GW_MEM_HOST ||
        x[i].src_kind == GW_MEM_HOST || !reachable(c, x[i].dst_kind, x[i].dst_device, st->device) ||
        !reachable(c, x[i].src_kind, x[i].src_device, st->device))
      return gwg_host->fail(GW_ENOTSUP,
                            "copy_batch_signalled: transfer %d is not one a kernel on device %d "
                            "copies",
                            i, st->device);
    fl[m] = x[i];
    flip_common_negative(&fl[m]);
    p[m] = &fl[m];
    m++;
  }
  exec_t ex = exec_for(c, st, st->device);
  gwg_prev prev;
  gw_status s = gwg_enter(ex.device, &prev);
  if (s != GW_OK) return s;
  int e = gwk_copy_batch_signalled(p, m, (void *)ex.s, sig);
  if (e != 0) s = gwg_fail((gwv_err)e, "signalled copy kernel (%d transfers)", m);
  gwg_leave(prev);
  return s;
#else
  (void)c, (void)x;
  return gwg_host->fail(GW_ENOTSUP, "copy_batch_signalled: a build without kernels");
#endif
}

/* ---- fills ------------------------------------------------------------------------------------ */

static void flip_negative(gw__fillspec *f) {
  for (int d = 0; d < f->ndim; d++) {
    if (f->stride[d] < 0) {
      f->dst += f->stride[d] * (f->shape[d] - 1);
      f->stride[d] = -f->stride[d];
    }
  }
}

/* The host fills pageable memory no device can reach (no DMA engine can either without
 * registering it, which a fill should not do behind the caller's back). */
static void host_fill(const gw__fillspec *f) {
  int64_t idx[GW_MAX_DIMS] = {0};
  int64_t count = numel(f->ndim, f->shape);
  char *p = f->dst;
  for (int64_t it = 0; it < count; it++) {
    memcpy(p, f->value, f->elem);
    for (int k = f->ndim - 1; k >= 0; k--) {
      p += f->stride[k];
      if (++idx[k] < f->shape[k]) break;
      p -= f->stride[k] * f->shape[k];
      idx[k] = 0;
    }
  }
}

/* Rows of a fill: the innermost dim, contiguous (stride == elem) or not. */
typedef struct {
  int outer;      /* dims iterated in C */
  int contiguous; /* innermost stride == elem */
  int64_t n;      /* elements per row */
  int64_t stride; /* innermost stride (bytes) */
} rows_t;

static rows_t fill_rows(const gw__fillspec *f) {
  rows_t r;
  if (f->ndim == 0) {
    r.outer = 0;
    r.contiguous = 1;
    r.n = 1;
    r.stride = (int64_t)f->elem;
    return r;
  }
  r.outer = f->ndim - 1;
  r.n = f->shape[f->ndim - 1];
  r.stride = f->stride[f->ndim - 1];
  r.contiguous = r.stride == (int64_t)f->elem;
  return r;
}

typedef enum { ROW_MEMSET, ROW_D16, ROW_D32, ROW_PATTERN } row_how;

/* How the rows of a fill can be written by the runtime's memsets: the value must repeat
 * every 1, 2 or 4 bytes (a float32 or int32 of any value, a float64 0.0, bytes alike), the
 * rows be contiguous, and every row (the first one's address and each outer stride) aligned
 * to the word. Only where memsets are documented to work: device-side allocations, and the
 * 16-/32-bit ones on device memory only (as they always were here); and only memory the
 * executing device owns (`exec`), or managed memory, which every device reaches: a memset
 * on another device's memory would run in the wrong context. Else ROW_PATTERN.
 * Shared by the kernel-less fill and the kernel path, which takes a memset for a single
 * contiguous row: on the device the memset is as fast as a 16-byte-store kernel, and one
 * driver call costs the host less than gwk_fill's runtime launch, which small fills feel
 * (docs/BENCHMARKS.md, "Measurements cited by the GPU backend's comments"). */
static row_how memset_how(const gw__fillspec *f, const rows_t *r, int exec) {
  int devside = f->kind == GW_MEM_DEVICE || f->kind == GW_MEM_MANAGED;
  if (!r->contiguous || !devside || (f->kind == GW_MEM_DEVICE && f->device != exec))
    return ROW_PATTERN;
  size_t period = 0;
  for (size_t p = 1; p <= 4 && !period; p *= 2) {
    int rep = f->elem % p == 0;
    for (size_t i = p; rep && i < f->elem; i++) rep = f->value[i] == f->value[i % p];
    if (rep) period = p;
  }
  if (!period) return ROW_PATTERN;
  if (period == 1) return ROW_MEMSET;
#if GWV_HAVE_MEMSET_D16_D32
  /* the low bits of every row's address: the first row's, or-ed with each outer stride */
  uint64_t bits = (uint64_t)(uintptr_t)f->dst;
  for (int k = 0; k < r->outer; k++) bits |= (uint64_t)f->stride[k];
  size_t bytes = (size_t)r->n * f->elem;
  if (f->kind == GW_MEM_DEVICE && bits % 4 == 0 && bytes % 4 == 0)
    return ROW_D32; /* period 2 or 4 */
  if (f->kind == GW_MEM_DEVICE && period == 2 && bits % 2 == 0) return ROW_D16;
#endif
  return ROW_PATTERN;
}

/* Fill one row at `p` of r->n elements. */
static gw_status fill_row(const gwg_ctx *c, const gw__fillspec *f, const rows_t *r, row_how how,
                          char *p, const char *pattern, size_t pattern_bytes, gwv_stream s) {
  gwv_err e = GWV_SUCCESS;
  const char *call = GWV_CALL("MemcpyAsync");
  size_t bytes = (size_t)r->n * f->elem;
  switch (how) {
  case ROW_MEMSET:
    call = GWV_CALL("MemsetAsync");
    e = gwv_MemsetAsync(p, f->value[0], bytes, s);
    break;
#if GWV_HAVE_MEMSET_D16_D32
  case ROW_D16:
  case ROW_D32: { /* the value repeats every 2 or 4 bytes (memset_how): its first word */
    unsigned char w[4];
    for (size_t i = 0; i < 4; i++) w[i] = (unsigned char)f->value[i % f->elem];
    if (how == ROW_D16) {
      uint16_t v;
      memcpy(&v, w, 2);
      call = GWV_MEMSET_D16_CALL;
      e = gwv_memset_d16_async(p, v, bytes / 2, s);
    } else {
      uint32_t v;
      memcpy(&v, w, 4);
      call = GWV_MEMSET_D32_CALL;
      e = gwv_memset_d32_async(p, v, bytes / 4, s);
    }
    break;
  }
#endif
  default:
    if (r->contiguous) {
      for (size_t off = 0; off < bytes && e == GWV_SUCCESS; off += pattern_bytes) {
        size_t len = bytes - off < pattern_bytes ? bytes - off : pattern_bytes;
        e = gwv_MemcpyAsync(p + off, pattern, len, GWV_MEMCPY_DEFAULT, s);
      }
    } else if (pitch_ok(c, r->stride, f->elem)) {
      /* Rows of one element each: the pattern buffer is the (contiguous) source. */
      size_t per = pattern_bytes / f->elem;
      call = GWV_CALL("Memcpy2DAsync");
      for (int64_t i = 0; i < r->n && e == GWV_SUCCESS; i += (int64_t)per) {
        size_t h = (size_t)(r->n - i) < per ? (size_t)(r->n - i) : per;
        e = gwv_Memcpy2DAsync(p + i * r->stride, (size_t)r->stride, pattern, f->elem, f->elem, h,
                              GWV_MEMCPY_DEFAULT, s);
      }
    } else {
      for (int64_t i = 0; i < r->n && e == GWV_SUCCESS; i++)
        e = gwv_MemcpyAsync(p + i * r->stride, pattern, f->elem, GWV_MEMCPY_DEFAULT, s);
    }
    break;
  }
  if (e != GWV_SUCCESS) return gwg_fail(e, "fill: %s(%p, %zu bytes)", call, (void *)p, bytes);
  return GW_OK;
}

/* Without a kernel: memset-like calls where the value allows, else copies from a device
 * pattern buffer (built once on the host, at most GWG_PATTERN_BYTES). Synchronous. */
static gw_status fill_dma(const gwg_ctx *c, const gw__fillspec *f, const exec_t *ex) {
  rows_t r = fill_rows(f);
  row_how how = memset_how(f, &r, ex->device);

  char *pattern = NULL;
  size_t pattern_bytes = 0;
  gw_status s = GW_OK;
  gwv_err e;
  if (how == ROW_PATTERN) {
    size_t need = (size_t)r.n * f->elem;
    pattern_bytes = need < GWG_PATTERN_BYTES ? need : GWG_PATTERN_BYTES / f->elem * f->elem;
    char *h = malloc(pattern_bytes);
    if (!h) return gwg_host->fail(GW_ENOMEM, "fill: %zu bytes of host staging", pattern_bytes);
    for (size_t off = 0; off < pattern_bytes; off += f->elem) memcpy(h + off, f->value, f->elem);
    void *d = NULL;
    e = gwv_Malloc(&d, pattern_bytes);
    if (e == GWV_SUCCESS) {
      pattern = d;
      e = gwv_Memcpy(pattern, h, pattern_bytes, GWV_MEMCPY_DEFAULT);
    }
    free(h);
    if (e != GWV_SUCCESS) {
      s = gwg_fail(e, "fill: staging a %zu-byte pattern", pattern_bytes);
      if (pattern) (void)gwv_Free(pattern);
      return s;
    }
  }

  int64_t idx[GW_MAX_DIMS] = {0};
  int64_t count = numel(r.outer, f->shape);
  char *p = f->dst;
  for (int64_t it = 0; it < count && s == GW_OK; it++) {
    s = fill_row(c, f, &r, how, p, pattern, pattern_bytes, ex->s);
    for (int k = r.outer - 1; k >= 0; k--) {
      p += f->stride[k];
      if (++idx[k] < f->shape[k]) break;
      p -= f->stride[k] * f->shape[k];
      idx[k] = 0;
    }
  }
  if (pattern) {
    /* The copies read the pattern: wait for them before freeing it. */
    e = gwv_StreamSynchronize(ex->s);
    if (e != GWV_SUCCESS && s == GW_OK)
      s = gwg_fail(e, GWV_CALL("StreamSynchronize") " after a fill");
    (void)gwv_Free(pattern);
  }
  return s;
}

gw_status gwg_fill(void *state, const gw__fillspec *fin, void *stream) {
  const gwg_ctx *c = state;
  const gwg_stream *st = stream;
  gwv_err e;
  if (fin->ndim < 0 || fin->ndim > GW_MAX_DIMS || fin->elem == 0 || fin->elem > 16)
    return gwg_host->fail(GW_EINVAL, "fill: %d dims of %zu-byte elements", fin->ndim, fin->elem);
  if (numel(fin->ndim, fin->shape) == 0) return GW_OK;
  /* The header and the ndim entries the planner wrote (backend.h), not the whole struct
   * (~300 bytes, most of it the unused dims). */
  gw__fillspec f;
  f.ndim = fin->ndim;
  f.elem = fin->elem;
  f.dst = fin->dst;
  f.kind = fin->kind;
  f.device = fin->device;
  for (int d = 0; d < fin->ndim; d++) {
    f.shape[d] = fin->shape[d];
    f.stride[d] = fin->stride[d];
  }
  memcpy(f.value, fin->value, fin->elem);
  flip_negative(&f);

  if (f.kind == GW_MEM_HOST && !c->caps.pageable_access) {
    /* Order after the stream's earlier work on this memory, then fill here (complete on
     * return). The stream's device is current for the wait: a borrowed legacy or
     * per-thread handle means that device's default stream. */
    if (st) {
      gwg_prev prev;
      gw_status s = gwg_enter(st->device, &prev);
      if (s != GW_OK) return s;
      e = gwv_StreamSynchronize(st->s);
      gwg_leave(prev);
      if (e != GWV_SUCCESS) return gwg_fail(e, GWV_CALL("StreamSynchronize") " before a host fill");
    }
    host_fill(&f);
    return GW_OK;
  }

  /* Trace points (src/core/trace.h, GW_TRACE builds only): tools/probes/fill_gap.cu's
   * float64 fills take the kernel, its float32 fills the memset. */
  GW_TRACE_NOW(t_start);
  int hint = (f.kind == GW_MEM_DEVICE || f.kind == GW_MEM_MANAGED) ? f.device : -1;
  exec_t ex = exec_for(c, st, hint);
  gwg_prev prev;
  gw_status s = gwg_enter(ex.device, &prev);
  if (s != GW_OK) return s;
  GW_TRACE_NOW(t_entered);
#if GW_HAVE_KERNELS
  if (elem_size_ok(f.elem) && reachable(c, f.kind, f.device, ex.device)) {
    /* One contiguous row of the executing device's memory whose value a memset can write:
     * the runtime's memset (memset_how says why); anything else: one kernel launch. */
    rows_t r = fill_rows(&f);
    row_how how = r.outer == 0 ? memset_how(&f, &r, ex.device) : ROW_PATTERN;
    if (how != ROW_PATTERN) {
      s = fill_row(c, &f, &r, how, f.dst, NULL, 0, ex.s);
    } else {
      int k = gwk_fill(&f, (void *)ex.s, c->max_blocks);
      if (k != 0)
        s = gwg_fail((gwv_err)k, "fill kernel (%d dims, %zu-byte elements)", f.ndim, f.elem);
    }
  } else
#endif
  {
    s = fill_dma(c, &f, &ex);
  }
  GW_TRACE_NOW(t_issued);
  if (s == GW_OK && ex.sync && (e = gwv_StreamSynchronize(ex.s)) != GWV_SUCCESS)
    s = gwg_fail(e, GWV_CALL("StreamSynchronize") " after a fill");
  GW_TRACE_NOW(t_synced);
  gwg_leave(prev);
  GW_TRACE_NOW(t_left);
  GW_TRACE_SPAN(f.elem == 8 ? "fill 8 B: exec_for + gwg_enter" : "fill: exec_for + gwg_enter",
                t_start, t_entered);
  GW_TRACE_SPAN(f.elem == 8 ? "fill 8 B: plan + issue" : "fill: plan + issue", t_entered, t_issued);
  GW_TRACE_SPAN(f.elem == 8 ? "fill 8 B: synchronize" : "fill: synchronize", t_issued, t_synced);
  GW_TRACE_SPAN(f.elem == 8 ? "fill 8 B: gwg_leave" : "fill: gwg_leave", t_synced, t_left);
  return s;
}
