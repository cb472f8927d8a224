/*
 * gpuwrap halo exchange over MPI (library gpuwrap_halo, CMake target gpuwrap::halo; built
 * when MPI is found).
 *
 * A halo plan exchanges the halo (ghost) cells of gpuwrap arrays — 1-, 2- or 3-D, any
 * dtype, any memory kind, any strides — with the neighbours of an MPI Cartesian
 * communicator of as many dims. An array holds its halo cells: along dim d its first and
 * last width[d] cells are halo, the rest is the rank's own (interior) part; a width of 0
 * turns dim d off (no halo, no exchange along it). Array dim d is decomposed along
 * Cartesian dim d; periodicity per dim is the communicator's (the `periods` of
 * MPI_Cart_create). gw_halo_create makes a plan for one 3-D field (its original contract);
 * gw_halo_create_multi for several fields of any dtypes in one plan, whose faces travel in
 * ONE message per neighbour and dim (ImplicitGlobalGrid's update_halo!(A, B, C)). The grid
 * helpers below (gw_grid_*) make the communicator, pick the device and gather a field, as
 * ImplicitGlobalGrid's init_global_grid and gather! do.
 *
 * What an update does
 * -------------------
 * Dims are exchanged one after another, 0 then 1 then 2. Along dim d a rank sends its
 * interior cells [w, 2w) to the low neighbour and [n-2w, n-w) to the high one, and receives
 * into [0, w) and [n-w, n). Along every other dim the faces span the whole extent, halo
 * cells included (as ImplicitGlobalGrid's). So edge and corner halo cells get their
 * diagonal neighbours' values in three steps (a later dim's halo cells go out before that
 * dim is exchanged, and are overwritten when it is), and a halo cell on a non-periodic
 * global boundary (no neighbour, MPI_PROC_NULL) is never written by the exchange of that
 * dim: it keeps whatever boundary value the program put there (a corner of it that lies in
 * another dim's halo receives the neighbour's copy of that boundary value, whichever of
 * the two dims comes first).
 *
 * Two data paths, chosen once, when the plan is made:
 *   GW_HALO_PATH_HOST    faces are packed by gw_copy from a view of the field (the face
 *                        sub-block) into page-locked host buffers, sent from and received
 *                        into those, and unpacked by gw_copy. On a GPU the GPU does the
 *                        strided 3-D copies straight from/to host memory. The buffers are
 *                        one page-aligned block, pinned once through gpuwrap's registry
 *                        (gw_pin) and wrapped once (gw_wrap): nothing is registered, wrapped
 *                        or allocated per update. The copies run on the plan's own stream;
 *                        each side's message goes to MPI as soon as its pack has landed (its
 *                        pending-work event, never a device synchronisation) and each
 *                        received message is unpacked as soon as it arrives (MPI_Waitany).
 *                        A message larger than GPUWRAP_HALO_CHUNK bytes (default 131072;
 *                        0: never) travels in pieces of at most that size, cut along the
 *                        face, so MPI carries one piece while the next is packed and the
 *                        previous unpacked (the ranks use the smallest value any has).
 *   GW_HALO_PATH_DEVICE  the buffers are device memory of the field's device and are handed
 *                        to MPI: for a GPU-aware MPI library (CUDA-aware Open MPI, MPICH,
 *                        ...). The field's memory must be device-accessible.
 * GW_HALO_PATH_AUTO picks DEVICE when the field is device or managed memory and MPI is
 * GPU-aware, else HOST. GPU-awareness is asked of the MPI library (MPIX_Query_cuda_support
 * / MPIX_Query_rocm_support where mpi-ext.h provides them, MPIX_GPU_query_support on MPICH);
 * the environment variable GPUWRAP_HALO_GPU_AWARE=0|1 overrides the answer.
 * Along a periodic dim of one rank, the rank is its own neighbour: the faces are copied
 * view to view on the device (gw_copy_async on the plan's stream), without MPI and without
 * buffers; consecutive dims follow each other on that stream without a host wait.
 *
 * Conventions
 * -----------
 * Calls return gw_status (GW_OK == 0, errors negative); MPI errors become GW_EBACKEND (the
 * plan's communicator returns MPI errors instead of aborting). gw_halo_last_error() gives
 * the detail of this thread's last failure of a gw_halo_* call (with gpuwrap's own
 * gw_last_error() text when a gpuwrap call failed). Nothing is printed.
 * gw_halo_create and gw_halo_destroy are collective over the communicator; updates are
 * collective over the neighbours. A plan is used by one thread at a time.
 * Collective calls fail on every rank alike: gw_halo_create*, gw_grid_create* and
 * gw_grid_gather return one status on every rank, whichever rank found the error (the
 * others' gw_halo_last_error() reads "<call>: another rank failed (rank R, STATUS):
 * <rank R's message>"). The exceptions are purely local preconditions, each documented
 * where it applies: `cart` / `comm` itself (NULL, not Cartesian: one communicator, so every
 * rank of it finds the same), and the arguments of an update (a NULL plan or stream, a
 * stream of another device, a split phase out of order, an update of a plan that needs
 * MPI on a stream being captured into a graph), refused before anything is
 * posted: the neighbours are not told, so such an error on some ranks only is fatal
 * (MPI_Abort) unless the program knows every rank made it.
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
  GW_HALO_PATH_AUTO = 0, /**< NCCL, else DEVICE for device/managed fields if MPI is GPU-aware,
                              else IPC for device fields, else HOST (see below) */
  GW_HALO_PATH_HOST,     /**< pack into page-locked host buffers, MPI on host memory */
  GW_HALO_PATH_DEVICE,   /**< pack into device buffers, handed to a GPU-aware MPI */
  GW_HALO_PATH_NCCL,     /**< pack into device buffers, NCCL send/receive on the plan's stream */
  GW_HALO_PATH_IPC       /**< neighbours on this node: pack straight into their device buffers,
                              mapped through gw_ipc_*; the others: HOST */
} gw_halo_path;

