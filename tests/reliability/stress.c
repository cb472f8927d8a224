/*
 * Stress: threads wrapping, viewing, copying, pinning and releasing overlapping ranges of
 * shared buffers while failures are injected at random.
 *
 * GW_STRESS_THREADS threads (default 16), GW_STRESS_OPS operations each (default 2000), on
 * BUFFERS shared pageable buffers. Every operation wraps a random page range of a shared
 * buffer (so the registry sees overlapping acquire/release from all threads), and writes
 * only the thread's own elements (index % threads == thread) through a strided view, so
 * the data are race-free and checkable: each thread keeps a shadow of its elements.
 *
 * Failure injection is process-wide: a thread arms gw_cpu_fail_op(op, random nth, status)
 * and whichever thread makes that call sees it fail. So the assertions do not depend on
 * who fails: every call returns GW_OK or one of the injected statuses (GW_ENOMEM,
 * GW_EBACKEND) with a non-empty gw_last_error(); a failed copy leaves the data as they were
 * (the shadow is updated only on success); at the end nothing is allocated, registered or
 * in gpuwrap's registry. Failures of unregister and free are not injected here: inside a
 * release they cannot be reported (see failure_sweep.c); the sweep covers them.
 * Random choices come from GPUWRAP_TEST_SEED (printed), so a run can be replayed, although
 * thread interleaving is not.
 */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>

#define BUFFERS 4
#define BUF_PAGES 32
#define MAX_THREADS 64

static gw_context *ctx;
static double *bufs[BUFFERS];
static double *shadow[BUFFERS];
static size_t buf_elems;
static int nthreads = 16;
static long nops = 2000;

static atomic_long st_ops, st_failures_seen, st_arms, st_copies_ok, st_bytes_checked;

/* Ops whose failure is reportable by the call that makes it. */
static const gw_cpu_op inject_ops[] = {GW_CPU_OP_QUERY,          GW_CPU_OP_REGISTER,
                                       GW_CPU_OP_DEVICE_ADDRESS, GW_CPU_OP_COPY,
                                       GW_CPU_OP_FILL,           GW_CPU_OP_ALLOC};

typedef struct {
  int id;
  uint64_t rng;
  void *dev_allocs_unused;
} worker;

static uint64_t wrand(worker *w) {
  w->rng ^= w->rng >> 12;
  w->rng ^= w->rng << 25;
  w->rng ^= w->rng >> 27;
  return w->rng * 0x2545F4914F6CDD1Dull;
}
static uint64_t wbelow(worker *w, uint64_t n) { return n ? wrand(w) % n : 0; }

/* A call's status: OK, or an injected one with its detail. Returns 1 if it failed. */
static int failed(gw_status s, const char *what) {
  if (s == GW_OK) return 0;
  if (s != GW_ENOMEM && s != GW_EBACKEND)
    TST_FAIL("%s returned %s (%d), not an injected status: \"%s\"", what, gw_err_name(s), (int)s,
             gw_last_error());
  const char *e = gw_last_error();
  if (!e || !*e) TST_FAIL("%s returned %s with an empty gw_last_error()", what, gw_err_name(s));
  atomic_fetch_add(&st_failures_seen, 1);
  return 1;
}

/* Write `count` of the thread's own elements of buffer b, from element `first` (own), with
 * `value`+k, through a wrap of [lo_el, hi_el) and a view of step nthreads. */
