/*
 * gw_wrap and gw_alloc: the wrap table of README.md ("What gw_wrap does").
 *
 * Hot path (device, managed, pinned memory): validate, one backend query, one malloc.
 * The registry lock is taken only for pageable host memory (and pinned memory the
 * registry already holds), the ownership table only for owning wraps.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define GW_WRAP_KNOWN_FLAGS (GW_WRAP_OWN | GW_WRAP_NO_REGISTER | GW_WRAP_READONLY)

typedef struct {
  int64_t lo, hi, numel; /* byte span relative to element 0 */
  size_t elem;
} geometry;

static gw_status check_geometry(gw_dtype dtype, int ndim, const int64_t *shape,
                                const int64_t *strides, int64_t *cstrides, geometry *g) {
  if ((unsigned)dtype >= GW_DTYPE_COUNT)
    return gw__fail(GW_EINVAL, "dtype: %d is not a gw_dtype", (int)dtype);
  gw_status st = gw__check_shape(ndim, shape);
  if (st != GW_OK) return st;
  g->elem = gw__dtype_size(dtype);
  if (strides) {
    memcpy(cstrides, strides, (size_t)ndim * sizeof *strides);
  } else {
    /* A shape with a 0 extent has no elements whatever its other extents, in any order:
     * its C-contiguous strides saturate (they are never used). Otherwise an overflow here
     * is an element count that does not fit. */
    bool empty = false;
    for (int d = 0; d < ndim; d++) empty |= shape[d] == 0;
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
      cstrides[d] = s;
      if (shape[d] > 1 && __builtin_mul_overflow(s, shape[d], &s)) {
        if (!empty) return gw__fail(GW_EINVAL, "shape: element count overflows int64 at dim %d", d);
        s = INT64_MAX;
      }
    }
    /* Hot path (the common wrap: no strides): C-contiguous elements span exactly
     * [0, numel * elem), what gw__span computes in a second pass over the dims; only a
     * byte size that does not fit goes there, for its error. */
    int64_t bytes;
    if (!empty && !__builtin_mul_overflow(s, (int64_t)g->elem, &bytes) &&
        (uint64_t)bytes <= (uint64_t)PTRDIFF_MAX) {
      g->lo = 0;
      g->hi = bytes;
      g->numel = s;
      return GW_OK;
    }
  }
  return gw__span(ndim, shape, cstrides, g->elem, &g->lo, &g->hi, &g->numel);
}

gw_array *gw__new_root(gw_context *ctx, gw_dtype dtype, int ndim, const int64_t *shape,
                       const int64_t *strides) {
  gw_array *a = malloc(sizeof *a);
  if (!a) return NULL;
  /* Only the header is initialised: shape/strides beyond ndim are never read. */
  memset(a, 0, offsetof(gw_array, shape));
  atomic_init(&a->refs, 1);
  a->ctx = ctx;
  a->dtype = dtype;
  a->ndim = ndim;
  if (ndim > 0) { /* shape may be NULL for a 0-d array */
    memcpy(a->shape, shape, (size_t)ndim * sizeof *shape);
    memcpy(a->strides, strides, (size_t)ndim * sizeof *strides);
  }
  a->kind = GW_MEM_UNKNOWN;
  a->device = -1;
  a->freeway = GW__FREE_NONE;
  a->free_ptr = NULL;
  a->deleter = NULL;
  a->deleter_user = NULL;
  a->hold = (gw__reghold){0};
  a->in_owned_table = false;
  a->in_deleter_table = false;
  /* Relaxed: no other thread can see the array yet, and the default (sequentially
   * consistent) clear is a full barrier (xchg) on every wrap. */
  atomic_flag_clear_explicit(&a->pend_lock, memory_order_relaxed);
  a->pend = (gw__pend){0};
  a->pend_more = NULL;
  a->pend_nmore = a->pend_cap = 0;
  return a;
}

/* Device address for a page-locked host span: the host address where the device can use
 * it, else the runtime's, which must be contiguous over the whole span. */
