/*
 * The CPU backend's operations table. Each operation is one injection check (so every
 * backend call can be made to fail, with no state changed) followed by the model
 * (cpu_model.c), the host loops (cpu_copy.c) or the asynchronous streams (cpu_streams.c:
 * one worker thread per stream, CUDA's ordering rules; synchronous calls complete on
 * return).
 */
#include "cpu_internal.h"

#include <string.h>

#define CHECK(op)                         \
  do {                                    \
    gw_status check_ = gw__cpu_check(op); \
    if (check_ != GW_OK) return check_;   \
  } while (0)

/* The op's model calls in the relaxed per-thread capture mode, the thread's own mode
 * restored after: as the GPU backend's runtime calls (gwg_enter), so that gpuwrap never
 * invalidates another thread's global-mode capture (cpu_capture.c, "capture"). */
#define RELAXED(call)                                                                  \
  do {                                                                                 \
    gw_cpu_capture_mode mode_ = gw__cpu_capture_mode_exchange(GW_CPU_CAPTURE_RELAXED); \
    gw_status relaxed_ = (call);                                                       \
    (void)gw__cpu_capture_mode_exchange(mode_);                                        \
    return relaxed_;                                                                   \
  } while (0)

static gw_status config_error(void) {
  const gw__cpu_config *c = gw__cpu_config_get();
  if (c->error) return gw__fail(GW_EINVAL, "cpu backend: %s", c->error);
  const char *e = gw__cpu_inject_env_error();
  if (e) return gw__fail(GW_EINVAL, "cpu backend: %s", e);
  return GW_OK;
}

static gw_status cpu_device_count(int *count) {
  gw_status st = config_error();
  if (st) return st;
  *count = gw__cpu_config_get()->devices;
  return GW_OK;
}

static gw_status cpu_context_init(int device, void **state, gw__caps *caps) {
  CHECK(GW_CPU_OP_CONTEXT_INIT);
  gw_status st = config_error();
  if (st) return st;
  const gw__cpu_config *c = gw__cpu_config_get();
  if (device < 0 || device >= c->devices)
    return gw__fail(GW_ENODEV,
                    "cpu backend: no device %d (%d modelled: set GPUWRAP_CPU_DEVICES=N for more, "
                    "at most %d)",
                    device, c->devices, GW__CPU_MAX_DEVICES);
  *caps = (gw__caps){
      .pageable_access = c->pageable_access,
      .host_ptr_for_registered = c->host_ptr_for_registered,
      .tells_registered = 1,
      .kernels = 1,
      .gpu_aware_hint = 0,
      .host_register_readonly = c->readonly_register,
      .concurrent_processes = c->mps,
  };
  /* The modelled device is the same device in every process of this machine: the
   * processes of one node that see machine device N share it (as ranks sharing a GPU do),
   * whatever ordinal GPUWRAP_CPU_VISIBLE_DEVICES gives it. */
  gw__cpu_device_uuid(device, caps->device_uuid);
  *state = gw__cpu_device_state(device);
  return GW_OK;
}

/* Not injected or counted: what context_init tells, read without a context. */
static gw_status cpu_device_uuid(int device, unsigned char uuid[16]) {
  gw_status st = config_error();
  if (st) return st;
  if (device < 0 || device >= gw__cpu_config_get()->devices)
    return gw__fail(GW_ENODEV, "cpu backend: no device %d", device);
  gw__cpu_device_uuid(device, uuid);
  return GW_OK;
}

/* The state is a static per-device slot: nothing to release. */
static void cpu_context_fini(void *state) { (void)state; }

static gw_status cpu_query(void *state, const void *ptr, gw_ptrinfo *out) {
  (void)state;
  CHECK(GW_CPU_OP_QUERY);
  gw__cpu_model_query(ptr, out);
  return GW_OK;
}

static gw_status cpu_alloc(void *state, gw_memkind kind, size_t bytes, void **out) {
  CHECK(GW_CPU_OP_ALLOC);
  RELAXED(gw__cpu_model_alloc("alloc", kind, gw__cpu_state_device(state), bytes, out));
}

static gw_status cpu_free(void *state, gw_memkind kind, int device, void *ptr) {
  (void)state;
  CHECK(GW_CPU_OP_FREE);
  /* cudaFree / cudaFreeHost synchronize the device first: queued work on the memory
   * finishes before it goes, as on CUDA. */
  gw_cpu_capture_mode mode = gw__cpu_capture_mode_exchange(GW_CPU_CAPTURE_RELAXED);
  gw__cpu_streams_quiesce(-1);
  gw_status st = gw__cpu_model_free("free", kind, device, ptr);
  (void)gw__cpu_capture_mode_exchange(mode);
  return st;
}

static gw_status cpu_host_register(void *state, void *base, size_t bytes, unsigned flags) {
  CHECK(GW_CPU_OP_REGISTER);
  RELAXED(gw__cpu_model_register("host_register", gw__cpu_state_device(state), base, bytes, flags));
}

