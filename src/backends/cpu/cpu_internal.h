/*
 * Private to the CPU backend: the pieces its files share.
 *
 * Its files are layers, bottom first; each calls only files above it in this list (the
 * order of GW_CORE_SOURCES in CMakeLists.txt):
 *   cpu_inject.c  per-op call counters and failure injection (gw__cpu_check)
 *   cpu_config.c  the environment: settings, the devices a process sees, their states
 *   cpu_shm.c     memory other processes can map (memfd pages), the device-allocation table
 *   cpu_copy.c    strided N-d copy and fill loops
 *   cpu_ipc_event.c interprocess events: their shared page (counters, handle, mapping)
 *   cpu_queue.c   the streams' core: the one lock, the queues, their workers, fork
 *   cpu_capture.c the model of graph capture on those queues (its rules, graphs, launches)
 *   cpu_streams.c the streams and events the ops use (one worker thread per stream)
 *   cpu_vmm.c     the model of VMM reservations/chunks and stream-ordered pools: their
 *                 tables, the testing controls (gw_cpu_vmm_*, gw_cpu_pool_*), their
 *                 pointer query and why IPC refuses them
 *   cpu_model.c   the modelled runtime's memory: allocation and registration tables, and
 *                 the raw runtime calls (gw_cpu_runtime_*)
 *   cpu_ipc.c     the runtime's IPC calls on device memory
 *   cpu_ops.c     the gw__cpu_ops table
 */
#ifndef GW_CPU_INTERNAL_H
#define GW_CPU_INTERNAL_H

#include "gpuwrap/cpu_testing.h"
#include "internal.h"

#include <stdatomic.h>
#include <stddef.h>

/* Most devices GPUWRAP_CPU_DEVICES may ask for. */
#define GW__CPU_MAX_DEVICES 64

/* ---- injection (cpu_inject.c) ---- */

/* Read by the inline check below; written only by cpu_inject.c. */
extern atomic_long gw__cpu_calls[GW_CPU_OP_COUNT];
extern atomic_int gw__cpu_armed; /* armed triggers; 0 keeps the check to two atomics */
extern atomic_int gw__cpu_inject_ready;

void gw__cpu_inject_init(void);
/* The model's locks, taken (1) / released (0) around fork (cpu_ops.c's fork_lock). */
void gw__cpu_inject_lock(int on);
void gw__cpu_model_lock(int on);
/* Whether native is a live stream handle of the model (cpu_streams.c; the owns_native_stream op). */
bool gw__cpu_stream_is_native(const void *native);
gw_status gw__cpu_inject_slow(gw_cpu_op op, long callno);
/* Why GPUWRAP_CPU_FAIL could not be parsed, or NULL. */
const char *gw__cpu_inject_env_error(void);

/*
 * Every backend call starts here: count the call, and fail it if a failure is armed for it
 * (then nothing else happens, so an injected failure changes no state). The fast path is
 * one relaxed increment and two loads; the mutex is taken only while something is armed.
 */
static inline gw_status gw__cpu_check(gw_cpu_op op) {
  if (!atomic_load_explicit(&gw__cpu_inject_ready, memory_order_acquire)) gw__cpu_inject_init();
  long n = atomic_fetch_add_explicit(&gw__cpu_calls[op], 1, memory_order_relaxed) + 1;
  if (atomic_load_explicit(&gw__cpu_armed, memory_order_relaxed) == 0) return GW_OK;
  return gw__cpu_inject_slow(op, n);
}

/* ---- the environment (cpu_config.c) ---- */

typedef struct {
  int devices;                 /* GPUWRAP_CPU_DEVICES */
  int pageable_access;         /* GPUWRAP_CPU_PAGEABLE_ACCESS */
  int host_ptr_for_registered; /* !GPUWRAP_CPU_NO_HOST_PTR */
  int readonly_register;       /* !GPUWRAP_CPU_NO_READONLY_REGISTER */
  long stream_delay_us;        /* GPUWRAP_CPU_STREAM_DELAY_US */
  int mps;                     /* GPUWRAP_CPU_MPS */
  int ipc_no_alloc_id;         /* GPUWRAP_CPU_IPC_NO_ALLOC_ID */
  /* GPUWRAP_CPU_VISIBLE_DEVICES: the machine's model device behind each ordinal (its
   * UUID); `devices` is how many this process sees. */
  int physical[GW__CPU_MAX_DEVICES];
  const char *error; /* why the environment is unusable, or NULL */
} gw__cpu_config;

