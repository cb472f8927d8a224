/* A tiny test harness for the GPU backend tests: typed asserts that print both values,
 * one test per process (the test name is argv[1]), exit 77 = skipped. */
#ifndef GW_TESTS_GPU_GWT_H
#define GW_TESTS_GPU_GWT_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GWT_SKIP 77

static int gwt_failures;

#define GWT_FAIL_(fmt, ...)                                                                \
  do {                                                                                     \
    fprintf(stderr, "%s:%d: " fmt "\n", __FILE__, __LINE__, __VA_ARGS__);                  \
    gwt_failures++;                                                                        \
  } while (0)

#define EXPECT_EQ_INT(a, b)                                                                \
  do {                                                                                     \
    long long a_ = (long long)(a), b_ = (long long)(b);                                    \
    if (a_ != b_)                                                                          \
      GWT_FAIL_("EXPECT_EQ_INT(%s, %s): %lld != %lld", #a, #b, a_, b_);                    \
  } while (0)
#define EXPECT_EQ_PTR(a, b)                                                                \
  do {                                                                                     \
    const void *a_ = (const void *)(a), *b_ = (const void *)(b);                           \
    if (a_ != b_)                                                                          \
      GWT_FAIL_("EXPECT_EQ_PTR(%s, %s): %p != %p", #a, #b, a_, b_);                        \
  } while (0)
#define EXPECT_TRUE(c)                                                                     \
  do {                                                                                     \
    if (!(c))                                                                              \
      GWT_FAIL_("EXPECT_TRUE(%s) failed", #c);                                             \
  } while (0)
/* The ASSERT_ forms end the test at the first failure. */
#define ASSERT_EQ_INT(a, b)                                                                \
  do {                                                                                     \
    int f_ = gwt_failures;                                                                 \
    EXPECT_EQ_INT(a, b);                                                                   \
    if (gwt_failures != f_)                                                                \
      return 1;                                                                            \
  } while (0)
#define ASSERT_TRUE(c)                                                                     \
  do {                                                                                     \
    int f_ = gwt_failures;                                                                 \
    EXPECT_TRUE(c);                                                                        \
    if (gwt_failures != f_)                                                                \
      return 1;                                                                            \
  } while (0)

typedef struct {
  const char *name;
  int (*fn)(void); /* 0 ok, 1 failed, GWT_SKIP skipped */
} gwt_case;

/* Run the test named argv[1], or all of them in this process with no argument (handy by
 * hand; CTest runs one per process). */
static int gwt_main(int argc, char **argv, const gwt_case *cases, size_t n) {
  int rc = 0, ran = 0;
  for (size_t i = 0; i < n; i++) {
    if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
      continue;
    ran++;
    gwt_failures = 0;
    int r = cases[i].fn();
    if (r == 0 && gwt_failures)
      r = 1;
    fprintf(stderr, "%-28s %s\n", cases[i].name, r == 0 ? "ok" : r == GWT_SKIP ? "SKIPPED" : "FAILED");
    if (argc > 1)
      return r;
    if (r == 1)
      rc = 1;
  }
  if (!ran) {
    fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "(any)");
    return 2;
  }
  return rc;
}

#endif /* GW_TESTS_GPU_GWT_H */
