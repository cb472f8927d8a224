/*
 * Read-only host memory (issue 13, item 8). Measured on the H200 (driver 580.159.04): a
 * plain cudaHostRegister of pages the process cannot write is "invalid value";
 * cudaHostRegisterReadOnly registers PROT_READ MAP_SHARED file mappings and mprotect'ed
 * anonymous memory; on a PROT_READ MAP_PRIVATE file mapping it never returns.
 *
 * Part 1 (CPU model, CI): the model refuses plain registrations of read-only pages, takes
 * read-only ones, and models the hang (GW_EBACKEND + gw_cpu_model_hangs()), reading the
 * pages' protection from /proc/self/maps through the core's gw__host_mapping (a hidden
 * symbol: tested through the model here, long lines and a forked child included).
 *
 * Part 2 (every backend): gw_wrap of read-only memory end to end. Guarded by
 * GW_TEST_READONLY_WRAP until the core's integration lands (registry.c / wrap.c); without
 * it the same test names exist and skip, so CTest's list (read from the TEST_IMPL lines)
 * matches the binary either way.
 */
#define GW_TEST_READONLY_WRAP 1 /* the core registers read-only memory (item 8) */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define HANG_MSG "model: cudaHostRegister(ReadOnly) of a private file mapping never returns on CUDA"

typedef enum {
  M_ANON,       /* anonymous, filled, then mprotect(PROT_READ) */
  M_SHARED,     /* file, PROT_READ, MAP_SHARED */
  M_PRIVATE,    /* file, PROT_READ, MAP_PRIVATE: the mapping the runtime hangs on */
  M_PRIVATE_RW, /* file, PROT_READ | PROT_WRITE, MAP_PRIVATE (copy-on-write) */
} mkind;

static const char *const mkind_name[] = {"anonymous mprotect(PROT_READ)",
                                         "PROT_READ MAP_SHARED file", "PROT_READ MAP_PRIVATE file",
                                         "PROT_READ|PROT_WRITE MAP_PRIVATE file"};

typedef struct {
  mkind kind;
  unsigned char *p;
  size_t bytes;
  unsigned char *want; /* the contents, random */
} mapping;

/* A file of random bytes, unlinked at once (nothing is left behind if a test aborts; the
 * mapping still has its inode, and /proc/self/maps says "(deleted)"). tmpfs first. */
static int random_file(size_t bytes, unsigned char *data) {
  const char *dirs[] = {"/dev/shm", "/tmp"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    char path[64];
    snprintf(path, sizeof path, "%s/gw-readonly-XXXXXX", dirs[i]);
    int fd = mkstemp(path);
    if (fd < 0) continue;
    unlink(path);
    size_t done = 0;
    while (done < bytes) {
      ssize_t n = write(fd, data + done, bytes - done);
      if (n <= 0) TST_FAIL("write to %s: %s", path, strerror(errno));
      done += (size_t)n;
    }
    return fd;
  }
  TST_FAIL("cannot create a file in /dev/shm or /tmp: %s", strerror(errno));
}

static mapping map_make(mkind k, size_t bytes) {
  printf("  %s, %zu bytes\n", mkind_name[k], bytes); /* which case a failure is in */
  mapping m = {k, NULL, bytes, malloc(bytes)};
  ASSERT_NOT_NULL(m.want);
  tst_random_fill(m.want, bytes);
  void *p;
  if (k == M_ANON) {
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_TRUE(p != MAP_FAILED);
    memcpy(p, m.want, bytes);
    ASSERT_EQ_INT(mprotect(p, bytes, PROT_READ), 0);
  } else {
    int fd = random_file(bytes, m.want);
    int prot = k == M_PRIVATE_RW ? PROT_READ | PROT_WRITE : PROT_READ;
    p = mmap(NULL, bytes, prot, k == M_SHARED ? MAP_SHARED : MAP_PRIVATE, fd, 0);
    ASSERT_TRUE(p != MAP_FAILED);
    close(fd);
  }
  m.p = p;
  return m;
}

static void map_free(mapping *m) {
  munmap(m->p, m->bytes);
  free(m->want);
}

/* ====================================================================================== */
/* Part 1: the CPU model (and through it, gw__host_mapping).                              */
/* ====================================================================================== */

