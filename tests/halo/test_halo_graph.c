/*
 * Halo updates inside graph captures (halo.h "Graphs"), on the CPU model's capture
 * control (gpuwrap/cpu.h), under mpirun with 1 and 2 ranks.
 *
 * recorded: every rank's own 3-D periodic plan of two fields (MPI_COMM_SELF: every
 * exchange is a local copy) is captured with gw_halo_update_on, and, in a second graph,
 * with gw_halo_start_on / gw_halo_finish_on; each graph is launched 50 times, each time
 * with fresh random values in every cell and the halos poisoned before the launch, then
 * every cell checked: a halo cell holds the interior cell it wraps to, an interior cell
 * is unchanged. Capturing alone changes nothing.
 * refused: with 2 ranks or more, a plan that talks to other ranks through MPI on the host
 * (the host path through the shared-memory window and through MPI, and IPC) refuses
 * gw_halo_update_on and gw_halo_start_on on a capturing stream with GW_ENOTSUP on every
 * rank, naming why, having queued nothing (the capture's items and the backend's copy
 * calls unchanged); the capture is still valid, records a fill after the refusal, ends
 * into a graph whose launch runs that fill; the plan then updates outside the capture.
 * Also: a start captured and a finish outside the capture are refused, the update stays in
 * flight and finishes in the capture.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpuwrap.h"
#include "gpuwrap/cpu_testing.h"
#include "gpuwrap/halo.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "halo_test.h"

#define LAUNCHES 50

static uint64_t g_state;
static uint64_t next_rand(void) {
  uint64_t x = (g_state += 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

#define NFIELD 2
static const gw_dtype types[NFIELD] = {GW_FLOAT64, GW_UINT8};
static const int widths[NFIELD][3] = {{1, 2, 1}, {2, 0, 1}};
static const int64_t shape[3] = {6, 9, 7};

static size_t at(const int64_t i[3]) {
  return (size_t)((i[0] * shape[1] + i[1]) * shape[2] + i[2]);
}

/* Fresh bytes in every cell, the halo cells' then poisoned (flipped), into img. */
static void fresh(unsigned char *img, int k) {
  size_t e = gw_dtype_size(types[k]);
  int64_t i[3];
  for (i[0] = 0; i[0] < shape[0]; i[0]++)
    for (i[1] = 0; i[1] < shape[1]; i[1]++)
      for (i[2] = 0; i[2] < shape[2]; i[2]++) {
        int halo = 0;
        for (int d = 0; d < 3; d++) halo |= i[d] < widths[k][d] || i[d] >= shape[d] - widths[k][d];
        for (size_t b = 0; b < e; b++) {
          unsigned char v = (unsigned char)next_rand();
          img[at(i) * e + b] = halo ? (unsigned char)~v : v;
        }
      }
}

/* Every cell of got against init: a halo cell holds the cell it wraps to, the others are
 * unchanged. */
static void check(const unsigned char *got, const unsigned char *init, int k, const char *what,
                  int launch) {
  size_t e = gw_dtype_size(types[k]);
  int64_t i[3];
  for (i[0] = 0; i[0] < shape[0]; i[0]++)
    for (i[1] = 0; i[1] < shape[1]; i[1]++)
      for (i[2] = 0; i[2] < shape[2]; i[2]++) {
        int64_t j[3] = {i[0], i[1], i[2]};
        for (int d = 0; d < 3; d++) {
          int w = widths[k][d];
          if (i[d] < w)
            j[d] = i[d] + shape[d] - 2 * w;
          else if (i[d] >= shape[d] - w)
            j[d] = i[d] - (shape[d] - 2 * w);
        }
        g_checks++;
        if (memcmp(got + at(i) * e, init + at(j) * e, e) != 0)
          FAIL_(
              "%s, launch %d, field %d: cell (%lld,%lld,%lld) byte 0 is 0x%02x, want 0x%02x (cell "
              "(%lld,%lld,%lld) as written)",
              what, launch, k, (long long)i[0], (long long)i[1], (long long)i[2], got[at(i) * e],
              init[at(j) * e], (long long)j[0], (long long)j[1], (long long)j[2]);
      }
}

