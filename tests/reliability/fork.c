/*
 * Fork safety.
 *
 * A child of fork() shares none of its parent's runtime registrations (CUDA does not even
 * survive fork without exec), so gpuwrap's registry starts empty in the child (a
 * pthread_atfork child handler in src/core/registry.c) and the child must never unregister
 * the parent's ranges. The CPU model's own tables are plain process memory: the child gets
 * a copy, so what the child does to them cannot reach the parent; what is checked in the
 * child is what gpuwrap ASKS the runtime to do there (call counters).
 *
 *   inherited  the parent wraps pageable memory (registered) and pins another buffer, forks;
 *              the child creates a context, wraps and releases other memory (registered and
 *              unregistered once), wraps the parent's buffer again (it is pinned by "someone
 *              else" now: used as is, never unregistered), releases the inherited arrays
 *              (no unregister call); after the child exits the parent's memory is still
 *              registered and GW_PTR_GPUWRAP_REGISTERED, and the parent's release unregisters
 *              it exactly once.
 *   busy       forks repeatedly while other threads wrap and release (the registry lock may
 *              be held at the moment of fork); each child must be able to wrap and release
 *              within a deadline (a lock inherited in the locked state would hang it).
 */
#include "test.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

static int child_status(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) TST_FAIL("waitpid");
  if (WIFSIGNALED(st)) return 1000 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

/* In the child: exit codes say which check failed (the harness's abort would be a signal). */
#define CHILD_CHECK(cond, code)                                                  \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "child: check failed: %s (%s)\n", #cond, gw_last_error()); \
      _exit(code);                                                               \
    }                                                                            \
  } while (0)

TEST_IMPL(inherited) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t pg = tst_page();
  tst_leaks base = tst_leak_snapshot();
  char *buf = tst_pages(8), *pinbuf = tst_pages(4), *other = tst_pages(4);
  int64_t n = (int64_t)(8 * pg / 4);
  gw_array *a;
  ASSERT_OK(gw_wrap(ctx, buf, GW_FLOAT32, 1, &n, NULL, 0, &a));
  ASSERT_OK(gw_pin(ctx, pinbuf, 4 * pg));
  size_t regs_parent = gw_cpu_live_registrations();
  ASSERT_EQ_SIZE(regs_parent, base.regs + 2);
  ASSERT_EQ_SIZE(gw_registry_ranges(), base.ranges + 2);
  long unreg0 = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER);

  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) TST_FAIL("fork");
  if (pid == 0) {
    alarm(20);
    /* gpuwrap's registry is empty here; the model's copy still lists the parent's ranges */
    CHILD_CHECK(gw_registry_ranges() == 0, 10);
    CHILD_CHECK(gw_cpu_live_registrations() == regs_parent, 11);
    gw_context *c;
    CHILD_CHECK(gw_context_create(GW_BACKEND_CPU, 0, &c) == GW_OK, 12);
    gw_ptrinfo info;
    CHILD_CHECK(gw_pointer_query(c, buf, &info) == GW_OK, 13);
    CHILD_CHECK(info.kind == GW_MEM_PINNED, 14);
    CHILD_CHECK(!(info.flags & GW_PTR_GPUWRAP_REGISTERED), 15);
    long u0 = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER);
    /* other memory: registered, used, unregistered once */
    gw_array *o, *again;
    int64_t m = (int64_t)(4 * pg / 4);
    CHILD_CHECK(gw_wrap(c, other, GW_FLOAT32, 1, &m, NULL, 0, &o) == GW_OK, 16);
    float v = 2.0f;
    CHILD_CHECK(gw_fill(o, &v) == GW_OK, 17);
    CHILD_CHECK(gw_registry_ranges() == 1, 18);
    gw_release(o);
    CHILD_CHECK(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER) == u0 + 1, 19);
    CHILD_CHECK(gw_registry_ranges() == 0, 20);
    /* the parent's buffer: pinned by "someone else" in the child */
    CHILD_CHECK(gw_wrap(c, buf, GW_FLOAT32, 1, &n, NULL, 0, &again) == GW_OK, 21);
    CHILD_CHECK(gw_fill(again, &v) == GW_OK, 22);
    gw_release(again);
    /* the inherited arrays and pin: released without a runtime call */
    gw_release(a);
    CHILD_CHECK(gw_unpin(c, pinbuf, 4 * pg) != GW_OK || 1, 23); /* either answer is fine */
    CHILD_CHECK(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER) == u0 + 1, 24);
    CHILD_CHECK(gw_cpu_live_registrations() == regs_parent, 25);
    CHILD_CHECK(gw_registry_ranges() == 0, 26);
    gw_context_destroy(c);
    /* the child's copies of the parent's objects (for leak checkers at the child's exit) */
    gw_context_destroy(ctx);
    free(buf);
    free(pinbuf);
    free(other);
    _exit(0);
  }
  int rc = child_status(pid);
  if (rc != 0) TST_FAIL("child failed with %d (see its message above)", rc);

  /* the parent's state is untouched */
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs_parent);
  ASSERT_EQ_SIZE(gw_registry_ranges(), base.ranges + 2);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unreg0);
  gw_ptrinfo info;
  ASSERT_OK(gw_pointer_query(ctx, buf, &info));
  ASSERT_EQ_INT(info.kind, GW_MEM_PINNED);
  ASSERT_TRUE(info.flags & GW_PTR_GPUWRAP_REGISTERED);
  /* the parent's release unregisters once */
  gw_release(a);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unreg0 + 1);
  ASSERT_OK(gw_unpin(ctx, pinbuf, 4 * pg));
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unreg0 + 2);
  ASSERT_NO_LEAK(base);
  free(buf);
  free(pinbuf);
  free(other);
  gw_context_destroy(ctx);
  printf("FORK inherited: child ok, parent's 2 registrations kept and unregistered once\n");
  return 0;
}