TEST_IMPL(plain_register_of_readonly_pages_refused) {
  TEST_REQUIRE_CPU();
  size_t bytes = 8 * tst_page();
  for (mkind k = M_ANON; k <= M_PRIVATE; k++) {
    mapping m = map_make(k, bytes);
    size_t regs = gw_cpu_live_registrations();
    long hangs = gw_cpu_model_hangs();
    ASSERT_STATUS(gw_cpu_runtime_register(m.p, bytes), GW_EINVAL);
    ASSERT_ERROR_MENTIONS("cudaHostRegister");
    ASSERT_ERROR_MENTIONS("invalid value");
    ASSERT_ERROR_MENTIONS("cannot write");
    /* any read-only byte is enough: the last one, and one in the middle */
    ASSERT_STATUS(gw_cpu_runtime_register(m.p + bytes - 1, 1), GW_EINVAL);
    ASSERT_STATUS(gw_cpu_runtime_register(m.p + 100, 3 * tst_page()), GW_EINVAL);
    ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs);
    ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs); /* a plain registration does not hang */
    map_free(&m);
  }
  return 0;
}

TEST_IMPL(readonly_register_of_shared_and_anon) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t bytes = 8 * tst_page();
  for (mkind k = M_ANON; k <= M_SHARED; k++) {
    mapping m = map_make(k, bytes);
    size_t regs = gw_cpu_live_registrations();
    long hangs = gw_cpu_model_hangs();
    ASSERT_OK(gw_cpu_runtime_register_readonly(m.p, bytes));
    ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs + 1);
    gw_ptrinfo info;
    ASSERT_OK(gw_pointer_query(ctx, m.p + bytes / 2, &info));
    ASSERT_EQ_INT(info.kind, GW_MEM_PINNED);
    ASSERT_TRUE(info.flags & GW_PTR_HOST_REGISTERED);
    /* the usual table rules still hold for read-only registrations */
    ASSERT_STATUS(gw_cpu_runtime_register_readonly(m.p + 10, 10), GW_EALREADY);
    ASSERT_OK(gw_cpu_runtime_unregister(m.p));
    ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs);
    ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs);
    /* byte ranges, as plain registrations: an interior piece registers too */
    ASSERT_OK(gw_cpu_runtime_register_readonly(m.p + 5, 1000));
    ASSERT_OK(gw_cpu_runtime_unregister(m.p + 5));
    map_free(&m);
  }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(readonly_register_of_writable_memory) {
  /* cudaHostRegisterReadOnly only promises the device will not write: writable memory
   * takes it too, and plain registration of writable memory is unchanged */
  TEST_REQUIRE_CPU();
  size_t pg = tst_page();
  char *buf = tst_pages(4);
  size_t regs = gw_cpu_live_registrations();
  ASSERT_OK(gw_cpu_runtime_register_readonly(buf, 4 * pg));
  ASSERT_OK(gw_cpu_runtime_unregister(buf));
  ASSERT_OK(gw_cpu_runtime_register(buf + 1, 4 * pg - 2));
  ASSERT_OK(gw_cpu_runtime_unregister(buf + 1));
  /* stack memory, for good measure ([stack] is anonymous, not a file) */
  char local[256];
  memset(local, 1, sizeof local);
  ASSERT_OK(gw_cpu_runtime_register_readonly(local, sizeof local));
  ASSERT_OK(gw_cpu_runtime_unregister(local));
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs);
  free(buf);
  return 0;
}

TEST_IMPL(private_file_mapping_models_the_hang) {
  TEST_REQUIRE_CPU();
  size_t bytes = 8 * tst_page();
  /* read-only and copy-on-write private file mappings: both are private file mappings,
   * and nothing says the second one is safe, so the model counts both */
  for (mkind k = M_PRIVATE; k <= M_PRIVATE_RW; k++) {
    mapping m = map_make(k, bytes);
    size_t regs = gw_cpu_live_registrations();
    long hangs = gw_cpu_model_hangs();
    ASSERT_STATUS(gw_cpu_runtime_register_readonly(m.p, bytes), GW_EBACKEND);
    ASSERT_ERROR_MENTIONS(HANG_MSG);
    ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs + 1);
    ASSERT_STATUS(gw_cpu_runtime_register_readonly(m.p + bytes - 1, 1), GW_EBACKEND);
    ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs + 2);
    ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs);
    if (k == M_PRIVATE_RW) {
      /* writable: a plain registration is fine */
      ASSERT_OK(gw_cpu_runtime_register(m.p, bytes));
      ASSERT_OK(gw_cpu_runtime_unregister(m.p));
    }
    map_free(&m);
  }
  return 0;
}

