/*
 * What the ranks of a plan must agree on (issue 32), on the CPU backend under mpirun with
 * 1, 2, 3 and 4 ranks.
 *
 * gw_halo_create* is collective: arguments that differ between neighbours (widths, field
 * shapes, dtypes, the field count, the NCCL path) and an argument error found by one rank
 * only fail every rank with the same status, the message (every rank's) naming the
 * argument and both ranks' values; nothing is left registered or allocated, and no rank
 * waits forever (ctest's timeout). The odd rank out is rank 0's +x neighbour, so rank 0
 * sees the difference first and its message is the one every rank reports.
 * gw_halo_update_on with a stream of another device (GPUWRAP_CPU_DEVICES=2) is refused
 * with GW_EDEVICE before anything is posted, and the plan still gives every halo cell,
 * corners included, of random data bit for bit afterwards.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpuwrap.h"
#include "gpuwrap/cpu.h"
#include "gpuwrap/halo.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "halo_test.h"

static MPI_Comm g_cart;
static int g_dims[3], g_odd; /* the odd rank out: rank 0's +x neighbour (none on one rank) */

static void make_cart(int periodic) {
  int periods[3] = {periodic, periodic, periodic};
  g_dims[0] = g_dims[1] = g_dims[2] = 0;
  MPI_Dims_create(g_size, 3, g_dims);
  MPI_Cart_create(MPI_COMM_WORLD, 3, g_dims, periods, 0, &g_cart);
  int lo;
  MPI_Cart_shift(g_cart, 0, 1, &lo, &g_odd);
  MPI_Bcast(&g_odd, 1, MPI_INT, 0, g_cart);
}

typedef struct {
  size_t regs, allocs, ranges;
} live;
static live now(void) {
  return (live){gw_cpu_live_registrations(), gw_cpu_live_allocations(), gw_registry_ranges()};
}
static void same_live(live a) {
  live b = now();
  ASSERT_EQ_LONG(b.regs, a.regs);
  ASSERT_EQ_LONG(b.allocs, a.allocs);
  ASSERT_EQ_LONG(b.ranges, a.ranges);
}

/* Every rank got `want` (collective: asserted by all), and the message says `needle`. */
static void all_fail(gw_status got, gw_status want, const char *needle) {
  ASSERT_STATUS(got, want);
  int mine = (int)got, lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  ASSERT_EQ_LONG(lo, hi);
  ASSERT_MSG(needle);
}

