/*
 * What the two-process IPC tests of pool and VMM memory share (tests/test_ipc_pool.c,
 * tests/test_ipc_vmm.c, tests/test_ipc_fdpass.c): handles as hex lines over pipes, a peer
 * process exec'd from the test binary (with a socket where asked), Yama's ptrace_scope,
 * seeded data checked element by element, and VMM segments.
 */
#ifndef GW_TEST_IPC_PEER_H
#define GW_TEST_IPC_PEER_H

#include "test.h"

#include <inttypes.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

TST_API void to_hex(const gw_ipc_handle *h, char *out) {
  for (int i = 0; i < GW_IPC_HANDLE_BYTES; i++) sprintf(out + 2 * i, "%02x", h->bytes[i]);
}
TST_API void from_hex(const char *s, gw_ipc_handle *h) {
  for (int i = 0; i < GW_IPC_HANDLE_BYTES; i++) {
    unsigned v;
    ASSERT_EQ_INT(sscanf(s + 2 * i, "%2x", &v), 1);
    h->bytes[i] = (unsigned char)v;
  }
}
TST_API uint32_t crc32_of(const unsigned char *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}
TST_API void reseal(gw_ipc_handle *h) {
  uint32_t c = crc32_of(h->bytes, 252);
  for (int i = 0; i < 4; i++) h->bytes[252 + i] = (unsigned char)(c >> (8 * i));
}

/* A line to `out` ("handle <hex>" for a handle). */
TST_API void send_handle(FILE *out, const gw_ipc_handle *h) {
  char hex[2 * GW_IPC_HANDLE_BYTES + 1];
  to_hex(h, hex);
  fprintf(out, "handle %s\n", hex);
  fflush(out);
}
TST_API void send_line(FILE *out, const char *s) {
  fprintf(out, "%s\n", s);
  fflush(out);
}
/* The next line from `in` that starts with `want` (the harness may print lines of its own);
 * for "handle", the handle into *h. */
TST_API void expect_line(FILE *in, const char *want, gw_ipc_handle *h) {
  static char line[2 * GW_IPC_HANDLE_BYTES + 64];
  for (;;) {
    ASSERT_NOT_NULL(fgets(line, sizeof line, in));
    if (strncmp(line, want, strlen(want)) != 0) continue;
    if (h) from_hex(line + strlen(want) + 1, h);
    return;
  }
}

/* Yama's ptrace_scope (-1 where Yama is absent): pidfd_getfd of an ancestor's descriptor
 * is refused from 1 on, of any process's from 2 on. */
TST_API int ptrace_scope(void) {
  FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  if (!f) return -1;
  int v = -1;
  if (fscanf(f, "%d", &v) != 1) v = -1;
  fclose(f);
  return v;
}

/* The other process: this binary again, exec'd to run its helper entry `child` (H in
 * tests/test_list.h), its stdin and stdout piped to us; the job, seed and extra word reach
 * it as <prefix>JOB, <prefix>SEED and <prefix>EXTRA. */
typedef struct {
  pid_t pid;
  FILE *in;  /* its stdout */
  FILE *out; /* its stdin */
} peer;

/* The descriptor number a peer started by tst_peer_start_sock finds its socket at. */
#define TST_PEER_SOCK 200

/* As tst_peer_start, with `sock` (ours, left open) at TST_PEER_SOCK in the peer (-1: none). */
TST_API peer tst_peer_start_sock(const char *prefix, const char *child, const char *job,
                                 uint64_t seed, const char *extra, int sock) {
  char ejob[64], eseed[64], eextra[64];
  snprintf(ejob, sizeof ejob, "%sJOB=%s", prefix, job);
  snprintf(eseed, sizeof eseed, "%sSEED=%" PRIu64, prefix, seed);
  snprintf(eextra, sizeof eextra, "%sEXTRA=%s", prefix, extra ? extra : "");
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 4, sizeof *env);
  ASSERT_NOT_NULL(env);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], prefix, strlen(prefix)) != 0) env[k++] = environ[i];
  env[k++] = ejob;
  env[k++] = eseed;
  env[k++] = eextra;
  int to[2], from[2];
  ASSERT_EQ_INT(pipe(to), 0);
  ASSERT_EQ_INT(pipe(from), 0);
  posix_spawn_file_actions_t fa;
  ASSERT_EQ_INT(posix_spawn_file_actions_init(&fa), 0);
  posix_spawn_file_actions_adddup2(&fa, to[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from[1], 1);
  posix_spawn_file_actions_addclose(&fa, to[1]);
  posix_spawn_file_actions_addclose(&fa, from[0]);
  if (sock >= 0) posix_spawn_file_actions_adddup2(&fa, sock, TST_PEER_SOCK);
  char exe[4096], name[64];
  snprintf(name, sizeof name, "%s", child);
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_TRUE(len > 0);
  exe[len] = '\0';
  char *argv[] = {exe, name, NULL};
  peer p;
  ASSERT_EQ_INT(posix_spawn(&p.pid, exe, &fa, NULL, argv, env), 0);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  close(to[0]);
  close(from[1]);
  p.in = fdopen(from[0], "r");
  p.out = fdopen(to[1], "w");
  ASSERT_NOT_NULL(p.in);
  ASSERT_NOT_NULL(p.out);
  return p;
}

