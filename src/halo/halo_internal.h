/*
 * Private to the halo module. Never installed.
 *
 * Halo plans: face views and buffers made once, then per update only gw_copy
 * and MPI.
 *
 * A plan holds one or more fields (1-, 2- or 3-D, the communicator's dims),
 * each with a width per dim. Per field, dim d and side s (0 low, 1 high) it
 * holds the interior face it sends (send_view) and the halo it receives
 * (recv_view); when the neighbour is another rank, also the field's segment of
 * the send and receive messages (send_seg, recv_seg: wraps of pieces of one
 * block made at create time). Every field's face of a side goes into ONE
 * message per neighbour and dim: the faces are packed side by side (256-byte
 * aligned), so an update costs one MPI message per neighbour and dim however
 * many fields it carries (ImplicitGlobalGrid's update_halo!(A, B, C)). Messages
 * toward the low neighbour carry tag 2d, toward the high one 2d+1 (plus an
 * epoch, see halo_tag()), so two neighbours that are the same rank (a periodic
 * dim of two) cannot be confused.
 *
 * Ordering. Packs, unpacks and local (self-neighbour) copies are queued on the
 * plan's own stream, in dim order, so a dim's copies follow the previous dim's
 * unpacks on the device without the host waiting. The host waits only where MPI
 * needs it: a side's message is handed to MPI once its last segment's
 * pending-work event (gw_array_pending) says the pack landed — each side as
 * soon as it is ready, not after the whole dim — and its receive is unpacked as
 * soon as MPI_Waitany returns it. The blocking calls then wait for the stream
 * (complete on return, as before); the stream-ordered calls (gw_halo_start_on /
 * finish_on) instead order the plan's stream after the caller's stream and the
 * caller's stream after the unpacks, with a one-byte "token" fill whose
 * pending-work event is the cross-stream event (gw_array_wait): no host
 * synchronisation of the caller's work. A plan without messages needs neither:
 * its copies go on the caller's stream (begin()).
 *
 * Transports of the host path: MPI carries the faces (pipelined in pieces), or,
 * between ranks of one node, the GPU copies each face into the neighbour's
 * buffer in an MPI shared-memory window and MPI carries 0-byte tokens only
 * (halo_shm.c).
 *
 * The files: halo_create.c makes a plan (the sequence of phases), with the
 * argument checks of halo_args.c and the faces, message layout and buffers of
 * halo_layout.c; halo_plan.c frees it and answers its queries; halo_agree.c
 * is the neighbours' agreement on the arguments;
 * halo_update.c runs updates (stream ordering, the split phase, recovery after
 * a failure); halo_host.c carries a dim's
 * messages through MPI; halo_shm.c is the host path's shared-memory window;
 * halo_ipc.c the IPC path (its choice, its receive buffers or the neighbours' ghost
 * cells, its events and tokens), halo_ipc_signal.c those ghost cells signalled on the
 * device instead; halo_nccl.c chooses NCCL, bootstraps its communicator and carries a
 * dim through it (nccl.c loads the library).
 */
#ifndef GW_HALO_INTERNAL_H
#define GW_HALO_INTERNAL_H

#include "gpuwrap/halo.h"
/* the private ABI of libgpuwrap (gw__copy_many, gw__batch_*, gw__setting_*) */
#include "../core/private.h"
#include "nccl_api.h"

#include <stddef.h>
#include <stdint.h>

