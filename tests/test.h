/*
 * gpuwrap's tiny test harness (after libuv's test/task.h).
 *
 * One process per test: a test file defines its tests with
 *
 *     TEST_IMPL(name) { ...; return 0; }
 *
 * and the harness's main() runs the test named by argv[1]. A test returns 0, fails through
 * an ASSERT_* (prints both values and the location, then aborts) or skips with TEST_SKIP
 * (exit code 77, mapped to "skipped" by CTest's SKIP_RETURN_CODE).
 *
 * Every test is declared once, in tests/test_list.h (libuv's test-list.h): its file's
 * section names it with the backends it runs on and any extra environment. The compiler
 * sees that list: a TEST_IMPL that is not listed does not compile (its `tst_listed_`
 * constant is undeclared), and a listed test without a TEST_IMPL does not link; CMake
 * registers the CTest tests from the same list. The file's section is chosen by TEST_FILE,
 * which tests/CMakeLists.txt defines as the executable's name.
 *
 * The backend under test comes from GPUWRAP_TEST_BACKEND=cpu|cuda|hip (default cpu);
 * tst_open() skips when that backend is not built in or has no (such) device.
 * Random data is seeded from time and pid (GPUWRAP_TEST_SEED=N replays a run); the seed
 * is printed with every failure.
 */
#ifndef GW_TEST_H
#define GW_TEST_H

#include "gpuwrap.h"
#include "gpuwrap/cpu_testing.h"
#include "proc_counts.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define TST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TST_ASAN 1
#endif
#endif
#ifndef TST_ASAN
#define TST_ASAN 0
#endif

#define TEST_SKIP_CODE 77
#define TST_API static __attribute__((unused))

/* ---- registration ------------------------------------------------------------------ */

#include "test_list.h"

#ifndef TEST_FILE
#error "TEST_FILE (the test executable's name) is defined by tests/CMakeLists.txt"
#endif
#define TST_CAT_(a, b) a##b
#define TST_CAT(a, b) TST_CAT_(a, b)
#define TST_LIST TST_CAT(TEST_LIST_, TEST_FILE)

typedef int (*tst_fn)(void);

/* The file's cases, from its section of the list: a test (T: run by CTest) or a helper
 * entry point (H: a second process the file's tests start, never a CTest test). */
