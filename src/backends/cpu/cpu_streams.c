/*
 * The CPU model's streams: asynchronous, with CUDA's ordering rules, so that an ordering
 * mistake made against gpuwrap's stream contract (gpuwrap.h, "Streams") fails a test on
 * a machine without a GPU instead of passing by luck.
 *
 * Model (per modelled device):
 *   - every stream is a FIFO queue run by a worker thread of its own; copy/fill on a
 *     stream copy their gw__xfer / gw__fillspec into a queued item and return;
 *   - the legacy default stream is a queue too (work on a borrowed NULL stream goes
 *     there); its worker runs while it has work and exits when it is empty;
 *   - BLOCKING streams (stream_create, as cudaStreamCreate; the test hook's blocking
 *     external streams): an item waits for the legacy stream's work queued before it, and
 *     a legacy item waits for every blocking stream's work queued before it;
 *   - NON-BLOCKING streams (the test hook, as PyTorch's / CuPy's side streams) are ordered
 *     with nothing but themselves;
 *   - synchronous calls (stream NULL) are legacy items that the CALLING thread runs once
 *     they are ready, so they complete on return and are ordered exactly as cudaMemcpy;
 *     copies and fills of pageable memory on a stream are run by the caller the same way
 *     (the API promises they complete on return, as the GPU backend's do);
 *   - an event is (queue, ticket): "the queue's work queued so far"; a wait on it is a
 *     queued item, never a host wait;
 *   - an interprocess event (cpu_ipc_event.c) is instead two counters in a page shared
 *     with other processes: its record is a queued item raising `completed`, its wait a
 *     queued item ready once `completed` reaches what was recorded when it was queued.
 *     Progress of another process signals no condition variable here, so a head waiting
 *     for it is polled (a timed wait, only while such a wait is the head);
 *   - freeing backend memory waits for every queue first (cudaFree synchronizes), so a
 *     release after queued work is safe, as on CUDA.
 *   - graph capture (cudaStreamBeginCapture's rules, modelled in cpu_capture.c): work queued on
 *     a capturing stream is recorded, not run; a launch of the graph queues copies of it
 *     (in the order it was recorded, a valid order for every dependency of the capture);
 * Ordering is decided with one global enqueue sequence number: an item only ever waits
 * for items with a smaller number, so the model cannot deadlock whatever the caller does.
 *
 * One mutex and one condition variable for all of it: the model is for tests, where
 * simplicity (and TSan seeing every hand-over through one lock) matters more than the
 * wake-ups a broadcast costs. The lock is never held while work runs, and no other lock
 * of the library is taken while it is held (fork.c relies on that: it is innermost).
 * cpu_capture.c shares it (cpu_streams_internal.h): a capture changes queues.
 *
 * Files: the lock, the queues' state, their workers and fork are the core both sides
 * stand on (cpu_queue.c); the capture rules are cpu_capture.c; an interprocess event's
 * shared page and counters are cpu_ipc_event.c's; this file is the streams and events the
 * ops use, and calls into those three, never they into it.
 */
#include "cpu_streams_internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  gw__cpu_evshm
      *sh;  /* an interprocess event: its shared state (then q, ticket, cap_id are unused) */
  queue *q; /* NULL: never recorded (complete, as a fresh CUDA event) */
  uint64_t ticket;
  uint64_t cap_id; /* last recorded in this capture (0: none): a node of its graph, not work */
} event;

/* Run `it` on the calling thread as an item of q: queued (so later work of other streams
 * is ordered after it as after any item of q), run once it is q's head and ready, then
 * completed. For synchronous calls (q = the legacy stream) and pageable-memory work. */
static gw_status run_here(queue *q, item *it) {
  it->kind = IT_CALLER;
  it->heap = false;
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  gw_status st = GW_OK;
  if (q->dead)
    st = gw__fail(GW_EINVAL, "cpu backend: the stream was destroyed by its owner");
  else if (q->cap) /* work the host runs now cannot be recorded */
    st = gw__cpu_capture_invalidate(q, "cudaErrorStreamCaptureUnsupported",
                                    "host-run (synchronous) work queued on it");
  else if ((st = gw__cpu_legacy_conflict(q)) == GW_OK)
    st = gw__cpu_capture_guard_held("a synchronous copy or fill");
  if (st != GW_OK) {
    pthread_mutex_unlock(&gw__cpu_streams_mutex);
    return st;
  }
  gw__cpu_child_drain();
  gw__cpu_push(q, it);
  while (q->head != it || !gw__cpu_queue_ready(q, it)) gw__cpu_queue_wait();
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return GW_OK;
}

