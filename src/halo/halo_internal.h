/* Private to the halo module. Never installed. */
#ifndef GW_HALO_INTERNAL_H
#define GW_HALO_INTERNAL_H

#include "gpuwrap/halo.h"

/* Record the detail for gw_halo_last_error() and return s. */
gw_status gw__halo_fail(gw_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* gw__halo_fail(GW_EBACKEND, ...) with MPI's text for `code`; GW_OK if code is MPI_SUCCESS. */
gw_status gw__halo_mpi(int code, const char *what, int dim);
/* Collective over comm (every rank must call it, whatever its own status): every rank's
 * status in, one status out, the same on every rank: the most negative (of the lowest
 * rank holding it). A rank other than that one gets its message too, "<fn>: another rank
 * failed (rank R, STATUS): <R's message>". So a call whose later steps are collective
 * fails on every rank alike, and every rank can say why. */
gw_status gw__halo_agree(MPI_Comm comm, gw_status mine, const char *fn);

/* Whether MPI can take device pointers of `backend`: GPUWRAP_HALO_GPU_AWARE=0|1 if set,
 * else the MPI library's own answer (0 when it has no way to say). */
int gw__halo_gpu_aware(gw_backend backend);

#endif /* GW_HALO_INTERNAL_H */
