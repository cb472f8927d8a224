/* bench sections "wrap" (wrap + release per memory kind) and "register" (cost vs size). */
#include "alloc_count.h"
#include "bench.h"

#include <stdlib.h>

/* One wrap + release of `bytes` at p as float32; 0 on success. */
static int wrap_release(gw_bench *b, void *p, size_t bytes) {
  int64_t shape[1] = {(int64_t)(bytes / sizeof(float))};
  gw_array *a = NULL;
  gw_status s = gw_wrap(b->ctx, p, GW_FLOAT32, 1, shape, NULL, 0, &a);
  if (s != GW_OK) return -1;
  gw_bench_release(a);
  return 0;
}

/* Time `batch` gw wraps (use_gw) or raw ops per sample; per-op seconds. */
static gw_stat time_ops(gw_bench *b, void *p, size_t bytes, int use_gw, int raw_register,
                        int samples, int batch) {
  double *v = calloc((size_t)samples, sizeof *v);
  gw_stat st = {0};
  if (!v) return st;
  int failed = 0;
  for (int w = 0; w < 2 && !failed; w++) { /* warm-up */
    if (use_gw)
      failed = wrap_release(b, p, bytes);
    else if (raw_register)
      failed = b->raw.host_register(p, bytes) || b->raw.host_unregister(p);
    else
      failed = b->raw.query(p);
  }
  for (int r = 0; r < samples && !failed; r++) {
    double t0 = gw_tool_now();
    for (int k = 0; k < batch && !failed; k++) {
      if (use_gw)
        failed = wrap_release(b, p, bytes);
      else if (raw_register)
        failed = b->raw.host_register(p, bytes) || b->raw.host_unregister(p);
      else
        failed = b->raw.query(p);
    }
    v[r] = (gw_tool_now() - t0) / batch;
  }
  if (failed)
    gw_bench_error(b, "wrap: %s failed: %s", use_gw ? "gw_wrap" : "raw call",
                   use_gw ? gw_last_error() : b->raw.last_error());
  else
    st = gw_stat_of(v, samples);
  free(v);
  return st;
}

/*
 * One thread, raw pointer query against gw_wrap + gw_release: the sides' batches alternate
 * raw gw | gw raw | ... as in the query section, so a phase of the host (the H200 test
 * machine's raw query reads 55-60 ns in some stretches and 95-115 ns in others, seconds
 * apart on one pinned CPU, 2026-12-01) lands on both sides instead of on whichever block
 * ran second: measured as two blocks, one start read raw 114 ns against wrap + release
 * 302 ns, another 55 against 114.
 */
static void time_interleaved(gw_bench *b, void *p, size_t bytes, int samples, int batch,
                             gw_stat *raw, gw_stat *gw, gw_stat *paired) {
  double *vr = calloc((size_t)samples, sizeof *vr), *vg = calloc((size_t)samples, sizeof *vg);
  int failed = !vr || !vg, failed_gw = 0;
  for (int w = 0; w < 2 && !failed; w++) /* warm-up */
    failed = (failed_gw = wrap_release(b, p, bytes)) || b->raw.query(p);
  for (int r = 0; r < samples && !failed; r++) {
    for (int side = 0; side < 2 && !failed; side++) {
      int use_gw = side ^ (r & 1);
      double t0 = gw_tool_now();
      for (int k = 0; k < batch && !failed; k++)
        failed = use_gw ? (failed_gw = wrap_release(b, p, bytes)) : b->raw.query(p);
      (use_gw ? vg : vr)[r] = (gw_tool_now() - t0) / batch;
    }
  }
  if (!vr || !vg)
    gw_bench_error(b, "wrap: out of host memory");
  else if (failed)
    gw_bench_error(b, "wrap: %s failed: %s", failed_gw ? "gw_wrap" : "raw call",
                   failed_gw ? gw_last_error() : b->raw.last_error());
  else {
    *paired = gw_paired_of(vr, vg, samples, 0);
    *raw = gw_stat_of(vr, samples);
    *gw = gw_stat_of(vg, samples);
  }
  free(vr);
  free(vg);
}