/* The second half of run_here: the work ran, pop the item. */
static void run_here_done(queue *q, item *it) {
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  gw__cpu_queue_complete(q, it);
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
}

/* Queue a worker item (malloc'd copy of *tmpl) on q. */
static gw_status enqueue(queue *q, const item *tmpl) {
  item *it = malloc(sizeof *it);
  if (!it) return gw__fail(GW_ENOMEM, "cpu backend: out of host memory for a stream's work item");
  *it = *tmpl;
  it->heap = true;
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  gw_status st = GW_OK;
  if (q->dead)
    st = gw__fail(GW_EINVAL, "cpu backend: the stream was destroyed by its owner");
  else if (q->cap && it->sh)
    st = gw__fail(GW_ENOTSUP,
                  "cpu backend: %s of an interprocess event on a capturing stream: the runtime "
                  "takes no interprocess event into a graph (not supported; the capture "
                  "goes on)",
                  it->kind == IT_SIGNAL ? "event_record" : "stream_wait_event");
  else if (q->cap) {
    gw__cpu_capture_record(q, it);
    pthread_mutex_unlock(&gw__cpu_streams_mutex);
    return GW_OK;
  } else if ((st = gw__cpu_legacy_conflict(q)) != GW_OK)
    ;
  else if (!q->has_thread && !gw__cpu_forked_child)
    st = gw__cpu_start_worker(q); /* the legacy stream's: it exits when its queue is empty */
  if (st == GW_OK) {
    if (it->sh) it->sh_value = gw__cpu_evshm_take(it->sh, it->kind == IT_SIGNAL);
    gw__cpu_push(q, it);
    gw__cpu_child_drain();
  }
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  if (st != GW_OK) free(it);
  return st;
}

/* ---- copy and fill ---- */

/* The queue a copy or fill goes to: the stream's, or the device's legacy default stream. */
static queue *target_queue(int device, void *stream) {
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  queue *q = stream ? queue_of(stream) : gw__cpu_legacy_of(device);
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return q;
}

gw_status gw__cpu_stream_copy(int device, const gw__xfer *x, void *stream) {
  gw_status st = gw__cpu_copy_check(x);
  if (st != GW_OK) return st;
  queue *q = target_queue(device, stream);
  /* Pageable memory (host kind) completes on return, on a stream as without one. */
  if (!stream || x->dst_kind == GW_MEM_HOST || x->src_kind == GW_MEM_HOST) {
    item it = {.u.x = *x};
    st = run_here(q, &it);
    if (st != GW_OK) return st;
    st = gw__cpu_copy(x);
    run_here_done(q, &it);
    return st;
  }
  item it = {.kind = IT_COPY, .u.x = *x};
  return enqueue(q, &it);
}

gw_status gw__cpu_stream_copy_batch(int device, const gw__xfer *x, int n, void *stream) {
  if (n < 0) return gw__fail(GW_EINVAL, "copy_batch: n is %d", n);
  bool host = false;
  for (int i = 0; i < n; i++) { /* every check first: a bad transfer queues nothing */
    gw_status st = gw__cpu_copy_check(&x[i]);
    if (st != GW_OK) return st;
    host |= x[i].dst_kind == GW_MEM_HOST || x[i].src_kind == GW_MEM_HOST;
  }
  if (n == 0) return GW_OK;
  queue *q = target_queue(device, stream);
  /* As copy: synchronous, or pageable memory anywhere, runs on the caller (one item). */
  if (!stream || host) {
    item it = {.kind = IT_CALLER};
    gw_status st = run_here(q, &it);
    if (st != GW_OK) return st;
    for (int i = 0; st == GW_OK && i < n; i++) st = gw__cpu_copy(&x[i]);
    run_here_done(q, &it);
    return st;
  }
  gw__xfer *copy = malloc((size_t)n * sizeof *copy);
  if (!copy) return gw__fail(GW_ENOMEM, "cpu backend: out of host memory for a stream's work item");
  memcpy(copy, x, (size_t)n * sizeof *copy);
  item it = {.kind = IT_BATCH, .u.b = {copy, n}};
  gw_status st = enqueue(q, &it);
  if (st != GW_OK) free(copy);
  return st;
}

