/*
 * Memory from another process: gw_ipc_export / gw_ipc_open (docs/IPC.md).
 *
 * The second process is this test binary started again with exec (posix_spawn of
 * /proc/self/exe), not a fork: it gets the handle as hex in GW_IPC_HANDLE, what to do in
 * GW_IPC_JOB and the seed of the data the parent wrote in GW_IPC_SEED, and reports through
 * its exit status (an ASSERT aborts it). It regenerates the parent's random data from the
 * seed and checks every element it reads; what it writes the parent checks element by
 * element. On the CPU backend the model's device memory is shared memory (a memfd) that the
 * child maps; on CUDA/HIP the same tests use the runtime's IPC (they skip without a GPU).
 */
#include "private.h"
#include "test.h"
#include "ipc_peer.h"

#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- handle helpers ---- */

/* (crc32_of, reseal, to_hex, from_hex, the seeded data: tests/ipc_peer.h) */

/* ---- process helpers ---- */

/* Lines of /proc/self/maps naming the CPU model's device memory (memfds). */
static int model_maps(void) { return tst_maps_naming("gw-cpu-dev-"); }
static int open_fds(void) { return tst_open_fds(); }

/* One more VAR=value for the next children's environment (NULL: none). */
static const char *child_env_extra;

/* Start this binary again (exec, not fork) as a child doing `job` on h (and h2). */
static int spawn_child(const char *job, const gw_ipc_handle *h, const gw_ipc_handle *h2,
                       uint64_t seed, const char *extra) {
  static char hex[2 * GW_IPC_HANDLE_BYTES + 1], hex2[2 * GW_IPC_HANDLE_BYTES + 1];
  char ejob[64], ehandle[600], ehandle2[600], eseed[64], eextra[64];
  to_hex(h, hex);
  to_hex(h2 ? h2 : h, hex2);
  snprintf(ejob, sizeof ejob, "GW_IPC_JOB=%s", job);
  snprintf(ehandle, sizeof ehandle, "GW_IPC_HANDLE=%s", hex);
  snprintf(ehandle2, sizeof ehandle2, "GW_IPC_HANDLE2=%s", hex2);
  snprintf(eseed, sizeof eseed, "GW_IPC_SEED=%" PRIu64, seed);
  snprintf(eextra, sizeof eextra, "GW_IPC_EXTRA=%s", extra ? extra : "");
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 7, sizeof *env);
  ASSERT_NOT_NULL(env);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "GW_IPC_", 7) != 0) env[k++] = environ[i];
  if (child_env_extra) env[k++] = (char *)child_env_extra;
  env[k++] = ejob;
  env[k++] = ehandle;
  env[k++] = ehandle2;
  env[k++] = eseed;
  env[k++] = eextra;
  /* The program's own path, not "/proc/self/exe": under valgrind that names valgrind, which
   * refuses to be run through it; its readlink answers with the client's path. */
  char exe[4096], name[] = "ipc_child";
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_TRUE(len > 0);
  exe[len] = '\0';
  char *argv[] = {exe, name, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, exe, NULL, NULL, argv, env);
  free(env);
  ASSERT_EQ_INT(rc, 0);
  int status = 0;
  ASSERT_EQ_INT(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status)) TST_FAIL("child (%s) died of signal %d", job, WTERMSIG(status));
  return WEXITSTATUS(status);
}
#define ASSERT_CHILD_OK(...) ASSERT_EQ_INT(spawn_child(__VA_ARGS__), 0)

/* ---- array helpers ---- */

static gw_array *device_array(gw_context *ctx, gw_dtype t, int ndim, const int64_t *shape) {
  gw_array *a = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, t, ndim, shape, &a));
  return a;
}

static uint64_t fresh_seed(void) { return tst_rand64() | 1; }

static gw_ipc_handle sentinel_handle(void) {
  gw_ipc_handle h;
  memset(h.bytes, 0x5A, sizeof h.bytes);
  return h;
}
#define ASSERT_UNTOUCHED(h)                                             \
  do {                                                                  \
    gw_ipc_handle s_ = sentinel_handle();                               \
    ASSERT_TRUE(memcmp((h).bytes, s_.bytes, GW_IPC_HANDLE_BYTES) == 0); \
  } while (0)
static gw_array *const SENTINEL_ARRAY = (gw_array *)(uintptr_t)0x5A5A5A50;

/* ---- the child process ---- */

/* 8 threads open and release one handle over and over: one mapping at most at any time. */
typedef struct {
  gw_context *ctx;
  gw_ipc_handle h;
  int rounds, bad;
} thread_job;
static void *open_release_loop(void *p) {
  thread_job *j = p;
  for (int i = 0; i < j->rounds; i++) {
    gw_array *a = NULL;
    if (gw_ipc_open(j->ctx, &j->h, &a) != GW_OK) {
      j->bad++;
      continue;
    }
    gw_release(a);
  }
  return NULL;
}

/* The fork test's other thread: open and release h until told to stop. */
static atomic_int stop_opens;
static void *open_release_until_stop(void *p) {
  thread_job *j = p;
  while (!atomic_load(&stop_opens)) {
    gw_array *a = NULL;
    if (gw_ipc_open(j->ctx, &j->h, &a) != GW_OK) {
      j->bad++;
      continue;
    }
    gw_release(a);
  }
  return NULL;
}

/* The reuse test's exporter talks through stdout and stdin. */
static void print_handle(const gw_ipc_handle *h) {
  char hex[2 * GW_IPC_HANDLE_BYTES + 1];
  to_hex(h, hex);
  printf("handle %s\n", hex); /* marked: the harness may print lines of its own */
  fflush(stdout);
}
static void wait_line(void) {
  char line[16];
  ASSERT_NOT_NULL(fgets(line, sizeof line, stdin));
}