static double allocs_per_wrap(gw_bench *b, void *p, size_t bytes) {
  if (!gw_tool_alloc_counting()) return -1;
  int n = 64;
  unsigned long c0 = gw_tool_alloc_count();
  for (int k = 0; k < n; k++)
    if (wrap_release(b, p, bytes)) return -1;
  return (double)(gw_tool_alloc_count() - c0) / n;
}

/* ---- wrap + release from N threads ---------------------------------------------------- */
typedef struct {
  gw_bench *b;
  char *base;   /* one allocation, or one gw_pin'ned range */
  size_t slice; /* each thread works on base + thread * slice, slice bytes */
} slices;

static int wrap_slice(void *arg, int thread, int n, char *err, size_t errn) {
  const slices *w = arg;
  char *p = w->base + (size_t)thread * w->slice;
  for (int k = 0; k < n; k++) {
    if (wrap_release(w->b, p, w->slice)) {
      snprintf(err, errn, "%s", gw_last_error());
      return -1;
    }
  }
  return 0;
}

static int query_slice(void *arg, int thread, int n, char *err, size_t errn) {
  const slices *w = arg;
  const char *p = w->base + (size_t)thread * w->slice;
  for (int k = 0; k < n; k++) {
    if (w->b->raw.query(p) != 0) {
      snprintf(err, errn, "%s", w->b->raw.last_error());
      return -1;
    }
  }
  return 0;
}

/* A "(threads)" row: its note, and its raw side, the raw pointer query of the same slices
 * from as many threads: one query is the least a wrap must ask, and the runtime serialises
 * it, so the ratio is gpuwrap's own overhead under contention rather than the runtime's
 * lock. Returns the row's index (rows move when the list grows). */
static int threads_row(gw_bench *b, const char *path, const char *of, const slices *w, int samples,
                       int batch) {
  gw_result *r = gw_bench_add(b, "wrap", path, 0, GW_UNIT_LATENCY);
  int at = b->nres - 1;
  r->threads = b->threads;
  char sz[32];
  snprintf(r->note, sizeof r->note,
           "own %s slice of %s per thread; gpuwrap: medians of rounds; raw: its pointer query%s",
           gw_tool_fmt_size(w->slice, sz, sizeof sz), of, b->raw.query ? "" : " - none here");
  if (b->raw.query)
    r->raw = gw_bench_threads(b, "wrap: raw query", b->threads, samples, batch, query_slice,
                              (void *)w, NULL);
  return at;
}

/*
 * The two "(threads)" rows, b->threads threads each wrapping + releasing their own slice at
 * once: of device memory (the contended floor: nothing is shared but the runtime query) and
 * of a gw_pin'ned range (each wrap also takes and drops a registry reference under the
 * registry's read lock). Their ratio is a target, so the two are timed in alternating
 * rounds (device warm | warm device | ...), each round a few batches of every thread, and
 * the target is judged on the per-round ratios: a phase of the host lands on both.
 */