/* Read once, thread-safe. */
const gw__cpu_config *gw__cpu_config_get(void);

/* The UUID of ordinal `device` (< devices): the machine's model device behind it, alike in
 * every process whatever its ordinal there. */
void gw__cpu_device_uuid(int device, unsigned char uuid[16]);

/* A context's state is a per-device slot, so context_init never allocates. */
void *gw__cpu_device_state(int device);
int gw__cpu_state_device(const void *state);

/* ---- VMM memory and stream-ordered pools (cpu_vmm.c) ---- */
/* What ptr is when it is VMM or pool memory (true, *out written), else false; lock-free
 * while none exists. */
bool gw__cpu_vmm_query(const void *ptr, gw_ptrinfo *out);
/* Why IPC cannot export ptr (VMM or pool memory), written into buf, or NULL. */
const char *gw__cpu_vmm_refusal(const void *ptr, char *buf, size_t n);
/* IPC of an IPC pool's memory: true when base is in such a pool, *st the export's status
 * (rt the export data, sh the pool's descriptor and id); false when it is not. */
bool gw__cpu_pool_export(void *base, unsigned char rt[GW__IPC_RT_BYTES], uint64_t *alloc_id,
                         gw__ipc_share *sh, gw_status *st);
/* The importer's side: the pool behind this process's descriptor fd (not kept), a pointer
 * of it from its export data (device memory of the model until freed), its free, and the
 * pool's release once no pointer is left. */
gw_status gw__cpu_pool_import(int fd, int device, void **pool);
gw_status gw__cpu_pool_import_pointer(void *pool, const unsigned char rt[GW__IPC_RT_BYTES],
                                      int device, size_t extent, void **out);
gw_status gw__cpu_pool_free_imported(void *pool, void *ptr);
gw_status gw__cpu_pool_release_imported(void *pool);
/* IPC of VMM memory: true when lo is in a VMM mapping, *st the export's status (sh the
 * chunks covering [lo, hi)); the importer's side: map the chunks behind this process's
 * descriptors back to back (adopted device memory), and undo it. */
bool gw__cpu_vmm_export(uintptr_t lo, uintptr_t hi, uint64_t *alloc_id, gw__ipc_share *sh,
                        gw_status *st);
gw_status gw__cpu_vmm_import(int device, int n, const int *fds, const uint64_t *bytes, uint64_t id,
                             void **out);
gw_status gw__cpu_vmm_close_imported(void *base, size_t total);

/* ---- the modelled runtime's memory (cpu_model.c) ---- */

/*
 * The runtime's rules. `who` prefixes error messages. `kind` GW_MEM_UNKNOWN in free means
 * "any kind" and `device` -1 "any device" (the raw runtime free, which knows neither).
 */
void gw__cpu_model_query(const void *ptr, gw_ptrinfo *out);
gw_status gw__cpu_model_alloc(const char *who, gw_memkind kind, int device, size_t bytes,
                              void **out);
gw_status gw__cpu_model_free(const char *who, gw_memkind kind, int device, void *ptr);
/* flags: GW__REG_*. The pages are checked against /proc/self/maps as CUDA checks them:
 * see cpu_model.c. */
gw_status gw__cpu_model_register(const char *who, int device, void *base, size_t bytes,
                                 unsigned flags);
gw_status gw__cpu_model_unregister(const char *who, void *base);
gw_status gw__cpu_model_device_address(const char *who, void *host, void **dev);

/* An allocation of another process mapped here (cpu_ipc.c): device memory of `device` in
 * the tables until gw__cpu_model_unadopt; never freed by the model's free. */
gw_status gw__cpu_model_adopt(const char *who, int device, void *base, size_t bytes);
gw_status gw__cpu_model_unadopt(const char *who, void *base);

