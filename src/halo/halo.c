/*
 * Halo plans: face views and buffers made once, then per update only gw_copy and MPI.
 *
 * Per dim d and side s (0 low, 1 high) a plan holds four arrays: the interior face it sends
 * (send_view), the halo it receives (recv_view), and, when the neighbour is another rank,
 * the send and receive buffers (wraps of segments of one block made at create time).
 * Messages toward the low neighbour carry tag 2d, toward the high one 2d+1 (plus an epoch,
 * see tag()), so two neighbours that are the same rank (a periodic dim of two) cannot be
 * confused.
 */
#define _POSIX_C_SOURCE 200809L /* sysconf */

#include "halo_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LINK_NONE = 0, LINK_MPI, LINK_SELF };

typedef struct {
  int link;                /* LINK_*: MPI_PROC_NULL on both sides is LINK_NONE */
  int peer[2];             /* neighbour ranks, MPI_PROC_NULL at a non-periodic boundary */
  int bytes;               /* bytes of one face */
  gw_array *send_view[2];  /* interior faces of the field */
  gw_array *recv_view[2];  /* halo faces of the field */
  gw_array *send_buf[2];   /* LINK_MPI with a neighbour on that side, else NULL */
  gw_array *recv_buf[2];
  MPI_Request send_req[2];
  MPI_Request recv_req[2];
} halo_dim;

struct gw_halo {
  gw_array *field;
  gw_context *ctx; /* borrowed from the field, which the plan keeps alive */
  MPI_Comm comm;   /* the plan's duplicate, errors returned */
  gw_halo_info info;
  halo_dim dim[3];
  void *host_block; /* HOST path: page-aligned, pinned once */
  size_t host_block_bytes;
  gw_array *dev_block; /* DEVICE path */
  gw_stream *stream;   /* packs and unpacks of a dim on one stream, one wait; NULL = sync */
  int inflight;        /* dim whose messages are in flight after gw_halo_start, -1 none */
  int started;         /* a split-phase update is between start and finish */
  int epoch;           /* failed updates so far, mod EPOCHS (see tag()) */
};

/* ---- create / destroy ---------------------------------------------------------------- */

static void release_arrays(gw_halo *h) {
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 2; s++) {
      gw_release(h->dim[d].send_view[s]);
      gw_release(h->dim[d].recv_view[s]);
      gw_release(h->dim[d].send_buf[s]);
      gw_release(h->dim[d].recv_buf[s]);
    }
}

static void plan_free(gw_halo *h) {
  release_arrays(h);
  gw_release(h->dev_block);
  if (h->host_block) {
    (void)gw_unpin(h->ctx, h->host_block, h->host_block_bytes);
    free(h->host_block);
  }
  gw_stream_destroy(h->stream);
  if (h->comm != MPI_COMM_NULL) MPI_Comm_free(&h->comm);
  gw_release(h->field);
  free(h);
}

/* A gpuwrap call failed: keep its status and its gw_last_error() text. d < 0: no dim. */
static gw_status gw_failed(gw_status st, const char *what, int d) {
  if (d < 0) return gw__halo_fail(st, "%s: %s: %s", what, gw_err_name(st), gw_last_error());
  return gw__halo_fail(st, "%s (dim %d): %s: %s", what, d, gw_err_name(st), gw_last_error());
}

/* Face views along dim d: extent w at `lo` along d; along dims before d the whole extent
 * (their halos are filled by then), along dims after d the interior only. */
