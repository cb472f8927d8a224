/* gw_pointer_query for every kind of memory, interior pointers, another device's memory,
 * memory registered by someone else, and bad arguments. */
#include "test.h"

#include "../src/core/out_struct.h"

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

/* struct_size (gpuwrap.h, Conventions): a caller that names this layout, one that sets 0
 * and one that never set it (garbage) all get the same fields and exactly sizeof bytes
 * written: the guard bytes after the struct stay poisoned. On every kind of pointer (the
 * pinned path writes after the backend). */
TEST_IMPL(struct_size_guard) {
  gw_context *ctx = tst_open(0);
  int64_t shape[1] = {256};
  gw_array *dev = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT8, 1, shape, &dev));
  char *host = malloc(4096);
  ASSERT_NOT_NULL(host);
  gw_array *wrapped = NULL;
  ASSERT_OK(gw_wrap(ctx, host, GW_UINT8, 1, shape, NULL, 0, &wrapped));
  const void *ptrs[] = {gw_data(dev), host + 10, &shape};
  const size_t asked[] = {sizeof(gw_ptrinfo), 0, (size_t)0x5a5a5a5a5a5a5a5aull, 1,
                          sizeof(gw_ptrinfo) + 8};
  for (size_t p = 0; p < sizeof ptrs / sizeof ptrs[0]; p++) {
    gw_ptrinfo want = {.struct_size = sizeof want};
    ASSERT_OK(gw_pointer_query(ctx, ptrs[p], &want));
    ASSERT_EQ_SIZE(want.struct_size, sizeof want);
    for (size_t a = 0; a < sizeof asked / sizeof asked[0]; a++) {
      union {
        gw_ptrinfo info;
        unsigned char b[sizeof(gw_ptrinfo) + 64];
      } u;
      memset(&u, TST_POISON, sizeof u);
      u.info.struct_size = asked[a];
      ASSERT_OK(gw_pointer_query(ctx, ptrs[p], &u.info));
      ASSERT_EQ_SIZE(u.info.struct_size, sizeof(gw_ptrinfo));
      ASSERT_EQ_INT(u.info.kind, want.kind);
      ASSERT_EQ_INT(u.info.device, want.device);
      ASSERT_EQ_PTR(u.info.base, want.base);
      ASSERT_EQ_SIZE(u.info.extent, want.extent);
      ASSERT_EQ_PTR(u.info.device_ptr, want.device_ptr);
      ASSERT_EQ_PTR(u.info.host_ptr, want.host_ptr);
      ASSERT_EQ_INT(u.info.flags, want.flags);
      for (size_t i = sizeof u.info; i < sizeof u; i++)
        if (u.b[i] != TST_POISON)
          TST_FAIL("pointer %zu, struct_size %zu: byte %zu written", p, asked[a], i);
    }
  }
  /* the settings' struct likewise */
  for (size_t a = 0; a < sizeof asked / sizeof asked[0]; a++) {
    union {
      gw_setting_info info;
      unsigned char b[sizeof(gw_setting_info) + 64];
    } u;
    memset(&u, TST_POISON, sizeof u);
    u.info.struct_size = asked[a];
    ASSERT_OK(gw_setting_describe(0, &u.info));
    ASSERT_EQ_SIZE(u.info.struct_size, sizeof(gw_setting_info));
    ASSERT_TRUE(strcmp(u.info.name, "GPUWRAP_BACKEND") == 0);
    for (size_t i = sizeof u.info; i < sizeof u; i++)
      if (u.b[i] != TST_POISON) TST_FAIL("setting, struct_size %zu: byte %zu written", asked[a], i);
  }
  gw_release(wrapped);
  gw_release(dev);
  free(host);
  gw_context_destroy(ctx);
  return 0;
}

/* The copy-out of out_struct.h with a struct that has grown twice (three layouts): a caller
 * of an older layout gets exactly its bytes, struct_size set to them, nothing past them; a
 * size that names no layout (0, garbage, one byte off) gets the first. */
TEST_IMPL(struct_size_layouts) {
  typedef struct {
    size_t struct_size;
    int a;
    double b;
    char c[20];
  } v3;
  const size_t layouts[] = {GW__LAYOUT_END(v3, a), GW__LAYOUT_END(v3, b), sizeof(v3)};
  ASSERT_EQ_SIZE(layouts[0], 16);
  ASSERT_EQ_SIZE(layouts[1], 24);
  v3 full;
  memset(&full, 0x11, sizeof full);
  const size_t asked[] = {16, 24, sizeof(v3), 0, 17, 23, 1000, (size_t)-1};
  const size_t wrote[] = {16, 24, sizeof(v3), 16, 16, 16, 16, 16};
  for (size_t k = 0; k < sizeof asked / sizeof asked[0]; k++) {
    unsigned char buf[sizeof(v3) + 32];
    memset(buf, TST_POISON, sizeof buf);
    memcpy(buf, &asked[k], sizeof asked[k]);
    gw__out_copy(buf, &full, layouts, 3);
    size_t got;
    memcpy(&got, buf, sizeof got);
    ASSERT_EQ_SIZE(got, wrote[k]);
    for (size_t i = sizeof(size_t); i < sizeof buf; i++)
      if (buf[i] != (i < wrote[k] ? 0x11 : TST_POISON))
        TST_FAIL("asked %zu: byte %zu is 0x%02x", asked[k], i, buf[i]);
  }
  return 0;
}
