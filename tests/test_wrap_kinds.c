/* Every row of README.md's wrap table: device, managed, pinned (allocated), pinned
 * (registered by someone else), pageable host (registered / NO_REGISTER / OWN / a device
 * that reads pageable memory), zero elements; and gw_alloc of every kind. */
#include "test.h"

static void check_meta(const gw_array *a, gw_dtype t, int ndim, const int64_t *shape) {
  int64_t cs[GW_MAX_DIMS];
  tst_c_strides(ndim, shape, cs);
  ASSERT_EQ_INT(gw_array_dtype(a), t);
  ASSERT_EQ_INT(gw_ndim(a), ndim);
  ASSERT_NOT_NULL(gw_strides(a));
  for (int d = 0; d < ndim; d++) {
    ASSERT_EQ_INT(gw_shape(a)[d], shape[d]);
    ASSERT_EQ_INT(gw_strides(a)[d], cs[d]);
  }
  ASSERT_EQ_INT(gw_numel(a), tst_numel(ndim, shape));
}

/* a and b are two arrays over the same memory: what is written through one is read
 * through the other. */
static void check_same_memory(gw_array *a, gw_array *b) {
  size_t n = tst_array_bytes(a);
  ASSERT_EQ_SIZE(tst_array_bytes(b), n);
  unsigned char *in = malloc(n), *out = malloc(n);
  tst_random_fill(in, n);
  tst_write(a, in);
  tst_read(b, out);
  ASSERT_ELEMS_EQ(out, in, n / gw_dtype_size(gw_array_dtype(a)), gw_dtype_size(gw_array_dtype(a)));
  tst_random_fill(in, n);
  tst_write(b, in);
  tst_read(a, out);
  ASSERT_ELEMS_EQ(out, in, n / gw_dtype_size(gw_array_dtype(a)), gw_dtype_size(gw_array_dtype(a)));
  free(in);
  free(out);
}

TEST_IMPL(device_gw_alloc) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[2] = {8, 33};
  gw_array *d = NULL, *w = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 2, shape, &d));
  ASSERT_EQ_INT(gw_kind(d), GW_MEM_DEVICE);
  ASSERT_EQ_INT(gw_owns(d), 1);
  ASSERT_NULL(gw_host_data(d));
  ASSERT_OK(gw_wrap(ctx, gw_data(d), GW_FLOAT32, 2, shape, NULL, 0, &w));
  ASSERT_EQ_INT(gw_kind(w), GW_MEM_DEVICE);
  ASSERT_EQ_INT(gw_device(w), 0);
  ASSERT_EQ_PTR(gw_data(w), gw_data(d));
  ASSERT_NULL(gw_host_data(w));
  ASSERT_EQ_INT(gw_owns(w), 0);
  ASSERT_EQ_INT(gw_is_readonly(w), 0);
  check_meta(w, GW_FLOAT32, 2, shape);
  check_same_memory(w, d);
  gw_release(w); /* borrowed: d's memory untouched */
  float out[8 * 33], in[8 * 33];
  tst_random_fill(in, sizeof in);
  tst_write(d, in);
  tst_read(d, out);
  ASSERT_ELEMS_EQ(out, in, 8 * 33, 4);
  gw_release(d);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

static void runtime_own(gw_context *ctx, gw_memkind kind, int device) {
  tst_leaks before = tst_leak_snapshot();
  void *p = NULL;
  int64_t shape[3] = {4, 5, 6};
  gw_array *a = NULL, *b = NULL;
  ASSERT_OK(gw_cpu_runtime_alloc(kind, device, 4 * 5 * 6 * 8, &p));
  ASSERT_EQ_SIZE(gw_cpu_live_allocations(), before.allocs + 1);
  /* borrowed: release leaves the allocation */
  ASSERT_OK(gw_wrap(ctx, p, GW_FLOAT64, 3, shape, NULL, 0, &a));
  ASSERT_EQ_INT(gw_kind(a), kind);
  ASSERT_EQ_INT(gw_device(a), device);
  ASSERT_EQ_INT(gw_owns(a), 0);
  gw_release(a);
  ASSERT_EQ_SIZE(gw_cpu_live_allocations(), before.allocs + 1);
  /* owned: release frees through the backend */
  long frees = gw_cpu_op_calls(GW_CPU_OP_FREE);
  ASSERT_OK(gw_wrap(ctx, p, GW_FLOAT64, 3, shape, NULL, GW_WRAP_OWN, &a));
  ASSERT_EQ_INT(gw_owns(a), 1);
  ASSERT_EQ_INT(gw_device(a), device);
  ASSERT_OK(gw_wrap(ctx, p, GW_FLOAT64, 3, shape, NULL, 0, &b)); /* borrowed, same memory */
  check_same_memory(a, b);
  gw_release(b);
  gw_release(a);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_FREE), frees + 1);
  ASSERT_NO_LEAK(before);
}

