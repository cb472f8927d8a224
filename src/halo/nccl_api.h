/*
 * Private to the halo module. Never installed.
 *
 * The few NCCL and CUDA driver declarations the NCCL halo path needs, written from their
 * documented APIs (nccl.h of NCCL 2.x, cuda.h), so the path compiles without nccl.h or
 * cuda.h and NCCL stays a run-time option: libnccl.so.2 is opened with dlopen when a plan
 * asks for it, never linked. Only the values used here are declared; they are part of
 * NCCL's stable ABI (libnccl.so.2 since 2.0).
 */
#ifndef GW_HALO_NCCL_API_H
#define GW_HALO_NCCL_API_H

#include <stddef.h>

/* nccl.h: NCCL_UNIQUE_ID_BYTES is 128; the id is broadcast as opaque bytes. */
#define GW_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[GW_NCCL_UNIQUE_ID_BYTES];
} gw_ncclUniqueId;
typedef struct gw_ncclComm *gw_ncclComm_t;
typedef enum {
  gw_ncclSuccess = 0,
  gw_ncclUnhandledCudaError = 1,
  gw_ncclSystemError = 2,
  gw_ncclInternalError = 3,
  gw_ncclInvalidArgument = 4,
  gw_ncclInvalidUsage = 5,
  gw_ncclRemoteError = 6,
  gw_ncclInProgress = 7
} gw_ncclResult_t;
typedef enum { gw_ncclInt8 = 0, gw_ncclUint8 = 1 } gw_ncclDataType_t;
typedef void *gw_cudaStream_t; /* cudaStream_t: a CUstream, shared by every CUDA runtime copy */

/* NCCL's entry points, resolved by gw__halo_nccl_load(). */
typedef struct {
  gw_ncclResult_t (*GetUniqueId)(gw_ncclUniqueId *id);
  gw_ncclResult_t (*CommInitRank)(gw_ncclComm_t *comm, int nranks, gw_ncclUniqueId id, int rank);
  gw_ncclResult_t (*CommDestroy)(gw_ncclComm_t comm);
  gw_ncclResult_t (*GroupStart)(void);
  gw_ncclResult_t (*GroupEnd)(void);
  gw_ncclResult_t (*Send)(const void *buf, size_t count, gw_ncclDataType_t type, int peer,
                          gw_ncclComm_t comm, gw_cudaStream_t stream);
  gw_ncclResult_t (*Recv)(void *buf, size_t count, gw_ncclDataType_t type, int peer,
                          gw_ncclComm_t comm, gw_cudaStream_t stream);
  const char *(*GetErrorString)(gw_ncclResult_t r);
  gw_ncclResult_t (*CommGetAsyncError)(gw_ncclComm_t comm, gw_ncclResult_t *async);
  const char *(*GetLastError)(gw_ncclComm_t comm); /* NCCL >= 2.13; NULL when older */
} gw__halo_nccl_fns;

/* Load libnccl.so.2 (GPUWRAP_NCCL_LIB: a path or name that replaces it) and the CUDA
 * driver (libcuda.so.1) once per process; a failure is not remembered, so a later call
 * may try again (another GPUWRAP_NCCL_LIB). Returns the entry points, or NULL with *why
 * set to the loader's message (valid until the next call). Thread-safe. */
const gw__halo_nccl_fns *gw__halo_nccl_load(const char **why);

/* The CUDA driver calls the path needs, on device `ordinal` (the CUDA backend's ordinal):
 * its UUID (to tell whether two ranks share a GPU), and making its primary context
 * current around a call that NCCL binds to "the current device" (ncclCommInitRank,
 * ncclCommDestroy); the library itself never changes the caller's current device. */
int gw__halo_nccl_device_uuid(int ordinal, unsigned char uuid[16], const char **why);
int gw__halo_nccl_push_device(int ordinal, const char **why);
void gw__halo_nccl_pop_device(int ordinal);

/* "ncclSend: <NCCL's text> (<ncclGetLastError>)" into buf. */
const char *gw__halo_nccl_text(gw_ncclResult_t r, gw_ncclComm_t comm, char *buf, size_t n);

#endif /* GW_HALO_NCCL_API_H */
