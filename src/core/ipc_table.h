/*
 * The process-wide table of memory mapped from other processes (ipc_table.c), behind
 * gw_ipc_open (ipc.c). gw__ipc_unref, gw__ipc_lock and gw__ipc_child are internal.h's.
 */
#ifndef GW_CORE_IPC_TABLE_H
#define GW_CORE_IPC_TABLE_H

#include "ipc_handle.h"

/* The mapping of d's allocation on this process's device `device`: the table's entry of
 * it, or one mapped now through ctx's backend (which ctx is retained for); *local is the
 * allocation's base here. Takes a reference on the entry (gw__ipc_unref drops it). */
gw_status gw__ipc_table_open(gw_context *ctx, const gw__ipc_fields *d, int device,
                             struct gw__ipc_map **out, char **local);

#endif
