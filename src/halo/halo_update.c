#define _POSIX_C_SOURCE 200809L /* clock_gettime, in trace builds (src/core/trace.h) */

#include "halo_internal.h"
#include "../core/trace.h"

#include <stdint.h>
#include <string.h>

/* ---- updates
 * ------------------------------------------------------------------------- */

/* dst <- src on the plan's stream (or at once without one). */
gw_status gw__halo_queue_copy(gw_halo *h, gw_array *dst, const gw_array *src, const char *what,
                              int d) {
  gw_status st = h->q ? gw_copy_async(dst, src, h->q) : gw_copy(dst, src);
  return st == GW_OK ? GW_OK : gw__halo_call_failed(st, what, d);
}

gw_status gw__halo_sync_stream(gw_halo *h, const char *what) {
  if (!h->q) return GW_OK;
  gw_status st = gw_stream_synchronize(h->q);
  return st == GW_OK ? GW_OK : gw__halo_call_failed(st, what, -1);
}

/* A run of periodic dims of one rank: its prepared batch (make_self), on this
 * update's queue after everything before it (the previous dims' unpacks among
 * them). */
/* `wait`: complete them before returning (run_dims). */
static gw_status self_run(gw_halo *h, int d, int wait) {
  if (!h->self_batch[d]) return GW_OK;
  gw_status st =
      wait ? gw__batch_run_wait(h->self_batch[d], h->q) : gw__batch_run(h->self_batch[d], h->q);
  return st == GW_OK ? GW_OK : gw__halo_call_failed(st, "gw_copy of a halo to itself", d);
}

/* After a failure: cancel the receives still posted, let the sends complete,
 * drain the plan's stream (queued copies may still read the buffers). */
static void quiesce(gw_halo *h) {
  for (int d = 0; d < 3; d++)
    for (int m = 0; m < h->dim[d].nmsg && h->dim[d].recv_req; m++) {
      gw__halo_dim *hd = &h->dim[d];
      if (hd->recv_req[m] != MPI_REQUEST_NULL) {
        MPI_Cancel(&hd->recv_req[m]);
        MPI_Wait(&hd->recv_req[m], MPI_STATUS_IGNORE);
      }
      if (hd->send_req[m] != MPI_REQUEST_NULL) MPI_Wait(&hd->send_req[m], MPI_STATUS_IGNORE);
    }
  if (h->stream) (void)gw_stream_synchronize(h->stream);
  if (h->q && h->q != h->stream) (void)gw_stream_synchronize(h->q); /* the caller's */
  gw__halo_shm_cancel(h); /* this epoch's tokens: gone; the next epoch's start below */
  h->inflight = -1;
  h->started = 0;
  h->captured = 0;
  h->tail = 0;
  h->epoch = (h->epoch + 1) % EPOCHS;
  /* (into the ghost cells no token outlives an update: the next one starts afresh) */
  if (h->direct && !h->ghost) gw__halo_shm_resync(h);
}

/* Exchange dims d, d+1, ... in order. With `split`, return as soon as the first
 * dim that talks to other ranks has been sent, leaving it in flight. With
 * `wait` (a blocking update of a plan without messages, whose copies are all it
 * queues) the local copies complete before returning: run waiting, they need no
 * pending-work event for later readers and the update no second synchronisation
 * (together a few percent of a one-rank periodic update on the H200). */
static gw_status run_dims(gw_halo *h, int d, int split, int wait) {
  for (; d < h->ndim; d++) {
    gw__halo_dim *hd = &h->dim[d];
    gw_status st = GW_OK;
    if (hd->link == LINK_SELF) {
      st = self_run(h, d, wait);
      d = h->self_last[d];
    } else if (hd->link == LINK_MPI && h->nccl) {
      st = gw__halo_nccl_dim(h, d); /* queued, never in flight on the host: nothing to split */
    } else if (hd->link == LINK_MPI && h->sig) {
      st = gw__halo_ipc_signal_dim(h, d); /* the same: the device signals */
    } else if (hd->link == LINK_MPI) {
      st = gw__halo_host_send(h, d);
      if (st == GW_OK && split) {
        h->inflight = d;
        return GW_OK;
      }
      if (st == GW_OK) st = gw__halo_host_complete(h, d);
    }
    if (st != GW_OK) return st;
  }
  h->inflight = -1;
  return GW_OK;
}

/* The 1-byte device arrays whose pending-work events order one stream after
 * another. */
static gw_status tokens(gw_halo *h) {
  if (h->tok_in) return GW_OK;
  int64_t one = 1;
  gw_status st = gw_alloc(h->ctx, GW_MEM_DEVICE, GW_UINT8, 1, &one, &h->tok_in);
  if (st == GW_OK) st = gw_alloc(h->ctx, GW_MEM_DEVICE, GW_UINT8, 1, &one, &h->tok_out);
  if (st != GW_OK) {
    gw_release(h->tok_in);
    h->tok_in = NULL;
    return gw__halo_call_failed(st, "gw_alloc of the stream-order token", -1);
  }
  return GW_OK;
}

