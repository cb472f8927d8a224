/*
 * The CUDA backend through the public API (include/gpuwrap.h), on memory the test makes
 * with the CUDA runtime itself: cudaMalloc, cudaMallocHost, cudaMallocManaged,
 * cudaMallocAsync, cudaHostRegister, pageable malloc. Every test skips (77) without a CUDA
 * device; the two-device tests skip with fewer than two. Sizes are small on purpose.
 */
#include "gpuwrap.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_assert.h"

static int ndev;
static gw_context *ctx;

/* Skip unless the CUDA backend is loadable and has `need` devices; make a device-0 context. */
static void setup(int need) {
  int n = 0;
  if (gw_backend_device_count(GW_BACKEND_CUDA, &n) != GW_OK || n < need) {
    printf("%d CUDA device(s), need %d (%s)\n", n, need, gw_last_error());
    TEST_SKIP("not enough CUDA devices");
  }
  ndev = n;
  ASSERT_OK(gw_context_create(GW_BACKEND_CUDA, 0, &ctx));
}

static int current_device(void) {
  int d = -99;
  cudaGetDevice(&d);
  return d;
}

/* test.h's generator: seeded per run, the seed printed with a failure. */
static uint32_t rnd(void) { return (uint32_t)tst_rand64(); }

static void *page_alloc(size_t bytes) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return aligned_alloc(pg, (bytes + pg - 1) / pg * pg);
}

/* ---- classification and wrap of each kind --------------------------------------------------- */

