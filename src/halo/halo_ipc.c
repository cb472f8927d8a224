/*
 * The IPC path between ranks of one node (GW_HALO_PATH_IPC): each rank's
 * receive buffers for its on-node neighbours are one device allocation (the IPC
 * block), exported once; each neighbour opens it once (gw_ipc_open, through
 * gpuwrap's import table) and its packs land straight in it. The messages are
 * then "direct", like the shared-memory window's: MPI carries a 0-byte "landed"
 * token after each pack and a 0-byte "free again" token after each unpack
 * (halo_host.c), so a buffer is never written before its owner has read it.
 *
 * Unlike the window's, the tokens do not wait for the device work they announce:
 * each side of each message has two interprocess events (gw__ipc_event_*). The
 * sender records "landed" on its stream after the pack and sends the token at
 * once; the receiver, on the token, makes its stream wait for that event (on the
 * device) before the unpack, records "freed" after it and sends "free again" at
 * once; the sender's next pack into that buffer waits for "freed" on the device.
 * The token only orders the record before the wait (a wait takes the last record
 * made before it); no host waits for a pack or an unpack, so the pack runs while
 * the token travels, and a stream-ordered update never waits on the host for its
 * device work (see docs/HALO.md for what it measured against host waits).
 */
#include "halo_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Whether IPC pays for this rank: it does between ranks on different devices, and
 * between ranks that share one only where their processes run concurrently (CUDA MPS).
 * Without MPS the contexts of two processes on one GPU are time-sliced and every copy
 * waits for the other's slice, which made the IPC update several times slower than the
 * host path on the H200 (docs/HALO.md; the figures: see docs/BENCHMARKS.md, 'Measurements
 * behind the code's choices'). A device of unknown identity counts as shared. *mps: IPC
 * pays only because this rank shares its device with another under MPS (where the
 * measurement splits by mode: faster for a blocking update, slower for a stream-ordered
 * one; see gw__halo_ipc_decide). Collective over `node` (every rank of it gathers every
 * identity).
 */
static gw_status ipc_pays(gw_halo *h, MPI_Comm node, int *pays, int *mps) {
  typedef struct {
    unsigned char uuid[16];
    int concurrent;
  } identity;
  identity me;
  int n = 0, r = 0;
  *pays = *mps = 0;
  gw__context_device_identity(h->ctx, me.uuid, &me.concurrent);
  MPI_Comm_size(node, &n);
  MPI_Comm_rank(node, &r);
  identity *all = malloc((size_t)n * sizeof *all);
  int ok = all != NULL, everyone = 0;
  /* (every rank of the node enters the gather, or none: a rank out of memory says so) */
  gw_status st =
      gw__halo_mpi(MPI_Allreduce(&ok, &everyone, 1, MPI_INT, MPI_MIN, node), "MPI_Allreduce", -1);
  if (st == GW_OK && !everyone) st = gw__halo_fail(GW_ENOMEM, "gw_halo_create: out of memory");
  if (st == GW_OK)
    st = gw__halo_mpi(
        MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, node),
        "MPI_Allgather (the node's devices)", -1);
  static const unsigned char unknown[16];
  int shared = 0, concurrent = 0;
  for (int j = 0; st == GW_OK && j < n; j++)
    if (j != r && (!memcmp(all[j].uuid, me.uuid, 16) || !memcmp(me.uuid, unknown, 16))) {
      shared |= !(me.concurrent && all[j].concurrent);
      concurrent = 1; /* (counts only where none of them is time-sliced: shared is 0) */
    }
  free(all);
  /* (the path signals with interprocess events: a backend without them cannot
   * take it) */
  *pays = !shared && gw__ipc_event_supported(h->ctx);
  *mps = *pays && concurrent;
  return st;
}

