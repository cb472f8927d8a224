/*
 * Vendor shim, CUDA side. The backend sources (gpu_backend.c, gpu_copy.c, gpu_streams.c, ...) are written once
 * against the gwv_* names; this header maps them onto the CUDA runtime, vendor_hip.h onto
 * HIP. Only what really differs is code here: the pointer query (one driver-API
 * cuPointerGetAttributes call on CUDA) and the error names/classes.
 */
#ifndef GW_GPU_VENDOR_CUDA_H
#define GW_GPU_VENDOR_CUDA_H

#include "gpu_classify.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

#define GWV_NAME "cuda"
#define GWV_BACKEND GW_BACKEND_CUDA
#define GWV_QUERY_CALL "cuPointerGetAttributes"

typedef cudaError_t gwv_err;
typedef cudaStream_t gwv_stream;
typedef cudaEvent_t gwv_event;
typedef struct cudaMemcpy3DParms gwv_memcpy3d;

#define GWV_SUCCESS cudaSuccess
/* cudaMemcpy's own ordering: the legacy default stream, whatever the compile flags. */
#define GWV_SYNC_STREAM cudaStreamLegacy
#define GWV_MEMCPY_DEFAULT cudaMemcpyDefault
#define GWV_STREAM_FLAGS cudaStreamDefault
#define GWV_HOST_ALLOC_FLAGS (cudaHostAllocMapped | cudaHostAllocPortable)
#define GWV_HOST_REGISTER_FLAGS (cudaHostRegisterMapped | cudaHostRegisterPortable)
/* Added for GW__REG_READONLY: the only way to register pages the process cannot write. */
#define GWV_HOST_REGISTER_READONLY cudaHostRegisterReadOnly
#define GWV_READONLY_ATTR_NAME "cudaDevAttrHostRegisterReadOnlySupported"
#define GWV_ATTACH_GLOBAL cudaMemAttachGlobal
#define GWV_EVENT_FLAGS cudaEventDisableTiming

/* Is the thread already in a device's primary context (the one its runtime calls use)?
 * One driver call, cuCtxGetCurrent, compared with the device's primary context, instead of
 * cudaGetDevice, several times slower, more so from this plugin's static runtime
 * (docs/BENCHMARKS.md): every operation asks it first (gwg_enter). The token is the
 * primary context's handle, taken once per device; the runtime holds its own reference,
 * so the handle outlives ours. NULL: no fast answer, ask the runtime. */
typedef void *gwv_ctxtok;
static inline gwv_ctxtok gwv_primary_token(int device) {
  CUdevice d;
  CUcontext c = NULL;
  unsigned flags = 0;
  int active = 0;
  /* Only an active primary context (the runtime holds it): retaining an inactive one would
   * create it, and the release right after would tear it down again (a thread whose own
   * cuCtxCreate context was current when the gpuwrap context opened: then the runtime's
   * cudaFree(NULL) ran in that one). gwg_enter asks again until it is active. */
  if (cuDeviceGet(&d, device) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxGetState(d, &flags, &active) != CUDA_SUCCESS || !active ||
      cuDevicePrimaryCtxRetain(&c, d) != CUDA_SUCCESS)
    return NULL;
  (void)cuDevicePrimaryCtxRelease(d);
  return c;
}
/* The thread's current context (NULL: none, or the driver cannot say). */
static inline gwv_ctxtok gwv_current(void) {
  CUcontext cur = NULL;
  return cuCtxGetCurrent(&cur) == CUDA_SUCCESS ? (gwv_ctxtok)cur : NULL;
}
/* Make a context gwv_current returned current again (gwg_leave); 0 on failure. */
static inline int gwv_set_current(gwv_ctxtok t) {
  return cuCtxSetCurrent((CUcontext)t) == CUDA_SUCCESS;
}

