/* gw_copy and gw_fill, synchronous and on streams: plan in the core, execute in the backend
 * (the prepared batches of copies, built on these, are batch.c). */
#include "transfer.h"

#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

static bool is_gpu(const gw_context *c) { return c->backend != GW_BACKEND_CPU; }

/* The backend that runs a copy: a GPU backend can reach everything a CPU one can, so it
 * runs any copy that involves its memory. */
static gw_status executor(const gw_array *dst, const gw_array *src, gw_context **out) {
  gw_context *d = dst->ctx, *s = src->ctx;
  if (d->ops == s->ops || !is_gpu(s))
    *out = d;
  else if (!is_gpu(d))
    *out = s;
  else
    return gw__fail(GW_ENOTSUP, "src/dst: a copy between the %s and %s backends", s->ops->name,
                    d->ops->name);
  return GW_OK;
}

static int64_t elements(const gw_array *a) { return gw__numel(a->ndim, a->shape); }

/* |v| without overflow (a dim of extent 1 may carry any stride, INT64_MIN included). */
static uint64_t mag64(int64_t v) { return v < 0 ? 0 - (uint64_t)v : (uint64_t)v; }

/*
 * Whether gpuwrap may write into a: not read-only, and no two of its elements share
 * memory. Writing an element twice has no meaning (which write wins differs between the
 * CPU and a GPU's threads), and the element count of such an array can be a fake (a
 * broadcast DLPack tensor of shape {2^62}, stride {0}): refusing it here bounds every
 * write by the memory it spans. Overlap is refused where it is certain:
 *   - a stride 0 over an extent > 1;
 *   - two dims i, j (extents > 1) with |stride i| == m * |stride j| for some 1 <= m <
 *     extent j: element (1 along i) is element (m along j) (or, signs opposite, (1, m)
 *     is (0, 0));
 *   - more elements than element slots in the span (pigeonhole), which also bounds the
 *     work of what passes by the span.
 * Those rules decide every layout real programs write through; what they leave open (a
 * stride that reaches into the inner dims' span without stepping onto them: strides
 * {2, -3} over {4, 4}, three dims that meet) is decided exactly below, once per array:
 * up to GW__OVERLAP_EXACT_MAX elements by sorting every element's offset, above it by
 * marking each element's slot in a bitmap of the span when the span has at most
 * GW__OVERLAP_BITMAP_MAX slots (a bitmap of at most 8 MiB, one pass over the elements, tens
 * of ms at the limit); larger ones pass unchecked. Every write path (gw_copy, gw_fill and
 * their async variants) checks it.
 */
#define GW__OVERLAP_EXACT_MAX ((int64_t)1 << 16)
#define GW__OVERLAP_BITMAP_MAX ((int64_t)1 << 26)

/* Enough for no overlap: with the dims (extent > 1) in order of |stride|, each stride reaches
 * past all the inner dims span (as in every C or Fortran order, and every transposition,
 * view and step of one), so the inner blocks' copies are apart. Strides in elements. */
static bool nested(const gw_array *a) {
  int idx[GW_MAX_DIMS], k = 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] > 1) idx[k++] = d;
  for (int i = 1; i < k; i++) /* insertion sort by |stride| (k <= 16) */
    for (int j = i; j > 0 && mag64(a->strides[idx[j - 1]]) > mag64(a->strides[idx[j]]); j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
  uint64_t reach = 1; /* element slots the inner dims span */
  for (int i = 0; i < k; i++) {
    uint64_t st = mag64(a->strides[idx[i]]), more;
    if (st < reach || __builtin_mul_overflow(st, (uint64_t)(a->shape[idx[i]] - 1), &more) ||
        __builtin_add_overflow(reach, more, &reach))
      return false;
  }
  return true;
}

typedef struct {
  int64_t off, lin; /* element offset, C-order index */
} elem_at;

