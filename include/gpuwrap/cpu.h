/*
 * The CPU backend's model: what it has allocated and registered, the runtime calls another
 * library would make outside gpuwrap, external streams, IPC mappings and graph capture.
 *
 * The CPU backend computes on the host and models a GPU runtime's memory rules (its own
 * tables of "device", "pinned" and "managed" allocations and of host registrations, with
 * the registration rules measured on CUDA). These calls let tests see what is still
 * allocated or registered and make memory and streams the way another library would. The
 * failure injection and call counters that drive its error paths are testing-only controls
 * in gpuwrap/cpu_testing.h. Environment variables read at first use:
 *   GPUWRAP_CPU_DEVICES=N             number of modelled devices (default 1, at most 64)
 *   GPUWRAP_CPU_FAIL=op:N[,op:N...]   the N-th call of op fails (gpuwrap/cpu_testing.h)
 *   GPUWRAP_CPU_PAGEABLE_ACCESS=1     model a device that reads pageable memory (HMM/ATS)
 *   GPUWRAP_CPU_NO_HOST_PTR=1         model canUseHostPointerForRegisteredMem == 0
 *   GPUWRAP_CPU_NO_READONLY_REGISTER=1  model a device without read-only registration
 *                                     (cudaDevAttrHostRegisterReadOnlySupported == 0):
 *                                     registering with the read-only flag is refused
 *   GPUWRAP_CPU_STREAM_DELAY_US=N     sleep N microseconds (default 0) before each copy or
 *                                     fill queued on a stream runs, so that a test can make
 *                                     a race deterministic (the work surely runs after the
 *                                     host's next steps)
 * All functions are thread-safe.
 *
 * Streams are asynchronous, with CUDA's ordering rules: each stream is a FIFO queue run by
 * a worker thread of its own, and so is the legacy default stream (a borrowed NULL stream,
 * gw_stream_wrap(ctx, NULL)). Streams of gw_stream_create are blocking streams (as
 * cudaStreamCreate): their work waits for the legacy stream's earlier work and the legacy
 * stream's work waits for theirs. Synchronous calls are legacy-stream work run on the
 * calling thread (complete on return), as are copies and fills of pageable memory on any
 * stream. gw_synchronize waits for every stream of the device; freeing backend memory
 * waits for every stream first (cudaFree synchronizes). So reading a result before its
 * stream finished, or a missing wait between two streams, gives wrong data in a test.
 * gw_stream_native gives an opaque non-NULL handle (NULL for the legacy stream) that
 * gw_stream_wrap accepts back on a context of the same device.
 */
#ifndef GPUWRAP_CPU_H
#define GPUWRAP_CPU_H

#include "../gpuwrap.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Backend allocations (device, pinned, managed) not freed yet. */
GW_API size_t gw_cpu_live_allocations(void);
/** Host registrations in the modelled runtime (made by anyone) not unregistered yet. */
GW_API size_t gw_cpu_live_registrations(void);

/*
 * The modelled runtime's raw calls, as a user of a GPU runtime makes them outside gpuwrap
 * (cudaMalloc / cudaMallocHost / cudaMallocManaged, cudaFree*, cudaHostRegister,
 * cudaHostUnregister). They count as backend calls and obey injected failures.
 */
/** Allocate `kind` (GW_MEM_DEVICE, GW_MEM_PINNED, GW_MEM_MANAGED) memory of `device`. */
GW_API gw_status gw_cpu_runtime_alloc(gw_memkind kind, int device, size_t bytes, void **out);
/** Free memory from gw_cpu_runtime_alloc (exact base). GW_EINVAL for anything else. */
GW_API gw_status gw_cpu_runtime_free(void *ptr);
/** Register exactly [ptr, ptr+bytes): CUDA tracks byte ranges, so two disjoint ranges on
 *  one page are fine and any overlapping byte gives GW_EALREADY. A range that is not
 *  mapped, wholly or in part, is GW_EINVAL ("invalid value", as on CUDA: measured on the
 *  H200, with or without the read-only flag). */
