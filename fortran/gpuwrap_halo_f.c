/*
 * The one piece of the Fortran halo module that must be C: MPI_Comm_f2c (a macro in some
 * MPI libraries, so Fortran cannot bind to it). Both Fortran communicator kinds reach it as
 * the Fortran integer handle: `integer` directly, type(MPI_Comm) through its MPI_VAL.
 */
#include "gpuwrap/halo.h"

GW_API gw_status gw_halo_create_fint(gw_array *field, MPI_Fint comm, const int width[3], gw_halo_path path,
                                     gw_halo **out);

gw_status gw_halo_create_fint(gw_array *field, MPI_Fint comm, const int width[3], gw_halo_path path,
                              gw_halo **out) {
  return gw_halo_create(field, MPI_Comm_f2c(comm), width, path, out);
}
