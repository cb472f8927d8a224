/*
 * The CPU model of CUDA graph capture (cudaStreamBeginCapture and its rules), on the
 * model's streams (cpu_streams.c): work queued on a capturing stream is recorded, not run;
 * calls a capture prohibits fail and invalidate it; a launch of the graph queues copies of
 * the recorded work. So a capture mistake made against gpuwrap's stream contract fails a
 * test on a machine without a GPU, as it would fail under CUDA.
 *
 * It shares the streams' one lock (cpu_streams_internal.h): beginning, joining or ending a
 * capture changes queues, and the streams consult the captures on every queued item.
 */
#include "cpu_streams_internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct gw_cpu_graph {
  item *head;
  int n;
};

static uint64_t last_capture_id; /* lock */
static capture *captures;        /* lock: the live ones */

/* ---- capture: the rules the model enforces (lock held) ----
 *
 * As CUDA: a capture's mode says which threads' "potentially unsafe" calls (anything that
 * synchronises the host or may: synchronous copies and fills, stream and device
 * synchronisation, event queries, allocation, free, host registration) are prohibited
 * while it runs: under GLOBAL, those of every thread whose own per-thread mode is not
 * RELAXED; under THREAD_LOCAL, those of the thread that began it; under RELAXED, none. A
 * prohibited call fails and invalidates the capture (its end then gives no graph). A
 * thread's mode is exchanged by gw__cpu_capture_mode_exchange; the backend's operations
 * run in RELAXED (cpu_ops.c), as the GPU backend's do; the raw gw_cpu_runtime_* calls, a
 * user's own runtime calls, run in the thread's mode (GLOBAL unless changed). */
static _Thread_local gw_cpu_capture_mode thread_mode = GW_CPU_CAPTURE_GLOBAL;

gw_cpu_capture_mode gw__cpu_capture_mode_exchange(gw_cpu_capture_mode m) {
  gw_cpu_capture_mode old = thread_mode;
  thread_mode = m;
  return old;
}

GW_API gw_cpu_capture_mode gw_cpu_thread_capture_mode(void) { return thread_mode; }

gw_status gw__cpu_capture_invalidate(queue *q, const char *err, const char *why) {
  if (!q->cap->invalid) q->cap->invalid = why;
  return gw__fail(GW_EBACKEND,
                  "cpu backend: %s on a capturing stream: %s (the capture is invalidated)", why,
                  err);
}

/* Whether the calling thread may make a potentially unsafe call now; invalidates the
 * captures it would break and fails. */
gw_status gw__cpu_capture_guard_held(const char *call) {
  if (thread_mode == GW_CPU_CAPTURE_RELAXED) return GW_OK;
  pthread_t self = pthread_self();
  capture *hit = NULL;
  for (capture *c = captures; c; c = c->next) {
    if (c->mode == GW_CPU_CAPTURE_RELAXED) continue;
    if (pthread_equal(c->thread, self) ||
        (thread_mode == GW_CPU_CAPTURE_GLOBAL && c->mode == GW_CPU_CAPTURE_GLOBAL)) {
      if (!c->invalid) c->invalid = call;
      hit = c;
    }
  }
  if (!hit) return GW_OK;
  return gw__fail(GW_EBACKEND,
                  "cpu backend: %s: operation not permitted when stream is capturing "
                  "(cudaErrorStreamCaptureUnsupported; the capture is invalidated)",
                  call);
}

gw_status gw__cpu_capture_guard(const char *call) {
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  gw_status st = gw__cpu_capture_guard_held(call);
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return st;
}

/* Work on the legacy stream while a blocking stream of its device captures: the implicit
 * dependency between them would cross the capture (cudaErrorStreamCaptureImplicit). */
gw_status gw__cpu_legacy_conflict(queue *q) {
  if (q->kind != Q_LEGACY) return GW_OK;
  for (queue *b = gw__cpu_live; b; b = b->next_live)
    if (b->device == q->device && b->kind == Q_BLOCKING && b->cap)
      return gw__cpu_capture_invalidate(
          b, "cudaErrorStreamCaptureImplicit",
          "legacy-stream work while a blocking stream of the device captures");
  return GW_OK;
}

/* The query's side of it: the legacy stream may not be used now (changes nothing). */
static gw_status legacy_conflict_query(queue *q) {
  if (q->kind != Q_LEGACY) return GW_OK;
  for (queue *b = gw__cpu_live; b; b = b->next_live)
    if (b->device == q->device && b->kind == Q_BLOCKING && b->cap)
      return gw__fail(GW_ENOTSUP,
                      "stream: the legacy default stream cannot take work while a blocking "
                      "stream of its device is being captured (cudaErrorStreamCaptureImplicit: "
                      "it would invalidate that capture)");
  return GW_OK;
}

