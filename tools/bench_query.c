/* bench section "query": gw_pointer_query vs the raw pointer query, 1 and N threads. */
#include "bench.h"

#include <pthread.h>
#include <stdlib.h>

enum { NPTR = 16 };

typedef struct {
  gw_bench *b;
  const void *ptrs[NPTR];
  int use_gw, batches, batch;
  double *samples; /* batches per thread */
  pthread_barrier_t *bar;
  int failed;
} qjob;

static void *qworker(void *arg) {
  qjob *j = arg;
  gw_ptrinfo pi;
  pthread_barrier_wait(j->bar);
  for (int r = 0; r < j->batches; r++) {
    double t0 = gw_tool_now();
    if (j->use_gw) {
      for (int k = 0; k < j->batch; k++)
        if (gw_pointer_query(j->b->ctx, j->ptrs[k % NPTR], &pi) != GW_OK) j->failed = 1;
    } else {
      for (int k = 0; k < j->batch; k++)
        if (j->b->raw.query(j->ptrs[k % NPTR]) != 0) j->failed = 1;
    }
    j->samples[r] = (gw_tool_now() - t0) / j->batch;
  }
  return NULL;
}

/* Per-call latency samples over `threads` threads querying interior pointers of p. */
static gw_stat measure(gw_bench *b, char *p, size_t bytes, int use_gw, int threads) {
  int batches = b->quick ? 9 : 31, batch = b->quick ? 500 : 5000;
  qjob *jobs = calloc((size_t)threads, sizeof *jobs);
  double *all = calloc((size_t)threads * (size_t)batches, sizeof *all);
  pthread_t *tid = calloc((size_t)threads, sizeof *tid);
  gw_stat st = {0};
  if (!jobs || !all || !tid) goto out;
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)threads);
  for (int t = 0; t < threads; t++) {
    qjob *j = &jobs[t];
    j->b = b;
    for (int k = 0; k < NPTR; k++) j->ptrs[k] = p + (bytes / NPTR) * (size_t)k + 64 * (size_t)k % (bytes / NPTR);
    j->use_gw = use_gw;
    j->batches = batches;
    j->batch = batch;
    j->samples = all + (size_t)t * (size_t)batches;
    j->bar = &bar;
  }
  int started = 0;
  for (int t = 1; t < threads; t++)
    if (pthread_create(&tid[t], NULL, qworker, &jobs[t]) == 0) started++;
  if (started != threads - 1) {
    gw_bench_error(b, "query: could not start %d threads", threads);
    for (int t = 1; t <= started; t++) pthread_cancel(tid[t]);
    goto out;
  }
  qworker(&jobs[0]);
  for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
  pthread_barrier_destroy(&bar);
  int failed = 0;
  for (int t = 0; t < threads; t++) failed |= jobs[t].failed;
  if (failed)
    gw_bench_error(b, "query: %s failed: %s", use_gw ? "gw_pointer_query" : "raw query",
                   use_gw ? gw_last_error() : b->raw.last_error());
  st = gw_stat_of(all, threads * batches);
out:
  free(jobs);
  free(all);
  free(tid);
  return st;
}

void gw_bench_query(gw_bench *b) {
  static const gw_memkind kinds[] = {GW_MEM_DEVICE, GW_MEM_PINNED, GW_MEM_MANAGED, GW_MEM_HOST};
  size_t bytes = 1 << 20;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    gw_memkind k = kinds[i];
    void *p = NULL;
    if (k == GW_MEM_HOST) {
      p = gw_bench_host_alloc(bytes, 1);
    } else if (b->raw.alloc(k, bytes, &p) != 0) {
      gw_bench_progress("query: no %s memory (%s), skipped", gw_memkind_name(k), b->raw.last_error());
      gw_bench_progress_done();
      continue;
    }
    if (!p) continue;
    int tcounts[2] = {1, b->threads};
    for (int t = 0; t < 2; t++) {
      if (t == 1 && b->threads <= 1) break;
      gw_bench_progress("query %s, %d thread(s)", k == GW_MEM_HOST ? "pageable" : gw_memkind_name(k), tcounts[t]);
      char path[64];
      snprintf(path, sizeof path, "query %s%s", k == GW_MEM_HOST ? "pageable" : gw_memkind_name(k),
               tcounts[t] > 1 ? " (threads)" : "");
      gw_result *r = gw_bench_add(b, "query", path, 0, GW_UNIT_LATENCY);
      r->threads = tcounts[t];
      snprintf(r->note, sizeof r->note, "raw: %s", b->raw.query_what ? b->raw.query_what : "none in this runtime");
      if (b->raw.query) r->raw = measure(b, p, bytes, 0, tcounts[t]);
      r->gw = measure(b, p, bytes, 1, tcounts[t]);
    }
    if (k == GW_MEM_HOST)
      gw_bench_host_free(p, bytes);
    else
      b->raw.free(k, p);
  }
  gw_bench_progress_done();
}
