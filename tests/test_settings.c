/* The settings table: every row's default parses as its type, every bad value is refused
 * with a message naming the variable, and a bad value reaches the call that reads it as
 * GW_EINVAL instead of being ignored. */
#include "test.h"

#include "../src/core/settings.h"

#include <stdlib.h>

/* Row of the table named `name`; fails the test if absent. */
static gw_setting_info row(const char *name) {
  gw_setting_info s;
  for (int i = 0; i < gw_setting_count(); i++) {
    ASSERT_OK(gw_setting_describe(i, &s));
    if (strcmp(s.name, name) == 0) return s;
  }
  TST_FAIL("no setting %s in the table", name);
  return s;
}

TEST_IMPL(table_rows) {
  int n = gw_setting_count();
  ASSERT_TRUE(n >= 10);
  gw_setting_info s;
  ASSERT_STATUS(gw_setting_describe(-1, &s), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("i: -1");
  ASSERT_STATUS(gw_setting_describe(n, &s), GW_EINVAL);
  ASSERT_STATUS(gw_setting_describe(0, NULL), GW_EINVAL);
  for (int i = 0; i < n; i++) {
    ASSERT_OK(gw_setting_describe(i, &s));
    ASSERT_TRUE(strncmp(s.name, "GPUWRAP_", 8) == 0);
    ASSERT_TRUE(strlen(s.doc) > 10);
    ASSERT_TRUE(*s.component);
    for (int j = 0; j < i; j++) {
      gw_setting_info t;
      ASSERT_OK(gw_setting_describe(j, &t));
      if (strcmp(s.name, t.name) == 0) TST_FAIL("%s is in the table twice", s.name);
    }
    /* The default, written as a value, must be valid: the table cannot contradict itself. */
    if (*s.default_value) {
      ASSERT_EQ_INT(setenv(s.name, s.default_value, 1), 0);
      gw_setting_info again;
      ASSERT_OK(gw_setting_describe(i, &again));
      if (!again.valid)
        TST_FAIL("%s: its default '%s' is not valid: %s", s.name, s.default_value, again.problem);
      ASSERT_OK(gw_settings_check());
      unsetenv(s.name);
    }
  }
  return 0;
}

/* One value of one setting: valid or not, and the message when not. */
static void check_value(const char *name, const char *value, int valid) {
  ASSERT_EQ_INT(setenv(name, value, 1), 0);
  gw_setting_info s = row(name);
  if (s.valid != valid)
    TST_FAIL("%s=%s: valid %d, want %d (%s)", name, value, s.valid, valid, s.problem);
  if (valid) {
    ASSERT_OK(gw_settings_check());
  } else {
    ASSERT_STATUS(gw_settings_check(), GW_EINVAL);
    ASSERT_ERROR_MENTIONS(name);
    ASSERT_ERROR_MENTIONS(value);
    ASSERT_ERROR_MENTIONS("expected");
  }
  unsetenv(name);
}

TEST_IMPL(parse_policy) {
  /* bool */
  const char *on[] = {"1", "yes", "ON", "true", "0", "no", "off", "False"};
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) check_value("GPUWRAP_HALO_SHM", on[i], 1);
  check_value("GPUWRAP_HALO_SHM", "2", 0);
  check_value("GPUWRAP_HALO_SHM", "maybe", 0);
  /* int with a range */
  check_value("GPUWRAP_CPU_DEVICES", "64", 1);
  check_value("GPUWRAP_CPU_DEVICES", "0", 0);
  check_value("GPUWRAP_CPU_DEVICES", "65", 0);
  check_value("GPUWRAP_CPU_DEVICES", "3x", 0);
  check_value("GPUWRAP_CPU_DEVICES", " 3", 0);
  check_value("GPUWRAP_CPU_DEVICES", "99999999999999999999999", 0);
  /* bytes with suffixes */
  check_value("GPUWRAP_HALO_CHUNK", "0", 1);
  check_value("GPUWRAP_HALO_CHUNK", "4096", 1);
  check_value("GPUWRAP_HALO_CHUNK", "64k", 1);
  check_value("GPUWRAP_HALO_CHUNK", "2M", 1);
  check_value("GPUWRAP_HALO_CHUNK", "1g", 1);
  check_value("GPUWRAP_HALO_CHUNK", "1t", 0);
  check_value("GPUWRAP_HALO_CHUNK", "2kk", 0);
  check_value("GPUWRAP_HALO_CHUNK", "-1", 0);
  check_value("GPUWRAP_HALO_CHUNK", "9999999999g", 0);
  /* choice */
  check_value("GPUWRAP_BACKEND", "CPU", 1);
  check_value("GPUWRAP_BACKEND", "opencl", 0);
  /* text takes anything */
  check_value("GPUWRAP_NCCL_LIB", "/opt/nccl/lib/libnccl.so.2", 1);
  /* empty is unset */
  ASSERT_EQ_INT(setenv("GPUWRAP_CPU_DEVICES", "", 1), 0);
  gw_setting_info s = row("GPUWRAP_CPU_DEVICES");
  ASSERT_NULL(s.value);
  ASSERT_TRUE(s.valid);
  unsetenv("GPUWRAP_CPU_DEVICES");
  return 0;
}