/*
 * The IPC path (GW_HALO_PATH_IPC)
 * -------------------------------
 * For ranks of one node whose MPI is not GPU-aware and where NCCL cannot serve (absent, or
 * several ranks on one GPU). At plan creation each rank allocates its receive buffers for
 * its on-node neighbours in device memory (gw_alloc), exports them (gw_ipc_export; MPI
 * carries the handles) and opens its neighbours' once (gw_ipc_open): they stay mapped for
 * the plan's life and are unmapped at gw_halo_destroy (collective), also after a failed
 * create. An update packs each face on the plan's stream straight into the neighbour's
 * mapped receive buffer and records an interprocess event after it; a zero-byte MPI
 * message, sent at once, tells the neighbour, whose stream waits for that event (on the
 * device) before it unpacks out of its own buffer; after its unpacks it records an event
 * of its own and sends a zero-byte "free again" message, and the sender's next pack into
 * that buffer waits for that event on the device. No host waits for a pack or an unpack:
 * the MPI messages only order each record before its wait. Neighbours on other nodes (the node: MPI_COMM_TYPE_SHARED, or
 * GPUWRAP_HALO_SHM_GROUP consecutive ranks) go through the host path in the same plan;
 * gw_halo_neighbour() says which path each neighbour takes. The path is every rank's or
 * none's. Where AUTO takes it only because ranks share a GPU under MPS, it does so for the
 * host-ordered calls only, and the plan also holds the host path for the stream-ordered
 * ones (faster there when overlapped: docs/HALO.md, "AUTO per mode";
 * gw_halo_info.path_stream_ordered; GPUWRAP_HALO_AUTO_MPS). It needs device memory (GW_MEM_DEVICE) for every field and a backend that
 * exports it and has interprocess events (CUDA, HIP, the CPU model): forcing it elsewhere
 * fails on every rank with GW_EINVAL (a field's memory kind) or the export's or the
 * event's status (GW_ENOTSUP), saying why.
 * GW_HALO_PATH_AUTO picks it, after NCCL, for device fields when MPI is not GPU-aware and
 * IPC pays: no two ranks of a node on one device (the runtime's device UUID), or every
 * rank that shares one running under MPS (cudaDevAttrMpsEnabled; HIP reports no MPS, the
 * CPU model GPUWRAP_CPU_MPS). Without MPS the contexts of ranks sharing a GPU are
 * time-sliced and every copy waits for the other process's slice: the IPC update was 7.3x
 * slower than the host path that AUTO then takes (docs/HALO.md).
 */

