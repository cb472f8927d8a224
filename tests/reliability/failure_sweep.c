/*
 * Failure sweep: every backend call of a scenario is made to fail, one at a time.
 *
 * For each scenario: run it once clean and count its backend calls (N); then for every
 * i = 1..N and both statuses GW_ENOMEM and GW_EBACKEND, arm gw_cpu_fail_any(i, status) and
 * run it again. The scenario must either succeed (the failure hit a call whose failure is
 * tolerated) or return exactly the injected status, with gw_last_error() saying why; then,
 * after the scenario's own teardown, the CPU model's live allocations and registrations
 * and gpuwrap's registry ranges are back to what they were before the scenario.
 *
 * One documented exception (release returns void, so it cannot report): an injected
 * failure of a call made INSIDE a release (gw_release: unregister or free; the stream
 * destroy of gw_stream_destroy). Then:
 *   - unregister: the runtime registration stays; gpuwrap's registry must still be
 *     consistent (the range is gone from it, nothing GW_PTR_GPUWRAP_REGISTERED remains);
 *     the test unregisters the stale range itself with gw_cpu_runtime_unregister;
 *   - free: the backend allocation stays; the test frees it with gw_cpu_runtime_free;
 *   - stream_destroy: the backend's stream handle cannot be reached from outside (it would
 *     leak, as after a failed cudaStreamDestroy); the sweep does not inject there and
 *     counts the point as skipped.
 * The harness knows which call fails: the failing call is the (T0 + i)-th backend call of
 * the process, T0 being gw_cpu_op_calls(GW_CPU_OP_COUNT) when it armed the trigger.
 *
 * GPUWRAP_REL_VERBOSE=1 prints every injection point.
 */
#include "test.h"

#if defined(__has_include)
#if __has_include("gpuwrap/dlpack.h")
#include "gpuwrap/dlpack.h"
#define REL_HAVE_DLPACK 1
#endif
#endif
#ifndef REL_HAVE_DLPACK
#define REL_HAVE_DLPACK 0
#endif

/* ---- bookkeeping shared by the harness and the scenarios ------------------------------ */

#define MAX_TRACKED 64

typedef struct {
  /* arming */
  long fail_at; /* global index of the failing call; 0 = none armed */
  /* what happened */
  int absorbed_unregister, absorbed_free, absorbed_harmless, absorbed_other;
  int skipped_stream_destroy;
  /* backend allocations the scenario made through gpuwrap (freed by a release) */
  void *allocs[MAX_TRACKED];
  int nallocs;
  /* host memory the scenario looks at for stale registrations */
  struct {
    char *p;
    size_t n;
  } bufs[MAX_TRACKED];
  int nbufs;
  /* foreign registrations / allocations made by setup (never cleaned as "stale") */
  void *foreign[MAX_TRACKED];
  int nforeign;
} run_state;

static run_state R;

static long total_calls(void) { return gw_cpu_op_calls(GW_CPU_OP_COUNT); }

static void track_alloc(gw_array *a) {
  if (R.nallocs < MAX_TRACKED) R.allocs[R.nallocs++] = gw_data(a) ? gw_data(a) : gw_host_data(a);
}
static void track_buf(void *p, size_t n) {
  if (R.nbufs < MAX_TRACKED) {
    R.bufs[R.nbufs].p = p;
    R.bufs[R.nbufs].n = n;
    R.nbufs++;
  }
}
static void track_foreign(void *p) {
  if (R.nforeign < MAX_TRACKED) R.foreign[R.nforeign++] = p;
}

/* A void call made by the scenario: did the armed failure land inside it? */
static void note_void_call(long before) {
  long after = total_calls();
  if (R.fail_at && before < R.fail_at && R.fail_at <= after) {
    const char *e = gw_last_error();
    if (strstr(e, "stream_synchronize"))
      R.absorbed_harmless++; /* waits for nothing, changes nothing */
    else if (strstr(e, "unregister"))
      R.absorbed_unregister++;
    else if (strstr(e, "free"))
      R.absorbed_free++;
    else
      R.absorbed_other++;
  }
}

