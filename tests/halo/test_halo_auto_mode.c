/*
 * AUTO's choice per mode (issue 46, item 3): where ranks share a device under MPS (the
 * CPU model's GPUWRAP_CPU_MPS), AUTO takes IPC for the host-ordered calls (gw_halo_update,
 * gw_halo_start/finish) and the host path for the stream-ordered ones (start_on, finish_on,
 * update_on), one plan holding both; ranks on devices of their own take IPC for both, and
 * without MPS the host path for both. GPUWRAP_HALO_AUTO_MPS=ipc|host forces one path.
 *
 *   test_halo_auto_mode [own]   own: each rank on a modelled device of its own
 *                               (GPUWRAP_CPU_DEVICES >= ranks), else all on device 0
 *
 * Values: the field is device memory of random data (a fresh seed per run, printed on a
 * failure), periodic along every dim; after each update, in modes alternating on one plan,
 * every element (halo, edges and corners included) must equal the one-rank reference: the
 * global periodic array, cell (local i, rank coords c) holding global cell
 * (c * interior + i - width) mod global extent. Resources: plans holding both paths,
 * made, updated in both modes and destroyed, leave no allocation, mapping, event page or
 * descriptor.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */

#include "gpuwrap.h"
#include "gpuwrap/cpu.h"
#include "gpuwrap/halo.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proc_counts.h"
#include "halo_test.h"

static const int64_t g_n[3] = {6, 7, 9}; /* local extents, halo included */
static const int g_w[3] = {1, 1, 2};

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* Round r's value of global cell g (a random double, every bit pattern of the mantissa). */
static double value(const int64_t g[3], int r) {
  uint64_t h = mix(g_seed ^ (uint64_t)r * 0x9e3779b97f4a7c15ull);
  for (int d = 0; d < 3; d++) h = mix(h ^ (uint64_t)(g[d] + 1000));
  return (double)(h >> 11) / 9007199254740992.0 - 0.5;
}

/* Fill `a` (host, the local array) for round r: interior cells their value, halo cells a
 * sentinel no reference value equals; with `want`, every cell its reference value. */
static void fill(double *a, const int c[3], const int dims[3], int r, int want) {
  int64_t i[3], g[3];
  for (i[0] = 0; i[0] < g_n[0]; i[0]++)
    for (i[1] = 0; i[1] < g_n[1]; i[1]++)
      for (i[2] = 0; i[2] < g_n[2]; i[2]++) {
        int halo = 0;
        for (int d = 0; d < 3; d++) {
          int64_t ni = g_n[d] - 2 * g_w[d], N = ni * dims[d];
          g[d] = ((c[d] * ni + i[d] - g_w[d]) % N + N) % N;
          halo |= i[d] < g_w[d] || i[d] >= g_n[d] - g_w[d];
        }
        a[(i[0] * g_n[1] + i[1]) * g_n[2] + i[2]] = halo && !want ? 1e300 : value(g, r);
      }
}

enum { M_UPDATE, M_START_ON, M_UPDATE_ON, M_START, M_COUNT };
static const char *const mode_name[M_COUNT] = {"gw_halo_update", "gw_halo_start_on/finish_on",
                                               "gw_halo_update_on", "gw_halo_start/finish"};

static void run_mode(gw_halo *h, gw_stream *s, int mode) {
  switch (mode) {
  case M_UPDATE: ASSERT_OK(gw_halo_update(h)); break;
  case M_START_ON:
    ASSERT_OK(gw_halo_start_on(h, s));
    ASSERT_OK(gw_halo_finish_on(h, s));
    break;
  case M_UPDATE_ON: ASSERT_OK(gw_halo_update_on(h, s)); break;
  default: ASSERT_OK(gw_halo_start(h)); ASSERT_OK(gw_halo_finish(h));
  }
  if (mode == M_START_ON || mode == M_UPDATE_ON) ASSERT_OK(gw_stream_synchronize(s));
}

