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
 *   - freeing backend memory waits for every queue first (cudaFree synchronizes), so a
 *     release after queued work is safe, as on CUDA.
 *   - graph capture (cudaStreamBeginCapture's rules, see "capture" below): work queued on
 *     a capturing stream is recorded, not run; a launch of the graph queues copies of it
 *     (in the order it was recorded, a valid order for every dependency of the capture);
 * Ordering is decided with one global enqueue sequence number: an item only ever waits
 * for items with a smaller number, so the model cannot deadlock whatever the caller does.
 *
 * One mutex and one condition variable for all of it: the model is for tests, where
 * simplicity (and TSan seeing every hand-over through one lock) matters more than the
 * wake-ups a broadcast costs. The lock is never held while work runs, and no other lock
 * of the library is taken while it is held (fork.c relies on that: it is innermost).
 */
#include "cpu_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { IT_COPY, IT_FILL, IT_WAIT, IT_CALLER, IT_NOP, IT_BATCH } item_kind;
typedef enum { Q_LEGACY, Q_BLOCKING, Q_NONBLOCKING } queue_kind;
typedef enum { BY_LEGACY, BY_GPUWRAP, BY_EXTERNAL } queue_owner;
_Static_assert(Q_LEGACY == 0 && BY_LEGACY == 0,
               "the static legacy slots are legacy queues as zeroed");

typedef struct queue queue;
typedef struct capture capture;

typedef struct item {
  struct item *next;
  item_kind kind;
  bool heap;             /* malloc'd (worker items); caller items live on the caller's stack */
  uint64_t seq;          /* global enqueue order */
  uint64_t ticket;       /* 1-based position on its queue */
  uint64_t legacy_after; /* blocking queue: legacy ticket to wait for (0: none) */
  queue *wait_q;         /* IT_WAIT: the event's queue (referenced) and ticket */
  uint64_t wait_ticket;
  union {
    gw__xfer x;
    gw__fillspec f;
    struct {
      gw__xfer *x; /* IT_BATCH: malloc'd, freed when the item completes */
      int n;
    } b;
  } u;
} item;

struct queue {
  int device;
  queue_kind kind;
  queue_owner owner;
  item *head, *tail; /* head stays queued until it completed */
  uint64_t queued;   /* tickets handed out */
  uint64_t done;     /* ticket of the last completed item (FIFO) */
  int refs;          /* owner + borrowed handles + events + wait items (not legacy) */
  bool stop;         /* owner destroys it: the worker exits once it is drained */
  bool dead;         /* destroyed by its owner: no new work */
  bool has_thread;
  pthread_t thread;
  queue *next_live; /* the table of live non-legacy queues */
  capture *cap;     /* the capture this queue is in (began or joined), or NULL; never legacy */
};

/* A capture: begun on its origin queue, joined by every queue that waits on an event
 * recorded in it; work queued on any of them is recorded here instead of queued. */
struct capture {
  uint64_t id; /* never 0 */
  queue *origin;
  gw_cpu_capture_mode mode;
  pthread_t thread;    /* that began it */
  const char *invalid; /* what invalidated it, or NULL */
  item *head, *tail;
  int n;
  capture *next; /* the live captures */
};

struct gw_cpu_graph {
  item *head;
  int n;
};

/* The backend's stream object: the queue, and whether destroying it destroys the queue. */
typedef struct {
  queue *q;
  bool owned;
} handle;

typedef struct {
  queue *q; /* NULL: never recorded (complete, as a fresh CUDA event) */
  uint64_t ticket;
  uint64_t cap_id; /* last recorded in this capture (0: none): a node of its graph, not work */
} event;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER; /* any progress: broadcast */
static queue legacy[GW__CPU_MAX_DEVICES];              /* lock; device set at first use */
static queue *live;                                    /* lock */
static uint64_t next_seq = 1;                          /* lock */
static uint64_t last_capture_id;                       /* lock */
static capture *captures;                              /* lock: the live ones */
static bool forked_child;                              /* lock: workers must be restarted */

/* ---- queues (lock held) ---- */

static queue *legacy_of(int device) {
  queue *q = &legacy[device];
  /* The static slots are zero: kind Q_LEGACY, owner BY_LEGACY already. Only the device is
   * set, once: rewriting the fields on every call raced (TSan) with the readers that take
   * no lock (gw__cpu_stream_native reads kind), harmless as the values never changed. */
  if (q->device != device) q->device = device;
  return q;
}

static void unref(queue *q) {
  if (q->owner == BY_LEGACY) return;
  if (--q->refs == 0) free(q); /* unlinked and its worker joined when the owner destroyed it */
}

/* Whether every item with seq < before on the device's blocking queues has completed. */
static bool blocking_done_before(int device, uint64_t before) {
  for (queue *b = live; b; b = b->next_live)
    if (b->device == device && b->kind == Q_BLOCKING && b->head && b->head->seq < before)
      return false;
  return true;
}

/* The head h of q may run: its stream-ordering dependencies have completed. */
static bool ready(const queue *q, const item *h) {
  if (h->kind == IT_WAIT && h->wait_q->done < h->wait_ticket) return false;
  if (q->kind == Q_BLOCKING && h->legacy_after && legacy[q->device].done < h->legacy_after)
    return false;
  if (q->kind == Q_LEGACY && !blocking_done_before(q->device, h->seq)) return false;
  return true;
}

static void *worker(void *arg);

static gw_status start_worker(queue *q) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  /* The legacy worker exits when its queue is empty and is never joined. */
  if (q->kind == Q_LEGACY) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&q->thread, &attr, worker, q);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    return gw__fail(GW_EBACKEND, "cpu backend: cannot start a stream's worker thread: %s",
                    strerror(rc));
  q->has_thread = true;
  return GW_OK;
}

