/*
 * The IPC path's packs into the neighbours' ghost cells, signalled on the device
 * (GPUWRAP_HALO_IPC_SIGNAL=1 with GPUWRAP_HALO_IPC_DIRECT=1): each dim of an update is ONE
 * operation on the plan's stream (gw__batch_run_signalled, a single kernel launch on a
 * GPU), which tells each on-node neighbour "my ghost cells are free" by storing the
 * update's epoch into a word of the neighbour's memory, waits for the neighbour's word,
 * packs every field's face straight into the neighbour's ghost cells, stores "landed",
 * and ends once the neighbour's "landed" is in. No MPI message, no interprocess event and
 * no host wait sits between the caller's work and the neighbour's: a blocking update is
 * those launches and one synchronize, a split or stream-ordered one queues them and
 * returns.
 *
 * Each rank's words are one small device allocation (the signal block), exported at
 * creation and opened by each on-node neighbour. Slot (d, s) holds what the neighbour on
 * side s of dim d writes: its "free" and its "landed" for this rank (their own 32-byte
 * sectors); a word per dim counts the kernel's finished blocks. The epoch of dim d counts
 * this plan's updates that queued dim d's operation; the two ends of every message count
 * alike because every rank runs every update (the halo's calls are collective) and a
 * failed queueing advances no epoch. Both sides of a dim are in the one operation: with a
 * side each, three ranks around a periodic dim would wait for each other in a ring.
 *
 * Only for a plan whose every remote message is IPC into the ghost cells (the events and
 * tokens of halo_ipc.c otherwise), decided at creation alike on every rank. Graph
 * capture stays refused (the epoch is fixed when an operation is queued).
 */
#include "halo_internal.h"

#include <stdlib.h>
#include <string.h>

/* The signal block: 6 slots of 64 bytes (free at +0, landed at +32), then a count per dim. */
enum { SLOT_WORDS = 16, LANDED_AT = 8, COUNT_AT = 6 * SLOT_WORDS, SIG_BYTES = 1024 };

static uint32_t *word(char *block, int d, int s, int landed) {
  return (uint32_t *)block + (2 * d + s) * SLOT_WORDS + (landed ? LANDED_AT : 0);
}

/* Whether dim d has a neighbour on side s that this rank packs for. */
static int has_side(const gw_halo *h, int d, int s) {
  const gw__halo_dim *hd = &h->dim[d];
  if (hd->link != LINK_MPI || hd->peer[s] == MPI_PROC_NULL) return 0;
  for (int m = 0; m < hd->nmsg; m++)
    if (hd->msg[m].side == s) return 1;
  return 0;
}

/* Dim d's packs (every message's segments) as one batch. */
static gw_status make_pack(gw_halo *h, int d) {
  gw__halo_dim *hd = &h->dim[d];
  int n = 0;
  for (int m = 0; m < hd->nmsg; m++) n += hd->msg[m].count;
  gw_array **arr = malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof *arr);
  if (!arr) return gw__halo_fail(GW_ENOMEM, "gw_halo_create: out of memory");
  int k = 0;
  for (int m = 0; m < hd->nmsg; m++)
    for (int j = 0; j < hd->msg[m].count; j++, k++) {
      arr[k] = hd->seg[hd->msg[m].first + j].send_seg;
      arr[n + k] = hd->seg[hd->msg[m].first + j].send_view;
    }
  gw_status st = gw__batch_make(arr, (const gw_array *const *)(arr + n), n, &hd->sig_pack);
  free(arr);
  return st;
}

/* Every rank's verdict: 1 where all are 1 (collective over the plan). */
static gw_status all_ok(gw_halo *h, int mine, int *all) {
  return gw__halo_mpi(MPI_Allreduce(&mine, all, 1, MPI_INT, MPI_MIN, h->comm),
                      "MPI_Allreduce (IPC signals on the device)", -1);
}

static void release(gw_halo *h) {
  for (int d = 0; d < 3; d++) {
    gw__batch_free(h->dim[d].sig_pack);
    h->dim[d].sig_pack = NULL;
    for (int s = 0; s < 2; s++) {
      gw_release(h->dim[d].sig_peer[s]);
      h->dim[d].sig_peer[s] = NULL;
    }
  }
  h->sig = 0;
}