TEST_IMPL(device_runtime_own) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  runtime_own(ctx, GW_MEM_DEVICE, 0);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(device_other_2dev) {
  gw_context *c0 = tst_open(0), *c1 = tst_open(1);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[2] = {17, 9};
  gw_array *d1 = NULL, *w = NULL;
  ASSERT_OK(gw_alloc(c1, GW_MEM_DEVICE, GW_INT64, 2, shape, &d1));
  ASSERT_EQ_INT(gw_device(d1), 1);
  /* wrapped through device 0's context: the array is device 1's */
  ASSERT_OK(gw_wrap(c0, gw_data(d1), GW_INT64, 2, shape, NULL, 0, &w));
  ASSERT_EQ_INT(gw_kind(w), GW_MEM_DEVICE);
  ASSERT_EQ_INT(gw_device(w), 1);
  check_same_memory(w, d1);
  int64_t v = (int64_t)tst_rand64(), out[17 * 9];
  ASSERT_OK(gw_fill(w, &v));
  tst_read(d1, out);
  ASSERT_ALL_EQ(out, &v, 17 * 9, 8);
  gw_release(w);
  gw_release(d1);
  if (tst_is_cpu()) /* owning device-1 memory from a device-0 context frees it right */
    runtime_own(c0, GW_MEM_DEVICE, 1);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(c1);
  gw_context_destroy(c0);
  return 0;
}