static void test_mismatch(gw_context *ctx) {
  make_cart(0);
  const int me_odd = g_rank == g_odd && g_size > 1;
  char want[200];
  live l0 = now();
  gw_halo *h = NULL;
  gw_array *a, *b;
  int64_t n[3] = {8, 7, 6}, n_odd[3] = {8, 9, 6};

  /* widths: one rank 2, the others 1 (gw_halo_create) */
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 3, n, &a));
  live l1 = now(); /* what a failed create must leave as it found */
  int w1[3] = {1, 1, 1}, w2[3] = {2, 2, 2};
  gw_status st = gw_halo_create(a, g_cart, me_odd ? w2 : w1, GW_HALO_PATH_HOST, &h);
  if (g_size > 1) {
    snprintf(want, sizeof want, "width[0]: rank 0 has 1, its +x neighbour rank %d has 2", g_odd);
    all_fail(st, GW_EINVAL, want);
  } else {
    ASSERT_OK(st);
    gw_halo_destroy(h);
  }
  same_live(l1);

  /* shapes: field 0 one row longer along dim 1 on one rank (its faces along dim 0 differ) */
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 3, me_odd ? n_odd : n, &b));
  gw_halo_field f2[2] = {{b, {1, 1, 1}}, {a, {1, 1, 1}}};
  st = gw_halo_create_multi(f2, 2, g_cart, GW_HALO_PATH_HOST, &h);
  if (g_size > 1) {
    snprintf(want, sizeof want,
             "fields[0].field extent along dim 1: rank 0 has 7, its +x neighbour rank %d has 9",
             g_odd);
    all_fail(st, GW_EINVAL, want);
  } else {
    ASSERT_OK(st);
    gw_halo_destroy(h);
  }
  gw_release(b);

  /* dtypes: field 1 float32 on one rank, float64 on the others */
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, me_odd ? GW_FLOAT32 : GW_FLOAT64, 3, n, &b));
  gw_halo_field f3[2] = {{a, {1, 1, 1}}, {b, {1, 1, 1}}};
  st = gw_halo_create_multi(f3, 2, g_cart, GW_HALO_PATH_HOST, &h);
  if (g_size > 1) {
    snprintf(want, sizeof want,
             "fields[1].field dtype: rank 0 has float64, its +x neighbour rank %d has float32",
             g_odd);
    all_fail(st, GW_EINVAL, want);
  } else {
    ASSERT_OK(st);
    gw_halo_destroy(h);
  }

  /* nfields: one field on one rank, two on the others */
  st = gw_halo_create_multi(f3, me_odd ? 1 : 2, g_cart, GW_HALO_PATH_HOST, &h);
  if (g_size > 1) {
    snprintf(want, sizeof want, "nfields: rank 0 has 2, its +x neighbour rank %d has 1", g_odd);
    all_fail(st, GW_EINVAL, want);
  } else {
    ASSERT_OK(st);
    gw_halo_destroy(h);
  }

  /* a dim exchanged on one rank only (width 0 along dim 0 there): would hang in updates */
  gw_halo_field f0 = {a, {me_odd ? 0 : 1, 1, 1}};
  st = gw_halo_create_multi(&f0, 1, g_cart, GW_HALO_PATH_HOST, &h);
  if (g_size > 1) {
    snprintf(want, sizeof want, "fields[0].width[0]: rank 0 has 1, its +x neighbour rank %d has 0",
             g_odd);
    all_fail(st, GW_EINVAL, want);
  } else {
    ASSERT_OK(st);
    gw_halo_destroy(h);
  }

  /* an argument error of one rank only (width 0, which gw_halo_create refuses): every rank
   * fails with its status, the others saying whose it is */
  int w0[3] = {0, 1, 1};
  int odd = g_size > 1 ? g_odd : 0, me = g_rank == odd;
  st = gw_halo_create(a, g_cart, me ? w0 : w1, GW_HALO_PATH_HOST, &h);
  all_fail(st, GW_EINVAL, "width[0] is 0, must be >= 1");
  if (!me) {
    snprintf(want, sizeof want, "another rank failed (rank %d, GW_EINVAL)", odd);
    ASSERT_MSG(want);
  }
  /* NULL out on one rank; a read-only field on one rank (its own status, GW_EREADONLY) */
  st = gw_halo_create(a, g_cart, w1, GW_HALO_PATH_HOST, me ? NULL : &h);
  all_fail(st, GW_EINVAL, "gw_halo_create: out is NULL");
  gw_array *ro = NULL;
  ASSERT_OK(gw_wrap(ctx, gw_data(a), GW_FLOAT64, 3, n, NULL, GW_WRAP_READONLY, &ro));
  st = gw_halo_create(me ? ro : a, g_cart, w1, GW_HALO_PATH_HOST, &h);
  all_fail(st, GW_EREADONLY, "is read-only");
  gw_release(ro);

  /* the NCCL path on one rank only: its communicator would span ranks that never join it */
  if (g_size > 1) {
    st = gw_halo_create(a, g_cart, w1, me ? GW_HALO_PATH_NCCL : GW_HALO_PATH_HOST, &h);
    snprintf(want, sizeof want, "path: rank %d has nccl, rank 0 has host", odd);
    all_fail(st, GW_EINVAL, want);
  }
  gw_release(b);
  same_live(l1);
  gw_release(a);
  same_live(l0);
  MPI_Comm_free(&g_cart);
  if (g_rank == 0) printf("mismatched arguments: ok\n");
}

/* Grid sizes that overflow are refused (they were signed overflows, or a negative global
 * size), on every rank alike; so is an argument error of one rank only. */
