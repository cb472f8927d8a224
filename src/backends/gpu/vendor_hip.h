/*
 * Vendor shim, HIP side (see vendor_cuda.h for the idea). What really differs from CUDA:
 *   - the pointer query: hipPointerGetAttributes, whose struct has `memoryType` with
 *     ROCm-5 numbering before ROCm 6 and `type` with CUDA-like numbering from ROCm 6; ROCm 5
 *     returns an error for host memory it does not know (ROCm 6: "unregistered"). The
 *     generation is fixed at compile time from HIP_VERSION_MAJOR and handed to the
 *     classifier, which knows both numberings;
 *   - base/extent come from a second call, hipMemGetAddressRange (HIP has no range
 *     attribute in the pointer-attribute struct);
 *   - the device address of registered memory can differ from the host address on AMD,
 *     and the query gives it (devicePointer), so it is passed through;
 *   - pinned allocation is hipHostMalloc/hipHostFree; the synchronous stream is the null
 *     stream (HIP has no cudaStreamLegacy);
 *   - without hipcc there are no kernels; hipMemsetD16/D32 help the kernel-less fill.
 * Errors a HIP call leaves in hipGetLastError() are cleared by the backend, so a failure
 * gpuwrap handles does not surface in the caller's own error checks.
 */
#ifndef GW_GPU_VENDOR_HIP_H
#define GW_GPU_VENDOR_HIP_H

#include "gpu_classify.h"

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#include <string.h>

#define GWV_NAME "hip"
#define GWV_BACKEND GW_BACKEND_HIP
#define GWV_QUERY_CALL "hipPointerGetAttributes"

typedef hipError_t gwv_err;
typedef hipStream_t gwv_stream;
typedef hipEvent_t gwv_event;

#define GWV_SUCCESS hipSuccess
#define GWV_SYNC_STREAM ((hipStream_t)0) /* the blocking null stream, like cudaMemcpy's */
#define GWV_MEMCPY_DEFAULT hipMemcpyDefault
#define GWV_STREAM_FLAGS hipStreamDefault
#define GWV_HOST_ALLOC_FLAGS (hipHostMallocMapped | hipHostMallocPortable)
#define GWV_HOST_REGISTER_FLAGS (hipHostRegisterMapped | hipHostRegisterPortable)
/*
 * Read-only registration (GW__REG_READONLY). ROCm 5 has neither the flag nor a way to ask
 * for it: its 0x8 is hipExtHostRegisterCoarseGrained, so nothing may be passed there and
 * the capability is 0 (read-only host memory becomes a host-only array whose copies stage).
 * ROCm 6 defines hipHostRegisterReadOnly and reports support only as the device property
 * hostRegisterReadOnlySupported (there is no hipDeviceAttribute for it); the flag is used
 * only where the device says it supports it.
 */
#if HIP_VERSION_MAJOR >= 6 && defined(hipHostRegisterReadOnly)
#define GWV_HOST_REGISTER_READONLY hipHostRegisterReadOnly
#define GWV_HAVE_HOST_REGISTER_READONLY 1
#else
#define GWV_HOST_REGISTER_READONLY 0u
#define GWV_HAVE_HOST_REGISTER_READONLY 0
#endif
#define GWV_READONLY_ATTR_NAME "hipDeviceProp_t::hostRegisterReadOnlySupported"
#define GWV_ATTACH_GLOBAL hipMemAttachGlobal
#define GWV_EVENT_FLAGS hipEventDisableTiming

/* The context tokens of vendor_cuda.h: HIP's context calls are deprecated, so HIP has no
 * token, gwg_enter always asks hipGetDevice, and a switch is undone with hipSetDevice. */
typedef void *gwv_ctxtok;
static inline gwv_ctxtok gwv_primary_token(int device) {
  (void)device;
  return NULL;
}
static inline gwv_ctxtok gwv_current(void) { return NULL; }
static inline int gwv_set_current(gwv_ctxtok t) {
  (void)t;
  return 0;
}

