/* gw_pointer_query for every kind of memory, interior pointers, another device's memory,
 * memory registered by someone else, and bad arguments. */
#include "test.h"

static gw_ptrinfo query(gw_context *ctx, const void *p) {
  gw_ptrinfo info;
  memset(&info, 0x5a, sizeof info);
  gw_status s = gw_pointer_query(ctx, p, &info);
  if (s != GW_OK) TST_FAIL("gw_pointer_query(%p): %s: %s", p, gw_err_name(s), gw_last_error());
  return info;
}

TEST_IMPL(pageable) {
  gw_context *ctx = tst_open(0);
  char *p = malloc(1000);
  int on_stack = 0;
  gw_ptrinfo i = query(ctx, p + 10);
  ASSERT_EQ_INT(i.kind, GW_MEM_HOST);
  ASSERT_EQ_INT(i.device, -1);
  ASSERT_EQ_INT(i.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  i = query(ctx, &on_stack);
  ASSERT_EQ_INT(i.kind, GW_MEM_HOST);
  ASSERT_EQ_INT(i.device, -1);
  free(p);
  gw_context_destroy(ctx);
  return 0;
}

static void check_alloc_query(gw_context *ctx, gw_memkind kind) {
  int64_t shape[1] = {1024};
  gw_array *a = NULL;
  ASSERT_OK(gw_alloc(ctx, kind, GW_UINT8, 1, shape, &a));
  char *dev = gw_data(a);
  ASSERT_NOT_NULL(dev);
  gw_ptrinfo i = query(ctx, dev);
  ASSERT_EQ_INT(i.kind, kind);
  ASSERT_EQ_INT(i.device, gw_context_device(ctx));
  ASSERT_EQ_INT(i.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  ASSERT_NOT_NULL(i.device_ptr);
  if (i.base) {
    ASSERT_EQ_PTR(i.base, dev);
    ASSERT_TRUE(i.extent >= 1024);
  }
  if (kind == GW_MEM_DEVICE)
    ASSERT_NULL(i.host_ptr);
  else
    ASSERT_NOT_NULL(i.host_ptr);
  /* an interior pointer reports the containing allocation */
  gw_ptrinfo j = query(ctx, dev + 100);
  ASSERT_EQ_INT(j.kind, kind);
  ASSERT_EQ_PTR(j.base, i.base);
  ASSERT_EQ_SIZE(j.extent, i.extent);
  ASSERT_EQ_PTR(j.device_ptr, (char *)i.device_ptr + 100);
  if (kind != GW_MEM_DEVICE) ASSERT_EQ_PTR(j.host_ptr, (char *)i.host_ptr + 100);
  if (tst_is_cpu()) { /* the CPU model knows its allocations exactly */
    ASSERT_EQ_PTR(i.base, dev);
    ASSERT_EQ_SIZE(i.extent, 1024);
    ASSERT_EQ_INT(i.flags & GW_PTR_HOST_REGISTERED, 0);
  }
  gw_release(a);
}

TEST_IMPL(device_pinned_managed) {
  gw_context *ctx = tst_open(0);
  check_alloc_query(ctx, GW_MEM_DEVICE);
  check_alloc_query(ctx, GW_MEM_PINNED);
  check_alloc_query(ctx, GW_MEM_MANAGED);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(registered_by_someone_else) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t pg = tst_page();
  char *buf = tst_pages(4);
  ASSERT_OK(gw_cpu_runtime_register(buf + pg, 2 * pg));
  gw_ptrinfo i = query(ctx, buf + pg + 5);
  ASSERT_EQ_INT(i.kind, GW_MEM_PINNED);
  ASSERT_TRUE(i.flags & GW_PTR_HOST_REGISTERED);
  ASSERT_EQ_INT(i.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  ASSERT_EQ_PTR(i.base, buf + pg);
  ASSERT_EQ_SIZE(i.extent, 2 * pg);
  ASSERT_EQ_PTR(i.host_ptr, buf + pg + 5);
  ASSERT_NOT_NULL(i.device_ptr);
  i = query(ctx, buf + 3);
  ASSERT_EQ_INT(i.kind, GW_MEM_HOST);
  i = query(ctx, buf + 3 * pg);
  ASSERT_EQ_INT(i.kind, GW_MEM_HOST);
  ASSERT_OK(gw_cpu_runtime_unregister(buf + pg));
  i = query(ctx, buf + pg + 5);
  ASSERT_EQ_INT(i.kind, GW_MEM_HOST);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(other_device_2dev) {
  gw_context *c0 = tst_open(0);
  gw_context *c1 = tst_open(1);
  int64_t shape[1] = {256};
  gw_array *a = NULL;
  ASSERT_OK(gw_alloc(c1, GW_MEM_DEVICE, GW_UINT8, 1, shape, &a));
  /* asked through device 0's context, device 1's memory says device 1 */
  gw_ptrinfo i = query(c0, (char *)gw_data(a) + 7);
  ASSERT_EQ_INT(i.kind, GW_MEM_DEVICE);
  ASSERT_EQ_INT(i.device, 1);
  ASSERT_EQ_PTR(i.base, gw_data(a));
  gw_release(a);
  gw_context_destroy(c1);
  gw_context_destroy(c0);
  return 0;
}

TEST_IMPL(query_invalid) {
  gw_context *ctx = tst_open(0);
  gw_ptrinfo i;
  int x = 0;
  ASSERT_STATUS(gw_pointer_query(NULL, &x, &i), GW_EINVAL);
  ASSERT_STATUS(gw_pointer_query(ctx, &x, NULL), GW_EINVAL);
  /* NULL is a pointer like any other: not memory of any kind */
  i = query(ctx, NULL);
  ASSERT_TRUE(i.kind == GW_MEM_HOST || i.kind == GW_MEM_UNKNOWN);
  ASSERT_EQ_INT(i.device, -1);
  gw_context_destroy(ctx);
  return 0;
}
