/*
 * gpuwrap — use any existing pointer as a typed N-d GPU array, without copying.
 *
 * Memory kinds
 * ------------
 *   GW_MEM_HOST     pageable host memory that no one has page-locked. A GPU cannot reach
 *                   it (unless the device reads pageable memory directly, HMM/ATS).
 *   GW_MEM_PINNED   page-locked host memory: from the backend's pinned allocator, or
 *                   registered (by gpuwrap or by anyone else). Host and device both see it.
 *   GW_MEM_DEVICE   device memory. Not host-accessible: gw_host_data() returns NULL.
 *   GW_MEM_MANAGED  managed (unified) memory. Host and device both see it.
 *
 * What gw_wrap does
 * -----------------
 * gw_wrap() never allocates array memory. It asks the runtime what `ptr` is and which
 * device owns it (the pointer's device, not the context's), checks that the wrapped span
 * fits in the allocation, and
 *   - device / managed / pinned memory: records it; with GW_WRAP_OWN the backend's matching
 *     free runs when the last reference goes;
 *   - pinned memory registered by someone else: uses it, never unregisters it; GW_WRAP_OWN
 *     is refused where the backend can tell it from a pinned allocation (the CPU backend);
 *     on CUDA/HIP, owning such memory needs gw_wrap_with_deleter();
 *   - pageable host memory: page-locks exactly the wrapped bytes (a byte range, never
 *     rounded out to pages, so neighbouring buffers are left as they were) through a
 *     process-wide, reference-counted registry (so two wraps of one buffer register it once
 *     and unregister it once, when the last goes), unless GW_WRAP_NO_REGISTER is given or the
 *     device reads pageable memory directly; with GW_WRAP_OWN the pointer is also free()d.
 *     Read-only pages and GW_WRAP_READONLY wraps are registered read-only where the device
 *     can (an array over a read-only registration is read-only); memory that cannot be
 *     registered (a read-only MAP_PRIVATE file mapping: CUDA's read-only registration
 *     never returns on one) gives a host-only array whose copies stage. A release drops
 *     exactly the registry references its wrap took;
 *   - zero elements: succeeds for any pointer, NULL included, without calling the runtime,
 *     except GW_WRAP_OWN of a non-NULL pointer: it is classified so that the matching free
 *     runs (ownership is never dropped silently).
 * A wrap that would be a second owner of memory a live array owns (any address inside an
 * owned span) fails with GW_EOWNED.
 * Release wraps of memory before freeing that memory yourself: the runtime keeps a
 * registration alive after munmap, so a stale registration goes unnoticed.
 *
 * Conventions
 * -----------
 * Every fallible call returns gw_status (GW_OK == 0, errors negative) and writes results
 * through out-parameters, which are left untouched on failure. gw_last_error() gives the
 * detail of this thread's most recent failure (which argument, and why); read it only
 * after a call failed: successful calls do not clear it. A failed call leaves
 * nothing behind: no registration, no reference, no allocation, no event. The one
 * exception is work already queued on a stream, which no runtime can take back: an
 * asynchronous call that the runtime fails part-way may have queued some of its pieces
 * (gw_copy_async: what a failed asynchronous call leaves). The library never prints
 * and never aborts. Pointers passed in are borrowed unless a call says it takes them.
 * Shapes and strides are int64_t; strides count elements (as DLPack does); NULL strides
 * mean C-contiguous (row-major); column-major (Fortran, Julia) is a choice of strides.
 *
 * Structs the library fills (gw_ptrinfo, gw_setting_info; gw_halo_info, gw_grid_info in
 * gpuwrap/halo.h) begin with `size_t struct_size`: set it to the struct's size,
 *     gw_ptrinfo info = {.struct_size = sizeof info};   (C++: info.struct_size = sizeof info)
 * so that a later libgpuwrap, whose struct has grown at its end, writes only the bytes of
 * the layout your program was compiled with (as libuv and UCX do). The library writes
 * exactly the layout struct_size names, and sets struct_size to the size it wrote. A value
 * it does not know as one of its layouts (0, never set, garbage) is read as the first
 * layout, the one of the release that added the field: a caller that does not set it is
 * never overrun, but a later library fills only the first layout's fields for it. Fields
 * are only ever added at the end; no field is renamed or moved.
 *
 * Thread safety: all calls may be made from any thread. An array may be shared between
 * threads for reading; gw_retain/gw_release are atomic.
 */
#ifndef GPUWRAP_H
#define GPUWRAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(GW_STATIC_DEFINE)
#define GW_API
#elif defined(GW_BUILDING_LIBRARY)
#define GW_API __attribute__((visibility("default")))
#else
#define GW_API
#endif

#include <gpuwrap/version.h> /* GW_VERSION_MAJOR, _MINOR, _PATCH, GW_VERSION_STRING */

/** The library's version, "MAJOR.MINOR.PATCH" (static storage, never NULL). It differs from
 *  GW_VERSION_STRING, the headers' version, when a program runs against another build of
 *  libgpuwrap than the one it was compiled with. */
GW_API const char *gw_version_string(void);

/** Most dimensions an array may have. */
#define GW_MAX_DIMS 16

