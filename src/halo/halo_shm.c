#define _POSIX_C_SOURCE 200809L /* sysconf */

#include "halo_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the shared-memory transport of the host path
 * ------------------------------------- */
/*
 * Two ranks of one node need not copy a face through MPI: MPI_Sendrecv of a
 * face through MPI's shared memory takes about twice the GPU's copies out and
 * back in (docs/BENCHMARKS.md, 'Measurements behind the code's choices').
 * So the plan's ranks on one node share a window (each neighbour on the node
 * goes through it, message by message; the others through MPI): the buffer
 * block is this rank's segment of an MPI shared-memory window
 * (MPI_Win_allocate_shared, pinned in every process that copies through it): a
 * pack is the GPU's copy straight into the neighbour's receive buffer, MPI
 * carries a 0-byte "landed" message instead of the face, and the neighbour
 * unpacks out of its own segment. Each receive buffer is written again only
 * after its owner said it was unpacked (a 0-byte "free again" token, sent once
 * the unpacks are known complete and waited for before the next pack into it),
 * so one buffer per message suffices. Results are the MPI transport's bit for
 * bit; GPUWRAP_HALO_SHM=0 turns it off (then MPI carries the data, pipelined).
 */
gw_status gw__halo_node_split(gw_halo *h, MPI_Comm *node) {
  /* GPUWRAP_HALO_SHM_GROUP=N makes the node N consecutive ranks instead (tests of
   * plans whose neighbours are partly on other nodes, on one machine). */
  int mine = h->set.shm_group, group = 0, rank = 0;
  *node = MPI_COMM_NULL;
  MPI_Comm_rank(h->comm, &rank);
  /* every rank must make the same collective call below: the largest setting
   * wins */
  gw_status st =
      gw__halo_mpi(MPI_Allreduce(&mine, &group, 1, MPI_INT, MPI_MAX, h->comm), "MPI_Allreduce", -1);
  if (st != GW_OK) return st;
  st =
      group > 0
          ? gw__halo_mpi(MPI_Comm_split(h->comm, (int)(rank / group), rank, node), "MPI_Comm_split",
                         -1)
          : gw__halo_mpi(MPI_Comm_split_type(h->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, node),
                         "MPI_Comm_split_type", -1);
  if (st != GW_OK) *node = MPI_COMM_NULL;
  return st;
}

gw_status gw__halo_shm_decide(gw_halo *h, gw_halo_path path, MPI_Comm *node) {
  /* (the IPC path needs the node too: its neighbours there are mapped, not
   * windowed) */
  int want = (path == GW_HALO_PATH_HOST && h->set.shm) || path == GW_HALO_PATH_IPC, all = 0;
  int nsize = 0;
  MPI_Comm_size(*node, &nsize);
  /* Every rank decides alike (the window is collective over each node):
   * neighbours on this node then go through it, the others through MPI
   * (make_dims). */
  gw_status st =
      gw__halo_mpi(MPI_Allreduce(&want, &all, 1, MPI_INT, MPI_MIN, h->comm), "MPI_Allreduce", -1);
  if (st == GW_OK && all && nsize > 1) {
    h->shm_node = *node;
    *node = MPI_COMM_NULL;
  }
  return st;
}

/* Whether `peer` (a rank of h->comm) shares this rank's node window. */
int gw__halo_shm_peer(const gw_halo *h, int peer) {
  if (h->shm_node == MPI_COMM_NULL || peer == MPI_PROC_NULL) return 0;
  MPI_Group cg, ng;
  MPI_Comm_group(h->comm, &cg);
  MPI_Comm_group(h->shm_node, &ng);
  int nr = MPI_UNDEFINED;
  MPI_Group_translate_ranks(cg, 1, &peer, ng, &nr);
  MPI_Group_free(&cg);
  MPI_Group_free(&ng);
  return nr != MPI_UNDEFINED;
}

/* This rank's window segment as the buffer block, pinned (collective over the
 * node). */
gw_status gw__halo_shm_block(gw_halo *h, size_t total) {
  long page = sysconf(_SC_PAGESIZE);
  size_t align = page > 0 ? (size_t)page : 4096, bytes = halo_round_up(total, align);
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true"); /* each segment on its own pages */
  char *base = NULL;
  int rc = MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, h->shm_node, &base, &h->shm_win);
  MPI_Info_free(&info);
  if (rc != MPI_SUCCESS) {
    h->shm_win = MPI_WIN_NULL;
    return gw__halo_mpi(rc, "MPI_Win_allocate_shared", -1);
  }
  MPI_Win_set_errhandler(h->shm_win, MPI_ERRORS_RETURN); /* errors come back as statuses */
  if (bytes == 0) return GW_OK;
  gw_status st = gw_pin(h->ctx, base, bytes);
  if (st != GW_OK)
    return gw__halo_call_failed(st,
                                "gw_pin of this rank's shared halo buffers "
                                "(GPUWRAP_HALO_SHM=0: MPI carries the faces)",
                                -1);
  h->host_block = base;
  h->host_block_bytes = bytes;
  h->msg_base = base;
  return GW_OK;
}

