/* Ownership is of byte spans, never dropped silently, and one rule gives one status
 * (issue 13 items 3, 6, 11). */
#include "test.h"

static gw_status wrap1(gw_context *ctx, void *p, int64_t n, unsigned flags, gw_array **out) {
  int64_t shape[1] = {n};
  return gw_wrap(ctx, p, GW_UINT8, 1, shape, NULL, flags, out);
}

/* Item 3: an owning wrap of an address inside memory a live array owns is GW_EOWNED, for
 * gw_alloc'd memory of every kind (through a view's address) and for two owning wraps of
 * one malloc block. */
TEST_IMPL(own_interior_of_owned) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  const gw_memkind kinds[] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    int64_t shape[2] = {4, 8};
    gw_array *a = NULL, *v = NULL, *w = NULL;
    ASSERT_OK(gw_alloc(ctx, kinds[k], GW_FLOAT64, 2, shape, &a));
    int64_t start[2] = {1, 0}, vshape[2] = {2, 8};
    ASSERT_OK(gw_view(a, start, vshape, NULL, &v));
    void *inner = kinds[k] == GW_MEM_DEVICE ? gw_data(v) : gw_host_data(v);
    ASSERT_STATUS(wrap1(ctx, inner, 16, GW_WRAP_OWN, &w), GW_EOWNED);
    ASSERT_NULL(w);
    /* the base itself, and a zero-element owning wrap of the inside, too */
    void *base = kinds[k] == GW_MEM_DEVICE ? gw_data(a) : gw_host_data(a);
    ASSERT_STATUS(wrap1(ctx, base, 8, GW_WRAP_OWN, &w), GW_EOWNED);
    ASSERT_STATUS(wrap1(ctx, inner, 0, GW_WRAP_OWN, &w), GW_EOWNED);
    ASSERT_ERROR_MENTIONS("already owns");
    gw_release(v);
    gw_release(a);
  }
  /* two owning wraps of p and p + 64 of one malloc'd block */
  char *p = malloc(256);
  gw_array *first = NULL, *second = NULL;
  ASSERT_OK(wrap1(ctx, p, 32, GW_WRAP_OWN, &first));
  ASSERT_STATUS(wrap1(ctx, p + 64, 32, GW_WRAP_OWN, &second), GW_EOWNED);
  ASSERT_NULL(second);
  ASSERT_STATUS(wrap1(ctx, p + 255, 1, GW_WRAP_OWN | GW_WRAP_NO_REGISTER, &second), GW_EOWNED);
  /* borrowing the inside is fine */
  ASSERT_OK(wrap1(ctx, p + 64, 32, 0, &second));
  gw_release(second);
  gw_release(first); /* frees p exactly once (ASan/LSan would tell otherwise) */
  /* once released, the memory may be owned again */
  char *q = malloc(64);
  ASSERT_OK(wrap1(ctx, q, 64, GW_WRAP_OWN, &first));
  gw_release(first);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

static int deleted;
static void count_free(void *p, void *user) {
  (void)user;
  free(p);
  deleted++;
}
/* frees the block `user` that the array's ptr lies in */
static void count_free_inner(void *p, void *user) {
  (void)p;
  free(user);
  deleted++;
}
static void count_only(void *p, void *user) {
  (void)p;
  (void)user;
  deleted++;
}

/* Item 6: a zero-element owning wrap owns: the matching free runs (LSan reports p leaked
 * otherwise), gw_owns says so, and a second owner is GW_EOWNED. */