GW_API gw_status gw_cpu_runtime_register(void *ptr, size_t bytes);
/** The same with cudaHostRegisterReadOnly. Registrations check the pages' protection as
 *  CUDA does (measured on the H200): a plain registration of pages the process cannot
 *  write is GW_EINVAL ("invalid value"); a read-only one registers them, unless the device
 *  lacks it (GPUWRAP_CPU_NO_READONLY_REGISTER: GW_ENOTSUP) or the span holds a MAP_PRIVATE
 *  file mapping: on CUDA that call never returns, so the model fails it with GW_EBACKEND
 *  and counts it in gw_cpu_model_hangs(). */
GW_API gw_status gw_cpu_runtime_register_readonly(void *ptr, size_t bytes);
/** Unregister; needs the exact pointer given to register (GW_ENOTREG otherwise). */
GW_API gw_status gw_cpu_runtime_unregister(void *ptr);

/** Registrations with the read-only flag of a span holding a MAP_PRIVATE file mapping,
 *  made through gpuwrap or gw_cpu_runtime_register_readonly: each is a call that would
 *  never have returned on CUDA (the model fails it instead). gpuwrap itself must never
 *  make one: tests assert this stays unchanged across their wraps. */
GW_API long gw_cpu_model_hangs(void);

/*
 * A stream made outside gpuwrap, as another library (PyTorch, CuPy, a solver) makes one:
 * the model's cudaStreamCreateWithFlags(nonblocking ? cudaStreamNonBlocking :
 * cudaStreamDefault) on `device`. A non-blocking stream is ordered with nothing but itself
 * (not with the legacy stream, so not with synchronous calls either); a blocking one as a
 * gw_stream_create stream. *native is its handle, for gw_stream_wrap. Counts as a
 * stream_create call (and obeys injected failures); GW_EINVAL (native NULL), GW_ENODEV.
 */
GW_API gw_status gw_cpu_stream_create_external(int device, int nonblocking, void **native);
/** Destroy a stream of gw_cpu_stream_create_external (the model's cudaStreamDestroy done
 *  outside gpuwrap): its queued work runs first. gpuwrap handles borrowing it must not be
 *  used after it (GW_EINVAL). A stream_destroy call; GW_EINVAL for anything else. */
GW_API gw_status gw_cpu_stream_destroy_external(void *native);

/*
 * Memory from another process. The model's device allocations are shared memory (a
 * memfd, mapped MAP_SHARED; the descriptor stays open while the allocation lives), so a
 * process that was not forked from the exporter, started with exec, maps them by opening
 * /proc/<exporter pid>/fd/<fd> (same user, or root). The model keeps the runtime's rules:
 * only device memory exports; an open in the exporting process is refused as CUDA refuses
 * it (cudaErrorDeviceUninitialized); a second open of one allocation in a process is
 * refused (gpuwrap's import table never makes one); an opened allocation is device memory
 * here until closed. When the process has no descriptor left for a memfd, a device
 * allocation falls back to private memory, which export refuses (GW_ENOTSUP).
 */
/** Allocations of other processes mapped in this one (cudaIpcOpenMemHandle'd, not closed). */
GW_API size_t gw_cpu_ipc_mappings(void);