/* ---- memory other processes can map (cpu_shm.c) ---- */
/* Room for one more of n elements of `size` bytes in *v (capacity *cap): false when out of
 * memory. */
bool gw__cpu_grow(void **v, size_t n, size_t *cap, size_t size);
/* Page-aligned memory for a device allocation: a memfd mapped MAP_SHARED (private memory
 * when no descriptor is left); NULL when out of memory. Freed by gw__cpu_devmem_free. */
void *gw__cpu_devmem_alloc(size_t bytes);
void gw__cpu_devmem_free(void *p);
/* The memfd name of device allocation <serial>: GW__CPU_DEVMEM_PREFIX "<serial>". */
#define GW__CPU_DEVMEM_PREFIX "gw-cpu-dev-"
/* A device allocation of this process. */
typedef struct {
  uintptr_t base;
  size_t len; /* mapped bytes (whole pages) */
  int fd;     /* -1: private memory (no descriptor was left) */
  uint64_t serial;
} gw__cpu_devmem;
/* The device allocation whose base is `base`, into *out: false when there is none. */
bool gw__cpu_devmem_find(const void *base, gw__cpu_devmem *out);
/* The model's runtime handle of a shared page set (device memory, an interprocess event):
 * 64 bytes, each kind with its own magic; len: the bytes mapped (device memory). Its
 * bytes, little-endian (codec.h): 0 magic, 8 pid, 16 fd (int32), 20 zero (uint32),
 * 24 serial, 32 len, 40..63 zero; gw__cpu_rt_encode writes them, gw__cpu_rt_decode reads
 * them back (cpu_ipc.c). */
typedef struct {
  char magic[8];
  uint64_t pid;
  int32_t fd;
  uint32_t zero;
  uint64_t serial;
  uint64_t len;
} gw__cpu_rt_handle;
void gw__cpu_rt_encode(const gw__cpu_rt_handle *h, unsigned char rt[GW__IPC_RT_BYTES]);
void gw__cpu_rt_decode(const unsigned char rt[GW__IPC_RT_BYTES], gw__cpu_rt_handle *h);
/* A memfd named `name` of len bytes, mapped MAP_SHARED at *p: its descriptor (kept open
 * by the maker, so that another process can map it), or -1 with errno set. */
int gw__cpu_shm_create(const char *name, size_t len, void **p);
/* Map len bytes of another process's memfd `name`, its descriptor fd, at *out: through
 * /proc/<pid>/fd/<fd>, whose link must name it (the serial in the name tells it from
 * whatever reuses the number later). GW_EBACKEND naming why otherwise (`who` the call,
 * `what` the object, for the message). */
gw_status gw__cpu_shm_map(const char *who, const char *what, uint64_t pid, int fd, const char *name,
                          size_t len, void **out);
/* ---- the runtime's IPC calls (cpu_ipc.c) ---- */
/* The ops' IPC calls, after their injection check (cpu_ops.c). */
gw_status gw__cpu_ipc_export(void *base, size_t extent, unsigned char rt[GW__IPC_RT_BYTES],
                             uint64_t *alloc_id, gw__ipc_share *sh);
gw_status gw__cpu_ipc_open(const unsigned char rt[GW__IPC_RT_BYTES], int device, size_t extent,
                           void **base);
gw_status gw__cpu_ipc_close(void *base);

/* ---- interprocess events (cpu_ipc_event.c) ---- */
/* An interprocess event's shared page as this process maps it: its counters and its
 * mapping, private to cpu_ipc_event.c. The streams queue and run its records and waits
 * through the calls below; those that take or drop a reference (take, unref) are made with
 * the streams' lock held (cpu_queue.c), which guards the count. */
typedef struct gw__cpu_evshm gw__cpu_evshm;
/* A new event's page, its handle written to rt / another process's event's page: one
 * reference, dropped with gw__cpu_evshm_unref. */
gw_status gw__cpu_ipc_event_create(gw__cpu_evshm **sh, unsigned char rt[GW__IPC_RT_BYTES]);
gw_status gw__cpu_ipc_event_open(const unsigned char rt[GW__IPC_RT_BYTES], gw__cpu_evshm **sh);
/* A reference for a queued item, and its value: a record's number (record) or the record a
 * wait waits for (!record), taken when the call is made. */
