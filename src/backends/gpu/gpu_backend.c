/*
 * GPU backend (CUDA and HIP from this one source, through vendor_cuda.h / vendor_hip.h):
 * plugin entry, contexts, pointer query, allocation and host registration.
 * Transfers and fills are in gpu_copy.c, streams and events in gpu_streams.c, memory of
 * other processes in gpu_ipc.c; what every one of them needs (error reports, the current
 * device around an operation) in gpu_call.c, which calls none of them.
 */
#include "gpu_internal.h"

#include <limits.h>
#include <stdlib.h>

/* ---- devices and contexts -------------------------------------------------------------- */

static gw_status device_count(int *count) {
  int n = 0;
  gwv_err e = gwv_GetDeviceCount(&n);
  if (e == GWV_SUCCESS) {
    *count = n;
    return GW_OK;
  }
  if (GWV_IS_NO_DEVICE(e)) { /* a working driver that sees no device */
    (void)gwv_GetLastError();
    *count = 0;
    return GW_OK;
  }
  /* Driver missing, too old or broken: the backend is unusable. */
  return gwg_fail_as(GW_ENODEV, e, GWV_CALL("GetDeviceCount"));
}

static gw_status context_init(int device, void **state, gw__caps *caps) {
  int n = 0;
  gwg_prev prev;
  gw_status s = device_count(&n);
  if (s != GW_OK) return s;
  if (device < 0 || device >= n)
    return gwg_host->fail(GW_ENODEV, "%s device %d does not exist (%d device%s)", GWV_NAME, device,
                          n, n == 1 ? "" : "s");
  gwg_ctx *c = calloc(1, sizeof *c);
  if (!c) return gwg_host->fail(GW_ENOMEM, "%s context: out of host memory", GWV_NAME);
  /* Create the device's (primary) context now: later queries must not be the first call
   * that initialises the runtime, and a broken device should fail here. */
  if ((s = gwg_enter(device, &prev)) != GW_OK) {
    free(c);
    return s;
  }
  gwv_err e = gwv_InitContext();
  gwg_leave(prev);
  if (e != GWV_SUCCESS) {
    free(c);
    return gwg_fail(e, "initialising %s device %d", GWV_NAME, device);
  }
  c->device = device;
  gwg_token_note(device);
  c->caps.pageable_access = gwv_device_attr(GWV_ATTR_PAGEABLE_ACCESS, device) != 0;
  c->caps.host_ptr_for_registered = gwv_device_attr(GWV_ATTR_HOST_PTR_FOR_REGISTERED, device) != 0;
  c->caps.tells_registered = 0; /* pinned allocations and registrations look the same */
  c->caps.kernels = GW_HAVE_KERNELS;
  c->caps.gpu_aware_hint = 0;
  c->caps.host_register_readonly = gwv_host_register_readonly_supported(device);
  gwv_device_uuid(device, c->caps.device_uuid);
  c->caps.concurrent_processes = gwv_concurrent_processes(device);
  c->ccaps = (gwc_caps){.pageable_access = c->caps.pageable_access,
                        .host_ptr_for_registered = c->caps.host_ptr_for_registered};
  int sms = gwv_device_attr(GWV_ATTR_SM_COUNT, device);
  c->max_blocks = (sms > 0 ? sms : 32) * 8;
  int pitch = gwv_device_attr(GWV_ATTR_MAX_PITCH, device);
  c->max_pitch = pitch > 0 ? (size_t)pitch : (size_t)INT_MAX;
  *caps = c->caps;
  *state = c;
  return GW_OK;
}

static void context_fini(void *state) {
  gwg_staging_fini(state);
  free(state);
}

/* ---- pointer query ----------------------------------------------------------------------- */

static gw_status device_address(void *state, void *host, void **dev);

/* The query's failure message, out of the hot path. */
static __attribute__((cold, noinline)) gw_status query_failed(const void *ptr, int status,
                                                              gw_status s) {
  return gwg_host->fail(s, "%s(%p): %s: %s", GWV_QUERY_CALL, ptr, gwv_query_error_name(status),
                        gwv_query_error_text(status));
}