static gw_status cpu_host_unregister(void *state, void *base) {
  (void)state;
  CHECK(GW_CPU_OP_UNREGISTER);
  RELAXED(gw__cpu_model_unregister("host_unregister", base));
}

static gw_status cpu_device_address(void *state, void *host, void **dev) {
  (void)state;
  CHECK(GW_CPU_OP_DEVICE_ADDRESS);
  return gw__cpu_model_device_address("device_address", host, dev);
}

static gw_status cpu_copy(void *state, const gw__xfer *x, void *stream) {
  CHECK(GW_CPU_OP_COPY);
  RELAXED(gw__cpu_stream_copy(gw__cpu_state_device(state), x, stream));
}

/* One check for the whole batch: a batch is one backend call (counted and injected as one
 * GW_CPU_OP_COPY), which is what lets the halo tests count one copy per periodic dim. */
static gw_status cpu_copy_batch(void *state, const gw__xfer *x, int n, void *stream) {
  CHECK(GW_CPU_OP_COPY);
  RELAXED(gw__cpu_stream_copy_batch(gw__cpu_state_device(state), x, n, stream));
}

static gw_status cpu_copy_batch_signalled(void *state, const gw__xfer *x, int n, void *stream,
                                          const gw__signals *sig) {
  CHECK(GW_CPU_OP_COPY);
  RELAXED(gw__cpu_stream_copy_batch_signalled(gw__cpu_state_device(state), x, n, stream, sig));
}

static gw_status cpu_fill(void *state, const gw__fillspec *f, void *stream) {
  CHECK(GW_CPU_OP_FILL);
  RELAXED(gw__cpu_stream_fill(gw__cpu_state_device(state), f, stream));
}

static gw_status cpu_synchronize(void *state) {
  CHECK(GW_CPU_OP_SYNCHRONIZE);
  RELAXED(gw__cpu_device_synchronize(gw__cpu_state_device(state)));
}

static gw_status cpu_stream_create(void *state, void **stream) {
  CHECK(GW_CPU_OP_STREAM_CREATE);
  return gw__cpu_stream_create(gw__cpu_state_device(state), stream);
}

static gw_status cpu_stream_destroy(void *state, void *stream) {
  (void)state;
  /* A runtime's stream destroy releases the stream even when it reports an error (the
   * handle is unusable after it either way), and gw_stream_destroy cannot retry: free it
   * before reporting an injected failure. */
  gw__cpu_stream_destroy(stream);
  CHECK(GW_CPU_OP_STREAM_DESTROY);
  return GW_OK;
}

static gw_status cpu_stream_synchronize(void *state, void *stream) {
  (void)state;
  CHECK(GW_CPU_OP_STREAM_SYNCHRONIZE);
  RELAXED(gw__cpu_stream_synchronize(stream));
}

static gw_status cpu_stream_borrow(void *state, void *native, void **stream) {
  CHECK(GW_CPU_OP_STREAM_BORROW);
  return gw__cpu_stream_borrow(gw__cpu_state_device(state), native, stream);
}

static void *cpu_stream_native(void *state, void *stream) {
  (void)state;
  return gw__cpu_stream_native(stream);
}

static gw_status cpu_event_create(void *state, void **event) {
  (void)state;
  CHECK(GW_CPU_OP_EVENT_CREATE);
  return gw__cpu_event_create(event);
}

/* Not injected: a destroy cannot be reported (the event goes either way). */
static gw_status cpu_event_destroy(void *state, void *event) {
  (void)state;
  gw__cpu_event_destroy(event);
  return GW_OK;
}

static gw_status cpu_event_record(void *state, void *event, void *stream) {
  (void)state;
  CHECK(GW_CPU_OP_EVENT_RECORD);
  RELAXED(gw__cpu_event_record(event, stream));
}

static gw_status cpu_stream_wait_event(void *state, void *stream, void *event) {
  (void)state;
  CHECK(GW_CPU_OP_STREAM_WAIT_EVENT);
  RELAXED(gw__cpu_stream_wait_event(stream, event));
}

/* Not injected or counted: a poll, and GW_EBUSY is an answer, not a failure. */
/* The model's locks in their nesting order: injection, then the model's tables. */
static void cpu_fork_lock(int on) {
  if (on) {
    gw__cpu_inject_lock(1);
    gw__cpu_model_lock(1);
  } else {
    gw__cpu_model_lock(0);
    gw__cpu_inject_lock(0);
  }
}

static gw_status cpu_event_query(void *state, void *event) {
  (void)state;
  RELAXED(gw__cpu_event_query(event));
}

static gw_status cpu_ipc_export(void *state, void *base, size_t extent, int device,
                                unsigned char rt[GW__IPC_RT_BYTES], uint64_t *alloc_id,
                                gw__ipc_share *sh) {
  (void)state;
  (void)device;
  CHECK(GW_CPU_OP_IPC_EXPORT);
  return gw__cpu_ipc_export(base, extent, rt, alloc_id, sh);
}

