/*
 * Pool and VMM memory handles passed over a Unix socket (docs/IPC.md, "Passing the
 * descriptors over a Unix socket"): gw_ipc_handle_send in the exporter sends the handle's
 * bytes and the descriptors it names (SCM_RIGHTS); gw_ipc_handle_recv in the importer files
 * them, and the next gw_ipc_open of the handle uses them instead of pidfd_getfd.
 *
 * The importer is this binary again, exec'd with one end of a socketpair at TST_PEER_SOCK,
 * and pidfd_getfd forced to fail as Yama's ptrace_scope 1 makes it fail for a child taking
 * its parent's descriptor (gw_cpu_ipc_force_pidfd_errno(EPERM)): every open that works
 * there worked through the socket. Descriptors are counted (/proc/self/fd) around every
 * step, failures included.
 */
#include "cpu_segment.h"
#include "ipc_peer.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ---- */

static peer peer_start(const char *job, uint64_t seed, const char *extra, int sock) {
  return tst_peer_start_sock("GW_FDP_", "fdpass_child", job, seed, extra, sock);
}

/* A connected pair of Unix sockets of `type`, close-on-exec (the peer gets its end by dup2). */
static void sock_pair(int type, int sv[2]) {
  ASSERT_EQ_INT(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv), 0);
}

static gw_array *pool_array(gw_context *ctx, gw_cpu_pool pool, const int64_t shape[2]) {
  void *p = NULL;
  ASSERT_OK(gw_cpu_pool_alloc(pool, (size_t)(shape[0] * shape[1]) * 8, &p));
  gw_array *a = NULL;
  ASSERT_OK(gw_wrap(ctx, p, GW_FLOAT64, 2, shape, NULL, 0, &a));
  return a;
}
static void pool_array_free(gw_array *a) {
  void *p = gw_data(a);
  gw_release(a);
  ASSERT_OK(gw_cpu_pool_free(p));
}

/* A message of the handle's bytes (n of them) and the descriptors fds[0..k), sent raw: what
 * a confused or hostile peer may send. */
static void send_raw(int sock, const void *bytes, size_t n, const int *fds, int k) {
  union {
    struct cmsghdr align;
    char b[CMSG_SPACE(32 * sizeof(int))];
  } ctl;
  memset(&ctl, 0, sizeof ctl);
  struct iovec iov = {.iov_base = (void *)bytes, .iov_len = n};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (k > 0) {
    ASSERT_TRUE(k <= 32);
    m.msg_control = ctl.b;
    m.msg_controllen = CMSG_SPACE((size_t)k * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)k * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)k * sizeof(int));
  }
  ASSERT_EQ_INT((int)sendmsg(sock, &m, MSG_NOSIGNAL), (int)n);
}

static const int64_t SHAPE[2] = {41, 23};

/* ---- the importer (exec'd; pidfd_getfd refused as Yama refuses it) ---- */

/* The parent sends a handle whenever asked ("again"); the child checks every element
 * through the received descriptors and writes seed+1 back. */
static gw_ipc_handle recv_again(int sock) {
  send_line(stdout, "again");
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_handle_recv(sock, &h));
  return h;
}

/* Two VMM handles received over `sock`, round w with got[w] descriptors (one per chunk,
 * and the manifest where there is one): in round `fail_round` an injected import consumes
 * them and the handle is received again; then every element read, seed+100+w written back,
 * the release leaves nothing mapped or open, and an open without a new receive is refused
 * naming gw_ipc_handle_recv (and `refusal` where given). */
