/* Errors of the halo module, and asking MPI whether it takes device pointers. */
#include "halo_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_Query_cuda_support / MPIX_Query_rocm_support, when built in */
#endif

static _Thread_local char halo_err[512];

const char *gw_halo_last_error(void) { return halo_err; }

gw_status gw__halo_fail(gw_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(halo_err, sizeof halo_err, fmt, ap);
  va_end(ap);
  return s;
}

gw_status gw__halo_mpi(int code, const char *what, int dim) {
  if (code == MPI_SUCCESS) return GW_OK;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    snprintf(text, sizeof text, "MPI error %d", code);
  if (dim >= 0) return gw__halo_fail(GW_EBACKEND, "%s (dim %d): %s", what, dim, text);
  return gw__halo_fail(GW_EBACKEND, "%s: %s", what, text);
}

const char *gw_halo_path_name(gw_halo_path p) {
  switch (p) {
  case GW_HALO_PATH_AUTO: return "auto";
  case GW_HALO_PATH_HOST: return "host";
  case GW_HALO_PATH_DEVICE: return "device";
  case GW_HALO_PATH_NCCL: return "nccl";
  case GW_HALO_PATH_IPC: return "ipc";
  }
  return "invalid";
}

static int mpi_says_gpu_aware(gw_backend backend) {
  switch (backend) {
  case GW_BACKEND_CUDA:
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
    return MPIX_Query_cuda_support() == 1;
#elif defined(MPIX_GPU_SUPPORT_CUDA)
  {
    int yes = 0;
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) == MPI_SUCCESS && yes;
  }
#else
    return 0;
#endif
  case GW_BACKEND_HIP:
#if defined(OMPI_HAVE_MPI_EXT_ROCM) && OMPI_HAVE_MPI_EXT_ROCM
    return MPIX_Query_rocm_support() == 1;
#elif defined(MPIX_GPU_SUPPORT_HIP)
  {
    int yes = 0;
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_HIP, &yes) == MPI_SUCCESS && yes;
  }
#else
    return 0;
#endif
  default:
    /* The CPU backend's "device" memory is host memory behind the model: MPI could read
     * it, but a faithful model of a GPU says no unless the environment says yes. */
    return 0;
  }
}

int gw__halo_gpu_aware(gw_backend backend, int setting) {
  return setting >= 0 ? setting : mpi_says_gpu_aware(backend);
}

gw_status gw__halo_agree(MPI_Comm comm, gw_status mine, const char *fn) {
  /* The most negative status wins (the lowest rank holding it), so every rank returns one
   * status; its holder's message travels to the others, which say whose it is. */
  int rank = 0;
  (void)MPI_Comm_rank(comm, &rank);
  struct {
    int st, rank;
  } in = {(int)mine, rank}, worst = {0, 0};
  int rc = MPI_Allreduce(&in, &worst, 1, MPI_2INT, MPI_MINLOC, comm);
  if (rc != MPI_SUCCESS) return mine != GW_OK ? mine : gw__halo_mpi(rc, "MPI_Allreduce", -1);
  if (worst.st == GW_OK) return GW_OK;
  char text[sizeof halo_err];
  memcpy(text, halo_err, sizeof text);
  rc = MPI_Bcast(text, (int)sizeof text, MPI_CHAR, worst.rank, comm);
  text[sizeof text - 1] = 0;
  if (worst.rank == rank ||
      (mine == (gw_status)worst.st && rc == MPI_SUCCESS && !strcmp(text, halo_err)))
    return (gw_status)worst.st; /* this rank's own message says it */
  if (rc != MPI_SUCCESS) snprintf(text, sizeof text, "(its message did not arrive)");
  if (mine != GW_OK) {
    /* failed too, otherwise: keep both */
    char own[sizeof halo_err];
    memcpy(own, halo_err, sizeof own);
    return gw__halo_fail((gw_status)worst.st,
                         "%s: another rank failed (rank %d, %s): %s; this rank: %s", fn, worst.rank,
                         gw_err_name((gw_status)worst.st), text, own);
  }
  return gw__halo_fail((gw_status)worst.st, "%s: another rank failed (rank %d, %s): %s", fn,
                       worst.rank, gw_err_name((gw_status)worst.st), text);
}

/* A gpuwrap call failed: keep its status and its gw_last_error() text. d < 0:
 * no dim. */
gw_status gw__halo_call_failed(gw_status st, const char *what, int d) {
  if (d < 0) return gw__halo_fail(st, "%s: %s: %s", what, gw_err_name(st), gw_last_error());
  return gw__halo_fail(st, "%s (dim %d): %s: %s", what, d, gw_err_name(st), gw_last_error());
}

/* gw__halo_agree, once per failure: after a failed agreement every rank knows,
 * so the later steps pass the status through without another collective (and
 * the message stays the one agreed on). */
gw_status gw__halo_agree_once(MPI_Comm comm, gw_status st, const char *fn, int *failed) {
  if (*failed) return st;
  st = gw__halo_agree(comm, st, fn);
  *failed = st != GW_OK;
  return st;
}