static void op_wrap_copy(worker *w) {
  int b = (int)wbelow(w, BUFFERS);
  size_t pg_el = tst_page() / sizeof(double);
  size_t p0 = wbelow(w, BUF_PAGES - 1), p1 = p0 + 1 + wbelow(w, BUF_PAGES - p0);
  int64_t lo = (int64_t)(p0 * pg_el + wbelow(w, pg_el)); /* unaligned start */
  int64_t hi = (int64_t)(p1 * pg_el);
  if (hi - lo < 2 * nthreads) return;
  int64_t n = hi - lo;
  gw_array *a = NULL, *v = NULL, *h = NULL;
  if (failed(gw_wrap(ctx, bufs[b] + lo, GW_FLOAT64, 1, &n, NULL, 0, &a), "gw_wrap")) return;
  int64_t first = (w->id - lo % nthreads + nthreads) % nthreads; /* index in a */
  int64_t count = (n - 1 - first) / nthreads + 1, step = nthreads;
  if (count > 64) count = 1 + (int64_t)wbelow(w, 64);
  if (failed(gw_view(a, &first, &count, &step, &v), "gw_view")) goto out;
  double src[64], back[64];
  double base = (double)(wrand(w) % 1000000);
  for (int64_t k = 0; k < count; k++) src[k] = base + (double)k;
  if (failed(gw_wrap(ctx, src, GW_FLOAT64, 1, &count, NULL, GW_WRAP_NO_REGISTER, &h),
             "gw_wrap(src)"))
    goto out;
  if (!failed(gw_copy(v, h), "gw_copy(view <- src)")) {
    for (int64_t k = 0; k < count; k++) shadow[b][lo + first + k * step] = src[k];
    atomic_fetch_add(&st_copies_ok, 1);
  }
  gw_release(h);
  h = NULL;
  /* read back through the view into private memory */
  if (failed(gw_wrap(ctx, back, GW_FLOAT64, 1, &count, NULL, GW_WRAP_NO_REGISTER, &h),
             "gw_wrap(back)"))
    goto out;
  if (!failed(gw_copy(h, v), "gw_copy(back <- view)")) {
    for (int64_t k = 0; k < count; k++)
      if (back[k] != shadow[b][lo + first + k * step])
        TST_FAIL("thread %d: buffer %d element %lld: read %g, wrote %g", w->id, b,
                 (long long)(lo + first + k * step), back[k], shadow[b][lo + first + k * step]);
    atomic_fetch_add(&st_bytes_checked, count * (long)sizeof(double));
  }
out:
  gw_release(h);
  gw_release(v);
  gw_release(a);
}

/* Device memory: fill, copy into own elements. */
static void op_alloc_fill(worker *w) {
  int b = (int)wbelow(w, BUFFERS);
  int64_t count = 1 + (int64_t)wbelow(w, 32), step = nthreads;
  int64_t first =
      w->id + nthreads * (int64_t)wbelow(w, (uint64_t)((int64_t)buf_elems / nthreads - count));
  int64_t n = (count - 1) * step + 1;
  gw_array *d = NULL, *a = NULL, *v = NULL;
  if (failed(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 1, &count, &d), "gw_alloc")) return;
  double val = (double)(wrand(w) % 1000);
  if (failed(gw_fill(d, &val), "gw_fill")) goto out;
  if (failed(gw_wrap(ctx, bufs[b] + first, GW_FLOAT64, 1, &n, NULL, 0, &a), "gw_wrap")) goto out;
  int64_t zero = 0;
  if (failed(gw_view(a, &zero, &count, &step, &v), "gw_view")) goto out;
  if (!failed(gw_copy(v, d), "gw_copy(view <- device)")) {
    for (int64_t k = 0; k < count; k++) shadow[b][first + k * step] = val;
    atomic_fetch_add(&st_copies_ok, 1);
  }
out:
  gw_release(v);
  gw_release(a);
  gw_release(d);
}