gw_status gw__halo_ipc_decide(gw_halo *h, const char *fn, gw_halo_path path, int device_only,
                              MPI_Comm node) {
  int rank = 0, pays = 0, mps = 0;
  MPI_Comm_rank(h->comm, &rank);
  gw_status mine = ipc_pays(h, node, &pays, &mps);
  /* GPUWRAP_HALO_AUTO_MPS=host: ranks sharing a device under MPS take the host path as
   * without MPS */
  if (mps && h->set.auto_mps == AUTO_MPS_HOST) pays = 0;
  /* forced: 2; AUTO that could take it (device fields, MPI not GPU-aware, IPC
   * pays): 1; else 0; -1: this rank failed (every rank then fails, below) */
  int can = mine != GW_OK                                                            ? -1
            : path == GW_HALO_PATH_IPC                                               ? 2
            : path == GW_HALO_PATH_AUTO && device_only && !h->info.gpu_aware && pays ? 1
                                                                                     : 0;
  /* AUTO per mode: some rank takes IPC only because it shares its device under MPS, and
   * no rank's setting says otherwise (max of {mps, not "mode"} over every rank) */
  int flags[2] = {can == 1 && mps, h->set.auto_mps != AUTO_MPS_PER_MODE}, any[2] = {0, 0};
  struct {
    int v, rank;
  } in = {can, rank}, lo, hi;
  gw_status st =
      gw__halo_mpi(MPI_Allreduce(&in, &lo, 1, MPI_2INT, MPI_MINLOC, h->comm), "MPI_Allreduce", -1);
  if (st == GW_OK)
    st = gw__halo_mpi(MPI_Allreduce(&in, &hi, 1, MPI_2INT, MPI_MAXLOC, h->comm), "MPI_Allreduce",
                      -1);
  if (st == GW_OK)
    st = gw__halo_mpi(MPI_Allreduce(flags, any, 2, MPI_INT, MPI_MAX, h->comm), "MPI_Allreduce", -1);
  if (st != GW_OK) return st;
  if (lo.v < 0)
    return mine != GW_OK
               ? mine
               : gw__halo_fail(GW_EBACKEND, "%s: rank %d could not tell its node's devices apart",
                               fn, lo.rank);
  if (hi.v == 2 && lo.v < 2) /* every rank sees both */
    return gw__halo_fail(GW_EINVAL,
                         "%s: path: rank %d has ipc, rank %d has another (the "
                         "IPC path is every rank's or "
                         "none's)",
                         fn, hi.rank, lo.rank);
  h->ipc = lo.v >= 1;
  /* (lo.v == 1: every rank is AUTO, none forced) */
  h->per_mode = lo.v == 1 && any[0] && !any[1];
  return GW_OK;
}

/*
 * Packing into the neighbours' ghost cells (GPUWRAP_HALO_IPC_DIRECT=1). The receive buffer
 * costs the receiver one device copy per message (the unpack: about 5 us of host time
 * under MPS, docs/BENCHMARKS.md), which a faster signal cannot remove; without it, the
 * sender's pack is the only copy. For that each rank exports its fields once (a field's
 * handle carries its allocation, offset, shape and strides) and each on-node neighbour
 * opens them (one mapping per allocation: the import table) and takes, as a view, the
 * exact region the owner's unpack would have written: its recv_view, the halo of the side
 * facing this rank. All or nothing over the plan, as the path itself: every rank enters
 * both agreements below whatever it found, so none waits for a rank that fell back.
 */

/* The neighbour on side s's ghost region of field f along dim d, from its opened field
 * `o`: the halo facing this rank (its low one when it is our high neighbour), of width
 * w along d and its whole extent along the other dims (make_face's recv_view), which must
 * be the shape of the face we send there. */
static gw_status step(gw_status st, const char *what, int d);

static gw_status ghost_view(gw_halo *h, int f, int d, int s, gw_array *o, gw_array **out) {
  const gw_array *face = h->face[f * 3 + d].send_view[s];
  const int64_t *n = gw_shape(o), *want = gw_shape(face);
  int64_t w = h->width[f][d], start[3] = {0, 0, 0}, shape[3];
  if (gw_ndim(o) != h->ndim || gw_array_dtype(o) != gw_array_dtype(face) || n[d] < 3 * w)
    return GW_EINVAL;
  for (int e = 0; e < h->ndim; e++) {
    start[e] = e == d && s == 0 ? n[d] - w : 0;
    shape[e] = e == d ? w : n[e];
    if (shape[e] != want[e]) return GW_EINVAL;
  }
  return gw_view(o, start, shape, NULL, out);
}

static void ghosts_release(gw_halo *h) {
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 2; s++) {
      gw_array **v = h->dim[d].ghost_peer[s];
      for (int f = 0; v && f < h->nfields; f++) gw_release(v[f]);
      free(v);
      h->dim[d].ghost_peer[s] = NULL;
    }
  h->ghost = 0;
}

