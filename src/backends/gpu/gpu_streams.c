/*
 * GPU backend: streams (created, or borrowed from the caller: the legacy and per-thread
 * special handles included), the device-wide synchronize, events and the capture query.
 * The copies and fills that run on these streams are in gpu_copy.c; interprocess events in
 * gpu_ipc.c.
 */
#define _DEFAULT_SOURCE /* mincore, for checking borrowed stream handles */

#include "gpu_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- synchronisation and streams ---------------------------------------------------------- */

gw_status gwg_synchronize(void *state) {
  const gwg_ctx *c = state;
  gwg_prev prev;
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) return s;
  gwv_err e = gwv_DeviceSynchronize();
  gwg_leave(prev);
  if (e != GWV_SUCCESS)
    return gwg_fail(e, GWV_CALL("DeviceSynchronize") " on device %d", c->device);
  return GW_OK;
}

gw_status gwg_stream_create(void *state, void **out) {
  const gwg_ctx *c = state;
  gwg_stream *st = malloc(sizeof *st);
  if (!st) return gwg_host->fail(GW_ENOMEM, "stream: out of host memory");
  gwg_prev prev;
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) {
    free(st);
    return s;
  }
  /* Default (blocking) flags, the documented contract: ordered with the legacy stream like
   * any cudaStreamCreate stream, so mixing with the caller's default-stream work (and with
   * gpuwrap's synchronous calls) stays correct without extra waits. */
  gwv_err e = gwv_StreamCreateWithFlags(&st->s, GWV_STREAM_FLAGS);
  gwg_leave(prev);
  if (e != GWV_SUCCESS) {
    free(st);
    return gwg_fail(e, GWV_CALL("StreamCreateWithFlags") " on device %d", c->device);
  }
  st->device = c->device;
  st->borrowed = 0;
  st->native = (void *)st->s;
  *out = st;
  return GW_OK;
}

/* Whether any memory is mapped at p. The runtime looks a stream handle up by reading
 * the object it points to; a handle into unmapped memory (a small integer, a pointer
 * into memory since unmapped) would crash it, so it is refused before the runtime sees
 * it. Only ENOMEM means unmapped; any other answer lets the runtime decide. */
static int handle_mapped(const void *p) {
#ifdef __linux__
  long pg = sysconf(_SC_PAGESIZE);
  unsigned char v;
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)((pg > 0 ? pg : 4096) - 1);
  return !(mincore((void *)a, 1, &v) != 0 && errno == ENOMEM);
#else
  (void)p;
  return 1;
#endif
}

/*
 * The caller's stream. Special handles (NULL, and on CUDA cudaStreamLegacy and
 * cudaStreamPerThread) mean "that default stream of the current device": they are taken
 * as streams of the context's device, which every use makes current. Any other handle is
 * asked for its device (gwv_stream_device): the runtime reports handles it knows are not
 * streams (GW_EINVAL, with its error), and a stream of another device is GW_EDEVICE. A
 * handle into unmapped memory is refused before the runtime reads it. A pointer to live
 * memory that never was a stream of this runtime (another backend's handle, a freed
 * stream) cannot be told apart by CUDA, whose lookup dereferences it (vendor_cuda.h):
 * the runtime's answer is all there is, and a crash there is the runtime's.
 */
