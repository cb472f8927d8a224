/* Concurrency: 8+ threads wrap, pin and release overlapping pieces of one buffer many times;
 * afterwards the registry is empty and nothing is registered. One array shared by threads
 * that retain and release it: its deleter runs once. (Run under -fsanitize=thread too.) */
#include "test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define NTHREADS 8
#define NPAGES 32

static gw_context *g_ctx;
static unsigned char *g_buf;
static size_t g_pg;
static int g_iters = 400;

typedef struct {
  uint64_t rng;
  int id;
} worker_arg;

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *worker(void *p) {
  worker_arg *w = p;
  unsigned char *tmp = malloc(NPAGES * g_pg);
  for (int it = 0; it < g_iters; it++) {
    size_t off = next(&w->rng) % (NPAGES * g_pg - 1);
    size_t len = 1 + next(&w->rng) % (NPAGES * g_pg - off - 1);
    if (len > 8 * g_pg) len = 8 * g_pg;
    int64_t shape[1] = {(int64_t)len};
    gw_array *a = NULL, *h = NULL;
    int mode = (int)(next(&w->rng) % 4);
    if (mode == 0) {
      gw_status s = gw_pin(g_ctx, g_buf + off, len);
      if (s != GW_OK) TST_FAIL("thread %d: gw_pin: %s: %s", w->id, gw_err_name(s), gw_last_error());
    }
    gw_status s = gw_wrap(g_ctx, g_buf + off, GW_UINT8, 1, shape, NULL, 0, &a);
    if (s != GW_OK)
      TST_FAIL("thread %d: wrap [%zu, +%zu): %s: %s", w->id, off, len, gw_err_name(s),
               gw_last_error());
    if (gw_data(a) == NULL)
      TST_FAIL("thread %d: wrapped pageable memory has no device address", w->id);
    gw_ptrinfo info;
    s = gw_pointer_query(g_ctx, g_buf + off, &info);
    if (s != GW_OK || info.kind != GW_MEM_PINNED)
      TST_FAIL("thread %d: wrapped memory not pinned (%s, kind %d)", w->id, gw_err_name(s),
               (int)info.kind);
    if (mode == 1) { /* read it through a copy (everyone only reads g_buf) */
      s = gw_wrap(g_ctx, tmp, GW_UINT8, 1, shape, NULL, GW_WRAP_NO_REGISTER, &h);
      if (s == GW_OK) s = gw_copy(h, a);
      if (s != GW_OK) TST_FAIL("thread %d: copy: %s: %s", w->id, gw_err_name(s), gw_last_error());
      if (memcmp(tmp, g_buf + off, len) != 0) TST_FAIL("thread %d: copied bytes differ", w->id);
      gw_release(h);
    }
    if (mode == 2) { /* a view that outlives the array */
      gw_array *v = NULL;
      int64_t st[1] = {0}, vs[1] = {(int64_t)(len + 1) / 2}, step[1] = {2};
      s = gw_view(a, st, vs, step, &v);
      if (s != GW_OK) TST_FAIL("thread %d: view: %s", w->id, gw_last_error());
      gw_release(a);
      a = v;
    }
    gw_release(a);
    if (mode == 0) {
      s = gw_unpin(g_ctx, g_buf + off, len);
      if (s != GW_OK)
        TST_FAIL("thread %d: gw_unpin: %s: %s", w->id, gw_err_name(s), gw_last_error());
    }
  }
  free(tmp);
  return NULL;
}