TEST_IMPL(mapping_boundaries) {
  /* A writable anonymous page, then a read-only private file page, then a read-only
   * anonymous page, adjacent (MAP_FIXED into one reservation): each verdict must apply to
   * exactly the bytes of its mapping. */
  TEST_REQUIRE_CPU();
  size_t pg = tst_page();
  unsigned char *r = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_TRUE(r != MAP_FAILED);
  unsigned char *data = malloc(pg);
  tst_random_fill(data, pg);
  int fd = random_file(pg, data);
  ASSERT_TRUE(mmap(r + pg, pg, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) == r + pg);
  close(fd);
  ASSERT_EQ_INT(mprotect(r + 2 * pg, pg, PROT_READ), 0);
  size_t regs = gw_cpu_live_registrations();
  long hangs = gw_cpu_model_hangs();

  /* first page only, up to its last byte: writable anonymous memory */
  ASSERT_OK(gw_cpu_runtime_register(r, pg));
  ASSERT_OK(gw_cpu_runtime_unregister(r));
  ASSERT_OK(gw_cpu_runtime_register_readonly(r + 1, pg - 1));
  ASSERT_OK(gw_cpu_runtime_unregister(r + 1));
  /* one byte into the file page */
  ASSERT_STATUS(gw_cpu_runtime_register(r + pg - 8, 9), GW_EINVAL);
  ASSERT_STATUS(gw_cpu_runtime_register_readonly(r + pg - 8, 9), GW_EBACKEND);
  ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs + 1);
  /* the third page: read-only anonymous */
  ASSERT_STATUS(gw_cpu_runtime_register(r + 2 * pg, pg), GW_EINVAL);
  ASSERT_OK(gw_cpu_runtime_register_readonly(r + 2 * pg, pg));
  ASSERT_OK(gw_cpu_runtime_unregister(r + 2 * pg));
  /* the whole reservation holds the file page */
  ASSERT_STATUS(gw_cpu_runtime_register_readonly(r, 3 * pg), GW_EBACKEND);
  ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs + 2);
  /* the last byte of the file page against the first of the third page */
  ASSERT_STATUS(gw_cpu_runtime_register_readonly(r + 2 * pg - 1, 2), GW_EBACKEND);
  ASSERT_OK(gw_cpu_runtime_register_readonly(r + 2 * pg, 1));
  ASSERT_OK(gw_cpu_runtime_unregister(r + 2 * pg));
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs);
  munmap(r, 3 * pg);
  free(data);
  return 0;
}

/* Directories nested `depth` deep under a fresh /tmp directory, each with a 200-character
 * name, and a file with spaces and a newline in its name at the bottom: its line in
 * /proc/self/maps is longer than any buffer a reader might pick (and than PATH_MAX). */
#define DEEP 30
typedef struct {
  char top[64];
  int dirfd[DEEP + 1];
} deepdir;

static const char deep_name[] = "gw readonly\nfile";