/* ------------------------------------------------------------------------------------ */
/* Errors                                                                                 */
/* ------------------------------------------------------------------------------------ */

/* One table: the enum, gw_strerror() and gw_err_name() are all generated from it. */
#define GW_STATUS_TABLE(XX)                                                             \
  XX(GW_OK, 0, "success")                                                               \
  XX(GW_EINVAL, -1, "invalid argument")                                                 \
  XX(GW_ENOMEM, -2, "out of memory")                                                    \
  XX(GW_ENODEV, -3, "no such device or backend")                                        \
  XX(GW_ENOTSUP, -4, "operation not supported by this backend or memory kind")          \
  XX(GW_ERANGE, -5, "span exceeds the allocation")                                      \
  XX(GW_EDEVICE, -6, "memory is on another device or backend than the operation needs") \
  XX(GW_EOWNED, -7, "memory is already owned by a live array")                          \
  XX(GW_EREADONLY, -8, "array is read-only")                                            \
  XX(GW_EBACKEND, -9, "backend runtime error")                                          \
  XX(GW_EALREADY, -10, "host memory is already registered")                             \
  XX(GW_ENOTREG, -11, "host memory is not registered")                                  \
  XX(GW_EBUSY, -12, "resource still in use")

typedef enum {
#define GW_STATUS_ENUM_(name, value, text) name = value,
  GW_STATUS_TABLE(GW_STATUS_ENUM_)
#undef GW_STATUS_ENUM_
} gw_status;

/** Human text for any value, unknown ones included ("unknown gpuwrap status -42"). */
GW_API const char *gw_strerror(gw_status s);
/** Enum name, e.g. "GW_EINVAL"; "GW_UNKNOWN" for values outside the table. */
GW_API const char *gw_err_name(gw_status s);
/**
 * Detail of this thread's most recent failure (which argument, and why); "" if this thread
 * has had none. Read it only right after a call returned an error: successful calls do not
 * clear it (and one that tried something on the way, as AUTO tries each GPU backend, may
 * replace it), so after GW_OK it says nothing about that call. Thread-local; the text stays
 * until this thread's next gpuwrap call.
 */
GW_API const char *gw_last_error(void);

/* ------------------------------------------------------------------------------------ */
/* Settings: the GPUWRAP_* environment variables                                          */
/* ------------------------------------------------------------------------------------ */

/**
 * Every environment variable gpuwrap reads is one row of one table (docs/API.md, "Settings";
 * `gpuwrap info --settings`). A variable is read where it takes effect (most once per
 * process, at first use); a value that does not parse, or is out of range, makes that use
 * fail with GW_EINVAL and a gw_last_error() naming the variable, the value and what was
 * expected: a bad value is never ignored. An empty variable counts as unset.
 */
typedef struct {
  size_t struct_size;        /* set to sizeof(gw_setting_info): see Conventions */
  const char *name;          /* "GPUWRAP_BACKEND" */
  const char *type;          /* "bool", "int", "bytes", "choice" or "text" */
  const char *default_value; /* as a user would write it ("" for none) */
  const char *component;     /* who reads it: "core", "cpu", "staging", "halo", "python" */
  const char *doc;           /* one line */
  const char *value;         /* the environment's value now; NULL when unset or empty */
  int valid;                 /* 0 when value does not parse: problem says why */
  char range[64];            /* "1..64", "auto|cpu|cuda|hip", "" for text */
  char problem[192];
} gw_setting_info;

/** Number of settings in the table. */
GW_API int gw_setting_count(void);
/**
 * Row i of the table (0 <= i < gw_setting_count()), with the environment's value now.
 * Set out->struct_size first (Conventions).
 * @return GW_OK; GW_EINVAL (out NULL, i out of range).
 */
GW_API gw_status gw_setting_describe(int i, gw_setting_info *out);
/**
 * Check every GPUWRAP_* variable that is set. @return GW_OK; GW_EINVAL naming the first
 * bad one (gw_last_error()).
 */
GW_API gw_status gw_settings_check(void);

/** gw_info_report flags: the report as one JSON object; every setting, not only those set. */
#define GW_INFO_JSON (1u << 0)
#define GW_INFO_ALL_SETTINGS (1u << 1)
/**
 * Write what `gpuwrap info` prints to out: the backends built in (present or absent, and
 * why), their devices and what each can do (a tiny allocation of each kind, what a wrap of
 * pageable memory does, a fill of it), what GW_BACKEND_AUTO picks, and the settings.
 * Creates and destroys a context per device on the way.
 * @return GW_OK; GW_EINVAL (out NULL, unknown flags, or a setting that is set is not valid:
 *         the report is written, gw_last_error() names the setting); GW_ENOMEM.
 */
GW_API gw_status gw_info_report(FILE *out, unsigned flags);

/* ------------------------------------------------------------------------------------ */
/* Contexts                                                                               */
/* ------------------------------------------------------------------------------------ */

typedef enum { GW_BACKEND_AUTO = 0, GW_BACKEND_CPU, GW_BACKEND_CUDA, GW_BACKEND_HIP } gw_backend;
typedef struct gw_context gw_context;

