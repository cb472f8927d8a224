/*
 * This process's identity as the exporter of IPC handles (proc_identity.c): its pid and
 * a nonce of its address space, which together tell it from another process that reuses
 * the pid and from itself after an exec.
 */
#ifndef GW_CORE_PROC_IDENTITY_H
#define GW_CORE_PROC_IDENTITY_H

#include <stdint.h>

/* This process's pid and address-space nonce (never 0), made at the first call. */
void gw__proc_identity(uint64_t *pid, uint64_t *nonce);
/* A forked child's: forget the parent's (fork.c's child handler); the child makes its
 * own at its first call. */
void gw__proc_identity_forget(void);

#endif