gw_status gwg_stream_borrow(void *state, void *native, void **out) {
  const gwg_ctx *c = state;
  gwv_stream vs = native ? (gwv_stream)native : GWV_BORROW_NULL;
  if (!gwv_stream_is_special(native)) {
    if (!handle_mapped(native))
      return gwg_host->fail(GW_EINVAL, "stream %p is not a %s stream (no memory is mapped there)",
                            native, GWV_NAME);
#if GWV_CAN_CHECK_STREAM
    gwg_prev prev;
    int dev = -1;
    gw_status s = gwg_enter(c->device, &prev);
    if (s != GW_OK) return s;
    /* A stream being captured cannot be asked its device: the runtime refuses
     * (cudaErrorStreamCaptureUnsupported, measured on the H200 with torch.cuda.graph) and
     * the caller's capture is lost. Whether it is capturing can be asked; then the
     * context's device is taken on trust (work queued on a stream of another device would
     * fail in the capture, never silently). */
    uint64_t capture = 0;
    gwv_err e = gwv_stream_capturing(vs, &capture);
    if (e == GWV_SUCCESS && capture != 0)
      dev = c->device;
    else
      e = gwv_stream_device(vs, &dev);
    gwg_leave(prev);
    if (e != GWV_SUCCESS) {
      if (GWV_IS_INVALID_HANDLE(e))
        return gwg_fail_as(GW_EINVAL, e, "stream %p is not a %s stream (%s)", native, GWV_NAME,
                           GWV_STREAM_DEVICE_CALL);
      return gwg_fail(e, "%s(%p)", GWV_STREAM_DEVICE_CALL, native);
    }
    if (dev != c->device)
      return gwg_host->fail(GW_EDEVICE,
                            "stream %p belongs to %s device %d, the context to device %d", native,
                            GWV_NAME, dev, c->device);
#endif
  }
  gwg_stream *st = malloc(sizeof *st);
  if (!st) return gwg_host->fail(GW_ENOMEM, "stream: out of host memory");
  st->s = vs;
  st->device = c->device;
  st->borrowed = 1;
  st->native = native;
  *out = st;
  return GW_OK;
}

void *gwg_stream_native(void *state, void *stream) {
  (void)state;
  const gwg_stream *st = stream;
  return st ? st->native : NULL;
}

gw_status gwg_stream_destroy(void *state, void *stream) {
  (void)state;
  gwg_stream *st = stream;
  if (!st) return GW_OK;
  if (st->borrowed) { /* the caller's stream: neither waited for nor destroyed */
    free(st);
    return GW_OK;
  }
  gwg_prev prev;
  gw_status s = gwg_enter(st->device, &prev);
  if (s != GW_OK) return s; /* keep the stream: it is still usable and the caller learns why */
  gwv_err e = gwv_StreamSynchronize(st->s);
  gwv_err e2 = gwv_StreamDestroy(st->s);
  gwg_leave(prev);
  free(st);
  if (e != GWV_SUCCESS)
    return gwg_fail(e, GWV_CALL("StreamSynchronize") " before destroying a stream");
  if (e2 != GWV_SUCCESS) return gwg_fail(e2, GWV_CALL("StreamDestroy"));
  return GW_OK;
}

gw_status gwg_stream_synchronize(void *state, void *stream) {
  const gwg_ctx *c = state;
  const gwg_stream *st = stream;
  /* The stream's device is made current: the special handles (legacy, per-thread) name
   * the current device's default stream. */
  int dev = st ? st->device : c->device;
  gwg_prev prev;
  gw_status s = gwg_enter(dev, &prev);
  if (s != GW_OK) return s;
  gwv_err e = gwv_StreamSynchronize(st ? st->s : GWV_SYNC_STREAM);
  gwg_leave(prev);
  if (e != GWV_SUCCESS) return gwg_fail(e, GWV_CALL("StreamSynchronize"));
  return GW_OK;
}

/* ---- events ---------------------------------------------------------------------------------- */

/* The core's event is the vendor event itself (a pointer on both vendors). Timing is off:
 * these events only order work, and timing-free events are cheaper to record and wait
 * for. */
gw_status gwg_event_create(void *state, void **event) {
  const gwg_ctx *c = state;
  gwg_prev prev;
  gw_status s = gwg_enter(c->device, &prev);
  if (s != GW_OK) return s;
  gwv_event ev = NULL;
  gwv_err e = gwv_EventCreateWithFlags(&ev, GWV_EVENT_FLAGS);
  gwg_leave(prev);
  if (e != GWV_SUCCESS)
    return gwg_fail(e, GWV_CALL("EventCreateWithFlags") " on device %d", c->device);
  *event = (void *)ev;
  return GW_OK;
}

