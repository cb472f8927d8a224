/*
 * VMM memory made with a POSIX file descriptor handle type shared between processes
 * (docs/IPC.md, "VMM memory"): gw_ipc_export writes a version-3 handle of kind 2 naming
 * each chunk covering the array (its descriptor in the exporter and size); gw_ipc_open
 * takes each with pidfd_open + pidfd_getfd, and the backend imports, reserves, maps and
 * sets access; the last release closes (unmap, release, free the range).
 *
 * On the CPU model (gpuwrap/cpu_testing.h: a chunk is a memfd) the second process is
 * this binary again, exec'd, talking through stdin and stdout as test_ipc_pool.c does.
 * The child exports (Yama's ptrace_scope 1 lets a parent take its child's descriptors).
 */
#include "cpu_segment.h"
#include "ipc_peer.h"

#include <sys/resource.h>

/* ---- helpers (tests/ipc_peer.h) ---- */

static const ipc_alloc VMM = {"GW_VMM_", "vmm_child", "gw-cpu-vmm-"};

static peer peer_start(const char *job, uint64_t seed, const char *extra) {
  return tst_peer_start(VMM.prefix, VMM.child, job, seed, extra);
}

static int vmm_maps(void) { return ipc_alloc_maps(&VMM); }

/* The importer's first half of a round: h opened, every element of `seed` read; a second
 * open of it is the same mapping (one import), one mapping per chunk. */
static gw_array *open_shared(gw_context *ctx, const gw_ipc_handle *h, uint64_t seed, int chunks,
                             int maps0) {
  gw_array *a = NULL, *b = NULL;
  long imports = gw_cpu_op_calls(GW_CPU_OP_IPC_VMM_IMPORT);
  ASSERT_OK(gw_ipc_open(ctx, h, &a));
  ASSERT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
  check_seeded(a, seed);
  ASSERT_OK(gw_ipc_open(ctx, h, &b)); /* the same mapping */
  ASSERT_EQ_PTR(gw_data(b), gw_data(a));
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_IPC_VMM_IMPORT), imports + 1);
  ASSERT_EQ_INT(vmm_maps(), maps0 + chunks);
  gw_release(b);
  return a;
}

/* Its second half: `seed` written into every element of `a` (the exporter checks them),
 * `a` released leaving nothing, and "go" to the exporter. */
static void write_back(gw_context *ctx, gw_array *a, uint64_t seed, int maps0, int fds0, peer *p) {
  write_seeded(a, seed);
  ASSERT_OK(gw_synchronize(ctx));
  gw_release(a);
  tst_nothing_left(&VMM, maps0, fds0);
  send_line(p->out, "go");
}

/* ---- the second process ---- */