#define TST_DECLARE_TEST(name, backends, env) \
  static int test_##name(void);               \
  enum { tst_listed_##name = 1 };
#define TST_DECLARE_HELPER(name, fn) static int fn(void);
TST_LIST(TST_DECLARE_TEST, TST_DECLARE_HELPER)

#define TEST_IMPL(name)                                                     \
  _Static_assert(tst_listed_##name, "list " #name " in tests/test_list.h"); \
  static int test_##name(void)

#define TST_ENTRY_TEST(name, backends, env) {#name, test_##name},
#define TST_ENTRY_HELPER(name, fn) {#name, fn},
TST_API const struct {
  const char *name;
  tst_fn fn;
} tst_tests[] = {TST_LIST(TST_ENTRY_TEST, TST_ENTRY_HELPER)};
#define tst_ntests ((int)(sizeof tst_tests / sizeof tst_tests[0]))

/* ---- failure reporting ------------------------------------------------------------- */

TST_API uint64_t tst_seed;
TST_API const char *tst_current = "?";
/* What the test checks at the moment (a table's row, a size), named by a failure. */
TST_API char tst_context[256];
#define TEST_CONTEXT(...) snprintf(tst_context, sizeof tst_context, __VA_ARGS__)

TST_API const char *tst_backend_str(void) {
  const char *b = getenv("GPUWRAP_TEST_BACKEND");
  return (b && *b) ? b : "cpu";
}

__attribute__((noreturn, unused, format(printf, 3, 4))) static void
tst_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fflush(stdout);
  fprintf(stderr, "FAIL %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (tst_context[0]) fprintf(stderr, "\n  while checking: %s", tst_context);
  fprintf(stderr,
          "\n  test=%s backend=%s seed=%" PRIu64 " (replay: GPUWRAP_TEST_SEED=%" PRIu64 ")\n",
          tst_current, tst_backend_str(), tst_seed, tst_seed);
  fflush(stderr);
  abort();
}

#define TST_FAIL(...) tst_fail(__FILE__, __LINE__, __VA_ARGS__)

#define TEST_SKIP(reason)                                                   \
  do {                                                                      \
    fflush(stderr);                                                         \
    printf("SKIP %s (%s): %s\n", tst_current, tst_backend_str(), (reason)); \
    fflush(stdout);                                                         \
    exit(TEST_SKIP_CODE);                                                   \
  } while (0)

#define ASSERT_TRUE(c)                                  \
  do {                                                  \
    if (!(c)) TST_FAIL("ASSERT_TRUE(%s) is false", #c); \
  } while (0)

#define ASSERT_EQ_INT(a, b)                                                                        \
  do {                                                                                             \
    long long tst_a_ = (long long)(a), tst_b_ = (long long)(b);                                    \
    if (tst_a_ != tst_b_) TST_FAIL("ASSERT_EQ_INT(%s, %s): %lld != %lld", #a, #b, tst_a_, tst_b_); \
  } while (0)

#define ASSERT_NE_INT(a, b)                                                             \
  do {                                                                                  \
    long long tst_a_ = (long long)(a), tst_b_ = (long long)(b);                         \
    if (tst_a_ == tst_b_) TST_FAIL("ASSERT_NE_INT(%s, %s): both %lld", #a, #b, tst_a_); \
  } while (0)

#define ASSERT_EQ_SIZE(a, b)                                                                      \
  do {                                                                                            \
    size_t tst_a_ = (size_t)(a), tst_b_ = (size_t)(b);                                            \
    if (tst_a_ != tst_b_) TST_FAIL("ASSERT_EQ_SIZE(%s, %s): %zu != %zu", #a, #b, tst_a_, tst_b_); \
  } while (0)

#define ASSERT_EQ_PTR(a, b)                                                                    \
  do {                                                                                         \
    const void *tst_a_ = (const void *)(a), *tst_b_ = (const void *)(b);                       \
    if (tst_a_ != tst_b_) TST_FAIL("ASSERT_EQ_PTR(%s, %s): %p != %p", #a, #b, tst_a_, tst_b_); \
  } while (0)

#define ASSERT_NE_PTR(a, b)                                                           \
  do {                                                                                \
    const void *tst_a_ = (const void *)(a), *tst_b_ = (const void *)(b);              \
    if (tst_a_ == tst_b_) TST_FAIL("ASSERT_NE_PTR(%s, %s): both %p", #a, #b, tst_a_); \
  } while (0)

#define ASSERT_NULL(a) ASSERT_EQ_PTR(a, NULL)
#define ASSERT_NOT_NULL(a) ASSERT_NE_PTR(a, NULL)

#define ASSERT_OK(expr)                                                            \
  do {                                                                             \
    gw_status tst_s_ = (expr);                                                     \
    if (tst_s_ != GW_OK)                                                           \
      TST_FAIL("%s returned %s (%d): %s", #expr, gw_err_name(tst_s_), (int)tst_s_, \
               gw_last_error());                                                   \
  } while (0)

/* A failing call must return `want` and say why in gw_last_error(). */
#define ASSERT_STATUS(expr, want)                                                            \
  do {                                                                                       \
    gw_status tst_s_ = (expr), tst_w_ = (want);                                              \
    if (tst_s_ != tst_w_)                                                                    \
      TST_FAIL("%s returned %s (%d), expected %s (%d); last error: \"%s\"", #expr,           \
               gw_err_name(tst_s_), (int)tst_s_, gw_err_name(tst_w_), (int)tst_w_,           \
               gw_last_error());                                                             \
    if (tst_w_ != GW_OK) {                                                                   \
      const char *tst_m_ = gw_last_error();                                                  \
      if (tst_m_ == NULL || tst_m_[0] == '\0')                                               \
        TST_FAIL("%s returned %s but gw_last_error() is empty", #expr, gw_err_name(tst_s_)); \
    }                                                                                        \
  } while (0)

#define ASSERT_STR_CONTAINS(hay, needle)                                                     \
  do {                                                                                       \
    const char *tst_h_ = (hay), *tst_n_ = (needle);                                          \
    if (tst_h_ == NULL || strstr(tst_h_, tst_n_) == NULL)                                    \
      TST_FAIL("ASSERT_STR_CONTAINS(%s, %s): \"%s\" does not contain \"%s\"", #hay, #needle, \
               tst_h_ ? tst_h_ : "(null)", tst_n_);                                          \
  } while (0)

/* gw_last_error() names the argument (case-insensitive match). */
TST_API int tst_icontains(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  if (!hay) return 0;
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i] && (hay[i] | 0x20) == (needle[i] | 0x20)) i++;
    if (i == n) return 1;
  }
  return 0;
}
#define ASSERT_ERROR_MENTIONS(needle)                                                        \
  do {                                                                                       \
    if (!tst_icontains(gw_last_error(), (needle)))                                           \
      TST_FAIL("gw_last_error() \"%s\" does not mention \"%s\"", gw_last_error(), (needle)); \
  } while (0)

/* ... names one of several spellings: "ptr|pointer" */
TST_API int tst_mentions_any(const char *hay, const char *alts) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", alts);
  for (char *tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|"))
    if (tst_icontains(hay, tok)) return 1;
  return 0;
}
#define ASSERT_ERROR_MENTIONS_ANY(alts)                                                    \
  do {                                                                                     \
    if (!tst_mentions_any(gw_last_error(), (alts)))                                        \
      TST_FAIL("gw_last_error() \"%s\" mentions none of \"%s\"", gw_last_error(), (alts)); \
  } while (0)

/* ---- random data, poison ------------------------------------------------------------ */

TST_API uint64_t tst_rng = 0x9E3779B97F4A7C15ull;

TST_API uint64_t tst_rand64(void) {
  /* xorshift64* */
  tst_rng ^= tst_rng >> 12;
  tst_rng ^= tst_rng << 25;
  tst_rng ^= tst_rng >> 27;
  return tst_rng * 0x2545F4914F6CDD1Dull;
}
TST_API uint64_t tst_rand_below(uint64_t n) { return n ? tst_rand64() % n : 0; }

TST_API void tst_random_fill(void *p, size_t bytes) {
  unsigned char *c = (unsigned char *)p;
  size_t i = 0;
  while (i < bytes) {
    uint64_t r = tst_rand64();
    for (int k = 0; k < 8 && i < bytes; k++, i++) c[i] = (unsigned char)(r >> (8 * k));
  }
}

#define TST_POISON 0xA5
TST_API void tst_poison(void *p, size_t bytes) { memset(p, TST_POISON, bytes); }

/* ---- element checks ---------------------------------------------------------------- */

TST_API void tst_hex(char *out, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n && i < 16; i++) sprintf(out + 2 * i, "%02x", p[i]);
}

/* Compare n elements of `elem` bytes; report the first mismatch with both values. */
TST_API void tst_check_elems(const char *file, int line, const char *what, const void *got,
                             const void *want, size_t n, size_t elem) {
  const unsigned char *g = (const unsigned char *)got, *w = (const unsigned char *)want;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(g + i * elem, w + i * elem, elem) != 0) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad) {
    char hg[40] = {0}, hw[40] = {0};
    tst_hex(hg, g + first * elem, elem);
    tst_hex(hw, w + first * elem, elem);
    tst_fail(file, line,
             "%s: %zu of %zu elements (%zu bytes each) differ; first at %zu: got 0x%s, want 0x%s",
             what, bad, n, elem, first, hg, hw);
  }
}
#define ASSERT_ELEMS_EQ(got, want, n, elem) \
  tst_check_elems(__FILE__, __LINE__, #got " vs " #want, (got), (want), (n), (elem))

/* Every element of got equals value (elem bytes). */
TST_API void tst_check_all(const char *file, int line, const char *what, const void *got,
                           const void *value, size_t n, size_t elem) {
  const unsigned char *g = (const unsigned char *)got;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(g + i * elem, value, elem) != 0) {
      char hg[40] = {0}, hw[40] = {0};
      tst_hex(hg, g + i * elem, elem);
      tst_hex(hw, (const unsigned char *)value, elem);
      tst_fail(file, line, "%s: element %zu of %zu is 0x%s, want 0x%s", what, i, n, hg, hw);
    }
  }
}
#define ASSERT_ALL_EQ(got, value, n, elem) \
  tst_check_all(__FILE__, __LINE__, #got, (got), (value), (n), (elem))

/* ---- N-d index helpers -------------------------------------------------------------- */

/* Advance a row-major multi-index; 0 when it wrapped around (done). */
TST_API int tst_nd_next(int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++idx[d] < shape[d]) return 1;
    idx[d] = 0;
  }
  return 0;
}
TST_API int64_t tst_nd_offset(int ndim, const int64_t *idx, const int64_t *strides) {
  int64_t o = 0;
  for (int d = 0; d < ndim; d++) o += idx[d] * strides[d];
  return o;
}
TST_API int64_t tst_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}
TST_API void tst_c_strides(int ndim, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d];
  }
}