static int child_main(void) {
  const char *job = getenv("GW_IPC_JOB");
  ASSERT_NOT_NULL(job);
  gw_ipc_handle h, h2;
  from_hex(getenv("GW_IPC_HANDLE"), &h);
  from_hex(getenv("GW_IPC_HANDLE2"), &h2);
  uint64_t seed = strtoull(getenv("GW_IPC_SEED"), NULL, 10);
  const char *extra = getenv("GW_IPC_EXTRA");
  gw_context *ctx = tst_open(0);
  int cpu = tst_is_cpu();
  tst_leaks before = tst_leak_snapshot();
  int fds0 = open_fds();
  gw_array *a = SENTINEL_ARRAY;

  if (strcmp(job, "read_write") == 0) {
    /* Read every element the parent wrote, then write fresh data back through the mapping. */
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    ASSERT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
    ASSERT_EQ_INT(gw_owns(a), 0);
    ASSERT_EQ_INT(gw_is_readonly(a), 0);
    ASSERT_NULL(gw_host_data(a));
    if (cpu) ASSERT_EQ_INT(model_maps(), 1);
    check_seeded(a, seed);
    write_seeded(a, seed + 1);
    ASSERT_OK(gw_synchronize(ctx));
    gw_release(a);
  } else if (strcmp(job, "readonly") == 0) {
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    ASSERT_EQ_INT(gw_is_readonly(a), 1);
    check_seeded(a, seed);
    unsigned char v[16] = {0};
    ASSERT_STATUS(gw_fill(a, v), GW_EREADONLY);
    gw_release(a);
  } else if (strcmp(job, "twice") == 0) {
    /* h and h2: two handles of one allocation (a view and the whole), opened twice each;
     * one mapping, closed when the last goes, in the order GW_IPC_EXTRA says. */
    long opens = gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN);
    gw_array *x[4];
    ASSERT_OK(gw_ipc_open(ctx, &h, &x[0]));
    ASSERT_OK(gw_ipc_open(ctx, &h2, &x[1]));
    ASSERT_OK(gw_ipc_open(ctx, &h, &x[2]));
    ASSERT_OK(gw_ipc_open(ctx, &h2, &x[3]));
    ASSERT_EQ_PTR(gw_data(x[0]), gw_data(x[2]));
    ASSERT_EQ_PTR(gw_data(x[1]), gw_data(x[3]));
    ASSERT_EQ_PTR((char *)gw_data(x[1]), (char *)gw_data(x[0]) + 2000); /* tail = head + 1000 */
    if (cpu) {
      ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN) - opens, 1);
      ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 1);
      ASSERT_EQ_INT(model_maps(), 1);
    }
    /* The import table owns the mapping: an owning wrap of it would free it. */
    gw_array *w = SENTINEL_ARRAY;
    int64_t one = 1;
    ASSERT_STATUS(gw_wrap(ctx, gw_data(x[1]), GW_UINT8, 1, &one, NULL, GW_WRAP_OWN, &w), GW_EOWNED);
    ASSERT_EQ_PTR(w, SENTINEL_ARRAY);
    int order[4] = {0, 1, 2, 3};
    if (extra && strcmp(extra, "reverse") == 0)
      for (int i = 0; i < 4; i++) order[i] = 3 - i;
    for (int i = 0; i < 4; i++) {
      int k = order[i];
      check_seeded(x[k], k % 2 ? seed + 7 : seed); /* h2's data was written with seed + 7 */
      gw_release(x[k]);
      if (cpu) ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), i < 3 ? 1 : 0);
      if (cpu) ASSERT_EQ_INT(model_maps(), i < 3 ? 1 : 0);
    }
    if (cpu) ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_IPC_CLOSE), 1);
  } else if (strcmp(job, "cycles") == 0) {
    /* 10^4 open/release cycles: no descriptor, mapping or table growth. */
    ASSERT_OK(gw_ipc_open(ctx, &h, &a)); /* warm-up: whatever the runtime keeps once */
    gw_release(a);
    int fds = open_fds(), maps = model_maps();
    for (int i = 0; i < 10000; i++) {
      gw_array *b = NULL;
      ASSERT_OK(gw_ipc_open(ctx, &h, &b));
      gw_release(b);
    }
    ASSERT_EQ_INT(open_fds(), fds);
    ASSERT_EQ_INT(model_maps(), maps);
    if (cpu) ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 0);
    /* The same from 8 threads at once: the table serialises the opens and closes. */
    thread_job jobs[8];
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
      jobs[i] = (thread_job){ctx, h, 300, 0};
      ASSERT_EQ_INT(pthread_create(&t[i], NULL, open_release_loop, &jobs[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
      ASSERT_EQ_INT(pthread_join(t[i], NULL), 0);
      ASSERT_EQ_INT(jobs[i].bad, 0);
    }
    ASSERT_EQ_INT(open_fds(), fds);
    ASSERT_EQ_INT(model_maps(), maps);
    if (cpu) ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 0);
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    check_seeded(a, seed);
    gw_release(a);
  } else if (strcmp(job, "inject") == 0) {
    /* Every runtime call of the open path fails in turn: a clean error, *out untouched,
     * nothing mapped; then a close that fails leaves the mapping with the table, which
     * reuses it and closes it later. */
    ASSERT_TRUE(cpu);
    gw_status kinds[2] = {GW_EBACKEND, GW_ENOMEM};
    for (int k = 0; k < 2; k++) {
      gw_cpu_fail_op(GW_CPU_OP_IPC_OPEN, 1, kinds[k]);
      ASSERT_STATUS(gw_ipc_open(ctx, &h, &a), kinds[k]);
      ASSERT_EQ_PTR(a, SENTINEL_ARRAY);
      ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 0);
      ASSERT_EQ_INT(model_maps(), 0);
      ASSERT_EQ_INT(open_fds(), fds0);
    }
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    check_seeded(a, seed);
    gw_cpu_fail_op(GW_CPU_OP_IPC_CLOSE, 1, GW_EBACKEND);
    gw_release(a);
    ASSERT_EQ_INT(gw_cpu_failures_injected(), 3);
    ASSERT_ERROR_MENTIONS("injected failure: ipc_close"); /* reported */
    ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 1);             /* the runtime refused to close it */
    /* The table's entry went with the failed close (kept, it would pin the entry and its
     * context for the life of the process): the next open asks the runtime again, which
     * refuses it as a second open of what it kept. */
    long opens = gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN);
    a = SENTINEL_ARRAY;
    ASSERT_STATUS(gw_ipc_open(ctx, &h, &a), GW_EBACKEND);
    ASSERT_ERROR_MENTIONS("already mapped in this process");
    ASSERT_EQ_PTR(a, SENTINEL_ARRAY);
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN), opens + 1);
    /* The runtime's leftover mapping is the model's adopted device memory for good: the
     * end's leak count does not apply. */
    gw_context_destroy(ctx);
    return 0;
  } else if (strcmp(job, "exec_open") == 0) {
    /* This image replaced (exec) the process that exported h: same pid, a fresh address
     * space without the memory. It is not the exporter: the open goes to the runtime,
     * which refuses it (the exporter's descriptor went with the exec), never an array
     * over an address of the old image. */
    ASSERT_TRUE(cpu);
    uint32_t pid = 0;
    for (int i = 0; i < 4; i++) pid |= (uint32_t)h.bytes[13 + i] << (8 * i);
    ASSERT_EQ_INT((int)pid, (int)getpid());
    ASSERT_STATUS(gw_ipc_open(ctx, &h, &a), GW_EBACKEND);
    ASSERT_ERROR_MENTIONS("model cudaIpcOpenMemHandle");
    ASSERT_EQ_PTR(a, SENTINEL_ARRAY);
  } else if (strcmp(job, "fork_reopen") == 0) {
    /* A forked child re-opens what its parent has open, before and after releasing what it
     * inherited: each maps anew (the parent's mapping is not the child's to reuse). */
    ASSERT_TRUE(cpu);
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    check_seeded(a, seed);
    fflush(NULL);
    pid_t kid = fork();
    ASSERT_TRUE(kid >= 0);
    if (kid == 0) {
      gw_array *b = NULL, *c = NULL;
      ASSERT_OK(gw_ipc_open(ctx, &h, &b));
      ASSERT_TRUE(gw_data(b) != gw_data(a)); /* a mapping of its own */
      check_seeded(b, seed);
      gw_release(b);
      check_seeded(a, seed); /* the inherited array still reads the memory */
      gw_release(a);
      ASSERT_OK(gw_ipc_open(ctx, &h, &c));
      check_seeded(c, seed);
      write_seeded(c, seed + 3);
      ASSERT_OK(gw_synchronize(ctx));
      gw_release(c);
      _exit(0);
    }
    int st = 0;
    ASSERT_EQ_INT(waitpid(kid, &st, 0), kid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    check_seeded(a, seed + 3); /* what the grandchild wrote through its own mapping */
    ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 1);
    gw_release(a);
    ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 0);
  } else if (strcmp(job, "fork_during_open") == 0) {
    /* Forks while another thread opens and closes h over and over (inside the import
     * table's lock and the model's): no fork may hang, and each child opens h itself.
     * alarm: a deadlock kills this process rather than hanging the test. */
    ASSERT_TRUE(cpu);
    alarm(120);
    thread_job tj = {ctx, h, 1 << 30, 0};
    stop_opens = 0;
    pthread_t t;
    ASSERT_EQ_INT(pthread_create(&t, NULL, open_release_until_stop, &tj), 0);
    for (int i = 0; i < 200; i++) {
      fflush(NULL);
      pid_t kid = fork();
      ASSERT_TRUE(kid >= 0);
      if (kid == 0) {
        alarm(60); /* not inherited: a hung child must not outlive the test */
        /* Under ASan the child does not open: the sanitizer's allocator (GCC 12's) is not
         * fork-safe, and a malloc here hangs on its lock when the other thread held it at
         * the fork (seen in its stack); the fork handlers still run. */
        if (TST_ASAN) _exit(0);
        gw_array *b = NULL;
        if (gw_ipc_open(ctx, &h, &b) != GW_OK) _exit(3);
        gw_release(b);
        _exit(0);
      }
      int st = 0;
      ASSERT_EQ_INT(waitpid(kid, &st, 0), kid);
      ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    atomic_store(&stop_opens, 1);
    ASSERT_EQ_INT(pthread_join(t, NULL), 0);
    ASSERT_EQ_INT(tj.bad, 0);
    alarm(0);
    ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 0);
  } else if (strcmp(job, "uuid_open") == 0) {
    /* GPUWRAP_CPU_VISIBLE_DEVICES=1: machine device 1 is this process's device 0. */
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    ASSERT_EQ_INT(gw_device(a), 0);
    check_seeded(a, seed);
    write_seeded(a, seed + 1);
    ASSERT_OK(gw_synchronize(ctx));
    gw_release(a);
  } else if (strcmp(job, "uuid_missing") == 0) {
    /* GPUWRAP_CPU_VISIBLE_DEVICES=0: the exporter's device is not seen here. */
    ASSERT_STATUS(gw_ipc_open(ctx, &h, &a), GW_ENODEV);
    ASSERT_ERROR_MENTIONS("656c2d000100"); /* the UUID's tail: machine device 1 */
    ASSERT_ERROR_MENTIONS("none of the 1 device");
    ASSERT_EQ_PTR(a, SENTINEL_ARRAY);
  } else if (strcmp(job, "exporter_reuse") == 0) {
    /* The exporter of the reuse test: writes a handle to stdout (hex, a line), waits for a
     * line on stdin, releases the allocation and makes one at the same address with new
     * data, writes its handle, waits again. */
    int64_t n = 3000;
    gw_array *x = NULL, *keep[16];
    int nkeep = 0;
    ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, &n, &x));
    write_seeded(x, seed);
    gw_ipc_handle hx;
    ASSERT_OK(gw_ipc_export(x, &hx));
    print_handle(&hx);
    wait_line();
    void *was = gw_data(x);
    gw_release(x);
    for (;;) {
      ASSERT_TRUE(nkeep < 16);
      ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, &n, &x));
      if (gw_data(x) == was) break;
      keep[nkeep++] = x;
    }
    write_seeded(x, seed + 1);
    ASSERT_OK(gw_ipc_export(x, &hx));
    print_handle(&hx);
    wait_line();
    gw_release(x);
    while (nkeep > 0) gw_release(keep[--nkeep]);
  } else if (strcmp(job, "event_wait") == 0) {
    /* The parent queued a (slow) copy of seeded data into h's memory and recorded its
     * event after it: this process's stream waits for that event on the device, then
     * copies the memory out, and every element must be the parent's data. */
    gw__ipc_event_handle eh;
    const char *hex = getenv("GW_TEST_IPC_EVENT");
    ASSERT_NOT_NULL(hex);
    ASSERT_EQ_SIZE(strlen(hex), 2 * sizeof eh.bytes);
    for (size_t i = 0; i < sizeof eh.bytes; i++) {
      unsigned v;
      ASSERT_EQ_INT(sscanf(hex + 2 * i, "%2x", &v), 1);
      eh.bytes[i] = (unsigned char)v;
    }
    gw__ipc_event *ev = NULL;
    ASSERT_OK(gw__ipc_event_open(ctx, &eh, &ev));
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    gw_array *mine = NULL;
    int64_t n = gw_numel(a);
    ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, gw_array_dtype(a), 1, &n, &mine));
    gw_stream *t = NULL;
    ASSERT_OK(gw_stream_create(ctx, &t));
    ASSERT_OK(gw__ipc_event_wait(t, ev));
    ASSERT_OK(gw_copy_async(mine, a, t));
    ASSERT_OK(gw_stream_synchronize(t));
    check_seeded(mine, seed);
    ASSERT_OK(gw__ipc_event_query(ev)); /* the parent's copy is done: we saw its data */
    gw_stream_destroy(t);
    gw_release(mine);
    gw_release(a);
    gw__ipc_event_destroy(ev);
  } else {
    TST_FAIL("unknown job %s", job);
  }
  ASSERT_EQ_INT(open_fds(), fds0);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- tests ---- */

