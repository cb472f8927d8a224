/* API consistency (issue 13, items 13 and 14): one rule and one status per kind of bad
 * argument, whichever call it reaches.
 *   - DLPack device ids: kDLCPU, kDLCUDAHost, kDLROCMHost and kDLCUDAManaged have device_id
 *     0 (DLPack: "for vanilla CPU memory, pinned memory, or managed memory, this is set to
 *     0"); gw_to_dlpack_as refuses another id as an invalid argument instead of exporting
 *     with 0 behind the caller's back.
 *   - Backends: a value outside gw_backend is GW_EINVAL naming the argument in
 *     gw_backend_device_count and gw_context_create alike; GW_ENODEV is for a real backend
 *     that is not built in or cannot load. */
#include "gpuwrap/dlpack.h"
#include "test.h"

/* Leave a different message behind first, so a test never passes on a stale detail
 * (gw_last_error() is not cleared by successful calls). */
static void stale_error(void) {
  gw_context *ctx = NULL;
  (void)gw_context_create(GW_BACKEND_CPU, -7, &ctx);
  ASSERT_STR_CONTAINS(gw_last_error(), "-7");
}

/* The device types whose device_id DLPack fixes at 0. */
static const DLDeviceType zero_id_types[] = {kDLCPU, kDLCUDAHost, kDLROCMHost, kDLCUDAManaged};
static const int32_t nonzero_ids[] = {1, 3, INT32_MAX};

/* One array: every zero-id type with a non-zero id is GW_EINVAL naming want.device_id, in
 * the versioned and the legacy export, and hands nothing out. */
static void check_refused(gw_array *a) {
  for (size_t i = 0; i < sizeof zero_id_types / sizeof zero_id_types[0]; i++) {
    for (size_t k = 0; k < sizeof nonzero_ids / sizeof nonzero_ids[0]; k++) {
      DLDevice want = {zero_id_types[i], nonzero_ids[k]};
      DLManagedTensorVersioned *t = NULL;
      DLManagedTensor *l = NULL;
      stale_error();
      ASSERT_STATUS(gw_to_dlpack_as(a, want, &t), GW_EINVAL);
      ASSERT_ERROR_MENTIONS("want.device_id");
      ASSERT_NULL(t);
      stale_error();
      ASSERT_STATUS(gw_to_dlpack_legacy_as(a, want, &l), GW_EINVAL);
      ASSERT_ERROR_MENTIONS("want.device_id");
      ASSERT_NULL(l);
    }
  }
}

/* kDLCPU with id 0 where the host can address the memory: exported, with device_id 0. */
static void check_cpu_zero(gw_array *a) {
  DLManagedTensorVersioned *t = NULL;
  gw_status s = gw_to_dlpack_as(a, (DLDevice){kDLCPU, 0}, &t);
  if (gw_kind(a) == GW_MEM_DEVICE && gw_numel(a) > 0) {
    /* not host-accessible: no copy is ever made (the CPU model's device memory too) */
    ASSERT_EQ_INT(s, GW_ENOTSUP);
    ASSERT_NULL(t);
    return;
  }
  ASSERT_OK(s);
  ASSERT_EQ_INT(t->dl_tensor.device.device_type, kDLCPU);
  ASSERT_EQ_INT(t->dl_tensor.device.device_id, 0);
  t->deleter(t);
  DLManagedTensor *l = NULL;
  ASSERT_OK(gw_to_dlpack_legacy_as(a, (DLDevice){kDLCPU, 0}, &l));
  ASSERT_EQ_INT(l->dl_tensor.device.device_type, kDLCPU);
  ASSERT_EQ_INT(l->dl_tensor.device.device_id, 0);
  l->deleter(l);
}

