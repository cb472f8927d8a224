/*
 * The NCCL halo path (GW_HALO_PATH_NCCL), under mpirun.
 *
 * Without arguments (the CPU suite, 1, 2 and 4 ranks): NCCL's loader reports "absent"
 * cleanly — GPUWRAP_NCCL_LIB naming a missing file, or a library that is not NCCL, and the
 * default search where this machine has no libnccl.so.2 — and a plan that forces the NCCL
 * path fails on every rank with GW_ENOTSUP and the loader's message, leaving nothing behind;
 * AUTO falls back to the MPI paths and its results equal the host path's and the one-rank
 * reference bit for bit.
 *
 * `test_halo_nccl cuda` (CUDA backend; exits 77, skipped, without a CUDA device, without
 * libnccl.so.2, or where ranks share a GPU): the NCCL path forced and chosen by AUTO, on
 * device memory, periodic, non-periodic and
 * mixed boundaries, three fields of mixed dtypes and widths (a width of 0 included),
 * blocking, host split phase and stream-ordered updates, each equal bit for bit to the
 * host path and to the reference: with GPUWRAP_HALO_NCCL_SELF=1 (a rank's own periodic
 * neighbour through NCCL; on one rank every face is an NCCL send/receive to itself) and
 * with the default (those faces copied directly).
 *
 * Every cell of field k starts as a function of (k, its global coordinate); halo cells that
 * have a neighbour start poisoned; halo cells on a non-periodic boundary hold a boundary
 * value (another function of the coordinate, the same on every rank).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include "gpuwrap.h"
#include "gpuwrap/halo.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo_test.h"
#define ASSERT_HAS(text, needle)                                                              \
  do {                                                                                        \
    g_checks++;                                                                               \
    if (!strstr((text), (needle))) FAIL_("\"%s\" does not contain \"%s\"", (text), (needle)); \
  } while (0)

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* One field's geometry on this rank. */
typedef struct {
  int dims[3], periods[3], coords[3];
  int w[3];
  int64_t m[3], n[3]; /* interior, and with halos */
  gw_dtype t;
} geometry;

/* Byte b of field k at global coordinate g (after=1: what the update must leave); 0 poison. */
static void image(const geometry *geo, int k, unsigned char *p, int after) {
  size_t elem = gw_dtype_size(geo->t);
  int64_t i[3];
  for (i[0] = 0; i[0] < geo->n[0]; i[0]++)
    for (i[1] = 0; i[1] < geo->n[1]; i[1]++)
      for (i[2] = 0; i[2] < geo->n[2]; i[2]++) {
        int halo = 0, boundary = 0;
        int64_t g[3];
        for (int d = 0; d < 3; d++) {
          int64_t N = geo->m[d] * geo->dims[d];
          g[d] = geo->coords[d] * geo->m[d] + i[d] - geo->w[d];
          if (i[d] < geo->w[d] || i[d] >= geo->n[d] - geo->w[d]) halo = 1;
          if (g[d] < 0 || g[d] >= N) {
            if (geo->periods[d])
              g[d] = (g[d] + N) % N;
            else
              boundary = 1;
          }
        }
        unsigned char *cell = p + (size_t)((i[0] * geo->n[1] + i[1]) * geo->n[2] + i[2]) * elem;
        for (size_t b = 0; b < elem; b++) {
          uint64_t h = mix((uint64_t)k * 0x100000001b3ull);
          for (int d = 0; d < 3; d++) h = mix(h ^ (uint64_t)(g[d] + 1000));
          unsigned char v = (unsigned char)mix(h ^ (b * 2 + (unsigned)boundary));
          if (!after && halo && !boundary) v ^= 0xff;
          cell[b] = v;
        }
      }
}

enum { NF = 3 };
typedef struct {
  MPI_Comm cart;
  geometry geo[NF];
  gw_array *field[NF], *init[NF], *want[NF];
} scene;