static int by_offset(const void *x, const void *y) {
  const elem_at *p = x, *q = y;
  return p->off < q->off ? -1 : p->off > q->off ? 1 : (p->lin > q->lin) - (p->lin < q->lin);
}

/* "(i0, i1, ...)" of C-order index lin */
static void index_text(const gw_array *a, int64_t lin, char *buf, size_t n) {
  int64_t ix[GW_MAX_DIMS];
  for (int d = a->ndim - 1; d >= 0; d--) {
    ix[d] = lin % a->shape[d];
    lin /= a->shape[d];
  }
  size_t at = (size_t)snprintf(buf, n, "(");
  for (int d = 0; d < a->ndim && at < n; d++)
    at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)ix[d]);
  if (at < n) snprintf(buf + at, n - at, ")");
}

static gw_status overlap_found(const gw_array *a, const char *who, int64_t lin0, int64_t lin1) {
  char x[GW_MAX_DIMS * 22 + 4], y[GW_MAX_DIMS * 22 + 4];
  index_text(a, lin0, x, sizeof x);
  index_text(a, lin1, y, sizeof y);
  return gw__fail(GW_EINVAL,
                  "%s: elements %s and %s are the same memory: its elements overlap in memory", who,
                  x, y);
}

/* Walks a's elements in C order, keeping each one's offset (elements) without a division:
 * the odometer of the indices. */
typedef struct {
  int64_t idx[GW_MAX_DIMS], off;
} odometer;

static void odo_next(const gw_array *a, odometer *o) {
  for (int d = a->ndim - 1; d >= 0; d--) {
    if (a->shape[d] == 1) continue; /* never stepped over: its stride may be anything */
    o->off += a->strides[d];
    if (++o->idx[d] < a->shape[d]) return;
    o->off -= a->strides[d] * a->shape[d];
    o->idx[d] = 0;
  }
}

/* The exact test for more elements than sorting takes: one bit per element slot of the
 * span [lo, lo + slots) (offsets in elements), set element by element; the first element
 * that finds its bit set shares memory with an earlier one, found by a second walk. */
static gw_status bitmap_overlap(const gw_array *a, const char *who, int64_t n, int64_t lo,
                                int64_t slots) {
  uint64_t *bits = calloc((size_t)(slots + 63) / 64, sizeof *bits);
  if (!bits)
    return gw__fail(GW_ENOMEM, "%s: out of host memory checking its elements for overlap", who);
  odometer o = {{0}, 0};
  int64_t hit = -1, hit_off = 0;
  for (int64_t lin = 0; lin < n; lin++, odo_next(a, &o)) {
    uint64_t k = (uint64_t)(o.off - lo), m = (uint64_t)1 << (k % 64);
    if (bits[k / 64] & m) {
      hit = lin;
      hit_off = o.off;
      break;
    }
    bits[k / 64] |= m;
  }
  free(bits);
  if (hit < 0) return GW_OK;
  o = (odometer){{0}, 0};
  int64_t first = 0;
  while (o.off != hit_off) {
    odo_next(a, &o);
    first++;
  }
  return overlap_found(a, who, first, hit);
}

/* Two elements at one offset: the exact test of the layouts `nested` leaves open. */
static gw_status exact_overlap(const gw_array *a, const char *who, int64_t n) {
  elem_at *e = malloc((size_t)n * sizeof *e);
  if (!e)
    return gw__fail(GW_ENOMEM, "%s: out of host memory checking its elements for overlap", who);
  for (int64_t lin = 0; lin < n; lin++) {
    int64_t rem = lin, off = 0;
    for (int d = a->ndim - 1; d >= 0; d--) {
      off += (rem % a->shape[d]) * a->strides[d]; /* bounded by the span: gw__span checked it */
      rem /= a->shape[d];
    }
    e[lin] = (elem_at){off, lin};
  }
  qsort(e, (size_t)n, sizeof *e, by_offset);
  gw_status s = GW_OK;
  for (int64_t i = 1; i < n && s == GW_OK; i++)
    if (e[i].off == e[i - 1].off) s = overlap_found(a, who, e[i - 1].lin, e[i].lin);
  free(e);
  return s;
}

