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
  GW_CPU_OP_COUNT
} gw_cpu_op;

/** "context_init", "query", "alloc", "free", "register", "unregister", "device_address",
 *  "copy", "fill", "synchronize", "stream_create", "stream_destroy", "stream_synchronize",
 *  "stream_borrow", "event_create", "event_record", "stream_wait_event", "ipc_export",
 *  "ipc_open", "ipc_close". (Event destroy
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

#ifdef __cplusplus
}
#endif
#endif /* GPUWRAP_CPU_TESTING_H */