static gw_status device_address_of(gw_context *ctx, char *first, char *last, char **dev) {
  if (ctx->caps.host_ptr_for_registered) {
    *dev = first;
    return GW_OK;
  }
  void *d0, *d1;
  gw_status s = ctx->ops->mem_device_address(ctx->state, first, &d0);
  if (s == GW_OK && last != first)
    s = ctx->ops->mem_device_address(ctx->state, last, &d1);
  else
    d1 = (char *)d0;
  if (s != GW_OK) return s;
  if ((char *)d1 - (char *)d0 != last - first)
    return gw__fail(GW_ENOTSUP,
                    "ptr: the span [%p, %p] lies in several registrations whose device "
                    "addresses are not contiguous, and this device cannot use host addresses "
                    "of registered memory (canUseHostPointerForRegisteredMem = 0); wrap each "
                    "registration separately",
                    (void *)first, (void *)last);
  *dev = d0;
  return GW_OK;
}

/* The wrap's byte span [lo, hi) as addresses (integer arithmetic: no pointer overflow). */
static gw_status span_bounds(char *p, const geometry *g, char **lo, char **hi) {
  uintptr_t up = (uintptr_t)p;
  if ((g->lo < 0 && up < (uintptr_t)(-g->lo)) || UINTPTR_MAX - up < (uintptr_t)g->hi)
    return gw__fail(GW_EINVAL, "ptr/strides: the elements would wrap around the address space");
  *lo = (char *)(up + (uintptr_t)g->lo);
  *hi = (char *)(up + (uintptr_t)g->hi);
  return GW_OK;
}

/* What GW_WRAP_OWN of ptr may not be, whatever the span: memory someone else registered
 * (gpuwrap would neither free nor unregister it) or the inside of an allocation. One rule,
 * checked before the extent, so each case has one status. */
static gw_status own_rules(const gw_context *ctx, void *ptr, const gw_ptrinfo *info) {
  if (info->kind == GW_MEM_PINNED && (info->flags & GW_PTR_HOST_REGISTERED))
    return gw__fail(GW_EINVAL,
                    "flags: GW_WRAP_OWN of %p, host memory someone else registered: gpuwrap "
                    "neither frees nor unregisters it; own it with gw_wrap_with_deleter",
                    ptr);
  if (info->kind != GW_MEM_HOST && info->base && info->base != ptr)
    return gw__fail(GW_EINVAL,
                    "flags: GW_WRAP_OWN of %p, inside the %s allocation at %p: only an "
                    "allocation's base can be freed",
                    ptr, gw_memkind_name(info->kind), info->base);
  if (info->kind == GW_MEM_UNKNOWN)
    return gw__fail(GW_EBACKEND, "ptr: %p: the %s runtime could not classify it", ptr,
                    ctx->ops->name);
  return GW_OK;
}

/*
 * What p is: the backend's answer, and whether the pages are gpuwrap's own registration
 * (*ours: the wrap then takes registry references, as for pageable memory); then the
 * ownership rules and the extent check of the span [lo, hi). *snap: the registry's answer
 * for p, looked up before the query (gw__registry_try_ref).
 *
 * A pinned answer is someone else's pinning (a cudaHostAlloc pointer: used as it is, no
 * registry reference) or gpuwrap's own registration. The look-up made before the query
 * tells which, provided no registry writer ran meanwhile (gw__registry_unchanged, one
 * atomic load): so foreign pinned memory costs what device memory costs, no second
 * look-up and no lock. Only when a writer did run (a range came or went during the query)
 * is p looked up again and asked about again, rather than a gpuwrap range that just went
 * away taken for someone else's pinning, or one that just came for none.
 */
static gw_status classify(gw_context *ctx, char *p, unsigned flags, gw_ptrinfo *info, bool *ours,
                          char *lo, char *hi, gw__regsnap *snap) {
  for (;;) {
    gw_status s = ctx->ops->mem_query(ctx->state, p, info);
    if (s != GW_OK) return s;
    *ours = false;
    if (__builtin_expect(info->kind != GW_MEM_PINNED, 1)) break;
    if (__builtin_expect(gw__registry_unchanged(snap), 1)) {
      *ours = snap->ours;
      break;
    }
    gw__registry_snapshot(ctx->ops, (uintptr_t)p, snap);
  }
  bool own = flags & GW_WRAP_OWN;
  if (own && !*ours) {
    gw_status s = own_rules(ctx, p, info);
    if (s != GW_OK) return s;
  }
  bool beyond = info->base && info->extent &&
                (lo < (char *)info->base || hi > (char *)info->base + info->extent);
  if (!beyond || *ours) return GW_OK;
  /* Host memory someone else registered may be only part of the span: the registry uses
   * that part as it is and covers the rest (registering it, or under GW_WRAP_NO_REGISTER
   * finding that it is not all pinned: a host-only array). Only where the backend can tell
   * a registration from a pinned allocation (CUDA cannot: there a span past any pinned
   * memory is GW_ERANGE). */
  if (info->kind == GW_MEM_PINNED && (info->flags & GW_PTR_HOST_REGISTERED)) {
    *ours = true;
    return GW_OK;
  }
  return gw__fail(GW_ERANGE,
                  "ptr/shape/strides: the elements span [%p, %p), outside the %s allocation "
                  "[%p, %p) holding ptr",
                  (void *)lo, (void *)hi, gw_memkind_name(info->kind), info->base,
                  (void *)((char *)info->base + info->extent));
}