/* ---- memory helpers ---------------------------------------------------------------- */

TST_API size_t tst_page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Page-aligned pageable memory (free() it). */
TST_API void *tst_pages(size_t npages) {
  size_t p = tst_page();
  void *m = aligned_alloc(p, npages * p);
  if (!m) TST_FAIL("aligned_alloc(%zu pages) failed", npages);
  tst_poison(m, npages * p);
  return m;
}

/* Bytes of heap in use (glibc), for "OWN frees the pointer" without a leak checker;
 * returns -1 when unknown (sanitizers replace malloc: LSan checks instead). */
TST_API long long tst_heap_in_use(void) {
#if defined(__GLIBC__) && !TST_ASAN && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return (long long)(mi.uordblks + mi.hblkhd);
#else
  return -1;
#endif
}

/* ---- deleter counter ----------------------------------------------------------------- */

typedef struct {
  int calls;
  void *ptr;
} tst_deleter_state;
TST_API void tst_deleter(void *ptr, void *user) {
  tst_deleter_state *d = (tst_deleter_state *)user;
  d->calls++;
  d->ptr = ptr;
}

/* ---- leaks ---------------------------------------------------------------------------- */

typedef struct {
  size_t allocs, regs, ranges;
} tst_leaks;
TST_API tst_leaks tst_leak_snapshot(void) {
  tst_leaks l;
  l.allocs = gw_cpu_live_allocations();
  l.regs = gw_cpu_live_registrations();
  l.ranges = gw_registry_ranges();
  return l;
}
TST_API void tst_check_leaks(const char *file, int line, tst_leaks before) {
  tst_leaks now = tst_leak_snapshot();
  if (now.allocs != before.allocs || now.regs != before.regs || now.ranges != before.ranges)
    tst_fail(file, line,
             "leak: live allocations %zu (before %zu), live registrations %zu (before %zu), "
             "registry ranges %zu (before %zu)",
             now.allocs, before.allocs, now.regs, before.regs, now.ranges, before.ranges);
}
#define ASSERT_NO_LEAK(before) tst_check_leaks(__FILE__, __LINE__, (before))

