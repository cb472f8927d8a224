/*
 * VMM memory (reservations with chunks mapped back to back, PyTorch's expandable segments)
 * and stream-ordered pool memory (cudaMallocAsync, cudaMallocFromPoolAsync), issue 45
 * build 1, on the CPU model's VMM and pools (gpuwrap/cpu_testing.h): classification, the
 * extent a wrap is checked against (the contiguous mapped range; a pool allocation's own),
 * no stale extent after a free, an unmap, a trim or a destroy, and the IPC refusal that
 * names how to allocate the memory shareable. Pageable memory on a device that reads it
 * directly (HMM/ATS) is used where it is, registering nothing.
 * tests/gpu/test_vmm_cuda.c runs the same cases with the CUDA driver's calls.
 */
#include "gpuwrap/cpu_testing.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t gran(void) { return gw_cpu_vmm_granularity(); }

static gw_ptrinfo query(gw_context *ctx, const void *p) {
  gw_ptrinfo i;
  memset(&i, 0, sizeof i);
  ASSERT_OK(gw_pointer_query(ctx, p, &i));
  return i;
}

static void expect_device(gw_context *ctx, const void *p, const void *base, size_t extent) {
  gw_ptrinfo i = query(ctx, p);
  TEST_CONTEXT("query(%p)", p);
  ASSERT_EQ_INT(i.kind, GW_MEM_DEVICE);
  ASSERT_EQ_INT(i.device, 0);
  ASSERT_EQ_PTR(i.base, base);
  ASSERT_EQ_SIZE(i.extent, extent);
  ASSERT_EQ_PTR(i.device_ptr, p);
  TEST_CONTEXT("%s", "");
}

/* Wrap n uint32 at p, write random values through gw_copy from a host array, read them
 * back through gw_copy into another, and check every element both ways (the model's
 * device memory is host memory, so the bytes at p are checked too). */
static void roundtrip(gw_context *ctx, void *p, int64_t n) {
  uint32_t *src = malloc((size_t)n * 4), *back = calloc((size_t)n, 4);
  ASSERT_TRUE(src && back);
  for (int64_t k = 0; k < n; k++) src[k] = (uint32_t)tst_rand64();
  gw_array *d = NULL, *hs = NULL, *hb = NULL;
  ASSERT_OK(gw_wrap(ctx, p, GW_UINT32, 1, &n, NULL, 0, &d));
  ASSERT_EQ_INT(gw_kind(d), GW_MEM_DEVICE);
  ASSERT_OK(gw_wrap(ctx, src, GW_UINT32, 1, &n, NULL, 0, &hs));
  ASSERT_OK(gw_wrap(ctx, back, GW_UINT32, 1, &n, NULL, 0, &hb));
  ASSERT_OK(gw_copy(d, hs));
  ASSERT_ELEMS_EQ(p, src, (size_t)n, 4);
  ASSERT_OK(gw_copy(hb, d));
  ASSERT_ELEMS_EQ(back, src, (size_t)n, 4);
  gw_release(d);
  gw_release(hs);
  gw_release(hb);
  free(src);
  free(back);
}

/* A reservation of `slots` chunks of cs bytes, with chunk k mapped where mapped[k]. */
typedef struct {
  char *r;
  size_t cs;
  int slots;
  gw_cpu_vmm_chunk c[4];
} segment;

static segment seg_make(int slots, const int *mapped, unsigned handle_types) {
  segment s = {.cs = 2 * gran(), .slots = slots};
  ASSERT_OK(gw_cpu_vmm_reserve(s.cs * (size_t)slots, (void **)&s.r));
  for (int k = 0; k < slots; k++) {
    if (!mapped[k]) continue;
    ASSERT_OK(gw_cpu_vmm_create(0, s.cs, handle_types, &s.c[k]));
    ASSERT_OK(gw_cpu_vmm_map(s.r + (size_t)k * s.cs, s.cs, s.c[k]));
    ASSERT_OK(gw_cpu_vmm_release(s.c[k])); /* the mapping holds it, as after cuMemMap */
  }
  return s;
}

static void seg_free(segment *s, const int *mapped) {
  for (int k = 0; k < s->slots; k++)
    if (mapped[k]) ASSERT_OK(gw_cpu_vmm_unmap(s->r + (size_t)k * s->cs, s->cs));
  ASSERT_OK(gw_cpu_vmm_free(s->r, s->cs * (size_t)s->slots));
}