/**
 * Create a context for (backend, device).
 * @param backend GW_BACKEND_AUTO picks the first GPU backend with a device, else CPU; the
 *                environment variable GPUWRAP_BACKEND=cpu|cuda|hip overrides AUTO.
 * @param device  device ordinal (0 .. count-1).
 * @param out     receives the context; destroy it with gw_context_destroy().
 * @return GW_OK; GW_EINVAL (out NULL, backend unknown, device negative); GW_ENODEV (backend
 *         not built in, its runtime not loadable, or no such device); GW_EBACKEND.
 */
GW_API gw_status gw_context_create(gw_backend backend, int device, gw_context **out);
/** Drop the caller's reference. Arrays made through the context keep it alive. NULL is ok. */
GW_API void gw_context_destroy(gw_context *ctx);
GW_API gw_backend gw_context_backend(const gw_context *ctx);
GW_API int gw_context_device(const gw_context *ctx);
/** Wait for all work the context's device has been given. GW_EINVAL, GW_EBACKEND. */
GW_API gw_status gw_synchronize(gw_context *ctx);

/** Name of a backend ("cpu", "cuda", "hip", "auto"). */
GW_API const char *gw_backend_name(gw_backend b);
/**
 * Whether a backend is built in and loadable, and how many devices it sees.
 * @param b     GW_BACKEND_CPU, GW_BACKEND_CUDA or GW_BACKEND_HIP.
 * @param count receives the device count (0 when unavailable or on any error).
 * @return GW_OK; GW_ENODEV when the backend is not built in or its runtime cannot be loaded
 *         (gw_last_error() says why, e.g. "libcuda.so.1: cannot open shared object file");
 *         GW_EINVAL for count NULL, for a value outside gw_backend ("b: 99 is not a
 *         gw_backend", as gw_context_create answers for it), for GW_BACKEND_AUTO (it names
 *         no backend until gw_context_create resolves it) and for a malformed setting
 *         (GPUWRAP_CPU_DEVICES=0).
 */
GW_API gw_status gw_backend_device_count(gw_backend b, int *count);

/* ------------------------------------------------------------------------------------ */
/* Pointer classification                                                                 */
/* ------------------------------------------------------------------------------------ */

typedef enum {
  GW_MEM_UNKNOWN = 0,
  GW_MEM_HOST,
  GW_MEM_PINNED,
  GW_MEM_DEVICE,
  GW_MEM_MANAGED
} gw_memkind;

typedef struct {
  size_t struct_size; /**< set to sizeof(gw_ptrinfo): see Conventions */
  gw_memkind kind;    /**< what the memory is */
  int device;         /**< owning device, -1 for none (host memory) */
  void *base;         /**< start of the allocation or registration holding ptr, NULL if unknown */
  size_t extent;      /**< its size in bytes, 0 if unknown */
  void *device_ptr;   /**< the address a device uses for ptr, NULL if not device-accessible */
  void *host_ptr;     /**< the address the host uses for ptr, NULL if not host-accessible */
  unsigned flags;     /**< GW_PTR_* */
} gw_ptrinfo;

/** The range is page-locked by a registration that gpuwrap made. */
#define GW_PTR_GPUWRAP_REGISTERED (1u << 0)
/** The range is known to be registered host memory, not a pinned allocation (only where
 *  the backend can tell them apart: the CPU backend; CUDA and HIP cannot). */
#define GW_PTR_HOST_REGISTERED (1u << 1)

/** Name of a memory kind ("host", "pinned", "device", "managed", "unknown"). */
GW_API const char *gw_memkind_name(gw_memkind k);

/**
 * Classify any pointer. An interior pointer reports its allocation's base and extent.
 * Works whatever the current device is. Pageable memory reports GW_MEM_HOST, device -1.
 * Set out->struct_size first (Conventions).
 * @return GW_OK; GW_EINVAL (ctx or out NULL); GW_EBACKEND.
 */
GW_API gw_status gw_pointer_query(gw_context *ctx, const void *ptr, gw_ptrinfo *out);

/* ------------------------------------------------------------------------------------ */
/* Arrays                                                                                 */
/* ------------------------------------------------------------------------------------ */

typedef enum {
  GW_BOOL,
  GW_INT8,
  GW_INT16,
  GW_INT32,
  GW_INT64,
  GW_UINT8,
  GW_UINT16,
  GW_UINT32,
  GW_UINT64,
  GW_FLOAT16,
  GW_BFLOAT16,
  GW_FLOAT32,
  GW_FLOAT64,
  GW_COMPLEX64,
  GW_COMPLEX128
} gw_dtype;
#define GW_DTYPE_COUNT 15

/** Bytes per element; 0 for a value outside gw_dtype. */
GW_API size_t gw_dtype_size(gw_dtype t);
/** Name of a dtype ("float32"), or "invalid". */
GW_API const char *gw_dtype_name(gw_dtype t);

typedef struct gw_array gw_array;

/** Releasing the array frees the memory (see the wrap table above). */
#define GW_WRAP_OWN (1u << 0)
/** Make no registration. Memory already page-locked (a pinned allocation, someone else's
 *  registration, or gpuwrap's own: gw_pin or another live wrap, on which this wrap then
 *  holds a reference) is used as it is, device-accessible; pageable memory, or a span only
 *  partly page-locked, gives a host-only array (gw_data() is NULL). */