TEST_IMPL(overlapping_wraps_8_threads) {
  g_ctx = tst_open(0);
  g_pg = tst_page();
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER), unregs = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER);
  g_buf = tst_pages(NPAGES);
  tst_random_fill(g_buf, NPAGES * g_pg);
  pthread_t t[NTHREADS];
  worker_arg args[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    args[i].rng = tst_rand64() | 1;
    args[i].id = i;
    ASSERT_EQ_INT(pthread_create(&t[i], NULL, worker, &args[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) ASSERT_EQ_INT(pthread_join(t[i], NULL), 0);
  ASSERT_NO_LEAK(before);
  if (tst_is_cpu()) {
    long r = gw_cpu_op_calls(GW_CPU_OP_REGISTER) - regs,
         u = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER) - unregs;
    printf("  %ld registrations, %ld unregistrations\n", r, u);
    ASSERT_EQ_INT(r, u);
    ASSERT_TRUE(r > 0);
  }
  for (size_t p = 0; p < NPAGES; p++) {
    gw_ptrinfo info;
    ASSERT_OK(gw_pointer_query(g_ctx, g_buf + p * g_pg, &info));
    ASSERT_EQ_INT(info.kind, GW_MEM_HOST);
  }
  free(g_buf);
  gw_context_destroy(g_ctx);
  return 0;
}

static gw_array *g_shared;
static atomic_int g_deleted;
static void counting_deleter(void *ptr, void *user) {
  (void)ptr;
  (void)user;
  atomic_fetch_add(&g_deleted, 1);
}
static void *retainer(void *p) {
  (void)p;
  for (int i = 0; i < 20000; i++) {
    gw_array *a = gw_retain(g_shared);
    if (gw_numel(a) != 1000) TST_FAIL("shared array changed");
    gw_release(a);
  }
  gw_release(g_shared); /* each thread was handed one reference */
  return NULL;
}

TEST_IMPL(shared_array_refcount) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[1] = {1000};
  gw_array *d = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, shape, &d));
  ASSERT_OK(gw_wrap_with_deleter(ctx, gw_data(d), GW_INT32, 1, shape, NULL, 0, counting_deleter,
                                 NULL, &g_shared));
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) gw_retain(g_shared);
  for (int i = 0; i < NTHREADS; i++) ASSERT_EQ_INT(pthread_create(&t[i], NULL, retainer, NULL), 0);
  for (int i = 0; i < NTHREADS; i++) ASSERT_EQ_INT(pthread_join(t[i], NULL), 0);
  ASSERT_EQ_INT(atomic_load(&g_deleted), 0);
  gw_release(g_shared);
  ASSERT_EQ_INT(atomic_load(&g_deleted), 1);
  gw_release(d);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

static void *wrapper_of_own(void *p) {
  /* every thread tries to own the same device memory; exactly one may at a time */
  atomic_int *owners = p;
  void *mem = gw_data(g_shared);
  int64_t shape[1] = {1000};
  for (int i = 0; i < 500; i++) {
    gw_array *a = NULL;
    gw_status s =
        gw_wrap_with_deleter(g_ctx, mem, GW_INT32, 1, shape, NULL, 0, counting_deleter, NULL, &a);
    if (s != GW_OK) TST_FAIL("deleter wrap: %s", gw_last_error());
    gw_release(a);
    s = gw_wrap(g_ctx, mem, GW_INT32, 1, shape, NULL, GW_WRAP_OWN, &a);
    if (s != GW_EOWNED) TST_FAIL("OWN of memory owned by a live array: %s", gw_err_name(s));
  }
  atomic_fetch_add(owners, 1);
  return NULL;
}

TEST_IMPL(concurrent_own_refused) {
  g_ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[1] = {1000};
  ASSERT_OK(gw_alloc(g_ctx, GW_MEM_DEVICE, GW_INT32, 1, shape, &g_shared));
  atomic_int done = 0;
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++)
    ASSERT_EQ_INT(pthread_create(&t[i], NULL, wrapper_of_own, &done), 0);
  for (int i = 0; i < NTHREADS; i++) ASSERT_EQ_INT(pthread_join(t[i], NULL), 0);
  ASSERT_EQ_INT(atomic_load(&done), NTHREADS);
  ASSERT_EQ_INT(atomic_load(&g_deleted), NTHREADS * 500);
  gw_release(g_shared);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(g_ctx);
  return 0;
}

/* ---- warm references: per-thread counts (registry.c), released from any thread ---------- */

#define WARM_KEEP 16
typedef struct {
  int id;
  gw_array *kept[WARM_KEEP]; /* left alive for the main thread to release */
} warm_arg;

static void *warm_wrapper(void *p) {
  warm_arg *w = p;
  size_t slice = NPAGES * g_pg / NTHREADS;
  unsigned char *mine = g_buf + (size_t)w->id * slice;
  int64_t shape[1] = {(int64_t)slice};
  for (int it = 0; it < g_iters * 10; it++) {
    gw_array *a = NULL;
    gw_status s = gw_wrap(g_ctx, mine, GW_UINT8, 1, shape, NULL, 0, &a);
    if (s != GW_OK || gw_kind(a) != GW_MEM_PINNED)
      TST_FAIL("thread %d: warm wrap: %s: %s", w->id, gw_err_name(s), gw_last_error());
    gw_release(a);
  }
  for (int k = 0; k < WARM_KEEP; k++) {
    int64_t rest[1] = {(int64_t)slice - k};
    gw_status s = gw_wrap(g_ctx, mine + k, GW_UINT8, 1, rest, NULL, 0, &w->kept[k]);
    if (s != GW_OK || gw_kind(w->kept[k]) != GW_MEM_PINNED)
      TST_FAIL("thread %d: kept wrap %d: %s: %s", w->id, k, gw_err_name(s), gw_last_error());
  }
  return NULL;
}

