/*
 * fork safety. Every lock of the library is taken before fork and released after it in
 * both processes, so a child forked while another thread was inside gpuwrap finds no lock
 * held by a thread that does not exist there (it would hang at its first call). The child
 * also forgets gpuwrap's registrations: they belong to the parent's runtime, and the
 * child must never unregister them, and it is not the process that exported the parent's
 * IPC handles (it forgets the parent's identity, proc_identity.c).
 * Lock order (the order the code nests them): pin, registry, ipc import table, the
 * descriptors received over sockets (ipc_fdpass.c), the VMM manifests (ipc_manifest.c),
 * owned, then
 * each backend's own (backend.h's fork_lock).
 */
#include "internal.h"
#include "proc_identity.h"

#include <pthread.h>

static void lock_all(void) {
  gw__pin_lock(1);
  gw__registry_lock(1);
  gw__ipc_lock(1);
  gw__ipc_fd_lock(1);
  gw__ipc_manifest_lock(1);
  gw__owned_lock(1);
  gw__backends_fork_lock(1);
}

static void unlock_all(void) {
  gw__backends_fork_lock(0);
  gw__owned_lock(0);
  gw__ipc_manifest_lock(0);
  gw__ipc_fd_lock(0);
  gw__ipc_lock(0);
  gw__registry_lock(0);
  gw__pin_lock(0);
}

static void child(void) {
  gw__backends_fork_lock(0);
  gw__owned_lock(0);
  gw__ipc_manifest_child();   /* closes its copies of the parent's manifests */
  gw__ipc_fd_child();         /* closes the received descriptors, releases their lock */
  gw__ipc_child();            /* also releases the table's lock */
  gw__proc_identity_forget(); /* not the exporter of the parent's handles */
  gw__registry_forget_all();  /* also makes the registry's lock anew */
  gw__pin_lock(0);
}

__attribute__((constructor)) static void install(void) {
  pthread_atfork(lock_all, unlock_all, child);
}
