/*
 * The CPU model's interprocess events (src/backends/cpu/cpu_ipc_event.c), at the backend
 * level (the ops ipc_event_create / ipc_event_open, then event_record, stream_wait_event,
 * event_query and event_destroy as for any event): the halo's IPC path signals with them.
 *
 * The second process is this binary started again with exec (as tests/test_ipc.c does:
 * handles as hex in the environment, the answer in its exit status), or a plain fork (no
 * stream workers there: the model runs work on the caller). Where a test needs "another
 * process's record that has not run yet", it maps the event's page itself through the
 * handle, as another process would, and moves the counters.
 *
 * Links the static library: the backend table and the CPU model's internals are private.
 */
#include "test.h"

#include "cpu_internal.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

extern char **environ;

#define N 4096 /* uint64 elements moved */

static const gw__backend_ops *ops = &gw__cpu_ops;

/* ---- helpers ---- */

static int evt_maps(void) { return tst_maps_naming("gw-cpu-evt-"); }
static int open_fds(void) { return tst_open_fds(); }

static void to_hex(const unsigned char *b, char *out) {
  for (int i = 0; i < GW__IPC_RT_BYTES; i++) sprintf(out + 2 * i, "%02x", b[i]);
}
static void from_hex(const char *s, unsigned char *b) {
  ASSERT_NOT_NULL(s);
  ASSERT_EQ_SIZE(strlen(s), 2 * GW__IPC_RT_BYTES);
  for (int i = 0; i < GW__IPC_RT_BYTES; i++) {
    unsigned v;
    ASSERT_EQ_INT(sscanf(s + 2 * i, "%2x", &v), 1);
    b[i] = (unsigned char)v;
  }
}

static gw__xfer xfer(void *dst, gw_memkind dk, const void *src, gw_memkind sk) {
  gw__xfer x = {.ndim = 1, .elem = 8, .dst = dst, .src = src, .dst_kind = dk, .src_kind = sk};
  x.shape[0] = N;
  x.dst_stride[0] = x.src_stride[0] = 8;
  x.dst_device = dk == GW_MEM_HOST ? -1 : 0;
  x.src_device = sk == GW_MEM_HOST ? -1 : 0;
  return x;
}

/* N fresh random elements from seed (the child regenerates them). */
static uint64_t *seeded(uint64_t seed) {
  uint64_t *v = malloc(N * 8);
  ASSERT_NOT_NULL(v);
  uint64_t keep = tst_rng;
  tst_rng = seed;
  tst_random_fill(v, N * 8);
  tst_rng = keep;
  return v;
}

/* The event's shared page, mapped as another process maps it (the handle's pid and fd):
 * lets a test play "another process recorded, its work has not run yet". */
