/*
 * gpuwrap — DLPack interop: share arrays with PyTorch, CuPy, NumPy, JAX, ... without copies.
 *
 * DLPack structs
 * --------------
 * This header declares the DLPack 1.x ABI (DLDevice, DLDataType, DLTensor, DLManagedTensor,
 * DLManagedTensorVersioned, DLPackVersion and the flag bits), written from the specification
 * (https://github.com/dmlc/dlpack, include/dlpack/dlpack.h). If the official dlpack.h was
 * included before this header, its declarations are used instead (they are the same ABI);
 * an official header older than 1.0 is refused at compile time. This header defines the
 * official include guard DLPACK_DLPACK_H_, so an official dlpack.h included *after* it is
 * skipped: include the official one first if you need its extras. The C exchange API's
 * types (DLPackExchangeAPI, DLPack 1.2+) are declared here too unless the official header
 * included first has them.
 *
 * Export: gw_to_dlpack*
 * ---------------------
 * The tensor holds one reference on the array (gw_retain): the memory stays valid until the
 * consumer calls the tensor's deleter, even if every gpuwrap handle was released before.
 * No data is copied; shape and strides (always set, in elements) live in the same heap
 * block as the managed tensor, which the deleter frees. Memory kinds map to device types:
 *
 *   memory (backend)            device_type        device_id   data
 *   device   (CUDA / HIP)       kDLCUDA / kDLROCM  its device  device address
 *   pinned   (CUDA / HIP)       kDLCUDAHost /      0           host address
 *                               kDLROCMHost
 *   managed  (CUDA)             kDLCUDAManaged     0           the address
 *   managed  (HIP)              kDLROCM            its device  the address
 *   pageable host (any)         kDLCPU             0           host address
 *   device   (CPU model)        kDLExtDev          its device  its address
 *   anything else of the CPU    kDLCPU             0           host address
 *   backend (pinned, managed)
 *
 * The CPU model's device memory is kDLExtDev (DLPack's reserved extension type), never
 * kDLCPU: a host consumer (NumPy's from_dlpack) refuses it as it refuses kDLCUDA, so code
 * that reads device memory on the host fails on the model as it would on a GPU, not only
 * there. gw_to_dlpack_as refuses kDLCPU for it (GW_ENOTSUP) as for GPU device memory. To
 * read it on the host, copy it (gw_copy into host or pinned memory; Python:
 * Array.copy_from, or np.asarray of a host array filled so).
 *
 * Consumers do not all import every type (measured with PyTorch 2.11 and CuPy 14.2: neither
 * imports kDLCUDAHost, only CuPy imports kDLCUDAManaged, only PyTorch imports kDLCPU), so
 * gw_to_dlpack_as() exports pinned or managed memory as kDLCUDA (through its device address)
 * or as kDLCPU (through its host address) on request — still without copying.
 *
 * Import: gw_from_dlpack*
 * -----------------------
 * The tensor is validated, then its data (+ byte_offset) is wrapped as by
 * gw_wrap_with_deleter(): the tensor's deleter runs exactly once, when the last gpuwrap
 * reference (array, view, or a tensor exported again) goes. The import functions TAKE the
 * tensor, also when they fail: its deleter has then already run (if it is not NULL), and the
 * caller must not touch the tensor again. The memory is classified by the context's pointer
 * query like any wrap (so pageable kDLCPU memory is page-locked through gpuwrap's registry,
 * as gw_wrap() does); the tensor's device type must belong to the context's backend:
 *
 *   context backend   accepted device types
 *   any               kDLCPU
 *   CUDA              kDLCUDA, kDLCUDAHost, kDLCUDAManaged
 *   HIP               kDLROCM, kDLROCMHost
 *   CPU (the model)   kDLExtDev: the model's device memory, of the device it names
 *                     (GW_EDEVICE for other memory or another device)
 *
 * NULL strides (allowed in legacy tensors and in versioned ones before DLPack 1.2) mean
 * C-contiguous. A versioned tensor with the
 * READ_ONLY flag becomes a read-only array (GW_WRAP_READONLY).
 *
 * Streams: gpuwrap's synchronous calls complete before they return, so an exported tensor
 * is ready for any stream; work queued on a gw_stream must be synchronized by the caller
 * before export.
 */
#ifndef GPUWRAP_DLPACK_H
#define GPUWRAP_DLPACK_H

#include "../gpuwrap.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------ */
/* DLPack 1.x ABI (unless the official header came first)                                 */
/* ------------------------------------------------------------------------------------ */

