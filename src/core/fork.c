/*
 * fork safety. Every lock of the library is taken before fork and released after it in
 * both processes, so a child forked while another thread was inside gpuwrap finds no lock
 * held by a thread that does not exist there (it would hang at its first call). The child
 * also forgets gpuwrap's registrations: they belong to the parent's runtime, and the
 * child must never unregister them.
 * Lock order (the order the code nests them): pin, registry, ipc import table, owned, cpu
 * injection, cpu model.
 */
#include "internal.h"

#include <pthread.h>

static void lock_all(void) {
  gw__pin_lock(1);
  gw__registry_lock(1);
  gw__ipc_lock(1);
  gw__owned_lock(1);
  gw__cpu_inject_lock(1);
  gw__cpu_model_lock(1);
}

static void unlock_all(void) {
  gw__cpu_model_lock(0);
  gw__cpu_inject_lock(0);
  gw__owned_lock(0);
  gw__ipc_lock(0);
  gw__registry_lock(0);
  gw__pin_lock(0);
}

static void child(void) {
  gw__cpu_model_lock(0);
  gw__cpu_inject_lock(0);
  gw__owned_lock(0);
  gw__ipc_child(); /* also releases the table's lock */
  gw__registry_forget_all(); /* also makes the registry's lock anew */
  gw__pin_lock(0);
}

__attribute__((constructor)) static void install(void) { pthread_atfork(lock_all, unlock_all, child); }
