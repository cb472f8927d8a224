/* gw__copy_many, the core's batched copy (the halo's local periodic copies): results equal
 * to copying the pairs one by one in order, whichever way it runs them (one backend
 * copy_batch when the pairs are independent; one by one when a pair aliases itself or
 * meets another pair); every pair checked before anything runs; pending-work events on a
 * stream. Private API (src/core/private.h). On the CPU backend the backend copy calls are
 * counted. */
#include "gpuwrap/cpu_testing.h"
#include "private.h"
#include "test.h"

enum { N = 1000 };

static gw_array *dev_array(gw_context *ctx, int64_t n, const double *init) {
  gw_array *a, *h;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 1, &n, &a));
  ASSERT_OK(gw_wrap(ctx, (void *)init, GW_FLOAT64, 1, &n, NULL, GW_WRAP_NO_REGISTER, &h));
  ASSERT_OK(gw_copy(a, h));
  gw_release(h);
  return a;
}

static void read_back(gw_array *a, double *out) {
  int64_t n = gw_numel(a);
  gw_array *h;
  ASSERT_OK(gw_wrap(gw_array_context(a), out, GW_FLOAT64, 1, &n, NULL, GW_WRAP_NO_REGISTER, &h));
  ASSERT_OK(gw_copy(h, a));
  gw_release(h);
}

static long copies(void) { return tst_is_cpu() ? gw_cpu_op_calls(GW_CPU_OP_COPY) : 0; }

/* Independent pairs (two interleaved halves of one array into two others, strided views),
 * synchronous and on a stream: one backend call, the values of one-by-one copies. */
TEST_IMPL(independent_pairs_one_call) {
  gw_context *ctx = tst_open(0);
  static double a0[N], b0[N], c0[N], got[N];
  for (int i = 0; i < N; i++) a0[i] = i, b0[i] = -1, c0[i] = -2;
  for (int on_stream = 0; on_stream < 2; on_stream++) {
    gw_array *a = dev_array(ctx, N, a0), *b = dev_array(ctx, N, b0), *c = dev_array(ctx, N, c0);
    const int64_t even = 0, odd = 1, half = N / 2, two = 2;
    gw_array *ae, *ao, *bh, *ch;
    ASSERT_OK(gw_view(a, &even, &half, &two, &ae));
    ASSERT_OK(gw_view(a, &odd, &half, &two, &ao));
    ASSERT_OK(gw_view(b, &even, &half, &two, &bh)); /* b's even elements */
    ASSERT_OK(gw_view(c, &odd, &half, &two, &ch));  /* c's odd elements */
    gw_array *dst[2] = {bh, ch};
    const gw_array *src[2] = {ao, ae};
    gw_stream *s = NULL;
    if (on_stream) ASSERT_OK(gw_stream_create(ctx, &s));
    long c_before = copies();
    ASSERT_OK(gw__copy_many(dst, src, 2, s));
    if (tst_is_cpu()) ASSERT_EQ_INT((int)(copies() - c_before), 1);
    if (s) {
      ASSERT_OK(gw_array_wait(b, s)); /* the pending-work events were recorded */
      ASSERT_OK(gw_stream_synchronize(s));
      ASSERT_EQ_INT(gw_array_pending(b), 0);
      ASSERT_EQ_INT(gw_array_pending(c), 0);
      gw_stream_destroy(s);
    }
    read_back(b, got);
    for (int i = 0; i < N; i++) ASSERT_TRUE(got[i] == (i % 2 == 0 ? (double)(i + 1) : -1.0));
    read_back(c, got);
    for (int i = 0; i < N; i++) ASSERT_TRUE(got[i] == (i % 2 == 1 ? (double)(i - 1) : -2.0));
    gw_release(ae), gw_release(ao), gw_release(bh), gw_release(ch);
    gw_release(a), gw_release(b), gw_release(c);
  }
  gw_context_destroy(ctx);
  return 0;
}