#define gwv_GetDeviceCount cudaGetDeviceCount
#define gwv_GetDevice cudaGetDevice
#define gwv_SetDevice cudaSetDevice
#define gwv_InitContext() cudaFree(NULL)
#define gwv_Malloc cudaMalloc
#define gwv_Free cudaFree
#define gwv_HostAlloc cudaHostAlloc
#define gwv_FreeHost cudaFreeHost
#define gwv_MallocManaged cudaMallocManaged
#define gwv_HostRegister cudaHostRegister
#define gwv_HostUnregister cudaHostUnregister
#define gwv_HostGetDevicePointer cudaHostGetDevicePointer
#define gwv_MemcpyAsync cudaMemcpyAsync
#define gwv_Memcpy2DAsync cudaMemcpy2DAsync
#define gwv_Memcpy3DAsync cudaMemcpy3DAsync
#define gwv_MemsetAsync cudaMemsetAsync
#define gwv_Memcpy cudaMemcpy
#define gwv_StreamCreateWithFlags cudaStreamCreateWithFlags
#define gwv_StreamDestroy cudaStreamDestroy
#define gwv_StreamSynchronize cudaStreamSynchronize
#define gwv_DeviceSynchronize cudaDeviceSynchronize
#define gwv_EventCreateWithFlags cudaEventCreateWithFlags
#define gwv_EventRecord cudaEventRecord
#define gwv_EventSynchronize cudaEventSynchronize
#define gwv_EventDestroy cudaEventDestroy
#define gwv_EventQuery cudaEventQuery
#define gwv_StreamWaitEvent cudaStreamWaitEvent
#define gwv_GetLastError cudaGetLastError
#define gwv_GetErrorName cudaGetErrorName
#define gwv_GetErrorString cudaGetErrorString

/* Memory from another process: the runtime's legacy IPC (gpu_ipc.c). */
typedef cudaIpcMemHandle_t gwv_ipc_handle;
#define gwv_IpcGetMemHandle cudaIpcGetMemHandle
#define gwv_IpcOpenMemHandle cudaIpcOpenMemHandle
#define gwv_IpcCloseMemHandle cudaIpcCloseMemHandle
typedef cudaIpcEventHandle_t gwv_ipc_event_handle;
#define gwv_IpcGetEventHandle cudaIpcGetEventHandle
#define gwv_IpcOpenEventHandle cudaIpcOpenEventHandle
/* An event another process can open (interprocess events must not time). */
#define GWV_EVENT_IPC_FLAGS (cudaEventDisableTiming | cudaEventInterprocess)
#define GWV_IPC_OPEN_FLAGS cudaIpcMemLazyEnablePeerAccess
/* Why legacy IPC cannot export the allocation at ptr, or NULL when it can (or the driver
 * cannot say: then cudaIpcGetMemHandle's own refusal is mapped). Stream-ordered pool
 * memory (cudaMallocAsync) and VMM memory (cuMemCreate) are not legacy-IPC capable:
 * measured, cudaIpcGetMemHandle of cudaMallocAsync memory is cudaErrorInvalidValue.
 * Memory of a pool with a POSIX-fd handle type is shared through the pool (gwv_ipc_pool,
 * asked first), VMM memory with one chunk by chunk (gwv_vmm_chunk, asked first); the refusal says how to allocate the
 * memory so that it can be shared (a POSIX-fd handle type: ALLOWED_HANDLE_TYPES tells
 * whether it has one). */
/* 1: legacy IPC exports the allocation at ptr (cudaMalloc memory); 0: it does not (pool
 * or VMM memory); -1: the driver cannot say. Asked first, so that exporting a plain
 * allocation makes no call that fails (the VMM probe's cuMemRetainAllocationHandle refuses
 * it, which compute-sanitizer reports as an API error of the caller's program). */
