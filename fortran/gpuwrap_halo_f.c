/*
 * The one piece of the Fortran halo module that must be C: MPI_Comm_f2c / MPI_Comm_c2f
 * (macros in some MPI libraries, so Fortran cannot bind to them). Both Fortran communicator
 * kinds reach these as the Fortran integer handle: `integer` directly, type(MPI_Comm)
 * through its MPI_VAL; gw_grid_comm_fint returns the grid's communicator as that handle.
 */
#include "gpuwrap/halo.h"

GW_API gw_status gw_halo_create_fint(gw_array *field, MPI_Fint comm, const int width[3],
                                     gw_halo_path path, gw_halo **out);
GW_API gw_status gw_halo_create_multi_fint(const gw_halo_field fields[], int nfields, MPI_Fint comm,
                                           gw_halo_path path, gw_halo **out);
GW_API gw_status gw_grid_create_fint(MPI_Fint comm, int ndims, const int64_t global[],
                                     const int periods[], const int dims[], gw_grid **out);
GW_API gw_status gw_grid_create_local_fint(MPI_Fint comm, int ndims, const int64_t local[],
                                           const int periods[], const int dims[], gw_grid **out);
GW_API MPI_Fint gw_grid_comm_fint(const gw_grid *g);

gw_status gw_halo_create_fint(gw_array *field, MPI_Fint comm, const int width[3], gw_halo_path path,
                              gw_halo **out) {
  return gw_halo_create(field, MPI_Comm_f2c(comm), width, path, out);
}

gw_status gw_halo_create_multi_fint(const gw_halo_field fields[], int nfields, MPI_Fint comm,
                                    gw_halo_path path, gw_halo **out) {
  return gw_halo_create_multi(fields, nfields, MPI_Comm_f2c(comm), path, out);
}

gw_status gw_grid_create_fint(MPI_Fint comm, int ndims, const int64_t global[], const int periods[],
                              const int dims[], gw_grid **out) {
  return gw_grid_create(MPI_Comm_f2c(comm), ndims, global, periods, dims, out);
}

gw_status gw_grid_create_local_fint(MPI_Fint comm, int ndims, const int64_t local[],
                                    const int periods[], const int dims[], gw_grid **out) {
  return gw_grid_create_local(MPI_Comm_f2c(comm), ndims, local, periods, dims, out);
}

MPI_Fint gw_grid_comm_fint(const gw_grid *g) { return MPI_Comm_c2f(gw_grid_comm(g)); }
