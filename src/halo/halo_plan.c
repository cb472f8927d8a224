/*
 * The halo plan object: what frees it (every part a failed create may have made, in the
 * order the parts depend on each other), gw_halo_destroy and the queries. Its creation is
 * halo_create.c; its argument checks halo_args.c; its layout halo_layout.c.
 */
#include "halo_internal.h"
#include "../core/out_struct.h"

#include <stdlib.h>

void gw__halo_plan_free(gw_halo *h) {
  /* (collective, as this one: every rank's plan has its alt or none's) */
  if (h->alt) gw__halo_plan_free(h->alt);
  h->alt = NULL;
  gw_stream_destroy(h->stream); /* waits for its work: nothing reads the buffers after this */
  gw__halo_shm_close(h);        /* tokens in flight, the neighbours' segments pinned here */
  gw__halo_nccl_close(h);
  if (h->face)
    for (int i = 0; i < 3 * h->nfields; i++)
      for (int s = 0; s < 2; s++) {
        gw_release(h->face[i].send_view[s]);
        gw_release(h->face[i].recv_view[s]);
      }
  for (int d = 0; d < 3; d++) {
    gw__halo_dim *hd = &h->dim[d];
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
  gw__halo_ipc_close(h); /* after the segments, which wrap the neighbours' mapped buffers */
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

void gw_halo_destroy(gw_halo *h) {
  if (!h) return;
  if (h->started || (h->alt && h->alt->started)) (void)gw_halo_finish(h);
  gw__halo_plan_free(h);
}

gw_status gw_halo_neighbour(const gw_halo *h, int dim, int side, int *rank, gw_halo_path *path) {
  if (!h || !rank || !path)
    return gw__halo_fail(GW_EINVAL, "gw_halo_neighbour: %s is NULL",
                         !h      ? "plan"
                         : !rank ? "rank"
                                 : "path");
  if (dim < 0 || dim >= h->ndim || side < 0 || side > 1)
    return gw__halo_fail(GW_EINVAL,
                         "gw_halo_neighbour: dim %d side %d: the plan has dims "
                         "0..%d, sides 0 and 1",
                         dim, side, h->ndim - 1);
  const gw__halo_dim *hd = &h->dim[dim];
  *rank = hd->peer[side];
  gw_halo_path p = GW_HALO_PATH_AUTO;
  if (hd->link == LINK_MPI && hd->peer[side] != MPI_PROC_NULL) {
    p = h->info.path;
    if (p == GW_HALO_PATH_IPC && !hd->ipc_side[side]) p = GW_HALO_PATH_HOST;
  }
  *path = p;
  return GW_OK;
}

static const size_t info_layouts[] = GW__HALO_INFO_LAYOUTS;
GW__LAYOUTS_CHECK(gw_halo_info, GW__HALO_INFO_LAST);

gw_status gw_halo_query(const gw_halo *h, gw_halo_info *out) {
  if (!h || !out) return gw__halo_fail(GW_EINVAL, "gw_halo_query: %s is NULL", !h ? "plan" : "out");
  gw__out_copy(out, &h->info, info_layouts, sizeof info_layouts / sizeof info_layouts[0]);
  return GW_OK;
}
