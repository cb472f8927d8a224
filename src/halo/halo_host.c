#define _POSIX_C_SOURCE 200809L /* clock_gettime, in trace builds (src/core/trace.h) */

#include "halo_internal.h"
#include "../core/trace.h"

#include <sched.h>

/* Wait until the copy into `seg` (and everything before it on the plan's
 * stream) landed. Polls the segment's pending-work event rather than
 * synchronising the stream, so the side packed first goes to MPI while the
 * other is still being packed. A poll that never ends (an event whose query
 * keeps failing) falls back to the stream synchronisation, which reports the
 * error. */
static gw_status wait_landed(gw_halo *h, const gw_array *seg, int *spins) {
  if (!h->q) return GW_OK;
  while (gw_array_pending(seg)) {
    if (++*spins > (1 << 20)) return gw__halo_sync_stream(h, "waiting for a pack");
    int flag;
    (void)MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, h->comm, &flag, MPI_STATUS_IGNORE); /* progress */
    sched_yield(); /* the CPU backend's copies run on worker threads of this
                      process */
  }
  return GW_OK;
}

gw_status gw__halo_host_post_receives(gw_halo *h) {
  /* NCCL posts its receives with its sends (nccl_dim); IPC signalled on the device has
   * none (every remote message is one of its) */
  if (h->nccl || h->sig) return GW_OK;
  for (int d = 0; d < h->ndim; d++) {
    gw__halo_dim *hd = &h->dim[d];
    if (hd->link != LINK_MPI) continue;
    for (int m = 0; m < hd->nmsg; m++) {
      const gw__halo_msg *g = &hd->msg[m];
      /* the low halo is filled by the low neighbour's messages toward high, and
       * vice versa */
      /* (shared memory: the data is in our segment already; MPI says when it
       * landed) */
      int bytes = g->direct ? 0 : g->bytes;
      int rc = MPI_Irecv(halo_msg_at(h, g, g->off_recv), bytes, MPI_BYTE, hd->peer[g->side],
                         halo_tag(h, d, !g->side), h->comm, &hd->recv_req[m]);
      /* IPC into the ghost cells: this update's "ghosts free" token, which our pack into
       * the neighbour's cells waits for (its sender posts it at the dim's start) */
      if (rc == MPI_SUCCESS && h->ghost && g->ipc)
        rc = MPI_Irecv(&hd->free_byte[g->side], 1, MPI_BYTE, hd->peer[g->side],
                       halo_tag_free(h, d, !g->side), h->comm, &hd->free_req[m]);
      if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Irecv", d);
    }
  }
  return GW_OK;
}

/* An IPC message's token may go as soon as its pack and event record are queued
 * (the receiver waits for the event on the device: halo_ipc.c). */
static int landed(const gw_halo *h, const gw__halo_dim *hd, int m) {
  const gw__halo_msg *g = &hd->msg[m];
  return !h->q || g->ipc || !gw_array_pending(hd->seg[g->first + g->count - 1].send_seg);
}

static gw_status isend(gw_halo *h, int d, int m) {
  gw__halo_dim *hd = &h->dim[d];
  const gw__halo_msg *g = &hd->msg[m];
  int shm = g->direct;
  int rc = MPI_Isend(halo_msg_at(h, g, g->off_send), shm ? 0 : g->bytes, MPI_BYTE,
                     hd->peer[g->side], halo_tag(h, d, g->side), h->comm, &hd->send_req[m]);
  if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Isend", d);
  /* shared memory: the peer's "free again" for what we just wrote into its
   * buffer, which the next pack into that buffer waits for (IPC into the ghost cells:
   * posted with the next update's receives) */
  if (shm && !(h->ghost && g->ipc))
    rc = MPI_Irecv(&hd->free_byte[g->side], 1, MPI_BYTE, hd->peer[g->side],
                   halo_tag_free(h, d, !g->side), h->comm, &hd->free_req[m]);
  return rc == MPI_SUCCESS ? GW_OK : gw__halo_mpi(rc, "MPI_Irecv (a buffer token)", d);
}

/* Pack every message of dim d (in order), handing each to MPI as soon as its
 * last segment has landed: while later packs are still being queued, and then
 * by polling the segments' events (MPI_Iprobe on the way lets MPI progress the
 * messages already sent). */