/* A registration gpuwrap made read-only (for a GW_WRAP_READONLY wrap of the same bytes, or
 * for pages the process cannot write): the device may not write through it, so neither may
 * this array, whatever its own flags asked; a refused write says which (transfer.c). */
static void mark_shared_readonly(gw_array *a) {
  if (!a->hold.readonly || a->readonly) return;
  a->readonly = true;
  a->ro_why = GW__RO_SHARED;
}

/* The array over [lo, hi) of host memory on which a->hold holds registry references
 * (released with the array). */
static gw_status attach_registered(gw_context *ctx, gw_array *a, char *p, char *lo, char *hi,
                                   bool own) {
  a->kind = GW_MEM_PINNED;
  a->device = ctx->device;
  a->host0 = p;
  if (own) a->freeway = GW__FREE_LIBC;
  char *dlo;
  gw_status s = device_address_of(ctx, lo, hi - 1, &dlo);
  if (s != GW_OK) return s;
  a->dev0 = dlo + (p - lo);
  return GW_OK;
}

/* A host-only array over pageable memory (the device reads it only with pageable access). */
static void attach_host(gw_context *ctx, gw_array *a, char *p, bool own) {
  a->kind = GW_MEM_HOST;
  a->host0 = p;
  if (own) a->freeway = GW__FREE_LIBC;
  if (ctx->caps.pageable_access) a->dev0 = p; /* the device reads it where it is */
}

/*
 * GW_WRAP_OWN of a zero-element array over a non-NULL pointer: nothing is registered or
 * checked against an extent, but the memory is classified so that the matching free runs
 * (ownership is never dropped silently). *own_bytes: the span the ownership table records.
 */
static gw_status own_empty(gw_context *ctx, gw_array *a, char *p, size_t *own_bytes) {
  gw_ptrinfo info;
  gw_status s = ctx->ops->mem_query(ctx->state, p, &info);
  if (s != GW_OK) return s;
  if (info.kind == GW_MEM_PINNED && gw__registry_contains(ctx->ops, (uintptr_t)p, NULL, NULL)) {
    a->kind = GW_MEM_HOST; /* pageable memory gpuwrap registered for another wrap */
    a->freeway = GW__FREE_LIBC;
    *own_bytes = 1;
    return GW_OK;
  }
  s = own_rules(ctx, p, &info);
  if (s != GW_OK) return s;
  a->kind = info.kind;
  a->device = info.device;
  a->freeway = info.kind == GW_MEM_HOST ? GW__FREE_LIBC : GW__FREE_BACKEND;
  *own_bytes = info.base == p && info.extent ? info.extent : 1;
  return GW_OK;
}

/* The arguments a wrap checks before it looks at the geometry or the memory. */
static gw_status check_wrap_args(gw_context *ctx, gw_array **out, unsigned flags,
                                 gw_deleter deleter) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (flags & ~GW_WRAP_KNOWN_FLAGS)
    return gw__fail(GW_EINVAL, "flags: unknown bits 0x%x", flags & ~GW_WRAP_KNOWN_FLAGS);
  if (deleter && (flags & GW_WRAP_OWN))
    return gw__fail(GW_EINVAL, "flags: GW_WRAP_OWN with a deleter (the deleter owns the memory)");
  return GW_OK;
}

/* The new array, before its memory is looked at: its geometry, read-only flag and deleter.
 * NULL when out of host memory. */