static void vmm_rounds(gw_context *ctx, int sock, uint64_t seed, int fds0, const int got[2],
                       int fail_round, const char *refusal) {
  for (int w = 0; w < 2; w++) {
    gw_array *a = NULL;
    gw_ipc_handle h = recv_again(sock);
    ASSERT_EQ_INT(tst_open_fds(), fds0 + got[w]);
    if (w == fail_round) {
      gw_cpu_fail_op(GW_CPU_OP_IPC_VMM_IMPORT, 1, GW_EBACKEND);
      ASSERT_STATUS(gw_ipc_open(ctx, &h, &a), GW_EBACKEND);
      ASSERT_NULL(a);
      ASSERT_EQ_INT(tst_open_fds(), fds0);
      h = recv_again(sock);
    }
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    ASSERT_EQ_INT(tst_open_fds(), fds0);
    check_seeded(a, seed + (uint64_t)w);
    write_seeded(a, seed + 100 + (uint64_t)w);
    ASSERT_OK(gw_synchronize(ctx));
    gw_release(a);
    a = NULL;
    ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 0);
    ASSERT_STATUS(gw_ipc_open(ctx, &h, &a), GW_ENOTSUP); /* no new receive */
    if (refusal) ASSERT_ERROR_MENTIONS(refusal);
    ASSERT_ERROR_MENTIONS("gw_ipc_handle_recv");
    ASSERT_EQ_INT(tst_open_fds(), fds0);
    send_line(stdout, "checked");
  }
}

static int fdpass_child(void) {
  const char *job = getenv("GW_FDP_JOB");
  ASSERT_NOT_NULL(job);
  uint64_t seed = strtoull(getenv("GW_FDP_SEED"), NULL, 10);
  int sock = TST_PEER_SOCK;
  gw_context *ctx = tst_open(0);
  gw_cpu_ipc_force_pidfd_errno(EPERM);
  int fds0 = tst_open_fds();
  gw_array *a = NULL, *b = NULL;
  if (strcmp(job, "pool") == 0) {
    /* Through the socket: every element read, seed+1 written. */
    gw_ipc_handle h = recv_again(sock);
    ASSERT_EQ_INT(tst_open_fds(), fds0 + 1); /* the pool's descriptor, filed */
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    ASSERT_EQ_INT(tst_open_fds(), fds0); /* consumed */
    check_seeded(a, seed);
    write_seeded(a, seed + 1);
    ASSERT_OK(gw_synchronize(ctx));
    gw_release(a);
    a = NULL;
    ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 0);

    /* Opened again without a new receive: pidfd_getfd again, refused, naming the calls. */
    ASSERT_STATUS(gw_ipc_open(ctx, &h, &a), GW_ENOTSUP);
    ASSERT_ERROR_MENTIONS("ptrace_scope");
    ASSERT_ERROR_MENTIONS("gw_ipc_handle_send");
    ASSERT_ERROR_MENTIONS("gw_ipc_handle_recv");
    ASSERT_NULL(a);
    ASSERT_EQ_INT(tst_open_fds(), fds0);

    /* A failed open (the pool's import injected) consumes what it was sent. */
    h = recv_again(sock);
    gw_cpu_fail_op(GW_CPU_OP_IPC_POOL_IMPORT, 1, GW_EBACKEND);
    ASSERT_STATUS(gw_ipc_open(ctx, &h, &a), GW_EBACKEND);
    ASSERT_ERROR_MENTIONS("ipc_pool_import");
    ASSERT_EQ_INT(tst_open_fds(), fds0);
    ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 0);
    h = recv_again(sock); /* the same, the pointer's import injected */
    gw_cpu_fail_op(GW_CPU_OP_IPC_OPEN, 1, GW_EBACKEND);
    ASSERT_STATUS(gw_ipc_open(ctx, &h, &a), GW_EBACKEND);
    ASSERT_EQ_INT(tst_open_fds(), fds0);
    ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 0);

    /* A newer receive of the same descriptor replaces the older (one filed, not two); an
     * open of memory mapped already closes what it was sent. */
    h = recv_again(sock);
    h = recv_again(sock);
    ASSERT_EQ_INT(tst_open_fds(), fds0 + 1);
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    ASSERT_EQ_INT(tst_open_fds(), fds0);
    h = recv_again(sock);
    ASSERT_EQ_INT(tst_open_fds(), fds0 + 1);
    long imports = gw_cpu_op_calls(GW_CPU_OP_IPC_POOL_IMPORT);
    ASSERT_OK(gw_ipc_open(ctx, &h, &b)); /* the same mapping */
    ASSERT_EQ_PTR(gw_data(b), gw_data(a));
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_IPC_POOL_IMPORT), imports);
    ASSERT_EQ_INT(tst_open_fds(), fds0);
    gw_release(b);
    gw_release(a);

    /* A forked child does not use the parent's received descriptors (it closed its copies):
     * its open asks pidfd_getfd, refused; the parent's open still finds them. */
    h = recv_again(sock);
    fflush(NULL);
    pid_t kid = fork();
    ASSERT_TRUE(kid >= 0);
    if (kid == 0) {
      gw_array *c = NULL;
      if (tst_open_fds() != fds0) _exit(3);
      gw_status s = gw_ipc_open(ctx, &h, &c);
      _exit(s == GW_ENOTSUP && strstr(gw_last_error(), "gw_ipc_handle_recv") && !c ? 0 : 4);
    }
    int st = 0;
    ASSERT_EQ_INT(waitpid(kid, &st, 0), kid);
    ASSERT_TRUE(WIFEXITED(st));
    ASSERT_EQ_INT(WEXITSTATUS(st), 0);
    ASSERT_EQ_INT(tst_open_fds(), fds0 + 1);
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    check_seeded(a, seed + 1);
    gw_release(a);
    ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 0);
  } else if (strcmp(job, "vmm") == 0) {
    /* Two handles (2 and 3 chunks), the second's first import injected */
    vmm_rounds(ctx, sock, seed, fds0, (const int[2]){2, 3}, 1, NULL);
  } else if (strcmp(job, "vmm_many") == 0) {
    /* Handles of 12 and 40 chunks (a manifest lists them: it comes with them), the first's
     * first import injected */
    vmm_rounds(ctx, sock, seed, fds0, (const int[2]){1 + 12, 1 + 40}, 0, "VMM memory's manifest");
  } else if (strcmp(job, "legacy") == 0) {
    /* Bytes, no descriptor; any process may forward it: sent back to the exporter. */
    gw_ipc_handle h = recv_again(sock);
    ASSERT_EQ_INT(tst_open_fds(), fds0);
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    check_seeded(a, seed);
    write_seeded(a, seed + 1);
    ASSERT_OK(gw_synchronize(ctx));
    gw_release(a);
    ASSERT_OK(gw_ipc_handle_send(sock, &h));
  } else {
    TST_FAIL("unknown job %s", job);
  }
  gw_cpu_ipc_force_pidfd_errno(0);
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  send_line(stdout, "done");
  gw_context_destroy(ctx);
  return 0;
}

