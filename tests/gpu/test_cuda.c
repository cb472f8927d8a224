/*
 * The CUDA backend through the public API (include/gpuwrap.h), on memory the test makes
 * with the CUDA runtime itself: cudaMalloc, cudaMallocHost, cudaMallocManaged,
 * cudaMallocAsync, cudaHostRegister, pageable malloc. Every test skips (77) without a CUDA
 * device; the two-device tests skip with fewer than two. Sizes are small on purpose.
 */
#include "gpuwrap.h"
#include "gwt.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gwt_cuda.h"

static int ndev;
static gw_context *ctx;

/* Skip unless the CUDA backend is loadable and has `need` devices; make a device-0 context. */
static int setup(int need) {
  int n = 0;
  if (gw_backend_device_count(GW_BACKEND_CUDA, &n) != GW_OK || n < need) {
    fprintf(stderr, "skip: %d CUDA device(s), need %d (%s)\n", n, need, gw_last_error());
    return GWT_SKIP;
  }
  ndev = n;
  if (gw_context_create(GW_BACKEND_CUDA, 0, &ctx) != GW_OK) {
    GWT_FAIL_("gw_context_create(CUDA, 0): %s", gw_last_error());
    return 1;
  }
  return 0;
}
#define SETUP(need)                                                                        \
  do {                                                                                     \
    int r_ = setup(need);                                                                  \
    if (r_)                                                                                \
      return r_;                                                                           \
  } while (0)

static int current_device(void) {
  int d = -99;
  cudaGetDevice(&d);
  return d;
}

static uint32_t rng = 12345;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 17;
  rng ^= rng << 5;
  return rng;
}

static void *page_alloc(size_t bytes) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return aligned_alloc(pg, (bytes + pg - 1) / pg * pg);
}

/* ---- classification and wrap of each kind --------------------------------------------------- */

static int test_device_memory(void) {
  SETUP(1);
  float *d = NULL;
  CK(cudaMalloc((void **)&d, 1024 * sizeof(float)));
  gw_ptrinfo pi;
  GW_OK_(gw_pointer_query(ctx, d, &pi));
  EXPECT_EQ_INT(pi.kind, GW_MEM_DEVICE);
  EXPECT_EQ_INT(pi.device, 0);
  EXPECT_EQ_PTR(pi.base, d);
  EXPECT_TRUE(pi.extent >= 1024 * sizeof(float));
  EXPECT_EQ_PTR(pi.device_ptr, d);
  EXPECT_EQ_PTR(pi.host_ptr, NULL);
  /* interior pointer: containing allocation's base and extent */
  GW_OK_(gw_pointer_query(ctx, d + 100, &pi));
  EXPECT_EQ_PTR(pi.base, d);
  EXPECT_EQ_PTR(pi.device_ptr, d + 100);

  gw_array *a = NULL;
  int64_t shape[1] = {1024};
  GW_OK_(gw_wrap(ctx, d, GW_FLOAT32, 1, shape, NULL, 0, &a));
  EXPECT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
  EXPECT_EQ_INT(gw_device(a), 0);
  EXPECT_EQ_PTR(gw_data(a), d);
  EXPECT_EQ_PTR(gw_host_data(a), NULL);
  EXPECT_EQ_INT(gw_owns(a), 0);
  gw_release(a);
  /* interior wrap that fits, and one that reaches past the allocation */
  int64_t fits[1] = {924}, past[1] = {1024};
  GW_OK_(gw_wrap(ctx, d + 100, GW_FLOAT32, 1, fits, NULL, 0, &a));
  gw_release(a);
  a = NULL;
  size_t ext = pi.extent / sizeof(float);
  past[0] = (int64_t)ext - 100 + 1; /* one element beyond the known extent */
  EXPECT_EQ_INT(gw_wrap(ctx, d + 100, GW_FLOAT32, 1, past, NULL, 0, &a), GW_ERANGE);
  EXPECT_TRUE(a == NULL);
  /* owned: release frees it (the query then no longer sees device memory) */
  GW_OK_(gw_wrap(ctx, d, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &a));
  EXPECT_EQ_INT(gw_owns(a), 1);
  gw_release(a);
  GW_OK_(gw_pointer_query(ctx, d, &pi));
  EXPECT_TRUE(pi.kind != GW_MEM_DEVICE);
  gw_context_destroy(ctx);
  return 0;
}

