/*
 * The backend interface: what the core asks of a runtime.
 *
 * Every context carries a pointer to one `gw__backend_ops` table (filled with designated
 * initializers); there is no process-wide current backend. The CPU backend is compiled into
 * the core; the GPU backend (one source for CUDA and HIP) is a plugin loaded with dlopen so
 * that the core runs on machines without a GPU driver. A plugin exports
 *     const gw__backend_ops *gw__plugin_entry(const gw__host_api *host, int abi);
 * and reports errors through host->fail(), which records gw_last_error() in the core.
 *
 * Rules for every operation:
 *   - return GW_OK or a negative gw_status, and on failure call fail() with the detail
 *     (vendor error name and text included);
 *   - never print, never abort, leave nothing half-done;
 *   - device ordinals are -1 for "no device" (vendors' -2 is normalised in the backend).
 * An operation a backend lacks points at a stub of its own that returns GW_ENOTSUP.
 */
#ifndef GW_CORE_BACKEND_H
#define GW_CORE_BACKEND_H

#include "gpuwrap.h"
#include "signals.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 2: host_register takes GW__REG_* flags; caps.host_register_readonly. 3: borrowed streams
 * and events. 4: copy_batch. 5: the settings table in the host API. 6: ipc_export, ipc_open
 * and ipc_close (memory from another process, src/core/ipc.c); fork_lock and
 * owns_native_stream (the core asks a backend instead of reaching into it). 7:
 * stream_capturing. 8: caps.device_uuid and caps.concurrent_processes (the halo's choice
 * of the IPC path). 9: ipc_event_create and ipc_event_open (added after 8 was set), and
 * gw_ptrinfo's struct_size. 10: device_uuid (an IPC handle names its device by UUID, which
 * the importer maps to its own ordinal). 11: the members named by role (the same table:
 * dev_, ctx_, mem_, host_, xfer_, stream_, event_, ipc_, proc_). 12: the setting
 * GPUWRAP_HALO_AUTO_MPS (the settings' ids a plugin reads shifted). 13: IPC of stream-ordered
 * pool memory (gw__ipc_share in ipc_mem_export, the pool in ipc_mem_open and ipc_mem_close,
 * ipc_pool_import and ipc_pool_release). 14: IPC of VMM memory (GW__IPC_VMM: the chunks
 * in gw__ipc_share, ipc_vmm_open and ipc_vmm_close). 16 (15 was the reverted stream
 * memory operations' number, not reused): GW__IPC_VMM_MAX_CHUNKS 8 -> 1024 and the
 * manifest in gw__ipc_share (spans of more chunks than a handle holds). 17: the setting
 * GPUWRAP_HALO_IPC_DIRECT (the settings' ids a plugin reads shifted). 18: xfer_copy_batch_signalled
 * (gw__signals: the halo's IPC packs that signal their neighbours on the device) and the
 * setting GPUWRAP_HALO_IPC_SIGNAL (ids shifted again). 19: the signalled operation's limits
 * (GW__SIGNAL_MAX_TRANSFERS, GW__SIGNAL_MAX_DIMS). A plugin of another ABI
 * is refused at load (plugin.c), never called with the wrong argument list (nor with a
 * table shorter than this one). CTest abi.backend checks the number against the hash of what it covers
 * (src/core/abi.lock). */
#define GW__BACKEND_ABI 19

/* Bytes of a runtime's own IPC handle inside gw_ipc_handle (cudaIpcMemHandle_t and
 * hipIpcMemHandle_t are 64). */
#define GW__IPC_RT_BYTES 64

/* How an exported allocation is shared (ipc_mem_export fills it; docs/IPC.md). */
enum { GW__IPC_LEGACY = 0, GW__IPC_POOL = 1, GW__IPC_VMM = 2 };
/* VMM memory: at most this many chunks per exported span; a span over more is refused at
 * export. The handle's runtime bytes hold GW__IPC_VMM_HANDLE_CHUNKS chunks' descriptor
 * numbers and sizes; a longer list goes in a manifest the handle names (ipc_manifest.c). */
#define GW__IPC_VMM_MAX_CHUNKS 1024
#define GW__IPC_VMM_HANDLE_CHUNKS 8
typedef struct {
  int kind;         /* GW__IPC_LEGACY: rt is the runtime's legacy handle; GW__IPC_POOL: rt is the
             * pool's export data of the allocation (cudaMemPoolExportPointer) */
  int fd;           /* GW__IPC_POOL: the pool's shareable descriptor in the exporting process
             * (cudaMemPoolExportToShareableHandle), kept open there by the backend while the
             * pool lives (the CPU model) or for the life of the process (CUDA, HIP) */
  uint64_t pool_id; /* GW__IPC_POOL: the pool's id in the exporting process, never reused
                     * there; the importer imports each (exporter, pool_id) once.
                     * GW__IPC_VMM: the first chunk's id, never reused in the exporter */
  /* GW__IPC_VMM. In: [lo, hi) the array's bytes, set by the core before ipc_mem_export.
   * Out: the chunks covering them, mapped back to back from span_base: each chunk's
   * shareable descriptor in the exporting process (kept open by the backend while the
   * chunk lives) and size. */
  uintptr_t lo, hi, span_base;
  int nchunks;
  int chunk_fd[GW__IPC_VMM_MAX_CHUNKS];
  uint64_t chunk_bytes[GW__IPC_VMM_MAX_CHUNKS];
  /* The core's (never a backend's): more chunks than GW__IPC_VMM_HANDLE_CHUNKS are listed
   * in the manifest, this process's descriptor manifest_fd (the exporter's in a decoded
   * handle, where chunk_fd and chunk_bytes are unknown until it is read), whose contents
   * have the digest manifest_digest. */
  int manifest_fd;
  uint64_t manifest_digest;
} gw__ipc_share;

/* What a context's device can do; filled by ctx_init. */
typedef struct {
  int pageable_access;         /* device reads pageable host memory directly (HMM/ATS) */
  int host_ptr_for_registered; /* device uses the host address of registered memory */
  int tells_registered;        /* query sets GW_PTR_HOST_REGISTERED (CPU model only) */
  int kernels;                 /* fill/strided copies run as kernels (else copy engine) */
  int gpu_aware_hint;          /* reserved for MPI: device pointers can be given to MPI */
  /* host_register accepts GW__REG_READONLY (cudaDevAttrHostRegisterReadOnlySupported; HIP:
   * the device property where the headers have it, else 0). Without it read-only pages
   * cannot be registered at all: a plain registration of them is refused. */
  int host_register_readonly;
  /* The physical device, alike in every process of the node that uses it, whatever its
   * ordinal there (CUDA_VISIBLE_DEVICES): the runtime's device UUID; the CPU model's
   * device number. All zero when unknown. */
  unsigned char device_uuid[16];
  /* Work of several processes on this device runs concurrently (CUDA: the context is an
   * MPS client, cudaDevAttrMpsEnabled; HIP: 0, not known; the CPU model: GPUWRAP_CPU_MPS).
   * Without it the processes' contexts are time-sliced: a copy of one waits for the
   * other's slice (docs/HALO.md). */
  int concurrent_processes;
} gw__caps;

/*
 * host_register flags.
 * GW__REG_READONLY: register for device reads only (cudaHostRegisterReadOnly, added to the
 * flags the backend always uses). It is the only way to register pages the process cannot
 * write (PROT_READ file mappings, mprotect'ed memory): a plain registration of them is
 * "invalid value" (GW_EINVAL), measured on the H200. The caller must never pass it for a
 * span that holds a MAP_PRIVATE file mapping: cudaHostRegister(ReadOnly) of one never
 * returns (H200, driver 580.159.04); gw__host_mapping() (internal.h) tells them apart.
 * A backend whose caps.host_register_readonly is 0 refuses the flag with GW_ENOTSUP
 * without calling the runtime.
 */
#define GW__REG_READONLY 1u

/*
 * An N-d strided transfer, normalised by the core (copy_plan.c): dims ordered outermost
 * first, dims of extent 1 dropped, adjacent dims merged where both sides allow, so ndim 1
 * with strides == elem is a contiguous copy. Strides in BYTES. Addresses are those the
 * copying backend should use: the device address where the side is device-accessible,
 * the host address otherwise (pageable memory). Only the first ndim entries of shape and
 * the strides are defined (the planner writes no more, see gw__plan_fill); so is only the
 * first elem bytes of a gw__fillspec's value.
 */
typedef struct {
  int ndim;
  size_t elem;
  int64_t shape[GW_MAX_DIMS];
  int64_t dst_stride[GW_MAX_DIMS];
  int64_t src_stride[GW_MAX_DIMS];
  char *dst;
  const char *src;
  gw_memkind dst_kind, src_kind;
  int dst_device, src_device;
} gw__xfer;

/* Set every element of an N-d strided region (same normalisation, byte strides). */
typedef struct {
  int ndim;
  size_t elem;
  int64_t shape[GW_MAX_DIMS];
  int64_t stride[GW_MAX_DIMS];
  char *dst;
  gw_memkind kind;
  int device;
  unsigned char value[16]; /* elem bytes */
} gw__fillspec;

/* Each member's name starts with its role (as UCX's md_mem_reg, iface_query), so a reader
 * or a code browser never takes ctx->ops->mem_query for a free function of that name:
 * dev_ the devices, ctx_ a context, mem_ memory (classify, allocate, free), host_ host
 * registrations, xfer_ copies and fills, stream_ and event_ ordering, ipc_ sharing between
 * processes, proc_ the process (fork). */
typedef struct gw__backend_ops {
  const char *name; /* "cpu", "cuda", "hip" */
  gw_backend id;
  int abi; /* GW__BACKEND_ABI */

  gw_status (*dev_count)(int *count);
  /* Per-context state for `device`; fills caps. */
  gw_status (*ctx_init)(int device, void **state, gw__caps *caps);
  void (*ctx_fini)(void *state);

  /* Classify ptr: kind, device (-1 none), base/extent (NULL/0 unknown), device_ptr,
   * host_ptr, flags (GW_PTR_HOST_REGISTERED where known; the core adds
   * GW_PTR_GPUWRAP_REGISTERED). Pageable memory is GW_MEM_HOST with device -1. */
  gw_status (*mem_query)(void *state, const void *ptr, gw_ptrinfo *out);

  /* Allocate/free `kind` memory (PINNED, DEVICE, MANAGED) on the context's device;
   * free gets the device the memory belongs to. */
  gw_status (*mem_alloc)(void *state, gw_memkind kind, size_t bytes, void **out);
  gw_status (*mem_free)(void *state, gw_memkind kind, int device, void *ptr);

  /* Page-lock exactly [base, base+bytes) (any alignment); flags are GW__REG_* (others:
   * GW_EINVAL). GW_EALREADY if any part of it is registered already; GW_EINVAL when the
   * runtime refuses the memory itself ("invalid value": e.g. pages that are not writable,
   * registered without GW__REG_READONLY); GW_ENOTSUP for GW__REG_READONLY on a device
   * without it. Unregister needs the exact base (GW_ENOTREG otherwise). */
  gw_status (*host_register)(void *state, void *base, size_t bytes, unsigned flags);
  gw_status (*host_unregister)(void *state, void *base);
  /* Device address of registered or pinned host memory. */
  gw_status (*mem_device_address)(void *state, void *host, void **dev);

  /* Transfers and fills; stream NULL = synchronous (complete on return). */
  gw_status (*xfer_copy)(void *state, const gw__xfer *x, void *stream);
  /* n transfers (n >= 0) as one operation on `stream` (NULL: synchronous, as copy): what
   * the halo's local periodic copies of one dim are, so that they cost one queued item /
   * one kernel launch instead of n. The core guarantees the transfers are INDEPENDENT: no
   * transfer writes a byte that another of the batch reads or writes, and none has src
   * and dst sharing memory (gw__copy_many checks it), so a backend may run them in any
   * order or all at once. Checked as copy checks each transfer; on a failure of a check
   * nothing is queued. Counts as one backend call (the CPU model's GW_CPU_OP_COPY). */
  gw_status (*xfer_copy_batch)(void *state, const gw__xfer *x, int n, void *stream);
  gw_status (*xfer_fill)(void *state, const gw__fillspec *f, void *stream);
  gw_status (*ctx_synchronize)(void *state);
  /* Streams. A backend stream object is made by stream_create (a new blocking stream that
   * stream_destroy destroys) or stream_borrow (the caller's native stream; NULL = the
   * legacy default stream; stream_destroy frees only the object, never the native
   * stream, and waits for nothing). GW_EINVAL for a handle that is not a stream of this
   * backend, GW_EDEVICE for one of another device. stream_native gives the native handle
   * back (what was borrowed, NULL for the legacy default stream). */
  gw_status (*stream_create)(void *state, void **stream);
  gw_status (*stream_destroy)(void *state, void *stream);
  gw_status (*stream_synchronize)(void *state, void *stream);
  gw_status (*stream_borrow)(void *state, void *native, void **stream);
  void *(*stream_native)(void *state, void *stream);

  /* Events, for the pending work of arrays (gw_array_wait). event_record captures the
   * stream's work queued so far; stream_wait_event makes a stream wait for it on the
   * device (never on the host); event_query: GW_OK when complete, GW_EBUSY while pending,
   * GW_ENOTSUP when the event was last recorded in a graph capture (cudaErrorCapturedEvent:
   * a node of a graph, not queued work; the core's pending work re-tags it, stream.c).
   * stream is a backend stream object (never NULL here). */
  gw_status (*event_create)(void *state, void **event);
  gw_status (*event_destroy)(void *state, void *event);
  gw_status (*event_record)(void *state, void *event, void *stream);
  gw_status (*stream_wait_event)(void *state, void *stream, void *event);
  gw_status (*event_query)(void *state, void *event);

  /* Memory from another process (ABI 6; the core's import table is src/core/ipc_table.c).
   * ipc_export: the runtime's IPC handle of the device allocation [base, base+extent) of
   * `device` (base is an allocation's base, from query) into rt, and an id that tells this
   * allocation from a later one at the same address (CUDA's buffer id; 0 where the
   * runtime has none); *sh says how it is shared (legacy IPC, or memory of a pool with a
   * POSIX file descriptor handle type: then rt holds the pointer's export data and sh the
   * pool's descriptor and id). GW_ENOTSUP for device memory the runtime cannot export (a
   * pool without a shareable handle type, VMM memory), naming why and how to allocate it
   * shareable.
   * ipc_open: map a handle exported by ANOTHER process (the core never asks for its own:
   * the runtimes refuse it) on `device`; *base is the allocation's base here. pool NULL:
   * a legacy handle; else the pool ipc_pool_import gave, rt the pointer's export data
   * (cudaMemPoolImportPointer). The core opens one allocation once per process (a second
   * open is refused by the runtimes).
   * ipc_close: unmap what ipc_open gave (pool: the pool it was opened from; cudaFree).
   * ipc_pool_import: the pool behind `fd`, a descriptor of this process that the core
   * closes after the call (cudaMemPoolImportFromShareableHandle), on `device`;
   * ipc_pool_release: destroy it (its last pointer is closed). The core imports each
   * pool of each exporter once (ipc_table.c). NULL: the backend shares no pool memory. */
  gw_status (*ipc_mem_export)(void *state, void *base, size_t extent, int device,
                              unsigned char rt[GW__IPC_RT_BYTES], uint64_t *alloc_id,
                              gw__ipc_share *sh);
  gw_status (*ipc_mem_open)(void *state, const unsigned char rt[GW__IPC_RT_BYTES], int device,
                            size_t extent, void *pool, void **base);
  gw_status (*ipc_mem_close)(void *state, int device, void *pool, void *base);
  gw_status (*ipc_pool_import)(void *state, int fd, int device, void **pool);
  gw_status (*ipc_pool_release)(void *state, int device, void *pool);
  /* ipc_vmm_open: import n chunks (fds: descriptors of this process, closed by the core
   * after the call; bytes: their sizes; id: the first chunk's id in the exporter), reserve
   * their total, map each at its offset and make it accessible from `device`
   * (cuMemImportFromShareableHandle, cuMemAddressReserve, cuMemMap, cuMemSetAccess); a
   * failure leaves nothing made. ipc_vmm_close: synchronize, unmap, release, free the
   * range. NULL: the backend shares no VMM memory. */
  gw_status (*ipc_vmm_open)(void *state, int device, int n, const int *fds, const uint64_t *bytes,
                            uint64_t id, void **base);
  gw_status (*ipc_vmm_close)(void *state, int device, void *base, size_t total);

  /* Interprocess events (src/core/ipc_event.c; the halo's IPC path signals with them).
   * ipc_event_create: an event of the context's device that another process can open
   * (CUDA: cudaEventCreateWithFlags(DisableTiming | Interprocess), cudaIpcGetEventHandle),
   * its handle written to rt; ipc_event_open: an event another process made
   * (cudaIpcOpenEventHandle). Either is released with event_destroy and used with
   * event_record, stream_wait_event and event_query like any event; a stream_wait_event on
   * one waits for the last event_record of it, in whichever process, made before the wait
   * was queued (the program orders the two, e.g. with an MPI message). Neither may be
   * recorded or waited for in a graph capture (GW_ENOTSUP). NULL: not supported. */
  gw_status (*ipc_event_create)(void *state, void **event, unsigned char rt[GW__IPC_RT_BYTES]);
  gw_status (*ipc_event_open)(void *state, const unsigned char rt[GW__IPC_RT_BYTES], void **event);

  /* Optional (NULL: nothing to do). fork_lock(1), before fork, takes every lock of the
   * backend in its own order; fork_lock(0) releases them, in the parent and the child
   * alike, so a child forked while another thread was inside the backend finds no lock
   * held by a thread that does not exist there (src/core/fork.c). */
  void (*proc_fork_lock)(int on);
  /* Optional (NULL: cannot tell). Whether native is a live stream handle of THIS backend.
   * A GPU runtime cannot tell a foreign pointer from its own stream without reading through
   * it, so gw_stream_wrap asks the backends that can tell (the CPU model) before handing a
   * handle of theirs to another backend. */
  bool (*stream_owns_native)(const void *native);

  /* Graph capture (ABI 7; the core's rules are src/core/transfer.c, "Capture"). Whether the
   * stream (a backend stream object, never NULL) is being captured into a graph now
   * (cudaStreamGetCaptureInfo): *capture the capture's id (never 0; an invalidated capture
   * counts, its stream still refuses host work), 0 when it is not capturing. GW_ENOTSUP when the
   * stream may not be used at all now: the legacy default stream while a blocking stream
   * of its device is capturing (cudaErrorStreamCaptureImplicit: any work on it would
   * invalidate that capture). One cheap runtime call: the core asks it once per
   * asynchronous call.
   * Every other operation of a backend must never invalidate a capture of ANOTHER thread:
   * its runtime calls run in the relaxed per-thread capture mode
   * (cudaThreadExchangeStreamCaptureMode), restored after. */
  gw_status (*stream_capturing)(void *state, void *stream, uint64_t *capture);

  /* ABI 9. The UUID of device `device` of this process (what context_init puts in
   * caps.device_uuid; all zero when the runtime does not say), without making a context
   * on it: gw_ipc_open maps a handle's device UUID to this process's ordinal. NULL: the
   * backend cannot tell (handles then go by the exporter's ordinal). */
  gw_status (*dev_uuid)(int device, unsigned char uuid[16]);

  /* ABI 18. xfer_copy_batch on a stream (never NULL: the signals order this stream against
   * another process's) as one operation that also signals through 32-bit words of device
   * memory (sig, below): the halo's IPC pack into the neighbours' ghost cells (halo_ipc_signal.c).
   * NULL, or GW_ENOTSUP for transfers it cannot run so (then nothing is queued): the
   * caller signals another way. Refused inside a capture (a replay would reuse the epoch).
   * Counts as one backend call (the CPU model's GW_CPU_OP_COPY). */
  gw_status (*xfer_copy_batch_signalled)(void *state, const gw__xfer *x, int n, void *stream,
                                         const gw__signals *sig);
} gw__backend_ops;

/* What the core lends a plugin. */
typedef struct {
  int abi;
  /* Record the failure for gw_last_error() and return `s`. */
  gw_status (*fail)(gw_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
  /* The settings table (settings.h): the ids are the core's, so a table of another shape
   * is another ABI (nsettings is checked at load as well). */
  int nsettings;
  gw_status (*setting_int)(int id, long long *out);
  const char *(*setting_text)(int id);
} gw__host_api;

typedef const gw__backend_ops *(*gw__plugin_entry_fn)(const gw__host_api *host, int abi);
#define GW__PLUGIN_ENTRY "gw__plugin_entry"

/* Built-in backend and plugin lookup (core). */
extern const gw__backend_ops gw__cpu_ops;
/* The ops of a backend, loading its plugin on first use; NULL + fail() if unavailable. */
const gw__backend_ops *gw__backend_get(gw_backend b);
/* Every backend in use (the built-in one, the plugins loaded so far) takes (1) or releases
 * (0) its locks around fork: taken in the order cpu, cuda, hip; released in reverse. */
void gw__backends_fork_lock(int on);
/* The backend other than `self` that says native is its stream, else NULL. */
const gw__backend_ops *gw__backend_owning_stream(const gw__backend_ops *self, const void *native);

#endif /* GW_CORE_BACKEND_H */
