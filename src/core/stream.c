/*
 * Streams: made by gpuwrap or borrowed from the caller (PyTorch's current stream, CuPy's, a
 * solver's own), and the pending work on each array's memory.
 *
 * Why events per array: a consumer that is handed the array (DLPack with a consumer
 * stream, the CUDA Array Interface) must be ordered after gpuwrap's work on it without a
 * host synchronisation, and a release that frees or unregisters the memory must wait for
 * every operation that still needs it. The smallest mechanism that makes both true is, per
 * stream that touched the memory, an event capturing "the work queued so far on that
 * stream": a stream runs in order, so re-recording its event after each operation there
 * covers all of that stream's earlier work, and two streams reading one array at once
 * (which is legal) each keep their own. The last operation alone is not enough: a read
 * queued on a busy stream and then one on an idle stream would leave the first unknown,
 * and the release would free the memory under it. Reads and writes are not told apart: a
 * consumer that gw_array_wait orders may write, so it must wait for all of them anyway.
 *
 * The first stream's event sits in the root (no allocation for the common one-stream
 * case); a slot whose work is complete is taken by the next new stream (its event reused
 * on the same device), so the set grows only with streams whose work may still run.
 * Events are made on first use and live with the memory; an array touched only by
 * synchronous calls never has one.
 *
 * Graph capture: work recorded into a capture (cudaStreamBeginCapture) is not queued, so
 * it is not pending: gw_array_pending does not count it, a release does not wait for it
 * (nor for the graph's launches, whose lifetime the caller owns), and a wait outside the
 * capture does not order it. Its event, recorded in the capture, is a node of the graph:
 * kept in a slot of its own (per stream, beside the stream's eager slot, tagged with the
 * capture's id), never queried (the runtime refuses a query of it), it lets gw_array_wait
 * on another stream of the SAME capture join the captured work; an event of another
 * capture (one that ended, or another one) is never waited on. A stream's next capture
 * takes its captured slot over (its earlier capture has ended), so an array keeps at most
 * two slots per stream. A capturing stream cannot wait for work queued outside the capture
 * (the runtime would invalidate the capture): gw_array_wait refuses that, queueing
 * nothing.
 */
#include "internal.h"
#include "private.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

/* The root's pending-work slots change under a spin lock of their own: held for a few
 * backend calls (an event record, ~1-2 us on CUDA, and queries), never across a wait. */
static void plock(gw_array *r) {
  while (atomic_flag_test_and_set_explicit(&r->pend_lock, memory_order_acquire)) {
  }
}
static void punlock(gw_array *r) {
  atomic_flag_clear_explicit(&r->pend_lock, memory_order_release);
}

/* The same backend and device: an event of one context serves every context of its device. */
static bool same_device(const gw_context *a, const gw_context *b) {
  return a->ops == b->ops && a->device == b->device;
}

static void drop_event(gw__pend *p) {
  if (p->event) {
    (void)p->ctx->ops->event_destroy(p->ctx->state, p->event);
    gw__context_release(p->ctx, p->ref);
  }
  *p = (gw__pend){0};
}

/* The capture of a slot whose event turned out to be a node of a capture gpuwrap did not
 * see begin (busy, below): never 0, never a capture's id (ids count up from 1). */
#define CAPTURE_UNSEEN UINT64_MAX

/* Whether p's work may still run; a failed query counts as running (it cannot be waited
 * on, but neither can it be forgotten). GW_ENOTSUP says the event was last recorded in a
 * graph capture (backend.h, event_query): another thread began capturing st between the
 * call's capture check and its record, so the record, and the work queued before it on
 * st since that begin, are that capture's (gpuwrap.h, "Graphs": a capture begun while a
 * call runs). The slot is re-tagged as captured, of a capture it never joins: not pending,
 * never waited for (what a wait would need is the capture's own id), and its stream's
 * next eager work takes a slot of its own. Callers hold the root's lock or own the root. */
