/* A program that uses only <gpuwrap.h> (no test harness, no CPU model controls) to do every
 * row of the wrap table, as a user would: device, managed, pinned (allocated), pinned
 * (registered by someone else: here gw_pin stands in for the other party), pageable host
 * (registered, NO_REGISTER, OWN), zero elements. Exit 0 = pass, 77 = skip, 1 = fail. */
#include <gpuwrap.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(c)                                                                   \
  do {                                                                             \
    if (!(c)) {                                                                    \
      fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #c, \
              gw_last_error());                                                    \
      failures++;                                                                  \
    }                                                                              \
  } while (0)
#define CHECK_OK(call) CHECK((call) == GW_OK)

/* Round trip: host data -> a -> host, compare. */
static void roundtrip(gw_array *a) {
  gw_context *ctx = gw_array_context(a);
  int64_t n = gw_numel(a);
  size_t bytes = (size_t)n * gw_dtype_size(gw_array_dtype(a));
  unsigned char *in = malloc(bytes), *out = malloc(bytes);
  gw_array *hi = NULL, *ho = NULL;
  for (size_t i = 0; i < bytes; i++) in[i] = (unsigned char)(rand() & 0xff);
  memset(out, 0xA5, bytes);
  CHECK_OK(
      gw_wrap(ctx, in, gw_array_dtype(a), gw_ndim(a), gw_shape(a), NULL, GW_WRAP_NO_REGISTER, &hi));
  CHECK_OK(gw_wrap(ctx, out, gw_array_dtype(a), gw_ndim(a), gw_shape(a), NULL, GW_WRAP_NO_REGISTER,
                   &ho));
  CHECK_OK(gw_copy(a, hi));
  CHECK_OK(gw_copy(ho, a));
  CHECK(memcmp(in, out, bytes) == 0);
  gw_release(hi);
  gw_release(ho);
  free(in);
  free(out);
}

static int deleted;
static void on_delete(void *p, void *u) {
  (void)p;
  (void)u;
  deleted++;
}

int main(void) {
  const char *b = getenv("GPUWRAP_TEST_BACKEND");
  gw_backend be = !b || !strcmp(b, "cpu") ? GW_BACKEND_CPU
                  : !strcmp(b, "cuda")    ? GW_BACKEND_CUDA
                                          : GW_BACKEND_HIP;
  int count = 0;
  if (gw_backend_device_count(be, &count) != GW_OK || count == 0) {
    printf("SKIP: backend %s unavailable\n", gw_backend_name(be));
    return 77;
  }
  gw_context *ctx = NULL;
  CHECK_OK(gw_context_create(be, 0, &ctx));
  if (!ctx) return 1;
  int64_t shape[2] = {16, 24};
  gw_array *src = NULL, *w = NULL;

  /* device memory */
  CHECK_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 2, shape, &src));
  CHECK_OK(gw_wrap(ctx, gw_data(src), GW_FLOAT32, 2, shape, NULL, 0, &w));
  CHECK(w && gw_kind(w) == GW_MEM_DEVICE && gw_host_data(w) == NULL && gw_device(w) == 0);
  if (w) roundtrip(w);
  gw_release(w);
  gw_release(src);

  /* managed memory */
  if (gw_alloc(ctx, GW_MEM_MANAGED, GW_INT16, 2, shape, &src) == GW_OK) {
    w = NULL;
    CHECK_OK(gw_wrap(ctx, gw_host_data(src), GW_INT16, 2, shape, NULL, 0, &w));
    CHECK(w && gw_kind(w) == GW_MEM_MANAGED && gw_host_data(w) && gw_data(w));
    if (w) roundtrip(w);
    gw_release(w);
    gw_release(src);
  }

  /* pinned memory from the backend's allocator */
  CHECK_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT64, 2, shape, &src));
  w = NULL;
  CHECK_OK(gw_wrap(ctx, gw_host_data(src), GW_FLOAT64, 2, shape, NULL, 0, &w));
  CHECK(w && gw_kind(w) == GW_MEM_PINNED && gw_data(w) && gw_host_data(w) == gw_host_data(src));
  if (w) roundtrip(w);
  gw_release(w);
  gw_release(src);

  /* pageable host memory: registered while wrapped */
  size_t bytes = 16 * 24 * sizeof(double);
  double *host = malloc(bytes);
  gw_ptrinfo info;
  w = NULL;
  CHECK_OK(gw_wrap(ctx, host, GW_FLOAT64, 2, shape, NULL, 0, &w));
  CHECK(w && gw_data(w) != NULL && gw_host_data(w) == host);
  CHECK_OK(gw_pointer_query(ctx, host, &info));
  CHECK(info.kind == GW_MEM_PINNED && (info.flags & GW_PTR_GPUWRAP_REGISTERED));
  if (w) roundtrip(w);
  gw_release(w);
  CHECK_OK(gw_pointer_query(ctx, host, &info));
  CHECK(info.kind == GW_MEM_HOST);

  /* memory pinned elsewhere (gw_pin stands in): used, left pinned */
  CHECK_OK(gw_pin(ctx, host, bytes));
  w = NULL;
  CHECK_OK(gw_wrap(ctx, host, GW_FLOAT64, 2, shape, NULL, 0, &w));
  gw_release(w);
  CHECK_OK(gw_pointer_query(ctx, host, &info));
  CHECK(info.kind == GW_MEM_PINNED);
  CHECK_OK(gw_unpin(ctx, host, bytes));

  /* NO_REGISTER: host-only */
  w = NULL;
  CHECK_OK(gw_wrap(ctx, host, GW_FLOAT64, 2, shape, NULL, GW_WRAP_NO_REGISTER, &w));
  CHECK(w && gw_data(w) == NULL && gw_host_data(w) == host && gw_kind(w) == GW_MEM_HOST);
  gw_release(w);

  /* OWN: released = free()d (a leak checker sees it otherwise) */
  w = NULL;
  CHECK_OK(gw_wrap(ctx, host, GW_FLOAT64, 2, shape, NULL, GW_WRAP_OWN, &w));
  CHECK(w && gw_owns(w) == 1);
  gw_release(w);

  /* a deleter instead of OWN */
  double *h2 = malloc(bytes);
  w = NULL;
  CHECK_OK(gw_wrap_with_deleter(ctx, h2, GW_FLOAT64, 2, shape, NULL, 0, on_delete, NULL, &w));
  gw_release(w);
  CHECK(deleted == 1);
  free(h2);

  /* zero elements, NULL pointer */
  int64_t zero[1] = {0};
  w = NULL;
  CHECK_OK(gw_wrap(ctx, NULL, GW_FLOAT32, 1, zero, NULL, 0, &w));
  CHECK(w && gw_numel(w) == 0);
  gw_release(w);

  gw_context_destroy(ctx);
  if (failures)
    fprintf(stderr, "%d failures\n", failures);
  else
    printf("OK header-only (%s)\n", gw_backend_name(be));
  return failures ? 1 : 0;
}