/* Pages of the root's host span the process cannot write: GW_EREADONLY naming the mapping;
 * GW_OK when they are all writable, or the map cannot be read, or the span is empty or
 * malformed (the write's own checks say what is wrong). One read of /proc/self/maps. */
static gw_status unwritable_pages(const gw_array *a, const char *who) {
  const gw_array *r = gw__root(a);
  int64_t lo, hi, n;
  if (!r->host0 ||
      gw__span(r->ndim, r->shape, r->strides, gw_dtype_size(r->dtype), &lo, &hi, &n) != GW_OK ||
      n == 0)
    return GW_OK;
  gw__hostmap m;
  if (gw__host_mapping((uintptr_t)r->host0 + (uintptr_t)lo, (uintptr_t)r->host0 + (uintptr_t)hi,
                       &m) != GW_OK ||
      m.writable)
    return GW_OK;
  return gw__fail(
      GW_EREADONLY, "%s: its host memory is not writable: [%p, %p) is mapped '%s'%s%s (%s)", who,
      (void *)m.what_lo, (void *)m.what_hi, m.what_perms[0] ? m.what_perms : "----",
      m.what_path[0] ? " " : "", m.what_path, m.mapped ? "read-only pages" : "not mapped");
}

/*
 * Host-only memory (pageable, not registered: GW_WRAP_NO_REGISTER, a device that reads
 * pageable memory, or pages the runtime would not lock) is written by the host, so pages
 * the process cannot write would crash it (SIGSEGV): the registering wrap finds read-only
 * pages when the runtime refuses them, these wraps register nothing and so never looked.
 * Asked of /proc/self/maps at the first write (a wrap would pay it on every pageable wrap
 * of a device that reads pageable memory), for the root's whole span, and remembered.
 */
static gw_status check_host_pages(const gw_array *a, const char *who) {
  gw_array *r = (gw_array *)gw__root(a);
  if (r->kind != GW_MEM_HOST || !r->host0 ||
      atomic_load_explicit(&r->pages_ok, memory_order_relaxed))
    return GW_OK;
  gw_status s = unwritable_pages(a, who);
  if (s == GW_OK) atomic_store_explicit(&r->pages_ok, true, memory_order_relaxed);
  return s;
}

/* Why a write into a read-only array is refused. A registration is read-only for a
 * GW_WRAP_READONLY wrap of its bytes or for pages the process cannot write; which one is
 * asked of the memory map here, on the refusal, not at every wrap that shares one. */
static gw_status refuse_readonly(const gw_array *a, const char *who) {
  gw_status s;
  switch ((gw__ro_why)a->ro_why) {
  case GW__RO_SHARED:
    if ((s = unwritable_pages(a, who)) != GW_OK) return s;
    return gw__fail(GW_EREADONLY,
                    "%s: read-only array: its bytes are in a registration gpuwrap made read-only "
                    "for a GW_WRAP_READONLY wrap of them, through which the device may not write; "
                    "the registration stays read-only while anything holds it, this array "
                    "included: release every wrap and gw_pin of these bytes, then wrap them again",
                    who);
  case GW__RO_PAGES:
    if ((s = unwritable_pages(a, who)) != GW_OK) return s;
    return gw__fail(GW_EREADONLY, "%s: read-only array: its host pages are not writable", who);
  case GW__RO_ASKED:
  default:
    return gw__fail(GW_EREADONLY,
                    "%s: read-only array (wrapped with GW_WRAP_READONLY, or imported from a "
                    "READ_ONLY DLPack tensor)",
                    who);
  }
}

/* An array's geometry never changes, and its root's pages were found writable once (that
 * answer is kept, check_host_pages): the first write that passes answers for every later
 * one, which then costs one load instead of the loops below (~60 ns of a synchronous
 * gw_fill's host path on the H200 test machine, 2026-12-01). */