static bool busy(gw__pend *p) {
  if (!p->event || p->capture) return false;
  gw_status s = p->ctx->ops->event_query(p->ctx->state, p->event);
  if (s == GW_ENOTSUP) p->capture = CAPTURE_UNSEEN;
  return s != GW_OK && s != GW_ENOTSUP;
}

/* Slot i of the root: 0 inline, then pend_more. */
static gw__pend *slot(gw_array *r, int i) { return i == 0 ? &r->pend : &r->pend_more[i - 1]; }
static int nslots(const gw_array *r) { return 1 + r->pend_nmore; }

/* The slot that follows st: its own, else one whose work is complete (its event reused
 * when of st's device), else a new one; NULL when none can be had (out of host memory). */
static bool same_kind(const gw__pend *p, uint64_t capture) {
  return (p->capture != 0) == (capture != 0);
}

/* The slot of st's eager work (capture 0) or of its work in a capture: see above. */
static gw__pend *slot_for(gw_array *r, const gw_stream *st, uint64_t capture) {
  if (r->pend.stream == st->id && same_kind(&r->pend, capture))
    return &r->pend; /* the common case: no query */
  for (int i = 1; i < nslots(r); i++)
    if (slot(r, i)->stream == st->id && same_kind(slot(r, i), capture)) return slot(r, i);
  gw__pend *idle = NULL;
  /* Another stream never takes a captured slot over: its capture may still need the event. */
  for (int i = 0; i < nslots(r); i++) {
    gw__pend *p = slot(r, i);
    if (p->capture || busy(p)) continue;
    if (p->event && same_device(p->ctx, st->ctx)) {
      idle = p; /* the best: its event serves st as it is */
      break;
    }
    if (!idle) idle = p;
  }
  if (idle) {
    if (idle->event && !same_device(idle->ctx, st->ctx)) drop_event(idle);
    idle->stream = st->id;
    idle->capture = capture;
    return idle;
  }
  if (r->pend_nmore == r->pend_cap) {
    int cap = r->pend_cap ? 2 * r->pend_cap : 3;
    gw__pend *more = realloc(r->pend_more, (size_t)cap * sizeof *more);
    if (!more) return NULL;
    r->pend_more = more;
    r->pend_cap = cap;
  }
  gw__pend *p = &r->pend_more[r->pend_nmore++];
  *p = (gw__pend){.stream = st->id, .capture = capture};
  return p;
}

/* Record st's event in its slot (eager, or of `capture`) of a's root; the failure's status. */
static gw_status note(const gw_array *a, gw_stream *st, uint64_t capture) {
  gw_array *r = gw__root(a);
  gw_context *c = st->ctx;
  plock(r);
  gw__pend *p = slot_for(r, st, capture);
  if (p) p->capture = capture; /* a stream's later capture takes its slot over */
  gw_status s = p ? GW_OK : GW_ENOMEM;
  if (p && !p->event) {
    s = c->ops->event_create(c->state, &p->event);
    if (s == GW_OK) {
      p->ctx = c;
      p->ref = gw__context_retain(c);
    } else {
      p->event = NULL;
    }
  }
  if (s == GW_OK) s = c->ops->event_record(c->state, p->event, st->handle);
  /* A slot that cannot follow st is freed for the next stream: the wait below completes
   * all of st's work, what the slot recorded before included. */
  if (s != GW_OK && p) drop_event(p);
  punlock(r);
  if (s == GW_ENOMEM && !p)
    s = gw__fail(GW_ENOMEM, "out of host memory for an array's pending-work slot");
  return s;
}

void gw__pending_note(const gw_array *a, gw_stream *st) {
  /* Without an event nothing may stay pending: wait here instead (correct, only slower). */
  if (note(a, st, 0) != GW_OK) (void)st->ctx->ops->stream_synchronize(st->ctx->state, st->handle);
}

gw_status gw__pending_note_captured(const gw_array *a, gw_stream *st, uint64_t capture) {
  gw_status s = note(a, st, capture);
  if (s == GW_OK) return GW_OK;
  char why[256];
  snprintf(why, sizeof why, "%s", gw_last_error());
  return gw__fail(s,
                  "the work was recorded into the stream's capture, but its event could not "
                  "be: gw_array_wait on another stream of the capture cannot order after it (%s)",
                  why);
}

