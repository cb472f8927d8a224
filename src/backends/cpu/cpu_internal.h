/*
 * Private to the CPU backend: the pieces its files share.
 *
 *   cpu_inject.c  per-op call counters and failure injection (gw__cpu_check)
 *   cpu_model.c   the modelled runtime: environment, devices, allocation and registration
 *                 tables, and the raw runtime calls (gw_cpu_runtime_*)
 *   cpu_copy.c    strided N-d copy and fill loops
 *   cpu_ops.c     the gw__cpu_ops table
 */
#ifndef GW_CPU_INTERNAL_H
#define GW_CPU_INTERNAL_H

#include "gpuwrap/cpu.h"
#include "internal.h"

#include <stdatomic.h>
#include <stddef.h>

/* Most devices GPUWRAP_CPU_DEVICES may ask for. */
#define GW__CPU_MAX_DEVICES 64

/* ---- injection (cpu_inject.c) ---- */

/* Read by the inline check below; written only by cpu_inject.c. */
extern atomic_long gw__cpu_calls[GW_CPU_OP_COUNT];
extern atomic_int gw__cpu_armed; /* armed triggers; 0 keeps the check to two atomics */
extern atomic_int gw__cpu_inject_ready;

void gw__cpu_inject_init(void);
gw_status gw__cpu_inject_slow(gw_cpu_op op, long callno);
/* Why GPUWRAP_CPU_FAIL could not be parsed, or NULL. */
const char *gw__cpu_inject_env_error(void);

/*
 * Every backend call starts here: count the call, and fail it if a failure is armed for it
 * (then nothing else happens, so an injected failure changes no state). The fast path is
 * one relaxed increment and two loads; the mutex is taken only while something is armed.
 */
static inline gw_status gw__cpu_check(gw_cpu_op op) {
  if (!atomic_load_explicit(&gw__cpu_inject_ready, memory_order_acquire))
    gw__cpu_inject_init();
  long n = atomic_fetch_add_explicit(&gw__cpu_calls[op], 1, memory_order_relaxed) + 1;
  if (atomic_load_explicit(&gw__cpu_armed, memory_order_relaxed) == 0)
    return GW_OK;
  return gw__cpu_inject_slow(op, n);
}

/* ---- the modelled runtime (cpu_model.c) ---- */

typedef struct {
  int devices;                 /* GPUWRAP_CPU_DEVICES */
  int pageable_access;         /* GPUWRAP_CPU_PAGEABLE_ACCESS */
  int host_ptr_for_registered; /* !GPUWRAP_CPU_NO_HOST_PTR */
  int readonly_register;       /* !GPUWRAP_CPU_NO_READONLY_REGISTER */
  const char *error;           /* why the environment is unusable, or NULL */
} gw__cpu_config;

/* Read once, thread-safe. */
const gw__cpu_config *gw__cpu_config_get(void);

/* A context's state is a per-device slot, so context_init never allocates. */
void *gw__cpu_device_state(int device);
int gw__cpu_state_device(const void *state);

/*
 * The runtime's rules. `who` prefixes error messages. `kind` GW_MEM_UNKNOWN in free means
 * "any kind" and `device` -1 "any device" (the raw runtime free, which knows neither).
 */
void gw__cpu_model_query(const void *ptr, gw_ptrinfo *out);
gw_status gw__cpu_model_alloc(const char *who, gw_memkind kind, int device, size_t bytes,
                              void **out);
gw_status gw__cpu_model_free(const char *who, gw_memkind kind, int device, void *ptr);
/* flags: GW__REG_*. The pages are checked against /proc/self/maps as CUDA checks them:
 * see cpu_model.c. */
gw_status gw__cpu_model_register(const char *who, int device, void *base, size_t bytes,
                                 unsigned flags);
gw_status gw__cpu_model_unregister(const char *who, void *base);
gw_status gw__cpu_model_device_address(const char *who, void *host, void **dev);

/* ---- loops (cpu_copy.c) ---- */
gw_status gw__cpu_copy(const gw__xfer *x);
gw_status gw__cpu_fill(const gw__fillspec *f);

#endif /* GW_CPU_INTERNAL_H */