static inline int gwv_legacy_ipc_capable(const void *ptr) {
  int capable = 0;
  if (cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                            (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
    return -1;
  return capable != 0;
}
static inline const char *gwv_ipc_refusal(const void *ptr) {
  int capable = 1;
  if (cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                            (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS ||
      capable)
    return NULL;
  void *pool = NULL;
  unsigned long long types = 0;
  if (cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
                            (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
    types = 0;
  int shareable = (types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
  if (cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                            (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS &&
      pool)
    return shareable ? NULL /* an IPC pool's: gwv_ipc_pool found it first (gpu_ipc.c) */
                     : "stream-ordered pool memory (cudaMallocAsync / cudaMallocFromPoolAsync) "
                       "is not legacy-IPC capable (CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_"
                       "CAPABLE = 0) and its pool has no shareable handle type (a device's "
                       "default pool never has): allocate from a pool made by "
                       "cudaMemPoolCreate with handleTypes = "
                       "cudaMemHandleTypePosixFileDescriptor so that it can be shared, or "
                       "with cudaMalloc";
  return shareable ? NULL /* VMM memory with a POSIX fd type: gpu_ipc.c shares it first */
                   : "VMM memory (cuMemCreate / cuMemMap) is not legacy-IPC capable "
                     "(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 0) and it has no "
                     "shareable handle type: allocate it with cuMemCreate and "
                     "requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR "
                     "so that it can be shared, or with cudaMalloc";
}
/* Stream-ordered pools with a POSIX file descriptor handle type, shared between processes
 * (gpu_ipc.c): the pool once (its descriptor), each allocation by 64 bytes of export data. */
typedef cudaMemPool_t gwv_mempool;
typedef struct cudaMemPoolPtrExportData gwv_pool_ptr_data;
#define GWV_HANDLE_POSIX_FD cudaMemHandleTypePosixFileDescriptor
#define gwv_MemPoolExportToShareableHandle cudaMemPoolExportToShareableHandle
#define gwv_MemPoolImportFromShareableHandle cudaMemPoolImportFromShareableHandle
#define gwv_MemPoolExportPointer cudaMemPoolExportPointer
#define gwv_MemPoolImportPointer cudaMemPoolImportPointer
#define gwv_MemPoolDestroy cudaMemPoolDestroy
/* An id that tells an allocation from a later one at the same address (0: none). */
static inline uint64_t gwv_buffer_id(const void *ptr) {
  unsigned long long id = 0;
  if (cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(uintptr_t)ptr) !=
      CUDA_SUCCESS)
    id = 0;
  return (uint64_t)id;
}

/* The driver-level calls of the pool and VMM sharing (gpu_ipc.c holds the logic, one
 * source for both vendors): pointer attributes, VMM chunks and their POSIX descriptors.
 * Each returns GWV_DRV_SUCCESS (0) or the driver's code (gwv_query_error_name reads it). */
typedef CUdeviceptr gwv_devptr;
typedef CUmemGenericAllocationHandle gwv_mem_handle;
typedef CUmemAllocationProp gwv_mem_prop;
typedef CUmemAccessDesc gwv_access_desc;
#define GWV_DRV_SUCCESS CUDA_SUCCESS
/* The driver API keeps no last error: a refused probe leaves nothing behind. */
#define gwv_drv_clear() ((void)0)
#define GWV_DRV(name) "cu" name
#define gwv_PointerGetAttribute(data, attr, ptr) \
  cuPointerGetAttribute(data, attr, (CUdeviceptr)(uintptr_t)(ptr))
#define GWV_PA_MEMPOOL_HANDLE CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
#define GWV_PA_ALLOWED_HANDLE_TYPES CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES
#define GWV_MEM_HANDLE_POSIX_FD CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
#define GWV_PROP_HANDLE_TYPES(prop) ((prop).requestedHandleTypes)
#define GWV_MEM_LOCATION_DEVICE CU_MEM_LOCATION_TYPE_DEVICE
#define GWV_MEM_ACCESS_RW CU_MEM_ACCESS_FLAGS_PROT_READWRITE
#define gwv_MemRetainAllocationHandle cuMemRetainAllocationHandle
#define gwv_MemGetAllocationPropertiesFromHandle cuMemGetAllocationPropertiesFromHandle
#define gwv_MemGetAddressRange cuMemGetAddressRange
#define gwv_MemRelease cuMemRelease
#define gwv_MemExportToShareableHandle cuMemExportToShareableHandle
#define gwv_MemImportFromShareableHandle cuMemImportFromShareableHandle
#define gwv_MemAddressReserve cuMemAddressReserve
#define gwv_MemAddressFree cuMemAddressFree
#define gwv_MemMap cuMemMap
#define gwv_MemUnmap cuMemUnmap
#define gwv_MemSetAccess cuMemSetAccess
/* The current context's work done (VMM unmap does not wait, unlike cudaFree). */
#define gwv_CtxSynchronize cuCtxSynchronize
#define GWV_CTX_SYNC_NAME "cuCtxSynchronize"

/* Device attributes; 0 when the runtime does not know one. */
typedef enum {
  GWV_ATTR_PAGEABLE_ACCESS = cudaDevAttrPageableMemoryAccess,
  GWV_ATTR_HOST_PTR_FOR_REGISTERED = cudaDevAttrCanUseHostPointerForRegisteredMem,
  GWV_ATTR_SM_COUNT = cudaDevAttrMultiProcessorCount,
  GWV_ATTR_MAX_PITCH = cudaDevAttrMaxPitch,
  GWV_ATTR_PAGEABLE_HOST_PAGE_TABLES = cudaDevAttrPageableMemoryAccessUsesHostPageTables,
  GWV_ATTR_HOST_REGISTER_READONLY = cudaDevAttrHostRegisterReadOnlySupported,
  GWV_ATTR_MPS_ENABLED = cudaDevAttrMpsEnabled,
} gwv_attr;
static inline int gwv_device_attr(gwv_attr a, int device) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, (enum cudaDeviceAttr)a, device) != cudaSuccess) {
    (void)cudaGetLastError();
    v = 0;
  }
  return v;
}

/* The device's UUID (all zero when the driver does not give it). */
static inline void gwv_device_uuid(int device, unsigned char out[16]) {
  CUdevice d;
  CUuuid u;
  memset(out, 0, 16);
  if (cuDeviceGet(&d, device) == CUDA_SUCCESS && cuDeviceGetUuid(&u, d) == CUDA_SUCCESS)
    memcpy(out, u.bytes, 16);
}

/* Whether the device's contexts are MPS clients (several processes run concurrently). */
static inline int gwv_concurrent_processes(int device) {
  return gwv_device_attr(GWV_ATTR_MPS_ENABLED, device) != 0;
}

/* Whether host_register may pass GWV_HOST_REGISTER_READONLY on `device`. */
static inline int gwv_host_register_readonly_supported(int device) {
  return gwv_device_attr(GWV_ATTR_HOST_REGISTER_READONLY, device) != 0;
}

/*
 * Graph capture. gwv_capture_relax puts the calling thread in the relaxed per-thread
 * capture mode and gives back the mode it had, which gwv_capture_restore puts back: the
 * backend's own runtime calls run between them (gwg_enter / gwg_leave), so that none of
 * them (a synchronous copy, an event query, a registration) is "potentially unsafe" for a
 * capture, which would invalidate another thread's global-mode capture. A failed exchange
 * leaves the mode as it was (the call then runs in it, as before this existed).
 * gwv_stream_capturing: the id of the capture s is in, 0 when none (an active and an
 * already invalidated capture alike: both refuse host-run work); one query of the
 * stream's capture info. GWV_IS_CAPTURE_IMPLICIT: the answer for the legacy stream while
 * a blocking stream of the device captures (any work on it would invalidate that capture).
 */
typedef enum cudaStreamCaptureMode gwv_capmode;
static inline gwv_capmode gwv_capture_relax(void) {
  enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess) {
    (void)cudaGetLastError();
    return cudaStreamCaptureModeRelaxed; /* nothing to restore */
  }
  return m;
}
static inline void gwv_capture_restore(gwv_capmode m) {
  if (m != cudaStreamCaptureModeRelaxed && cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess)
    (void)cudaGetLastError();
}
static inline gwv_err gwv_stream_capturing(gwv_stream s, uint64_t *capture) {
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
#if CUDART_VERSION >= 13000
  gwv_err e = cudaStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL);
#elif CUDART_VERSION >= 12000
  gwv_err e = cudaStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL);
#else
  gwv_err e = cudaStreamGetCaptureInfo(s, &st, &id);
#endif
  /* an id is never 0 in practice; 0 would read as "not capturing", so it is moved off 0 */
  *capture = e == cudaSuccess && st != cudaStreamCaptureStatusNone ? (id ? (uint64_t)id : 1) : 0;
  return e;
}
#define GWV_IS_CAPTURE_IMPLICIT(e) ((e) == cudaErrorStreamCaptureImplicit)
#define GWV_CAPTURING_CALL "cudaStreamGetCaptureInfo"

