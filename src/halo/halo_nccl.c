#include "halo_internal.h"
#include "nccl_api.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gw__halo_nccl_close(gw_halo *h) {
  if (!h->nccl_comm) return;
  /* on the communicator's device (NCCL frees its device resources there) */
  const char *why;
  int pushed = gw__halo_nccl_push_device(h->nccl_device, &why);
  (void)h->nccl->CommDestroy(h->nccl_comm);
  if (pushed) gw__halo_nccl_pop_device(h->nccl_device);
  h->nccl_comm = NULL;
}

/* ---- the NCCL path: choosing it and bootstrapping its communicator
 * ---------------------- */

typedef struct {
  unsigned char uuid[16];
  int rank;
} gpu_of_rank;

static int by_uuid(const void *a, const void *b) {
  const gpu_of_rank *x = a, *y = b;
  int c = memcmp(x->uuid, y->uuid, sizeof x->uuid);
  return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

/* Can this rank use NCCL for h's fields? 1, or 0 with *why. `forced`: load NCCL
 * first, so that where it is absent the loader's message is the one reported;
 * AUTO loads it only when the fields could use it (no dlopen per plan on
 * machines without CUDA). */
static int nccl_local(gw_halo *h, int forced, const gw__halo_nccl_fns **fns, unsigned char uuid[16],
                      char *why, size_t n) {
  const char *w = NULL;
  gw_backend b = gw_context_backend(h->ctx);
  if (forced && !(*fns = gw__halo_nccl_load(&w))) {
    snprintf(why, n, "%s", w);
    return 0;
  }
  if (b != GW_BACKEND_CUDA) {
    snprintf(why, n, "the NCCL path needs the CUDA backend (the fields are on %s)",
             gw_backend_name(b));
    return 0;
  }
  for (int f = 0; f < h->nfields; f++)
    if (gw_kind(h->field[f]) != GW_MEM_DEVICE) {
      snprintf(why, n, "the NCCL path needs device memory (fields[%d] is %s memory)", f,
               gw_memkind_name(gw_kind(h->field[f])));
      return 0;
    }
  if (!forced && !(*fns = gw__halo_nccl_load(&w))) {
    snprintf(why, n, "%s", w);
    return 0;
  }
  if (!gw__halo_nccl_device_uuid(gw_context_device(h->ctx), uuid, &w)) {
    snprintf(why, n, "%s", w);
    return 0;
  }
  return 1;
}

/* MPI_2INT, for MPI_MINLOC: whether a rank can go on, and the lowest rank that cannot. */
typedef struct {
  int ok, rank;
} rank_ok;

/* NCCL refuses two ranks of one communicator on one GPU: compare the devices' UUIDs
 * (ordinals would not do: CUDA_VISIBLE_DEVICES may renumber each rank's GPUs). Collective
 * over h->comm. Two ranks sharing a GPU clear all->ok (all->rank -1, `why` names them). */
static gw_status check_gpus_apart(gw_halo *h, const char *fn, const unsigned char uuid[16],
                                  int size, rank_ok *all, char *why, size_t n) {
  gpu_of_rank *g = malloc((size_t)size * sizeof *g);
  unsigned char *u = malloc((size_t)size * 16);
  gw_status st = gw__halo_agree(
      h->comm, g && u ? GW_OK : gw__halo_fail(GW_ENOMEM, "%s: out of memory", fn), fn);
  if (st != GW_OK) { /* (before the Allgather, which every rank enters or none) */
    free(g);
    free(u);
    return st;
  }
  st = gw__halo_mpi(MPI_Allgather(uuid, 16, MPI_BYTE, u, 16, MPI_BYTE, h->comm), "MPI_Allgather",
                    -1);
  for (int r = 0; st == GW_OK && r < size; r++) {
    memcpy(g[r].uuid, u + 16 * (size_t)r, 16);
    g[r].rank = r;
  }
  if (st == GW_OK) qsort(g, (size_t)size, sizeof *g, by_uuid);
  for (int r = 1; st == GW_OK && r < size && all->ok; r++)
    if (!memcmp(g[r - 1].uuid, g[r].uuid, 16)) {
      all->ok = 0;
      all->rank = -1;
      snprintf(why, n,
               "ranks %d and %d of the plan's communicator share one GPU "
               "(NCCL needs one GPU "
               "per rank)",
               g[r - 1].rank, g[r].rank);
    }
  free(g);
  free(u);
  return st;
}

/* Bootstrap the communicator, every rank together. The id travels with rank 0's result, so
 * a failed ncclGetUniqueId fails every rank rather than leaving them in ncclCommInitRank;
 * then every rank learns whether every ncclCommInitRank worked, and a communicator made on
 * some ranks only is destroyed. *use = 1 when the plan has it. */
static gw_status bootstrap(gw_halo *h, const char *fn, const gw__halo_nccl_fns *fns, int rank,
                           int size, int forced, char *why, size_t n, int *use) {
  struct {
    int rc;
    gw_ncclUniqueId id;
  } boot;
  memset(&boot, 0, sizeof boot);
  if (rank == 0) boot.rc = (int)fns->GetUniqueId(&boot.id);
  gw_status st =
      gw__halo_mpi(MPI_Bcast(&boot, (int)sizeof boot, MPI_BYTE, 0, h->comm), "MPI_Bcast", -1);
  if (st != GW_OK) return st;
  char text[400];
  if (boot.rc != gw_ncclSuccess) {
    if (!forced) return GW_OK;
    return gw__halo_fail(GW_EBACKEND, "%s: ncclGetUniqueId (rank 0): %s", fn,
                         gw__halo_nccl_text((gw_ncclResult_t)boot.rc, NULL, text, sizeof text));
  }
  const char *w = NULL;
  int dev = gw_context_device(h->ctx), rc = -1;
  gw_ncclComm_t comm = NULL;
  if (gw__halo_nccl_push_device(dev, &w)) {
    rc = (int)fns->CommInitRank(&comm, size, boot.id, rank);
    gw__halo_nccl_pop_device(dev);
    if (rc != gw_ncclSuccess) {
      snprintf(why, n, "ncclCommInitRank (rank %d of %d, device %d): %s", rank, size, dev,
               gw__halo_nccl_text((gw_ncclResult_t)rc, NULL, text, sizeof text));
      comm = NULL;
    }
  } else {
    snprintf(why, n, "%s", w);
  }
  rank_ok mine = {rc == gw_ncclSuccess, rank}, all;
  st = gw__halo_mpi(MPI_Allreduce(&mine, &all, 1, MPI_2INT, MPI_MINLOC, h->comm), "MPI_Allreduce",
                    -1);
  h->nccl = fns; /* gw__halo_plan_free destroys the communicator, from here on */
  h->nccl_comm = comm;
  h->nccl_device = dev;
  if (st != GW_OK) return st;
  if (!all.ok) {
    if (comm) {
      (void)gw__halo_nccl_push_device(dev, &w);
      (void)fns->CommDestroy(comm);
      gw__halo_nccl_pop_device(dev);
    }
    h->nccl = NULL;
    h->nccl_comm = NULL;
    if (!forced) return GW_OK;
    if (mine.ok)
      return gw__halo_fail(GW_EBACKEND, "%s: ncclCommInitRank failed on rank %d", fn, all.rank);
    return gw__halo_fail(GW_EBACKEND, "%s: %s", fn, why);
  }
  *use = 1;
  return GW_OK;
}

/* Decide on NCCL with every rank of h->comm (MPI_Allreduce) and, when every
 * rank can use it, bootstrap the communicator: rank 0's ncclGetUniqueId,
 * MPI_Bcast, ncclCommInitRank on the fields' device. *use = 1 when the plan has
 * its NCCL communicator. Forced: every rank fails alike (GW_ENOTSUP where a
 * rank cannot use NCCL, GW_EBACKEND where NCCL failed); AUTO: any of those
 * leaves *use = 0 and GW_OK (the plan takes the MPI paths). */
/* Every rank calls it (`want`: this rank's path may be NCCL, AUTO or NCCL;
 * create() has made sure that `forced` is every rank's or none's). */
gw_status gw__halo_nccl_setup(gw_halo *h, const char *fn, int want, int forced, int *use) {
  char why[600] = "";
  const gw__halo_nccl_fns *fns = NULL;
  unsigned char uuid[16] = {0};
  int rank = 0, size = 1;
  gw_status st = gw__halo_mpi(MPI_Comm_rank(h->comm, &rank), "MPI_Comm_rank", -1);
  if (st == GW_OK) st = gw__halo_mpi(MPI_Comm_size(h->comm, &size), "MPI_Comm_size", -1);
  if (st != GW_OK) return st;
  rank_ok mine = {want && nccl_local(h, forced, &fns, uuid, why, sizeof why), rank}, all;
  if (!want) snprintf(why, sizeof why, "its path is %s", gw_halo_path_name(h->info.path));
  st = gw__halo_mpi(MPI_Allreduce(&mine, &all, 1, MPI_2INT, MPI_MINLOC, h->comm), "MPI_Allreduce",
                    -1);
  if (st != GW_OK) return st;
  if (all.ok && (st = check_gpus_apart(h, fn, uuid, size, &all, why, sizeof why)) != GW_OK)
    return st;
  if (!all.ok) {
    if (!forced) return GW_OK;
    if (mine.ok && all.rank >= 0)
      return gw__halo_fail(GW_ENOTSUP,
                           "%s: path NCCL: rank %d of the plan's communicator "
                           "cannot use NCCL (its "
                           "gw_halo_last_error() says why)",
                           fn, all.rank);
    return gw__halo_fail(GW_ENOTSUP, "%s: path NCCL: %s", fn, why);
  }
  return bootstrap(h, fn, fns, rank, size, forced, why, sizeof why, use);
}

int gw_halo_nccl_available(const char **why) {
  const char *w = "";
  int ok = gw__halo_nccl_load(&w) != NULL;
  if (why) *why = ok ? "" : w;
  return ok;
}

static gw_status nccl_exchange(gw_halo *h, int d);

/* NCCL connects to a peer on the first send/receive with it, which costs far
 * more than an update (buffers and handshakes): one exchange of every message
 * at create time (of zeroed buffers, nothing unpacked; collective like create)
 * keeps that out of the first update, so timed loops measure the exchange
 * itself. */
gw_status gw__halo_nccl_connect(gw_halo *h) {
  static const uint8_t zero = 0;
  h->q = h->stream; /* the queue of the exchanges below (begin() sets it for
                       updates) */
  gw_status st = h->dev_block ? gw_fill_async(h->dev_block, &zero, h->stream) : GW_OK;
  if (st != GW_OK) return gw__halo_call_failed(st, "gw_fill_async of the NCCL buffers", -1);
  for (int d = 0; d < h->ndim && st == GW_OK; d++)
    if (h->dim[d].link == LINK_MPI) st = nccl_exchange(h, d);
  if (st == GW_OK) st = gw__halo_sync_stream(h, "connecting NCCL to the neighbours");
  if (st == GW_OK) st = gw__halo_nccl_async(h);
  return st;
}

static gw_status nccl_failed(gw_halo *h, gw_ncclResult_t r, const char *call, int d, int peer) {
  char text[400];
  gw__halo_nccl_text(r, h->nccl_comm, text, sizeof text);
  if (peer >= 0) return gw__halo_fail(GW_EBACKEND, "%s (dim %d, rank %d): %s", call, d, peer, text);
  if (d >= 0) return gw__halo_fail(GW_EBACKEND, "%s (dim %d): %s", call, d, text);
  return gw__halo_fail(GW_EBACKEND, "%s: %s", call, text);
}

/* One NCCL group of dim d: the sends of messages [m0, m1) and the receives of
 * the messages of the opposite sides, receives in reverse side order (see
 * nccl_dim). */
static gw_status nccl_group(gw_halo *h, int d, int m0, int m1, int r0, int r1) {
  gw__halo_dim *hd = &h->dim[d];
  const gw__halo_nccl_fns *f = h->nccl;
  gw_cudaStream_t cs = gw_stream_native(h->q);
  gw_ncclResult_t r = f->GroupStart();
  if (r != gw_ncclSuccess) return nccl_failed(h, r, "ncclGroupStart", d, -1);
  gw_status st = GW_OK;
  for (int m = m0; m < m1 && st == GW_OK; m++) {
    const gw__halo_msg *g = &hd->msg[m];
    r = f->Send(h->msg_base + g->off_send, (size_t)g->bytes, gw_ncclUint8, hd->peer[g->side],
                h->nccl_comm, cs);
    if (r != gw_ncclSuccess) st = nccl_failed(h, r, "ncclSend", d, hd->peer[g->side]);
  }
  for (int m = r1 - 1; m >= r0 && st == GW_OK; m--) {
    const gw__halo_msg *g = &hd->msg[m];
    r = f->Recv(h->msg_base + g->off_recv, (size_t)g->bytes, gw_ncclUint8, hd->peer[g->side],
                h->nccl_comm, cs);
    if (r != gw_ncclSuccess) st = nccl_failed(h, r, "ncclRecv", d, hd->peer[g->side]);
  }
  r = f->GroupEnd(); /* always: a group left open would swallow the next
                        update's calls */
  if (st == GW_OK && r != gw_ncclSuccess) st = nccl_failed(h, r, "ncclGroupEnd", d, -1);
  return st;
}

/* The sends and receives of dim d (see nccl_dim for the order). */
static gw_status nccl_exchange(gw_halo *h, int d) {
  gw__halo_dim *hd = &h->dim[d];
  if (hd->nmsg == 2 && hd->peer[0] == hd->peer[1]) {
    /* msg 0 is side 0 (toward low; the peer gets it in its high halo = our msg
     * 1's recv) */
    gw_status st = nccl_group(h, d, 0, 1, 1, 2);
    return st == GW_OK ? nccl_group(h, d, 1, 2, 0, 1) : st;
  }
  return nccl_group(h, d, 0, hd->nmsg, 0, hd->nmsg);
}

/* Dim d over NCCL, all queued on the plan's stream without a host wait: packs
 * into the device buffers, the sends and receives, unpacks. NCCL matches a pair
 * of ranks' sends and receives in the order they are issued. Sends go toward
 * low (side 0) then high; the high halo is filled by the high neighbour's
 * message toward low, its first, so receives go high halo first. Where one rank
 * is both neighbours (a periodic dim of one or two ranks) the two exchanges go
 * in two groups, one per direction, so that each group holds one send and one
 * receive per peer and the pairing is unambiguous. */
gw_status gw__halo_nccl_dim(gw_halo *h, int d) {
  gw__halo_dim *hd = &h->dim[d];
  gw_status st;
  for (int k = 0; k < hd->nseg; k++) {
    st = gw__halo_queue_copy(h, hd->seg[k].send_seg, hd->seg[k].send_view, "gw_copy packing a face",
                             d);
    if (st != GW_OK) return st;
  }
  st = nccl_exchange(h, d);
  for (int k = 0; st == GW_OK && k < hd->nseg; k++)
    st = gw__halo_queue_copy(h, hd->seg[k].recv_view, hd->seg[k].recv_seg,
                             "gw_copy unpacking a face", d);
  return st;
}

/* NCCL reports some failures only asynchronously, on the communicator. */
gw_status gw__halo_nccl_async(gw_halo *h) {
  if (!h->nccl) return GW_OK;
  gw_ncclResult_t a = gw_ncclSuccess;
  gw_ncclResult_t r = h->nccl->CommGetAsyncError(h->nccl_comm, &a);
  if (r != gw_ncclSuccess) return nccl_failed(h, r, "ncclCommGetAsyncError", -1, -1);
  if (a != gw_ncclSuccess && a != gw_ncclInProgress)
    return nccl_failed(h, a, "NCCL (asynchronous error)", -1, -1);
  return GW_OK;
}
