/* Arrays: shape and strides, reference counting, views and reshape. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Whether a shape has no elements: then its other extents and its strides are never used,
 * whatever they are (the rule must not depend on the order of the dims). */
static bool has_zero_extent(int ndim, const int64_t *shape) {
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0) return true;
  return false;
}

gw_status gw__check_shape(int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > GW_MAX_DIMS)
    return gw__fail(GW_EINVAL, "ndim: %d outside [0, %d]", ndim, GW_MAX_DIMS);
  if (ndim > 0 && !shape) return gw__fail(GW_EINVAL, "shape: NULL with ndim %d", ndim);
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 0)
      return gw__fail(GW_EINVAL, "shape[%d]: %lld is negative", d, (long long)shape[d]);
  return GW_OK;
}

int64_t gw__numel(int ndim, const int64_t *shape) {
  /* The product of the other extents of an empty shape may not fit: never form it. */
  if (has_zero_extent(ndim, shape)) return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i]; /* fits: checked when the array was made */
  return n;
}

/* a * b, clamped to int64's range: the strides of an empty array, which are never used. */
static int64_t mul_saturated(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}

gw_status gw__span(int ndim, const int64_t *shape, const int64_t *strides, size_t elem, int64_t *lo,
                   int64_t *hi, int64_t *numel) {
  /* An empty array reaches no memory: decided before any arithmetic on the other dims, so
   * {0, MAX, MAX} and {MAX, MAX, 0} are alike. */
  if (has_zero_extent(ndim, shape)) {
    *numel = *lo = *hi = 0;
    return GW_OK;
  }
  int64_t n = 1, l = 0, h = 0; /* element offsets */
  for (int i = 0; i < ndim; i++) {
    if (__builtin_mul_overflow(n, shape[i], &n))
      return gw__fail(GW_EINVAL, "shape: element count overflows int64 at dim %d", i);
    int64_t reach;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &reach))
      return gw__fail(GW_EINVAL, "strides: dim %d reaches past int64 (shape %lld, stride %lld)", i,
                      (long long)shape[i], (long long)strides[i]);
    if (reach < 0 ? __builtin_add_overflow(l, reach, &l) : __builtin_add_overflow(h, reach, &h))
      return gw__fail(GW_EINVAL, "strides: element span overflows int64 at dim %d", i);
  }
  *numel = n;
  int64_t e = (int64_t)elem, bl, bh;
  if (__builtin_mul_overflow(l, e, &bl) || __builtin_mul_overflow(h, e, &bh) ||
      __builtin_add_overflow(bh, e, &bh) || (uint64_t)bh - (uint64_t)bl > (uint64_t)PTRDIFF_MAX)
    return gw__fail(GW_EINVAL, "shape/strides: byte size of the span overflows");
  *lo = bl;
  *hi = bh;
  return GW_OK;
}

bool gw__is_c_contiguous(const gw_array *a) {
  /* Empty: any layout is every layout, and the product of the other extents need not fit. */
  if (has_zero_extent(a->ndim, a->shape)) return true;
  int64_t expect = 1;
  for (int i = a->ndim - 1; i >= 0; i--) {
    if (a->shape[i] != 1 && a->strides[i] != expect) return false;
    expect *= a->shape[i];
  }
  return true;
}

/* Root teardown, in the order that never touches memory after it is gone: registrations
 * first (the pages must still be mapped), then the ownership record, then the free. */
static void destroy_root(gw_array *a) {
  gw_context *ctx = a->ctx;
  /* What this release gives up may still be in use by queued work on a stream: the
   * registration gpuwrap made (unregistered under a queued copy or kernel), memory it frees
   * (owned, or handed to a deleter: a DLPack producer that frees its buffer). Wait for that
   * work first. Borrowed memory gpuwrap holds nothing of is the caller's to keep until the
   * streams are synchronized, as before. */
  if (a->freeway != GW__FREE_NONE || a->hold.n > 0 || a->ipc) gw__pending_drain(a);
  gw__pending_fini(a);
  gw__registry_release(ctx, &a->hold);
  if (a->in_owned_table) gw__owned_drop(a->free_ptr);
  if (a->in_deleter_table) gw__owned_forget_deleter(&a->deleter_slot);
  if (a->ipc) gw__ipc_unref(a->ipc); /* an opened allocation's mapping: the last one closes it */
  switch (a->freeway) {
  case GW__FREE_BACKEND:
    (void)ctx->ops->mem_free(ctx->state, a->kind, a->device, a->free_ptr);
    break;
  case GW__FREE_LIBC: free(a->free_ptr); break;
  case GW__FREE_DELETER: a->deleter(a->free_ptr, a->deleter_user); break;
  case GW__FREE_NONE: break;
  }
  int ref = a->ctx_ref;
  free(a);
  gw__context_release(ctx, ref);
}