#if defined(DLPACK_DLPACK_H_) || defined(DLPACK_EXTERN_C) || defined(DLPACK_VERSION)
#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION < 1
#error "gpuwrap/dlpack.h needs DLPack 1.0 or newer; the dlpack.h included first is older"
#endif
#else
#define DLPACK_DLPACK_H_
#define GW_DLPACK_OWN_DECLARATIONS 1

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

/** The DLPack version these declarations follow. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

#ifdef _WIN32
#ifdef DLPACK_EXPORTS
#define DLPACK_DLL __declspec(dllexport)
#else
#define DLPACK_DLL __declspec(dllimport)
#endif
#else
#define DLPACK_DLL
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** A major version change alters the layout of DLManagedTensorVersioned after its first
 *  four fields (version, manager_ctx, deleter, flags); a minor one only adds enum values. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/** Where a tensor's memory lives. Values are fixed by the specification. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,          /**< host memory */
  kDLCUDA = 2,         /**< CUDA device memory */
  kDLCUDAHost = 3,     /**< CUDA pinned host memory (cudaMallocHost) */
  kDLOpenCL = 4,       /**< OpenCL */
  kDLVulkan = 7,       /**< Vulkan buffer */
  kDLMetal = 8,        /**< Metal (Apple GPU) */
  kDLVPI = 9,          /**< Verilog simulator buffer */
  kDLROCM = 10,        /**< ROCm/HIP device memory */
  kDLROCMHost = 11,    /**< ROCm pinned host memory (hipHostMalloc) */
  kDLExtDev = 12,      /**< reserved extension device type */
  kDLCUDAManaged = 13, /**< CUDA managed/unified memory (cudaMallocManaged) */
  kDLOneAPI = 14,      /**< oneAPI unified shared memory */
  kDLWebGPU = 15,      /**< WebGPU */
  kDLHexagon = 16,     /**< Qualcomm Hexagon DSP */
  kDLMAIA = 17,        /**< Microsoft MAIA */
  kDLTrn = 18,         /**< AWS Trainium */
} DLDeviceType;

/** A device: its type and index (0 for host, pinned and CUDA managed memory). */
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/** Type codes of DLDataType.code. */
typedef enum {
  kDLInt = 0U,          /**< signed integer */
  kDLUInt = 1U,         /**< unsigned integer */
  kDLFloat = 2U,        /**< IEEE floating point */
  kDLOpaqueHandle = 3U, /**< opaque handle, for testing */
  kDLBfloat = 4U,       /**< bfloat16 */
  kDLComplex = 5U,      /**< complex: a pair of floats, real part first */
  kDLBool = 6U,         /**< boolean, stored in `bits` (8 by convention) */
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,
} DLDataTypeCode;

/** Element type: code (a DLDataTypeCode), bits per lane, lanes (1 for scalars). Native
 *  byte order. Examples: float32 = {2, 32, 1}; complex64 = {5, 64, 1}; bool = {6, 8, 1}. */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/** A tensor description that owns nothing. */
typedef struct {
  /** Base address (a device address for device types, a host address for host types).
   *  The first element is at data + byte_offset. */
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  /** ndim extents. */
  int64_t *shape;
  /** ndim strides in elements; NULL (legacy tensors, versioned ones before 1.2) means
   *  C-contiguous. */
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;

/** The legacy (pre-1.0, unversioned) managed tensor. `deleter(self)` releases
 *  `manager_ctx` and frees `self`; it may be NULL. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/** The tensor is read-only: the consumer must not write to it. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/** The tensor is a copy made by the producer: the consumer owns it alone. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/** A sub-byte type is padded rather than packed. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/** The managed tensor of DLPack 1.x. `deleter(self)` releases `manager_ctx` and frees
 *  `self`; it may be NULL. `flags` holds DLPACK_FLAG_BITMASK_* bits. The fields up to and
 *  including `flags` keep their layout across major versions. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif
#endif /* official DLPack header first */

/* ------------------------------------------------------------------------------------ */
/* DLPack 1.2+ C exchange API (unless the official header came first and has it)          */
/* ------------------------------------------------------------------------------------ */
/*
 * A Python array type publishes a static DLPackExchangeAPI as the class attribute
 * `__dlpack_c_exchange_api__`, a capsule named "dlpack_exchange_api": C conversions between
 * its objects and DLManagedTensorVersioned without a Python call, and the stream its work
 * is queued on. Every function is called with the GIL held, returns 0 on success and -1
 * with a Python exception set on failure (the allocator: through SetError). None of the
 * conversions synchronizes: the consumer orders the producer's current_work_stream before
 * the stream it uses the data on. Written from the specification (dmlc/dlpack 1.2/1.3).
 */
#if defined(GW_DLPACK_OWN_DECLARATIONS) || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 2)
#ifdef __cplusplus
extern "C" {
#endif
/** A new tensor of the producer's, shaped as `prototype` (only dtype, ndim, shape and
 *  device are read). On failure SetError(error_ctx, kind, message) is called (kind: a
 *  Python exception name) and -1 returned. */
typedef int (*DLPackManagedTensorAllocator)(DLTensor *prototype, DLManagedTensorVersioned **out,
                                            void *error_ctx,
                                            void (*SetError)(void *error_ctx, const char *kind,
                                                             const char *message));
/** The owning tensor of `py_object` (an object of the type the API was found on). */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void *py_object,
                                                     DLManagedTensorVersioned **out);
/** A non-owning view of `py_object`, valid until control returns to the producer; shape
 *  and strides point into the producer's object. */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object, DLTensor *out);