static void rel_release(gw_array *a) {
  long before = total_calls();
  gw_release(a);
  note_void_call(before);
}

static void rel_stream_destroy(gw_stream *s) {
  long before = total_calls();
  /* gw_stream_destroy = stream_synchronize, then stream_destroy. An injected failure of the
   * stream_destroy would leak the backend's handle, which no one can free: skip it. */
  if (R.fail_at == before + 2) {
    gw_cpu_fail_reset();
    R.fail_at = 0;
    R.skipped_stream_destroy++;
  }
  gw_stream_destroy(s);
  note_void_call(before);
}

/* Arrays of one scenario run, released (in reverse order) on every path. */
typedef struct {
  gw_array *a[32];
  int n;
} bag;
static gw_array *keep(bag *b, gw_array *a) {
  if (b->n >= 32) TST_FAIL("bag full");
  b->a[b->n++] = a;
  return a;
}
static void bag_release(bag *b) {
  while (b->n > 0) rel_release(b->a[--b->n]);
}

#define TRY(expr)             \
  do {                        \
    s = (expr);               \
    if (s != GW_OK) goto out; \
  } while (0)

/* Data check that fails the scenario (not the test) when a readback itself failed. */
static gw_status check_equal(gw_array *a, const void *want, size_t bytes) {
  void *buf = malloc(bytes ? bytes : 1);
  gw_array *h = NULL;
  gw_status s = gw_wrap(gw_array_context(a), buf, gw_array_dtype(a), gw_ndim(a), gw_shape(a), NULL,
                        GW_WRAP_NO_REGISTER, &h);
  if (s == GW_OK) s = gw_copy(h, a);
  if (s == GW_OK && memcmp(buf, want, bytes) != 0)
    TST_FAIL("data mismatch after a successful copy (%zu bytes)", bytes);
  if (h) rel_release(h);
  free(buf);
  return s;
}

/* ---- scenarios -------------------------------------------------------------------------- */

typedef struct scenario {
  const char *name;
  void (*setup)(gw_context *ctx);
  gw_status (*run)(gw_context *ctx);
  void (*teardown)(gw_context *ctx);
} scenario;

#define PAGES 12
static char *pbuf; /* PAGES pages of pageable memory */
static const char *pattern = "";

static void setup_pageable(gw_context *ctx) {
  (void)ctx;
  pbuf = tst_pages(PAGES);
  track_buf(pbuf, PAGES * tst_page());
}
static void teardown_pageable(gw_context *ctx) {
  (void)ctx;
  free(pbuf);
  pbuf = NULL;
}

/* Existing (E: gw_pin, a gpuwrap range) and foreign (F: gw_cpu_runtime_register) ranges of
 * one page each at pages 1, 3, 5, ... of the buffer, as `pattern` says. */
static void setup_ranges(gw_context *ctx) {
  setup_pageable(ctx);
  size_t pg = tst_page();
  for (int j = 0; pattern[j]; j++) {
    char *p = pbuf + (size_t)(1 + 2 * j) * pg;
    if (pattern[j] == 'E')
      ASSERT_OK(gw_pin(ctx, p, pg));
    else {
      ASSERT_OK(gw_cpu_runtime_register(p, pg));
      track_foreign(p);
    }
  }
}
static void teardown_ranges(gw_context *ctx) {
  size_t pg = tst_page();
  for (int j = 0; pattern[j]; j++) {
    char *p = pbuf + (size_t)(1 + 2 * j) * pg;
    if (pattern[j] == 'E')
      ASSERT_OK(gw_unpin(ctx, p, pg));
    else
      ASSERT_OK(gw_cpu_runtime_unregister(p));
  }
  teardown_pageable(ctx);
}