/* Updates in modes alternating on one plan, each checked element by element. */
static void check_values(gw_halo *h, gw_context *ctx, gw_array *field, MPI_Comm cart,
                         const char *what) {
  int dims[3], periods[3], c[3];
  MPI_Cart_get(cart, 3, dims, periods, c);
  size_t cells = (size_t)(g_n[0] * g_n[1] * g_n[2]);
  double *init = malloc(cells * sizeof *init), *want = malloc(cells * sizeof *want),
         *got = malloc(cells * sizeof *got);
  if (!init || !want || !got) FAIL_("out of memory");
  gw_array *hi, *hg;
  ASSERT_OK(gw_wrap(ctx, init, GW_FLOAT64, 3, g_n, NULL, 0, &hi));
  ASSERT_OK(gw_wrap(ctx, got, GW_FLOAT64, 3, g_n, NULL, 0, &hg));
  gw_stream *s;
  ASSERT_OK(gw_stream_create(ctx, &s));
  static const int seq[] = {M_UPDATE,   M_START_ON, M_UPDATE, M_UPDATE_ON, M_START,
                            M_START_ON, M_START_ON, M_UPDATE, M_START,     M_UPDATE_ON};
  for (int r = 0; r < (int)(sizeof seq / sizeof seq[0]); r++) {
    fill(init, c, dims, r, 0);
    fill(want, c, dims, r, 1);
    ASSERT_OK(gw_copy(field, hi));
    run_mode(h, s, seq[r]);
    ASSERT_OK(gw_copy(hg, field));
    g_checks++;
    for (size_t k = 0; k < cells; k++)
      if (memcmp(&got[k], &want[k], sizeof got[k]))
        FAIL_("%s, round %d (%s): element %zu is %a, want %a", what, r, mode_name[seq[r]], k,
              got[k], want[k]);
  }
  gw_stream_destroy(s);
  gw_release(hi);
  gw_release(hg);
  free(init);
  free(want);
  free(got);
}

/* Whether two ranks of one node (GPUWRAP_HALO_SHM_GROUP, else the job) share a device
 * (collective), as halo_test.h's auto_device_path works it out. */