/*
 * The NCCL path (GW_HALO_PATH_NCCL)
 * ---------------------------------
 * Faces are packed by gw_copy_async into device buffers on the plan's stream, then, per
 * dim, ncclGroupStart, one ncclSend and one ncclRecv per neighbour side, ncclGroupEnd, and
 * the unpacks, all queued on the plan's stream: an update never waits on the host (the
 * blocking calls synchronise the plan's stream at the end; the stream-ordered ones do not
 * wait at all). Dims still follow each other in order (corners are right). Along a
 * periodic dim of one rank the faces are copied directly, as on the other paths;
 * GPUWRAP_HALO_NCCL_SELF=1 sends them through NCCL to the rank itself instead (slower; it
 * exercises NCCL on one GPU). gw_halo_create* also exchanges every message once, so the
 * first update does not pay for NCCL's connection to each neighbour.
 * NCCL is loaded at run time, never linked: dlopen("libnccl.so.2") through the loader's
 * usual search, or the file GPUWRAP_NCCL_LIB names. The plan's NCCL communicator is made
 * inside gw_halo_create* (collective): rank 0 of the plan's communicator calls
 * ncclGetUniqueId, MPI_Bcast hands the id to every rank, each calls ncclCommInitRank on
 * its field's device; gw_halo_destroy destroys it. It needs the CUDA backend, device
 * memory (GW_MEM_DEVICE) for every field, and one GPU per rank (NCCL refuses two ranks on
 * one GPU). Forcing GW_HALO_PATH_NCCL where any rank lacks one of these fails on every
 * rank with GW_ENOTSUP and says why (the loader's message when NCCL is absent).
 * GW_HALO_PATH_AUTO picks NCCL when every rank (MPI_Allreduce) has it, else DEVICE or
 * HOST as before. NCCL failures are GW_EBACKEND naming the NCCL call and NCCL's text.
 */

/**
 * Whether the NCCL path could load NCCL in this process (libnccl.so.2, or
 * GPUWRAP_NCCL_LIB, and the CUDA driver). Returns 1, or 0 with *why (if why is not NULL)
 * set to the loader's message ("NCCL is absent: dlopen(...): ..."), valid until this
 * thread's next call. Not collective; says nothing of devices or memory kinds.
 */
GW_API int gw_halo_nccl_available(const char **why);

/** Name of a path ("auto", "host", "device", "nccl", "ipc"), or "invalid". */
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
 *                the device cannot address, a face of more than INT_MAX bytes; arguments
 *                that do not match a neighbour's (see below); NCCL on some ranks only;
 *   GW_EREADONLY field is read-only;
 *   GW_ENOMEM    buffers could not be allocated;
 *   GW_EBACKEND  an MPI call failed;
 *   any status of gw_pin, gw_wrap, gw_alloc, gw_view (their detail is kept).
 * On failure nothing is left: no buffer, registration, reference or communicator.
 * Every rank returns the same status (see Conventions): an error one rank finds in its own
 * arguments fails them all. What two neighbours exchange must match, and is checked with
 * each neighbour along every dim split over ranks: the field count, and per field its
 * dtype, its width along that dim and its face's extents (the field's extents along the
 * other dims). A difference is GW_EINVAL on every rank, the message naming the argument
 * and both ranks' values ("field dtype: rank 0 has float64, its +x neighbour rank 1 has
 * float32"). `path` may differ between ranks (HOST on some, DEVICE on others) except for
 * NCCL, which is every rank's path or none's.
 */