static int deep_make(deepdir *d, size_t bytes, unsigned char *data) {
  char comp[201];
  memset(comp, 'd', 200);
  comp[200] = '\0';
  snprintf(d->top, sizeof d->top, "/tmp/gw-readonly-XXXXXX");
  if (!mkdtemp(d->top)) return -1;
  d->dirfd[0] = open(d->top, O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(d->dirfd[0] >= 0);
  for (int i = 1; i <= DEEP; i++) {
    ASSERT_EQ_INT(mkdirat(d->dirfd[i - 1], comp, 0700), 0);
    d->dirfd[i] = openat(d->dirfd[i - 1], comp, O_RDONLY | O_DIRECTORY);
    ASSERT_TRUE(d->dirfd[i] >= 0);
  }
  int fd = openat(d->dirfd[DEEP], deep_name, O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_TRUE(fd >= 0);
  ASSERT_EQ_INT(write(fd, data, bytes), (long long)bytes);
  return fd;
}

static void deep_remove(deepdir *d) {
  char comp[201];
  memset(comp, 'd', 200);
  comp[200] = '\0';
  (void)unlinkat(d->dirfd[DEEP], deep_name, 0);
  for (int i = DEEP; i >= 1; i--) {
    close(d->dirfd[i]);
    (void)unlinkat(d->dirfd[i - 1], comp, AT_REMOVEDIR);
  }
  close(d->dirfd[0]);
  (void)rmdir(d->top);
}

TEST_IMPL(long_map_lines) {
  TEST_REQUIRE_CPU();
  size_t bytes = 2 * tst_page();
  unsigned char *data = malloc(bytes);
  tst_random_fill(data, bytes);
  deepdir d;
  int fd = deep_make(&d, bytes, data);
  if (fd < 0) TEST_SKIP("cannot create a directory in /tmp");
  /* many mappings of it around the one under test, so that the line of interest is
   * preceded by long ones and read() splits them */
  enum { N = 16 };
  void *shared[N];
  for (int i = 0; i < N; i++) {
    shared[i] = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_TRUE(shared[i] != MAP_FAILED);
  }
  unsigned char *priv = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  unsigned char *shr = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_TRUE(priv != MAP_FAILED && shr != MAP_FAILED);
  close(fd);
  long hangs = gw_cpu_model_hangs();
  ASSERT_STATUS(gw_cpu_runtime_register_readonly(priv, bytes), GW_EBACKEND);
  ASSERT_ERROR_MENTIONS(HANG_MSG);
  ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs + 1);
  ASSERT_STATUS(gw_cpu_runtime_register(shr, bytes), GW_EINVAL);
  ASSERT_OK(gw_cpu_runtime_register_readonly(shr, bytes));
  ASSERT_OK(gw_cpu_runtime_unregister(shr));
  for (int i = 0; i < N; i++) {
    ASSERT_OK(gw_cpu_runtime_register_readonly(shared[i], bytes));
    ASSERT_OK(gw_cpu_runtime_unregister(shared[i]));
    munmap(shared[i], bytes);
  }
  munmap(priv, bytes);
  munmap(shr, bytes);
  deep_remove(&d);
  free(data);
  return 0;
}

TEST_IMPL(map_read_in_forked_child) {
  /* the map reader uses no stdio and no allocation: it works in a child forked while
   * other threads might hold any lock */
  TEST_REQUIRE_CPU();
  size_t bytes = 4 * tst_page();
  mapping priv = map_make(M_PRIVATE, bytes), shr = map_make(M_SHARED, bytes);
  fflush(NULL);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    int ok = gw_cpu_runtime_register_readonly(priv.p, bytes) == GW_EBACKEND &&
             gw_cpu_runtime_register(shr.p, bytes) == GW_EINVAL &&
             gw_cpu_runtime_register_readonly(shr.p, bytes) == GW_OK &&
             gw_cpu_runtime_unregister(shr.p) == GW_OK;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ_INT(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ_INT(WEXITSTATUS(status), 0);
  map_free(&priv);
  map_free(&shr);
  return 0;
}

TEST_IMPL(no_readonly_support_refuses_flag) {
  /* GPUWRAP_CPU_NO_READONLY_REGISTER=1: a device without cudaHostRegisterReadOnly */
  TEST_REQUIRE_CPU();
  size_t bytes = 4 * tst_page();
  mapping shr = map_make(M_SHARED, bytes), priv = map_make(M_PRIVATE, bytes);
  size_t regs = gw_cpu_live_registrations();
  long hangs = gw_cpu_model_hangs();
  ASSERT_STATUS(gw_cpu_runtime_register_readonly(shr.p, bytes), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("HostRegisterReadOnlySupported");
  /* refused before the pages are looked at: the flag never reaches a runtime without it */
  ASSERT_STATUS(gw_cpu_runtime_register_readonly(priv.p, bytes), GW_ENOTSUP);
  ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs);
  ASSERT_STATUS(gw_cpu_runtime_register(shr.p, bytes), GW_EINVAL);
  char *buf = tst_pages(1);
  ASSERT_OK(gw_cpu_runtime_register(buf, tst_page()));
  ASSERT_OK(gw_cpu_runtime_unregister(buf));
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs);
  free(buf);
  map_free(&shr);
  map_free(&priv);
  return 0;
}

TEST_IMPL(readonly_register_obeys_injection) {
  /* the read-only call is a "register" call: counted, and failed by injection with no
   * state changed, like the plain one */
  TEST_REQUIRE_CPU();
  size_t bytes = 2 * tst_page();
  mapping shr = map_make(M_SHARED, bytes);
  long calls = gw_cpu_op_calls(GW_CPU_OP_REGISTER);
  size_t regs = gw_cpu_live_registrations();
  gw_cpu_fail_op(GW_CPU_OP_REGISTER, 1, GW_ENOMEM);
  ASSERT_STATUS(gw_cpu_runtime_register_readonly(shr.p, bytes), GW_ENOMEM);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs);
  ASSERT_OK(gw_cpu_runtime_register_readonly(shr.p, bytes));
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), calls + 2);
  ASSERT_OK(gw_cpu_runtime_unregister(shr.p));
  gw_cpu_fail_reset();
  map_free(&shr);
  return 0;
}