uint64_t gw__cpu_evshm_take(gw__cpu_evshm *sh, bool record);
/* Whether the record numbered value has run, in whichever process made it (a wait's test). */
bool gw__cpu_evshm_reached(const gw__cpu_evshm *sh, uint64_t value);
/* Record `value` has run (a record item, on its stream's worker). */
void gw__cpu_evshm_raise(gw__cpu_evshm *sh, uint64_t value);
/* Whether every record made so far has run (event_query). */
bool gw__cpu_evshm_complete(const gw__cpu_evshm *sh);
/* Drop a reference: the page is unmapped with the last. */
void gw__cpu_evshm_unref(gw__cpu_evshm *sh);

/* ---- loops (cpu_copy.c) ---- */
gw_status gw__cpu_copy(const gw__xfer *x);
gw_status gw__cpu_fill(const gw__fillspec *f);
/* The argument checks of the loops alone (what would make them fail), so that an
 * asynchronous call fails at call time with nothing queued. */
gw_status gw__cpu_copy_check(const gw__xfer *x);
gw_status gw__cpu_fill_check(const gw__fillspec *f, int *empty);

/* ---- streams and events (cpu_streams.c) ----
 * The ops of gw__cpu_ops that touch streams, after their injection check (cpu_ops.c).
 * stream NULL in copy/fill: synchronous (legacy-stream work run on the calling thread). */
gw_status gw__cpu_stream_copy(int device, const gw__xfer *x, void *stream);
/* n transfers as ONE item of the stream, run in order (synchronous, or with pageable
 * memory on any side: all run by the caller, complete on return). */
gw_status gw__cpu_stream_copy_batch(int device, const gw__xfer *x, int n, void *stream);
gw_status gw__cpu_stream_copy_batch_signalled(int device, const gw__xfer *x, int n, void *stream,
                                              const gw__signals *sig);
gw_status gw__cpu_stream_fill(int device, const gw__fillspec *f, void *stream);
gw_status gw__cpu_device_synchronize(int device);
gw_status gw__cpu_stream_create(int device, void **stream);
void gw__cpu_stream_destroy(void *stream);
gw_status gw__cpu_stream_synchronize(void *stream);
gw_status gw__cpu_stream_borrow(int device, void *native, void **stream);
void *gw__cpu_stream_native(void *stream);
gw_status gw__cpu_event_create(void **event);
void gw__cpu_event_destroy(void *event);
gw_status gw__cpu_event_record(void *event, void *stream);
gw_status gw__cpu_stream_wait_event(void *stream, void *event);
gw_status gw__cpu_event_query(void *event);
/* An event over an interprocess event's page (cpu_ipc_event.c), whose reference it takes
 * over (GW_ENOMEM: nothing taken). */
gw_status gw__cpu_event_create_shared(gw__cpu_evshm *sh, void **event);
/* Wait for all work queued so far on every stream of `device` (-1: of every device),
 * never failing: what cudaFree's implicit synchronisation does before memory goes
 * (cpu_queue.c). */
void gw__cpu_streams_quiesce(int device);
/* Capture (cpu_capture.c). The thread's per-thread capture mode, exchanged (the model's
 * cudaThreadExchangeStreamCaptureMode): the ops run in GW_CPU_CAPTURE_RELAXED. */
gw_cpu_capture_mode gw__cpu_capture_mode_exchange(gw_cpu_capture_mode m);
/* Whether the calling thread may make a potentially unsafe call now (`call` names it):
 * GW_EBACKEND, having invalidated the captures it breaks, when it may not. */
gw_status gw__cpu_capture_guard(const char *call);
gw_status gw__cpu_stream_capturing(void *stream, uint64_t *capture);
/* fork(): the streams' lock, taken innermost (after the model's), and the child's reset
 * (no worker thread survives a fork: queues are taken over by new workers on demand;
 * cpu_queue.c). */
void gw__cpu_streams_lock(int on);
void gw__cpu_streams_child(void);

#endif /* GW_CPU_INTERNAL_H */
