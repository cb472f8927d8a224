/* Shared by the GPU backend's sources; one copy of the code for CUDA and HIP. */
#ifndef GW_GPU_INTERNAL_H
#define GW_GPU_INTERNAL_H

#include "backend.h"
#include "settings.h"
#include "gpu_classify.h"

#if defined(GW_VENDOR_HIP)
#include "vendor_hip.h"
#elif defined(GW_VENDOR_MOCK)
#include "vendor_mock.h" /* tests/staging: gpu_staging.c alone, on a mock runtime */
#else
#include "vendor_cuda.h"
#endif

#ifndef GW_HAVE_KERNELS
#define GW_HAVE_KERNELS 0
#endif
#if GW_HAVE_KERNELS
#include "kernels.h"
#endif

/* Per-context state. */
typedef struct {
  int device;
  gw__caps caps;
  gwc_caps ccaps;   /* what gwc_classify needs of caps, made once (the query runs per call) */
  int max_blocks;   /* grid cap for grid-stride kernels: SMs x 8 */
  size_t max_pitch; /* largest pitch 2-D/3-D copies accept */
  void *staging;    /* gpu_staging.c's state, made on first use (NULL until then) */
} gwg_ctx;

/*
 * A gw_stream's backend half. `s` is what every vendor call takes (kernels, copies,
 * events); `native` is what gw_stream_native gives back. They differ only for a borrowed
 * NULL on CUDA, which is used as cudaStreamLegacy and given back as NULL. A borrowed
 * stream is the caller's: destroying the object never synchronizes or destroys it.
 */
typedef struct {
  gwv_stream s;
  int device;
  int borrowed;
  void *native;
} gwg_stream;

/* ---- gpu_call.c: what every file needs around a runtime call; it calls none of them ---- */

/* The core's host API, set by the plugin entry (gpu_backend.c). */
extern const gw__host_api *gwg_host;

/* A setting of the core's table (settings.h) through the host API: GW_EINVAL, its reason
 * recorded for gw_last_error(), when the environment's value is not valid (*out is then the
 * default). The staging model test (no plugin entry) defines its own. */
gw_status gwg_setting(gw__setting_id id, long long *out);
/* Report a failed vendor call: "<what>: <errorName>: <errorString>", mapped to gw_status
 * (already registered -> GW_EALREADY, not registered -> GW_ENOTREG, out of memory ->
 * GW_ENOMEM, no/invalid device -> GW_ENODEV, else GW_EBACKEND). Clears the runtime's
 * last error so it does not leak into the caller's own checks. */
gw_status gwg_fail(gwv_err e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same with an explicit status (e.g. GW_ENOTREG for an interior unregister). */
gw_status gwg_fail_as(gw_status s, gwv_err e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Make `device` current for vendor calls, and give the caller back what it had afterwards
 * (no operation changes the caller's current device, nor the context it had current).
 * Also the relaxed per-thread capture mode (vendor shim, gwv_capture_relax), the thread's
 * own mode restored by gwg_leave: every runtime call of an operation runs between the two,
 * so one exchange pair per operation keeps gpuwrap from invalidating another thread's
 * capture.
 * Only switches when needed: the common case is one cuCtxGetCurrent. What gwg_enter
 * changed, for gwg_leave to undo:
 */
typedef struct {
  int switched;     /* 0: nothing was changed */
  int device;       /* the runtime's device before */
  gwv_ctxtok ctx;   /* the thread's context before (NULL: none, or the vendor has no tokens) */
  gwv_capmode mode; /* the thread's capture mode before */
} gwg_prev;
gw_status gwg_enter(int device, gwg_prev *prev);
void gwg_leave(gwg_prev prev);
/* Remember the device's primary-context token (gwg_enter's fast path) once a context has
 * initialised the device (context_init). */
void gwg_token_note(int device);

/* gpu_copy.c: transfers and fills. */
gw_status gwg_copy(void *state, const gw__xfer *x, void *stream);
gw_status gwg_copy_batch(void *state, const gw__xfer *x, int n, void *stream);
gw_status gwg_copy_batch_signalled(void *state, const gw__xfer *x, int n, void *stream,
                                   const gw__signals *sig);
gw_status gwg_fill(void *state, const gw__fillspec *f, void *stream);
/* gpu_streams.c: synchronisation, streams and events. */
gw_status gwg_synchronize(void *state);
gw_status gwg_stream_create(void *state, void **stream);
gw_status gwg_stream_destroy(void *state, void *stream);
gw_status gwg_stream_synchronize(void *state, void *stream);
gw_status gwg_stream_borrow(void *state, void *native, void **stream);
void *gwg_stream_native(void *state, void *stream);
/* Events (vendor events, created on the context's device). */
gw_status gwg_event_create(void *state, void **event);
gw_status gwg_event_destroy(void *state, void *event);
gw_status gwg_event_record(void *state, void *event, void *stream);
gw_status gwg_stream_wait_event(void *state, void *stream, void *event);
gw_status gwg_event_query(void *state, void *event);
gw_status gwg_stream_capturing(void *state, void *stream, uint64_t *capture);

/* gpu_ipc.c: memory from another process (the runtime's legacy IPC). */
gw_status gwg_ipc_export(void *state, void *base, size_t extent, int device,
                         unsigned char rt[GW__IPC_RT_BYTES], uint64_t *alloc_id, gw__ipc_share *sh);
gw_status gwg_ipc_open(void *state, const unsigned char rt[GW__IPC_RT_BYTES], int device,
                       size_t extent, void *pool, void **base);
gw_status gwg_ipc_close(void *state, int device, void *pool, void *base);
gw_status gwg_ipc_pool_import(void *state, int fd, int device, void **pool);
gw_status gwg_ipc_pool_release(void *state, int device, void *pool);
gw_status gwg_ipc_vmm_open(void *state, int device, int n, const int *fds, const uint64_t *bytes,
                           uint64_t id, void **base);
gw_status gwg_ipc_vmm_close(void *state, int device, void *base, size_t total);
gw_status gwg_ipc_event_create(void *state, void **event, unsigned char rt[GW__IPC_RT_BYTES]);
gw_status gwg_ipc_event_open(void *state, const unsigned char rt[GW__IPC_RT_BYTES], void **event);
gw_status gwg_device_uuid(int device, unsigned char uuid[16]);

/* gpu_staging.c: pipelined copies between pageable host memory and device/managed memory
 * through pinned bounce buffers. gwg_staging_copy returns 0 when the copy is not for it
 * (layout, kinds, size, device, busy), else runs it on `device` (current) and stream `s`,
 * complete on return, and stores the result in *out. gwg_staging_fini frees the state
 * (from context_fini). */
int gwg_staging_copy(void *state, const gw__xfer *x, int device, gwv_stream s, gw_status *out);
void gwg_staging_fini(void *state);

/* "cuda" "Malloc" -> "cudaMalloc": call names in messages follow the vendor. */
#define GWV_CALL(name) GWV_NAME name
#endif /* GW_GPU_INTERNAL_H */
