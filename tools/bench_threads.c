/*
 * The N-thread latency harness of `gpuwrap bench` (sections "query" and "wrap"): every thread
 * runs the same number of timed batches, all released at once, so the samples show the
 * per-call cost while all threads contend (a runtime lock, the registry lock), not the cost
 * of one thread running alone while the others are still starting.
 */
#include "alloc_count.h"
#include "bench.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
  gw_batch_fn fn;
  void *arg;
  int thread, batches, batch;
  double *samples; /* `batches` per-call seconds of this thread */
  unsigned long allocs;
  int failed;
  char err[192];
  /* Shared: the start gate and the barrier behind it. */
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
  int *go; /* 0 wait, 1 run, -1 give up (not every thread could be started) */
  pthread_barrier_t *bar;
} tjob;

/* Wait until the caller knows whether every thread started. A barrier alone cannot be
 * given up on: threads blocked in it are not cancellable, so a failed pthread_create would
 * leave them waiting forever. */
static int wait_gate(tjob *j) {
  pthread_mutex_lock(j->mu);
  while (*j->go == 0) pthread_cond_wait(j->cv, j->mu);
  int go = *j->go;
  pthread_mutex_unlock(j->mu);
  return go > 0;
}

static void open_gate(tjob *j, int go) {
  pthread_mutex_lock(j->mu);
  *j->go = go;
  pthread_cond_broadcast(j->cv);
  pthread_mutex_unlock(j->mu);
}

static void *tworker(void *arg) {
  tjob *j = arg;
  if (!wait_gate(j)) return NULL;
  /* One untimed call first: a thread's first call may set up thread-local state (error
   * text, allocator arena), which is not the steady per-call cost measured here. */
  if (j->fn(j->arg, j->thread, 1, j->err, sizeof j->err) != 0) j->failed = 1;
  pthread_barrier_wait(j->bar);
  for (int r = 0; r < j->batches && !j->failed; r++) {
    unsigned long a0 = gw_tool_alloc_count(); /* this thread's count: no contention on it */
    double t0 = gw_tool_now();
    if (j->fn(j->arg, j->thread, j->batch, j->err, sizeof j->err) != 0) j->failed = 1;
    j->samples[r] = (gw_tool_now() - t0) / j->batch;
    j->allocs += gw_tool_alloc_count() - a0;
  }
  return NULL;
}

gw_stat gw_bench_threads(gw_bench *b, const char *what, int threads, int batches, int batch,
                         gw_batch_fn fn, void *arg, double *allocs_per_call) {
  tjob *jobs = calloc((size_t)threads, sizeof *jobs);
  double *all = calloc((size_t)threads * (size_t)batches, sizeof *all);
  pthread_t *tid = calloc((size_t)threads, sizeof *tid);
  gw_stat st = {0};
  if (allocs_per_call) *allocs_per_call = -1;
  if (!jobs || !all || !tid) {
    gw_bench_error(b, "%s: out of memory", what);
    goto out;
  }
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  pthread_barrier_t bar;
  int go = 0;
  pthread_barrier_init(&bar, NULL, (unsigned)threads);
  for (int t = 0; t < threads; t++)
    jobs[t] = (tjob){.fn = fn,
                     .arg = arg,
                     .thread = t,
                     .batches = batches,
                     .batch = batch,
                     .samples = all + (size_t)t * (size_t)batches,
                     .mu = &mu,
                     .cv = &cv,
                     .go = &go,
                     .bar = &bar};
  int started = 1; /* thread 0 is this one */
  while (started < threads && pthread_create(&tid[started], NULL, tworker, &jobs[started]) == 0)
    started++;
  open_gate(&jobs[0], started == threads ? 1 : -1);
  if (started == threads) tworker(&jobs[0]);
  for (int t = 1; t < started; t++) pthread_join(tid[t], NULL);
  pthread_barrier_destroy(&bar);
  if (started != threads) {
    gw_bench_error(b, "%s: could not start %d threads", what, threads);
    goto out;
  }
  for (int t = 0; t < threads; t++) {
    if (jobs[t].failed) {
      /* The error text is thread-local where it arose, so the worker kept a copy. */
      gw_bench_error(b, "%s failed on thread %d: %s", what, t, jobs[t].err);
      goto out;
    }
  }
  st = gw_stat_of(all, threads * batches);
  if (allocs_per_call && gw_tool_alloc_counting()) {
    unsigned long n = 0;
    for (int t = 0; t < threads; t++) n += jobs[t].allocs;
    *allocs_per_call = (double)n / ((double)threads * batches * batch);
  }
out:
  free(jobs);
  free(all);
  free(tid);
  return st;
}