/* Every rank's verdict: 1 where all are 1 (collective over the plan). */
static gw_status all_ok(gw_halo *h, int mine, int *all) {
  return gw__halo_mpi(MPI_Allreduce(&mine, all, 1, MPI_INT, MPI_MIN, h->comm),
                      "MPI_Allreduce (IPC into the ghost cells)", -1);
}

gw_status gw__halo_ipc_ghosts(gw_halo *h) {
  if (!h->ipc) return GW_OK; /* (alike on every rank) */
  int nf = h->nfields, any = 0, ok = h->set.ipc_direct, all = 0;
  for (int d = 0; d < h->ndim; d++)
    for (int s = 0; s < 2; s++)
      any |=
          h->dim[d].link == LINK_MPI && h->dim[d].ipc_side[s] && h->dim[d].peer[s] != MPI_PROC_NULL;
  /* 1: this rank's fields exported (only where it has on-node neighbours to open them) */
  gw_ipc_handle *mine = calloc((size_t)nf, sizeof *mine);
  gw_ipc_handle *theirs = calloc((size_t)nf * 6, sizeof *theirs);
  ok &= mine != NULL && theirs != NULL;
  for (int f = 0; ok && any && f < nf; f++) ok = gw_ipc_export(h->field[f], &mine[f]) == GW_OK;
  gw_status st = all_ok(h, ok, &all);
  if (st != GW_OK || !all) {
    free(mine);
    free(theirs);
    return st;
  }
  /* 2: the handles to and from each on-node neighbour (every rank posts all of its own) */
  MPI_Request req[12];
  int nreq = 0;
  for (int d = 0; d < h->ndim; d++)
    for (int s = 0; s < 2; s++) {
      gw__halo_dim *hd = &h->dim[d];
      if (hd->link != LINK_MPI || !hd->ipc_side[s] || hd->peer[s] == MPI_PROC_NULL) continue;
      int count = nf * (int)sizeof(gw_ipc_handle);
      int rc = MPI_Irecv(theirs + (size_t)(2 * d + s) * (size_t)nf, count, MPI_BYTE, hd->peer[s],
                         halo_tag_ghost(d, !s), h->comm, &req[nreq]);
      if (rc == MPI_SUCCESS) {
        nreq++;
        rc = MPI_Isend(mine, count, MPI_BYTE, hd->peer[s], halo_tag_ghost(d, s), h->comm,
                       &req[nreq]);
        nreq += rc == MPI_SUCCESS;
      }
      if (rc != MPI_SUCCESS && st == GW_OK)
        st = gw__halo_mpi(rc, "MPI_Isend/MPI_Irecv (the fields' IPC handles)", d);
    }
  if (nreq > 0) {
    gw_status w = gw__halo_mpi(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE),
                               "MPI_Waitall (the fields' IPC handles)", -1);
    if (st == GW_OK) st = w;
  }
  /* 3: open the neighbours' fields, view their ghost regions */
  ok = st == GW_OK;
  for (int d = 0; ok && d < h->ndim; d++)
    for (int s = 0; ok && s < 2; s++) {
      gw__halo_dim *hd = &h->dim[d];
      if (hd->link != LINK_MPI || !hd->ipc_side[s] || hd->peer[s] == MPI_PROC_NULL) continue;
      hd->ghost_peer[s] = calloc((size_t)nf, sizeof(gw_array *));
      ok = hd->ghost_peer[s] != NULL;
      for (int f = 0; ok && f < nf; f++) {
        if (!h->face[f * 3 + d].send_view[s]) continue; /* (no width along d) */
        gw_array *o = NULL;
        ok =
            gw_ipc_open(h->ctx, &theirs[(size_t)(2 * d + s) * (size_t)nf + (size_t)f], &o) == GW_OK;
        if (ok) ok = ghost_view(h, f, d, s, o, &hd->ghost_peer[s][f]) == GW_OK;
        gw_release(o); /* (the view keeps the mapping) */
      }
    }
  free(mine);
  free(theirs);
  /* (an MPI failure is this rank's: create's next agreement makes it every rank's; the
   * others then see ok 0 here and fall back before it) */
  gw_status a = all_ok(h, ok, &all);
  if (st == GW_OK) st = a;
  h->ghost = 1;
  if (st != GW_OK || !all) ghosts_release(h);
  return st;
}