static int vmm_child(void) {
  uint64_t seed;
  const char *extra;
  const char *job = tst_peer_job(VMM.prefix, &seed, &extra);
  gw_context *ctx = tst_open(0);
  int fds0 = tst_open_fds();
  gw_ipc_handle h;
  if (strcmp(job, "exporter") == 0) {
    /* Both arrays exported and checked back (seed+1 written by the parent); then the
     * chunks released and new ones made (their descriptor numbers reused): stale. */
    segment s = seg_make(4, 3);
    for (int w = 0; w < 2; w++) {
      gw_array *a = shared_array(ctx, &s, w);
      tst_export_round(ctx, a, seed + (uint64_t)w, &h);
      ASSERT_EQ_INT(h.bytes[4], 3);
      ASSERT_EQ_INT(h.bytes[239], 2);
      ASSERT_EQ_INT(h.bytes[240], w == 0 ? 2 : 3); /* chunks named */
      check_seeded(a, seed + 100 + (uint64_t)w);
      gw_release(a);
    }
    seg_free(&s);
    segment t = seg_make(4, 3); /* new chunks, likely on the same descriptor numbers */
    send_line(stdout, "freed");
    expect_line(stdin, "go", NULL);
    seg_free(&t);
  } else if (strcmp(job, "many") == 0) {
    /* An array over `extra` chunks (more than a handle holds: a manifest), its first
     * element in the middle of chunk 0 and its last in the middle of the last; exported
     * twice (the same manifest, so the same handle); then a span of other chunks at the
     * same base, whose manifest replaces the first (one kept open either way). */
    int k = atoi(extra);
    segment s = seg_make(k, k);
    int64_t n = (int64_t)((size_t)(k - 1) * s.cs / 4);
    gw_array *a = NULL;
    ASSERT_OK(gw_wrap(ctx, s.r + s.cs / 2, GW_UINT32, 1, &n, NULL, 0, &a));
    write_seeded(a, seed);
    gw_ipc_handle again;
    int held = tst_open_fds(); /* the chunks' descriptors counted */
    ASSERT_OK(gw_ipc_export(a, &h));
    ASSERT_OK(gw_ipc_export(a, &again));
    ASSERT_EQ_INT(memcmp(h.bytes, again.bytes, sizeof h.bytes), 0);
    ASSERT_EQ_INT(h.bytes[239], 2);
    ASSERT_EQ_INT((int)(h.bytes[240] | h.bytes[241] << 8), k); /* the chunk count */
    ASSERT_EQ_INT(tst_open_fds(), held + 1);                   /* the manifest */
    gw_array *own = NULL; /* the exporter's own open: the memory itself, chunks checked */
    ASSERT_OK(gw_ipc_open(ctx, &h, &own));
    ASSERT_EQ_PTR(gw_data(own), gw_data(a));
    gw_release(own);
    send_handle(stdout, &h);
    expect_line(stdin, "go", NULL);
    check_seeded(a, seed + 100);
    gw_release(a);
    /* The middle chunk released (its descriptor closed) while the manifest stays: the
     * importer's take of it fails mid-list. Then a new chunk there, for seg_free. */
    expect_line(stdin, "drop", NULL);
    char *mid = s.r + (size_t)(k / 2) * s.cs;
    ASSERT_OK(gw_cpu_vmm_unmap(mid, s.cs));
    send_line(stdout, "dropped");
    expect_line(stdin, "go", NULL);
    gw_cpu_vmm_chunk c;
    ASSERT_OK(gw_cpu_vmm_create(0, s.cs, GW_CPU_HANDLE_POSIX_FD, &c));
    ASSERT_OK(gw_cpu_vmm_map(mid, s.cs, c));
    ASSERT_OK(gw_cpu_vmm_release(c));
    seg_free(&s);
    segment t = seg_make(k, k);
    n = (int64_t)((size_t)k * t.cs / 4);
    ASSERT_OK(gw_wrap(ctx, t.r, GW_UINT32, 1, &n, NULL, 0, &a));
    held = tst_open_fds();
    ASSERT_OK(gw_ipc_export(a, &again));
    if (t.r == s.r) /* the same base: the older manifest replaced (closed) */
      ASSERT_EQ_INT(tst_open_fds(), held);
    gw_release(a);
    seg_free(&t);
    fds0 += t.r == s.r ? 1 : 2; /* the manifests stay open (ipc_manifest.c) */
  } else if (strcmp(job, "cycler") == 0) {
    int n = atoi(extra);
    size_t live0 = gw_cpu_vmm_live();
    for (int i = 0; i < n; i++) {
      segment s = seg_make(3, 3);
      gw_array *a = shared_array(ctx, &s, 1);
      tst_export_round(ctx, a, seed + (uint64_t)i, &h);
      gw_release(a);
      seg_free(&s);
    }
    ASSERT_EQ_SIZE(gw_cpu_vmm_live(), live0); /* the model's device memory: all given back */
  } else {
    TST_FAIL("unknown job %s", job);
  }
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- tests ---- */

/* An exec'd child exports an array over 2 chunks and one over 3 (its first element in the
 * middle chunk): every element read here and written back, checked there; a second
 * open of a range already mapped shares the mapping; a forked child maps its own; the handle of released chunks
 * whose descriptor numbers are reused is refused (stale), leaving nothing open. */
TEST_IMPL(vmm_child_to_parent) {
  TEST_REQUIRE_CPU();
  tst_require_take_fd();
  gw_context *ctx = tst_open(0);
  int maps0 = vmm_maps();
  uint64_t seed = tst_rand64() | 1;
  peer p = peer_start("exporter", seed, NULL);
  int fds0 = tst_open_fds(); /* the pipes to the child counted */
  gw_ipc_handle hs[2];
  for (int w = 0; w < 2; w++) {
    expect_line(p.in, "handle", &hs[w]);
    gw_array *a = open_shared(ctx, &hs[w], seed + (uint64_t)w, w == 0 ? 2 : 3, maps0);
    tst_fork_opens_own(ctx, &hs[w], gw_data(a), seed + (uint64_t)w);
    write_back(ctx, a, seed + 100 + (uint64_t)w, maps0, fds0, &p);
  }
  expect_line(p.in, "freed", NULL);
  for (int w = 0; w < 2; w++)
    tst_open_fails_clean(ctx, &hs[w], GW_EBACKEND, NULL, NULL, &VMM, maps0, fds0);
  send_line(p.out, "go");
  peer_finish(&p);
  gw_context_destroy(ctx);
  return 0;
}

/* GW_TEST_IPC_CYCLES (CI: 300; issue 45's target 10^4) ranges of 3 chunks exported by a
 * child, each opened, read (every element) and released here: descriptors, mappings and
 * the model's device memory (its chunks and mappings alive) where they started on both
 * sides. */
TEST_IMPL(vmm_cycles) {
  TEST_REQUIRE_CPU();
  tst_import_cycles(&VMM, 300);
  return 0;
}

/* A failure at each new call of the open (pidfd_getfd as EPERM and ENOSYS, the chunks'
 * import) leaves nothing open or mapped and says why. */
TEST_IMPL(vmm_injected_failures) {
  TEST_REQUIRE_CPU();
  tst_require_take_fd();
  gw_context *ctx = tst_open(0);
  int maps0 = vmm_maps();
  uint64_t seed = tst_rand64() | 1;
  peer p = peer_start("cycler", seed, "1");
  int fds0 = tst_open_fds();
  gw_ipc_handle h;
  expect_line(p.in, "handle", &h);
  tst_open_refusals(ctx, &h, "VMM memory", &VMM, maps0, fds0);
  gw_cpu_fail_op(GW_CPU_OP_IPC_VMM_IMPORT, 1, GW_EBACKEND);
  tst_open_fails_clean(ctx, &h, GW_EBACKEND, gw_cpu_op_name(GW_CPU_OP_IPC_VMM_IMPORT), NULL, &VMM,
                       maps0, fds0);
  gw_array *a = NULL;
  ASSERT_OK(gw_ipc_open(ctx, &h, &a));
  check_seeded(a, seed);
  gw_release(a);
  tst_nothing_left(&VMM, maps0, fds0);
  send_line(p.out, "go");
  peer_finish(&p);
  gw_context_destroy(ctx);
  return 0;
}

/* Arrays over 12 and 40 chunks (a manifest lists them, ipc_manifest.c), exported by an
 * exec'd child, their first element in the middle of a chunk: every element read here and
 * written back, checked there; a second open shares the mapping; a handle whose manifest
 * descriptor, chunk count or digest is wrong is refused naming why, nothing left open; a
 * refused take of the manifest (EPERM, ENOSYS), a failed import and a take failing in the
 * middle of the list (that chunk released in the exporter) leave nothing. */
TEST_IMPL(vmm_many_chunks) {
  TEST_REQUIRE_CPU();
  tst_require_take_fd();
  gw_context *ctx = tst_open(0);
  int maps0 = vmm_maps();
  static const int ks[2] = {12, 40};
  for (int w = 0; w < 2; w++) {
    uint64_t seed = tst_rand64() | 1;
    char extra[16];
    snprintf(extra, sizeof extra, "%d", ks[w]);
    peer p = peer_start("many", seed, extra);
    int fds0 = tst_open_fds();
    gw_ipc_handle h;
    expect_line(p.in, "handle", &h);
    /* Damaged: the manifest named by another of the exporter's descriptors (its stdin, a
     * pipe), a wrong chunk count, a wrong digest. */
    struct {
      int at, value;
      const char *says;
    } damage[3] = {{73, 0, "not a sealed memfd"},
                   {240, ks[w] + 1, "bytes, not the"},
                   {80, 0x5a, "digest is not the handle's"}};
    for (int d = 0; d < 3; d++) {
      gw_ipc_handle bad = h;
      if (damage[d].at == 73)
        memset(bad.bytes + 73, 0, 4); /* descriptor 0 */
      else if (damage[d].at == 240)
        bad.bytes[240] = (unsigned char)damage[d].value;
      else
        bad.bytes[damage[d].at] ^= (unsigned char)damage[d].value;
      reseal(&bad);
      tst_open_fails_clean(ctx, &bad, GW_EINVAL, "VMM manifest", damage[d].says, &VMM, maps0, fds0);
    }
    /* Refused takes and a failed import. */
    tst_open_refusals(ctx, &h, "VMM memory's manifest", &VMM, maps0, fds0);
    gw_cpu_fail_op(GW_CPU_OP_IPC_VMM_IMPORT, 1, GW_EBACKEND);
    tst_open_fails_clean(ctx, &h, GW_EBACKEND, NULL, NULL, &VMM, maps0, fds0);

    gw_array *a = open_shared(ctx, &h, seed, ks[w], maps0);
    write_back(ctx, a, seed + 100, maps0, fds0, &p);
    /* The middle chunk released in the exporter: its take fails after the manifest and the
     * chunks before it were taken; all of them closed, nothing mapped. */
    send_line(p.out, "drop");
    expect_line(p.in, "dropped", NULL);
    tst_open_fails_clean(ctx, &h, GW_EBACKEND, "no descriptor", NULL, &VMM, maps0, fds0);
    send_line(p.out, "go");
    peer_finish(&p);
  }
  gw_context_destroy(ctx);
  return 0;
}

/* An array over more chunks than a handle names is refused at export, saying so; a
 * damaged chunk count is refused; the exporting process's own open of its handle is the
 * memory itself. */
TEST_IMPL(vmm_export_limits) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int fds0 = tst_open_fds();
  /* 1025 chunks of the model's granularity (the most is 1024): refused, nothing kept. A
   * chunk of the model is a memfd, open while it lives: room for 1025 of them. */
  struct rlimit rl;
  ASSERT_EQ_INT(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_cur < 2048) {
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 2048)
      TEST_SKIP("RLIMIT_NOFILE's hard limit is under 2048: 1025 chunks need as many files");
    rl.rlim_cur = 2048;
    ASSERT_EQ_INT(setrlimit(RLIMIT_NOFILE, &rl), 0);
  }
  segment big = seg_make(1025, 1025);
  int64_t n = (int64_t)(big.cs * 1025 / 4);
  gw_array *a = NULL;
  ASSERT_OK(gw_wrap(ctx, big.r, GW_UINT32, 1, &n, NULL, 0, &a));
  gw_ipc_handle h;
  ASSERT_STATUS(gw_ipc_export(a, &h), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("more than 1024 chunks");
  gw_release(a);
  seg_free(&big);
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  segment s = seg_make(9, 9);
  n = (int64_t)(s.cs * 8 / 4);
  ASSERT_OK(gw_wrap(ctx, s.r + s.cs, GW_UINT32, 1, &n, NULL, 0, &a));
  write_seeded(a, 7);
  ASSERT_OK(gw_ipc_export(a, &h));
  gw_array *b = NULL;
  gw_ipc_handle bad = h; /* a damaged chunk count: refused before any call */
  bad.bytes[240] = 7;
  reseal(&bad);
  ASSERT_STATUS(gw_ipc_open(ctx, &bad, &b), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("VMM chunk 7 after the last is not zero");
  bad.bytes[240] = 0x01; /* 1025 */
  bad.bytes[241] = 0x04;
  reseal(&bad);
  ASSERT_STATUS(gw_ipc_open(ctx, &bad, &b), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("VMM chunk count 1025");
  ASSERT_OK(gw_ipc_open(ctx, &h, &b));
  ASSERT_EQ_PTR(gw_data(b), gw_data(a));
  check_seeded(b, 7);
  gw_release(b);
  gw_release(a);
  seg_free(&s);
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  gw_context_destroy(ctx);
  return 0;
}