TEST_IMPL(own_zero_elements) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  long long heap0 = tst_heap_in_use();
  char *p = malloc(1 << 20); /* large: its free shows in the heap figures (LSan's elsewhere) */
  gw_array *a = NULL, *b = NULL;
  ASSERT_OK(wrap1(ctx, p, 0, GW_WRAP_OWN, &a));
  ASSERT_EQ_INT(gw_owns(a), 1);
  ASSERT_EQ_INT(gw_numel(a), 0);
  ASSERT_STATUS(wrap1(ctx, p, 0, GW_WRAP_OWN, &b), GW_EOWNED);
  ASSERT_STATUS(wrap1(ctx, p, 16, GW_WRAP_OWN, &b), GW_EOWNED);
  ASSERT_NULL(b);
  gw_release(a);
  if (heap0 >= 0) ASSERT_TRUE(tst_heap_in_use() < heap0 + (1 << 19)); /* p was freed */

  /* backend memory: the backend's free runs */
  size_t allocs = gw_cpu_live_allocations();
  const gw_memkind kinds[] = {GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};
  for (size_t k = 0; k < 3; k++) {
    gw_array *src = NULL;
    int64_t n = 64;
    ASSERT_OK(gw_alloc(ctx, kinds[k], GW_UINT8, 1, &n, &src));
    /* gw_alloc owns it: an owning empty wrap of its base is a second owner */
    void *base = gw_data(src);
    if (kinds[k] != GW_MEM_DEVICE) base = gw_host_data(src);
    ASSERT_STATUS(wrap1(ctx, base, 0, GW_WRAP_OWN, &b), GW_EOWNED);
    gw_release(src);
  }
  if (tst_is_cpu()) {
    void *d = NULL;
    ASSERT_OK(gw_cpu_runtime_alloc(GW_MEM_DEVICE, 0, 256, &d));
    ASSERT_OK(wrap1(ctx, d, 0, GW_WRAP_OWN, &a));
    ASSERT_EQ_INT(gw_owns(a), 1);
    ASSERT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
    ASSERT_STATUS(wrap1(ctx, (char *)d + 8, 0, GW_WRAP_OWN, &b), GW_EOWNED);
    gw_release(a);
    ASSERT_EQ_SIZE(gw_cpu_live_allocations(), allocs);
    /* an interior pointer of an allocation no one owns: GW_EINVAL, as with elements */
    ASSERT_OK(gw_cpu_runtime_alloc(GW_MEM_DEVICE, 0, 256, &d));
    ASSERT_STATUS(wrap1(ctx, (char *)d + 8, 0, GW_WRAP_OWN, &b), GW_EINVAL);
    ASSERT_STATUS(wrap1(ctx, (char *)d + 8, 8, GW_WRAP_OWN, &b), GW_EINVAL);
    ASSERT_OK(gw_cpu_runtime_free(d));
  }
  /* NULL owns nothing, and a deleter still runs once for an empty array */
  ASSERT_OK(wrap1(ctx, NULL, 0, GW_WRAP_OWN, &a));
  gw_release(a);
  deleted = 0;
  int64_t zero = 0;
  ASSERT_OK(
      gw_wrap_with_deleter(ctx, malloc(8), GW_UINT8, 1, &zero, NULL, 0, count_free, NULL, &a));
  gw_release(a);
  ASSERT_EQ_INT(deleted, 1);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}

/* Item 11: an owning wrap of memory someone else registered is GW_EINVAL whether or not
 * the span reaches past that registration (the rule comes before the extent check). */