GW_API gw_status gw_halo_create(gw_array *field, MPI_Comm cart, const int width[3],
                                gw_halo_path path, gw_halo **out);

/** One field of a multi-field plan and its halo width per dim (entries past the field's
 *  dims are ignored). A width of 0 turns the dim off for that field. */
typedef struct {
  gw_array *field;
  int width[3];
} gw_halo_field;

/**
 * Make one plan for several fields (collective over `cart`). Widths are per field (fields
 * of one plan may have different widths, dtypes, kinds, strides and shapes: staggered
 * grids), so a shared width is written once per field: {{u, {1,1,1}}, {v, {1,1,1}}}.
 * Every field's face of a side travels in ONE message per neighbour and dim (the faces
 * packed side by side, 256-byte aligned): gw_halo_info.neighbours counts messages per
 * update whatever nfields is. Dims are exchanged in order, fields in order within a dim.
 * @param fields   nfields entries (copied); each field 1-, 2- or 3-D, all with the dims of
 *                 `cart`, not read-only, all of one backend and device. Along dim d each
 *                 extent must be >= 3*width[d]; width[d] >= 0. The plan takes a reference
 *                 to each field (the caller may release its own).
 * @param nfields  >= 1.
 * @param cart     a Cartesian communicator with the fields' number of dims (duplicated).
 * @param path     as gw_halo_create; AUTO picks DEVICE only when every field is
 *                 device/managed memory and MPI is GPU-aware.
 * @return as gw_halo_create; gw_halo_last_error() names the argument (fields[i].field,
 *         fields[i].width[d], nfields, cart, path, out).
 * Unlike gw_halo_create (which keeps its original contract: a 3-D field, widths >= 1),
 * this call takes 1-, 2- and 3-D fields and widths of 0.
 */