#define gwv_GetDeviceCount hipGetDeviceCount
#define gwv_GetDevice hipGetDevice
#define gwv_SetDevice hipSetDevice
#define gwv_InitContext() hipFree(NULL)
#define gwv_Malloc hipMalloc
#define gwv_Free hipFree
#define gwv_HostAlloc hipHostMalloc
#define gwv_FreeHost hipHostFree
#define gwv_MallocManaged hipMallocManaged
#define gwv_HostRegister hipHostRegister
#define gwv_HostUnregister hipHostUnregister
#define gwv_HostGetDevicePointer hipHostGetDevicePointer
#define gwv_MemcpyAsync hipMemcpyAsync
#define gwv_Memcpy2DAsync hipMemcpy2DAsync
#define gwv_MemsetAsync hipMemsetAsync
#define gwv_Memcpy hipMemcpy
#define gwv_StreamCreateWithFlags hipStreamCreateWithFlags
#define gwv_StreamDestroy hipStreamDestroy
#define gwv_StreamSynchronize hipStreamSynchronize
#define gwv_DeviceSynchronize hipDeviceSynchronize
#define gwv_EventCreateWithFlags hipEventCreateWithFlags
#define gwv_EventRecord hipEventRecord
#define gwv_EventSynchronize hipEventSynchronize
#define gwv_EventDestroy hipEventDestroy
#define gwv_EventQuery hipEventQuery
#define gwv_StreamWaitEvent hipStreamWaitEvent
#define gwv_GetLastError hipGetLastError
#define gwv_GetErrorName hipGetErrorName
#define gwv_GetErrorString hipGetErrorString

/* Memory from another process: hipIpc* mirror cudaIpc* (gpu_ipc.c). */
typedef hipIpcMemHandle_t gwv_ipc_handle;
#define gwv_IpcGetMemHandle hipIpcGetMemHandle
#define gwv_IpcOpenMemHandle hipIpcOpenMemHandle
#define gwv_IpcCloseMemHandle hipIpcCloseMemHandle
typedef hipIpcEventHandle_t gwv_ipc_event_handle;
#define gwv_IpcGetEventHandle hipIpcGetEventHandle
#define gwv_IpcOpenEventHandle hipIpcOpenEventHandle
/* An event another process can open (interprocess events must not time). */
#define GWV_EVENT_IPC_FLAGS (hipEventDisableTiming | hipEventInterprocess)
#define GWV_IPC_OPEN_FLAGS hipIpcMemLazyEnablePeerAccess
/* HIP has no attribute that says whether legacy IPC can export an allocation (in every
 * ROCm the build supports): hipIpcGetMemHandle's own refusal is mapped instead. Nor a
 * buffer id: allocations are told apart by base and extent. */
static inline const char *gwv_ipc_refusal(const void *ptr) {
  (void)ptr;
  return NULL;
}
static inline uint64_t gwv_buffer_id(const void *ptr) {
  (void)ptr;
  return 0;
}
/* Stream-ordered pools and VMM chunks shared between processes (gpu_ipc.c holds the
 * logic, one source for both vendors): ROCm 5.2 declares every call and attribute the
 * CUDA path uses (hipMemPool{Export,Import}*, hipPointerGetAttribute with
 * HIP_POINTER_ATTRIBUTE_MEMPOOL_HANDLE / ALLOWED_HANDLE_TYPES, hipMemRetainAllocationHandle,
 * hipMem{Export,Import}*ShareableHandle, hipMemAddressReserve, hipMemMap, hipMemSetAccess),
 * so the same source is compiled for HIP. Compiled against ROCm 5.2's headers, never run
 * on AMD hardware: which attributes CLR fills in is unmeasured (where it leaves
 * MEMPOOL_HANDLE or ALLOWED_HANDLE_TYPES unset, pool memory falls back to legacy IPC and
 * its refusal). hipMemPoolPtrExportData is 64 bytes, as CUDA's. Each driver-level call
 * returns GWV_DRV_SUCCESS (0) or HIP's code. */