static gw_status make_face(gw_halo *h, const int *w, int d, int64_t at, gw_array **out) {
  const int64_t *n = gw_shape(h->field);
  int64_t start[3], shape[3];
  for (int e = 0; e < 3; e++) {
    if (e == d) {
      start[e] = at;
      shape[e] = w[e];
    } else if (e < d) {
      start[e] = 0;
      shape[e] = n[e];
    } else {
      start[e] = w[e];
      shape[e] = n[e] - 2 * w[e];
    }
  }
  gw_status st = gw_view(h->field, start, shape, NULL, out);
  return st == GW_OK ? GW_OK : gw_failed(st, "gw_view of a face", d);
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Carve the send/receive buffers out of one block: wrap each segment as a face-shaped,
 * C-contiguous array. Segments start on 256-byte boundaries (any dtype, DMA friendly). */
static gw_status make_buffers(gw_halo *h, int device_path) {
  size_t total = 0;
  for (int d = 0; d < 3; d++)
    if (h->dim[d].link == LINK_MPI)
      for (int s = 0; s < 2; s++)
        if (h->dim[d].peer[s] != MPI_PROC_NULL) total += 2 * round_up((size_t)h->dim[d].bytes, 256);
  if (total == 0) return GW_OK;

  char *base;
  gw_status st;
  if (device_path) {
    int64_t n = (int64_t)total;
    st = gw_alloc(h->ctx, GW_MEM_DEVICE, GW_UINT8, 1, &n, &h->dev_block);
    if (st != GW_OK) return gw_failed(st, "gw_alloc of the device buffers", -1);
    base = gw_data(h->dev_block);
  } else {
    long page = sysconf(_SC_PAGESIZE);
    size_t align = page > 0 ? (size_t)page : 4096;
    size_t bytes = round_up(total, align);
    base = aligned_alloc(align, bytes);
    if (!base) return gw__halo_fail(GW_ENOMEM, "cannot allocate %zu bytes of halo buffers", bytes);
    st = gw_pin(h->ctx, base, bytes);
    if (st != GW_OK) {
      free(base);
      return gw_failed(st, "gw_pin of the host buffers", -1);
    }
    h->host_block = base;
    h->host_block_bytes = bytes;
  }
  h->info.buffer_bytes = total;

  gw_dtype t = gw_array_dtype(h->field);
  size_t off = 0;
  for (int d = 0; d < 3; d++) {
    halo_dim *hd = &h->dim[d];
    if (hd->link != LINK_MPI) continue;
    for (int s = 0; s < 2; s++) {
      if (hd->peer[s] == MPI_PROC_NULL) continue;
      const int64_t *shape = gw_shape(hd->send_view[s]);
      gw_array **bufs[2] = {&hd->send_buf[s], &hd->recv_buf[s]};
      for (int b = 0; b < 2; b++) {
        st = gw_wrap(h->ctx, base + off, t, 3, shape, NULL, 0, bufs[b]);
        if (st != GW_OK) return gw_failed(st, "gw_wrap of a halo buffer", d);
        off += round_up((size_t)hd->bytes, 256);
      }
    }
  }
  return GW_OK;
}

static gw_status check_args(gw_array *field, MPI_Comm cart, const int *width, gw_halo_path path,
                            gw_halo **out) {
  if (!field || !width || !out)
    return gw__halo_fail(GW_EINVAL, "gw_halo_create: %s is NULL",
                         !field ? "field" : !width ? "width" : "out");
  if (gw_ndim(field) != 3)
    return gw__halo_fail(GW_EINVAL, "gw_halo_create: field has %d dims, a halo plan needs 3",
                         gw_ndim(field));
  if (gw_is_readonly(field))
    return gw__halo_fail(GW_EREADONLY, "gw_halo_create: field is read-only, its halo cannot be written");
  if (path != GW_HALO_PATH_AUTO && path != GW_HALO_PATH_HOST && path != GW_HALO_PATH_DEVICE)
    return gw__halo_fail(GW_EINVAL, "gw_halo_create: unknown path %d", (int)path);
  const int64_t *n = gw_shape(field);
  for (int d = 0; d < 3; d++) {
    if (width[d] < 1)
      return gw__halo_fail(GW_EINVAL, "gw_halo_create: width[%d] is %d, must be >= 1", d, width[d]);
    if (n[d] < 3 * (int64_t)width[d])
      return gw__halo_fail(GW_EINVAL,
                           "gw_halo_create: field extent %lld along dim %d is less than 3*width "
                           "(%d): the interior cannot hold the faces it sends",
                           (long long)n[d], d, 3 * width[d]);
  }
  if (cart == MPI_COMM_NULL) return gw__halo_fail(GW_EINVAL, "gw_halo_create: cart is MPI_COMM_NULL");
  int topo = MPI_UNDEFINED, ndims = 0;
  gw_status st = gw__halo_mpi(MPI_Topo_test(cart, &topo), "MPI_Topo_test", -1);
  if (st != GW_OK) return st;
  if (topo != MPI_CART)
    return gw__halo_fail(GW_EINVAL, "gw_halo_create: cart is not a Cartesian communicator (MPI_Cart_create)");
  st = gw__halo_mpi(MPI_Cartdim_get(cart, &ndims), "MPI_Cartdim_get", -1);
  if (st != GW_OK) return st;
  if (ndims != 3)
    return gw__halo_fail(GW_EINVAL, "gw_halo_create: cart has %d dims, a halo plan needs 3", ndims);
  if (path == GW_HALO_PATH_DEVICE && !gw_data(field))
    return gw__halo_fail(GW_EINVAL, "gw_halo_create: path DEVICE for a field the device cannot "
                                    "address (%s memory)", gw_memkind_name(gw_kind(field)));
  return GW_OK;
}

/* Neighbours, links, face views and face sizes of every dim. */
static gw_status make_dims(gw_halo *h, const int *w) {
  int dims[3], periods[3], coords[3];
  gw_status st = gw__halo_mpi(MPI_Cart_get(h->comm, 3, dims, periods, coords), "MPI_Cart_get", -1);
  if (st != GW_OK) return st;
  const int64_t *n = gw_shape(h->field);
  size_t elem = gw_dtype_size(gw_array_dtype(h->field));
  for (int d = 0; d < 3; d++) {
    halo_dim *hd = &h->dim[d];
    st = gw__halo_mpi(MPI_Cart_shift(h->comm, d, 1, &hd->peer[0], &hd->peer[1]), "MPI_Cart_shift", d);
    if (st != GW_OK) return st;
    if (hd->peer[0] == MPI_PROC_NULL && hd->peer[1] == MPI_PROC_NULL) continue; /* LINK_NONE */
    hd->link = dims[d] == 1 ? LINK_SELF : LINK_MPI;
    for (int s = 0; s < 2; s++) {
      if (hd->peer[s] == MPI_PROC_NULL) continue;
      st = make_face(h, w, d, s ? n[d] - 2 * w[d] : w[d], &hd->send_view[s]);
      if (st == GW_OK) st = make_face(h, w, d, s ? n[d] - w[d] : 0, &hd->recv_view[s]);
      if (st != GW_OK) return st;
    }
    int s0 = hd->peer[0] != MPI_PROC_NULL ? 0 : 1;
    uint64_t bytes = (uint64_t)gw_numel(hd->send_view[s0]) * elem;
    if (bytes > INT_MAX)
      return gw__halo_fail(GW_EINVAL, "gw_halo_create: a face along dim %d has %llu bytes, more "
                                      "than one MPI message carries (INT_MAX)", d, (unsigned long long)bytes);
    hd->bytes = (int)bytes;
    for (int s = 0; s < 2; s++) {
      if (hd->peer[s] == MPI_PROC_NULL) continue;
      if (hd->link == LINK_SELF) {
        h->info.bytes_local += (size_t)hd->bytes;
      } else {
        h->info.neighbours++;
        h->info.bytes_sent += (size_t)hd->bytes;
      }
    }
  }
  return GW_OK;
}

gw_status gw_halo_create(gw_array *field, MPI_Comm cart, const int width[3], gw_halo_path path,
                         gw_halo **out) {
  gw_status st = check_args(field, cart, width, path, out);
  if (st != GW_OK) return st;

  gw_halo *h = calloc(1, sizeof *h);
  if (!h) return gw__halo_fail(GW_ENOMEM, "gw_halo_create: out of memory");
  h->comm = MPI_COMM_NULL;
  h->inflight = -1;
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 2; s++) h->dim[d].send_req[s] = h->dim[d].recv_req[s] = MPI_REQUEST_NULL;
  h->field = gw_retain(field);
  h->ctx = gw_array_context(field);

  gw_memkind kind = gw_kind(field);
  h->info.gpu_aware = path == GW_HALO_PATH_DEVICE || gw__halo_gpu_aware(gw_context_backend(h->ctx));
  if (path == GW_HALO_PATH_AUTO)
    path = h->info.gpu_aware && (kind == GW_MEM_DEVICE || kind == GW_MEM_MANAGED) && gw_data(field)
               ? GW_HALO_PATH_DEVICE
               : GW_HALO_PATH_HOST;
  h->info.path = path;

  st = gw__halo_mpi(MPI_Comm_dup(cart, &h->comm), "MPI_Comm_dup", -1);
  if (st == GW_OK) st = gw__halo_mpi(MPI_Comm_set_errhandler(h->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", -1);
  if (st == GW_OK) st = make_dims(h, width);
  if (st == GW_OK) st = make_buffers(h, path == GW_HALO_PATH_DEVICE);
  if (st == GW_OK && h->info.neighbours + (h->info.bytes_local > 0) > 0) {
    st = gw_stream_create(h->ctx, &h->stream);
    if (st == GW_ENOTSUP) st = GW_OK; /* the backend has no streams: copies run one by one */
    else if (st != GW_OK) st = gw_failed(st, "gw_stream_create", -1);
  }
  if (st != GW_OK) {
    plan_free(h);
    return st;
  }
  *out = h;
  return GW_OK;
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

static void *mpi_addr(const gw_halo *h, const gw_array *buf) {
  return h->info.path == GW_HALO_PATH_DEVICE ? gw_data(buf) : gw_host_data(buf);
}

/* dst[s] <- src[s] for the sides present, on the plan's stream, then one wait. */
static gw_status copy_faces(gw_halo *h, int d, gw_array *const dst[2], gw_array *const src[2],
                            const char *what) {
  for (int s = 0; s < 2; s++) {
    if (!dst[s]) continue;
    gw_status st = h->stream ? gw_copy_async(dst[s], src[s], h->stream) : gw_copy(dst[s], src[s]);
    if (st != GW_OK) {
      st = gw_failed(st, what, d);
      if (h->stream) (void)gw_stream_synchronize(h->stream);
      return st;
    }
  }
  if (h->stream) {
    gw_status st = gw_stream_synchronize(h->stream);
    if (st != GW_OK) return gw_failed(st, what, d);
  }
  return GW_OK;
}

/* Tags carry the plan's epoch, which every failed update advances: after a failure a fast
 * neighbour's next messages must not match receives this rank is still cancelling. */
#define EPOCHS 1000 /* 6 tags each: below 32767, the least MPI_TAG_UB */
static int tag(const gw_halo *h, int d, int toward_high) { return 6 * h->epoch + 2 * d + toward_high; }

static gw_status post_receives(gw_halo *h) {
  for (int d = 0; d < 3; d++) {
    halo_dim *hd = &h->dim[d];
    if (hd->link != LINK_MPI) continue;
    for (int s = 0; s < 2; s++) {
      if (hd->peer[s] == MPI_PROC_NULL) continue;
      /* the low halo is filled by the low neighbour's message toward high, and vice versa */
      int rc = MPI_Irecv(mpi_addr(h, hd->recv_buf[s]), hd->bytes, MPI_BYTE, hd->peer[s], tag(h, d, !s),
                         h->comm, &hd->recv_req[s]);
      if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Irecv", d);
    }
  }
  return GW_OK;
}

static gw_status send_dim(gw_halo *h, int d) {
  halo_dim *hd = &h->dim[d];
  gw_status st = copy_faces(h, d, hd->send_buf, hd->send_view, "gw_copy packing a face");
  if (st != GW_OK) return st;
  for (int s = 0; s < 2; s++) {
    if (hd->peer[s] == MPI_PROC_NULL) continue;
    int rc = MPI_Isend(mpi_addr(h, hd->send_buf[s]), hd->bytes, MPI_BYTE, hd->peer[s], tag(h, d, s),
                       h->comm, &hd->send_req[s]);
    if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Isend", d);
  }
  return GW_OK;
}

static gw_status complete_dim(gw_halo *h, int d) {
  halo_dim *hd = &h->dim[d];
  int rc = MPI_Waitall(2, hd->recv_req, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Waitall (receives)", d);
  gw_status st = copy_faces(h, d, hd->recv_view, hd->recv_buf, "gw_copy unpacking a face");
  if (st != GW_OK) return st;
  rc = MPI_Waitall(2, hd->send_req, MPI_STATUSES_IGNORE);
  return rc == MPI_SUCCESS ? GW_OK : gw__halo_mpi(rc, "MPI_Waitall (sends)", d);
}

/* After a failure: cancel the receives still posted, let the sends complete. */
static void quiesce(gw_halo *h) {
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 2; s++) {
      halo_dim *hd = &h->dim[d];
      if (hd->recv_req[s] != MPI_REQUEST_NULL) {
        MPI_Cancel(&hd->recv_req[s]);
        MPI_Wait(&hd->recv_req[s], MPI_STATUS_IGNORE);
      }
      if (hd->send_req[s] != MPI_REQUEST_NULL) MPI_Wait(&hd->send_req[s], MPI_STATUS_IGNORE);
    }
  h->inflight = -1;
  h->started = 0;
  h->epoch = (h->epoch + 1) % EPOCHS;
}

/* Exchange dims d, d+1, ... in order. With `split`, return as soon as the first dim that
 * talks to other ranks has been sent, leaving it in flight. */
static gw_status run_dims(gw_halo *h, int d, int split) {
  for (; d < 3; d++) {
    halo_dim *hd = &h->dim[d];
    gw_status st = GW_OK;
    if (hd->link == LINK_SELF) {
      gw_array *const from[2] = {hd->send_view[1], hd->send_view[0]};
      st = copy_faces(h, d, hd->recv_view, from, "gw_copy of a face to itself");
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

static gw_status begin(gw_halo *h, const char *fn, int split) {
  if (!h) return gw__halo_fail(GW_EINVAL, "%s: plan is NULL", fn);
  if (h->started) return gw__halo_fail(GW_EINVAL, "%s: a split-phase update is in flight (call gw_halo_finish)", fn);
  gw_status st = post_receives(h);
  if (st == GW_OK) st = run_dims(h, 0, split);
  if (st != GW_OK) quiesce(h);
  return st;
}

gw_status gw_halo_update(gw_halo *h) { return begin(h, "gw_halo_update", 0); }

gw_status gw_halo_start(gw_halo *h) {
  gw_status st = begin(h, "gw_halo_start", 1);
  if (st == GW_OK) h->started = 1;
  return st;
}

gw_status gw_halo_finish(gw_halo *h) {
  if (!h) return gw__halo_fail(GW_EINVAL, "gw_halo_finish: plan is NULL");
  if (!h->started) return gw__halo_fail(GW_EINVAL, "gw_halo_finish: no gw_halo_start is in flight");
  int d = h->inflight;
  gw_status st = GW_OK;
  if (d >= 0) st = complete_dim(h, d);
  if (st == GW_OK) st = run_dims(h, d >= 0 ? d + 1 : 3, 0);
  if (st != GW_OK) quiesce(h);
  h->started = 0;
  return st;
}
