/*
 * The halo plan's layout: each dim's neighbours, links and face views, the local copies of
 * periodic dims folded into one batch, the messages each side sends (whole faces, or pieces
 * of large ones) and the buffers that hold them, each segment wrapped once so that an
 * update registers, wraps and allocates nothing.
 */
#define _POSIX_C_SOURCE 200809L /* sysconf */

#include "halo_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Face view of field f along dim d: extent w at `at` along d, the whole extent
 * along every other dim, halo cells included (ImplicitGlobalGrid's sendranges).
 * Along the dims before d their halos are filled by then, so edges and corners
 * get their diagonal neighbours' values; along the dims after d the halo cells
 * go out stale and are overwritten when that dim is exchanged, unless it has no
 * neighbour on that side: then the cell is a boundary value, and the
 * neighbour's copy of it is what the corner should get. Faces that spanned only
 * the interior of the later dims left such corners stale when the boundary dim
 * came after the exchanged one, and gave them the neighbour's value when it
 * came before. */
static gw_status make_face(gw_halo *h, int f, int d, int64_t at, gw_array **out) {
  const int64_t *n = gw_shape(h->field[f]);
  const int *w = h->width[f];
  int64_t start[3], shape[3];
  for (int e = 0; e < h->ndim; e++) {
    start[e] = e == d ? at : 0;
    shape[e] = e == d ? w[e] : n[e];
  }
  gw_status st = gw_view(h->field[f], start, shape, NULL, out);
  return st == GW_OK ? GW_OK : gw__halo_call_failed(st, "gw_view of a face", d);
}

/* The segment of field f's face along d, side s: the whole face (axis < 0) or
 * rows [r0, r1) of it along `axis`; its buffers at send_at / recv_at. */
static gw_status make_seg(gw_halo *h, char *base, int d, int f, int s, int axis, int64_t r0,
                          int64_t r1, size_t send_at, size_t recv_at, gw__halo_seg *sg) {
  gw__halo_face *fc = &h->face[f * 3 + d];
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
    if (st != GW_OK) return gw__halo_call_failed(st, "gw_view of a face piece", d);
  }
  if (h->ghost && h->dim[d].ipc_side[s]) { /* the pack lands in the neighbour's ghost cells */
    sg->send_seg = gw_retain(h->dim[d].ghost_peer[s][f]);
    return GW_OK;
  }
  gw_dtype t = gw_array_dtype(h->field[f]);
  const int64_t *shape = gw_shape(sg->send_view);
  /* (direct: the send segment is the peer's receive buffer, shm_delta away) */
  st = gw_wrap(h->ctx, base + send_at + h->dim[d].shm_delta[s], t, h->ndim, shape, NULL, 0,
               &sg->send_seg);
  if (st == GW_OK) st = gw_wrap(h->ctx, base + recv_at, t, h->ndim, shape, NULL, 0, &sg->recv_seg);
  return st == GW_OK ? GW_OK : gw__halo_call_failed(st, "gw_wrap of a halo buffer", d);
}

static size_t face_bytes(const gw_halo *h, int f, int d, int s) {
  const gw_array *v = h->face[f * 3 + d].send_view[s];
  return (size_t)gw_numel(v) * gw_dtype_size(gw_array_dtype(v));
}

/* Lay out the messages of dim d, side 0's then side 1's; each message's send
 * buffer, then its receive buffer, from off[0] on (off[1]: IPC messages, in the
 * IPC block) (256-byte aligned: any dtype, DMA friendly). With fill = 0 only
 * count and size them; with 1 also place the messages; with 2 also make the
 * segments (after shm_link, which needs the places to make them). A side whose
 * aggregated message is at most h->chunk bytes (or chunk 0) is one message
 * holding every field's face side by side; a larger one is one message per
 * piece of each face, cut along the face's first axis of extent > 1 (the axes
 * before it have extent 1, so a piece is a contiguous run of the C-order
 * segment). */