/* Wrap pageable memory (over whatever ranges setup made), view, copy, fill, release. */
static gw_status run_pageable(gw_context *ctx) {
  gw_status s;
  bag b = {0};
  size_t pg = tst_page();
  int64_t n = (int64_t)((PAGES - 2) * pg / sizeof(double)); /* pages 0 .. PAGES-3 */
  double *src = malloc((size_t)n * sizeof(double));
  for (int64_t k = 0; k < n; k++) src[k] = (double)k * 0.5;
  gw_array *a, *v, *h, *w2, *v2;
  /* the whole span (all ranges), then an overlapping second wrap */
  TRY(gw_wrap(ctx, pbuf, GW_FLOAT64, 1, &n, NULL, 0, &a));
  keep(&b, a);
  TRY(gw_wrap(ctx, src, GW_FLOAT64, 1, &n, NULL, GW_WRAP_NO_REGISTER, &h));
  keep(&b, h);
  TRY(gw_copy(a, h));
  TRY(check_equal(a, src, (size_t)n * sizeof(double)));
  int64_t half = n / 2, start = n / 4, step = 2, vs = n / 4;
  TRY(gw_wrap(ctx, pbuf + pg * 2 + 64, GW_FLOAT64, 1, &half, NULL, GW_WRAP_READONLY, &w2));
  keep(&b, w2);
  TRY(gw_view(a, &start, &vs, &step, &v));
  keep(&b, v);
  double val = 42.0;
  TRY(gw_fill(v, &val));
  for (int64_t k = 0; k < vs; k++) src[start + k * step] = val;
  TRY(check_equal(a, src, (size_t)n * sizeof(double)));
  int64_t rs[2] = {2, n / 2};
  TRY(gw_reshape(a, 2, rs, &v2));
  keep(&b, v2);
  gw_ptrinfo info;
  TRY(gw_pointer_query(ctx, pbuf + pg, &info));
  if (info.kind != GW_MEM_PINNED)
    TST_FAIL("wrapped pageable memory is %s", gw_memkind_name(info.kind));
out:
  bag_release(&b);
  free(src);
  return s;
}

/* gw_alloc of every kind, copies between all pairs, fill, readback. */
static gw_status run_alloc(gw_context *ctx) {
  gw_status s;
  bag b = {0};
  static const gw_memkind kinds[4] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};
  int64_t shape[2] = {17, 9};
  size_t bytes = 17 * 9 * sizeof(int32_t);
  int32_t want[17 * 9];
  for (int k = 0; k < 17 * 9; k++) want[k] = k * 7 - 3;
  gw_array *arr[4] = {0}, *h;
  for (int k = 0; k < 4; k++) {
    TRY(gw_alloc(ctx, kinds[k], GW_INT32, 2, shape, &arr[k]));
    keep(&b, arr[k]);
    if (kinds[k] != GW_MEM_HOST) track_alloc(arr[k]);
  }
  TRY(gw_wrap(ctx, want, GW_INT32, 2, shape, NULL, GW_WRAP_NO_REGISTER | GW_WRAP_READONLY, &h));
  keep(&b, h);
  TRY(gw_copy(arr[0], h));
  for (int k = 1; k < 4; k++) TRY(gw_copy(arr[k], arr[k - 1]));
  TRY(check_equal(arr[3], want, bytes));
  int32_t v = -1;
  TRY(gw_fill(arr[2], &v));
  TRY(gw_copy(arr[1], arr[2]));
  for (int k = 0; k < 17 * 9; k++) want[k] = -1;
  TRY(check_equal(arr[1], want, bytes));
  TRY(gw_synchronize(ctx));
out:
  bag_release(&b);
  return s;
}

/* gw_pin, then wrap/fill/release in a loop (registered once), then gw_unpin; and a pin
 * dropped while a wrap still holds the pages. */