/* Append it to q (lock held), giving it its ticket, sequence number and dependencies. */
static void push(queue *q, item *it) {
  it->next = NULL;
  it->seq = next_seq++;
  it->ticket = ++q->queued;
  it->legacy_after = q->kind == Q_BLOCKING ? legacy[q->device].queued : 0;
  if (q->tail)
    q->tail->next = it;
  else
    q->head = it;
  q->tail = it;
  pthread_cond_broadcast(&cond);
}

/* Out of line: gcc -O3 inlines complete() into the synchronous path, whose item lives on
 * the stack with heap == false, and then warns about a free() that never runs. */
__attribute__((noinline)) static void free_item(item *h) { free(h); }

/* Pop q's head, which has run. */
static void complete(queue *q, item *h) {
  q->head = h->next;
  if (!q->head) q->tail = NULL;
  q->done = h->ticket;
  if (h->kind == IT_WAIT) unref(h->wait_q);
  if (h->kind == IT_BATCH) free(h->u.b.x);
  if (h->heap) free_item(h);
  pthread_cond_broadcast(&cond);
}

static void run_item(item *h) {
  /* Arguments were checked at call time, so the loops cannot fail here (a worker has no
   * caller to report to). */
  if (h->kind == IT_COPY)
    (void)gw__cpu_copy(&h->u.x);
  else if (h->kind == IT_FILL)
    (void)gw__cpu_fill(&h->u.f);
  else if (h->kind == IT_BATCH)
    for (int i = 0; i < h->u.b.n; i++) /* in order: what the batch promises at least */
      (void)gw__cpu_copy(&h->u.b.x[i]);
}

/*
 * After fork() no worker exists in the child, and none is started there (the parent's
 * cannot be joined, and TSan, among others, refuses threads made after a multi-threaded
 * fork): the child's queues are run by the calling thread instead, every queued item in
 * global sequence order, which satisfies every dependency (they only point to smaller
 * numbers). So in a child each call completes its work (and all work queued before it)
 * before returning: correct, only no longer asynchronous. Lock held.
 */