/*
 * A device that cannot use the host address of registered memory: a pinned pointer's
 * device address is looked up (cudaHostGetDevicePointer of the range's base, plus the
 * offset of an interior pointer). Classified into a local first, so that *out stays as it
 * was when the look-up fails (backend.h: a query writes *out only when it succeeds).
 */
/*
 * Pool and VMM memory (gwc_needs_range): classified as any device memory, then its extent
 * found with more calls (gwc_mapped_range: the pool allocation, or the contiguous mapped
 * range of VMM chunks), out of the hot path.
 */
static __attribute__((noinline)) gw_status query_mapped(const void *ptr, const gwc_attrs *a,
                                                        const gwc_caps *caps, gw_ptrinfo *out) {
  gw_ptrinfo r;
  gw_status s = gwc_classify_inline(ptr, a, caps, &r);
  if (s != GW_OK) return query_failed(ptr, a->status, s);
  uintptr_t b = 0;
  size_t n = 0;
  if (gwc_mapped_range(ptr, a, gwv_chunk, NULL, &b, &n)) {
    r.base = (void *)b;
    r.extent = n;
  }
  *out = r;
  return GW_OK;
}

static __attribute__((noinline)) gw_status query_lookup(void *state, const void *ptr,
                                                        gw_ptrinfo *out) {
  gwg_ctx *c = state;
  gwc_attrs a;
  gwv_query(ptr, &a);
  if (gwc_needs_range(&a)) return query_mapped(ptr, &a, &c->ccaps, out);
  gw_ptrinfo r;
  gw_status s = gwc_classify_inline(ptr, &a, &c->ccaps, &r);
  if (s != GW_OK) return query_failed(ptr, a.status, s);
  if (r.kind == GW_MEM_PINNED && r.device_ptr == NULL) {
    char *hb = r.base ? (char *)r.base : (char *)(uintptr_t)ptr;
    void *db = NULL;
    if ((s = device_address(state, hb, &db)) != GW_OK) return s;
    r.device_ptr = (char *)db + ((const char *)ptr - hb);
  }
  *out = r;
  return GW_OK;
}

/*
 * Every gw_pointer_query and every wrap comes through here, and the target is <= 1.1x the
 * bare cuPointerGetAttributes call: so one runtime call, then the inline classification
 * writes each field of the caller's struct once (no local gw_ptrinfo, no copy, no call).
 * Where the device uses host addresses of registered memory (caps.host_ptr_for_registered:
 * the H200, any x86-64 Linux machine with UVA) no answer needs a second runtime call, so
 * *out can be written in place: gwc_classify writes nothing when it fails.
 */
/* No capture-mode exchange here (gwg_enter's): the query is one driver attribute read,
 * which no capture mode prohibits, and its target is one bare call's time. */
static gw_status query(void *state, const void *ptr, gw_ptrinfo *out) {
  const gwg_ctx *c = state;
  if (__builtin_expect(!c->ccaps.host_ptr_for_registered, 0)) return query_lookup(state, ptr, out);
  gwc_attrs a; /* only its fields matter: the classification reads each once */
  gwv_query(ptr, &a);
  if (__builtin_expect(gwc_needs_range(&a), 0)) return query_mapped(ptr, &a, &c->ccaps, out);
  gw_status s = gwc_classify_inline(ptr, &a, &c->ccaps, out);
  if (__builtin_expect(s != GW_OK, 0)) return query_failed(ptr, a.status, s);
  return GW_OK;
}

/* ---- allocation ---------------------------------------------------------------------------- */

/* Not gw_memkind_name(): the plugin calls nothing in the core but the host API, so it
 * also loads into executables linked with the static core. */
static const char *kind_name(gw_memkind k) {
  switch (k) {
  case GW_MEM_HOST: return "host";
  case GW_MEM_PINNED: return "pinned";
  case GW_MEM_DEVICE: return "device";
  case GW_MEM_MANAGED: return "managed";
  default: return "unknown";
  }
}