#define GW_WRAP_NO_REGISTER (1u << 1)
/** Writes through gpuwrap (gw_copy into it, gw_fill) fail with GW_EREADONLY. */
#define GW_WRAP_READONLY (1u << 2)

/**
 * Wrap existing memory as an array, without copying.
 * @param ctx     context whose backend classifies the pointer; the array's device is the
 *                pointer's device.
 * @param ptr     first element (borrowed unless GW_WRAP_OWN). May be NULL if the array has
 *                no elements. Must be aligned for dtype.
 * @param dtype   element type.
 * @param ndim    0 .. GW_MAX_DIMS.
 * @param shape   ndim extents >= 0 (copied); may be NULL when ndim is 0.
 * @param strides ndim strides in elements (copied), may be negative; NULL = C-contiguous.
 * @param flags   GW_WRAP_OWN | GW_WRAP_NO_REGISTER | GW_WRAP_READONLY.
 * @param out     receives the array (one reference).
 * @return GW_OK;
 *   GW_EINVAL  NULL ctx/out, NULL ptr with elements, negative dim, too many dims, element or
 *              byte count overflow, ptr misaligned for dtype, unknown dtype or flags, OWN of
 *              memory registered by someone else (where the backend can tell), OWN of an
 *              interior pointer, OWN in gw_wrap_with_deleter, pageable memory to register
 *              that is not mapped, wholly or in part (the runtime refuses it; nothing
 *              stays registered) (gw_last_error() names the argument); OWN | NO_REGISTER
 *              is valid: a host-only array that free()s ptr;
 *   GW_ERANGE  the elements reach outside the allocation's known extent;
 *   GW_EOWNED  OWN of any address inside memory a live array already owns (checked
 *              first: a second owner hears that it is one);
 *   GW_ENOTSUP the device cannot address the span (several registrations, no contiguous
 *              device address);
 *   GW_ENOMEM, GW_EBACKEND from the runtime (registration failed: nothing stays registered).
 */
GW_API gw_status gw_wrap(gw_context *ctx, void *ptr, gw_dtype dtype, int ndim, const int64_t *shape,
                         const int64_t *strides, unsigned flags, gw_array **out);

typedef void (*gw_deleter)(void *ptr, void *user);
/**
 * As gw_wrap(), but `deleter(ptr, user)` is called exactly once, when the last reference
 * (array, view or exported DLPack tensor) goes — also for zero-element arrays. GW_WRAP_OWN
 * must not be given (GW_EINVAL): the deleter replaces it. On failure the deleter is NOT
 * called: the memory stays the caller's.
 */
GW_API gw_status gw_wrap_with_deleter(gw_context *ctx, void *ptr, gw_dtype dtype, int ndim,
                                      const int64_t *shape, const int64_t *strides, unsigned flags,
                                      gw_deleter deleter, void *user, gw_array **out);

/**
 * Allocate a C-contiguous array of `kind` memory on the context's device (the array owns
 * it). GW_MEM_HOST gives malloc'd pageable memory (not registered).
 * @return GW_OK; GW_EINVAL; GW_ENOMEM; GW_ENOTSUP (kind not available); GW_EBACKEND.
 */
GW_API gw_status gw_alloc(gw_context *ctx, gw_memkind kind, gw_dtype dtype, int ndim,
                          const int64_t *shape, gw_array **out);

/** Take a reference; returns a. NULL is passed through. */
GW_API gw_array *gw_retain(gw_array *a);
/** Drop a reference; the last one releases registrations, then frees owned memory. */
GW_API void gw_release(gw_array *a);

GW_API void *gw_data(const gw_array *a);      /**< device-usable address of element 0, or NULL */
GW_API void *gw_host_data(const gw_array *a); /**< host-usable address of element 0, or NULL */
GW_API gw_memkind gw_kind(const gw_array *a);
GW_API int gw_device(const gw_array *a); /**< owning device, -1 for host memory */
GW_API gw_dtype gw_array_dtype(const gw_array *a);
GW_API int gw_ndim(const gw_array *a);
GW_API const int64_t *gw_shape(const gw_array *a);
GW_API const int64_t *gw_strides(const gw_array *a); /**< in elements, never NULL */
GW_API int64_t gw_numel(const gw_array *a);
GW_API int gw_owns(const gw_array *a); /**< 1 if the last release frees the memory */
GW_API int gw_is_readonly(const gw_array *a);
GW_API gw_context *gw_array_context(const gw_array *a); /**< borrowed */

/**
 * A view of a: element i along dim d is a's element start[d] + i*step[d].
 * @param start  a's ndim starting indices (0 <= start < shape unless the view is empty).
 * @param shape  the view's extents (>= 0).
 * @param step   non-zero steps (may be negative), NULL = all 1.
 * The view shares a's memory and keeps it alive. GW_EINVAL when out of bounds. A view with
 * no elements (some shape[d] == 0) reaches nothing: it is accepted for any start and any
 * non-zero step, and its strides (a's times step, saturated at the int64 limits) are never
 * used. A view of
 * an array with a stride 0 (broadcast) has stride 0 there too: it can be read, not written.
 */