TEST_IMPL(managed) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[1] = {1000};
  gw_array *m = NULL, *w = NULL;
  gw_status s = gw_alloc(ctx, GW_MEM_MANAGED, GW_UINT16, 1, shape, &m);
  if (s == GW_ENOTSUP && !tst_is_cpu()) TEST_SKIP("managed memory not available on this device");
  ASSERT_OK(s);
  ASSERT_NOT_NULL(gw_host_data(m));
  ASSERT_OK(gw_wrap(ctx, gw_host_data(m), GW_UINT16, 1, shape, NULL, 0, &w));
  ASSERT_EQ_INT(gw_kind(w), GW_MEM_MANAGED);
  ASSERT_EQ_INT(gw_device(w), 0);
  ASSERT_NOT_NULL(gw_data(w));
  ASSERT_EQ_PTR(gw_host_data(w), gw_host_data(m));
  ASSERT_EQ_INT(gw_owns(w), 0);
  /* the host sees it directly */
  uint16_t in[1000], out[1000];
  tst_random_fill(in, sizeof in);
  memcpy(gw_host_data(w), in, sizeof in);
  tst_read(m, out);
  ASSERT_ELEMS_EQ(out, in, 1000, 2);
  uint16_t v = (uint16_t)tst_rand64();
  ASSERT_OK(gw_fill(w, &v));
  ASSERT_OK(gw_synchronize(ctx));
  ASSERT_ALL_EQ(gw_host_data(m), &v, 1000, 2);
  gw_release(w);
  gw_release(m);
  if (tst_is_cpu()) runtime_own(ctx, GW_MEM_MANAGED, 0);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pinned_allocated) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER);
  int64_t shape[2] = {31, 7};
  gw_array *p = NULL, *w = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_COMPLEX64, 2, shape, &p));
  ASSERT_EQ_INT(gw_kind(p), GW_MEM_PINNED);
  ASSERT_NOT_NULL(gw_host_data(p));
  ASSERT_OK(gw_wrap(ctx, gw_host_data(p), GW_COMPLEX64, 2, shape, NULL, 0, &w));
  ASSERT_EQ_INT(gw_kind(w), GW_MEM_PINNED);
  ASSERT_EQ_PTR(gw_host_data(w), gw_host_data(p));
  ASSERT_NOT_NULL(gw_data(w)); /* its mapped device address */
  ASSERT_EQ_PTR(gw_data(w), gw_data(p));
  ASSERT_EQ_INT(gw_owns(w), 0);
  gw_ptrinfo info;
  ASSERT_OK(gw_pointer_query(ctx, gw_host_data(w), &info));
  ASSERT_EQ_INT(info.kind, GW_MEM_PINNED);
  ASSERT_EQ_INT(info.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs); /* nothing registered */
  check_same_memory(w, p);
  unsigned char v[8];
  tst_random_fill(v, 8);
  ASSERT_OK(gw_fill(w, v));
  ASSERT_OK(gw_synchronize(ctx));
  ASSERT_ALL_EQ(gw_host_data(p), v, 31 * 7, 8);
  gw_release(w);
  gw_release(p);
  if (tst_is_cpu()) runtime_own(ctx, GW_MEM_PINNED, 0);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pinned_registered_by_someone_else) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t pg = tst_page();
  char *buf = tst_pages(3);
  ASSERT_OK(gw_cpu_runtime_register(buf, 3 * pg));
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER), unregs = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER);
  long frees = gw_cpu_op_calls(GW_CPU_OP_FREE);
  int64_t shape[1] = {(int64_t)(3 * pg / 4)};
  gw_array *w = NULL, *h = NULL;
  for (int rep = 0; rep < 3; rep++) {
    ASSERT_OK(gw_wrap(ctx, buf, GW_INT32, 1, shape, NULL, 0, &w));
    ASSERT_EQ_INT(gw_kind(w), GW_MEM_PINNED);
    ASSERT_EQ_PTR(gw_host_data(w), buf);
    ASSERT_NOT_NULL(gw_data(w));
    ASSERT_EQ_INT(gw_owns(w), 0);
    ASSERT_OK(gw_wrap(ctx, buf, GW_INT32, 1, shape, NULL, GW_WRAP_NO_REGISTER, &h));
    check_same_memory(w, h);
    int32_t v = (int32_t)tst_rand64();
    ASSERT_OK(gw_fill(w, &v));
    ASSERT_OK(gw_synchronize(ctx));
    ASSERT_ALL_EQ(buf, &v, (size_t)shape[0], 4);
    gw_release(h);
    gw_release(w);
    /* used, never registered nor unregistered by gpuwrap */
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs);
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unregs);
    ASSERT_NO_LEAK(before);
    gw_ptrinfo info;
    ASSERT_OK(gw_pointer_query(ctx, buf, &info));
    ASSERT_EQ_INT(info.kind, GW_MEM_PINNED);
    ASSERT_EQ_INT(info.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  }
  /* an interior piece too */
  int64_t small[1] = {10};
  ASSERT_OK(gw_wrap(ctx, buf + pg + 64, GW_INT32, 1, small, NULL, 0, &w));
  ASSERT_EQ_INT(gw_kind(w), GW_MEM_PINNED);
  gw_release(w);
  /* owning memory someone else registered is refused (the CPU model can tell) */
  w = (gw_array *)(uintptr_t)0x77;
  ASSERT_STATUS(gw_wrap(ctx, buf, GW_INT32, 1, shape, NULL, GW_WRAP_OWN, &w), GW_EINVAL);
  ASSERT_EQ_PTR(w, (gw_array *)(uintptr_t)0x77);
  /* a deleter is the way to own it */
  tst_deleter_state del = {0, NULL};
  ASSERT_OK(gw_wrap_with_deleter(ctx, buf, GW_INT32, 1, shape, NULL, 0, tst_deleter, &del, &w));
  gw_release(w);
  ASSERT_EQ_INT(del.calls, 1);
  ASSERT_EQ_PTR(del.ptr, buf);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unregs);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_FREE), frees);
  ASSERT_NO_LEAK(before);
  ASSERT_OK(gw_cpu_runtime_unregister(buf));
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pageable_registered) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER);
  int64_t shape[2] = {100, 37};
  double *buf = malloc(100 * 37 * sizeof(double));
  double in[100 * 37], out[100 * 37];
  gw_array *w = NULL, *d = NULL;
  tst_random_fill(in, sizeof in);
  memcpy(buf, in, sizeof in);
  ASSERT_OK(gw_wrap(ctx, buf, GW_FLOAT64, 2, shape, NULL, 0, &w));
  check_meta(w, GW_FLOAT64, 2, shape);
  ASSERT_EQ_PTR(gw_host_data(w), buf);
  ASSERT_NOT_NULL(gw_data(w));
  ASSERT_EQ_INT(gw_owns(w), 0);
  gw_ptrinfo info;
  ASSERT_OK(gw_pointer_query(ctx, buf + 1000, &info));
  ASSERT_EQ_INT(info.kind, GW_MEM_PINNED);
  ASSERT_TRUE(info.flags & GW_PTR_GPUWRAP_REGISTERED);
  ASSERT_EQ_INT(gw_kind(w), GW_MEM_PINNED);
  if (tst_is_cpu()) {
    ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs + 1);
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs + 1);
    /* the registration is exactly the wrapped bytes: neighbours stay pageable */
    ASSERT_EQ_PTR(info.base, buf);
    ASSERT_EQ_SIZE(info.extent, (size_t)100 * 37 * 8);
  }
  ASSERT_TRUE(gw_registry_ranges() > before.ranges);
  /* the device sees the host's data; the host sees the device's writes */
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 2, shape, &d));
  ASSERT_OK(gw_copy(d, w));
  tst_read(d, out);
  ASSERT_ELEMS_EQ(out, in, 100 * 37, 8);
  tst_random_fill(in, sizeof in);
  tst_write(d, in);
  ASSERT_OK(gw_copy(w, d));
  ASSERT_OK(gw_synchronize(ctx));
  ASSERT_ELEMS_EQ(buf, in, 100 * 37, 8);
  double v;
  tst_random_fill(&v, sizeof v);
  ASSERT_OK(gw_fill(w, &v));
  ASSERT_OK(gw_synchronize(ctx));
  ASSERT_ALL_EQ(buf, &v, 100 * 37, 8);
  gw_release(d);
  gw_release(w);
  ASSERT_OK(gw_pointer_query(ctx, buf + 1000, &info));
  ASSERT_EQ_INT(info.kind, GW_MEM_HOST);
  ASSERT_EQ_INT(info.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  ASSERT_ALL_EQ(buf, &v, 100 * 37, 8); /* release did not touch the memory */
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pageable_no_register) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER);
  int64_t shape[1] = {333};
  int16_t *buf = malloc(333 * 2), in[333], out[333];
  gw_array *w = NULL, *d = NULL;
  tst_random_fill(in, sizeof in);
  memcpy(buf, in, sizeof in);
  ASSERT_OK(gw_wrap(ctx, buf, GW_INT16, 1, shape, NULL, GW_WRAP_NO_REGISTER, &w));
  ASSERT_EQ_INT(gw_kind(w), GW_MEM_HOST);
  ASSERT_EQ_INT(gw_device(w), -1);
  ASSERT_NULL(gw_data(w));
  ASSERT_EQ_PTR(gw_host_data(w), buf);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs);
  ASSERT_EQ_SIZE(gw_registry_ranges(), before.ranges);
  gw_ptrinfo info;
  ASSERT_OK(gw_pointer_query(ctx, buf, &info));
  ASSERT_EQ_INT(info.kind, GW_MEM_HOST);
  /* copies still work (staged) */
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT16, 1, shape, &d));
  ASSERT_OK(gw_copy(d, w));
  tst_read(d, out);
  ASSERT_ELEMS_EQ(out, in, 333, 2);
  gw_release(d);
  gw_release(w);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pageable_own) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t bytes = 3 << 20; /* big enough for glibc to mmap it */
  int64_t shape[1] = {(int64_t)(bytes / 4)};
  for (int rep = 0; rep < 3; rep++) {
    long long heap0 = tst_heap_in_use();
    float *buf = malloc(bytes);
    ASSERT_NOT_NULL(buf);
    gw_array *w = NULL;
    ASSERT_OK(gw_wrap(ctx, buf, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &w));
    ASSERT_EQ_INT(gw_owns(w), 1);
    ASSERT_EQ_PTR(gw_host_data(w), buf);
    float v = (float)rep + 0.5f;
    ASSERT_OK(gw_fill(w, &v));
    ASSERT_OK(gw_synchronize(ctx));
    ASSERT_ALL_EQ(buf, &v, bytes / 4, 4);
    gw_release(w); /* unregisters, then free()s buf (LSan reports it otherwise) */
    ASSERT_NO_LEAK(before);
    long long heap1 = tst_heap_in_use();
    if (heap0 >= 0 && heap1 > heap0 + (long long)bytes / 2)
      TST_FAIL("OWN wrap of malloc'd memory: heap in use %lld before, %lld after release "
               "(not free()d)",
               heap0, heap1);
  }
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pageable_own_no_register) {
  /* OWN | NO_REGISTER: a host-only array that free()s the pointer (LSan checks the free) */
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  char *p = malloc(64);
  tst_random_fill(p, 64);
  gw_array *w = NULL;
  int64_t s64[1] = {64};
  ASSERT_OK(gw_wrap(ctx, p, GW_UINT8, 1, s64, NULL, GW_WRAP_OWN | GW_WRAP_NO_REGISTER, &w));
  ASSERT_EQ_INT(gw_owns(w), 1);
  ASSERT_EQ_INT(gw_kind(w), GW_MEM_HOST);
  ASSERT_NULL(gw_data(w));
  ASSERT_EQ_PTR(gw_host_data(w), p);
  gw_ptrinfo info;
  ASSERT_OK(gw_pointer_query(ctx, p, &info));
  ASSERT_EQ_INT(info.kind, GW_MEM_HOST); /* nothing registered */
  gw_array *again = NULL;
  ASSERT_STATUS(gw_wrap(ctx, p, GW_UINT8, 1, s64, NULL, GW_WRAP_OWN, &again), GW_EOWNED);
  ASSERT_NULL(again);
  gw_release(w); /* frees p */
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pageable_hmm) {
  /* a device that reads pageable memory: wrap registers nothing */
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  long regs = gw_cpu_op_calls(GW_CPU_OP_REGISTER);
  int64_t shape[1] = {4096};
  uint32_t *buf = malloc(4096 * 4), out[4096];
  gw_array *w = NULL, *d = NULL;
  tst_random_fill(buf, 4096 * 4);
  ASSERT_OK(gw_wrap(ctx, buf, GW_UINT32, 1, shape, NULL, 0, &w));
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs);
  ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs);
  ASSERT_NOT_NULL(gw_data(w));
  ASSERT_EQ_PTR(gw_host_data(w), buf);
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &d));
  ASSERT_OK(gw_copy(d, w));
  tst_read(d, out);
  ASSERT_ELEMS_EQ(out, buf, 4096, 4);
  uint32_t v = (uint32_t)tst_rand64();
  ASSERT_OK(gw_fill(w, &v));
  ASSERT_OK(gw_synchronize(ctx));
  ASSERT_ALL_EQ(buf, &v, 4096, 4);
  /* an asynchronous fill of pageable memory is queued, as a GPU that reads pageable memory
   * queues a kernel (it completed on return: a missing synchronize went unseen) */
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  uint32_t v2 = v ^ 0x5a5a5a5au;
  ASSERT_OK(gw_fill_async(w, &v2, s));
  ASSERT_EQ_INT(gw_array_pending(w), 1);
  ASSERT_EQ_INT(buf[4095], v); /* still queued: the stream starts each item 150 ms late */
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_ALL_EQ(buf, &v2, 4096, 4);
  gw_stream_destroy(s);
  gw_release(d);
  gw_release(w);
  ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_REGISTER), regs);
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pageable_next_to_backend_allocations) {
  /* Small pageable buffers from malloc next to small backend allocations (device, pinned,
   * managed): a real runtime's allocations never share a page with malloc's memory, so
   * wrapping (registering the page-aligned span of) the malloc'd buffers must work. */
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  enum { N = 64 };
  gw_array *dev[N], *w[N];
  char *bufs[N];
  gw_memkind kinds[3] = {GW_MEM_DEVICE, GW_MEM_PINNED, GW_MEM_MANAGED};
  for (int i = 0; i < N; i++) {
    int64_t shape[1] = {48 + i};
    ASSERT_OK(gw_alloc(
        ctx, kinds[i % 3] == GW_MEM_MANAGED && !tst_is_cpu() ? GW_MEM_DEVICE : kinds[i % 3],
        GW_UINT8, 1, shape, &dev[i]));
    bufs[i] = malloc(40 + (size_t)i);
  }
  int failed = 0;
  for (int i = 0; i < N; i++) {
    int64_t shape[1] = {40 + i};
    gw_status s = gw_wrap(ctx, bufs[i], GW_UINT8, 1, shape, NULL, 0, &w[i]);
    if (s != GW_OK) {
      if (!failed++)
        printf("  wrap of malloc'd %p failed: %s: %s\n", (void *)bufs[i], gw_err_name(s),
               gw_last_error());
      w[i] = NULL;
    }
  }
  for (int i = 0; i < N; i++) {
    gw_release(w[i]);
    gw_release(dev[i]);
    free(bufs[i]);
  }
  ASSERT_NO_LEAK(before);
  if (failed)
    TST_FAIL("%d of %d wraps of small malloc'd buffers failed next to backend allocations", failed,
             N);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(zero_elements) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  long calls = gw_cpu_op_calls(GW_CPU_OP_COUNT);
  int64_t s0[1] = {0}, s3[3] = {4, 0, 3};
  gw_array *a = NULL, *b = NULL, *v = NULL;
  ASSERT_OK(gw_wrap(ctx, NULL, GW_FLOAT32, 1, s0, NULL, 0, &a));
  ASSERT_EQ_INT(gw_numel(a), 0);
  ASSERT_EQ_INT(gw_ndim(a), 1);
  ASSERT_EQ_INT(gw_shape(a)[0], 0);
  ASSERT_NOT_NULL(gw_strides(a));
  gw_release(a);
  /* any pointer: a dangling one, one misaligned for the dtype, and with OWN */
  ASSERT_OK(gw_wrap(ctx, (void *)(uintptr_t)0xdead0000, GW_FLOAT64, 3, s3, NULL, 0, &a));
  ASSERT_EQ_INT(gw_numel(a), 0);
  ASSERT_OK(gw_wrap(ctx, NULL, GW_FLOAT64, 3, s3, NULL, GW_WRAP_OWN, &b));
  ASSERT_OK(gw_copy(b, a)); /* nothing to copy */
  double val = 1.0;
  ASSERT_OK(gw_fill(a, &val));
  int64_t st[3] = {1, 0, 1}, vs[3] = {2, 0, 2};
  ASSERT_OK(gw_view(a, st, vs, NULL, &v));
  ASSERT_EQ_INT(gw_numel(v), 0);
  gw_release(v);
  gw_release(b);
  gw_release(a);
  ASSERT_OK(gw_wrap(ctx, NULL, GW_UINT8, 1, s0, NULL, GW_WRAP_NO_REGISTER | GW_WRAP_READONLY, &a));
  gw_release(a);
  ASSERT_OK(gw_wrap(ctx, (void *)(uintptr_t)0x1001, GW_INT32, 1, s0, NULL, 0, &a));
  gw_release(a);
  /* a deleter still runs exactly once */
  tst_deleter_state del = {0, NULL};
  ASSERT_OK(gw_wrap_with_deleter(ctx, NULL, GW_INT8, 1, s0, NULL, 0, tst_deleter, &del, &a));
  ASSERT_EQ_INT(del.calls, 0);
  gw_release(a);
  ASSERT_EQ_INT(del.calls, 1);
  ASSERT_NULL(del.ptr);
  if (tst_is_cpu())
    ASSERT_EQ_INT(gw_cpu_op_calls(GW_CPU_OP_COUNT), calls); /* no runtime call at all */
  ASSERT_NO_LEAK(before);
  /* zero elements with NULL are still checked otherwise */
  a = NULL;
  ASSERT_STATUS(gw_wrap(ctx, NULL, GW_FLOAT32, 1, s0, NULL, 1u << 20, &a), GW_EINVAL);
  ASSERT_NULL(a);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(alloc_kinds) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  gw_memkind kinds[4] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};
  int64_t shape[4] = {2, 3, 4, 5};
  for (int k = 0; k < 4; k++) {
    for (int t = 0; t < GW_DTYPE_COUNT; t++) {
      gw_array *a = NULL;
      gw_status s = gw_alloc(ctx, kinds[k], tst_all_dtypes[t], 4, shape, &a);
      if (s == GW_ENOTSUP && kinds[k] == GW_MEM_MANAGED && !tst_is_cpu()) continue;
      ASSERT_OK(s);
      ASSERT_EQ_INT(gw_kind(a), kinds[k]);
      ASSERT_EQ_INT(gw_owns(a), 1);
      check_meta(a, tst_all_dtypes[t], 4, shape);
      ASSERT_EQ_INT(gw_device(a), kinds[k] == GW_MEM_HOST ? -1 : 0);
      if (kinds[k] == GW_MEM_DEVICE)
        ASSERT_NULL(gw_host_data(a));
      else
        ASSERT_NOT_NULL(gw_host_data(a));
      if (kinds[k] == GW_MEM_HOST) {
        ASSERT_EQ_SIZE(gw_cpu_live_registrations(), before.regs); /* not registered */
        ASSERT_NULL(gw_data(a));
      } else {
        ASSERT_NOT_NULL(gw_data(a));
        if (tst_is_cpu()) ASSERT_EQ_SIZE(gw_cpu_live_allocations(), before.allocs + 1);
      }
      size_t n = 120, e = gw_dtype_size(tst_all_dtypes[t]);
      unsigned char in[120 * 16], out[120 * 16];
      tst_random_fill(in, n * e);
      if (tst_all_dtypes[t] == GW_BOOL)
        for (size_t i = 0; i < n; i++) in[i] &= 1;
      tst_write(a, in);
      tst_read(a, out);
      ASSERT_ELEMS_EQ(out, in, n, e);
      gw_release(a);
      ASSERT_NO_LEAK(before);
    }
  }
  /* zero elements and 0-d */
  gw_array *a = NULL;
  int64_t z[2] = {3, 0};
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 2, z, &a));
  ASSERT_EQ_INT(gw_numel(a), 0);
  gw_release(a);
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 0, NULL, &a));
  ASSERT_EQ_INT(gw_numel(a), 1);
  gw_release(a);
  /* bad arguments */
  a = NULL;
  int64_t neg[1] = {-1}, big[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
  ASSERT_STATUS(gw_alloc(NULL, GW_MEM_DEVICE, GW_FLOAT32, 1, shape, &a), GW_EINVAL);
  ASSERT_STATUS(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 1, shape, NULL), GW_EINVAL);
  ASSERT_STATUS(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 1, neg, &a), GW_EINVAL);
  ASSERT_STATUS(gw_alloc(ctx, GW_MEM_DEVICE, (gw_dtype)99, 1, shape, &a), GW_EINVAL);
  ASSERT_STATUS(gw_alloc(ctx, (gw_memkind)99, GW_FLOAT32, 1, shape, &a), GW_EINVAL);
  int64_t many[GW_MAX_DIMS + 1];
  for (int d = 0; d <= GW_MAX_DIMS; d++) many[d] = 1;
  ASSERT_STATUS(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, GW_MAX_DIMS + 1, many, &a), GW_EINVAL);
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, GW_MAX_DIMS, many, &a)); /* at most: fine */
  ASSERT_EQ_INT(gw_ndim(a), GW_MAX_DIMS);
  gw_release(a);
  a = NULL;
  ASSERT_STATUS(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 2, big, &a), GW_EINVAL);
  ASSERT_NULL(a);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}