typedef struct {
  _Atomic uint64_t recorded, completed;
} page_view;
static page_view *map_page(const unsigned char rt[GW__IPC_RT_BYTES]) {
  uint64_t pid;
  int32_t fd;
  memcpy(&pid, rt + 8, 8);
  memcpy(&fd, rt + 16, 4);
  char path[64];
  snprintf(path, sizeof path, "/proc/%llu/fd/%d", (unsigned long long)pid, (int)fd);
  int f = open(path, O_RDWR | O_CLOEXEC);
  ASSERT_TRUE(f >= 0);
  void *p = mmap(NULL, tst_page(), PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  close(f);
  ASSERT_TRUE(p != MAP_FAILED);
  return p;
}

/* ---- the consumer: B of the ordering tests ----
 * Opens the event and the shared memory, waits for A's word that its record returned,
 * then waits for the event ON ITS STREAM and copies the shared memory out (to pageable
 * memory: the copy runs on the caller in stream order, with no delay of its own, so only
 * the wait keeps it after A's delayed copy). Every element must be A's data. */
static int consume(void *state, const unsigned char *evh, const unsigned char *memh, uint64_t seed,
                   int rfd) {
  int fds0 = open_fds(), maps0 = evt_maps();
  void *ev = NULL, *s = NULL, *shm = NULL;
  ASSERT_OK(ops->ipc_event_open(state, evh, &ev));
  ASSERT_EQ_INT(evt_maps(), maps0 + 1);
  ASSERT_OK(ops->ipc_mem_open(state, memh, 0, N * 8, NULL, &shm));
  ASSERT_OK(ops->stream_create(state, &s));
  char c = 0;
  ASSERT_EQ_INT(read(rfd, &c, 1), 1);
  uint64_t *got = malloc(N * 8);
  ASSERT_NOT_NULL(got);
  tst_poison(got, N * 8);
  ASSERT_OK(ops->stream_wait_event(state, s, ev));
  gw__xfer x = xfer(got, GW_MEM_HOST, shm, GW_MEM_DEVICE);
  ASSERT_OK(ops->xfer_copy(state, &x, s));
  uint64_t *want = seeded(seed);
  ASSERT_ELEMS_EQ(got, want, N, 8);
  ASSERT_OK(ops->event_query(state, ev)); /* the record it waited for has run */
  free(want);
  free(got);
  ASSERT_OK(ops->stream_destroy(state, s));
  ASSERT_OK(ops->event_destroy(state, ev));
  ASSERT_OK(ops->ipc_mem_close(state, 0, NULL, shm));
  ASSERT_EQ_INT(evt_maps(), maps0);
  ASSERT_EQ_INT(open_fds(), fds0);
  return 0;
}

static int child_main(void) {
  gw_context *ctx = tst_open(0);
  unsigned char evh[GW__IPC_RT_BYTES], memh[GW__IPC_RT_BYTES];
  from_hex(getenv("GW_EVT_EVENT"), evh);
  from_hex(getenv("GW_EVT_MEM"), memh);
  uint64_t seed = strtoull(getenv("GW_EVT_SEED"), NULL, 10);
  int rfd = atoi(getenv("GW_EVT_FD"));
  int rc = consume(ctx->state, evh, memh, seed, rfd);
  gw_context_destroy(ctx);
  return rc;
}

static pid_t spawn_consumer(const unsigned char *evh, const unsigned char *memh, uint64_t seed,
                            int rfd) {
  char hev[2 * GW__IPC_RT_BYTES + 1], hmem[2 * GW__IPC_RT_BYTES + 1];
  to_hex(evh, hev);
  to_hex(memh, hmem);
  char e1[200], e2[200], e3[64], e4[64];
  snprintf(e1, sizeof e1, "GW_EVT_EVENT=%s", hev);
  snprintf(e2, sizeof e2, "GW_EVT_MEM=%s", hmem);
  snprintf(e3, sizeof e3, "GW_EVT_SEED=%" PRIu64, seed);
  snprintf(e4, sizeof e4, "GW_EVT_FD=%d", rfd);
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 5, sizeof *env);
  ASSERT_NOT_NULL(env);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "GW_EVT_", 7) != 0) env[k++] = environ[i];
  env[k++] = e1;
  env[k++] = e2;
  env[k++] = e3;
  env[k++] = e4;
  char exe[4096], name[] = "evt_child";
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_TRUE(len > 0);
  exe[len] = '\0';
  char *argv[] = {exe, name, NULL};
  pid_t pid;
  ASSERT_EQ_INT(posix_spawn(&pid, exe, NULL, NULL, argv, env), 0);
  free(env);
  return pid;
}

static void expect_exit_ok(pid_t pid) {
  int status = 0;
  ASSERT_EQ_INT(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status)) TST_FAIL("consumer died of signal %d", WTERMSIG(status));
  ASSERT_EQ_INT(WEXITSTATUS(status), 0);
}

/* A, the producer: fresh random data copied (slowly: GPUWRAP_CPU_STREAM_DELAY_US) into
 * poisoned shared device memory on its stream, the event recorded after it; B is told
 * once the record returned, and must see every element of the data. */
