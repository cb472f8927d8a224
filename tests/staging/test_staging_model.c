/*
 * The staging pipeline (src/backends/gpu/gpu_staging.c: pageable <-> device copies through
 * pinned bounce buffers and a pool of copy threads) on the CPU, over a mock runtime
 * (vendor_mock.h), so its ordering and its error paths are checked where there is no GPU,
 * under ASan, TSan and valgrind with the rest of the CPU suite.
 *
 * The mock runtime is one in-order stream whose copies ("DMAs") run late: at random points
 * of the caller's later runtime calls, or when an event or the stream is synchronized. So a
 * bounce buffer filled again before its DMA ran, a DMA issued before its chunk was filled,
 * or a chunk copied out before its DMA landed, shows as wrong bytes. "Device" memory is host
 * memory here. Failure injection: the k-th call of one runtime function fails.
 *
 * Tests (CPU backend only; on a GPU backend they skip, cuda.test_staging.* runs the real thing):
 *   random   random settings (chunk, threads, buffers, pieces, split, small, streamed and
 *            demoted stores, spins), copies of 1 B to 6 MiB both ways at odd offsets: every
 *            byte and the guards around it checked
 *   fail     every runtime call of a staged copy failed in turn, both ways:
 *            the copy reports the failure (or, when the setup fails, declines and leaves
 *            the copy to the plain path), writes nothing outside its destination, leaves no
 *            DMA running, and the next copy on the same context is right; buffers and
 *            events all freed at the end
 */
#include "test.h"

#include "gpu_internal.h"

#include <sched.h>
#include <signal.h>

/* ---- the mock runtime -------------------------------------------------------------------- */

struct gwm_event {
  long pos; /* the queue position its record covers */
};

typedef struct {
  void *dst;
  const void *src;
  size_t n;
} gwm_op;

static struct {
  gwm_op *q;
  long n, cap, done; /* queued, allocated, run */
  int lazy;          /* 0: copies run when issued */
  long dmas, zero_dmas;
  long host_allocs, events; /* live */
  const char *fail_call;    /* the fail_in-th call of this function fails */
  long fail_in;
  long injected;
  char msg[256]; /* the last gwg_fail message */
} M;

static int inject(const char *call) {
  if (M.fail_call && !strcmp(M.fail_call, call) && --M.fail_in == 0) {
    M.injected++;
    return 1;
  }
  return 0;
}

static void run_to(long pos) {
  for (; M.done < pos; M.done++) memcpy(M.q[M.done].dst, M.q[M.done].src, M.q[M.done].n);
}

static void run_some(void) {
  if (M.lazy && M.done < M.n && tst_rand_below(4) == 0)
    run_to(M.done + 1 + (long)tst_rand_below((uint64_t)(M.n - M.done)));
  else if (!M.lazy)
    run_to(M.n);
}

int gwv_device_attr(gwv_attr a, int device) {
  (void)a, (void)device;
  return 0; /* no pageable access through the host's page tables: staging applies */
}

gwv_err gwv_HostAlloc(void **p, size_t n, int flags) {
  (void)flags;
  if (inject("HostAlloc")) return GWV_MOCK_ERROR;
  *p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
  if (!*p) return GWV_MOCK_ERROR;
  M.host_allocs++;
  return GWV_SUCCESS;
}

gwv_err gwv_FreeHost(void *p) {
  free(p);
  M.host_allocs--;
  return GWV_SUCCESS;
}

gwv_err gwv_EventCreateWithFlags(gwv_event *e, int flags) {
  (void)flags;
  if (inject("EventCreate")) return GWV_MOCK_ERROR;
  *e = calloc(1, sizeof **e);
  if (!*e) return GWV_MOCK_ERROR;
  M.events++;
  return GWV_SUCCESS;
}

gwv_err gwv_EventDestroy(gwv_event e) {
  free(e);
  M.events--;
  return GWV_SUCCESS;
}

gwv_err gwv_EventRecord(gwv_event e, gwv_stream s) {
  (void)s;
  if (inject("EventRecord")) return GWV_MOCK_ERROR;
  e->pos = M.n;
  return GWV_SUCCESS;
}

gwv_err gwv_EventQuery(gwv_event e) {
  if (inject("EventQuery")) return GWV_MOCK_ERROR;
  run_some();
  return M.done >= e->pos ? GWV_SUCCESS : GWV_MOCK_NOT_READY;
}

gwv_err gwv_EventSynchronize(gwv_event e) {
  if (inject("EventSynchronize")) return GWV_MOCK_ERROR;
  run_to(e->pos);
  return GWV_SUCCESS;
}