/* Record the heap item `it` into q's capture. */
void gw__cpu_capture_record(queue *q, item *it) {
  capture *c = q->cap;
  it->next = NULL;
  if (c->tail)
    c->tail->next = it;
  else
    c->head = it;
  c->tail = it;
  c->n++;
}

static void free_items(item *h);

/* The capture is over (ended, or its origin destroyed): every queue leaves it, it leaves
 * the live list; its items are the caller's (*items), or freed when items is NULL. */
void gw__cpu_capture_close(capture *c, item **items) {
  for (queue *q = gw__cpu_live; q; q = q->next_live)
    if (q->cap == c) q->cap = NULL;
  for (capture **p = &captures; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  if (items)
    *items = c->head;
  else
    free_items(c->head);
  free(c);
}

/* A live capture by id (lock held), or NULL: ended. */
capture *gw__cpu_capture_by_id(uint64_t id) {
  for (capture *c = captures; c; c = c->next)
    if (c->id == id) return c;
  return NULL;
}

static void free_items(item *h) {
  while (h) {
    item *n = h->next;
    if (h->kind == IT_BATCH) free(h->u.b.x);
    free(h);
    h = n;
  }
}
/* ---- the test control: capture, graphs, launches ---- */

/* A live, non-legacy queue by native handle (lock held), or a failure naming `who`. */
static gw_status capture_target(const char *who, void *native, queue **out) {
  queue *q = native ? gw__cpu_find_live(native) : NULL;
  if (!native)
    return gw__fail(GW_EINVAL, "%s: native is NULL: the legacy default stream cannot be captured",
                    who);
  if (!q) return gw__fail(GW_EINVAL, "%s: %p is not a live stream of the cpu backend", who, native);
  *out = q;
  return GW_OK;
}

GW_API gw_status gw_cpu_stream_capture_begin(void *native, gw_cpu_capture_mode mode) {
  if ((unsigned)mode > GW_CPU_CAPTURE_RELAXED)
    return gw__fail(GW_EINVAL, "gw_cpu_stream_capture_begin: mode %d", (int)mode);
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  queue *q = NULL;
  gw_status st = capture_target("gw_cpu_stream_capture_begin", native, &q);
  if (st == GW_OK && q->cap)
    st = gw__fail(GW_EINVAL, "gw_cpu_stream_capture_begin: %p is capturing already", native);
  capture *c = st == GW_OK ? calloc(1, sizeof *c) : NULL;
  if (st == GW_OK && !c)
    st = gw__fail(GW_ENOMEM, "gw_cpu_stream_capture_begin: out of host memory");
  if (st == GW_OK) {
    c->id = ++last_capture_id;
    c->origin = q;
    c->mode = mode;
    c->thread = pthread_self();
    c->next = captures;
    captures = c;
    q->cap = c;
  }
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return st;
}

GW_API gw_status gw_cpu_stream_capture_end(void *native, gw_cpu_graph **graph) {
  if (!graph) return gw__fail(GW_EINVAL, "gw_cpu_stream_capture_end: graph is NULL");
  *graph = NULL;
  gw_cpu_graph *g = malloc(sizeof *g);
  if (!g) return gw__fail(GW_ENOMEM, "gw_cpu_stream_capture_end: out of host memory");
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  queue *q = NULL;
  gw_status st = capture_target("gw_cpu_stream_capture_end", native, &q);
  if (st == GW_OK && (!q->cap || q->cap->origin != q))
    st = gw__fail(GW_EINVAL, "gw_cpu_stream_capture_end: %p %s", native,
                  q->cap ? "joined a capture it did not begin" : "is not capturing");
  if (st == GW_OK) {
    const char *why = q->cap->invalid;
    g->n = q->cap->n;
    gw__cpu_capture_close(q->cap, &g->head);
    if (why) {
      free_items(g->head);
      st = gw__fail(GW_EBACKEND,
                    "gw_cpu_stream_capture_end: the capture was invalidated by %s "
                    "(cudaErrorStreamCaptureInvalidated)",
                    why);
    }
  }
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  if (st != GW_OK)
    free(g);
  else
    *graph = g;
  return st;
}

GW_API int gw_cpu_stream_capture_items(void *native) {
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  queue *q = native ? gw__cpu_find_live(native) : NULL;
  int n = q && q->cap ? q->cap->n : -1;
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return n;
}

GW_API int gw_cpu_graph_items(const gw_cpu_graph *g) { return g ? g->n : 0; }

GW_API gw_status gw_cpu_graph_launch(gw_cpu_graph *g, void *native) {
  if (!g) return gw__fail(GW_EINVAL, "gw_cpu_graph_launch: graph is NULL");
  /* Every item's copy is made first: a launch queues all of the graph or nothing. */
  item *head = NULL, **tail = &head;
  for (const item *it = g->head; it; it = it->next) {
    item *c = malloc(sizeof *c);
    gw__xfer *x = NULL;
    if (c && it->kind == IT_BATCH && !(x = malloc((size_t)it->u.b.n * sizeof *x))) {
      free(c);
      c = NULL;
    }
    if (!c) {
      free_items(head);
      return gw__fail(GW_ENOMEM, "gw_cpu_graph_launch: out of host memory");
    }
    *c = *it;
    c->next = NULL;
    c->heap = true;
    if (x) {
      memcpy(x, it->u.b.x, (size_t)it->u.b.n * sizeof *x);
      c->u.b.x = x;
    }
    *tail = c;
    tail = &c->next;
  }
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  queue *q = native ? gw__cpu_find_live(native) : gw__cpu_legacy_of(0);
  gw_status st = GW_OK;
  if (!q)
    st = gw__fail(GW_EINVAL, "gw_cpu_graph_launch: %p is not a live stream of the cpu backend",
                  native);
  else if (q->dead)
    st = gw__fail(GW_EINVAL, "gw_cpu_graph_launch: the stream was destroyed by its owner");
  else if (q->cap) /* a graph launched into a capture: its items are recorded */
    for (item *it = head, *n; it; it = n) {
      n = it->next;
      gw__cpu_capture_record(q, it);
    }
  else if (!q->has_thread && !gw__cpu_forked_child)
    st = gw__cpu_start_worker(q);
  if (st == GW_OK && !q->cap) {
    for (item *it = head, *n; it; it = n) {
      n = it->next;
      gw__cpu_push(q, it);
    }
    gw__cpu_child_drain();
  }
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  if (st != GW_OK) free_items(head);
  return st;
}

GW_API gw_status gw_cpu_stream_wait_stream(void *waiter, void *waited) {
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  queue *w = NULL, *d = NULL;
  gw_status st = capture_target("gw_cpu_stream_wait_stream", waiter, &w);
  if (st == GW_OK) st = capture_target("gw_cpu_stream_wait_stream", waited, &d);
  item *it = NULL;
  if (st == GW_OK && d->cap) {
    if (w->cap && w->cap != d->cap)
      st = gw__cpu_capture_invalidate(w, "cudaErrorStreamCaptureIsolation",
                                      "a wait for a stream of another capture");
    else
      w->cap = d->cap; /* joins (fork) */
  } else if (st == GW_OK && w != d && d->done < d->queued) {
    if (w->cap)
      st = gw__cpu_capture_invalidate(w, "cudaErrorStreamCaptureIsolation",
                                      "a wait for work outside the capture");
    else if (!(it = malloc(sizeof *it)))
      st = gw__fail(GW_ENOMEM, "gw_cpu_stream_wait_stream: out of host memory");
    else if (!w->has_thread && !gw__cpu_forked_child && (st = gw__cpu_start_worker(w)) != GW_OK)
      free(it);
    else {
      *it = (item){.kind = IT_WAIT, .heap = true, .wait_q = d, .wait_ticket = d->queued};
      d->refs++;
      gw__cpu_push(w, it);
      gw__cpu_child_drain();
    }
  }
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return st;
}

GW_API void gw_cpu_graph_destroy(gw_cpu_graph *g) {
  if (!g) return;
  free_items(g->head);
  free(g);
}

/* The test hook gw_cpu_after_capture_query (lock): run once, by the next query. */
static void (*query_hook)(void *arg);
static void *query_hook_arg;

GW_API void gw_cpu_after_capture_query(void (*fn)(void *arg), void *arg) {
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  query_hook = fn;
  query_hook_arg = arg;
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
}

gw_status gw__cpu_stream_capturing(void *stream, uint64_t *id) {
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  queue *q = queue_of(stream);
  gw_status st = legacy_conflict_query(q);
  *id = q->cap ? q->cap->id : 0;
  void (*hook)(void *) = query_hook;
  void *arg = query_hook_arg;
  query_hook = NULL;
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  /* After the answer, before the caller acts on it: where another thread's capture could
   * begin on a GPU (gw_cpu_after_capture_query). Outside the lock: the hook may capture. */
  if (hook) hook(arg);
  return st;
}