static gw_status run_pin_loop(gw_context *ctx) {
  gw_status s;
  bag b = {0};
  size_t pg = tst_page(), bytes = 4 * pg;
  int pinned = 0;
  int64_t n = (int64_t)(bytes / 4);
  TRY(gw_pin(ctx, pbuf, bytes));
  pinned = 1;
  for (int it = 0; it < 3; it++) {
    gw_array *a;
    TRY(gw_wrap(ctx, pbuf, GW_UINT32, 1, &n, NULL, 0, &a));
    uint32_t v = (uint32_t)it;
    s = gw_fill(a, &v);
    rel_release(a);
    if (s != GW_OK) goto out;
  }
  gw_array *a;
  int64_t n2 = (int64_t)(6 * pg / 4);
  TRY(gw_wrap(ctx, pbuf + pg, GW_UINT32, 1, &n2, NULL, 0, &a)); /* reaches past the pin */
  keep(&b, a);
  TRY(gw_unpin(ctx, pbuf, bytes));
  pinned = 0;
  uint32_t v = 7;
  TRY(gw_fill(a, &v));
out:
  if (pinned) {
    gw_status u = gw_unpin(ctx, pbuf, bytes);
    if (u != GW_OK)
      TST_FAIL("gw_unpin after a failed scenario: %s: %s", gw_err_name(u), gw_last_error());
  }
  bag_release(&b);
  return s;
}

/* Streams: async copy and fill, synchronize, destroy. */
static gw_status run_streams(gw_context *ctx) {
  gw_status s;
  bag b = {0};
  gw_stream *st = NULL;
  int64_t n = 1000;
  gw_array *d, *p;
  TRY(gw_stream_create(ctx, &st));
  TRY(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 1, &n, &d));
  keep(&b, d);
  track_alloc(d);
  TRY(gw_wrap(ctx, pbuf, GW_FLOAT32, 1, &n, NULL, 0, &p));
  keep(&b, p);
  float v = 3.5f;
  TRY(gw_fill_async(d, &v, st));
  TRY(gw_copy_async(p, d, st));
  TRY(gw_stream_synchronize(st));
  for (int k = 0; k < n; k++)
    if (((float *)(void *)pbuf)[k] != v) TST_FAIL("stream copy: element %d wrong", k);
  TRY(gw_synchronize(ctx));
out:
  bag_release(&b);
  if (st) rel_stream_destroy(st);
  return s;
}

/* Owning wraps: runtime device memory with GW_WRAP_OWN, malloc'd memory with GW_WRAP_OWN,
 * and a deleter. On failure the memory stays ours (freed here); on success the release
 * frees it. */
static int deleter_calls;
static void count_deleter(void *ptr, void *user) {
  (void)user;
  deleter_calls++;
  free(ptr);
}
static gw_status run_own(gw_context *ctx) {
  gw_status s;
  bag b = {0};
  void *dev = NULL;
  char *heap = NULL, *heap2 = NULL;
  int64_t n = 256;
  gw_array *a;
  deleter_calls = 0;
  TRY(gw_cpu_runtime_alloc(GW_MEM_DEVICE, 0, 1024, &dev));
  R.allocs[R.nallocs++] = dev;
  s = gw_wrap(ctx, dev, GW_FLOAT32, 1, &n, NULL, GW_WRAP_OWN, &a);
  if (s != GW_OK) {
    (void)gw_cpu_runtime_free(
        dev); /* ours again; a failure here is a second injection? no: one per run */
    goto out;
  }
  keep(&b, a);
  heap = aligned_alloc(64, 1024);
  s = gw_wrap(ctx, heap, GW_FLOAT32, 1, &n, NULL, GW_WRAP_OWN, &a);
  if (s != GW_OK) {
    free(heap);
    goto out;
  }
  keep(&b, a);
  track_buf(heap, 1024);
  heap2 = aligned_alloc(64, 1024);
  s = gw_wrap_with_deleter(ctx, heap2, GW_FLOAT32, 1, &n, NULL, 0, count_deleter, NULL, &a);
  if (s != GW_OK) {
    if (deleter_calls != 0) TST_FAIL("deleter called by a failed wrap");
    free(heap2);
    goto out;
  }
  keep(&b, a);
  track_buf(heap2, 1024);
  float v = 1.0f;
  TRY(gw_fill(b.a[0], &v));
  TRY(gw_copy(b.a[1], b.a[0]));
  TRY(gw_copy(b.a[2], b.a[1]));
  for (int k = 0; k < n; k++)
    if (((float *)(void *)heap2)[k] != v) TST_FAIL("owned copy: element %d wrong", k);
out:;
  int had_deleter = b.n == 3;
  bag_release(&b);
  if (had_deleter && deleter_calls != 1) TST_FAIL("deleter called %d times", deleter_calls);
  return s;
}