gw_status gw__halo_ipc_ghosts_free(gw_halo *h, int d) {
  gw__halo_dim *hd = &h->dim[d];
  for (int m = 0; m < hd->nmsg; m++) {
    if (!hd->msg[m].ipc) continue;
    if (h->q) {
      gw_status st = step(gw__ipc_event_record(hd->ipc_freed[hd->msg[m].side], h->q),
                          "path IPC: recording \"ghosts free\" (gw__ipc_event_record)", d);
      if (st != GW_OK) return st;
    }
    gw_status st = gw__halo_send_free(h, d, m, h->q ? 1 : 0);
    if (st != GW_OK) return st;
  }
  return GW_OK;
}

gw_status gw__halo_ipc_block(gw_halo *h, size_t bytes) {
  int64_t n = (int64_t)bytes;
  gw_status st = gw_alloc(h->ctx, GW_MEM_DEVICE, GW_UINT8, 1, &n, &h->ipc_block);
  if (st != GW_OK) return gw__halo_call_failed(st, "gw_alloc of the IPC receive buffers", -1);
  h->ipc_base = gw_data(h->ipc_block);
  st = gw_ipc_export(h->ipc_block, &h->ipc_handle);
  if (st != GW_OK)
    return gw__halo_call_failed(st,
                                "path IPC: gw_ipc_export of the receive buffers "
                                "(the backend cannot share "
                                "its device memory with another process)",
                                -1);
  return GW_OK;
}

/* What a rank tells each on-node neighbour: whether its block exists, where in
 * it the neighbour's packs go, and the block's handle. */
typedef struct {
  unsigned long long ok, off;
  gw_ipc_handle handle;
  gw__ipc_event_handle landed, freed; /* this rank's events of the side */
} ipc_offer;

/* This rank's two events of dim d's side s, their handles in *o (ok cleared on a
 * failure, which is this rank's: create's agreement makes it every rank's). */
static gw_status make_events(gw_halo *h, gw__halo_dim *hd, int s, ipc_offer *o) {
  gw_status st = gw__ipc_event_create(h->ctx, &hd->ipc_landed[s], &o->landed);
  if (st == GW_OK) st = gw__ipc_event_create(h->ctx, &hd->ipc_freed[s], &o->freed);
  if (st != GW_OK) {
    o->ok = 0;
    return gw__halo_call_failed(st, "path IPC: gw__ipc_event_create (the signalling events)",
                                (int)(hd - h->dim));
  }
  return GW_OK;
}