TST_API peer tst_peer_start(const char *prefix, const char *child, const char *job, uint64_t seed,
                            const char *extra) {
  return tst_peer_start_sock(prefix, child, job, seed, extra, -1);
}

TST_API void peer_finish(peer *p) {
  fclose(p->out);
  int st = 0;
  ASSERT_EQ_INT(waitpid(p->pid, &st, 0), p->pid);
  fclose(p->in);
  if (!WIFEXITED(st)) TST_FAIL("child died of signal %d", WTERMSIG(st));
  ASSERT_EQ_INT(WEXITSTATUS(st), 0);
}

/* Cycles of the cycle tests: GW_TEST_IPC_CYCLES where set (issue 45's target is 10^4;
 * CI keeps `dflt`), at least 1. */
TST_API int tst_ipc_cycles(int dflt) {
  const char *e = getenv("GW_TEST_IPC_CYCLES");
  int n = e && *e ? atoi(e) : dflt;
  return n < 1 ? 1 : n;
}

/* Seeded data, every element checked (as test_ipc.c). */
TST_API void *seeded_data(const gw_array *a, uint64_t seed) {
  size_t bytes = tst_array_bytes(a);
  void *buf = malloc(bytes ? bytes : 1);
  ASSERT_NOT_NULL(buf);
  uint64_t keep = tst_rng;
  tst_rng = seed ? seed : 1;
  tst_random_fill(buf, bytes);
  tst_rng = keep;
  return buf;
}
TST_API void write_seeded(gw_array *a, uint64_t seed) {
  void *buf = seeded_data(a, seed);
  tst_write(a, buf);
  free(buf);
}
TST_API void check_seeded(const gw_array *a, uint64_t seed) {
  size_t bytes = tst_array_bytes(a), elem = gw_dtype_size(gw_array_dtype(a));
  void *want = seeded_data(a, seed), *got = malloc(bytes ? bytes : 1);
  ASSERT_NOT_NULL(got);
  tst_read(a, got);
  ASSERT_ELEMS_EQ(got, want, bytes / elem, elem);
  free(want);
  free(got);
}

/* A reservation of `slots` chunks of cs bytes, the first `mapped` of them mapped (made
 * shareable), as PyTorch's expandable segments. */
typedef struct {
  char *r;
  size_t cs;
  int slots, mapped;
} segment;

TST_API segment seg_make(int slots, int mapped) {
  segment s = {.cs = 2 * gw_cpu_vmm_granularity(), .slots = slots, .mapped = mapped};
  ASSERT_OK(gw_cpu_vmm_reserve(s.cs * (size_t)slots, (void **)&s.r));
  for (int k = 0; k < mapped; k++) {
    gw_cpu_vmm_chunk c;
    ASSERT_OK(gw_cpu_vmm_create(0, s.cs, GW_CPU_HANDLE_POSIX_FD, &c));
    ASSERT_OK(gw_cpu_vmm_map(s.r + (size_t)k * s.cs, s.cs, c));
    ASSERT_OK(gw_cpu_vmm_release(c)); /* the mapping holds it, as after cuMemMap */
  }
  return s;
}
TST_API void seg_free(segment *s) {
  for (int k = 0; k < s->mapped; k++) ASSERT_OK(gw_cpu_vmm_unmap(s->r + (size_t)k * s->cs, s->cs));
  ASSERT_OK(gw_cpu_vmm_free(s->r, s->cs * (size_t)s->slots));
}

/* The arrays the tests share, over a segment of 3 mapped chunks (uint32 elements):
 *   0: 1-D over 2 chunks, [cs/2, cs + cs/2);
 *   1: 2-D {2, k}, strides {cs/4, -1}: its first element in the MIDDLE chunk at 1.5 cs,
 *      row 0 running down into chunk 0, row 1 (at 2.5 cs) down into chunk 2: 3 chunks. */
TST_API gw_array *shared_array(gw_context *ctx, const segment *s, int which) {
  gw_array *a = NULL;
  if (which == 0) {
    int64_t n = (int64_t)(s->cs / 4);
    ASSERT_OK(gw_wrap(ctx, s->r + s->cs / 2, GW_UINT32, 1, &n, NULL, 0, &a));
  } else {
    int64_t shape[2] = {2, (int64_t)(s->cs / 8) + 3}, strides[2] = {(int64_t)(s->cs / 4), -1};
    ASSERT_OK(gw_wrap(ctx, s->r + s->cs + s->cs / 2, GW_UINT32, 2, shape, strides, 0, &a));
  }
  ASSERT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
  return a;
}

#endif /* GW_TEST_IPC_PEER_H */