static void wrap_threads_paired(gw_bench *b, char *dp, char *hp, size_t bytes, int batch) {
  size_t slice =
      bytes / (size_t)b->threads / 256 * 256; /* keep every slice float- and line-aligned */
  if (b->threads <= 1 || !slice) return;
  gw_bench_progress("wrap device and pageable warm (threads), %d threads, alternating rounds",
                    b->threads);
  int rounds = b->quick ? 5 : 15, samples = b->quick ? 9 : 31;
  slices wd = {.b = b, .base = dp, .slice = slice}, ww = {.b = b, .base = hp, .slice = slice};
  int rd = threads_row(b, "wrap device (threads)", "1 MiB", &wd, samples, batch);
  int rw = threads_row(b, "wrap pageable warm (threads)", "1 MiB gw_pin'ned", &ww, samples, batch);
  double *v = calloc(2 * (size_t)rounds, sizeof *v), al[2] = {0, 0};
  int ok = v != NULL, counted = 1;
  for (int r = 0; r < rounds && ok; r++) {
    for (int side = 0; side < 2 && ok; side++) {
      int warm = side ^ (r & 1);
      double a = -1;
      gw_stat st = gw_bench_threads(
          b, warm ? "wrap: warm gw_wrap + gw_release" : "wrap: device gw_wrap + gw_release",
          b->threads, 3, batch, wrap_slice, warm ? &ww : &wd, &a);
      ok = st.n > 0;
      v[(size_t)warm * (size_t)rounds + (size_t)r] = st.med;
      if (a < 0) counted = 0;
      al[warm] += a / rounds;
    }
  }
  if (ok) {
    b->res[rw].paired = gw_paired_of(v, v + rounds, rounds, 0);
    b->res[rd].gw = gw_stat_of(v, rounds);
    b->res[rw].gw = gw_stat_of(v + rounds, rounds);
    if (counted) {
      b->res[rd].allocs_per_op = al[0];
      b->res[rw].allocs_per_op = al[1];
    }
  } else if (!v) {
    gw_bench_error(b, "wrap: out of host memory");
  }
  free(v);
}

void gw_bench_wrap(gw_bench *b) {
  size_t bytes = 1 << 20;
  int samples = b->quick ? 9 : 31, batch = b->quick ? 200 : 2000;
  static const gw_memkind kinds[] = {GW_MEM_DEVICE, GW_MEM_PINNED, GW_MEM_MANAGED};
  /* each kind, pageable cold and warm, and with threads the two "(threads)" rows (one step) */
  gw_bench_progress_plan("wrap",
                         (int)(sizeof kinds / sizeof kinds[0]) + 2 + (b->threads > 1 ? 1 : 0));
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    void *p = NULL;
    if (b->raw.alloc(kinds[i], bytes, &p) != 0) {
      gw_bench_error(b, "wrap: no %s memory (%s): not measured", gw_memkind_name(kinds[i]),
                     b->raw.last_error());
      continue;
    }
    gw_bench_progress("wrap+release %s", gw_memkind_name(kinds[i]));
    char path[64];
    snprintf(path, sizeof path, "wrap %s", gw_memkind_name(kinds[i]));
    gw_result *r = gw_bench_add(b, "wrap", path, 0, GW_UNIT_LATENCY);
    snprintf(r->note, sizeof r->note, "1 MiB; raw: one pointer query (the least a wrap must ask)%s",
             b->raw.query ? ", sides interleaved" : " - none here");
    if (b->raw.query)
      time_interleaved(b, p, bytes, samples, batch, &r->raw, &r->gw, &r->paired);
    else
      r->gw = time_ops(b, p, bytes, 1, 0, samples, batch);
    r->allocs_per_op = allocs_per_wrap(b, p, bytes);
    b->raw.free(kinds[i], p);
  }

  void *h = gw_bench_host_alloc(bytes, 1);
  if (!h) {
    gw_bench_error(b, "wrap: no pageable host memory: not measured");
    gw_bench_progress_done();
    return;
  }
  gw_bench_progress("wrap+release pageable (cold: registers each time)");
  gw_result *r = gw_bench_add(b, "wrap", "wrap pageable cold", 0, GW_UNIT_LATENCY);
  snprintf(r->note, sizeof r->note, "1 MiB touched; raw: register + unregister");
  int cold = b->quick ? 9 : 31;
  r->raw = time_ops(b, h, bytes, 0, 1, cold, 1);
  r->gw = time_ops(b, h, bytes, 1, 0, cold, 1);
  r->allocs_per_op = allocs_per_wrap(b, h, bytes);

  gw_bench_progress("wrap+release pageable (warm: after gw_pin)");
  gw_status s = gw_pin(b->ctx, h, bytes);
  if (s != GW_OK) {
    gw_bench_error(b, "gw_pin: %s", gw_last_error());
  } else {
    r = gw_bench_add(b, "wrap", "wrap pageable warm", 0, GW_UNIT_LATENCY);
    int warm = b->nres - 1; /* r does not survive the next gw_bench_add (realloc) */
    snprintf(r->note, sizeof r->note,
             "1 MiB after gw_pin; raw: cold register + unregister (what gw_pin saves)");
    r->gw = time_ops(b, h, bytes, 1, 0, samples, batch / 4);
    r->allocs_per_op = allocs_per_wrap(b, h, bytes);
    /* The threaded rows after every one-thread row: measured on the H200 (2026-12-01), the
     * rows right after 8 busy threads run slow for a while on both sides (the raw query
     * 55-60 -> 85-95 ns, a plain malloc/free 10 -> 16 ns). Still pinned: every thread's
     * warm wrap takes and drops a registry reference, and the raw query of the slices finds
     * them registered. */
    void *dp = NULL;
    if (b->threads > 1) {
      if (b->raw.alloc(GW_MEM_DEVICE, bytes, &dp) == 0) {
        wrap_threads_paired(b, dp, h, bytes, batch);
        b->raw.free(GW_MEM_DEVICE, dp);
      } else {
        gw_bench_error(b, "wrap: no device memory (%s): the threaded rows are not measured",
                       b->raw.last_error());
      }
    }
    if (gw_unpin(b->ctx, h, bytes) != GW_OK) gw_bench_error(b, "gw_unpin: %s", gw_last_error());
    b->res[warm].raw = time_ops(b, h, bytes, 0, 1, cold, 1);
  }
  gw_bench_host_free(h, bytes);
  gw_bench_progress_done();
}