/* A child started with exec reads every element of fresh random data through the
 * mapping and writes new data back, which the parent sees. Several dtypes and shapes. */
TEST_IMPL(read_write_in_second_process) {
  gw_context *ctx = tst_open(0);
  const gw_dtype types[] = {GW_FLOAT64, GW_UINT8, GW_INT16, GW_COMPLEX64};
  for (int t = 0; t < 4; t++) {
    int64_t shape[3] = {1 + (int64_t)tst_rand_below(17), 1 + (int64_t)tst_rand_below(9),
                        1 + (int64_t)tst_rand_below(33)};
    gw_array *a = device_array(ctx, types[t], 3, shape);
    uint64_t seed = fresh_seed();
    write_seeded(a, seed);
    gw_ipc_handle h;
    ASSERT_OK(gw_ipc_export(a, &h));
    ASSERT_CHILD_OK("read_write", &h, NULL, seed, NULL);
    check_seeded(a, seed + 1);
    gw_release(a);
  }
  gw_context_destroy(ctx);
  return 0;
}

/* A strided view with an offset (negative steps too) exports its allocation plus its
 * offset and strides: the child sees exactly the view's elements, and its writes land on
 * exactly those (every other element of the parent's array keeps its value). */
TEST_IMPL(views_with_offsets_and_strides) {
  gw_context *ctx = tst_open(0);
  int64_t shape[2] = {13, 21};
  gw_array *a = device_array(ctx, GW_INT32, 2, shape);
  uint64_t base_seed = fresh_seed();
  write_seeded(a, base_seed);
  int64_t start[2] = {11, 2}, vshape[2] = {4, 6}, step[2] = {-3, 3};
  gw_array *v = NULL;
  ASSERT_OK(gw_view(a, start, vshape, step, &v));
  uint64_t seed = fresh_seed();
  write_seeded(v, seed);
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(v, &h));
  ASSERT_CHILD_OK("read_write", &h, NULL, seed, NULL);
  /* The parent: the view holds the child's data, the rest the original. */
  check_seeded(v, seed + 1);
  int32_t *all = malloc(13 * 21 * 4), *orig = seeded_data(a, base_seed),
          *vd = seeded_data(v, seed + 1);
  tst_read(a, all);
  for (int64_t i = 0; i < 13; i++)
    for (int64_t j = 0; j < 21; j++) {
      int in_view = (11 - i) % 3 == 0 && i <= 11 && (11 - i) / 3 < 4 && (j - 2) % 3 == 0 &&
                    j >= 2 && (j - 2) / 3 < 6;
      int32_t want = in_view ? vd[((11 - i) / 3) * 6 + (j - 2) / 3] : orig[i * 21 + j];
      ASSERT_EQ_INT(all[i * 21 + j], want);
    }
  free(all);
  free(orig);
  free(vd);
  gw_release(v);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* A read-only array exports read-only: the child's array refuses writes. */
TEST_IMPL(readonly_export) {
  gw_context *ctx = tst_open(0);
  int64_t n = 1000;
  gw_array *a = device_array(ctx, GW_FLOAT32, 1, &n), *ro = NULL;
  uint64_t seed = fresh_seed();
  write_seeded(a, seed);
  ASSERT_OK(gw_wrap(ctx, gw_data(a), GW_FLOAT32, 1, &n, NULL, GW_WRAP_READONLY, &ro));
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(ro, &h));
  ASSERT_CHILD_OK("readonly", &h, NULL, seed, NULL);
  check_seeded(a, seed);
  gw_release(ro);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* Two handles of one allocation, each opened twice: one mapping, released in either
 * order, closed once with the last. */