/** The producer's current work stream on a device (a cudaStream_t / hipStream_t; NULL on
 *  the CPU and for the legacy default stream). */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void **out_current_stream);
/** A producer object over `tensor`, which it TAKES (also on failure). */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned *tensor,
                                                   void **out_py_object);

/** The part that stays across versions: a consumer checks version.major first, and may
 *  follow prev_api (NULL: none) to an older major version it knows. */
typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;

/** The function table; only dltensor_from_py_object_no_sync may be NULL. */
typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;
#ifdef __cplusplus
}
#endif
#endif /* exchange API */

/** The exchange API version gpuwrap's Python module publishes and consumes (1.3: the
 *  capsule attribute; the table is that of 1.2). */
#define GW_DLPACK_EXCHANGE_MAJOR 1
#define GW_DLPACK_EXCHANGE_MINOR 3

/* ------------------------------------------------------------------------------------ */
/* gpuwrap <-> DLPack                                                                     */
/* ------------------------------------------------------------------------------------ */

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The device type and id gw_to_dlpack() would give `a` (see the table at the top); what a
 * Python `__dlpack_device__` returns.
 * @return GW_OK; GW_EINVAL (a or out NULL); GW_ENOTSUP (memory of unknown kind).
 */
GW_API gw_status gw_dlpack_device(const gw_array *a, DLDevice *out);

/**
 * Export `a` as a DLPack 1.x tensor, without copying.
 * @param a    the array (borrowed); the tensor takes its own reference on it.
 * @param out  receives the tensor, owned by the caller: hand it to a consumer, or call
 *             `(*out)->deleter(*out)` exactly once when done. Its version is
 *             {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}; flags has READ_ONLY when
 *             gw_is_readonly(a); strides are always set; byte_offset is 0.
 * @return GW_OK; GW_EINVAL (a or out NULL); GW_ENOTSUP (memory of unknown kind);
 *         GW_ENOMEM (the tensor's one allocation).
 */
GW_API gw_status gw_to_dlpack(gw_array *a, DLManagedTensorVersioned **out);

/**
 * As gw_to_dlpack(), with the device type chosen by the caller (the Python protocol's
 * `dl_device`). Zero-copy always; what is possible:
 *   - the natural device of `a` (gw_dlpack_device()): always;
 *   - kDLCPU: memory the host can address (pageable, pinned, managed: its host address);
 *     every array of the CPU backend but its device memory (refused as on a GPU);
 *   - kDLExtDev (CPU backend): the model's device memory, device_id its device;
 *   - kDLCUDA (CUDA backend) / kDLROCM (HIP backend): memory a device can address (device,
 *     pinned, managed: its device address). device_id must be the memory's device for
 *     device memory, the array context's device for pinned and managed memory;
 *   - kDLCUDAHost / kDLROCMHost: pinned memory; kDLCUDAManaged: CUDA managed memory.
 * device_id: DLPack sets it to 0 for CPU, pinned and managed memory, so with kDLCPU,
 * kDLCUDAHost, kDLROCMHost and kDLCUDAManaged it must be 0 (the tensor then says 0):
 * another id is refused with GW_EINVAL naming want.device_id, on every backend, never
 * exported as 0 instead. Pinned memory is reached through the context's device, but as a
 * host type it carries no device id; to name the device, ask for kDLCUDA / kDLROCM with it.
 * @param want  the device type and id to offer.
 * @return GW_OK; GW_EINVAL (a or out NULL, negative device_id, non-zero device_id for
 *         kDLCPU / kDLCUDAHost / kDLROCMHost / kDLCUDAManaged); GW_ENOTSUP (`want` is not
 *         possible without a copy, e.g. device memory as kDLCPU, or another device's id
 *         for kDLCUDA / kDLROCM; gw_last_error() says why); GW_ENOMEM.
 */
