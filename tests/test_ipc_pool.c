/*
 * Memory of stream-ordered pools with a POSIX file descriptor handle type shared between
 * processes (docs/IPC.md, "Pool memory"): gw_ipc_export writes a version-3 handle naming the
 * pool's descriptor in the exporter, which gw_ipc_open takes with pidfd_open +
 * pidfd_getfd, imports once per (exporter, pool), then imports the pointer.
 *
 * On the CPU model (the pools of gpuwrap/cpu_testing.h, a memfd each): the second process
 * is this binary started again with exec, talking through its stdin and stdout (a line
 * each: "handle <hex>", "go", ...). Every element one side writes the other reads. The
 * real pidfd_getfd is called, so Yama's ptrace_scope decides as it does for users: the
 * direction parent exports / child imports is refused under scope 1 or more (the test
 * reads /proc/sys/kernel/yama/ptrace_scope and expects the refusal there).
 */
#include "ipc_peer.h"

/* ---- helpers (tests/ipc_peer.h) ---- */

static const ipc_alloc POOL = {"GW_POOL_", "pool_child", "gw-cpu-pool-"};

static peer peer_start(const char *job, uint64_t seed, const char *extra) {
  return tst_peer_start(POOL.prefix, POOL.child, job, seed, extra);
}

/* An array over a new allocation of `pool` (wrapped: the pool owns the memory). */
static gw_array *pool_array(gw_context *ctx, gw_cpu_pool pool, gw_dtype t, int ndim,
                            const int64_t *shape) {
  size_t bytes = gw_dtype_size(t);
  for (int i = 0; i < ndim; i++) bytes *= (size_t)shape[i];
  void *p = NULL;
  ASSERT_OK(gw_cpu_pool_alloc(pool, bytes, &p));
  gw_array *a = NULL;
  ASSERT_OK(gw_wrap(ctx, p, t, ndim, shape, NULL, 0, &a));
  ASSERT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
  return a;
}
static void pool_array_free(gw_array *a) {
  void *p = gw_data(a);
  gw_release(a);
  ASSERT_OK(gw_cpu_pool_free(p));
}

static int pool_maps(void) { return ipc_alloc_maps(&POOL); }

static const int64_t SHAPE[2] = {37, 29};

/* ---- the second process ---- */

static int pool_child(void) {
  uint64_t seed;
  const char *extra;
  const char *job = tst_peer_job(POOL.prefix, &seed, &extra);
  gw_context *ctx = tst_open(0);
  int fds0 = tst_open_fds();
  gw_ipc_handle h;
  if (strcmp(job, "open_rw") == 0) {
    /* The parent's handle: read every element, write seed+1 back; or, where Yama refuses
     * the parent's descriptor to its child, the refusal and nothing left open. */
    int maps0 = pool_maps();
    expect_line(stdin, "handle", &h);
    gw_array *a = NULL;
    if (strcmp(extra, "refused") == 0) {
      tst_open_fails_clean(ctx, &h, GW_ENOTSUP, "ptrace_scope", "SCM_RIGHTS", &POOL, maps0, fds0);
    } else {
      ASSERT_OK(gw_ipc_open(ctx, &h, &a));
      ASSERT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
      check_seeded(a, seed);
      write_seeded(a, seed + 1);
      ASSERT_OK(gw_synchronize(ctx));
      ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 2);
      gw_release(a);
      ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 0);
    }
    send_line(stdout, "done");
  } else if (strcmp(job, "exporter") == 0) {
    /* Export a whole allocation and a view of it; the parent reads them and writes seed+1;
     * then the allocation is freed (the handles go stale). An injected export failure
     * first: nothing left open. */
    gw_cpu_pool pool;
    ASSERT_OK(gw_cpu_pool_create(0, 64 * gw_cpu_vmm_granularity(), GW_CPU_HANDLE_POSIX_FD, &pool));
    gw_array *a = pool_array(ctx, pool, GW_FLOAT64, 2, SHAPE);
    write_seeded(a, seed);
    int fds1 = tst_open_fds();
    gw_cpu_fail_op(GW_CPU_OP_IPC_EXPORT, 1, GW_EBACKEND);
    ASSERT_STATUS(gw_ipc_export(a, &h), GW_EBACKEND);
    ASSERT_EQ_INT(tst_open_fds(), fds1);
    ASSERT_OK(gw_ipc_export(a, &h));
    ASSERT_EQ_INT(tst_open_fds(), fds1); /* the pool's own descriptor: none made */
    int64_t start[2] = {5, 3}, vshape[2] = {20, 11}, step[2] = {1, 2};
    gw_array *v = NULL;
    ASSERT_OK(gw_view(a, start, vshape, step, &v));
    gw_ipc_handle h2;
    ASSERT_OK(gw_ipc_export(v, &h2));
    gw_release(v);
    send_handle(stdout, &h);
    send_handle(stdout, &h2);
    expect_line(stdin, "go", NULL);
    check_seeded(a, seed + 1);
    pool_array_free(a);
    send_line(stdout, "freed");
    expect_line(stdin, "go", NULL);
    ASSERT_OK(gw_cpu_pool_destroy(pool));
  } else if (strcmp(job, "cycler") == 0) {
    /* n allocations (the same address each time), each exported, read by the parent,
     * freed; the model's pools and mappings back where they started after. */
    size_t live0 = gw_cpu_vmm_live();
    gw_cpu_pool pool;
    ASSERT_OK(gw_cpu_pool_create(0, 16 * gw_cpu_vmm_granularity(), GW_CPU_HANDLE_POSIX_FD, &pool));
    int n = atoi(extra);
    int64_t len = 64;
    for (int i = 0; i < n; i++) {
      gw_array *a = pool_array(ctx, pool, GW_UINT32, 1, &len);
      tst_export_round(ctx, a, seed + (uint64_t)i, &h);
      pool_array_free(a);
    }
    ASSERT_OK(gw_cpu_pool_destroy(pool));
    ASSERT_EQ_SIZE(gw_cpu_vmm_live(), live0);
  } else {
    TST_FAIL("unknown job %s", job);
  }
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- tests ---- */

