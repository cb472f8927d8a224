/*
 * Streams: made by gpuwrap or borrowed from the caller (PyTorch's current stream, CuPy's, a
 * solver's own), and the pending-work event of each array.
 *
 * Why one event per array, recorded by the last asynchronous operation on its memory: a
 * consumer that is handed the array (DLPack with a consumer stream, the CUDA Array
 * Interface) must be ordered after gpuwrap's work on it without a host synchronisation.
 * The smallest mechanism that makes that true is a device-side wait on "the work queued so
 * far on the stream that last touched it"; an earlier operation on another stream was
 * either ordered before the last one by the caller (then waiting for the last covers it)
 * or races with it anyway. The event is made on first use and lives with the memory; an
 * array touched only by synchronous calls never has one.
 */
#include "internal.h"

#include <sched.h>
#include <stdlib.h>

static gw_array *root_of(const gw_array *a) { return (gw_array *)(a->root ? a->root : a); }

/* The root's pending-event fields change under a spin lock of their own: held for one
 * backend call (an event record, ~1-2 us on CUDA), never across a wait. */
static void plock(gw_array *r) {
  while (atomic_flag_test_and_set_explicit(&r->pend_lock, memory_order_acquire)) {
  }
}
static void punlock(gw_array *r) { atomic_flag_clear_explicit(&r->pend_lock, memory_order_release); }

/* The same backend and device: an event of one context serves every context of its device. */
static bool same_device(const gw_context *a, const gw_context *b) {
  return a->ops == b->ops && a->device == b->device;
}

static void drop_event(gw_array *r) {
  if (!r->pend_event) return;
  (void)r->pend_ctx->ops->event_destroy(r->pend_ctx->state, r->pend_event);
  gw__context_release(r->pend_ctx, r->pend_ref);
  r->pend_event = NULL;
  r->pend_ctx = NULL;
}

void gw__pending_note(const gw_array *a, gw_stream *st) {
  gw_array *r = root_of(a);
  gw_context *c = st->ctx;
  plock(r);
  /* Work of another device replaces the record: pending work is tracked on the device
   * that touched the memory last. */
  if (r->pend_event && !same_device(r->pend_ctx, c)) drop_event(r);
  gw_status s = GW_OK;
  if (!r->pend_event) {
    s = c->ops->event_create(c->state, &r->pend_event);
    if (s == GW_OK) {
      r->pend_ctx = c;
      r->pend_ref = gw__context_retain(c);
    } else {
      r->pend_event = NULL;
    }
  }
  if (s == GW_OK) s = c->ops->event_record(c->state, r->pend_event, st->handle);
  if (s != GW_OK) drop_event(r);
  punlock(r);
  /* Without an event nothing may stay pending: wait here instead (correct, only slower). */
  if (s != GW_OK) (void)c->ops->stream_synchronize(c->state, st->handle);
}

void gw__pending_fini(gw_array *root) { drop_event(root); }

void gw__pending_drain(gw_array *root) {
  /* Nobody else holds the root (its last reference is going), so no lock. There is no
   * event wait among the backend calls: poll the query, yielding the CPU meanwhile. A
   * failed query cannot be waited on: the memory goes as it did before. */
  if (!root->pend_event) return;
  gw_context *c = root->pend_ctx;
  while (c->ops->event_query(c->state, root->pend_event) == GW_EBUSY) sched_yield();
}

gw_status gw_array_wait(const gw_array *a, gw_stream *s) {
  if (!a) return gw__fail(GW_EINVAL, "a: NULL");
  if (!s) return gw__fail(GW_EINVAL, "stream: NULL");
  gw_array *r = root_of(a);
  gw_status st = GW_OK;
  plock(r);
  if (r->pend_event) {
    gw_context *ec = r->pend_ctx;
    st = ec->ops->event_query(ec->state, r->pend_event);
    if (st == GW_OK) {
      /* complete: nothing to wait for, on any stream */
    } else if (st != GW_EBUSY) {
      /* the query failed: fall through to the wait, which tells */
      st = GW_EBUSY;
    }
    if (st == GW_EBUSY) {
      if (s->ctx->ops != ec->ops)
        st = gw__fail(GW_EDEVICE,
                      "stream: a %s stream cannot wait for the %s work pending on the array",
                      s->ctx->ops->name, ec->ops->name);
      else
        st = s->ctx->ops->stream_wait_event(s->ctx->state, s->handle, r->pend_event);
    }
  }
  punlock(r);
  return st;
}

int gw_array_pending(const gw_array *a) {
  if (!a) return 0;
  gw_array *r = root_of(a);
  plock(r);
  int busy = r->pend_event && r->pend_ctx->ops->event_query(r->pend_ctx->state, r->pend_event) != GW_OK;
  punlock(r);
  return busy;
}

gw_status gw_stream_create(gw_context *ctx, gw_stream **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  gw_stream *s = malloc(sizeof *s);
  if (!s) return gw__fail(GW_ENOMEM, "gw_stream_create: out of host memory");
  gw_status st = ctx->ops->stream_create(ctx->state, &s->handle);
  if (st != GW_OK) {
    free(s);
    return st;
  }
  s->ctx = ctx;
  s->ctx_ref = gw__context_retain(ctx);
  s->borrowed = false;
  *out = s;
  return GW_OK;
}

gw_status gw_stream_wrap(gw_context *ctx, void *native, gw_stream **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (ctx->ops != &gw__cpu_ops && gw__cpu_stream_is_native(native))
    return gw__fail(GW_EINVAL, "native: %p is a stream of the cpu backend, the context is %s",
                    native, ctx->ops->name);
  gw_stream *s = malloc(sizeof *s);
  if (!s) return gw__fail(GW_ENOMEM, "gw_stream_wrap: out of host memory");
  gw_status st = ctx->ops->stream_borrow(ctx->state, native, &s->handle);
  if (st != GW_OK) {
    free(s);
    return st;
  }
  s->ctx = ctx;
  s->ctx_ref = gw__context_retain(ctx);
  s->borrowed = true;
  *out = s;
  return GW_OK;
}

void *gw_stream_native(const gw_stream *s) {
  return s ? s->ctx->ops->stream_native(s->ctx->state, s->handle) : NULL;
}

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
  return s->ctx->ops->stream_synchronize(s->ctx->state, s->handle);
}
