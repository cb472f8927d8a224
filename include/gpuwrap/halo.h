/*
 * gpuwrap halo exchange over MPI (library gpuwrap_halo, CMake target gpuwrap::halo; built
 * when MPI is found).
 *
 * A halo plan exchanges the halo (ghost) cells of one 3-D gpuwrap array — any dtype, any
 * memory kind, any strides — with the neighbours of an MPI Cartesian communicator. The
 * array holds the halo cells: along dim d its first and last width[d] cells are halo, the
 * rest is the rank's own (interior) part. Array dim d is decomposed along Cartesian dim d;
 * periodicity per dim is the communicator's (the `periods` of MPI_Cart_create).
 *
 * What an update does
 * -------------------
 * Dims are exchanged one after another, 0 then 1 then 2. Along dim d a rank sends its
 * interior cells [w, 2w) to the low neighbour and [n-2w, n-w) to the high one, and receives
 * into [0, w) and [n-w, n). Along the dims already exchanged (< d) the faces span the whole
 * extent, halo cells included; along the later dims (> d) only the interior. So edge and
 * corner halo cells get their diagonal neighbours' values in three steps, and a halo cell
 * on a non-periodic global boundary (no neighbour, MPI_PROC_NULL) is never written by the
 * exchange of that dim: it keeps whatever boundary value the program put there (a corner
 * of it that lies in another dim's halo receives the neighbour's copy of that boundary
 * value).
 *
 * Two data paths, chosen once, when the plan is made:
 *   GW_HALO_PATH_HOST    faces are packed by gw_copy from a view of the field (the face
 *                        sub-block) into page-locked host buffers, sent from and received
 *                        into those, and unpacked by gw_copy. On a GPU the GPU does the
 *                        strided 3-D copies straight from/to host memory. The buffers are
 *                        one page-aligned block, pinned once through gpuwrap's registry
 *                        (gw_pin) and wrapped once (gw_wrap): nothing is registered, wrapped
 *                        or allocated per update.
 *   GW_HALO_PATH_DEVICE  the buffers are device memory of the field's device and are handed
 *                        to MPI: for a GPU-aware MPI library (CUDA-aware Open MPI, MPICH,
 *                        ...). The field's memory must be device-accessible.
 * GW_HALO_PATH_AUTO picks DEVICE when the field is device or managed memory and MPI is
 * GPU-aware, else HOST. GPU-awareness is asked of the MPI library (MPIX_Query_cuda_support
 * / MPIX_Query_rocm_support where mpi-ext.h provides them, MPIX_GPU_query_support on MPICH);
 * the environment variable GPUWRAP_HALO_GPU_AWARE=0|1 overrides the answer.
 * Along a periodic dim of one rank, the rank is its own neighbour: the faces are copied
 * view to view (gw_copy), without MPI and without buffers.
 *
 * Conventions
 * -----------
 * Calls return gw_status (GW_OK == 0, errors negative); MPI errors become GW_EBACKEND (the
 * plan's communicator returns MPI errors instead of aborting). gw_halo_last_error() gives
 * the detail of this thread's last failure of a gw_halo_* call (with gpuwrap's own
 * gw_last_error() text when a gpuwrap call failed). Nothing is printed.
 * gw_halo_create and gw_halo_destroy are collective over the communicator; updates are
 * collective over the neighbours. A plan is used by one thread at a time.
 * MPI must be initialised before gw_halo_create and finalised after gw_halo_destroy.
 */
#ifndef GPUWRAP_HALO_H
#define GPUWRAP_HALO_H

#include "../gpuwrap.h"

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gw_halo gw_halo;

typedef enum {
  GW_HALO_PATH_AUTO = 0, /**< DEVICE for device/managed fields if MPI is GPU-aware, else HOST */
  GW_HALO_PATH_HOST,     /**< pack into page-locked host buffers, MPI on host memory */
  GW_HALO_PATH_DEVICE    /**< pack into device buffers, handed to a GPU-aware MPI */
} gw_halo_path;

/** Name of a path ("auto", "host", "device"), or "invalid". */
GW_API const char *gw_halo_path_name(gw_halo_path p);