/* Contexts and pointer queries of every kind. */
static gw_status run_context_query(gw_context *ctx) {
  (void)ctx;
  gw_status s;
  gw_context *c = NULL;
  bag b = {0};
  gw_ptrinfo info;
  int64_t n = 64;
  TRY(gw_context_create(GW_BACKEND_CPU, 0, &c));
  gw_array *a;
  TRY(gw_alloc(c, GW_MEM_MANAGED, GW_UINT8, 1, &n, &a));
  keep(&b, a);
  track_alloc(a);
  TRY(gw_pointer_query(c, gw_data(a), &info));
  if (info.kind != GW_MEM_MANAGED) TST_FAIL("managed query: %s", gw_memkind_name(info.kind));
  TRY(gw_pointer_query(c, pbuf, &info));
  TRY(gw_wrap(c, pbuf + 3, GW_UINT8, 1, &n, NULL, 0, &a));
  keep(&b, a);
  TRY(gw_pointer_query(c, pbuf + 3, &info));
  if (!(info.flags & GW_PTR_GPUWRAP_REGISTERED)) TST_FAIL("wrap did not register");
out:
  bag_release(&b);
  gw_context_destroy(c);
  return s;
}

#if REL_HAVE_DLPACK
/* A foreign producer's tensor over pageable memory; its deleter must run exactly once. */
typedef struct {
  DLManagedTensorVersioned t;
  int64_t shape[2], strides[2];
  int *calls;
} producer;
static void producer_deleter(DLManagedTensorVersioned *self) {
  producer *p = (producer *)(void *)self;
  (*p->calls)++;
  free(p);
}
typedef struct {
  DLManagedTensor t;
  int *calls;
} producer_legacy;
static void producer_legacy_deleter(DLManagedTensor *self) {
  producer_legacy *p = (producer_legacy *)(void *)self;
  (*p->calls)++;
  free(p);
}