gw_status gw__halo_ipc_link(gw_halo *h) {
  ipc_offer mine[3][2], theirs[3][2];
  MPI_Request req[12];
  int nreq = 0;
  gw_status st = GW_OK;
  memset(mine, 0, sizeof mine);
  memset(theirs, 0, sizeof theirs);
  /* every send and receive is posted whatever this rank found, so no neighbour
   * waits */
  for (int d = 0, m = -1; gw__halo_next_direct(h, &d, &m);) {
    const gw__halo_msg *g = &h->dim[d].msg[m];
    ipc_offer *o = &mine[d][g->side];
    o->ok = h->ipc_block != NULL || h->ghost; /* (ghost cells: no block, the events only) */
    o->off = g->off_recv;
    o->handle = h->ipc_handle;
    if (o->ok) {
      gw_status e = make_events(h, &h->dim[d], g->side, o);
      if (st == GW_OK) st = e;
    }
    int peer = h->dim[d].peer[g->side];
    int rc = MPI_Irecv(&theirs[d][g->side], (int)sizeof(ipc_offer), MPI_BYTE, peer,
                       halo_tag_offset(d, !g->side), h->comm, &req[nreq]);
    if (rc == MPI_SUCCESS) {
      nreq++;
      rc = MPI_Isend(o, (int)sizeof(ipc_offer), MPI_BYTE, peer, halo_tag_offset(d, g->side),
                     h->comm, &req[nreq]);
      nreq += rc == MPI_SUCCESS;
    }
    if (rc != MPI_SUCCESS && st == GW_OK)
      st = gw__halo_mpi(rc, "MPI_Isend/MPI_Irecv (IPC handles)", d);
  }
  if (nreq > 0) {
    gw_status w =
        gw__halo_mpi(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE), "MPI_Waitall (IPC handles)", -1);
    if (st == GW_OK) st = w;
  }
  for (int d = 0, m = -1; st == GW_OK && gw__halo_next_direct(h, &d, &m);) {
    gw__halo_dim *hd = &h->dim[d];
    const gw__halo_msg *g = &hd->msg[m];
    const ipc_offer *o = &theirs[d][g->side];
    int peer = hd->peer[g->side];
    if (!o->ok) {
      st = gw__halo_fail(GW_EINVAL,
                         "gw_halo_create: rank %d could not make its IPC buffers or events for "
                         "dim %d (its own error says why)",
                         peer, d);
      break;
    }
    /* Opened once per side; the import table maps each allocation once per
     * process, so a neighbour on both sides (a periodic dim of two) shares one
     * mapping. (Packing into the ghost cells: no receive buffer, only the events.) */
    st = h->ghost ? GW_OK : gw_ipc_open(h->ctx, &o->handle, &hd->ipc_peer[g->side]);
    if (st != GW_OK) {
      st = gw__halo_call_failed(st, "path IPC: gw_ipc_open of a neighbour's receive buffers", d);
      break;
    }
    gw_array *p = hd->ipc_peer[g->side];
    if (p && (unsigned long long)gw_numel(p) < o->off + (unsigned long long)g->bytes) {
      st = gw__halo_fail(GW_EINVAL,
                         "gw_halo_create: rank %d's IPC receive buffer along dim %d (%llu + "
                         "%d bytes) lies "
                         "outside its %lld-byte block: the ranks' fields do not match",
                         peer, d, o->off, g->bytes, (long long)gw_numel(p));
      break;
    }
    if (p) hd->shm_delta[g->side] = ((char *)gw_data(p) + o->off) - (h->ipc_base + g->off_send);
    st = gw__ipc_event_open(h->ctx, &o->landed, &hd->ipc_peer_landed[g->side]);
    if (st == GW_OK) st = gw__ipc_event_open(h->ctx, &o->freed, &hd->ipc_peer_freed[g->side]);
    if (st != GW_OK) {
      st = gw__halo_call_failed(st, "path IPC: gw__ipc_event_open of a neighbour's events", d);
      break;
    }
  }
  return st;
}

/* (The halo's own stream is never captured on this path: check_capture refuses
 * plans with host steps, and IPC has them.) */
static gw_status step(gw_status st, const char *what, int d) {
  return st == GW_OK ? GW_OK : gw__halo_call_failed(st, what, d);
}

gw_status gw__halo_ipc_before_pack(gw_halo *h, int d, int m, int recorded) {
  gw__halo_dim *hd = &h->dim[d];
  /* (no streams: every copy ran to completion already; a 0-byte token: the
   * neighbour's unpacks were complete when it was sent) */
  if (!h->q || !recorded) return GW_OK;
  return step(gw__ipc_event_wait(h->q, hd->ipc_peer_freed[hd->msg[m].side]),
              "path IPC: waiting for the neighbour's unpacks (gw__ipc_event_wait)", d);
}

gw_status gw__halo_ipc_after_pack(gw_halo *h, int d, int m) {
  gw__halo_dim *hd = &h->dim[d];
  if (!h->q) return GW_OK;
  return step(gw__ipc_event_record(hd->ipc_landed[hd->msg[m].side], h->q),
              "path IPC: recording a pack's event (gw__ipc_event_record)", d);
}

gw_status gw__halo_ipc_before_unpack(gw_halo *h, int d, int m) {
  gw__halo_dim *hd = &h->dim[d];
  if (!h->q) return GW_OK;
  return step(gw__ipc_event_wait(h->q, hd->ipc_peer_landed[hd->msg[m].side]),
              "path IPC: waiting for the neighbour's pack (gw__ipc_event_wait)", d);
}

gw_status gw__halo_ipc_after_unpack(gw_halo *h, int d, int m) {
  gw__halo_dim *hd = &h->dim[d];
  if (h->blocking) return GW_OK; /* (no queue too) 0 bytes once the unpacks are done */
  gw_status st = step(gw__ipc_event_record(hd->ipc_freed[hd->msg[m].side], h->q),
                      "path IPC: recording an unpack's event (gw__ipc_event_record)", d);
  return st == GW_OK ? gw__halo_send_free(h, d, m, 1) : st;
}