/* The parent exports, an exec'd child imports: every element each way, where Yama lets
 * the child take its parent's descriptor; else GW_ENOTSUP naming ptrace_scope. */
TEST_IMPL(pool_parent_to_child) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  gw_cpu_pool pool;
  ASSERT_OK(gw_cpu_pool_create(0, 64 * gw_cpu_vmm_granularity(), GW_CPU_HANDLE_POSIX_FD, &pool));
  gw_array *a = pool_array(ctx, pool, GW_FLOAT64, 2, SHAPE);
  uint64_t seed = tst_rand64() | 1;
  write_seeded(a, seed);
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_EQ_INT(h.bytes[4], 3);   /* version 3: pool memory */
  ASSERT_EQ_INT(h.bytes[239], 1); /* kind: pool */
  int refused = ptrace_scope() >= 1;
  peer p = peer_start("open_rw", seed, refused ? "refused" : "");
  send_handle(p.out, &h);
  expect_line(p.in, "done", NULL);
  peer_finish(&p);
  check_seeded(a, refused ? seed : seed + 1);
  pool_array_free(a);
  ASSERT_OK(gw_cpu_pool_destroy(pool));
  gw_context_destroy(ctx);
  return 0;
}

/* An exec'd child exports (Yama allows a parent its child's descriptors up to scope 1):
 * every element read here and written back; two handles of one allocation (the whole
 * and a view) share one mapping and one imported pool; a forked child maps anew; a damaged
 * kind is refused; the handle of the freed allocation is refused (stale) leaving nothing
 * open or mapped. */