/* Three fields of mixed dtypes and widths on a Cartesian communicator with `periods`. */
static void scene_make(gw_context *ctx, const int periods[3], gw_memkind kind, scene *sc) {
  static const int widths[NF][3] = {{1, 1, 1}, {2, 2, 2}, {1, 0, 2}};
  static const gw_dtype types[NF] = {GW_FLOAT64, GW_INT32, GW_UINT8};
  int dims[3] = {0, 0, 0};
  MPI_Dims_create(g_size, 3, dims);
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &sc->cart);
  int r, coords[3];
  MPI_Comm_rank(sc->cart, &r);
  MPI_Cart_coords(sc->cart, r, 3, coords);
  for (int k = 0; k < NF; k++) {
    geometry *g = &sc->geo[k];
    g->t = types[k];
    for (int d = 0; d < 3; d++) {
      g->dims[d] = dims[d];
      g->periods[d] = periods[d];
      g->coords[d] = coords[d];
      g->w[d] = widths[k][d];
      g->m[d] = 4 + d + k; /* distinct per dim and field, >= 2w */
      g->n[d] = g->m[d] + 2 * g->w[d];
    }
    ASSERT_OK(gw_alloc(ctx, kind, g->t, 3, g->n, &sc->field[k]));
    ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, g->t, 3, g->n, &sc->init[k]));
    ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, g->t, 3, g->n, &sc->want[k]));
    image(g, k, gw_host_data(sc->init[k]), 0);
    image(g, k, gw_host_data(sc->want[k]), 1);
  }
}

static void scene_free(scene *sc) {
  for (int k = 0; k < NF; k++) {
    gw_release(sc->field[k]);
    gw_release(sc->init[k]);
    gw_release(sc->want[k]);
  }
  MPI_Comm_free(&sc->cart);
}

static gw_status plan(scene *sc, gw_halo_path path, gw_halo **out) {
  gw_halo_field f[NF];
  for (int k = 0; k < NF; k++) {
    f[k].field = sc->field[k];
    memcpy(f[k].width, sc->geo[k].w, sizeof f[k].width);
  }
  return gw_halo_create_multi(f, NF, sc->cart, path, out);
}

enum { MODE_BLOCKING, MODE_SPLIT, MODE_STREAM, MODE_COUNT };
static const char *mode_name[] = {"blocking", "split phase", "stream-ordered"};

/* Run `mode` three times on fresh data; every field must equal the reference and, byte for
 * byte, `prev` (the host path's result) when given; the result is left in got[]. */
static void run(gw_context *ctx, scene *sc, gw_halo *h, int mode, gw_array *got[NF],
                gw_array *const prev[NF], const char *what) {
  gw_stream *s = NULL;
  if (mode == MODE_STREAM) ASSERT_OK(gw_stream_create(ctx, &s));
  for (int rep = 0; rep < 3; rep++) {
    for (int k = 0; k < NF; k++) ASSERT_OK(gw_copy(sc->field[k], sc->init[k]));
    if (mode == MODE_BLOCKING) {
      ASSERT_OK(gw_halo_update(h));
    } else if (mode == MODE_SPLIT) {
      ASSERT_OK(gw_halo_start(h));
      ASSERT_OK(gw_halo_finish(h));
    } else {
      ASSERT_OK(gw_halo_start_on(h, s));
      ASSERT_OK(gw_halo_finish_on(h, s));
      ASSERT_OK(gw_stream_synchronize(s));
    }
    for (int k = 0; k < NF; k++) {
      ASSERT_OK(gw_copy(got[k], sc->field[k]));
      size_t bytes = (size_t)gw_numel(got[k]) * gw_dtype_size(sc->geo[k].t);
      g_checks++;
      if (memcmp(gw_host_data(got[k]), gw_host_data(sc->want[k]), bytes))
        FAIL_("%s, %s, field %d: differs from the one-rank reference", what, mode_name[mode], k);
      if (prev && memcmp(gw_host_data(got[k]), gw_host_data(prev[k]), bytes))
        FAIL_("%s, %s, field %d: differs from the host path", what, mode_name[mode], k);
    }
  }
  gw_stream_destroy(s);
}