/* Each IPC message's copies as two prepared batches (one launch each, no planning
 * per update): packs from the fields' faces into the neighbour's buffer, unpacks
 * from ours into the fields' halos. */
gw_status gw__halo_ipc_prepare(gw_halo *h) {
  for (int d = 0, m = -1; gw__halo_next_direct(h, &d, &m);) {
    gw__halo_dim *hd = &h->dim[d];
    const gw__halo_msg *g = &hd->msg[m];
    if (!g->ipc) continue;
    gw_array **arr = malloc((size_t)g->count * 4 * sizeof *arr);
    if (!arr) return gw__halo_fail(GW_ENOMEM, "gw_halo_create: out of memory");
    gw_array **pd = arr, **ps = arr + g->count, **ud = arr + 2 * g->count,
             **us = arr + 3 * g->count;
    for (int k = 0; k < g->count; k++) {
      const gw__halo_seg *sg = &hd->seg[g->first + k];
      pd[k] = sg->send_seg;
      ps[k] = sg->send_view;
      ud[k] = sg->recv_view;
      us[k] = sg->recv_seg;
    }
    gw_status st =
        gw__batch_make(pd, (const gw_array *const *)ps, g->count, &hd->ipc_pack[g->side]);
    if (st == GW_OK && !h->ghost) /* (ghost cells: the pack is the only copy) */
      st = gw__batch_make(ud, (const gw_array *const *)us, g->count, &hd->ipc_unpack[g->side]);
    free(arr);
    if (st != GW_OK) return gw__halo_call_failed(st, "path IPC: preparing a message's copies", d);
  }
  return GW_OK;
}

/* A blocking update synchronizes its stream before returning (and after a
 * failure, quiesce): its copies need no pending-work events. */
gw_status gw__halo_ipc_copy(gw_halo *h, int d, int m, gw__halo_way way) {
  gw__halo_dim *hd = &h->dim[d];
  int side = hd->msg[m].side;
  gw__batch *b = way == GW__HALO_PACK ? hd->ipc_pack[side] : hd->ipc_unpack[side];
  return step(h->blocking ? gw__batch_run_unnoted(b, h->q) : gw__batch_run(b, h->q),
              way == GW__HALO_PACK ? "gw_copy packing a face" : "gw_copy unpacking a face", d);
}

void gw__halo_ipc_close(gw_halo *h) {
  if (!h->ipc) return;
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 2; s++) {
      gw__halo_dim *hd = &h->dim[d];
      gw__batch_free(hd->ipc_pack[s]); /* (they hold references to the mapped buffers) */
      gw__batch_free(hd->ipc_unpack[s]);
      hd->ipc_pack[s] = hd->ipc_unpack[s] = NULL;
      gw_release(hd->ipc_peer[s]); /* the last reference unmaps */
      hd->ipc_peer[s] = NULL;
      for (int f = 0; hd->ghost_peer[s] && f < h->nfields; f++) gw_release(hd->ghost_peer[s][f]);
      free(hd->ghost_peer[s]); /* (the segments' references went before this) */
      hd->ghost_peer[s] = NULL;
      gw__ipc_event_destroy(hd->ipc_peer_landed[s]);
      gw__ipc_event_destroy(hd->ipc_peer_freed[s]);
      hd->ipc_peer_landed[s] = hd->ipc_peer_freed[s] = NULL;
    }
  gw__halo_ipc_signal_close(h, 0);
  /* The neighbours' streams are gone and their mappings of this block and of
   * these events closed once every rank got here: only then may their maker free
   * them. */
  (void)MPI_Barrier(h->comm);
  gw__halo_ipc_signal_close(h, 1);
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 2; s++) {
      gw__halo_dim *hd = &h->dim[d];
      gw__ipc_event_destroy(hd->ipc_landed[s]);
      gw__ipc_event_destroy(hd->ipc_freed[s]);
      hd->ipc_landed[s] = hd->ipc_freed[s] = NULL;
    }
  gw_release(h->ipc_block);
  h->ipc_block = NULL;
}