gwv_err gwv_MemcpyAsync(void *dst, const void *src, size_t n, int kind, gwv_stream s) {
  (void)kind, (void)s;
  if (inject("MemcpyAsync")) return GWV_MOCK_ERROR;
  M.dmas++;
  M.zero_dmas += n == 0;
  if (M.n == M.cap) {
    long cap = M.cap ? 2 * M.cap : 1024;
    gwm_op *q = realloc(M.q, (size_t)cap * sizeof *q);
    if (!q) return GWV_MOCK_ERROR;
    M.q = q;
    M.cap = cap;
  }
  M.q[M.n++] = (gwm_op){dst, src, n};
  run_some();
  return GWV_SUCCESS;
}

gwv_err gwv_StreamSynchronize(gwv_stream s) {
  (void)s;
  run_to(M.n);
  return GWV_SUCCESS;
}

gwv_err gwv_GetLastError(void) { return GWV_SUCCESS; }

/* What the rest of the backend gives gpu_staging.c: the core's settings directly (the
 * plugin reads them through the host API). */
gw_status gwg_setting(gw__setting_id id, long long *out) { return gw__setting_int(id, out); }

gw_status gwg_fail(gwv_err e, const char *fmt, ...) {
  (void)e;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(M.msg, sizeof M.msg, fmt, ap);
  va_end(ap);
  return GW_EBACKEND;
}

gw_status gwg_enter(int device, gwg_prev *prev) {
  (void)device;
  memset(prev, 0, sizeof *prev);
  return GW_OK;
}

void gwg_leave(gwg_prev prev) { (void)prev; }

/* ---- the copies ---------------------------------------------------------------------------- */

#define GUARD 64
#define MiB ((size_t)1 << 20)

typedef struct {
  size_t cap;
  unsigned char *h, *d, *ref; /* pageable side, "device" side, expected bytes */
} rig;

static void rig_make(rig *r, size_t cap) {
  r->cap = cap;
  r->h = malloc(cap + 3 * GUARD);
  r->d = malloc(cap + 3 * GUARD);
  r->ref = malloc(cap);
  ASSERT_TRUE(r->h && r->d && r->ref);
}

static void rig_free(rig *r) {
  free(r->h);
  free(r->d);
  free(r->ref);
}

static void set(const char *name, const char *v) {
  if (v && *v)
    setenv(name, v, 1);
  else
    unsetenv(name);
}

/* One copy of n bytes offered to the staging, host+ho <-> device+dof, up (host to device)
 * or down; *staged: whether it took the copy. Returns the copy's status, after checking
 * the guards around the destination, and, when it was staged and succeeded, every byte. */
static gw_status one(gwg_ctx *ctx, rig *r, int up, size_t n, size_t ho, size_t dof, int *staged) {
  size_t all = r->cap + 3 * GUARD;
  for (size_t i = 0; i < n; i += 8) { /* fresh random bytes, 8 at a time */
    uint64_t v = tst_rand64();
    memcpy(r->ref + i, &v, n - i < 8 ? n - i : 8);
  }
  memset(r->h, 0x5a, all);
  memset(r->d, 0xa5, all);
  unsigned char *hs = r->h + GUARD + ho, *ds = r->d + GUARD + dof;
  unsigned char *dst = up ? ds : hs, *dbase = up ? r->d : r->h;
  unsigned char poison = up ? 0xa5 : 0x5a;
  size_t dlead = GUARD + (up ? dof : ho);
  memcpy(up ? hs : ds, r->ref, n);
  gw__xfer x;
  memset(&x, 0, sizeof x);
  x.ndim = 1;
  x.elem = 1;
  x.shape[0] = (int64_t)n;
  x.dst_stride[0] = x.src_stride[0] = 1;
  x.src_kind = up ? GW_MEM_HOST : GW_MEM_DEVICE;
  x.dst_kind = up ? GW_MEM_DEVICE : GW_MEM_HOST;
  x.src = (const char *)(up ? hs : ds);
  x.dst = (char *)dst;
  long zero0 = M.zero_dmas;
  gw_status s = GW_OK;
  *staged = gwg_staging_copy(ctx, &x, 0, NULL, &s);
  /* Whatever happened, nothing outside the destination moved, also once every DMA queued
   * has run. */
  run_to(M.n);
  for (size_t i = 0; i < dlead; i++)
    if (dbase[i] != poison)
      TST_FAIL("%s %zu bytes: wrote %zu bytes before the destination", up ? "h2d" : "d2h", n,
               dlead - i);
  for (size_t i = 0; i < GUARD; i++)
    if (dst[n + i] != poison)
      TST_FAIL("%s %zu bytes: wrote past the destination (byte %zu)", up ? "h2d" : "d2h", n, i);
  ASSERT_EQ_INT(M.zero_dmas, zero0);
  if (!*staged || s != GW_OK) return s;
  if (memcmp(dst, r->ref, n) != 0)
    for (size_t i = 0; i < n; i++)
      if (dst[i] != r->ref[i])
        TST_FAIL("%s %zu bytes (host+%zu, device+%zu): byte %zu is %02x, want %02x",
                 up ? "h2d" : "d2h", n, ho, dof, i, dst[i], r->ref[i]);
  return GW_OK;
}