/* Make this update's queue wait for the caller's stream `s` (on the device),
 * or, for the blocking calls (s NULL), for gpuwrap work still pending on the
 * fields. */
static gw_status order_after(gw_halo *h, gw_stream *s) {
  gw_status st;
  if (!h->q) {
    /* No queue: nothing to exchange (then nothing to order either), or a
     * backend without streams, whose copies run at once: after the caller's
     * work, waited for. */
    int work = h->info.neighbours > 0 || h->info.bytes_local > 0;
    st = s && work ? gw_stream_synchronize(s) : GW_OK;
    return st == GW_OK
               ? GW_OK
               : gw__halo_call_failed(st, "gw_stream_synchronize of the caller's stream", -1);
  }
  if (s && s != h->q) {
    static const uint8_t zero = 0;
    st = tokens(h);
    if (st != GW_OK) return st;
    st = gw_fill_async(h->tok_in, &zero, s);
    if (st == GW_OK) st = gw_array_wait(h->tok_in, h->q);
    if (st != GW_OK)
      return gw__halo_call_failed(st, "ordering the plan's stream after the caller's stream", -1);
  }
  /* gpuwrap work on the fields queued on other streams (gw_copy_async into a
   * field): the queue waits for it too. Work of the plan itself is already in
   * order. */
  for (int f = 0; f < h->nfields; f++) {
    st = gw_array_wait(h->field[f], h->q);
    if (st != GW_OK) return gw__halo_call_failed(st, "gw_array_wait on a field", -1);
  }
  return GW_OK;
}

/* Make the caller's stream wait for the update's queued copies. */
static gw_status order_before(gw_halo *h, gw_stream *s) {
  if (!h->q || h->q == s) return GW_OK; /* the copies are complete, or already on s */
  static const uint8_t zero = 0;
  gw_status st = tokens(h);
  if (st == GW_OK) st = gw_fill_async(h->tok_out, &zero, h->q);
  if (st == GW_OK) st = gw_array_wait(h->tok_out, s);
  if (st != GW_OK)
    return gw__halo_call_failed(st, "ordering the caller's stream after the unpacks", -1);
  /* the next update must not receive into buffers these unpacks may still read
   */
  h->tail = h->info.neighbours > 0;
  return GW_OK;
}

static gw_status begin(gw_halo *h, const char *fn, int split, gw_stream *s) {
  if (!h) return gw__halo_fail(GW_EINVAL, "%s: plan is NULL", fn);
  if (h->started)
    return gw__halo_fail(GW_EINVAL, "%s: a split-phase update is in flight (call gw_halo_finish)",
                         fn);
  gw_status st = GW_OK;
  /* The previous stream-ordered finish may still be unpacking out of the
   * receive buffers: they must be read before new receives are posted into
   * them. By now this is long done (the caller's stream has been waiting for
   * it), so it costs a query, not a stall. */
  if (h->tail) {
    /* (NCCL: the new receives are queued on the same stream after those
     * unpacks) */
    h->q = h->stream;
    /* a capture cannot wait for work queued outside it: the host waits, before
     * anything is recorded */
    if ((!h->nccl || h->captured) && !h->ipc_only)
      st = gw__halo_sync_stream(h, "waiting for the previous update's unpacks");
    if (st == GW_OK) st = gw__halo_shm_release(h);
    h->tail = 0;
  }
  /* A plan without messages queues its copies on the caller's stream itself:
   * stream order is then the contract (after the caller's work before start_on,
   * before its work after finish_on) at no cost; a plan with messages keeps its
   * own stream, whose packs the host waits for while the caller's stream runs
   * on. */
  h->q = s && (h->info.neighbours == 0 || h->captured) && h->stream ? s : h->stream;
  /* (no queue: every copy runs to completion, so tokens go as after a synchronization) */
  h->blocking = (!split && !s) || !h->q;
  GW_TRACE_NOW(t0);
  if (st == GW_OK) st = gw__halo_host_post_receives(h);
  GW_TRACE_NOW(t1);
  if (st == GW_OK) st = order_after(h, s);
  GW_TRACE_NOW(t2);
  GW_TRACE_SPAN("begin: post receives", t0, t1);
  GW_TRACE_SPAN("begin: order after fields", t1, t2);
  /* gw_halo_update (not split, no stream) of a plan without messages: copies
   * run waiting */
  if (st == GW_OK) st = run_dims(h, 0, split, !split && !s && h->info.neighbours == 0);
  if (st != GW_OK) quiesce(h);
  return st;
}

