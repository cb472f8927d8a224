/*
 * The core of the CPU model's streams: the one lock and condition variable, the legacy
 * queues and the table of live ones, the global enqueue sequence, the workers that run
 * the queues, and what fork does to them. cpu_capture.c (the capture rules) and
 * cpu_streams.c (the streams and events the ops use) both stand on it, and it calls
 * neither: the model of ordering is cpu_streams.c's header comment, the shared types
 * cpu_streams_internal.h. Everything here runs with the lock held unless it says otherwise.
 */
#include "cpu_streams_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

pthread_mutex_t gw__cpu_streams_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER; /* any progress: broadcast */
static queue legacy[GW__CPU_MAX_DEVICES];              /* lock; device set at first use */
queue *gw__cpu_live;                                   /* lock */
static uint64_t next_seq = 1;                          /* lock */
bool gw__cpu_forked_child;                             /* lock: workers must be restarted */

/* ---- queues (lock held) ---- */

/* Wait for any progress (the lock held, released while waiting) / announce some. */
void gw__cpu_queue_wait(void) { pthread_cond_wait(&cond, &gw__cpu_streams_mutex); }
void gw__cpu_queue_wake(void) { pthread_cond_broadcast(&cond); }

queue *gw__cpu_legacy_of(int device) {
  queue *q = &legacy[device];
  /* The static slots are zero: kind Q_LEGACY, owner BY_LEGACY already. Only the device is
   * set, once: rewriting the fields on every call raced (TSan) with the readers that take
   * no lock (gw__cpu_stream_native reads kind), harmless as the values never changed. */
  if (q->device != device) q->device = device;
  return q;
}

void gw__cpu_queue_unref(queue *q) {
  if (q->owner == BY_LEGACY) return;
  if (--q->refs == 0) free(q); /* unlinked and its worker joined when the owner destroyed it */
}

/* Whether every item with seq < before on the device's blocking queues has completed. */
static bool blocking_done_before(int device, uint64_t before) {
  for (queue *b = gw__cpu_live; b; b = b->next_live)
    if (b->device == device && b->kind == Q_BLOCKING && b->head && b->head->seq < before)
      return false;
  return true;
}

/* Whether an interprocess wait's record has run, in whichever process made it. */
static bool shared_ready(const item *h) { return gw__cpu_evshm_reached(h->sh, h->sh_value); }

/* The words of a signalled batch: the model's device memory is host memory (shared with
 * the other process where exported, cpu_ipc.c), so C11 atomics on it are what the device's
 * own stores and loads are; lock-free, so they work across processes. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signalled batch's words need lock-free atomics");

static bool value_reached(const item *h) {
  for (int i = 0; i < 2; i++)
    if (h->u.v.w[i] &&
        (int32_t)(atomic_load_explicit((_Atomic uint32_t *)h->u.v.w[i], memory_order_acquire) -
                  h->u.v.value) < 0)
      return false;
  return true;
}

static void write_value(const item *h) {
  /* release: the stream's work before the store is visible to whoever sees the value */
  for (int i = 0; i < 2; i++)
    if (h->u.v.w[i])
      atomic_store_explicit((_Atomic uint32_t *)h->u.v.w[i], h->u.v.value, memory_order_release);
}

bool gw__cpu_waits_outside(const item *h) {
  return (h->kind == IT_SHWAIT && !shared_ready(h)) || (h->kind == IT_WAITVAL && !value_reached(h));
}

/* The head h of q may run: its stream-ordering dependencies have completed. */
bool gw__cpu_queue_ready(const queue *q, const item *h) {
  if (h->kind == IT_WAIT && h->wait_q->done < h->wait_ticket) return false;
  if (gw__cpu_waits_outside(h)) return false;
  if (q->kind == Q_BLOCKING && h->legacy_after && legacy[q->device].done < h->legacy_after)
    return false;
  if (q->kind == Q_LEGACY && !blocking_done_before(q->device, h->seq)) return false;
  return true;
}

static void *worker(void *arg);

/* A wait for another process's progress, which signals nothing here: a short timed wait
 * on the condition (local progress still wakes it at once), then the caller looks again. */
static void poll_wait(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += 50 * 1000;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  (void)pthread_cond_timedwait(&cond, &gw__cpu_streams_mutex, &ts);
}

/* A live queue by its native handle, comparing addresses only (lock held). */
queue *gw__cpu_find_live(const void *native) {
  for (queue *q = gw__cpu_live; q; q = q->next_live)
    if ((const void *)q == native) return q;
  return NULL;
}