/* Where each side's packs land: every neighbour tells where its receive buffer
 * for us lies in its segment; its segment is found in this process's map of the
 * window and pinned here once (the GPU of this rank writes into it). Needs the
 * messages placed (layout_dim fill 1) and one message per side (no pieces on
 * this transport). */
/* The messages through the window, in order: for (int d = 0, m = -1;
 * gw__halo_next_direct(h, &d, &m);) visits each (dim d, message m) whose msg[m].shm
 * is set. */
int gw__halo_next_direct(const gw_halo *h, int *d, int *m) {
  while (*d < h->ndim) {
    const gw__halo_dim *hd = &h->dim[*d];
    if (hd->link == LINK_MPI)
      while (++*m < hd->nmsg)
        if (hd->msg[*m].direct) return 1;
    ++*d;
    *m = -1;
  }
  return 0;
}

gw_status gw__halo_shm_link(gw_halo *h) {
  MPI_Group cg, ng;
  MPI_Comm_group(h->comm, &cg);
  MPI_Comm_group(h->shm_node, &ng);
  unsigned long long mine[3][2], theirs[3][2];
  MPI_Request req[12];
  int nreq = 0;
  gw_status st = GW_OK;
  for (int d = 0, m = -1; st == GW_OK && gw__halo_next_direct(h, &d, &m);) {
    const gw__halo_msg *g = &h->dim[d].msg[m];
    mine[d][g->side] = g->off_recv;
    int peer = h->dim[d].peer[g->side];
    /* ours goes with the tag of our side; the neighbour's answer has the other
     * one */
    st = gw__halo_mpi(MPI_Irecv(&theirs[d][g->side], 1, MPI_UNSIGNED_LONG_LONG, peer,
                                halo_tag_offset(d, !g->side), h->comm, &req[nreq++]),
                      "MPI_Irecv", d);
    if (st == GW_OK)
      st = gw__halo_mpi(MPI_Isend(&mine[d][g->side], 1, MPI_UNSIGNED_LONG_LONG, peer,
                                  halo_tag_offset(d, g->side), h->comm, &req[nreq++]),
                        "MPI_Isend", d);
  }
  if (nreq > 0) {
    gw_status w = gw__halo_mpi(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE),
                               "MPI_Waitall (buffer offsets)", -1);
    if (st == GW_OK) st = w;
  }
  for (int d = 0, m = -1; st == GW_OK && gw__halo_next_direct(h, &d, &m);) {
    gw__halo_dim *hd = &h->dim[d];
    const gw__halo_msg *g = &hd->msg[m];
    int peer = hd->peer[g->side], nr = MPI_UNDEFINED, du = 0;
    MPI_Group_translate_ranks(cg, 1, &peer, ng, &nr);
    MPI_Aint size = 0;
    char *pbase = NULL;
    st = gw__halo_mpi(MPI_Win_shared_query(h->shm_win, nr, &size, &du, &pbase),
                      "MPI_Win_shared_query", d);
    if (st != GW_OK) break;
    if ((unsigned long long)size < theirs[d][g->side] + (unsigned long long)g->bytes) {
      st = gw__halo_fail(GW_EINVAL,
                         "gw_halo_create: rank %d's receive buffer along dim %d (%llu + %d "
                         "bytes) "
                         "lies outside its %lld-byte segment: the ranks' fields do not match",
                         peer, d, theirs[d][g->side], g->bytes, (long long)size);
      break;
    }
    hd->shm_delta[g->side] = (pbase + theirs[d][g->side]) - (h->msg_base + g->off_send);
    int seen = 0;
    for (int k = 0; k < h->shm_npinned; k++) seen |= h->shm_pinned[k] == pbase;
    if (seen) continue;
    void **pv = realloc(h->shm_pinned, (size_t)(h->shm_npinned + 1) * sizeof *pv);
    if (pv) h->shm_pinned = pv;
    size_t *pb =
        pv ? realloc(h->shm_pinned_bytes, (size_t)(h->shm_npinned + 1) * sizeof *pb) : NULL;
    if (pb) h->shm_pinned_bytes = pb;
    if (!pv || !pb) {
      st = gw__halo_fail(GW_ENOMEM, "gw_halo_create: out of memory");
      break;
    }
    st = gw_pin(h->ctx, pbase, (size_t)size);
    if (st != GW_OK) {
      st = gw__halo_call_failed(st,
                                "gw_pin of a neighbour's shared halo buffers "
                                "(GPUWRAP_HALO_SHM=0: MPI carries the faces)",
                                d);
      break;
    }
    h->shm_pinned[h->shm_npinned] = pbase;
    h->shm_pinned_bytes[h->shm_npinned++] = (size_t)size;
  }
  MPI_Group_free(&cg);
  MPI_Group_free(&ng);
  return st;
}

