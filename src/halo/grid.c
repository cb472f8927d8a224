/*
 * Grid helpers: the Cartesian communicator, the block of cells each rank owns, the device
 * per node-local rank, and gather (ImplicitGlobalGrid's init_global_grid, select_device and
 * gather!), so a stencil code does not rebuild them by hand around its halo plans.
 */
#include "halo_internal.h"
#include "../core/out_struct.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct gw_grid {
  MPI_Comm comm; /* Cartesian, reorder = 1 */
  gw_grid_info info;
};

/* Cells and first index along d of the rank at coordinate c (the even split). */
static void split(int64_t global, int parts, int c, int64_t *cells, int64_t *first) {
  int64_t base = global / parts, rem = global % parts;
  *cells = base + (c < rem);
  *first = c * base + (c < rem ? c : rem);
}

/* This rank's checks of grid_make's arguments, and the rank grid (dims) they give. Sizes
 * are products of caller-given counts: each is checked for overflow. */
static gw_status grid_check(const char *fn, int nranks, int ndims, const int64_t size[],
                            const int periods[], const int dims_in[], int from_local, int dims[3],
                            int per[3]) {
  if (ndims < 1 || ndims > 3)
    return gw__halo_fail(GW_EINVAL, "%s: ndims is %d, must be 1, 2 or 3", fn, ndims);
  const char *what = from_local ? "local" : "global";
  if (!size) return gw__halo_fail(GW_EINVAL, "%s: %s is NULL", fn, what);
  int64_t fixed = 1;
  for (int d = 0; d < ndims; d++) {
    if (size[d] < 1)
      return gw__halo_fail(GW_EINVAL, "%s: %s[%d] is %lld, must be >= 1", fn, what, d,
                           (long long)size[d]);
    if (dims_in) {
      if (dims_in[d] < 0)
        return gw__halo_fail(GW_EINVAL, "%s: dims[%d] is %d, must be >= 0", fn, d, dims_in[d]);
      dims[d] = dims_in[d];
      /* (past the ranks of comm the product is wrong anyway: stop before it overflows) */
      if (dims[d] && (__builtin_mul_overflow(fixed, (int64_t)dims[d], &fixed) || fixed > nranks))
        return gw__halo_fail(GW_EINVAL,
                             "%s: dims[%d] is %d: dims fix more ranks than the %d of comm", fn, d,
                             dims[d], nranks);
    }
    per[d] = periods && periods[d] ? 1 : 0;
  }
  if (nranks % fixed != 0)
    return gw__halo_fail(GW_EINVAL,
                         "%s: dims fix %lld ranks, which does not divide the %d ranks of comm", fn,
                         (long long)fixed, nranks);
  int free_dims = 0;
  for (int d = 0; d < ndims; d++) free_dims += dims[d] == 0;
  if (!free_dims && fixed != nranks)
    return gw__halo_fail(GW_EINVAL, "%s: dims give %lld ranks, comm has %d", fn, (long long)fixed,
                         nranks);
  gw_status st = gw__halo_mpi(MPI_Dims_create(nranks, ndims, dims), "MPI_Dims_create", -1);
  if (st != GW_OK) return st;
  int64_t cells = 1;
  for (int d = 0; d < ndims; d++) {
    int64_t global = size[d];
    if (!from_local && size[d] < dims[d])
      return gw__halo_fail(
          GW_EINVAL,
          "%s: global[%d] is %lld, less than the %d ranks along dim %d: every rank "
          "must own a cell",
          fn, d, (long long)size[d], dims[d], d);
    if (from_local && __builtin_mul_overflow(size[d], (int64_t)dims[d], &global))
      return gw__halo_fail(
          GW_EINVAL,
          "%s: local[%d] is %lld: times the %d ranks along dim %d, the global size "
          "overflows int64_t",
          fn, d, (long long)size[d], dims[d], d);
    /* (a field of the grid has at least this many elements: its count must exist) */
    if (__builtin_mul_overflow(cells, global, &cells))
      return gw__halo_fail(GW_EINVAL,
                           "%s: %s[%d] is %lld: the global box's cell count overflows int64_t", fn,
                           what, d, (long long)size[d]);
  }
  return GW_OK;
}

