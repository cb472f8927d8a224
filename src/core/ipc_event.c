/*
 * Interprocess events (private.h, gw__ipc_event_*): an event of one process that another
 * process opens, records or waits for on its own streams. The halo's IPC path signals with
 * them: a stream of the receiving rank waits on the device for the sender's pack, and the
 * sender's next pack waits on the device for the receiver's unpack, so neither host waits
 * for the other's device work (only zero-byte MPI messages order the record before the
 * wait, which the runtimes require: a wait takes the last record made before it).
 *
 * Handle layout (GW__IPC_EVENT_HANDLE_BYTES = 96, integers little-endian: codec.h):
 *     0   8  magic "GWIPCEV1"
 *     8   4  backend (gw_backend)
 *    12   4  device (int32)
 *    16   8  maker's pid (the runtimes refuse to open a process's own event)
 *    24  64  the runtime's handle (GW__IPC_RT_BYTES)
 *    88   8  zero
 */
#include "codec.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EVENT_MAGIC "GWIPCEV1"

struct gw__ipc_event {
  gw_context *ctx;
  int ctx_ref;
  void *event; /* the backend's */
};

#define OFF_BACKEND 8
#define OFF_DEVICE 12
#define OFF_PID 16
#define OFF_RT 24
#define OFF_ZERO (OFF_RT + GW__IPC_RT_BYTES)
_Static_assert(OFF_ZERO + 8 == GW__IPC_EVENT_HANDLE_BYTES, "the handle's fields tile its bytes");

/* A handle's contents. */
typedef struct {
  int32_t backend, device;
  uint64_t pid;
  unsigned char rt[GW__IPC_RT_BYTES];
} event_handle;

static void encode(const event_handle *eh, gw__ipc_event_handle *h) {
  unsigned char *b = h->bytes;
  memcpy(b, EVENT_MAGIC, 8);
  gw__put_le32(b + OFF_BACKEND, (uint32_t)eh->backend);
  gw__put_le32(b + OFF_DEVICE, (uint32_t)eh->device);
  gw__put_le64(b + OFF_PID, eh->pid);
  memcpy(b + OFF_RT, eh->rt, GW__IPC_RT_BYTES);
  gw__put_le64(b + OFF_ZERO, 0);
}

/* False where h is not an event handle of this format. */
static bool decode(const gw__ipc_event_handle *h, event_handle *eh) {
  const unsigned char *b = h->bytes;
  if (memcmp(b, EVENT_MAGIC, 8) != 0 || gw__get_le64(b + OFF_ZERO) != 0) return false;
  eh->backend = (int32_t)gw__get_le32(b + OFF_BACKEND);
  eh->device = (int32_t)gw__get_le32(b + OFF_DEVICE);
  eh->pid = gw__get_le64(b + OFF_PID);
  memcpy(eh->rt, b + OFF_RT, GW__IPC_RT_BYTES);
  return true;
}

int gw__ipc_event_supported(const gw_context *ctx) {
  return ctx && ctx->ops->ipc_event_create && ctx->ops->ipc_event_open;
}

static gw_status unsupported(const gw_context *ctx, const char *what) {
  return gw__fail(GW_ENOTSUP, "ctx: the %s backend has no interprocess events (%s)", ctx->ops->name,
                  what);
}

static gw_status wrap_event(gw_context *ctx, void *native, gw__ipc_event **out) {
  gw__ipc_event *e = malloc(sizeof *e);
  if (!e) {
    (void)ctx->ops->event_destroy(ctx->state, native);
    return gw__fail(GW_ENOMEM, "interprocess event: out of host memory");
  }
  e->ctx = ctx;
  e->ctx_ref = gw__context_retain(ctx);
  e->event = native;
  *out = e;
  return GW_OK;
}