/* ====================================================================================== */
/* Part 2: gw_wrap of read-only memory, every backend. FOR THE LEAD: enable with           */
/*     #define GW_TEST_READONLY_WRAP 1                                                     */
/* above the #include once registry.c / wrap.c register read-only memory (item 8). Keep  */
/* the names in the #else list below in step with the TEST_IMPLs of this block.           */
/* ====================================================================================== */
#ifdef GW_TEST_READONLY_WRAP

#define RO_ELEMS ((size_t)(64 * 1024)) /* uint32: 256 KiB, several staging chunks' worth */

static gw_array *wrap_u32(gw_context *ctx, void *p, size_t n, unsigned flags) {
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)n};
  gw_status s = gw_wrap(ctx, p, GW_UINT32, 1, shape, NULL, flags, &a);
  if (s != GW_OK)
    TST_FAIL("gw_wrap(%p, %zu uint32, flags %#x): %s: %s", p, n, flags, gw_err_name(s),
             gw_last_error());
  return a;
}

/* Whether the device reads pageable memory in place (HMM/ATS): then no wrap registers
 * anything and every host wrap is device-accessible, read-only or not. */
static int reads_pageable(gw_context *ctx) {
  char *buf = tst_pages(1);
  gw_array *w = wrap_u32(ctx, buf, 16, 0);
  gw_ptrinfo i;
  ASSERT_OK(gw_pointer_query(ctx, buf, &i));
  int r = gw_data(w) != NULL && i.kind == GW_MEM_HOST;
  gw_release(w);
  free(buf);
  return r;
}

/* Copy a to device memory and back to the host, whole and through a strided view, and
 * compare every element with the mapping's contents; writes into a are refused. */
static void check_copies(gw_array *a, const mapping *m) {
  gw_context *ctx = gw_array_context(a);
  size_t n = (size_t)gw_numel(a);
  gw_array *d = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, gw_shape(a), &d));
  ASSERT_OK(gw_copy(d, a));
  uint32_t *out = malloc(n * 4);
  tst_read(d, out);
  ASSERT_ELEMS_EQ(out, m->want, n, 4);
  /* strided: every third element from 1 */
  int64_t start[1] = {1}, shape[1] = {(int64_t)((n - 1 + 2) / 3)}, step[1] = {3};
  gw_array *v = NULL, *dv = NULL;
  ASSERT_OK(gw_view(a, start, shape, step, &v));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &dv));
  ASSERT_OK(gw_copy(dv, v));
  tst_read(dv, out);
  const uint32_t *want = (const uint32_t *)m->want;
  for (int64_t i = 0; i < shape[0]; i++)
    if (out[i] != want[1 + 3 * i])
      TST_FAIL("strided element %" PRId64 ": got %08x, want %08x", i, out[i], want[1 + 3 * i]);
  /* nothing writes into read-only memory (on the host a write would be SIGSEGV, from a
   * GPU a fault) */
  ASSERT_STATUS(gw_copy(a, d), GW_EREADONLY);
  uint32_t one = 1;
  ASSERT_STATUS(gw_fill(a, &one), GW_EREADONLY);
  ASSERT_TRUE(memcmp(m->p, m->want, m->bytes) == 0);
  gw_release(dv);
  gw_release(v);
  gw_release(d);
  free(out);
}

/* A wrap of memory the runtime can register read-only: device-accessible, and (on the
 * CPU model, which tells) registered once, read-only, and unregistered at release. */
static void wrap_registers(mkind k, unsigned flags) {
  gw_context *ctx = tst_open(0);
  int pageable = reads_pageable(ctx);
  tst_leaks before = tst_leak_snapshot();
  long hangs = gw_cpu_model_hangs();
  mapping m = map_make(k, RO_ELEMS * 4);
  gw_array *a = wrap_u32(ctx, m.p, RO_ELEMS, flags);
  ASSERT_TRUE(gw_is_readonly(a));      /* PROT_READ memory is read-only whatever flags say */
  if (tst_backend() != GW_BACKEND_HIP) /* ROCm 5 cannot register read-only: host-only */
    ASSERT_NOT_NULL(gw_data(a));
  ASSERT_EQ_PTR(gw_host_data(a), m.p);
  if (tst_is_cpu() && !pageable) {
    gw_ptrinfo i;
    ASSERT_OK(gw_pointer_query(ctx, m.p + 100, &i));
    ASSERT_TRUE(i.flags & GW_PTR_GPUWRAP_REGISTERED);
    ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 1);
    /* it can only be the read-only registration: the model refuses a plain one of these
     * pages (plain_register_of_readonly_pages_refused), and now they are taken */
    gw_status again = gw_cpu_runtime_register(m.p, m.bytes);
    ASSERT_TRUE(again == GW_EALREADY || again == GW_EINVAL);
  }
  check_copies(a, &m);
  gw_release(a);
  ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs);
  ASSERT_NO_LEAK(before);
  map_free(&m);
  gw_context_destroy(ctx);
}

