/*
 * The prepared batches of copies (gw__batch_*, private.h): made once, with every pair's
 * checks, the independence test and the planning done, then run any number of times. An
 * object with its own lifetime (it holds references to its arrays until freed), built on
 * the single copies of transfer.c (transfer.h), which knows nothing of it.
 */
#include "transfer.h"

#include <stdlib.h>

/* Batches above this many pairs are copied one by one: the independence check is
 * quadratic (it runs once per prepared batch, not per run). */
#define GW__BATCH_MAX 1024

/*
 * A prepared batch (private.h). Made once: every pair's checks, the independence test and
 * the backend transfers; a run is then one copy_batch (or the pairs one by one through
 * gw__copy_on, which gives the same results) and one pending-work record per distinct root.
 * Valid for the life of the references it holds: an array's shape, strides, addresses,
 * kind and read-only flag never change after it is made.
 */
struct gw__batch {
  int n;
  gw_array **dst;               /* [n] references */
  const gw_array **src;         /* [n] references */
  const gw__backend_ops **exec; /* [n] the executing backend of each pair, NULL: nothing to copy */
  bool batched;                 /* one copy_batch of x[0..m) on ctx */
  gw_context *ctx;
  int m;
  gw__xfer *x;
  int nnote; /* arrays whose pending-work events a run records (one per root) */
  const gw_array **note;
  const char *uncapturable; /* why a run cannot be recorded into a graph, or NULL */
};

void gw__batch_free(gw__batch *b) {
  if (!b) return;
  for (int i = 0; i < b->n; i++) {
    gw_release(b->dst ? b->dst[i] : NULL);
    gw_release(b->src ? (gw_array *)b->src[i] : NULL);
  }
  free(b->dst);
  free((void *)b->src);
  free((void *)b->exec);
  free(b->x);
  free((void *)b->note);
  free(b);
}

/* a's root is already among note[0..k) (as a dst or a src root). */
static bool noted(const gw_array *const *note, int k, const gw_array *a) {
  for (int q = 0; q < k; q++)
    if (gw__root(note[q]) == gw__root(a)) return true;
  return false;
}

/* Pair i of a batch being made: its checks, its executing backend, and whether it can join
 * the one copy_batch (live[0..b->m): the pairs already in it). */
static gw_status plan_pair(gw__batch *b, gw_array *const *dst, const gw_array *const *src, int i,
                           int *live) {
  gw__xfer xi;
  gw_context *c = NULL;
  gw_status s = gw__copy_prepare(dst[i], src[i], &xi, &c);
  if (s != GW_OK || !c) return s;
  gw__alias al = gw__aliasing(dst[i], src[i]);
  if (al == GW__ALIAS_SAME) return GW_OK; /* each element onto itself: nothing to copy */
  b->exec[i] = c->ops;
  if (!b->uncapturable) b->uncapturable = gw__uncapturable_copy(xi.dst_kind, xi.src_kind);
  if (!b->uncapturable && al == GW__ALIAS_OVERLAP)
    b->uncapturable = "a pair's dst and src overlap in memory, so it is copied through a "
                      "temporary that is freed after a host synchronisation";
  if (!b->batched) return GW_OK;
  /* One backend state runs the batch: the same backend and device for every pair. */
  if (!b->ctx)
    b->ctx = c;
  else if (c->ops != b->ctx->ops || c->device != b->ctx->device)
    b->batched = false;
  if (al == GW__ALIAS_OVERLAP) b->batched = false;
  for (int j = 0; b->batched && j < b->m; j++) {
    int q = live[j];
    if (gw__may_meet(dst[i], dst[q]) || gw__may_meet(dst[i], src[q]) ||
        gw__may_meet(src[i], dst[q]))
      b->batched = false;
  }
  if (b->batched) {
    b->x[b->m] = xi;
    live[b->m++] = i;
  }
  return GW_OK;
}

gw_status gw__batch_make(gw_array *const *dst, const gw_array *const *src, int n, gw__batch **out) {
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  *out = NULL;
  if (n < 0) return gw__fail(GW_EINVAL, "n: %d", n);
  if (n > 0 && (!dst || !src)) return gw__fail(GW_EINVAL, "%s: NULL", !dst ? "dst" : "src");
  gw__batch *b = calloc(1, sizeof *b);
  size_t k = n > 0 ? (size_t)n : 1;
  if (b) {
    b->dst = calloc(k, sizeof *b->dst);
    b->src = calloc(k, sizeof *b->src);
    b->exec = calloc(k, sizeof *b->exec);
    b->x = calloc(k, sizeof *b->x);
    b->note = calloc(2 * k, sizeof *b->note);
  }
  if (!b || !b->dst || !b->src || !b->exec || !b->x || !b->note) {
    gw__batch_free(b);
    return gw__fail(GW_ENOMEM, "copy batch of %d pairs: out of host memory", n);
  }
  b->batched = n <= GW__BATCH_MAX;
  int *live = calloc(k, sizeof *live); /* pair of each batched transfer */
  if (!live) b->batched = false;       /* one by one needs no more memory */
  gw_status s = GW_OK;
  /* Every pair's checks first, so that a bad pair fails with nothing made. */
  for (int i = 0; i < n && s == GW_OK; i++) s = plan_pair(b, dst, src, i, live);
  if (s == GW_OK && b->batched)
    for (int j = 0; j < b->m; j++) {
      const gw_array *d = dst[live[j]], *r = src[live[j]];
      if (!noted(b->note, b->nnote, d)) b->note[b->nnote++] = d;
      if (!noted(b->note, b->nnote, r)) b->note[b->nnote++] = r; /* a reader: see gw__copy_on */
    }
  free(live);
  if (s != GW_OK) {
    gw__batch_free(b);
    return s;
  }
  b->batched = b->batched && b->m > 0;
  b->n = n;
  for (int i = 0; i < n; i++) {
    b->dst[i] = gw_retain(dst[i]);
    b->src[i] = gw_retain((gw_array *)src[i]);
  }
  *out = b;
  return GW_OK;
}