gw_status gw__ipc_event_create(gw_context *ctx, gw__ipc_event **out, gw__ipc_event_handle *h) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (!h) return gw__fail(GW_EINVAL, "h: NULL");
  *out = NULL;
  if (!gw__ipc_event_supported(ctx)) return unsupported(ctx, "cannot make one");
  event_handle eh;
  memset(&eh, 0, sizeof eh);
  void *native = NULL;
  gw_status st = ctx->ops->ipc_event_create(ctx->state, &native, eh.rt);
  if (st != GW_OK) return st;
  eh.backend = (int32_t)ctx->backend;
  eh.device = ctx->device;
  eh.pid = (uint64_t)getpid();
  st = wrap_event(ctx, native, out);
  if (st == GW_OK) encode(&eh, h);
  return st;
}

gw_status gw__ipc_event_open(gw_context *ctx, const gw__ipc_event_handle *h, gw__ipc_event **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!h) return gw__fail(GW_EINVAL, "h: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  *out = NULL;
  event_handle eh;
  if (!decode(h, &eh))
    return gw__fail(GW_EINVAL, "h: not an interprocess event handle of this gpuwrap");
  /* Another device of the backend is fine: a stream waits for an event of any device
   * of its runtime (ranks on GPUs of their own signal each other so). */
  if (eh.backend != (int32_t)ctx->backend)
    return gw__fail(GW_EDEVICE,
                    "h: an event of the %s backend (device %d); ctx is of the %s backend (an "
                    "event is opened by a context of its own backend)",
                    gw_backend_name((gw_backend)eh.backend), (int)eh.device,
                    gw_backend_name(ctx->backend));
  if (eh.pid == (uint64_t)getpid())
    return gw__fail(GW_EINVAL,
                    "h: an event of this process (the runtimes refuse to open a process's own "
                    "interprocess event; use the event itself)");
  if (!gw__ipc_event_supported(ctx)) return unsupported(ctx, "cannot open one");
  void *native = NULL;
  gw_status st = ctx->ops->ipc_event_open(ctx->state, eh.rt, &native);
  return st == GW_OK ? wrap_event(ctx, native, out) : st;
}

/* s must be of the event's backend and device, and not capturing (the runtimes refuse
 * interprocess events in a graph). */
static gw_status usable(const gw__ipc_event *ev, gw_stream *s, const char *fn) {
  if (!ev) return gw__fail(GW_EINVAL, "%s: ev: NULL", fn);
  if (!s) return gw__fail(GW_EINVAL, "%s: s: NULL", fn);
  if (s->ctx->backend != ev->ctx->backend || s->ctx->device != ev->ctx->device)
    return gw__fail(GW_EDEVICE, "%s: s is a stream of %s device %d, the event of %s device %d", fn,
                    gw_backend_name(s->ctx->backend), s->ctx->device,
                    gw_backend_name(ev->ctx->backend), ev->ctx->device);
  uint64_t cap = 0;
  gw_status st = gw__capturing(s, &cap);
  if (st != GW_OK) return st;
  if (cap)
    return gw__fail(GW_ENOTSUP,
                    "%s: s is being captured into a graph, which cannot hold an interprocess "
                    "event",
                    fn);
  return GW_OK;
}

gw_status gw__ipc_event_record(gw__ipc_event *ev, gw_stream *s) {
  gw_status st = usable(ev, s, "gw__ipc_event_record");
  return st == GW_OK ? s->ctx->ops->event_record(s->ctx->state, ev->event, s->handle) : st;
}

gw_status gw__ipc_event_wait(gw_stream *s, gw__ipc_event *ev) {
  gw_status st = usable(ev, s, "gw__ipc_event_wait");
  return st == GW_OK ? s->ctx->ops->stream_wait_event(s->ctx->state, s->handle, ev->event) : st;
}

gw_status gw__ipc_event_query(gw__ipc_event *ev) {
  if (!ev) return gw__fail(GW_EINVAL, "gw__ipc_event_query: ev: NULL");
  return ev->ctx->ops->event_query(ev->ctx->state, ev->event);
}

void gw__ipc_event_destroy(gw__ipc_event *ev) {
  if (!ev) return;
  (void)ev->ctx->ops->event_destroy(ev->ctx->state, ev->event);
  gw__context_release(ev->ctx, ev->ctx_ref);
  free(ev);
}
