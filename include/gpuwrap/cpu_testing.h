/*
 * Testing-only controls of the CPU backend's model: failure injection and call counters.
 *
 * Tests (gpuwrap's, and a user's tests of their own code on a machine without a GPU) drive
 * the library's error paths with these: make the N-th call of a modelled runtime operation
 * fail with a chosen status, and count the calls. They act on the CPU backend only (a
 * GPU backend's calls are neither counted nor injected) and are kept apart from the
 * model's API (gpuwrap/cpu.h) so that nothing else depends on them. The environment
 * variable GPUWRAP_CPU_FAIL=op:N[,op:N...] arms the same failures at first use (the N-th
 * call of op fails; op names as gw_cpu_op_name gives them). All functions are thread-safe.
 */
#ifndef GPUWRAP_CPU_TESTING_H
#define GPUWRAP_CPU_TESTING_H

#include "cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GW_CPU_OP_CONTEXT_INIT = 0,
  GW_CPU_OP_QUERY,
  GW_CPU_OP_ALLOC,
  GW_CPU_OP_FREE,
  GW_CPU_OP_REGISTER,
  GW_CPU_OP_UNREGISTER,
  GW_CPU_OP_DEVICE_ADDRESS,
  GW_CPU_OP_COPY,
  GW_CPU_OP_FILL,
  GW_CPU_OP_SYNCHRONIZE,
  GW_CPU_OP_STREAM_CREATE,
  GW_CPU_OP_STREAM_DESTROY,
  GW_CPU_OP_STREAM_SYNCHRONIZE,
  /* appended (the values above stay): borrowed streams and events */
  GW_CPU_OP_STREAM_BORROW,
  GW_CPU_OP_EVENT_CREATE,
  GW_CPU_OP_EVENT_RECORD,
  GW_CPU_OP_STREAM_WAIT_EVENT,
  /* appended: memory from another process (cudaIpcGetMemHandle, cudaIpcOpenMemHandle,
   * cudaIpcCloseMemHandle) */
  GW_CPU_OP_IPC_EXPORT,
  GW_CPU_OP_IPC_OPEN,
  GW_CPU_OP_IPC_CLOSE,
  GW_CPU_OP_IPC_EVENT_CREATE,
  GW_CPU_OP_IPC_EVENT_OPEN,
  /* appended: cudaMemPoolImportFromShareableHandle (pool memory from another process;
   * cudaMemPoolExportPointer counts as ipc_export, cudaMemPoolImportPointer as ipc_open,
   * the importer's cudaFree as ipc_close) */
  GW_CPU_OP_IPC_POOL_IMPORT,
  /* appended: the import of VMM chunks from another process (cuMemImportFromShareableHandle,
   * cuMemAddressReserve, cuMemMap, cuMemSetAccess as one call of the model) */
  GW_CPU_OP_IPC_VMM_IMPORT,
  GW_CPU_OP_COUNT
} gw_cpu_op;

/** "context_init", "query", "alloc", "free", "register", "unregister", "device_address",
 *  "copy", "fill", "synchronize", "stream_create", "stream_destroy", "stream_synchronize",
 *  "stream_borrow", "event_create", "event_record", "stream_wait_event", "ipc_export",
 *  "ipc_open", "ipc_close", "ipc_event_create", "ipc_event_open", "ipc_pool_import".
 *  (Event destroy
 *  and event query are neither counted nor injected: a destroy cannot report, a query is
 *  a poll whose "not yet" is no failure.) */
GW_API const char *gw_cpu_op_name(gw_cpu_op op);

/** The nth call of `op` from now (1 = the next) fails with `status` (a negative gw_status).
 *  nth 0 disarms it. */
GW_API void gw_cpu_fail_op(gw_cpu_op op, long nth, gw_status status);
/** The nth backend call of any operation from now fails with `status`; nth 0 disarms. */
GW_API void gw_cpu_fail_any(long nth, gw_status status);
/** Disarm every injected failure. */
GW_API void gw_cpu_fail_reset(void);
/** Failures injected so far. */
GW_API long gw_cpu_failures_injected(void);

/** Calls of `op` so far (injected failures included); GW_CPU_OP_COUNT gives all ops. */
GW_API long gw_cpu_op_calls(gw_cpu_op op);