/* Numbers are decimal in every numeric kind: a leading 0 is not octal (010 is ten, 08 and
 * 09 are eight and nine) and 0x is not hexadecimal. The value read, not only "valid". */
static long long read_as(gw__setting_id id, const char *name, const char *value) {
  ASSERT_EQ_INT(setenv(name, value, 1), 0);
  long long v = -1;
  gw_status st = gw__setting_int(id, &v);
  if (st != GW_OK) TST_FAIL("%s=%s: %s", name, value, gw_last_error());
  unsetenv(name);
  return v;
}

TEST_IMPL(decimal_everywhere) {
  /* INT */
  ASSERT_EQ_INT(read_as(GW__SET_CPU_DEVICES, "GPUWRAP_CPU_DEVICES", "010"), 10);
  ASSERT_EQ_INT(read_as(GW__SET_CPU_DEVICES, "GPUWRAP_CPU_DEVICES", "08"), 8);
  ASSERT_EQ_INT(read_as(GW__SET_CPU_DEVICES, "GPUWRAP_CPU_DEVICES", "09"), 9);
  ASSERT_EQ_INT(read_as(GW__SET_CPU_DEVICES, "GPUWRAP_CPU_DEVICES", "+012"), 12);
  check_value("GPUWRAP_CPU_DEVICES", "08", 1);
  check_value("GPUWRAP_CPU_DEVICES", "0x10", 0);
  /* BYTES, bare and with a suffix */
  ASSERT_EQ_INT(read_as(GW__SET_HALO_CHUNK, "GPUWRAP_HALO_CHUNK", "010"), 10);
  ASSERT_EQ_INT(read_as(GW__SET_HALO_CHUNK, "GPUWRAP_HALO_CHUNK", "08"), 8);
  ASSERT_EQ_INT(read_as(GW__SET_HALO_CHUNK, "GPUWRAP_HALO_CHUNK", "010k"), 10 << 10);
  ASSERT_EQ_INT(read_as(GW__SET_HALO_CHUNK, "GPUWRAP_HALO_CHUNK", "08M"), 8 << 20);
  check_value("GPUWRAP_HALO_CHUNK", "0x10", 0);
  /* BOOL: 0 and 1 only, not a number with leading zeros */
  ASSERT_EQ_INT(read_as(GW__SET_HALO_SHM, "GPUWRAP_HALO_SHM", "1"), 1);
  check_value("GPUWRAP_HALO_SHM", "01", 0);
  check_value("GPUWRAP_HALO_SHM", "010", 0);
  /* CHOICE: a word of the list, compared as text ("01" is not "1") */
  ASSERT_EQ_INT(read_as(GW__SET_HALO_GPU_AWARE, "GPUWRAP_HALO_GPU_AWARE", "1"), 2);
  check_value("GPUWRAP_HALO_GPU_AWARE", "01", 0);
  /* TEXT: kept as written */
  ASSERT_EQ_INT(setenv("GPUWRAP_NCCL_LIB", "010", 1), 0);
  ASSERT_TRUE(strcmp(gw__setting_text(GW__SET_NCCL_LIB), "010") == 0);
  unsetenv("GPUWRAP_NCCL_LIB");
  return 0;
}

/* Where it takes effect: the CPU model reads its device count once per process. */
static int cpu_devices(void) {
  int n = 0;
  ASSERT_OK(gw_backend_device_count(GW_BACKEND_CPU, &n));
  return n;
}
TEST_IMPL(cpu_devices_010) {
  ASSERT_EQ_INT(cpu_devices(), 10);
  return 0;
}
TEST_IMPL(cpu_devices_08) {
  ASSERT_EQ_INT(cpu_devices(), 8);
  return 0;
}

/* A bad value reaches the call that reads it. */
TEST_IMPL(bad_backend_refused) {
  ASSERT_EQ_INT(setenv("GPUWRAP_BACKEND", "opencl", 1), 0);
  gw_context *ctx = (gw_context *)0x1;
  ASSERT_STATUS(gw_context_create(GW_BACKEND_AUTO, 0, &ctx), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("GPUWRAP_BACKEND='opencl'");
  ASSERT_ERROR_MENTIONS("auto|cpu|cuda|hip");
  unsetenv("GPUWRAP_BACKEND");
  return 0;
}

TEST_IMPL(bad_cpu_devices) {
  if (strcmp(getenv("GPUWRAP_TEST_BACKEND") ? getenv("GPUWRAP_TEST_BACKEND") : "cpu", "cpu") != 0)
    TEST_SKIP("reads the CPU model's setting");
  gw_context *ctx = NULL;
  ASSERT_STATUS(gw_context_create(GW_BACKEND_CPU, 0, &ctx), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("GPUWRAP_CPU_DEVICES='two'");
  return 0;
}