/* Error classes the backend maps to gw_status. */
#define GWV_IS_ALREADY_REGISTERED(e) ((e) == cudaErrorHostMemoryAlreadyRegistered)
#define GWV_IS_NOT_REGISTERED(e) ((e) == cudaErrorHostMemoryNotRegistered)
#define GWV_IS_INVALID_VALUE(e) ((e) == cudaErrorInvalidValue)
#define GWV_IS_OOM(e) ((e) == cudaErrorMemoryAllocation)
#define GWV_IS_NODEV(e) \
  ((e) == cudaErrorInvalidDevice || (e) == cudaErrorNoDevice || (e) == cudaErrorInsufficientDriver)
#define GWV_IS_NO_DEVICE(e) ((e) == cudaErrorNoDevice)
/* cudaEventQuery / cudaStreamQuery: work still pending, not an error. */
#define GWV_IS_NOT_READY(e) ((e) == cudaErrorNotReady)
/* cudaEventQuery of an event last recorded in a graph capture: a node, not queued work. */
#define GWV_IS_CAPTURED_EVENT(e) ((e) == cudaErrorCapturedEvent)
/* What the runtime says of a handle that is not a live stream (when it can tell). */
#define GWV_IS_INVALID_HANDLE(e)                                                  \
  ((e) == cudaErrorInvalidResourceHandle || (e) == cudaErrorContextIsDestroyed || \
   (e) == cudaErrorInvalidValue || (e) == cudaErrorDeviceUninitialized)