static gw_status layout_dim(gw_halo *h, int d, size_t off[2], int fill) {
  gw__halo_dim *hd = &h->dim[d];
  int nm = 0, ns = 0;
  for (int s = 0; s < 2; s++) {
    if (hd->peer[s] == MPI_PROC_NULL) continue;
    if (h->chunk == 0 || (size_t)hd->bytes <= h->chunk || hd->shm_side[s] ||
        hd->ipc_side[s]) { /* direct: no pieces */
      int ipc = hd->ipc_side[s];
      size_t *o = &off[ipc];
      char *base = ipc ? h->ipc_base : h->msg_base;
      size_t send_at = *o, recv_at = *o + halo_round_up((size_t)hd->bytes, 256), seg = 0;
      if (fill)
        hd->msg[nm] =
            (gw__halo_msg){s, hd->bytes, send_at, recv_at, ns, 0, hd->shm_side[s] || ipc, ipc};
      for (int f = 0; f < h->nfields; f++) {
        if (!h->face[f * 3 + d].send_view[s]) continue;
        seg = halo_round_up(seg, 256);
        if (fill == 2) {
          gw_status st =
              make_seg(h, base, d, f, s, -1, 0, 0, send_at + seg, recv_at + seg, &hd->seg[ns]);
          if (st != GW_OK) return st;
        }
        if (fill) hd->msg[nm].count++;
        seg += face_bytes(h, f, d, s);
        ns++;
      }
      *o += 2 * halo_round_up((size_t)hd->bytes, 256);
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
        size_t send_at = off[0], recv_at = off[0] + halo_round_up(bytes, 256);
        if (fill) hd->msg[nm] = (gw__halo_msg){s, (int)bytes, send_at, recv_at, ns, 1, 0, 0};
        if (fill == 2) {
          gw_status st =
              make_seg(h, h->msg_base, d, f, s, axis, r0, r1, send_at, recv_at, &hd->seg[ns]);
          if (st != GW_OK) return st;
        }
        off[0] += 2 * halo_round_up(bytes, 256);
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

/* One block holds every message (one page-aligned pinned block on the host
 * path, one device allocation on the device path); each segment is wrapped
 * once, so nothing is registered, wrapped or allocated per update. */
/* The main block: device memory (device and NCCL paths) or page-aligned pinned
 * host memory. */
static gw_status main_block(gw_halo *h, int device_path, size_t total) {
  if (device_path) {
    int64_t n = (int64_t)total;
    gw_status st = gw_alloc(h->ctx, GW_MEM_DEVICE, GW_UINT8, 1, &n, &h->dev_block);
    if (st != GW_OK) return gw__halo_call_failed(st, "gw_alloc of the device buffers", -1);
    h->msg_base = gw_data(h->dev_block);
    return GW_OK;
  }
  long page = sysconf(_SC_PAGESIZE);
  size_t align = page > 0 ? (size_t)page : 4096;
  size_t bytes = halo_round_up(total, align);
  char *base = aligned_alloc(align, bytes);
  if (!base) return gw__halo_fail(GW_ENOMEM, "cannot allocate %zu bytes of halo buffers", bytes);
  gw_status st = gw_pin(h->ctx, base, bytes);
  if (st != GW_OK) {
    free(base);
    return gw__halo_call_failed(st, "gw_pin of the host buffers", -1);
  }
  h->host_block = base;
  h->host_block_bytes = bytes;
  h->msg_base = base;
  return GW_OK;
}

/* *failed: set when the ranks' agreement in here failed (every rank knows
 * then). */
gw_status gw__halo_make_buffers(gw_halo *h, int device_path, int *failed) {
  size_t sizes[2] = {0, 0}, total = 0; /* the main block's, the IPC block's */
  gw_status st = GW_OK;
  for (int d = 0; d < h->ndim; d++) {
    gw__halo_dim *hd = &h->dim[d];
    if (hd->link != LINK_MPI) continue;
    (void)layout_dim(h, d, sizes, 0);
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
  total = sizes[0] + sizes[1];
  if (h->shm_win == MPI_WIN_NULL && h->shm_node != MPI_COMM_NULL && !h->ipc) {
    /* Collective over the node whatever happened here (a rank that fails alone
     * must not leave the others in the window's allocation or, later, in
     * shm_link's exchange with it): the window is made by every rank of the
     * node. */
    gw_status w = gw__halo_shm_block(h, st == GW_OK ? total : 0);
    if (st == GW_OK) st = w;
  } else if (st == GW_OK && sizes[0] > 0) {
    st = main_block(h, device_path, sizes[0]);
  }
  /* IPC: this rank's receive buffers for its on-node neighbours, exported (none where the
   * packs go into the ghost cells: sizes[1] then only says the messages are not empty) */
  if (st == GW_OK && h->ipc && !h->ghost && sizes[1] > 0) st = gw__halo_ipc_block(h, sizes[1]);
  /* Then every rank learns whether all made their buffers: every rank of the
   * plan, a rank alone on its node (no window) too, or the others wait here for
   * it (in the window's offsets or the IPC handles below). */
  st = gw__halo_agree_once(h->comm, st, "gw_halo_create", failed);
  if (st != GW_OK) return st;
  if (total == 0) {
    /* Every face is empty (a field of extent 0 along a dim that is not
     * exchanged): nothing to send. The messages were counted but never laid
     * out, so posted they would all name side 0 (calloc), every rank sending to
     * one neighbour only and waiting for the other: a hang. The neighbours of a
     * face see its size alike, so both drop theirs. */
    for (int d = 0; d < h->ndim; d++) h->dim[d].nmsg = h->dim[d].nseg = 0;
    return GW_OK;
  }

  h->info.buffer_bytes = h->ghost ? sizes[0] : total;
  for (int fill = 1; fill <= 2; fill++) {
    size_t off[2] = {0, 0};
    for (int d = 0; d < h->ndim; d++) {
      if (h->dim[d].link != LINK_MPI) continue;
      st = layout_dim(h, d, off, fill);
      if (st != GW_OK) return st;
    }
    if (fill == 1) {
      int d0 = 0, m0 = -1;
      h->direct = gw__halo_next_direct(h, &d0, &m0); /* the token flow runs */
      h->ipc_only = h->ipc;
      for (int d = 0; d < h->ndim; d++)
        for (int m = 0; h->dim[d].link == LINK_MPI && m < h->dim[d].nmsg; m++)
          h->ipc_only &= h->dim[d].msg[m].ipc;
    }
    if (fill == 1 && h->shm_win != MPI_WIN_NULL && (st = gw__halo_shm_link(h)) != GW_OK) return st;
    /* (a failed open is this rank's: create's last agreement makes it every
     * rank's) */
    if (fill == 1 && h->ipc && (st = gw__halo_ipc_link(h)) != GW_OK) return st;
  }
  return h->ipc ? gw__halo_ipc_prepare(h) : GW_OK;
}

/* Neighbours, links, face views and message sizes of every dim. */
gw_status gw__halo_make_dims(gw_halo *h) {
  int dims[3], periods[3], coords[3];
  gw_status st =
      gw__halo_mpi(MPI_Cart_get(h->comm, h->ndim, dims, periods, coords), "MPI_Cart_get", -1);
  if (st != GW_OK) return st;
  for (int d = 0; d < h->ndim; d++) {
    gw__halo_dim *hd = &h->dim[d];
    st = gw__halo_mpi(MPI_Cart_shift(h->comm, d, 1, &hd->peer[0], &hd->peer[1]), "MPI_Cart_shift",
                      d);
    if (st != GW_OK) return st;
    int any = 0;
    for (int f = 0; f < h->nfields; f++) any |= h->width[f][d] > 0;
    if (!any || (hd->peer[0] == MPI_PROC_NULL && hd->peer[1] == MPI_PROC_NULL))
      continue; /* LINK_NONE */
    /* A rank's own periodic neighbour goes through NCCL (a send/receive to
     * itself) only with GPUWRAP_HALO_NCCL_SELF=1: the pack + NCCL self-copy +
     * unpack costs a few times the direct face copies (see docs/BENCHMARKS.md,
     * 'Measurements behind the code's choices'), so by default those dims are
     * copied directly, as on the other paths, and NCCL carries only the faces
     * of other ranks. */
    hd->link = dims[d] == 1 && !(h->nccl && h->set.nccl_self) ? LINK_SELF : LINK_MPI;
    for (int s = 0; s < 2 && hd->link == LINK_MPI; s++) {
      int near = gw__halo_shm_peer(h, hd->peer[s]);
      hd->shm_side[s] = near && !h->ipc;
      hd->ipc_side[s] = near && h->ipc;
      h->info.shared_memory |= hd->shm_side[s];
    }
    uint64_t bytes = 0;
    for (int f = 0; f < h->nfields; f++) {
      int w = h->width[f][d];
      if (w == 0) continue;
      const int64_t *n = gw_shape(h->field[f]);
      gw__halo_face *fc = &h->face[f * 3 + d];
      for (int s = 0; s < 2; s++) {
        if (hd->peer[s] == MPI_PROC_NULL) continue;
        st = make_face(h, f, d, s ? n[d] - 2 * w : w, &fc->send_view[s]);
        if (st == GW_OK) st = make_face(h, f, d, s ? n[d] - w : 0, &fc->recv_view[s]);
        if (st != GW_OK) return st;
      }
      int s0 = hd->peer[0] != MPI_PROC_NULL ? 0 : 1;
      uint64_t face =
          (uint64_t)gw_numel(fc->send_view[s0]) * gw_dtype_size(gw_array_dtype(h->field[f]));
      bytes = halo_round_up(bytes, 256) + face; /* the segment layout of make_buffers */
      for (int s = 0; s < 2; s++)
        if (hd->peer[s] != MPI_PROC_NULL && hd->link == LINK_SELF)
          h->info.bytes_local += (size_t)face;
    }
    if (bytes > INT_MAX)
      return gw__halo_fail(GW_EINVAL,
                           "gw_halo_create: a message along dim %d has %llu bytes, more "
                           "than one MPI message carries (INT_MAX)",
                           d, (unsigned long long)bytes);
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
 * The local copies of each run of consecutive periodic dims of one rank
 * (LINK_SELF), folded into one batch made once. Done dim by dim (each face
 * reaching over the previous dims' halos, make_face), the copies write every
 * cell of the run's halo shell once and give it the value of the cell that
 * wraps each of its halo coordinates around its dim: along a run dim of width w
 * and extent n, the low halo [0, w) reads [n - 2w, n - w), the high halo [n -
 * w, n) reads [w, 2w), the rest [w, n - w) reads itself; dims outside the run
 * span their whole extent (the faces' extents, make_face). So the shell
 * is cut into boxes, one per combination of those classes that touches a halo
 * (up to 26 per field in 3-D), each a plain copy from an interior box: no box
 * reads what another writes, so the batch is independent and runs as one
 * launch, whose result equals the dim by dim copies' bit for bit.
 */
gw_status gw__halo_make_self(gw_halo *h) {
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
            skip |= cls != 1;                  /* (a halo class of a dim without one: no box) */
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
        if (st == GW_OK)
          n++;
        else
          st = gw__halo_call_failed(st, "gw_view of a halo box", d0);
      }
    }
    if (st == GW_OK && n > 0) {
      st = gw__batch_make(dst, (const gw_array *const *)src, n, &h->self_batch[d0]);
      if (st != GW_OK) st = gw__halo_call_failed(st, "preparing the local halo copies", d0);
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