static void test_grid_sizes(void) {
  gw_grid *g = NULL;
  int big_dims[3] = {INT_MAX, INT_MAX, 4};
  int64_t global[3] = {8, 8, 8};
  all_fail(gw_grid_create(MPI_COMM_WORLD, 3, global, NULL, big_dims, &g), GW_EINVAL,
           "gw_grid_create: dims[0] is 2147483647: dims fix more ranks than");
  int row[3] = {g_size, 1, 1};
  int64_t huge[3] = {(int64_t)1 << 62, 1, 1};
  gw_status st = gw_grid_create_local(MPI_COMM_WORLD, 3, huge, NULL, row, &g);
  if (g_size > 1) {
    char want[160];
    snprintf(want, sizeof want,
             "local[0] is %lld: times the %d ranks along dim 0, the global size overflows",
             (long long)huge[0], g_size);
    all_fail(st, GW_EINVAL, want);
  } else {
    ASSERT_OK(st);
    gw_grid_info in;
    ASSERT_OK(gw_grid_query(g, &in));
    ASSERT_EQ_LONG(in.global[0], huge[0]);
    gw_grid_destroy(g);
  }
  int64_t square[3] = {(int64_t)1 << 32, (int64_t)1 << 32, 1};
  all_fail(gw_grid_create_local(MPI_COMM_WORLD, 3, square, NULL, row, &g), GW_EINVAL,
           "local[1] is 4294967296: the global box's cell count overflows int64_t");
  int64_t gsq[3] = {INT64_MAX, 2, 1};
  all_fail(gw_grid_create(MPI_COMM_WORLD, 3, gsq, NULL, row, &g), GW_EINVAL,
           "global[1] is 2: the global box's cell count overflows int64_t");
  /* one rank's error (ndims 0) fails every rank, none waits in MPI_Cart_create */
  int odd = g_size - 1;
  all_fail(gw_grid_create(MPI_COMM_WORLD, g_rank == odd ? 0 : 3, global, NULL, NULL, &g), GW_EINVAL,
           "ndims is 0, must be 1, 2 or 3");
  if (g_rank == 0) printf("grid sizes: ok\n");
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static double value(const int64_t g[3]) {
  uint64_t h = g_seed;
  for (int d = 0; d < 3; d++) h = mix(h ^ (uint64_t)g[d]);
  return (double)(h >> 11);
}

/* A stream of device 1 for a plan of device 0: GW_EDEVICE, nothing posted (every rank
 * passes it: a local precondition), then the right stream gives every cell. */
static void test_stream_device(void) {
  make_cart(1);
  int coords[3];
  MPI_Cart_coords(g_cart, g_rank, 3, coords);
  gw_context *c0, *c1;
  ASSERT_OK(gw_context_create(GW_BACKEND_CPU, 0, &c0));
  ASSERT_OK(gw_context_create(GW_BACKEND_CPU, 1, &c1));
  const int w = 2;
  int64_t L[3] = {5, 6, 7}, n[3];
  for (int d = 0; d < 3; d++) n[d] = L[d] + 2 * w;
  gw_array *field, *host;
  ASSERT_OK(gw_alloc(c0, GW_MEM_DEVICE, GW_FLOAT64, 3, n, &field));
  ASSERT_OK(gw_alloc(c0, GW_MEM_HOST, GW_FLOAT64, 3, n, &host));
  double *p = gw_host_data(host);
  /* interior: the global cell's value; halo: poison */
  for (int64_t i = 0; i < n[0]; i++)
    for (int64_t j = 0; j < n[1]; j++)
      for (int64_t k = 0; k < n[2]; k++) {
        int64_t x[3] = {i, j, k}, g[3];
        int halo = 0;
        for (int d = 0; d < 3; d++) {
          halo |= x[d] < w || x[d] >= n[d] - w;
          g[d] = coords[d] * L[d] + x[d] - w;
        }
        p[(i * n[1] + j) * n[2] + k] = halo ? -1.0 : value(g);
      }
  ASSERT_OK(gw_copy(field, host));
  int wd[3] = {w, w, w};
  gw_halo *h;
  ASSERT_OK(gw_halo_create(field, g_cart, wd, GW_HALO_PATH_HOST, &h));
  gw_stream *s0, *s1;
  ASSERT_OK(gw_stream_create(c0, &s0));
  ASSERT_OK(gw_stream_create(c1, &s1));
  ASSERT_STATUS(gw_halo_update_on(h, s1), GW_EDEVICE);
  ASSERT_MSG("gw_halo_update_on: stream is on cpu device 1, the plan's fields on cpu device 0");
  ASSERT_STATUS(gw_halo_start_on(h, s1), GW_EDEVICE);
  ASSERT_STATUS(gw_halo_finish_on(h, s0), GW_EINVAL); /* nothing was started */
  ASSERT_OK(gw_halo_start_on(h, s0));
  ASSERT_STATUS(gw_halo_finish_on(h, s1), GW_EDEVICE);
  ASSERT_MSG("gw_halo_finish_on: stream is on cpu device 1");
  ASSERT_OK(gw_halo_finish_on(h, s0)); /* the refused finish left the update in flight */
  ASSERT_OK(gw_halo_update_on(h, s0));
  ASSERT_OK(gw_stream_synchronize(s0));
  ASSERT_OK(gw_copy(host, field));
  long bad = 0;
  for (int64_t i = 0; i < n[0]; i++)
    for (int64_t j = 0; j < n[1]; j++)
      for (int64_t k = 0; k < n[2]; k++) {
        int64_t x[3] = {i, j, k}, g[3];
        for (int d = 0; d < 3; d++) {
          int64_t G = (int64_t)g_dims[d] * L[d];
          g[d] = ((coords[d] * L[d] + x[d] - w) % G + G) % G;
        }
        double v = value(g), got = p[(i * n[1] + j) * n[2] + k];
        bad += memcmp(&v, &got, sizeof v) != 0;
        g_checks++;
      }
  ASSERT_EQ_LONG(bad, 0);
  gw_halo_destroy(h);
  gw_stream_destroy(s0);
  gw_stream_destroy(s1);
  gw_release(field);
  gw_release(host);
  gw_context_destroy(c1);
  gw_context_destroy(c0);
  MPI_Comm_free(&g_cart);
  if (g_rank == 0) printf("stream of another device: ok\n");
}

/* A bad GPUWRAP_HALO_* value on one rank (the last) fails gw_halo_create on every rank with
 * GW_EINVAL, the message naming the variable (the settings parser's), never ignored; set
 * on every rank, the same. Nothing is left allocated; a good value afterwards works. */
static void test_settings(gw_context *ctx) {
  static const char *const bad[][2] = {
      {"GPUWRAP_HALO_GPU_AWARE", "maybe"}, {"GPUWRAP_HALO_SHM", "perhaps"},
      {"GPUWRAP_HALO_SHM_GROUP", "-3"},    {"GPUWRAP_HALO_CHUNK", "lots"},
      {"GPUWRAP_HALO_NCCL_SELF", "2"},
  };
  make_cart(1);
  int64_t n[3] = {7, 8, 9};
  int wd[3] = {1, 2, 1};
  gw_array *a;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 3, n, &a));
  live l0 = now();
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
    for (int everyone = 0; everyone < 2; everyone++) {
      const char *name = bad[k][0], *was = getenv(name);
      char *keep = was ? strdup(was) : NULL;
      if (everyone || g_rank == g_size - 1) setenv(name, bad[k][1], 1);
      gw_halo *h = (gw_halo *)0x1;
      all_fail(gw_halo_create(a, g_cart, wd, GW_HALO_PATH_AUTO, &h), GW_EINVAL, name);
      ASSERT_EQ_LONG(h == (gw_halo *)0x1, 1); /* *out untouched */
      if (keep)
        setenv(name, keep, 1);
      else
        unsetenv(name);
      free(keep);
    }
  same_live(l0);
  gw_halo *h;
  ASSERT_OK(gw_halo_create(a, g_cart, wd, GW_HALO_PATH_AUTO, &h));
  ASSERT_OK(gw_halo_update(h));
  gw_halo_destroy(h);
  gw_release(a);
  MPI_Comm_free(&g_cart);
  if (g_rank == 0) printf("bad settings: ok\n");
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  g_seed = (uint64_t)time(NULL) ^ (uint64_t)clock();
  MPI_Bcast(&g_seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  gw_context *ctx;
  ASSERT_OK(gw_context_create(GW_BACKEND_CPU, 0, &ctx));
  test_mismatch(ctx);
  test_stream_device();
  test_settings(ctx);
  test_grid_sizes();
  gw_context_destroy(ctx);
  long total = 0;
  MPI_Reduce(&g_checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) printf("all ok: %ld checks over %d ranks\n", total, g_size);
  MPI_Finalize();
  return 0;
}