gw_status gw__halo_host_send(gw_halo *h, int d) {
  gw__halo_dim *hd = &h->dim[d];
  int next = 0, spins = 0;
  gw_status st;
  /* IPC into the ghost cells: our ghost cells of this dim are free once the work before
   * here on our queue is done: each neighbour hears it first, as its pack waits for it */
  if (h->ghost && (st = gw__halo_ipc_ghosts_free(h, d)) != GW_OK) return st;
  for (int m = 0; m < hd->nmsg; m++) {
    const gw__halo_msg *g = &hd->msg[m];
    GW_TRACE_NOW(t0);
    int recorded = 0; /* the token's size: its sender recorded its freed event */
    if (hd->free_req && hd->free_req[m] != MPI_REQUEST_NULL) { /* shared memory: see isend */
      MPI_Status status;
      int rc = MPI_Wait(&hd->free_req[m], &status);
      if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Wait (the neighbour's buffer token)", d);
      MPI_Get_count(&status, MPI_BYTE, &recorded);
    }
    GW_TRACE_NOW(t1);
    if (g->ipc && (st = gw__halo_ipc_before_pack(h, d, m, recorded > 0)) != GW_OK) return st;
    GW_TRACE_NOW(t2);
    st = GW_OK;
    if (g->ipc)
      st = gw__halo_ipc_copy(h, d, m, GW__HALO_PACK);
    else
      for (int k = g->first; st == GW_OK && k < g->first + g->count; k++)
        st = gw__halo_queue_copy(h, hd->seg[k].send_seg, hd->seg[k].send_view,
                                 "gw_copy packing a face", d);
    if (st != GW_OK) return st;
    GW_TRACE_NOW(t3);
    if (g->ipc && (st = gw__halo_ipc_after_pack(h, d, m)) != GW_OK) return st;
    GW_TRACE_NOW(t4);
    GW_TRACE_SPAN("send: wait free token", t0, t1);
    GW_TRACE_SPAN("send: ipc wait freed", t1, t2);
    GW_TRACE_SPAN("send: queue pack", t2, t3);
    GW_TRACE_SPAN("send: ipc record landed", t3, t4);
    /* (into the ghost cells: this message's token too, at once: the neighbour's queue
     * waits for its event, and the next message's wait for its "ghosts free" token must
     * not hold it back) */
    int upto = m + (h->ghost && g->ipc);
    while (next < upto && landed(h, hd, next))
      if ((st = isend(h, d, next++)) != GW_OK) return st;
  }
  for (; next < hd->nmsg; next++) {
    const gw__halo_msg *g = &hd->msg[next];
    GW_TRACE_NOW(t0);
    st = g->ipc ? GW_OK : wait_landed(h, hd->seg[g->first + g->count - 1].send_seg, &spins);
    GW_TRACE_NOW(t1);
    if (st == GW_OK) st = isend(h, d, next);
    GW_TRACE_NOW(t2);
    GW_TRACE_SPAN("send: wait landed (host)", t0, t1);
    GW_TRACE_SPAN("send: isend", t1, t2);
    if (st != GW_OK) return st;
  }
  return GW_OK;
}

/* Unpack each message of dim d as it arrives (queued on the plan's stream),
 * then complete the sends (their buffers are packed again by the next update).
 */
gw_status gw__halo_host_complete(gw_halo *h, int d) {
  gw__halo_dim *hd = &h->dim[d];
  for (;;) {
    int idx = MPI_UNDEFINED;
    GW_TRACE_NOW(t0);
    int rc = MPI_Waitany(hd->nmsg, hd->recv_req, &idx, MPI_STATUS_IGNORE);
    GW_TRACE_NOW(t1);
    if (idx != MPI_UNDEFINED) GW_TRACE_SPAN("complete: waitany", t0, t1);
    if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Waitany (receives)", d);
    if (idx == MPI_UNDEFINED) break;
    const gw__halo_msg *g = &hd->msg[idx];
    gw_status st = GW_OK;
    if (g->ipc) {
      /* (into the ghost cells: the wait for the sender's pack is all; nothing to unpack) */
      st = gw__halo_ipc_before_unpack(h, d, idx);
      if (st == GW_OK && !h->ghost) st = gw__halo_ipc_copy(h, d, idx, GW__HALO_UNPACK);
      if (st == GW_OK && !h->ghost) st = gw__halo_ipc_after_unpack(h, d, idx);
    } else {
      for (int k = g->first; st == GW_OK && k < g->first + g->count; k++)
        st = gw__halo_queue_copy(h, hd->seg[k].recv_view, hd->seg[k].recv_seg,
                                 "gw_copy unpacking a face", d);
    }
    GW_TRACE_NOW(t2);
    GW_TRACE_SPAN("complete: queue unpack (+ipc, token)", t1, t2);
    if (st != GW_OK) return st;
    /* tokens once these unpacks are done: the window's, and IPC ones of a
     * blocking update (a stream-ordered one sent its token with its event) */
    h->shm_owed |= g->direct && (!g->ipc || h->blocking) && !h->ghost;
  }
  GW_TRACE_NOW(t3);
  int rc = MPI_Waitall(hd->nmsg, hd->send_req, MPI_STATUSES_IGNORE);
  GW_TRACE_NOW(t4);
  GW_TRACE_SPAN("complete: waitall sends", t3, t4);
  return rc == MPI_SUCCESS ? GW_OK : gw__halo_mpi(rc, "MPI_Waitall (sends)", d);
}