TEST_IMPL(two_opens_one_mapping) {
  gw_context *ctx = tst_open(0);
  int64_t n = 4096;
  gw_array *a = device_array(ctx, GW_UINT16, 1, &n), *head = NULL, *tail = NULL;
  int64_t s0 = 0, l0 = 1000, s1 = 1000, l1 = 500;
  ASSERT_OK(gw_view(a, &s0, &l0, NULL, &head));
  ASSERT_OK(gw_view(a, &s1, &l1, NULL, &tail));
  uint64_t seed = fresh_seed();
  write_seeded(head, seed);
  write_seeded(tail, seed + 7);
  gw_ipc_handle hh, ht;
  ASSERT_OK(gw_ipc_export(head, &hh));
  ASSERT_OK(gw_ipc_export(tail, &ht));
  ASSERT_CHILD_OK("twice", &hh, &ht, seed, "forward");
  ASSERT_CHILD_OK("twice", &hh, &ht, seed, "reverse");
  gw_release(tail);
  gw_release(head);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* 10^4 open/release cycles and 8 threads opening and releasing one handle: no descriptor
 * or mapping growth, every mapping closed. */
TEST_IMPL(open_release_cycles) {
  gw_context *ctx = tst_open(0);
  int64_t n = 777;
  gw_array *a = device_array(ctx, GW_INT64, 1, &n);
  uint64_t seed = fresh_seed();
  write_seeded(a, seed);
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_CHILD_OK("cycles", &h, NULL, seed, NULL);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* Failure injection of each runtime call of the open and close paths, in the child. */
TEST_IMPL(inject_open_and_close) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int64_t n = 300;
  gw_array *a = device_array(ctx, GW_FLOAT32, 1, &n);
  uint64_t seed = fresh_seed();
  write_seeded(a, seed);
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_CHILD_OK("inject", &h, NULL, seed, NULL);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* Export's runtime calls (the pointer query, the runtime's export) fail in turn: the
 * failure is reported and the handle is untouched. */
TEST_IMPL(inject_export) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int64_t n = 64;
  gw_array *a = device_array(ctx, GW_FLOAT32, 1, &n);
  gw_cpu_op ops[2] = {GW_CPU_OP_QUERY, GW_CPU_OP_IPC_EXPORT};
  for (int i = 0; i < 2; i++) {
    gw_ipc_handle h = sentinel_handle();
    gw_cpu_fail_op(ops[i], 1, GW_EBACKEND);
    ASSERT_STATUS(gw_ipc_export(a, &h), GW_EBACKEND);
    ASSERT_UNTOUCHED(h);
  }
  ASSERT_EQ_INT(gw_cpu_failures_injected(), 2);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* Open in the exporting process: an array over the original memory, with no runtime open
 * (an armed failure of it is never reached; the allocation is only looked up), for the
 * whole array and for a view. */
TEST_IMPL(open_in_exporting_process) {
  gw_context *ctx = tst_open(0);
  int64_t shape[2] = {20, 30};
  gw_array *a = device_array(ctx, GW_FLOAT64, 2, shape), *v = NULL;
  uint64_t seed = fresh_seed();
  write_seeded(a, seed);
  int64_t start[2] = {3, 29}, vshape[2] = {5, 10}, step[2] = {2, -3};
  ASSERT_OK(gw_view(a, start, vshape, step, &v));
  gw_ipc_handle ha, hv;
  ASSERT_OK(gw_ipc_export(a, &ha));
  ASSERT_OK(gw_ipc_export(v, &hv));
  long calls = tst_is_cpu() ? gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN) : 0;
  if (tst_is_cpu()) gw_cpu_fail_op(GW_CPU_OP_IPC_OPEN, 1, GW_EBACKEND);
  gw_array *oa = NULL, *ov = NULL;
  ASSERT_OK(gw_ipc_open(ctx, &ha, &oa));
  ASSERT_OK(gw_ipc_open(ctx, &hv, &ov));
  if (tst_is_cpu()) {
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN), calls);
    ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 0);
    gw_cpu_fail_reset();
  }
  ASSERT_EQ_PTR(gw_data(oa), gw_data(a));
  ASSERT_EQ_PTR(gw_data(ov), gw_data(v));
  ASSERT_EQ_INT(gw_ndim(ov), 2);
  for (int d = 0; d < 2; d++) {
    ASSERT_EQ_INT(gw_shape(ov)[d], gw_shape(v)[d]);
    ASSERT_EQ_INT(gw_strides(ov)[d], gw_strides(v)[d]);
  }
  ASSERT_EQ_INT(gw_kind(ov), GW_MEM_DEVICE);
  ASSERT_EQ_INT(gw_owns(oa), 0);
  check_seeded(oa, seed);
  void *want = malloc(tst_array_bytes(v)), *got = malloc(tst_array_bytes(v));
  tst_read(v, want);
  tst_read(ov, got);
  ASSERT_ELEMS_EQ(got, want, 50, 8);
  free(want);
  free(got);
  gw_release(ov);
  gw_release(oa);
  check_seeded(a, seed); /* releasing the opened arrays left the memory alone */
  gw_release(v);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* Open in the exporting process checks that the handle's allocation is there, live: after
 * the allocation was released (an array over unmapped memory before), after a new
 * allocation reused its address (an array over the new one's data before), and with the
 * base rewritten to a host buffer (its check value recomputed: an array of host memory
 * taken for device memory before) it is GW_EBACKEND naming why, *out untouched. */
TEST_IMPL(open_in_exporter_checks_allocation) {
  gw_context *ctx = tst_open(0);
  int64_t n = 5000;
  gw_array *a = device_array(ctx, GW_FLOAT64, 1, &n), *out = SENTINEL_ARRAY;
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  void *was = gw_data(a);
  /* A host buffer as large as the allocation, named by a rewritten handle. */
  uint64_t extent = 0;
  for (int i = 0; i < 8; i++) extent |= (uint64_t)h.bytes[41 + i] << (8 * i);
  void *host = NULL;
  ASSERT_EQ_INT(posix_memalign(&host, 4096, (size_t)extent), 0);
  gw_ipc_handle fake = h;
  for (int i = 0; i < 8; i++) fake.bytes[33 + i] = (unsigned char)((uintptr_t)host >> (8 * i));
  reseal(&fake);
  ASSERT_STATUS(gw_ipc_open(ctx, &fake, &out), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS("not device memory");
  ASSERT_EQ_PTR(out, SENTINEL_ARRAY);
  free(host);

  gw_release(a);
  ASSERT_STATUS(gw_ipc_open(ctx, &h, &out), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS("exported by this process");
  ASSERT_ERROR_MENTIONS("released");
  ASSERT_EQ_PTR(out, SENTINEL_ARRAY);

  /* A new allocation of the same size at the same address (the CPU model's memory is
   * mmap'ed: the hole just freed is taken again; a GPU allocator may place it elsewhere). */
  gw_array *keep[16], *b = NULL;
  int nkeep = 0;
  for (; nkeep < 16; nkeep++) {
    b = device_array(ctx, GW_FLOAT64, 1, &n);
    if (gw_data(b) == was) break;
    keep[nkeep] = b;
    b = NULL;
  }
  if (b) {
    write_seeded(b, fresh_seed());
    ASSERT_STATUS(gw_ipc_open(ctx, &h, &out), GW_EBACKEND);
    ASSERT_ERROR_MENTIONS("reuses its address");
    ASSERT_EQ_PTR(out, SENTINEL_ARRAY);
    /* Its own handle opens. */
    gw_ipc_handle hb;
    uint64_t seed = fresh_seed();
    write_seeded(b, seed);
    ASSERT_OK(gw_ipc_export(b, &hb));
    ASSERT_OK(gw_ipc_open(ctx, &hb, &out));
    ASSERT_EQ_PTR(gw_data(out), was);
    check_seeded(out, seed);
    gw_release(out);
    gw_release(b);
  } else {
    ASSERT_TRUE(!tst_is_cpu());
  }
  while (nkeep > 0) gw_release(keep[--nkeep]);
  gw_context_destroy(ctx);
  return 0;
}

/* A process that exec'd itself after exporting (same pid, same start time, a fresh address
 * space) is not the exporter: the open goes to the runtime and is refused, instead of an
 * array over an address of the old image. The exporter is a forked child of the test,
 * which execs the test binary in place (the handle in its environment). */
TEST_IMPL(exec_is_not_the_exporter) {
  TEST_REQUIRE_CPU();
  char exe[4096], name[] = "ipc_child";
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_TRUE(len > 0);
  exe[len] = '\0';
  fflush(NULL);
  pid_t kid = fork();
  ASSERT_TRUE(kid >= 0);
  if (kid == 0) {
    gw_context *ctx = tst_open(0);
    int64_t n = 1000;
    gw_array *a = device_array(ctx, GW_INT32, 1, &n);
    write_seeded(a, 5);
    gw_ipc_handle h;
    if (gw_ipc_export(a, &h) != GW_OK) _exit(90);
    static char hex[2 * GW_IPC_HANDLE_BYTES + 1];
    static char eh[600], eh2[600];
    to_hex(&h, hex);
    snprintf(eh, sizeof eh, "GW_IPC_HANDLE=%s", hex);
    snprintf(eh2, sizeof eh2, "GW_IPC_HANDLE2=%s", hex);
    if (setenv("GW_IPC_JOB", "exec_open", 1) || putenv(eh) || putenv(eh2) ||
        setenv("GW_IPC_SEED", "5", 1) || setenv("GW_IPC_EXTRA", "", 1))
      _exit(91);
    char *argv[] = {exe, name, NULL};
    execv(exe, argv); /* a is still alive: only the exec takes it away */
    _exit(92);
  }
  int st = 0;
  ASSERT_EQ_INT(waitpid(kid, &st, 0), kid);
  if (!WIFEXITED(st)) TST_FAIL("the exec'd image died of signal %d", WTERMSIG(st));
  ASSERT_EQ_INT(WEXITSTATUS(st), 0);
  return 0;
}

/* A forked child of an importer re-opens what it inherited, before and after releasing
 * the inherited array, with a mapping of its own (the CPU model's list of mappings is
 * forgotten in the child, as the core's table is); every element checked on both sides. */
TEST_IMPL(fork_child_opens_anew) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int64_t shape[2] = {37, 53};
  gw_array *a = device_array(ctx, GW_INT16, 2, shape);
  uint64_t seed = fresh_seed();
  write_seeded(a, seed);
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_CHILD_OK("fork_reopen", &h, NULL, seed, NULL);
  check_seeded(a, seed + 3); /* written by the importer's forked child */
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* Forks while another thread opens and closes an allocation of another process: the
 * model's IPC fork handler takes its lock after the core's table lock (explicit order),
 * so no fork hangs (a 120 s alarm in the importer turns a hang into a failure). */
TEST_IMPL(fork_during_open) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int64_t n = 4096;
  gw_array *a = device_array(ctx, GW_UINT8, 1, &n);
  write_seeded(a, fresh_seed());
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_CHILD_OK("fork_during_open", &h, NULL, 1, NULL);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* The handle names its device by UUID: memory of the exporter's device 1 opens in a
 * process that sees only that device, as its device 0 (GPUWRAP_CPU_VISIBLE_DEVICES=1, as
 * CUDA_VISIBLE_DEVICES renumbers), every element read and written back; a process that
 * does not see it (GPUWRAP_CPU_VISIBLE_DEVICES=0) is told GW_ENODEV naming the UUID. */
TEST_IMPL(device_uuid_renumbered) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(1);
  int64_t n = 999;
  gw_array *a = device_array(ctx, GW_FLOAT32, 1, &n);
  ASSERT_EQ_INT(gw_device(a), 1);
  uint64_t seed = fresh_seed();
  write_seeded(a, seed);
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  child_env_extra = "GPUWRAP_CPU_VISIBLE_DEVICES=1";
  int rc = spawn_child("uuid_open", &h, NULL, seed, NULL);
  child_env_extra = "GPUWRAP_CPU_VISIBLE_DEVICES=0";
  int rc2 = spawn_child("uuid_missing", &h, NULL, seed, NULL);
  child_env_extra = NULL;
  ASSERT_EQ_INT(rc, 0);
  ASSERT_EQ_INT(rc2, 0);
  check_seeded(a, seed + 1);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* The next "handle <hex>" line of the exporter's stdout. */
static void read_handle(FILE *in, gw_ipc_handle *h) {
  char line[2 * GW_IPC_HANDLE_BYTES + 64];
  do ASSERT_NOT_NULL(fgets(line, sizeof line, in));
  while (strncmp(line, "handle ", 7) != 0);
  line[7 + 2 * GW_IPC_HANDLE_BYTES] = '\0';
  from_hex(line + 7, h);
}

/* GPUWRAP_CPU_VISIBLE_DEVICES that lists a device twice is refused with the variable, the
 * value and why (as every setting: never silently another numbering). */
TEST_IMPL(visible_devices_refused) {
  gw_context *ctx = NULL;
  ASSERT_STATUS(gw_context_create(GW_BACKEND_CPU, 0, &ctx), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("GPUWRAP_CPU_VISIBLE_DEVICES='1,1': a device is listed twice");
  ASSERT_NULL(ctx);
  return 0;
}

/* Where the runtime gives no allocation id (HIP; the model with
 * GPUWRAP_CPU_IPC_NO_ALLOC_ID), a new allocation at the address of a released one, still
 * mapped here by an array, gets a mapping of its own with the new data: the import table
 * compares the runtime's handle bytes too. The exporter is a child talking through pipes. */
TEST_IMPL(reused_address_without_alloc_id) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  uint64_t seed = fresh_seed();
  int to[2], from[2];
  ASSERT_EQ_INT(pipe(to), 0);
  ASSERT_EQ_INT(pipe(from), 0);
  char exe[4096], name[] = "ipc_child", ejob[] = "GW_IPC_JOB=exporter_reuse", eseed[64];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_TRUE(len > 0);
  exe[len] = '\0';
  static char hex0[2 * GW_IPC_HANDLE_BYTES + 1];
  gw_ipc_handle none;
  memset(none.bytes, 0, sizeof none.bytes);
  to_hex(&none, hex0);
  static char eh[600], eh2[600];
  snprintf(eh, sizeof eh, "GW_IPC_HANDLE=%s", hex0);
  snprintf(eh2, sizeof eh2, "GW_IPC_HANDLE2=%s", hex0);
  snprintf(eseed, sizeof eseed, "GW_IPC_SEED=%" PRIu64, seed);
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 5, sizeof *env);
  ASSERT_NOT_NULL(env);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "GW_IPC_", 7) != 0) env[k++] = environ[i];
  env[k++] = ejob;
  env[k++] = eh;
  env[k++] = eh2;
  env[k++] = eseed;
  posix_spawn_file_actions_t fa;
  ASSERT_EQ_INT(posix_spawn_file_actions_init(&fa), 0);
  posix_spawn_file_actions_adddup2(&fa, to[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from[1], 1);
  posix_spawn_file_actions_addclose(&fa, to[1]);
  posix_spawn_file_actions_addclose(&fa, from[0]);
  char *argv[] = {exe, name, NULL};
  pid_t pid;
  ASSERT_EQ_INT(posix_spawn(&pid, exe, &fa, NULL, argv, env), 0);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  close(to[0]);
  close(from[1]);
  FILE *in = fdopen(from[0], "r");
  ASSERT_NOT_NULL(in);
  gw_ipc_handle h1, h2;
  read_handle(in, &h1);
  gw_array *a1 = NULL, *a2 = NULL;
  ASSERT_OK(gw_ipc_open(ctx, &h1, &a1));
  check_seeded(a1, seed);
  ASSERT_EQ_INT((int)write(to[1], "go\n", 3), 3);
  read_handle(in, &h2);
  /* Same exporter, base and extent, no allocation id: only the runtime's handle differs. */
  ASSERT_TRUE(memcmp(h1.bytes + 13, h2.bytes + 13, 36) == 0);
  for (int i = 25; i < 33; i++) ASSERT_EQ_INT(h2.bytes[i], 0);
  ASSERT_TRUE(memcmp(h1.bytes + 73, h2.bytes + 73, 64) != 0);
  long opens = gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN);
  ASSERT_OK(gw_ipc_open(ctx, &h2, &a2));
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN), opens + 1);
  ASSERT_TRUE(gw_data(a2) != gw_data(a1));
  check_seeded(a2, seed + 1);
  check_seeded(a1, seed); /* the released allocation's pages, still mapped by a1 */
  ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 2);
  gw_release(a1); /* closes the stale mapping, leaves the new one */
  ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 1);
  gw_array *again = NULL;
  ASSERT_OK(gw_ipc_open(ctx, &h2, &again));
  ASSERT_EQ_PTR(gw_data(again), gw_data(a2));
  gw_release(again);
  gw_release(a2);
  ASSERT_EQ_SIZE(gw_cpu_ipc_mappings(), 0);
  ASSERT_EQ_INT((int)write(to[1], "go\n", 3), 3);
  close(to[1]);
  int st = 0;
  ASSERT_EQ_INT(waitpid(pid, &st, 0), pid);
  fclose(in); /* after: the exporter's last lines must not meet a closed pipe */
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  gw_context_destroy(ctx);
  return 0;
}

