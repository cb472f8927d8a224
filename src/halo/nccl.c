/*
 * Loading NCCL at run time for the NCCL halo path.
 *
 * NCCL is never a build or link dependency of gpuwrap_halo: the CPU machines have no
 * NCCL, and a program that never asks for the path must not need it. libnccl.so.2 is
 * opened with dlopen (the loader's usual search: LD_LIBRARY_PATH, the ld.so cache,
 * /usr/lib...; GPUWRAP_NCCL_LIB names another file) the first time a plan asks, and its
 * symbols are resolved once. A failure is reported, not remembered, so a program (or a
 * test) may point GPUWRAP_NCCL_LIB elsewhere and try again.
 *
 * NCCL binds a communicator to the calling thread's current CUDA device, and the library
 * never changes the caller's device: the device's primary context (the one the CUDA
 * runtime, and gpuwrap's CUDA backend, use) is made current through the driver API
 * (libcuda.so.1, already loaded by the CUDA backend) around those calls only.
 */
#define _GNU_SOURCE
#include "nccl_api.h"
/* gw__setting_text */
#include "../core/private.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gw__halo_nccl_fns fns;
static int loaded;
static void *nccl_handle;
static _Thread_local char why_buf[512];

/* CUDA driver API (cuda.h): CUresult is an int enum, CUdevice an int, CUcontext a pointer. */
typedef int cu_result;
static struct {
  void *handle;
  cu_result (*Init)(unsigned);
  cu_result (*DeviceGet)(int *dev, int ordinal);
  cu_result (*DeviceGetUuid)(unsigned char uuid[16], int dev);
  cu_result (*PrimaryCtxRetain)(void **ctx, int dev);
  cu_result (*PrimaryCtxRelease)(int dev);
  cu_result (*CtxPushCurrent)(void *ctx);
  cu_result (*CtxPopCurrent)(void **ctx);
  cu_result (*GetErrorString)(cu_result r, const char **s);
} cu;

static void *sym(void *h, const char *name, const char *alt) {
  void *p = dlsym(h, name);
  if (!p && alt) p = dlsym(h, alt);
  return p;
}

/* The driver's versioned symbols are the ones cuda.h maps the plain names to. */
static int load_cuda(const char **why) {
  if (cu.handle) return 1;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why_buf, sizeof why_buf,
             "the NCCL path needs the CUDA driver: dlopen(\"libcuda.so.1\"): %s", e ? e : "failed");
    *why = why_buf;
    return 0;
  }
  *(void **)&cu.Init = sym(h, "cuInit", NULL);
  *(void **)&cu.DeviceGet = sym(h, "cuDeviceGet", NULL);
  *(void **)&cu.DeviceGetUuid = sym(h, "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
  *(void **)&cu.PrimaryCtxRetain = sym(h, "cuDevicePrimaryCtxRetain", NULL);
  *(void **)&cu.PrimaryCtxRelease =
      sym(h, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
  *(void **)&cu.CtxPushCurrent = sym(h, "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
  *(void **)&cu.CtxPopCurrent = sym(h, "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
  *(void **)&cu.GetErrorString = sym(h, "cuGetErrorString", NULL);
  if (!cu.Init || !cu.DeviceGet || !cu.DeviceGetUuid || !cu.PrimaryCtxRetain ||
      !cu.PrimaryCtxRelease || !cu.CtxPushCurrent || !cu.CtxPopCurrent) {
    dlclose(h);
    memset(&cu, 0, sizeof cu);
    snprintf(why_buf, sizeof why_buf, "libcuda.so.1 lacks the driver calls the NCCL path needs");
    *why = why_buf;
    return 0;
  }
  cu.handle = h;
  return 1;
}

const gw__halo_nccl_fns *gw__halo_nccl_load(const char **why) {
  static const char *const names[] = {
      "ncclGetUniqueId", "ncclCommInitRank",   "ncclCommDestroy",
      "ncclGroupStart",  "ncclGroupEnd",       "ncclSend",
      "ncclRecv",        "ncclGetErrorString", "ncclCommGetAsyncError"};
  const gw__halo_nccl_fns *out = NULL;
  pthread_mutex_lock(&lock);
  if (loaded) {
    out = &fns;
    goto done;
  }
  const char *env = gw__setting_text(GW__SET_NCCL_LIB);
  const char *lib = env ? env : "libnccl.so.2";
  int named = strcmp(lib, "libnccl.so.2") != 0;
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why_buf, sizeof why_buf, "NCCL is absent: dlopen(\"%s\")%s: %s", lib,
             named ? " (GPUWRAP_NCCL_LIB)" : "", e ? e : "failed");
    *why = why_buf;
    goto done;
  }
  void *p[sizeof names / sizeof names[0]];
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    p[k] = dlsym(h, names[k]);
    if (!p[k]) {
      snprintf(why_buf, sizeof why_buf, "NCCL is absent: %s has no %s (not NCCL 2.x)", lib,
               names[k]);
      *why = why_buf;
      dlclose(h);
      goto done;
    }
  }
  if (!load_cuda(why)) {
    dlclose(h);
    goto done;
  }
  gw__halo_nccl_fns f;
  *(void **)&f.GetUniqueId = p[0];
  *(void **)&f.CommInitRank = p[1];
  *(void **)&f.CommDestroy = p[2];
  *(void **)&f.GroupStart = p[3];
  *(void **)&f.GroupEnd = p[4];
  *(void **)&f.Send = p[5];
  *(void **)&f.Recv = p[6];
  *(void **)&f.GetErrorString = p[7];
  *(void **)&f.CommGetAsyncError = p[8];
  *(void **)&f.GetLastError = dlsym(h, "ncclGetLastError");
  fns = f;
  nccl_handle = h; /* kept open for the process's life: communicators may outlive any plan */
  loaded = 1;
  out = &fns;
done:
  pthread_mutex_unlock(&lock);
  return out;
}