static gw_status check_writable(const gw_array *a, const char *who) {
  if (a->readonly) return refuse_readonly(a, who);
  if (atomic_load_explicit(&a->write_ok, memory_order_relaxed)) return GW_OK;
  if (elements(a) == 0) return GW_OK; /* no elements, none share memory */
  gw_status hs = check_host_pages(a, who);
  if (hs != GW_OK) return hs;
  for (int i = 0; i < a->ndim; i++) {
    if (a->shape[i] < 2) continue;
    uint64_t si = mag64(a->strides[i]);
    if (si == 0)
      return gw__fail(GW_EINVAL,
                      "%s: dim %d has stride 0 over %lld elements: its elements overlap in "
                      "memory (a broadcast array can be read, not written)",
                      who, i, (long long)a->shape[i]);
    for (int j = 0; j < a->ndim; j++) {
      uint64_t sj = mag64(a->strides[j]);
      if (j == i || a->shape[j] < 2 || sj == 0 || si % sj != 0 || si / sj >= (uint64_t)a->shape[j])
        continue;
      return gw__fail(GW_EINVAL,
                      "%s: dim %d (stride %lld) steps onto dim %d (stride %lld, extent %lld): "
                      "its elements overlap in memory",
                      who, i, (long long)a->strides[i], j, (long long)a->strides[j],
                      (long long)a->shape[j]);
    }
  }
  int64_t lo, hi, n;
  gw_status s = gw__span(a->ndim, a->shape, a->strides, gw_dtype_size(a->dtype), &lo, &hi, &n);
  if (s != GW_OK) return s;
  if ((uint64_t)n > (uint64_t)(hi - lo) / gw_dtype_size(a->dtype))
    return gw__fail(GW_EINVAL,
                    "%s: %lld elements in a span of %lld bytes (%zu bytes each): its elements "
                    "overlap in memory",
                    who, (long long)n, (long long)(hi - lo), gw_dtype_size(a->dtype));
  if (!nested(a)) {
    int64_t elem = (int64_t)gw_dtype_size(a->dtype), slots = (hi - lo) / elem;
    if (n <= GW__OVERLAP_EXACT_MAX)
      s = exact_overlap(a, who, n);
    else if (slots <= GW__OVERLAP_BITMAP_MAX)
      s = bitmap_overlap(a, who, n, lo / elem, slots);
    if (s != GW_OK) return s;
  }
  atomic_store_explicit(&((gw_array *)a)->write_ok, true, memory_order_relaxed);
  return GW_OK;
}

/* [base + lo, base + hi): integer arithmetic, the two arrays may be different objects. */
static void byte_range(const char *base, int64_t lo, int64_t hi, uintptr_t *b, uintptr_t *e) {
  *b = (uintptr_t)base + (uintptr_t)lo;
  *e = (uintptr_t)base + (uintptr_t)hi;
}

