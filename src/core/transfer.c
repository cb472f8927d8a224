/* gw_copy, gw_fill and streams: plan in the core, execute in the backend. */
#include "internal.h"

#include <stdlib.h>

struct gw_stream {
  gw_context *ctx;
  void *handle;
};

static bool is_gpu(const gw_context *c) { return c->backend != GW_BACKEND_CPU; }

/* The backend that runs a copy: a GPU backend can reach everything a CPU one can, so it
 * runs any copy that involves its memory. */
static gw_status executor(const gw_array *dst, const gw_array *src, gw_context **out) {
  gw_context *d = dst->ctx, *s = src->ctx;
  if (d->ops == s->ops || !is_gpu(s)) *out = d;
  else if (!is_gpu(d)) *out = s;
  else
    return gw__fail(GW_ENOTSUP, "src/dst: a copy between the %s and %s backends",
                    s->ops->name, d->ops->name);
  return GW_OK;
}

static int64_t elements(const gw_array *a) { return gw__numel(a->ndim, a->shape); }

static gw_status copy_on(gw_array *dst, const gw_array *src, gw_stream *st) {
  if (!dst) return gw__fail(GW_EINVAL, "dst: NULL");
  if (!src) return gw__fail(GW_EINVAL, "src: NULL");
  gw__xfer x;
  gw_status s = gw__plan_copy(dst, src, &x);
  if (s != GW_OK || elements(dst) == 0) return s;
  gw_context *ctx = NULL;
  s = executor(dst, src, &ctx);
  if (s != GW_OK) return s;
  if (!x.dst || !x.src) return gw__fail(GW_EINVAL, "src/dst: no address to copy through");
  if (st && st->ctx->ops != ctx->ops)
    return gw__fail(GW_EINVAL, "stream: belongs to the %s backend, the copy runs on %s",
                    st->ctx->ops->name, ctx->ops->name);
  return ctx->ops->copy(ctx->state, &x, st ? st->handle : NULL);
}

static gw_status fill_on(gw_array *dst, const void *value, gw_stream *st) {
  if (!dst) return gw__fail(GW_EINVAL, "dst: NULL");
  if (!value) return gw__fail(GW_EINVAL, "value: NULL");
  if (dst->readonly) return gw__fail(GW_EREADONLY, "dst: read-only array");
  if (elements(dst) == 0) return GW_OK;
  if (st && st->ctx->ops != dst->ctx->ops)
    return gw__fail(GW_EINVAL, "stream: belongs to the %s backend, the array to %s",
                    st->ctx->ops->name, dst->ctx->ops->name);
  gw__fillspec f;
  gw__plan_fill(dst, value, &f);
  return dst->ctx->ops->fill(dst->ctx->state, &f, st ? st->handle : NULL);
}

gw_status gw_copy(gw_array *dst, const gw_array *src) { return copy_on(dst, src, NULL); }
gw_status gw_fill(gw_array *dst, const void *value) { return fill_on(dst, value, NULL); }

gw_status gw_copy_async(gw_array *dst, const gw_array *src, gw_stream *s) {
  if (!s) return gw__fail(GW_EINVAL, "stream: NULL");
  return copy_on(dst, src, s);
}

gw_status gw_fill_async(gw_array *dst, const void *value, gw_stream *s) {
  if (!s) return gw__fail(GW_EINVAL, "stream: NULL");
  return fill_on(dst, value, s);
}

gw_status gw_stream_create(gw_context *ctx, gw_stream **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  gw_stream *s = malloc(sizeof *s);
  if (!s) return gw__fail(GW_ENOMEM, "gw_stream_create: out of host memory");
  gw_status st = ctx->ops->stream_create(ctx->state, &s->handle);
  if (st != GW_OK) {
    free(s);
    return st;
  }
  s->ctx = gw__context_retain(ctx);
  *out = s;
  return GW_OK;
}

void gw_stream_destroy(gw_stream *s) {
  if (!s) return;
  (void)s->ctx->ops->stream_synchronize(s->ctx->state, s->handle);
  (void)s->ctx->ops->stream_destroy(s->ctx->state, s->handle);
  gw__context_release(s->ctx);
  free(s);
}

gw_status gw_stream_synchronize(gw_stream *s) {
  if (!s) return gw__fail(GW_EINVAL, "stream: NULL");
  return s->ctx->ops->stream_synchronize(s->ctx->state, s->handle);
}