/*
 * Graph capture, as cudaStreamBeginCapture / cudaStreamEndCapture / cudaGraphLaunch on a
 * stream made outside gpuwrap (so that the capture rules run in CI). While a stream
 * captures, work queued on it (copies, fills, batches; events recorded there become graph
 * nodes) is recorded, not run; a launch queues the recorded work on a stream, in order,
 * each time. The model keeps CUDA's rules and, as CUDA, a broken rule INVALIDATES the
 * capture (its end then fails with GW_EBACKEND and gives no graph):
 *   - host-run work queued on the capturing stream (a synchronous or pageable copy or
 *     fill), a synchronize of it, or a wait for work outside the capture;
 *   - work on the legacy stream while a BLOCKING stream of its device captures;
 *   - a "potentially unsafe" call (synchronous copies and fills, stream and device
 *     synchronisation, event queries, allocation, free, host registration) from a thread
 *     whose per-thread mode is not relaxed: under GW_CPU_CAPTURE_GLOBAL from any thread,
 *     under GW_CPU_CAPTURE_THREAD_LOCAL from the thread that began the capture. gpuwrap's
 *     own backend calls run in the relaxed mode (as the GPU backend's); the raw
 *     gw_cpu_runtime_* calls, a user's own runtime calls, do not.
 * Querying an event last recorded in a capture fails with GW_ENOTSUP
 * (cudaErrorCapturedEvent). A stream
 * that waits on an event recorded in a capture joins that capture (as on CUDA: work queued
 * on it is recorded too); a wait on an event of another capture, or of one that has
 * ended, invalidates the waiting stream's capture (cudaErrorStreamCaptureIsolation). A
 * launch replays everything recorded in the order it was recorded; only the stream that
 * began a capture ends it (joined streams are not checked for having joined back).
 */
typedef enum {
  GW_CPU_CAPTURE_GLOBAL = 0, /* cudaStreamCaptureModeGlobal, every thread's default mode */
  GW_CPU_CAPTURE_THREAD_LOCAL,
  GW_CPU_CAPTURE_RELAXED
} gw_cpu_capture_mode;
typedef struct gw_cpu_graph gw_cpu_graph;
/** Begin capturing `native` (gw_cpu_stream_create_external, or gw_stream_native of a
 *  gw_stream_create stream; not NULL, the legacy stream). GW_EINVAL: not a live stream,
 *  already capturing, bad mode. */
GW_API gw_status gw_cpu_stream_capture_begin(void *native, gw_cpu_capture_mode mode);
/** End the capture: *graph (owned by the caller, gw_cpu_graph_destroy) gets what was
 *  recorded; GW_EBACKEND naming what invalidated it (*graph NULL). */
GW_API gw_status gw_cpu_stream_capture_end(void *native, gw_cpu_graph **graph);
/** Items recorded so far by the capture of `native`; -1 when it is not capturing. */
GW_API int gw_cpu_stream_capture_items(void *native);
/** Items of a graph. */
GW_API int gw_cpu_graph_items(const gw_cpu_graph *g);
/** Queue the graph's work on `native` (NULL: device 0's legacy stream), asynchronously, as
 *  cudaGraphLaunch; all of it or nothing (GW_ENOMEM, GW_EINVAL). */
GW_API gw_status gw_cpu_graph_launch(gw_cpu_graph *g, void *native);
GW_API void gw_cpu_graph_destroy(gw_cpu_graph *g);
/** `waiter` waits for the work queued on `waited` so far, on the device (the model's
 *  cudaEventRecord(e, waited) + cudaStreamWaitEvent(waiter, e), made outside gpuwrap):
 *  while `waited` captures, `waiter` joins its capture (a fork); both are native handles
 *  of live non-legacy streams. GW_EINVAL, GW_ENOMEM, GW_EBACKEND (a wait across captures
 *  or out of one: the waiter's capture is invalidated). */
GW_API gw_status gw_cpu_stream_wait_stream(void *waiter, void *waited);
/** The calling thread's per-thread capture mode now (GLOBAL unless changed): gpuwrap's
 *  calls restore it after running relaxed. */
GW_API gw_cpu_capture_mode gw_cpu_thread_capture_mode(void);
/** Test hook: the next capture query gpuwrap makes (the one check of each asynchronous
 *  call, cudaStreamGetCaptureInfo on a GPU) calls fn(arg) on the querying thread after it
 *  has its answer and before the call acts on it: the moment at which another thread's
 *  cudaStreamBeginCapture can fall between gpuwrap's check and its enqueue. Runs once;
 *  fn NULL clears it. fn may begin captures (from any thread) and wait for threads. */
GW_API void gw_cpu_after_capture_query(void (*fn)(void *arg), void *arg);

#ifdef __cplusplus
}
#endif
#endif /* GPUWRAP_CPU_H */