/*
 * Wraps of a gw_pin'ned buffer from 8 threads take warm references on per-thread counts.
 * The pin is dropped while some of those wraps are alive, which another thread then
 * releases: the range stays registered while any of them lives, and is unregistered (once)
 * with the last one.
 */
TEST_IMPL(warm_refs_outlive_unpin) {
  g_ctx = tst_open(0);
  g_pg = tst_page();
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER), unregs = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER);
  g_buf = tst_pages(NPAGES);
  ASSERT_OK(gw_pin(g_ctx, g_buf, NPAGES * g_pg));
  size_t ranges = gw_registry_ranges();
  pthread_t t[NTHREADS];
  warm_arg args[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    args[i].id = i;
    ASSERT_EQ_INT(pthread_create(&t[i], NULL, warm_wrapper, &args[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) ASSERT_EQ_INT(pthread_join(t[i], NULL), 0);
  ASSERT_EQ_SIZE(gw_registry_ranges(), ranges); /* warm wraps registered nothing */
  ASSERT_OK(gw_unpin(g_ctx, g_buf, NPAGES * g_pg));
  gw_ptrinfo info;
  for (int i = 0; i < NTHREADS; i++) {
    for (int k = 0; k < WARM_KEEP; k++) {
      ASSERT_EQ_SIZE(gw_registry_ranges(), ranges); /* kept alive by the warm references */
      ASSERT_OK(gw_pointer_query(g_ctx, g_buf, &info));
      ASSERT_EQ_INT(info.kind, GW_MEM_PINNED);
      ASSERT_TRUE(info.flags & GW_PTR_GPUWRAP_REGISTERED);
      gw_release(args[i].kept[k]);
    }
  }
  ASSERT_NO_LEAK(before);
  ASSERT_OK(gw_pointer_query(g_ctx, g_buf, &info));
  ASSERT_EQ_INT(info.kind, GW_MEM_HOST);
  if (tst_is_cpu()) {
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER) - regs, 1);
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER) - unregs, 1);
  }
  free(g_buf);
  gw_context_destroy(g_ctx);
  return 0;
}

static atomic_int g_stop;
static void *warm_or_cold(void *p) {
  warm_arg *w = p;
  size_t slice = NPAGES * g_pg / NTHREADS;
  unsigned char *mine = g_buf + (size_t)w->id * slice;
  int64_t shape[1] = {(int64_t)slice};
  while (!atomic_load(&g_stop)) {
    gw_array *a = NULL;
    gw_status s = gw_wrap(g_ctx, mine, GW_UINT8, 1, shape, NULL, 0, &a);
    if (s != GW_OK || gw_kind(a) != GW_MEM_PINNED)
      TST_FAIL("thread %d: wrap: %s: %s", w->id, gw_err_name(s), gw_last_error());
    gw_ptrinfo info;
    s = gw_pointer_query(g_ctx, mine, &info);
    if (s != GW_OK || info.kind != GW_MEM_PINNED || !(info.flags & GW_PTR_GPUWRAP_REGISTERED))
      TST_FAIL("thread %d: a live wrap's memory is not gpuwrap-pinned (%s, kind %d)", w->id,
               gw_err_name(s), (int)info.kind);
    gw_release(a);
  }
  return NULL;
}

/* Warm and cold wraps race with gw_pin / gw_unpin of the whole buffer: every wrap finds its
 * bytes pinned by gpuwrap while it lives, and nothing is left registered afterwards. */
TEST_IMPL(warm_wraps_race_pin_unpin) {
  g_ctx = tst_open(0);
  g_pg = tst_page();
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER), unregs = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER);
  g_buf = tst_pages(NPAGES);
  atomic_store(&g_stop, 0);
  pthread_t t[NTHREADS];
  warm_arg args[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    args[i].id = i;
    ASSERT_EQ_INT(pthread_create(&t[i], NULL, warm_or_cold, &args[i]), 0);
  }
  for (int k = 0; k < g_iters / 4; k++) {
    ASSERT_OK(gw_pin(g_ctx, g_buf, NPAGES * g_pg));
    ASSERT_OK(gw_unpin(g_ctx, g_buf, NPAGES * g_pg));
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < NTHREADS; i++) ASSERT_EQ_INT(pthread_join(t[i], NULL), 0);
  ASSERT_NO_LEAK(before);
  if (tst_is_cpu())
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER) - regs,
                  gw_cpu_op_calls(GW_CPU_OP_UNREGISTER) - unregs);
  gw_ptrinfo info;
  ASSERT_OK(gw_pointer_query(g_ctx, g_buf, &info));
  ASSERT_EQ_INT(info.kind, GW_MEM_HOST);
  free(g_buf);
  gw_context_destroy(g_ctx);
  return 0;
}