/* A pipeline whose hand-offs are wrong can also stop making progress (a chunk counted done
 * before its DMA landed, then reset): say so instead of waiting for ctest's timeout. */
static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "FAIL: the staged copies did not end within 600 s (a hang)\n";
  ssize_t w = write(2, m, sizeof m - 1);
  (void)w;
  abort();
}

static void watchdog(void) {
  signal(SIGALRM, on_alarm);
  alarm(600); /* the whole test: ~5 s; 40 s under valgrind, 85 s under TSan on 2 CPUs */
}

/* A thread count of the list, no more than the CPUs this process may run on: spinning copy
 * threads beyond them only slow the test (under the sanitizers, on a small CI machine, a
 * lot). */
static const char *threads_upto(const char *want) {
  static char buf[16];
  cpu_set_t set;
  long cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0, n = atol(want);
  snprintf(buf, sizeof buf, "%ld", cpus > 0 && n > cpus ? cpus : n);
  return buf;
}

static size_t pick_size(size_t cap) {
  static const size_t fixed[] = {1, 255, 4097, MiB - 1, MiB, 4 * MiB + 1};
  uint64_t k = tst_rand_below(10);
  if (k < 6 && fixed[k] <= cap) return fixed[k];
  return 1 + (size_t)tst_rand_below(cap);
}

TEST_IMPL(random) {
  if (strcmp(tst_backend_str(), "cpu"))
    TEST_SKIP("the staging model runs on the CPU backend's suite only");
  watchdog();
  const char *chunks[] = {"4096", "64K", "256K", "512K", "768K", "1M", "1028K", "2M"};
  const char *threads[] = {"1", "2", "3", "5", "7"};
  const char *pieces[] = {"", "4096", "12K", "64K"};
  const char *splits[] = {"", "1", "3", "16"};
  const char *smalls[] = {"", "0", "1M"};
  const char *ntup[] = {"0", "", "1G", "2M"};
  const char *spins[] = {"", "1", "64"};
  const char *edges[] = {"", "0", "1", "2"};
  const char *e = getenv("GW_STAGING_MODEL_CONFIGS");
  long configs = e ? atol(e) : 24;
  rig r;
  rig_make(&r, 6 * MiB);
  for (long k = 0; k < configs; k++) {
    char nbuf[8];
    snprintf(nbuf, sizeof nbuf, "%d", 2 + (int)tst_rand_below(15));
    set("GPUWRAP_STAGING_CHUNK", chunks[tst_rand_below(8)]);
    set("GPUWRAP_STAGING_THREADS", threads_upto(threads[tst_rand_below(5)]));
    set("GPUWRAP_STAGING_BUFFERS", nbuf);
    set("GPUWRAP_STAGING_PIECE", pieces[tst_rand_below(4)]);
    set("GPUWRAP_STAGING_SPLIT", splits[tst_rand_below(4)]);
    set("GPUWRAP_STAGING_SMALL", smalls[tst_rand_below(3)]);
    set("GPUWRAP_STAGING_NT_UP_MAX", ntup[tst_rand_below(4)]);
    set("GPUWRAP_STAGING_SPINS", spins[tst_rand_below(3)]);
    set("GPUWRAP_STAGING_EDGE_TAIL", edges[tst_rand_below(4)]);
    M.lazy = tst_rand_below(4) != 0;
    gwg_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    for (int c = 0; c < 8; c++) {
      size_t n = pick_size(r.cap), ho = tst_rand_below(GUARD), dof = tst_rand_below(GUARD);
      int staged;
      ASSERT_OK(one(&ctx, &r, 1, n, ho, dof, &staged));
      ASSERT_TRUE(staged);
      ASSERT_OK(one(&ctx, &r, 0, n, ho, dof, &staged));
      ASSERT_TRUE(staged);
    }
    gwg_staging_fini(&ctx);
    ASSERT_EQ_INT(M.host_allocs, 0);
    ASSERT_EQ_INT(M.events, 0);
  }
  rig_free(&r);
  printf("random: %ld settings, %ld DMAs, 0 wrong bytes\n", configs, M.dmas);
  return 0;
}