/* A wrap of memory that must never reach the runtime read-only (a private file mapping):
 * host-only, nothing registered, copies right through staging. */
static void wrap_host_only(mkind k, unsigned flags) {
  gw_context *ctx = tst_open(0);
  int pageable = reads_pageable(ctx);
  tst_leaks before = tst_leak_snapshot();
  long hangs = gw_cpu_model_hangs();
  mapping m = map_make(k, RO_ELEMS * 4);
  gw_array *a = wrap_u32(ctx, m.p, RO_ELEMS, flags);
  ASSERT_TRUE(gw_is_readonly(a));
  if (!pageable) ASSERT_NULL(gw_data(a));
  ASSERT_EQ_PTR(gw_host_data(a), m.p);
  ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs); /* never handed to the runtime */
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs);
  ASSERT_EQ_SIZE(gw_registry_ranges(), before.ranges);
  check_copies(a, &m);
  gw_release(a);
  ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs);
  ASSERT_NO_LEAK(before);
  map_free(&m);
  gw_context_destroy(ctx);
}

TEST_IMPL(wrap_readonly_anon) {
  wrap_registers(M_ANON, GW_WRAP_READONLY);
  return 0;
}

TEST_IMPL(wrap_readonly_shared_file) {
  wrap_registers(M_SHARED, GW_WRAP_READONLY);
  return 0;
}

TEST_IMPL(wrap_readonly_private_file) {
  wrap_host_only(M_PRIVATE, GW_WRAP_READONLY);
  return 0;
}

TEST_IMPL(wrap_plain_of_readonly_pages) {
  /* no GW_WRAP_READONLY: the plain registration is refused, gpuwrap looks at the pages
   * and registers them read-only (or, for a private file mapping, leaves them host-only) */
  wrap_registers(M_ANON, 0);
  wrap_registers(M_SHARED, 0);
  wrap_host_only(M_PRIVATE, 0);
  return 0;
}

TEST_IMPL(wrap_readonly_private_writable) {
  /* GW_WRAP_READONLY of a writable (copy-on-write) private file mapping: the read-only flag
   * is ruled out (private file mapping), but the pages are writable, so a plain
   * registration works (the lead's choice; host-only would also be safe). */
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  long hangs = gw_cpu_model_hangs();
  mapping m = map_make(M_PRIVATE_RW, RO_ELEMS * 4);
  gw_array *a = wrap_u32(ctx, m.p, RO_ELEMS, GW_WRAP_READONLY);
  ASSERT_TRUE(gw_is_readonly(a));
  if (tst_is_cpu()) ASSERT_NOT_NULL(gw_data(a));
  ASSERT_EQ_INT(gw_cpu_model_hangs(), hangs);
  check_copies(a, &m);
  gw_release(a);
  ASSERT_NO_LEAK(before);
  map_free(&m);
  gw_context_destroy(ctx);
  return 0;
}

/* The kernel's own pages (here the vDSO, at the address the kernel gives every process):
 * no runtime can page-lock them, so the registry says so itself, in its words, without
 * asking the runtime read-only (a plain wrap asks once and is refused; a GW_WRAP_READONLY
 * wrap never asks). The array is host-only and read-only, and its bytes copy out right. */