typedef hipMemPool_t gwv_mempool;
typedef hipMemPoolPtrExportData gwv_pool_ptr_data;
#define GWV_HANDLE_POSIX_FD hipMemHandleTypePosixFileDescriptor
#define gwv_MemPoolExportToShareableHandle hipMemPoolExportToShareableHandle
#define gwv_MemPoolImportFromShareableHandle hipMemPoolImportFromShareableHandle
#define gwv_MemPoolExportPointer hipMemPoolExportPointer
#define gwv_MemPoolImportPointer hipMemPoolImportPointer
#define gwv_MemPoolDestroy hipMemPoolDestroy
typedef hipDeviceptr_t gwv_devptr;
typedef hipMemGenericAllocationHandle_t gwv_mem_handle;
typedef hipMemAllocationProp gwv_mem_prop;
typedef hipMemAccessDesc gwv_access_desc;
#define GWV_DRV_SUCCESS hipSuccess
/* A refused probe (not pool memory, not a VMM chunk) must not stay HIP's last error. */
#define gwv_drv_clear() ((void)hipGetLastError())
#define GWV_DRV(name) "hip" name
#define gwv_PointerGetAttribute(data, attr, ptr) \
  hipPointerGetAttribute(data, attr, (hipDeviceptr_t)(uintptr_t)(ptr))
#define GWV_PA_MEMPOOL_HANDLE HIP_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
#define GWV_PA_ALLOWED_HANDLE_TYPES HIP_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES
#define GWV_MEM_HANDLE_POSIX_FD hipMemHandleTypePosixFileDescriptor
/* ROCm 5.2 names the field in the singular (CUDA: requestedHandleTypes) */
#define GWV_PROP_HANDLE_TYPES(prop) ((prop).requestedHandleType)
#define GWV_MEM_LOCATION_DEVICE hipMemLocationTypeDevice
#define GWV_MEM_ACCESS_RW hipMemAccessFlagsProtReadWrite
#define gwv_MemRetainAllocationHandle hipMemRetainAllocationHandle
#define gwv_MemGetAllocationPropertiesFromHandle hipMemGetAllocationPropertiesFromHandle
#define gwv_MemGetAddressRange hipMemGetAddressRange
#define gwv_MemRelease hipMemRelease
#define gwv_MemExportToShareableHandle hipMemExportToShareableHandle
#define gwv_MemImportFromShareableHandle hipMemImportFromShareableHandle
#define gwv_MemAddressReserve hipMemAddressReserve
#define gwv_MemAddressFree hipMemAddressFree
#define gwv_MemMap hipMemMap
#define gwv_MemUnmap hipMemUnmap
#define gwv_MemSetAccess hipMemSetAccess
/* The device's work done (hipCtxSynchronize is deprecated; the device is current). */
#define gwv_CtxSynchronize hipDeviceSynchronize
#define GWV_CTX_SYNC_NAME "hipDeviceSynchronize"

typedef enum {
  GWV_ATTR_PAGEABLE_ACCESS = hipDeviceAttributePageableMemoryAccess,
  /* "CUDA only" in ROCm 5: the query fails on AMD and we read 0, the safe answer there
   * (registered memory gets its own device address). */
  GWV_ATTR_HOST_PTR_FOR_REGISTERED = hipDeviceAttributeCanUseHostPointerForRegisteredMem,
  GWV_ATTR_SM_COUNT = hipDeviceAttributeMultiprocessorCount,
  GWV_ATTR_MAX_PITCH = hipDeviceAttributeMaxPitch,
  GWV_ATTR_PAGEABLE_HOST_PAGE_TABLES = hipDeviceAttributePageableMemoryAccessUsesHostPageTables,
} gwv_attr;
static inline int gwv_device_attr(gwv_attr a, int device) {
  int v = 0;
  if (hipDeviceGetAttribute(&v, (hipDeviceAttribute_t)a, device) != hipSuccess) {
    (void)hipGetLastError();
    v = 0;
  }
  return v;
}

