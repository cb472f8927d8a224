/*
 * gw_pin / gw_unpin: an explicit registry reference, so a buffer that is wrapped and
 * released in a loop (a halo exchange) is registered once. Each pin is recorded by its
 * (ptr, bytes) so an unpin without a matching pin is refused instead of stealing a
 * reference some live wrap holds.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

/* One record per (ptr, bytes); each pin's registry references are kept, last first, so an
 * unpin drops exactly what one pin took (a later pin of the same bytes may hold ranges an
 * earlier one did not, where someone else's pinning went away in between). */
typedef struct {
  const gw__backend_ops *ops;
  uintptr_t ptr;
  size_t bytes;
  size_t count, cap;
  gw__reghold *holds;
} pin_record;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
void gw__pin_lock(int on) { on ? pthread_mutex_lock(&lock) : pthread_mutex_unlock(&lock); }
static pin_record *pins;
static size_t npins, cap;

static pin_record *find(const gw__backend_ops *ops, uintptr_t p, size_t bytes) {
  for (size_t i = 0; i < npins; i++)
    if (pins[i].ops == ops && pins[i].ptr == p && pins[i].bytes == bytes) return &pins[i];
  return NULL;
}

/* The registry's span of a pin: exactly its bytes, as for a wrap (see registry.c). */
static void byte_span(uintptr_t p, size_t bytes, uintptr_t *lo, uintptr_t *hi) {
  *lo = p;
  *hi = p + bytes;
}

static gw_status check_args(gw_context *ctx, void *ptr, size_t bytes) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!ptr) return gw__fail(GW_EINVAL, "ptr: NULL");
  if (bytes == 0) return gw__fail(GW_EINVAL, "bytes: 0");
  if ((uintptr_t)ptr + bytes < (uintptr_t)ptr)
    return gw__fail(GW_EINVAL, "bytes: %zu wraps around the address space", bytes);
  return GW_OK;
}

gw_status gw_pin(gw_context *ctx, void *ptr, size_t bytes) {
  gw_status s = check_args(ctx, ptr, bytes);
  if (s != GW_OK) return s;
  gw_ptrinfo info;
  s = ctx->ops->mem_query(ctx->state, ptr, &info);
  if (s != GW_OK) return s;
  if (info.kind == GW_MEM_DEVICE || info.kind == GW_MEM_MANAGED)
    return gw__fail(GW_EINVAL, "ptr: %p is %s memory, not host memory", ptr,
                    gw_memkind_name(info.kind));
  pthread_mutex_lock(&lock);
  pin_record *r = find(ctx->ops, (uintptr_t)ptr, bytes);
  if (!r && npins == cap) {
    size_t c = cap ? cap * 2 : 16;
    pin_record *n = realloc(pins, c * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&lock);
      return gw__fail(GW_ENOMEM, "gw_pin: out of host memory");
    }
    pins = n;
    cap = c;
  }
  if (!r) {
    r = &pins[npins];
    *r = (pin_record){ctx->ops, (uintptr_t)ptr, bytes, 0, 0, NULL};
  }
  if (r->count == r->cap) {
    size_t c = r->cap ? r->cap * 2 : 2;
    gw__reghold *h = realloc(r->holds, c * sizeof *h);
    if (!h) {
      if (r->count == 0) free(r->holds);
      pthread_mutex_unlock(&lock);
      return gw__fail(GW_ENOMEM, "gw_pin: out of host memory");
    }
    r->holds = h;
    r->cap = c;
  }
  uintptr_t lo, hi;
  byte_span((uintptr_t)ptr, bytes, &lo, &hi);
  s = gw__registry_acquire(ctx, lo, hi, true, 0, &r->holds[r->count]);
  if (s == GW_OK) {
    if (r->count++ == 0) npins++; /* a new record becomes visible with its first pin */
  } else if (r->count == 0) {
    free(r->holds);
  }
  pthread_mutex_unlock(&lock);
  return s;
}

gw_status gw_unpin(gw_context *ctx, void *ptr, size_t bytes) {
  gw_status s = check_args(ctx, ptr, bytes);
  if (s != GW_OK) return s;
  pthread_mutex_lock(&lock);
  pin_record *r = find(ctx->ops, (uintptr_t)ptr, bytes);
  if (!r) {
    pthread_mutex_unlock(&lock);
    return gw__fail(GW_ENOTREG, "ptr/bytes: no gw_pin(%p, %zu) to undo", ptr, bytes);
  }
  gw__reghold h = r->holds[--r->count];
  if (r->count == 0) {
    free(r->holds);
    *r = pins[--npins];
  }
  gw__registry_release(ctx, &h);
  pthread_mutex_unlock(&lock);
  return GW_OK;
}