static void test_recorded(gw_context *ctx) {
  static const int periods[3] = {1, 1, 1}, dims1[3] = {1, 1, 1};
  MPI_Comm cart;
  if (MPI_Cart_create(MPI_COMM_SELF, 3, dims1, periods, 0, &cart) != MPI_SUCCESS)
    FAIL_("MPI_Cart_create");
  gw_array *a[NFIELD], *hw_init[NFIELD], *hw_got[NFIELD];
  unsigned char *init[NFIELD], *got[NFIELD];
  gw_halo_field f[NFIELD];
  size_t bytes[NFIELD];
  for (int k = 0; k < NFIELD; k++) {
    bytes[k] = (size_t)(shape[0] * shape[1] * shape[2]) * gw_dtype_size(types[k]);
    init[k] = malloc(bytes[k]);
    got[k] = malloc(bytes[k]);
    if (!init[k] || !got[k]) FAIL_("malloc");
    ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, types[k], 3, shape, &a[k]));
    ASSERT_OK(gw_wrap(ctx, init[k], types[k], 3, shape, NULL, GW_WRAP_NO_REGISTER, &hw_init[k]));
    ASSERT_OK(gw_wrap(ctx, got[k], types[k], 3, shape, NULL, GW_WRAP_NO_REGISTER, &hw_got[k]));
    f[k].field = a[k];
    memcpy(f[k].width, widths[k], sizeof f[k].width);
  }
  gw_halo *h;
  ASSERT_OK(gw_halo_create_multi(f, NFIELD, cart, GW_HALO_PATH_HOST, &h));
  void *nat = NULL;
  ASSERT_OK(gw_cpu_stream_create_external(0, 1, &nat));
  gw_stream *s;
  ASSERT_OK(gw_stream_wrap(ctx, nat, &s));

  static const char *const how[2] = {"update_on captured", "start_on/finish_on captured"};
  for (int form = 0; form < 2; form++) {
    for (int k = 0; k < NFIELD; k++) {
      fresh(init[k], k);
      ASSERT_OK(gw_copy(a[k], hw_init[k]));
    }
    ASSERT_OK(gw_cpu_stream_capture_begin(nat, GW_CPU_CAPTURE_GLOBAL));
    if (form == 0) {
      ASSERT_OK(gw_halo_update_on(h, s));
    } else {
      ASSERT_OK(gw_halo_start_on(h, s));
      /* started in the capture: a finish outside it is refused, the update in flight */
      ASSERT_STATUS(gw_halo_finish(h), GW_ENOTSUP);
      ASSERT_MSG("capture");
      ASSERT_OK(gw_halo_finish_on(h, s));
    }
    ASSERT_EQ_LONG(gw_cpu_stream_capture_items(nat) > 0, 1);
    gw_cpu_graph *g = NULL;
    ASSERT_OK(gw_cpu_stream_capture_end(nat, &g));
    /* captured, not run: the poisoned halos are still there */
    for (int k = 0; k < NFIELD; k++) {
      ASSERT_OK(gw_copy(hw_got[k], a[k]));
      g_checks++;
      if (memcmp(got[k], init[k], bytes[k]) != 0)
        FAIL_("%s: the capture changed field %d", how[form], k);
    }
    for (int launch = 0; launch < LAUNCHES; launch++) {
      for (int k = 0; k < NFIELD; k++) {
        fresh(init[k], k);
        ASSERT_OK(gw_copy(a[k], hw_init[k]));
        memset(got[k], 0xa5, bytes[k]);
      }
      ASSERT_OK(gw_cpu_graph_launch(g, nat));
      ASSERT_OK(gw_stream_synchronize(s));
      for (int k = 0; k < NFIELD; k++) {
        ASSERT_OK(gw_copy(hw_got[k], a[k]));
        check(got[k], init[k], k, how[form], launch);
      }
    }
    gw_cpu_graph_destroy(g);
  }
  /* the plan still updates outside any capture */
  for (int k = 0; k < NFIELD; k++) {
    fresh(init[k], k);
    ASSERT_OK(gw_copy(a[k], hw_init[k]));
  }
  ASSERT_OK(gw_halo_update(h));
  for (int k = 0; k < NFIELD; k++) {
    ASSERT_OK(gw_copy(hw_got[k], a[k]));
    check(got[k], init[k], k, "blocking update after the captures", 0);
  }
  gw_halo_destroy(h);
  gw_stream_destroy(s);
  ASSERT_OK(gw_cpu_stream_destroy_external(nat));
  for (int k = 0; k < NFIELD; k++) {
    gw_release(a[k]);
    gw_release(hw_init[k]);
    gw_release(hw_got[k]);
    free(init[k]);
    free(got[k]);
  }
  MPI_Comm_free(&cart);
  if (g_rank == 0) printf("recorded: %d launches of each of 2 graphs: ok\n", LAUNCHES);
}