/* Pin a random range, wrap/release inside it a few times, unpin. */
static void op_pin(worker *w) {
  int b = (int)wbelow(w, BUFFERS);
  size_t pg = tst_page();
  size_t off = wbelow(w, (BUF_PAGES - 4) * pg / sizeof(double)) * sizeof(double);
  size_t bytes = pg + wbelow(w, 3 * pg);
  char *p = (char *)bufs[b] + off;
  if (failed(gw_pin(ctx, p, bytes), "gw_pin")) return;
  for (int k = 0; k < 2; k++) {
    gw_array *a;
    int64_t n = (int64_t)(bytes / sizeof(double));
    if (!failed(gw_wrap(ctx, p, GW_FLOAT64, 1, &n, NULL, GW_WRAP_READONLY, &a), "gw_wrap(pinned)"))
      gw_release(a);
  }
  gw_ptrinfo info;
  if (!failed(gw_pointer_query(ctx, p, &info), "gw_pointer_query")) {
    if (info.kind != GW_MEM_PINNED || !(info.flags & GW_PTR_GPUWRAP_REGISTERED))
      TST_FAIL("pinned range reported as %s flags 0x%x", gw_memkind_name(info.kind), info.flags);
  }
  gw_status s = gw_unpin(ctx, p, bytes);
  if (s != GW_OK) TST_FAIL("gw_unpin: %s: %s", gw_err_name(s), gw_last_error());
}

static void op_inject(worker *w) {
  gw_cpu_op op = inject_ops[wbelow(w, sizeof inject_ops / sizeof inject_ops[0])];
  gw_status st = wbelow(w, 2) ? GW_ENOMEM : GW_EBACKEND;
  gw_cpu_fail_op(op, 1 + (long)wbelow(w, 40), st);
  atomic_fetch_add(&st_arms, 1);
}

static void *run(void *arg) {
  worker *w = arg;
  for (long i = 0; i < nops; i++) {
    uint64_t r = wbelow(w, 100);
    if (r < 55)
      op_wrap_copy(w);
    else if (r < 75)
      op_alloc_fill(w);
    else if (r < 90)
      op_pin(w);
    else
      op_inject(w);
    atomic_fetch_add(&st_ops, 1);
  }
  return NULL;
}

TEST_IMPL(threads) {
  TEST_REQUIRE_CPU();
  const char *e;
  if ((e = getenv("GW_STRESS_THREADS")) && atoi(e) > 0)
    nthreads = atoi(e) > MAX_THREADS ? MAX_THREADS : atoi(e);
  if ((e = getenv("GW_STRESS_OPS")) && atol(e) > 0) nops = atol(e);
  ctx = tst_open(0);
  gw_cpu_fail_reset();
  tst_leaks base = tst_leak_snapshot();
  long inj0 = gw_cpu_failures_injected();
  buf_elems = BUF_PAGES * tst_page() / sizeof(double);
  for (int b = 0; b < BUFFERS; b++) {
    bufs[b] = tst_pages(BUF_PAGES);
    shadow[b] = malloc(buf_elems * sizeof(double));
    for (size_t k = 0; k < buf_elems; k++) bufs[b][k] = shadow[b][k] = -1.0;
  }
  pthread_t th[MAX_THREADS];
  worker ws[MAX_THREADS];
  for (int t = 0; t < nthreads; t++) {
    ws[t].id = t;
    ws[t].rng = (tst_seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(t + 1))) | 1;
    if (pthread_create(&th[t], NULL, run, &ws[t])) TST_FAIL("pthread_create");
  }
  for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
  gw_cpu_fail_reset();
  long injected = gw_cpu_failures_injected() - inj0;

  /* data: every element equals the shadow (written only by successful copies) */
  for (int b = 0; b < BUFFERS; b++)
    for (size_t k = 0; k < buf_elems; k++)
      if (bufs[b][k] != shadow[b][k])
        TST_FAIL("buffer %d element %zu: %g, expected %g (thread %zu)", b, k, bufs[b][k],
                 shadow[b][k], k % (size_t)nthreads);
  /* nothing left behind */
  ASSERT_EQ_SIZE(gw_registry_ranges(), 0);
  for (int b = 0; b < BUFFERS; b++) {
    gw_ptrinfo info;
    for (size_t off = 0; off < BUF_PAGES * tst_page(); off += tst_page()) {
      ASSERT_OK(gw_pointer_query(ctx, (char *)bufs[b] + off, &info));
      if (info.kind != GW_MEM_HOST)
        TST_FAIL("buffer %d page %zu still %s after all releases", b, off / tst_page(),
                 gw_memkind_name(info.kind));
    }
  }
  ASSERT_NO_LEAK(base);
  if (injected != atomic_load(&st_failures_seen))
    TST_FAIL("%ld failures injected, %ld seen by callers: a failure was swallowed", injected,
             atomic_load(&st_failures_seen));
  printf("STRESS threads %d, operations %ld, triggers armed %ld, failures injected %ld, "
         "failures seen %ld, successful copies %ld, bytes verified %ld\n",
         nthreads, atomic_load(&st_ops), atomic_load(&st_arms), injected,
         atomic_load(&st_failures_seen), atomic_load(&st_copies_ok),
         atomic_load(&st_bytes_checked));
  for (int b = 0; b < BUFFERS; b++) {
    free(bufs[b]);
    free(shadow[b]);
  }
  gw_context_destroy(ctx);
  return 0;
}

