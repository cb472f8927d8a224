/*
 * VMM memory and stream-ordered pool memory on CUDA (issue 45 build 1): the cases of
 * tests/test_vmm.c with the driver's own calls (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess; cudaMallocAsync, cudaMemPoolCreate, cudaMallocFromPoolAsync,
 * cudaMemPoolTrimTo, cudaMemPoolDestroy). Classification, the extent a wrap is checked
 * against (the contiguous mapped range of VMM chunks; a pool allocation's own), no stale
 * extent after a free, an unmap, a trim or a destroy, every element written and read back
 * through gw_copy, and the IPC refusal naming how to allocate the memory shareable; then
 * IPC of pool and VMM memory between two processes, by pidfd_getfd and (fdpass_two_processes)
 * by the descriptors passed over a Unix socket (gw_ipc_handle_send / gw_ipc_handle_recv).
 * Every test skips (77) without a CUDA device, or where the device has no VMM or pools.
 */
#include "gpuwrap.h"

#include <cuda.h>
#include <dlfcn.h>
#include <cuda_runtime_api.h>

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_assert.h"
#include "ipc_peer.h"

/* The driver API through dlopen, not linked: the test then starts, and skips, on a machine
 * without libcuda.so.1 (CI), as the rest of the CUDA tests do through the runtime. The names
 * go through one level of expansion, so a versioned name (cuda.h's _v2 macros) is the one
 * looked up. */
static __typeof__(&cuDeviceGet) drv_cuDeviceGet;
static __typeof__(&cuDeviceGetAttribute) drv_cuDeviceGetAttribute;
static __typeof__(&cuGetErrorName) drv_cuGetErrorName;
static __typeof__(&cuMemAddressFree) drv_cuMemAddressFree;
static __typeof__(&cuMemAddressReserve) drv_cuMemAddressReserve;
static __typeof__(&cuMemCreate) drv_cuMemCreate;
static __typeof__(&cuMemGetAllocationGranularity) drv_cuMemGetAllocationGranularity;
static __typeof__(&cuMemMap) drv_cuMemMap;
static __typeof__(&cuMemRelease) drv_cuMemRelease;
static __typeof__(&cuMemSetAccess) drv_cuMemSetAccess;
static __typeof__(&cuMemUnmap) drv_cuMemUnmap;
#define GWT_STR_(x) #x
#define GWT_STR(x) GWT_STR_(x)
#define GWT_LOAD(f) ((*(void **)&drv_##f = dlsym(lib, GWT_STR(f))) != NULL)

static int driver_load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  return lib && GWT_LOAD(cuDeviceGet) && GWT_LOAD(cuDeviceGetAttribute) &&
         GWT_LOAD(cuGetErrorName) && GWT_LOAD(cuMemAddressFree) && GWT_LOAD(cuMemAddressReserve) &&
         GWT_LOAD(cuMemCreate) && GWT_LOAD(cuMemGetAllocationGranularity) && GWT_LOAD(cuMemMap) &&
         GWT_LOAD(cuMemRelease) && GWT_LOAD(cuMemSetAccess) && GWT_LOAD(cuMemUnmap);
}

#define ASSERT_CU(x)                       \
  do {                                     \
    CUresult tst_r_ = (x);                 \
    if (tst_r_ != CUDA_SUCCESS) {          \
      const char *tst_n_ = "?";            \
      drv_cuGetErrorName(tst_r_, &tst_n_); \
      TST_FAIL("%s: %s", #x, tst_n_);      \
    }                                      \
  } while (0)

static gw_context *ctx;

static void setup(void) {
  int n = 0;
  if (!driver_load()) TEST_SKIP("no CUDA driver (libcuda.so.1)");
  if (gw_backend_device_count(GW_BACKEND_CUDA, &n) != GW_OK || n < 1) {
    printf("no CUDA device (%s)\n", gw_last_error());
    TEST_SKIP("no CUDA device");
  }
  ASSERT_OK(gw_context_create(GW_BACKEND_CUDA, 0, &ctx));
  ASSERT_CUDA(cudaSetDevice(0));
  ASSERT_CUDA(cudaFree(NULL)); /* the primary context current: the driver calls need it */
}

static gw_ptrinfo query(const void *p) {
  gw_ptrinfo i;
  memset(&i, 0, sizeof i);
  ASSERT_OK(gw_pointer_query(ctx, p, &i));
  return i;
}

static void expect_device(const void *p, const void *base, size_t extent) {
  gw_ptrinfo i = query(p);
  TEST_CONTEXT("query(%p)", p);
  ASSERT_EQ_INT(i.kind, GW_MEM_DEVICE);
  ASSERT_EQ_INT(i.device, 0);
  ASSERT_EQ_PTR(i.base, base);
  ASSERT_EQ_SIZE(i.extent, extent);
  ASSERT_EQ_PTR(i.device_ptr, p);
  TEST_CONTEXT("%s", "");
}

/* Wrap n uint32 at device address p; gw_copy random values in from a host array and back
 * out into another; every element checked, and the device bytes by cudaMemcpy too. */
static void roundtrip(void *p, int64_t n) {
  uint32_t *src = malloc((size_t)n * 4), *back = calloc((size_t)n, 4), *raw = calloc((size_t)n, 4);
  ASSERT_TRUE(src && back && raw);
  for (int64_t k = 0; k < n; k++) src[k] = (uint32_t)tst_rand64();
  gw_array *d = NULL, *hs = NULL, *hb = NULL;
  ASSERT_OK(gw_wrap(ctx, p, GW_UINT32, 1, &n, NULL, 0, &d));
  ASSERT_EQ_INT(gw_kind(d), GW_MEM_DEVICE);
  ASSERT_OK(gw_wrap(ctx, src, GW_UINT32, 1, &n, NULL, 0, &hs));
  ASSERT_OK(gw_wrap(ctx, back, GW_UINT32, 1, &n, NULL, 0, &hb));
  ASSERT_OK(gw_copy(d, hs));
  ASSERT_CUDA(cudaMemcpy(raw, p, (size_t)n * 4, cudaMemcpyDeviceToHost));
  ASSERT_ELEMS_EQ(raw, src, (size_t)n, 4);
  ASSERT_OK(gw_copy(hb, d));
  ASSERT_ELEMS_EQ(back, src, (size_t)n, 4);
  gw_release(d);
  gw_release(hs);
  gw_release(hb);
  free(src);
  free(back);
  free(raw);
}

/* ---- VMM: a reservation of `slots` chunks, chunk k mapped where mapped[k] ---- */

typedef struct {
  CUdeviceptr r;
  size_t cs;
  int slots;
} segment;

static CUmemAllocationProp vmm_prop(int shareable) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes =
      shareable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  return prop;
}