/* Pair 1 reads what pair 0 writes (a -> b, b -> c): they run in order, so c gets a. */
TEST_IMPL(dependent_pairs_in_order) {
  gw_context *ctx = tst_open(0);
  static double a0[N], b0[N], c0[N], got[N];
  for (int i = 0; i < N; i++) a0[i] = i, b0[i] = -1, c0[i] = -2;
  gw_array *a = dev_array(ctx, N, a0), *b = dev_array(ctx, N, b0), *c = dev_array(ctx, N, c0);
  gw_array *dst[2] = {b, c};
  const gw_array *src[2] = {a, b};
  gw_stream *s;
  ASSERT_OK(gw_stream_create(ctx, &s));
  long c_before = copies();
  ASSERT_OK(gw__copy_many(dst, src, 2, s));
  if (tst_is_cpu()) ASSERT_EQ_INT((int)(copies() - c_before), 2); /* one by one */
  ASSERT_OK(gw_stream_synchronize(s));
  read_back(c, got);
  ASSERT_ELEMS_EQ(got, a0, N, sizeof(double));
  gw_stream_destroy(s);
  gw_release(a), gw_release(b), gw_release(c);
  gw_context_destroy(ctx);
  return 0;
}

/* A pair whose src and dst overlap (a shift within one array) is staged, as gw_copy does;
 * a pair copied onto itself is a no-op. */
TEST_IMPL(aliasing_pair) {
  gw_context *ctx = tst_open(0);
  static double a0[N], b0[N], got[N], want[N];
  for (int i = 0; i < N; i++) a0[i] = i, b0[i] = 10 * i;
  gw_array *a = dev_array(ctx, N, a0), *b = dev_array(ctx, N, b0);
  const int64_t zero = 0, one = 1, m = N - 1;
  gw_array *lo, *hi;
  ASSERT_OK(gw_view(a, &zero, &m, NULL, &lo));
  ASSERT_OK(gw_view(a, &one, &m, NULL, &hi));
  gw_array *dst[2] = {hi, b};
  const gw_array *src[2] = {lo, b};
  ASSERT_OK(gw__copy_many(dst, src, 2, NULL));
  read_back(a, got);
  want[0] = 0;
  for (int i = 1; i < N; i++) want[i] = i - 1;
  ASSERT_ELEMS_EQ(got, want, N, sizeof(double));
  read_back(b, got);
  ASSERT_ELEMS_EQ(got, b0, N, sizeof(double));
  gw_release(lo), gw_release(hi), gw_release(a), gw_release(b);
  gw_context_destroy(ctx);
  return 0;
}

/* A bad pair anywhere fails the call before any pair is copied, with gw_copy's status. */
TEST_IMPL(bad_pair_copies_nothing) {
  gw_context *ctx = tst_open(0);
  static double a0[N], b0[N], got[N];
  for (int i = 0; i < N; i++) a0[i] = i, b0[i] = -1;
  gw_array *a = dev_array(ctx, N, a0), *b = dev_array(ctx, N, b0), *small;
  int64_t n2 = N / 2;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 1, &n2, &small));
  gw_array *dst[2] = {b, small};
  const gw_array *src[2] = {a, a};
  ASSERT_STATUS(gw__copy_many(dst, src, 2, NULL), GW_EINVAL); /* shapes differ */
  read_back(b, got);
  ASSERT_ELEMS_EQ(got, b0, N, sizeof(double));
  gw_array *dn[2] = {b, NULL};
  ASSERT_STATUS(gw__copy_many(dn, src, 2, NULL), GW_EINVAL);
  ASSERT_OK(gw__copy_many(dst, src, 0, NULL)); /* nothing to do */
  gw_release(a), gw_release(b), gw_release(small);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- prepared batches (gw__batch_make / run / free) --------------------------------- */
typedef struct gw__batch gw__batch;
gw_status gw__batch_make(gw_array *const *dst, const gw_array *const *src, int n, gw__batch **out);
gw_status gw__batch_run(gw__batch *b, gw_stream *s);
void gw__batch_free(gw__batch *b);

/* The halo exchange's shape of batch: the 26 boxes of a 3-D array's shell (width 1), each
 * from the interior box that wraps it around every dim. The boxes have different shapes
 * and their spans interleave, but no two share an element: decided exactly (they step
 * alike), so the batch is ONE backend call per run. Run twice on fresh random data (the
 * batch is made once), synchronously and on a stream; every cell checked. */