static void results(gw_context *ctx, const scene *sc, gw_array *out[NF]) {
  for (int k = 0; k < NF; k++)
    ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, sc->geo[k].t, 3, sc->geo[k].n, &out[k]));
}
static void results_free(gw_array *a[NF]) {
  for (int k = 0; k < NF; k++) gw_release(a[k]);
}

/* ---- CPU machine: NCCL absent --------------------------------------------------------- */

/* Forcing NCCL must fail alike on every rank, say why, write nothing to *out. */
static void forced_fails(scene *sc, const char *needle) {
  gw_halo *h = NULL;
  ASSERT_STATUS(plan(sc, GW_HALO_PATH_NCCL, &h), GW_ENOTSUP);
  if (h) FAIL_("a failed create wrote *out");
  ASSERT_HAS(gw_halo_last_error(), "path NCCL");
  ASSERT_HAS(gw_halo_last_error(), needle);
}

static void test_absent(gw_context *ctx) {
  static const int periods[3] = {1, 0, 1};
  scene sc;
  scene_make(ctx, periods, GW_MEM_DEVICE, &sc);
  const char *why = NULL;

  /* a missing file named by GPUWRAP_NCCL_LIB */
  setenv("GPUWRAP_NCCL_LIB", "/nonexistent/gpuwrap-test/libnccl.so.2", 1);
  ASSERT_EQ_LONG(gw_halo_nccl_available(&why), 0);
  ASSERT_HAS(why, "NCCL is absent");
  ASSERT_HAS(why, "/nonexistent/gpuwrap-test/libnccl.so.2");
  forced_fails(&sc, "/nonexistent/gpuwrap-test/libnccl.so.2");
  /* a library that is not NCCL: loads, lacks the symbols, is closed again */
  setenv("GPUWRAP_NCCL_LIB", "libm.so.6", 1);
  ASSERT_EQ_LONG(gw_halo_nccl_available(&why), 0);
  ASSERT_HAS(why, "has no ncclGetUniqueId");
  forced_fails(&sc, "has no ncclGetUniqueId");
  unsetenv("GPUWRAP_NCCL_LIB");

  /* the default search (libnccl.so.2 through the loader's paths): on a CPU machine either
   * NCCL is not installed or it is (CUDA toolkits ship it) but the CUDA driver it needs,
   * libcuda.so.1, is not; either way the loader's message is what a forced plan reports.
   * Where both load, the CPU backend is what the path refuses. */
  int have = gw_halo_nccl_available(&why);
  char loader[600];
  snprintf(loader, sizeof loader, "%s", have ? "" : why);
  if (!have) {
    ASSERT_HAS(loader, "dlopen(");
    if (!strstr(loader, "libnccl.so.2") && !strstr(loader, "libcuda.so.1"))
      FAIL_("the loader's message names neither libnccl.so.2 nor libcuda.so.1: %s", loader);
    forced_fails(&sc, loader);
  } else {
    forced_fails(&sc, "CUDA backend");
  }
  if (g_rank == 0) printf("absent: ok (default search: %s)\n", have ? "NCCL loads" : loader);

  /* AUTO falls back, on every memory kind, and equals the host path bit for bit */
  setenv("GPUWRAP_NCCL_LIB", "/nonexistent/gpuwrap-test/libnccl.so.2", 1);
  gw_halo_path auto_ipc = auto_device_path(MPI_COMM_WORLD, gw_context_device(ctx));
  gw_array *host_res[NF], *auto_res[NF];
  results(ctx, &sc, host_res);
  results(ctx, &sc, auto_res);
  for (int mode = 0; mode < MODE_COUNT; mode++) {
    gw_halo *hh, *ha;
    gw_halo_info info;
    ASSERT_OK(plan(&sc, GW_HALO_PATH_HOST, &hh));
    run(ctx, &sc, hh, mode, host_res, NULL, "host path");
    gw_halo_destroy(hh);
    for (int aware = 0; aware < 2; aware++) {
      setenv("GPUWRAP_HALO_GPU_AWARE", aware ? "1" : "0", 1);
      ASSERT_OK(plan(&sc, GW_HALO_PATH_AUTO, &ha));
      ASSERT_OK(gw_halo_query(ha, &info));
      /* device fields without a GPU-aware MPI: IPC where it pays */
      ASSERT_EQ_LONG(info.path, aware ? GW_HALO_PATH_DEVICE : auto_ipc);
      run(ctx, &sc, ha, mode, auto_res, host_res, "AUTO without NCCL");
      gw_halo_destroy(ha);
    }
    unsetenv("GPUWRAP_HALO_GPU_AWARE");
  }
  unsetenv("GPUWRAP_NCCL_LIB");
  /* and with the default search (whatever this machine has: the CPU backend never takes it) */
  gw_halo *ha;
  gw_halo_info info;
  ASSERT_OK(plan(&sc, GW_HALO_PATH_AUTO, &ha));
  ASSERT_OK(gw_halo_query(ha, &info));
  ASSERT_EQ_LONG(info.path, auto_ipc); /* device fields, MPI not GPU-aware */
  run(ctx, &sc, ha, MODE_BLOCKING, auto_res, host_res, "AUTO, default search");
  gw_halo_destroy(ha);
  ASSERT_HAS(gw_halo_path_name(GW_HALO_PATH_NCCL), "nccl");
  results_free(host_res);
  results_free(auto_res);
  scene_free(&sc);
  if (g_rank == 0) printf("auto falls back: ok, equal to the host path bit for bit\n");
}