static gw_status alloc(void *state, gw_memkind kind, size_t bytes, void **out) {
  gwg_ctx *c = state;
  void *p = NULL;
  gwv_err e;
  const char *call;
  gwg_prev prev;
  if (kind != GW_MEM_DEVICE && kind != GW_MEM_PINNED && kind != GW_MEM_MANAGED)
    return gwg_host->fail(GW_ENOTSUP, "%s backend cannot allocate %s memory", GWV_NAME,
                          kind_name(kind));
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) return s;
  switch (kind) {
  case GW_MEM_DEVICE:
    call = GWV_CALL("Malloc");
    e = gwv_Malloc(&p, bytes);
    break;
  case GW_MEM_PINNED:
    /* Mapped: the device address exists; Portable: every device can use it. */
    call = GWV_CALL("HostAlloc");
    e = gwv_HostAlloc(&p, bytes, GWV_HOST_ALLOC_FLAGS);
    break;
  default:
    call = GWV_CALL("MallocManaged");
    e = gwv_MallocManaged(&p, bytes, GWV_ATTACH_GLOBAL);
    break;
  }
  gwg_leave(prev);
  if (e != GWV_SUCCESS) return gwg_fail(e, "%s(%zu bytes) on device %d", call, bytes, c->device);
  *out = p;
  return GW_OK;
}

static gw_status free_mem(void *state, gw_memkind kind, int device, void *ptr) {
  gwg_ctx *c = state;
  gwg_prev prev;
  int dev = device >= 0 ? device : c->device;
  gwv_err e;
  const char *call;
  if (kind != GW_MEM_DEVICE && kind != GW_MEM_PINNED && kind != GW_MEM_MANAGED)
    return gwg_host->fail(GW_ENOTSUP, "%s backend cannot free %s memory", GWV_NAME,
                          kind_name(kind));
  /* Free on the memory's own device: freeing device 1's memory from device 0 works on
   * CUDA, but not on every runtime, and the implied synchronisation belongs there. */
  gw_status s = gwg_enter(dev, &prev);
  if (s != GW_OK) return s;
  if (kind == GW_MEM_PINNED) {
    /* On registered (not allocated) memory this fails with "invalid value" and leaves the
     * registration intact (measured): harmless, and reported. */
    call = GWV_CALL("FreeHost");
    e = gwv_FreeHost(ptr);
  } else {
    call = GWV_CALL("Free"); /* also right for stream-ordered (MallocAsync) memory */
    e = gwv_Free(ptr);
  }
  gwg_leave(prev);
  if (e != GWV_SUCCESS) return gwg_fail(e, "%s(%p) on device %d", call, ptr, dev);
  return GW_OK;
}

/* ---- host registration -------------------------------------------------------------------- */

static gw_status host_register(void *state, void *base, size_t bytes, unsigned flags) {
  gwg_ctx *c = state;
  gwg_prev prev;
  unsigned vflags = GWV_HOST_REGISTER_FLAGS;
  if (flags & ~GW__REG_READONLY)
    return gwg_host->fail(GW_EINVAL, "%s host_register: unknown flags %#x", GWV_NAME, flags);
  if (flags & GW__REG_READONLY) {
    /* Refused here rather than passed on: a runtime without the flag may read its bit as
     * something else (ROCm 5: coarse-grained registration). */
    if (!c->caps.host_register_readonly)
      return gwg_host->fail(GW_ENOTSUP,
                            "%s device %d cannot register host memory read-only (%s = 0)", GWV_NAME,
                            c->device, GWV_READONLY_ATTR_NAME);
    vflags |= GWV_HOST_REGISTER_READONLY;
  }
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) return s;
  gwv_err e = gwv_HostRegister(base, bytes, vflags);
  gwg_leave(prev);
  if (e == GWV_SUCCESS) return GW_OK;
  /* "Invalid value" is about the memory itself (measured: pages the process cannot write,
   * registered without the read-only flag): GW_EINVAL, as the CPU model says, so that the
   * core can tell it from a runtime failure and look at the pages. Already registered
   * (712) -> GW_EALREADY through gwg_fail. */
  if (GWV_IS_INVALID_VALUE(e))
    return gwg_fail_as(GW_EINVAL, e, GWV_CALL("HostRegister(%p, %zu, %#x)"), base, bytes, vflags);
  return gwg_fail(e, GWV_CALL("HostRegister(%p, %zu, %#x)"), base, bytes, vflags);
}