TEST_IMPL(device_memory) {
  setup(1);
  float *d = NULL;
  ASSERT_CUDA(cudaMalloc((void **)&d, 1024 * sizeof(float)));
  gw_ptrinfo pi;
  ASSERT_OK(gw_pointer_query(ctx, d, &pi));
  ASSERT_EQ_INT(pi.kind, GW_MEM_DEVICE);
  ASSERT_EQ_INT(pi.device, 0);
  ASSERT_EQ_PTR(pi.base, d);
  ASSERT_TRUE(pi.extent >= 1024 * sizeof(float));
  ASSERT_EQ_PTR(pi.device_ptr, d);
  ASSERT_EQ_PTR(pi.host_ptr, NULL);
  /* interior pointer: containing allocation's base and extent */
  ASSERT_OK(gw_pointer_query(ctx, d + 100, &pi));
  ASSERT_EQ_PTR(pi.base, d);
  ASSERT_EQ_PTR(pi.device_ptr, d + 100);

  gw_array *a = NULL;
  int64_t shape[1] = {1024};
  ASSERT_OK(gw_wrap(ctx, d, GW_FLOAT32, 1, shape, NULL, 0, &a));
  ASSERT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
  ASSERT_EQ_INT(gw_device(a), 0);
  ASSERT_EQ_PTR(gw_data(a), d);
  ASSERT_EQ_PTR(gw_host_data(a), NULL);
  ASSERT_EQ_INT(gw_owns(a), 0);
  gw_release(a);
  /* interior wrap that fits, and one that reaches past the allocation */
  int64_t fits[1] = {924}, past[1] = {1024};
  ASSERT_OK(gw_wrap(ctx, d + 100, GW_FLOAT32, 1, fits, NULL, 0, &a));
  gw_release(a);
  a = NULL;
  size_t ext = pi.extent / sizeof(float);
  past[0] = (int64_t)ext - 100 + 1; /* one element beyond the known extent */
  ASSERT_EQ_INT(gw_wrap(ctx, d + 100, GW_FLOAT32, 1, past, NULL, 0, &a), GW_ERANGE);
  ASSERT_TRUE(a == NULL);
  /* owned: release frees it (the query then no longer sees device memory) */
  ASSERT_OK(gw_wrap(ctx, d, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &a));
  ASSERT_EQ_INT(gw_owns(a), 1);
  gw_release(a);
  ASSERT_OK(gw_pointer_query(ctx, d, &pi));
  ASSERT_TRUE(pi.kind != GW_MEM_DEVICE);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(pinned_alloc) {
  setup(1);
  double *h = NULL;
  ASSERT_CUDA(cudaMallocHost((void **)&h, 512 * sizeof(double)));
  gw_ptrinfo pi;
  ASSERT_OK(gw_pointer_query(ctx, h + 3, &pi));
  ASSERT_EQ_INT(pi.kind, GW_MEM_PINNED);
  ASSERT_EQ_PTR(pi.base, h);
  ASSERT_EQ_PTR(pi.host_ptr, h + 3);
  ASSERT_TRUE(pi.device_ptr != NULL);
  ASSERT_EQ_INT(pi.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  ASSERT_EQ_INT(pi.flags & GW_PTR_HOST_REGISTERED, 0); /* CUDA cannot tell */
  void *dp = NULL;
  ASSERT_CUDA(cudaHostGetDevicePointer(&dp, h + 3, 0));
  ASSERT_EQ_PTR(pi.device_ptr, dp);
  gw_array *a = NULL;
  int64_t shape[2] = {16, 32};
  ASSERT_OK(gw_wrap(ctx, h, GW_FLOAT64, 2, shape, NULL, GW_WRAP_OWN, &a));
  ASSERT_EQ_INT(gw_kind(a), GW_MEM_PINNED);
  ASSERT_EQ_PTR(gw_host_data(a), h);
  double v = 2.5;
  ASSERT_OK(gw_fill(a, &v)); /* a GPU fill, seen by the host on return */
  for (int i = 0; i < 512; i++)
    if (h[i] != 2.5) {
      TST_FAIL("h[%d] = %g after fill", i, h[i]);
      break;
    }
  gw_release(a); /* cudaFreeHost */
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(managed) {
  setup(1);
  int32_t *m = NULL;
  ASSERT_CUDA(cudaMallocManaged((void **)&m, 4096 * sizeof(int32_t), cudaMemAttachGlobal));
  gw_ptrinfo pi;
  ASSERT_OK(gw_pointer_query(ctx, m + 7, &pi));
  ASSERT_EQ_INT(pi.kind, GW_MEM_MANAGED);
  ASSERT_EQ_PTR(pi.base, m);
  ASSERT_EQ_PTR(pi.device_ptr, m + 7);
  ASSERT_EQ_PTR(pi.host_ptr, m + 7);
  gw_array *a = NULL;
  int64_t shape[1] = {4096};
  ASSERT_OK(gw_wrap(ctx, m, GW_INT32, 1, shape, NULL, GW_WRAP_OWN, &a));
  ASSERT_EQ_PTR(gw_host_data(a), m);
  ASSERT_EQ_PTR(gw_data(a), m);
  int32_t v = -7;
  ASSERT_OK(gw_fill(a, &v));
  for (int i = 0; i < 4096; i++)
    if (m[i] != -7) {
      TST_FAIL("m[%d] = %d after fill", i, m[i]);
      break;
    }
  gw_release(a); /* cudaFree */
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(malloc_async) {
  setup(1);
  void *p = NULL;
  ASSERT_CUDA(cudaMallocAsync(&p, 8192, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0));
  gw_ptrinfo pi;
  ASSERT_OK(gw_pointer_query(ctx, (char *)p + 8, &pi));
  ASSERT_EQ_INT(pi.kind, GW_MEM_DEVICE);
  ASSERT_EQ_INT(pi.device, 0);
  ASSERT_EQ_PTR(pi.base, p);
  ASSERT_TRUE(pi.extent >= 8192);
  gw_array *a = NULL;
  int64_t shape[1] = {1024};
  ASSERT_OK(gw_wrap(ctx, p, GW_UINT64, 1, shape, NULL, 0, &a));
  uint64_t v = 0x0123456789abcdefull;
  ASSERT_OK(gw_fill(a, &v));
  gw_release(a);
  uint64_t back[1024];
  ASSERT_CUDA(cudaMemcpy(back, p, sizeof back, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 1024; i++)
    if (back[i] != v) {
      TST_FAIL("back[%d] = %llx", i, (unsigned long long)back[i]);
      break;
    }
  ASSERT_CUDA(cudaFreeAsync(p, 0)); /* not owned: still ours */
  ASSERT_CUDA(cudaStreamSynchronize(0));
  /* owned: gpuwrap frees stream-ordered memory with cudaFree */
  ASSERT_CUDA(cudaMallocAsync(&p, 8192, 0));
  ASSERT_CUDA(cudaStreamSynchronize(0));
  ASSERT_OK(gw_wrap(ctx, p, GW_UINT64, 1, shape, NULL, GW_WRAP_OWN, &a));
  gw_release(a);
  ASSERT_EQ_INT(cudaGetLastError(), cudaSuccess);
  gw_context_destroy(ctx);
  return 0;
}

/* Memory the caller registered: used, never unregistered by gpuwrap. */
TEST_IMPL(registered_foreign) {
  setup(1);
  size_t bytes = 4 * (size_t)sysconf(_SC_PAGESIZE);
  float *h = page_alloc(bytes);
  ASSERT_TRUE(h != NULL);
  ASSERT_CUDA(cudaHostRegister(h, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  gw_ptrinfo pi;
  ASSERT_OK(gw_pointer_query(ctx, h, &pi));
  ASSERT_EQ_INT(pi.kind, GW_MEM_PINNED);
  ASSERT_EQ_INT(pi.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)(bytes / sizeof(float))};
  ASSERT_OK(gw_wrap(ctx, h, GW_FLOAT32, 1, shape, NULL, 0, &a));
  ASSERT_EQ_INT(gw_kind(a), GW_MEM_PINNED);
  float v = 1.5f;
  ASSERT_OK(gw_fill(a, &v));
  ASSERT_TRUE(h[0] == 1.5f && h[shape[0] - 1] == 1.5f);
  gw_release(a);
  /* OWN: CUDA cannot tell registered from allocated pinned memory, so the wrap is taken;
   * its cudaFreeHost fails harmlessly at release and the registration stays. */
  gw_status s = gw_wrap(ctx, h, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &a);
  ASSERT_TRUE(s == GW_OK || s == GW_EINVAL);
  if (s == GW_OK) gw_release(a);
  (void)cudaGetLastError();
  /* still registered by us: our unregister succeeds exactly once */
  ASSERT_CUDA(cudaHostUnregister(h));
  free(h);
  gw_context_destroy(ctx);
  return 0;
}

/* Pageable memory: wrap registers (flag GW_PTR_GPUWRAP_REGISTERED), release unregisters. */
TEST_IMPL(pageable_register) {
  setup(1);
  size_t bytes = 3 * (size_t)sysconf(_SC_PAGESIZE);
  int32_t *h = page_alloc(bytes);
  ASSERT_TRUE(h != NULL);
  memset(h, 0, bytes);
  gw_ptrinfo pi;
  ASSERT_OK(gw_pointer_query(ctx, h, &pi));
  ASSERT_EQ_INT(pi.kind, GW_MEM_HOST);
  ASSERT_EQ_INT(pi.device, -1);
  ASSERT_EQ_PTR(pi.host_ptr, h);
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)(bytes / sizeof(int32_t))};
  ASSERT_OK(gw_wrap(ctx, h, GW_INT32, 1, shape, NULL, 0, &a));
  ASSERT_TRUE(gw_data(a) != NULL);
  ASSERT_OK(gw_pointer_query(ctx, h + 5, &pi));
  ASSERT_EQ_INT(pi.kind, GW_MEM_PINNED);
  ASSERT_TRUE((pi.flags & GW_PTR_GPUWRAP_REGISTERED) != 0);
  /* a fill of the wrapped pageable array is seen by the host */
  int32_t v = 0x5a5a1234;
  ASSERT_OK(gw_fill(a, &v));
  for (int64_t i = 0; i < shape[0]; i++)
    if (h[i] != v) {
      TST_FAIL("h[%lld] = %x", (long long)i, (unsigned)h[i]);
      break;
    }
  gw_release(a);
  ASSERT_OK(gw_pointer_query(ctx, h, &pi));
  ASSERT_EQ_INT(pi.kind, GW_MEM_HOST);
  ASSERT_EQ_INT(pi.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  struct cudaPointerAttributes at;
  ASSERT_CUDA(cudaPointerGetAttributes(&at, h));
  ASSERT_EQ_INT(at.type, cudaMemoryTypeUnregistered);
  free(h);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- fills and copies -------------------------------------------------------------------------- */

/* Fill every element size (1, 2, 4, 8, 16 bytes) on device memory: whole array from an odd
 * offset (unaligned head/tail of the vectorised fill) and a strided view. */
TEST_IMPL(fill_sizes) {
  setup(1);
  static const gw_dtype types[5] = {GW_UINT8, GW_UINT16, GW_UINT32, GW_UINT64, GW_COMPLEX128};
  enum { N = 1000 };
  for (int t = 0; t < 5; t++) {
    size_t es = gw_dtype_size(types[t]);
    unsigned char *d = NULL, *back = malloc(N * es), val[16];
    ASSERT_TRUE(back != NULL);
    ASSERT_CUDA(cudaMalloc((void **)&d, N * es));
    ASSERT_CUDA(cudaMemset(d, 0, N * es));
    for (size_t i = 0; i < es; i++) val[i] = (unsigned char)(0x11 * (i + 1) + t);
    gw_array *a = NULL, *v = NULL;
    int64_t shape[1] = {N - 1};
    ASSERT_OK(gw_wrap(ctx, d + es, types[t], 1, shape, NULL, 0, &a)); /* elements 1 .. N-1 */
    ASSERT_OK(gw_fill(a, val));
    ASSERT_CUDA(cudaMemcpy(back, d, N * es, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < es; i++) ASSERT_EQ_INT(back[i], 0); /* element 0 untouched */
    for (int i = 1; i < N; i++)
      if (memcmp(back + i * es, val, es) != 0) {
        TST_FAIL("elem size %zu: element %d not filled", es, i);
        break;
      }
    /* every third element of the view gets the value with its bytes reversed */
    unsigned char rev[16];
    for (size_t i = 0; i < es; i++) rev[i] = val[es - 1 - i];
    int64_t start[1] = {0}, vshape[1] = {(N - 1 + 2) / 3}, step[1] = {3};
    ASSERT_OK(gw_view(a, start, vshape, step, &v));
    ASSERT_OK(gw_fill(v, rev));
    ASSERT_CUDA(cudaMemcpy(back, d, N * es, cudaMemcpyDeviceToHost));
    for (int i = 1; i < N; i++) {
      const unsigned char *want = ((i - 1) % 3 == 0) ? rev : val;
      if (memcmp(back + i * es, want, es) != 0) {
        TST_FAIL("elem size %zu: strided fill wrong at element %d", es, i);
        break;
      }
    }
    gw_release(v);
    gw_release(a);
    ASSERT_CUDA(cudaFree(d));
    free(back);
  }
  gw_context_destroy(ctx);
  return 0;
}

/* A fill large enough for the one-store-per-thread grid (kernels.cu, from 64 MiB of device
 * memory): a float64 value whose halves differ (no memset can write it), on poisoned
 * memory; every element is checked and the two neighbours stay untouched. The array starts
 * 8 bytes into a 16-byte word (k_fill_contig's head) and has an even count of elements, so
 * its last 8 bytes are a tail too (an odd count would end on a word boundary). Then the
 * same at 16 MiB, the resident grid. */
TEST_IMPL(fill_large) {
  setup(1);
  static const int64_t sizes[2] = {((int64_t)64 << 20) / 8 + 130, ((int64_t)16 << 20) / 8 + 4};
  for (int k = 0; k < 2; k++) {
    int64_t n = sizes[k]; /* elements of the buffer; the array is [1, n - 1), n - 2 even */
    uint64_t *h = malloc((size_t)n * 8), *back = malloc((size_t)n * 8), *d = NULL;
    ASSERT_TRUE(h && back);
    for (int64_t i = 0; i < n; i++) h[i] = (uint64_t)rnd() << 32 | rnd();
    ASSERT_CUDA(cudaMalloc((void **)&d, (size_t)n * 8));
    ASSERT_CUDA(cudaMemcpy(d, h, (size_t)n * 8, cudaMemcpyHostToDevice));
    uint64_t val;
    do val = (uint64_t)rnd() << 32 | rnd();
    while ((uint32_t)val == (uint32_t)(val >> 32));
    double dv;
    memcpy(&dv, &val, 8);
    gw_array *a = NULL;
    int64_t shape[1] = {n - 2};
    ASSERT_OK(gw_wrap(ctx, d + 1, GW_FLOAT64, 1, shape, NULL, 0, &a));
    ASSERT_OK(gw_fill(a, &dv));
    memset(back, 0xA5, (size_t)n * 8);
    ASSERT_CUDA(cudaMemcpy(back, d, (size_t)n * 8, cudaMemcpyDeviceToHost));
    ASSERT_TRUE(back[0] == h[0]);
    ASSERT_TRUE(back[n - 1] == h[n - 1]);
    for (int64_t i = 1; i < n - 1; i++)
      if (back[i] != val) {
        TST_FAIL("%lld-element fill: [%lld] = %016llx, want %016llx", (long long)(n - 2),
                 (long long)i, (unsigned long long)back[i], (unsigned long long)val);
        break;
      }
    gw_release(a);
    ASSERT_CUDA(cudaFree(d));
    free(h);
    free(back);
  }
  gw_context_destroy(ctx);
  return 0;
}

/* Host <-> device with random data, every element checked: contiguous, 3-D views (pitched
 * DMA or kernels), and column-major complex128 against row-major. */
TEST_IMPL(copy_roundtrip) {
  setup(1);
  enum { X = 37, Y = 29, Z = 23 };
  int64_t n = (int64_t)X * Y * Z, shape[3] = {X, Y, Z};
  uint32_t *h = malloc(n * 4), *h2 = malloc(n * 4);
  ASSERT_TRUE(h && h2);
  for (int64_t i = 0; i < n; i++) h[i] = rnd();
  gw_array *hs = NULL, *hd = NULL, *dv = NULL;
  ASSERT_OK(gw_wrap(ctx, h, GW_UINT32, 3, shape, NULL, 0, &hs));
  ASSERT_OK(gw_wrap(ctx, h2, GW_UINT32, 3, shape, NULL, 0, &hd));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 3, shape, &dv));
  ASSERT_OK(gw_copy(dv, hs));
  memset(h2, 0, n * 4);
  ASSERT_OK(gw_copy(hd, dv));
  for (int64_t i = 0; i < n; i++)
    if (h2[i] != h[i]) {
      TST_FAIL("contiguous roundtrip: [%lld] %u != %u", (long long)i, h2[i], h[i]);
      break;
    }
  /* sub-block views: [3:3+20, 2:2+17, 5:5+11] of host into the same block of device, back */
  int64_t st[3] = {3, 2, 5}, sh[3] = {20, 17, 11};
  gw_array *hv = NULL, *dvv = NULL, *hv2 = NULL;
  ASSERT_OK(gw_view(hs, st, sh, NULL, &hv));
  ASSERT_OK(gw_view(dv, st, sh, NULL, &dvv));
  ASSERT_OK(gw_view(hd, st, sh, NULL, &hv2));
  for (int64_t i = 0; i < n; i++) h[i] = rnd();
  memset(h2, 0, n * 4);
  ASSERT_OK(gw_copy(dvv, hv));
  ASSERT_OK(gw_copy(hv2, dvv));
  for (int64_t x = 0; x < X; x++)
    for (int64_t y = 0; y < Y; y++)
      for (int64_t z = 0; z < Z; z++) {
        int64_t i = (x * Y + y) * Z + z;
        int in = x >= 3 && x < 23 && y >= 2 && y < 19 && z >= 5 && z < 16;
        uint32_t want = in ? h[i] : 0;
        if (h2[i] != want) {
          TST_FAIL("3-D view roundtrip: (%lld,%lld,%lld) %u != %u", (long long)x, (long long)y,
                   (long long)z, h2[i], want);
          x = X, y = Y, z = Z;
        }
      }
  gw_release(hv);
  gw_release(dvv);
  gw_release(hv2);
  /* complex128, column-major host (Fortran) <-> row-major device: a transposing copy */
  enum { R = 45, C = 31 };
  double *zc = malloc(sizeof(double) * 2 * R * C), *zb = calloc(2 * R * C, sizeof(double));
  ASSERT_TRUE(zc && zb);
  for (int i = 0; i < 2 * R * C; i++) zc[i] = (double)rnd();
  int64_t zs[2] = {R, C}, colmajor[2] = {1, R};
  gw_array *zh = NULL, *zd = NULL, *zh2 = NULL;
  ASSERT_OK(gw_wrap(ctx, zc, GW_COMPLEX128, 2, zs, colmajor, 0, &zh));
  ASSERT_OK(gw_wrap(ctx, zb, GW_COMPLEX128, 2, zs, colmajor, 0, &zh2));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_COMPLEX128, 2, zs, &zd));
  ASSERT_OK(gw_copy(zd, zh));
  ASSERT_OK(gw_copy(zh2, zd));
  ASSERT_EQ_INT(memcmp(zc, zb, sizeof(double) * 2 * R * C), 0);
  /* and the device copy is row-major: element (r, c) at r*C + c */
  double *zr = malloc(sizeof(double) * 2 * R * C);
  ASSERT_TRUE(zr != NULL);
  ASSERT_CUDA(cudaMemcpy(zr, gw_data(zd), sizeof(double) * 2 * R * C, cudaMemcpyDeviceToHost));
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++)
      if (memcmp(zr + 2 * (r * C + c), zc + 2 * (c * R + r), 16) != 0) {
        TST_FAIL("transposed complex128 (%d,%d)", r, c);
        r = R, c = C;
      }
  gw_release(zh);
  gw_release(zh2);
  gw_release(zd);
  free(zc);
  free(zb);
  free(zr);
  gw_release(hs);
  gw_release(hd);
  gw_release(dv);
  free(h);
  free(h2);
  gw_context_destroy(ctx);
  return 0;
}

/* No operation changes the caller's current device. With two devices the caller sits on
 * device 1 while using a device-0 context. */
TEST_IMPL(current_device) {
  setup(1);
  int mine = ndev > 1 ? 1 : 0;
  ASSERT_CUDA(cudaSetDevice(mine));
#define SAME() ASSERT_EQ_INT(current_device(), mine)
  float *d = NULL, *h = NULL;
  ASSERT_CUDA(cudaSetDevice(0));
  ASSERT_CUDA(cudaMalloc((void **)&d, 256 * sizeof(float)));
  ASSERT_CUDA(cudaSetDevice(mine));
  size_t bytes = (size_t)sysconf(_SC_PAGESIZE);
  h = page_alloc(bytes);
  ASSERT_TRUE(h != NULL);
  gw_ptrinfo pi;
  ASSERT_OK(gw_pointer_query(ctx, d, &pi));
  SAME();
  ASSERT_EQ_INT(pi.device, 0);
  gw_array *a = NULL, *b = NULL, *c = NULL;
  int64_t shape[1] = {256};
  ASSERT_OK(gw_wrap(ctx, d, GW_FLOAT32, 1, shape, NULL, 0, &a));
  SAME();
  ASSERT_OK(gw_wrap(ctx, h, GW_FLOAT32, 1, shape, NULL, 0, &b)); /* registers */
  SAME();
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 1, shape, &c));
  SAME();
  float v = 3.0f;
  ASSERT_OK(gw_fill(a, &v));
  SAME();
  ASSERT_OK(gw_copy(c, a));
  SAME();
  ASSERT_OK(gw_copy(b, c));
  SAME();
  ASSERT_TRUE(h[0] == 3.0f && h[255] == 3.0f);
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  SAME();
  ASSERT_OK(gw_fill_async(c, &v, s));
  SAME();
  ASSERT_OK(gw_stream_synchronize(s));
  gw_stream_destroy(s);
  SAME();
  ASSERT_OK(gw_synchronize(ctx));
  SAME();
  gw_release(c); /* cudaFree on device 0 */
  SAME();
  gw_release(b); /* unregister */
  SAME();
  gw_release(a);
  gw_context_destroy(ctx);
  SAME();
#undef SAME
  ASSERT_CUDA(cudaFree(d));
  free(h);
  return 0;
}