/* The exporter's side of a peer: send `h` whenever it asks, until it says "checked" or
 * "done". */
static void serve(peer *p, int sock, const gw_ipc_handle *h) {
  static char line[64];
  for (;;) {
    ASSERT_NOT_NULL(fgets(line, sizeof line, p->in));
    if (strncmp(line, "again", 5) == 0)
      ASSERT_OK(gw_ipc_handle_send(sock, h));
    else if (strncmp(line, "done", 4) == 0 || strncmp(line, "checked", 7) == 0)
      return;
  }
}

/* ---- tests ---- */

/* Pool memory: the parent exports, an exec'd child that may not take the parent's
 * descriptor (pidfd_getfd: EPERM) opens it through the socket; every element both ways;
 * the lifetime rules of received descriptors (consumed by the open, a failed one included;
 * replaced by a newer receive; closed by a forked child); a second open without a receive
 * falls back to pidfd_getfd. Nothing left open on either side. */
TEST_IMPL(fdpass_pool) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int fds0 = tst_open_fds();
  gw_cpu_pool pool;
  ASSERT_OK(gw_cpu_pool_create(0, 64 * gw_cpu_vmm_granularity(), GW_CPU_HANDLE_POSIX_FD, &pool));
  gw_array *a = pool_array(ctx, pool, SHAPE);
  uint64_t seed = tst_rand64() | 1;
  write_seeded(a, seed);
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_EQ_INT(h.bytes[239], 1); /* pool memory */
  int sv[2];
  sock_pair(SOCK_STREAM, sv);
  int fds1 = tst_open_fds();
  peer p = peer_start("pool", seed, NULL, sv[1]);
  serve(&p, sv[0], &h);
  peer_finish(&p);
  ASSERT_EQ_INT(tst_open_fds(), fds1);
  check_seeded(a, seed + 1);
  close(sv[0]);
  close(sv[1]);
  pool_array_free(a);
  ASSERT_OK(gw_cpu_pool_destroy(pool));
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  gw_context_destroy(ctx);
  return 0;
}

