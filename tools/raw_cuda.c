/*
 * Raw baseline for CUDA: the driver API, loaded with dlopen("libcuda.so.1") so the tool
 * links no CUDA library and runs (reporting "absent") on machines without a driver.
 * Copies are cuMemcpy (unified addressing; what cudaMemcpy(..., cudaMemcpyDefault) does)
 * followed by a stream synchronize; 2-D copies cuMemcpy2D; the device fill is a PTX kernel
 * (16-byte stores, grid-stride loop) embedded below, or cuMemsetD32 if it cannot be loaded.
 * Device work is timed with events on the legacy default stream. The primary context of the
 * device is used, the same one gpuwrap's CUDA backend uses.
 */
#include "bench.h"
#include "raw_fill_ptx.h" /* fill_ptx: the raw fill kernel */

#include <dlfcn.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUevent;
typedef void *CUstream;
typedef void *CUmodule;
typedef void *CUfunction;
typedef unsigned long long CUdeviceptr;

/* Values from cuda.h (stable ABI). */
enum {
  CU_POINTER_ATTRIBUTE_CONTEXT = 1,
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
  CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
  CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
  CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
  CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE = 17,
  CU_MEMORYTYPE_HOST = 1,
  CU_MEMORYTYPE_DEVICE = 2,
  CU_MEMORYTYPE_UNIFIED = 4,
  CU_MEM_ATTACH_GLOBAL = 1,
  CU_MEMHOSTREGISTER_PORTABLE = 1,
  CU_MEMHOSTREGISTER_DEVICEMAP = 2,
};

typedef struct {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void *srcHost;
  CUdeviceptr srcDevice;
  void *srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void *dstHost;
  CUdeviceptr dstDevice;
  void *dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;

/* name, return, parameters; optional entries may be missing (NULL). */
#define CU_FUNCS(X)                                                                          \
  X(cuInit, (unsigned))                                                                      \
  X(cuGetErrorName, (CUresult, const char **))                                               \
  X(cuDeviceGet, (CUdevice *, int))                                                          \
  X(cuDeviceGetCount, (int *))                                                               \
  X(cuDeviceGetName, (char *, int, CUdevice))                                                \
  X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                       \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice))                                                \
  X(cuCtxSetCurrent, (CUcontext))                                                            \
  X(cuCtxSynchronize, (void))                                                                \
  X(cuPointerGetAttributes, (unsigned, int *, void **, CUdeviceptr))                         \
  X(cuMemGetInfo_v2, (size_t *, size_t *))                                                   \
  X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                                  \
  X(cuMemFree_v2, (CUdeviceptr))                                                             \
  X(cuMemAllocHost_v2, (void **, size_t))                                                    \
  X(cuMemFreeHost, (void *))                                                                 \
  X(cuMemAllocManaged, (CUdeviceptr *, size_t, unsigned))                                    \
  X(cuMemHostRegister_v2, (void *, size_t, unsigned))                                        \
  X(cuMemHostUnregister, (void *))                                                           \
  X(cuMemHostGetDevicePointer_v2, (CUdeviceptr *, void *, unsigned))                         \
  X(cuMemcpy, (CUdeviceptr, CUdeviceptr, size_t))                                            \
  X(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))                                    \
  X(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))                                          \
  X(cuMemcpyDtoD_v2, (CUdeviceptr, CUdeviceptr, size_t))                                     \
  X(cuMemcpy2D_v2, (const CUDA_MEMCPY2D *))                                                  \
  X(cuMemsetD32_v2, (CUdeviceptr, unsigned, size_t))                                         \
  X(cuEventCreate, (CUevent *, unsigned))                                                    \
  X(cuEventRecord, (CUevent, CUstream))                                                      \
  X(cuEventSynchronize, (CUevent))                                                           \
  X(cuEventElapsedTime, (float *, CUevent, CUevent))                                         \
  X(cuStreamSynchronize, (CUstream))                                                         \
  X(cuModuleLoadData, (CUmodule *, const void *))                                            \
  X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))                             \
  X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
                     unsigned, CUstream, void **, void **))

static struct {
#define CU_FIELD(name, params) CUresult(*name) params;
  CU_FUNCS(CU_FIELD)
#undef CU_FIELD
} cu;

static void *lib;
static CUdevice dev;
static CUcontext ctx;
static CUevent ev0, ev1;
static CUfunction fill_fn;
static char err_text[256];

static int check(CUresult r, const char *what) {
  if (r == 0) return 0;
  const char *name = NULL;
  if (cu.cuGetErrorName) cu.cuGetErrorName(r, &name);
  snprintf(err_text, sizeof err_text, "%s: %s (%d)", what, name ? name : "CUDA error", r);
  return -1;
}