static gw_status host_unregister(void *state, void *base) {
  gwg_ctx *c = state;
  gwg_prev prev;
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) return s;
  gwv_err e = gwv_HostUnregister(base);
  gwg_leave(prev);
  if (e == GWV_SUCCESS) return GW_OK;
  /* An interior pointer gives "invalid value": for the contract it is "not registered
   * here" (unregistering needs the exact base). */
  if (GWV_IS_NOT_REGISTERED(e) || GWV_IS_INVALID_VALUE(e))
    return gwg_fail_as(GW_ENOTREG, e, GWV_CALL("HostUnregister(%p)"), base);
  return gwg_fail(e, GWV_CALL("HostUnregister(%p)"), base);
}

static gw_status device_address(void *state, void *host, void **dev) {
  gwg_ctx *c = state;
  gwg_prev prev;
  void *d = NULL;
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) return s;
  gwv_err e = gwv_HostGetDevicePointer(&d, host, 0);
  gwg_leave(prev);
  if (e != GWV_SUCCESS) return gwg_fail(e, GWV_CALL("HostGetDevicePointer(%p)"), host);
  *dev = d;
  return GW_OK;
}

/* ---- the table and the plugin entry ------------------------------------------------------ */

/* Streams and events are in gpu_streams.c, the transfers that use them in gpu_copy.c. */
static const gw__backend_ops gwg_ops = {
    .name = GWV_NAME,
    .id = GWV_BACKEND,
    .abi = GW__BACKEND_ABI,
    .dev_count = device_count,
    .ctx_init = context_init,
    .ctx_fini = context_fini,
    .mem_query = query,
    .mem_alloc = alloc,
    .mem_free = free_mem,
    .host_register = host_register,
    .host_unregister = host_unregister,
    .mem_device_address = device_address,
    .xfer_copy = gwg_copy,
    .xfer_copy_batch = gwg_copy_batch,
    .xfer_copy_batch_signalled = gwg_copy_batch_signalled,
    .xfer_fill = gwg_fill,
    .ctx_synchronize = gwg_synchronize,
    .stream_create = gwg_stream_create,
    .stream_destroy = gwg_stream_destroy,
    .stream_synchronize = gwg_stream_synchronize,
    .stream_borrow = gwg_stream_borrow,
    .stream_native = gwg_stream_native,
    .event_create = gwg_event_create,
    .event_destroy = gwg_event_destroy,
    .event_record = gwg_event_record,
    .stream_wait_event = gwg_stream_wait_event,
    .event_query = gwg_event_query,
    .ipc_mem_export = gwg_ipc_export,
    .ipc_mem_open = gwg_ipc_open,
    .ipc_mem_close = gwg_ipc_close,
    .ipc_pool_import = gwg_ipc_pool_import,
    .ipc_pool_release = gwg_ipc_pool_release,
    .ipc_vmm_open = gwg_ipc_vmm_open,
    .ipc_vmm_close = gwg_ipc_vmm_close,
    .ipc_event_create = gwg_ipc_event_create,
    .ipc_event_open = gwg_ipc_event_open,
    .stream_capturing = gwg_stream_capturing,
    .dev_uuid = gwg_device_uuid,
};

/* The only exported symbol of the plugin (plugin.map hides the rest, the static vendor
 * runtime included, so it cannot clash with the application's own runtime). */
__attribute__((visibility("default"))) const gw__backend_ops *
gw__plugin_entry(const gw__host_api *host, int abi) {
  if (!host || abi != GW__BACKEND_ABI || host->abi != GW__BACKEND_ABI || !host->fail ||
      host->nsettings != GW__SETTING_COUNT || !host->setting_int || !host->setting_text)
    return NULL; /* a core of another ABI: its fail() may not be what we think it is */
  gwg_host = host;
  return &gwg_ops;
}