static const char *cu_text(cu_result r) {
  const char *s = NULL;
  if (cu.GetErrorString && cu.GetErrorString(r, &s) == 0 && s) return s;
  return "CUDA driver error";
}

int gw__halo_nccl_device_uuid(int ordinal, unsigned char uuid[16], const char **why) {
  int dev = 0;
  cu_result r = cu.Init(0);
  if (r == 0) r = cu.DeviceGet(&dev, ordinal);
  if (r == 0) r = cu.DeviceGetUuid(uuid, dev);
  if (r != 0) {
    snprintf(why_buf, sizeof why_buf, "CUDA driver: UUID of device %d: %s (%d)", ordinal,
             cu_text(r), r);
    *why = why_buf;
    return 0;
  }
  return 1;
}

int gw__halo_nccl_push_device(int ordinal, const char **why) {
  int dev = 0;
  void *ctx = NULL;
  cu_result r = cu.Init(0);
  if (r == 0) r = cu.DeviceGet(&dev, ordinal);
  if (r == 0) r = cu.PrimaryCtxRetain(&ctx, dev);
  if (r == 0) {
    r = cu.CtxPushCurrent(ctx);
    if (r != 0) cu.PrimaryCtxRelease(dev);
  }
  if (r != 0) {
    snprintf(why_buf, sizeof why_buf, "CUDA driver: making device %d current: %s (%d)", ordinal,
             cu_text(r), r);
    *why = why_buf;
    return 0;
  }
  return 1;
}

void gw__halo_nccl_pop_device(int ordinal) {
  void *ctx = NULL;
  int dev = 0;
  (void)cu.CtxPopCurrent(&ctx);
  if (cu.DeviceGet(&dev, ordinal) == 0) (void)cu.PrimaryCtxRelease(dev);
}

const char *gw__halo_nccl_text(gw_ncclResult_t r, gw_ncclComm_t comm, char *buf, size_t n) {
  const char *s = fns.GetErrorString ? fns.GetErrorString(r) : NULL;
  const char *last = comm && fns.GetLastError ? fns.GetLastError(comm) : NULL;
  if (last && *last)
    snprintf(buf, n, "%s (%d): %s", s ? s : "NCCL error", (int)r, last);
  else
    snprintf(buf, n, "%s (%d)", s ? s : "NCCL error", (int)r);
  return buf;
}