static gw_array *new_wrap(gw_context *ctx, void *ptr, gw_dtype dtype, int ndim,
                          const int64_t *shape, const int64_t *cstrides, unsigned flags,
                          gw_deleter deleter, void *user) {
  gw_array *a = gw__new_root(ctx, dtype, ndim, shape, cstrides);
  if (!a) return NULL;
  a->readonly = flags & GW_WRAP_READONLY;
  if (a->readonly) a->ro_why = GW__RO_ASKED;
  if (deleter) {
    a->freeway = GW__FREE_DELETER;
    a->free_ptr = ptr;
    a->deleter = deleter;
    a->deleter_user = user;
  }
  return a;
}

/* The bytes a wrap covers: its elements' [lo, hi) (none while numel is 0) and the span the
 * ownership table records for an owning wrap. */
typedef struct {
  char *lo, *hi;
  size_t own_bytes;
} wrap_span;

/* Host memory (pageable, or pinned by gpuwrap: `ours`) of a wrap: registered exactly over
 * the wrapped bytes where the registry is used and may register (or the bytes are
 * gpuwrap's already), else a host-only array. */
static gw_status attach_host_memory(gw_context *ctx, gw_array *a, char *p, unsigned flags,
                                    bool ours, const wrap_span *w, bool uses_registry,
                                    bool may_register) {
  bool own = flags & GW_WRAP_OWN;
  if (uses_registry && (may_register || ours)) {
    /* Exactly the wrapped bytes, not whole pages (see registry.c). */
    unsigned regflags = (flags & GW_WRAP_READONLY) ? GW__REG_READONLY : 0;
    gw_status s = gw__registry_acquire(ctx, (uintptr_t)w->lo, (uintptr_t)w->hi, may_register,
                                       regflags, &a->hold);
    if (s == GW_OK) {
      mark_shared_readonly(a);
      return attach_registered(ctx, a, p, w->lo, w->hi, own);
    }
    if (s == GW_ENOTSUP) {
      /* Memory that cannot be page-locked (read-only pages the device cannot register,
       * a read-only private file mapping): a host-only array whose copies stage;
       * gw_last_error() keeps the reason. Pages the process cannot write make it a
       * read-only array. */
      gw__hostmap m;
      if ((gw__host_mapping((uintptr_t)w->lo, (uintptr_t)w->hi, &m) != GW_OK || !m.writable) &&
          !a->readonly) {
        a->readonly = true;
        a->ro_why = GW__RO_PAGES;
      }
    } else if (s != GW_ENOTREG || may_register) {
      return s;
    }
    /* else NO_REGISTER and part of the span is pageable: a host-only array. */
  }
  attach_host(ctx, a, p, own);
  return GW_OK;
}

/* The array over memory of the kind the backend classified: the runtime's own allocation as
 * it is, host memory through the registry. */
static gw_status attach_by_kind(gw_context *ctx, gw_array *a, char *p, unsigned flags,
                                const gw_ptrinfo *info, bool ours, wrap_span *w, bool uses_registry,
                                bool may_register) {
  switch (info->kind) {
  case GW_MEM_DEVICE:
  case GW_MEM_MANAGED:
  case GW_MEM_PINNED:
    if (!ours) {
      a->kind = info->kind;
      a->device = info->device;
      a->dev0 = info->device_ptr;
      a->host0 = info->host_ptr;
      if (flags & GW_WRAP_OWN) {
        a->freeway = GW__FREE_BACKEND;
        if (info->base == p && info->extent) w->own_bytes = info->extent;
      }
      return GW_OK;
    }
    /* Pages gpuwrap pinned (gw_pin or another wrap) take a reference, like pageable. */
    /* fall through */
  case GW_MEM_HOST:
    return attach_host_memory(ctx, a, p, flags, ours, w, uses_registry, may_register);
  case GW_MEM_UNKNOWN:
    return gw__fail(GW_EBACKEND, "ptr: %p: the %s runtime could not classify it", (void *)p,
                    ctx->ops->name);
  }
  return GW_OK;
}

/* The memory of a wrap of at least one element at `p`: the pointer's checks, the span of
 * its elements, then the warm path (bytes gpuwrap already registered) or the backend's
 * classification and the array that follows from it. */