/* ---- fork while other threads use gpuwrap --------------------------------------------- */

static atomic_int stop;
/* Which call a hung child is in, printed by its SIGALRM handler. */
static volatile sig_atomic_t stage;
static const char *const stage_names[] = {"start",
                                          "gw_context_create",
                                          "gw_wrap (pageable)",
                                          "gw_fill",
                                          "gw_release",
                                          "gw_alloc (device)",
                                          "gw_release (device)",
                                          "gw_pin",
                                          "gw_unpin",
                                          "done"};
#if defined(__SANITIZE_THREAD__)
#define FORK_ALARM_S 20u
#else
#define FORK_ALARM_S 2u
#endif
static void on_alarm(int sig) {
  (void)sig;
  const char *m = stage_names[stage];
  (void)!write(2, "child hung in ", 14);
  (void)!write(2, m, strlen(m));
  (void)!write(2, "\n", 1);
  _exit(99);
}
static gw_context *bctx;
static char *shared_buf;

static void *hammer(void *arg) {
  /* disjoint pages per thread: this test is about fork; overlapping wraps from several
   * threads are stress.c's */
  size_t off = (size_t)(uintptr_t)arg * 4 * tst_page() + 512;
  int64_t n = (int64_t)(2 * tst_page() / 8);
  while (!atomic_load(&stop)) {
    gw_array *a, *v;
    gw_ptrinfo info;
    if (gw_wrap(bctx, shared_buf + off, GW_FLOAT64, 1, &n, NULL, 0, &a) != GW_OK)
      TST_FAIL("hammer wrap: %s", gw_last_error());
    int64_t st = 1, sh = 4;
    if (gw_view(a, &st, &sh, NULL, &v) == GW_OK) gw_release(v);
    (void)gw_pointer_query(bctx, shared_buf + off, &info);
    gw_release(a);
    gw_array *d;
    int64_t m = 16;
    if (gw_alloc(bctx, GW_MEM_PINNED, GW_UINT8, 1, &m, &d) == GW_OK) gw_release(d);
    if (gw_pin(bctx, shared_buf + off, 100) == GW_OK) (void)gw_unpin(bctx, shared_buf + off, 100);
  }
  return NULL;
}

TEST_IMPL(busy) {
  TEST_REQUIRE_CPU();
#if defined(__SANITIZE_ADDRESS__)
  /* gcc 12's ASan allocator is not fork-safe: a child forked while another thread is inside
   * malloc can hang in ASan itself (seen here in posix_memalign). The plain, TSan and
   * valgrind runs cover this test. */
  TEST_SKIP("ASan's allocator is not fork-safe (gcc 12)");
#endif
  bctx = tst_open(0);
  tst_leaks base = tst_leak_snapshot();
  shared_buf = tst_pages(4 * 3 + 1);
  char *mine = tst_pages(2);
  enum { THREADS = 3, FORKS = 30 };
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++)
    if (pthread_create(&th[t], NULL, hammer, (void *)(uintptr_t)t)) TST_FAIL("pthread_create");
  int hung = 0, bad = 0;
  for (int f = 0; f < FORKS; f++) {
    usleep(1000);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) TST_FAIL("fork");
    if (pid == 0) {
      signal(SIGALRM, on_alarm);
      /* a lock inherited locked hangs the child for ever: SIGALRM after GW_FORK_ALARM s
       * (for valgrind), by default 2 s, 20 s under TSan, where a child of this busy
       * process sometimes takes longer than 2 s to wrap (2026-12-07, 2 cores: 2 of 2 series
       * of up to 80 runs stopped on a "hung" child at 2 s, 160 runs passed at 20 s) */
      alarm(getenv("GW_FORK_ALARM") ? (unsigned)atoi(getenv("GW_FORK_ALARM")) : FORK_ALARM_S);
      gw_context *c;
      gw_array *a, *d;
      int64_t n = (int64_t)(2 * tst_page() / 8), m = 8;
      double v = 1.0;
      stage = 1;
      CHILD_CHECK(gw_context_create(GW_BACKEND_CPU, 0, &c) == GW_OK, 30);
      stage = 2;
      CHILD_CHECK(gw_wrap(c, mine, GW_FLOAT64, 1, &n, NULL, 0, &a) == GW_OK, 31);
      stage = 3;
      CHILD_CHECK(gw_fill(a, &v) == GW_OK, 32);
      stage = 4;
      gw_release(a);
      stage = 5;
      CHILD_CHECK(gw_alloc(c, GW_MEM_DEVICE, GW_FLOAT64, 1, &m, &d) == GW_OK, 33);
      stage = 6;
      gw_release(d);
      stage = 7;
      CHILD_CHECK(gw_pin(c, mine, 64) == GW_OK, 34);
      stage = 8;
      CHILD_CHECK(gw_unpin(c, mine, 64) == GW_OK, 35);
      stage = 9;
      gw_context_destroy(c);
      _exit(0);
    }
    int rc = child_status(pid);
    if (rc == 99)
      hung++;
    else if (rc != 0) {
      bad++;
      fprintf(stderr, "fork %d: child exit %d\n", f, rc);
    }
  }
  atomic_store(&stop, 1);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  printf("FORK busy: %d forks with %d threads using gpuwrap: %d children hung, %d failed\n", FORKS,
         THREADS, hung, bad);
  if (hung || bad)
    TST_FAIL("%d of %d children hung (a lock inherited locked), %d failed", hung, FORKS, bad);
  ASSERT_NO_LEAK(base);
  free(shared_buf);
  free(mine);
  gw_context_destroy(bctx);
  return 0;
}