/* One register+unregister pair; fresh untouched memory each rep when !touched. */
static gw_stat reg_cost(gw_bench *b, size_t bytes, int touched, int use_gw, int reps) {
  double *v = calloc((size_t)reps, sizeof *v);
  gw_stat st = {0};
  if (!v) return st;
  void *keep = touched ? gw_bench_host_alloc(bytes, 1) : NULL;
  int n = 0;
  for (int r = -1; r < reps; r++) { /* r == -1: warm-up */
    void *p = touched ? keep : gw_bench_host_alloc(bytes, 0);
    if (!p) break;
    double t0 = gw_tool_now();
    int failed = use_gw ? wrap_release(b, p, bytes)
                        : (b->raw.host_register(p, bytes) || b->raw.host_unregister(p));
    double t = gw_tool_now() - t0;
    if (!touched) gw_bench_host_free(p, bytes);
    if (failed) {
      gw_bench_error(b, "register %zu bytes: %s", bytes,
                     use_gw ? gw_last_error() : b->raw.last_error());
      break;
    }
    if (r >= 0) v[n++] = t;
  }
  if (touched) gw_bench_host_free(keep, bytes);
  if (n == reps) st = gw_stat_of(v, n);
  free(v);
  return st;
}

void gw_bench_register(gw_bench *b) {
  size_t maxs = b->max_size;
  int nsizes = 0;
  for (size_t s = 4096; s <= maxs; s *= 4) nsizes++;
  gw_bench_progress_plan("register", 2 * nsizes);
  for (int touched = 1; touched >= 0; touched--) {
    for (size_t s = 4096; s <= maxs; s *= 4) {
      char sz[32];
      gw_bench_progress("register %s %s", gw_tool_fmt_size(s, sz, sizeof sz),
                        touched ? "touched" : "untouched");
      gw_result *r = gw_bench_add(
          b, "register", touched ? "register touched" : "register untouched", s, GW_UNIT_LATENCY);
      snprintf(r->note, sizeof r->note,
               "raw: register + unregister; gpuwrap: wrap + release of pageable memory");
      int reps = gw_bench_reps(b, s * 16, 3, b->quick ? 9 : 31);
      r->raw = reg_cost(b, s, touched, 0, reps);
      r->gw = reg_cost(b, s, touched, 1, reps);
    }
  }
  gw_bench_progress_done();
}
