/*
 * The memory kinds the copy tests go through (test_copy.c, test_overlap.c): one array of
 * each kind, made the same way in both, and the address to wrap its memory again through.
 */
#ifndef GW_TEST_KINDS_H
#define GW_TEST_KINDS_H

#include "test.h"

enum { K_HOST, K_PINNED, K_DEVICE, K_MANAGED, K_WRAPPED, K_COUNT };
TST_API const char *kname[K_COUNT] = {"host", "pinned", "device", "managed", "wrapped-pageable"};

/* An array of kind k (NULL when the backend lacks managed memory). */
TST_API gw_array *tst_make_kind(gw_context *ctx, int k, gw_dtype t, int ndim,
                                const int64_t *shape) {
  gw_array *a = NULL;
  gw_status s;
  if (k == K_WRAPPED) {
    /* page-aligned (free()-able): the CPU model's own allocations may share malloc's pages */
    size_t n = (size_t)tst_numel(ndim, shape) * gw_dtype_size(t), pg = tst_page();
    void *p = aligned_alloc(pg, (n + pg - 1) / pg * pg + pg);
    s = gw_wrap(ctx, p, t, ndim, shape, NULL, GW_WRAP_OWN, &a);
    if (s != GW_OK) free(p);
    ASSERT_OK(s);
    ASSERT_EQ_INT(gw_kind(a), GW_MEM_PINNED);
    return a;
  }
  static const gw_memkind map[4] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};
  s = gw_alloc(ctx, map[k], t, ndim, shape, &a);
  if (s == GW_ENOTSUP && k == K_MANAGED && !tst_is_cpu()) return NULL;
  ASSERT_OK(s);
  return a;
}

/* The address to wrap a's memory again through (its host address where it has one), and
 * the flags for it: host memory again without registering. */
TST_API char *tst_wrap_addr(gw_array *a, int k, unsigned *flags) {
  *flags = k == K_HOST ? GW_WRAP_NO_REGISTER : 0;
  return (char *)(gw_host_data(a) ? gw_host_data(a) : gw_data(a));
}

#endif /* GW_TEST_KINDS_H */