/* VMM memory: spans of 2 and 3 chunks (the second's first element in the middle chunk)
 * through the socket, every element both ways; a failed import consumes the descriptors. */
TEST_IMPL(fdpass_vmm) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int fds0 = tst_open_fds();
  segment s = seg_make(4, 3);
  uint64_t seed = tst_rand64() | 1;
  int sv[2];
  sock_pair(SOCK_SEQPACKET, sv);
  peer p = peer_start("vmm", seed, NULL, sv[1]);
  for (int w = 0; w < 2; w++) {
    gw_array *a = shared_array(ctx, &s, w);
    write_seeded(a, seed + (uint64_t)w);
    gw_ipc_handle h;
    ASSERT_OK(gw_ipc_export(a, &h));
    ASSERT_EQ_INT(h.bytes[239], 2);
    ASSERT_EQ_INT(h.bytes[240], 2 + w); /* chunks named */
    serve(&p, sv[0], &h);               /* until the child checked and wrote back */
    check_seeded(a, seed + 100 + (uint64_t)w);
    gw_release(a);
  }
  expect_line(p.in, "done", NULL);
  peer_finish(&p);
  close(sv[0]);
  close(sv[1]);
  seg_free(&s);
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  gw_context_destroy(ctx);
  return 0;
}

/* VMM memory over 12 and 40 chunks (the handle names a manifest, ipc_manifest.c), the
 * array's first element in the middle of a chunk: the manifest and every chunk travel in
 * one message to an exec'd child that may not use pidfd_getfd; every element both ways.
 * A manifest handle with descriptors that are not its manifest and chunks is refused on
 * receipt, all closed; one of more chunks than a message carries is refused at send. */
TEST_IMPL(fdpass_vmm_many) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int fds0 = tst_open_fds();
  uint64_t seed = tst_rand64() | 1;
  int sv[2];
  sock_pair(SOCK_SEQPACKET, sv);
  peer p = peer_start("vmm_many", seed, NULL, sv[1]);
  for (int w = 0; w < 2; w++) {
    int k = w == 0 ? 12 : 40;
    segment s = seg_make(k, k);
    int64_t n = (int64_t)((size_t)(k - 1) * s.cs / 4);
    gw_array *a = NULL;
    ASSERT_OK(gw_wrap(ctx, s.r + s.cs / 2, GW_UINT32, 1, &n, NULL, 0, &a));
    write_seeded(a, seed + (uint64_t)w);
    gw_ipc_handle h;
    ASSERT_OK(gw_ipc_export(a, &h));
    ASSERT_EQ_INT(h.bytes[239], 2);
    ASSERT_EQ_INT(h.bytes[240], k); /* chunks listed */
    serve(&p, sv[0], &h);           /* until the child checked and wrote back */
    check_seeded(a, seed + 100 + (uint64_t)w);
    if (w == 0) {
      /* Five descriptors, none of them the manifest: refused, all five closed. */
      int bad[2], many[5];
      sock_pair(SOCK_SEQPACKET, bad);
      for (int i = 0; i < 5; i++) ASSERT_TRUE((many[i] = dup(bad[0])) >= 0);
      int before = tst_open_fds();
      send_raw(bad[0], h.bytes, sizeof h.bytes, many, 5);
      gw_ipc_handle got;
      ASSERT_STATUS(gw_ipc_handle_recv(bad[1], &got), GW_EINVAL);
      ASSERT_ERROR_MENTIONS("VMM manifest received (5 descriptors closed)");
      ASSERT_ERROR_MENTIONS("not a sealed memfd");
      ASSERT_EQ_INT(tst_open_fds(), before);
      for (int i = 0; i < 5; i++) close(many[i]);
      close(bad[0]);
      close(bad[1]);
    }
    gw_release(a);
    seg_free(&s);
  }
  expect_line(p.in, "done", NULL);
  peer_finish(&p);
  /* 253 chunks: the manifest and 253 descriptors are more than one message carries. */
  segment s = seg_make(253, 253);
  int64_t n = (int64_t)(s.cs * 253 / 4);
  gw_array *a = NULL;
  ASSERT_OK(gw_wrap(ctx, s.r, GW_UINT32, 1, &n, NULL, 0, &a));
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_STATUS(gw_ipc_handle_send(sv[0], &h), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("at most 253 descriptors");
  gw_release(a);
  seg_free(&s);
  close(sv[0]);
  close(sv[1]);
  /* The manifests stay open for the life of the process, one per span base (ipc_manifest.c):
   * three bases here at most. */
  int left = tst_open_fds() - fds0;
  ASSERT_TRUE(left >= 1 && left <= 3);
  gw_context_destroy(ctx);
  return 0;
}