TEST_IMPL(wrap_kernel_pages) {
  unsigned char *vdso = (unsigned char *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
  if (!vdso) TEST_SKIP("no vDSO in this process (AT_SYSINFO_EHDR is 0)");
  const int64_t bytes = (int64_t)sysconf(_SC_PAGESIZE);
  gw_context *ctx = tst_open(0);
  int pageable = reads_pageable(ctx);
  for (int ro = 0; ro < 2; ro++) {
    tst_leaks before = tst_leak_snapshot();
    long asked = gw_cpu_op_calls(GW_CPU_OP_REGISTER);
    gw_array *a = NULL;
    ASSERT_OK(gw_wrap(ctx, vdso, GW_UINT8, 1, &bytes, NULL, ro ? GW_WRAP_READONLY : 0, &a));
    if (tst_is_cpu() && !pageable) {
      ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER) - asked, ro ? 0 : 1);
      ASSERT_STR_CONTAINS(gw_last_error(), "pages the kernel provides");
      ASSERT_STR_CONTAINS(gw_last_error(), "vdso");
    }
    ASSERT_TRUE(gw_is_readonly(a));
    if (!pageable) ASSERT_NULL(gw_data(a));
    ASSERT_EQ_PTR(gw_host_data(a), vdso);
    ASSERT_EQ_SIZE(gw_registry_ranges(), before.ranges);
    gw_array *out = NULL;
    ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_UINT8, 1, &bytes, &out));
    memset(gw_host_data(out), 0xA5, (size_t)bytes); /* poisoned */
    ASSERT_OK(gw_copy(out, a));
    ASSERT_TRUE(memcmp(gw_host_data(out), vdso, (size_t)bytes) == 0);
    gw_array *dev = NULL; /* through the device too: staged out of the host-only array */
    ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT8, 1, &bytes, &dev));
    ASSERT_OK(gw_copy(dev, a));
    memset(gw_host_data(out), 0x5A, (size_t)bytes);
    ASSERT_OK(gw_copy(out, dev));
    ASSERT_TRUE(memcmp(gw_host_data(out), vdso, (size_t)bytes) == 0);
    gw_release(dev);
    gw_release(out);
    gw_release(a);
    ASSERT_NO_LEAK(before);
  }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(wrap_readonly_without_device_support) {
  /* GPUWRAP_CPU_NO_READONLY_REGISTER=1 (on GPU backends the device decides): read-only
   * pages cannot be registered at all, so every such wrap is host-only and stages */
  if (!tst_is_cpu()) TEST_SKIP("models a device without read-only registration");
  wrap_host_only(M_ANON, GW_WRAP_READONLY);
  wrap_host_only(M_SHARED, GW_WRAP_READONLY);
  wrap_host_only(M_SHARED, 0);
  wrap_host_only(M_PRIVATE, GW_WRAP_READONLY);
  return 0;
}

#else /* the same tests, skipping until the integration is enabled */

#define RO_PENDING(name)                                                              \
  TEST_IMPL(name) {                                                                   \
    TEST_SKIP("GW_TEST_READONLY_WRAP is not defined yet (pending core integration)"); \
  }
RO_PENDING(wrap_readonly_anon)
RO_PENDING(wrap_readonly_shared_file)
RO_PENDING(wrap_readonly_private_file)
RO_PENDING(wrap_plain_of_readonly_pages)
RO_PENDING(wrap_readonly_private_writable)
RO_PENDING(wrap_readonly_without_device_support)

#endif /* GW_TEST_READONLY_WRAP */

/* Host-only wraps register nothing (GW_WRAP_NO_REGISTER; a device that reads pageable
 * memory, its environment in tests/test_list.h), so nothing looked at their pages, and a write into read-only
 * ones crashed the process (SIGSEGV in the host fill or copy). The first write now finds
 * them and is GW_EREADONLY, with the mapping in the message; the pages are unchanged, and
 * reads still work. Every backend: the host writes such memory on all of them. */
static void write_into_readonly_host_only(unsigned flags) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  const mkind kinds[] = {M_ANON, M_SHARED, M_PRIVATE};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    mapping m = map_make(kinds[k], RO_ELEMS * 4);
    gw_array *a = wrap_u32(ctx, m.p, RO_ELEMS, flags);
    uint32_t v = (uint32_t)tst_rand64();
    ASSERT_STATUS(gw_fill(a, &v), GW_EREADONLY);
    ASSERT_ERROR_MENTIONS("not writable");
    gw_array *src = NULL;
    int64_t n = RO_ELEMS;
    ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_UINT32, 1, &n, &src));
    ASSERT_STATUS(gw_copy(a, src), GW_EREADONLY);
    ASSERT_EQ_INT(memcmp(m.p, m.want, RO_ELEMS * 4), 0); /* nothing written */
    check_copies(a, &m);                                 /* reads still work */
    gw_release(src);
    gw_release(a);
    map_free(&m);
  }
  /* writable host-only memory is written as before, and only the first write looks */
  uint32_t *w = malloc(RO_ELEMS * 4);
  gw_array *a = wrap_u32(ctx, w, RO_ELEMS, flags);
  for (int rep = 0; rep < 3; rep++) {
    uint32_t v = (uint32_t)tst_rand64();
    ASSERT_OK(gw_fill(a, &v));
    ASSERT_ALL_EQ(w, &v, RO_ELEMS, 4);
  }
  gw_release(a);
  free(w);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
}
TEST_IMPL(write_into_readonly_host_only) {
  write_into_readonly_host_only(GW_WRAP_NO_REGISTER);
  return 0;
}
TEST_IMPL(write_into_readonly_host_only_hmm) {
  TEST_REQUIRE_CPU(); /* the environment models a device that reads pageable memory */
  write_into_readonly_host_only(0);
  return 0;
}