GW_API gw_status gw_view(gw_array *a, const int64_t *start, const int64_t *shape,
                         const int64_t *step, gw_array **out);
/** A view with a new shape and the same element count. a must be contiguous in C order,
 *  or the new shape must only add or remove extent-1 dims (its other extents are a's, in
 *  order: they keep a's strides, any layout); GW_EINVAL otherwise, no copy is ever made. */
GW_API gw_status gw_reshape(gw_array *a, int ndim, const int64_t *shape, gw_array **out);

/**
 * Copy src into dst: same dtype and shape, any strides, kinds, devices and contexts.
 * Complete when it returns. dst and src may share memory (views of one buffer: a shift,
 * a[0::2] into a[2::2], an in-place transpose): the result is that of copying through a
 * temporary, on every backend (gpuwrap stages such a copy through a contiguous temporary;
 * dst and src with the same first element and strides are left as they are). src may
 * have overlapping elements (a stride 0: broadcast), dst may not. An empty copy (0
 * elements) does nothing once dtype and shape match, whatever the strides.
 * @return GW_OK; GW_EINVAL (dtype/shape mismatch; dst's elements overlap in memory, e.g.
 *         a stride 0 over an extent > 1: gw_last_error() names the dim); GW_EREADONLY
 *         (dst); GW_ENOTSUP (memory the copying backend cannot reach); GW_ENOMEM (the
 *         temporary of an overlapping copy); GW_EBACKEND.
 */
GW_API gw_status gw_copy(gw_array *dst, const gw_array *src);
/**
 * Set every element of dst to *value (gw_dtype_size(dtype) bytes, read at once). Runs where
 * the memory is (on the GPU for device-accessible memory). Complete when it returns.
 * @return GW_OK; GW_EINVAL (value NULL; dst's elements overlap in memory, as a stride 0 over
 *         an extent > 1: such an array can be read, never written, and its element count
 *         never bounds any work); GW_EREADONLY (a read-only array, or host-only memory whose
 *         pages the process cannot write, found at the first write); GW_EBACKEND.
 */
GW_API gw_status gw_fill(gw_array *dst, const void *value);

/**
 * Page-lock exactly the bytes [ptr, ptr+bytes) through gpuwrap's registry (a byte range,
 * not rounded out to pages): take a reference on that range, registering what is not
 * registered yet (memory pinned by someone else is left alone).
 * A buffer wrapped and released in a loop after gw_pin is registered only once.
 * @return GW_OK; GW_EINVAL (NULL ptr, zero bytes, device/managed memory, memory that is
 *         not mapped, wholly or in part: nothing is pinned); GW_ENOMEM;
 *         GW_ENOTSUP (memory that cannot be page-locked: a read-only private file mapping,
 *         read-only pages where the device has no read-only registration; nothing is
 *         pinned, and gw_last_error() says which); GW_EBACKEND.
 */
GW_API gw_status gw_pin(gw_context *ctx, void *ptr, size_t bytes);
/** Drop the reference gw_pin took (same ptr and bytes). GW_ENOTREG if none was taken. */
GW_API gw_status gw_unpin(gw_context *ctx, void *ptr, size_t bytes);
/** Byte ranges in gpuwrap's own registration registry now, all backends and contexts (a
 *  diagnostic: 0 once every wrap and pin of pageable memory has been released). */
GW_API size_t gw_registry_ranges(void);

