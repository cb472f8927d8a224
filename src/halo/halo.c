/*
 * Halo plans: face views and buffers made once, then per update only gw_copy and MPI.
 *
 * A plan holds one or more fields (1-, 2- or 3-D, the communicator's dims), each with a
 * width per dim. Per field, dim d and side s (0 low, 1 high) it holds the interior face it
 * sends (send_view) and the halo it receives (recv_view); when the neighbour is another
 * rank, also the field's segment of the send and receive messages (send_seg, recv_seg:
 * wraps of pieces of one block made at create time). Every field's face of a side goes
 * into ONE message per neighbour and dim: the faces are packed side by side (256-byte
 * aligned), so an update costs one MPI message per neighbour and dim however many fields
 * it carries (ImplicitGlobalGrid's update_halo!(A, B, C)).
 * Messages toward the low neighbour carry tag 2d, toward the high one 2d+1 (plus an epoch,
 * see tag()), so two neighbours that are the same rank (a periodic dim of two) cannot be
 * confused.
 *
 * Ordering. Packs, unpacks and local (self-neighbour) copies are queued on the plan's own
 * stream, in dim order, so a dim's copies follow the previous dim's unpacks on the device
 * without the host waiting. The host waits only where MPI needs it: a side's message is
 * handed to MPI once its last segment's pending-work event (gw_array_pending) says the
 * pack landed — each side as soon as it is ready, not after the whole dim — and its
 * receive is unpacked as soon as MPI_Waitany returns it. The blocking calls then wait for
 * the stream (complete on return, as before); the stream-ordered calls (gw_halo_start_on /
 * finish_on) instead order the plan's stream after the caller's stream and the caller's
 * stream after the unpacks, with a one-byte "token" fill whose pending-work event is the
 * cross-stream event (gw_array_wait): no host synchronisation of the caller's work. A plan
 * without messages needs neither: its copies go on the caller's stream (begin()).
 *
 * Transports of the host path: MPI carries the faces (pipelined in pieces), or, between
 * ranks of one node, the GPU copies each face into the neighbour's buffer in an MPI
 * shared-memory window and MPI carries 0-byte tokens only (see shm_decide).
 */
#define _POSIX_C_SOURCE 200809L /* sysconf */

/* Host-path messages above this size travel in pieces of at most this size (a 256^3
 * float64 face, 512 KiB, in four), so MPI carries one piece while the GPU packs the next
 * and unpacks the previous one. */
#define GW_HALO_CHUNK_DEFAULT (128u * 1024u)

#include "halo_internal.h"
#include "nccl_api.h"
/* gw__copy_many: libgpuwrap's batched copy (exported for this library, not installed). */
#include "../core/internal.h"

#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LINK_NONE = 0, LINK_MPI, LINK_SELF };

typedef struct {
  gw_array *send_view[2]; /* interior faces of the field (NULL: no face along this dim/side) */
  gw_array *recv_view[2]; /* halo faces of the field */
} halo_face;

/* A segment: (a piece of) one field's face and its place in a message. Each segment is a
 * wrap of its own (its own root), so its pending-work event tells when its pack landed. */
typedef struct {
  gw_array *send_view, *recv_view; /* the face, or a piece of it along one axis */
  gw_array *send_seg, *recv_seg;   /* wraps of the message buffers */
} halo_seg;

/* One MPI message: every field's face of a side (aggregated), or, on the host path, one
 * piece of a large face (chunked, so that MPI carries piece k while piece k+1 is packed
 * and piece k-1 unpacked). Messages of a side go in order with one tag: MPI does not let
 * them overtake each other, so the receives match them in order. */
typedef struct {
  int side;
  int bytes;
  size_t off_send, off_recv; /* in the buffer block */
  int first, count;          /* its segments */
  int shm;                   /* through the shared-memory window (the peer is on this node) */
} halo_msg;

typedef struct {
  int link;            /* LINK_*: no field with a width here, or no neighbour, is LINK_NONE */
  int peer[2];         /* neighbour ranks, MPI_PROC_NULL at a non-periodic boundary */
  int bytes;           /* bytes of the aggregated message of a side (every field's face) */
  int nseg, nmsg;      /* LINK_MPI: both sides, side 0's first */
  halo_seg *seg;
  halo_msg *msg;
  MPI_Request *send_req; /* [nmsg] */
  MPI_Request *recv_req;
  /* Shared-memory transport (see shm_setup): per message sent, the receive of the peer's
   * "your buffer is free again" token (free_req), and per message received, the send of
   * ours (tok_req). shm_delta[s]: where side s's packs land, the peer's receive buffer
   * in this process's map of its window, minus our own send buffer's address. */
  MPI_Request *free_req;
  MPI_Request *tok_req;
  ptrdiff_t shm_delta[2];
  int shm_side[2];       /* side s's neighbour shares this rank's node window */
} halo_dim;

struct gw_halo {
  int nfields;
  int ndim;
  gw_array **field;   /* nfields references */
  int (*width)[3];    /* per field */
  halo_face *face;    /* [f * 3 + d] */
  gw_context *ctx;    /* borrowed from the first field, which the plan keeps alive */
  MPI_Comm comm;      /* the plan's duplicate, errors returned */
  gw_halo_info info;
  halo_dim dim[3];
  void *host_block;   /* HOST path: page-aligned, pinned once */
  size_t host_block_bytes;
  gw_array *dev_block; /* DEVICE path */
  char *msg_base;     /* address MPI uses for the block (host or device) */
  size_t chunk;       /* host path: messages above this many bytes travel in pieces (0: never) */
  gw_stream *stream;  /* the plan's stream; NULL: the backend has none, copies run one by one */
  gw_array *tok_in;   /* 1-byte device arrays whose pending-work events order the plan's */
  gw_array *tok_out;  /* stream after the caller's (in) and the caller's after it (out) */
  int inflight;       /* dim whose messages are in flight after a start, -1 none */
  int started;        /* a split-phase update is between start and finish */
  int tail;           /* a stream-ordered finish left unpacks queued on the plan's stream */
  int epoch;          /* failed updates so far, mod EPOCHS (see tag()) */
  /* NCCL path: the communicator (over comm's ranks, on the fields' device) and its calls.
   * Messages then go through NCCL on the plan's stream instead of MPI (see nccl_dim()). */
  const gw_nccl_fns *nccl;
  gw_ncclComm_t nccl_comm;
  int nccl_device;
  /* Consecutive periodic dims of one rank (a "self run"): every field's halo shell along
   * them in one prepared batch, one launch per update (see make_self). */
  gw__batch *self_batch[3]; /* at the run's first dim, NULL elsewhere */
  int self_last[3];         /* the run's last dim */
  /* Where this update queues its device work: the plan's stream, or, for a stream-ordered
   * update of a plan without messages (every dim local), the caller's stream itself (no
   * cross-stream joins to make; see begin()). */
  gw_stream *q;
  /* The host path between ranks of one node (shm_setup): the buffer block is this rank's
   * segment of an MPI shared-memory window, packs are copied by the GPU straight into the
   * neighbour's receive buffer there, and MPI carries only 0-byte tokens ("landed",
   * "free again"). MPI_WIN_NULL: messages carry the data (the MPI transport). */
  MPI_Win shm_win;
  MPI_Comm shm_node;   /* the plan's ranks on this node (the window's communicator) */
  void **shm_pinned;   /* peers' segments pinned in this process, [shm_npinned] */
  size_t *shm_pinned_bytes;
  int shm_npinned;
  int shm_owed;        /* tokens owed: unpacks out of our segment were queued since the last */
};

/* Tags carry the plan's epoch, which every failed update advances: after a failure a fast
 * neighbour's next messages must not match receives this rank is still cancelling. Per
 * epoch 6 tags for the messages (2d toward low, 2d + 1 toward high) and 6 for the shared-
 * memory transport's "free again" tokens; after the last epoch, the tags of create's
 * offset exchange. All below 32767, the least MPI_TAG_UB. */
#define EPOCHS 1000
static int tag(const gw_halo *h, int d, int toward_high) { return 12 * h->epoch + 2 * d + toward_high; }
static int tag_free(const gw_halo *h, int d, int toward_high) { return 12 * h->epoch + 6 + 2 * d + toward_high; }
static int tag_offset(int d, int toward_high) { return 12 * EPOCHS + 2 * d + toward_high; }

static void shm_close(gw_halo *h);

static void plan_free(gw_halo *h) {
  gw_stream_destroy(h->stream); /* waits for its work: nothing reads the buffers after this */
  shm_close(h);                 /* tokens in flight, the neighbours' segments pinned here */
  if (h->nccl_comm) {
    /* on the communicator's device (NCCL frees its device resources there) */
    const char *why;
    int pushed = gw__nccl_push_device(h->nccl_device, &why);
    (void)h->nccl->CommDestroy(h->nccl_comm);
    if (pushed) gw__nccl_pop_device(h->nccl_device);
  }
  if (h->face)
    for (int i = 0; i < 3 * h->nfields; i++)
      for (int s = 0; s < 2; s++) {
        gw_release(h->face[i].send_view[s]);
        gw_release(h->face[i].recv_view[s]);
      }
  for (int d = 0; d < 3; d++) {
    halo_dim *hd = &h->dim[d];
    for (int k = 0; hd->seg && k < hd->nseg; k++) {
      gw_release(hd->seg[k].send_view);
      gw_release(hd->seg[k].recv_view);
      gw_release(hd->seg[k].send_seg);
      gw_release(hd->seg[k].recv_seg);
    }
    free(hd->seg);
    free(hd->msg);
    free(hd->send_req);
    free(hd->recv_req);
    free(hd->free_req);
    free(hd->tok_req);
  }
  gw_release(h->tok_in);
  gw_release(h->tok_out);
  gw_release(h->dev_block);
  if (h->host_block) {
    (void)gw_unpin(h->ctx, h->host_block, h->host_block_bytes);
    if (h->shm_win == MPI_WIN_NULL) free(h->host_block);
  }
  if (h->shm_win != MPI_WIN_NULL) MPI_Win_free(&h->shm_win); /* after the unpin: its memory */
  if (h->shm_node != MPI_COMM_NULL) MPI_Comm_free(&h->shm_node);
  if (h->comm != MPI_COMM_NULL) MPI_Comm_free(&h->comm);
  if (h->field)
    for (int f = 0; f < h->nfields; f++) gw_release(h->field[f]);
  free(h->field);
  free(h->width);
  free(h->face);
  for (int d = 0; d < 3; d++) gw__batch_free(h->self_batch[d]);
  free(h);
}

/* A gpuwrap call failed: keep its status and its gw_last_error() text. d < 0: no dim. */
static gw_status gw_failed(gw_status st, const char *what, int d) {
  if (d < 0) return gw__halo_fail(st, "%s: %s: %s", what, gw_err_name(st), gw_last_error());
  return gw__halo_fail(st, "%s (dim %d): %s: %s", what, d, gw_err_name(st), gw_last_error());
}

/* Face view of field f along dim d: extent w at `at` along d, the whole extent along every
 * other dim, halo cells included (ImplicitGlobalGrid's sendranges). Along the dims before
 * d their halos are filled by then, so edges and corners get their diagonal neighbours'
 * values; along the dims after d the halo cells go out stale and are overwritten when that
 * dim is exchanged, unless it has no neighbour on that side: then the cell is a boundary
 * value, and the neighbour's copy of it is what the corner should get. Faces that spanned
 * only the interior of the later dims left such corners stale when the boundary dim came
 * after the exchanged one, and gave them the neighbour's value when it came before. */