/*
 * Borrowed streams. The handles every runtime of the process understands as themselves,
 * whichever device is current: NULL (the default stream, legacy unless the caller compiled
 * with per-thread default streams, which gpuwrap cannot see: it takes the legacy one, as
 * the documentation of gw_stream_wrap says), cudaStreamLegacy and cudaStreamPerThread.
 * They name "the default stream of the current device", so the backend makes the
 * context's device current around every use (it does for every call anyway).
 * GWV_BORROW_NULL is what NULL is used as: cudaStreamLegacy, the stream cudaMemcpy orders
 * on, whatever this plugin was compiled with.
 */
#define GWV_BORROW_NULL cudaStreamLegacy
static inline int gwv_stream_is_special(const void *native) {
  return native == NULL || native == (const void *)cudaStreamLegacy ||
         native == (const void *)cudaStreamPerThread;
}
#if CUDART_VERSION >= 12080
#define GWV_STREAM_DEVICE_CALL "cudaStreamGetDevice"
#else
#define GWV_STREAM_DEVICE_CALL "cuStreamGetCtx"
#endif
#define GWV_CAN_CHECK_STREAM 1
/*
 * The device of a caller's stream (not a special handle). CUDA 12.8 added
 * cudaStreamGetDevice; before it, the stream's context (cuStreamGetCtx) is made current
 * for a moment and asked for its device (cuCtxGetDevice). Neither can promise to survive
 * a handle that was never a stream (a freed or foreign pointer is undefined behaviour for
 * the driver: it may be reported as an invalid handle, or crash); a destroyed stream of
 * this process is usually reported.
 */