/* Every memory kind the backend has, and an empty wrap (never classified). */
TEST_IMPL(dlpack_zero_id_types) {
  gw_context *ctx = tst_open(0);
  static const gw_memkind kinds[] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_MANAGED, GW_MEM_DEVICE};
  int tried = 0;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    int64_t shape[1] = {32};
    gw_array *a = NULL;
    gw_status s = gw_alloc(ctx, kinds[i], GW_FLOAT32, 1, shape, &a);
    if (s == GW_ENOTSUP) continue;
    ASSERT_OK(s);
    tried++;
    check_refused(a);
    check_cpu_zero(a);
    /* the natural device (what gw_dlpack_device says) is still accepted as it is */
    DLDevice d;
    ASSERT_OK(gw_dlpack_device(a, &d));
    DLManagedTensorVersioned *t = NULL;
    ASSERT_OK(gw_to_dlpack_as(a, d, &t));
    ASSERT_EQ_INT(t->dl_tensor.device.device_type, d.device_type);
    ASSERT_EQ_INT(t->dl_tensor.device.device_id, d.device_id);
    t->deleter(t);
    gw_release(a);
  }
  ASSERT_TRUE(tried >= 2);
  int64_t none[1] = {0};
  gw_array *e = NULL;
  ASSERT_OK(gw_wrap(ctx, NULL, GW_FLOAT64, 1, none, NULL, 0, &e));
  check_refused(e);
  check_cpu_zero(e);
  gw_release(e);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- backends --------------------------------------------------------------------------- */

static const int bad_backends[] = {99, -1, GW_BACKEND_HIP + 1};

/* Values outside gw_backend are GW_EINVAL in both calls; the valid backends keep their
 * meaning: CPU is always there; CUDA/HIP are GW_OK or, when not built in or not loadable,
 * GW_ENODEV (GW_EBACKEND from a broken runtime) with the reason, never GW_EINVAL. */
TEST_IMPL(backend_out_of_range_einval) {
  for (size_t i = 0; i < sizeof bad_backends / sizeof bad_backends[0]; i++) {
    gw_backend b = (gw_backend)bad_backends[i];
    char want[64];
    snprintf(want, sizeof want, "%d is not a gw_backend", bad_backends[i]);

    int count = 12345;
    stale_error();
    ASSERT_STATUS(gw_backend_device_count(b, &count), GW_EINVAL);
    ASSERT_ERROR_MENTIONS("b: ");
    ASSERT_ERROR_MENTIONS(want);
    ASSERT_EQ_INT(count, 0);

    gw_context *ctx = (gw_context *)&count; /* out-parameters are untouched on failure */
    stale_error();
    ASSERT_STATUS(gw_context_create(b, 0, &ctx), GW_EINVAL);
    ASSERT_ERROR_MENTIONS("backend: ");
    ASSERT_ERROR_MENTIONS(want);
    ASSERT_EQ_PTR(ctx, (gw_context *)&count);

    const char *name = gw_backend_name(b);
    ASSERT_NOT_NULL(name);
    ASSERT_STR_CONTAINS(name, "invalid");
  }
  int count = 0;
  ASSERT_OK(gw_backend_device_count(GW_BACKEND_CPU, &count));
  ASSERT_TRUE(count >= 1);
  static const gw_backend gpus[] = {GW_BACKEND_CUDA, GW_BACKEND_HIP};
  for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
    count = 12345;
    stale_error();
    gw_status s = gw_backend_device_count(gpus[i], &count);
    if (s == GW_OK) continue;
    ASSERT_TRUE(s == GW_ENODEV || s == GW_EBACKEND);
    ASSERT_ERROR_MENTIONS(gw_backend_name(gpus[i]));
    ASSERT_EQ_INT(count, 0);
  }
  return 0;
}

/* AUTO is a gw_backend but names no backend until gw_context_create resolves it: asking
 * for its device count is an invalid argument too, not "no such backend". */
TEST_IMPL(backend_auto_device_count_einval) {
  int count = 12345;
  stale_error();
  ASSERT_STATUS(gw_backend_device_count(GW_BACKEND_AUTO, &count), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("b: ");
  ASSERT_ERROR_MENTIONS("GW_BACKEND_AUTO");
  ASSERT_EQ_INT(count, 0);
  ASSERT_STR_CONTAINS(gw_backend_name(GW_BACKEND_AUTO), "auto");
  return 0;
}