/* ------------------------------------------------------------------------------------ */
/* Streams (asynchronous variants)                                                        */
/* ------------------------------------------------------------------------------------ */
/*
 * Ordering contract. A synchronous call (gw_copy, gw_fill) is ordered after all work already
 * queued on the legacy default stream (as cudaMemcpy is) and has completed when it returns.
 * An asynchronous call is ordered on its stream. Streams gpuwrap creates are blocking
 * streams (as cudaStreamCreate makes): the legacy default stream, and so every synchronous
 * call, waits for their earlier work, and their work waits for the legacy stream's earlier
 * work. A borrowed stream (gw_stream_wrap) keeps its own semantics: a non-blocking stream
 * (PyTorch's and CuPy's side streams) is ordered with nothing but itself.
 *
 * Pending work. Each asynchronous operation on an array's memory (as source or
 * destination) records an event on its stream: the array knows, for every stream (of any
 * device) that touched it, the work queued there so far. gw_array_wait() makes another
 * stream wait for all of it on the device, without a host synchronisation, so one wait
 * orders a writer after reads queued on several streams; a release that frees or
 * unregisters the memory waits for all of it on the host. The record is kept per array: an
 * array and its views (gw_view, gw_reshape) share one, but another wrap of the same memory,
 * or a DLPack import of an exported array, is another array with a record of its own. The
 * DLPack and CUDA Array Interface exports of the Python module use it for the consumer's
 * stream; a C program hands an array to another library's stream the same way.
 *
 * The CPU backend runs each stream's work on a worker thread of its own, in order, with the
 * same rules, so an ordering mistake (reading a result before its stream finished, a
 * missing wait between two streams) shows up on a machine without a GPU.
 *
 * Graphs. A stream being captured into a graph (cudaStreamBeginCapture / hipStreamBegin-
 * Capture: torch.cuda.graph, JAX, a solver's time step) can be given to gpuwrap (borrowed
 * with gw_stream_wrap). Each asynchronous call asks the runtime whether its stream is
 * capturing (one cheap query) and then either RECORDS its work into the graph, to run at
 * every launch, or fails with GW_ENOTSUP saying why BEFORE queueing anything, so that the
 * caller's capture stays valid:
 *   - recorded: gw_fill_async and gw_copy_async whose every side the device reaches
 *     (device, pinned or gpuwrap-registered, managed memory; a fill of pageable memory on
 *     a device that reads it), and gw_array_wait for work of the same capture;
 *   - refused: copies with a pageable (unregistered) side (staged through host threads and
 *     completed on the host), fills the host runs, copies between arrays that share memory
 *     (through a temporary, freed after a host synchronisation), gw_stream_synchronize of
 *     the capturing stream, gw_array_wait for work queued outside the capture on another
 *     stream (synchronize it before capturing), any work on the legacy default stream while
 *     a blocking stream of its device captures (capture on a non-blocking stream, as
 *     PyTorch and CuPy do).
 * Arguments are read at capture time: a graph replays the same arrays and the same fill
 * values; refresh the data, not the calls. Wrap (and so register) memory before the
 * capture begins: a wrap during it works (see below) but is no part of the graph.
 * Pending work and graphs: captured work is not queued, so it is not pending:
 * gw_array_pending is 0 for work that was only captured, a release does not wait for it,
 * and gpuwrap does not know about launches of the graph. The caller owns the graph's
 * lifetime: every array a graph uses must outlive every launch of it (synchronize the
 * launch stream before releasing them). The event gpuwrap records for captured work is a
 * node of the graph; gpuwrap never queries it, and a gw_array_wait on another stream of
 * the same capture waits for it.
 * A capture begun while a call runs: each asynchronous call checks its stream once, then
 * queues, and no runtime can make the two one step (there is no conditional enqueue). So a
 * capture another thread begins on the SAME stream (or makes it join) while a gpuwrap call
 * on it runs is a race of the program, as it is for the runtime's own calls: the call's
 * work lands before the capture or in it, and work a capture cannot hold (a pageable copy,
 * an interprocess event) then breaks it as the runtime's own call would. gpuwrap's records
 * follow where the work landed: what landed in the capture is the capture's (not pending,
 * never waited for outside it), and the stream's earlier queued work on those arrays is
 * then no longer followed (synchronize it before releasing them). Order the begin with
 * the calls on that stream. A capture of ANOTHER stream, begun at any moment, is never
 * broken by a gpuwrap call (the relaxed mode below).
 * Good neighbours: gpuwrap's own runtime calls (queries, registration, synchronous copies,
 * events) run in the runtime's relaxed per-thread capture mode, restored after
 * (cudaThreadExchangeStreamCaptureMode), so they never invalidate another thread's capture,
 * in any capture mode. The runtime's own rule stays: work on the legacy default stream
 * (every synchronous call) while a BLOCKING stream of its device captures invalidates that
 * capture, whichever thread queues it.
 * The CPU backend models capture (gpuwrap/cpu.h: gw_cpu_stream_capture_begin), with the
 * runtime's invalidation rules.
 */

typedef struct gw_stream gw_stream;
/** A new stream (blocking, see above) on the context's device. GW_EINVAL, GW_ENOMEM,
 *  GW_EBACKEND. */
GW_API gw_status gw_stream_create(gw_context *ctx, gw_stream **out);
/**
 * Borrow a native stream of the context's backend: a cudaStream_t / hipStream_t (NULL is
 * the legacy default stream; cudaStreamPerThread too), or on the CPU backend a handle from
 * gw_stream_native(). The native stream must outlive the gpuwrap handle; gw_stream_destroy
 * of a borrowed stream drops only gpuwrap's handle and neither waits for nor destroys the
 * native stream.
 * @return GW_OK; GW_EINVAL (ctx or out NULL, not a stream of this backend); GW_EDEVICE (a
 *         stream of another device); GW_ENOMEM; GW_EBACKEND.
 */
GW_API gw_status gw_stream_wrap(gw_context *ctx, void *native, gw_stream **out);
/** The native handle of any gpuwrap stream (cudaStream_t / hipStream_t; an opaque non-NULL
 *  handle on the CPU backend that gw_stream_wrap accepts back), for launching your own
 *  work on it. A borrowed legacy default stream gives NULL back. NULL for NULL. */
GW_API void *gw_stream_native(const gw_stream *s);
/** A stream gpuwrap created: waits for its work, then destroys it. A borrowed stream: drops
 *  the handle only. NULL is ok. */
GW_API void gw_stream_destroy(gw_stream *s);
/** Wait on the host for s's work. GW_ENOTSUP when s is being captured into a graph (a
 *  capture cannot be synchronized: "Graphs" above), GW_EINVAL, GW_EBACKEND. */