static int test_pinned_alloc(void) {
  SETUP(1);
  double *h = NULL;
  CK(cudaMallocHost((void **)&h, 512 * sizeof(double)));
  gw_ptrinfo pi;
  GW_OK_(gw_pointer_query(ctx, h + 3, &pi));
  EXPECT_EQ_INT(pi.kind, GW_MEM_PINNED);
  EXPECT_EQ_PTR(pi.base, h);
  EXPECT_EQ_PTR(pi.host_ptr, h + 3);
  EXPECT_TRUE(pi.device_ptr != NULL);
  EXPECT_EQ_INT(pi.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  EXPECT_EQ_INT(pi.flags & GW_PTR_HOST_REGISTERED, 0); /* CUDA cannot tell */
  void *dp = NULL;
  CK(cudaHostGetDevicePointer(&dp, h + 3, 0));
  EXPECT_EQ_PTR(pi.device_ptr, dp);
  gw_array *a = NULL;
  int64_t shape[2] = {16, 32};
  GW_OK_(gw_wrap(ctx, h, GW_FLOAT64, 2, shape, NULL, GW_WRAP_OWN, &a));
  EXPECT_EQ_INT(gw_kind(a), GW_MEM_PINNED);
  EXPECT_EQ_PTR(gw_host_data(a), h);
  double v = 2.5;
  GW_OK_(gw_fill(a, &v)); /* a GPU fill, seen by the host on return */
  for (int i = 0; i < 512; i++)
    if (h[i] != 2.5) {
      GWT_FAIL_("h[%d] = %g after fill", i, h[i]);
      break;
    }
  gw_release(a); /* cudaFreeHost */
  gw_context_destroy(ctx);
  return 0;
}

static int test_managed(void) {
  SETUP(1);
  int32_t *m = NULL;
  CK(cudaMallocManaged((void **)&m, 4096 * sizeof(int32_t), cudaMemAttachGlobal));
  gw_ptrinfo pi;
  GW_OK_(gw_pointer_query(ctx, m + 7, &pi));
  EXPECT_EQ_INT(pi.kind, GW_MEM_MANAGED);
  EXPECT_EQ_PTR(pi.base, m);
  EXPECT_EQ_PTR(pi.device_ptr, m + 7);
  EXPECT_EQ_PTR(pi.host_ptr, m + 7);
  gw_array *a = NULL;
  int64_t shape[1] = {4096};
  GW_OK_(gw_wrap(ctx, m, GW_INT32, 1, shape, NULL, GW_WRAP_OWN, &a));
  EXPECT_EQ_PTR(gw_host_data(a), m);
  EXPECT_EQ_PTR(gw_data(a), m);
  int32_t v = -7;
  GW_OK_(gw_fill(a, &v));
  for (int i = 0; i < 4096; i++)
    if (m[i] != -7) {
      GWT_FAIL_("m[%d] = %d after fill", i, m[i]);
      break;
    }
  gw_release(a); /* cudaFree */
  gw_context_destroy(ctx);
  return 0;
}

static int test_malloc_async(void) {
  SETUP(1);
  void *p = NULL;
  CK(cudaMallocAsync(&p, 8192, 0));
  CK(cudaStreamSynchronize(0));
  gw_ptrinfo pi;
  GW_OK_(gw_pointer_query(ctx, (char *)p + 8, &pi));
  EXPECT_EQ_INT(pi.kind, GW_MEM_DEVICE);
  EXPECT_EQ_INT(pi.device, 0);
  EXPECT_EQ_PTR(pi.base, p);
  EXPECT_TRUE(pi.extent >= 8192);
  gw_array *a = NULL;
  int64_t shape[1] = {1024};
  GW_OK_(gw_wrap(ctx, p, GW_UINT64, 1, shape, NULL, 0, &a));
  uint64_t v = 0x0123456789abcdefull;
  GW_OK_(gw_fill(a, &v));
  gw_release(a);
  uint64_t back[1024];
  CK(cudaMemcpy(back, p, sizeof back, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 1024; i++)
    if (back[i] != v) {
      GWT_FAIL_("back[%d] = %llx", i, (unsigned long long)back[i]);
      break;
    }
  CK(cudaFreeAsync(p, 0)); /* not owned: still ours */
  CK(cudaStreamSynchronize(0));
  /* owned: gpuwrap frees stream-ordered memory with cudaFree */
  CK(cudaMallocAsync(&p, 8192, 0));
  CK(cudaStreamSynchronize(0));
  GW_OK_(gw_wrap(ctx, p, GW_UINT64, 1, shape, NULL, GW_WRAP_OWN, &a));
  gw_release(a);
  EXPECT_EQ_INT(cudaGetLastError(), cudaSuccess);
  gw_context_destroy(ctx);
  return 0;
}

/* Memory the caller registered: used, never unregistered by gpuwrap. */
static int test_registered_foreign(void) {
  SETUP(1);
  size_t bytes = 4 * (size_t)sysconf(_SC_PAGESIZE);
  float *h = page_alloc(bytes);
  ASSERT_TRUE(h != NULL);
  CK(cudaHostRegister(h, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  gw_ptrinfo pi;
  GW_OK_(gw_pointer_query(ctx, h, &pi));
  EXPECT_EQ_INT(pi.kind, GW_MEM_PINNED);
  EXPECT_EQ_INT(pi.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)(bytes / sizeof(float))};
  GW_OK_(gw_wrap(ctx, h, GW_FLOAT32, 1, shape, NULL, 0, &a));
  EXPECT_EQ_INT(gw_kind(a), GW_MEM_PINNED);
  float v = 1.5f;
  GW_OK_(gw_fill(a, &v));
  EXPECT_TRUE(h[0] == 1.5f && h[shape[0] - 1] == 1.5f);
  gw_release(a);
  /* OWN: CUDA cannot tell registered from allocated pinned memory, so the wrap is taken;
   * its cudaFreeHost fails harmlessly at release and the registration stays. */
  gw_status s = gw_wrap(ctx, h, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &a);
  EXPECT_TRUE(s == GW_OK || s == GW_EINVAL);
  if (s == GW_OK)
    gw_release(a);
  (void)cudaGetLastError();
  /* still registered by us: our unregister succeeds exactly once */
  CK(cudaHostUnregister(h));
  free(h);
  gw_context_destroy(ctx);
  return 0;
}

/* Pageable memory: wrap registers (flag GW_PTR_GPUWRAP_REGISTERED), release unregisters. */
static int test_pageable_register(void) {
  SETUP(1);
  size_t bytes = 3 * (size_t)sysconf(_SC_PAGESIZE);
  int32_t *h = page_alloc(bytes);
  ASSERT_TRUE(h != NULL);
  memset(h, 0, bytes);
  gw_ptrinfo pi;
  GW_OK_(gw_pointer_query(ctx, h, &pi));
  EXPECT_EQ_INT(pi.kind, GW_MEM_HOST);
  EXPECT_EQ_INT(pi.device, -1);
  EXPECT_EQ_PTR(pi.host_ptr, h);
  gw_array *a = NULL;
  int64_t shape[1] = {(int64_t)(bytes / sizeof(int32_t))};
  GW_OK_(gw_wrap(ctx, h, GW_INT32, 1, shape, NULL, 0, &a));
  EXPECT_TRUE(gw_data(a) != NULL);
  GW_OK_(gw_pointer_query(ctx, h + 5, &pi));
  EXPECT_EQ_INT(pi.kind, GW_MEM_PINNED);
  EXPECT_TRUE((pi.flags & GW_PTR_GPUWRAP_REGISTERED) != 0);
  /* a fill of the wrapped pageable array is seen by the host */
  int32_t v = 0x5a5a1234;
  GW_OK_(gw_fill(a, &v));
  for (int64_t i = 0; i < shape[0]; i++)
    if (h[i] != v) {
      GWT_FAIL_("h[%lld] = %x", (long long)i, (unsigned)h[i]);
      break;
    }
  gw_release(a);
  GW_OK_(gw_pointer_query(ctx, h, &pi));
  EXPECT_EQ_INT(pi.kind, GW_MEM_HOST);
  EXPECT_EQ_INT(pi.flags & GW_PTR_GPUWRAP_REGISTERED, 0);
  struct cudaPointerAttributes at;
  CK(cudaPointerGetAttributes(&at, h));
  EXPECT_EQ_INT(at.type, cudaMemoryTypeUnregistered);
  free(h);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- fills and copies -------------------------------------------------------------------------- */

/* Fill every element size (1, 2, 4, 8, 16 bytes) on device memory: whole array from an odd
 * offset (unaligned head/tail of the vectorised fill) and a strided view. */
static int test_fill_sizes(void) {
  SETUP(1);
  static const gw_dtype types[5] = {GW_UINT8, GW_UINT16, GW_UINT32, GW_UINT64, GW_COMPLEX128};
  enum { N = 1000 };
  for (int t = 0; t < 5; t++) {
    size_t es = gw_dtype_size(types[t]);
    unsigned char *d = NULL, *back = malloc(N * es), val[16];
    ASSERT_TRUE(back != NULL);
    CK(cudaMalloc((void **)&d, N * es));
    CK(cudaMemset(d, 0, N * es));
    for (size_t i = 0; i < es; i++)
      val[i] = (unsigned char)(0x11 * (i + 1) + t);
    gw_array *a = NULL, *v = NULL;
    int64_t shape[1] = {N - 1};
    GW_OK_(gw_wrap(ctx, d + es, types[t], 1, shape, NULL, 0, &a)); /* elements 1 .. N-1 */
    GW_OK_(gw_fill(a, val));
    CK(cudaMemcpy(back, d, N * es, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < es; i++)
      EXPECT_EQ_INT(back[i], 0); /* element 0 untouched */
    for (int i = 1; i < N; i++)
      if (memcmp(back + i * es, val, es) != 0) {
        GWT_FAIL_("elem size %zu: element %d not filled", es, i);
        break;
      }
    /* every third element of the view gets the value with its bytes reversed */
    unsigned char rev[16];
    for (size_t i = 0; i < es; i++)
      rev[i] = val[es - 1 - i];
    int64_t start[1] = {0}, vshape[1] = {(N - 1 + 2) / 3}, step[1] = {3};
    GW_OK_(gw_view(a, start, vshape, step, &v));
    GW_OK_(gw_fill(v, rev));
    CK(cudaMemcpy(back, d, N * es, cudaMemcpyDeviceToHost));
    for (int i = 1; i < N; i++) {
      const unsigned char *want = ((i - 1) % 3 == 0) ? rev : val;
      if (memcmp(back + i * es, want, es) != 0) {
        GWT_FAIL_("elem size %zu: strided fill wrong at element %d", es, i);
        break;
      }
    }
    gw_release(v);
    gw_release(a);
    CK(cudaFree(d));
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
static int test_fill_large(void) {
  SETUP(1);
  static const int64_t sizes[2] = {((int64_t)64 << 20) / 8 + 130, ((int64_t)16 << 20) / 8 + 4};
  for (int k = 0; k < 2; k++) {
    int64_t n = sizes[k]; /* elements of the buffer; the array is [1, n - 1), n - 2 even */
    uint64_t *h = malloc((size_t)n * 8), *back = malloc((size_t)n * 8), *d = NULL;
    ASSERT_TRUE(h && back);
    for (int64_t i = 0; i < n; i++)
      h[i] = (uint64_t)rnd() << 32 | rnd();
    CK(cudaMalloc((void **)&d, (size_t)n * 8));
    CK(cudaMemcpy(d, h, (size_t)n * 8, cudaMemcpyHostToDevice));
    uint64_t val;
    do
      val = (uint64_t)rnd() << 32 | rnd();
    while ((uint32_t)val == (uint32_t)(val >> 32));
    double dv;
    memcpy(&dv, &val, 8);
    gw_array *a = NULL;
    int64_t shape[1] = {n - 2};
    GW_OK_(gw_wrap(ctx, d + 1, GW_FLOAT64, 1, shape, NULL, 0, &a));
    GW_OK_(gw_fill(a, &dv));
    memset(back, 0xA5, (size_t)n * 8);
    CK(cudaMemcpy(back, d, (size_t)n * 8, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(back[0] == h[0]);
    EXPECT_TRUE(back[n - 1] == h[n - 1]);
    for (int64_t i = 1; i < n - 1; i++)
      if (back[i] != val) {
        GWT_FAIL_("%lld-element fill: [%lld] = %016llx, want %016llx", (long long)(n - 2),
                  (long long)i, (unsigned long long)back[i], (unsigned long long)val);
        break;
      }
    gw_release(a);
    CK(cudaFree(d));
    free(h);
    free(back);
  }
  gw_context_destroy(ctx);
  return 0;
}

/* Host <-> device with random data, every element checked: contiguous, 3-D views (pitched
 * DMA or kernels), and column-major complex128 against row-major. */
static int test_copy_roundtrip(void) {
  SETUP(1);
  enum { X = 37, Y = 29, Z = 23 };
  int64_t n = (int64_t)X * Y * Z, shape[3] = {X, Y, Z};
  uint32_t *h = malloc(n * 4), *h2 = malloc(n * 4);
  ASSERT_TRUE(h && h2);
  for (int64_t i = 0; i < n; i++)
    h[i] = rnd();
  gw_array *hs = NULL, *hd = NULL, *dv = NULL;
  GW_OK_(gw_wrap(ctx, h, GW_UINT32, 3, shape, NULL, 0, &hs));
  GW_OK_(gw_wrap(ctx, h2, GW_UINT32, 3, shape, NULL, 0, &hd));
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 3, shape, &dv));
  GW_OK_(gw_copy(dv, hs));
  memset(h2, 0, n * 4);
  GW_OK_(gw_copy(hd, dv));
  for (int64_t i = 0; i < n; i++)
    if (h2[i] != h[i]) {
      GWT_FAIL_("contiguous roundtrip: [%lld] %u != %u", (long long)i, h2[i], h[i]);
      break;
    }
  /* sub-block views: [3:3+20, 2:2+17, 5:5+11] of host into the same block of device, back */
  int64_t st[3] = {3, 2, 5}, sh[3] = {20, 17, 11};
  gw_array *hv = NULL, *dvv = NULL, *hv2 = NULL;
  GW_OK_(gw_view(hs, st, sh, NULL, &hv));
  GW_OK_(gw_view(dv, st, sh, NULL, &dvv));
  GW_OK_(gw_view(hd, st, sh, NULL, &hv2));
  for (int64_t i = 0; i < n; i++)
    h[i] = rnd();
  memset(h2, 0, n * 4);
  GW_OK_(gw_copy(dvv, hv));
  GW_OK_(gw_copy(hv2, dvv));
  for (int64_t x = 0; x < X; x++)
    for (int64_t y = 0; y < Y; y++)
      for (int64_t z = 0; z < Z; z++) {
        int64_t i = (x * Y + y) * Z + z;
        int in = x >= 3 && x < 23 && y >= 2 && y < 19 && z >= 5 && z < 16;
        uint32_t want = in ? h[i] : 0;
        if (h2[i] != want) {
          GWT_FAIL_("3-D view roundtrip: (%lld,%lld,%lld) %u != %u", (long long)x, (long long)y,
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
  for (int i = 0; i < 2 * R * C; i++)
    zc[i] = (double)rnd();
  int64_t zs[2] = {R, C}, colmajor[2] = {1, R};
  gw_array *zh = NULL, *zd = NULL, *zh2 = NULL;
  GW_OK_(gw_wrap(ctx, zc, GW_COMPLEX128, 2, zs, colmajor, 0, &zh));
  GW_OK_(gw_wrap(ctx, zb, GW_COMPLEX128, 2, zs, colmajor, 0, &zh2));
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_COMPLEX128, 2, zs, &zd));
  GW_OK_(gw_copy(zd, zh));
  GW_OK_(gw_copy(zh2, zd));
  EXPECT_EQ_INT(memcmp(zc, zb, sizeof(double) * 2 * R * C), 0);
  /* and the device copy is row-major: element (r, c) at r*C + c */
  double *zr = malloc(sizeof(double) * 2 * R * C);
  ASSERT_TRUE(zr != NULL);
  CK(cudaMemcpy(zr, gw_data(zd), sizeof(double) * 2 * R * C, cudaMemcpyDeviceToHost));
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++)
      if (memcmp(zr + 2 * (r * C + c), zc + 2 * (c * R + r), 16) != 0) {
        GWT_FAIL_("transposed complex128 (%d,%d)", r, c);
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
static int test_current_device(void) {
  SETUP(1);
  int mine = ndev > 1 ? 1 : 0;
  CK(cudaSetDevice(mine));
#define SAME()                                                                             \
  EXPECT_EQ_INT(current_device(), mine)
  float *d = NULL, *h = NULL;
  CK(cudaSetDevice(0));
  CK(cudaMalloc((void **)&d, 256 * sizeof(float)));
  CK(cudaSetDevice(mine));
  size_t bytes = (size_t)sysconf(_SC_PAGESIZE);
  h = page_alloc(bytes);
  ASSERT_TRUE(h != NULL);
  gw_ptrinfo pi;
  GW_OK_(gw_pointer_query(ctx, d, &pi));
  SAME();
  EXPECT_EQ_INT(pi.device, 0);
  gw_array *a = NULL, *b = NULL, *c = NULL;
  int64_t shape[1] = {256};
  GW_OK_(gw_wrap(ctx, d, GW_FLOAT32, 1, shape, NULL, 0, &a));
  SAME();
  GW_OK_(gw_wrap(ctx, h, GW_FLOAT32, 1, shape, NULL, 0, &b)); /* registers */
  SAME();
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 1, shape, &c));
  SAME();
  float v = 3.0f;
  GW_OK_(gw_fill(a, &v));
  SAME();
  GW_OK_(gw_copy(c, a));
  SAME();
  GW_OK_(gw_copy(b, c));
  SAME();
  EXPECT_TRUE(h[0] == 3.0f && h[255] == 3.0f);
  gw_stream *s = NULL;
  GW_OK_(gw_stream_create(ctx, &s));
  SAME();
  GW_OK_(gw_fill_async(c, &v, s));
  SAME();
  GW_OK_(gw_stream_synchronize(s));
  gw_stream_destroy(s);
  SAME();
  GW_OK_(gw_synchronize(ctx));
  SAME();
  gw_release(c); /* cudaFree on device 0 */
  SAME();
  gw_release(b); /* unregister */
  SAME();
  gw_release(a);
  gw_context_destroy(ctx);
  SAME();
#undef SAME
  CK(cudaFree(d));
  free(h);
  return 0;
}

/* Device 1's memory seen from a device-0 context, and copies between the devices. */
static int test_two_devices(void) {
  SETUP(2);
  enum { N = 100000 };
  uint32_t *d1 = NULL, *h = malloc(N * 4), *back = malloc(N * 4);
  ASSERT_TRUE(h && back);
  CK(cudaSetDevice(1));
  CK(cudaMalloc((void **)&d1, N * 4));
  CK(cudaSetDevice(0));
  gw_ptrinfo pi;
  GW_OK_(gw_pointer_query(ctx, d1 + 10, &pi));
  EXPECT_EQ_INT(pi.kind, GW_MEM_DEVICE);
  EXPECT_EQ_INT(pi.device, 1);
  EXPECT_EQ_PTR(pi.base, d1);
  gw_array *a1 = NULL, *a0 = NULL, *hh = NULL;
  int64_t shape[1] = {N};
  GW_OK_(gw_wrap(ctx, d1, GW_UINT32, 1, shape, NULL, 0, &a1));
  EXPECT_EQ_INT(gw_device(a1), 1);
  EXPECT_EQ_INT(gw_context_device(gw_array_context(a1)), 0);
  for (int i = 0; i < N; i++)
    h[i] = rnd();
  GW_OK_(gw_wrap(ctx, h, GW_UINT32, 1, shape, NULL, 0, &hh));
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, shape, &a0));
  GW_OK_(gw_copy(a0, hh)); /* host -> device 0 */
  GW_OK_(gw_copy(a1, a0)); /* device 0 -> device 1 */
  EXPECT_EQ_INT(current_device(), 0);
  CK(cudaMemcpy(back, d1, N * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ_INT(memcmp(back, h, N * 4), 0);
  /* strided: every other element of device 1 into the first half of device 0 */
  gw_array *v1 = NULL, *v0 = NULL;
  int64_t st[1] = {0}, vs[1] = {N / 2}, step[1] = {2};
  GW_OK_(gw_view(a1, st, vs, step, &v1));
  GW_OK_(gw_view(a0, st, vs, NULL, &v0));
  uint32_t zero = 0;
  GW_OK_(gw_fill(a0, &zero));
  GW_OK_(gw_copy(v0, v1));
  CK(cudaMemcpy(back, gw_data(a0), N * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < N / 2; i++)
    if (back[i] != h[2 * i]) {
      GWT_FAIL_("strided device1->device0 [%d] %u != %u", i, back[i], h[2 * i]);
      break;
    }
  gw_release(v0);
  gw_release(v1);
  gw_release(a0);
  gw_release(a1);
  gw_release(hh);
  CK(cudaSetDevice(1));
  CK(cudaFree(d1));
  CK(cudaSetDevice(0));
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
#define CKD(x)                                                                             \
  do {                                                                                     \
    CUresult r_ = (x);                                                                     \
    if (r_ != CUDA_SUCCESS) {                                                              \
      GWT_FAIL_("%s: CUresult %d", #x, (int)r_);                                           \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

/* A thread in a context of its own (cuCtxCreate, as PyCUDA's make_context) on device
 * `dev` uses a device-0 gpuwrap context: memory, a fill, copies both ways, a stream. After
 * every call the thread's own context is current again, exactly, and every element is
 * right. On device 1 (two GPUs) each call switches to device 0 and back (cudaSetDevice
 * alone would leave device 1's primary context current); on device 0 nothing is switched
 * and the work runs in the caller's context, memory included (docs/API.md). */
static int own_context_on(int dev) {
  if (!load_driver()) {
    fprintf(stderr, "skip: libcuda.so.1 without cuCtxCreate_v4\n");
    gw_context_destroy(ctx);
    return GWT_SKIP;
  }
  CUdevice d;
  CUcontext own = NULL, cur = NULL;
  CUctxCreateParams params;
  memset(&params, 0, sizeof params); /* a regular context */
  CKD(drv.DeviceGet(&d, dev));
  CKD(drv.CtxCreate(&own, &params, 0, d)); /* current now */
#define OWN_CURRENT()                                                                      \
  do {                                                                                     \
    CKD(drv.CtxGetCurrent(&cur));                                                          \
    EXPECT_TRUE(cur == own);                                                               \
  } while (0)
  enum { N = 4096 };
  int64_t shape[1] = {N};
  gw_array *a = NULL, *h = NULL, *b = NULL;
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 1, shape, &a));
  OWN_CURRENT();
  GW_OK_(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 1, shape, &b));
  GW_OK_(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT32, 1, shape, &h));
  OWN_CURRENT();
  float v = (float)(rnd() % 1000) + 0.5f, *hp = gw_host_data(h);
  GW_OK_(gw_fill(a, &v));
  OWN_CURRENT();
  GW_OK_(gw_copy(b, a));
  OWN_CURRENT();
  for (int i = 0; i < N; i++) hp[i] = -1.0f; /* poison */
  GW_OK_(gw_copy(h, b));
  OWN_CURRENT();
  for (int i = 0; i < N; i++)
    if (hp[i] != v) {
      GWT_FAIL_("element %d: %g, want %g", i, (double)hp[i], (double)v);
      return 1;
    }
  for (int i = 0; i < N; i++) hp[i] = (float)(rnd() % 4096);
  GW_OK_(gw_copy(a, h));
  gw_stream *s = NULL;
  GW_OK_(gw_stream_create(ctx, &s));
  OWN_CURRENT();
  float *back = malloc(N * sizeof *back);
  ASSERT_TRUE(back != NULL);
  memcpy(back, hp, N * sizeof *back);
  for (int i = 0; i < N; i++) hp[i] = -1.0f;
  GW_OK_(gw_copy_async(h, a, s));
  GW_OK_(gw_stream_synchronize(s));
  OWN_CURRENT();
  EXPECT_TRUE(memcmp(hp, back, N * sizeof *back) == 0);
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
  fprintf(stderr, "skip: CUDA < 12.5 (no cuCtxCreate_v4)\n");
  gw_context_destroy(ctx);
  return GWT_SKIP;
}
#endif

static int test_caller_context(void) {
  SETUP(2);
  return own_context_on(1);
}

static int test_own_context(void) {
  SETUP(1);
  return own_context_on(0);
}

int main(int argc, char **argv) {
  static const gwt_case cases[] = {
      {"device_memory", test_device_memory},
      {"pinned_alloc", test_pinned_alloc},
      {"managed", test_managed},
      {"malloc_async", test_malloc_async},
      {"registered_foreign", test_registered_foreign},
      {"pageable_register", test_pageable_register},
      {"fill_sizes", test_fill_sizes},
      {"fill_large", test_fill_large},
      {"copy_roundtrip", test_copy_roundtrip},
      {"current_device", test_current_device},
      {"two_devices", test_two_devices},
      {"caller_context", test_caller_context},
      {"own_context", test_own_context},
  };
  return gwt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
