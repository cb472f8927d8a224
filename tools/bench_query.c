/* bench section "query": gw_pointer_query vs the raw pointer query, 1 and N threads. */
#include "bench.h"

#include <stdlib.h>

enum { NPTR = 16 };

typedef struct {
  gw_bench *b;
  const void *ptrs[NPTR]; /* interior pointers, shared by all threads */
} qargs;

static int query_gw(void *arg, int thread, int n, char *err, size_t errn) {
  const qargs *q = arg;
  gw_ptrinfo pi = {.struct_size = sizeof pi};
  (void)thread;
  for (int k = 0; k < n; k++) {
    if (gw_pointer_query(q->b->ctx, q->ptrs[k % NPTR], &pi) != GW_OK) {
      snprintf(err, errn, "%s", gw_last_error());
      return -1;
    }
  }
  return 0;
}

static int query_raw(void *arg, int thread, int n, char *err, size_t errn) {
  const qargs *q = arg;
  (void)thread;
  for (int k = 0; k < n; k++) {
    if (q->b->raw.query(q->ptrs[k % NPTR]) != 0) {
      snprintf(err, errn, "%s", q->b->raw.last_error());
      return -1;
    }
  }
  return 0;
}

/* Per-call latency samples over `threads` threads querying interior pointers of p. */
static gw_stat measure(gw_bench *b, char *p, size_t bytes, int use_gw, int threads) {
  int batches = b->quick ? 9 : 31, batch = b->quick ? 500 : 5000;
  qargs q = {.b = b};
  for (int k = 0; k < NPTR; k++)
    q.ptrs[k] = p + (bytes / NPTR) * (size_t)k + 64 * (size_t)k % (bytes / NPTR);
  return gw_bench_threads(b, use_gw ? "query: gw_pointer_query" : "query: raw query", threads,
                          batches, batch, use_gw ? query_gw : query_raw, &q, NULL);
}

/*
 * One thread: raw and gpuwrap batches alternate, in the order raw gw gw raw (repeated), so
 * a drift of the machine during the row (clock, another tenant, the driver's caches)
 * lands on both sides alike instead of on whichever side ran second: the sides differ by
 * tens of ns, as much as the drift between two back-to-back blocks of 31 batches. The
 * target is judged on the per-round ratios (paired): a slow stretch of the host slows one
 * round's two batches together and leaves that round's ratio where it was.
 */
static void measure_interleaved(gw_bench *b, char *p, size_t bytes, gw_stat *raw, gw_stat *gw,
                                gw_stat *paired) {
  int batches = b->quick ? 9 : 31, batch = b->quick ? 500 : 5000;
  qargs q = {.b = b};
  for (int k = 0; k < NPTR; k++)
    q.ptrs[k] = p + (bytes / NPTR) * (size_t)k + 64 * (size_t)k % (bytes / NPTR);
  double *vr = calloc((size_t)batches, sizeof *vr), *vg = calloc((size_t)batches, sizeof *vg);
  char err[192] = "";
  int failed = !vr || !vg;
  if (!failed)
    failed = query_raw(&q, 0, batch, err, sizeof err) ||
             query_gw(&q, 0, batch, err, sizeof err); /* warm-up */
  for (int r = 0; r < batches && !failed; r++) {
    for (int side = 0; side < 2 && !failed; side++) {
      int use_gw = side ^ (r & 1); /* raw gw | gw raw | ... */
      double t0 = gw_tool_now();
      failed = use_gw ? query_gw(&q, 0, batch, err, sizeof err)
                      : query_raw(&q, 0, batch, err, sizeof err);
      (use_gw ? vg : vr)[r] = (gw_tool_now() - t0) / batch;
    }
  }
  if (failed) {
    gw_bench_error(b, "query: %s", err[0] ? err : "out of memory");
  } else {
    *paired = gw_paired_of(vr, vg, batches, 0);
    *raw = gw_stat_of(vr, batches);
    *gw = gw_stat_of(vg, batches);
  }
  free(vr);
  free(vg);
}

void gw_bench_query(gw_bench *b) {
  static const gw_memkind kinds[] = {GW_MEM_DEVICE, GW_MEM_PINNED, GW_MEM_MANAGED, GW_MEM_HOST};
  size_t bytes = 1 << 20;
  gw_bench_progress_plan("query", (int)(sizeof kinds / sizeof kinds[0]) * (b->threads > 1 ? 2 : 1));
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    gw_memkind k = kinds[i];
    void *p = NULL;
    if (k == GW_MEM_HOST) {
      p = gw_bench_host_alloc(bytes, 1);
    } else if (b->raw.alloc(k, bytes, &p) != 0) {
      gw_bench_error(b, "query: no %s memory (%s): not measured", gw_memkind_name(k),
                     b->raw.last_error());
      continue;
    }
    if (!p) continue;
    int tcounts[2] = {1, b->threads};
    for (int t = 0; t < 2; t++) {
      if (t == 1 && b->threads <= 1) break;
      gw_bench_progress("query %s, %d thread(s)",
                        k == GW_MEM_HOST ? "pageable" : gw_memkind_name(k), tcounts[t]);
      char path[64];
      snprintf(path, sizeof path, "query %s%s", k == GW_MEM_HOST ? "pageable" : gw_memkind_name(k),
               tcounts[t] > 1 ? " (threads)" : "");
      gw_result *r = gw_bench_add(b, "query", path, 0, GW_UNIT_LATENCY);
      r->threads = tcounts[t];
      snprintf(r->note, sizeof r->note, "raw: %s",
               b->raw.query_what ? b->raw.query_what : "none in this runtime");
      if (b->raw.query && tcounts[t] == 1) {
        measure_interleaved(b, p, bytes, &r->raw, &r->gw, &r->paired);
        continue;
      }
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