GW_API gw_status gw_stream_synchronize(gw_stream *s);
/** As gw_copy/gw_fill (the same rules and errors) but ordered on s. Releasing an array
 *  before s has run its work waits (on the host) for that work when the release gives up
 *  what the work needs: memory the array frees (owned, or its deleter's) or a registration
 *  gpuwrap made for it; borrowed memory gpuwrap holds nothing of (device memory, memory
 *  pinned by someone else) must stay valid until s is synchronized. Copies that involve pageable host memory, and copies
 *  between arrays that share memory (staged through a temporary, which is released only
 *  after s has run both halves: s is synchronized), complete before returning. Each
 *  records s's pending-work event on both arrays (gw_array_wait): a release waits for the
 *  work of every stream that still needs the memory, two streams reading at once
 *  included. On a stream being captured into a graph the work is recorded, or refused
 *  with GW_ENOTSUP before anything is queued ("Graphs" above).
 *  What a failed asynchronous call leaves: every argument check (and the capture check)
 *  comes before anything is queued, so those failures queue nothing. A failure of the
 *  runtime part-way (GW_EBACKEND, GW_ENOMEM) may leave pieces of the call queued on s
 *  (one half of a staged copy, the first pairs of a batch, some of gw_array_wait's waits):
 *  the contents of the destination are then unspecified, everything the call took
 *  (events, temporaries) is given back, each queued piece is tracked as pending work like
 *  any other (a release waits for it), and s stays valid and in order: work queued on it
 *  next runs after those pieces. Repeat the call, or write the destination again. */
GW_API gw_status gw_copy_async(gw_array *dst, const gw_array *src, gw_stream *s);
GW_API gw_status gw_fill_async(gw_array *dst, const void *value, gw_stream *s);
/**
 * Make s wait, on the device, for the asynchronous gpuwrap work pending on a's memory (every
 * gw_copy_async / gw_fill_async that wrote or read it, on every stream, that may not have
 * completed); no host synchronisation. Nothing to wait for is GW_OK. Use it before handing
 * a to another library's stream, or before writing a on s after reads on other streams.
 * On a stream being captured into a graph, the wait is recorded for work captured on
 * other streams of the capture; work queued outside the capture on another stream and not
 * yet complete cannot be waited for there (GW_ENOTSUP, nothing queued).
 * @return GW_OK; GW_EINVAL (NULL argument); GW_EDEVICE (work of another backend than s's
 *         is pending: nothing is waited for then; a stream of another device of the same
 *         backend does wait, as cudaStreamWaitEvent allows); GW_ENOTSUP (see above);
 *         GW_EBACKEND (the runtime refused a wait: s may already wait for some of the
 *         streams, which only orders it more; it stays valid; wait again before using a).
 */
GW_API gw_status gw_array_wait(const gw_array *a, gw_stream *s);
/** 1 when asynchronous gpuwrap work on a's memory, on any stream, may not have completed
 *  yet, else 0. Work only captured into a graph is not queued, so not pending (0): the
 *  graph's launches are the caller's to wait for ("Graphs" above). */
GW_API int gw_array_pending(const gw_array *a);

/* ------------------------------------------------------------------------------------ */
/* Memory from another process (IPC)                                                      */
/* ------------------------------------------------------------------------------------ */
/*
 * A producer process exports device memory as a handle of plain bytes; a consumer on the
 * same node opens it as an array over the same memory (docs/IPC.md).
 *
 * The handle describes the whole array: backend, device (by UUID, mapped to the opener's
 * own ordinal), the allocation's runtime IPC handle, who exported it (pid and a random
 * nonce of its address space), the allocation's base and extent
 * in the exporter, the array's byte offset into it, dtype, shape, strides and read-only,
 * under a magic, a version and a CRC-32. Send it any way (a pipe, MPI, a pickle).
 *
 * One process-wide import table, keyed by allocation: the first open of an allocation
 * maps it (cudaIpcOpenMemHandle / hipIpcOpenMemHandle), later opens of any handle of it
 * share that mapping, and it is closed exactly once, when the last array opened from it
 * is released. Thread-safe; after fork() a child never closes the parent's mappings.
 * In the exporting process itself an open returns an array over the original memory
 * without a runtime open (the runtime refuses that open: cudaErrorDeviceUninitialized),
 * once it has checked that the allocation is still there, live (an image the process
 * exec'd is not the exporter).
 * The exporter must keep the memory valid while importers use it (as CUDA requires):
 * releasing an imported array never frees the producer's memory.
 */
#define GW_IPC_HANDLE_BYTES 256
typedef struct {
  unsigned char bytes[GW_IPC_HANDLE_BYTES];
} gw_ipc_handle; /* plain bytes: copy, send and store it as they are */

/**
 * Export a's memory for another process. a must be device memory (GW_MEM_DEVICE) of the
 * CUDA or HIP backend or of the CPU model; a view exports its allocation plus its offset,
 * shape and strides; a read-only array exports read-only.
 * Dims: the shape and strides are stored compactly (varints, 114 bytes): any array of up
 * to 6 dims fits, and up to GW_MAX_DIMS dims whenever the values are small (all extents
 * and strides below 2^20 fit 16 dims).
 * @param a   the array (borrowed; the handle holds no reference: keep the memory alive).
 * @param out receives the handle; untouched on failure.
 * @return GW_OK; GW_EINVAL (a or out NULL; an array without memory: no elements and a NULL
 *         address); GW_ENOTSUP (memory other than device memory; device memory the
 *         runtime cannot export: stream-ordered pool memory (cudaMallocAsync), VMM memory
 *         (cuMemCreate); a backend without IPC; shape and strides that do not fit the
 *         handle): gw_last_error() says which; GW_EBACKEND from the runtime.
 */