/* For the Python face's collector support (owns_keeper in python/gpuwrap/_array.c): how many
 * references a holds now. Exact only while no other thread can make or drop one. */
GW_API int gw__private_abi(void) { return GW__PRIVATE_ABI; }

GW_API int gw__array_refs(const gw_array *a) {
  return a ? atomic_load_explicit(&a->refs, memory_order_acquire) : 0;
}

gw_array *gw_retain(gw_array *a) {
  if (a) atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
  return a;
}

void gw_release(gw_array *a) {
  if (!a) return;
  /* The last reference (every wrap + release): no atomic read-modify-write. A count of 1
   * is the caller's own reference, and a new one can only be made from an existing one
   * (gw_retain), so no other thread can change it; the acquire load orders this teardown
   * after the other holders' releases, as the decrement would. */
  if (atomic_load_explicit(&a->refs, memory_order_acquire) != 1 &&
      atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1)
    return;
  gw_array *root = a->root;
  if (!root) {
    destroy_root(a);
    return;
  }
  free(a);
  gw_release(root);
}

void *gw_data(const gw_array *a) { return a ? a->dev0 : NULL; }
void *gw_host_data(const gw_array *a) { return a ? a->host0 : NULL; }
gw_memkind gw_kind(const gw_array *a) { return a ? gw__root(a)->kind : GW_MEM_UNKNOWN; }
int gw_device(const gw_array *a) { return a ? gw__root(a)->device : -1; }
gw_dtype gw_array_dtype(const gw_array *a) { return a ? a->dtype : GW_BOOL; }
int gw_ndim(const gw_array *a) { return a ? a->ndim : 0; }
const int64_t *gw_shape(const gw_array *a) { return a ? a->shape : NULL; }
const int64_t *gw_strides(const gw_array *a) { return a ? a->strides : NULL; }
int64_t gw_numel(const gw_array *a) { return a ? gw__numel(a->ndim, a->shape) : 0; }
int gw_owns(const gw_array *a) { return a ? gw__root(a)->freeway != GW__FREE_NONE : 0; }
int gw_is_readonly(const gw_array *a) { return a ? a->readonly : 0; }
gw_context *gw_array_context(const gw_array *a) { return a ? a->ctx : NULL; }

/* A view: same memory, new geometry; keeps the root alive. */
static gw_status make_view(gw_array *a, int ndim, const int64_t *shape, const int64_t *strides,
                           int64_t offset, gw_array **out) {
  gw_array *v = malloc(sizeof *v);
  if (!v) return gw__fail(GW_ENOMEM, "view: out of host memory");
  gw_array *root = gw__root(a);
  *v = (gw_array){.root = gw_retain(root),
                  .ctx = a->ctx,
                  .dtype = a->dtype,
                  .ndim = ndim,
                  .readonly = a->readonly,
                  .ro_why = a->ro_why,
                  .kind = root->kind,
                  .device = root->device};
  atomic_init(&v->refs, 1);
  int64_t bytes = offset * (int64_t)gw_dtype_size(a->dtype);
  v->dev0 = a->dev0 ? a->dev0 + bytes : NULL;
  v->host0 = a->host0 ? a->host0 + bytes : NULL;
  if (ndim > 0) { /* shape may be NULL for a 0-d view (gw_reshape(a, 0, NULL, ...)) */
    memcpy(v->shape, shape, (size_t)ndim * sizeof *shape);
    memcpy(v->strides, strides, (size_t)ndim * sizeof *strides);
  }
  *out = v;
  return GW_OK;
}