TEST_IMPL(pool_child_to_parent) {
  TEST_REQUIRE_CPU();
  tst_require_take_fd();
  gw_context *ctx = tst_open(0);
  int maps0 = pool_maps();
  uint64_t seed = tst_rand64() | 1;
  peer p = peer_start("exporter", seed, NULL);
  int fds0 = tst_open_fds(); /* the pipes to the child counted */
  gw_ipc_handle h, h2;
  expect_line(p.in, "handle", &h);
  expect_line(p.in, "handle", &h2);

  gw_ipc_handle bad = h;
  bad.bytes[239] = 9;
  reseal(&bad);
  tst_open_fails_clean(ctx, &bad, GW_EINVAL, "kind 9", NULL, &POOL, maps0, fds0);
  gw_array *a = NULL, *b = NULL;

  long imports = gw_cpu_op_calls(GW_CPU_OP_IPC_POOL_IMPORT),
       opens = gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN);
  ASSERT_OK(gw_ipc_open(ctx, &h, &a));
  check_seeded(a, seed);
  ASSERT_OK(gw_ipc_open(ctx, &h2, &b));
  ASSERT_EQ_PTR(gw_data(b), (char *)gw_data(a) + (5 * 29 + 3) * 8);
  int64_t start[2] = {5, 3}, vshape[2] = {20, 11}, step[2] = {1, 2};
  gw_array *v = NULL;
  ASSERT_OK(gw_view(a, start, vshape, step, &v));
  size_t vb = tst_array_bytes(v);
  ASSERT_EQ_SIZE(vb, tst_array_bytes(b));
  double *want = malloc(vb), *got = malloc(vb);
  ASSERT_NOT_NULL(want);
  ASSERT_NOT_NULL(got);
  tst_read(v, want);
  tst_read(b, got);
  ASSERT_ELEMS_EQ(got, want, vb / 8, 8); /* the view's elements, each */
  free(want);
  free(got);
  gw_release(v);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_IPC_POOL_IMPORT), imports + 1);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN), opens + 1);
  ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 2); /* one pool, one pointer */
  ASSERT_EQ_INT(pool_maps(), maps0 + 2);         /* its header and its bytes */

  tst_fork_opens_own(ctx, &h, gw_data(a), seed);

  write_seeded(a, seed + 1);
  ASSERT_OK(gw_synchronize(ctx));
  gw_release(b);
  ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 2);
  gw_release(a);
  ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 0);
  ASSERT_EQ_INT(pool_maps(), maps0);
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  send_line(p.out, "go");
  expect_line(p.in, "freed", NULL); /* the child checked seed+1 and freed the allocation */

  tst_open_fails_clean(ctx, &h, GW_EBACKEND, "was freed", NULL, &POOL, maps0, fds0);
  send_line(p.out, "go");
  peer_finish(&p);
  gw_context_destroy(ctx);
  return 0;
}

/* GW_TEST_IPC_CYCLES (CI: 1000; issue 45's target 10^4) allocations exported by a child,
 * each opened, read (every element) and released here: descriptors, mappings (the model's
 * import table and /proc/self/maps) and the model's device memory (its pools and
 * mappings alive) where they started, on both sides (the child checks its own). */
TEST_IMPL(pool_cycles) {
  TEST_REQUIRE_CPU();
  tst_import_cycles(&POOL, 1000);
  return 0;
}

/* A failure at each new call of the open (pidfd_getfd refused as EPERM and ENOSYS, the
 * pool's import, the pointer's import) leaves nothing open or mapped and says why; a
 * refused free (cudaFree) is reported. (The exporter's side: the child's first export.) */
TEST_IMPL(pool_injected_failures) {
  TEST_REQUIRE_CPU();
  tst_require_take_fd();
  gw_context *ctx = tst_open(0);
  int maps0 = pool_maps();
  uint64_t seed = tst_rand64() | 1;
  peer p = peer_start("cycler", seed, "1");
  int fds0 = tst_open_fds(); /* the pipes to the child counted */
  gw_ipc_handle h;
  expect_line(p.in, "handle", &h);
  tst_open_refusals(ctx, &h, "SCM_RIGHTS", &POOL, maps0, fds0);
  gw_cpu_op ops[2] = {GW_CPU_OP_IPC_POOL_IMPORT, GW_CPU_OP_IPC_OPEN};
  for (int i = 0; i < 2; i++) {
    gw_cpu_fail_op(ops[i], 1, GW_EBACKEND);
    tst_open_fails_clean(ctx, &h, GW_EBACKEND, gw_cpu_op_name(ops[i]), NULL, &POOL, maps0, fds0);
  }
  gw_array *a = NULL;
  ASSERT_OK(gw_ipc_open(ctx, &h, &a));
  check_seeded(a, seed);
  gw_cpu_fail_op(GW_CPU_OP_IPC_CLOSE, 1, GW_EBACKEND);
  gw_release(a);
  ASSERT_ERROR_MENTIONS("injected failure: ipc_close"); /* reported */
  /* The runtime kept the pointer it refused to free, and so its pool (destroyed when its
   * last pointer goes, as cudaMemPoolDestroy): no descriptor is left open. */
  ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 2);
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  send_line(p.out, "go");
  peer_finish(&p);
  gw_context_destroy(ctx);
  return 0;
}