TEST_IMPL(prepared_shell_boxes) {
  gw_context *ctx = tst_open(0);
  enum { X = 5, Y = 6, Z = 7, CELLS = X * Y * Z };
  const int64_t ext[3] = {X, Y, Z};
  static double init[CELLS], got[CELLS];
  gw_array *a;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 3, ext, &a));
  gw_array *dst[26];
  const gw_array *src[26];
  int n = 0;
  for (int c = 0; c < 27; c++) {
    int64_t dlo[3], slo[3], len[3];
    int halo = 0;
    for (int e = 0, code = c; e < 3; e++, code /= 3) {
      int cls = code % 3;
      halo |= cls != 1;
      dlo[e] = cls == 0 ? 0 : cls == 1 ? 1 : ext[e] - 1;
      slo[e] = cls == 0 ? ext[e] - 2 : 1;
      len[e] = cls == 1 ? ext[e] - 2 : 1;
    }
    if (!halo) continue;
    gw_array *s;
    ASSERT_OK(gw_view(a, dlo, len, NULL, &dst[n]));
    ASSERT_OK(gw_view(a, slo, len, NULL, &s));
    src[n++] = s;
  }
  ASSERT_EQ_INT(n, 26);
  gw__batch *b;
  ASSERT_OK(gw__batch_make(dst, src, n, &b));
  for (int k = 0; k < n; k++) { /* the batch holds its own references */
    gw_release(dst[k]);
    gw_release((gw_array *)src[k]);
  }
  gw_stream *st;
  ASSERT_OK(gw_stream_create(ctx, &st));
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < CELLS; i++)
      init[i] = (double)(int64_t)(tst_rand64() >> 12); /* fresh, exact */
    gw_array *h;
    ASSERT_OK(gw_wrap(ctx, init, GW_FLOAT64, 3, ext, NULL, GW_WRAP_NO_REGISTER, &h));
    ASSERT_OK(gw_copy(a, h));
    gw_release(h);
    long c0 = copies();
    ASSERT_OK(gw__batch_run(b, round ? st : NULL));
    if (tst_is_cpu()) ASSERT_EQ_INT((int)(copies() - c0), 1);
    if (round) ASSERT_OK(gw_stream_synchronize(st));
    tst_poison(got, sizeof got);
    ASSERT_OK(gw_wrap(ctx, got, GW_FLOAT64, 3, ext, NULL, GW_WRAP_NO_REGISTER, &h));
    ASSERT_OK(gw_copy(h, a));
    gw_release(h);
    for (int i = 0; i < X; i++)
      for (int j = 0; j < Y; j++)
        for (int k = 0; k < Z; k++) {
          int64_t p[3] = {i, j, k};
          for (int e = 0; e < 3; e++) p[e] = p[e] == 0 ? ext[e] - 2 : p[e] == ext[e] - 1 ? 1 : p[e];
          double want = init[(p[0] * Y + p[1]) * Z + p[2]];
          if (got[(i * Y + j) * Z + k] != want)
            TST_FAIL("round %d: cell (%d,%d,%d) is %g, want %g (its wrap)", round, i, j, k,
                     got[(i * Y + j) * Z + k], want);
        }
  }
  gw_stream_destroy(st);
  gw__batch_free(b);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

/* Boxes of different shapes that DO share one element (a row and a column of a matrix
 * crossing at (2, 3)): the exact test sees it, the batch runs one by one, in order, so
 * the shared element ends with the second pair's value. */
TEST_IMPL(prepared_boxes_that_meet) {
  gw_context *ctx = tst_open(0);
  enum { R = 6, C = 7 };
  const int64_t ext[2] = {R, C};
  static double m0[R * C], got[R * C], want[R * C];
  for (int i = 0; i < R * C; i++) m0[i] = i;
  gw_array *m, *h;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 2, ext, &m));
  ASSERT_OK(gw_wrap(ctx, m0, GW_FLOAT64, 2, ext, NULL, GW_WRAP_NO_REGISTER, &h));
  ASSERT_OK(gw_copy(m, h));
  gw_release(h);
  /* row 2 <- row 5, column 3 <- column 0 (they cross at (2, 3)) */
  const int64_t r_at[2] = {2, 0}, r_from[2] = {5, 0}, r_len[2] = {1, C};
  const int64_t c_at[2] = {0, 3}, c_from[2] = {0, 0}, c_len[2] = {R, 1};
  gw_array *row, *rsrc, *col, *csrc;
  ASSERT_OK(gw_view(m, r_at, r_len, NULL, &row));
  ASSERT_OK(gw_view(m, r_from, r_len, NULL, &rsrc));
  ASSERT_OK(gw_view(m, c_at, c_len, NULL, &col));
  ASSERT_OK(gw_view(m, c_from, c_len, NULL, &csrc));
  gw_array *dst[2] = {row, col};
  const gw_array *src[2] = {rsrc, csrc};
  gw__batch *b;
  ASSERT_OK(gw__batch_make(dst, src, 2, &b));
  long c0 = copies();
  ASSERT_OK(gw__batch_run(b, NULL));
  if (tst_is_cpu()) ASSERT_EQ_INT((int)(copies() - c0), 2);
  memcpy(want, m0, sizeof want);
  for (int j = 0; j < C; j++) want[2 * C + j] = m0[5 * C + j];
  for (int i = 0; i < R; i++) want[i * C + 3] = want[i * C + 0];
  ASSERT_OK(gw_wrap(ctx, got, GW_FLOAT64, 2, ext, NULL, GW_WRAP_NO_REGISTER, &h));
  ASSERT_OK(gw_copy(h, m));
  gw_release(h);
  ASSERT_ELEMS_EQ(got, want, R * C, sizeof(double));
  gw__batch_free(b);
  gw_release(row), gw_release(rsrc), gw_release(col), gw_release(csrc), gw_release(m);
  gw_context_destroy(ctx);
  return 0;
}

