/*
 * The private ABI: what one gpuwrap library calls in another, and nothing else. libgpuwrap
 * exports these (default visibility) for libgpuwrap-halo and the Python extension, which
 * are built from the same tree; no other file declares a gw__ symbol of another library.
 * Not installed, not for applications. GW__PRIVATE_ABI changes whenever a declaration here
 * does (CTest abi.private checks it against the hash recorded in src/core/abi.lock and says
 * what to do; 4: the interprocess events, gw__batch_run_unnoted; 5: the settings
 * GPUWRAP_CPU_VISIBLE_DEVICES and GPUWRAP_CPU_IPC_NO_ALLOC_ID; 6: gw__dtype_from_dl; 7: the setting
 * GPUWRAP_HALO_AUTO_MPS; 8: the setting GPUWRAP_HALO_IPC_DIRECT; 9: gw__batch_run_signalled and
 * the setting GPUWRAP_HALO_IPC_SIGNAL; 10: the signalled operation's limits in signals.h);
 * a caller checks
 * gw__private_abi() == GW__PRIVATE_ABI before its first call (the halo
 * at plan creation, the Python extension at import), so a mixed install fails with a
 * message instead of a wrong call. GPU plugins get what they need through gw__host_api
 * (backend.h), versioned by GW__BACKEND_ABI.
 */
#ifndef GW_CORE_PRIVATE_H
#define GW_CORE_PRIVATE_H

#include "gpuwrap.h"
#include "gpuwrap/dlpack.h"
#include "settings.h"
#include "signals.h"

#define GW__PRIVATE_ABI 10

GW_API int gw__private_abi(void);

/* Live references of a (its retain count): the Python extension tells "only its own
 * references are left" from "someone else still holds the array". */
GW_API int gw__array_refs(const gw_array *a);

/* The gw_dtype of a DLPack data type (*out), 1; 0 (*out untouched) where gpuwrap has none,
 * vector types (lanes != 1) included. The one map between the two: the DLPack import
 * (dlpack.c) and the Python module's C exchange allocator (_exchange.c) both read it. */
GW_API int gw__dtype_from_dl(DLDataType t, gw_dtype *out);

/* The context a stream belongs to (NULL for NULL): the halo checks that a caller's stream
 * is of its fields' backend and device. */
GW_API gw_context *gw__stream_context(const gw_stream *s);

/* The context's physical device as every process of the node sees it (uuid: 16 bytes, all
 * zero when unknown) and whether several processes' work on it runs concurrently (CUDA
 * MPS): the halo's AUTO takes the IPC path between ranks that share a device only then
 * (backend.h, gw__caps). */
GW_API void gw__context_device_identity(const gw_context *ctx, unsigned char uuid[16],
                                        int *concurrent_processes);

/*
 * dst[i] <- src[i], i = 0..n-1 in order, on stream s (NULL: synchronous), each pair with
 * gw_copy_async's checks (every pair is checked before anything is queued). Independent
 * pairs on one backend and device go to the backend as ONE copy_batch (one queued item,
 * one kernel launch); pairs that alias, or meet each other, go one by one (same results).
 * Each distinct root's pending-work event is recorded once. For the halo's local
 * periodic copies.
 */
GW_API gw_status gw__copy_many(gw_array *const *dst, const gw_array *const *src, int n,
                               gw_stream *s);

/*
 * The same, prepared once and run many times (the halo exchange's local copies, every
 * update): gw__batch_make does every check, the independence test and the planning, and
 * holds references to the arrays; gw__batch_run queues the copies on s (NULL: synchronous)
 * as gw__copy_many would, with no per-run planning. Pairs are independent when no dst
 * shares memory with another pair's dst or src: decided exactly for views that step alike
 * (the boxes of a field's halo shell), assumed otherwise (then one by one, same results).
 */
typedef struct gw__batch gw__batch;
GW_API gw_status gw__batch_make(gw_array *const *dst, const gw_array *const *src, int n,
                                gw__batch **out);
GW_API gw_status gw__batch_run(gw__batch *b, gw_stream *s);
/* gw__batch_run without the pending-work events: for a caller that synchronizes s itself
 * before any other code can see the arrays (the halo's blocking update, whose copies only
 * it orders), an event record per root less per run. */
GW_API gw_status gw__batch_run_unnoted(gw__batch *b, gw_stream *s);
/* gw__batch_run on s, then synchronize s: complete on return, so no pending-work event is
 * recorded (an event record costs a measurable part of a one-rank halo update, see
 * BENCHMARKS.md). For callers that wait right away. */