/* ---- references on a context: per-thread counts, folded when the creator lets go --------- */

static gw_array *g_keeper; /* keeps the context alive for the threads (gw_array_context) */
static atomic_int g_started;
static void *wrap_through_kept_context(void *p) {
  worker_arg *w = p;
  gw_context *ctx = gw_array_context(g_keeper);
  int64_t shape[1] = {64};
  unsigned char *mem = malloc(64);
  atomic_fetch_add(&g_started, 1);
  for (int it = 0; it < g_iters * 25; it++) {
    gw_array *a = NULL, *b = NULL;
    gw_status s = gw_wrap(ctx, mem, GW_UINT8, 1, shape, NULL, GW_WRAP_NO_REGISTER, &a);
    if (s == GW_OK && it % 3 == 0)
      s = gw_wrap(ctx, mem, GW_UINT8, 1, shape, NULL, GW_WRAP_NO_REGISTER, &b);
    if (s != GW_OK) TST_FAIL("thread %d: wrap: %s: %s", w->id, gw_err_name(s), gw_last_error());
    if (gw_array_context(a) != ctx) TST_FAIL("thread %d: the array's context changed", w->id);
    gw_release(a);
    gw_release(b); /* NULL is fine */
  }
  free(mem);
  return NULL;
}

/*
 * The creator destroys its context while 8 threads wrap and release through it (kept alive
 * by an array): wraps before and after the fold of the per-thread counts all work, and the
 * context lives until the last array goes (use after free or a leak: the sanitizer builds).
 */
TEST_IMPL(context_destroyed_while_threads_wrap) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[1] = {16};
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT32, 1, shape, &g_keeper));
  atomic_store(&g_started, 0);
  pthread_t t[NTHREADS];
  worker_arg args[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    args[i].id = i;
    ASSERT_EQ_INT(pthread_create(&t[i], NULL, wrap_through_kept_context, &args[i]), 0);
  }
  while (atomic_load(&g_started) < NTHREADS) sched_yield();
  gw_context_destroy(ctx); /* the creator's reference; the threads' and g_keeper's remain */
  for (int i = 0; i < NTHREADS; i++) ASSERT_EQ_INT(pthread_join(t[i], NULL), 0);
  /* Through the destroyed context (its references are all central now): a stream and an
   * array, released in any order, then the keeper: the last one frees it. */
  gw_stream *s = NULL;
  gw_array *late = NULL;
  ASSERT_OK(gw_stream_create(gw_array_context(g_keeper), &s));
  ASSERT_OK(gw_alloc(gw_array_context(g_keeper), GW_MEM_HOST, GW_INT8, 1, shape, &late));
  ASSERT_OK(gw_fill(late, &(int8_t){7}));
  gw_release(g_keeper);
  gw_stream_destroy(s);
  ASSERT_EQ_INT(((int8_t *)gw_host_data(late))[15], 7);
  gw_release(late);
  ASSERT_NO_LEAK(before);
  return 0;
}

/* The native handle of a borrowed legacy stream, read from one thread while another fills
 * synchronously (each synchronous call goes through the legacy stream): the CPU backend
 * rewrote the legacy queue's fields on every call, a data race with that read (TSan, which
 * CI runs this suite under, reported it). Checked here: the handle stays NULL, the fills
 * land. */
static atomic_int g_native_stop;
static void *native_reader(void *p) {
  gw_stream *legacy = p;
  int bad = 0;
  while (!atomic_load(&g_native_stop)) bad |= gw_stream_native(legacy) != NULL;
  return (void *)(intptr_t)bad;
}
TEST_IMPL(legacy_native_while_filling) {
  gw_context *ctx = tst_open(0);
  gw_stream *legacy = NULL;
  ASSERT_OK(gw_stream_wrap(ctx, NULL, &legacy));
  int64_t n = 1024;
  gw_array *a = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_INT32, 1, &n, &a));
  atomic_store(&g_native_stop, 0);
  pthread_t t;
  ASSERT_EQ_INT(pthread_create(&t, NULL, native_reader, legacy), 0);
  int32_t *h = gw_host_data(a);
  for (int i = 0; i < 2000; i++) {
    int32_t v = i * 7 + 1;
    ASSERT_OK(gw_fill(a, &v));
    ASSERT_EQ_INT(h[i % n], v);
  }
  atomic_store(&g_native_stop, 1);
  void *bad = NULL;
  ASSERT_EQ_INT(pthread_join(t, &bad), 0);
  ASSERT_EQ_INT((intptr_t)bad, 0);
  gw_release(a);
  gw_stream_destroy(legacy);
  gw_context_destroy(ctx);
  return 0;
}