static int ordered(int use_fork) {
  gw_context *ctx = tst_open(0);
  void *st = ctx->state;
  int fds0 = open_fds();
  void *ev = NULL, *src = NULL, *shm = NULL, *s = NULL;
  unsigned char evh[GW__IPC_RT_BYTES], memh[GW__IPC_RT_BYTES];
  ASSERT_OK(ops->ipc_event_create(st, &ev, evh));
  ASSERT_OK(ops->mem_alloc(st, GW_MEM_DEVICE, N * 8, &src));
  ASSERT_OK(ops->mem_alloc(st, GW_MEM_DEVICE, N * 8, &shm));
  uint64_t alloc_id = 0;
  gw__ipc_share sh;
  ASSERT_OK(ops->ipc_mem_export(st, shm, N * 8, 0, memh, &alloc_id, &sh));
  ASSERT_EQ_INT(sh.kind, GW__IPC_LEGACY);
  uint64_t seed = tst_rand64() | 1;
  uint64_t *data = seeded(seed);
  memcpy(src, data, N * 8);
  tst_poison(shm, N * 8);
  int p[2];
  ASSERT_EQ_INT(pipe(p), 0);
  pid_t pid;
  if (use_fork) {
    pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
      close(p[1]);
      _exit(consume(st, evh, memh, seed, p[0]));
    }
  } else {
    pid = spawn_consumer(evh, memh, seed, p[0]);
  }
  close(p[0]);
  ASSERT_OK(ops->stream_create(st, &s));
  gw__xfer x = xfer(shm, GW_MEM_DEVICE, src, GW_MEM_DEVICE);
  ASSERT_OK(ops->xfer_copy(st, &x, s));
  ASSERT_OK(ops->event_record(st, ev, s));
  ASSERT_EQ_INT(write(p[1], "r", 1), 1);
  close(p[1]);
  expect_exit_ok(pid);
  ASSERT_OK(ops->stream_synchronize(st, s));
  ASSERT_OK(ops->event_query(st, ev));
  ASSERT_OK(ops->stream_destroy(st, s));
  ASSERT_OK(ops->event_destroy(st, ev));
  ASSERT_OK(ops->mem_free(st, GW_MEM_DEVICE, 0, src));
  ASSERT_OK(ops->mem_free(st, GW_MEM_DEVICE, 0, shm));
  free(data);
  ASSERT_EQ_INT(evt_maps(), 0);
  ASSERT_EQ_INT(open_fds(), fds0);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- tests ---- */

TEST_IMPL(ordered_across_exec) { return ordered(0); }

/* The consumer a plain fork: no workers, its calls run the work (and poll the wait). */
TEST_IMPL(ordered_across_fork) { return ordered(1); }

/* Both ends in one process, on two streams (the creator cannot open its own handle, so
 * one event): the wait keeps the pageable read after the slow copy. */
TEST_IMPL(ordered_in_one_process) {
  gw_context *ctx = tst_open(0);
  void *st = ctx->state, *ev = NULL, *src = NULL, *dst = NULL, *s1 = NULL, *s2 = NULL;
  unsigned char evh[GW__IPC_RT_BYTES];
  ASSERT_OK(ops->ipc_event_create(st, &ev, evh));
  ASSERT_OK(ops->mem_alloc(st, GW_MEM_DEVICE, N * 8, &src));
  ASSERT_OK(ops->mem_alloc(st, GW_MEM_DEVICE, N * 8, &dst));
  uint64_t *data = seeded(tst_rand64() | 1), *got = malloc(N * 8);
  ASSERT_NOT_NULL(got);
  memcpy(src, data, N * 8);
  tst_poison(dst, N * 8);
  tst_poison(got, N * 8);
  ASSERT_OK(ops->stream_create(st, &s1));
  ASSERT_OK(ops->stream_create(st, &s2));
  gw__xfer x = xfer(dst, GW_MEM_DEVICE, src, GW_MEM_DEVICE);
  ASSERT_OK(ops->xfer_copy(st, &x, s1));
  ASSERT_OK(ops->event_record(st, ev, s1));
  ASSERT_OK(ops->stream_wait_event(st, s2, ev));
  gw__xfer y = xfer(got, GW_MEM_HOST, dst, GW_MEM_DEVICE);
  ASSERT_OK(ops->xfer_copy(st, &y, s2));
  ASSERT_ELEMS_EQ(got, data, N, 8);
  ASSERT_OK(ops->stream_destroy(st, s1));
  ASSERT_OK(ops->stream_destroy(st, s2));
  ASSERT_OK(ops->event_destroy(st, ev));
  ASSERT_OK(ops->mem_free(st, GW_MEM_DEVICE, 0, src));
  ASSERT_OK(ops->mem_free(st, GW_MEM_DEVICE, 0, dst));
  free(data);
  free(got);
  gw_context_destroy(ctx);
  return 0;
}