static gw_status make_face(gw_halo *h, int f, int d, int64_t at, gw_array **out) {
  const int64_t *n = gw_shape(h->field[f]);
  const int *w = h->width[f];
  int64_t start[3], shape[3];
  for (int e = 0; e < h->ndim; e++) {
    start[e] = e == d ? at : 0;
    shape[e] = e == d ? w[e] : n[e];
  }
  gw_status st = gw_view(h->field[f], start, shape, NULL, out);
  return st == GW_OK ? GW_OK : gw_failed(st, "gw_view of a face", d);
}

/* gw__halo_agree, once per failure: after a failed agreement every rank knows, so the
 * later steps pass the status through without another collective (and the message
 * stays the one agreed on). */
static gw_status agree_once(MPI_Comm comm, gw_status st, const char *fn, int *failed) {
  if (*failed) return st;
  st = gw__halo_agree(comm, st, fn);
  *failed = st != GW_OK;
  return st;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* The segment of field f's face along d, side s: the whole face (axis < 0) or rows
 * [r0, r1) of it along `axis`; its buffers at send_at / recv_at. */
static gw_status make_seg(gw_halo *h, int d, int f, int s, int axis, int64_t r0, int64_t r1, size_t send_at,
                          size_t recv_at, halo_seg *sg) {
  halo_face *fc = &h->face[f * 3 + d];
  gw_status st = GW_OK;
  if (axis < 0) {
    sg->send_view = gw_retain(fc->send_view[s]);
    sg->recv_view = gw_retain(fc->recv_view[s]);
  } else {
    int64_t start[3] = {0, 0, 0}, shape[3];
    memcpy(shape, gw_shape(fc->send_view[s]), sizeof(int64_t) * (size_t)h->ndim);
    start[axis] = r0;
    shape[axis] = r1 - r0;
    st = gw_view(fc->send_view[s], start, shape, NULL, &sg->send_view);
    if (st == GW_OK) st = gw_view(fc->recv_view[s], start, shape, NULL, &sg->recv_view);
    if (st != GW_OK) return gw_failed(st, "gw_view of a face piece", d);
  }
  gw_dtype t = gw_array_dtype(h->field[f]);
  const int64_t *shape = gw_shape(sg->send_view);
  /* (shared memory: the send segment is the peer's receive buffer, shm_delta away) */
  st = gw_wrap(h->ctx, h->msg_base + send_at + h->dim[d].shm_delta[s], t, h->ndim, shape, NULL, 0, &sg->send_seg);
  if (st == GW_OK) st = gw_wrap(h->ctx, h->msg_base + recv_at, t, h->ndim, shape, NULL, 0, &sg->recv_seg);
  return st == GW_OK ? GW_OK : gw_failed(st, "gw_wrap of a halo buffer", d);
}

static size_t face_bytes(const gw_halo *h, int f, int d, int s) {
  const gw_array *v = h->face[f * 3 + d].send_view[s];
  return (size_t)gw_numel(v) * gw_dtype_size(gw_array_dtype(v));
}

/* Lay out the messages of dim d, side 0's then side 1's; each message's send buffer, then
 * its receive buffer, from *off on (256-byte aligned: any dtype, DMA friendly). With
 * fill = 0 only count and size them; with 1 also place the messages; with 2 also make the
 * segments (after shm_link, which needs the places to make them). A side whose
 * aggregated message is at most h->chunk bytes (or chunk 0) is one message holding every
 * field's face side by side; a larger one is one message per piece of each face, cut along
 * the face's first axis of extent > 1 (the axes before it have extent 1, so a piece is a
 * contiguous run of the C-order segment). */
static gw_status layout_dim(gw_halo *h, int d, size_t *off, int fill) {
  halo_dim *hd = &h->dim[d];
  int nm = 0, ns = 0;
  for (int s = 0; s < 2; s++) {
    if (hd->peer[s] == MPI_PROC_NULL) continue;
    if (h->chunk == 0 || (size_t)hd->bytes <= h->chunk || hd->shm_side[s]) { /* shared memory: no pieces */
      size_t send_at = *off, recv_at = *off + round_up((size_t)hd->bytes, 256), seg = 0;
      if (fill) hd->msg[nm] = (halo_msg){s, hd->bytes, send_at, recv_at, ns, 0, hd->shm_side[s]};
      for (int f = 0; f < h->nfields; f++) {
        if (!h->face[f * 3 + d].send_view[s]) continue;
        seg = round_up(seg, 256);
        if (fill == 2) {
          gw_status st = make_seg(h, d, f, s, -1, 0, 0, send_at + seg, recv_at + seg, &hd->seg[ns]);
          if (st != GW_OK) return st;
        }
        if (fill) hd->msg[nm].count++;
        seg += face_bytes(h, f, d, s);
        ns++;
      }
      *off += 2 * round_up((size_t)hd->bytes, 256);
      nm++;
      continue;
    }
    for (int f = 0; f < h->nfields; f++) {
      const gw_array *v = h->face[f * 3 + d].send_view[s];
      if (!v) continue;
      const int64_t *sh = gw_shape(v);
      int axis = h->ndim - 1;
      for (int a = 0; a < h->ndim; a++)
        if (sh[a] > 1) {
          axis = a;
          break;
        }
      size_t row = face_bytes(h, f, d, s) / (size_t)sh[axis];
      int64_t rows = row >= h->chunk ? 1 : (int64_t)(h->chunk / row);
      for (int64_t r0 = 0; r0 < sh[axis]; r0 += rows) {
        int64_t r1 = r0 + rows < sh[axis] ? r0 + rows : sh[axis];
        size_t bytes = (size_t)(r1 - r0) * row;
        size_t send_at = *off, recv_at = *off + round_up(bytes, 256);
        if (fill) hd->msg[nm] = (halo_msg){s, (int)bytes, send_at, recv_at, ns, 1, 0};
        if (fill == 2) {
          gw_status st = make_seg(h, d, f, s, axis, r0, r1, send_at, recv_at, &hd->seg[ns]);
          if (st != GW_OK) return st;
        }
        *off += 2 * round_up(bytes, 256);
        ns++;
        nm++;
      }
    }
  }
  if (!fill) {
    hd->nmsg = nm;
    hd->nseg = ns;
  }
  return GW_OK;
}

/* ---- the shared-memory transport of the host path ------------------------------------- */
/*
 * Two ranks of one node need not copy a face through MPI: measured on one H200 (two ranks,
 * Open MPI 4.1.6 shared memory), MPI_Sendrecv of a 512 KiB face took 93-98 us, against
 * ~24 us for the GPU to copy it out and ~25 us back in. So the plan's ranks on one node
 * share a window (each neighbour on the node goes through it, message by message; the
 * others through MPI): the buffer block is this rank's segment of an MPI shared-memory window
 * (MPI_Win_allocate_shared, pinned in every process that copies through it): a pack is
 * the GPU's copy straight into the neighbour's receive buffer, MPI carries a 0-byte
 * "landed" message instead of the face, and the neighbour unpacks out of its own segment.
 * Each receive buffer is written again only after its owner said it was unpacked (a 0-byte
 * "free again" token, sent once the unpacks are known complete and waited for before the
 * next pack into it), so one buffer per message suffices. Results are the MPI transport's
 * bit for bit; GPUWRAP_HALO_SHM=0 turns it off (then MPI carries the data, pipelined).
 */
static gw_status shm_decide(gw_halo *h, gw_halo_path path) {
  const char *env = getenv("GPUWRAP_HALO_SHM");
  int want = path == GW_HALO_PATH_HOST && !(env && strcmp(env, "0") == 0), all = 0;
  /* The node: the plan's ranks that share memory with this one. GPUWRAP_HALO_SHM_GROUP=N
   * makes it N consecutive ranks instead (tests of plans whose neighbours are partly on
   * other nodes, on one machine). */
  MPI_Comm node = MPI_COMM_NULL;
  const char *grp = getenv("GPUWRAP_HALO_SHM_GROUP");
  int mine = grp && *grp ? (int)strtol(grp, NULL, 10) : 0, group = 0, rank = 0;
  MPI_Comm_rank(h->comm, &rank);
  /* every rank must make the same collective call below: the largest setting wins */
  gw_status st = gw__halo_mpi(MPI_Allreduce(&mine, &group, 1, MPI_INT, MPI_MAX, h->comm), "MPI_Allreduce", -1);
  if (st != GW_OK) return st;
  st = group > 0
                     ? gw__halo_mpi(MPI_Comm_split(h->comm, (int)(rank / group), rank, &node), "MPI_Comm_split", -1)
                     : gw__halo_mpi(MPI_Comm_split_type(h->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
                                    "MPI_Comm_split_type", -1);
  if (st != GW_OK) return st;
  int nsize = 0;
  MPI_Comm_size(node, &nsize);
  /* Every rank decides alike (the window is collective over each node): neighbours on
   * this node then go through it, the others through MPI (make_dims). */
  st = gw__halo_mpi(MPI_Allreduce(&want, &all, 1, MPI_INT, MPI_MIN, h->comm), "MPI_Allreduce", -1);
  if (st == GW_OK && all && nsize > 1) h->shm_node = node;
  else MPI_Comm_free(&node);
  return st;
}

/* Whether `peer` (a rank of h->comm) shares this rank's node window. */
static int shm_peer(const gw_halo *h, int peer) {
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

/* This rank's window segment as the buffer block, pinned (collective over the node). */
static gw_status shm_block(gw_halo *h, size_t total) {
  long page = sysconf(_SC_PAGESIZE);
  size_t align = page > 0 ? (size_t)page : 4096, bytes = round_up(total, align);
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
    return gw_failed(st, "gw_pin of this rank's shared halo buffers (GPUWRAP_HALO_SHM=0: MPI carries the faces)", -1);
  h->host_block = base;
  h->host_block_bytes = bytes;
  h->msg_base = base;
  return GW_OK;
}

/* Where each side's packs land: every neighbour tells where its receive buffer for us
 * lies in its segment; its segment is found in this process's map of the window and
 * pinned here once (the GPU of this rank writes into it). Needs the messages placed
 * (layout_dim fill 1) and one message per side (no pieces on this transport). */
/* The messages through the window, in order: for (int d = 0, m = -1; next_shm(h, &d, &m);)
 * visits each (dim d, message m) whose msg[m].shm is set. */
static int next_shm(const gw_halo *h, int *d, int *m) {
  while (*d < h->ndim) {
    const halo_dim *hd = &h->dim[*d];
    if (hd->link == LINK_MPI)
      while (++*m < hd->nmsg)
        if (hd->msg[*m].shm) return 1;
    ++*d;
    *m = -1;
  }
  return 0;
}

static gw_status shm_link(gw_halo *h) {
  MPI_Group cg, ng;
  MPI_Comm_group(h->comm, &cg);
  MPI_Comm_group(h->shm_node, &ng);
  unsigned long long mine[3][2], theirs[3][2];
  MPI_Request req[12];
  int nreq = 0;
  gw_status st = GW_OK;
  for (int d = 0, m = -1; st == GW_OK && next_shm(h, &d, &m);) {
    const halo_msg *g = &h->dim[d].msg[m];
    mine[d][g->side] = g->off_recv;
    int peer = h->dim[d].peer[g->side];
    /* ours goes with the tag of our side; the neighbour's answer has the other one */
    st = gw__halo_mpi(MPI_Irecv(&theirs[d][g->side], 1, MPI_UNSIGNED_LONG_LONG, peer, tag_offset(d, !g->side),
                                h->comm, &req[nreq++]), "MPI_Irecv", d);
    if (st == GW_OK)
      st = gw__halo_mpi(MPI_Isend(&mine[d][g->side], 1, MPI_UNSIGNED_LONG_LONG, peer, tag_offset(d, g->side),
                                  h->comm, &req[nreq++]), "MPI_Isend", d);
  }
  if (nreq > 0) {
    gw_status w = gw__halo_mpi(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE), "MPI_Waitall (buffer offsets)", -1);
    if (st == GW_OK) st = w;
  }
  for (int d = 0, m = -1; st == GW_OK && next_shm(h, &d, &m);) {
    halo_dim *hd = &h->dim[d];
    const halo_msg *g = &hd->msg[m];
    int peer = hd->peer[g->side], nr = MPI_UNDEFINED, du = 0;
    MPI_Group_translate_ranks(cg, 1, &peer, ng, &nr);
    MPI_Aint size = 0;
    char *pbase = NULL;
    st = gw__halo_mpi(MPI_Win_shared_query(h->shm_win, nr, &size, &du, &pbase), "MPI_Win_shared_query", d);
    if (st != GW_OK) break;
    if ((unsigned long long)size < theirs[d][g->side] + (unsigned long long)g->bytes) {
      st = gw__halo_fail(GW_EINVAL, "gw_halo_create: rank %d's receive buffer along dim %d (%llu + %d bytes) "
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
    size_t *pb = pv ? realloc(h->shm_pinned_bytes, (size_t)(h->shm_npinned + 1) * sizeof *pb) : NULL;
    if (pb) h->shm_pinned_bytes = pb;
    if (!pv || !pb) {
      st = gw__halo_fail(GW_ENOMEM, "gw_halo_create: out of memory");
      break;
    }
    st = gw_pin(h->ctx, pbase, (size_t)size);
    if (st != GW_OK) {
      st = gw_failed(st, "gw_pin of a neighbour's shared halo buffers (GPUWRAP_HALO_SHM=0: MPI carries the faces)", d);
      break;
    }
    h->shm_pinned[h->shm_npinned] = pbase;
    h->shm_pinned_bytes[h->shm_npinned++] = (size_t)size;
  }
  MPI_Group_free(&cg);
  MPI_Group_free(&ng);
  return st;
}

/* After a failed update (every rank fails alike): drop the tokens in flight (cancel the
 * receives of "free again", complete the sends), then start the new epoch as if every
 * buffer had just been unpacked: send each sender its token and post the receive of each
 * receiver's. A neighbour may still be draining its unpacks of the failed update out of
 * its buffer when this rank's next pack is ready: that pack waits for its token. */
static void shm_resync(gw_halo *h) {
  for (int d = 0, m = -1; next_shm(h, &d, &m);) {
    halo_dim *hd = &h->dim[d];
    const halo_msg *g = &hd->msg[m];
    (void)MPI_Isend(h->msg_base, 0, MPI_BYTE, hd->peer[g->side], tag_free(h, d, g->side), h->comm, &hd->tok_req[m]);
    (void)MPI_Irecv(h->msg_base, 0, MPI_BYTE, hd->peer[g->side], tag_free(h, d, !g->side), h->comm, &hd->free_req[m]);
  }
}

/* Drop the tokens in flight: cancel the receives of "free again", complete the sends. */
static void shm_cancel(gw_halo *h) {
  for (int d = 0; d < 3; d++) {
    halo_dim *hd = &h->dim[d];
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

static gw_status shm_release(gw_halo *h);

/* Destroy (collective): the unpacks are done (the plan's stream is gone), so the tokens
 * still owed go out first, then every token this rank waits for comes in: each rank sends
 * before it waits, so every send meets its receive (nothing is left unmatched). */
static void shm_close(gw_halo *h) {
  if (h->shm_win == MPI_WIN_NULL) return;
  (void)shm_release(h);
  for (int d = 0; d < 3; d++) {
    halo_dim *hd = &h->dim[d];
    for (int m = 0; hd->free_req && m < hd->nmsg; m++) {
      if (hd->free_req[m] != MPI_REQUEST_NULL) MPI_Wait(&hd->free_req[m], MPI_STATUS_IGNORE);
      if (hd->tok_req[m] != MPI_REQUEST_NULL) MPI_Wait(&hd->tok_req[m], MPI_STATUS_IGNORE);
    }
  }
  for (int k = 0; k < h->shm_npinned; k++) (void)gw_unpin(h->ctx, h->shm_pinned[k], h->shm_pinned_bytes[k]);
  free(h->shm_pinned);
  free(h->shm_pinned_bytes);
  h->shm_pinned = NULL;
  h->shm_pinned_bytes = NULL;
  h->shm_npinned = 0;
}

/* The unpacks out of this rank's segment are complete: tell each sender its buffer here is
 * free again (a 0-byte message it waits for before its next pack into it). */
static gw_status shm_release(gw_halo *h) {
  if (!h->shm_owed) return GW_OK;
  h->shm_owed = 0;
  for (int d = 0, m = -1; next_shm(h, &d, &m);) {
    halo_dim *hd = &h->dim[d];
    const halo_msg *g = &hd->msg[m];
    if (hd->tok_req[m] != MPI_REQUEST_NULL) { /* the previous one: long delivered (eager) */
      int rc = MPI_Wait(&hd->tok_req[m], MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Wait (a buffer token)", d);
    }
    int rc = MPI_Isend(h->msg_base, 0, MPI_BYTE, hd->peer[g->side], tag_free(h, d, g->side), h->comm, &hd->tok_req[m]);
    if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Isend (a buffer token)", d);
  }
  return GW_OK;
}

/* One block holds every message (one page-aligned pinned block on the host path, one
 * device allocation on the device path); each segment is wrapped once, so nothing is
 * registered, wrapped or allocated per update. */
/* *failed: set when the ranks' agreement in here failed (every rank knows then). */
static gw_status make_buffers(gw_halo *h, int device_path, int *failed) {
  size_t total = 0;
  gw_status st = GW_OK;
  for (int d = 0; d < h->ndim; d++) {
    halo_dim *hd = &h->dim[d];
    if (hd->link != LINK_MPI) continue;
    (void)layout_dim(h, d, &total, 0);
    hd->seg = calloc((size_t)hd->nseg, sizeof *hd->seg);
    hd->msg = calloc((size_t)hd->nmsg, sizeof *hd->msg);
    hd->send_req = malloc((size_t)hd->nmsg * sizeof *hd->send_req);
    hd->recv_req = malloc((size_t)hd->nmsg * sizeof *hd->recv_req);
    hd->free_req = malloc((size_t)hd->nmsg * sizeof *hd->free_req);
    hd->tok_req = malloc((size_t)hd->nmsg * sizeof *hd->tok_req);
    if (!hd->seg || !hd->msg || !hd->send_req || !hd->recv_req || !hd->free_req || !hd->tok_req) {
      st = gw__halo_fail(GW_ENOMEM, "gw_halo_create: out of memory");
      break;
    }
    for (int m = 0; m < hd->nmsg; m++)
      hd->send_req[m] = hd->recv_req[m] = hd->free_req[m] = hd->tok_req[m] = MPI_REQUEST_NULL;
  }
  if (h->shm_node != MPI_COMM_NULL) {
    /* Collective over the node whatever happened here (a rank that fails alone must not
     * leave the others in the window's allocation or, later, in shm_link's exchange with
     * it): the window is made by every rank of the node. */
    gw_status w = shm_block(h, st == GW_OK ? total : 0);
    if (st == GW_OK) st = w;
  }
  /* Then every rank learns whether all pinned their segment: every rank of the plan, a rank
   * alone on its node (no window) too, or the others wait here for it. */
  st = agree_once(h->comm, st, "gw_halo_create", failed);
  if (st != GW_OK) return st;
  if (total == 0) {
    /* Every face is empty (a field of extent 0 along a dim that is not exchanged): nothing
     * to send. The messages were counted but never laid out, so posted they would all name
     * side 0 (calloc), every rank sending to one neighbour only and waiting for the other:
     * a hang. The neighbours of a face see its size alike, so both drop theirs. */
    for (int d = 0; d < h->ndim; d++) h->dim[d].nmsg = h->dim[d].nseg = 0;
    return GW_OK;
  }

  if (h->shm_win != MPI_WIN_NULL) {
    /* the block is this rank's window segment, pinned by shm_block */
  } else if (device_path) {
    int64_t n = (int64_t)total;
    st = gw_alloc(h->ctx, GW_MEM_DEVICE, GW_UINT8, 1, &n, &h->dev_block);
    if (st != GW_OK) return gw_failed(st, "gw_alloc of the device buffers", -1);
    h->msg_base = gw_data(h->dev_block);
  } else {
    long page = sysconf(_SC_PAGESIZE);
    size_t align = page > 0 ? (size_t)page : 4096;
    size_t bytes = round_up(total, align);
    char *base = aligned_alloc(align, bytes);
    if (!base) return gw__halo_fail(GW_ENOMEM, "cannot allocate %zu bytes of halo buffers", bytes);
    st = gw_pin(h->ctx, base, bytes);
    if (st != GW_OK) {
      free(base);
      return gw_failed(st, "gw_pin of the host buffers", -1);
    }
    h->host_block = base;
    h->host_block_bytes = bytes;
    h->msg_base = base;
  }
  h->info.buffer_bytes = total;
  for (int fill = 1; fill <= 2; fill++) {
    size_t off = 0;
    for (int d = 0; d < h->ndim; d++) {
      if (h->dim[d].link != LINK_MPI) continue;
      st = layout_dim(h, d, &off, fill);
      if (st != GW_OK) return st;
    }
    if (fill == 1 && h->shm_win != MPI_WIN_NULL && (st = shm_link(h)) != GW_OK) return st;
  }
  return GW_OK;
}

/* The one check made before any collective: `cart` is one communicator, so every rank of
 * it finds the same (a rank passing another communicator than its peers is outside what
 * any collective call can detect). */
static gw_status check_cart(const char *fn, MPI_Comm cart) {
  if (cart == MPI_COMM_NULL) return gw__halo_fail(GW_EINVAL, "%s: cart is MPI_COMM_NULL", fn);
  int topo = MPI_UNDEFINED;
  gw_status st = gw__halo_mpi(MPI_Topo_test(cart, &topo), "MPI_Topo_test", -1);
  if (st != GW_OK) return st;
  if (topo != MPI_CART)
    return gw__halo_fail(GW_EINVAL, "%s: cart is not a Cartesian communicator (MPI_Cart_create)", fn);
  return GW_OK;
}

/* This rank's arguments (`strict`: gw_halo_create's contract, 3-D, widths >= 1, kept for
 * its callers). Local: create() shares the outcome with every rank before going on. */
static gw_status check_args(const char *fn, const gw_halo_field *fields, int nfields, MPI_Comm cart,
                            gw_halo_path path, gw_halo **out, int strict) {
  if (!fields || !out) return gw__halo_fail(GW_EINVAL, "%s: %s is NULL", fn, !fields ? "fields" : "out");
  if (nfields < 1) return gw__halo_fail(GW_EINVAL, "%s: nfields is %d, must be >= 1", fn, nfields);
  if (path != GW_HALO_PATH_AUTO && path != GW_HALO_PATH_HOST && path != GW_HALO_PATH_DEVICE &&
      path != GW_HALO_PATH_NCCL)
    return gw__halo_fail(GW_EINVAL, "%s: unknown path %d", fn, (int)path);
  int ndim = 0;
  for (int f = 0; f < nfields; f++) {
    gw_array *a = fields[f].field;
    /* the argument as the caller wrote it: gw_halo_create's `field`, or fields[f].field */
    char who[40];
    if (strict) snprintf(who, sizeof who, "field");
    else snprintf(who, sizeof who, "fields[%d].field", f);
    if (!a) return gw__halo_fail(GW_EINVAL, "%s: %s is NULL", fn, who);
    int nd = gw_ndim(a);
    if (strict && nd != 3)
      return gw__halo_fail(GW_EINVAL, "%s: field has %d dims, a halo plan needs 3", fn, nd);
    if (nd < 1 || nd > 3)
      return gw__halo_fail(GW_EINVAL, "%s: %s has %d dims, a halo plan takes 1, 2 or 3", fn, who, nd);
    if (f == 0) ndim = nd;
    else if (nd != ndim)
      return gw__halo_fail(GW_EINVAL, "%s: %s has %d dims, fields[0].field %d: all fields of a "
                                      "plan have the communicator's dims", fn, who, nd, ndim);
    if (gw_is_readonly(a))
      return gw__halo_fail(GW_EREADONLY, "%s: %s is read-only, its halo cannot be written", fn, who);
    gw_context *c0 = gw_array_context(fields[0].field), *c = gw_array_context(a);
    if (gw_context_backend(c) != gw_context_backend(c0) || gw_context_device(c) != gw_context_device(c0))
      return gw__halo_fail(GW_EINVAL, "%s: %s belongs to %s device %d, fields[0].field to %s "
                                      "device %d: one plan, one device", fn, who, gw_backend_name(gw_context_backend(c)),
                           gw_context_device(c), gw_backend_name(gw_context_backend(c0)), gw_context_device(c0));
    const int64_t *n = gw_shape(a);
    for (int d = 0; d < nd; d++) {
      int w = fields[f].width[d];
      if (w < (strict ? 1 : 0))
        return strict ? gw__halo_fail(GW_EINVAL, "%s: width[%d] is %d, must be >= 1", fn, d, w)
                      : gw__halo_fail(GW_EINVAL, "%s: fields[%d].width[%d] is %d, must be >= 0 (0 turns the dim off)",
                                      fn, f, d, w);
      if (n[d] < 3 * (int64_t)w)
        return gw__halo_fail(GW_EINVAL,
                             "%s: %s extent %lld along dim %d is less than 3*width (%d): the interior "
                             "cannot hold the faces it sends", fn, who, (long long)n[d], d, 3 * w);
    }
    if (path == GW_HALO_PATH_DEVICE && !gw_data(a))
      return gw__halo_fail(GW_EINVAL, "%s: path DEVICE for a field the device cannot address (%s: %s "
                                      "memory)", fn, who, gw_memkind_name(gw_kind(a)));
  }
  int ndims = 0;
  gw_status st = gw__halo_mpi(MPI_Cartdim_get(cart, &ndims), "MPI_Cartdim_get", -1);
  if (st != GW_OK) return st;
  if (ndims != ndim)
    return gw__halo_fail(GW_EINVAL, "%s: cart has %d dims, the fields have %d (array dim d is decomposed "
                                    "along Cartesian dim d)", fn, ndims, ndim);
  return GW_OK;
}

/* ---- what neighbours must agree on ----------------------------------------------------- */
/*
 * Every rank checks its own arguments, but a message is made of two ranks' arguments: the
 * face a rank sends along d must be, byte for byte, the halo its neighbour receives. So
 * before anything is laid out each rank tells each neighbour (along every dim split over
 * ranks, widths of 0 included: a dim one rank exchanges and the other does not would hang)
 * its field count, and then per field its dtype, width along d and face extents; each
 * compares the neighbour's with its own. A difference fails every rank alike (create()
 * agrees on it), the message naming the argument and both ranks' values.
 */
enum { DESC = 5 }; /* per field: dtype, width[d], face extents along dims 0..2 */

static int tag_check(int d, int toward_high, int round) { return 12 * EPOCHS + 6 + 6 * round + 2 * d + toward_high; }

static void describe(const gw_halo *h, int d, int *out) {
  for (int f = 0; f < h->nfields; f++) {
    int *o = out + f * DESC;
    const int64_t *n = gw_shape(h->field[f]);
    o[0] = (int)gw_array_dtype(h->field[f]);
    o[1] = h->width[f][d];
    for (int e = 0; e < 3; e++) {
      int64_t x = e >= h->ndim ? 1 : e == d ? h->width[f][d] : n[e];
      o[2 + e] = x > INT_MAX ? -1 : (int)x; /* (an extent past INT_MAX has no face MPI carries) */
    }
  }
}

static gw_status mismatch(const gw_halo *h, const char *fn, int strict, int d, int s, int rank, int peer,
                          const int *mine, const int *theirs) {
  char where[64];
  snprintf(where, sizeof where, "its %c%c neighbour rank %d", s ? '+' : '-', "xyz"[d], peer);
  for (int f = 0; f < h->nfields; f++) {
    const int *a = mine + f * DESC, *b = theirs + f * DESC;
    char fld[32], wid[40];
    if (strict) {
      snprintf(fld, sizeof fld, "field");
      snprintf(wid, sizeof wid, "width[%d]", d);
    } else {
      snprintf(fld, sizeof fld, "fields[%d].field", f);
      snprintf(wid, sizeof wid, "fields[%d].width[%d]", f, d);
    }
    if (a[0] != b[0])
      return gw__halo_fail(GW_EINVAL, "%s: %s dtype: rank %d has %s, %s has %s (the faces along dim %d must match)",
                           fn, fld, rank, gw_dtype_name((gw_dtype)a[0]), where, gw_dtype_name((gw_dtype)b[0]), d);
    if (a[1] != b[1])
      return gw__halo_fail(GW_EINVAL, "%s: %s: rank %d has %d, %s has %d (the faces along dim %d must match)", fn,
                           wid, rank, a[1], where, b[1], d);
    for (int e = 0; e < 3 && a[1] > 0; e++)
      if (a[2 + e] != b[2 + e])
        return gw__halo_fail(GW_EINVAL, "%s: %s extent along dim %d: rank %d has %d, %s has %d (the faces along "
                                        "dim %d must match)", fn, fld, e, rank, a[2 + e], where, b[2 + e], d);
  }
  return GW_OK;
}

/* Point to point with each neighbour (every rank takes part, whatever it finds): this
 * rank's verdict, recorded; create() makes it every rank's. */
static gw_status check_neighbours(gw_halo *h, const char *fn, int strict) {
  int dims[3], periods[3], coords[3], peer[3][2], rank = 0;
  gw_status st = gw__halo_mpi(MPI_Cart_get(h->comm, h->ndim, dims, periods, coords), "MPI_Cart_get", -1);
  if (st == GW_OK) st = gw__halo_mpi(MPI_Comm_rank(h->comm, &rank), "MPI_Comm_rank", -1);
  for (int d = 0; st == GW_OK && d < h->ndim; d++)
    st = gw__halo_mpi(MPI_Cart_shift(h->comm, d, 1, &peer[d][0], &peer[d][1]), "MPI_Cart_shift", d);
  if (st != GW_OK) return st; /* (MPI failing on the plan's own duplicate: on every rank) */
  size_t per = (size_t)h->nfields * DESC;
  int *mine = malloc(3 * per * sizeof *mine), *theirs = malloc(6 * per * sizeof *theirs);
  /* -1: this rank cannot describe its fields; the pair then skips the second round */
  int my_n = mine && theirs ? h->nfields : -1, their_n[3][2];
  if (my_n < 0) st = gw__halo_fail(GW_ENOMEM, "%s: out of memory", fn);
  for (int d = 0; d < h->ndim && my_n > 0; d++) describe(h, d, mine + (size_t)d * per);
  MPI_Request req[24];
  for (int round = 0; round < 2; round++) {
    int nreq = 0;
    for (int d = 0; d < h->ndim; d++)
      for (int s = 0; s < 2 && dims[d] > 1; s++) {
        if (peer[d][s] == MPI_PROC_NULL || (round == 1 && (my_n < 0 || their_n[d][s] != my_n))) continue;
        void *in = round ? (void *)(theirs + (size_t)(2 * d + s) * per) : (void *)&their_n[d][s];
        void *out = round ? (void *)(mine + (size_t)d * per) : (void *)&my_n;
        int count = round ? (int)per : 1;
        int rc = MPI_Irecv(in, count, MPI_INT, peer[d][s], tag_check(d, !s, round), h->comm, &req[nreq]);
        if (rc == MPI_SUCCESS) {
          nreq++;
          rc = MPI_Isend(out, count, MPI_INT, peer[d][s], tag_check(d, s, round), h->comm, &req[nreq]);
          nreq += rc == MPI_SUCCESS;
        }
        if (rc != MPI_SUCCESS && st == GW_OK) st = gw__halo_mpi(rc, "MPI_Isend/MPI_Irecv (the plan's agreement)", d);
      }
    int rc = MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS && st == GW_OK) st = gw__halo_mpi(rc, "MPI_Waitall (the plan's agreement)", -1);
  }
  for (int d = 0; st == GW_OK && d < h->ndim; d++)
    for (int s = 0; st == GW_OK && s < 2 && dims[d] > 1; s++) {
      if (peer[d][s] == MPI_PROC_NULL || their_n[d][s] < 0) continue; /* (-1: that rank failed, and says so) */
      if (their_n[d][s] != my_n)
        st = gw__halo_fail(GW_EINVAL, "%s: nfields: rank %d has %d, its %c%c neighbour rank %d has %d (a message "
                                      "carries every field's face: the neighbours' fields must match)", fn, rank,
                           my_n, s ? '+' : '-', "xyz"[d], peer[d][s], their_n[d][s]);
      else
        st = mismatch(h, fn, strict, d, s, rank, peer[d][s], mine + (size_t)d * per, theirs + (size_t)(2 * d + s) * per);
    }
  free(mine);
  free(theirs);
  return st;
}

/* A rank's own periodic neighbour goes through NCCL (a send/receive to itself) only with
 * GPUWRAP_HALO_NCCL_SELF=1: measured on one H200 (256^3 float64, periodic, one rank), the
 * pack + NCCL self-copy + unpack took 0.115-0.150 ms per update against 0.046 ms for the
 * direct face copies, so by default those dims are copied directly, as on the other paths,
 * and NCCL carries only the faces of other ranks. */
static int nccl_self(void) {
  const char *env = getenv("GPUWRAP_HALO_NCCL_SELF");
  return env && strcmp(env, "1") == 0;
}

/* Neighbours, links, face views and message sizes of every dim. */
static gw_status make_dims(gw_halo *h) {
  int dims[3], periods[3], coords[3];
  gw_status st = gw__halo_mpi(MPI_Cart_get(h->comm, h->ndim, dims, periods, coords), "MPI_Cart_get", -1);
  if (st != GW_OK) return st;
  for (int d = 0; d < h->ndim; d++) {
    halo_dim *hd = &h->dim[d];
    st = gw__halo_mpi(MPI_Cart_shift(h->comm, d, 1, &hd->peer[0], &hd->peer[1]), "MPI_Cart_shift", d);
    if (st != GW_OK) return st;
    int any = 0;
    for (int f = 0; f < h->nfields; f++) any |= h->width[f][d] > 0;
    if (!any || (hd->peer[0] == MPI_PROC_NULL && hd->peer[1] == MPI_PROC_NULL)) continue; /* LINK_NONE */
    /* On the NCCL path with GPUWRAP_HALO_NCCL_SELF=1 a rank's own periodic neighbour is an
     * NCCL send/receive to itself too (see nccl_self()). */
    hd->link = dims[d] == 1 && !(h->nccl && nccl_self()) ? LINK_SELF : LINK_MPI;
    for (int s = 0; s < 2 && hd->link == LINK_MPI; s++) {
      hd->shm_side[s] = shm_peer(h, hd->peer[s]);
      h->info.shared_memory |= hd->shm_side[s];
    }
    uint64_t bytes = 0;
    for (int f = 0; f < h->nfields; f++) {
      int w = h->width[f][d];
      if (w == 0) continue;
      const int64_t *n = gw_shape(h->field[f]);
      halo_face *fc = &h->face[f * 3 + d];
      for (int s = 0; s < 2; s++) {
        if (hd->peer[s] == MPI_PROC_NULL) continue;
        st = make_face(h, f, d, s ? n[d] - 2 * w : w, &fc->send_view[s]);
        if (st == GW_OK) st = make_face(h, f, d, s ? n[d] - w : 0, &fc->recv_view[s]);
        if (st != GW_OK) return st;
      }
      int s0 = hd->peer[0] != MPI_PROC_NULL ? 0 : 1;
      uint64_t face = (uint64_t)gw_numel(fc->send_view[s0]) * gw_dtype_size(gw_array_dtype(h->field[f]));
      bytes = round_up(bytes, 256) + face; /* the segment layout of make_buffers */
      for (int s = 0; s < 2; s++)
        if (hd->peer[s] != MPI_PROC_NULL && hd->link == LINK_SELF) h->info.bytes_local += (size_t)face;
    }
    if (bytes > INT_MAX)
      return gw__halo_fail(GW_EINVAL, "gw_halo_create: a message along dim %d has %llu bytes, more "
                                      "than one MPI message carries (INT_MAX)", d, (unsigned long long)bytes);
    hd->bytes = (int)bytes;
    if (hd->link == LINK_MPI)
      for (int s = 0; s < 2; s++)
        if (hd->peer[s] != MPI_PROC_NULL) {
          h->info.neighbours++;
          h->info.bytes_sent += (size_t)hd->bytes;
        }
  }
  return GW_OK;
}

/*
 * The local copies of each run of consecutive periodic dims of one rank (LINK_SELF),
 * folded into one batch made once. Done dim by dim (each face reaching over the previous
 * dims' halos, make_face), the copies write every cell of the run's halo shell once and
 * give it the value of the cell that wraps each of its halo coordinates around its dim:
 * along a run dim of width w and extent n, the low halo [0, w) reads [n - 2w, n - w), the
 * high halo [n - w, n) reads [w, 2w), the rest [w, n - w) reads itself; dims outside the run
 * span their whole extent (the faces' extents, make_face). So the shell
 * is cut into boxes, one per combination of those classes that touches a halo (up to 26
 * per field in 3-D), each a plain copy from an interior box: no box reads what another
 * writes, so the batch is independent and runs as one launch, whose result equals the dim
 * by dim copies' bit for bit.
 */
static gw_status make_self(gw_halo *h) {
  for (int d = 0; d < h->ndim; d++) h->self_last[d] = d;
  int cap = 27 * h->nfields, n = 0;
  gw_array **dst = calloc((size_t)cap, sizeof *dst), **src = calloc((size_t)cap, sizeof *src);
  gw_status st = dst && src ? GW_OK : gw__halo_fail(GW_ENOMEM, "gw_halo_create: out of memory");
  for (int d0 = 0; st == GW_OK && d0 < h->ndim; d0++) {
    if (h->dim[d0].link != LINK_SELF) continue;
    int d1 = d0;
    while (d1 + 1 < h->ndim && h->dim[d1 + 1].link == LINK_SELF) d1++;
    n = 0;
    for (int f = 0; st == GW_OK && f < h->nfields; f++) {
      const int64_t *ext = gw_shape(h->field[f]);
      const int *w = h->width[f];
      int combos = 1;
      for (int e = d0; e <= d1; e++) combos *= 3;
      for (int c = 0; st == GW_OK && c < combos; c++) {
        int64_t dlo[3], slo[3], len[3];
        int halo = 0, skip = 0;
        for (int e = 0, code = c; e < h->ndim; e++) {
          int cls = 1; /* 0 low halo, 1 the rest, 2 high halo */
          if (e >= d0 && e <= d1) {
            cls = code % 3;
            code /= 3;
          }
          if (e < d0 || e > d1 || w[e] == 0) { /* the whole extent: outside the run, or no halo */
            skip |= cls != 1;          /* (a halo class of a dim without one: no box) */
            dlo[e] = slo[e] = 0;
            len[e] = ext[e];
          } else if (cls == 1) {
            dlo[e] = slo[e] = w[e];
            len[e] = ext[e] - 2 * w[e];
          } else {
            halo = 1;
            dlo[e] = cls == 0 ? 0 : ext[e] - w[e];
            slo[e] = cls == 0 ? ext[e] - 2 * w[e] : w[e];
            len[e] = w[e];
          }
        }
        if (!halo || skip) continue;
        st = gw_view(h->field[f], dlo, len, NULL, &dst[n]);
        if (st == GW_OK) {
          st = gw_view(h->field[f], slo, len, NULL, &src[n]);
          if (st != GW_OK) gw_release(dst[n]);
        }
        if (st == GW_OK) n++;
        else st = gw_failed(st, "gw_view of a halo box", d0);
      }
    }
    if (st == GW_OK && n > 0) {
      st = gw__batch_make(dst, (const gw_array *const *)src, n, &h->self_batch[d0]);
      if (st != GW_OK) st = gw_failed(st, "preparing the local halo copies", d0);
    }
    for (int k = 0; k < n; k++) { /* the batch holds its own references */
      gw_release(dst[k]);
      gw_release(src[k]);
    }
    n = 0;
    h->self_last[d0] = d1;
    d0 = d1;
  }
  free(dst);
  free(src);
  return st;
}

/* ---- the NCCL path: choosing it and bootstrapping its communicator ---------------------- */

typedef struct {
  unsigned char uuid[16];
  int rank;
} gpu_of_rank;

static int by_uuid(const void *a, const void *b) {
  const gpu_of_rank *x = a, *y = b;
  int c = memcmp(x->uuid, y->uuid, sizeof x->uuid);
  return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

/* Can this rank use NCCL for h's fields? 1, or 0 with *why. `forced`: load NCCL first, so
 * that where it is absent the loader's message is the one reported; AUTO loads it only
 * when the fields could use it (no dlopen per plan on machines without CUDA). */
static int nccl_local(gw_halo *h, int forced, const gw_nccl_fns **fns, unsigned char uuid[16], char *why,
                      size_t n) {
  const char *w = NULL;
  gw_backend b = gw_context_backend(h->ctx);
  if (forced && !(*fns = gw__nccl_load(&w))) {
    snprintf(why, n, "%s", w);
    return 0;
  }
  if (b != GW_BACKEND_CUDA) {
    snprintf(why, n, "the NCCL path needs the CUDA backend (the fields are on %s)", gw_backend_name(b));
    return 0;
  }
  for (int f = 0; f < h->nfields; f++)
    if (gw_kind(h->field[f]) != GW_MEM_DEVICE) {
      snprintf(why, n, "the NCCL path needs device memory (fields[%d] is %s memory)", f,
               gw_memkind_name(gw_kind(h->field[f])));
      return 0;
    }
  if (!forced && !(*fns = gw__nccl_load(&w))) {
    snprintf(why, n, "%s", w);
    return 0;
  }
  if (!gw__nccl_device_uuid(gw_context_device(h->ctx), uuid, &w)) {
    snprintf(why, n, "%s", w);
    return 0;
  }
  return 1;
}

/* Decide on NCCL with every rank of h->comm (MPI_Allreduce) and, when every rank can use
 * it, bootstrap the communicator: rank 0's ncclGetUniqueId, MPI_Bcast, ncclCommInitRank on
 * the fields' device. *use = 1 when the plan has its NCCL communicator. Forced: every rank
 * fails alike (GW_ENOTSUP where a rank cannot use NCCL, GW_EBACKEND where NCCL failed);
 * AUTO: any of those leaves *use = 0 and GW_OK (the plan takes the MPI paths). */
/* Every rank calls it (`want`: this rank's path may be NCCL, AUTO or NCCL; create() has
 * made sure that `forced` is every rank's or none's). */
static gw_status nccl_setup(gw_halo *h, const char *fn, int want, int forced, int *use) {
  char why[600] = "";
  const gw_nccl_fns *fns = NULL;
  unsigned char uuid[16] = {0};
  int rank = 0, size = 1;
  gw_status st = gw__halo_mpi(MPI_Comm_rank(h->comm, &rank), "MPI_Comm_rank", -1);
  if (st == GW_OK) st = gw__halo_mpi(MPI_Comm_size(h->comm, &size), "MPI_Comm_size", -1);
  if (st != GW_OK) return st;
  struct {
    int ok, rank;
  } mine = {want && nccl_local(h, forced, &fns, uuid, why, sizeof why), rank}, all;
  if (!want) snprintf(why, sizeof why, "its path is %s", gw_halo_path_name(h->info.path));
  st = gw__halo_mpi(MPI_Allreduce(&mine, &all, 1, MPI_2INT, MPI_MINLOC, h->comm), "MPI_Allreduce", -1);
  if (st != GW_OK) return st;
  if (all.ok) {
    /* NCCL refuses two ranks of one communicator on one GPU: compare the devices' UUIDs
     * (ordinals would not do: CUDA_VISIBLE_DEVICES may renumber each rank's GPUs). */
    gpu_of_rank *g = malloc((size_t)size * sizeof *g);
    unsigned char *u = malloc((size_t)size * 16);
    st = gw__halo_agree(h->comm, g && u ? GW_OK : gw__halo_fail(GW_ENOMEM, "%s: out of memory", fn), fn);
    if (st != GW_OK) { /* (before the Allgather, which every rank enters or none) */
      free(g);
      free(u);
      return st;
    }
    st = gw__halo_mpi(MPI_Allgather(uuid, 16, MPI_BYTE, u, 16, MPI_BYTE, h->comm), "MPI_Allgather", -1);
    for (int r = 0; st == GW_OK && r < size; r++) {
      memcpy(g[r].uuid, u + 16 * (size_t)r, 16);
      g[r].rank = r;
    }
    if (st == GW_OK) qsort(g, (size_t)size, sizeof *g, by_uuid);
    for (int r = 1; st == GW_OK && r < size && all.ok; r++)
      if (!memcmp(g[r - 1].uuid, g[r].uuid, 16)) {
        all.ok = 0;
        all.rank = -1;
        snprintf(why, sizeof why, "ranks %d and %d of the plan's communicator share one GPU (NCCL needs one GPU "
                 "per rank)", g[r - 1].rank, g[r].rank);
      }
    free(g);
    free(u);
    if (st != GW_OK) return st;
  }
  if (!all.ok) {
    if (!forced) return GW_OK;
    if (mine.ok && all.rank >= 0)
      return gw__halo_fail(GW_ENOTSUP, "%s: path NCCL: rank %d of the plan's communicator cannot use NCCL (its "
                                       "gw_halo_last_error() says why)", fn, all.rank);
    return gw__halo_fail(GW_ENOTSUP, "%s: path NCCL: %s", fn, why);
  }

  /* Bootstrap. The id travels with rank 0's result, so a failed ncclGetUniqueId fails
   * every rank rather than leaving them in ncclCommInitRank. */
  struct {
    int rc;
    gw_ncclUniqueId id;
  } boot;
  memset(&boot, 0, sizeof boot);
  if (rank == 0) boot.rc = (int)fns->GetUniqueId(&boot.id);
  st = gw__halo_mpi(MPI_Bcast(&boot, (int)sizeof boot, MPI_BYTE, 0, h->comm), "MPI_Bcast", -1);
  if (st != GW_OK) return st;
  char text[400];
  if (boot.rc != gw_ncclSuccess) {
    if (!forced) return GW_OK;
    return gw__halo_fail(GW_EBACKEND, "%s: ncclGetUniqueId (rank 0): %s", fn,
                         gw__nccl_text((gw_ncclResult_t)boot.rc, NULL, text, sizeof text));
  }
  const char *w = NULL;
  int dev = gw_context_device(h->ctx), rc = -1;
  gw_ncclComm_t comm = NULL;
  if (gw__nccl_push_device(dev, &w)) {
    rc = (int)fns->CommInitRank(&comm, size, boot.id, rank);
    gw__nccl_pop_device(dev);
    if (rc != gw_ncclSuccess) {
      snprintf(why, sizeof why, "ncclCommInitRank (rank %d of %d, device %d): %s", rank, size, dev,
               gw__nccl_text((gw_ncclResult_t)rc, NULL, text, sizeof text));
      comm = NULL;
    }
  } else {
    snprintf(why, sizeof why, "%s", w);
  }
  mine.ok = rc == gw_ncclSuccess;
  st = gw__halo_mpi(MPI_Allreduce(&mine, &all, 1, MPI_2INT, MPI_MINLOC, h->comm), "MPI_Allreduce", -1);
  h->nccl = fns; /* plan_free destroys the communicator, from here on */
  h->nccl_comm = comm;
  h->nccl_device = dev;
  if (st != GW_OK) return st;
  if (!all.ok) {
    if (comm) {
      (void)gw__nccl_push_device(dev, &w);
      (void)fns->CommDestroy(comm);
      gw__nccl_pop_device(dev);
    }
    h->nccl = NULL;
    h->nccl_comm = NULL;
    if (!forced) return GW_OK;
    if (mine.ok) return gw__halo_fail(GW_EBACKEND, "%s: ncclCommInitRank failed on rank %d", fn, all.rank);
    return gw__halo_fail(GW_EBACKEND, "%s: %s", fn, why);
  }
  *use = 1;
  return GW_OK;
}

int gw_halo_nccl_available(const char **why) {
  const char *w = "";
  int ok = gw__nccl_load(&w) != NULL;
  if (why) *why = ok ? "" : w;
  return ok;
}

static gw_status nccl_async(gw_halo *h);
static gw_status nccl_exchange(gw_halo *h, int d);
static gw_status sync_stream(gw_halo *h, const char *what);

/* NCCL connects to a peer on the first send/receive with it, which costs far more than
 * an update (buffers and handshakes): one exchange of every message at create time (of
 * zeroed buffers, nothing unpacked; collective like create) keeps that out of the first
 * update, so timed loops measure the exchange itself. */
static gw_status nccl_connect(gw_halo *h) {
  static const uint8_t zero = 0;
  h->q = h->stream; /* the queue of the exchanges below (begin() sets it for updates) */
  gw_status st = h->dev_block ? gw_fill_async(h->dev_block, &zero, h->stream) : GW_OK;
  if (st != GW_OK) return gw_failed(st, "gw_fill_async of the NCCL buffers", -1);
  for (int d = 0; d < h->ndim && st == GW_OK; d++)
    if (h->dim[d].link == LINK_MPI) st = nccl_exchange(h, d);
  if (st == GW_OK) st = sync_stream(h, "connecting NCCL to the neighbours");
  if (st == GW_OK) st = nccl_async(h);
  return st;
}

/* A plan is all or nothing on every rank: each collective step is entered by every rank
 * of the plan's communicator whatever it found before, so a rank that fails first tells
 * the others (gw__halo_agree) before the next collective step, and the result is agreed
 * on at the end. `missing`: a NULL argument of gw_halo_create, found before this call. */
static gw_status create(const char *fn, const gw_halo_field *fields, int nfields, MPI_Comm cart,
                        gw_halo_path path, gw_halo **out, int strict, const char *missing) {
  gw_status st = check_cart(fn, cart);
  if (st != GW_OK) return st;
  MPI_Comm comm = MPI_COMM_NULL;
  st = gw__halo_mpi(MPI_Comm_dup(cart, &comm), "MPI_Comm_dup", -1);
  if (st != GW_OK) return st;
  st = gw__halo_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", -1);
  if (st == GW_OK) st = missing ? gw__halo_fail(GW_EINVAL, "%s: %s is NULL", fn, missing)
                                : check_args(fn, fields, nfields, comm, path, out, strict);
  gw_halo *h = st == GW_OK ? calloc(1, sizeof *h) : NULL;
  if (st == GW_OK && h) {
    h->comm = comm; /* plan_free frees it from here on */
    h->shm_win = MPI_WIN_NULL;
    h->shm_node = MPI_COMM_NULL;
    h->inflight = -1;
    h->nfields = nfields;
    h->ndim = gw_ndim(fields[0].field);
    h->field = calloc((size_t)nfields, sizeof *h->field);
    h->width = calloc((size_t)nfields, sizeof *h->width);
    h->face = calloc((size_t)nfields * 3, sizeof *h->face);
  }
  if (st == GW_OK && (!h || !h->field || !h->width || !h->face)) st = gw__halo_fail(GW_ENOMEM, "%s: out of memory", fn);
  st = gw__halo_agree(comm, st, fn);
  if (st == GW_OK) {
    /* NCCL is every rank's path or none's: its communicator spans them all. */
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    struct {
      int v, rank;
    } in[2] = {{path == GW_HALO_PATH_NCCL ? 0 : 1, rank}, {path == GW_HALO_PATH_NCCL ? 100 : (int)path, rank}}, all[2];
    st = gw__halo_mpi(MPI_Allreduce(in, all, 2, MPI_2INT, MPI_MINLOC, comm), "MPI_Allreduce", -1);
    if (st == GW_OK && all[0].v == 0 && all[1].v < 100)
      st = gw__halo_fail(GW_EINVAL, "%s: path: rank %d has nccl, rank %d has %s (the NCCL path is every rank's or "
                                    "none's)", fn, all[0].rank, all[1].rank, gw_halo_path_name((gw_halo_path)all[1].v));
  }
  if (st != GW_OK) {
    if (h && h->comm != MPI_COMM_NULL) plan_free(h);
    else {
      free(h);
      MPI_Comm_free(&comm);
    }
    return st;
  }
  int device_ok = 1;
  for (int f = 0; f < nfields; f++) {
    h->field[f] = gw_retain(fields[f].field);
    for (int d = 0; d < h->ndim; d++) h->width[f][d] = fields[f].width[d];
    gw_memkind kind = gw_kind(fields[f].field);
    device_ok &= (kind == GW_MEM_DEVICE || kind == GW_MEM_MANAGED) && gw_data(fields[f].field) != NULL;
  }
  h->ctx = gw_array_context(fields[0].field);

  h->info.gpu_aware = path == GW_HALO_PATH_DEVICE || gw__halo_gpu_aware(gw_context_backend(h->ctx));
  h->info.path = path;
  /* NCCL (forced, or AUTO's first choice) is decided by every rank together: its
   * communicator is collective, so no rank may take it alone. */
  int use = 0;
  st = nccl_setup(h, fn, path == GW_HALO_PATH_AUTO || path == GW_HALO_PATH_NCCL, path == GW_HALO_PATH_NCCL, &use);
  if (st == GW_OK && use) path = GW_HALO_PATH_NCCL;
  if (path == GW_HALO_PATH_AUTO) path = h->info.gpu_aware && device_ok ? GW_HALO_PATH_DEVICE : GW_HALO_PATH_HOST;
  h->info.path = path;
  if (st == GW_OK) {
    /* Pieces of large host-path messages pipeline the three stages (pack, MPI, unpack).
     * GPUWRAP_HALO_CHUNK=bytes overrides the size (0: whole messages); the ranks agree on
     * the smallest, as both ends of a message must cut it alike (every rank takes part,
     * whatever path its fields gave it). The device path leaves pipelining to MPI. */
    unsigned long long c = GW_HALO_CHUNK_DEFAULT, all = 0;
    const char *env = getenv("GPUWRAP_HALO_CHUNK");
    if (env && *env) c = strtoull(env, NULL, 0);
    if (path != GW_HALO_PATH_HOST) c = 0; /* a device-path neighbour sends whole messages */
    st = shm_decide(h, path);
    if (st == GW_OK)
      st = gw__halo_mpi(MPI_Allreduce(&c, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, h->comm), "MPI_Allreduce", -1);
    h->chunk = (size_t)all;
  }
  /* what each message's two ends must share (its own agreement: every rank fails alike) */
  int failed = st != GW_OK; /* (alike on every rank so far) */
  if (st == GW_OK) st = agree_once(h->comm, check_neighbours(h, fn, strict), fn, &failed);
  if (st == GW_OK) st = make_dims(h);
  if (st == GW_OK) st = make_self(h);
  /* The buffers are made collectively (the shared-memory window, the neighbours' offsets in
   * it): every rank goes there or none, and learns afterwards whether every rank's worked. */
  st = agree_once(h->comm, st, fn, &failed);
  if (st == GW_OK) st = make_buffers(h, path == GW_HALO_PATH_DEVICE || path == GW_HALO_PATH_NCCL, &failed);
  if (st == GW_OK && h->info.neighbours + (h->info.bytes_local > 0) > 0) {
    st = gw_stream_create(h->ctx, &h->stream);
    if (st == GW_ENOTSUP) st = GW_OK; /* the backend has no streams: copies run one by one */
    else if (st != GW_OK) st = gw_failed(st, "gw_stream_create", -1);
  }
  /* NCCL's first exchange is collective: no rank enters it alone */
  if (h->nccl) st = agree_once(h->comm, st, fn, &failed);
  if (st == GW_OK && h->nccl && h->stream) st = nccl_connect(h);
  /* a plan on some ranks only would leave the others waiting in their first update */
  st = agree_once(h->comm, st, fn, &failed);
  if (st != GW_OK) {
    plan_free(h);
    return st;
  }
  *out = h;
  return GW_OK;
}

gw_status gw_halo_create(gw_array *field, MPI_Comm cart, const int width[3], gw_halo_path path,
                         gw_halo **out) {
  /* a NULL argument fails in create(), on every rank alike, not here before its collectives */
  const char *missing = !field ? "field" : !width ? "width" : !out ? "out" : NULL;
  gw_halo_field one = {field, {width ? width[0] : 0, width ? width[1] : 0, width ? width[2] : 0}};
  return create("gw_halo_create", &one, 1, cart, path, out, 1, missing);
}

gw_status gw_halo_create_multi(const gw_halo_field fields[], int nfields, MPI_Comm cart, gw_halo_path path,
                               gw_halo **out) {
  return create("gw_halo_create_multi", fields, nfields, cart, path, out, 0, NULL);
}

void gw_halo_destroy(gw_halo *h) {
  if (!h) return;
  if (h->started) (void)gw_halo_finish(h);
  plan_free(h);
}

gw_status gw_halo_query(const gw_halo *h, gw_halo_info *out) {
  if (!h || !out) return gw__halo_fail(GW_EINVAL, "gw_halo_query: %s is NULL", !h ? "plan" : "out");
  *out = h->info;
  return GW_OK;
}

/* ---- updates ------------------------------------------------------------------------- */

/* dst <- src on the plan's stream (or at once without one). */
static gw_status queue_copy(gw_halo *h, gw_array *dst, const gw_array *src, const char *what, int d) {
  gw_status st = h->q ? gw_copy_async(dst, src, h->q) : gw_copy(dst, src);
  return st == GW_OK ? GW_OK : gw_failed(st, what, d);
}

static gw_status sync_stream(gw_halo *h, const char *what) {
  if (!h->q) return GW_OK;
  gw_status st = gw_stream_synchronize(h->q);
  return st == GW_OK ? GW_OK : gw_failed(st, what, -1);
}

/* Wait until the copy into `seg` (and everything before it on the plan's stream) landed.
 * Polls the segment's pending-work event rather than synchronising the stream, so the
 * side packed first goes to MPI while the other is still being packed. A poll that never
 * ends (an event whose query keeps failing) falls back to the stream synchronisation,
 * which reports the error. */
static gw_status wait_landed(gw_halo *h, const gw_array *seg, int *spins) {
  if (!h->q) return GW_OK;
  while (gw_array_pending(seg)) {
    if (++*spins > (1 << 20)) return sync_stream(h, "waiting for a pack");
    int flag;
    (void)MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, h->comm, &flag, MPI_STATUS_IGNORE); /* progress */
    sched_yield(); /* the CPU backend's copies run on worker threads of this process */
  }
  return GW_OK;
}


static gw_status post_receives(gw_halo *h) {
  if (h->nccl) return GW_OK; /* NCCL posts its receives with its sends (nccl_dim) */
  for (int d = 0; d < h->ndim; d++) {
    halo_dim *hd = &h->dim[d];
    if (hd->link != LINK_MPI) continue;
    for (int m = 0; m < hd->nmsg; m++) {
      const halo_msg *g = &hd->msg[m];
      /* the low halo is filled by the low neighbour's messages toward high, and vice versa */
      /* (shared memory: the data is in our segment already; MPI says when it landed) */
      int bytes = g->shm ? 0 : g->bytes;
      int rc = MPI_Irecv(h->msg_base + g->off_recv, bytes, MPI_BYTE, hd->peer[g->side], tag(h, d, !g->side),
                         h->comm, &hd->recv_req[m]);
      if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Irecv", d);
    }
  }
  return GW_OK;
}

static int landed(const gw_halo *h, const halo_dim *hd, int m) {
  const halo_msg *g = &hd->msg[m];
  return !h->q || !gw_array_pending(hd->seg[g->first + g->count - 1].send_seg);
}

static gw_status isend(gw_halo *h, int d, int m) {
  halo_dim *hd = &h->dim[d];
  const halo_msg *g = &hd->msg[m];
  int shm = g->shm;
  int rc = MPI_Isend(h->msg_base + g->off_send, shm ? 0 : g->bytes, MPI_BYTE, hd->peer[g->side], tag(h, d, g->side),
                     h->comm, &hd->send_req[m]);
  if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Isend", d);
  /* shared memory: the peer's "free again" for what we just wrote into its buffer, which
   * the next pack into that buffer waits for */
  if (shm)
    rc = MPI_Irecv(h->msg_base, 0, MPI_BYTE, hd->peer[g->side], tag_free(h, d, !g->side), h->comm, &hd->free_req[m]);
  return rc == MPI_SUCCESS ? GW_OK : gw__halo_mpi(rc, "MPI_Irecv (a buffer token)", d);
}

/* Pack every message of dim d (in order), handing each to MPI as soon as its last segment
 * has landed: while later packs are still being queued, and then by polling the segments'
 * events (MPI_Iprobe on the way lets MPI progress the messages already sent). */
static gw_status send_dim(gw_halo *h, int d) {
  halo_dim *hd = &h->dim[d];
  int next = 0, spins = 0;
  gw_status st;
  for (int m = 0; m < hd->nmsg; m++) {
    const halo_msg *g = &hd->msg[m];
    if (hd->free_req && hd->free_req[m] != MPI_REQUEST_NULL) { /* shared memory: see isend */
      int rc = MPI_Wait(&hd->free_req[m], MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Wait (the neighbour's buffer token)", d);
    }
    for (int k = g->first; k < g->first + g->count; k++) {
      st = queue_copy(h, hd->seg[k].send_seg, hd->seg[k].send_view, "gw_copy packing a face", d);
      if (st != GW_OK) return st;
    }
    while (next < m && landed(h, hd, next))
      if ((st = isend(h, d, next++)) != GW_OK) return st;
  }
  for (; next < hd->nmsg; next++) {
    const halo_msg *g = &hd->msg[next];
    st = wait_landed(h, hd->seg[g->first + g->count - 1].send_seg, &spins);
    if (st == GW_OK) st = isend(h, d, next);
    if (st != GW_OK) return st;
  }
  return GW_OK;
}

/* Unpack each message of dim d as it arrives (queued on the plan's stream), then complete
 * the sends (their buffers are packed again by the next update). */
static gw_status complete_dim(gw_halo *h, int d) {
  halo_dim *hd = &h->dim[d];
  for (;;) {
    int idx = MPI_UNDEFINED;
    int rc = MPI_Waitany(hd->nmsg, hd->recv_req, &idx, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Waitany (receives)", d);
    if (idx == MPI_UNDEFINED) break;
    const halo_msg *g = &hd->msg[idx];
    for (int k = g->first; k < g->first + g->count; k++) {
      gw_status st = queue_copy(h, hd->seg[k].recv_view, hd->seg[k].recv_seg, "gw_copy unpacking a face", d);
      if (st != GW_OK) return st;
    }
    h->shm_owed |= g->shm; /* tokens once these unpacks are done */
  }
  int rc = MPI_Waitall(hd->nmsg, hd->send_req, MPI_STATUSES_IGNORE);
  return rc == MPI_SUCCESS ? GW_OK : gw__halo_mpi(rc, "MPI_Waitall (sends)", d);
}

/* A run of periodic dims of one rank: its prepared batch (make_self), on this update's
 * queue after everything before it (the previous dims' unpacks among them). */
/* `wait`: complete them before returning (run_dims). */
static gw_status self_run(gw_halo *h, int d, int wait) {
  if (!h->self_batch[d]) return GW_OK;
  gw_status st = wait ? gw__batch_run_wait(h->self_batch[d], h->q) : gw__batch_run(h->self_batch[d], h->q);
  return st == GW_OK ? GW_OK : gw_failed(st, "gw_copy of a halo to itself", d);
}

static gw_status nccl_failed(gw_halo *h, gw_ncclResult_t r, const char *call, int d, int peer) {
  char text[400];
  gw__nccl_text(r, h->nccl_comm, text, sizeof text);
  if (peer >= 0) return gw__halo_fail(GW_EBACKEND, "%s (dim %d, rank %d): %s", call, d, peer, text);
  if (d >= 0) return gw__halo_fail(GW_EBACKEND, "%s (dim %d): %s", call, d, text);
  return gw__halo_fail(GW_EBACKEND, "%s: %s", call, text);
}

/* One NCCL group of dim d: the sends of messages [m0, m1) and the receives of the
 * messages of the opposite sides, receives in reverse side order (see nccl_dim). */
static gw_status nccl_group(gw_halo *h, int d, int m0, int m1, int r0, int r1) {
  halo_dim *hd = &h->dim[d];
  const gw_nccl_fns *f = h->nccl;
  gw_cudaStream_t cs = gw_stream_native(h->q);
  gw_ncclResult_t r = f->GroupStart();
  if (r != gw_ncclSuccess) return nccl_failed(h, r, "ncclGroupStart", d, -1);
  gw_status st = GW_OK;
  for (int m = m0; m < m1 && st == GW_OK; m++) {
    const halo_msg *g = &hd->msg[m];
    r = f->Send(h->msg_base + g->off_send, (size_t)g->bytes, gw_ncclUint8, hd->peer[g->side], h->nccl_comm, cs);
    if (r != gw_ncclSuccess) st = nccl_failed(h, r, "ncclSend", d, hd->peer[g->side]);
  }
  for (int m = r1 - 1; m >= r0 && st == GW_OK; m--) {
    const halo_msg *g = &hd->msg[m];
    r = f->Recv(h->msg_base + g->off_recv, (size_t)g->bytes, gw_ncclUint8, hd->peer[g->side], h->nccl_comm, cs);
    if (r != gw_ncclSuccess) st = nccl_failed(h, r, "ncclRecv", d, hd->peer[g->side]);
  }
  r = f->GroupEnd(); /* always: a group left open would swallow the next update's calls */
  if (st == GW_OK && r != gw_ncclSuccess) st = nccl_failed(h, r, "ncclGroupEnd", d, -1);
  return st;
}

/* The sends and receives of dim d (see nccl_dim for the order). */
static gw_status nccl_exchange(gw_halo *h, int d) {
  halo_dim *hd = &h->dim[d];
  if (hd->nmsg == 2 && hd->peer[0] == hd->peer[1]) {
    /* msg 0 is side 0 (toward low; the peer gets it in its high halo = our msg 1's recv) */
    gw_status st = nccl_group(h, d, 0, 1, 1, 2);
    return st == GW_OK ? nccl_group(h, d, 1, 2, 0, 1) : st;
  }
  return nccl_group(h, d, 0, hd->nmsg, 0, hd->nmsg);
}

/* Dim d over NCCL, all queued on the plan's stream without a host wait: packs into the
 * device buffers, the sends and receives, unpacks. NCCL matches a pair of ranks' sends
 * and receives in the order they are issued. Sends go toward low (side 0) then high;
 * the high halo is filled by the high neighbour's message toward low, its first, so
 * receives go high halo first. Where one rank is both neighbours (a periodic dim of one
 * or two ranks) the two exchanges go in two groups, one per direction, so that each
 * group holds one send and one receive per peer and the pairing is unambiguous. */
static gw_status nccl_dim(gw_halo *h, int d) {
  halo_dim *hd = &h->dim[d];
  gw_status st;
  for (int k = 0; k < hd->nseg; k++) {
    st = queue_copy(h, hd->seg[k].send_seg, hd->seg[k].send_view, "gw_copy packing a face", d);
    if (st != GW_OK) return st;
  }
  st = nccl_exchange(h, d);
  for (int k = 0; st == GW_OK && k < hd->nseg; k++)
    st = queue_copy(h, hd->seg[k].recv_view, hd->seg[k].recv_seg, "gw_copy unpacking a face", d);
  return st;
}

/* NCCL reports some failures only asynchronously, on the communicator. */
static gw_status nccl_async(gw_halo *h) {
  if (!h->nccl) return GW_OK;
  gw_ncclResult_t a = gw_ncclSuccess;
  gw_ncclResult_t r = h->nccl->CommGetAsyncError(h->nccl_comm, &a);
  if (r != gw_ncclSuccess) return nccl_failed(h, r, "ncclCommGetAsyncError", -1, -1);
  if (a != gw_ncclSuccess && a != gw_ncclInProgress) return nccl_failed(h, a, "NCCL (asynchronous error)", -1, -1);
  return GW_OK;
}

/* After a failure: cancel the receives still posted, let the sends complete, drain the
 * plan's stream (queued copies may still read the buffers). */
static void quiesce(gw_halo *h) {
  for (int d = 0; d < 3; d++)
    for (int m = 0; m < h->dim[d].nmsg && h->dim[d].recv_req; m++) {
      halo_dim *hd = &h->dim[d];
      if (hd->recv_req[m] != MPI_REQUEST_NULL) {
        MPI_Cancel(&hd->recv_req[m]);
        MPI_Wait(&hd->recv_req[m], MPI_STATUS_IGNORE);
      }
      if (hd->send_req[m] != MPI_REQUEST_NULL) MPI_Wait(&hd->send_req[m], MPI_STATUS_IGNORE);
    }
  if (h->stream) (void)gw_stream_synchronize(h->stream);
  if (h->q && h->q != h->stream) (void)gw_stream_synchronize(h->q); /* the caller's */
  shm_cancel(h); /* this epoch's tokens: gone; the next epoch's start below */
  h->inflight = -1;
  h->started = 0;
  h->tail = 0;
  h->epoch = (h->epoch + 1) % EPOCHS;
  if (h->shm_win != MPI_WIN_NULL) shm_resync(h);
}

/* Exchange dims d, d+1, ... in order. With `split`, return as soon as the first dim that
 * talks to other ranks has been sent, leaving it in flight. With `wait` (a blocking update
 * of a plan without messages, whose copies are all it queues) the local copies complete
 * before returning: run waiting, they need no pending-work event for later readers and
 * the update no second synchronisation (together a few percent of a one-rank periodic
 * update on the H200). */
static gw_status run_dims(gw_halo *h, int d, int split, int wait) {
  for (; d < h->ndim; d++) {
    halo_dim *hd = &h->dim[d];
    gw_status st = GW_OK;
    if (hd->link == LINK_SELF) {
      st = self_run(h, d, wait);
      d = h->self_last[d];
    } else if (hd->link == LINK_MPI && h->nccl) {
      st = nccl_dim(h, d); /* queued, never in flight on the host: nothing to split */
    } else if (hd->link == LINK_MPI) {
      st = send_dim(h, d);
      if (st == GW_OK && split) {
        h->inflight = d;
        return GW_OK;
      }
      if (st == GW_OK) st = complete_dim(h, d);
    }
    if (st != GW_OK) return st;
  }
  h->inflight = -1;
  return GW_OK;
}

/* The 1-byte device arrays whose pending-work events order one stream after another. */
static gw_status tokens(gw_halo *h) {
  if (h->tok_in) return GW_OK;
  int64_t one = 1;
  gw_status st = gw_alloc(h->ctx, GW_MEM_DEVICE, GW_UINT8, 1, &one, &h->tok_in);
  if (st == GW_OK) st = gw_alloc(h->ctx, GW_MEM_DEVICE, GW_UINT8, 1, &one, &h->tok_out);
  if (st != GW_OK) {
    gw_release(h->tok_in);
    h->tok_in = NULL;
    return gw_failed(st, "gw_alloc of the stream-order token", -1);
  }
  return GW_OK;
}

/* Make this update's queue wait for the caller's stream `s` (on the device), or, for the
 * blocking calls (s NULL), for gpuwrap work still pending on the fields. */
static gw_status order_after(gw_halo *h, gw_stream *s) {
  gw_status st;
  if (!h->q) {
    /* No queue: nothing to exchange (then nothing to order either), or a backend
     * without streams, whose copies run at once: after the caller's work, waited for. */
    int work = h->info.neighbours > 0 || h->info.bytes_local > 0;
    st = s && work ? gw_stream_synchronize(s) : GW_OK;
    return st == GW_OK ? GW_OK : gw_failed(st, "gw_stream_synchronize of the caller's stream", -1);
  }
  if (s && s != h->q) {
    static const uint8_t zero = 0;
    st = tokens(h);
    if (st != GW_OK) return st;
    st = gw_fill_async(h->tok_in, &zero, s);
    if (st == GW_OK) st = gw_array_wait(h->tok_in, h->q);
    if (st != GW_OK) return gw_failed(st, "ordering the plan's stream after the caller's stream", -1);
  }
  /* gpuwrap work on the fields queued on other streams (gw_copy_async into a field): the
   * queue waits for it too. Work of the plan itself is already in order. */
  for (int f = 0; f < h->nfields; f++) {
    st = gw_array_wait(h->field[f], h->q);
    if (st != GW_OK) return gw_failed(st, "gw_array_wait on a field", -1);
  }
  return GW_OK;
}

/* Make the caller's stream wait for the update's queued copies. */
static gw_status order_before(gw_halo *h, gw_stream *s) {
  if (!h->q || h->q == s) return GW_OK; /* the copies are complete, or already on s */
  static const uint8_t zero = 0;
  gw_status st = tokens(h);
  if (st == GW_OK) st = gw_fill_async(h->tok_out, &zero, h->q);
  if (st == GW_OK) st = gw_array_wait(h->tok_out, s);
  if (st != GW_OK) return gw_failed(st, "ordering the caller's stream after the unpacks", -1);
  /* the next update must not receive into buffers these unpacks may still read */
  h->tail = h->info.neighbours > 0;
  return GW_OK;
}

static gw_status begin(gw_halo *h, const char *fn, int split, gw_stream *s) {
  if (!h) return gw__halo_fail(GW_EINVAL, "%s: plan is NULL", fn);
  if (h->started) return gw__halo_fail(GW_EINVAL, "%s: a split-phase update is in flight (call gw_halo_finish)", fn);
  gw_status st = GW_OK;
  /* The previous stream-ordered finish may still be unpacking out of the receive buffers:
   * they must be read before new receives are posted into them. By now this is long done
   * (the caller's stream has been waiting for it), so it costs a query, not a stall. */
  if (h->tail) {
    /* (NCCL: the new receives are queued on the same stream after those unpacks) */
    h->q = h->stream;
    if (!h->nccl) st = sync_stream(h, "waiting for the previous update's unpacks");
    if (st == GW_OK) st = shm_release(h);
    h->tail = 0;
  }
  /* A plan without messages queues its copies on the caller's stream itself: stream order
   * is then the contract (after the caller's work before start_on, before its work after
   * finish_on) at no cost; a plan with messages keeps its own stream, whose packs the host
   * waits for while the caller's stream runs on. */
  h->q = s && h->info.neighbours == 0 && h->stream ? s : h->stream;
  if (st == GW_OK) st = post_receives(h);
  if (st == GW_OK) st = order_after(h, s);
  /* gw_halo_update (not split, no stream) of a plan without messages: copies run waiting */
  if (st == GW_OK) st = run_dims(h, 0, split, !split && !s && h->info.neighbours == 0);
  if (st != GW_OK) quiesce(h);
  return st;
}

gw_status gw_halo_update(gw_halo *h) {
  gw_status st = begin(h, "gw_halo_update", 0, NULL);
  if (st == GW_OK) {
    /* Complete when it returns; a plan without messages waited for its copies already. */
    if (h->info.neighbours > 0) st = sync_stream(h, "gw_halo_update");
    if (st == GW_OK) st = shm_release(h);
    if (st == GW_OK) st = nccl_async(h);
    if (st != GW_OK) quiesce(h);
  }
  return st;
}

gw_status gw_halo_start(gw_halo *h) {
  gw_status st = begin(h, "gw_halo_start", 1, NULL);
  /* Local copies of the dims before the one in flight are done when start returns (the
   * program may then read their halos): with a dim in flight its landed packs imply it,
   * otherwise wait here. */
  if (st == GW_OK && h->inflight < 0 && !h->nccl) { /* NCCL: all queued, finish waits */
    st = sync_stream(h, "gw_halo_start");
    if (st != GW_OK) quiesce(h);
  }
  if (st == GW_OK) h->started = 1;
  return st;
}

static gw_status finish(gw_halo *h, const char *fn, gw_stream *s) {
  if (!h) return gw__halo_fail(GW_EINVAL, "%s: plan is NULL", fn);
  if (!h->started) return gw__halo_fail(GW_EINVAL, "%s: no gw_halo_start is in flight", fn);
  int d = h->inflight;
  gw_status st = GW_OK;
  if (d >= 0) st = complete_dim(h, d);
  if (st == GW_OK) st = run_dims(h, d >= 0 ? d + 1 : h->ndim, 0, 0);
  if (st == GW_OK) st = s ? order_before(h, s) : sync_stream(h, fn);
  if (st == GW_OK && (!s || !h->q)) st = shm_release(h); /* (no queue: the unpacks are done) */
  if (st == GW_OK) st = nccl_async(h);
  if (st != GW_OK) quiesce(h);
  h->started = 0;
  return st;
}

gw_status gw_halo_finish(gw_halo *h) { return finish(h, "gw_halo_finish", NULL); }

/* The caller's stream must be of the plan's backend and device (its work is ordered with
 * the plan's by events of that device). A local precondition, checked before anything is
 * posted or completed: the plan stays as it was (idle, or with its update in flight), and
 * the neighbours are not told (an update agreeing over every rank would cost every update
 * a collective), so a program that passes such a stream on some ranks only must treat the
 * error as fatal, as halo.h says. */
static gw_status check_stream(const gw_halo *h, const char *fn, const gw_stream *s) {
  gw_context *c = s->ctx;
  if (gw_context_backend(c) == gw_context_backend(h->ctx) && gw_context_device(c) == gw_context_device(h->ctx))
    return GW_OK;
  return gw__halo_fail(GW_EDEVICE, "%s: stream is on %s device %d, the plan's fields on %s device %d", fn,
                       gw_backend_name(gw_context_backend(c)), gw_context_device(c),
                       gw_backend_name(gw_context_backend(h->ctx)), gw_context_device(h->ctx));
}

gw_status gw_halo_start_on(gw_halo *h, gw_stream *s) {
  if (!h) return gw__halo_fail(GW_EINVAL, "gw_halo_start_on: plan is NULL");
  if (!s) return gw__halo_fail(GW_EINVAL, "gw_halo_start_on: stream is NULL (gw_halo_start is the host-ordered call)");
  gw_status st = check_stream(h, "gw_halo_start_on", s);
  if (st != GW_OK) return st;
  st = begin(h, "gw_halo_start_on", 1, s);
  if (st == GW_OK) h->started = 1;
  return st;
}

gw_status gw_halo_finish_on(gw_halo *h, gw_stream *s) {
  if (h && !s) return gw__halo_fail(GW_EINVAL, "gw_halo_finish_on: stream is NULL (gw_halo_finish is the host-ordered call)");
  if (h && h->started) {
    gw_status st = check_stream(h, "gw_halo_finish_on", s);
    if (st != GW_OK) return st;
  }
  return finish(h, "gw_halo_finish_on", s);
}

gw_status gw_halo_update_on(gw_halo *h, gw_stream *s) {
  gw_status st = gw_halo_start_on(h, s);
  return st == GW_OK ? gw_halo_finish_on(h, s) : st;
}