/* Device 1's memory seen from a device-0 context, and copies between the devices. */
TEST_IMPL(two_devices) {
  setup(2);
  enum { N = 100000 };
  uint32_t *d1 = NULL, *h = malloc(N * 4), *back = malloc(N * 4);
  ASSERT_TRUE(h && back);
  ASSERT_CUDA(cudaSetDevice(1));
  ASSERT_CUDA(cudaMalloc((void **)&d1, N * 4));
  ASSERT_CUDA(cudaSetDevice(0));
  gw_ptrinfo pi;
  ASSERT_OK(gw_pointer_query(ctx, d1 + 10, &pi));
  ASSERT_EQ_INT(pi.kind, GW_MEM_DEVICE);
  ASSERT_EQ_INT(pi.device, 1);
  ASSERT_EQ_PTR(pi.base, d1);
  gw_array *a1 = NULL, *a0 = NULL, *hh = NULL;
  int64_t shape[1] = {N};
  ASSERT_OK(gw_wrap(ctx, d1, GW_UINT32, 1, shape, NULL, 0, &a1));
  ASSERT_EQ_INT(gw_device(a1), 1);
  ASSERT_EQ_INT(gw_context_device(gw_array_context(a1)), 0);
  for (int i = 0; i < N; i++) h[i] = rnd();
  ASSERT_OK(gw_wrap(ctx, h, GW_UINT32, 1, shape, NULL, 0, &hh));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &a0));
  ASSERT_OK(gw_copy(a0, hh)); /* host -> device 0 */
  ASSERT_OK(gw_copy(a1, a0)); /* device 0 -> device 1 */
  ASSERT_EQ_INT(current_device(), 0);
  ASSERT_CUDA(cudaMemcpy(back, d1, N * 4, cudaMemcpyDeviceToHost));
  ASSERT_EQ_INT(memcmp(back, h, N * 4), 0);
  /* strided: every other element of device 1 into the first half of device 0 */
  gw_array *v1 = NULL, *v0 = NULL;
  int64_t st[1] = {0}, vs[1] = {N / 2}, step[1] = {2};
  ASSERT_OK(gw_view(a1, st, vs, step, &v1));
  ASSERT_OK(gw_view(a0, st, vs, NULL, &v0));
  uint32_t zero = 0;
  ASSERT_OK(gw_fill(a0, &zero));
  ASSERT_OK(gw_copy(v0, v1));
  ASSERT_CUDA(cudaMemcpy(back, gw_data(a0), N * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < N / 2; i++)
    if (back[i] != h[2 * i]) {
      TST_FAIL("strided device1->device0 [%d] %u != %u", i, back[i], h[2 * i]);
      break;
    }
  gw_release(v0);
  gw_release(v1);
  gw_release(a0);
  gw_release(a1);
  gw_release(hh);
  ASSERT_CUDA(cudaSetDevice(1));
  ASSERT_CUDA(cudaFree(d1));
  ASSERT_CUDA(cudaSetDevice(0));
  free(h);
  free(back);
  gw_context_destroy(ctx);
  return 0;
}