TEST_IMPL(own_of_foreign_registration_one_status) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  size_t pg = tst_page();
  char *buf = tst_pages(2);
  ASSERT_OK(gw_cpu_runtime_register(buf, pg));
  gw_array *a = NULL;
  ASSERT_STATUS(wrap1(ctx, buf, (int64_t)pg, GW_WRAP_OWN, &a), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("someone else registered");
  ASSERT_STATUS(wrap1(ctx, buf, (int64_t)(2 * pg), GW_WRAP_OWN, &a), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("someone else registered");
  ASSERT_STATUS(wrap1(ctx, buf, 0, GW_WRAP_OWN, &a), GW_EINVAL);
  ASSERT_NULL(a);
  /* borrowing past it: the registry registers the rest */
  ASSERT_OK(wrap1(ctx, buf, (int64_t)(2 * pg), 0, &a));
  gw_release(a);
  ASSERT_OK(gw_cpu_runtime_unregister(buf));
  ASSERT_NO_LEAK(before);
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

/* An array with a deleter owns what it spans (gw_owns() is 1): an owning wrap of any byte
 * of it is GW_EOWNED (it was accepted, and the deleter and gpuwrap both freed the block),
 * for every kind; two deleter arrays over one span, and a deleter array over memory a
 * gw_alloc'd array owns (an export imported back), stay legal. Each deleter runs once. */
TEST_IMPL(own_over_deleter_array) {
  gw_context *ctx = tst_open(0);
  tst_leaks before = tst_leak_snapshot();
  deleted = 0;
  char *p = malloc(256);
  tst_random_fill(p, 256);
  gw_array *d1 = NULL, *d2 = NULL, *w = NULL;
  int64_t shape[1] = {64};
  ASSERT_OK(
      gw_wrap_with_deleter(ctx, p + 64, GW_UINT8, 1, shape, NULL, 0, count_free_inner, p, &d1));
  ASSERT_EQ_INT(gw_owns(d1), 1);
  /* its first byte, a byte inside, one whose span only reaches into it */
  ASSERT_STATUS(wrap1(ctx, p + 64, 16, GW_WRAP_OWN, &w), GW_EOWNED);
  ASSERT_ERROR_MENTIONS("deleter");
  ASSERT_STATUS(wrap1(ctx, p + 100, 1, GW_WRAP_OWN | GW_WRAP_NO_REGISTER, &w), GW_EOWNED);
  ASSERT_NULL(w);
  /* a second deleter array over the same bytes, and borrowing them: fine */
  ASSERT_OK(gw_wrap_with_deleter(ctx, p + 64, GW_UINT8, 1, shape, NULL, 0, count_only, NULL, &d2));
  ASSERT_OK(wrap1(ctx, p + 64, 64, 0, &w));
  unsigned char got[64];
  memset(got, 0xa5, sizeof got);
  tst_read(w, got);
  ASSERT_ELEMS_EQ(got, p + 64, 64, 1);
  gw_release(w);
  gw_release(d1); /* frees p (count_free_inner) */
  ASSERT_EQ_INT(deleted, 1);
  gw_release(d2);
  ASSERT_EQ_INT(deleted, 2);
  /* released, the bytes may be owned again (fresh memory at any address) */
  char *q = malloc(64);
  ASSERT_OK(wrap1(ctx, q, 64, GW_WRAP_OWN, &w));
  gw_release(w);

  /* backend memory of every kind: a gw_alloc'd array imported back with a deleter (a
   * deleter over an owned span) is legal */
  const gw_memkind kinds[] = {GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    gw_array *a = NULL, *back = NULL;
    ASSERT_OK(gw_alloc(ctx, kinds[k], GW_FLOAT32, 1, shape, &a));
    deleted = 0;
    ASSERT_OK(gw_wrap_with_deleter(ctx, gw_data(a), GW_FLOAT32, 1, shape, NULL, 0, count_only, NULL,
                                   &back));
    gw_release(back);
    ASSERT_EQ_INT(deleted, 1);
    gw_release(a);
  }
  if (tst_is_cpu()) { /* device memory gpuwrap does not own, held by a deleter array: the
                       * owning wrap of its base would be accepted but for that array */
    void *d = NULL;
    ASSERT_OK(gw_cpu_runtime_alloc(GW_MEM_DEVICE, 0, 256, &d));
    gw_array *back = NULL;
    ASSERT_OK(gw_wrap_with_deleter(ctx, d, GW_FLOAT32, 1, shape, NULL, 0, count_only, NULL, &back));
    w = NULL;
    ASSERT_STATUS(wrap1(ctx, d, 256, GW_WRAP_OWN, &w), GW_EOWNED);
    ASSERT_ERROR_MENTIONS("deleter");
    ASSERT_NULL(w);
    gw_release(back);
    ASSERT_OK(wrap1(ctx, d, 256, GW_WRAP_OWN, &w)); /* the deleter array gone: it may be owned */
    gw_release(w);                                  /* frees d through the backend */
  }
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx);
  return 0;
}
