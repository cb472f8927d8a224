/* Contexts: creation on the backend under test, bad arguments, AUTO selection, several
 * (modelled) devices, a context kept alive by its arrays. */
#include "test.h"

TEST_IMPL(create_destroy) {
  gw_context *ctx = tst_open(0);
  ASSERT_EQ_INT(gw_context_backend(ctx), tst_backend());
  ASSERT_EQ_INT(gw_context_device(ctx), 0);
  ASSERT_OK(gw_synchronize(ctx));
  gw_context_destroy(ctx);
  gw_context_destroy(NULL);
  return 0;
}

TEST_IMPL(create_invalid) {
  gw_context *ctx = (gw_context *)(uintptr_t)0x1234;
  int n = tst_device_count();
  ASSERT_STATUS(gw_context_create(tst_backend(), 0, NULL), GW_EINVAL);
  ASSERT_STATUS(gw_context_create((gw_backend)99, 0, &ctx), GW_EINVAL);
  ASSERT_EQ_PTR(ctx, (gw_context *)(uintptr_t)0x1234);
  ASSERT_STATUS(gw_context_create(tst_backend(), -1, &ctx), GW_EINVAL);
  ASSERT_EQ_PTR(ctx, (gw_context *)(uintptr_t)0x1234);
  ASSERT_STATUS(gw_context_create(tst_backend(), n, &ctx), GW_ENODEV);
  ASSERT_EQ_PTR(ctx, (gw_context *)(uintptr_t)0x1234);
  ASSERT_STATUS(gw_context_create(tst_backend(), 1 << 20, &ctx), GW_ENODEV);
  ASSERT_EQ_PTR(ctx, (gw_context *)(uintptr_t)0x1234);
  ASSERT_STATUS(gw_synchronize(NULL), GW_EINVAL);
  int cnt = -5;
  ASSERT_OK(gw_backend_device_count(GW_BACKEND_CPU, &cnt));
  ASSERT_TRUE(cnt >= 1);
  return 0;
}

TEST_IMPL(auto_env_cpu) {
  /* GPUWRAP_BACKEND=cpu overrides AUTO */
  gw_context *ctx = NULL;
  ASSERT_OK(gw_context_create(GW_BACKEND_AUTO, 0, &ctx));
  ASSERT_EQ_INT(gw_context_backend(ctx), GW_BACKEND_CPU);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(devices_2dev) {
  int n = tst_device_count();
  if (n < 2) TEST_SKIP("needs 2 devices");
  for (int d = 0; d < 2; d++) {
    gw_context *ctx = tst_open(d);
    ASSERT_EQ_INT(gw_context_device(ctx), d);
    gw_array *a = NULL;
    int64_t shape[1] = {16};
    ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, shape, &a));
    ASSERT_EQ_INT(gw_device(a), d);
    gw_release(a);
    gw_context_destroy(ctx);
  }
  if (tst_is_cpu()) ASSERT_EQ_INT(n, 2);
  return 0;
}

TEST_IMPL(context_kept_alive_by_array) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[2] = {3, 5};
  gw_array *d = NULL;
  int32_t in[15], out[15];
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 2, shape, &d));
  ASSERT_EQ_PTR(gw_array_context(d), ctx);
  gw_context_destroy(ctx); /* the array keeps it */
  tst_random_fill(in, sizeof in);
  tst_write(d, in);
  tst_read(d, out);
  ASSERT_ELEMS_EQ(out, in, 15, 4);
  ASSERT_OK(gw_synchronize(gw_array_context(d)));
  gw_release(d);
  ASSERT_NO_LEAK(before);
  return 0;
}