GW_API gw_status gw__batch_run_wait(gw__batch *b, gw_stream *s);
GW_API void gw__batch_free(gw__batch *b);
/* b as one signalled operation on s (backend.h: gw__signals, the order of its stores and
 * waits), without pending-work events (the halo orders its own queue). GW_ENOTSUP, with
 * nothing queued, where b is not one backend batch or its backend cannot signal so: the
 * caller then signals another way. Refused inside a capture. */
GW_API gw_status gw__batch_run_signalled(gw__batch *b, gw_stream *s, const gw__signals *sig);
/* Whether gw__batch_run_signalled can run b (one backend batch, a backend with the
 * operation): what a plan asks once, at creation. */
GW_API int gw__batch_can_signal(const gw__batch *b);

/*
 * Make `then` wait, on the device, for the work queued on `first` so far (an event recorded
 * on first, waited for on then, then dropped: the wait holds what it needs); no host
 * synchronisation. Both streams of one backend; a stream waits for itself trivially (same
 * handle: nothing queued). For the Python module's DLPack C exchange import: the producer's
 * current work stream (borrowed) before gpuwrap's stream, as __dlpack__'s stream argument
 * does on the producer's side.
 * @return GW_OK; GW_EINVAL (NULL); GW_EDEVICE (streams of two backends); GW_ENOMEM,
 *         GW_EBACKEND (nothing was queued then).
 */
GW_API gw_status gw__stream_order(gw_stream *first, gw_stream *then);

/*
 * Graph capture. Whether s is being captured into a graph now (*capturing 0/1;
 * cudaStreamIsCapturing): one cheap runtime query. GW_ENOTSUP when s may take no work at
 * all now (the legacy default stream while a blocking stream of its device captures).
 * What a caller of the capture-aware calls needs (src/core/transfer.c, "Capture"): ask
 * this once at the top of a stream-ordered operation, then either refuse it with
 * GW_ENOTSUP naming why, before queueing anything, where some step must run on the host
 * (MPI, a host-staged pack, a synchronize, gw__batch_run_wait), or queue only recordable
 * work: gw__batch_run (records its copies and their events into the capture, or refuses
 * with GW_ENOTSUP before queueing: pageable memory, overlapping pairs), gw_copy_async,
 * gw_fill_async, gw_array_wait (joins captured work of another stream of the capture),
 * and the caller's own kernels. gw_stream_synchronize refuses a capturing stream.
 */
GW_API gw_status gw__stream_capturing(gw_stream *s, int *capturing);

/*
 * Interprocess events (ipc_event.c): an event made in one process (gw__ipc_event_create,
 * its handle sent to others by any means) and opened in another (gw__ipc_event_open, a
 * context of the same backend, any device); both sides record it on their streams and make
 * their streams wait for it on the device. A wait takes the last record made before it, in
 * whichever process: the program orders the two (the halo: a zero-byte MPI message after
 * the record). Not in a graph capture (GW_ENOTSUP). gw__ipc_event_query: GW_OK complete,
 * GW_EBUSY pending. The halo's IPC path signals with them (src/halo/halo_ipc.c).
 * @return GW_OK; GW_EINVAL (NULL, a damaged handle, a handle of this process); GW_EDEVICE
 *         (another backend; a stream of another device than the event's context);
 *         GW_ENOTSUP (a backend without them, a capture);
 *         GW_ENOMEM; the runtime's failure (GW_EBACKEND).
 */
#define GW__IPC_EVENT_HANDLE_BYTES 96
typedef struct gw__ipc_event gw__ipc_event;
typedef struct {
  unsigned char bytes[GW__IPC_EVENT_HANDLE_BYTES];
} gw__ipc_event_handle;
GW_API int gw__ipc_event_supported(const gw_context *ctx);
GW_API gw_status gw__ipc_event_create(gw_context *ctx, gw__ipc_event **out,
                                      gw__ipc_event_handle *h);
GW_API gw_status gw__ipc_event_open(gw_context *ctx, const gw__ipc_event_handle *h,
                                    gw__ipc_event **out);
GW_API gw_status gw__ipc_event_record(gw__ipc_event *ev, gw_stream *s);
GW_API gw_status gw__ipc_event_wait(gw_stream *s, gw__ipc_event *ev);
GW_API gw_status gw__ipc_event_query(gw__ipc_event *ev);
GW_API void gw__ipc_event_destroy(gw__ipc_event *ev);

#endif /* GW_CORE_PRIVATE_H */