/* A fresh event is complete, and a wait queued before any record is ready at once: the
 * stream's later work runs (a hang here is the failure). */
TEST_IMPL(wait_before_any_record) {
  gw_context *ctx = tst_open(0);
  void *st = ctx->state, *ev = NULL, *s = NULL, *dev = NULL;
  unsigned char evh[GW__IPC_RT_BYTES];
  ASSERT_OK(ops->ipc_event_create(st, &ev, evh));
  ASSERT_OK(ops->event_query(st, ev));
  ASSERT_OK(ops->stream_create(st, &s));
  ASSERT_OK(ops->mem_alloc(st, GW_MEM_DEVICE, N * 8, &dev));
  uint64_t *data = seeded(tst_rand64() | 1), *got = malloc(N * 8);
  ASSERT_NOT_NULL(got);
  memcpy(dev, data, N * 8);
  tst_poison(got, N * 8);
  ASSERT_OK(ops->stream_wait_event(st, s, ev));
  gw__xfer y = xfer(got, GW_MEM_HOST, dev, GW_MEM_DEVICE);
  ASSERT_OK(ops->xfer_copy(st, &y, s));
  ASSERT_ELEMS_EQ(got, data, N, 8);
  ASSERT_OK(ops->stream_synchronize(st, s));
  ASSERT_OK(ops->event_query(st, ev));
  ASSERT_OK(ops->stream_destroy(st, s));
  ASSERT_OK(ops->event_destroy(st, ev));
  ASSERT_OK(ops->mem_free(st, GW_MEM_DEVICE, 0, dev));
  free(data);
  free(got);
  gw_context_destroy(ctx);
  return 0;
}

/* Query: pending while a record's stream work has not run, complete after. A "gate" event
 * whose record another process made (its counters moved through the page) holds the
 * stream, so pending is certain, not a matter of time; the event destroyed while its
 * record is still queued keeps its page until the record ran. */
TEST_IMPL(query_pending_then_complete) {
  gw_context *ctx = tst_open(0);
  void *st = ctx->state, *gate = NULL, *ev = NULL, *ev2 = NULL, *s = NULL;
  unsigned char gh[GW__IPC_RT_BYTES], eh[GW__IPC_RT_BYTES], eh2[GW__IPC_RT_BYTES];
  ASSERT_OK(ops->ipc_event_create(st, &gate, gh));
  ASSERT_OK(ops->ipc_event_create(st, &ev, eh));
  ASSERT_OK(ops->ipc_event_create(st, &ev2, eh2));
  page_view *g = map_page(gh);
  atomic_fetch_add(&g->recorded, 1); /* another process recorded; its work is pending */
  ASSERT_EQ_INT(ops->event_query(st, gate), GW_EBUSY);
  ASSERT_OK(ops->stream_create(st, &s));
  ASSERT_OK(ops->stream_wait_event(st, s, gate));
  ASSERT_OK(ops->event_record(st, ev, s));
  ASSERT_OK(ops->event_record(st, ev2, s));
  ASSERT_EQ_INT(ops->event_query(st, ev), GW_EBUSY);
  ASSERT_EQ_INT(ops->event_query(st, ev2), GW_EBUSY);
  ASSERT_OK(ops->event_destroy(st, ev2)); /* its record still queued */
  /* A record made after the wait was queued is not what it waits for. */
  atomic_fetch_add(&g->recorded, 1);
  atomic_store(&g->completed, 1);
  ASSERT_OK(ops->stream_synchronize(st, s));
  ASSERT_OK(ops->event_query(st, ev));
  ASSERT_EQ_INT(ops->event_query(st, gate), GW_EBUSY); /* the second record has not run */
  atomic_store(&g->completed, 2);
  ASSERT_OK(ops->event_query(st, gate));
  munmap(g, tst_page());
  ASSERT_OK(ops->stream_destroy(st, s));
  ASSERT_OK(ops->event_destroy(st, ev));
  ASSERT_OK(ops->event_destroy(st, gate));
  ASSERT_EQ_INT(evt_maps(), 0);
  gw_context_destroy(ctx);
  return 0;
}