static void child_drain(void) {
  while (forked_child) {
    queue *best = NULL;
    for (int d = 0; d < GW__CPU_MAX_DEVICES; d++)
      if (legacy[d].head && (!best || legacy[d].head->seq < best->head->seq)) best = &legacy[d];
    for (queue *q = live; q; q = q->next_live)
      if (q->head && (!best || q->head->seq < best->head->seq)) best = q;
    if (!best) return;
    item *h = best->head;
    if (h->kind == IT_CALLER) {
      /* a thread of the child is running its own synchronous work: let it finish */
      pthread_cond_wait(&cond, &lock);
      continue;
    }
    run_item(h);
    complete(best, h);
  }
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void *worker(void *arg) {
  queue *q = arg;
  long delay = gw__cpu_config_get()->stream_delay_us;
  pthread_mutex_lock(&lock);
  for (;;) {
    item *h = q->head;
    if (!h) {
      if (q->stop || q->kind == Q_LEGACY) break;
      pthread_cond_wait(&cond, &lock);
      continue;
    }
    /* Caller items are the caller's to run (it waits for the same readiness). */
    if (h->kind == IT_CALLER || !ready(q, h)) {
      pthread_cond_wait(&cond, &lock);
      continue;
    }
    pthread_mutex_unlock(&lock);
    if (delay > 0 && (h->kind == IT_COPY || h->kind == IT_FILL || h->kind == IT_BATCH)) {
      sleep_us(delay);
      /* Through the lock after the sleep: whatever the host or another stream did
       * during it happens-before this item's work, as it did in time (TSan sees the
       * race the test provoked as the ordering it had, not as a data race). */
      pthread_mutex_lock(&lock);
      pthread_mutex_unlock(&lock);
    }
    run_item(h);
    pthread_mutex_lock(&lock);
    complete(q, h);
  }
  if (q->kind == Q_LEGACY) q->has_thread = false;
  pthread_mutex_unlock(&lock);
  return NULL;
}

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

static gw_status invalidate(queue *q, const char *err, const char *why) {
  if (!q->cap->invalid) q->cap->invalid = why;
  return gw__fail(GW_EBACKEND,
                  "cpu backend: %s on a capturing stream: %s (the capture is invalidated)", why,
                  err);
}

/* Whether the calling thread may make a potentially unsafe call now; invalidates the
 * captures it would break and fails. */
static gw_status guard(const char *call) {
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
  pthread_mutex_lock(&lock);
  gw_status st = guard(call);
  pthread_mutex_unlock(&lock);
  return st;
}

/* Work on the legacy stream while a blocking stream of its device captures: the implicit
 * dependency between them would cross the capture (cudaErrorStreamCaptureImplicit). */
static gw_status legacy_conflict(queue *q) {
  if (q->kind != Q_LEGACY) return GW_OK;
  for (queue *b = live; b; b = b->next_live)
    if (b->device == q->device && b->kind == Q_BLOCKING && b->cap)
      return invalidate(b, "cudaErrorStreamCaptureImplicit",
                        "legacy-stream work while a blocking stream of the device captures");
  return GW_OK;
}

/* The query's side of it: the legacy stream may not be used now (changes nothing). */
static gw_status legacy_conflict_query(queue *q) {
  if (q->kind != Q_LEGACY) return GW_OK;
  for (queue *b = live; b; b = b->next_live)
    if (b->device == q->device && b->kind == Q_BLOCKING && b->cap)
      return gw__fail(GW_ENOTSUP,
                      "stream: the legacy default stream cannot take work while a blocking "
                      "stream of its device is being captured (cudaErrorStreamCaptureImplicit: "
                      "it would invalidate that capture)");
  return GW_OK;
}

/* Record the heap item `it` into q's capture. */
static void record(queue *q, item *it) {
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
static void capture_close(capture *c, item **items) {
  for (queue *q = live; q; q = q->next_live)
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
static capture *capture_by_id(uint64_t id) {
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

/* Run `it` on the calling thread as an item of q: queued (so later work of other streams
 * is ordered after it as after any item of q), run once it is q's head and ready, then
 * completed. For synchronous calls (q = the legacy stream) and pageable-memory work. */
static gw_status run_here(queue *q, item *it) {
  it->kind = IT_CALLER;
  it->heap = false;
  pthread_mutex_lock(&lock);
  gw_status st = GW_OK;
  if (q->dead)
    st = gw__fail(GW_EINVAL, "cpu backend: the stream was destroyed by its owner");
  else if (q->cap) /* work the host runs now cannot be recorded */
    st = invalidate(q, "cudaErrorStreamCaptureUnsupported",
                    "host-run (synchronous) work queued on it");
  else if ((st = legacy_conflict(q)) == GW_OK)
    st = guard("a synchronous copy or fill");
  if (st != GW_OK) {
    pthread_mutex_unlock(&lock);
    return st;
  }
  child_drain();
  push(q, it);
  while (q->head != it || !ready(q, it)) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  return GW_OK;
}

/* The second half of run_here: the work ran, pop the item. */
static void run_here_done(queue *q, item *it) {
  pthread_mutex_lock(&lock);
  complete(q, it);
  pthread_mutex_unlock(&lock);
}

/* Queue a worker item (malloc'd copy of *tmpl) on q. */
static gw_status enqueue(queue *q, const item *tmpl) {
  item *it = malloc(sizeof *it);
  if (!it) return gw__fail(GW_ENOMEM, "cpu backend: out of host memory for a stream's work item");
  *it = *tmpl;
  it->heap = true;
  pthread_mutex_lock(&lock);
  gw_status st = GW_OK;
  if (q->dead)
    st = gw__fail(GW_EINVAL, "cpu backend: the stream was destroyed by its owner");
  else if (q->cap) {
    record(q, it);
    pthread_mutex_unlock(&lock);
    return GW_OK;
  } else if ((st = legacy_conflict(q)) != GW_OK)
    ;
  else if (!q->has_thread && !forked_child)
    st = start_worker(q); /* the legacy stream's: it exits when its queue is empty */
  if (st == GW_OK) {
    push(q, it);
    child_drain();
  }
  pthread_mutex_unlock(&lock);
  if (st != GW_OK) free(it);
  return st;
}

/* ---- copy and fill ---- */

static queue *queue_of(void *stream) { return ((handle *)stream)->q; }

/* The queue a copy or fill goes to: the stream's, or the device's legacy default stream. */
static queue *target_queue(int device, void *stream) {
  pthread_mutex_lock(&lock);
  queue *q = stream ? queue_of(stream) : legacy_of(device);
  pthread_mutex_unlock(&lock);
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

/* Whether every item with seq < before of the device's queues (device -1: all) is done. */
static bool device_done_before(int device, uint64_t before) {
  for (int d = 0; d < GW__CPU_MAX_DEVICES; d++)
    if ((device < 0 || d == device) && legacy[d].head && legacy[d].head->seq < before) return false;
  for (queue *q = live; q; q = q->next_live)
    if ((device < 0 || q->device == device) && q->head && q->head->seq < before) return false;
  return true;
}

void gw__cpu_streams_quiesce(int device) {
  pthread_mutex_lock(&lock);
  child_drain();
  uint64_t before = next_seq;
  while (!device_done_before(device, before)) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
}

gw_status gw__cpu_device_synchronize(int device) {
  gw_status st = gw__cpu_capture_guard("a device synchronize");
  if (st == GW_OK) gw__cpu_streams_quiesce(device);
  return st;
}

/* lock held */
static void wait_queue(queue *q) {
  child_drain();
  uint64_t target = q->queued;
  while (q->done < target) pthread_cond_wait(&cond, &lock);
}

gw_status gw__cpu_stream_synchronize(void *stream) {
  pthread_mutex_lock(&lock);
  queue *q = queue_of(stream);
  gw_status st = q->cap ? invalidate(q, "cudaErrorStreamCaptureUnsupported", "a stream synchronize")
                        : guard("a stream synchronize");
  if (st == GW_OK) wait_queue(q);
  pthread_mutex_unlock(&lock);
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
  pthread_mutex_lock(&lock);
  gw_status st = forked_child ? GW_OK : start_worker(q);
  if (st == GW_OK) {
    q->next_live = live;
    live = q;
  }
  pthread_mutex_unlock(&lock);
  if (st != GW_OK)
    free(q);
  else
    *out = q;
  return st;
}

/* The owner's destroy: no new work, drain, join the worker, leave the table, drop the
 * owner's reference (handles, events and wait items may still hold the memory). */
static void destroy_queue(queue *q) {
  pthread_mutex_lock(&lock);
  q->dead = true;
  q->stop = true;
  child_drain();
  pthread_cond_broadcast(&cond);
  bool join = q->has_thread;
  pthread_mutex_unlock(&lock);
  if (join) pthread_join(q->thread, NULL); /* it exits once the queue is drained */
  pthread_mutex_lock(&lock);
  q->has_thread = false;
  for (queue **p = &live; *p; p = &(*p)->next_live)
    if (*p == q) {
      *p = q->next_live;
      break;
    }
  pthread_cond_broadcast(&cond); /* a legacy item may have waited on its last head */
  if (q->cap && q->cap->origin == q)
    capture_close(q->cap, NULL); /* a capture never ended: its graph is lost, as on CUDA */
  q->cap = NULL;
  unref(q);
  pthread_mutex_unlock(&lock);
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
    pthread_mutex_lock(&lock);
    unref(h->q);
    pthread_mutex_unlock(&lock);
  }
  free(h);
}

/* A live queue by its native handle, comparing addresses only (lock held). */
static queue *find_live(const void *native) {
  for (queue *q = live; q; q = q->next_live)
    if ((const void *)q == native) return q;
  return NULL;
}

bool gw__cpu_stream_is_native(const void *native) {
  if (!native) return false;
  pthread_mutex_lock(&lock);
  bool found = find_live(native) != NULL;
  pthread_mutex_unlock(&lock);
  return found;
}

gw_status gw__cpu_stream_borrow(int device, void *native, void **stream) {
  handle *h = malloc(sizeof *h);
  if (!h) return gw__fail(GW_ENOMEM, "stream_borrow: out of memory");
  h->owned = false;
  gw_status st = GW_OK;
  pthread_mutex_lock(&lock);
  if (!native) {
    h->q = legacy_of(device);
  } else {
    queue *q = find_live(native);
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
  pthread_mutex_unlock(&lock);
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

void gw__cpu_event_destroy(void *ev) {
  event *e = ev;
  if (!e) return;
  pthread_mutex_lock(&lock);
  if (e->q) unref(e->q);
  pthread_mutex_unlock(&lock);
  free(e);
}

gw_status gw__cpu_event_record(void *ev, void *stream) {
  event *e = ev;
  queue *q = queue_of(stream);
  pthread_mutex_lock(&lock);
  if (q->owner != BY_LEGACY) q->refs++;
  if (e->q) unref(e->q);
  e->q = q;
  e->ticket = q->queued;
  e->cap_id = q->cap ? q->cap->id : 0;
  pthread_mutex_unlock(&lock);
  return GW_OK;
}

gw_status gw__cpu_stream_wait_event(void *stream, void *ev) {
  event *e = ev;
  queue *q = queue_of(stream);
  item *it = malloc(sizeof *it);
  if (!it) return gw__fail(GW_ENOMEM, "stream_wait_event: out of memory");
  *it = (item){.kind = IT_WAIT, .heap = true};
  gw_status st = GW_OK;
  bool queued = false;
  pthread_mutex_lock(&lock);
  capture *ec = e->cap_id ? capture_by_id(e->cap_id) : NULL;
  if (e->cap_id && (!ec || (q->cap && q->cap != ec))) {
    /* A node of a capture that ended, or of another one: a dependency across captures. */
    if (q->cap)
      st = invalidate(q, "cudaErrorStreamCaptureIsolation",
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
    st = invalidate(q, "cudaErrorStreamCaptureIsolation", "a wait for work outside the capture");
  } else if (e->q && e->q != q && e->q->done < e->ticket) {
    /* Nothing pending, or pending on q itself (FIFO orders it already): no item. */
    if (q->dead)
      st = gw__fail(GW_EINVAL, "stream_wait_event: the stream was destroyed by its owner");
    else if (!q->has_thread && !forked_child)
      st = start_worker(q);
    if (st == GW_OK) {
      it->wait_q = e->q;
      it->wait_ticket = e->ticket;
      if (e->q->owner != BY_LEGACY) e->q->refs++;
      push(q, it);
      queued = true;
      child_drain();
    }
  }
  pthread_mutex_unlock(&lock);
  if (!queued) free(it);
  return st;
}

gw_status gw__cpu_event_query(void *ev) {
  const event *e = ev;
  pthread_mutex_lock(&lock);
  gw_status st = guard("an event query");
  if (st == GW_OK && e->cap_id)
    st = gw__fail(GW_EBACKEND, "cpu backend: event query: the event was last recorded in a "
                               "capturing stream (cudaErrorCapturedEvent)");
  if (st != GW_OK) {
    pthread_mutex_unlock(&lock);
    return st;
  }
  bool complete = !e->q || e->q->done >= e->ticket;
  if (!complete) child_drain();
  pthread_mutex_unlock(&lock);
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
  pthread_mutex_lock(&lock);
  queue *q = native ? find_live(native) : NULL;
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
  pthread_mutex_unlock(&lock);
  if (st == GW_OK) destroy_queue(q);
  return st;
}

/* ---- the test control: capture, graphs, launches ---- */

/* A live, non-legacy queue by native handle (lock held), or a failure naming `who`. */
static gw_status capture_target(const char *who, void *native, queue **out) {
  queue *q = native ? find_live(native) : NULL;
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
  pthread_mutex_lock(&lock);
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
  pthread_mutex_unlock(&lock);
  return st;
}

GW_API gw_status gw_cpu_stream_capture_end(void *native, gw_cpu_graph **graph) {
  if (!graph) return gw__fail(GW_EINVAL, "gw_cpu_stream_capture_end: graph is NULL");
  *graph = NULL;
  gw_cpu_graph *g = malloc(sizeof *g);
  if (!g) return gw__fail(GW_ENOMEM, "gw_cpu_stream_capture_end: out of host memory");
  pthread_mutex_lock(&lock);
  queue *q = NULL;
  gw_status st = capture_target("gw_cpu_stream_capture_end", native, &q);
  if (st == GW_OK && (!q->cap || q->cap->origin != q))
    st = gw__fail(GW_EINVAL, "gw_cpu_stream_capture_end: %p %s", native,
                  q->cap ? "joined a capture it did not begin" : "is not capturing");
  if (st == GW_OK) {
    const char *why = q->cap->invalid;
    g->n = q->cap->n;
    capture_close(q->cap, &g->head);
    if (why) {
      free_items(g->head);
      st = gw__fail(GW_EBACKEND,
                    "gw_cpu_stream_capture_end: the capture was invalidated by %s "
                    "(cudaErrorStreamCaptureInvalidated)",
                    why);
    }
  }
  pthread_mutex_unlock(&lock);
  if (st != GW_OK)
    free(g);
  else
    *graph = g;
  return st;
}

GW_API int gw_cpu_stream_capture_items(void *native) {
  pthread_mutex_lock(&lock);
  queue *q = native ? find_live(native) : NULL;
  int n = q && q->cap ? q->cap->n : -1;
  pthread_mutex_unlock(&lock);
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
  pthread_mutex_lock(&lock);
  queue *q = native ? find_live(native) : legacy_of(0);
  gw_status st = GW_OK;
  if (!q)
    st = gw__fail(GW_EINVAL, "gw_cpu_graph_launch: %p is not a live stream of the cpu backend",
                  native);
  else if (q->dead)
    st = gw__fail(GW_EINVAL, "gw_cpu_graph_launch: the stream was destroyed by its owner");
  else if (q->cap) /* a graph launched into a capture: its items are recorded */
    for (item *it = head, *n; it; it = n) {
      n = it->next;
      record(q, it);
    }
  else if (!q->has_thread && !forked_child)
    st = start_worker(q);
  if (st == GW_OK && !q->cap) {
    for (item *it = head, *n; it; it = n) {
      n = it->next;
      push(q, it);
    }
    child_drain();
  }
  pthread_mutex_unlock(&lock);
  if (st != GW_OK) free_items(head);
  return st;
}

GW_API gw_status gw_cpu_stream_wait_stream(void *waiter, void *waited) {
  pthread_mutex_lock(&lock);
  queue *w = NULL, *d = NULL;
  gw_status st = capture_target("gw_cpu_stream_wait_stream", waiter, &w);
  if (st == GW_OK) st = capture_target("gw_cpu_stream_wait_stream", waited, &d);
  item *it = NULL;
  if (st == GW_OK && d->cap) {
    if (w->cap && w->cap != d->cap)
      st = invalidate(w, "cudaErrorStreamCaptureIsolation",
                      "a wait for a stream of another capture");
    else
      w->cap = d->cap; /* joins (fork) */
  } else if (st == GW_OK && w != d && d->done < d->queued) {
    if (w->cap)
      st = invalidate(w, "cudaErrorStreamCaptureIsolation", "a wait for work outside the capture");
    else if (!(it = malloc(sizeof *it)))
      st = gw__fail(GW_ENOMEM, "gw_cpu_stream_wait_stream: out of host memory");
    else if (!w->has_thread && !forked_child && (st = start_worker(w)) != GW_OK)
      free(it);
    else {
      *it = (item){.kind = IT_WAIT, .heap = true, .wait_q = d, .wait_ticket = d->queued};
      d->refs++;
      push(w, it);
      child_drain();
    }
  }
  pthread_mutex_unlock(&lock);
  return st;
}

GW_API void gw_cpu_graph_destroy(gw_cpu_graph *g) {
  if (!g) return;
  free_items(g->head);
  free(g);
}

gw_status gw__cpu_stream_capturing(void *stream, uint64_t *id) {
  pthread_mutex_lock(&lock);
  queue *q = queue_of(stream);
  gw_status st = legacy_conflict_query(q);
  *id = q->cap ? q->cap->id : 0;
  pthread_mutex_unlock(&lock);
  return st;
}

/* ---- fork ---- */

void gw__cpu_streams_lock(int on) {
  if (on)
    pthread_mutex_lock(&lock);
  else
    pthread_mutex_unlock(&lock);
}

/* A queue in a forked child: no worker survives fork (joining the parent's would hang);
 * the child's callers run its work (child_drain). An item a dead worker was running stays
 * the head and runs again; a caller item belongs to a thread that is gone: it becomes a
 * no-op, so that the work queued after it is not held up forever. */
static void orphan(queue *q) {
  q->has_thread = false;
  for (item *it = q->head; it; it = it->next)
    if (it->kind == IT_CALLER) it->kind = IT_NOP;
}

/* In the child, with the lock held by this (the only) thread since the prepare handler. */
void gw__cpu_streams_child(void) {
  /* Threads that waited on the condition variable do not exist here: a fresh one. */
  static const pthread_cond_t fresh = PTHREAD_COND_INITIALIZER;
  memcpy(&cond, &fresh, sizeof cond);
  forked_child = true;
  for (int d = 0; d < GW__CPU_MAX_DEVICES; d++) orphan(&legacy[d]);
  for (queue *q = live; q; q = q->next_live) orphan(q);
  pthread_mutex_unlock(&lock);
}

static void fork_prepare(void) { gw__cpu_streams_lock(1); }
static void fork_parent(void) { gw__cpu_streams_lock(0); }

/*
 * Registered before fork.c's handlers (a constructor priority runs it before the
 * default-priority constructors of the library): prepare handlers run in the reverse
 * order of registration, so this lock is taken LAST, innermost, after the core's and the
 * model's locks. That order is required: core code may hold its locks while calling into
 * the backend (a free, which waits for the streams), never the other way round.
 */
__attribute__((constructor(200))) static void install_fork_handlers(void) {
  pthread_atfork(fork_prepare, fork_parent, gw__cpu_streams_child);
}