static gw_status cpu_ipc_open(void *state, const unsigned char rt[GW__IPC_RT_BYTES], int device,
                              size_t extent, void *pool, void **base) {
  (void)state;
  CHECK(GW_CPU_OP_IPC_OPEN);
  if (pool) return gw__cpu_pool_import_pointer(pool, rt, device, extent, base);
  return gw__cpu_ipc_open(rt, device, extent, base);
}

static gw_status cpu_ipc_close(void *state, int device, void *pool, void *base) {
  (void)state;
  (void)device;
  CHECK(GW_CPU_OP_IPC_CLOSE);
  if (pool) return gw__cpu_pool_free_imported(pool, base);
  return gw__cpu_ipc_close(base);
}

static gw_status cpu_ipc_pool_import(void *state, int fd, int device, void **pool) {
  (void)state;
  CHECK(GW_CPU_OP_IPC_POOL_IMPORT);
  return gw__cpu_pool_import(fd, device, pool);
}

/* Not counted nor injected: the core cannot report a failed destroy (a release). */
static gw_status cpu_ipc_pool_release(void *state, int device, void *pool) {
  (void)state;
  (void)device;
  return gw__cpu_pool_release_imported(pool);
}

static gw_status cpu_ipc_vmm_open(void *state, int device, int n, const int *fds,
                                  const uint64_t *bytes, uint64_t id, void **base) {
  (void)state;
  CHECK(GW_CPU_OP_IPC_VMM_IMPORT);
  return gw__cpu_vmm_import(device, n, fds, bytes, id, base);
}

/* Not injected: the core cannot report a failed close (a release). */
static gw_status cpu_ipc_vmm_close(void *state, int device, void *base, size_t total) {
  (void)state;
  (void)device;
  return gw__cpu_vmm_close_imported(base, total);
}

/* An interprocess event: its page (cpu_ipc_event.c) inside an event of the streams
 * (cpu_streams.c), which neither file makes of the other; the page goes if that fails. */
static gw_status shared_event(gw__cpu_evshm *sh, void **event) {
  gw_status st = gw__cpu_event_create_shared(sh, event);
  if (st != GW_OK) gw__cpu_evshm_unref(sh);
  return st;
}

static gw_status cpu_ipc_event_create(void *state, void **event,
                                      unsigned char rt[GW__IPC_RT_BYTES]) {
  (void)state;
  CHECK(GW_CPU_OP_IPC_EVENT_CREATE);
  gw__cpu_evshm *sh = NULL;
  gw_status st = gw__cpu_ipc_event_create(&sh, rt);
  return st == GW_OK ? shared_event(sh, event) : st;
}

static gw_status cpu_ipc_event_open(void *state, const unsigned char rt[GW__IPC_RT_BYTES],
                                    void **event) {
  (void)state;
  CHECK(GW_CPU_OP_IPC_EVENT_OPEN);
  gw__cpu_evshm *sh = NULL;
  gw_status st = gw__cpu_ipc_event_open(rt, &sh);
  return st == GW_OK ? shared_event(sh, event) : st;
}

/* Neither counted nor injected: a query, asked once per asynchronous call. */
static gw_status cpu_stream_capturing(void *state, void *stream, uint64_t *capture) {
  (void)state;
  return gw__cpu_stream_capturing(stream, capture);
}

const gw__backend_ops gw__cpu_ops = {
    .name = "cpu",
    .id = GW_BACKEND_CPU,
    .abi = GW__BACKEND_ABI,
    .dev_count = cpu_device_count,
    .ctx_init = cpu_context_init,
    .ctx_fini = cpu_context_fini,
    .mem_query = cpu_query,
    .mem_alloc = cpu_alloc,
    .mem_free = cpu_free,
    .host_register = cpu_host_register,
    .host_unregister = cpu_host_unregister,
    .mem_device_address = cpu_device_address,
    .xfer_copy = cpu_copy,
    .xfer_copy_batch = cpu_copy_batch,
    .xfer_copy_batch_signalled = cpu_copy_batch_signalled,
    .xfer_fill = cpu_fill,
    .ctx_synchronize = cpu_synchronize,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_synchronize = cpu_stream_synchronize,
    .stream_borrow = cpu_stream_borrow,
    .stream_native = cpu_stream_native,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_query = cpu_event_query,
    .ipc_mem_export = cpu_ipc_export,
    .ipc_mem_open = cpu_ipc_open,
    .ipc_mem_close = cpu_ipc_close,
    .ipc_pool_import = cpu_ipc_pool_import,
    .ipc_pool_release = cpu_ipc_pool_release,
    .ipc_vmm_open = cpu_ipc_vmm_open,
    .ipc_vmm_close = cpu_ipc_vmm_close,
    .ipc_event_create = cpu_ipc_event_create,
    .ipc_event_open = cpu_ipc_event_open,
    .dev_uuid = cpu_device_uuid,
    .proc_fork_lock = cpu_fork_lock,
    .stream_owns_native = gw__cpu_stream_is_native,
    .stream_capturing = cpu_stream_capturing,
};