/* A legacy (device memory) handle travels as bytes, no descriptor; the importer forwards
 * it back, and the exporter's open of its own handle is the memory itself. */
TEST_IMPL(fdpass_legacy) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int fds0 = tst_open_fds();
  gw_array *a = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 2, SHAPE, &a));
  uint64_t seed = tst_rand64() | 1;
  write_seeded(a, seed);
  gw_ipc_handle h, back;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_EQ_INT(h.bytes[4], 2); /* legacy */
  int sv[2];
  sock_pair(SOCK_STREAM, sv);
  int fds1 = tst_open_fds();
  peer p = peer_start("legacy", seed, NULL, sv[1]);
  expect_line(p.in, "again", NULL);
  ASSERT_OK(gw_ipc_handle_send(sv[0], &h));
  ASSERT_OK(gw_ipc_handle_recv(sv[0], &back));
  expect_line(p.in, "done", NULL);
  peer_finish(&p);
  ASSERT_EQ_INT(memcmp(back.bytes, h.bytes, sizeof h.bytes), 0);
  ASSERT_EQ_INT(tst_open_fds(), fds1);
  gw_array *b = NULL;
  ASSERT_OK(gw_ipc_open(ctx, &back, &b));
  ASSERT_EQ_PTR(gw_data(b), gw_data(a));
  check_seeded(b, seed + 1);
  gw_release(b);
  gw_release(a);
  close(sv[0]);
  close(sv[1]);
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  gw_context_destroy(ctx);
  return 0;
}

/* Everything that is not a handle with its descriptors, and sends that must not happen:
 * each a clean error naming the argument and the cause, every descriptor received closed. */