static inline gwv_err gwv_stream_device(gwv_stream s, int *device) {
#if CUDART_VERSION >= 12080
  return cudaStreamGetDevice(s, device);
#else
  CUcontext sc = NULL, popped = NULL;
  CUdevice d = 0;
  CUresult r = cuStreamGetCtx((CUstream)s, &sc);
  if (r == CUDA_SUCCESS && (r = cuCtxPushCurrent(sc)) == CUDA_SUCCESS) {
    r = cuCtxGetDevice(&d);
    (void)cuCtxPopCurrent(&popped);
  }
  if (r != CUDA_SUCCESS)
    return r == CUDA_ERROR_CONTEXT_IS_DESTROYED ? cudaErrorContextIsDestroyed
           : r == CUDA_ERROR_INVALID_VALUE      ? cudaErrorInvalidValue
           : r == CUDA_ERROR_INVALID_CONTEXT    ? cudaErrorDeviceUninitialized
                                                : cudaErrorInvalidResourceHandle;
  /* A CUdevice is the device's ordinal in every driver so far; look it up to be sure. */
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  for (int i = 0; i < n; i++) {
    CUdevice h = 0;
    if (cuDeviceGet(&h, i) == CUDA_SUCCESS && h == d) {
      *device = i;
      return cudaSuccess;
    }
  }
  return cudaErrorInvalidDevice;
#endif
}

/* A 3-D pitched copy; pitches and sizes in bytes, slice pitch = pitch * ysize. */
static inline gwv_err gwv_memcpy3d_async(void *dst, size_t dpitch, size_t dysize, const void *src,
                                         size_t spitch, size_t sysize, size_t width, size_t height,
                                         size_t depth, gwv_stream s) {
  gwv_memcpy3d p = {0};
  p.dstPtr.ptr = dst;
  p.dstPtr.pitch = dpitch;
  p.dstPtr.xsize = width;
  p.dstPtr.ysize = dysize;
  p.srcPtr.ptr = (void *)(uintptr_t)src;
  p.srcPtr.pitch = spitch;
  p.srcPtr.xsize = width;
  p.srcPtr.ysize = sysize;
  p.extent.width = width;
  p.extent.height = height;
  p.extent.depth = depth;
  p.kind = cudaMemcpyDefault;
  return cudaMemcpy3DAsync(&p, s);
}

/* 16- and 32-bit memsets: the runtime has only the byte-wise cudaMemsetAsync, so these are
 * the driver's calls. The driver works in the thread's current context: the runtime makes
 * a device's primary context current lazily, so a thread that has not needed one yet gets
 * it here (cudaSetDevice of the runtime's current device, which the caller has already
 * made the operation's device). The driver's codes for what a memset can fail with
 * (invalid value 1, out of memory 2, invalid handle 400, illegal address 700, ...) are the
 * runtime's numbers too, so the status passes through as a gwv_err. */
#define GWV_HAVE_MEMSET_D16_D32 1
#define GWV_MEMSET_D16_CALL "cuMemsetD16Async"
#define GWV_MEMSET_D32_CALL "cuMemsetD32Async"
static inline gwv_err gwv_memset_context(void) {
  CUcontext cur = NULL;
  if (cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur) return cudaSuccess;
  int d = 0;
  gwv_err e = cudaGetDevice(&d);
  return e == cudaSuccess ? cudaSetDevice(d) : e;
}
static inline gwv_err gwv_memset_d16_async(void *dst, uint16_t v, size_t n, gwv_stream s) {
  gwv_err e = gwv_memset_context();
  return e != cudaSuccess
             ? e
             : (gwv_err)cuMemsetD16Async((CUdeviceptr)(uintptr_t)dst, v, n, (CUstream)s);
}
static inline gwv_err gwv_memset_d32_async(void *dst, uint32_t v, size_t n, gwv_stream s) {
  gwv_err e = gwv_memset_context();
  return e != cudaSuccess
             ? e
             : (gwv_err)cuMemsetD32Async((CUdeviceptr)(uintptr_t)dst, v, n, (CUstream)s);
}