void gw__pending_fini(gw_array *root) {
  for (int i = 0; i < nslots(root); i++) drop_event(slot(root, i));
  free(root->pend_more);
  root->pend_more = NULL;
  root->pend_nmore = root->pend_cap = 0;
}

void gw__pending_drain(gw_array *root) {
  /* Nobody else holds the root (its last reference is going), so no lock. There is no
   * event wait among the backend calls: poll the query, yielding the CPU meanwhile. A
   * failed query cannot be waited on: that stream's work is left as it is. */
  for (int i = 0; i < nslots(root); i++) {
    gw__pend *p = slot(root, i);
    while (p->event && !p->capture && p->ctx->ops->event_query(p->ctx->state, p->event) == GW_EBUSY)
      sched_yield();
  }
}

gw_status gw_array_wait(const gw_array *a, gw_stream *s) {
  if (!a) return gw__fail(GW_EINVAL, "a: NULL");
  if (!s) return gw__fail(GW_EINVAL, "stream: NULL");
  gw_array *r = gw__root(a);
  /* No event, nothing to wait for (an array only synchronous calls touched): no capture
   * query either, the DLPack hand-over's common case. */
  plock(r);
  bool any = false;
  for (int i = 0; i < nslots(r) && !any; i++) any = slot(r, i)->event != NULL;
  punlock(r);
  if (!any) return GW_OK;
  uint64_t cap = 0;
  gw_status st = gw__capturing(s, &cap);
  if (st != GW_OK) return st;
  plock(r);
  /* Every slot is checked before a wait is queued: s waits for all of them, or fails having
   * queued nothing. s's own work needs no wait (a stream runs in order). Outside a capture
   * the captured slots are no work; inside one, the eager work of other streams cannot be
   * waited for (the capture would be invalidated) and their captured work is joined. */
  for (int i = 0; i < nslots(r) && st == GW_OK; i++) {
    gw__pend *p = slot(r, i);
    if (p->stream == s->id || !p->event) continue;
    if (p->capture ? p->capture == cap && p->ctx->ops != s->ctx->ops
                   : p->ctx->ops != s->ctx->ops && busy(p))
      st = gw__fail(GW_EDEVICE,
                    "stream: a %s stream cannot wait for the %s work pending on the array",
                    s->ctx->ops->name, p->ctx->ops->name);
    else if (cap && !p->capture && busy(p))
      st = gw__fail(GW_ENOTSUP,
                    "stream: it is being captured into a graph, and the array has work pending "
                    "on another stream, queued outside the capture: a capture cannot wait for "
                    "it (the runtime would invalidate the capture); synchronize that work "
                    "before beginning the capture");
  }
  for (int i = 0; i < nslots(r) && st == GW_OK; i++) {
    gw__pend *p = slot(r, i);
    if (p->stream != s->id && (p->capture ? cap && p->capture == cap : busy(p)))
      st = s->ctx->ops->stream_wait_event(s->ctx->state, s->handle, p->event);
  }
  punlock(r);
  return st;
}

gw_status gw__stream_order(gw_stream *first, gw_stream *then) {
  if (!first) return gw__fail(GW_EINVAL, "first: NULL");
  if (!then) return gw__fail(GW_EINVAL, "then: NULL");
  gw_context *c = first->ctx; /* the event is recorded on first's device */
  if (then->ctx->ops != c->ops)
    return gw__fail(GW_EDEVICE, "first: a %s stream cannot be waited for by a %s stream",
                    c->ops->name, then->ctx->ops->name);
  if (first->handle == then->handle) return GW_OK; /* one queue: in order already */
  void *ev = NULL;
  gw_status st = c->ops->event_create(c->state, &ev);
  if (st != GW_OK) return st;
  st = c->ops->event_record(c->state, ev, first->handle);
  if (st == GW_OK) st = then->ctx->ops->stream_wait_event(then->ctx->state, then->handle, ev);
  /* Destroying an event a wait is queued on is allowed (CUDA, HIP; the CPU model's wait
   * item copies what it needs). */
  (void)c->ops->event_destroy(c->state, ev);
  return st;
}