/* A signalled batch (backend.h: gw__signals) as five items pushed together: the stores,
 * the wait, the copies, the stores, the wait. All are made before any is pushed, so a
 * failure queues none: a half-queued signal would leave the neighbour waiting. */
gw_status gw__cpu_stream_copy_batch_signalled(int device, const gw__xfer *x, int n, void *stream,
                                              const gw__signals *sig) {
  (void)device;
  if (n < 0) return gw__fail(GW_EINVAL, "copy_batch_signalled: n is %d", n);
  if (!stream || !sig)
    return gw__fail(GW_EINVAL, "copy_batch_signalled: %s is NULL", !stream ? "stream" : "sig");
  /* (the GPU kernel's limits, modelled: a plan the model signals, a GPU signals too) */
  if (n > GW__SIGNAL_MAX_TRANSFERS)
    return gw__fail(GW_ENOTSUP, "copy_batch_signalled: %d transfers (one operation takes %d)", n,
                    GW__SIGNAL_MAX_TRANSFERS);
  for (int i = 0; i < n; i++) {
    gw_status st = gw__cpu_copy_check(&x[i]);
    if (st != GW_OK) return st;
    if (x[i].ndim > GW__SIGNAL_MAX_DIMS)
      return gw__fail(GW_ENOTSUP, "copy_batch_signalled: transfer %d has %d dims (at most %d)", i,
                      x[i].ndim, GW__SIGNAL_MAX_DIMS);
    if (x[i].dst_kind == GW_MEM_HOST || x[i].src_kind == GW_MEM_HOST)
      return gw__fail(GW_ENOTSUP,
                      "copy_batch_signalled: transfer %d has pageable memory, "
                      "which the host copies (no stream work to signal)",
                      i);
  }
  item *it[5] = {NULL};
  gw__xfer *copy = malloc((size_t)(n > 0 ? n : 1) * sizeof *copy);
  bool ok = copy != NULL;
  for (int k = 0; ok && k < 5; k++) ok = (it[k] = calloc(1, sizeof *it[k])) != NULL;
  if (!ok) {
    for (int k = 0; k < 5; k++) free(it[k]);
    free(copy);
    return gw__fail(GW_ENOMEM, "cpu backend: out of host memory for a stream's work items");
  }
  if (n > 0) memcpy(copy, x, (size_t)n * sizeof *copy);
  const item_kind kind[5] = {IT_WRITEVAL, IT_WAITVAL, IT_BATCH, IT_WRITEVAL, IT_WAITVAL};
  uint32_t *const *words[5] = {sig->post, (uint32_t *const *)sig->wait, NULL, sig->done,
                               (uint32_t *const *)sig->until};
  for (int k = 0; k < 5; k++) {
    it[k]->kind = kind[k];
    it[k]->heap = true;
    if (k == 2) {
      it[k]->u.b.x = copy;
      it[k]->u.b.n = n;
      continue;
    }
    it[k]->u.v.w[0] = words[k][0];
    it[k]->u.v.w[1] = words[k][1];
    it[k]->u.v.value = sig->epoch;
  }
  queue *q = queue_of(stream);
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  gw_status st = GW_OK;
  if (q->dead)
    st = gw__fail(GW_EINVAL, "cpu backend: the stream was destroyed by its owner");
  else if (q->cap)
    st = gw__fail(GW_ENOTSUP, "cpu backend: a signalled batch on a capturing stream: its epoch "
                              "is fixed when queued (not supported; the capture goes on)");
  else if (!q->has_thread && !gw__cpu_forked_child)
    st = gw__cpu_start_worker(q);
  if (st == GW_OK) {
    for (int k = 0; k < 5; k++) gw__cpu_push(q, it[k]);
    gw__cpu_child_drain();
  }
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  if (st != GW_OK) {
    for (int k = 0; k < 5; k++) free(it[k]);
    free(copy);
  }
  return st;
}

