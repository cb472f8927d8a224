/*
 * A "big reader" lock: a reader touches only its own cache line (one of BR_STRIPES
 * counters, picked per thread), so threads taking the read side at once do not bounce a
 * shared line as a pthread rwlock's counter does; a writer (rare: it is about to call the
 * runtime for milliseconds anyway) flags itself and waits for every stripe to drain.
 * Correctness is Dekker's: a reader increments its stripe then reads the flag, a writer
 * sets the flag then reads the stripes, all sequentially consistent, so one of them sees
 * the other. Not reentrant; a reader must not take the write side.
 */
#ifndef GW_CORE_BRLOCK_H
#define GW_CORE_BRLOCK_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "tls_fast.h"

#define BR_STRIPES 64

typedef struct {
  _Alignas(64) atomic_int readers;
} br_stripe;

typedef struct {
  br_stripe stripe[BR_STRIPES];
  _Alignas(64) atomic_int writer; /* a writer holds the lock or waits for readers */
  pthread_mutex_t writers;        /* writers among themselves; readers wait on it */
  atomic_uint next;               /* hands out stripes to threads */
} br_lock;

#define BR_LOCK_INITIALIZER \
  { .writers = PTHREAD_MUTEX_INITIALIZER }

static inline int br_stripe_of_thread(br_lock *l) {
  static _Thread_local int mine GW__TLS_FAST = -1;
  if (mine < 0)
    mine = (int)(atomic_fetch_add_explicit(&l->next, 1, memory_order_relaxed) % BR_STRIPES);
  return mine;
}

/* Read-lock on stripe i (any stripe is correct; the thread's own one shares no line).
 * Returns i, to give back to br_read_unlock. */
static inline int br_read_lock_on(br_lock *l, int i) {
  for (;;) {
    atomic_fetch_add(&l->stripe[i].readers, 1);
    if (!atomic_load(&l->writer)) return i;
    atomic_fetch_sub(&l->stripe[i].readers, 1);
    pthread_mutex_lock(&l->writers); /* sleep until the writer is done */
    pthread_mutex_unlock(&l->writers);
  }
}

/* Returns the stripe to give back to br_read_unlock. */
static inline int br_read_lock(br_lock *l) { return br_read_lock_on(l, br_stripe_of_thread(l)); }

static inline void br_read_unlock(br_lock *l, int i) {
  atomic_fetch_sub_explicit(&l->stripe[i].readers, 1, memory_order_release);
}

static inline void br_write_lock(br_lock *l) {
  pthread_mutex_lock(&l->writers);
  atomic_store(&l->writer, 1);
  for (int i = 0; i < BR_STRIPES; i++)
    while (atomic_load(&l->stripe[i].readers) != 0) sched_yield();
}

static inline void br_write_unlock(br_lock *l) {
  atomic_store(&l->writer, 0);
  pthread_mutex_unlock(&l->writers);
}

#endif /* GW_CORE_BRLOCK_H */