/* Every byte flipped in turn (three ways), and every truncation: GW_EINVAL with a
 * reason, *out untouched, never a crash; and no runtime call (no mapping). */
TEST_IMPL(damaged_and_truncated_handles) {
  gw_context *ctx = tst_open(0);
  int64_t n = 100;
  gw_array *a = device_array(ctx, GW_INT32, 1, &n);
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  long opens = tst_is_cpu() ? gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN) : 0;
  const unsigned char flips[3] = {0x01, 0x80, 0xFF};
  for (int i = 0; i < GW_IPC_HANDLE_BYTES; i++)
    for (int f = 0; f < 3; f++) {
      gw_ipc_handle d = h;
      d.bytes[i] ^= flips[f];
      gw_array *out = SENTINEL_ARRAY;
      ASSERT_STATUS(gw_ipc_open(ctx, &d, &out), GW_EINVAL);
      ASSERT_EQ_PTR(out, SENTINEL_ARRAY);
      ASSERT_ERROR_MENTIONS("h:");
    }
  for (int len = 0; len < GW_IPC_HANDLE_BYTES; len++) {
    gw_ipc_handle t;
    memset(t.bytes, 0, sizeof t.bytes);
    memcpy(t.bytes, h.bytes, (size_t)len);
    gw_array *out = SENTINEL_ARRAY;
    ASSERT_STATUS(gw_ipc_open(ctx, &t, &out), GW_EINVAL);
    ASSERT_EQ_PTR(out, SENTINEL_ARRAY);
  }
  /* A valid check value over nonsense fields still fails on the field. */
  gw_ipc_handle g = h;
  g.bytes[7] = 40; /* ndim */
  reseal(&g);
  gw_array *out = SENTINEL_ARRAY;
  ASSERT_STATUS(gw_ipc_open(ctx, &g, &out), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("ndim");
  g = h;
  g.bytes[41] = 1; /* extent 1 byte: the elements reach outside it */
  for (int i = 42; i < 49; i++) g.bytes[i] = 0;
  reseal(&g);
  ASSERT_STATUS(gw_ipc_open(ctx, &g, &out), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("outside");
  ASSERT_EQ_PTR(out, SENTINEL_ARRAY);
  if (tst_is_cpu()) ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_IPC_OPEN), opens);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* A handle of another backend, a newer version, a device this process does not see. */