gw_status gw_view(gw_array *a, const int64_t *start, const int64_t *shape, const int64_t *step,
                  gw_array **out) {
  if (!a) return gw__fail(GW_EINVAL, "a: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (a->ndim > 0 && (!start || !shape))
    return gw__fail(GW_EINVAL, "%s: NULL for a %d-d array", start ? "shape" : "start", a->ndim);
  for (int d = 0; d < a->ndim; d++) {
    if (shape[d] < 0)
      return gw__fail(GW_EINVAL, "shape[%d]: %lld is negative", d, (long long)shape[d]);
    if (step && step[d] == 0) return gw__fail(GW_EINVAL, "step[%d]: 0", d);
  }
  int64_t strides[GW_MAX_DIMS], offset = 0;
  if (has_zero_extent(a->ndim, shape)) {
    /* No elements: nothing is reached, so there is nothing to bound-check, and the strides
     * are never used (a huge step, or a view of an empty view, must not fail on them). */
    for (int d = 0; d < a->ndim; d++) strides[d] = mul_saturated(a->strides[d], step ? step[d] : 1);
    return make_view(a, a->ndim, shape, strides, 0, out);
  }
  for (int d = 0; d < a->ndim; d++) {
    int64_t st = step ? step[d] : 1, last;
    if (start[d] < 0 || start[d] >= a->shape[d] ||
        __builtin_mul_overflow(shape[d] - 1, st, &last) ||
        __builtin_add_overflow(last, start[d], &last) || last < 0 || last >= a->shape[d])
      return gw__fail(
          GW_EINVAL, "start[%d]=%lld shape[%d]=%lld step[%d]=%lld: reaches outside [0, %lld)", d,
          (long long)start[d], d, (long long)shape[d], d, (long long)st, (long long)a->shape[d]);
  }
  /* Every dim in bounds of a parent that has elements (so its span fits int64): the view's
   * strides and offset fit too, except the stride of a dim the view does not step over
   * (extent 1, any step), which is never used. */
  for (int d = 0; d < a->ndim; d++) {
    int64_t st = step ? step[d] : 1;
    strides[d] = shape[d] == 1 ? mul_saturated(a->strides[d], st) : a->strides[d] * st;
    offset += start[d] * a->strides[d];
  }
  return make_view(a, a->ndim, a->ndim ? shape : a->shape, strides, offset, out);
}

/* A new shape whose extents other than 1 are a's, in order: only extent-1 dims are added
 * or removed, so every dim keeps its stride and the view is one of any layout (how the
 * Python face drops the dims an integer index selects: a[:, 3] of a strided array). The
 * stride of an extent-1 dim is never used; it is given the C-order value. */
static bool unit_reshape(const gw_array *a, int ndim, const int64_t *shape, int64_t *strides) {
  int j = 0;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 1) continue;
    while (j < a->ndim && a->shape[j] == 1) j++;
    if (j == a->ndim || a->shape[j] != shape[d]) return false;
    strides[d] = a->strides[j++];
  }
  while (j < a->ndim && a->shape[j] == 1) j++;
  if (j != a->ndim) return false;
  for (int d = ndim - 1, inner = -1; d >= 0; d--) {
    if (shape[d] != 1) {
      inner = d;
      continue;
    }
    strides[d] = inner < 0 ? 1 : mul_saturated(strides[inner], shape[inner]);
  }
  return true;
}

gw_status gw_reshape(gw_array *a, int ndim, const int64_t *shape, gw_array **out) {
  if (!a) return gw__fail(GW_EINVAL, "a: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  gw_status st = gw__check_shape(ndim, shape);
  if (st != GW_OK) return st;
  /* An empty shape has 0 elements whatever its other extents (in any order). */
  int64_t n = 1;
  if (has_zero_extent(ndim, shape))
    n = 0;
  else
    for (int d = 0; d < ndim; d++)
      if (__builtin_mul_overflow(n, shape[d], &n))
        return gw__fail(GW_EINVAL, "shape: element count overflows int64");
  if (n != gw_numel(a))
    return gw__fail(GW_EINVAL, "shape: %lld elements, the array has %lld", (long long)n,
                    (long long)gw_numel(a));
  int64_t strides[GW_MAX_DIMS], s = 1;
  if (!gw__is_c_contiguous(a)) {
    if (!unit_reshape(a, ndim, shape, strides))
      return gw__fail(GW_EINVAL, "a: not C-contiguous, and shape does more than add or remove "
                                 "extent-1 dims; reshape never copies (gw_copy it first)");
    return make_view(a, ndim, shape, strides, 0, out);
  }
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    /* Only an empty array can overflow here, and any strides fit an empty array. */
    s = mul_saturated(s, shape[d] ? shape[d] : 1);
  }
  return make_view(a, ndim, shape, strides, 0, out);
}