/* Descriptors open in this process, and its mappings whose line in /proc/self/maps
 * contains `name` (proc_counts.h); a /proc that cannot be read fails the test. */
TST_API int tst_open_fds(void) {
  int n = proc_open_fds();
  if (n < 0) TST_FAIL("reading /proc/self/fd failed");
  return n;
}
TST_API int tst_maps_naming(const char *name) {
  int n = proc_maps_naming(name);
  if (n < 0) TST_FAIL("reading /proc/self/maps failed");
  return n;
}

/* ---- backend under test -------------------------------------------------------------- */

TST_API gw_backend tst_backend(void) {
  const char *b = tst_backend_str();
  if (strcmp(b, "cpu") == 0) return GW_BACKEND_CPU;
  if (strcmp(b, "cuda") == 0) return GW_BACKEND_CUDA;
  if (strcmp(b, "hip") == 0) return GW_BACKEND_HIP;
  TST_FAIL("GPUWRAP_TEST_BACKEND=%s: expected cpu, cuda or hip", b);
}
TST_API int tst_is_cpu(void) { return tst_backend() == GW_BACKEND_CPU; }

/* Tests of the CPU model (failure injection, raw runtime calls) run on cpu only. */
#define TEST_REQUIRE_CPU()                                                 \
  do {                                                                     \
    if (!tst_is_cpu()) TEST_SKIP("uses the CPU backend's model controls"); \
  } while (0)

/* Devices of the backend under test; skips when a GPU backend is absent. */
TST_API int tst_device_count(void) {
  int n = 0;
  gw_status s = gw_backend_device_count(tst_backend(), &n);
  if (s != GW_OK || n <= 0) {
    if (tst_is_cpu()) TST_FAIL("CPU backend unavailable: %s (%s)", gw_err_name(s), gw_last_error());
    TEST_SKIP("backend not built in, runtime not loadable, or no device");
  }
  return n;
}

/* A context of the backend under test on `device` (skip when there is no such GPU). */
TST_API gw_context *tst_open(int device) {
  int n = tst_device_count();
  gw_context *ctx = NULL;
  if (device >= n) {
    if (tst_is_cpu())
      TST_FAIL("CPU backend has %d devices, test needs device %d (GPUWRAP_CPU_DEVICES)", n, device);
    TEST_SKIP("not enough devices");
  }
  gw_status s = gw_context_create(tst_backend(), device, &ctx);
  if (s != GW_OK)
    TST_FAIL("gw_context_create(%s, %d): %s: %s", tst_backend_str(), device, gw_err_name(s),
             gw_last_error());
  if (!ctx) TST_FAIL("gw_context_create returned GW_OK and a NULL context");
  return ctx;
}