static gw_status run_dlpack(gw_context *ctx) {
  gw_status s;
  bag b = {0};
  int calls = 0, lcalls = 0;
  int64_t shape[2] = {8, 16};
  gw_array *a, *back, *lb;
  DLManagedTensorVersioned *t = NULL;
  DLManagedTensor *lt = NULL;
  /* export a wrap of pageable memory, import it back (versioned and legacy) */
  TRY(gw_wrap(ctx, pbuf, GW_INT16, 2, shape, NULL, 0, &a));
  keep(&b, a);
  TRY(gw_to_dlpack(a, &t));
  s = gw_from_dlpack(ctx, t, &back); /* takes t, also on failure */
  t = NULL;
  if (s != GW_OK) goto out;
  keep(&b, back);
  TRY(gw_to_dlpack_legacy(a, &lt));
  s = gw_from_dlpack_legacy(ctx, lt, &lb);
  lt = NULL;
  if (s != GW_OK) goto out;
  keep(&b, lb);
  int16_t v = 5;
  TRY(gw_fill(back, &v));
  TRY(gw_copy(lb, back));
  /* a producer's tensor over another part of the buffer */
  producer *p = calloc(1, sizeof *p);
  p->calls = &calls;
  p->shape[0] = 4, p->shape[1] = 32;
  p->strides[0] = 32, p->strides[1] = 1;
  p->t.version = (DLPackVersion){1, 0};
  p->t.deleter = producer_deleter;
  p->t.dl_tensor = (DLTensor){.data = pbuf + 4 * tst_page(),
                              .device = {kDLCPU, 0},
                              .ndim = 2,
                              .dtype = {kDLFloat, 32, 1},
                              .shape = p->shape,
                              .strides = p->strides,
                              .byte_offset = 64};
  s = gw_from_dlpack(ctx, &p->t, &a);
  if (s != GW_OK) {
    if (calls != 1) TST_FAIL("failed import: producer deleter ran %d times", calls);
    goto out;
  }
  keep(&b, a);
  producer_legacy *q = calloc(1, sizeof *q);
  q->calls = &lcalls;
  q->t.deleter = producer_legacy_deleter;
  q->t.dl_tensor = (DLTensor){.data = pbuf + 6 * tst_page(),
                              .device = {kDLCPU, 0},
                              .ndim = 2,
                              .dtype = {kDLFloat, 32, 1},
                              .shape = p->shape,
                              .strides = NULL};
  s = gw_from_dlpack_legacy(ctx, &q->t, &lb);
  if (s != GW_OK) {
    if (lcalls != 1) TST_FAIL("failed legacy import: producer deleter ran %d times", lcalls);
    goto out;
  }
  keep(&b, lb);
  if (calls != 0 || lcalls != 0) TST_FAIL("producer deleter ran while the array lives");
  TRY(gw_copy(lb, b.a[b.n - 2]));
out:
  bag_release(&b);
  if (calls > 1 || lcalls > 1) TST_FAIL("producer deleter ran %d/%d times", calls, lcalls);
  return s;
}
#endif

/* ---- the harness ------------------------------------------------------------------------- */

static long total_injected, total_points, total_absorbed, total_skipped, total_ok_runs;
static long msg_without_injected;
static int verbose;

/* Clean up what an absorbed release failure left, and check the registry. */
static void fix_stale(gw_context *ctx, int expect_regs, int expect_allocs) {
  int fixed_regs = 0, fixed_allocs = 0;
  size_t pg = tst_page();
  for (int k = 0; k < R.nbufs; k++) {
    /* Registrations are byte ranges that start wherever a wrap started: probe every 16
     * bytes (wraps in these scenarios start on 16-byte boundaries). */
    uintptr_t lo = (uintptr_t)R.bufs[k].p & ~(uintptr_t)15;
    (void)pg;
    for (uintptr_t q = lo; q < (uintptr_t)R.bufs[k].p + R.bufs[k].n; q += 16) {
      gw_ptrinfo info;
      ASSERT_OK(gw_pointer_query(ctx, (void *)q, &info));
      if (info.flags & GW_PTR_GPUWRAP_REGISTERED)
        TST_FAIL("registry inconsistent: %p still GPUWRAP_REGISTERED after release", (void *)q);
      if (info.kind != GW_MEM_PINNED || !(info.flags & GW_PTR_HOST_REGISTERED)) continue;
      int foreign = 0;
      for (int f = 0; f < R.nforeign; f++)
        if (R.foreign[f] == info.base) foreign = 1;
      if (foreign) continue;
      ASSERT_OK(gw_cpu_runtime_unregister(info.base));
      fixed_regs++;
    }
  }
  for (int k = 0; k < R.nallocs; k++) {
    gw_ptrinfo info;
    ASSERT_OK(gw_pointer_query(ctx, R.allocs[k], &info));
    if (info.base == R.allocs[k] &&
        (info.kind == GW_MEM_DEVICE || info.kind == GW_MEM_MANAGED ||
         (info.kind == GW_MEM_PINNED && !(info.flags & GW_PTR_HOST_REGISTERED)))) {
      ASSERT_OK(gw_cpu_runtime_free(R.allocs[k]));
      fixed_allocs++;
    }
  }
  if (fixed_regs != expect_regs)
    TST_FAIL("%d stale registrations, %d unregister failures absorbed by releases", fixed_regs,
             expect_regs);
  if (fixed_allocs != expect_allocs)
    TST_FAIL("%d stale allocations, %d free failures absorbed by releases", fixed_allocs,
             expect_allocs);
}