/* The generation the classifier reads our raw attributes with. */
#define GWV_GEN GWC_GEN_CUDA
_Static_assert((int)CU_MEMORYTYPE_HOST == GWC_CU_HOST &&
                   (int)CU_MEMORYTYPE_DEVICE == GWC_CU_DEVICE &&
                   (int)CU_MEMORYTYPE_ARRAY == GWC_CU_ARRAY &&
                   (int)CU_MEMORYTYPE_UNIFIED == GWC_CU_UNIFIED,
               "CUmemorytype values changed: update gpu_classify.h");

/*
 * One cuPointerGetAttributes call: it answers for any pointer (pageable ones give memory
 * type 0 and ordinal -2 with CUDA_SUCCESS), needs no current context, so it works whatever
 * the caller's current device is (MPICH #5897). IS_LEGACY_CUDA_IPC_CAPABLE and
 * MEMPOOL_HANDLE tell pool and VMM memory from cudaMalloc memory in the same call (what
 * UCX's cuda_ipc and NCCL decide by), so only those pay for finding their extent
 * (gwv_chunk, gwc_mapped_range); they took the places of CONTEXT and BUFFER_ID, which
 * nothing read, so the call asks for as many attributes as before.
 */
static inline void gwv_query(const void *ptr, gwc_attrs *a) {
  /* The attribute list is the same for every call: one static table instead of seven
   * stores per query (the driver only reads it; its prototype is just not const). */
  static CUpointer_attribute at[7] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      CU_POINTER_ATTRIBUTE_IS_MANAGED,
      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,   CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
      CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
      CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
  unsigned int memtype = 0, managed = 0;
  int ordinal = -2;
  /* 1 unless the driver says 0: a driver that leaves it unwritten keeps the fast path. */
  int legacy = 1;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUmemoryPool pool = NULL;
  void *v[7] = {&memtype, &managed, &ordinal, &legacy, &start, &size, &pool};
  CUresult r = cuPointerGetAttributes(7, at, v, (CUdeviceptr)(uintptr_t)ptr);
  a->gen = GWC_GEN_CUDA;
  a->status = (int)r;
  a->memtype = (int)memtype;
  a->is_managed = (int)managed;
  a->device = ordinal;
  a->device_pointer = 0; /* not asked: derived from caps, or looked up for pinned memory */
  a->host_pointer = 0;
  a->range_start = (uintptr_t)start;
  a->range_size = size;
  a->not_legacy_ipc = legacy == 0;
  a->mempool = (uintptr_t)pool;
}
/* The mapping holding q (gwc_mapped_range's callback): cuMemGetAddressRange gives one VMM
 * chunk or one pool allocation; RANGE_START_ADDR tells which reservation q is in, MAPPED
 * whether q is backed at all (0 in a reservation's hole). */
static inline void gwv_chunk(void *user, uintptr_t q, gwc_chunk *out) {
  (void)user;
  static CUpointer_attribute at[4] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
      CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_MAPPED};
  unsigned int memtype = 0;
  int ordinal = -2, mapped = 0;
  CUdeviceptr start = 0, base = 0;
  size_t size = 0;
  void *v[4] = {&memtype, &ordinal, &start, &mapped};
  out->ok = cuPointerGetAttributes(4, at, v, (CUdeviceptr)q) == CUDA_SUCCESS &&
            memtype == CU_MEMORYTYPE_DEVICE && mapped &&
            cuMemGetAddressRange(&base, &size, (CUdeviceptr)q) == CUDA_SUCCESS;
  out->base = (uintptr_t)base;
  out->size = size;
  out->range_start = (uintptr_t)start;
  out->device = ordinal;
}
static inline const char *gwv_query_error_name(int status) {
  const char *s = NULL;
  return cuGetErrorName((CUresult)status, &s) == CUDA_SUCCESS && s ? s : "CUDA_ERROR_UNKNOWN";
}
static inline const char *gwv_query_error_text(int status) {
  const char *s = NULL;
  return cuGetErrorString((CUresult)status, &s) == CUDA_SUCCESS && s ? s : "unknown error";
}

#endif /* GW_GPU_VENDOR_CUDA_H */
