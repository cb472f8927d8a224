/*
 * Memory from another process on CUDA and HIP (one source, through the shim): the
 * runtime's legacy IPC. The core (src/core/ipc.c) hands over allocation bases only, opens
 * each allocation once per process and never opens a handle in the process that made it
 * (the runtimes refuse both).
 *
 * Legacy IPC cannot export stream-ordered pool memory or VMM memory; they fail with
 * GW_ENOTSUP naming why: on CUDA found before the call from the pointer's attributes
 * (IS_LEGACY_CUDA_IPC_CAPABLE, MEMPOOL_HANDLE), on HIP from the runtime's refusal
 * (invalid value), each message saying how to allocate the memory shareable (a POSIX
 * file descriptor handle type at creation). Their shareable handles (a file descriptor
 * that travels by pidfd_getfd or over a Unix socket) are the next step (issue 45).
 */
#include "gpu_internal.h"

#include <string.h>

_Static_assert(sizeof(gwv_ipc_handle) <= GW__IPC_RT_BYTES,
               "the runtime's IPC handle must fit gw_ipc_handle's 64 bytes for it");

gw_status gwg_ipc_export(void *state, void *base, size_t extent, int device,
                         unsigned char rt[GW__IPC_RT_BYTES], uint64_t *alloc_id) {
  (void)state;
  (void)extent;
  const char *why = gwv_ipc_refusal(base);
  if (why) return gwg_host->fail(GW_ENOTSUP, "a: %p: %s", base, why);
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  gwv_ipc_handle h;
  memset(&h, 0, sizeof h);
  gwv_err e = gwv_IpcGetMemHandle(&h, base);
  gwg_leave(prev);
  if (e != GWV_SUCCESS) {
    if (GWV_IS_INVALID_VALUE(e))
      return gwg_fail_as(GW_ENOTSUP, e,
                         GWV_CALL("IpcGetMemHandle(%p)") " refused the allocation: legacy IPC "
                                                         "exports plain device allocations only "
                                                         "(not stream-ordered pool or VMM "
                                                         "memory, which gpuwrap does not "
                                                         "share yet (planned); allocate with "
                                                         "a POSIX file descriptor handle type "
                                                         "(a pool created with it, or "
                                                         "MemCreate's requestedHandleTypes) so "
                                                         "that they can be shared)",
                         base);
    return gwg_fail(e, GWV_CALL("IpcGetMemHandle(%p)"), base);
  }
  memset(rt, 0, GW__IPC_RT_BYTES);
  memcpy(rt, &h, sizeof h);
  *alloc_id = gwv_buffer_id(base);
  return GW_OK;
}

gw_status gwg_ipc_open(void *state, const unsigned char rt[GW__IPC_RT_BYTES], int device,
                       size_t extent, void **base) {
  (void)state;
  (void)extent;
  gwv_ipc_handle h;
  memcpy(&h, rt, sizeof h);
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  void *p = NULL;
  gwv_err e = gwv_IpcOpenMemHandle(&p, h, GWV_IPC_OPEN_FLAGS);
  gwg_leave(prev);
  if (e != GWV_SUCCESS)
    return gwg_fail(e,
                    GWV_CALL("IpcOpenMemHandle") " on device %d (is the exporting process "
                                                 "alive, and its memory not freed?)",
                    device);
  *base = p;
  return GW_OK;
}

gw_status gwg_ipc_close(void *state, int device, void *base) {
  (void)state;
  gwg_prev prev;
  gw_status s = gwg_enter(device, &prev);
  if (s != GW_OK) return s;
  gwv_err e = gwv_IpcCloseMemHandle(base);
  gwg_leave(prev);
  return e == GWV_SUCCESS ? GW_OK : gwg_fail(e, GWV_CALL("IpcCloseMemHandle(%p)"), base);
}

/* The device's UUID without a context on it (cuDeviceGetUuid / hipDeviceGetUuid need
 * none): gw_ipc_open maps a handle's device to this process's ordinal with it. */
gw_status gwg_device_uuid(int device, unsigned char uuid[16]) {
  gwv_device_uuid(device, uuid);
  return GW_OK;
}

/* Interprocess events: made and opened on the context's device. The handle is the
 * runtime's (64 bytes). */
gw_status gwg_ipc_event_create(void *state, void **event, unsigned char rt[GW__IPC_RT_BYTES]) {
  const gwg_ctx *c = state;
  gwg_prev prev;
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) return s;
  gwv_event ev = NULL;
  gwv_ipc_event_handle h;
  memset(&h, 0, sizeof h);
  gwv_err e = gwv_EventCreateWithFlags(&ev, GWV_EVENT_IPC_FLAGS);
  if (e != GWV_SUCCESS) {
    gwg_leave(prev);
    return gwg_fail(e, GWV_CALL("EventCreateWithFlags(Interprocess)") " on device %d", c->device);
  }
  e = gwv_IpcGetEventHandle(&h, ev);
  if (e != GWV_SUCCESS) {
    (void)gwv_EventDestroy(ev);
    gwg_leave(prev);
    return gwg_fail(e, GWV_CALL("IpcGetEventHandle") " on device %d", c->device);
  }
  gwg_leave(prev);
  _Static_assert(sizeof h <= GW__IPC_RT_BYTES, "the runtime's event handle fits");
  memset(rt, 0, GW__IPC_RT_BYTES);
  memcpy(rt, &h, sizeof h);
  *event = (void *)ev;
  return GW_OK;
}

gw_status gwg_ipc_event_open(void *state, const unsigned char rt[GW__IPC_RT_BYTES], void **event) {
  const gwg_ctx *c = state;
  gwv_ipc_event_handle h;
  memcpy(&h, rt, sizeof h);
  gwg_prev prev;
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) return s;
  gwv_event ev = NULL;
  gwv_err e = gwv_IpcOpenEventHandle(&ev, h);
  gwg_leave(prev);
  if (e != GWV_SUCCESS)
    return gwg_fail(e,
                    GWV_CALL("IpcOpenEventHandle") " on device %d (is the process that made "
                                                   "the event alive?)",
                    c->device);
  *event = (void *)ev;
  return GW_OK;
}