GW_API gw_status gw_ipc_export(gw_array *a, gw_ipc_handle *out);
/**
 * Open a handle from gw_ipc_export (of this or another process on this node) as an array.
 * The array is GW_MEM_DEVICE memory of the handle's device, never owns the memory (an
 * owning wrap of any address of an opened allocation is GW_EOWNED), read-only when the
 * export was, and holds the allocation's mapping until its last reference (views
 * included) goes.
 * @param ctx a context of the handle's backend (the array's device is the handle's).
 * @param h   the handle (borrowed; validated whole before any runtime call).
 * @param out receives the array (one reference); untouched on failure.
 * @return GW_OK; GW_EINVAL (NULL argument; damaged, truncated or foreign bytes: bad magic,
 *         bad check value, a field out of range; a handle of a newer version or of version
 *         1; a handle of another backend than ctx's); GW_ENODEV (no device with the
 *         handle's device UUID is visible here: the message names it); GW_ENOMEM;
 *         GW_EBACKEND (the runtime could not map it: the exporter or its memory is gone;
 *         in the exporting process: the allocation was released, its address reused, or
 *         the handle names memory that is not device memory). Nothing stays mapped after
 *         a failure.
 */
GW_API gw_status gw_ipc_open(gw_context *ctx, const gw_ipc_handle *h, gw_array **out);

/*
 * Pool and VMM memory handles name file descriptors of the exporting process, which
 * gw_ipc_open takes with pidfd_getfd: that needs ptrace access to the exporter, which Yama's
 * ptrace_scope 1 (only from an ancestor), a container's seccomp profile or a kernel older
 * than 5.6 refuse (GW_ENOTSUP). The pair below passes them over a Unix socket instead
 * (SCM_RIGHTS), which needs nothing but the socket: the exporter sends, the importer
 * receives and then opens as usual (docs/IPC.md, "Passing the descriptors over a Unix
 * socket"). Legacy device memory handles travel the same way (bytes only).
 */
/**
 * Send a handle over a Unix socket: its 256 bytes and, for pool and VMM memory, the
 * descriptors it names, in one message (sendmsg with SCM_RIGHTS; EINTR retried; a peer
 * gone is an error, never SIGPIPE). Pool and VMM memory handles can be sent only by the
 * process that exported them (the descriptors are its own), and only while each is still
 * the file the export named (a pool destroyed or a chunk released is refused); a legacy
 * handle carries no descriptor, and any process may send it.
 * @param sock a connected Unix socket (AF_UNIX: stream, seqpacket or datagram; borrowed).
 * @param h    the handle (borrowed; validated whole first, as gw_ipc_open does).
 * @return GW_OK; GW_EINVAL (h NULL; a damaged handle; sock not a Unix socket; a pool or
 *         VMM memory handle exported by another process: a forked child, or this one before
 *         an exec, included);
 *         GW_EBUSY (a non-blocking socket that is full: nothing was sent); GW_EBACKEND (a
 *         descriptor the handle names is closed or is another file now; the peer closed the
 *         socket; another sendmsg failure): gw_last_error() says which.
 */
GW_API gw_status gw_ipc_handle_send(int sock, const gw_ipc_handle *h);
/**
 * Receive one handle sent by gw_ipc_handle_send, and keep the descriptors that came with it
 * for the next gw_ipc_open of that handle in this process, which then uses them instead of
 * pidfd_getfd. Lifetime of the descriptors received (close-on-exec): the first gw_ipc_open
 * of the handle that gets to mapping consumes them (uses them, or closes them where the
 * memory is mapped here already or the open fails); a later open maps with pidfd_getfd
 * again, so receive again before re-opening where that is refused. A newer receive of the
 * same handle's descriptors replaces (closes) the older; descriptors never opened stay open
 * until the process ends; a forked child closes its copies (they are the parent's to use).
 * A handle this process exported itself keeps none (its open is the memory itself).
 * @param sock a Unix socket (borrowed). Blocks until a message arrives.
 * @param out  receives the handle's bytes; untouched on failure.
 * @return GW_OK; GW_EINVAL (out NULL; sock not a Unix socket; what arrived is not a handle:
 *         fewer than 256 bytes, a longer datagram, damaged bytes, too few or too many
 *         descriptors for the handle, or more than the control buffer holds, MSG_CTRUNC);
 *         GW_EBUSY (a non-blocking socket with no message waiting); GW_EBACKEND (the peer
 *         closed the socket before any byte; another recvmsg failure); GW_ENOMEM. Every
 *         descriptor received is closed on failure.
 */
GW_API gw_status gw_ipc_handle_recv(int sock, gw_ipc_handle *out);

#ifdef __cplusplus
}
#endif
#endif /* GPUWRAP_H */