GW_API gw_status gw_to_dlpack_as(gw_array *a, DLDevice want, DLManagedTensorVersioned **out);

/**
 * Import a DLPack 1.x tensor as an array, without copying. TAKES `t` (see "Import" above):
 * on success its deleter runs when the last reference to the array goes; on failure it has
 * run before this returns (if not NULL). Either way the caller must not use `t` again.
 * @param ctx  context whose backend classifies the memory.
 * @param t    the tensor; version.major must be 1. Other flags than READ_ONLY are ignored.
 * @param out  receives the array (one reference), read-only if t has READ_ONLY.
 * @return GW_OK;
 *   GW_EINVAL  ctx, t or out NULL; dl_tensor malformed: ndim < 0 or > GW_MAX_DIMS, shape
 *              NULL with ndim > 0, strides NULL with ndim > 0 in a tensor of version 1.2
 *              or later (earlier ones may leave them NULL: C-contiguous), a negative extent, dtype gpuwrap has no type for (code, bits, or lanes
 *              != 1), data NULL with elements, data + byte_offset overflowing or misaligned
 *              for the dtype (gw_last_error() names the field); and gw_wrap()'s own checks;
 *   GW_ENOTSUP version.major is not 1 (no other field is read);
 *   GW_EDEVICE the device type does not belong to ctx's backend (e.g. kDLCUDA into a CPU
 *              context), or is a type gpuwrap has no backend for;
 *   GW_ERANGE, GW_ENOMEM, GW_EBACKEND as gw_wrap_with_deleter().
 */
GW_API gw_status gw_from_dlpack(gw_context *ctx, DLManagedTensorVersioned *t, gw_array **out);

/**
 * Legacy (unversioned) export: as gw_to_dlpack(), for consumers of DLPack < 1.0.
 * A legacy tensor cannot say "read-only", so a read-only array is refused.
 * @return GW_OK; GW_EINVAL; GW_EREADONLY (gw_is_readonly(a)); GW_ENOTSUP; GW_ENOMEM.
 */
GW_API gw_status gw_to_dlpack_legacy(gw_array *a, DLManagedTensor **out);

/** Legacy export with a chosen device type: as gw_to_dlpack_as() and gw_to_dlpack_legacy(). */
GW_API gw_status gw_to_dlpack_legacy_as(gw_array *a, DLDevice want, DLManagedTensor **out);

/**
 * Legacy import: as gw_from_dlpack() (it TAKES t, also on failure), without a version to
 * check; NULL strides mean C-contiguous; the array is writable.
 */
GW_API gw_status gw_from_dlpack_legacy(gw_context *ctx, DLManagedTensor *t, gw_array **out);

/* ---- for language bindings without a compiler (ctypes, cffi's ABI mode) ---------------- */

/**
 * A Python capsule destructor written in C, for bindings that cannot compile one
 * (python/gpuwrap.py): pass its address to PyCapsule_New for capsules named "dltensor" or
 * "dltensor_versioned" that hold a tensor from gw_to_dlpack*. When the capsule is freed and
 * still has its name (no consumer renamed it "used_..." to take the tensor), it calls the
 * tensor's deleter. It makes no Python call, so it is safe while an exception is pending
 * (a Python-level destructor is not: ctypes would raise, and so swallow, that exception).
 * It reads the capsule's pointer and name at the offsets given by
 * gw_dlpack_capsule_layout() (default: those of CPython's standard build, 2 and 3 words).
 */
GW_API void gw_dlpack_capsule_destructor(void *capsule);

/**
 * Byte offsets of the `pointer` and `name` fields inside a PyCapsule object, as the binding
 * measured them on a probe capsule (free-threaded builds have a larger object header).
 * @return GW_OK; GW_EINVAL (offsets not pointer-aligned, equal, or beyond 256 bytes).
 */
GW_API gw_status gw_dlpack_capsule_layout(size_t pointer_offset, size_t name_offset);

#ifdef __cplusplus
}
#endif
#endif /* GPUWRAP_DLPACK_H */