TEST_IMPL(foreign_newer_and_missing_device) {
  gw_context *ctx = tst_open(0);
  int64_t n = 10;
  gw_array *a = device_array(ctx, GW_INT8, 1, &n), *out = SENTINEL_ARRAY;
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_EQ_INT(h.bytes[5], gw_context_backend(ctx));
  gw_ipc_handle f = h;
  f.bytes[5] = tst_is_cpu() ? GW_BACKEND_CUDA : GW_BACKEND_CPU;
  reseal(&f);
  ASSERT_STATUS(gw_ipc_open(ctx, &f, &out), GW_EINVAL);
  ASSERT_ERROR_MENTIONS(tst_is_cpu() ? "cuda backend" : "cpu backend");
  gw_ipc_handle v = h;
  v.bytes[4] = 4;
  reseal(&v);
  ASSERT_STATUS(gw_ipc_open(ctx, &v, &out), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("handle version 4 is newer than this gpuwrap's 3");
  v.bytes[4] = 200; /* a newer layout may have another check value: version comes first */
  ASSERT_STATUS(gw_ipc_open(ctx, &v, &out), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("version 200 is newer");
  v.bytes[4] = 1; /* version 1 named the device by the exporter's ordinal only */
  reseal(&v);
  ASSERT_STATUS(gw_ipc_open(ctx, &v, &out), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("handle version 1 is older");
  ASSERT_ERROR_MENTIONS("export it again");
  /* A device UUID this process does not see: GW_ENODEV naming it. */
  gw_ipc_handle d = h;
  for (int i = 57; i < 73; i++) d.bytes[i] = (unsigned char)(0xE0 + i % 16);
  reseal(&d);
  ASSERT_STATUS(gw_ipc_open(ctx, &d, &out), GW_ENODEV);
  ASSERT_ERROR_MENTIONS("e9eaebec-edee-efe0-e1e2-e3e4e5e6e7e8");
  ASSERT_ERROR_MENTIONS("none of the");
  /* Without a UUID (a runtime that gives none) the exporter's ordinal is used. */
  int count = 0;
  ASSERT_OK(gw_backend_device_count(gw_context_backend(ctx), &count));
  d = h;
  memset(d.bytes + 57, 0, 16);
  d.bytes[9] = (unsigned char)count;
  reseal(&d);
  ASSERT_STATUS(gw_ipc_open(ctx, &d, &out), GW_ENODEV);
  ASSERT_ERROR_MENTIONS("device");
  ASSERT_EQ_PTR(out, SENTINEL_ARRAY);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* Only device memory exports: host, pinned and managed memory are refused with the
 * reason, the handle untouched. */
TEST_IMPL(export_refuses_other_kinds) {
  gw_context *ctx = tst_open(0);
  int64_t n = 32;
  gw_memkind kinds[3] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_MANAGED};
  for (int k = 0; k < 3; k++) {
    gw_array *a = NULL;
    gw_status s = gw_alloc(ctx, kinds[k], GW_FLOAT32, 1, &n, &a);
    if (s == GW_ENOTSUP) continue; /* a device without managed memory */
    ASSERT_OK(s);
    gw_ipc_handle h = sentinel_handle();
    ASSERT_STATUS(gw_ipc_export(a, &h), GW_ENOTSUP);
    ASSERT_ERROR_MENTIONS(gw_memkind_name(kinds[k]));
    ASSERT_ERROR_MENTIONS("only device memory");
    ASSERT_UNTOUCHED(h);
    gw_release(a);
  }
  float host[8];
  int64_t eight = 8;
  gw_array *w = NULL;
  ASSERT_OK(gw_wrap(ctx, host, GW_FLOAT32, 1, &eight, NULL, 0, &w));
  gw_ipc_handle h = sentinel_handle();
  ASSERT_STATUS(gw_ipc_export(w, &h), GW_ENOTSUP);
  ASSERT_UNTOUCHED(h);
  gw_release(w);
  ASSERT_STATUS(gw_ipc_export(NULL, &h), GW_EINVAL);
  ASSERT_STATUS(gw_ipc_open(ctx, NULL, &w), GW_EINVAL);
  ASSERT_STATUS(gw_ipc_open(NULL, &h, &w), GW_EINVAL);
  gw_context_destroy(ctx);
  return 0;
}

/* 16 dims with small extents and strides round-trip; values that do not fit the handle
 * are refused at export with GW_ENOTSUP, never truncated. */
TEST_IMPL(geometry_limits) {
  gw_context *ctx = tst_open(0);
  int64_t n = 1 << 16;
  gw_array *a = device_array(ctx, GW_UINT8, 1, &n), *w = NULL, *o = NULL;
  int64_t shape[GW_MAX_DIMS], strides[GW_MAX_DIMS];
  for (int d = 0; d < GW_MAX_DIMS; d++) {
    shape[d] = d < 4 ? 2 : 1;
    strides[d] = d < 4 ? -((int64_t)1 << (3 * d)) : (int64_t)d * 1000003;
  }
  char *last = (char *)gw_data(a) + (1 << 15);
  ASSERT_OK(gw_wrap(ctx, last, GW_UINT8, GW_MAX_DIMS, shape, strides, 0, &w));
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(w, &h));
  ASSERT_OK(gw_ipc_open(ctx, &h, &o));
  ASSERT_EQ_INT(gw_ndim(o), GW_MAX_DIMS);
  for (int d = 0; d < GW_MAX_DIMS; d++) {
    ASSERT_EQ_INT(gw_shape(o)[d], shape[d]);
    ASSERT_EQ_INT(gw_strides(o)[d], strides[d]);
  }
  ASSERT_EQ_PTR(gw_data(o), last);
  gw_release(o);
  gw_release(w);
  for (int d = 0; d < GW_MAX_DIMS; d++) {
    shape[d] = 1;
    strides[d] = INT64_MAX / 2 - d;
  }
  ASSERT_OK(gw_wrap(ctx, gw_data(a), GW_UINT8, GW_MAX_DIMS, shape, strides, 0, &w));
  h = sentinel_handle();
  ASSERT_STATUS(gw_ipc_export(w, &h), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("dims");
  ASSERT_UNTOUCHED(h);
  gw_release(w);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- interprocess events (private.h, gw__ipc_event_*: the halo's IPC signals) ---- */

/* A second process orders its stream after this one's by an interprocess event: the
 * parent poisons device memory, queues a copy of fresh random data into it (held back by
 * the CPU model's stream delay, so the copy is still pending when the child runs), records
 * the event after it and starts the child, whose stream waits for the event before it
 * copies the memory out: every element must be the new data (without the wait the child
 * reads the poison on the CPU model). */
TEST_IMPL(event_orders_second_process) {
  gw_context *ctx = tst_open(0);
  int64_t n = 4096 + (int64_t)tst_rand_below(4096);
  gw_array *a = device_array(ctx, GW_FLOAT64, 1, &n), *src = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT64, 1, &n, &src));
  uint64_t seed = fresh_seed();
  write_seeded(src, seed);
  static const unsigned char poison[8] = {0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5};
  ASSERT_OK(gw_fill(a, poison));
  gw__ipc_event *ev = NULL;
  gw__ipc_event_handle eh;
  ASSERT_OK(gw__ipc_event_create(ctx, &ev, &eh));
  ASSERT_OK(gw__ipc_event_query(ev)); /* never recorded: complete, as a fresh event */
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  ASSERT_OK(gw_copy_async(a, src, s));
  ASSERT_OK(gw__ipc_event_record(ev, s));
  if (tst_is_cpu()) ASSERT_EQ_INT(gw__ipc_event_query(ev), GW_EBUSY); /* held back */
  char hex[2 * GW__IPC_EVENT_HANDLE_BYTES + 1];
  for (int i = 0; i < GW__IPC_EVENT_HANDLE_BYTES; i++) sprintf(hex + 2 * i, "%02x", eh.bytes[i]);
  setenv("GW_TEST_IPC_EVENT", hex, 1);
  /* the child's own copy runs at once (this process read its delay at its first call) */
  setenv("GPUWRAP_CPU_STREAM_DELAY_US", "0", 1);
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_CHILD_OK("event_wait", &h, NULL, seed, NULL);
  unsetenv("GW_TEST_IPC_EVENT");
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_OK(gw__ipc_event_query(ev));
  gw_stream_destroy(s);
  gw__ipc_event_destroy(ev);
  gw_release(src);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* The little-endian integer of n bytes at p. */
static uint64_t le_at(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* The handle's checks and the calls' arguments: each refusal names what is wrong. */
TEST_IMPL(event_handles_and_arguments) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw__ipc_event *ev = NULL, *other = (gw__ipc_event *)(uintptr_t)0x5A5A5A50;
  gw__ipc_event_handle eh;
  ASSERT_EQ_INT(gw__ipc_event_supported(ctx), 1);
  ASSERT_EQ_INT(gw__ipc_event_supported(NULL), 0);
  ASSERT_STATUS(gw__ipc_event_create(NULL, &ev, &eh), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("ctx");
  ASSERT_STATUS(gw__ipc_event_create(ctx, NULL, &eh), GW_EINVAL);
  ASSERT_STATUS(gw__ipc_event_create(ctx, &ev, NULL), GW_EINVAL);
  ASSERT_OK(gw__ipc_event_create(ctx, &ev, &eh));
  /* the layout src/core/ipc_event.c gives, integers little-endian whatever the host's */
  ASSERT_TRUE(memcmp(eh.bytes, "GWIPCEV1", 8) == 0);
  ASSERT_EQ_INT(le_at(eh.bytes + 8, 4), gw_context_backend(ctx));
  ASSERT_EQ_INT(le_at(eh.bytes + 12, 4), 0);
  ASSERT_EQ_INT(le_at(eh.bytes + 16, 8), getpid());
  ASSERT_EQ_INT(le_at(eh.bytes + 88, 8), 0);
  /* this process's own event: the runtimes refuse to open it */
  ASSERT_STATUS(gw__ipc_event_open(ctx, &eh, &other), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("this process");
  ASSERT_NULL(other);
  gw__ipc_event_handle bad = eh;
  bad.bytes[0] ^= 0xFF;
  ASSERT_STATUS(gw__ipc_event_open(ctx, &bad, &other), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("not an interprocess event handle");
  bad = eh;
  bad.bytes[8] = (unsigned char)(tst_is_cpu() ? GW_BACKEND_CUDA : GW_BACKEND_CPU); /* backend */
  ASSERT_STATUS(gw__ipc_event_open(ctx, &bad, &other), GW_EDEVICE);
  ASSERT_ERROR_MENTIONS("backend");
  ASSERT_STATUS(gw__ipc_event_record(ev, NULL), GW_EINVAL);
  ASSERT_STATUS(gw__ipc_event_wait(NULL, ev), GW_EINVAL);
  ASSERT_STATUS(gw__ipc_event_query(NULL), GW_EINVAL);
  gw__ipc_event_destroy(NULL);
  gw__ipc_event_destroy(ev);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* In a graph capture an interprocess event is refused before anything is recorded, and
 * the capture stays valid (the CPU model's capture control). */
TEST_IMPL(event_refused_in_capture) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  gw__ipc_event *ev = NULL;
  gw__ipc_event_handle eh;
  ASSERT_OK(gw__ipc_event_create(ctx, &ev, &eh));
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  void *native = gw_stream_native(s);
  ASSERT_OK(gw_cpu_stream_capture_begin(native, GW_CPU_CAPTURE_RELAXED));
  ASSERT_STATUS(gw__ipc_event_record(ev, s), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("captured into a graph");
  ASSERT_STATUS(gw__ipc_event_wait(s, ev), GW_ENOTSUP);
  gw_cpu_graph *g = NULL;
  ASSERT_OK(gw_cpu_stream_capture_end(native, &g)); /* still valid */
  gw_cpu_graph_destroy(g);
  gw_stream_destroy(s);
  gw__ipc_event_destroy(ev);
  gw_context_destroy(ctx);
  return 0;
}

/* n bytes from fd, or fewer at its end. */
static size_t read_full(int fd, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  return got;
}

/* event_fork_child's child: the parent's event `inherited` came with the fork, *eh is its
 * handle, h the handle of the device memory the parent copies seeded data into and records
 * the event after. `go` says when the parent recorded, then when it opened the child's
 * event; `back` takes the child's event handle. */
static int event_fork_kid(gw_context *ctx, gw__ipc_event *inherited, const gw__ipc_event_handle *eh,
                          const gw_ipc_handle *h, uint64_t seed, int go, int back) {
  gw__ipc_event *ev = NULL, *mine = NULL, *refused = NULL;
  ASSERT_OK(gw__ipc_event_open(ctx, eh, &ev)); /* the parent's: not this process's own */
  gw_array *a = NULL, *out = NULL;
  ASSERT_OK(gw_ipc_open(ctx, h, &a));
  int64_t n = gw_numel(a);
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 1, &n, &out));
  char c;
  ASSERT_EQ_INT(read(go, &c, 1), 1); /* the parent's record returned */
  gw_stream *t = NULL;
  ASSERT_OK(gw_stream_create(ctx, &t));
  ASSERT_OK(gw__ipc_event_wait(t, ev));
  ASSERT_OK(gw_copy_async(out, a, t));
  ASSERT_OK(gw_stream_synchronize(t));
  check_seeded(out, seed);
  ASSERT_OK(gw__ipc_event_query(ev));
  /* The inherited event: releases this process's copy only (the parent checks its own). */
  gw__ipc_event_destroy(inherited);
  /* An event made here is this process's: it cannot open it, the parent can. */
  gw__ipc_event_handle kh;
  ASSERT_OK(gw__ipc_event_create(ctx, &mine, &kh));
  ASSERT_STATUS(gw__ipc_event_open(ctx, &kh, &refused), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("an event of this process");
  ASSERT_EQ_SIZE((size_t)write(back, kh.bytes, sizeof kh.bytes), sizeof kh.bytes);
  ASSERT_EQ_INT(read(go, &c, 1), 1); /* the parent opened it: it may go */
  gw__ipc_event_destroy(mine);
  gw__ipc_event_destroy(ev);
  gw_stream_destroy(t);
  gw_release(out);
  gw_release(a);
  return 0;
}

/* Interprocess events and fork (docs/IPC.md, "fork"): a forked child is another process,
 * not the maker of its parent's events. It opens the parent's handle (which the parent
 * itself cannot) and its stream waits for the parent's record: the parent's copy into
 * device memory is held back by the stream delay, so without the wait the child reads the
 * poison. The events the child inherited stay the parent's: destroying one there releases
 * the child's copy only (the parent records on it afterwards, and a second child opens its
 * handle). An event the child makes is the child's: the parent opens its handle. */
TEST_IMPL(event_fork_child) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  int64_t n = 4096 + (int64_t)tst_rand_below(4096);
  gw_array *a = device_array(ctx, GW_FLOAT64, 1, &n), *src = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT64, 1, &n, &src));
  uint64_t seed = fresh_seed();
  write_seeded(src, seed);
  static const unsigned char poison[8] = {0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5};
  ASSERT_OK(gw_fill(a, poison));
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  gw__ipc_event *ev = NULL, *kids = NULL;
  gw__ipc_event_handle eh, kh;
  ASSERT_OK(gw__ipc_event_create(ctx, &ev, &eh));
  int go[2], back[2];
  ASSERT_EQ_INT(pipe(go), 0);
  ASSERT_EQ_INT(pipe(back), 0);
  fflush(NULL);
  pid_t kid = fork(); /* before the copy is queued: the child inherits no pending work */
  ASSERT_TRUE(kid >= 0);
  if (kid == 0) {
    close(go[1]);
    close(back[0]);
    int rc = event_fork_kid(ctx, ev, &eh, &h, seed, go[0], back[1]);
    gw_release(a); /* what it inherited (a leak under valgrind's check of the child else) */
    gw_release(src);
    gw_context_destroy(ctx);
    _exit(rc);
  }
  close(go[0]);
  close(back[1]);
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  ASSERT_OK(gw_copy_async(a, src, s));
  ASSERT_OK(gw__ipc_event_record(ev, s));
  ASSERT_EQ_INT(gw__ipc_event_query(ev), GW_EBUSY); /* held back: the child must wait */
  ASSERT_EQ_INT(write(go[1], "r", 1), 1);
  ASSERT_EQ_SIZE(read_full(back[0], kh.bytes, sizeof kh.bytes), sizeof kh.bytes);
  ASSERT_OK(gw__ipc_event_open(ctx, &kh, &kids));
  ASSERT_OK(gw__ipc_event_query(kids)); /* never recorded: complete */
  gw__ipc_event_destroy(kids);
  ASSERT_EQ_INT(write(go[1], "d", 1), 1);
  int st = 0;
  ASSERT_EQ_INT(waitpid(kid, &st, 0), kid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  close(go[1]);
  close(back[0]);
  /* The child destroyed its copy of ev: the parent's event works, its handle opens. */
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_OK(gw__ipc_event_query(ev));
  check_seeded(a, seed);
  ASSERT_OK(gw__ipc_event_record(ev, s));
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_OK(gw__ipc_event_query(ev));
  fflush(NULL);
  kid = fork();
  ASSERT_TRUE(kid >= 0);
  if (kid == 0) {
    gw__ipc_event *again = NULL;
    int ok = gw__ipc_event_open(ctx, &eh, &again) == GW_OK && gw__ipc_event_query(again) == GW_OK;
    if (again) gw__ipc_event_destroy(again);
    gw__ipc_event_destroy(ev); /* the inherited copy, as above */
    gw_release(a);
    gw_release(src);
    gw_context_destroy(ctx);
    _exit(ok ? 0 : 1);
  }
  ASSERT_EQ_INT(waitpid(kid, &st, 0), kid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  gw_stream_destroy(s);
  gw__ipc_event_destroy(ev);
  gw_release(src);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* The backend's two calls fail in turn (CPU failure injection): the status comes back,
 * *out stays NULL, nothing leaks. */
TEST_IMPL(event_injected_failures) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw__ipc_event *ev = (gw__ipc_event *)(uintptr_t)0x5A5A5A50;
  gw__ipc_event_handle eh;
  gw_cpu_fail_op(GW_CPU_OP_IPC_EVENT_CREATE, 1, GW_ENOMEM);
  ASSERT_STATUS(gw__ipc_event_create(ctx, &ev, &eh), GW_ENOMEM);
  ASSERT_NULL(ev);
  gw_cpu_fail_reset();
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}