TEST_IMPL(vmm_two_chunks) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t live = gw_cpu_vmm_live();
  const int mapped[4] = {1, 1, 0, 0};
  segment s = seg_make(4, mapped, 0);
  /* Every byte of either chunk: the two chunks, not one, not the reservation. */
  expect_device(ctx, s.r, s.r, 2 * s.cs);
  expect_device(ctx, s.r + s.cs - 1, s.r, 2 * s.cs);
  expect_device(ctx, s.r + s.cs + 8, s.r, 2 * s.cs);
  expect_device(ctx, s.r + 2 * s.cs - 1, s.r, 2 * s.cs);
  ASSERT_NE_INT(query(ctx, s.r + 2 * s.cs).kind, GW_MEM_DEVICE); /* reserved, unmapped */
  /* A wrap across the chunk boundary, from inside the first to inside the second. */
  roundtrip(ctx, s.r + s.cs / 2, (int64_t)(s.cs / 4));
  /* The whole mapped range. */
  roundtrip(ctx, s.r, (int64_t)(2 * s.cs / 4));
  seg_free(&s, mapped);
  ASSERT_EQ_SIZE(gw_cpu_vmm_live(), live);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(vmm_three_chunks) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  const int mapped[4] = {0, 1, 1, 1};
  segment s = seg_make(4, mapped, 0);
  char *lo = s.r + s.cs;
  /* The range starts at the first mapped chunk, not at the reservation's base. */
  for (int k = 0; k < 3; k++) expect_device(ctx, lo + (size_t)k * s.cs + 12, lo, 3 * s.cs);
  ASSERT_NE_INT(query(ctx, s.r).kind, GW_MEM_DEVICE);
  /* Starting in the first chunk, through the middle one, ending in the last. */
  roundtrip(ctx, lo + 4, (int64_t)((3 * s.cs - 8) / 4));
  /* Starting in the middle chunk. */
  roundtrip(ctx, lo + s.cs + 4, (int64_t)((2 * s.cs - 4) / 4));
  seg_free(&s, mapped);
  gw_context_destroy(ctx);
  return 0;
}

/* A wrap reaching into a hole, or past the mapped range at the reservation's end, is
 * GW_ERANGE; a chunk unmapped later is no longer part of its neighbour's extent. */
TEST_IMPL(vmm_hole_and_end) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  const int mapped[3] = {1, 0, 1};
  segment s = seg_make(3, mapped, 0);
  expect_device(ctx, s.r + 5, s.r, s.cs);
  expect_device(ctx, s.r + 2 * s.cs + 5, s.r + 2 * s.cs, s.cs);
  ASSERT_NE_INT(query(ctx, s.r + s.cs).kind, GW_MEM_DEVICE); /* the hole */
  gw_array *a = NULL;
  int64_t n = (int64_t)(s.cs / 4 + 1); /* one element into the hole */
  ASSERT_STATUS(gw_wrap(ctx, s.r, GW_UINT32, 1, &n, NULL, 0, &a), GW_ERANGE);
  ASSERT_NULL(a);
  n = (int64_t)(s.cs / 4 + 1); /* the last chunk, one element past the reservation */
  ASSERT_STATUS(gw_wrap(ctx, s.r + 2 * s.cs, GW_UINT32, 1, &n, NULL, 0, &a), GW_ERANGE);
  ASSERT_NULL(a);
  roundtrip(ctx, s.r + 2 * s.cs, (int64_t)(s.cs / 4)); /* exactly the last chunk: fine */
  seg_free(&s, mapped);

  /* Two chunks, then the second unmapped: the first's extent is one chunk again. */
  const int two[2] = {1, 1};
  segment t = seg_make(2, two, 0);
  expect_device(ctx, t.r, t.r, 2 * t.cs);
  ASSERT_OK(gw_cpu_vmm_unmap(t.r + t.cs, t.cs));
  expect_device(ctx, t.r, t.r, t.cs);
  n = (int64_t)(t.cs / 4 + 1);
  ASSERT_STATUS(gw_wrap(ctx, t.r, GW_UINT32, 1, &n, NULL, 0, &a), GW_ERANGE);
  ASSERT_OK(gw_cpu_vmm_unmap(t.r, t.cs));
  ASSERT_NE_INT(query(ctx, t.r).kind, GW_MEM_DEVICE);
  ASSERT_OK(gw_cpu_vmm_free(t.r, 2 * t.cs));
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* Interior pointers of pool memory report their own allocation (the default pool and a
 * created one), and a wrap past an allocation is GW_ERANGE even where the pool's next
 * allocation follows. */