gw_status gw__cpu_stream_fill(int device, const gw__fillspec *f, void *stream) {
  int empty = 0;
  gw_status st = gw__cpu_fill_check(f, &empty);
  if (st != GW_OK) return st;
  queue *q = target_queue(device, stream);
  /* Pageable memory is filled here, complete on return, as the GPU backend fills it when
   * the device cannot reach it; a device that reads pageable memory (HMM/ATS) has the GPU
   * backend queue a kernel on the stream instead, so the model queues it too (filled here,
   * a program that forgets the stream's synchronize would pass without a GPU). */
  if (!stream || (f->kind == GW_MEM_HOST && !gw__cpu_config_get()->pageable_access)) {
    item it = {.u.f = *f};
    st = run_here(q, &it);
    if (st != GW_OK) return st;
    st = gw__cpu_fill(f);
    run_here_done(q, &it);
    return st;
  }
  item it = {.kind = IT_FILL, .u.f = *f};
  return enqueue(q, &it);
}

/* ---- synchronisation ---- */

gw_status gw__cpu_device_synchronize(int device) {
  gw_status st = gw__cpu_capture_guard("a device synchronize");
  if (st == GW_OK) gw__cpu_streams_quiesce(device);
  return st;
}

/* lock held */
static void wait_queue(queue *q) {
  gw__cpu_child_drain();
  uint64_t target = q->queued;
  while (q->done < target) gw__cpu_queue_wait();
}

gw_status gw__cpu_stream_synchronize(void *stream) {
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  queue *q = queue_of(stream);
  gw_status st = q->cap ? gw__cpu_capture_invalidate(q, "cudaErrorStreamCaptureUnsupported",
                                                     "a stream synchronize")
                        : gw__cpu_capture_guard_held("a stream synchronize");
  if (st == GW_OK) wait_queue(q);
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return st;
}

/* ---- stream objects ---- */

static gw_status new_queue(int device, queue_kind kind, queue_owner owner, queue **out) {
  queue *q = calloc(1, sizeof *q);
  if (!q) return gw__fail(GW_ENOMEM, "cpu backend: out of host memory for a stream");
  q->device = device;
  q->kind = kind;
  q->owner = owner;
  q->refs = 1;
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  gw_status st = gw__cpu_forked_child ? GW_OK : gw__cpu_start_worker(q);
  if (st == GW_OK) {
    q->next_live = gw__cpu_live;
    gw__cpu_live = q;
  }
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  if (st != GW_OK)
    free(q);
  else
    *out = q;
  return st;
}

/* The owner's destroy: no new work, drain, join the worker, leave the table, drop the
 * owner's reference (handles, events and wait items may still hold the memory). */
static void destroy_queue(queue *q) {
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  q->dead = true;
  q->stop = true;
  gw__cpu_child_drain();
  gw__cpu_queue_wake();
  bool join = q->has_thread;
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  if (join) pthread_join(q->thread, NULL); /* it exits once the queue is drained */
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  q->has_thread = false;
  for (queue **p = &gw__cpu_live; *p; p = &(*p)->next_live)
    if (*p == q) {
      *p = q->next_live;
      break;
    }
  gw__cpu_queue_wake(); /* a legacy item may have waited on its last head */
  if (q->cap && q->cap->origin == q)
    gw__cpu_capture_close(q->cap, NULL); /* a capture never ended: its graph is lost, as on CUDA */
  q->cap = NULL;
  gw__cpu_queue_unref(q);
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
}

gw_status gw__cpu_stream_create(int device, void **stream) {
  handle *h = malloc(sizeof *h);
  if (!h) return gw__fail(GW_ENOMEM, "stream_create: out of memory");
  gw_status st = new_queue(device, Q_BLOCKING, BY_GPUWRAP, &h->q);
  if (st != GW_OK) {
    free(h);
    return st;
  }
  h->owned = true;
  *stream = h;
  return GW_OK;
}