static gw_status attach_memory(gw_context *ctx, gw_array *a, char *p, gw_dtype dtype,
                               const geometry *g, unsigned flags, wrap_span *w) {
  if (!p) return gw__fail(GW_EINVAL, "ptr: NULL with %lld elements", (long long)g->numel);
  if ((uintptr_t)p % gw__dtype_align(dtype))
    return gw__fail(GW_EINVAL, "ptr: %p is not aligned for %s (%zu bytes)", (void *)p,
                    gw_dtype_name(dtype), gw__dtype_align(dtype));
  gw_status s = span_bounds(p, g, &w->lo, &w->hi);
  if (s != GW_OK) return s;
  w->own_bytes = w->hi > p ? (size_t)(w->hi - p) : 1;
  /* GW_WRAP_NO_REGISTER: gpuwrap registers nothing new, but host memory that is already
   * page-locked (by anyone, gpuwrap's own gw_pin and other wraps included) is used as it
   * is, device-accessible; on gpuwrap's own ranges the wrap holds references, so they stay
   * registered while it lives. A device that reads pageable memory needs no registry. */
  bool uses_registry = !ctx->caps.pageable_access;
  bool may_register = uses_registry && !(flags & GW_WRAP_NO_REGISTER);
  /* Warm path: bytes gpuwrap already registered (another live wrap, a gw_pin) take one more
   * reference, with no runtime call and no exclusive lock. */
  gw__regsnap snap;
  if (!uses_registry) {
    gw__registry_snapshot(ctx->ops, (uintptr_t)p, &snap);
  } else if (gw__registry_try_ref(ctx->ops, (uintptr_t)p, (uintptr_t)w->lo, (uintptr_t)w->hi,
                                  &a->hold, &snap)) {
    mark_shared_readonly(a);
    return attach_registered(ctx, a, p, w->lo, w->hi, flags & GW_WRAP_OWN);
  }
  gw_ptrinfo info;
  bool ours = false;
  s = classify(ctx, p, flags, &info, &ours, w->lo, w->hi, &snap);
  if (s != GW_OK) return s;
  return attach_by_kind(ctx, a, p, flags, &info, ours, w, uses_registry, may_register);
}

/* Who frees the memory: an owning wrap claims its span in the ownership table; a wrap with
 * a deleter notes the bytes it spans, so that an owning wrap of them is refused (owned.c). */
static gw_status record_owner(gw_array *a, void *ptr, unsigned flags, gw_deleter deleter,
                              const wrap_span *w) {
  if (flags & GW_WRAP_OWN) {
    gw_status s = gw__owned_claim(ptr, w->own_bytes, a->freeway == GW__FREE_LIBC, false);
    if (s != GW_OK) return s;
    a->in_owned_table = true;
    a->free_ptr = ptr;
  } else if (deleter) {
    gw_status s = gw__owned_note_deleter(w->lo, w->hi, &a->deleter_slot);
    if (s != GW_OK) return s;
    a->in_deleter_table = true;
  }
  return GW_OK;
}

/* The phases of a wrap: arguments, geometry, the array, its memory (none to look at for
 * zero elements unless owned), who frees it; a failure leaves nothing registered or
 * allocated. */
static gw_status wrap_impl(gw_context *ctx, void *ptr, gw_dtype dtype, int ndim,
                           const int64_t *shape, const int64_t *strides, unsigned flags,
                           gw_deleter deleter, void *user, gw_array **out) {
  gw_status s = check_wrap_args(ctx, out, flags, deleter);
  if (s != GW_OK) return s;
  int64_t cstrides[GW_MAX_DIMS];
  geometry g;
  s = check_geometry(dtype, ndim, shape, strides, cstrides, &g);
  if (s != GW_OK) return s;
  bool own = flags & GW_WRAP_OWN;
  if (own && ptr && (s = gw__owned_check(ptr)) != GW_OK) return s;
  gw_array *a = new_wrap(ctx, ptr, dtype, ndim, shape, cstrides, flags, deleter, user);
  if (!a) return gw__fail(GW_ENOMEM, "gw_wrap: out of host memory");

  wrap_span w = {NULL, NULL, 0};
  if (g.numel > 0) {
    s = attach_memory(ctx, a, ptr, dtype, &g, flags, &w);
    if (s == GW_OK) s = record_owner(a, ptr, flags, deleter, &w);
  } else if (own && ptr) { /* no elements: nothing registered, but the matching free runs */
    a->dev0 = a->host0 = ptr;
    s = own_empty(ctx, a, ptr, &w.own_bytes);
    if (s == GW_OK) s = record_owner(a, ptr, flags, NULL, &w);
  } else { /* any pointer, NULL included (nothing to free), and no runtime call */
    a->dev0 = a->host0 = ptr;
  }
  if (s != GW_OK) {
    gw__registry_release(ctx, &a->hold);
    free(a);
    return s;
  }
  a->ctx_ref = gw__context_retain(ctx);
  *out = a;
  return GW_OK;
}