TEST_IMPL(pool_interior) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t g = gran();
  gw_cpu_pool pools[2];
  ASSERT_OK(gw_cpu_pool_default(0, &pools[0]));
  ASSERT_OK(gw_cpu_pool_create(0, 64 * g, 0, &pools[1]));
  for (int k = 0; k < 2; k++) {
    TEST_CONTEXT("%s pool", k ? "created" : "default");
    char *a = NULL, *b = NULL;
    ASSERT_OK(gw_cpu_pool_alloc(pools[k], 3 * g, (void **)&a));
    ASSERT_OK(gw_cpu_pool_alloc(pools[k], 2 * g, (void **)&b));
    ASSERT_EQ_PTR(b, a + 3 * g); /* adjacent: only the pool knows where one ends */
    expect_device(ctx, a, a, 3 * g);
    expect_device(ctx, a + g + 100, a, 3 * g);
    expect_device(ctx, a + 3 * g - 1, a, 3 * g);
    expect_device(ctx, b + g + 1, b, 2 * g);
    gw_array *arr = NULL;
    int64_t n = (int64_t)(3 * g / 4 + 1);
    ASSERT_STATUS(gw_wrap(ctx, a, GW_UINT32, 1, &n, NULL, 0, &arr), GW_ERANGE);
    roundtrip(ctx, a + 8, (int64_t)((3 * g - 8) / 4));
    roundtrip(ctx, b, (int64_t)(2 * g / 4));
    ASSERT_OK(gw_cpu_pool_free(a));
    ASSERT_OK(gw_cpu_pool_free(b));
  }
  ASSERT_OK(gw_cpu_pool_destroy(pools[1]));
  ASSERT_STATUS(gw_cpu_pool_destroy(pools[0]), GW_EINVAL); /* a default pool stays */
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* A free, then an allocation at the same address: the new allocation's extent, never the
 * old one; the freed bytes past it the pool still holds are device memory of no extent. */
TEST_IMPL(pool_reuse) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t g = gran();
  gw_cpu_pool pool;
  ASSERT_OK(gw_cpu_pool_create(0, 16 * g, 0, &pool));
  char *a = NULL, *c = NULL;
  ASSERT_OK(gw_cpu_pool_alloc(pool, 4 * g, (void **)&a));
  expect_device(ctx, a + 2 * g, a, 4 * g);
  ASSERT_OK(gw_cpu_pool_free(a));
  expect_device(ctx, a + 2 * g, NULL, 0); /* freed, still the pool's: no extent */
  ASSERT_OK(gw_cpu_pool_alloc(pool, g, (void **)&c));
  ASSERT_EQ_PTR(c, a);
  expect_device(ctx, c, c, g);
  expect_device(ctx, c + g - 1, c, g);
  expect_device(ctx, a + 2 * g, NULL, 0);
  gw_array *arr = NULL;
  int64_t n = (int64_t)(4 * g / 4); /* the old allocation's size */
  ASSERT_STATUS(gw_wrap(ctx, c, GW_UINT32, 1, &n, NULL, 0, &arr), GW_ERANGE);
  roundtrip(ctx, c, (int64_t)(g / 4));
  ASSERT_OK(gw_cpu_pool_free(c));
  ASSERT_OK(gw_cpu_pool_destroy(pool));
  gw_context_destroy(ctx);
  return 0;
}