static void reset_run_state(void) { memset(&R, 0, sizeof R); }

static void sweep(const scenario *sc) {
  gw_context *ctx = tst_open(0);
  gw_cpu_fail_reset();
  verbose = getenv("GPUWRAP_REL_VERBOSE") != NULL;

  /* clean run */
  tst_leaks base = tst_leak_snapshot();
  reset_run_state();
  sc->setup(ctx);
  long c0 = total_calls();
  gw_status s = sc->run(ctx);
  long n = total_calls() - c0;
  if (s != GW_OK)
    TST_FAIL("%s: clean run failed: %s: %s", sc->name, gw_err_name(s), gw_last_error());
  sc->teardown(ctx);
  ASSERT_NO_LEAK(base);
  ASSERT_EQ_INT(gw_registry_ranges(), base.ranges);

  static const gw_status statuses[2] = {GW_ENOMEM, GW_EBACKEND};
  long injected = 0, absorbed = 0, skipped = 0, ok_runs = 0;
  for (long i = 1; i <= n; i++) {
    for (int k = 0; k < 2; k++) {
      gw_status want = statuses[(i + k) % 2]; /* cycle: each point gets both, alternating first */
      reset_run_state();
      sc->setup(ctx);
      long inj0 = gw_cpu_failures_injected();
      R.fail_at = total_calls() + i;
      gw_cpu_fail_any(i, want);
      s = sc->run(ctx);
      long fired = gw_cpu_failures_injected() - inj0;
      gw_cpu_fail_reset();
      const char *err = gw_last_error();
      if (verbose)
        printf("  %s: call %ld/%ld %s -> %s%s\n", sc->name, i, n, gw_err_name(want), gw_err_name(s),
               R.skipped_stream_destroy ? " (skipped: stream_destroy)" : "");
      if (R.skipped_stream_destroy) {
        skipped++;
        if (s != GW_OK) TST_FAIL("%s: run failed with nothing injected", sc->name);
      } else {
        if (fired != 1)
          TST_FAIL("%s: call %ld of %ld: %ld failures fired (expected 1: the run is "
                   "deterministic up to the failing call)",
                   sc->name, i, n, fired);
        injected++;
      }
      if (s != GW_OK) {
        if (s != want)
          TST_FAIL("%s: call %ld of %ld failed with injected %s, the scenario returned %s; "
                   "last error: \"%s\"",
                   sc->name, i, n, gw_err_name(want), gw_err_name(s), err);
        if (!err || !*err)
          TST_FAIL("%s: call %ld returned %s with an empty gw_last_error()", sc->name, i,
                   gw_err_name(s));
        if (!strstr(err, "injected")) {
          msg_without_injected++;
          if (verbose) printf("    last error does not carry the injected detail: \"%s\"\n", err);
        }
        if (R.absorbed_unregister || R.absorbed_free || R.absorbed_harmless || R.absorbed_other)
          TST_FAIL("%s: failed run also had an absorbed failure", sc->name);
      } else {
        ok_runs++;
      }
      if (R.absorbed_other)
        TST_FAIL("%s: call %ld: a failure was absorbed by a release: \"%s\"", sc->name, i, err);
      absorbed += R.absorbed_unregister + R.absorbed_free + R.absorbed_harmless;
      /* teardown first (it drops setup's pins and foreign ranges); what stays is stale */
      sc->teardown(ctx);
      fix_stale(ctx, R.absorbed_unregister, R.absorbed_free);
      tst_check_leaks(__FILE__, __LINE__, base);
    }
  }
  printf("scenario %-22s backend calls %3ld, injection points %4ld, failures injected %4ld, "
         "succeeded anyway %3ld (absorbed by a release %ld), skipped %ld\n",
         sc->name, n, 2 * n, injected, ok_runs, absorbed, skipped);
  total_points += 2 * n;
  total_injected += injected;
  total_absorbed += absorbed;
  total_skipped += skipped;
  total_ok_runs += ok_runs;
  printf("FAILURES INJECTED %ld (points %ld, absorbed by void releases %ld, skipped %ld, "
         "error text without the injected detail %ld)\n",
         total_injected, total_points, total_absorbed, total_skipped, msg_without_injected);
  gw_context_destroy(ctx);
}