int gw_array_pending(const gw_array *a) {
  if (!a) return 0;
  gw_array *r = gw__root(a);
  int any = 0;
  plock(r);
  for (int i = 0; i < nslots(r) && !any; i++) any = busy(slot(r, i));
  punlock(r);
  return any;
}

/* Never 0 (an unused slot's) and never reused: a stream destroyed while its work still
 * runs keeps its slot until that work is complete, whatever address a later stream gets. */
static uint64_t next_stream_id(void) {
  static atomic_uint_fast64_t last;
  return (uint64_t)atomic_fetch_add_explicit(&last, 1, memory_order_relaxed) + 1;
}

/* A stream of ctx around a backend stream the backend makes (borrowed false) or borrows
 * from the caller's `native` (true); nothing is left behind when that fails. */
static gw_status stream_new(gw_context *ctx, bool borrowed, void *native, const char *fn,
                            gw_stream **out) {
  gw_stream *s = malloc(sizeof *s);
  if (!s) return gw__fail(GW_ENOMEM, "%s: out of host memory", fn);
  gw_status st = borrowed ? ctx->ops->stream_borrow(ctx->state, native, &s->handle)
                          : ctx->ops->stream_create(ctx->state, &s->handle);
  if (st != GW_OK) {
    free(s);
    return st;
  }
  s->ctx = ctx;
  s->id = next_stream_id();
  s->ctx_ref = gw__context_retain(ctx);
  s->borrowed = borrowed;
  *out = s;
  return GW_OK;
}

gw_status gw_stream_create(gw_context *ctx, gw_stream **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  return stream_new(ctx, false, NULL, "gw_stream_create", out);
}

gw_status gw_stream_wrap(gw_context *ctx, void *native, gw_stream **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  const gw__backend_ops *owner = gw__backend_owning_stream(ctx->ops, native);
  if (owner)
    return gw__fail(GW_EINVAL, "native: %p is a stream of the %s backend, the context is %s",
                    native, owner->name, ctx->ops->name);
  return stream_new(ctx, true, native, "gw_stream_wrap", out);
}

void *gw_stream_native(const gw_stream *s) {
  return s ? s->ctx->ops->stream_native(s->ctx->state, s->handle) : NULL;
}

gw_context *gw__stream_context(const gw_stream *s) { return s ? s->ctx : NULL; }

void gw_stream_destroy(gw_stream *s) {
  if (!s) return;
  /* A borrowed stream is someone else's: its work is theirs to wait for. */
  if (!s->borrowed) (void)s->ctx->ops->stream_synchronize(s->ctx->state, s->handle);
  (void)s->ctx->ops->stream_destroy(s->ctx->state, s->handle);
  gw__context_release(s->ctx, s->ctx_ref);
  free(s);
}

gw_status gw_stream_synchronize(gw_stream *s) {
  if (!s) return gw__fail(GW_EINVAL, "stream: NULL");
  uint64_t cap = 0;
  gw_status st = gw__capturing(s, &cap);
  if (st != GW_OK) return st;
  if (cap)
    return gw__fail(GW_ENOTSUP, "stream: it is being captured into a graph: a capture cannot be "
                                "synchronized (the runtime would invalidate it); synchronize "
                                "after launching the graph");
  return s->ctx->ops->stream_synchronize(s->ctx->state, s->handle);
}

gw_status gw__stream_capturing(gw_stream *s, int *capturing) {
  if (!s) return gw__fail(GW_EINVAL, "stream: NULL");
  if (!capturing) return gw__fail(GW_EINVAL, "capturing: NULL");
  uint64_t cap = 0;
  gw_status st = gw__capturing(s, &cap);
  if (st == GW_OK) *capturing = cap != 0;
  return st;
}