/* A GW_WRAP_READONLY wrap registers its bytes read-only (DESIGN.md), and a later writable
 * wrap of the same bytes shares that registration, so the device may not write through it
 * either: it is read-only while the first lives. A write used to say only "read-only
 * array", as if this wrap had asked for it; it now says which registration and what to do.
 * Once the read-only wrap and its sharer are gone, a new wrap of the bytes is writable. */
TEST_IMPL(writable_wrap_sharing_readonly_registration) {
  gw_context *ctx = tst_open(0);
  if (reads_pageable(ctx)) {
    gw_context_destroy(ctx);
    TEST_SKIP("the device reads pageable memory: nothing is registered");
  }
  tst_leaks before = tst_leak_snapshot();
  size_t n = RO_ELEMS, bytes = n * 4;
  uint32_t *buf = tst_pages((bytes + tst_page() - 1) / tst_page()), *want = malloc(bytes);
  tst_random_fill(buf, bytes);
  memcpy(want, buf, bytes);
  gw_array *ro = wrap_u32(ctx, buf, n, GW_WRAP_READONLY);
  uint32_t v = (uint32_t)tst_rand64();
  ASSERT_STATUS(gw_fill(ro, &v), GW_EREADONLY);
  ASSERT_ERROR_MENTIONS("GW_WRAP_READONLY");
  if (!gw_data(ro)) { /* no read-only registration here (ROCm 5): host-only, nothing shared */
    gw_release(ro);
    free(want);
    free(buf);
    gw_context_destroy(ctx);
    TEST_SKIP("the device cannot register memory read-only");
  }
  gw_array *rw = wrap_u32(ctx, buf, n, 0);
  ASSERT_TRUE(gw_is_readonly(rw));
  ASSERT_STATUS(gw_fill(rw, &v), GW_EREADONLY);
  ASSERT_ERROR_MENTIONS("registration gpuwrap made read-only");
  /* a view carries the reason */
  int64_t start[1] = {1}, shape[1] = {(int64_t)(n / 2)}, step[1] = {2};
  gw_array *view = NULL;
  ASSERT_OK(gw_view(rw, start, shape, step, &view));
  ASSERT_STATUS(gw_fill(view, &v), GW_EREADONLY);
  ASSERT_ERROR_MENTIONS("registration gpuwrap made read-only");
  /* GW_WRAP_NO_REGISTER uses what is registered as it is: read-only too */
  gw_array *nr = wrap_u32(ctx, buf, n, GW_WRAP_NO_REGISTER);
  ASSERT_STATUS(gw_fill(nr, &v), GW_EREADONLY);
  ASSERT_ERROR_MENTIONS("registration gpuwrap made read-only");
  gw_release(nr);
  /* the registration stays read-only while anything holds it, rw included (as the
   * message says): with the read-only wrap gone, a new wrap is still read-only */
  gw_release(view);
  gw_release(ro);
  gw_array *rw2 = wrap_u32(ctx, buf, n, 0);
  ASSERT_STATUS(gw_fill(rw2, &v), GW_EREADONLY);
  ASSERT_ERROR_MENTIONS("this array included");
  ASSERT_ELEMS_EQ(buf, want, n, 4); /* nothing written */
  gw_release(rw2);
  gw_release(rw);
  /* nothing read-only holds the bytes now: a new wrap is writable, every element set */
  gw_array *again = wrap_u32(ctx, buf, n, 0);
  ASSERT_TRUE(!gw_is_readonly(again));
  ASSERT_OK(gw_fill(again, &v));
  ASSERT_ALL_EQ(buf, &v, n, 4);
  gw_release(again);
  free(want);
  free(buf);
  /* pages the process cannot write, wrapped without GW_WRAP_READONLY: registered read-only
   * for the pages, and a write says so, not that some read-only wrap holds them */
  mapping m = map_make(M_ANON, RO_ELEMS * 4);
  gw_array *pg = wrap_u32(ctx, m.p, RO_ELEMS, 0);
  ASSERT_TRUE(gw_is_readonly(pg));
  ASSERT_STATUS(gw_fill(pg, &v), GW_EREADONLY);
  ASSERT_ERROR_MENTIONS("not writable");
  ASSERT_TRUE(memcmp(m.p, m.want, m.bytes) == 0);
  gw_release(pg);
  map_free(&m);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}