static int sweep_pattern(const char *name, const char *pat) {
  pattern = pat;
  scenario sc = {name, setup_ranges, run_pageable, teardown_ranges};
  sweep(&sc);
  return 0;
}

TEST_IMPL(pageable) {
  TEST_REQUIRE_CPU();
  return sweep_pattern("pageable", "");
}
TEST_IMPL(existing_1) {
  TEST_REQUIRE_CPU();
  return sweep_pattern("existing_1:E", "E");
}
TEST_IMPL(foreign_1) {
  TEST_REQUIRE_CPU();
  return sweep_pattern("foreign_1:F", "F");
}
TEST_IMPL(mixed_2) {
  TEST_REQUIRE_CPU();
  sweep_pattern("mixed_2:EF", "EF");
  return sweep_pattern("mixed_2:FE", "FE");
}
TEST_IMPL(mixed_3) {
  TEST_REQUIRE_CPU();
  sweep_pattern("mixed_3:EFE", "EFE");
  sweep_pattern("mixed_3:FEF", "FEF");
  sweep_pattern("mixed_3:EEE", "EEE");
  return sweep_pattern("mixed_3:FFF", "FFF");
}
TEST_IMPL(pageable_no_host_ptr) {
  TEST_REQUIRE_CPU();
  return sweep_pattern("pageable_nohostptr", "EE");
}
TEST_IMPL(foreign_no_host_ptr) {
  TEST_REQUIRE_CPU();
  /* one gpuwrap range beside a foreign one: a wrap over both needs two device addresses,
   * which are contiguous in the CPU model */
  return sweep_pattern("foreign_nohostptr:EF", "EF");
}
TEST_IMPL(alloc_kinds) {
  TEST_REQUIRE_CPU();
  scenario sc = {"alloc_kinds", setup_pageable, run_alloc, teardown_pageable};
  sweep(&sc);
  return 0;
}
TEST_IMPL(pin_loop) {
  TEST_REQUIRE_CPU();
  scenario sc = {"pin_loop", setup_pageable, run_pin_loop, teardown_pageable};
  sweep(&sc);
  return 0;
}
TEST_IMPL(streams) {
  TEST_REQUIRE_CPU();
  scenario sc = {"streams", setup_pageable, run_streams, teardown_pageable};
  sweep(&sc);
  return 0;
}
TEST_IMPL(own) {
  TEST_REQUIRE_CPU();
  scenario sc = {"own", setup_pageable, run_own, teardown_pageable};
  sweep(&sc);
  return 0;
}
TEST_IMPL(context_query) {
  TEST_REQUIRE_CPU();
  scenario sc = {"context_query", setup_pageable, run_context_query, teardown_pageable};
  sweep(&sc);
  return 0;
}
TEST_IMPL(dlpack) {
  TEST_REQUIRE_CPU();
#if REL_HAVE_DLPACK
  scenario sc = {"dlpack", setup_pageable, run_dlpack, teardown_pageable};
  sweep(&sc);
  return 0;
#else
  TEST_SKIP("include/gpuwrap/dlpack.h not present");
#endif
}