static void vmm_require(int shareable) {
  CUdevice dev;
  int vmm = 0, fd = 0;
  ASSERT_CU(drv_cuDeviceGet(&dev, 0));
  ASSERT_CU(
      drv_cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  if (!vmm) TEST_SKIP("the device has no virtual memory management");
  if (shareable) {
    ASSERT_CU(drv_cuDeviceGetAttribute(
        &fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev));
    if (!fd) TEST_SKIP("the device has no POSIX file descriptor handles");
  }
}

static segment seg_make(int slots, const int *mapped, int shareable) {
  vmm_require(shareable);
  CUmemAllocationProp prop = vmm_prop(shareable);
  segment s = {.slots = slots};
  ASSERT_CU(drv_cuMemGetAllocationGranularity(&s.cs, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  ASSERT_CU(drv_cuMemAddressReserve(&s.r, s.cs * (size_t)slots, 0, 0, 0));
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = 0;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (int k = 0; k < slots; k++) {
    if (!mapped[k]) continue;
    CUmemGenericAllocationHandle h;
    ASSERT_CU(drv_cuMemCreate(&h, s.cs, &prop, 0));
    ASSERT_CU(drv_cuMemMap(s.r + (size_t)k * s.cs, s.cs, 0, h, 0));
    ASSERT_CU(drv_cuMemRelease(h)); /* the mapping holds its own reference */
    ASSERT_CU(drv_cuMemSetAccess(s.r + (size_t)k * s.cs, s.cs, &acc, 1));
  }
  return s;
}

static void seg_free(segment *s, const int *mapped) {
  ASSERT_CUDA(cudaDeviceSynchronize());
  for (int k = 0; k < s->slots; k++)
    if (mapped[k]) ASSERT_CU(drv_cuMemUnmap(s->r + (size_t)k * s->cs, s->cs));
  ASSERT_CU(drv_cuMemAddressFree(s->r, s->cs * (size_t)s->slots));
}

#define AT(s, off) ((char *)(uintptr_t)(s).r + (off))

TEST_IMPL(vmm_two_chunks) {
  setup();
  const int mapped[4] = {1, 1, 0, 0};
  segment s = seg_make(4, mapped, 0);
  expect_device(AT(s, 0), AT(s, 0), 2 * s.cs);
  expect_device(AT(s, s.cs - 1), AT(s, 0), 2 * s.cs);
  expect_device(AT(s, s.cs + 8), AT(s, 0), 2 * s.cs);
  expect_device(AT(s, 2 * s.cs - 1), AT(s, 0), 2 * s.cs);
  roundtrip(AT(s, s.cs / 2), (int64_t)(s.cs / 4)); /* across the boundary */
  roundtrip(AT(s, 0), (int64_t)(2 * s.cs / 4));    /* the whole mapped range */
  seg_free(&s, mapped);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(vmm_three_chunks) {
  setup();
  const int mapped[4] = {0, 1, 1, 1};
  segment s = seg_make(4, mapped, 0);
  for (int k = 1; k <= 3; k++) expect_device(AT(s, (size_t)k * s.cs + 12), AT(s, s.cs), 3 * s.cs);
  roundtrip(AT(s, s.cs + 4), (int64_t)((3 * s.cs - 8) / 4));
  roundtrip(AT(s, 2 * s.cs + 4), (int64_t)((2 * s.cs - 4) / 4));
  seg_free(&s, mapped);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(vmm_hole_and_end) {
  setup();
  const int mapped[3] = {1, 0, 1};
  segment s = seg_make(3, mapped, 0);
  expect_device(AT(s, 5), AT(s, 0), s.cs);
  expect_device(AT(s, 2 * s.cs + 5), AT(s, 2 * s.cs), s.cs);
  gw_ptrinfo hole = query(AT(s, s.cs));
  printf("a reservation's hole: %s, extent %zu\n", gw_memkind_name(hole.kind), hole.extent);
  ASSERT_TRUE(hole.extent == 0);
  gw_array *a = NULL;
  int64_t n = (int64_t)(s.cs / 4 + 1);
  ASSERT_STATUS(gw_wrap(ctx, AT(s, 0), GW_UINT32, 1, &n, NULL, 0, &a), GW_ERANGE);
  ASSERT_STATUS(gw_wrap(ctx, AT(s, 2 * s.cs), GW_UINT32, 1, &n, NULL, 0, &a), GW_ERANGE);
  ASSERT_NULL(a);
  roundtrip(AT(s, 2 * s.cs), (int64_t)(s.cs / 4));
  seg_free(&s, mapped);

  /* Two chunks, the second unmapped later: the first's extent is one chunk again. */
  const int two[2] = {1, 1};
  segment t = seg_make(2, two, 0);
  expect_device(AT(t, 0), AT(t, 0), 2 * t.cs);
  ASSERT_CU(drv_cuMemUnmap(t.r + t.cs, t.cs));
  expect_device(AT(t, 0), AT(t, 0), t.cs);
  n = (int64_t)(t.cs / 4 + 1);
  ASSERT_STATUS(gw_wrap(ctx, AT(t, 0), GW_UINT32, 1, &n, NULL, 0, &a), GW_ERANGE);
  ASSERT_CU(drv_cuMemUnmap(t.r, t.cs));
  ASSERT_TRUE(query(AT(t, 0)).extent == 0);
  ASSERT_CU(drv_cuMemAddressFree(t.r, 2 * t.cs));
  gw_context_destroy(ctx);
  return 0;
}

/* ---- pools ---- */

static void pools_require(void) {
  int ok = 0;
  ASSERT_CUDA(cudaDeviceGetAttribute(&ok, cudaDevAttrMemoryPoolsSupported, 0));
  if (!ok) TEST_SKIP("the device has no stream-ordered pools");
}

static cudaMemPool_t pool_create(int shareable) {
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  props.handleTypes = shareable ? cudaMemHandleTypePosixFileDescriptor : cudaMemHandleTypeNone;
  cudaMemPool_t pool;
  ASSERT_CUDA(cudaMemPoolCreate(&pool, &props));
  return pool;
}

/* Interior pointers report their allocation, in the default pool and a created one. */
TEST_IMPL(pool_interior) {
  setup();
  pools_require();
  cudaMemPool_t mine = pool_create(0);
  for (int k = 0; k < 2; k++) {
    TEST_CONTEXT("%s pool", k ? "created" : "default");
    char *a = NULL, *b = NULL;
    size_t na = 3 * 65536, nb = 2 * 65536;
    if (k) {
      ASSERT_CUDA(cudaMallocFromPoolAsync((void **)&a, na, mine, 0));
      ASSERT_CUDA(cudaMallocFromPoolAsync((void **)&b, nb, mine, 0));
    } else {
      ASSERT_CUDA(cudaMallocAsync((void **)&a, na, 0));
      ASSERT_CUDA(cudaMallocAsync((void **)&b, nb, 0));
    }
    ASSERT_CUDA(cudaStreamSynchronize(0));
    gw_ptrinfo i = query(a + 65536 + 100);
    ASSERT_EQ_INT(i.kind, GW_MEM_DEVICE);
    ASSERT_EQ_PTR(i.base, a);
    ASSERT_TRUE(i.extent >= na);
    ASSERT_EQ_SIZE(query(a + na - 1).extent, i.extent);
    gw_ptrinfo j = query(b + 65536 + 1);
    ASSERT_EQ_PTR(j.base, b);
    ASSERT_TRUE(j.extent >= nb);
    roundtrip(a + 8, (int64_t)((na - 8) / 4));
    roundtrip(b, (int64_t)(nb / 4));
    gw_array *arr = NULL;
    int64_t n = (int64_t)(i.extent / 4 + 1);
    ASSERT_STATUS(gw_wrap(ctx, a, GW_UINT32, 1, &n, NULL, 0, &arr), GW_ERANGE);
    ASSERT_CUDA(cudaFreeAsync(a, 0));
    ASSERT_CUDA(cudaFreeAsync(b, 0));
    ASSERT_CUDA(cudaStreamSynchronize(0));
  }
  ASSERT_CUDA(cudaMemPoolDestroy(mine));
  gw_context_destroy(ctx);
  return 0;
}

/* A free, then an allocation at the same address: the new extent, never the old one. */
TEST_IMPL(pool_reuse) {
  setup();
  pools_require();
  cudaMemPool_t pool = pool_create(0);
  uint64_t keep = UINT64_MAX; /* keep freed memory in the pool, so the address is reused */
  ASSERT_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  char *a = NULL, *c = NULL;
  size_t big = 1 << 20, small = 4096;
  ASSERT_CUDA(cudaMallocFromPoolAsync((void **)&a, big, pool, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0));
  gw_ptrinfo i = query(a + 100);
  ASSERT_EQ_PTR(i.base, a);
  size_t old = i.extent;
  ASSERT_TRUE(old >= big);
  ASSERT_CUDA(cudaFreeAsync(a, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0));
  gw_ptrinfo f = query(a + 100);
  printf("a freed pool allocation the pool keeps: %s, base %p, extent %zu\n",
         gw_memkind_name(f.kind), f.base, f.extent);
  ASSERT_TRUE(!(f.base == a && f.extent == old)); /* never the stale extent */
  ASSERT_CUDA(cudaMallocFromPoolAsync((void **)&c, small, pool, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0));
  gw_ptrinfo j = query(c);
  ASSERT_EQ_PTR(j.base, c);
  ASSERT_TRUE(j.extent >= small);
  if (c == a) {
    ASSERT_TRUE(j.extent < old);
    gw_array *arr = NULL;
    int64_t n = (int64_t)(old / 4);
    ASSERT_STATUS(gw_wrap(ctx, c, GW_UINT32, 1, &n, NULL, 0, &arr), GW_ERANGE);
  } else {
    printf("the pool gave %p, not the freed %p: the reuse case did not arise\n", (void *)c,
           (void *)a);
  }
  roundtrip(c, (int64_t)(small / 4));
  ASSERT_CUDA(cudaFreeAsync(c, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0));
  ASSERT_CUDA(cudaMemPoolDestroy(pool));
  gw_context_destroy(ctx);
  return 0;
}

/* Trimmed or destroyed, a pool's freed memory is no device memory with an extent. */
TEST_IMPL(pool_trim_destroy) {
  setup();
  pools_require();
  cudaMemPool_t pool = pool_create(0);
  uint64_t keep = UINT64_MAX;
  ASSERT_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  char *a = NULL, *b = NULL;
  ASSERT_CUDA(cudaMallocFromPoolAsync((void **)&a, 1 << 20, pool, 0));
  ASSERT_CUDA(cudaMallocFromPoolAsync((void **)&b, 1 << 20, pool, 0));
  ASSERT_CUDA(cudaFreeAsync(b, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0));
  ASSERT_CUDA(cudaMemPoolTrimTo(pool, 0));
  gw_ptrinfo t = query(b);
  printf("trimmed: %s, base %p, extent %zu\n", gw_memkind_name(t.kind), t.base, t.extent);
  ASSERT_TRUE(!(t.kind == GW_MEM_DEVICE && t.extent != 0));
  gw_ptrinfo i = query(a + 1);
  ASSERT_EQ_PTR(i.base, a);
  ASSERT_TRUE(i.extent >= (1u << 20));
  roundtrip(a, (int64_t)((1 << 20) / 4));
  ASSERT_CUDA(cudaFreeAsync(a, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0));
  ASSERT_CUDA(cudaMemPoolDestroy(pool));
  gw_ptrinfo d = query(a);
  printf("destroyed: %s, base %p, extent %zu\n", gw_memkind_name(d.kind), d.base, d.extent);
  ASSERT_TRUE(!(d.kind == GW_MEM_DEVICE && d.extent != 0));
  gw_context_destroy(ctx);
  return 0;
}

static void expect_export_refused(void *p, size_t bytes, const char *needle) {
  gw_array *a = NULL;
  int64_t n = (int64_t)bytes;
  ASSERT_OK(gw_wrap(ctx, p, GW_UINT8, 1, &n, NULL, 0, &a));
  gw_ipc_handle h;
  ASSERT_STATUS(gw_ipc_export(a, &h), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS(needle);
  gw_release(a);
}

/* Export of pool and VMM memory: GW_ENOTSUP, naming how to allocate it shareable; memory
 * of an IPC pool and shareable VMM memory export (pool_ipc_two_processes and
 * vmm_ipc_two_processes open them in another process). */
TEST_IMPL(export_refused) {
  setup();
  const int two[2] = {1, 1};
  segment s = seg_make(2, two, 0);
  expect_export_refused(AT(s, s.cs - 4), 8,
                        "requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR");
  seg_free(&s, two);
  int fd = 0;
  CUdevice dev;
  ASSERT_CU(drv_cuDeviceGet(&dev, 0));
  ASSERT_CU(drv_cuDeviceGetAttribute(
      &fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev));
  if (fd) {
    s = seg_make(2, two, 1); /* shareable VMM memory exports (vmm_ipc_two_processes) */
    gw_array *v = NULL;
    int64_t n2 = (int64_t)(2 * s.cs);
    ASSERT_OK(gw_wrap(ctx, AT(s, 0), GW_UINT8, 1, &n2, NULL, 0, &v));
    gw_ipc_handle hv;
    ASSERT_OK(gw_ipc_export(v, &hv));
    ASSERT_EQ_INT(hv.bytes[4], 3);
    ASSERT_EQ_INT(hv.bytes[239], 2); /* kind: VMM */
    gw_release(v);
    seg_free(&s, two);
  }
  pools_require();
  void *p = NULL;
  ASSERT_CUDA(cudaMallocAsync(&p, 65536, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0));
  expect_export_refused(p, 65536, "default pool never has");
  ASSERT_ERROR_MENTIONS("cudaMemHandleTypePosixFileDescriptor");
  ASSERT_CUDA(cudaFreeAsync(p, 0));
  if (fd) {
    cudaMemPool_t pool = pool_create(1);
    ASSERT_CUDA(cudaMallocFromPoolAsync(&p, 65536, pool, 0));
    ASSERT_CUDA(cudaStreamSynchronize(0));
    gw_array *a = NULL;
    int64_t n = 65536;
    ASSERT_OK(gw_wrap(ctx, p, GW_UINT8, 1, &n, NULL, 0, &a));
    gw_ipc_handle h;
    ASSERT_OK(gw_ipc_export(a, &h));
    ASSERT_EQ_INT(h.bytes[4], 3); /* pool memory's handle version */
    gw_release(a);
    ASSERT_CUDA(cudaFreeAsync(p, 0));
    ASSERT_CUDA(cudaStreamSynchronize(0));
    ASSERT_CUDA(cudaMemPoolDestroy(pool));
  }
  ASSERT_CUDA(cudaStreamSynchronize(0));
  gw_context_destroy(ctx);
  return 0;
}

/* ---- IPC between two processes: the peer (tests/ipc_peer.h) and the rounds ---- */

/* This binary again, exec'd to run helper `child` with the seed and a count n (its
 * GW_CU_SEED and GW_CU_EXTRA); `sock` (ours, left open) at TST_PEER_SOCK in it where not
 * -1. */
static peer peer_start(const char *child, uint64_t seed, int n, int sock) {
  char count[16];
  snprintf(count, sizeof count, "%d", n);
  return tst_peer_start_sock("GW_CU_", child, child, seed, count, sock);
}

/* The peer's side: its seed, and its count through *n where n is not NULL. */
static uint64_t peer_seed(int *n) {
  uint64_t seed;
  const char *extra;
  tst_peer_job("GW_CU_", &seed, &extra);
  if (n) *n = atoi(extra);
  return seed;
}

/* Skips where the device has no POSIX file descriptor handles or Yama's ptrace_scope lets
 * no process take another's descriptors (2 and more; a parent may take its child's under 0
 * and 1). */
static void ipc_require(void) {
  CUdevice dev;
  int fdtype = 0;
  ASSERT_CU(drv_cuDeviceGet(&dev, 0));
  ASSERT_CU(drv_cuDeviceGetAttribute(
      &fdtype, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev));
  if (!fdtype) TEST_SKIP("the device has no POSIX file descriptor handles");
  if (ptrace_scope() >= 2) TEST_SKIP("Yama ptrace_scope >= 2: no process may take another's fd");
}

/* An allocation of an IPC pool (float64 of `shape`), wrapped; its pointer through *p. */
static gw_array *pool_ipc_array(cudaMemPool_t pool, int ndim, const int64_t *shape, void **p) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  ASSERT_CUDA(cudaMallocFromPoolAsync(p, (size_t)n * 8, pool, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0)); /* the importer may use it only after this */
  gw_array *a = NULL;
  ASSERT_OK(gw_wrap(ctx, *p, GW_FLOAT64, ndim, shape, NULL, 0, &a));
  return a;
}
static void pool_ipc_free(gw_array *a, void *p) {
  gw_release(a);
  ASSERT_CUDA(cudaFreeAsync(p, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0));
}

/* The exporter's side of a round of pool_ipc_two_processes and vmm_ipc_two_processes: `a`
 * seeded with seed, its handle on stdout; after the importer's "go", every element must be
 * back, the importer's writes. */
static void export_round(gw_array *a, uint64_t seed, uint64_t back) {
  gw_ipc_handle h;
  tst_export_round(ctx, a, seed, &h);
  check_seeded(a, back);
}

/* The importer's side: `child`, exec'd, exports `rounds` arrays, array k seeded with
 * seed+k (a handle of version 3; VMM memory over chunks[k] chunks where chunks is given);
 * each is opened here, every element read, seed+100+k written into every element (the
 * child checks them), and released before the child frees it. */
static void import_rounds(const char *child, int rounds, const int *chunks) {
  uint64_t seed = tst_rand64() | 1;
  peer p = peer_start(child, seed, rounds, -1);
  for (int k = 0; k < rounds; k++) {
    gw_ipc_handle h;
    expect_line(p.in, "handle", &h);
    ASSERT_EQ_INT(h.bytes[4], 3); /* pool or VMM memory */
    if (chunks) {
      ASSERT_EQ_INT(h.bytes[239], 2); /* VMM memory */
      ASSERT_EQ_INT(h.bytes[240], chunks[k]);
    }
    gw_array *a = NULL;
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    ASSERT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
    check_seeded(a, seed + (uint64_t)k);
    write_seeded(a, seed + 100 + (uint64_t)k);
    ASSERT_OK(gw_synchronize(ctx));
    gw_release(a); /* cudaFree of the pointer, or synchronize, unmap, free the range */
    send_line(p.out, "go");
  }
  peer_finish(&p);
}

/* ---- IPC of an IPC pool's memory between two processes ---- */

static const int64_t POOL_SHAPE[2] = {300, 257};

/* The exporter, exec'd by pool_ipc_two_processes: an allocation of an IPC pool with seeded
 * data, exported; then freed (after the importer freed its pointer). */
static int pool_ipc_child(void) {
  uint64_t seed = peer_seed(NULL);
  setup();
  cudaMemPool_t pool = pool_create(1);
  void *p = NULL;
  gw_array *a = pool_ipc_array(pool, 2, POOL_SHAPE, &p);
  export_round(a, seed, seed + 100);
  pool_ipc_free(a, p);
  ASSERT_CUDA(cudaMemPoolDestroy(pool));
  gw_context_destroy(ctx);
  return 0;
}

/* An exec'd child allocates from an IPC pool (POSIX fd handle type) and exports; this
 * process opens the handle (pidfd_getfd of the pool's descriptor: the parent may take its
 * child's under Yama's ptrace_scope 0 and 1), reads every element, writes new data that
 * the child checks element by element. */
TEST_IMPL(pool_ipc_two_processes) {
  setup();
  pools_require();
  ipc_require();
  import_rounds("pool_ipc_child", 1, NULL);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- IPC of VMM memory (POSIX fd handle type) between two processes ---- */

/* The exporter, exec'd by vmm_ipc_two_processes: 12 shareable chunks mapped back to back;
 * an array over 2 of them, one over 3 whose first element lies in the middle chunk (rows
 * running down into the first and the last) and one over all 12 from the middle of chunk 0
 * (a manifest lists them), each exported in turn (export_round). */
static int vmm_ipc_child(void) {
  uint64_t seed = peer_seed(NULL);
  setup();
  const int twelve[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  segment s = seg_make(12, twelve, 1);
  for (int k = 0; k < 3; k++) {
    gw_array *a = NULL;
    if (k == 0) {
      int64_t n = (int64_t)(s.cs / 8);
      ASSERT_OK(gw_wrap(ctx, AT(s, s.cs / 2), GW_FLOAT64, 1, &n, NULL, 0, &a));
    } else if (k == 2) { /* 12 chunks from the middle of chunk 0: a manifest lists them */
      int64_t n = (int64_t)(11 * s.cs / 8);
      ASSERT_OK(gw_wrap(ctx, AT(s, s.cs / 2), GW_FLOAT64, 1, &n, NULL, 0, &a));
    } else {
      int64_t shape[2] = {2, (int64_t)(s.cs / 16) + 3}, strides[2] = {(int64_t)(s.cs / 8), -1};
      ASSERT_OK(gw_wrap(ctx, AT(s, s.cs + s.cs / 2), GW_FLOAT64, 2, shape, strides, 0, &a));
    }
    export_round(a, seed + (uint64_t)k, seed + 100 + (uint64_t)k);
    gw_release(a);
  }
  seg_free(&s, twelve);
  gw_context_destroy(ctx);
  return 0;
}

/* An exec'd child maps 12 shareable VMM chunks and exports an array over 2, one over 3
 * (offset in the middle chunk) and one over 12 from the middle of chunk 0 (listed in a
 * manifest, docs/IPC.md "VMM memory"); this process opens each (pidfd_getfd of each chunk's
 * descriptor, cuMemImportFromShareableHandle, reserve, map, set access), reads every
 * element, writes new data the child checks element by element, and closes (synchronize,
 * unmap, free the range); the device's free memory is back where it started. */
TEST_IMPL(vmm_ipc_two_processes) {
  setup();
  vmm_require(1);
  ipc_require();
  size_t free0 = 0, total = 0;
  ASSERT_CUDA(cudaMemGetInfo(&free0, &total));
  static const int chunks[3] = {2, 3, 12};
  import_rounds("vmm_ipc_child", 3, chunks);
  size_t free1 = 0;
  ASSERT_CUDA(cudaMemGetInfo(&free1, &total));
  ASSERT_TRUE(free1 + ((size_t)2 << 20) >= free0); /* the imports gave their memory back */
  gw_context_destroy(ctx);
  return 0;
}

/* ---- export/open/release cycles between two processes (issue 45: 10^4 of each) ---- */

/* How many: GW_TEST_IPC_CYCLES, else 10^4 (at least 3: the baseline is taken after one). */
static int cycles_wanted(void) {
  const char *e = getenv("GW_TEST_IPC_CYCLES");
  int n = e && *e ? atoi(e) : 10000;
  return n < 3 ? 3 : n;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The next "handle" line (1), or "done" (0). */
static int cycle_next(FILE *in, gw_ipc_handle *h) {
  static char line[2 * GW_IPC_HANDLE_BYTES + 64];
  for (;;) {
    ASSERT_NOT_NULL(fgets(line, sizeof line, in));
    if (strncmp(line, "done", 4) == 0) return 0;
    if (strncmp(line, "handle ", 7) == 0) break;
  }
  from_hex(line + 7, h);
  return 1;
}

/* The exporter's side of cycle i of n: `a` seeded with seed+i and exported, the handle
 * out (returned); its descriptors counted where the importer has nothing mapped (cycle 1 is
 * the baseline: the pool's descriptor, or the chunks', made by the first export); then
 * wait for "go". */
static gw_ipc_handle cycle_child_step(gw_array *a, uint64_t seed, int i, int n, int *fds1) {
  write_seeded(a, seed + (uint64_t)i);
  ASSERT_OK(gw_synchronize(ctx));
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  send_handle(stdout, &h);
  int fds = tst_open_fds();
  if (i == 1) *fds1 = fds;
  if (i == n - 1) {
    TEST_CONTEXT("exporter's descriptors after %d cycles", n);
    ASSERT_EQ_INT(fds, *fds1);
  }
  expect_line(stdin, "go", NULL);
  return h;
}

/* The importer's side: every cycle opens the handle, checks every element, releases;
 * descriptors and the device's free memory are read where the exporter holds one
 * allocation and this process maps nothing (after each handle arrives), at cycle 1 and at
 * the last, and must agree. */
static void cycles_import(const char *child, int n, const char *what) {
  uint64_t seed = tst_rand64() | 1;
  peer p = peer_start(child, seed, n, -1);
  int fds1 = -1;
  size_t free1 = 0, total = 0;
  double t0 = now_s();
  gw_ipc_handle h;
  for (int i = 0; i < n; i++) {
    ASSERT_TRUE(cycle_next(p.in, &h));
    if (i == 1 || i == n - 1) {
      size_t fr = 0;
      ASSERT_CUDA(cudaMemGetInfo(&fr, &total));
      int fds = tst_open_fds();
      if (i == 1) {
        fds1 = fds;
        free1 = fr;
      } else {
        printf("%s: %d cycles in %.1f s; descriptors %d -> %d; free memory %zu -> %zu bytes\n",
               what, n, now_s() - t0, fds1, fds, free1, fr);
        TEST_CONTEXT("%s: importer's descriptors after %d cycles", what, n);
        ASSERT_EQ_INT(fds, fds1);
        /* the driver's own bookkeeping may move by less than a granule */
        TEST_CONTEXT("%s: device free memory after %d cycles", what, n);
        ASSERT_TRUE(fr + ((size_t)2 << 20) >= free1 && free1 + ((size_t)2 << 20) >= fr);
      }
    }
    gw_array *a = NULL;
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    check_seeded(a, seed + (uint64_t)i);
    gw_release(a);
    send_line(p.out, "go");
  }
  ASSERT_TRUE(!cycle_next(p.in, &h)); /* "done": the exporter checked its own side */
  peer_finish(&p);
}

/* Pool cycles' exporter: one IPC pool; each cycle an allocation (64 KiB of float64),
 * seeded, exported, freed once the importer released it. */
static int pool_cycle_child(void) {
  int n = 0;
  uint64_t seed = peer_seed(&n);
  setup();
  int fds0 = tst_open_fds(), fds1 = -1;
  cudaMemPool_t pool = pool_create(1);
  int64_t len = 8192;
  for (int i = 0; i < n; i++) {
    void *p = NULL;
    gw_array *a = pool_ipc_array(pool, 1, &len, &p);
    cycle_child_step(a, seed, i, n, &fds1);
    pool_ipc_free(a, p);
  }
  ASSERT_CUDA(cudaMemPoolDestroy(pool));
  /* the pool's exported descriptor stays for the process's life (docs/IPC.md) */
  TEST_CONTEXT("exporter's descriptors at the start %d, after cycle 1 %d", fds0, fds1);
  ASSERT_TRUE(tst_open_fds() <= fds1);
  send_line(stdout, "done");
  gw_context_destroy(ctx);
  return 0;
}

/* GW_TEST_IPC_CYCLES (default 10^4) cycles of an IPC pool's allocation: exported by an
 * exec'd child, opened here, every element read, released; descriptors on both sides and
 * the device's free memory where they started. */
TEST_IMPL(pool_ipc_cycles) {
  setup();
  pools_require();
  ipc_require();
  cycles_import("pool_cycle_child", cycles_wanted(), "pool");
  gw_context_destroy(ctx);
  return 0;
}

/* VMM cycles' exporter: one reservation of 2 chunks' size (as PyTorch's expandable
 * segments keep theirs); each cycle 2 new shareable chunks mapped into it, an array over
 * the last 32 KiB of the first and the first 32 KiB of the second, seeded, exported;
 * unmapped once the importer released it. Re-exporting the same address as a new
 * allocation closes the old chunks' descriptors (gpu_ipc.c), so the count stays. */
static int vmm_cycle_child(void) {
  int n = 0;
  uint64_t seed = peer_seed(&n);
  setup();
  vmm_require(1);
  int fds1 = -1;
  const int none[2] = {0, 0};
  segment s = seg_make(2, none, 1);
  CUmemAllocationProp prop = vmm_prop(1);
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = 0;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  int64_t len = 8192; /* 64 KiB of float64, half in each chunk */
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < 2; k++) {
      CUmemGenericAllocationHandle hd;
      ASSERT_CU(drv_cuMemCreate(&hd, s.cs, &prop, 0));
      ASSERT_CU(drv_cuMemMap(s.r + (size_t)k * s.cs, s.cs, 0, hd, 0));
      ASSERT_CU(drv_cuMemRelease(hd));
    }
    ASSERT_CU(drv_cuMemSetAccess(s.r, 2 * s.cs, &acc, 1));
    gw_array *a = NULL;
    ASSERT_OK(gw_wrap(ctx, AT(s, s.cs - 32768), GW_FLOAT64, 1, &len, NULL, 0, &a));
    gw_ipc_handle h = cycle_child_step(a, seed, i, n, &fds1);
    ASSERT_EQ_INT(h.bytes[240], 2); /* both chunks named */
    gw_release(a);
    ASSERT_CUDA(cudaDeviceSynchronize());
    ASSERT_CU(drv_cuMemUnmap(s.r, 2 * s.cs));
  }
  ASSERT_CU(drv_cuMemAddressFree(s.r, 2 * s.cs));
  send_line(stdout, "done");
  gw_context_destroy(ctx);
  return 0;
}

/* GW_TEST_IPC_CYCLES (default 10^4) cycles of VMM memory over 2 chunks (new chunks each
 * cycle, at the same addresses): exported by an exec'd child, opened here (import,
 * reserve, map, set access), every element read, released (unmap, free the range);
 * descriptors on both sides and the device's free memory where they started. */
TEST_IMPL(vmm_ipc_cycles) {
  setup();
  vmm_require(1);
  ipc_require();
  cycles_import("vmm_cycle_child", cycles_wanted(), "vmm");
  gw_context_destroy(ctx);
  return 0;
}

/* ---- handles over a Unix socket (SCM_RIGHTS) between two processes ---- */

/* The descriptors open now, as (number, device, inode); the listing's own descriptor left
 * out (its number differs between two listings). *n of them, at most `cap`. */
typedef struct {
  int fd;
  dev_t dev;
  ino_t ino;
} open_fd;

static int list_fds(open_fd *out, int cap) {
  DIR *d = opendir("/proc/self/fd");
  ASSERT_NOT_NULL(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    struct stat st;
    if (fd == dirfd(d) || fstat(fd, &st) != 0) continue;
    ASSERT_TRUE(n < cap);
    out[n++] = (open_fd){.fd = fd, .dev = st.st_dev, .ino = st.st_ino};
  }
  closedir(d);
  return n;
}

/* The importer, exec'd by fdpass_two_processes with its socket at TST_PEER_SOCK and
 * pidfd_getfd refused (as Yama's ptrace_scope 1 refuses a child its parent's descriptors):
 * every open that works here works through the descriptors received. For each line
 * "open K N" on stdin: receive a handle (N descriptors come with it, filed), open it (the
 * received descriptors consumed: none of them is open after it), check every element
 * against seed+2K, write seed+2K+1, release, answer "done K". "refused K" opens the last
 * handle again with nothing received: pidfd_getfd's refusal, naming the socket's calls.
 * Descriptors counted around every step; each open-release leaves as many as the one
 * before of its kind ("open" lines come in pairs, K even then odd: the driver may open
 * files of its own at a first import, never at the second). */
static int fdpass_cuda_child(void) {
  uint64_t seed = peer_seed(NULL);
  setup();
  gw_cpu_ipc_force_pidfd_errno(EPERM); /* the core's call, on every backend */
  enum { CAP = 4096 };
  static open_fd before[CAP], after[CAP];
  gw_ipc_handle h;
  int have = 0, fds_prev = -1;
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    int k = -1, want = -1;
    if (sscanf(line, "refused %d", &k) == 1) {
      ASSERT_TRUE(have);
      int fds = tst_open_fds();
      gw_array *a = NULL;
      ASSERT_STATUS(gw_ipc_open(ctx, &h, &a), GW_ENOTSUP);
      ASSERT_ERROR_MENTIONS("ptrace_scope");
      ASSERT_ERROR_MENTIONS("gw_ipc_handle_recv");
      ASSERT_NULL(a);
      ASSERT_EQ_INT(tst_open_fds(), fds);
      printf("done %d\n", k);
      fflush(stdout);
      continue;
    }
    ASSERT_EQ_INT(sscanf(line, "open %d %d", &k, &want), 2);
    TEST_CONTEXT("importer, step %d", k);
    int nb = list_fds(before, CAP);
    ASSERT_OK(gw_ipc_handle_recv(TST_PEER_SOCK, &h));
    have = 1;
    int na = list_fds(after, CAP);
    ASSERT_EQ_INT(na, nb + want); /* the handle's descriptors, filed */
    open_fd got[8];
    int ngot = 0;
    for (int i = 0; i < na; i++) {
      int old = 0;
      for (int j = 0; j < nb && !old; j++) old = before[j].fd == after[i].fd;
      if (!old) {
        ASSERT_TRUE(ngot < 8);
        got[ngot++] = after[i];
      }
    }
    ASSERT_EQ_INT(ngot, want);
    gw_array *a = NULL;
    ASSERT_OK(gw_ipc_open(ctx, &h, &a));
    for (int i = 0; i < ngot; i++) { /* consumed: closed (its number maybe reused since) */
      struct stat st;
      int same = fstat(got[i].fd, &st) == 0 && st.st_dev == got[i].dev && st.st_ino == got[i].ino;
      TEST_CONTEXT("importer, step %d: received descriptor %d after the open", k, got[i].fd);
      ASSERT_TRUE(!same);
    }
    TEST_CONTEXT("importer, step %d", k);
    ASSERT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
    check_seeded(a, seed + 2 * (uint64_t)k);
    write_seeded(a, seed + 2 * (uint64_t)k + 1);
    ASSERT_OK(gw_synchronize(ctx));
    gw_release(a); /* the importer's cudaFree / unmap, before the exporter frees */
    int fds = list_fds(after, CAP);
    printf("importer step %d: descriptors %d before the receive, %d after it, %d after the "
           "release\n",
           k, nb, na, fds);
    if (k % 2) ASSERT_EQ_INT(fds, fds_prev); /* the second of a pair: nothing kept */
    fds_prev = fds;
    printf("done %d\n", k);
    fflush(stdout);
  }
  gw_context_destroy(ctx);
  return 0;
}

/* Tell the importer `cmd`, wait for its "done K". */
static void fdpass_step(peer *p, const char *cmd, int k) {
  char line[256], want[32];
  send_line(p->out, cmd);
  snprintf(want, sizeof want, "done %d\n", k);
  for (;;) { /* the importer's other lines (its descriptor counts) into this test's log */
    ASSERT_NOT_NULL(fgets(line, sizeof line, p->in));
    if (strcmp(line, want) == 0) break;
    fputs(line, stdout);
  }
  fflush(stdout);
}

/* Send `a`'s handle h twice (steps k0, k0+1: k0 even), fresh seeded data each time; the importer
 * opens each through the descriptors that come with it and writes new data, checked here
 * element by element; the sends open and close nothing here. */
static void fdpass_rounds(peer *p, int sock, gw_array *a, const gw_ipc_handle *h, int nfds,
                          uint64_t seed, int k0) {
  for (int k = k0; k < k0 + 2; k++) {
    TEST_CONTEXT("exporter, step %d", k);
    write_seeded(a, seed + 2 * (uint64_t)k);
    ASSERT_OK(gw_synchronize(ctx));
    int fds = tst_open_fds();
    ASSERT_OK(gw_ipc_handle_send(sock, h));
    ASSERT_EQ_INT(tst_open_fds(), fds);
    char cmd[32];
    snprintf(cmd, sizeof cmd, "open %d %d", k, nfds);
    fdpass_step(p, cmd, k);
    check_seeded(a, seed + 2 * (uint64_t)k + 1);
  }
  char cmd[32];
  snprintf(cmd, sizeof cmd, "refused %d", k0 + 2);
  fdpass_step(p, cmd, k0 + 2);
}

/* This process exports an IPC pool's allocation (cudaMemPoolCreate with
 * cudaMemHandleTypePosixFileDescriptor, cudaMallocFromPoolAsync) and VMM memory over 2
 * shareable chunks, and sends each handle with gw_ipc_handle_send over a socketpair to an
 * exec'd importer whose pidfd_getfd is refused: it opens them from the descriptors that
 * came with them (cudaMemPoolImportFromShareableHandle; cuMemImportFromShareableHandle per
 * chunk), reads every element, writes new data checked here element by element. Each is
 * sent twice; descriptors are counted in both processes (the importer: the handle's
 * descriptors filed at the receive, consumed by the open, nothing kept after the release). */
TEST_IMPL(fdpass_two_processes) {
  setup();
  pools_require();
  vmm_require(1); /* the POSIX fd handle type, which the pool's sharing needs as well */
  uint64_t seed = tst_rand64() | 1;
  int sv[2];
  ASSERT_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  peer pe = peer_start("fdpass_cuda_child", seed, 0, sv[1]);
  close(sv[1]);
  int fds0 = tst_open_fds();

  /* Pool memory: one descriptor (the pool's). */
  cudaMemPool_t pool = pool_create(1);
  void *p = NULL;
  gw_array *a = pool_ipc_array(pool, 2, POOL_SHAPE, &p);
  gw_ipc_handle h;
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_EQ_INT(h.bytes[4], 3); /* pool or VMM memory's handle version */
  fdpass_rounds(&pe, sv[0], a, &h, 1, seed, 0);
  pool_ipc_free(a, p);
  ASSERT_CUDA(cudaMemPoolDestroy(pool));

  /* VMM memory over 2 chunks: a descriptor for each. */
  const int two[2] = {1, 1};
  segment s = seg_make(2, two, 1);
  int64_t n = (int64_t)(s.cs / 8);
  ASSERT_OK(gw_wrap(ctx, AT(s, s.cs / 2), GW_FLOAT64, 1, &n, NULL, 0, &a));
  ASSERT_OK(gw_ipc_export(a, &h));
  ASSERT_EQ_INT(h.bytes[239], 2); /* VMM memory */
  ASSERT_EQ_INT(h.bytes[240], 2); /* of 2 chunks */
  fdpass_rounds(&pe, sv[0], a, &h, 2, seed, 4);
  gw_release(a);
  seg_free(&s, two);

  peer_finish(&pe);
  close(sv[0]);
  /* What gw_ipc_export opened stays (the pool's descriptor for the process's life, the
   * chunks' until their address is exported again: docs/IPC.md), as do the driver's own;
   * the sends opened and closed nothing (fdpass_rounds). */
  printf("exporter: descriptors %d at the start, %d at the end\n", fds0, tst_open_fds());
  gw_context_destroy(ctx);
  return 0;
}