/* Trimmed or destroyed, a pool's freed memory is not device memory any more. */
TEST_IMPL(pool_trim_destroy) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t live = gw_cpu_vmm_live();
  size_t g = gran();
  gw_cpu_pool pool;
  ASSERT_OK(gw_cpu_pool_create(0, 16 * g, 0, &pool));
  char *a = NULL, *b = NULL;
  ASSERT_OK(gw_cpu_pool_alloc(pool, 2 * g, (void **)&a));
  ASSERT_OK(gw_cpu_pool_alloc(pool, 2 * g, (void **)&b));
  ASSERT_OK(gw_cpu_pool_free(b));
  expect_device(ctx, b, NULL, 0);
  ASSERT_OK(gw_cpu_pool_trim(pool, 0));
  ASSERT_EQ_INT(query(ctx, b).kind, GW_MEM_HOST);
  ASSERT_NULL(query(ctx, b).base);
  expect_device(ctx, a + 1, a, 2 * g); /* live memory is never trimmed */
  /* Destroyed with a live allocation: the free pages go now, the allocation stays until
   * freed (cudaMemPoolDestroy's deferred release). */
  ASSERT_OK(gw_cpu_pool_alloc(pool, 2 * g, (void **)&b));
  ASSERT_OK(gw_cpu_pool_free(b));
  ASSERT_OK(gw_cpu_pool_destroy(pool));
  ASSERT_EQ_INT(query(ctx, b).kind, GW_MEM_HOST);
  expect_device(ctx, a, a, 2 * g);
  roundtrip(ctx, a, (int64_t)(2 * g / 4));
  ASSERT_OK(gw_cpu_pool_free(a));
  ASSERT_EQ_INT(query(ctx, a).kind, GW_MEM_HOST);
  ASSERT_EQ_SIZE(gw_cpu_vmm_live(), live);
  gw_context_destroy(ctx);
  return 0;
}

static void expect_export_refused(gw_context *ctx, void *p, size_t bytes, const char *needle) {
  gw_array *a = NULL;
  int64_t n = (int64_t)bytes;
  ASSERT_OK(gw_wrap(ctx, p, GW_UINT8, 1, &n, NULL, 0, &a));
  gw_ipc_handle h;
  ASSERT_STATUS(gw_ipc_export(a, &h), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS(needle);
  gw_release(a);
}

/* Export of pool and VMM memory: GW_ENOTSUP, saying how to allocate it shareable where it
 * is not; memory of an IPC pool and shareable VMM memory export (test_ipc_pool.c and
 * test_ipc_vmm.c open them in another process). */
TEST_IMPL(export_refused) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t g = gran();
  const int two[2] = {1, 1};
  segment s = seg_make(2, two, 0);
  expect_export_refused(ctx, s.r + s.cs - 4, 8,
                        "requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR");
  seg_free(&s, two);
  s = seg_make(2, two, GW_CPU_HANDLE_POSIX_FD);
  {
    int64_t n2 = (int64_t)(2 * s.cs);
    gw_array *v = NULL;
    ASSERT_OK(gw_wrap(ctx, s.r, GW_UINT8, 1, &n2, NULL, 0, &v));
    gw_ipc_handle hv;
    ASSERT_OK(gw_ipc_export(v, &hv));
    ASSERT_EQ_INT(hv.bytes[4], 3);   /* version 3 */
    ASSERT_EQ_INT(hv.bytes[239], 2); /* kind: VMM */
    gw_release(v);
  }
  seg_free(&s, two);

  gw_cpu_pool def, ipc, plain;
  ASSERT_OK(gw_cpu_pool_default(0, &def));
  ASSERT_OK(gw_cpu_pool_create(0, 8 * g, GW_CPU_HANDLE_POSIX_FD, &ipc));
  ASSERT_OK(gw_cpu_pool_create(0, 8 * g, 0, &plain));
  void *p = NULL;
  ASSERT_OK(gw_cpu_pool_alloc(def, g, &p));
  expect_export_refused(ctx, p, g, "default pool has no shareable handle type");
  ASSERT_ERROR_MENTIONS("cudaMemHandleTypePosixFileDescriptor");
  ASSERT_OK(gw_cpu_pool_free(p));
  ASSERT_OK(gw_cpu_pool_alloc(plain, g, &p));
  expect_export_refused(ctx, p, g, "handleTypes = cudaMemHandleTypePosixFileDescriptor");
  ASSERT_OK(gw_cpu_pool_free(p));
  ASSERT_OK(gw_cpu_pool_alloc(ipc, g, &p));
  int64_t n = (int64_t)g;
  gw_array *a = NULL;
  ASSERT_OK(gw_wrap(ctx, p, GW_UINT8, 1, &n, NULL, 0, &a));
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_EQ_INT(h.bytes[4], 3); /* pool memory's handle version */
  gw_release(a);
  ASSERT_OK(gw_cpu_pool_free(p));
  ASSERT_OK(gw_cpu_pool_destroy(ipc));
  ASSERT_OK(gw_cpu_pool_destroy(plain));
  gw_context_destroy(ctx);
  return 0;
}

