/* Core-private declarations: contexts, arrays, the registry, errors. Never installed. */
#ifndef GW_CORE_INTERNAL_H
#define GW_CORE_INTERNAL_H

#include "backend.h"
#include "gpuwrap.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors (errors.c) ---- */
/* Record detail for gw_last_error() and return s. */
gw_status gw__fail(gw_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
extern const gw__host_api gw__host;

/* ---- contexts (context.c) ---- */
struct gw_context {
  atomic_int refs; /* the creator's reference + one per live array and stream */
  const gw__backend_ops *ops;
  void *state;
  gw_backend backend;
  int device;
  gw__caps caps;
};
gw_context *gw__context_retain(gw_context *ctx);
void gw__context_release(gw_context *ctx);

/* ---- arrays (array.c) ---- */
typedef enum {
  GW__FREE_NONE = 0, /* borrowed */
  GW__FREE_BACKEND,  /* ops->free(kind, device, base) */
  GW__FREE_LIBC,     /* free(base): an owned pageable wrap (Base.unsafe_wrap semantics) */
  GW__FREE_DELETER,  /* deleter(base, user) */
} gw__freeway;

/*
 * A root array owns the memory record inline (one heap allocation per wrap); a view points
 * at its root and keeps it alive.
 */
struct gw_array {
  atomic_int refs;
  gw_array *root; /* NULL for a root */
  gw_context *ctx;
  gw_dtype dtype;
  int ndim;
  bool readonly;
  char *dev0;  /* device-usable address of element 0, or NULL */
  char *host0; /* host-usable address of element 0, or NULL */
  int64_t shape[GW_MAX_DIMS];
  int64_t strides[GW_MAX_DIMS];
  /* root only */
  gw_memkind kind;
  int device;
  gw__freeway freeway;
  void *free_ptr; /* what the free/deleter gets */
  gw_deleter deleter;
  void *deleter_user;
  uintptr_t reg_lo, reg_hi; /* byte span referenced in the registry (lo == hi: none) */
  bool in_owned_table;
};

/* Byte span [lo, hi) of the elements relative to element 0 (strides may be negative). */
gw_status gw__span(int ndim, const int64_t *shape, const int64_t *strides, size_t elem,
                   int64_t *lo, int64_t *hi, int64_t *numel);
bool gw__is_c_contiguous(const gw_array *a);
int64_t gw__numel(int ndim, const int64_t *shape);

/* ---- registration registry (registry.c) ---- */
/* Take a reference on every byte of [lo, hi), registering the gaps that no one pinned yet.
 * On failure nothing is held. */
gw_status gw__registry_acquire(gw_context *ctx, uintptr_t lo, uintptr_t hi);
/* One more reference on the single range of ours that holds all of [lo, hi), under the read
 * lock and without a runtime call (the warm wrap); false if there is none. */
bool gw__registry_try_ref(const gw__backend_ops *ops, uintptr_t lo, uintptr_t hi);
/* Drop the references acquire (or try_ref) took; unregister ranges that reach zero. */
void gw__registry_release(gw_context *ctx, uintptr_t lo, uintptr_t hi);
/* Whether [p, p+1) lies in a range gpuwrap registered (for GW_PTR_GPUWRAP_REGISTERED). */
bool gw__registry_contains(const gw__backend_ops *ops, uintptr_t p, uintptr_t *base, size_t *len);
size_t gw__page_size(void);
/* Changes whenever a range is unregistered: lets a wrap tell a stale "pinned" answer. */
unsigned long gw__registry_generation(void);

/* ---- fork safety (fork.c): each module's lock, taken (1) / released (0) around fork ---- */
void gw__pin_lock(int on);
void gw__registry_lock(int on);
void gw__owned_lock(int on);
void gw__cpu_inject_lock(int on);
void gw__cpu_model_lock(int on);
void gw__registry_forget_all(void);

/* ---- ownership table (owned.c): addresses owned by live arrays ---- */
gw_status gw__owned_claim(void *p);
void gw__owned_drop(void *p);

/* ---- copy planning (copy_plan.c) ---- */
gw_status gw__plan_copy(const gw_array *dst, const gw_array *src, gw__xfer *x);
void gw__plan_fill(const gw_array *dst, const void *value, gw__fillspec *f);
/* Normalise dims in place: drop extent-1 dims, order by dst stride, merge. */
void gw__xfer_normalise(gw__xfer *x);

#endif /* GW_CORE_INTERNAL_H */
