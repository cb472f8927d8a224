/*
 * gw_wrap and gw_alloc: the wrap table of DESIGN.md.
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

/* Natural alignment: complex types align like their real components. */
static size_t dtype_align(gw_dtype t) {
  size_t s = gw_dtype_size(t);
  return (t == GW_COMPLEX64 || t == GW_COMPLEX128) ? s / 2 : s;
}

static gw_status check_geometry(gw_dtype dtype, int ndim, const int64_t *shape,
                                const int64_t *strides, int64_t *cstrides, geometry *g) {
  if ((unsigned)dtype >= GW_DTYPE_COUNT)
    return gw__fail(GW_EINVAL, "dtype: %d is not a gw_dtype", (int)dtype);
  if (ndim < 0 || ndim > GW_MAX_DIMS)
    return gw__fail(GW_EINVAL, "ndim: %d outside [0, %d]", ndim, GW_MAX_DIMS);
  if (ndim > 0 && !shape) return gw__fail(GW_EINVAL, "shape: NULL with ndim %d", ndim);
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 0)
      return gw__fail(GW_EINVAL, "shape[%d]: %lld is negative", d, (long long)shape[d]);
  if (strides) {
    memcpy(cstrides, strides, (size_t)ndim * sizeof *strides);
  } else {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
      cstrides[d] = s;
      if (shape[d] > 1 && __builtin_mul_overflow(s, shape[d], &s))
        return gw__fail(GW_EINVAL, "shape: element count overflows int64 at dim %d", d);
    }
  }
  g->elem = gw_dtype_size(dtype);
  return gw__span(ndim, shape, cstrides, g->elem, &g->lo, &g->hi, &g->numel);
}

