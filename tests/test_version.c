/* The version has one source, CMake's project(VERSION): the generated gpuwrap/version.h
 * (GW_VERSION_*) and the library's gw_version_string() must both say it. The build passes
 * project(VERSION) itself as GW_TEST_PROJECT_VERSION (tests/CMakeLists.txt). */
#include "test.h"

#include <stdio.h>

#define ASSERT_STR_EQ(got, want)                                                                   \
  do {                                                                                             \
    const char *tst_g_ = (got), *tst_w_ = (want);                                                  \
    if (tst_g_ == NULL || strcmp(tst_g_, tst_w_) != 0)                                             \
      TST_FAIL("ASSERT_STR_EQ(%s, %s): \"%s\" != \"%s\"", #got, #want, tst_g_ ? tst_g_ : "(null)", \
               tst_w_);                                                                            \
  } while (0)

TEST_IMPL(macros_match_project) {
  char parts[64];
  snprintf(parts, sizeof parts, "%d.%d.%d", GW_VERSION_MAJOR, GW_VERSION_MINOR, GW_VERSION_PATCH);
  ASSERT_STR_EQ(parts, GW_TEST_PROJECT_VERSION);
  ASSERT_STR_EQ(GW_VERSION_STRING, GW_TEST_PROJECT_VERSION);
  return 0;
}

TEST_IMPL(library_string) {
  const char *v = gw_version_string();
  ASSERT_NOT_NULL(v);
  ASSERT_STR_EQ(v, GW_TEST_PROJECT_VERSION);
  /* static storage: the same text on every call, from any point in the program */
  ASSERT_EQ_PTR(gw_version_string(), v);
  return 0;
}