/* Record the detail for gw_halo_last_error() and return s. */
gw_status gw__halo_fail(gw_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* gw__halo_fail(GW_EBACKEND, ...) with MPI's text for `code`; GW_OK if code is
 * MPI_SUCCESS. */
gw_status gw__halo_mpi(int code, const char *what, int dim);
/* Collective over comm (every rank must call it, whatever its own status):
 * every rank's status in, one status out, the same on every rank: the most
 * negative (of the lowest rank holding it). A rank other than that one gets its
 * message too, "<fn>: another rank failed (rank R, STATUS): <R's message>". So
 * a call whose later steps are collective fails on every rank alike, and every
 * rank can say why. */
gw_status gw__halo_agree(MPI_Comm comm, gw_status mine, const char *fn);

/* Whether MPI can take device pointers of `backend`: `setting`
 * (GPUWRAP_HALO_GPU_AWARE, gw__halo_settings.gpu_aware) when 0 or 1, else (-1) the
 * MPI library's own answer (0 when it has no way to say). */
int gw__halo_gpu_aware(gw_backend backend, int setting);

/* The settings a plan reads (src/core/settings_table.h), once, at create: every
 * rank checks its own and the plan's first agreement makes a bad value every
 * rank's error. */
typedef struct {
  int gpu_aware;  /* GPUWRAP_HALO_GPU_AWARE: -1 auto (ask MPI), 0, 1 */
  int shm;        /* GPUWRAP_HALO_SHM */
  int shm_group;  /* GPUWRAP_HALO_SHM_GROUP (0: the node as MPI sees it) */
  size_t chunk;   /* GPUWRAP_HALO_CHUNK */
  int nccl_self;  /* GPUWRAP_HALO_NCCL_SELF */
  int auto_mps;   /* GPUWRAP_HALO_AUTO_MPS: AUTO_MPS_* */
  int ipc_direct; /* GPUWRAP_HALO_IPC_DIRECT: the IPC path packs into the neighbours' ghost
                     cells (h->ghost) */
  int ipc_signal; /* GPUWRAP_HALO_IPC_SIGNAL: ... and signals them on the device (h->sig) */
} gw__halo_settings;

/* What AUTO takes between ranks sharing a device under MPS (GPUWRAP_HALO_AUTO_MPS, in the
 * order of its choices): IPC for the host-ordered calls and the host path for the
 * stream-ordered ones (a plan holding both, gw_halo.alt), IPC for both, the host path for
 * both. */
enum { AUTO_MPS_PER_MODE = 0, AUTO_MPS_IPC, AUTO_MPS_HOST };

enum { LINK_NONE = 0, LINK_MPI, LINK_SELF };

typedef struct {
  gw_array *send_view[2]; /* interior faces of the field (NULL: no face along
                             this dim/side) */
  gw_array *recv_view[2]; /* halo faces of the field */
} gw__halo_face;

/* A segment: (a piece of) one field's face and its place in a message. Each
 * segment is a wrap of its own (its own root), so its pending-work event tells
 * when its pack landed. */
typedef struct {
  gw_array *send_view, *recv_view; /* the face, or a piece of it along one axis */
  gw_array *send_seg, *recv_seg;   /* wraps of the message buffers */
} gw__halo_seg;

/* One MPI message: every field's face of a side (aggregated), or, on the host
 * path, one piece of a large face (chunked, so that MPI carries piece k while
 * piece k+1 is packed and piece k-1 unpacked). Messages of a side go in order
 * with one tag: MPI does not let them overtake each other, so the receives
 * match them in order. */
typedef struct {
  int side;
  int bytes;
  size_t off_send, off_recv; /* in the buffer block */
  int first, count;          /* its segments */
  int direct;                /* packed straight into the peer's receive buffer (the
                 shared-memory window or the IPC mapping), MPI carries 0-byte
                 tokens only */
  int ipc;                   /* its buffers are in the IPC block (ipc_base), not the main one */
} gw__halo_msg;

typedef struct {
  int link;       /* LINK_*: no field with a width here, or no neighbour, is LINK_NONE
             */
  int peer[2];    /* neighbour ranks, MPI_PROC_NULL at a non-periodic boundary */
  int bytes;      /* bytes of the aggregated message of a side (every field's face)
                */
  int nseg, nmsg; /* LINK_MPI: both sides, side 0's first */
  gw__halo_seg *seg;
  gw__halo_msg *msg;
  MPI_Request *send_req; /* [nmsg] */
  MPI_Request *recv_req;
  /* Shared-memory transport (see shm_setup): per message sent, the receive of
   * the peer's "your buffer is free again" token (free_req), and per message
   * received, the send of ours (tok_req). shm_delta[s]: where side s's packs
   * land, the peer's receive buffer in this process's map of its window, minus
   * our own send buffer's address. */
  MPI_Request *free_req;
  MPI_Request *tok_req;
  ptrdiff_t shm_delta[2];
  int shm_side[2];       /* side s's neighbour shares this rank's node window */
  int ipc_side[2];       /* side s's neighbour is on this node and the plan's path is
                      IPC */
  gw_array *ipc_peer[2]; /* side s's neighbour's IPC block, opened here
                            (gw_ipc_open) */
  /* IPC path, per side s: this rank's interprocess events (landed: recorded after
   * its pack into side s's neighbour's buffer; freed: after its unpacks of what
   * that neighbour sent) and the neighbour's, opened here (its landed: waited for
   * on the device before those unpacks; its freed: before the next pack into its
   * buffer). */
  gw__ipc_event *ipc_landed[2], *ipc_freed[2];
  gw__ipc_event *ipc_peer_landed[2], *ipc_peer_freed[2];
  /* IPC path, per side: the message's packs (faces into the neighbour's buffer)
   * and unpacks (out of ours), prepared once (gw__halo_ipc_prepare) */
  gw__batch *ipc_pack[2], *ipc_unpack[2];
  /* The "free again" token received per side: 1 byte when its sender recorded
   * its freed event (a stream-ordered update: wait for it on the device), 0
   * bytes when its unpacks were complete already */
  unsigned char free_byte[2];
  /* IPC path packing into the neighbours' ghost cells (gw_halo.ghost), per side s: the
   * on-node neighbour's ghost region of each field (nfields entries, NULL where a field has
   * no face here), views of its fields opened here (gw__halo_ipc_ghosts). The segments'
   * send_seg are these views; their recv_seg are NULL (nothing is received into a buffer). */
  gw_array **ghost_peer[2];
  /* IPC signalled on the device (gw_halo.sig, halo_ipc_signal.c): every message's packs
   * of this dim as one batch, the neighbours' signal blocks opened here (NULL: no
   * neighbour on that side), and the epoch of the last operation queued. */
  gw__batch *sig_pack;
  gw_array *sig_peer[2];
  uint32_t sig_epoch;
} gw__halo_dim;

struct gw_halo {
  gw__halo_settings set; /* the GPUWRAP_HALO_* settings, read once at create
                        (gw__halo_read_settings) */
  int nfields;
  int ndim;
  gw_array **field;    /* nfields references */
  int (*width)[3];     /* per field */
  gw__halo_face *face; /* [f * 3 + d] */
  gw_context *ctx;     /* borrowed from the first field, which the plan keeps alive */
  MPI_Comm comm;       /* the plan's duplicate, errors returned */
  gw_halo_info info;
  gw__halo_dim dim[3];
  void *host_block; /* HOST path: page-aligned, pinned once */
  size_t host_block_bytes;
  gw_array *dev_block; /* DEVICE path */
  char *msg_base;      /* address MPI uses for the block (host or device) */
  size_t chunk;        /* host path: messages above this many bytes travel in pieces
                   (0: never) */
  gw_stream *stream;   /* the plan's stream; NULL: the backend has none, copies
                        run one by one */
  gw_array *tok_in;    /* 1-byte device arrays whose pending-work events order the
                        plan's */
  gw_array *tok_out;   /* stream after the caller's (in) and the caller's after it
                        (out) */
  int inflight;        /* dim whose messages are in flight after a start, -1 none */
  int started;         /* a split-phase update is between start and finish */
  int captured;        /* ... and was started on a stream being captured (queued on
                   it: h->q is the caller's stream) */
  int tail;            /* a stream-ordered finish left unpacks queued on the plan's stream
              */
  int epoch;           /* failed updates so far, mod EPOCHS (see halo_tag()) */
  /* NCCL path: the communicator (over comm's ranks, on the fields' device) and
   * its calls. Messages then go through NCCL on the plan's stream instead of
   * MPI (see gw__halo_nccl_dim()). */
  const gw__halo_nccl_fns *nccl;
  gw_ncclComm_t nccl_comm;
  int nccl_device;
  /* Consecutive periodic dims of one rank (a "self run"): every field's halo
   * shell along them in one prepared batch, one launch per update (see
   * make_self). */
  gw__batch *self_batch[3]; /* at the run's first dim, NULL elsewhere */
  int self_last[3];         /* the run's last dim */
  /* Where this update queues its device work: the plan's stream, or, for a
   * stream-ordered update of a plan without messages (every dim local), the
   * caller's stream itself (no cross-stream joins to make; see begin()). */
  gw_stream *q;
  /* The host path between ranks of one node (shm_setup): the buffer block is
   * this rank's segment of an MPI shared-memory window, packs are copied by the
   * GPU straight into the neighbour's receive buffer there, and MPI carries
   * only 0-byte tokens ("landed", "free again"). MPI_WIN_NULL: messages carry
   * the data (the MPI transport). */
  MPI_Win shm_win;
  MPI_Comm shm_node; /* the plan's ranks on this node (the window's communicator) */
  void **shm_pinned; /* peers' segments pinned in this process, [shm_npinned] */
  size_t *shm_pinned_bytes;
  int shm_npinned;
  int shm_owed; /* tokens owed: unpacks out of our segment were queued since the
                   last */
  int direct;   /* some messages are direct (window or IPC): the token flow runs
                 */
  /* The IPC path (halo_ipc.c): the receive buffers of the on-node neighbours'
   * messages in one device allocation, exported; its send areas are unused
   * (packs go to the peers'). */
  int ipc; /* the plan's path is IPC (every rank's, or none's) */
  gw_array *ipc_block;
  char *ipc_base;
  gw_ipc_handle ipc_handle;
  /* The IPC path without receive buffers (GPUWRAP_HALO_IPC_DIRECT=1, every rank's fields
   * exported and opened: gw__halo_ipc_ghosts): each IPC message's pack copies a field's face
   * straight into the neighbour's ghost cells, and nothing is unpacked. The tokens then run
   * the other way round each update: the receiver records "ghosts free" (its ipc_freed
   * event) at the start of the dim, after every reader of those cells on its queue, and
   * sends the "free" token (halo_tag_free); the sender waits for it on the device, packs,
   * records "landed" and sends its token; the receiver's queue waits for "landed". No token
   * outlives an update (no resync after a failure, no release after a blocking one). */
  int ghost;
  /* ... signalled on the device (halo_ipc_signal.c): each dim one operation on the
   * plan's stream, its "free" and "landed" stored into words of the neighbours' signal
   * blocks and waited for there; no token, event or host wait. Alike on every rank. */
  int sig;
  gw_array *sig_block; /* this rank's words, exported */
  int ipc_only;        /* every remote message is an IPC one: nothing is received into a
                   buffer on the host's say, so no host wait guards the next update */
  /* AUTO's choice per mode (GPUWRAP_HALO_AUTO_MPS=mode): where AUTO took IPC only
   * because ranks share a device under MPS, IPC is faster for the host-ordered calls but
   * the host path for the stream-ordered ones (docs/HALO.md, "AUTO"). This plan is then
   * the IPC one, and `alt` a second plan over the same fields on the host path (its own
   * communicator, buffers and stream), made and freed with this one and on every rank
   * alike; gw_halo_start_on / finish_on / update_on run on it. NULL: one path for all. */
  struct gw_halo *alt;
  int per_mode; /* (at create, alike on every rank) make `alt` */
  int blocking; /* this update's unpacks are complete before it returns: gw_halo_update
                   (it synchronizes its stream) or a plan without a queue (every copy
                   runs to completion), so its IPC copies need no pending-work events
                   and its "free again" tokens go once they are done (no event) */
};

/* Tags carry the plan's epoch, which every failed update advances: after a
 * failure a fast neighbour's next messages must not match receives this rank is
 * still cancelling. Per epoch 6 tags for the messages (2d toward low, 2d + 1
 * toward high) and 6 for the shared- memory transport's "free again" tokens;
 * after the last epoch, the tags of create's offset exchange. All below 32767,
 * the least MPI_TAG_UB. */
#define EPOCHS 1000
static inline int halo_tag(const gw_halo *h, int d, int toward_high) {
  return 12 * h->epoch + 2 * d + toward_high;
}
static inline int halo_tag_free(const gw_halo *h, int d, int toward_high) {
  return 12 * h->epoch + 6 + 2 * d + toward_high;
}
static inline int halo_tag_offset(int d, int toward_high) {
  return 12 * EPOCHS + 2 * d + toward_high;
}
/* create's exchange of the fields' IPC handles (after the offsets' and halo_agree.c's two
 * rounds of 6) */
static inline int halo_tag_ghost(int d, int toward_high) {
  return 12 * EPOCHS + 18 + 2 * d + toward_high;
}
/* ... and of the signal blocks' handles (halo_ipc_signal.c) */
static inline int halo_tag_signal(int d, int toward_high) {
  return 12 * EPOCHS + 24 + 2 * d + toward_high;
}

/* ---- shared by the files of the halo module
 * ------------------------------------------ */

static inline size_t halo_round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Where offset `off` of message g lies: in the IPC block for an IPC message (an IPC-only
 * plan has no main block: msg_base is NULL there), else in the main block. */
static inline char *halo_msg_at(const gw_halo *h, const gw__halo_msg *g, size_t off) {
  char *base = g->ipc ? h->ipc_base : h->msg_base;
  return base ? base + off : NULL; /* (no IPC block when packing into ghost cells: the
                                      messages are 0-byte tokens) */
}

/* support.c */
/* A gpuwrap call failed: keep its status and its gw_last_error() text. d < 0:
 * no dim. */
gw_status gw__halo_call_failed(gw_status st, const char *what, int d);
/* gw__halo_agree, once per failure: after a failed agreement (*failed set) every rank
 * knows, so the later steps pass the status through without another collective (and the
 * message stays the one agreed on). */
gw_status gw__halo_agree_once(MPI_Comm comm, gw_status st, const char *fn, int *failed);

/* halo_plan.c: free a plan, whatever part of it a create made (the communicator too) */
void gw__halo_plan_free(gw_halo *h);

/* halo_args.c: this rank's verdicts, which the create sequence makes every rank's */
/* The one check made before any collective: `cart` is a Cartesian communicator. */
gw_status gw__halo_check_cart(const char *fn, MPI_Comm cart);
/* This rank's arguments (`strict`: gw_halo_create's contract, 3-D, widths >= 1). */
gw_status gw__halo_check_args(const char *fn, const gw_halo_field *fields, int nfields,
                              MPI_Comm cart, gw_halo_path path, gw_halo **out, int strict);
/* Read the settings into *out; GW_EINVAL with the parser's message naming the
 * variable. */
gw_status gw__halo_read_settings(const char *fn, gw__halo_settings *out);

/* halo_layout.c: the plan's faces, messages and buffers */
/* Neighbours, links, face views and message sizes of every dim. */
gw_status gw__halo_make_dims(gw_halo *h);
/* The local copies of each run of consecutive periodic dims, one batch per run. */
gw_status gw__halo_make_self(gw_halo *h);
/* The messages' layout and the blocks that hold them (collective; *failed: set when the
 * ranks' agreement in here failed, every rank knows then). */
gw_status gw__halo_make_buffers(gw_halo *h, int device_path, int *failed);

/* halo_agree.c: each rank tells its neighbours its fields' counts, dtypes,
 * widths and face extents and compares theirs with its own (point to point with
 * every neighbour along dims split over ranks; every rank takes part). This
 * rank's verdict, with a message naming the argument and both ranks' values;
 * the caller makes it every rank's. `strict`: gw_halo_create's argument names.
 */
gw_status gw__halo_check_neighbours(gw_halo *h, const char *fn, int strict);

/* halo_shm.c: the shared-memory window of the host path between ranks of one
 * node */
/* The plan's ranks on this node (collective): MPI_COMM_TYPE_SHARED, or
 * GPUWRAP_HALO_SHM_GROUP consecutive ranks. */
gw_status gw__halo_node_split(gw_halo *h, MPI_Comm *node);
/* Whether the node's neighbours go through the window or IPC (collective): keeps
 * *node as h->shm_node then (*node becomes MPI_COMM_NULL), else leaves it to the
 * caller to free. */
gw_status gw__halo_shm_decide(gw_halo *h, gw_halo_path path, MPI_Comm *node);
int gw__halo_shm_peer(const gw_halo *h, int peer);
gw_status gw__halo_shm_block(gw_halo *h, size_t total);
gw_status gw__halo_shm_link(gw_halo *h);
void gw__halo_shm_resync(gw_halo *h);
void gw__halo_shm_cancel(gw_halo *h);
void gw__halo_shm_close(gw_halo *h);
/* The direct messages (window or IPC), in order: for (int d = 0, m = -1;
 * gw__halo_next_direct(h, &d, &m);) visits each (dim d, message m) whose
 * msg[m].direct is set. */
int gw__halo_next_direct(const gw_halo *h, int *d, int *m);
gw_status gw__halo_shm_release(gw_halo *h);
/* Send the "free again" token of dim d's message m to its sender: `bytes` 0
 * (the unpacks are complete) or 1 (wait for our freed event). */
gw_status gw__halo_send_free(gw_halo *h, int d, int m, int bytes);

/* halo_ipc.c: the IPC path */
/* Whether this plan takes IPC (collective): `path` as asked, `node` this rank's
 * node (gw__halo_node_split); sets h->ipc alike everywhere. */
gw_status gw__halo_ipc_decide(gw_halo *h, const char *fn, gw_halo_path path, int device_only,
                              MPI_Comm node);
/* Whether the IPC messages go straight into the neighbours' ghost cells (collective over
 * the plan, after the faces are made and before the buffers): with GPUWRAP_HALO_IPC_DIRECT=1
 * on every rank, every rank exports its fields, sends the handles to its on-node
 * neighbours, opens theirs and makes their ghost regions' views (dim->ghost_peer). Sets
 * h->ghost alike on every rank; where any rank cannot (a setting of 0, an export or open
 * that fails), every rank releases what it opened and keeps the receive buffers (GW_OK).
 * An error only where MPI fails. */
gw_status gw__halo_ipc_ghosts(gw_halo *h);
/* Allocate and export the IPC block (before the ranks agree on the buffers). */
gw_status gw__halo_ipc_block(gw_halo *h, size_t bytes);
/* Exchange handles and offsets with the on-node neighbours, open theirs (point
 * to point: every rank with IPC messages enters it). */
gw_status gw__halo_ipc_link(gw_halo *h);
/* Prepare each IPC message's pack and unpack batches (after the segments). */
gw_status gw__halo_ipc_prepare(gw_halo *h);
/* Which way a message's copies go: packs, from the fields' faces into the send
 * buffer, or unpacks, from the receive buffer into the fields' halos. */
typedef enum { GW__HALO_PACK, GW__HALO_UNPACK } gw__halo_way;
/* Queue the packs or unpacks (`way`) of IPC message m of dim d. */
gw_status gw__halo_ipc_copy(gw_halo *h, int d, int m, gw__halo_way way);
/* An IPC message's two device-side steps on the update's queue: before the
 * pack, wait for the neighbour's unpacks of the previous one (its freed event,
 * where its token said it recorded one: `recorded`); after it, record landed. */
gw_status gw__halo_ipc_before_pack(gw_halo *h, int d, int m, int recorded);
gw_status gw__halo_ipc_after_pack(gw_halo *h, int d, int m);
/* Before the unpacks of a received IPC message: wait for the sender's landed
 * event; after them, in a stream-ordered update: record freed and send the
 * 1-byte "free again" token at once (a blocking update sends 0 bytes after its
 * synchronization, gw__halo_shm_release). */
gw_status gw__halo_ipc_before_unpack(gw_halo *h, int d, int m);
gw_status gw__halo_ipc_after_unpack(gw_halo *h, int d, int m);
/* Packing into the ghost cells (h->ghost): at the start of dim d, for each IPC message it
 * receives, record "ghosts free" on the update's queue (after the caller's work and the
 * earlier dims' packs, the readers of those cells) and send the "free" token: 1 byte, or 0
 * without a queue (nothing to wait for). */
gw_status gw__halo_ipc_ghosts_free(gw_halo *h, int d);
/* Unmap the neighbours' blocks, wait for every rank, free this rank's
 * (collective). */
void gw__halo_ipc_close(gw_halo *h);

/* halo_ipc_signal.c: the IPC packs into the ghost cells signalled on the device */
/* Whether they are (collective over the plan, once the stream exists): with
 * GPUWRAP_HALO_IPC_SIGNAL=1, a plan whose every remote message is IPC into the ghost
 * cells, and every rank able (each dim's packs one batch its backend can signal, its
 * signal block made and exported, the neighbours' opened), sets h->sig alike everywhere;
 * otherwise every rank releases what it made and keeps the events (GW_OK). An error only
 * where MPI fails. */
gw_status gw__halo_ipc_signal(gw_halo *h);
/* Queue dim d's signalled operation on h->q (halo_ipc_signal.c says what it does). */
gw_status gw__halo_ipc_signal_dim(gw_halo *h, int d);
/* Unmap the neighbours' blocks (before gw__halo_ipc_close's barrier: `after` 0), free
 * this rank's (after it: `after` 1). */
void gw__halo_ipc_signal_close(gw_halo *h, int after);

/* halo_nccl.c: choosing NCCL, its communicator, and a dim's exchange through it
 */
gw_status gw__halo_nccl_setup(gw_halo *h, const char *fn, int want, int forced, int *use);
gw_status gw__halo_nccl_connect(gw_halo *h);
gw_status gw__halo_nccl_dim(gw_halo *h, int d);
gw_status gw__halo_nccl_async(gw_halo *h);
void gw__halo_nccl_close(gw_halo *h);

/* halo_host.c: MPI messages of the host and device paths */
gw_status gw__halo_host_post_receives(gw_halo *h);
gw_status gw__halo_host_send(gw_halo *h, int d);
gw_status gw__halo_host_complete(gw_halo *h, int d);

/* halo_update.c */
/* dst <- src on this update's queue (or at once without one). */
gw_status gw__halo_queue_copy(gw_halo *h, gw_array *dst, const gw_array *src, const char *what,
                              int d);
gw_status gw__halo_sync_stream(gw_halo *h, const char *what);

#endif /* GW_HALO_INTERNAL_H */