/**
 * Make a halo plan for `field` (collective over `cart`).
 * @param field  3-D array, halo cells included, any dtype/kind/strides, not read-only. The
 *               plan takes a reference: the caller may release its own. Along each dim the
 *               extent must be >= 3*width[d] (the interior must hold the faces it sends).
 *               Its memory must stay where it is for the plan's life (it is not copied).
 * @param cart   a 3-D Cartesian communicator (MPI_Cart_create; dims may be 1). It is
 *               duplicated (MPI_Comm_dup), so the plan's messages never match the
 *               program's; the caller keeps `cart` and may free it at any time.
 * @param width  halo width per dim, each >= 1 (copied).
 * @param path   GW_HALO_PATH_AUTO, _HOST or _DEVICE (DEVICE trusts the caller that MPI is
 *               GPU-aware).
 * @param out    receives the plan; destroy it with gw_halo_destroy().
 * @return GW_OK;
 *   GW_EINVAL    NULL field/width/out, field not 3-D, a width < 1, an extent < 3*width,
 *                `cart` not a 3-D Cartesian communicator, unknown path, DEVICE for a field
 *                the device cannot address, a face of more than INT_MAX bytes;
 *   GW_EREADONLY field is read-only;
 *   GW_ENOMEM    buffers could not be allocated;
 *   GW_EBACKEND  an MPI call failed;
 *   any status of gw_pin, gw_wrap, gw_alloc, gw_view (their detail is kept).
 * On failure nothing is left: no buffer, registration, reference or communicator.
 */
GW_API gw_status gw_halo_create(gw_array *field, MPI_Comm cart, const int width[3],
                                gw_halo_path path, gw_halo **out);

/**
 * Blocking update: after it returns every halo cell that has a neighbour holds the
 * neighbour's value (edges and corners included). Same as gw_halo_start + gw_halo_finish.
 * @return GW_OK; GW_EINVAL (NULL plan, or a split-phase update is in flight);
 *         GW_EBACKEND (MPI); the status of a failed gw_copy.
 * After a failure the plan is idle again: its receives are cancelled, its sends completed,
 * and its next update uses fresh tags, so it can be retried when every rank of the
 * communicator failed alike. A failure on some ranks only leaves their neighbours waiting
 * in MPI: treat it as fatal (MPI_Abort).
 */
GW_API gw_status gw_halo_update(gw_halo *h);

/**
 * Split-phase update, first half: posts every receive, then packs and sends the first
 * dim that has a remote neighbour (dims before it, copied locally, are done). Between
 * start and finish the program may compute on the interior away from the faces (cells at
 * least width[d] from the halo along every dim it depends on); it must not write the
 * interior faces nor read the halo cells.
 * @return as gw_halo_update; GW_EINVAL if a start is already in flight.
 */
GW_API gw_status gw_halo_start(gw_halo *h);
/**
 * Split-phase update, second half: completes the dim in flight, then exchanges the
 * remaining dims (blocking). GW_EINVAL if no start is in flight; otherwise as update.
 */
GW_API gw_status gw_halo_finish(gw_halo *h);

/** What a plan does per update (for reports and transfer-bound estimates). */
typedef struct {
  gw_halo_path path;   /**< the path chosen (never AUTO) */
  int gpu_aware;       /**< 1 if MPI was found (or declared) GPU-aware */
  int neighbours;      /**< remote messages sent per update (= received) */
  size_t bytes_sent;   /**< bytes sent over MPI per update (= received) */
  size_t bytes_local;  /**< bytes copied locally per update (self-neighbour dims) */
  size_t buffer_bytes; /**< bytes of send+receive buffers the plan holds */
} gw_halo_info;

/** Fill *out. GW_EINVAL for NULL arguments. */
GW_API gw_status gw_halo_query(const gw_halo *h, gw_halo_info *out);

/**
 * Destroy a plan (collective over its communicator: frees the duplicate). Completes a
 * split-phase update in flight first (its result is discarded). Releases the buffers,
 * their registration and the plan's reference to the field. NULL is ok.
 */
GW_API void gw_halo_destroy(gw_halo *h);

/** Detail of this thread's last gw_halo_* failure ("" if none). Valid until this
 *  thread's next gw_halo_* call. */
GW_API const char *gw_halo_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* GPUWRAP_HALO_H */