/*
 * Overlapping wraps of the same pages from several threads, no injection: every wrap must
 * succeed, and while an array lives its pages must stay registered by gpuwrap. A wrap
 * whose first page is registered by another thread's live wrap must join that range (take
 * a registry reference), even while that other wrap is being released.
 */
#define RACE_THREADS 4
static char *race_buf;
static long race_iters = 20000;
static atomic_long race_erange, race_unpinned, race_other;

static void *race_run(void *arg) {
  int t = (int)(intptr_t)arg;
  size_t pg = tst_page();
  for (long i = 0; i < race_iters; i++) {
    /* thread t: pages [t%2, t%2 + 3) from an offset inside the first page */
    char *p = race_buf + (size_t)(t % 2) * pg + 64 * (size_t)(1 + t);
    int64_t n = (int64_t)(2 * pg / 8);
    gw_array *a;
    gw_status s = gw_wrap(ctx, p, GW_FLOAT64, 1, &n, NULL, 0, &a);
    if (s == GW_ERANGE) {
      atomic_fetch_add(&race_erange, 1);
      continue;
    }
    if (s != GW_OK) {
      atomic_fetch_add(&race_other, 1);
      fprintf(stderr, "race: thread %d: %s: %s\n", t, gw_err_name(s), gw_last_error());
      continue;
    }
    gw_ptrinfo info;
    if (gw_pointer_query(ctx, p, &info) != GW_OK || !(info.flags & GW_PTR_GPUWRAP_REGISTERED))
      atomic_fetch_add(&race_unpinned, 1);
    gw_release(a);
  }
  return NULL;
}

TEST_IMPL(overlap_race) {
  TEST_REQUIRE_CPU();
  const char *e = getenv("GW_STRESS_OPS");
  if (e && atol(e) > 0) race_iters = atol(e) * 10;
  ctx = tst_open(0);
  gw_cpu_fail_reset();
  tst_leaks base = tst_leak_snapshot();
  race_buf = tst_pages(4);
  pthread_t th[RACE_THREADS];
  for (int t = 0; t < RACE_THREADS; t++)
    if (pthread_create(&th[t], NULL, race_run, (void *)(intptr_t)t)) TST_FAIL("pthread_create");
  for (int t = 0; t < RACE_THREADS; t++) pthread_join(th[t], NULL);
  printf("RACE threads %d, wraps %ld: GW_ERANGE %ld, live array not gpuwrap-registered %ld, "
         "other failures %ld\n",
         RACE_THREADS, RACE_THREADS * race_iters, atomic_load(&race_erange),
         atomic_load(&race_unpinned), atomic_load(&race_other));
  ASSERT_NO_LEAK(base);
  ASSERT_EQ_INT(atomic_load(&race_erange) + atomic_load(&race_unpinned) + atomic_load(&race_other),
                0);
  free(race_buf);
  gw_context_destroy(ctx);
  return 0;
}