gw_status gw__halo_ipc_signal(gw_halo *h) {
  if (!h->ipc || !h->ghost) return GW_OK; /* (agreed: alike on every rank) */
  /* 1: this rank can (its setting, every remote message IPC, every dim's packs one
   * signalled batch) and has its block; whatever it found, it enters the agreement */
  int ok = h->set.ipc_signal && h->ipc_only && h->stream != NULL, all = 0;
  for (int d = 0; ok && d < h->ndim; d++)
    if (h->dim[d].link == LINK_MPI)
      ok = make_pack(h, d) == GW_OK && gw__batch_can_signal(h->dim[d].sig_pack);
  int64_t bytes = SIG_BYTES;
  if (ok) ok = gw_alloc(h->ctx, GW_MEM_DEVICE, GW_UINT8, 1, &bytes, &h->sig_block) == GW_OK;
  if (ok) ok = gw_fill(h->sig_block, &(uint8_t){0}) == GW_OK;
  gw_ipc_handle mine, theirs[6];
  memset(&mine, 0, sizeof mine);
  memset(theirs, 0, sizeof theirs);
  if (ok) ok = gw_ipc_export(h->sig_block, &mine) == GW_OK;
  gw_status st = all_ok(h, ok, &all);
  if (st != GW_OK || !all) {
    release(h);
    return st;
  }
  /* 2: the blocks' handles to and from each on-node neighbour */
  MPI_Request req[12];
  int nreq = 0;
  for (int d = 0; d < h->ndim; d++)
    for (int s = 0; s < 2; s++) {
      if (!has_side(h, d, s)) continue;
      int peer = h->dim[d].peer[s];
      int rc = MPI_Irecv(&theirs[2 * d + s], (int)sizeof mine, MPI_BYTE, peer,
                         halo_tag_signal(d, !s), h->comm, &req[nreq]);
      if (rc == MPI_SUCCESS) {
        nreq++;
        rc = MPI_Isend(&mine, (int)sizeof mine, MPI_BYTE, peer, halo_tag_signal(d, s), h->comm,
                       &req[nreq]);
        nreq += rc == MPI_SUCCESS;
      }
      if (rc != MPI_SUCCESS && st == GW_OK)
        st = gw__halo_mpi(rc, "MPI_Isend/MPI_Irecv (the signal blocks' handles)", d);
    }
  if (nreq > 0) {
    gw_status w = gw__halo_mpi(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE),
                               "MPI_Waitall (the signal blocks' handles)", -1);
    if (st == GW_OK) st = w;
  }
  /* 3: open them (the import table maps a block once per process) */
  ok = st == GW_OK;
  for (int d = 0; ok && d < h->ndim; d++)
    for (int s = 0; ok && s < 2; s++)
      if (has_side(h, d, s))
        ok = gw_ipc_open(h->ctx, &theirs[2 * d + s], &h->dim[d].sig_peer[s]) == GW_OK &&
             gw_numel(h->dim[d].sig_peer[s]) >= SIG_BYTES;
  gw_status a = all_ok(h, ok, &all);
  if (st == GW_OK) st = a;
  h->sig = 1;
  if (st != GW_OK || !all) release(h);
  return st;
}

gw_status gw__halo_ipc_signal_dim(gw_halo *h, int d) {
  gw__halo_dim *hd = &h->dim[d];
  char *mine = gw_data(h->sig_block);
  gw__signals sig;
  memset(&sig, 0, sizeof sig);
  for (int s = 0; s < 2; s++) {
    if (!hd->sig_peer[s]) continue;
    char *theirs = gw_data(hd->sig_peer[s]);
    /* we are on the neighbour's side !s */
    sig.post[s] = word(theirs, d, !s, 0);
    sig.wait[s] = word(mine, d, s, 0);
    sig.done[s] = word(theirs, d, !s, 1);
    sig.until[s] = word(mine, d, s, 1);
  }
  sig.count = (uint32_t *)mine + COUNT_AT + d;
  sig.epoch = hd->sig_epoch + 1;
  gw_status st = gw__batch_run_signalled(hd->sig_pack, h->q, &sig);
  if (st != GW_OK) return gw__halo_call_failed(st, "path IPC: the signalled pack of a dim", d);
  hd->sig_epoch = sig.epoch;
  return GW_OK;
}

void gw__halo_ipc_signal_close(gw_halo *h, int after) {
  if (!after) {
    release(h);
    return;
  }
  /* (every rank passed gw__halo_ipc_close's barrier: no neighbour maps our block now) */
  gw_release(h->sig_block);
  h->sig_block = NULL;
}