TEST_IMPL(fdpass_bad_input) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int fds0 = tst_open_fds();
  gw_cpu_pool pool;
  ASSERT_OK(gw_cpu_pool_create(0, 16 * gw_cpu_vmm_granularity(), GW_CPU_HANDLE_POSIX_FD, &pool));
  gw_array *a = pool_array(ctx, pool, SHAPE);
  gw_ipc_handle h, got, legacy;
  ASSERT_OK(gw_ipc_export(a, &h));
  gw_array *d = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT8, 1, (int64_t[]){64}, &d));
  ASSERT_OK(gw_ipc_export(d, &legacy));
  segment seg = seg_make(3, 3);
  gw_array *v = shared_array(ctx, &seg, 1);
  gw_ipc_handle hv;
  ASSERT_OK(gw_ipc_export(v, &hv));
  ASSERT_EQ_INT(hv.bytes[240], 3);
  int sv[2];
  sock_pair(SOCK_STREAM, sv);
  int base = tst_open_fds();
  memset(&got, 0xA5, sizeof got);
  gw_ipc_handle untouched = got;

  /* Arguments. */
  ASSERT_STATUS(gw_ipc_handle_send(sv[0], NULL), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("h: NULL");
  ASSERT_STATUS(gw_ipc_handle_recv(sv[1], NULL), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("out: NULL");
  ASSERT_STATUS(gw_ipc_handle_send(-1, &h), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("sock: -1");
  ASSERT_STATUS(gw_ipc_handle_recv(-1, &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("sock: -1");
  int pp[2];
  ASSERT_EQ_INT(pipe(pp), 0);
  ASSERT_STATUS(gw_ipc_handle_send(pp[1], &h), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("not a socket");
  ASSERT_STATUS(gw_ipc_handle_recv(pp[0], &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("not a socket");
  close(pp[0]);
  close(pp[1]);
  int inet = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (inet >= 0) {
    ASSERT_STATUS(gw_ipc_handle_send(inet, &legacy), GW_EINVAL);
    ASSERT_ERROR_MENTIONS("not a Unix socket");
    close(inet);
  }
  gw_ipc_handle damaged = h;
  damaged.bytes[100] ^= 1;
  ASSERT_STATUS(gw_ipc_handle_send(sv[0], &damaged), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("h: check value");
  ASSERT_EQ_INT(tst_open_fds(), base);

  /* A handle of this very process, received back: nothing filed, the open is the memory. */
  ASSERT_OK(gw_ipc_handle_send(sv[0], &h));
  ASSERT_OK(gw_ipc_handle_recv(sv[1], &got));
  ASSERT_EQ_INT(memcmp(got.bytes, h.bytes, sizeof h.bytes), 0);
  ASSERT_EQ_INT(tst_open_fds(), base);
  gw_array *b = NULL;
  ASSERT_OK(gw_ipc_open(ctx, &got, &b));
  ASSERT_EQ_PTR(gw_data(b), gw_data(a));
  gw_release(b);
  memcpy(&got, &untouched, sizeof got);

  /* Garbage bytes (with a descriptor, and without). */
  unsigned char junk[GW_IPC_HANDLE_BYTES];
  tst_random_fill(junk, sizeof junk);
  int one = dup(sv[0]);
  ASSERT_TRUE(one >= 0);
  send_raw(sv[0], junk, sizeof junk, &one, 1);
  close(one);
  ASSERT_STATUS(gw_ipc_handle_recv(sv[1], &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("not a valid handle");
  ASSERT_ERROR_MENTIONS("1 descriptor with them closed");
  ASSERT_EQ_INT(tst_open_fds(), base);
  send_raw(sv[0], junk, sizeof junk, NULL, 0);
  ASSERT_STATUS(gw_ipc_handle_recv(sv[1], &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("not a gpuwrap IPC handle");
  ASSERT_EQ_INT(memcmp(got.bytes, untouched.bytes, sizeof got.bytes), 0);

  /* Too few descriptors for a VMM handle of 3 chunks; one for a legacy handle, none for a
   * pool handle; many more than it names (all closed). */
  int many[20];
  for (int i = 0; i < 20; i++) {
    many[i] = dup(sv[0]);
    ASSERT_TRUE(many[i] >= 0);
  }
  int base_many = tst_open_fds();
  send_raw(sv[0], hv.bytes, sizeof hv.bytes, many, 2);
  ASSERT_STATUS(gw_ipc_handle_recv(sv[1], &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("3 chunks came with 2 descriptors");
  ASSERT_EQ_INT(tst_open_fds(), base_many);
  send_raw(sv[0], legacy.bytes, sizeof legacy.bytes, many, 1);
  ASSERT_STATUS(gw_ipc_handle_recv(sv[1], &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("device memory handle came with 1 descriptor, not 0");
  ASSERT_EQ_INT(tst_open_fds(), base_many);
  send_raw(sv[0], h.bytes, sizeof h.bytes, NULL, 0);
  ASSERT_STATUS(gw_ipc_handle_recv(sv[1], &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("pool memory handle came with 0 descriptors, not 1");
  send_raw(sv[0], h.bytes, sizeof h.bytes, many, 20);
  ASSERT_STATUS(gw_ipc_handle_recv(sv[1], &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("pool memory handle came with 20 descriptors, not 1");
  ASSERT_EQ_INT(tst_open_fds(), base_many);
  for (int i = 0; i < 20; i++) close(many[i]);
  ASSERT_EQ_INT(memcmp(got.bytes, untouched.bytes, sizeof got.bytes), 0);
  ASSERT_EQ_INT(tst_open_fds(), base);

  /* Short and long: a record of 100 bytes, of 300 (seqpacket); 100 bytes then the end of a
   * stream; the peer gone before any byte (recv), and while sending (no SIGPIPE). */
  int sq[2];
  sock_pair(SOCK_SEQPACKET, sq);
  send_raw(sq[0], junk, 100, NULL, 0);
  ASSERT_STATUS(gw_ipc_handle_recv(sq[1], &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("100 bytes received, not a handle's 256 (a short message)");
  unsigned char big[300] = {0}; /* (every byte defined: valgrind checks what is sent) */
  memcpy(big, legacy.bytes, 256);
  send_raw(sq[0], big, sizeof big, NULL, 0);
  ASSERT_STATUS(gw_ipc_handle_recv(sq[1], &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("MSG_TRUNC");
  close(sq[0]);
  ASSERT_STATUS(gw_ipc_handle_recv(sq[1], &got), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS("the peer closed");
  close(sq[1]);
  int st2[2];
  sock_pair(SOCK_STREAM, st2);
  send_raw(st2[0], legacy.bytes, 100, NULL, 0);
  ASSERT_EQ_INT(shutdown(st2[0], SHUT_WR), 0);
  ASSERT_STATUS(gw_ipc_handle_recv(st2[1], &got), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("100 bytes received, not a handle's 256 (the peer closed the socket");
  close(st2[1]);
  ASSERT_STATUS(gw_ipc_handle_send(st2[0], &h), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS("the peer closed the socket");
  close(st2[0]);
  ASSERT_EQ_INT(memcmp(got.bytes, untouched.bytes, sizeof got.bytes), 0);
  /* Non-blocking, nothing waiting. */
  ASSERT_EQ_INT(fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK), 0);
  ASSERT_STATUS(gw_ipc_handle_recv(sv[1], &got), GW_EBUSY);
  ASSERT_ERROR_MENTIONS("no message waiting");
  ASSERT_EQ_INT(fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) & ~O_NONBLOCK), 0);
  ASSERT_EQ_INT(tst_open_fds(), base);

  /* Sends from a process that is not the exporter: a forked child; a handle whose exporter
   * pid was rewritten; a descriptor number rewritten. Legacy handles go from anywhere. */
  fflush(NULL);
  pid_t kid = fork();
  ASSERT_TRUE(kid >= 0);
  if (kid == 0) {
    gw_status s = gw_ipc_handle_send(sv[0], &h);
    if (s != GW_EINVAL || !strstr(gw_last_error(), "only the exporting process")) _exit(3);
    if (!strstr(gw_last_error(), "not by this one")) _exit(4);
    _exit(gw_ipc_handle_send(sv[0], &legacy) == GW_OK ? 0 : 5);
  }
  int st = 0;
  ASSERT_EQ_INT(waitpid(kid, &st, 0), kid);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ_INT(WEXITSTATUS(st), 0);
  ASSERT_OK(gw_ipc_handle_recv(sv[1], &got)); /* the child's legacy send */
  ASSERT_EQ_INT(memcmp(got.bytes, legacy.bytes, sizeof got.bytes), 0);
  gw_ipc_handle other = h;
  uint32_t pid = (uint32_t)getpid() + 1;
  memcpy(other.bytes + 13, &pid, 4); /* little-endian hosts */
  reseal(&other);
  ASSERT_STATUS(gw_ipc_handle_send(sv[0], &other), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("only the exporting process");
  other = h;
  int32_t fdnum = sv[0];
  memcpy(other.bytes + 240, &fdnum, 4);
  reseal(&other);
  ASSERT_STATUS(gw_ipc_handle_send(sv[0], &other), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("never exported");
  ASSERT_EQ_INT(tst_open_fds(), base);

  /* Stale: the VMM chunks released and new ones made on their descriptor numbers; the pool
   * destroyed (its descriptor closed). Refused, nothing sent. */
  gw_release(v);
  seg_free(&seg);
  segment seg2 = seg_make(3, 3);
  ASSERT_STATUS(gw_ipc_handle_send(sv[0], &hv), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS_ANY("another file now|no longer has open");
  seg_free(&seg2);
  pool_array_free(a);
  ASSERT_OK(gw_cpu_pool_destroy(pool));
  ASSERT_STATUS(gw_ipc_handle_send(sv[0], &h), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS("pool destroyed");
  ASSERT_EQ_INT(fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK), 0);
  ASSERT_STATUS(gw_ipc_handle_recv(sv[1], &got), GW_EBUSY); /* nothing was sent */

  gw_release(d);
  close(sv[0]);
  close(sv[1]);
  ASSERT_EQ_INT(tst_open_fds(), fds0);
  gw_context_destroy(ctx);
  return 0;
}