/* ---- array helpers ------------------------------------------------------------------- */

TST_API size_t tst_array_bytes(const gw_array *a) {
  return (size_t)gw_numel(a) * gw_dtype_size(gw_array_dtype(a));
}

/* Host wrap (not registered) of a C-contiguous buffer with a's dtype and shape. */
TST_API gw_array *tst_host_like(const gw_array *a, void *buf) {
  gw_array *h = NULL;
  gw_status s = gw_wrap(gw_array_context(a), buf, gw_array_dtype(a), gw_ndim(a), gw_shape(a), NULL,
                        GW_WRAP_NO_REGISTER, &h);
  if (s != GW_OK) TST_FAIL("host wrap for read/write: %s: %s", gw_err_name(s), gw_last_error());
  return h;
}
/* Read all of a (any kind, any strides) into buf, C order, through gw_copy. */
TST_API void tst_read(const gw_array *a, void *buf) {
  gw_array *h = tst_host_like(a, buf);
  tst_poison(buf, tst_array_bytes(a));
  gw_status s = gw_copy(h, a);
  if (s != GW_OK)
    TST_FAIL("gw_copy(host <- %s array): %s: %s", gw_memkind_name(gw_kind(a)), gw_err_name(s),
             gw_last_error());
  gw_release(h);
}
/* Write buf (C order) into a through gw_copy. */
TST_API void tst_write(gw_array *a, const void *buf) {
  gw_array *h = tst_host_like(a, (void *)buf);
  gw_status s = gw_copy(a, h);
  if (s != GW_OK)
    TST_FAIL("gw_copy(%s array <- host): %s: %s", gw_memkind_name(gw_kind(a)), gw_err_name(s),
             gw_last_error());
  gw_release(h);
}

TST_API const gw_dtype tst_all_dtypes[GW_DTYPE_COUNT] = {
    GW_BOOL,     GW_INT8,    GW_INT16,   GW_INT32,     GW_INT64,
    GW_UINT8,    GW_UINT16,  GW_UINT32,  GW_UINT64,    GW_FLOAT16,
    GW_BFLOAT16, GW_FLOAT32, GW_FLOAT64, GW_COMPLEX64, GW_COMPLEX128};

/* A random element value; bool gets 0 or 1. */
TST_API void tst_random_value(gw_dtype t, void *v) {
  size_t e = gw_dtype_size(t);
  tst_random_fill(v, e);
  if (t == GW_BOOL) *(unsigned char *)v = (unsigned char)(tst_rand64() & 1);
}

/* Skips where this process cannot make a pidfd at all (valgrind 3.19 does not know the call:
 * ENOSYS): an IPC open of pool or VMM memory there can only be refused; the refusal's
 * message is tested through the CPU model's forced-errno control, the transfer is skipped. */
TST_API void tst_require_pidfd(void) {
#ifdef SYS_pidfd_open
  long fd = syscall(SYS_pidfd_open, (long)getpid(), 0L);
#else
  long fd = syscall(434 /* x86-64, arm64 */, (long)getpid(), 0L);
#endif
  if (fd < 0 && errno == ENOSYS) TEST_SKIP("pidfd_open is not available in this process (ENOSYS)");
  if (fd >= 0) close((int)fd);
}

/* ---- main -------------------------------------------------------------------------------- */

#ifndef TEST_NO_MAIN
int main(int argc, char **argv) {
  const char *seed = getenv("GPUWRAP_TEST_SEED");
  tst_seed = seed ? strtoull(seed, NULL, 10)
                  : ((uint64_t)time(NULL) * 2654435761u) ^ ((uint64_t)getpid() << 16);
  tst_rng = tst_seed ? tst_seed : 1;
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: %s TEST\ntests:\n", argv[0]);
    for (int i = 0; i < tst_ntests; i++) fprintf(stderr, "  %s\n", tst_tests[i].name);
    return 2;
  }
  for (int i = 0; i < tst_ntests; i++) {
    if (strcmp(tst_tests[i].name, argv[1]) == 0) {
      int r;
      tst_current = tst_tests[i].name;
      printf("RUN %s backend=%s seed=%" PRIu64 "\n", tst_current, tst_backend_str(), tst_seed);
      r = tst_tests[i].fn();
      if (r == 0) printf("OK %s\n", tst_current);
      return r;
    }
  }
  fprintf(stderr, "no test named %s\n", argv[1]);
  return 2;
}
#endif

#endif /* GW_TEST_H */
