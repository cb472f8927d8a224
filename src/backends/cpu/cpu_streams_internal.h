/*
 * Private to the CPU model's streams: their core (cpu_queue.c), its graph capture
 * (cpu_capture.c) and the streams and events the ops use (cpu_streams.c): the queues, work
 * items and captures they share, and the one lock that guards all of them (see
 * cpu_streams.c for why there is only one, and why it is the innermost lock of the
 * library). Layers: cpu_queue.c calls neither of the others, cpu_capture.c calls only
 * cpu_queue.c, cpu_streams.c both. Every shared object and function below is used with
 * that lock held unless it says otherwise.
 */
#ifndef GW_CPU_STREAMS_INTERNAL_H
#define GW_CPU_STREAMS_INTERNAL_H

#include "cpu_internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* IT_SIGNAL / IT_SHWAIT: an interprocess event's record / wait (cpu_ipc_event.c).
 * IT_WRITEVAL / IT_WAITVAL: the stores and waits of a signalled batch (backend.h:
 * gw__signals): store a value into up to two 32-bit words / wait until both hold it. */
typedef enum {
  IT_COPY,
  IT_FILL,
  IT_WAIT,
  IT_CALLER,
  IT_NOP,
  IT_BATCH,
  IT_SIGNAL,
  IT_SHWAIT,
  IT_WRITEVAL,
  IT_WAITVAL
} item_kind;
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
  gw__cpu_evshm *sh; /* IT_SIGNAL / IT_SHWAIT: the page (referenced; cpu_ipc_event.c) */
  uint64_t sh_value; /* IT_SIGNAL: the record's seq; IT_SHWAIT: completed to wait for */
  union {
    gw__xfer x;
    gw__fillspec f;
    struct {
      gw__xfer *x; /* IT_BATCH: malloc'd, freed when the item completes */
      int n;
    } b;
    struct {
      uint32_t *w[2]; /* IT_WRITEVAL / IT_WAITVAL: the words (NULL: none) */
      uint32_t value;
    } v;
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

/* The backend's stream object: the queue, and whether destroying it destroys the queue. */
typedef struct {
  queue *q;
  bool owned;
} handle;

static inline queue *queue_of(void *stream) { return ((handle *)stream)->q; }

/* ---- the streams' state and queues (cpu_queue.c) ---- */

extern pthread_mutex_t gw__cpu_streams_mutex; /* the lock */
extern queue *gw__cpu_live;                   /* the live non-legacy queues */
extern bool gw__cpu_forked_child;             /* workers must not be started */

/* The device's legacy default stream. */
queue *gw__cpu_legacy_of(int device);
/* A live queue by its native handle, or NULL. */
queue *gw__cpu_find_live(const void *native);
gw_status gw__cpu_start_worker(queue *q);
/* Append it to q: its ticket, sequence number and dependencies. */
void gw__cpu_push(queue *q, item *it);
/* In a forked child, run the queued work on the calling thread (no workers there). */
void gw__cpu_child_drain(void);
/* The head h of q may run: its stream-ordering dependencies have completed. */
bool gw__cpu_queue_ready(const queue *q, const item *h);
/* h waits for another process (an interprocess event's record, a signalled batch's word),
 * which wakes nobody here: the caller polls. */
bool gw__cpu_waits_outside(const item *h);
/* Pop q's head h, which has run (freeing it if it is a worker item). */
void gw__cpu_queue_complete(queue *q, item *h);
/* Drop a reference to q (a legacy queue has none): freed with the last. */
void gw__cpu_queue_unref(queue *q);
/* Wait for any progress (the lock released while waiting) / announce some. */
void gw__cpu_queue_wait(void);
void gw__cpu_queue_wake(void);

/* ---- capture: the rules the model enforces (cpu_capture.c) ---- */

/* Fail with GW_EBACKEND for q's capture, invalidating it (`err` names CUDA's error, `why`
 * the call that broke it). */
gw_status gw__cpu_capture_invalidate(queue *q, const char *err, const char *why);
/* gw__cpu_capture_guard with the lock held. */
gw_status gw__cpu_capture_guard_held(const char *call);
/* Legacy-stream work while a blocking stream of its device captures: invalidates that
 * capture and fails (GW_OK for any other queue). */
gw_status gw__cpu_legacy_conflict(queue *q);
/* Record the heap item `it` into q's capture instead of queueing it. */
void gw__cpu_capture_record(queue *q, item *it);
/* The capture is over: every queue leaves it; its items go to *items (freed: items NULL). */
void gw__cpu_capture_close(capture *c, item **items);
/* A live capture by id, or NULL: ended. */
capture *gw__cpu_capture_by_id(uint64_t id);

#endif /* GW_CPU_STREAMS_INTERNAL_H */