/* The driver calls of the context tests, from libcuda.so.1 at run time: linking it would
 * keep the whole test binary from starting (rather than skipping) without a driver. */
#if CUDA_VERSION >= 12050 /* cuCtxCreate_v4 and CUctxCreateParams */
typedef CUresult (*pfn_DeviceGet)(CUdevice *, int);
typedef CUresult (*pfn_CtxCreate)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice);
typedef CUresult (*pfn_CtxCurrent)(CUcontext *);
typedef CUresult (*pfn_CtxDestroy)(CUcontext);
static struct {
  pfn_DeviceGet DeviceGet;
  pfn_CtxCreate CtxCreate;
  pfn_CtxCurrent CtxGetCurrent;
  pfn_CtxDestroy CtxDestroy;
} drv;
static int load_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return 0;
  /* through a void * (ISO C has no object-to-function pointer conversion; POSIX's dlsym
   * promises this works) */
  *(void **)&drv.DeviceGet = dlsym(h, "cuDeviceGet");
  *(void **)&drv.CtxCreate = dlsym(h, "cuCtxCreate_v4");
  *(void **)&drv.CtxGetCurrent = dlsym(h, "cuCtxGetCurrent");
  *(void **)&drv.CtxDestroy = dlsym(h, "cuCtxDestroy_v2");
  return drv.DeviceGet && drv.CtxCreate && drv.CtxGetCurrent && drv.CtxDestroy;
}
#define CKD(x)                                  \
  do {                                          \
    CUresult r_ = (x);                          \
    if (r_ != CUDA_SUCCESS) {                   \
      TST_FAIL("%s: CUresult %d", #x, (int)r_); \
    }                                           \
  } while (0)

/* A thread in a context of its own (cuCtxCreate, as PyCUDA's make_context) on device
 * `dev` uses a device-0 gpuwrap context: memory, a fill, copies both ways, a stream. After
 * every call the thread's own context is current again, exactly, and every element is
 * right. On device 1 (two GPUs) each call switches to device 0 and back (cudaSetDevice
 * alone would leave device 1's primary context current); on device 0 nothing is switched
 * and the work runs in the caller's context, memory included (docs/API.md). */
static int own_context_on(int dev) {
  if (!load_driver()) {
    gw_context_destroy(ctx);
    TEST_SKIP("libcuda.so.1 without cuCtxCreate_v4");
  }
  CUdevice d;
  CUcontext own = NULL, cur = NULL;
  CUctxCreateParams params;
  memset(&params, 0, sizeof params); /* a regular context */
  CKD(drv.DeviceGet(&d, dev));
  CKD(drv.CtxCreate(&own, &params, 0, d)); /* current now */
#define OWN_CURRENT()             \
  do {                            \
    CKD(drv.CtxGetCurrent(&cur)); \
    ASSERT_TRUE(cur == own);      \
  } while (0)
  enum { N = 4096 };
  int64_t shape[1] = {N};
  gw_array *a = NULL, *h = NULL, *b = NULL;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 1, shape, &a));
  OWN_CURRENT();
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 1, shape, &b));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT32, 1, shape, &h));
  OWN_CURRENT();
  float v = (float)(rnd() % 1000) + 0.5f, *hp = gw_host_data(h);
  ASSERT_OK(gw_fill(a, &v));
  OWN_CURRENT();
  ASSERT_OK(gw_copy(b, a));
  OWN_CURRENT();
  for (int i = 0; i < N; i++) hp[i] = -1.0f; /* poison */
  ASSERT_OK(gw_copy(h, b));
  OWN_CURRENT();
  for (int i = 0; i < N; i++)
    if (hp[i] != v) {
      TST_FAIL("element %d: %g, want %g", i, (double)hp[i], (double)v);
    }
  for (int i = 0; i < N; i++) hp[i] = (float)(rnd() % 4096);
  ASSERT_OK(gw_copy(a, h));
  gw_stream *s = NULL;
  ASSERT_OK(gw_stream_create(ctx, &s));
  OWN_CURRENT();
  float *back = malloc(N * sizeof *back);
  ASSERT_TRUE(back != NULL);
  memcpy(back, hp, N * sizeof *back);
  for (int i = 0; i < N; i++) hp[i] = -1.0f;
  ASSERT_OK(gw_copy_async(h, a, s));
  ASSERT_OK(gw_stream_synchronize(s));
  OWN_CURRENT();
  ASSERT_TRUE(memcmp(hp, back, N * sizeof *back) == 0);
  free(back);
  gw_stream_destroy(s);
  gw_release(h);
  gw_release(b);
  gw_release(a);
  OWN_CURRENT();
  CKD(drv.CtxDestroy(own));
  gw_context_destroy(ctx);
  return 0;
}
#else
static int own_context_on(int dev) {
  (void)dev;
  gw_context_destroy(ctx);
  TEST_SKIP("CUDA < 12.5 (no cuCtxCreate_v4)");
}
#endif

TEST_IMPL(caller_context) {
  setup(2);
  return own_context_on(1);
}

TEST_IMPL(own_context) {
  setup(1);
  return own_context_on(0);
}