/* AUTO per mode (gw_halo.alt): the plan a call runs on. The host-ordered calls run on the
 * plan itself (IPC), the stream-ordered ones on alt (the host path): a pure function of the
 * call, so every rank makes the same choice for each update. An update in flight stays on
 * the plan it was started on (finish follows its start, whichever finish is called), and
 * a new one is refused by that plan's begin() as for any update in flight. */
static gw_halo *mode_plan(gw_halo *h, int stream_ordered) {
  if (!h || !h->alt) return h;
  if (h->started || h->alt->started) return h->started ? h : h->alt;
  return stream_ordered ? h->alt : h;
}

/* A host-ordered update after a stream-ordered one of the other mode's plan: that one's
 * unpacks may still be queued on its stream, writing halo cells this update's packs read
 * (the edges and corners of the later dims). Its own next update waits for them in
 * begin() (h->tail); this plan waits here, as that begin() would: a query by now, not a
 * stall. */
static gw_status after_other_mode(gw_halo *h, const char *fn) {
  if (!h || !h->alt || h->started || h->alt->started || !h->alt->tail || !h->alt->stream)
    return GW_OK;
  gw_status st = gw_stream_synchronize(h->alt->stream);
  return st == GW_OK
             ? GW_OK
             : gw__halo_call_failed(st, fn, -1); /* (the plans stay idle: nothing started) */
}

gw_status gw_halo_update(gw_halo *h) {
  gw_status st = after_other_mode(h, "gw_halo_update: waiting for the previous update's unpacks");
  if (st != GW_OK) return st;
  h = mode_plan(h, 0);
  GW_TRACE_NOW(t0);
  st = begin(h, "gw_halo_update", 0, NULL);
  GW_TRACE_NOW(t1);
  if (st == GW_OK) {
    /* Complete when it returns; a plan without messages waited for its copies
     * already. */
    if (h->info.neighbours > 0) st = gw__halo_sync_stream(h, "gw_halo_update");
    GW_TRACE_NOW(t2);
    GW_TRACE_SPAN("update: begin .. complete", t0, t1);
    GW_TRACE_SPAN("update: synchronize", t1, t2);
    if (st == GW_OK) st = gw__halo_shm_release(h);
    if (st == GW_OK) st = gw__halo_nccl_async(h);
    if (st != GW_OK) quiesce(h);
  }
  return st;
}

gw_status gw_halo_start(gw_halo *h) {
  gw_status st = after_other_mode(h, "gw_halo_start: waiting for the previous update's unpacks");
  if (st != GW_OK) return st;
  h = mode_plan(h, 0);
  st = begin(h, "gw_halo_start", 1, NULL);
  /* Without a dim in flight (every exchange local) the copies complete here, as
   * a start that sent nothing has nothing for finish to wait on; with one, finish
   * completes them with the rest (the program reads no halo cell before it). */
  /* (NCCL, IPC signalled on the device: all queued, finish waits) */
  if (st == GW_OK && h->inflight < 0 && !h->nccl && !h->sig) {
    st = gw__halo_sync_stream(h, "gw_halo_start");
    if (st != GW_OK) quiesce(h);
  }
  if (st == GW_OK) h->started = 1;
  return st;
}

static gw_status finish(gw_halo *h, const char *fn, gw_stream *s) {
  if (!h) return gw__halo_fail(GW_EINVAL, "%s: plan is NULL", fn);
  if (!h->started) return gw__halo_fail(GW_EINVAL, "%s: no gw_halo_start is in flight", fn);
  int d = h->inflight;
  gw_status st = GW_OK;
  if (d >= 0) st = gw__halo_host_complete(h, d);
  if (st == GW_OK) st = run_dims(h, d >= 0 ? d + 1 : h->ndim, 0, 0);
  if (st == GW_OK) st = s ? order_before(h, s) : gw__halo_sync_stream(h, fn);
  if (st == GW_OK && (!s || !h->q))
    st = gw__halo_shm_release(h); /* (no queue: the unpacks are done) */
  if (st == GW_OK) st = gw__halo_nccl_async(h);
  if (st != GW_OK) quiesce(h);
  h->started = 0;
  h->captured = 0;
  return st;
}

gw_status gw_halo_finish(gw_halo *h) {
  h = mode_plan(h, 0);
  if (h && h->started && h->captured)
    return gw__halo_fail(GW_ENOTSUP, "gw_halo_finish: the update was started in a graph "
                                     "capture; finish it with gw_halo_finish_on on a "
                                     "stream of that capture");
  return finish(h, "gw_halo_finish", NULL);
}

/* The caller's stream must be of the plan's backend and device (its work is
 * ordered with the plan's by events of that device). A local precondition,
 * checked before anything is posted or completed: the plan stays as it was
 * (idle, or with its update in flight), and the neighbours are not told (an
 * update agreeing over every rank would cost every update a collective), so a
 * program that passes such a stream on some ranks only must treat the error as
 * fatal, as halo.h says. */