static int any_shared(MPI_Comm comm, int device) {
  int size;
  MPI_Comm_size(comm, &size);
  const char *g = getenv("GPUWRAP_HALO_SHM_GROUP");
  int group = g && *g ? atoi(g) : 0, shared = 0;
  int *dev = malloc((size_t)size * sizeof *dev);
  if (!dev) FAIL_("out of memory");
  MPI_Allgather(&device, 1, MPI_INT, dev, 1, MPI_INT, comm);
  for (int a = 0; a < size; a++)
    for (int b = a + 1; b < size; b++)
      if (dev[a] == dev[b] && (group <= 0 || a / group == b / group)) shared = 1;
  free(dev);
  return shared;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  int own = argc > 1 && !strcmp(argv[1], "own");
  unsigned long long seed = halo_test_seed();
  unsetenv("GPUWRAP_HALO_GPU_AWARE");
  unsetenv("GPUWRAP_HALO_AUTO_MPS");
  int ndev = 0;
  ASSERT_OK(gw_backend_device_count(GW_BACKEND_CPU, &ndev));
  if (own && ndev < g_size) FAIL_("own: %d ranks need GPUWRAP_CPU_DEVICES >= %d", g_size, g_size);
  int device = own ? g_rank : 0;
  gw_context *ctx;
  ASSERT_OK(gw_context_create(GW_BACKEND_CPU, device, &ctx));
  int dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1};
  MPI_Dims_create(g_size, 3, dims);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
  const char *m = getenv("GPUWRAP_CPU_MPS");
  int mps = m && (!strcmp(m, "1") || !strcmp(m, "yes"));
  int shared = any_shared(cart, device);
  if (g_rank == 0)
    printf("test_halo_auto_mode: %d ranks, %s, %s, seed %llu\n", g_size,
           own ? "a device each" : "one device", mps ? "MPS" : "no MPS", seed);
  gw_array *field;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 3, g_n, &field));

  /* GPUWRAP_HALO_AUTO_MPS unset (mode), then each forced choice */
  static const char *const setting[] = {NULL, "mode", "ipc", "host"};
  for (int k = 0; k < 4; k++) {
    if (setting[k])
      setenv("GPUWRAP_HALO_AUTO_MPS", setting[k], 1);
    else
      unsetenv("GPUWRAP_HALO_AUTO_MPS");
    /* what AUTO must take, worked out here: IPC where no two ranks of a node share a
     * device; where they do, the host path without MPS, and under MPS the setting's
     * choice (mode: IPC blocking, host stream-ordered) */
    gw_halo_path blocking = GW_HALO_PATH_IPC, ordered = GW_HALO_PATH_IPC;
    if (shared && !mps) blocking = ordered = GW_HALO_PATH_HOST;
    if (shared && mps && k == 3) blocking = ordered = GW_HALO_PATH_HOST;
    if (shared && mps && k < 2) ordered = GW_HALO_PATH_HOST;
    gw_halo *h;
    ASSERT_OK(gw_halo_create(field, cart, g_w, GW_HALO_PATH_AUTO, &h));
    gw_halo_info info = {.struct_size = sizeof info};
    ASSERT_OK(gw_halo_query(h, &info));
    ASSERT_EQ_LONG(info.path, blocking);
    ASSERT_EQ_LONG(info.path_stream_ordered, ordered);
    char what[96];
    snprintf(what, sizeof what, "GPUWRAP_HALO_AUTO_MPS=%s, paths %s/%s",
             setting[k] ? setting[k] : "(unset)", gw_halo_path_name(blocking),
             gw_halo_path_name(ordered));
    check_values(h, ctx, field, cart, what);
    gw_halo_destroy(h);
    /* a forced path is one path for both modes, whatever AUTO would do */
    ASSERT_OK(gw_halo_create(field, cart, g_w, GW_HALO_PATH_HOST, &h));
    ASSERT_OK(gw_halo_query(h, &info));
    ASSERT_EQ_LONG(info.path, GW_HALO_PATH_HOST);
    ASSERT_EQ_LONG(info.path_stream_ordered, GW_HALO_PATH_HOST);
    gw_halo_destroy(h);
    if (g_rank == 0) printf("%s: ok\n", what);
  }
  unsetenv("GPUWRAP_HALO_AUTO_MPS");

  /* An update in flight stays on the plan it started on: a second start of the other
   * mode is refused, finish follows its start whichever finish is called, and destroy
   * completes it. */
  {
    gw_stream *s;
    ASSERT_OK(gw_stream_create(ctx, &s));
    gw_halo *h;
    ASSERT_OK(gw_halo_create(field, cart, g_w, GW_HALO_PATH_AUTO, &h));
    ASSERT_OK(gw_halo_start_on(h, s));
    ASSERT_STATUS(gw_halo_update(h), GW_EINVAL);
    ASSERT_MSG("in flight");
    ASSERT_STATUS(gw_halo_start(h), GW_EINVAL);
    ASSERT_OK(gw_halo_finish(h)); /* (host-ordered finish of a stream-ordered start) */
    ASSERT_OK(gw_halo_start(h));
    ASSERT_STATUS(gw_halo_start_on(h, s), GW_EINVAL);
    ASSERT_OK(gw_halo_finish_on(h, s));
    ASSERT_OK(gw_stream_synchronize(s));
    ASSERT_OK(gw_halo_start_on(h, s));
    gw_halo_destroy(h); /* with the stream-ordered update in flight */
    ASSERT_OK(gw_stream_synchronize(s));
    gw_stream_destroy(s);
  }

  /* Plans holding both paths leave nothing behind. */
  {
    gw_stream *s;
    ASSERT_OK(gw_stream_create(ctx, &s));
    size_t allocs0 = gw_cpu_live_allocations();
    int fds0 = proc_open_fds(), evts0 = proc_maps_naming("gw-cpu-evt-"),
        devs0 = proc_maps_naming("gw-cpu-dev-");
    ASSERT_EQ_LONG(gw_cpu_ipc_mappings(), 0);
    for (int i = 0; i < 300; i++) {
      gw_halo *h;
      ASSERT_OK(gw_halo_create(field, cart, g_w, GW_HALO_PATH_AUTO, &h));
      if (i % 50 == 0) {
        ASSERT_OK(gw_halo_update(h));
        ASSERT_OK(gw_halo_update_on(h, s));
        ASSERT_OK(gw_stream_synchronize(s));
      }
      gw_halo_destroy(h);
      ASSERT_EQ_LONG(gw_cpu_ipc_mappings(), 0);
      if (i % 50 == 0) {
        ASSERT_EQ_LONG(proc_open_fds(), fds0);
        ASSERT_EQ_LONG(proc_maps_naming("gw-cpu-evt-"), evts0);
        ASSERT_EQ_LONG(proc_maps_naming("gw-cpu-dev-"), devs0);
        ASSERT_EQ_LONG(gw_cpu_live_allocations(), allocs0);
      }
    }
    gw_stream_destroy(s);
    if (g_rank == 0) printf("300 plans: nothing left\n");
  }

  gw_release(field);
  MPI_Comm_free(&cart);
  gw_context_destroy(ctx);
  long total = 0;
  MPI_Reduce(&g_checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) printf("test_halo_auto_mode: %ld checks passed\n", total);
  MPI_Finalize();
  return 0;
}
