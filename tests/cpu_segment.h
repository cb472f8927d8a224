/*
 * The CPU model's VMM segments the two-process VMM tests share (tests/test_ipc_vmm.c,
 * tests/test_ipc_fdpass.c): a reservation of chunks (a memfd each) and the arrays over
 * them. Apart from tests/ipc_peer.h so that a GPU test, with segments of its own driver's,
 * can take the peer process without these.
 */
#ifndef GW_TEST_CPU_SEGMENT_H
#define GW_TEST_CPU_SEGMENT_H

#include "test.h"

/* A reservation of `slots` chunks of cs bytes, the first `mapped` of them mapped (made
 * shareable), as PyTorch's expandable segments. */
typedef struct {
  char *r;
  size_t cs;
  int slots, mapped;
} segment;

TST_API segment seg_make(int slots, int mapped) {
  segment s = {.cs = 2 * gw_cpu_vmm_granularity(), .slots = slots, .mapped = mapped};
  ASSERT_OK(gw_cpu_vmm_reserve(s.cs * (size_t)slots, (void **)&s.r));
  for (int k = 0; k < mapped; k++) {
    gw_cpu_vmm_chunk c;
    ASSERT_OK(gw_cpu_vmm_create(0, s.cs, GW_CPU_HANDLE_POSIX_FD, &c));
    ASSERT_OK(gw_cpu_vmm_map(s.r + (size_t)k * s.cs, s.cs, c));
    ASSERT_OK(gw_cpu_vmm_release(c)); /* the mapping holds it, as after cuMemMap */
  }
  return s;
}
TST_API void seg_free(segment *s) {
  for (int k = 0; k < s->mapped; k++) ASSERT_OK(gw_cpu_vmm_unmap(s->r + (size_t)k * s->cs, s->cs));
  ASSERT_OK(gw_cpu_vmm_free(s->r, s->cs * (size_t)s->slots));
}

/* The arrays the tests share, over a segment of 3 mapped chunks (uint32 elements):
 *   0: 1-D over 2 chunks, [cs/2, cs + cs/2);
 *   1: 2-D {2, k}, strides {cs/4, -1}: its first element in the MIDDLE chunk at 1.5 cs,
 *      row 0 running down into chunk 0, row 1 (at 2.5 cs) down into chunk 2: 3 chunks. */
TST_API gw_array *shared_array(gw_context *ctx, const segment *s, int which) {
  gw_array *a = NULL;
  if (which == 0) {
    int64_t n = (int64_t)(s->cs / 4);
    ASSERT_OK(gw_wrap(ctx, s->r + s->cs / 2, GW_UINT32, 1, &n, NULL, 0, &a));
  } else {
    int64_t shape[2] = {2, (int64_t)(s->cs / 8) + 3}, strides[2] = {(int64_t)(s->cs / 4), -1};
    ASSERT_OK(gw_wrap(ctx, s->r + s->cs + s->cs / 2, GW_UINT32, 2, shape, strides, 0, &a));
  }
  ASSERT_EQ_INT(gw_kind(a), GW_MEM_DEVICE);
  return a;
}

#endif /* GW_TEST_CPU_SEGMENT_H */
