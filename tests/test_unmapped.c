/*
 * Unmapped host memory (issue 32, item 4). Measured on the H200 (driver 580.159.04):
 * cudaHostRegister of a range that is not mapped, wholly or in part (a hole inside, a tail
 * past the mapping's end), is cudaErrorInvalidValue, with or without
 * cudaHostRegisterReadOnly. The CPU model registered such a range, so a wrap of it was
 * "pinned" memory and the next gw_fill died of SIGSEGV (from Python: ctx.wrap(8, "u1",
 * (1,))). Now the model refuses it as CUDA does (GW_EINVAL), and a wrap or gw_pin of it
 * fails cleanly, leaving nothing registered.
 *
 * The holes are low addresses left unmapped beside pages mapped there, checked with
 * mincore (ENOMEM: not mapped) before and after the calls, so that a test never passes or
 * fails because something else was mapped there meanwhile.
 */
#include "test.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t pg(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Whether every page of [p, p + n) is unmapped (mincore fails with ENOMEM for a range
 * that holds any unmapped page, so ask page by page). */
static int all_unmapped(const void *p, size_t n) {
  unsigned char v;
  uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(pg() - 1);
  for (uintptr_t a = lo; a < (uintptr_t)p + n; a += pg())
    if (mincore((void *)a, pg(), &v) == 0 || errno != ENOMEM) return 0;
  return 1;
}

/* The hole of three_pages(hole) at p is still unmapped. */
static int hole_kept(const unsigned char *p, int hole) {
  return hole < 0 ? all_unmapped(p, 3 * pg()) : all_unmapped(p + (size_t)hole * pg(), pg());
}

/*
 * Three pages at a low address, all mapped but `hole` (-1: none mapped). Low memory is
 * used because nothing else maps there (the kernel hands out addresses from the top
 * down): a hole made by munmap higher up was taken by the sanitizers' own allocations
 * before the test could use it.
 */