/* After a failed update (every rank fails alike): drop the tokens in flight
 * (cancel the receives of "free again", complete the sends), then start the new
 * epoch as if every buffer had just been unpacked: send each sender its token
 * and post the receive of each receiver's. A neighbour may still be draining
 * its unpacks of the failed update out of its buffer when this rank's next pack
 * is ready: that pack waits for its token. */
void gw__halo_shm_resync(gw_halo *h) {
  for (int d = 0, m = -1; gw__halo_next_direct(h, &d, &m);) {
    gw__halo_dim *hd = &h->dim[d];
    const gw__halo_msg *g = &hd->msg[m];
    (void)MPI_Isend(h->msg_base, 0, MPI_BYTE, hd->peer[g->side], halo_tag_free(h, d, g->side),
                    h->comm, &hd->tok_req[m]);
    (void)MPI_Irecv(&hd->free_byte[g->side], 1, MPI_BYTE, hd->peer[g->side],
                    halo_tag_free(h, d, !g->side), h->comm, &hd->free_req[m]);
  }
}

/* Drop the tokens in flight: cancel the receives of "free again", complete the
 * sends. */
void gw__halo_shm_cancel(gw_halo *h) {
  for (int d = 0; d < 3; d++) {
    gw__halo_dim *hd = &h->dim[d];
    for (int m = 0; hd->free_req && m < hd->nmsg; m++) {
      if (hd->free_req[m] != MPI_REQUEST_NULL) {
        MPI_Cancel(&hd->free_req[m]);
        MPI_Wait(&hd->free_req[m], MPI_STATUS_IGNORE);
      }
      if (hd->tok_req[m] != MPI_REQUEST_NULL) MPI_Wait(&hd->tok_req[m], MPI_STATUS_IGNORE);
    }
  }
  h->shm_owed = 0;
}

/* Destroy (collective): the unpacks are done (the plan's stream is gone), so
 * the tokens still owed go out first, then every token this rank waits for
 * comes in: each rank sends before it waits, so every send meets its receive
 * (nothing is left unmatched). */
void gw__halo_shm_close(gw_halo *h) {
  if (!h->direct) return;
  (void)gw__halo_shm_release(h);
  for (int d = 0; d < 3; d++) {
    gw__halo_dim *hd = &h->dim[d];
    for (int m = 0; hd->free_req && m < hd->nmsg; m++) {
      if (hd->free_req[m] != MPI_REQUEST_NULL) MPI_Wait(&hd->free_req[m], MPI_STATUS_IGNORE);
      if (hd->tok_req[m] != MPI_REQUEST_NULL) MPI_Wait(&hd->tok_req[m], MPI_STATUS_IGNORE);
    }
  }
  for (int k = 0; k < h->shm_npinned; k++)
    (void)gw_unpin(h->ctx, h->shm_pinned[k], h->shm_pinned_bytes[k]);
  free(h->shm_pinned);
  free(h->shm_pinned_bytes);
  h->shm_pinned = NULL;
  h->shm_pinned_bytes = NULL;
  h->shm_npinned = 0;
}

/* Tell the sender of dim d's message m that its buffer here is free again (a
 * 0-byte message it waits for before its next pack into it). */
gw_status gw__halo_send_free(gw_halo *h, int d, int m, int bytes) {
  static const unsigned char one = 1;
  gw__halo_dim *hd = &h->dim[d];
  const gw__halo_msg *g = &hd->msg[m];
  if (hd->tok_req[m] != MPI_REQUEST_NULL) { /* the previous one: long delivered (eager) */
    int rc = MPI_Wait(&hd->tok_req[m], MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Wait (a buffer token)", d);
  }
  int rc = MPI_Isend(bytes ? (void *)&one : h->msg_base, bytes, MPI_BYTE, hd->peer[g->side],
                     halo_tag_free(h, d, g->side), h->comm, &hd->tok_req[m]);
  return rc == MPI_SUCCESS ? GW_OK : gw__halo_mpi(rc, "MPI_Isend (a buffer token)", d);
}

/* The unpacks out of this rank's buffers are complete: every direct message's
 * sender gets its 0-byte token (the window's, and IPC messages of a blocking
 * update; a stream-ordered IPC update sent 1-byte tokens with its events). */
gw_status gw__halo_shm_release(gw_halo *h) {
  if (!h->shm_owed) return GW_OK;
  h->shm_owed = 0;
  for (int d = 0, m = -1; gw__halo_next_direct(h, &d, &m);) {
    if (h->dim[d].msg[m].ipc && !h->blocking) continue;
    gw_status st = gw__halo_send_free(h, d, m, 0);
    if (st != GW_OK) return st;
  }
  return GW_OK;
}