GW_API gw_status gw_halo_create_multi(const gw_halo_field fields[], int nfields, MPI_Comm cart,
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
 * dim that has a remote neighbour (dims before it, copied locally, are queued before its
 * packs; like every halo cell, they are complete when gw_halo_finish returns). Between
 * start and finish the program may compute on the interior away from the faces (cells at
 * least width[d] from the halo along every dim it depends on); it must not write the
 * interior faces nor the halo cells (boundary values included: the faces carry them to
 * the neighbours' corners), nor read the halo cells.
 * @return as gw_halo_update; GW_EINVAL if a start is already in flight.
 */
GW_API gw_status gw_halo_start(gw_halo *h);
/**
 * Split-phase update, second half: completes the dim in flight, then exchanges the
 * remaining dims (blocking). GW_EINVAL if no start is in flight; otherwise as update.
 */
GW_API gw_status gw_halo_finish(gw_halo *h);

/**
 * Stream-ordered split phase (ParallelStencil's @hide_communication): the exchange is
 * ordered with the caller's stream `s` on the device, never by synchronising it.
 *
 *   boundary kernels on s;        // compute the cells the faces hold
 *   gw_halo_start_on(h, s);       // packs run after them, on the plan's own stream
 *   interior kernels on s2;       // overlap the exchange (s2 != s)
 *   gw_halo_finish_on(h, s);      // s waits (on the device) for the unpacks
 *   next kernels on s;            // see the halo; s2 must be joined as usual
 *
 * start_on posts every receive, makes the plan's stream wait for the work queued on s so
 * far (an event, on the device), queues the local copies of the dims before the first dim
 * with a remote neighbour and that dim's packs, and hands each side's message to MPI as
 * soon as its pack has landed: the host waits for the boundary kernels and packs of that
 * dim only (MPI cannot send what is not there), never for other streams and never with a
 * device synchronisation. With no remote neighbour (one rank, periodic) nothing waits at
 * all. finish_on completes the dim in flight (unpacking each message as it arrives), runs
 * the remaining dims the same way, and makes s wait for the last unpack: it returns without
 * waiting for the unpacks. The halo cells are valid for work queued on s after finish_on
 * (or on streams that wait for s); on the host only after s is synchronized.
 * Between start_on and finish_on the caller must not write the interior faces nor the
 * halo cells, nor read the halo cells (as for gw_halo_start). `s` may be a gpuwrap stream or a borrowed one
 * (gw_stream_wrap); it must be of the fields' backend and device (else GW_EDEVICE, a
 * local precondition checked before anything is posted: the plan is left as it was, idle
 * after a refused start_on, its update still in flight after a refused finish_on), and
 * the two calls may be given different streams (finish orders its own).
 * gw_halo_update_on(h, s) is start_on + finish_on: a whole update ordered on s.
 * Graphs (gpuwrap.h "Graphs"): on a stream being captured (cudaStreamBeginCapture,
 * torch.cuda.graph) the update is RECORDED, whole, where every exchange is device work:
 * a plan without remote neighbours (one rank's local copies, queued on s) and the NCCL
 * path (its group queued on s itself); every launch of the graph then runs the update on
 * the fields' memory at that time. Where MPI must run on the host between the packs and
 * the unpacks (the HOST and DEVICE paths through MPI, the shared-memory window, IPC), the
 * call fails with GW_ENOTSUP naming why, before anything is posted or queued: the
 * caller's capture stays valid, the plan idle. That is a local precondition (see
 * Conventions): the neighbours are not told. A start captured must be finished on a
 * stream of the same capture (finish_on; gw_halo_finish and a finish_on outside any
 * capture are GW_ENOTSUP, the update left in flight), and a start outside a capture
 * finished outside one. The graph holds the plan's buffers: destroy the plan only after
 * the last launch has run. Before an update outside the graph of the same plan,
 * synchronize the graph's launch stream (gpuwrap does not see launches).
 * @return as gw_halo_start / gw_halo_finish; GW_EINVAL also for a NULL stream; GW_EDEVICE
 *         for a stream of another backend or device; GW_ENOTSUP on a capturing stream
 *         where the update needs MPI on the host (above); the status of gw_fill_async /
 *         gw_array_wait on s.
 * A plan may mix the host-ordered and the stream-ordered calls from one update to the next.
 */
GW_API gw_status gw_halo_start_on(gw_halo *h, gw_stream *s);
GW_API gw_status gw_halo_finish_on(gw_halo *h, gw_stream *s);
GW_API gw_status gw_halo_update_on(gw_halo *h, gw_stream *s);

/** What a plan does per update (for reports and transfer-bound estimates). */
typedef struct {
  size_t struct_size;  /**< set to sizeof(gw_halo_info): see gpuwrap.h, Conventions */
  gw_halo_path path;   /**< the path chosen (never AUTO) */
  int gpu_aware;       /**< 1 if MPI was found (or declared) GPU-aware */
  int neighbours;      /**< remote messages sent per update (= received): one per neighbour
                            and dim, whatever the number of fields (the pieces of a chunked
                            message count as one) */
  size_t bytes_sent;   /**< bytes sent to other ranks per update (= received; with several
                            fields it includes the alignment gaps between their faces) */
  size_t bytes_local;  /**< bytes copied locally per update (self-neighbour dims) */
  size_t buffer_bytes; /**< bytes of send+receive buffers the plan holds */
  int shared_memory;   /**< 1: on the host path, the faces of neighbours on this rank's node
                            go through an MPI shared-memory window (the GPU copies each face
                            into the neighbour's receive buffer; MPI carries 0-byte tokens
                            only; neighbours on other nodes still go through MPI); 0: MPI
                            carries every face (GPUWRAP_HALO_SHM=0 forces it) */
  gw_halo_path path_stream_ordered; /**< the path of the stream-ordered calls
                            (gw_halo_start_on, gw_halo_finish_on, gw_halo_update_on); `path`
                            is that of gw_halo_update and gw_halo_start/finish. They differ
                            only where AUTO picks per mode: ranks sharing a GPU under MPS
                            take IPC for the host-ordered calls and HOST for the
                            stream-ordered ones (docs/HALO.md, "AUTO";
                            GPUWRAP_HALO_AUTO_MPS). The plan then holds both paths'
                            buffers (buffer_bytes counts both; shared_memory says the host
                            path's). The struct's second layout; on LP64 it fills what was
                            tail padding, so sizeof(gw_halo_info) is unchanged */
} gw_halo_info;

/** Fill *out (set out->struct_size first: gpuwrap.h, Conventions). GW_EINVAL for NULL
 *  arguments. */
GW_API gw_status gw_halo_query(const gw_halo *h, gw_halo_info *out);

/**
 * The neighbour along array dim `dim`, side `side` (0 low, 1 high): its rank in the plan's
 * communicator (*rank, MPI_PROC_NULL where there is none) and the path its faces take
 * (*path: HOST, DEVICE, NCCL or IPC; GW_HALO_PATH_AUTO where no message goes: no
 * neighbour, a width of 0, or the rank itself along a periodic dim, copied locally). An
 * IPC plan says IPC for its neighbours on this node and HOST for the others (for the
 * host-ordered calls: where AUTO picks per mode, the stream-ordered ones take HOST for
 * every remote neighbour, gw_halo_info.path_stream_ordered). GW_EINVAL
 * for a NULL plan or output, a dim outside the plan's or a side other than 0 or 1.
 */
GW_API gw_status gw_halo_neighbour(const gw_halo *h, int dim, int side, int *rank,
                                   gw_halo_path *path);

/**
 * Destroy a plan (collective over its communicator: frees the duplicate). Completes a
 * split-phase update in flight first (its result is discarded). Releases the buffers,
 * their registration and the plan's reference to the field. NULL is ok.
 */
GW_API void gw_halo_destroy(gw_halo *h);

/* ------------------------------------------------------------------------------------ */
/* Grid helpers (ImplicitGlobalGrid's init_global_grid, select_device, gather!)            */
/* ------------------------------------------------------------------------------------ */
/*
 * A grid is a global box of cells decomposed over the ranks of a communicator: a
 * Cartesian communicator (MPI_Cart_create with reorder = 1, so MPI may place neighbours
 * close), the number of ranks per dim (MPI_Dims_create where not given), each rank's block
 * of cells (its "local" interior) and where it starts in the global box ("offset"). Cells
 * are interior cells: the fields a program makes for the grid add their halo, local[d] +
 * 2*width[d] cells along d, and make their plans on gw_grid_comm().
 * From a global size, dim d's cells are split as evenly as possible: the first
 * global[d] % dims[d] coordinates get one cell more. From a local size, every rank gets
 * local[d] and the global size is dims[d]*local[d].
 * The node-local rank (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) of the grid's
 * communicator) picks one device per rank: node_rank mod device count.
 * Calls are collective over the grid's communicator where they say so; errors as for the
 * plans (gw_halo_last_error names the argument).
 */
typedef struct gw_grid gw_grid;

/**
 * Make a grid of `global` cells (collective over `comm`).
 * @param comm    the ranks (e.g. MPI_COMM_WORLD); not kept.
 * @param ndims   1, 2 or 3.
 * @param global  ndims global cell counts, each >= dims[d] (every rank owns a cell).
 * @param periods ndims flags (periodic along d when non-zero), NULL: none periodic.
 * @param dims    ndims ranks per dim, 0 = MPI_Dims_create chooses; NULL: all chosen. The
 *                product must be the size of comm.
 * @return GW_OK; GW_EINVAL (NULL comm/global/out, ndims out of range, a count < 1 or
 *         smaller than the ranks along it, dims that do not divide the ranks or fix more
 *         than comm has, a global box whose cell count overflows int64_t); GW_EBACKEND
 *         (MPI); GW_ENOMEM. The same status on every rank (only a NULL comm is local).
 */
GW_API gw_status gw_grid_create(MPI_Comm comm, int ndims, const int64_t global[],
                                const int periods[], const int dims[], gw_grid **out);
/** As gw_grid_create, from every rank's `local` cell counts (the same on every rank):
 *  global[d] = dims[d] * local[d]; GW_EINVAL where that, or the global box's cell count,
 *  overflows int64_t. */
GW_API gw_status gw_grid_create_local(MPI_Comm comm, int ndims, const int64_t local[],
                                      const int periods[], const int dims[], gw_grid **out);
/** Free the grid (collective: frees its communicators). NULL is ok. */
GW_API void gw_grid_destroy(gw_grid *g);
/** The grid's Cartesian communicator (borrowed: valid until gw_grid_destroy); for
 *  gw_halo_create_multi and the program's own messages. MPI_COMM_NULL for NULL. */
GW_API MPI_Comm gw_grid_comm(const gw_grid *g);

/** This rank's view of a grid. Entries past ndims are 1 (counts, dims) or 0. */
typedef struct {
  size_t struct_size; /**< set to sizeof(gw_grid_info): see gpuwrap.h, Conventions */
  int ndims;
  int dims[3]; /**< ranks per dim */
  int periods[3];
  int coords[3];  /**< this rank's coordinates in the rank grid */
  int rank, size; /**< in gw_grid_comm() (reordered: may differ from comm's rank) */
  int node_rank;  /**< rank among the ranks of this node (MPI_COMM_TYPE_SHARED) */
  int node_size;
  int64_t global[3]; /**< global cells per dim */
  int64_t local[3];  /**< this rank's cells per dim (halo excluded) */
  int64_t offset[3]; /**< global index of this rank's first cell per dim */
} gw_grid_info;

/** Fill *out (set out->struct_size first: gpuwrap.h, Conventions). GW_EINVAL for NULL
 *  arguments. */
GW_API gw_status gw_grid_query(const gw_grid *g, gw_grid_info *out);
/** This rank's cells and offset along every dim of rank `r` of gw_grid_comm() (for
 *  assembling or checking a global array). GW_EINVAL for a rank out of range. */
GW_API gw_status gw_grid_block(const gw_grid *g, int r, int64_t local[3], int64_t offset[3]);

/**
 * The device this rank should use: node_rank mod (the backend's device count).
 * @param backend GW_BACKEND_CPU/CUDA/HIP, or AUTO (GPUWRAP_BACKEND, else the first GPU
 *                backend with a device, else CPU: as gw_context_create).
 * @param out     receives a context on that device (gw_context_destroy it).
 * @return GW_OK; the status of gw_context_create / gw_backend_device_count.
 */
GW_API gw_status gw_grid_context_create(const gw_grid *g, gw_backend backend, gw_context **out);

/**
 * Gather a field's interior to one rank (collective over the grid), as IGG's gather!:
 * `root` receives in `global` the global array assembled from every rank's interior.
 * @param field   this rank's field: local[d] + 2*width[d] cells along d, any dtype, kind
 *                and strides (the same dtype on every rank).
 * @param width   ndims halo widths of the field; NULL: inferred ((shape - local) / 2).
 * @param global  on root: an array of the grid's global shape and the field's dtype, any
 *                kind and strides, written; ignored (may be NULL) on the other ranks.
 * @param root    a rank of gw_grid_comm().
 * @return GW_OK; GW_EINVAL (a field whose shape does not match the grid and width, a global
 *         array of the wrong shape or dtype on root, root out of range); GW_EBACKEND (MPI);
 *         GW_ENOMEM; the status of a failed gw_copy. Every rank returns the same status
 *         where the error is an argument checked on every rank (shapes, dtypes, root);
 *         root's checks of `global` are shared with every rank before any data moves.
 */
GW_API gw_status gw_grid_gather(const gw_grid *g, gw_array *field, const int width[],
                                gw_array *global, int root);

/** Detail of this thread's last gw_halo_* or gw_grid_* failure ("" if none). Valid until this
 *  thread's next gw_halo_* call. */
GW_API const char *gw_halo_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* GPUWRAP_HALO_H */