TEST_IMPL(fail) {
  if (strcmp(tst_backend_str(), "cpu"))
    TEST_SKIP("the staging model runs on the CPU backend's suite only");
  watchdog();
  static const char *calls[] = {"HostAlloc",   "EventCreate", "MemcpyAsync",
                                "EventRecord", "EventQuery",  "EventSynchronize"};
  rig r;
  rig_make(&r, 3 * MiB);
  long cases = 0, reported = 0, declined = 0;
  set("GPUWRAP_STAGING_CHUNK", "256K");
  set("GPUWRAP_STAGING_THREADS", threads_upto("3"));
  set("GPUWRAP_STAGING_BUFFERS", "3");
  for (size_t c = 0; c < sizeof calls / sizeof *calls; c++) {
    for (int up = 0; up < 2; up++) {
      /* k past the calls one copy makes: the armed failure never comes, the copy is right */
      for (long k = 1;; k++) {
        gwg_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        M.lazy = 1;
        M.fail_call = calls[c];
        M.fail_in = k;
        long injected = M.injected;
        int staged;
        size_t n = 3 * MiB - 1 - tst_rand_below(4096);
        gw_status s = one(&ctx, &r, up, n, tst_rand_below(GUARD), tst_rand_below(GUARD), &staged);
        int hit = M.injected != injected;
        M.fail_call = NULL;
        cases++;
        if (!hit) {
          ASSERT_TRUE(staged);
          ASSERT_OK(s);
          gwg_staging_fini(&ctx);
          break;
        }
        if (!staged) {
          /* only the setup may fail this way: pinned buffers or events not made */
          ASSERT_TRUE(!strcmp(calls[c], "HostAlloc") || !strcmp(calls[c], "EventCreate"));
          declined++;
        } else {
          /* reported as the backend's failure, naming the call */
          ASSERT_EQ_INT(s, GW_EBACKEND);
          ASSERT_STR_CONTAINS(M.msg, calls[c]);
          reported++;
        }
        /* the same context afterwards: staged and right, or declined for good (setup) */
        gw_status s2 = one(&ctx, &r, !up, n, 0, 0, &staged);
        if (staged)
          ASSERT_OK(s2);
        else
          ASSERT_TRUE(!strcmp(calls[c], "HostAlloc") || !strcmp(calls[c], "EventCreate"));
        gwg_staging_fini(&ctx);
        ASSERT_EQ_INT(M.host_allocs, 0);
        ASSERT_EQ_INT(M.events, 0);
        ASSERT_TRUE(k < 10000);
      }
    }
  }
  rig_free(&r);
  printf("fail: %ld cases, %ld failures reported, %ld setups declined\n", cases, reported,
         declined);
  return 0;
}

/* A staging setting that is not valid fails the copy with GW_EINVAL naming it (it used to be
 * clamped or replaced by the default, silently), every time, and touches nothing. */
TEST_IMPL(bad_setting) {
  if (strcmp(tst_backend_str(), "cpu"))
    TEST_SKIP("the staging model runs on the CPU backend's suite only");
  const char *bad[][2] = {{"GPUWRAP_STAGING_CHUNK", "2048"},
                          {"GPUWRAP_STAGING_BUFFERS", "17"},
                          {"GPUWRAP_STAGING_THREADS", "many"},
                          {"GPUWRAP_STAGING_NT_UP_MAX", "off"}};
  rig r;
  rig_make(&r, 2 * MiB);
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    set(bad[k][0], bad[k][1]);
    gwg_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    for (int up = 0; up < 2; up++) {
      int staged = 0;
      ASSERT_STATUS(one(&ctx, &r, up, MiB, 0, 0, &staged), GW_EINVAL);
      ASSERT_TRUE(staged);
      ASSERT_ERROR_MENTIONS(bad[k][0]);
      ASSERT_ERROR_MENTIONS(bad[k][1]);
    }
    gwg_staging_fini(&ctx);
    ASSERT_EQ_INT(M.host_allocs, 0);
    set(bad[k][0], "");
  }
  rig_free(&r);
  return 0;
}