static gw_array *new_root(gw_context *ctx, gw_dtype dtype, int ndim, const int64_t *shape,
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
  a->reg_lo = a->reg_hi = 0;
  a->in_owned_table = false;
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
  gw_status s = ctx->ops->device_address(ctx->state, first, &d0);
  if (s == GW_OK && last != first) s = ctx->ops->device_address(ctx->state, last, &d1);
  else d1 = (char *)d0;
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

/*
 * What p is, for a wrap of the byte span g: the backend's answer, whether the pages are
 * gpuwrap's own registration (then the wrap is a pageable one that takes registry
 * references), the span's bounds, and the extent check.
 */
static gw_status span_bounds(char *p, const geometry *g, char **lo, char **hi) {
  /* The span must lie inside the address space (integer arithmetic: no pointer overflow). */
  uintptr_t up = (uintptr_t)p;
  if ((g->lo < 0 && up < (uintptr_t)(-g->lo)) || UINTPTR_MAX - up < (uintptr_t)g->hi)
    return gw__fail(GW_EINVAL, "ptr/strides: the elements would wrap around the address space");
  *lo = (char *)(up + (uintptr_t)g->lo);
  *hi = (char *)(up + (uintptr_t)g->hi);
  return GW_OK;
}

static gw_status classify(gw_context *ctx, char *p, unsigned flags, const geometry *g,
                          gw_ptrinfo *info, bool *ours, char *lo, char *hi) {
  unsigned long gen;
  do {
    /* If a gpuwrap range went away between the query and the look-up, the query's
     * "pinned" may have described it: ask again rather than take it for someone else's. */
    gen = gw__registry_generation();
    gw_status s = ctx->ops->query(ctx->state, p, info);
    if (s != GW_OK) return s;
    *ours = info->kind == GW_MEM_PINNED &&
            gw__registry_contains(ctx->ops, (uintptr_t)p, NULL, NULL);
  } while (info->kind == GW_MEM_PINNED && !*ours && gen != gw__registry_generation());
  (void)g;
  bool beyond = info->base && info->extent &&
                (lo < (char *)info->base || hi > (char *)info->base + info->extent);
  if (!beyond || *ours) return GW_OK;
  /* Host memory someone else registered may be only part of the span: the registry uses
   * that part as it is and registers the rest. Only where the backend can tell a
   * registration from a pinned allocation (CUDA cannot: there a span past any pinned
   * memory is GW_ERANGE). */
  if (info->kind == GW_MEM_PINNED && (info->flags & GW_PTR_HOST_REGISTERED) &&
      !(flags & (GW_WRAP_OWN | GW_WRAP_NO_REGISTER))) {
    *ours = true;
    return GW_OK;
  }
  return gw__fail(GW_ERANGE,
                  "ptr/shape/strides: the elements span [%p, %p), outside the %s allocation "
                  "[%p, %p) holding ptr",
                  (void *)lo, (void *)hi, gw_memkind_name(info->kind), info->base,
                  (void *)((char *)info->base + info->extent));
}

/* The array over [lo, hi) of pageable memory on which the caller holds registry
 * references (released with the array). */
static gw_status attach_registered(gw_context *ctx, gw_array *a, char *p, char *lo, char *hi,
                                   bool own) {
  a->reg_lo = (uintptr_t)lo;
  a->reg_hi = (uintptr_t)hi;
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

static gw_status wrap_impl(gw_context *ctx, void *ptr, gw_dtype dtype, int ndim,
                           const int64_t *shape, const int64_t *strides, unsigned flags,
                           gw_deleter deleter, void *user, gw_array **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (flags & ~GW_WRAP_KNOWN_FLAGS)
    return gw__fail(GW_EINVAL, "flags: unknown bits 0x%x", flags & ~GW_WRAP_KNOWN_FLAGS);
  if (deleter && (flags & GW_WRAP_OWN))
    return gw__fail(GW_EINVAL, "flags: GW_WRAP_OWN with a deleter (the deleter owns the memory)");
  int64_t cstrides[GW_MAX_DIMS];
  geometry g;
  gw_status s = check_geometry(dtype, ndim, shape, strides, cstrides, &g);
  if (s != GW_OK) return s;

  char *p = ptr;
  bool own = flags & GW_WRAP_OWN;
  gw_array *a = new_root(ctx, dtype, ndim, shape, cstrides);
  if (!a) return gw__fail(GW_ENOMEM, "gw_wrap: out of host memory");
  a->readonly = flags & GW_WRAP_READONLY;
  if (deleter) {
    a->freeway = GW__FREE_DELETER;
    a->free_ptr = ptr;
    a->deleter = deleter;
    a->deleter_user = user;
  }

  if (g.numel == 0) { /* any pointer, NULL included, and no runtime call */
    a->dev0 = a->host0 = p;
    goto done;
  }
  if (!p) {
    s = gw__fail(GW_EINVAL, "ptr: NULL with %lld elements", (long long)g.numel);
    goto fail;
  }
  if ((uintptr_t)p % dtype_align(dtype)) {
    s = gw__fail(GW_EINVAL, "ptr: %p is not aligned for %s (%zu bytes)", ptr,
                 gw_dtype_name(dtype), dtype_align(dtype));
    goto fail;
  }

  char *lo = NULL, *hi = NULL;
  s = span_bounds(p, &g, &lo, &hi);
  if (s != GW_OK) goto fail;
  /* Warm path: bytes gpuwrap already registered (another live wrap, a gw_pin) take one more
   * reference, with no runtime call and no exclusive lock. */
  bool registers = !(flags & GW_WRAP_NO_REGISTER) && !ctx->caps.pageable_access;
  if (registers && gw__registry_try_ref(ctx->ops, (uintptr_t)lo, (uintptr_t)hi)) {
    s = attach_registered(ctx, a, p, lo, hi, own);
    if (s != GW_OK) goto fail;
    goto owned;
  }
  gw_ptrinfo info;
  bool ours = false;
  s = classify(ctx, p, flags, &g, &info, &ours, lo, hi);
  if (s != GW_OK) goto fail;

  switch (info.kind) {
  case GW_MEM_DEVICE:
  case GW_MEM_MANAGED:
  case GW_MEM_PINNED:
    if (!ours) {
      if (own && (info.flags & GW_PTR_HOST_REGISTERED)) {
        s = gw__fail(GW_EINVAL,
                     "flags: GW_WRAP_OWN of %p, host memory someone else registered: gpuwrap "
                     "neither frees nor unregisters it; own it with gw_wrap_with_deleter",
                     ptr);
        goto fail;
      }
      if (own && info.base && info.base != ptr) {
        s = gw__fail(GW_EINVAL,
                     "flags: GW_WRAP_OWN of %p, inside the %s allocation at %p: only an "
                     "allocation's base can be freed",
                     ptr, gw_memkind_name(info.kind), info.base);
        goto fail;
      }
      a->kind = info.kind;
      a->device = info.device;
      a->dev0 = info.device_ptr;
      a->host0 = info.host_ptr;
      if (own) a->freeway = GW__FREE_BACKEND;
      break;
    }
    /* Pages gpuwrap pinned (gw_pin or another wrap) take a reference, like pageable. */
    /* fall through */
  case GW_MEM_HOST:
    if (registers) {
      /* Exactly the wrapped bytes, not whole pages (see registry.c). */
      s = gw__registry_acquire(ctx, (uintptr_t)lo, (uintptr_t)hi);
      if (s != GW_OK) goto fail;
      s = attach_registered(ctx, a, p, lo, hi, own);
      if (s != GW_OK) goto fail;
      break;
    }
    a->kind = GW_MEM_HOST;
    a->host0 = p;
    if (own) a->freeway = GW__FREE_LIBC;
    if (ctx->caps.pageable_access) a->dev0 = p; /* the device reads it where it is */
    break;
  case GW_MEM_UNKNOWN:
    s = gw__fail(GW_EBACKEND, "ptr: %p: the %s runtime could not classify it", ptr, ctx->ops->name);
    goto fail;
  }
owned:
  if (own) {
    s = gw__owned_claim(ptr);
    if (s != GW_OK) goto fail;
    a->in_owned_table = true;
    a->free_ptr = ptr;
  }

done:
  gw__context_retain(ctx);
  *out = a;
  return GW_OK;

fail:
  if (a->reg_lo < a->reg_hi) gw__registry_release(ctx, a->reg_lo, a->reg_hi);
  free(a);
  return s;
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

gw_status gw_alloc(gw_context *ctx, gw_memkind kind, gw_dtype dtype, int ndim,
                   const int64_t *shape, gw_array **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (kind != GW_MEM_HOST && kind != GW_MEM_PINNED && kind != GW_MEM_DEVICE && kind != GW_MEM_MANAGED)
    return gw__fail(GW_EINVAL, "kind: %d is not an allocatable gw_memkind", (int)kind);
  int64_t cstrides[GW_MAX_DIMS];
  geometry g;
  gw_status s = check_geometry(dtype, ndim, shape, NULL, cstrides, &g);
  if (s != GW_OK) return s;
  /* Never zero bytes: every array gets a distinct, freeable pointer. */
  size_t bytes = g.numel ? (size_t)(g.hi - g.lo) : g.elem;
  gw_array *a = new_root(ctx, dtype, ndim, shape, cstrides);
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
    if (ctx->caps.pageable_access) a->dev0 = p;
  } else {
    s = ctx->ops->alloc(ctx->state, kind, bytes, &p);
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
        (void)ctx->ops->free(ctx->state, kind, ctx->device, p);
        free(a);
        return s;
      }
      a->dev0 = d;
    }
  }
  a->kind = kind;
  a->free_ptr = p;
  /* Recorded as owned, so an owning wrap of gw_data() is refused rather than a double free. */
  s = gw__owned_claim(p);
  if (s != GW_OK) {
    if (kind == GW_MEM_HOST) free(p);
    else (void)ctx->ops->free(ctx->state, kind, ctx->device, p);
    free(a);
    return s;
  }
  a->in_owned_table = true;
  gw__context_retain(ctx);
  *out = a;
  return GW_OK;
}