/* The creating process cannot open its own handle (as cudaIpcOpenEventHandle); a garbled
 * handle is GW_EINVAL; a handle whose creator exited is GW_EBACKEND saying so. Nothing is
 * written to *event on a failure, nothing is left mapped or open. */
TEST_IMPL(open_refusals) {
  gw_context *ctx = tst_open(0);
  void *st = ctx->state, *ev = NULL;
  int fds0 = open_fds();
  unsigned char h[GW__IPC_RT_BYTES];
  ASSERT_OK(ops->ipc_event_create(st, &ev, h));
  void *const sentinel = (void *)(uintptr_t)0x5A5A5A50, *out = sentinel;
  ASSERT_STATUS(ops->ipc_event_open(st, h, &out), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS("creat");
  ASSERT_EQ_PTR(out, sentinel);

  static const int garble[] = {0, 7, 20, 24}; /* magic, magic, zero field, serial */
  for (size_t i = 0; i < sizeof garble / sizeof *garble; i++) {
    unsigned char b[GW__IPC_RT_BYTES];
    memcpy(b, h, sizeof b);
    if (garble[i] == 24)
      memset(b + 24, 0, 8);
    else
      b[garble[i]] ^= 0x41;
    ASSERT_STATUS(ops->ipc_event_open(st, b, &out), GW_EINVAL);
    ASSERT_ERROR_MENTIONS("handle");
    ASSERT_EQ_PTR(out, sentinel);
  }
  unsigned char neg[GW__IPC_RT_BYTES];
  memcpy(neg, h, sizeof neg);
  memset(neg + 16, 0xFF, 4); /* fd -1 */
  ASSERT_STATUS(ops->ipc_event_open(st, neg, &out), GW_EINVAL);
  unsigned char zero[GW__IPC_RT_BYTES] = {0};
  ASSERT_STATUS(ops->ipc_event_open(st, zero, &out), GW_EINVAL);
  ASSERT_OK(ops->event_destroy(st, ev));

  /* A creator that is gone: a forked child makes an event, hands its handle over, exits. */
  int p[2];
  ASSERT_EQ_INT(pipe(p), 0);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    void *cev = NULL;
    unsigned char ch[GW__IPC_RT_BYTES];
    int ok = ops->ipc_event_create(st, &cev, ch) == GW_OK &&
             write(p[1], ch, sizeof ch) == (ssize_t)sizeof ch;
    _exit(ok ? 0 : 1);
  }
  close(p[1]);
  unsigned char gone[GW__IPC_RT_BYTES];
  ASSERT_EQ_INT(read(p[0], gone, sizeof gone), (int)sizeof gone);
  close(p[0]);
  expect_exit_ok(pid);
  ASSERT_STATUS(ops->ipc_event_open(st, gone, &out), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS("gone");
  ASSERT_EQ_PTR(out, sentinel);
  ASSERT_EQ_INT(evt_maps(), 0);
  ASSERT_EQ_INT(open_fds(), fds0);
  gw_context_destroy(ctx);
  return 0;
}

/* Injected failures of the two ops: the injected status, *event untouched, nothing made
 * (no memfd, no mapping; LSan: no heap). */
TEST_IMPL(inject_create_and_open) {
  gw_context *ctx = tst_open(0);
  void *st = ctx->state;
  int fds0 = open_fds();
  void *const sentinel = (void *)(uintptr_t)0x5A5A5A50, *out = sentinel;
  unsigned char h[GW__IPC_RT_BYTES];
  memset(h, 0x5A, sizeof h);
  gw_cpu_fail_op(GW_CPU_OP_IPC_EVENT_CREATE, 1, GW_ENOMEM);
  ASSERT_STATUS(ops->ipc_event_create(st, &out, h), GW_ENOMEM);
  ASSERT_EQ_PTR(out, sentinel);
  for (size_t i = 0; i < sizeof h; i++) ASSERT_EQ_INT(h[i], 0x5A);
  ASSERT_EQ_INT(evt_maps(), 0);
  ASSERT_EQ_INT(open_fds(), fds0);

  /* Open of a valid handle (made by a forked child, which waits until we are done). */
  int p[2], q[2];
  ASSERT_EQ_INT(pipe(p), 0);
  ASSERT_EQ_INT(pipe(q), 0);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    void *cev = NULL;
    unsigned char ch[GW__IPC_RT_BYTES];
    char c;
    int ok = ops->ipc_event_create(st, &cev, ch) == GW_OK &&
             write(p[1], ch, sizeof ch) == (ssize_t)sizeof ch && read(q[0], &c, 1) == 1;
    _exit(ok ? 0 : 1);
  }
  close(p[1]);
  close(q[0]);
  ASSERT_EQ_INT(read(p[0], h, sizeof h), (int)sizeof h);
  close(p[0]);
  gw_cpu_fail_op(GW_CPU_OP_IPC_EVENT_OPEN, 1, GW_EBACKEND);
  ASSERT_STATUS(ops->ipc_event_open(st, h, &out), GW_EBACKEND);
  ASSERT_EQ_PTR(out, sentinel);
  ASSERT_EQ_INT(evt_maps(), 0);
  ASSERT_EQ_INT(gw_cpu_failures_injected(), 2);
  ASSERT_OK(ops->ipc_event_open(st, h, &out)); /* the next open works: nothing was changed */
  ASSERT_EQ_INT(evt_maps(), 1);
  ASSERT_OK(ops->event_destroy(st, out));
  ASSERT_EQ_INT(write(q[1], "x", 1), 1);
  close(q[1]);
  expect_exit_ok(pid);
  ASSERT_EQ_INT(evt_maps(), 0);
  ASSERT_EQ_INT(open_fds(), fds0);
  gw_context_destroy(ctx);
  return 0;
}

