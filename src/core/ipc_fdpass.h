/*
 * Descriptors of pool and VMM memory handles passed over a Unix socket with SCM_RIGHTS
 * (ipc_fdpass.c): gw_ipc_handle_send / gw_ipc_handle_recv, the exporter's record of the
 * descriptors it exported, and the importer's table of the descriptors it received, which
 * the import table (ipc_table.c) consults before pidfd_getfd. Its lock and fork reset are
 * internal.h's (gw__ipc_fd_lock, gw__ipc_fd_child).
 */
#ifndef GW_CORE_IPC_FDPASS_H
#define GW_CORE_IPC_FDPASS_H

#include "ipc_handle.h"

/* Export: `fd` (this process's) is a descriptor a handle names; remember which file it is
 * (fstat's device and inode), so that a send can check it still is. GW_ENOMEM; GW_EBACKEND
 * where fstat fails (the backend gave a descriptor that is not open). */
gw_status gw__ipc_fd_exported(int fd);
/* The descriptor received for the exporter's (pid, nonce) descriptor `fd`, taken out of the
 * table (the caller closes it); -1 where none was received. */
int gw__ipc_fd_claim(uint64_t pid, uint64_t nonce, int fd);
/* Close every received descriptor that d's handle names and that is still in the table (an
 * open of the handle consumes them, whether it used them or not). */
void gw__ipc_fd_drop(const gw__ipc_fields *d);

#endif