void gw__cpu_stream_destroy(void *stream) {
  handle *h = stream;
  if (!h) return;
  if (h->owned) {
    destroy_queue(h->q);
  } else {
    pthread_mutex_lock(&gw__cpu_streams_mutex);
    gw__cpu_queue_unref(h->q);
    pthread_mutex_unlock(&gw__cpu_streams_mutex);
  }
  free(h);
}

bool gw__cpu_stream_is_native(const void *native) {
  if (!native) return false;
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  bool found = gw__cpu_find_live(native) != NULL;
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return found;
}

gw_status gw__cpu_stream_borrow(int device, void *native, void **stream) {
  handle *h = malloc(sizeof *h);
  if (!h) return gw__fail(GW_ENOMEM, "stream_borrow: out of memory");
  h->owned = false;
  gw_status st = GW_OK;
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  if (!native) {
    h->q = gw__cpu_legacy_of(device);
  } else {
    queue *q = gw__cpu_find_live(native);
    if (!q)
      st = gw__fail(GW_EINVAL,
                    "stream_borrow: %p is not a stream of the cpu backend (not a "
                    "live handle from gw_stream_native or the test hook)",
                    native);
    else if (q->device != device)
      st = gw__fail(GW_EDEVICE,
                    "stream_borrow: %p is a stream of cpu device %d, the context "
                    "is on device %d",
                    native, q->device, device);
    else {
      q->refs++;
      h->q = q;
    }
  }
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  if (st != GW_OK) {
    free(h);
    return st;
  }
  *stream = h;
  return GW_OK;
}

void *gw__cpu_stream_native(void *stream) {
  queue *q = queue_of(stream);
  return q->kind == Q_LEGACY ? NULL : q;
}

/* ---- events ---- */

gw_status gw__cpu_event_create(void **out) {
  event *e = calloc(1, sizeof *e);
  if (!e) return gw__fail(GW_ENOMEM, "event_create: out of memory");
  *out = e;
  return GW_OK;
}

gw_status gw__cpu_event_create_shared(gw__cpu_evshm *sh, void **out) {
  event *e = calloc(1, sizeof *e);
  if (!e) return gw__fail(GW_ENOMEM, "ipc_event: out of host memory for the event");
  e->sh = sh;
  *out = e;
  return GW_OK;
}

void gw__cpu_event_destroy(void *ev) {
  event *e = ev;
  if (!e) return;
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  if (e->sh) gw__cpu_evshm_unref(e->sh); /* queued items keep the page mapped until they ran */
  if (e->q) gw__cpu_queue_unref(e->q);
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  free(e);
}

gw_status gw__cpu_event_record(void *ev, void *stream) {
  event *e = ev;
  queue *q = queue_of(stream);
  if (e->sh) {
    item it = {.kind = IT_SIGNAL, .sh = e->sh};
    return enqueue(q, &it);
  }
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  if (q->owner != BY_LEGACY) q->refs++;
  if (e->q) gw__cpu_queue_unref(e->q);
  e->q = q;
  e->ticket = q->queued;
  e->cap_id = q->cap ? q->cap->id : 0;
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return GW_OK;
}