/* The device's UUID (all zero when the runtime does not give it). */
static inline void gwv_device_uuid(int device, unsigned char out[16]) {
  hipUUID u;
  hipDevice_t d;
  memset(out, 0, 16);
  if (hipDeviceGet(&d, device) == hipSuccess && hipDeviceGetUuid(&u, d) == hipSuccess)
    memcpy(out, u.bytes, 16);
  else
    (void)hipGetLastError();
}

/* HIP has no MPS attribute: whether several processes' work on one device runs
 * concurrently is not known here, so the answer is the cautious one (the halo's AUTO then
 * keeps ranks that share a device off the IPC path; forcing it still works). */
static inline int gwv_concurrent_processes(int device) {
  (void)device;
  return 0;
}

/* Whether host_register may pass GWV_HOST_REGISTER_READONLY on `device`. */
static inline int gwv_host_register_readonly_supported(int device) {
#if GWV_HAVE_HOST_REGISTER_READONLY
  hipDeviceProp_t p;
  memset(&p, 0, sizeof p);
  if (hipGetDeviceProperties(&p, device) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return p.hostRegisterReadOnlySupported != 0;
#else
  (void)device;
  return 0;
#endif
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
typedef hipStreamCaptureMode gwv_capmode;
static inline gwv_capmode gwv_capture_relax(void) {
  hipStreamCaptureMode m = hipStreamCaptureModeRelaxed;
  if (hipThreadExchangeStreamCaptureMode(&m) != hipSuccess) {
    (void)hipGetLastError();
    return hipStreamCaptureModeRelaxed; /* nothing to restore */
  }
  return m;
}
static inline void gwv_capture_restore(gwv_capmode m) {
  if (m != hipStreamCaptureModeRelaxed && hipThreadExchangeStreamCaptureMode(&m) != hipSuccess)
    (void)hipGetLastError();
}
static inline gwv_err gwv_stream_capturing(gwv_stream s, uint64_t *capture) {
  hipStreamCaptureStatus st = hipStreamCaptureStatusNone;
  unsigned long long id = 0;
  gwv_err e = hipStreamGetCaptureInfo(s, &st, &id);
  /* an id is never 0 in practice; 0 would read as "not capturing", so it is moved off 0 */
  *capture = e == hipSuccess && st != hipStreamCaptureStatusNone ? (id ? (uint64_t)id : 1) : 0;
  return e;
}
#define GWV_IS_CAPTURE_IMPLICIT(e) ((e) == hipErrorStreamCaptureImplicit)
#define GWV_CAPTURING_CALL "hipStreamGetCaptureInfo"

#define GWV_IS_ALREADY_REGISTERED(e) ((e) == hipErrorHostMemoryAlreadyRegistered)
#define GWV_IS_NOT_REGISTERED(e) ((e) == hipErrorHostMemoryNotRegistered)
#define GWV_IS_INVALID_VALUE(e) ((e) == hipErrorInvalidValue)
#define GWV_IS_OOM(e) ((e) == hipErrorOutOfMemory)
#define GWV_IS_NODEV(e) \
  ((e) == hipErrorInvalidDevice || (e) == hipErrorNoDevice || (e) == hipErrorInsufficientDriver)
#define GWV_IS_NO_DEVICE(e) ((e) == hipErrorNoDevice)
#define GWV_IS_NOT_READY(e) ((e) == hipErrorNotReady)
#define GWV_IS_CAPTURED_EVENT(e) ((e) == hipErrorCapturedEvent)
/* hip::isValid() failing is reported as "context is destroyed" (ROCm 5.5+). */
#define GWV_IS_INVALID_HANDLE(e)                                        \
  ((e) == hipErrorInvalidHandle || (e) == hipErrorContextIsDestroyed || \
   (e) == hipErrorInvalidValue || (e) == hipErrorInvalidContext)

/*
 * Borrowed streams. HIP has no hipStreamLegacy: its null stream is the blocking default
 * stream of the current device (what hipMemcpy orders on), so NULL is used as itself.
 * hipStreamPerThread exists from ROCm 4.5.
 */
#define GWV_BORROW_NULL ((hipStream_t)0)
static inline int gwv_stream_is_special(const void *native) {
#ifdef hipStreamPerThread
  if (native == (const void *)hipStreamPerThread) return 1;
#endif
  return native == NULL;
}
/*
 * The device of a caller's stream. hipStreamGetDevice came with ROCm 5.5 and checks the
 * handle against the runtime's list of live streams first (hip::isValid: a foreign or
 * destroyed handle is "context is destroyed", never dereferenced). Older HIP (Debian's
 * 5.2) has no call that checks a handle without dereferencing it (hipGetStreamDeviceId
 * reads the stream object): the handle is accepted as a stream of the context's device,
 * and a wrong one fails at its first use.
 */
#if HIP_VERSION_MAJOR > 5 || (HIP_VERSION_MAJOR == 5 && HIP_VERSION_MINOR >= 5)
#define GWV_STREAM_DEVICE_CALL "hipStreamGetDevice"
#define GWV_CAN_CHECK_STREAM 1
static inline gwv_err gwv_stream_device(gwv_stream s, int *device) {
  hipDevice_t d = 0;
  hipError_t e = hipStreamGetDevice(s, &d);
  if (e == hipSuccess) *device = (int)d;
  return e;
}
#else
#define GWV_STREAM_DEVICE_CALL "(unchecked: HIP < 5.5 has no hipStreamGetDevice)"
#define GWV_CAN_CHECK_STREAM 0
#endif

static inline gwv_err gwv_memcpy3d_async(void *dst, size_t dpitch, size_t dysize, const void *src,
                                         size_t spitch, size_t sysize, size_t width, size_t height,
                                         size_t depth, gwv_stream s) {
  struct hipMemcpy3DParms p = {0};
  p.dstPtr = make_hipPitchedPtr(dst, dpitch, width, dysize);
  p.srcPtr = make_hipPitchedPtr((void *)(uintptr_t)src, spitch, width, sysize);
  p.extent = make_hipExtent(width, height, depth);
  p.kind = hipMemcpyDefault;
  return hipMemcpy3DAsync(&p, s);
}

#define GWV_HAVE_MEMSET_D16_D32 1
#define GWV_MEMSET_D16_CALL "hipMemsetD16Async"
#define GWV_MEMSET_D32_CALL "hipMemsetD32Async"
static inline gwv_err gwv_memset_d16_async(void *dst, uint16_t v, size_t n, gwv_stream s) {
  return hipMemsetD16Async((hipDeviceptr_t)dst, v, n, s);
}
static inline gwv_err gwv_memset_d32_async(void *dst, uint32_t v, size_t n, gwv_stream s) {
  return hipMemsetD32Async((hipDeviceptr_t)dst, (int)v, n, s);
}

#if HIP_VERSION_MAJOR >= 6
#define GWV_GEN GWC_GEN_ROCM6
#define GWV_ATTR_TYPE(a) ((a).type)
_Static_assert((int)hipMemoryTypeUnregistered == GWC_HIP6_UNREGISTERED &&
                   (int)hipMemoryTypeHost == GWC_HIP6_HOST &&
                   (int)hipMemoryTypeDevice == GWC_HIP6_DEVICE &&
                   (int)hipMemoryTypeManaged == GWC_HIP6_MANAGED &&
                   (int)hipMemoryTypeArray == GWC_HIP6_ARRAY &&
                   (int)hipMemoryTypeUnified == GWC_HIP6_UNIFIED,
               "hipMemoryType (ROCm 6) values changed: update gpu_classify.h");
#else
#define GWV_GEN GWC_GEN_ROCM5
#define GWV_ATTR_TYPE(a) ((a).memoryType)
/* hipMemoryTypeManaged (4) only exists in late 5.x headers; it is not checked here. */
_Static_assert((int)hipMemoryTypeHost == GWC_HIP5_HOST &&
                   (int)hipMemoryTypeDevice == GWC_HIP5_DEVICE &&
                   (int)hipMemoryTypeArray == GWC_HIP5_ARRAY &&
                   (int)hipMemoryTypeUnified == GWC_HIP5_UNIFIED,
               "hipMemoryType (ROCm 5) values changed: update gpu_classify.h");
#endif
_Static_assert((int)hipErrorInvalidValue == GWC_HIP_ERROR_INVALID_VALUE,
               "hipErrorInvalidValue changed: update gpu_classify.h");

/* hipPointerGetAttributes, then hipMemGetAddressRange for base/extent when the pointer is
 * one HIP knows. Neither depends on the current device. */
static inline void gwv_query(const void *ptr, gwc_attrs *a) {
  hipPointerAttribute_t h;
  memset(&h, 0, sizeof h);
  hipError_t e = hipPointerGetAttributes(&h, ptr);
  a->gen = GWV_GEN;
  a->status = (int)e;
  a->memtype = (int)GWV_ATTR_TYPE(h);
  a->is_managed = h.isManaged;
  a->device = h.device;
  a->device_pointer = (uintptr_t)h.devicePointer;
  a->host_pointer = (uintptr_t)h.hostPointer;
  a->range_start = 0;
  a->range_size = 0;
  if (e != hipSuccess) {
    (void)hipGetLastError(); /* ROCm 5's "unregistered" error must not stick */
    return;
  }
#if HIP_VERSION_MAJOR >= 6
  if (a->memtype == GWC_HIP6_UNREGISTERED) return;
#endif
  hipDeviceptr_t base = NULL;
  size_t size = 0;
  if (hipMemGetAddressRange(&base, &size, (hipDeviceptr_t)(uintptr_t)ptr) == hipSuccess) {
    a->range_start = (uintptr_t)base;
    a->range_size = size;
  } else {
    (void)hipGetLastError(); /* range unknown is allowed: base NULL, extent 0 */
  }
}
/* HIP: the query (hipPointerGetAttributes) does not ask IS_LEGACY_HIP_IPC_CAPABLE, so
 * gwc_needs_range is never true and this is never called: a pool allocation's extent is
 * hipMemGetAddressRange's (its allocation), a VMM chunk's the chunk alone (a wrap spanning
 * chunks is GW_ERANGE on HIP). ROCm 5.2 declares the VMM calls and the attributes
 * (hipDrvPointerGetAttributes, HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE / MAPPED),
 * but which ones CLR fills in is unmeasured, and a second call would slow every HIP query:
 * the walk is compiled out until it is measured on ROCm. */
/* HIP: whether legacy IPC can export ptr's allocation is not asked (see above): unknown,
 * so the export probes for pool and VMM memory first. */
static inline int gwv_legacy_ipc_capable(const void *ptr) {
  (void)ptr;
  return -1;
}
static inline void gwv_chunk(void *user, uintptr_t q, gwc_chunk *out) {
  (void)user;
  (void)q;
  out->ok = 0;
}
static inline const char *gwv_query_error_name(int status) {
  return hipGetErrorName((hipError_t)status);
}
static inline const char *gwv_query_error_text(int status) {
  return hipGetErrorString((hipError_t)status);
}

#endif /* GW_GPU_VENDOR_HIP_H */