/* Recording or waiting for an interprocess event in a capturing stream is refused
 * (GW_ENOTSUP), nothing recorded into the capture, which stays valid. */
TEST_IMPL(capture_refused) {
  gw_context *ctx = tst_open(0);
  void *st = ctx->state, *ev = NULL, *native = NULL, *s = NULL, *dev = NULL;
  unsigned char h[GW__IPC_RT_BYTES];
  ASSERT_OK(ops->ipc_event_create(st, &ev, h));
  ASSERT_OK(ops->mem_alloc(st, GW_MEM_DEVICE, N * 8, &dev));
  ASSERT_OK(gw_cpu_stream_create_external(0, 0, &native));
  ASSERT_OK(ops->stream_borrow(st, native, &s));
  ASSERT_OK(gw_cpu_stream_capture_begin(native, GW_CPU_CAPTURE_GLOBAL));
  gw__fillspec f = {.ndim = 1, .elem = 8, .dst = dev, .kind = GW_MEM_DEVICE, .device = 0};
  f.shape[0] = N;
  f.stride[0] = 8;
  ASSERT_OK(ops->xfer_fill(st, &f, s));
  ASSERT_EQ_INT(gw_cpu_stream_capture_items(native), 1);
  ASSERT_STATUS(ops->event_record(st, ev, s), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("interprocess");
  ASSERT_STATUS(ops->stream_wait_event(st, s, ev), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("interprocess");
  ASSERT_EQ_INT(gw_cpu_stream_capture_items(native), 1);
  ASSERT_OK(ops->event_query(st, ev)); /* nothing was recorded */
  gw_cpu_graph *g = NULL;
  ASSERT_OK(gw_cpu_stream_capture_end(native, &g));
  ASSERT_NOT_NULL(g);
  ASSERT_EQ_INT(gw_cpu_graph_items(g), 1);
  gw_cpu_graph_destroy(g);
  ASSERT_OK(ops->stream_destroy(st, s));
  ASSERT_OK(gw_cpu_stream_destroy_external(native));
  ASSERT_OK(ops->event_destroy(st, ev));
  ASSERT_OK(ops->mem_free(st, GW_MEM_DEVICE, 0, dev));
  gw_context_destroy(ctx);
  return 0;
}