gw_status gw_wrap(gw_context *ctx, void *ptr, gw_dtype dtype, int ndim, const int64_t *shape,
                  const int64_t *strides, unsigned flags, gw_array **out) {
  return wrap_impl(ctx, ptr, dtype, ndim, shape, strides, flags, NULL, NULL, out);
}

gw_status gw_wrap_with_deleter(gw_context *ctx, void *ptr, gw_dtype dtype, int ndim,
                               const int64_t *shape, const int64_t *strides, unsigned flags,
                               gw_deleter deleter, void *user, gw_array **out) {
  if (!deleter) return gw__fail(GW_EINVAL, "deleter: NULL (use gw_wrap to borrow)");
  return wrap_impl(ctx, ptr, dtype, ndim, shape, strides, flags, deleter, user, out);
}

gw_status gw_alloc(gw_context *ctx, gw_memkind kind, gw_dtype dtype, int ndim, const int64_t *shape,
                   gw_array **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (kind != GW_MEM_HOST && kind != GW_MEM_PINNED && kind != GW_MEM_DEVICE &&
      kind != GW_MEM_MANAGED)
    return gw__fail(GW_EINVAL, "kind: %d is not an allocatable gw_memkind", (int)kind);
  int64_t cstrides[GW_MAX_DIMS];
  geometry g;
  gw_status s = check_geometry(dtype, ndim, shape, NULL, cstrides, &g);
  if (s != GW_OK) return s;
  /* Never zero bytes: every array gets a distinct, freeable pointer. */
  size_t bytes = g.numel ? (size_t)(g.hi - g.lo) : g.elem;
  gw_array *a = gw__new_root(ctx, dtype, ndim, shape, cstrides);
  if (!a) return gw__fail(GW_ENOMEM, "gw_alloc: out of host memory");
  void *p = NULL;
  if (kind == GW_MEM_HOST) {
    size_t align = 64, rounded = (bytes + align - 1) / align * align;
    p = aligned_alloc(align, rounded);
    if (!p) {
      free(a);
      return gw__fail(GW_ENOMEM, "gw_alloc: %zu bytes of host memory", bytes);
    }
    a->freeway = GW__FREE_LIBC;
    a->host0 = p;
    atomic_store_explicit(&a->pages_ok, true, memory_order_relaxed); /* our own: writable */
    if (ctx->caps.pageable_access) a->dev0 = p;
  } else {
    s = ctx->ops->mem_alloc(ctx->state, kind, bytes, &p);
    if (s != GW_OK) {
      free(a);
      return s;
    }
    a->freeway = GW__FREE_BACKEND;
    a->device = ctx->device;
    a->host0 = kind == GW_MEM_DEVICE ? NULL : p;
    a->dev0 = p;
    if (kind == GW_MEM_PINNED) {
      char *d;
      s = device_address_of(ctx, p, (char *)p + bytes - 1, &d);
      if (s != GW_OK) {
        (void)ctx->ops->mem_free(ctx->state, kind, ctx->device, p);
        free(a);
        return s;
      }
      a->dev0 = d;
    }
  }
  a->kind = kind;
  a->free_ptr = p;
  /* Recorded as owned, so an owning wrap of gw_data() is refused rather than a double free. */
  s = gw__owned_claim(p, bytes, false, true);
  if (s != GW_OK) {
    if (kind == GW_MEM_HOST)
      free(p);
    else
      (void)ctx->ops->mem_free(ctx->state, kind, ctx->device, p);
    free(a);
    return s;
  }
  a->in_owned_table = true;
  a->ctx_ref = gw__context_retain(ctx);
  *out = a;
  return GW_OK;
}