/* The signalled batch (private.h: gw__batch_run_signalled; backend.h: gw__signals) on the
 * CPU model, one process: its own words stand for the neighbour's (each store satisfies its
 * own wait). 29 one-element pairs (GW__SIGNAL_MAX_TRANSFERS) run as one operation: every
 * element lands, both words hold the epoch, the count word is 0 again; 30 are refused at
 * plan time (gw__batch_can_signal 0) and at run time (GW_ENOTSUP, nothing queued, no word
 * written). */
TEST_IMPL(signalled_limits) {
  gw_context *ctx = tst_open(0);
  enum { M = GW__SIGNAL_MAX_TRANSFERS + 1 };
  double init[M], got[M];
  for (int i = 0; i < M; i++) init[i] = (double)(tst_rand64() >> 11);
  gw_array *src = dev_array(ctx, M, init), *dst;
  int64_t m = M, one = 1, four = 4;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 1, &m, &dst));
  ASSERT_OK(gw_fill(dst, &(double){-1.0}));
  gw_array *d[M], *sv[M], *words;
  for (int i = 0; i < M; i++) {
    int64_t at = i;
    ASSERT_OK(gw_view(dst, &at, &one, NULL, &d[i]));
    ASSERT_OK(gw_view(src, &at, &one, NULL, &sv[i]));
  }
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_UINT32, 1, &four, &words));
  ASSERT_OK(gw_fill(words, &(uint32_t){0}));
  uint32_t *w = gw_data(words);
  gw__signals sig = {{&w[0], NULL}, {&w[0], NULL}, {&w[1], NULL}, {&w[1], NULL}, &w[2], 7};
  gw_stream *s;
  ASSERT_OK(gw_stream_create(ctx, &s));
  gw__batch *fits, *over;
  ASSERT_OK(gw__batch_make(d, (const gw_array *const *)sv, M - 1, &fits));
  ASSERT_OK(gw__batch_make(d, (const gw_array *const *)sv, M, &over));
  ASSERT_EQ_INT(gw__batch_can_signal(fits), 1);
  ASSERT_EQ_INT(gw__batch_can_signal(over), 0);
  long c0 = copies();
  ASSERT_STATUS(gw__batch_run_signalled(over, s, &sig), GW_ENOTSUP);
  ASSERT_TRUE(copies() == c0);
  ASSERT_OK(gw__batch_run_signalled(fits, s, &sig));
  ASSERT_OK(gw_stream_synchronize(s));
  read_back(dst, got);
  for (int i = 0; i < M; i++) ASSERT_TRUE(got[i] == (i < M - 1 ? init[i] : -1.0));
  uint32_t hw[4];
  int64_t n4 = 4;
  gw_array *hwa;
  ASSERT_OK(gw_wrap(ctx, hw, GW_UINT32, 1, &n4, NULL, GW_WRAP_NO_REGISTER, &hwa));
  ASSERT_OK(gw_copy(hwa, words));
  ASSERT_EQ_INT(hw[0], 7);
  ASSERT_EQ_INT(hw[1], 7);
  ASSERT_EQ_INT(hw[2], 0);
  gw_release(hwa);
  gw__batch_free(fits);
  gw__batch_free(over);
  gw_stream_destroy(s);
  for (int i = 0; i < M; i++) {
    gw_release(d[i]);
    gw_release(sv[i]);
  }
  gw_release(words);
  gw_release(dst);
  gw_release(src);
  gw_context_destroy(ctx);
  return 0;
}