static unsigned char *three_pages(int hole) {
  for (uintptr_t base = (uintptr_t)1 << 24; base < (uintptr_t)1 << 30; base += (uintptr_t)1 << 24) {
    unsigned char *p = (unsigned char *)base;
    if (!all_unmapped(p, 3 * pg())) continue;
    int ok = 1;
    for (int k = 0; k < 3 && ok; k++) {
      if (k == hole || hole < 0) continue;
      void *q = mmap(p + (size_t)k * pg(), pg(), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (q == MAP_FAILED)
        ok = 0;
      else if (q != p + (size_t)k * pg()) { /* a kernel that took the flag for a hint */
        munmap(q, pg());
        ok = 0;
      }
    }
    if (!ok) {
      for (int k = 0; k < 3; k++) /* only ours: every page was unmapped before */
        if (k != hole && hole >= 0) munmap(p + (size_t)k * pg(), pg());
      continue;
    }
    ASSERT_TRUE(hole_kept(p, hole));
    return p;
  }
  TST_FAIL("no three unmapped pages found below 1 GiB for MAP_FIXED_NOREPLACE");
}

/* The spans of one case: [off, off + len) of the three pages, whose hole is `hole`. */
typedef struct {
  const char *what;
  int hole;
  size_t off, len; /* in bytes */
} span;
static span spans(int i) {
  size_t g = pg();
  const span s[] = {
      {"3 unmapped pages", -1, 0, 3 * g},
      {"8 bytes inside unmapped memory", -1, g + 16, 8},
      {"3 pages, the middle one unmapped", 1, 0, 3 * g},
      {"a span running 8 bytes past its mapping", 1, g - 64, 72},
      {"a span starting in a hole", 0, g - 8, 16},
  };
  return s[i];
}
#define NSPANS 5

/* The model's own calls (cudaHostRegister as a user makes it). */
TEST_IMPL(model_refuses_unmapped) {
  TEST_REQUIRE_CPU();
  tst_leaks before = tst_leak_snapshot();
  for (int i = 0; i < NSPANS; i++) {
    span s = spans(i);
    printf("  %s\n", s.what);
    unsigned char *p = three_pages(s.hole);
    ASSERT_STATUS(gw_cpu_runtime_register(p + s.off, s.len), GW_EINVAL);
    ASSERT_ERROR_MENTIONS("not mapped");
    ASSERT_STATUS(gw_cpu_runtime_register_readonly(p + s.off, s.len), GW_EINVAL);
    ASSERT_ERROR_MENTIONS("not mapped");
    ASSERT_NO_LEAK(before);
    ASSERT_TRUE(hole_kept(p, s.hole)); /* nothing was mapped there meanwhile */
    if (s.hole >= 0) {                 /* the pages still mapped register as before */
      size_t keep = s.hole == 0 ? pg() : 0;
      ASSERT_OK(gw_cpu_runtime_register(p + keep, pg()));
      ASSERT_OK(gw_cpu_runtime_unregister(p + keep));
      for (int k = 0; k < 3; k++)
        if (k != s.hole) ASSERT_EQ_INT(munmap(p + (size_t)k * pg(), pg()), 0);
    }
  }
  ASSERT_NO_LEAK(before);
  return 0;
}

/* gw_wrap (default flags, GW_WRAP_READONLY) and gw_pin of those spans: GW_EINVAL naming
 * the hole, nothing registered, no array; with GW_WRAP_NO_REGISTER a host-only array whose
 * first write fails. A wrap of the mapped part alone works, every element checked. */
TEST_IMPL(wrap_unmapped) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  for (int i = 0; i < NSPANS; i++) {
    span s = spans(i);
    printf("  %s\n", s.what);
    unsigned char *p = three_pages(s.hole);
    int64_t n = (int64_t)s.len;
    const unsigned flags[] = {0, GW_WRAP_READONLY};
    for (int f = 0; f < 2; f++) {
      gw_array *a = (gw_array *)&a; /* poison: a failed wrap leaves it untouched */
      ASSERT_STATUS(gw_wrap(ctx, p + s.off, GW_UINT8, 1, &n, NULL, flags[f], &a), GW_EINVAL);
      ASSERT_ERROR_MENTIONS("not mapped");
      ASSERT_ERROR_MENTIONS("ptr");
      ASSERT_EQ_PTR(a, (gw_array *)&a);
      ASSERT_NO_LEAK(before);
    }
    ASSERT_STATUS(gw_pin(ctx, p + s.off, s.len), GW_EINVAL);
    ASSERT_ERROR_MENTIONS("not mapped");
    ASSERT_ERROR_MENTIONS("ptr");
    ASSERT_STATUS(gw_unpin(ctx, p + s.off, s.len), GW_ENOTREG);
    ASSERT_NO_LEAK(before);
    ASSERT_TRUE(hole_kept(p, s.hole)); /* nothing was mapped there meanwhile */

    /* NO_REGISTER registers nothing: a host-only array, whose first write looks at the
     * pages and refuses (as before: this path never crashed) */
    gw_array *h = NULL;
    ASSERT_OK(gw_wrap(ctx, p + s.off, GW_UINT8, 1, &n, NULL, GW_WRAP_NO_REGISTER, &h));
    ASSERT_NULL(gw_data(h));
    unsigned char v = 0x5a;
    ASSERT_STATUS(gw_fill(h, &v), GW_EREADONLY);
    ASSERT_ERROR_MENTIONS("not mapped");
    gw_release(h);

    if (s.hole >= 0) {
      unsigned char *m = p + (s.hole == 0 ? pg() : 0); /* a mapped page */
      /* gpuwrap's own registration of the mapped page, then a wrap reaching into the hole:
       * the gap's registration fails, the reference the wrap took on the pin's range is
       * given back, and the pin's range stays */
      if (s.hole == 1) {
        ASSERT_OK(gw_pin(ctx, m, pg()));
        ASSERT_EQ_SIZE(gw_registry_ranges(), before.ranges + 1);
        for (int f = 0; f < 2; f++) {
          gw_array *a = NULL;
          ASSERT_STATUS(gw_wrap(ctx, p + s.off, GW_UINT8, 1, &n, NULL, flags[f], &a), GW_EINVAL);
          ASSERT_ERROR_MENTIONS("not mapped");
          ASSERT_ERROR_MENTIONS("ptr");
          ASSERT_NULL(a);
        }
        ASSERT_EQ_SIZE(gw_registry_ranges(), before.ranges + 1);
        ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 1);
        ASSERT_OK(gw_unpin(ctx, m, pg()));
        ASSERT_NO_LEAK(before);
      }
      /* the mapped page alone: pinned, filled, every element */
      int64_t g = (int64_t)pg();
      gw_array *a = NULL;
      ASSERT_OK(gw_wrap(ctx, m, GW_UINT8, 1, &g, NULL, 0, &a));
      ASSERT_EQ_INT(gw_kind(a), GW_MEM_PINNED);
      memset(m, 0, pg());
      ASSERT_OK(gw_fill(a, &v));
      ASSERT_ALL_EQ(m, &v, pg(), 1);
      gw_release(a);
      for (int k = 0; k < 3; k++)
        if (k != s.hole) ASSERT_EQ_INT(munmap(p + (size_t)k * pg(), pg()), 0);
    }
    ASSERT_NO_LEAK(before);
  }
  /* the Python report: ctx.wrap(8, "u1", (1,)), an address below every mapping */
  int64_t one = 1;
  gw_array *a = NULL;
  ASSERT_STATUS(gw_wrap(ctx, (void *)8, GW_UINT8, 1, &one, NULL, 0, &a), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("not mapped");
  ASSERT_ERROR_MENTIONS("ptr");
  ASSERT_NULL(a);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* PROT_NONE pages (measured on the H200, driver 580.159.04): cudaHostRegister refuses them
 * with or without cudaHostRegisterReadOnly (invalid value); the model accepted the
 * read-only registration. Readable pages beside them still register read-only. */
TEST_IMPL(model_refuses_noaccess) {
  TEST_REQUIRE_CPU();
  tst_leaks before = tst_leak_snapshot();
  unsigned char *p = mmap(NULL, 2 * pg(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_TRUE(p != MAP_FAILED);
  ASSERT_EQ_INT(mprotect(p + pg(), pg(), PROT_NONE), 0);
  ASSERT_STATUS(gw_cpu_runtime_register_readonly(p, 2 * pg()), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("cannot read");
  ASSERT_STATUS(gw_cpu_runtime_register_readonly(p + pg(), 1), GW_EINVAL);
  ASSERT_STATUS(gw_cpu_runtime_register(p + pg(), pg()), GW_EINVAL);
  ASSERT_NO_LEAK(before);
  ASSERT_OK(gw_cpu_runtime_register_readonly(p, pg())); /* the readable page alone */
  ASSERT_OK(gw_cpu_runtime_unregister(p));
  /* A read-only wrap of the span: refused cleanly or host-only, never registered. */
  gw_context *ctx = tst_open(0);
  int64_t n = (int64_t)(2 * pg());
  gw_array *a = NULL;
  gw_status s = gw_wrap(ctx, p, GW_UINT8, 1, &n, NULL, GW_WRAP_READONLY, &a);
  if (s == GW_OK) {
    ASSERT_EQ_INT(gw_kind(a), GW_MEM_HOST);
    gw_release(a);
  }
  ASSERT_EQ_SIZE(gw_registry_ranges(), 0);
  gw_context_destroy(ctx);
  ASSERT_EQ_INT(munmap(p, 2 * pg()), 0);
  ASSERT_NO_LEAK(before);
  return 0;
}