gw_status gwg_event_destroy(void *state, void *event) {
  (void)state;
  if (!event) return GW_OK;
  /* Needs no current device; destroying an event whose work is pending is allowed (its
   * resources go when the work completes). Relaxed: see gwg_enter. */
  gwv_capmode m = gwv_capture_relax();
  gwv_err e = gwv_EventDestroy((gwv_event)event);
  gwv_capture_restore(m);
  if (e != GWV_SUCCESS) return gwg_fail(e, GWV_CALL("EventDestroy"));
  return GW_OK;
}

gw_status gwg_event_record(void *state, void *event, void *stream) {
  (void)state;
  const gwg_stream *st = stream;
  gwg_prev prev;
  /* The stream's device: the event was made on it (the core records only events of the
   * stream's context), and special handles resolve against the current device. */
  gw_status s = gwg_enter(st->device, &prev);
  if (s != GW_OK) return s;
  gwv_err e = gwv_EventRecord((gwv_event)event, st->s);
  gwg_leave(prev);
  if (e != GWV_SUCCESS)
    return gwg_fail(e, GWV_CALL("EventRecord") " on a stream of device %d", st->device);
  return GW_OK;
}

gw_status gwg_stream_wait_event(void *state, void *stream, void *event) {
  (void)state;
  const gwg_stream *st = stream;
  gwg_prev prev;
  gw_status s = gwg_enter(st->device, &prev);
  if (s != GW_OK) return s;
  /* A device-side wait: the host does not block. The event may come from another
   * context (or device) of this backend; the runtime allows that. */
  gwv_err e = gwv_StreamWaitEvent(st->s, (gwv_event)event, 0);
  gwg_leave(prev);
  if (e != GWV_SUCCESS)
    return gwg_fail(e, GWV_CALL("StreamWaitEvent") " on a stream of device %d", st->device);
  return GW_OK;
}

/* One runtime query. A special handle (legacy, per-thread) names the current device's
 * default stream: that device is made current for it; any other handle is asked as it is. */
gw_status gwg_stream_capturing(void *state, void *stream, uint64_t *capture) {
  (void)state;
  const gwg_stream *st = stream;
  gwg_prev prev;
  int special = gwv_stream_is_special(st->native);
  if (special) {
    gw_status s = gwg_enter(st->device, &prev);
    if (s != GW_OK) return s;
  }
  gwv_err e = gwv_stream_capturing(st->s, capture);
  if (special) gwg_leave(prev);
  if (e == GWV_SUCCESS) return GW_OK;
  if (GWV_IS_CAPTURE_IMPLICIT(e))
    return gwg_fail_as(GW_ENOTSUP, e,
                       "stream: the legacy default stream of device %d cannot take work while a "
                       "blocking stream of the device is being captured (it would invalidate that "
                       "capture; capture on a non-blocking stream) (%s)",
                       st->device, GWV_CAPTURING_CALL);
  return gwg_fail(e, "%s on a stream of device %d", GWV_CAPTURING_CALL, st->device);
}

gw_status gwg_event_query(void *state, void *event) {
  (void)state;
  /* Needs no current device. Polled by gw_array_pending/gw_array_wait, so it stays one
   * vendor call, in the relaxed capture mode (a query is "potentially unsafe": in another
   * thread's global-mode capture it fails and invalidates that capture). */
  gwv_capmode m = gwv_capture_relax();
  gwv_err e = gwv_EventQuery((gwv_event)event);
  gwv_capture_restore(m);
  if (e == GWV_SUCCESS) return GW_OK;
  if (GWV_IS_NOT_READY(e)) {
    /* Pending is an answer, not a failure: nothing goes to gw_last_error(), and the
     * runtime's last-error slot is cleared so "not ready" never surfaces in a later
     * GetLastError check. */
    (void)gwv_GetLastError();
    return GW_EBUSY;
  }
  if (GWV_IS_CAPTURED_EVENT(e)) /* backend.h: the core re-tags the slot (stream.c, busy) */
    return gwg_fail_as(GW_ENOTSUP, e, GWV_CALL("EventQuery") " of an event recorded in a capture");
  return gwg_fail(e, GWV_CALL("EventQuery"));
}