/* Queue b on st (NULL: synchronous); `note`: record the roots' pending-work events; cap:
 * st's capture (0: none, GW__CAP_ASK: not asked yet). */
static gw_status batch_run(gw__batch *b, gw_stream *st, bool note, uint64_t cap) {
  if (!b) return gw__fail(GW_EINVAL, "batch: NULL");
  for (int i = 0; st && i < b->n; i++) /* before anything is queued */
    if (b->exec[i] && b->exec[i] != st->ctx->ops)
      return gw__fail(GW_EINVAL, "stream: belongs to the %s backend, the copy runs on %s",
                      st->ctx->ops->name, b->exec[i]->name);
  gw_status s = GW_OK;
  if (st && cap == GW__CAP_ASK && (s = gw__capturing(st, &cap)) != GW_OK) return s;
  if (st && cap && b->uncapturable)
    return gw__refuse_capture("this batch of copies", b->uncapturable);
  if (b->batched) {
    s = b->ctx->ops->xfer_copy_batch(b->ctx->state, b->x, b->m, st ? st->handle : NULL);
    /* also after a failure: a backend's fallback may have queued some */
    for (int j = 0; st && note && j < b->nnote; j++) {
      gw_status w = gw__note_pair(b->note[j], NULL, st, cap);
      if (s == GW_OK) s = w;
    }
  } else { /* one by one: each copy notes its own event */
    for (int i = 0; i < b->n && s == GW_OK; i++)
      if (b->exec[i]) s = gw__copy_on(b->dst[i], b->src[i], st, st ? cap : 0);
  }
  return s;
}

gw_status gw__batch_run(gw__batch *b, gw_stream *st) { return batch_run(b, st, true, GW__CAP_ASK); }

gw_status gw__batch_run_unnoted(gw__batch *b, gw_stream *st) {
  return batch_run(b, st, false, GW__CAP_ASK);
}

gw_status gw__batch_run_wait(gw__batch *b, gw_stream *st) {
  uint64_t cap = 0;
  if (b && st) {
    gw_status c = gw__capturing(st, &cap);
    if (c != GW_OK) return c;
    if (cap)
      return gw__refuse_capture("a batch of copies completed on return",
                                "it synchronizes the stream; use gw__batch_run inside a capture");
  }
  gw_status s = batch_run(b, st, false, 0);
  if (!st || !b) return s;
  /* Also after a failure: a backend's fallback may have queued some copies. */
  gw_status w = gw_stream_synchronize(st);
  return s != GW_OK ? s : w;
}

int gw__batch_can_signal(const gw__batch *b) {
  if (!b || !b->batched || !b->ctx->ops->xfer_copy_batch_signalled ||
      b->m > GW__SIGNAL_MAX_TRANSFERS)
    return 0;
  for (int i = 0; i < b->m; i++)
    if (b->x[i].ndim > GW__SIGNAL_MAX_DIMS) return 0;
  return 1;
}

gw_status gw__batch_run_signalled(gw__batch *b, gw_stream *st, const gw__signals *sig) {
  if (!b || !st || !sig)
    return gw__fail(GW_EINVAL, "%s: NULL", !b ? "batch" : !st ? "stream" : "signals");
  if (!gw__batch_can_signal(b))
    return gw__fail(GW_ENOTSUP, "this batch of copies cannot signal on the device (%s)",
                    !b->batched ? "its copies are not one backend batch"
                    : !b->ctx->ops->xfer_copy_batch_signalled
                        ? "its backend has no signalled batch"
                        : "more copies than one operation takes, or one of too many dims");
  if (b->ctx->ops != st->ctx->ops)
    return gw__fail(GW_EINVAL, "stream: belongs to the %s backend, the copy runs on %s",
                    st->ctx->ops->name, b->ctx->ops->name);
  uint64_t cap = 0;
  gw_status s = gw__capturing(st, &cap);
  if (s != GW_OK) return s;
  if (cap)
    return gw__refuse_capture("a signalled batch of copies",
                              "its epoch is fixed when it is queued, and a replay would reuse it");
  return b->ctx->ops->xfer_copy_batch_signalled(b->ctx->state, b->x, b->m, st->handle, sig);
}

gw_status gw__copy_many(gw_array *const *dst, const gw_array *const *src, int n, gw_stream *st) {
  gw__batch *b = NULL;
  gw_status s = gw__batch_make(dst, src, n, &b);
  if (s == GW_OK) s = gw__batch_run(b, st);
  gw__batch_free(b);
  return s;
}