/* The controls refuse what the driver refuses, and leave nothing behind. */
TEST_IMPL(vmm_controls_refuse) {
  TEST_REQUIRE_CPU();
  size_t g = gran();
  size_t live = gw_cpu_vmm_live();
  char *r = NULL;
  gw_cpu_vmm_chunk c = NULL;
  ASSERT_STATUS(gw_cpu_vmm_reserve(g + 1, (void **)&r), GW_EINVAL);
  ASSERT_OK(gw_cpu_vmm_reserve(2 * g, (void **)&r));
  ASSERT_STATUS(gw_cpu_vmm_create(5, g, 0, &c), GW_ENODEV);
  ASSERT_STATUS(gw_cpu_vmm_create(0, g, 8, &c), GW_EINVAL);
  ASSERT_OK(gw_cpu_vmm_create(0, g, 0, &c));
  ASSERT_STATUS(gw_cpu_vmm_map(r + 2 * g, g, c), GW_EINVAL); /* past the reservation */
  ASSERT_STATUS(gw_cpu_vmm_map(r + 1, g, c), GW_EINVAL);     /* unaligned */
  ASSERT_OK(gw_cpu_vmm_map(r, g, c));
  ASSERT_STATUS(gw_cpu_vmm_map(r, g, c), GW_EINVAL); /* overlaps */
  ASSERT_STATUS(gw_cpu_vmm_free(r, 2 * g), GW_EBUSY);
  ASSERT_STATUS(gw_cpu_vmm_unmap(r + g, g), GW_EINVAL);
  ASSERT_OK(gw_cpu_vmm_unmap(r, g));
  ASSERT_OK(gw_cpu_vmm_release(c));
  ASSERT_OK(gw_cpu_vmm_free(r, 2 * g));
  gw_cpu_pool pool;
  ASSERT_OK(gw_cpu_pool_create(0, 2 * g, 0, &pool));
  void *p = NULL;
  ASSERT_STATUS(gw_cpu_pool_alloc(pool, 3 * g, &p), GW_ENOMEM);
  ASSERT_STATUS(gw_cpu_pool_free((char *)&p), GW_EINVAL);
  ASSERT_OK(gw_cpu_pool_destroy(pool));
  ASSERT_EQ_SIZE(gw_cpu_vmm_live(), live);
  return 0;
}

/* A device that reads pageable memory directly (HMM/ATS, GPUWRAP_CPU_PAGEABLE_ACCESS=1):
 * reported, and a wrap uses the memory where it is, registering nothing. */
TEST_IMPL(pageable_access_no_register) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t regs = gw_cpu_live_registrations(), ranges = gw_registry_ranges();
  int64_t n = 1000;
  uint32_t *p = malloc((size_t)n * 4), *back = calloc((size_t)n, 4);
  ASSERT_TRUE(p && back);
  for (int64_t k = 0; k < n; k++) p[k] = (uint32_t)tst_rand64();
  gw_ptrinfo i = query(ctx, p);
  ASSERT_EQ_INT(i.kind, GW_MEM_HOST);
  ASSERT_EQ_PTR(i.device_ptr, p);
  gw_array *a = NULL, *d = NULL, *hb = NULL;
  ASSERT_OK(gw_wrap(ctx, p, GW_UINT32, 1, &n, NULL, 0, &a));
  ASSERT_EQ_PTR(gw_data(a), p);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs);
  ASSERT_EQ_SIZE(gw_registry_ranges(), ranges);
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, &n, &d));
  ASSERT_OK(gw_copy(d, a));
  ASSERT_OK(gw_wrap(ctx, back, GW_UINT32, 1, &n, NULL, 0, &hb));
  ASSERT_OK(gw_copy(hb, d));
  ASSERT_ELEMS_EQ(back, p, (size_t)n, 4);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), regs);
  gw_release(a);
  gw_release(hb);
  gw_release(d);
  /* The report says so. */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ASSERT_NOT_NULL(f);
  (void)gw_info_report(f, 0);
  fclose(f);
  ASSERT_STR_CONTAINS(text, "device reads pageable memory: HMM/ATS");
  free(text);
  free(p);
  free(back);
  gw_context_destroy(ctx);
  return 0;
}
