/*
 * The halo plan's argument checks: the communicator (the one check made before any
 * collective), this rank's fields, widths and path, and the settings a plan reads. Each is
 * this rank's verdict; the create sequence (halo_create.c) makes it every rank's.
 */
#include "halo_internal.h"

#include <stdint.h>
#include <stdio.h>

/* The one check made before any collective: `cart` is one communicator, so
 * every rank of it finds the same (a rank passing another communicator than its
 * peers is outside what any collective call can detect). */
gw_status gw__halo_check_cart(const char *fn, MPI_Comm cart) {
  if (cart == MPI_COMM_NULL) return gw__halo_fail(GW_EINVAL, "%s: cart is MPI_COMM_NULL", fn);
  int topo = MPI_UNDEFINED;
  gw_status st = gw__halo_mpi(MPI_Topo_test(cart, &topo), "MPI_Topo_test", -1);
  if (st != GW_OK) return st;
  if (topo != MPI_CART)
    return gw__halo_fail(GW_EINVAL, "%s: cart is not a Cartesian communicator (MPI_Cart_create)",
                         fn);
  return GW_OK;
}

/* This rank's arguments (`strict`: gw_halo_create's contract, 3-D, widths >= 1,
 * kept for its callers). Local: create() shares the outcome with every rank
 * before going on. */
gw_status gw__halo_check_args(const char *fn, const gw_halo_field *fields, int nfields,
                              MPI_Comm cart, gw_halo_path path, gw_halo **out, int strict) {
  if (!fields || !out)
    return gw__halo_fail(GW_EINVAL, "%s: %s is NULL", fn, !fields ? "fields" : "out");
  if (nfields < 1) return gw__halo_fail(GW_EINVAL, "%s: nfields is %d, must be >= 1", fn, nfields);
  if (path != GW_HALO_PATH_AUTO && path != GW_HALO_PATH_HOST && path != GW_HALO_PATH_DEVICE &&
      path != GW_HALO_PATH_NCCL && path != GW_HALO_PATH_IPC)
    return gw__halo_fail(GW_EINVAL, "%s: unknown path %d", fn, (int)path);
  int ndim = 0;
  for (int f = 0; f < nfields; f++) {
    gw_array *a = fields[f].field;
    /* the argument as the caller wrote it: gw_halo_create's `field`, or
     * fields[f].field */
    char who[40];
    if (strict)
      snprintf(who, sizeof who, "field");
    else
      snprintf(who, sizeof who, "fields[%d].field", f);
    if (!a) return gw__halo_fail(GW_EINVAL, "%s: %s is NULL", fn, who);
    int nd = gw_ndim(a);
    if (strict && nd != 3)
      return gw__halo_fail(GW_EINVAL, "%s: field has %d dims, a halo plan needs 3", fn, nd);
    if (nd < 1 || nd > 3)
      return gw__halo_fail(GW_EINVAL, "%s: %s has %d dims, a halo plan takes 1, 2 or 3", fn, who,
                           nd);
    if (f == 0)
      ndim = nd;
    else if (nd != ndim)
      return gw__halo_fail(GW_EINVAL,
                           "%s: %s has %d dims, fields[0].field %d: all fields of a "
                           "plan have the communicator's dims",
                           fn, who, nd, ndim);
    if (gw_is_readonly(a))
      return gw__halo_fail(GW_EREADONLY, "%s: %s is read-only, its halo cannot be written", fn,
                           who);
    gw_context *c0 = gw_array_context(fields[0].field), *c = gw_array_context(a);
    if (gw_context_backend(c) != gw_context_backend(c0) ||
        gw_context_device(c) != gw_context_device(c0))
      return gw__halo_fail(GW_EINVAL,
                           "%s: %s belongs to %s device %d, fields[0].field to %s "
                           "device %d: one plan, one device",
                           fn, who, gw_backend_name(gw_context_backend(c)), gw_context_device(c),
                           gw_backend_name(gw_context_backend(c0)), gw_context_device(c0));
    const int64_t *n = gw_shape(a);
    for (int d = 0; d < nd; d++) {
      int w = fields[f].width[d];
      if (w < (strict ? 1 : 0))
        return strict ? gw__halo_fail(GW_EINVAL, "%s: width[%d] is %d, must be >= 1", fn, d, w)
                      : gw__halo_fail(GW_EINVAL,
                                      "%s: fields[%d].width[%d] is %d, must be "
                                      ">= 0 (0 turns the dim off)",
                                      fn, f, d, w);
      if (n[d] < 3 * (int64_t)w)
        return gw__halo_fail(GW_EINVAL,
                             "%s: %s extent %lld along dim %d is less than "
                             "3*width (%d): the interior "
                             "cannot hold the faces it sends",
                             fn, who, (long long)n[d], d, 3 * w);
    }
    if (path == GW_HALO_PATH_IPC && gw_kind(a) != GW_MEM_DEVICE)
      return gw__halo_fail(GW_EINVAL,
                           "%s: path IPC maps the neighbours' device buffers: "
                           "it needs device memory "
                           "(%s is %s memory)",
                           fn, who, gw_memkind_name(gw_kind(a)));
    if (path == GW_HALO_PATH_DEVICE && !gw_data(a))
      return gw__halo_fail(GW_EINVAL,
                           "%s: path DEVICE for a field the device cannot address (%s: %s "
                           "memory)",
                           fn, who, gw_memkind_name(gw_kind(a)));
  }
  int ndims = 0;
  gw_status st = gw__halo_mpi(MPI_Cartdim_get(cart, &ndims), "MPI_Cartdim_get", -1);
  if (st != GW_OK) return st;
  if (ndims != ndim)
    return gw__halo_fail(GW_EINVAL,
                         "%s: cart has %d dims, the fields have %d (array dim d is decomposed "
                         "along Cartesian dim d)",
                         fn, ndims, ndim);
  return GW_OK;
}

gw_status gw__halo_read_settings(const char *fn, gw__halo_settings *out) {
  long long aware = 0, shm = 1, group = 0, chunk = 0, self = 0, mps = 0, direct = 0, sig = 0;
  gw_status st = gw__setting_int(GW__SET_HALO_GPU_AWARE, &aware);
  if (st == GW_OK) st = gw__setting_int(GW__SET_HALO_SHM, &shm);
  if (st == GW_OK) st = gw__setting_int(GW__SET_HALO_SHM_GROUP, &group);
  if (st == GW_OK) st = gw__setting_int(GW__SET_HALO_CHUNK, &chunk);
  if (st == GW_OK) st = gw__setting_int(GW__SET_HALO_NCCL_SELF, &self);
  if (st == GW_OK) st = gw__setting_int(GW__SET_HALO_AUTO_MPS, &mps);
  if (st == GW_OK) st = gw__setting_int(GW__SET_HALO_IPC_DIRECT, &direct);
  if (st == GW_OK) st = gw__setting_int(GW__SET_HALO_IPC_SIGNAL, &sig);
  if (st != GW_OK) return gw__halo_fail(st, "%s: %s", fn, gw_last_error());
  /* the choices' indices: auto|0|1, mode|ipc|host */
  *out = (gw__halo_settings){(int)aware - 1, (int)shm, (int)group,  (size_t)chunk,
                             (int)self,      (int)mps, (int)direct, (int)sig};
  return GW_OK;
}