gw_status gw__cpu_stream_wait_event(void *stream, void *ev) {
  event *e = ev;
  queue *q = queue_of(stream);
  if (e->sh) {
    item shw = {.kind = IT_SHWAIT, .sh = e->sh};
    return enqueue(q, &shw);
  }
  item *it = malloc(sizeof *it);
  if (!it) return gw__fail(GW_ENOMEM, "stream_wait_event: out of memory");
  *it = (item){.kind = IT_WAIT, .heap = true};
  gw_status st = GW_OK;
  bool queued = false;
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  capture *ec = e->cap_id ? gw__cpu_capture_by_id(e->cap_id) : NULL;
  if (e->cap_id && (!ec || (q->cap && q->cap != ec))) {
    /* A node of a capture that ended, or of another one: a dependency across captures. */
    if (q->cap)
      st = gw__cpu_capture_invalidate(q, "cudaErrorStreamCaptureIsolation",
                                      "a wait for an event of another capture");
    else
      st = gw__fail(GW_EBACKEND, "stream_wait_event: the event was last recorded in a capture "
                                 "that has ended (cudaErrorStreamCaptureIsolation)");
  } else if (e->cap_id) {
    /* A node of q's capture, or q joins it (as cudaStreamWaitEvent on a captured event):
     * recorded work is replayed in the order it was recorded, which keeps this order. */
    if (q->kind == Q_LEGACY)
      st = gw__fail(GW_EINVAL, "stream_wait_event: the legacy stream cannot join a capture");
    else
      q->cap = ec;
  } else if (e->q && e->q != q && e->q->done < e->ticket && q->cap) {
    /* A dependency on work outside the capture (cudaErrorStreamCaptureIsolation). */
    st = gw__cpu_capture_invalidate(q, "cudaErrorStreamCaptureIsolation",
                                    "a wait for work outside the capture");
  } else if (e->q && e->q != q && e->q->done < e->ticket) {
    /* Nothing pending, or pending on q itself (FIFO orders it already): no item. */
    if (q->dead)
      st = gw__fail(GW_EINVAL, "stream_wait_event: the stream was destroyed by its owner");
    else if (!q->has_thread && !gw__cpu_forked_child)
      st = gw__cpu_start_worker(q);
    if (st == GW_OK) {
      it->wait_q = e->q;
      it->wait_ticket = e->ticket;
      if (e->q->owner != BY_LEGACY) e->q->refs++;
      gw__cpu_push(q, it);
      queued = true;
      gw__cpu_child_drain();
    }
  }
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  if (!queued) free(it);
  return st;
}

gw_status gw__cpu_event_query(void *ev) {
  const event *e = ev;
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  gw_status st = gw__cpu_capture_guard_held("an event query");
  if (st == GW_OK && e->cap_id) /* GW_ENOTSUP: backend.h, event_query */
    st = gw__fail(GW_ENOTSUP, "cpu backend: event query: the event was last recorded in a "
                              "capturing stream (cudaErrorCapturedEvent)");
  if (st != GW_OK) {
    pthread_mutex_unlock(&gw__cpu_streams_mutex);
    return st;
  }
  bool complete = e->sh ? gw__cpu_evshm_complete(e->sh) : !e->q || e->q->done >= e->ticket;
  if (!complete) gw__cpu_child_drain();
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return complete ? GW_OK : GW_EBUSY; /* a poll: EBUSY is no failure, nothing recorded */
}

/* ---- the test hook: streams made "outside gpuwrap" ---- */

GW_API gw_status gw_cpu_stream_create_external(int device, int nonblocking, void **native) {
  gw_status st = gw__cpu_check(GW_CPU_OP_STREAM_CREATE);
  if (st) return st;
  if (!native) return gw__fail(GW_EINVAL, "gw_cpu_stream_create_external: native is NULL");
  const gw__cpu_config *c = gw__cpu_config_get();
  if (device < 0 || device >= c->devices)
    return gw__fail(GW_ENODEV, "gw_cpu_stream_create_external: no cpu device %d (%d modelled)",
                    device, c->devices);
  queue *q = NULL;
  st = new_queue(device, nonblocking ? Q_NONBLOCKING : Q_BLOCKING, BY_EXTERNAL, &q);
  if (st == GW_OK) *native = q;
  return st;
}

GW_API gw_status gw_cpu_stream_destroy_external(void *native) {
  gw_status st = gw__cpu_check(GW_CPU_OP_STREAM_DESTROY);
  if (st) return st;
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  queue *q = native ? gw__cpu_find_live(native) : NULL;
  if (!q)
    st = gw__fail(GW_EINVAL,
                  "gw_cpu_stream_destroy_external: %p is not a live stream of the "
                  "cpu backend",
                  native);
  else if (q->owner != BY_EXTERNAL)
    st = gw__fail(GW_EINVAL,
                  "gw_cpu_stream_destroy_external: %p was made by gw_stream_create "
                  "(gw_stream_destroy destroys it)",
                  native);
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  if (st == GW_OK) destroy_queue(q);
  return st;
}
