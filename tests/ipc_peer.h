/*
 * What the two-process IPC tests of pool and VMM memory share (tests/test_ipc_pool.c,
 * tests/test_ipc_vmm.c, tests/test_ipc_fdpass.c, tests/gpu/test_vmm_cuda.c): handles as hex
 * lines over pipes, a peer process exec'd from the test binary (with a socket where asked),
 * Yama's ptrace_scope, seeded data checked element by element, and the rounds of an export
 * in one process and its opens in the other (the CPU model's VMM segments:
 * tests/cpu_segment.h).
 */
#ifndef GW_TEST_IPC_PEER_H
#define GW_TEST_IPC_PEER_H

#include "test.h"

#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

TST_API void to_hex(const gw_ipc_handle *h, char *out) {
  for (int i = 0; i < GW_IPC_HANDLE_BYTES; i++) sprintf(out + 2 * i, "%02x", h->bytes[i]);
}
TST_API void from_hex(const char *s, gw_ipc_handle *h) {
  ASSERT_EQ_SIZE(strcspn(s, "\n"), 2 * GW_IPC_HANDLE_BYTES); /* (a line: its newline aside) */
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

/* Fresh random bytes for all of a (C order of its elements) from `seed`; written, and
 * checked element by element. */
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

/* The peer's side of tst_peer_start: its job, and its seed and extra word through *seed and
 * *extra. */
TST_API const char *tst_peer_job(const char *prefix, uint64_t *seed, const char **extra) {
  char name[64];
  snprintf(name, sizeof name, "%sJOB", prefix);
  const char *job = getenv(name);
  ASSERT_NOT_NULL(job);
  snprintf(name, sizeof name, "%sSEED", prefix);
  const char *s = getenv(name);
  ASSERT_NOT_NULL(s);
  *seed = strtoull(s, NULL, 10);
  snprintf(name, sizeof name, "%sEXTRA", prefix);
  *extra = getenv(name);
  return job;
}

/* Skips where this process may not take another's descriptors at all: no pidfd_open, or
 * Yama's ptrace_scope 2 or more. */
TST_API void tst_require_take_fd(void) {
  tst_require_pidfd();
  if (ptrace_scope() >= 2) TEST_SKIP("Yama ptrace_scope >= 2: no process may take another's fd");
}

/* ---- a round between two processes: the peer exports, this process opens ---- */

/* The exporter's half of a round: `a` seeded with `seed`, exported into *h, the handle on
 * stdout; back when the importer says "go" (it has read every element, maybe written its
 * own, and released the array). */
TST_API void tst_export_round(gw_context *ctx, gw_array *a, uint64_t seed, gw_ipc_handle *h) {
  write_seeded(a, seed);
  ASSERT_OK(gw_synchronize(ctx));
  ASSERT_OK(gw_ipc_export(a, h));
  send_handle(stdout, h);
  expect_line(stdin, "go", NULL);
}

/* What differs between the allocators' two-process tests on the CPU model (test_ipc_pool.c,
 * test_ipc_vmm.c): the peer (this binary's helper `child`, its variables under `prefix`)
 * and the name the model's mappings of the memory carry in /proc/self/maps. */
typedef struct {
  const char *prefix, *child, *maps_name;
} ipc_alloc;

TST_API int ipc_alloc_maps(const ipc_alloc *k) { return tst_maps_naming(k->maps_name); }

/* Nothing of an import left in this process: no imported pool or pointer, the memory's
 * mappings and the open descriptors at maps0 and fds0. */
TST_API void tst_nothing_left(const ipc_alloc *k, int maps0, int fds0) {
  ASSERT_EQ_SIZE(gw_cpu_ipc_pool_mappings(), 0);
  ASSERT_EQ_INT(ipc_alloc_maps(k), maps0);
  ASSERT_EQ_INT(tst_open_fds(), fds0);
}

/* An open of h that fails with `want`, the error naming `says` and `also` (each where not
 * NULL), no array made and nothing left (tst_nothing_left). */
TST_API void tst_open_fails_clean(gw_context *ctx, const gw_ipc_handle *h, gw_status want,
                                  const char *says, const char *also, const ipc_alloc *k, int maps0,
                                  int fds0) {
  gw_array *a = NULL;
  ASSERT_STATUS(gw_ipc_open(ctx, h, &a), want);
  if (says) ASSERT_ERROR_MENTIONS(says);
  if (also) ASSERT_ERROR_MENTIONS(also);
  ASSERT_NULL(a);
  tst_nothing_left(k, maps0, fds0);
}

/* pidfd_getfd refused as Yama refuses it (EPERM) and as a kernel before 5.6 lacks it
 * (ENOSYS): each open of h fails with GW_ENOTSUP naming the cause and `also`, leaving
 * nothing; then pidfd_getfd is itself again. */
TST_API void tst_open_refusals(gw_context *ctx, const gw_ipc_handle *h, const char *also,
                               const ipc_alloc *k, int maps0, int fds0) {
  static const struct {
    int err;
    const char *says;
  } refusals[2] = {{EPERM, "ptrace_scope"}, {ENOSYS, "Linux 5.6"}};
  for (int i = 0; i < 2; i++) {
    gw_cpu_ipc_force_pidfd_errno(refusals[i].err);
    tst_open_fails_clean(ctx, h, GW_ENOTSUP, refusals[i].says, also, k, maps0, fds0);
  }
  gw_cpu_ipc_force_pidfd_errno(0);
}

/* A forked child is not served this process's mapping of h (at `mine`): it imports its own
 * and finds every element of `seed` there, where Yama lets it take its sibling's
 * descriptors; under scope 1 it may not, and says so. */
TST_API void tst_fork_opens_own(gw_context *ctx, const gw_ipc_handle *h, const void *mine,
                                uint64_t seed) {
  int sibling_refused = ptrace_scope() >= 1;
  fflush(NULL);
  pid_t kid = fork();
  ASSERT_TRUE(kid >= 0);
  if (kid == 0) {
    gw_array *c = NULL;
    gw_status s = gw_ipc_open(ctx, h, &c);
    if (sibling_refused) _exit(s == GW_ENOTSUP && strstr(gw_last_error(), "ptrace_scope") ? 0 : 5);
    if (s != GW_OK) _exit(3);
    if (gw_data(c) == mine) _exit(4);
    check_seeded(c, seed);
    gw_release(c);
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ_INT(waitpid(kid, &st, 0), kid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The importer's side of the cycle tests: the peer's job "cycler" exports
 * tst_ipc_cycles(dflt) allocations (n as its extra word), allocation i seeded with seed+i;
 * each opened here, every element checked, released. Descriptors, mappings (the model's
 * import table and /proc/self/maps) and the model's device memory end where they started
 * (the peer checks its own side). */
TST_API void tst_import_cycles(const ipc_alloc *k, int dflt) {
  tst_require_take_fd();
  gw_context *ctx = tst_open(0);
  int maps0 = ipc_alloc_maps(k), fds0 = tst_open_fds();
  size_t live0 = gw_cpu_vmm_live();
  uint64_t seed = tst_rand64() | 1;
  int n = tst_ipc_cycles(dflt);
  char count[16];
  snprintf(count, sizeof count, "%d", n);
  peer p = tst_peer_start(k->prefix, k->child, "cycler", seed, count);
  for (int i = 0; i < n; i++) {
    gw_ipc_handle h;
    expect_line(p.in, "handle", &h);
    gw_array *a = NULL;
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    check_seeded(a, seed + (uint64_t)i);
    gw_release(a);
    send_line(p.out, "go");
  }
  peer_finish(&p);
  tst_nothing_left(k, maps0, fds0);
  ASSERT_EQ_SIZE(gw_cpu_vmm_live(), live0);
  gw_context_destroy(ctx);
}

#endif /* GW_TEST_IPC_PEER_H */