/*
 * The model's VMM memory and stream-ordered pools (src/backends/cpu/cpu_vmm.c), made as a
 * framework makes them outside gpuwrap, so that gpuwrap's rules for them are tested on the
 * CPU model. The model's pointer query answers for them as CUDA does (docs/IPC.md, the
 * allocator table):
 *   - VMM (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemUnmap, cuMemRelease,
 *     cuMemAddressFree): a mapped byte is GW_MEM_DEVICE of the chunk's device; base/extent
 *     are the contiguous mapped range around it (mappings of one reservation back to back,
 *     up to a hole or the reservation's end); a byte of a hole is not device memory.
 *   - pools (cudaMallocAsync's default pool, cudaMemPoolCreate, cudaMallocFromPoolAsync,
 *     cudaFreeAsync, cudaMemPoolTrimTo, cudaMemPoolDestroy): a byte of a live allocation
 *     is GW_MEM_DEVICE with that allocation's base/extent (interior pointers too); a freed
 *     byte the pool still holds is GW_MEM_DEVICE with no extent (base NULL, extent 0);
 *     trimmed away or destroyed, it is not device memory. Allocations are first-fit at
 *     page granularity, so an allocation after a free reuses its address. The calls are
 *     synchronous (as if their stream's work had completed).
 *   - neither is legacy-IPC capable. Memory of a pool created with GW_CPU_HANDLE_POSIX_FD
 *     is shared as CUDA's IPC pools are (docs/IPC.md): gw_ipc_export gives a version-3
 *     handle naming the pool's descriptor, which the importer takes with pidfd_getfd;
 *     VMM memory whose chunks were made with it likewise, a descriptor per chunk. Other
 *     pool memory and VMM memory are refused (GW_ENOTSUP) naming how to allocate them
 *     shareable (handle_types GW_CPU_HANDLE_POSIX_FD at creation).
 * Sizes and addresses are multiples of gw_cpu_vmm_granularity() (the page size) where
 * the call says so. All are thread-safe; none is counted or injected.
 */
/** A shareable handle type requested at creation (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR /
 *  cudaMemHandleTypePosixFileDescriptor). */
#define GW_CPU_HANDLE_POSIX_FD 1u
typedef struct gw_cpu_vmm_chunk_s *gw_cpu_vmm_chunk;
typedef struct gw_cpu_pool_s *gw_cpu_pool;
/** cuMemGetAllocationGranularity: the page size. */
GW_API size_t gw_cpu_vmm_granularity(void);
/** Reserve `bytes` (a granularity multiple) of address space, nothing mapped: *base. */
GW_API gw_status gw_cpu_vmm_reserve(size_t bytes, void **base);
/** Free a reservation (exact base and size); GW_EBUSY while a mapping is left in it. */
GW_API gw_status gw_cpu_vmm_free(void *base, size_t bytes);
/** A physical chunk of `bytes` (a granularity multiple) on `device`; handle_types 0 or
 *  GW_CPU_HANDLE_POSIX_FD. Its reference is dropped by gw_cpu_vmm_release; each mapping
 *  holds one of its own (as cuMemRelease after cuMemMap). */
GW_API gw_status gw_cpu_vmm_create(int device, size_t bytes, unsigned handle_types,
                                   gw_cpu_vmm_chunk *chunk);
GW_API gw_status gw_cpu_vmm_release(gw_cpu_vmm_chunk chunk);
/** Map the whole chunk at `at` (granularity-aligned, inside one reservation, overlapping
 *  no mapping); bytes must be the chunk's size. */
GW_API gw_status gw_cpu_vmm_map(void *at, size_t bytes, gw_cpu_vmm_chunk chunk);
/** Unmap a mapping of gw_cpu_vmm_map (its exact address and size). */
GW_API gw_status gw_cpu_vmm_unmap(void *at, size_t bytes);
/** A pool of `max_bytes` (a granularity multiple) on `device`; handle_types as above. */
GW_API gw_status gw_cpu_pool_create(int device, size_t max_bytes, unsigned handle_types,
                                    gw_cpu_pool *pool);
/** The device's default pool (no handle type; never destroyed). */
GW_API gw_status gw_cpu_pool_default(int device, gw_cpu_pool *pool);
GW_API gw_status gw_cpu_pool_alloc(gw_cpu_pool pool, size_t bytes, void **out);
/** Free a pool allocation (its exact base): the pool keeps its pages until trimmed. */
GW_API gw_status gw_cpu_pool_free(void *ptr);
/** Give back the freed pages until at most keep_bytes stay backed (cudaMemPoolTrimTo). */
GW_API gw_status gw_cpu_pool_trim(gw_cpu_pool pool, size_t keep_bytes);
/** Destroy a pool: its free pages go now, the pool itself with its last allocation. */
GW_API gw_status gw_cpu_pool_destroy(gw_cpu_pool pool);
/** Mappings and pools (default pools included) alive now. */
GW_API size_t gw_cpu_vmm_live(void);
/** Pools imported from other processes plus pointers imported from them, alive now. */
GW_API size_t gw_cpu_ipc_pool_mappings(void);
/** Make gw_ipc_open's pidfd_getfd of a pool's descriptor fail with errno `err` (EPERM,
 *  ENOSYS, ...) as the kernel would; 0 restores the real call. (The call is the core's,
 *  on every backend; the control is here with the model's.) */
GW_API void gw_cpu_ipc_force_pidfd_errno(int err);

#ifdef __cplusplus
}
#endif
#endif /* GPUWRAP_CPU_TESTING_H */