static gw_status check_stream(const gw_halo *h, const char *fn, const gw_stream *s) {
  gw_context *c = gw__stream_context(s);
  if (gw_context_backend(c) == gw_context_backend(h->ctx) &&
      gw_context_device(c) == gw_context_device(h->ctx))
    return GW_OK;
  return gw__halo_fail(GW_EDEVICE,
                       "%s: stream is on %s device %d, the plan's fields on %s device %d", fn,
                       gw_backend_name(gw_context_backend(c)), gw_context_device(c),
                       gw_backend_name(gw_context_backend(h->ctx)), gw_context_device(h->ctx));
}

/* Graph capture (gpuwrap.h "Graphs"). An update on a capturing stream is
 * recorded whole where every exchange is device work: one rank's local copies
 * (prepared batches) and the NCCL path (NCCL calls are recorded; the group is
 * queued on the capturing stream itself, so the graph needs no fork). Where MPI
 * or its tokens must run on the host between the packs and the unpacks (the
 * host path, the device path through MPI, the shared-memory window, IPC), a
 * graph cannot hold the update: refused here, before anything is posted or
 * queued, so the caller's capture stays valid. A local precondition like
 * check_stream: every rank's stream is its own, so the neighbours are not told.
 * *capturing: whether s captures (0 for a refused call). */
static int host_steps(const gw_halo *h) {
  if (h->direct) return 1;
  for (int d = 0; d < h->ndim; d++)
    if (h->dim[d].link == LINK_MPI && !h->nccl) return 1;
  return 0;
}

static gw_status check_capture(const gw_halo *h, const char *fn, gw_stream *s, int *capturing) {
  *capturing = 0;
  int cap = 0;
  gw_status st = s ? gw__stream_capturing(s, &cap) : GW_OK;
  if (st != GW_OK)
    return gw__halo_call_failed(st, "asking whether the stream is being captured", -1);
  if (h->started && cap != h->captured)
    return gw__halo_fail(GW_ENOTSUP,
                         "%s: the update was started %s a graph capture and is finished %s one: "
                         "start and finish an update on streams of one capture, or both "
                         "outside any",
                         fn, h->captured ? "inside" : "outside", cap ? "inside" : "outside");
  if (cap && host_steps(h))
    return gw__halo_fail(GW_ENOTSUP,
                         "%s: stream is being captured into a graph, and this plan's update "
                         "runs MPI on the host between its packs and unpacks (path %s, %d "
                         "remote neighbour message(s)), which a graph cannot record; capture "
                         "a plan whose exchanges are all device work (one rank's local "
                         "copies, or the NCCL path), or update this one outside the capture",
                         fn, gw_halo_path_name(h->info.path), h->info.neighbours);
  *capturing = cap;
  return GW_OK;
}

/* start_on and finish_on under the name of the call the caller made. */
static gw_status start_on(gw_halo *h, gw_stream *s, const char *fn) {
  h = mode_plan(h, 1);
  if (!h) return gw__halo_fail(GW_EINVAL, "%s: plan is NULL", fn);
  if (!s)
    return gw__halo_fail(GW_EINVAL, "%s: stream is NULL (%s is the host-ordered call)", fn,
                         strcmp(fn, "gw_halo_update_on") ? "gw_halo_start" : "gw_halo_update");
  gw_status st = check_stream(h, fn, s);
  int cap = 0;
  if (st == GW_OK && !h->started) st = check_capture(h, fn, s, &cap);
  if (st != GW_OK) return st;
  h->captured = cap;
  st = begin(h, fn, 1, s);
  if (st == GW_OK)
    h->started = 1;
  else
    h->captured = 0;
  return st;
}

static gw_status finish_on(gw_halo *h, gw_stream *s, const char *fn) {
  h = mode_plan(h, 1);
  if (h && !s)
    return gw__halo_fail(GW_EINVAL,
                         "%s: stream is NULL (gw_halo_finish is the "
                         "host-ordered call)",
                         fn);
  if (h && h->started) {
    int cap;
    gw_status st = check_stream(h, fn, s);
    if (st == GW_OK) st = check_capture(h, fn, s, &cap);
    if (st != GW_OK) return st;
  }
  return finish(h, fn, s);
}

gw_status gw_halo_start_on(gw_halo *h, gw_stream *s) { return start_on(h, s, "gw_halo_start_on"); }

gw_status gw_halo_finish_on(gw_halo *h, gw_stream *s) {
  return finish_on(h, s, "gw_halo_finish_on");
}

gw_status gw_halo_update_on(gw_halo *h, gw_stream *s) {
  gw_status st = start_on(h, s, "gw_halo_update_on");
  return st == GW_OK ? finish_on(h, s, "gw_halo_update_on") : st;
}