/* ---- CUDA: the NCCL path -------------------------------------------------------------- */

static int all_ranks(int yes) {
  int all = 0;
  MPI_Allreduce(&yes, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

static int skip(const char *why) {
  if (g_rank == 0) printf("skipped: %s\n", why);
  MPI_Finalize();
  return 77;
}

static int test_cuda(void) {
  gw_context *ctx = NULL;
  gw_status st = gw_context_create(GW_BACKEND_CUDA, 0, &ctx);
  if (!all_ranks(st == GW_OK)) {
    if (ctx) gw_context_destroy(ctx);
    return skip("no CUDA device");
  }
  /* one GPU per rank, as the grid helpers pick it (node-local rank mod devices) */
  int count = 0;
  (void)gw_backend_device_count(GW_BACKEND_CUDA, &count);
  MPI_Comm node;
  int node_rank = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_free(&node);
  if (count > 1 && node_rank % count != 0) {
    gw_context_destroy(ctx);
    ASSERT_OK(gw_context_create(GW_BACKEND_CUDA, node_rank % count, &ctx));
  }
  const char *why = "";
  if (!all_ranks(gw_halo_nccl_available(&why))) {
    gw_context_destroy(ctx);
    return skip(*why ? why : "NCCL absent on a rank");
  }
  static const int period_sets[][3] = {{1, 1, 1}, {0, 0, 0}, {1, 0, 1}};
  for (size_t p = 0; p < sizeof period_sets / sizeof period_sets[0]; p++) {
    scene sc;
    scene_make(ctx, period_sets[p], GW_MEM_DEVICE, &sc);
    gw_halo *hn = NULL;
    /* a rank's own periodic neighbour through NCCL too (one rank: send/receive to itself) */
    setenv("GPUWRAP_HALO_NCCL_SELF", "1", 1);
    st = plan(&sc, GW_HALO_PATH_NCCL, &hn);
    unsetenv("GPUWRAP_HALO_NCCL_SELF");
    if (p == 0 && !all_ranks(st != GW_ENOTSUP)) { /* e.g. ranks sharing one GPU */
      char msg[600];
      snprintf(msg, sizeof msg, "NCCL path refused: %s", gw_halo_last_error());
      scene_free(&sc);
      gw_context_destroy(ctx);
      return skip(msg);
    }
    ASSERT_OK(st);
    gw_halo_info info;
    ASSERT_OK(gw_halo_query(hn, &info));
    ASSERT_EQ_LONG(info.path, GW_HALO_PATH_NCCL);
    ASSERT_EQ_LONG(info.bytes_local, 0); /* GPUWRAP_HALO_NCCL_SELF=1: self neighbours too */
    gw_halo_info nccl_info = info;
    gw_array *host_res[NF], *res[NF];
    results(ctx, &sc, host_res);
    results(ctx, &sc, res);
    char what[128];
    for (int mode = 0; mode < MODE_COUNT; mode++) {
      gw_halo *hh;
      ASSERT_OK(plan(&sc, GW_HALO_PATH_HOST, &hh));
      snprintf(what, sizeof what, "host path, periods (%d,%d,%d)", period_sets[p][0],
               period_sets[p][1], period_sets[p][2]);
      run(ctx, &sc, hh, mode, host_res, NULL, what);
      gw_halo_destroy(hh);
      snprintf(what, sizeof what, "NCCL path, periods (%d,%d,%d)", period_sets[p][0],
               period_sets[p][1], period_sets[p][2]);
      run(ctx, &sc, hn, mode, res, host_res, what);
    }
    /* mixing host- and stream-ordered calls on the same plan */
    run(ctx, &sc, hn, MODE_BLOCKING, res, host_res, "NCCL path again, blocking");
    gw_halo_destroy(hn);

    /* AUTO takes NCCL (device memory, one GPU per rank, NCCL loads) */
    gw_halo *ha;
    ASSERT_OK(plan(&sc, GW_HALO_PATH_AUTO, &ha));
    ASSERT_OK(gw_halo_query(ha, &info));
    ASSERT_EQ_LONG(info.path, GW_HALO_PATH_NCCL);
    run(ctx, &sc, ha, MODE_STREAM, res, host_res, "AUTO (NCCL)");
    gw_halo_destroy(ha);

    /* the default: a rank's own periodic neighbour by direct copies, others over NCCL */
    ASSERT_OK(plan(&sc, GW_HALO_PATH_NCCL, &hn));
    ASSERT_OK(gw_halo_query(hn, &info));
    ASSERT_EQ_LONG(info.path, GW_HALO_PATH_NCCL);
    run(ctx, &sc, hn, MODE_BLOCKING, res, host_res, "NCCL path, self neighbours copied");
    run(ctx, &sc, hn, MODE_STREAM, res, host_res, "NCCL path, self neighbours copied");
    gw_halo_destroy(hn);
    info = nccl_info;
    results_free(host_res);
    results_free(res);
    scene_free(&sc);
    if (g_rank == 0)
      printf("nccl: periods (%d,%d,%d) ok: %d messages, %zu bytes per update on rank 0, equal to "
             "the host path\n",
             period_sets[p][0], period_sets[p][1], period_sets[p][2], info.neighbours,
             info.bytes_sent);
  }
  /* managed memory: forced fails clearly, AUTO does not take NCCL */
  {
    static const int periods[3] = {1, 1, 1};
    scene sc;
    scene_make(ctx, periods, GW_MEM_MANAGED, &sc);
    gw_halo *h = NULL;
    forced_fails(&sc, "device memory");
    gw_halo_info info;
    ASSERT_OK(plan(&sc, GW_HALO_PATH_AUTO, &h));
    ASSERT_OK(gw_halo_query(h, &info));
    if (info.path == GW_HALO_PATH_NCCL) FAIL_("AUTO took NCCL for managed memory");
    gw_halo_destroy(h);
    scene_free(&sc);
  }
  gw_context_destroy(ctx);
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  unsetenv("GPUWRAP_HALO_GPU_AWARE");
  if (argc > 1 && strcmp(argv[1], "cuda") == 0) {
    int rc = test_cuda();
    if (rc) return rc; /* skipped: MPI finalised */
  } else {
    gw_context *ctx;
    ASSERT_OK(gw_context_create(GW_BACKEND_CPU, 0, &ctx));
    test_absent(ctx);
    gw_context_destroy(ctx);
  }
  long total = 0;
  MPI_Reduce(&g_checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) printf("all ok: %ld checks over %d ranks\n", total, g_size);
  MPI_Finalize();
  return 0;
}
