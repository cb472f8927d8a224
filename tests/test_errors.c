/* Status names and texts, dtype sizes and names, kind and backend names, and that
 * gw_last_error() is per thread. */
#include "test.h"

#include <pthread.h>

static const struct {
  gw_status s;
  const char *name;
} statuses[] = {
    {GW_OK, "GW_OK"},
    {GW_EINVAL, "GW_EINVAL"},
    {GW_ENOMEM, "GW_ENOMEM"},
    {GW_ENODEV, "GW_ENODEV"},
    {GW_ENOTSUP, "GW_ENOTSUP"},
    {GW_ERANGE, "GW_ERANGE"},
    {GW_EDEVICE, "GW_EDEVICE"},
    {GW_EOWNED, "GW_EOWNED"},
    {GW_EREADONLY, "GW_EREADONLY"},
    {GW_EBACKEND, "GW_EBACKEND"},
    {GW_EALREADY, "GW_EALREADY"},
    {GW_ENOTREG, "GW_ENOTREG"},
    {GW_EBUSY, "GW_EBUSY"},
};
#define NSTATUS (sizeof statuses / sizeof statuses[0])

TEST_IMPL(err_names) {
  ASSERT_EQ_INT(GW_OK, 0);
  for (size_t i = 0; i < NSTATUS; i++) {
    const char *n = gw_err_name(statuses[i].s);
    const char *t = gw_strerror(statuses[i].s);
    ASSERT_NOT_NULL(n);
    ASSERT_NOT_NULL(t);
    if (strcmp(n, statuses[i].name) != 0)
      TST_FAIL("gw_err_name(%d) = \"%s\", want \"%s\"", (int)statuses[i].s, n, statuses[i].name);
    ASSERT_TRUE(strlen(t) > 0);
    if (statuses[i].s != GW_OK) ASSERT_TRUE(statuses[i].s < 0);
    /* texts are distinct */
    for (size_t j = 0; j < i; j++) ASSERT_TRUE(strcmp(t, gw_strerror(statuses[j].s)) != 0);
  }
  return 0;
}

TEST_IMPL(err_unknown) {
  int unknown[] = {-42, 1, 7, -13, -1000, 1000000, -2147483647 - 1, 2147483647};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    gw_status s = (gw_status)unknown[i];
    const char *n = gw_err_name(s), *t = gw_strerror(s);
    ASSERT_NOT_NULL(n);
    ASSERT_NOT_NULL(t);
    ASSERT_STR_CONTAINS(n, "GW_UNKNOWN");
    ASSERT_TRUE(strlen(t) > 0);
    for (size_t j = 0; j < NSTATUS; j++) ASSERT_TRUE(strcmp(t, gw_strerror(statuses[j].s)) != 0);
  }
  return 0;
}

TEST_IMPL(strerror_unknown_has_value) {
  /* gpuwrap.h: 'Human text for any value, unknown ones included ("unknown gpuwrap status -42")' */
  ASSERT_STR_CONTAINS(gw_strerror((gw_status)-42), "-42");
  ASSERT_STR_CONTAINS(gw_strerror((gw_status)-43), "-43");
  return 0;
}

TEST_IMPL(dtype_sizes) {
  static const size_t want[GW_DTYPE_COUNT] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};
  for (int i = 0; i < GW_DTYPE_COUNT; i++) {
    ASSERT_EQ_INT(tst_all_dtypes[i], i);
    ASSERT_EQ_SIZE(gw_dtype_size(tst_all_dtypes[i]), want[i]);
    ASSERT_NOT_NULL(gw_dtype_name(tst_all_dtypes[i]));
    ASSERT_TRUE(strcmp(gw_dtype_name(tst_all_dtypes[i]), "invalid") != 0);
  }
  ASSERT_EQ_SIZE(gw_dtype_size((gw_dtype)GW_DTYPE_COUNT), 0);
  ASSERT_EQ_SIZE(gw_dtype_size((gw_dtype)-1), 0);
  ASSERT_EQ_SIZE(gw_dtype_size((gw_dtype)1000), 0);
  ASSERT_STR_CONTAINS(gw_dtype_name(GW_FLOAT32), "float32");
  ASSERT_STR_CONTAINS(gw_dtype_name(GW_COMPLEX128), "complex128");
  ASSERT_STR_CONTAINS(gw_dtype_name((gw_dtype)99), "invalid");
  ASSERT_STR_CONTAINS(gw_dtype_name((gw_dtype)-1), "invalid");
  return 0;
}

TEST_IMPL(kind_backend_names) {
  ASSERT_STR_CONTAINS(gw_memkind_name(GW_MEM_HOST), "host");
  ASSERT_STR_CONTAINS(gw_memkind_name(GW_MEM_PINNED), "pinned");
  ASSERT_STR_CONTAINS(gw_memkind_name(GW_MEM_DEVICE), "device");
  ASSERT_STR_CONTAINS(gw_memkind_name(GW_MEM_MANAGED), "managed");
  ASSERT_STR_CONTAINS(gw_memkind_name(GW_MEM_UNKNOWN), "unknown");
  ASSERT_NOT_NULL(gw_memkind_name((gw_memkind)77));
  ASSERT_STR_CONTAINS(gw_backend_name(GW_BACKEND_CPU), "cpu");
  ASSERT_STR_CONTAINS(gw_backend_name(GW_BACKEND_CUDA), "cuda");
  ASSERT_STR_CONTAINS(gw_backend_name(GW_BACKEND_HIP), "hip");
  ASSERT_STR_CONTAINS(gw_backend_name(GW_BACKEND_AUTO), "auto");
  ASSERT_NOT_NULL(gw_backend_name((gw_backend)77));
  for (int op = 0; op < GW_CPU_OP_COUNT; op++) ASSERT_NOT_NULL(gw_cpu_op_name((gw_cpu_op)op));
  ASSERT_STR_CONTAINS(gw_cpu_op_name(GW_CPU_OP_REGISTER), "register");
  ASSERT_STR_CONTAINS(gw_cpu_op_name(GW_CPU_OP_STREAM_SYNCHRONIZE), "stream_synchronize");
  return 0;
}

static void *other_thread(void *arg) {
  const char **msg = (const char **)arg;
  /* a fresh thread has no failure yet */
  *msg = strdup(gw_last_error());
  return NULL;
}

TEST_IMPL(last_error_per_thread) {
  gw_array *a = NULL;
  int64_t shape[1] = {4};
  const char *other = NULL;
  pthread_t t;
  ASSERT_STATUS(gw_wrap(NULL, NULL, GW_FLOAT32, 1, shape, NULL, 0, &a), GW_EINVAL);
  ASSERT_NULL(a);
  char mine[512];
  snprintf(mine, sizeof mine, "%s", gw_last_error());
  ASSERT_TRUE(strlen(mine) > 0);
  ASSERT_EQ_INT(pthread_create(&t, NULL, other_thread, &other), 0);
  ASSERT_EQ_INT(pthread_join(t, NULL), 0);
  ASSERT_NOT_NULL(other);
  ASSERT_EQ_SIZE(strlen(other), 0);
  free((void *)other);
  ASSERT_STR_CONTAINS(gw_last_error(), mine);
  return 0;
}