static int cuda_query(const void *p) {
  /* The same seven attributes gpuwrap's backend asks for, in one call (gwv_query in
   * src/backends/gpu/vendor_cuda.h), so the ratio is gpuwrap's overhead over the runtime
   * answering the same question. */
  int attrs[7] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      CU_POINTER_ATTRIBUTE_IS_MANAGED,
      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,   CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
      CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
      CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
  unsigned mt = 0, managed = 0;
  int ord = -1, legacy = 1;
  CUdeviceptr base = 0;
  size_t size = 0;
  void *pool = NULL;
  void *vals[7] = {&mt, &managed, &ord, &legacy, &base, &size, &pool};
  return check(cu.cuPointerGetAttributes(7, attrs, vals, (CUdeviceptr)(uintptr_t)p),
               "cuPointerGetAttributes");
}

static int cuda_alloc(gw_memkind kind, size_t bytes, void **out) {
  CUdeviceptr d = 0;
  switch (kind) {
  case GW_MEM_DEVICE:
    if (check(cu.cuMemAlloc_v2(&d, bytes), "cuMemAlloc")) return -1;
    *out = (void *)(uintptr_t)d;
    return 0;
  case GW_MEM_PINNED: return check(cu.cuMemAllocHost_v2(out, bytes), "cuMemAllocHost");
  case GW_MEM_MANAGED:
    if (check(cu.cuMemAllocManaged(&d, bytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged"))
      return -1;
    *out = (void *)(uintptr_t)d;
    return 0;
  default:
    snprintf(err_text, sizeof err_text, "raw alloc: kind %s not supported", gw_memkind_name(kind));
    return -1;
  }
}

static void cuda_free(gw_memkind kind, void *p) {
  if (!p) return;
  if (kind == GW_MEM_PINNED)
    cu.cuMemFreeHost(p);
  else
    cu.cuMemFree_v2((CUdeviceptr)(uintptr_t)p);
}

static int cuda_register(void *p, size_t bytes) {
  return check(
      cu.cuMemHostRegister_v2(p, bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
      "cuMemHostRegister");
}
static int cuda_unregister(void *p) {
  return check(cu.cuMemHostUnregister(p), "cuMemHostUnregister");
}

static int cuda_device_ptr(void *host, void **out) {
  CUdeviceptr d = 0;
  if (check(cu.cuMemHostGetDevicePointer_v2(&d, host, 0), "cuMemHostGetDevicePointer")) return -1;
  *out = (void *)(uintptr_t)d;
  return 0;
}

/* Whether the driver knows p as device or managed memory (else host: pageable or pinned). */
static int is_device(const void *p) {
  int attrs[1] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
  unsigned mt = 0;
  void *vals[1] = {&mt};
  if (cu.cuPointerGetAttributes(1, attrs, vals, (CUdeviceptr)(uintptr_t)p) != 0) return 0;
  return mt == CU_MEMORYTYPE_DEVICE;
}

static int cuda_copy(void *dst, const void *src, size_t bytes) {
  CUresult r = cu.cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes);
  if (r != 0) {
    /* Drivers that refuse a pageable pointer in cuMemcpy: the explicit direction. */
    int dd = is_device(dst), sd = is_device(src);
    if (dd && sd)
      r = cu.cuMemcpyDtoD_v2((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes);
    else if (dd)
      r = cu.cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)dst, src, bytes);
    else if (sd)
      r = cu.cuMemcpyDtoH_v2(dst, (CUdeviceptr)(uintptr_t)src, bytes);
    else {
      memcpy(dst, src, bytes);
      r = 0;
    }
  }
  if (check(r, "cuMemcpy")) return -1;
  return check(cu.cuStreamSynchronize(NULL), "cuStreamSynchronize");
}

static int cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                       size_t height) {
  CUDA_MEMCPY2D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.srcDevice = (CUdeviceptr)(uintptr_t)src;
  c.srcPitch = spitch;
  c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
  c.dstPitch = dpitch;
  c.WidthInBytes = width;
  c.Height = height;
  if (check(cu.cuMemcpy2D_v2(&c), "cuMemcpy2D")) return -1;
  return check(cu.cuStreamSynchronize(NULL), "cuStreamSynchronize");
}

static int cuda_fill32(void *p, size_t bytes, uint32_t word) {
  if (fill_fn) {
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
    unsigned long long n16 = bytes / 16;
    unsigned w = word;
    void *args[3] = {&d, &n16, &w};
    unsigned blocks = (unsigned)((n16 + 255) / 256);
    if (blocks > 132 * 8) blocks = 132 * 8;
    if (blocks == 0) blocks = 1;
    if (check(cu.cuLaunchKernel(fill_fn, blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL),
              "cuLaunchKernel"))
      return -1;
  } else if (check(cu.cuMemsetD32_v2((CUdeviceptr)(uintptr_t)p, word, bytes / 4), "cuMemsetD32")) {
    return -1;
  }
  return check(cu.cuStreamSynchronize(NULL), "cuStreamSynchronize");
}

static int cuda_memset32(void *p, size_t bytes, uint32_t word) {
  if (check(cu.cuMemsetD32_v2((CUdeviceptr)(uintptr_t)p, word, bytes / 4), "cuMemsetD32"))
    return -1;
  return check(cu.cuStreamSynchronize(NULL), "cuStreamSynchronize");
}

static void cuda_timer_begin(void) { cu.cuEventRecord(ev0, NULL); }
static double cuda_timer_end(void) {
  float ms = 0;
  cu.cuEventRecord(ev1, NULL);
  cu.cuEventSynchronize(ev1);
  if (cu.cuEventElapsedTime(&ms, ev0, ev1) != 0) return -1;
  return ms * 1e-3;
}

static size_t cuda_free_mem(void) {
  size_t f = 0, t = 0;
  if (cu.cuMemGetInfo_v2(&f, &t) != 0) return 0;
  return f;
}

static const char *cuda_last_error(void) { return err_text; }

static void cuda_close(void) {
  if (cu.cuCtxSynchronize) cu.cuCtxSynchronize();
  if (cu.cuDevicePrimaryCtxRelease_v2 && ctx) cu.cuDevicePrimaryCtxRelease_v2(dev);
  ctx = NULL;
  /* libcuda stays loaded: gpuwrap's backend may share it. */
}

static const char *raw_fill_what = "PTX kernel (16-byte stores, grid-stride)";

int gw_raw_cuda_open(int device, gw_raw *out, char *err, size_t n) {
  lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(err, n, "dlopen(libcuda.so.1): %s", dlerror());
    return -1;
  }
#define CU_LOAD(name, params) *(void **)&cu.name = dlsym(lib, #name);
  CU_FUNCS(CU_LOAD)
#undef CU_LOAD
  /* CUDA 12.8+ renamed the ABI of cuEventElapsedTime; take the new one where present. */
  void *v2 = dlsym(lib, "cuEventElapsedTime_v2");
  if (v2) *(void **)&cu.cuEventElapsedTime = v2;
#define CU_NEED(name, params)                                           \
  if (!cu.name && strcmp(#name, "cuDevicePrimaryCtxRelease_v2") != 0) { \
    snprintf(err, n, "libcuda.so.1 lacks %s", #name);                   \
    return -1;                                                          \
  }
  CU_FUNCS(CU_NEED)
#undef CU_NEED
  int count = 0;
  if (check(cu.cuInit(0), "cuInit") || check(cu.cuDeviceGetCount(&count), "cuDeviceGetCount")) {
    snprintf(err, n, "%s", err_text);
    return -1;
  }
  if (device >= count) {
    snprintf(err, n, "CUDA device %d: only %d present", device, count);
    return -1;
  }
  if (check(cu.cuDeviceGet(&dev, device), "cuDeviceGet") ||
      check(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
      check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent") ||
      check(cu.cuEventCreate(&ev0, 0), "cuEventCreate") ||
      check(cu.cuEventCreate(&ev1, 0), "cuEventCreate")) {
    snprintf(err, n, "%s", err_text);
    return -1;
  }
  CUmodule mod = NULL;
  fill_fn = NULL;
  if (cu.cuModuleLoadData(&mod, fill_ptx) != 0 ||
      cu.cuModuleGetFunction(&fill_fn, mod, "gw_raw_fill16") != 0) {
    fill_fn = NULL;
    raw_fill_what = "cuMemsetD32 (proxy: the PTX kernel failed to load)";
  }
  static char name[160], devname[96];
  snprintf(devname, sizeof devname, "?");
  cu.cuDeviceGetName(devname, sizeof devname, dev);
  snprintf(name, sizeof name, "CUDA driver API via dlopen(libcuda.so.1), %s", devname);
  *out = (gw_raw){
      .name = name,
      .timer_what = "CUDA events on the legacy default stream (both sides synchronous)",
      .query_what = "cuPointerGetAttributes (the same 7 attributes, one call)",
      .fill_what = raw_fill_what,
      .device = devname,
      .query = cuda_query,
      .alloc = cuda_alloc,
      .free = cuda_free,
      .host_register = cuda_register,
      .host_unregister = cuda_unregister,
      .device_ptr = cuda_device_ptr,
      .copy = cuda_copy,
      .copy2d = cuda_copy2d,
      .fill32 = cuda_fill32,
      .memset32 = cuda_memset32,
      .timer_begin = cuda_timer_begin,
      .timer_end = cuda_timer_end,
      .device_free_mem = cuda_free_mem,
      .last_error = cuda_last_error,
      .close = cuda_close,
  };
  return 0;
}