static gw_status grid_make(const char *fn, MPI_Comm comm, int ndims, const int64_t size[],
                           const int periods[], const int dims_in[], int from_local,
                           gw_grid **out) {
  if (comm == MPI_COMM_NULL) return gw__halo_fail(GW_EINVAL, "%s: comm is MPI_COMM_NULL", fn);
  int nranks = 0;
  gw_status st = gw__halo_mpi(MPI_Comm_size(comm, &nranks), "MPI_Comm_size", -1);
  if (st != GW_OK) return st;
  int dims[3] = {0, 0, 0}, per[3] = {0, 0, 0};
  st = out ? grid_check(fn, nranks, ndims, size, periods, dims_in, from_local, dims, per)
           : gw__halo_fail(GW_EINVAL, "%s: out is NULL", fn);
  /* MPI_Cart_create below is collective: a rank that found an error must not leave the
   * others there (comm is one communicator: its own check above is alike everywhere) */
  gw_grid *g = st == GW_OK ? calloc(1, sizeof *g) : NULL;
  if (st == GW_OK && !g) st = gw__halo_fail(GW_ENOMEM, "%s: out of memory", fn);
  st = gw__halo_agree(comm, st, fn);
  if (st != GW_OK) {
    free(g);
    return st;
  }
  gw_grid_info *in = &g->info;
  in->ndims = ndims;
  for (int d = 0; d < 3; d++) {
    in->dims[d] = d < ndims ? dims[d] : 1;
    in->periods[d] = d < ndims ? per[d] : 0;
    in->global[d] = in->local[d] = 1;
  }
  g->comm = MPI_COMM_NULL;
  /* reorder = 1: MPI may renumber the ranks so that Cartesian neighbours share a node */
  st = gw__halo_mpi(MPI_Cart_create(comm, ndims, dims, per, 1, &g->comm), "MPI_Cart_create", -1);
  if (st == GW_OK) st = gw__halo_mpi(MPI_Comm_rank(g->comm, &in->rank), "MPI_Comm_rank", -1);
  if (st == GW_OK) st = gw__halo_mpi(MPI_Comm_size(g->comm, &in->size), "MPI_Comm_size", -1);
  if (st == GW_OK)
    st = gw__halo_mpi(MPI_Cart_coords(g->comm, in->rank, ndims, in->coords), "MPI_Cart_coords", -1);
  if (st == GW_OK) {
    MPI_Comm node = MPI_COMM_NULL;
    st = gw__halo_mpi(
        MPI_Comm_split_type(g->comm, MPI_COMM_TYPE_SHARED, in->rank, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type", -1);
    if (st == GW_OK) st = gw__halo_mpi(MPI_Comm_rank(node, &in->node_rank), "MPI_Comm_rank", -1);
    if (st == GW_OK) st = gw__halo_mpi(MPI_Comm_size(node, &in->node_size), "MPI_Comm_size", -1);
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  }
  if (st != GW_OK) {
    gw_grid_destroy(g);
    return st;
  }
  for (int d = 0; d < ndims; d++) {
    in->global[d] = from_local ? size[d] * dims[d] : size[d];
    split(in->global[d], dims[d], in->coords[d], &in->local[d], &in->offset[d]);
  }
  *out = g;
  return GW_OK;
}

gw_status gw_grid_create(MPI_Comm comm, int ndims, const int64_t global[], const int periods[],
                         const int dims[], gw_grid **out) {
  return grid_make("gw_grid_create", comm, ndims, global, periods, dims, 0, out);
}

gw_status gw_grid_create_local(MPI_Comm comm, int ndims, const int64_t local[], const int periods[],
                               const int dims[], gw_grid **out) {
  return grid_make("gw_grid_create_local", comm, ndims, local, periods, dims, 1, out);
}

void gw_grid_destroy(gw_grid *g) {
  if (!g) return;
  if (g->comm != MPI_COMM_NULL) MPI_Comm_free(&g->comm);
  free(g);
}

MPI_Comm gw_grid_comm(const gw_grid *g) { return g ? g->comm : MPI_COMM_NULL; }

static const size_t grid_layouts[] = GW__GRID_INFO_LAYOUTS;
GW__LAYOUTS_CHECK(gw_grid_info, GW__GRID_INFO_LAST);

gw_status gw_grid_query(const gw_grid *g, gw_grid_info *out) {
  if (!g || !out) return gw__halo_fail(GW_EINVAL, "gw_grid_query: %s is NULL", !g ? "grid" : "out");
  gw__out_copy(out, &g->info, grid_layouts, sizeof grid_layouts / sizeof grid_layouts[0]);
  return GW_OK;
}

gw_status gw_grid_block(const gw_grid *g, int r, int64_t local[3], int64_t offset[3]) {
  if (!g || !local || !offset)
    return gw__halo_fail(GW_EINVAL, "gw_grid_block: %s is NULL",
                         !g       ? "grid"
                         : !local ? "local"
                                  : "offset");
  if (r < 0 || r >= g->info.size)
    return gw__halo_fail(GW_EINVAL, "gw_grid_block: rank %d is not in 0..%d", r, g->info.size - 1);
  int c[3] = {0, 0, 0};
  gw_status st = gw__halo_mpi(MPI_Cart_coords(g->comm, r, g->info.ndims, c), "MPI_Cart_coords", -1);
  if (st != GW_OK) return st;
  for (int d = 0; d < 3; d++) {
    local[d] = 1;
    offset[d] = 0;
    if (d < g->info.ndims) split(g->info.global[d], g->info.dims[d], c[d], &local[d], &offset[d]);
  }
  return GW_OK;
}

gw_status gw_grid_context_create(const gw_grid *g, gw_backend backend, gw_context **out) {
  if (!g || !out)
    return gw__halo_fail(GW_EINVAL, "gw_grid_context_create: %s is NULL", !g ? "grid" : "out");
  gw_context *c;
  gw_status st = gw_context_create(backend, 0, &c); /* resolves AUTO / GPUWRAP_BACKEND */
  if (st != GW_OK)
    return gw__halo_fail(st, "gw_grid_context_create: gw_context_create: %s", gw_last_error());
  int count = 0;
  gw_backend b = gw_context_backend(c);
  st = gw_backend_device_count(b, &count);
  if (st != GW_OK) {
    gw_context_destroy(c);
    return gw__halo_fail(st, "gw_grid_context_create: gw_backend_device_count: %s",
                         gw_last_error());
  }
  int dev = count > 0 ? g->info.node_rank % count : 0;
  if (dev != 0) {
    gw_context_destroy(c);
    st = gw_context_create(b, dev, &c);
    if (st != GW_OK)
      return gw__halo_fail(st, "gw_grid_context_create: device %d of %s: %s", dev,
                           gw_backend_name(b), gw_last_error());
  }
  *out = c;
  return GW_OK;
}

/* ---- gather -------------------------------------------------------------------------- */

/* This rank's part of the argument checks: GW_OK or the failure (recorded). */
static gw_status gather_check(const gw_grid *g, gw_array *field, const int *width, int root,
                              int root_dtype, int w[3]) {
  const gw_grid_info *in = &g->info;
  if (root < 0 || root >= in->size)
    return gw__halo_fail(GW_EINVAL, "gw_grid_gather: root %d is not a rank of the grid (0..%d)",
                         root, in->size - 1);
  if (!field) return gw__halo_fail(GW_EINVAL, "gw_grid_gather: field is NULL (rank %d)", in->rank);
  if (gw_ndim(field) != in->ndims)
    return gw__halo_fail(GW_EINVAL, "gw_grid_gather: field has %d dims, the grid %d",
                         gw_ndim(field), in->ndims);
  if (root_dtype >= 0 && (int)gw_array_dtype(field) != root_dtype)
    return gw__halo_fail(GW_EINVAL, "gw_grid_gather: field is %s on rank %d, %s on root",
                         gw_dtype_name(gw_array_dtype(field)), in->rank,
                         gw_dtype_name((gw_dtype)root_dtype));
  const int64_t *n = gw_shape(field);
  for (int d = 0; d < in->ndims; d++) {
    int64_t extra = n[d] - in->local[d];
    if (width) {
      w[d] = width[d];
      if (width[d] < 0 || extra != 2 * (int64_t)width[d])
        return gw__halo_fail(
            GW_EINVAL,
            "gw_grid_gather: field extent %lld along dim %d is not this rank's %lld "
            "cells + 2*width[%d] (%d) (rank %d)",
            (long long)n[d], d, (long long)in->local[d], d, width[d], in->rank);
    } else {
      if (extra < 0 || extra % 2 || extra / 2 > INT_MAX)
        return gw__halo_fail(
            GW_EINVAL,
            "gw_grid_gather: field extent %lld along dim %d is not this rank's %lld "
            "cells plus an even halo (rank %d)",
            (long long)n[d], d, (long long)in->local[d], in->rank);
      w[d] = (int)(extra / 2);
    }
  }
  return GW_OK;
}

static gw_status global_check(const gw_grid *g, const gw_array *global, gw_dtype t) {
  if (!global) return gw__halo_fail(GW_EINVAL, "gw_grid_gather: global is NULL on root");
  if (gw_ndim(global) != g->info.ndims || gw_array_dtype(global) != t)
    return gw__halo_fail(GW_EINVAL, "gw_grid_gather: global is %d-D %s, the gather gives %d-D %s",
                         gw_ndim(global), gw_dtype_name(gw_array_dtype(global)), g->info.ndims,
                         gw_dtype_name(t));
  for (int d = 0; d < g->info.ndims; d++)
    if (gw_shape(global)[d] != g->info.global[d])
      return gw__halo_fail(GW_EINVAL,
                           "gw_grid_gather: global extent %lld along dim %d, the grid has %lld",
                           (long long)gw_shape(global)[d], d, (long long)g->info.global[d]);
  if (gw_is_readonly(global))
    return gw__halo_fail(GW_EREADONLY, "gw_grid_gather: global is read-only");
  return GW_OK;
}

/* Every rank learns the worst status of all (so no rank waits in a gather another left). */
static gw_status agree(const gw_grid *g, gw_status mine) {
  return gw__halo_agree(g->comm, mine, "gw_grid_gather");
}

gw_status gw_grid_gather(const gw_grid *g, gw_array *field, const int width[], gw_array *global,
                         int root) {
  if (!g) return gw__halo_fail(GW_EINVAL, "gw_grid_gather: grid is NULL");
  const gw_grid_info *in = &g->info;
  int nd = in->ndims, w[3] = {0, 0, 0};
  int is_root = in->rank == root;
  /* root's dtype first, so every rank can check its own against it */
  int root_dtype = -1;
  if (is_root && field) root_dtype = (int)gw_array_dtype(field);
  if (root >= 0 && root < in->size) {
    int rc = MPI_Bcast(&root_dtype, 1, MPI_INT, root, g->comm);
    if (rc != MPI_SUCCESS) return gw__halo_mpi(rc, "MPI_Bcast", -1);
  }
  gw_status st = gather_check(g, field, width, root, root_dtype, w);
  if (st == GW_OK && is_root) st = global_check(g, global, gw_array_dtype(field));
  if (root < 0 || root >= in->size) return st; /* every rank found it alike, no collective */
  st = agree(g, st);
  if (st != GW_OK) return st;

  gw_dtype t = gw_array_dtype(field);
  size_t elem = gw_dtype_size(t);
  gw_context *ctx = gw_array_context(field);
  /* this rank's interior, contiguous on the host */
  int64_t start[3], shape[3];
  for (int d = 0; d < nd; d++) {
    start[d] = w[d];
    shape[d] = in->local[d];
  }
  gw_array *interior = NULL, *mine = NULL;
  st = gw_view(field, start, shape, NULL, &interior);
  if (st == GW_OK) st = gw_alloc(ctx, GW_MEM_HOST, t, nd, shape, &mine);
  if (st == GW_OK) st = gw_copy(mine, interior);
  if (st != GW_OK)
    st = gw__halo_fail(st, "gw_grid_gather: copying the interior: %s", gw_last_error());
  int64_t count = 1;
  for (int d = 0; d < nd; d++) count *= shape[d];
  if (st == GW_OK && count > INT_MAX)
    st = gw__halo_fail(GW_EINVAL, "gw_grid_gather: %lld cells on one rank, more than MPI counts",
                       (long long)count);

  int *counts = NULL, *displs = NULL;
  char *all = NULL;
  if (st == GW_OK && is_root) {
    counts = calloc((size_t)in->size, sizeof *counts);
    displs = calloc((size_t)in->size, sizeof *displs);
    int64_t total = 0;
    for (int r = 0; r < in->size && counts && displs; r++) {
      int64_t l[3], o[3];
      (void)gw_grid_block(g, r, l, o);
      int64_t c = l[0] * l[1] * l[2]; /* (at most the global box's count: grid_check) */
      if (c > INT_MAX || total > INT_MAX) {
        total = (int64_t)INT_MAX + 1;
        break;
      }
      counts[r] = (int)c;
      displs[r] = (int)total;
      total += counts[r];
    }
    if (!counts || !displs)
      st = gw__halo_fail(GW_ENOMEM, "gw_grid_gather: out of memory");
    else if (total > INT_MAX)
      st = gw__halo_fail(GW_EINVAL, "gw_grid_gather: %lld cells, more than MPI counts",
                         (long long)total);
    else if (!(all = malloc((size_t)total * elem + 1)))
      st = gw__halo_fail(GW_ENOMEM, "gw_grid_gather: out of memory");
  }
  st = agree(g, st);
  MPI_Datatype cell = MPI_DATATYPE_NULL;
  if (st == GW_OK) {
    int rc = MPI_Type_contiguous((int)elem, MPI_BYTE, &cell);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&cell);
    if (rc == MPI_SUCCESS)
      rc = MPI_Gatherv(gw_host_data(mine), (int)count, cell, all, counts, displs, cell, root,
                       g->comm);
    if (rc != MPI_SUCCESS) st = gw__halo_mpi(rc, "MPI_Gatherv", -1);
    if (cell != MPI_DATATYPE_NULL) MPI_Type_free(&cell);
  }
  /* root: each rank's block into its place in `global` */
  for (int r = 0; st == GW_OK && is_root && r < in->size; r++) {
    int64_t l[3], o[3];
    gw_array *piece = NULL, *dst = NULL;
    (void)gw_grid_block(g, r, l, o);
    st = gw_wrap(ctx, all + (size_t)displs[r] * elem, t, nd, l, NULL, GW_WRAP_NO_REGISTER, &piece);
    if (st == GW_OK) st = gw_view(global, o, l, NULL, &dst);
    if (st == GW_OK) st = gw_copy(dst, piece);
    if (st != GW_OK)
      st = gw__halo_fail(st, "gw_grid_gather: placing rank %d's block: %s", r, gw_last_error());
    gw_release(piece);
    gw_release(dst);
  }
  free(all);
  free(counts);
  free(displs);
  gw_release(mine);
  gw_release(interior);
  return st;
}
