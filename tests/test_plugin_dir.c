/* GPUWRAP_PLUGIN_DIR that names no directory: the GPU backends are unavailable with that
 * reason (GW_ENODEV, the variable, its value and why), never a silent fall back to the
 * plugins of the other places (src/core/plugin.c). The plugins are looked for once per
 * process, so each case is a process of its own. */
#include "test.h"

static void check_refused(const char *value, const char *why) {
  const gw_backend gpus[] = {GW_BACKEND_CUDA, GW_BACKEND_HIP};
  for (size_t i = 0; i < 2; i++) {
    gw_context *ctx = NULL;
    ASSERT_STATUS(gw_context_create(gpus[i], 0, &ctx), GW_ENODEV);
    ASSERT_NULL(ctx);
    char want[256];
    snprintf(want, sizeof want, "GPUWRAP_PLUGIN_DIR='%s': %s", value, why);
    ASSERT_ERROR_MENTIONS(want);
    int n = -1;
    ASSERT_STATUS(gw_backend_device_count(gpus[i], &n), GW_ENODEV);
    ASSERT_ERROR_MENTIONS(want);
  }
  /* the CPU backend does not look for plugins */
  gw_context *ctx = NULL;
  ASSERT_OK(gw_context_create(GW_BACKEND_CPU, 0, &ctx));
  gw_context_destroy(ctx);
}

TEST_IMPL(missing) {
  check_refused("/nonexistent/gpuwrap-plugins", "No such file or directory");
  return 0;
}

TEST_IMPL(not_a_directory) {
  check_refused("/dev/null", "Not a directory");
  return 0;
}