static int64_t floordiv(int64_t a, int64_t b) { /* b > 0 */
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
static int64_t ceildiv(int64_t a, int64_t b) { return -floordiv(-a, b); }

/*
 * Two arrays that step alike (byte strides `st`, sorted descending, all > 0, over dims
 * d..n-1), one `delta` bytes after the other: do any of their elements share a byte? With
 * a_i, b_i their extents, that is: are there k_i in [kmin_i, kmax_i] (j_i - i_i: -(a_i - 1)
 * .. b_i - 1) with |delta - sum k_i st_i| < elem. The inner dims reach a bounded interval,
 * so k_d is confined to a few values; for the layouts real programs copy between (halo
 * faces and shell boxes of a field, slices of one array) strides nest and there is at most
 * one. *budget bounds the search: when it runs out the answer is "they may meet" (staging
 * or one-by-one copies are always right, only slower).
 */
static bool grid_meets(int d, int n, const int64_t *kmin, const int64_t *kmax, const int64_t *st,
                       int64_t elem, int64_t delta, int *budget) {
  if (d == n) return delta > -elem && delta < elem;
  if (--*budget < 0) return true;
  int64_t rmin = -(elem - 1), rmax = elem - 1; /* what dims d+1.. and the element reach */
  for (int i = d + 1; i < n; i++) {
    rmin += kmin[i] * st[i];
    rmax += kmax[i] * st[i];
  }
  int64_t lo = ceildiv(delta - rmax, st[d]), hi = floordiv(delta - rmin, st[d]);
  if (lo < kmin[d]) lo = kmin[d];
  if (hi > kmax[d]) hi = kmax[d];
  for (int64_t k = lo; k <= hi; k++)
    if (grid_meets(d + 1, n, kmin, kmax, st, elem, delta - k * st[d], budget)) return true;
  return false;
}

/* Whether a and b step alike: one dtype and rank, and the same stride along every dim
 * either of them steps along (extent > 1). */
static bool steps_alike(const gw_array *a, const gw_array *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if ((a->shape[d] > 1 || b->shape[d] > 1) && a->strides[d] != b->strides[d]) return false;
  return true;
}

/* a and b step alike (steps_alike), a's element 0 `delta` bytes after b's: whether an
 * element of one shares memory with one of the other (two halo faces of a field, or two
 * boxes of its shell, interleave but never meet). Their shapes may differ. */
static bool steps_meet(const gw_array *a, const gw_array *b, int64_t delta) {
  int64_t elem = (int64_t)gw_dtype_size(a->dtype), kmin[GW_MAX_DIMS], kmax[GW_MAX_DIMS],
          st[GW_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < a->ndim; d++) {
    int64_t ea = a->shape[d], eb = b->shape[d];
    if (ea <= 1 && eb <= 1) continue;
    int64_t s = a->strides[d] * elem; /* fits: the arrays' spans were checked */
    if (s == 0) return true;
    /* k = j - i in [-(ea - 1), eb - 1]; a negative stride flips k's sign (k s = -k |s|) */
    int64_t lo = -(ea - 1), hi = eb - 1;
    if (s < 0) {
      int64_t t = lo;
      lo = -hi;
      hi = -t;
      s = -s;
    }
    int j = n++;
    for (; j > 0 && st[j - 1] < s; j--) { /* insertion: stride descending */
      st[j] = st[j - 1];
      kmin[j] = kmin[j - 1];
      kmax[j] = kmax[j - 1];
    }
    st[j] = s;
    kmin[j] = lo;
    kmax[j] = hi;
  }
  int budget = 4096;
  return grid_meets(0, n, kmin, kmax, st, elem, delta, &budget);
}

gw__alias gw__aliasing(const gw_array *dst, const gw_array *src) {
  size_t e = gw_dtype_size(dst->dtype);
  int64_t dlo, dhi, slo, shi, n;
  /* Both arrays are non-empty and were validated when made: their spans fit. */
  if (gw__span(dst->ndim, dst->shape, dst->strides, e, &dlo, &dhi, &n) != GW_OK ||
      gw__span(src->ndim, src->shape, src->strides, e, &slo, &shi, &n) != GW_OK)
    return GW__ALIAS_OVERLAP; /* cannot happen; staging is always correct */
  /* One buffer may be seen through its host and its device address: compare what both
   * sides have (a host-only array and a device-only one cannot share memory). */
  const char *pairs[2][2] = {{dst->host0, src->host0}, {dst->dev0, src->dev0}};
  bool meet = false, same = false;
  for (int k = 0; k < 2; k++) {
    if (!pairs[k][0] || !pairs[k][1]) continue;
    uintptr_t db, de, sb, se;
    byte_range(pairs[k][0], dlo, dhi, &db, &de);
    byte_range(pairs[k][1], slo, shi, &sb, &se);
    if (db < se && sb < de) meet = true;
    if (pairs[k][0] == pairs[k][1]) same = true;
  }
  if (!meet) return GW__ALIAS_NONE;
  bool alike = steps_alike(dst, src);
  /* Same first element and the same strides: each element is copied onto itself, a no-op. */
  if (same && alike) return GW__ALIAS_SAME;
  /* Spans that interleave need not share an element (a field's opposite faces, the halo
   * exchange's local copy): with the same steps that is decided exactly. */
  if (alike) {
    for (int k = 0; k < 2; k++) {
      if (!pairs[k][0] || !pairs[k][1]) continue;
      int64_t delta = (int64_t)((uintptr_t)pairs[k][0] - (uintptr_t)pairs[k][1]);
      if (steps_meet(dst, src, delta)) return GW__ALIAS_OVERLAP;
    }
    return GW__ALIAS_NONE;
  }
  return GW__ALIAS_OVERLAP;
}

/*
 * Whether a and b may share a byte: never when their spans (through either address) are
 * apart; decided exactly when they have one geometry (dtype, shape and strides: two faces
 * of one field, which interleave without meeting); otherwise assumed (the caller then
 * copies one by one, always correct).
 */
bool gw__may_meet(const gw_array *a, const gw_array *b) {
  size_t e = gw_dtype_size(a->dtype);
  int64_t alo, ahi, blo, bhi, n;
  if (gw__span(a->ndim, a->shape, a->strides, e, &alo, &ahi, &n) != GW_OK ||
      gw__span(b->ndim, b->shape, b->strides, gw_dtype_size(b->dtype), &blo, &bhi, &n) != GW_OK)
    return true;
  const char *pairs[2][2] = {{a->host0, b->host0}, {a->dev0, b->dev0}};
  bool meet = false;
  for (int k = 0; k < 2; k++) {
    if (!pairs[k][0] || !pairs[k][1]) continue;
    uintptr_t ab, ae, bb, be;
    byte_range(pairs[k][0], alo, ahi, &ab, &ae);
    byte_range(pairs[k][1], blo, bhi, &bb, &be);
    if (ab < be && bb < ae) meet = true;
  }
  if (!meet) return false;
  if (!steps_alike(a, b)) return true;
  for (int k = 0; k < 2; k++) {
    if (!pairs[k][0] || !pairs[k][1]) continue;
    int64_t delta = (int64_t)((uintptr_t)pairs[k][0] - (uintptr_t)pairs[k][1]);
    if (delta == 0 || steps_meet(a, b, delta)) return true;
  }
  return false;
}

/* Plan and run one copy on ctx (the executing backend). */
static gw_status run_copy(gw_context *ctx, gw_array *dst, const gw_array *src, gw_stream *st) {
  gw__xfer x;
  gw_status s = gw__plan_copy(dst, src, &x);
  if (s != GW_OK) return s;
  if (!x.dst || !x.src) return gw__fail(GW_EINVAL, "src/dst: no address to copy through");
  return ctx->ops->xfer_copy(ctx->state, &x, st ? st->handle : NULL);
}

/*
 * dst and src share memory with different element mappings (a shift, a[0::2] into a[2::2],
 * an in-place reversal or transpose): the result must be that of copying through a
 * temporary, on every backend, whatever order a backend's copy engines or threads write
 * in. So copy through one: a contiguous array the executing backend reaches (device memory
 * where src is device-accessible, host memory where only the host reaches it). On a
 * stream, the temporary may be released only once the stream has run both copies: an
 * overlapping asynchronous copy is complete on return.
 */
static gw_status copy_staged(gw_context *ctx, gw_array *dst, const gw_array *src, gw_stream *st) {
  gw_array *tmp = NULL;
  gw_memkind kind = src->dev0 ? GW_MEM_DEVICE : GW_MEM_HOST;
  gw_status s = gw_alloc(ctx, kind, src->dtype, src->ndim, src->shape, &tmp);
  if (s != GW_OK) return s;
  s = run_copy(ctx, tmp, src, st);
  if (s == GW_OK) s = run_copy(ctx, dst, tmp, st);
  if (st) { /* also after a failure: the first copy may still be reading into tmp */
    gw_status w = st->ctx->ops->stream_synchronize(st->ctx->state, st->handle);
    if (s == GW_OK) s = w;
  }
  gw_release(tmp);
  return s;
}

/*
 * Capture. A stream being captured into a graph (cudaStreamBeginCapture: PyTorch's
 * torch.cuda.graph, JAX, a solver's time step) records what is queued on it instead of
 * running it, and the runtime INVALIDATES the whole capture when something it cannot
 * record is attempted (the caller loses the graph). So every asynchronous call asks once
 * whether its stream is capturing (gw__capturing, one cheap runtime query; never for a
 * synchronous call) and then either records its work or refuses it with GW_ENOTSUP,
 * saying why, BEFORE anything is queued, leaving the capture valid:
 *   - recorded: fills and copies whose every side the device reaches (device, pinned or
 *     registered, managed memory; a fill of pageable memory on a device that reads it),
 *     batches of those, pending-work events (captured slots, stream.c), waits for work of
 *     the same capture;
 *   - refused: pageable (unregistered) memory in a copy, staged through host threads and
 *     completed on the host, and a pageable fill the host runs; a copy between memory that
 *     overlaps (through a temporary, which needs a host synchronisation); a synchronize of
 *     the stream (gw_stream_synchronize, gw__batch_run_wait); a wait for work queued
 *     outside the capture (gw_array_wait).
 * A wrap (a registration) during a capture happens then, not at the graph's launches, and
 * breaks no capture: the backends run their own runtime calls in the relaxed per-thread
 * capture mode, so that none invalidates this or another thread's capture.
 * The check and the enqueue are two runtime calls, and no runtime offers one that queues
 * only if the stream is not capturing; a capture another thread begins on the same stream
 * between them is the program's race (gpuwrap.h, "Graphs"): the work then lands in it.
 * The pending-work records cope: an event filed as queued work that turns out to be a node
 * of a capture (event_query: GW_ENOTSUP) is re-filed as captured (stream.c, busy).
 * Captures of other streams cannot be touched by the window: relaxed mode, above.
 * GW__CAP_ASK (transfer.h): a caller that has not asked gw__capturing yet.
 */

/* Why a copy of kinds dk <- sk cannot be recorded into a graph, or NULL. */
const char *gw__uncapturable_copy(gw_memkind dk, gw_memkind sk) {
  if (dk == GW_MEM_HOST || sk == GW_MEM_HOST)
    return "pageable (unregistered) host memory is copied through host threads and completes "
           "on the host, which a graph cannot record; wrap it registered (or copy through "
           "pinned memory) to capture the copy";
  return NULL;
}

gw_status gw__refuse_capture(const char *who, const char *why) {
  return gw__fail(GW_ENOTSUP,
                  "stream: it is being captured into a graph, and %s cannot be: %s "
                  "(refused before queueing anything: the capture stays valid)",
                  who, why);
}

/* Record the pending-work events of work just queued on st (captured or not). */
gw_status gw__note_pair(const gw_array *a, const gw_array *b, gw_stream *st, uint64_t cap) {
  if (!cap) {
    gw__pending_note(a, st);
    if (b) gw__pending_note(b, st);
    return GW_OK;
  }
  gw_status s = gw__pending_note_captured(a, st, cap);
  if (s == GW_OK && b) s = gw__pending_note_captured(b, st, cap);
  return s;
}

gw_status gw__copy_prepare(gw_array *dst, const gw_array *src, gw__xfer *x, gw_context **exec) {
  *exec = NULL;
  if (!dst) return gw__fail(GW_EINVAL, "dst: NULL");
  if (!src) return gw__fail(GW_EINVAL, "src: NULL");
  gw_status s = gw__plan_copy(dst, src, x); /* dtype and shape first: they name the mismatch */
  if (s != GW_OK) return s;
  s = check_writable(dst, "dst");
  if (s != GW_OK || elements(dst) == 0) return s;
  gw_context *ctx = NULL;
  s = executor(dst, src, &ctx);
  if (s != GW_OK) return s;
  if (!x->dst || !x->src) return gw__fail(GW_EINVAL, "src/dst: no address to copy through");
  *exec = ctx;
  return GW_OK;
}

gw_status gw__copy_on(gw_array *dst, const gw_array *src, gw_stream *st, uint64_t cap) {
  gw__xfer x;
  gw_context *ctx = NULL;
  gw_status s = gw__copy_prepare(dst, src, &x, &ctx);
  if (s != GW_OK || !ctx) return s;
  if (st && st->ctx->ops != ctx->ops)
    return gw__fail(GW_EINVAL, "stream: belongs to the %s backend, the copy runs on %s",
                    st->ctx->ops->name, ctx->ops->name);
  if (st && cap == GW__CAP_ASK && (s = gw__capturing(st, &cap)) != GW_OK) return s;
  const char *why = st && cap ? gw__uncapturable_copy(x.dst_kind, x.src_kind) : NULL;
  if (why) return gw__refuse_capture("this copy", why);
  switch (gw__aliasing(dst, src)) {
  case GW__ALIAS_SAME: return GW_OK;
  case GW__ALIAS_OVERLAP:
    if (st && cap)
      return gw__refuse_capture("this copy", "dst and src overlap in memory, so the copy goes "
                                             "through a temporary that is freed after a host "
                                             "synchronisation");
    return copy_staged(ctx, dst, src, st);
  case GW__ALIAS_NONE: break;
  }
  s = ctx->ops->xfer_copy(ctx->state, &x, st ? st->handle : NULL);
  /* src too: a consumer may write into what is still being read */
  if (s == GW_OK && st) s = gw__note_pair(dst, src, st, cap);
  return s;
}

static gw_status fill_on(gw_array *dst, const void *value, gw_stream *st) {
  if (!dst) return gw__fail(GW_EINVAL, "dst: NULL");
  if (!value) return gw__fail(GW_EINVAL, "value: NULL");
  gw_status s = check_writable(dst, "dst");
  if (s != GW_OK || elements(dst) == 0) return s;
  if (st && st->ctx->ops != dst->ctx->ops)
    return gw__fail(GW_EINVAL, "stream: belongs to the %s backend, the array to %s",
                    st->ctx->ops->name, dst->ctx->ops->name);
  gw__fillspec f;
  gw__plan_fill(dst, value, &f);
  uint64_t cap = 0;
  if (st && (s = gw__capturing(st, &cap)) != GW_OK) return s;
  if (cap && f.kind == GW_MEM_HOST && !dst->ctx->caps.pageable_access)
    return gw__refuse_capture("this fill",
                              "the device cannot reach this pageable (unregistered) host "
                              "memory, so the host fills it, which a graph cannot "
                              "record; wrap it registered to capture the fill");
  s = dst->ctx->ops->xfer_fill(dst->ctx->state, &f, st ? st->handle : NULL);
  if (s == GW_OK && st) s = gw__note_pair(dst, NULL, st, cap);
  return s;
}

gw_status gw_copy(gw_array *dst, const gw_array *src) { return gw__copy_on(dst, src, NULL, 0); }
gw_status gw_fill(gw_array *dst, const void *value) { return fill_on(dst, value, NULL); }

gw_status gw_copy_async(gw_array *dst, const gw_array *src, gw_stream *s) {
  if (!s) return gw__fail(GW_EINVAL, "stream: NULL");
  return gw__copy_on(dst, src, s, GW__CAP_ASK);
}

gw_status gw_fill_async(gw_array *dst, const void *value, gw_stream *s) {
  if (!s) return gw__fail(GW_EINVAL, "stream: NULL");
  return fill_on(dst, value, s);
}