/* A plan with remote neighbours: refused in the capture on every rank, nothing queued. */
static void refuse_one(gw_context *ctx, MPI_Comm cart, gw_halo_path path, const char *what) {
  int64_t n = 16;
  gw_array *a, *out;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 1, &n, &a));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_INT32, 1, &n, &out));
  int32_t *o = gw_host_data(out);
  gw_halo *h;
  gw_halo_field hf = {a, {1, 0, 0}};
  ASSERT_OK(gw_halo_create_multi(&hf, 1, cart, path, &h));
  gw_halo_info info;
  ASSERT_OK(gw_halo_query(h, &info));
  ASSERT_EQ_LONG(info.path, path);
  void *nat = NULL;
  ASSERT_OK(gw_cpu_stream_create_external(0, 1, &nat));
  gw_stream *s;
  ASSERT_OK(gw_stream_wrap(ctx, nat, &s));

  ASSERT_OK(gw_cpu_stream_capture_begin(nat, GW_CPU_CAPTURE_GLOBAL));
  int items = gw_cpu_stream_capture_items(nat);
  long calls = gw_cpu_op_calls(GW_CPU_OP_COPY) + gw_cpu_op_calls(GW_CPU_OP_FILL);
  ASSERT_STATUS(gw_halo_update_on(h, s), GW_ENOTSUP);
  ASSERT_MSG("gw_halo_update_on: stream is being captured into a graph");
  ASSERT_MSG(gw_halo_path_name(path));
  ASSERT_STATUS(gw_halo_start_on(h, s), GW_ENOTSUP);
  ASSERT_MSG("gw_halo_start_on: stream is being captured into a graph");
  ASSERT_EQ_LONG(gw_cpu_stream_capture_items(nat), items);
  ASSERT_EQ_LONG(gw_cpu_op_calls(GW_CPU_OP_COPY) + gw_cpu_op_calls(GW_CPU_OP_FILL), calls);
  /* the plan is idle (a refused start leaves nothing in flight) */
  ASSERT_STATUS(gw_halo_finish_on(h, s), GW_EINVAL);
  /* the capture is valid: it records, ends into a graph, and its launch runs */
  int32_t v = (int32_t)(next_rand() & 0x7fffffff);
  ASSERT_OK(gw_fill_async(out, &v, s));
  ASSERT_EQ_LONG(gw_cpu_stream_capture_items(nat), items + 1);
  gw_cpu_graph *g = NULL;
  ASSERT_OK(gw_cpu_stream_capture_end(nat, &g));
  ASSERT_EQ_LONG(g != NULL, 1);
  for (int i = 0; i < n; i++) o[i] = -1;
  ASSERT_OK(gw_cpu_graph_launch(g, nat));
  ASSERT_OK(gw_stream_synchronize(s));
  for (int i = 0; i < n; i++) ASSERT_EQ_LONG(o[i], v);
  gw_cpu_graph_destroy(g);

  /* outside the capture the plan updates: each rank's cells are rank * 100 + i, so its
   * low halo holds its low neighbour's last interior cell, its high halo the high one's
   * first */
  for (int i = 0; i < n; i++) o[i] = g_rank * 100 + i;
  ASSERT_OK(gw_copy(a, out));
  ASSERT_OK(gw_halo_update_on(h, s));
  ASSERT_OK(gw_copy_async(out, a, s));
  ASSERT_OK(gw_stream_synchronize(s));
  int lo = (g_rank + g_size - 1) % g_size, hi = (g_rank + 1) % g_size;
  ASSERT_EQ_LONG(o[0], lo * 100 + n - 2);
  ASSERT_EQ_LONG(o[n - 1], hi * 100 + 1);
  for (int i = 1; i < n - 1; i++) ASSERT_EQ_LONG(o[i], g_rank * 100 + i);
  gw_halo_destroy(h);
  gw_stream_destroy(s);
  ASSERT_OK(gw_cpu_stream_destroy_external(nat));
  gw_release(a);
  gw_release(out);
  if (g_rank == 0) printf("refused: %s: ok\n", what);
}

static void test_refused(gw_context *ctx) {
  if (g_size < 2) return;
  int dims[1] = {g_size}, periods[1] = {1};
  MPI_Comm cart;
  if (MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart) != MPI_SUCCESS)
    FAIL_("MPI_Cart_create");
  refuse_one(ctx, cart, GW_HALO_PATH_HOST, "host path (shared-memory window or MPI, as set)");
  refuse_one(ctx, cart, GW_HALO_PATH_IPC, "IPC path");
  MPI_Comm_free(&cart);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  unsigned long long seed = halo_test_seed();
  g_state = seed ^ (uint64_t)g_rank * 0x100000001b3ull;
  if (g_rank == 0) printf("test_halo_graph: %d ranks, seed %llu\n", g_size, seed);
  gw_context *ctx;
  if (gw_context_create(GW_BACKEND_CPU, 0, &ctx) != GW_OK)
    FAIL_("gw_context_create: %s", gw_last_error());
  test_recorded(ctx);
  test_refused(ctx);
  long total = 0;
  MPI_Reduce(&g_checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) printf("test_halo_graph: %ld checks passed\n", total);
  gw_context_destroy(ctx);
  MPI_Finalize();
  return 0;
}