gw_status gw__cpu_start_worker(queue *q) {
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
void gw__cpu_push(queue *q, item *it) {
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

/* Out of line: gcc -O3 inlines gw__cpu_queue_complete() into the synchronous path, whose item lives on
 * the stack with heap == false, and then warns about a free() that never runs. */
__attribute__((noinline)) static void free_item(item *h) { free(h); }

/* Pop q's head, which has run. */
void gw__cpu_queue_complete(queue *q, item *h) {
  q->head = h->next;
  if (!q->head) q->tail = NULL;
  q->done = h->ticket;
  if (h->kind == IT_WAIT) gw__cpu_queue_unref(h->wait_q);
  if (h->kind == IT_SIGNAL || h->kind == IT_SHWAIT) gw__cpu_evshm_unref(h->sh);
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
  else if (h->kind == IT_SIGNAL)
    gw__cpu_evshm_raise(h->sh, h->sh_value);
  else if (h->kind == IT_WRITEVAL)
    write_value(h);
}

/*
 * After fork() no worker exists in the child, and none is started there (the parent's
 * cannot be joined, and TSan, among others, refuses threads made after a multi-threaded
 * fork): the child's queues are run by the calling thread instead, every queued item in
 * global sequence order, which satisfies every dependency (they only point to smaller
 * numbers). So in a child each call completes its work (and all work queued before it)
 * before returning: correct, only no longer asynchronous. Lock held.
 */
void gw__cpu_child_drain(void) {
  while (gw__cpu_forked_child) {
    queue *best = NULL;
    for (int d = 0; d < GW__CPU_MAX_DEVICES; d++)
      if (legacy[d].head && (!best || legacy[d].head->seq < best->head->seq)) best = &legacy[d];
    for (queue *q = gw__cpu_live; q; q = q->next_live)
      if (q->head && (!best || q->head->seq < best->head->seq)) best = q;
    if (!best) return;
    item *h = best->head;
    if (h->kind == IT_CALLER) {
      /* a thread of the child is running its own synchronous work: let it finish */
      pthread_cond_wait(&cond, &gw__cpu_streams_mutex);
      continue;
    }
    if (gw__cpu_waits_outside(h)) { /* another process's record or store: poll */
      poll_wait();
      continue;
    }
    run_item(h);
    gw__cpu_queue_complete(best, h);
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
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  for (;;) {
    item *h = q->head;
    if (!h) {
      if (q->stop || q->kind == Q_LEGACY) break;
      pthread_cond_wait(&cond, &gw__cpu_streams_mutex);
      continue;
    }
    /* Caller items are the caller's to run (it waits for the same readiness). */
    if (gw__cpu_waits_outside(h)) {
      poll_wait();
      continue;
    }
    if (h->kind == IT_CALLER || !gw__cpu_queue_ready(q, h)) {
      pthread_cond_wait(&cond, &gw__cpu_streams_mutex);
      continue;
    }
    pthread_mutex_unlock(&gw__cpu_streams_mutex);
    if (delay > 0 && (h->kind == IT_COPY || h->kind == IT_FILL || h->kind == IT_BATCH)) {
      sleep_us(delay);
      /* Through the lock after the sleep: whatever the host or another stream did
       * during it happens-before this item's work, as it did in time (TSan sees the
       * race the test provoked as the ordering it had, not as a data race). */
      pthread_mutex_lock(&gw__cpu_streams_mutex);
      pthread_mutex_unlock(&gw__cpu_streams_mutex);
    }
    run_item(h);
    pthread_mutex_lock(&gw__cpu_streams_mutex);
    gw__cpu_queue_complete(q, h);
  }
  if (q->kind == Q_LEGACY) q->has_thread = false;
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
  return NULL;
}

/* ---- synchronisation ---- */

/* Whether every item with seq < before of the device's queues (device -1: all) is done. */
static bool device_done_before(int device, uint64_t before) {
  for (int d = 0; d < GW__CPU_MAX_DEVICES; d++)
    if ((device < 0 || d == device) && legacy[d].head && legacy[d].head->seq < before) return false;
  for (queue *q = gw__cpu_live; q; q = q->next_live)
    if ((device < 0 || q->device == device) && q->head && q->head->seq < before) return false;
  return true;
}

void gw__cpu_streams_quiesce(int device) {
  pthread_mutex_lock(&gw__cpu_streams_mutex);
  gw__cpu_child_drain();
  uint64_t before = next_seq;
  while (!device_done_before(device, before)) pthread_cond_wait(&cond, &gw__cpu_streams_mutex);
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
}

/* ---- fork ---- */

void gw__cpu_streams_lock(int on) {
  if (on)
    pthread_mutex_lock(&gw__cpu_streams_mutex);
  else
    pthread_mutex_unlock(&gw__cpu_streams_mutex);
}

/* A queue in a forked child: no worker survives fork (joining the parent's would hang);
 * the child's callers run its work (gw__cpu_child_drain). An item a dead worker was running stays
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
  gw__cpu_forked_child = true;
  for (int d = 0; d < GW__CPU_MAX_DEVICES; d++) orphan(&legacy[d]);
  for (queue *q = gw__cpu_live; q; q = q->next_live) orphan(q);
  pthread_mutex_unlock(&gw__cpu_streams_mutex);
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
