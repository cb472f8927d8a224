/*
 * Multi-field, 1-/2-/3-D halo plans, the stream-ordered split phase and the grid helpers,
 * on the CPU backend under mpirun with 1, 2 and 4 ranks.
 *
 * The fields live on a gw_grid (uneven splits included: global sizes that the rank grid
 * does not divide). Every cell of field k starts as a function of (k, its global
 * coordinate, a seed drawn fresh each run and broadcast); halo cells with a neighbour
 * start poisoned; halo cells on a non-periodic boundary hold a boundary value (another
 * function of the coordinate, the same on every rank). After an update every cell of every
 * field must equal the one-rank reference: the global cell it mirrors (periodic wrap
 * included) or the boundary value. Every element is checked, byte for byte.
 *
 * Covered: 1-, 2- and 3-D; widths 0, 1, 2 per dim (every combination), a different width
 * per field; periodic, non-periodic and mixed; three fields of mixed dtypes in one plan
 * (one message per neighbour and dim, asserted from gw_halo_query); HOST and DEVICE paths;
 * pageable, device and strided (column-major view) memory; blocking, host split phase,
 * gw_halo_start_on/finish_on on a gpuwrap stream and on a borrowed one (gw_stream_wrap),
 * with the field written and read back by asynchronous copies on that stream through a
 * second wrap of its memory (so only the stream order, not the field's own pending-work
 * event, orders them with the exchange); the grid's offsets, coordinates and gather; errors;
 * and that a rank that is its own periodic neighbour copies the halo shells of every
 * field in ONE backend copy call (issue 17: one launch per update), in every update mode,
 * ordered on the caller's streams (test_local_order, on a CPU model whose stream work runs
 * late, so a missing wait reads stale cells).
 *
 * Usage: test_halo_fields [quick]
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

#include "../proc_counts.h"
#include "halo_test.h"

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Byte b of field k's value at global coordinate g (boundary: the boundary function). */
static unsigned char ref_byte(int k, const int64_t g[3], int boundary, size_t b, gw_dtype t) {
  uint64_t h = g_seed ^ (uint64_t)k * 0x100000001b3ull;
  for (int d = 0; d < 3; d++) h = mix(h ^ (uint64_t)(g[d] + 1000));
  h = mix(h ^ (b * 2 + (unsigned)boundary));
  return t == GW_BOOL ? (unsigned char)(h & 1) : (unsigned char)h;
}

/* One field of a case: geometry on this rank. */
typedef struct {
  int nd;
  int w[3];
  int64_t n[3]; /* local extent, halo included (1 past nd) */
  gw_dtype t;
  gw_grid_info gi;
} geom;

typedef enum { CELL_OWN, CELL_HALO, CELL_BOUNDARY } cell_class;

static cell_class classify(const geom *G, const int64_t i[3], int64_t g[3]) {
  cell_class c = CELL_OWN;
  int boundary = 0;
  for (int d = 0; d < 3; d++) {
    g[d] = 0;
    if (d >= G->nd) continue;
    int64_t N = G->gi.global[d];
    g[d] = G->gi.offset[d] + i[d] - G->w[d];
    if (i[d] < G->w[d] || i[d] >= G->n[d] - G->w[d]) c = CELL_HALO;
    if (g[d] < 0 || g[d] >= N) {
      if (G->gi.periods[d])
        g[d] = (g[d] + N) % N;
      else
        boundary = 1;
    }
  }
  return boundary ? CELL_BOUNDARY : c;
}

static int64_t cells(const geom *G) { return G->n[0] * G->n[1] * G->n[2]; }

/* C-order host image: after=0 the initial state (halos with a neighbour poisoned), 1 the
 * expected one. */
static void image(const geom *G, int k, unsigned char *p, int after) {
  size_t elem = gw_dtype_size(G->t);
  int64_t i[3], g[3];
  for (i[0] = 0; i[0] < G->n[0]; i[0]++)
    for (i[1] = 0; i[1] < G->n[1]; i[1]++)
      for (i[2] = 0; i[2] < G->n[2]; i[2]++) {
        cell_class c = classify(G, i, g);
        unsigned char *cell = p + (size_t)((i[0] * G->n[1] + i[1]) * G->n[2] + i[2]) * elem;
        for (size_t b = 0; b < elem; b++) {
          unsigned char v = ref_byte(k, g, c == CELL_BOUNDARY, b, G->t);
          if (!after && c == CELL_HALO) v ^= G->t == GW_BOOL ? 1 : 0xff;
          cell[b] = v;
        }
      }
}

static void compare(const geom *G, const unsigned char *got, const unsigned char *want,
                    const char *what) {
  size_t elem = gw_dtype_size(G->t);
  g_checks++;
  for (int64_t k = 0; k < cells(G); k++) {
    if (memcmp(got + k * elem, want + k * elem, elem) == 0) continue;
    int64_t i[3] = {k / (G->n[1] * G->n[2]), k / G->n[2] % G->n[1], k % G->n[2]}, g[3];
    cell_class c = classify(G, i, g);
    FAIL_("%s: %d-D %s width (%d,%d,%d) dims (%d,%d,%d) periods (%d,%d,%d): local cell "
          "(%lld,%lld,%lld) [%s, "
          "global (%lld,%lld,%lld)] byte 0 is 0x%02x, want 0x%02x",
          what, G->nd, gw_dtype_name(G->t), G->w[0], G->w[1], G->w[2], G->gi.dims[0], G->gi.dims[1],
          G->gi.dims[2], G->gi.periods[0], G->gi.periods[1], G->gi.periods[2], (long long)i[0],
          (long long)i[1], (long long)i[2],
          c == CELL_OWN    ? "own"
          : c == CELL_HALO ? "halo"
                           : "boundary",
          (long long)g[0], (long long)g[1], (long long)g[2], got[k * elem], want[k * elem]);
  }
}

typedef enum { MEM_HOST, MEM_DEVICE, MEM_STRIDED } memlay;

typedef struct {
  geom G;
  gw_array *field, *owner, *alias; /* alias: a second wrap of the field's memory (device only) */
  gw_array *init, *want, *got;     /* pinned host images, C order, the field's shape */
  void *raw;
} fld;

static void fld_make(gw_context *ctx, fld *f, memlay m) {
  const geom *G = &f->G;
  int nd = G->nd;
  if (m == MEM_STRIDED) {
    /* column-major array one cell larger on each side; the field is its inner block */
    int64_t big[3], st[3], start[3] = {1, 1, 1};
    int64_t s = 1;
    for (int d = 0; d < nd; d++) {
      big[d] = G->n[d] + 2;
      st[d] = s;
      s *= big[d];
    }
    size_t bytes = (size_t)s * gw_dtype_size(G->t);
    f->raw = malloc(bytes);
    if (!f->raw) FAIL_("malloc");
    memset(f->raw, 0x5a, bytes);
    ASSERT_OK(gw_wrap(ctx, f->raw, G->t, nd, big, st, 0, &f->owner));
    ASSERT_OK(gw_view(f->owner, start, G->n, NULL, &f->field));
  } else {
    ASSERT_OK(
        gw_alloc(ctx, m == MEM_HOST ? GW_MEM_HOST : GW_MEM_DEVICE, G->t, nd, G->n, &f->field));
    f->owner = gw_retain(f->field);
    if (m == MEM_DEVICE)
      ASSERT_OK(gw_wrap(ctx, gw_data(f->field), G->t, nd, G->n, NULL, 0, &f->alias));
  }
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, G->t, nd, G->n, &f->init));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, G->t, nd, G->n, &f->want));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, G->t, nd, G->n, &f->got));
}

static void fld_free(fld *f) {
  gw_release(f->alias);
  gw_release(f->field);
  gw_release(f->owner);
  gw_release(f->init);
  gw_release(f->want);
  gw_release(f->got);
  free(f->raw);
}

enum { MODE_BLOCKING, MODE_SPLIT, MODE_STREAM, MODE_BORROWED, MODE_UPDATE_ON, MODE_COUNT };
static const char *mode_name[] = {"blocking", "host split", "start_on/finish_on", "borrowed stream",
                                  "update_on"};

#define NF 3
static const gw_dtype case_dtypes[NF] = {GW_FLOAT64, GW_UINT8, GW_COMPLEX64};

/* Messages an update must send: one per remote neighbour and dim where some field has a
 * width, whatever the number of fields. */
static int want_messages(MPI_Comm cart, const fld *F, int nf) {
  int dims[3], periods[3], coords[3], nd = F[0].G.nd, msgs = 0;
  MPI_Cart_get(cart, nd, dims, periods, coords);
  for (int d = 0; d < nd; d++) {
    int any = 0;
    for (int k = 0; k < nf; k++) any |= F[k].G.w[d] > 0;
    if (!any || dims[d] == 1) continue;
    int lo, hi;
    MPI_Cart_shift(cart, d, 1, &lo, &hi);
    msgs += (lo != MPI_PROC_NULL) + (hi != MPI_PROC_NULL);
  }
  return msgs;
}

/* The node as the plan sees it: GPUWRAP_HALO_SHM_GROUP consecutive ranks, else all (the
 * test's ranks share one machine). */
static int same_node(int a, int b) {
  const char *g = getenv("GPUWRAP_HALO_SHM_GROUP");
  int n = g && *g ? atoi(g) : 0;
  return n <= 0 || a / n == b / n;
}

/* gw_halo_neighbour: each side's rank is MPI_Cart_shift's; an IPC plan's remote neighbours
 * take IPC on this node and HOST off it; other plans' take the plan's path. */
static void check_neighbour_paths(const gw_halo *h, MPI_Comm cart, int nd, gw_halo_path plan) {
  int dims[3], periods[3], coords[3];
  MPI_Cart_get(cart, nd, dims, periods, coords);
  for (int d = 0; d < nd; d++) {
    int peer[2];
    MPI_Cart_shift(cart, d, 1, &peer[0], &peer[1]);
    for (int s = 0; s < 2; s++) {
      int r = -7;
      gw_halo_path p = (gw_halo_path)-1;
      ASSERT_OK(gw_halo_neighbour(h, d, s, &r, &p));
      ASSERT_EQ_LONG(r, peer[s]);
      if (p == GW_HALO_PATH_AUTO) continue; /* no message: none, width 0 or itself */
      ASSERT_EQ_LONG(dims[d] > 1, 1);
      if (plan == GW_HALO_PATH_IPC)
        ASSERT_EQ_LONG(p, same_node(g_rank, r) ? GW_HALO_PATH_IPC : GW_HALO_PATH_HOST);
      else
        ASSERT_EQ_LONG(p, plan);
    }
  }
  int r;
  gw_halo_path p;
  ASSERT_STATUS(gw_halo_neighbour(h, nd, 0, &r, &p), GW_EINVAL);
  ASSERT_STATUS(gw_halo_neighbour(h, 0, 2, &r, &p), GW_EINVAL);
  ASSERT_STATUS(gw_halo_neighbour(NULL, 0, 0, &r, &p), GW_EINVAL);
}

/* GPUWRAP_HALO_IPC_DIRECT=1: the IPC path packs into the neighbours' ghost cells */
static int ipc_direct(void) {
  const char *v = getenv("GPUWRAP_HALO_IPC_DIRECT");
  return v && !strcmp(v, "1");
}

static void run_case(gw_context *ctx, const gw_grid *grid, int nd, const int w[3], memlay m,
                     gw_halo_path path, int quick) {
  gw_grid_info gi;
  ASSERT_OK(gw_grid_query(grid, &gi));
  /* struct_size (gpuwrap.h, Conventions): set, or left as garbage, the library writes the
   * first layout exactly: the guard bytes after it stay poisoned. */
  union {
    gw_grid_info info;
    unsigned char b[sizeof(gw_grid_info) + 32];
  } u;
  for (int k = 0; k < 2; k++) {
    memset(&u, 0xA5, sizeof u);
    if (k == 0) u.info.struct_size = sizeof u.info;
    ASSERT_OK(gw_grid_query(grid, &u.info));
    ASSERT_EQ_LONG((long)u.info.struct_size, (long)sizeof u.info);
    ASSERT_EQ_LONG(memcmp(&u.info.ndims, &gi.ndims, sizeof gi - offsetof(gw_grid_info, ndims)), 0);
    for (size_t i = sizeof u.info; i < sizeof u; i++) ASSERT_EQ_LONG(u.b[i], 0xA5);
  }
  fld F[NF];
  gw_halo_field hf[NF];
  memset(F, 0, sizeof F);
  for (int k = 0; k < NF; k++) {
    geom *G = &F[k].G;
    G->nd = nd;
    G->t = case_dtypes[k];
    G->gi = gi;
    for (int d = 0; d < 3; d++) {
      /* field 1 gets the widths rotated: one plan, different widths per field */
      G->w[d] = d < nd ? (k == 1 ? w[(d + 1) % nd] : w[d]) : 0;
      G->n[d] = d < nd ? gi.local[d] + 2 * G->w[d] : 1;
    }
    /* the strided layout for field 2 only: one plan, mixed kinds and strides */
    fld_make(ctx, &F[k], m == MEM_STRIDED && k != 2 ? MEM_HOST : m);
    image(G, k, gw_host_data(F[k].init), 0);
    image(G, k, gw_host_data(F[k].want), 1);
    hf[k].field = F[k].field;
    for (int d = 0; d < 3; d++) hf[k].width[d] = G->w[d];
  }
  gw_halo *h;
  ASSERT_OK(gw_halo_create_multi(hf, NF, gw_grid_comm(grid), path, &h));
  gw_halo_info info;
  ASSERT_OK(gw_halo_query(h, &info));
  ASSERT_EQ_LONG(info.neighbours, want_messages(gw_grid_comm(grid), F, NF));
  if (path != GW_HALO_PATH_AUTO) ASSERT_EQ_LONG(info.path, path);
  if (path == GW_HALO_PATH_AUTO && m == MEM_DEVICE)
    ASSERT_EQ_LONG(info.path, auto_device_path(gw_grid_comm(grid), gw_context_device(ctx)));
  check_neighbour_paths(h, gw_grid_comm(grid), nd, info.path);
  /* GPUWRAP_HALO_IPC_DIRECT=1 (device fields, every rank on one node): the IPC messages go
   * into the neighbours' ghost cells, so the plan holds no buffer at all */
  if (info.path == GW_HALO_PATH_IPC && ipc_direct() && !getenv("GPUWRAP_HALO_SHM_GROUP"))
    ASSERT_EQ_LONG((long)info.buffer_bytes, 0);

  gw_stream *s, *borrowed;
  ASSERT_OK(gw_stream_create(ctx, &s));
  ASSERT_OK(gw_stream_wrap(ctx, gw_stream_native(s), &borrowed));
  char what[160];
  for (int mode = 0; mode < MODE_COUNT; mode++) {
    if (quick && mode == MODE_SPLIT) continue;
    gw_stream *on = mode == MODE_BORROWED ? borrowed : s;
    int on_stream = mode >= MODE_STREAM;
    /* write the initial state: on the stream through the alias where there is one, so
     * only the stream order puts it before the packs */
    for (int k = 0; k < NF; k++) {
      if (on_stream && F[k].alias)
        ASSERT_OK(gw_copy_async(F[k].alias, F[k].init, on));
      else
        ASSERT_OK(gw_copy(F[k].field, F[k].init));
    }
    switch (mode) {
    case MODE_BLOCKING: ASSERT_OK(gw_halo_update(h)); break;
    case MODE_SPLIT:
      ASSERT_OK(gw_halo_start(h));
      ASSERT_OK(gw_halo_finish(h));
      break;
    case MODE_UPDATE_ON: ASSERT_OK(gw_halo_update_on(h, on)); break;
    default:
      ASSERT_OK(gw_halo_start_on(h, on));
      ASSERT_OK(gw_halo_finish_on(h, on));
      break;
    }
    for (int k = 0; k < NF; k++) {
      if (on_stream && F[k].alias)
        ASSERT_OK(gw_copy_async(F[k].got, F[k].alias, on));
      else if (on_stream) {
        ASSERT_OK(gw_stream_synchronize(on));
        ASSERT_OK(gw_copy(F[k].got, F[k].field));
      } else
        ASSERT_OK(gw_copy(F[k].got, F[k].field));
    }
    ASSERT_OK(gw_stream_synchronize(on));
    for (int k = 0; k < NF; k++) {
      snprintf(what, sizeof what, "field %d of %d, %s, memory %d, path %s", k, NF, mode_name[mode],
               (int)m, gw_halo_path_name(info.path));
      compare(&F[k].G, gw_host_data(F[k].got), gw_host_data(F[k].want), what);
    }
  }
  gw_stream_destroy(borrowed);
  gw_stream_destroy(s);
  gw_halo_destroy(h);
  for (int k = 0; k < NF; k++) fld_free(&F[k]);
}

static void test_values(gw_context *ctx, int quick) {
  static const int period_sets[][3] = {{1, 1, 1}, {0, 0, 0}, {1, 0, 1}};
  long cases = 0;
  for (int nd = 1; nd <= 3; nd++)
    for (int p = 0; p < 3; p++) {
      /* uneven splits: global sizes the rank grid does not divide (every rank >= 2 cells) */
      static const int64_t extra[3] = {1, 0, 3};
      int dims[3] = {0, 0, 0};
      MPI_Dims_create(g_size, nd, dims);
      int64_t global[3];
      for (int d = 0; d < nd; d++)
        global[d] = dims[d] * (int64_t)(2 + d) + extra[d] % (dims[d] + 1) + 1;
      gw_grid *grid;
      ASSERT_OK(gw_grid_create(MPI_COMM_WORLD, nd, global, period_sets[p], NULL, &grid));
      int combos = 1;
      for (int d = 0; d < nd; d++) combos *= 3;
      for (int c = 0; c < combos; c++) {
        int w[3] = {0, 0, 0}, x = c;
        for (int d = 0; d < nd; d++, x /= 3) w[d] = x % 3;
        for (int m = MEM_HOST; m <= MEM_STRIDED; m++) {
          if (quick && (c + m) % 3) continue;
          if (m == MEM_DEVICE) {
            run_case(ctx, grid, nd, w, m, GW_HALO_PATH_HOST, quick);
            run_case(ctx, grid, nd, w, m, GW_HALO_PATH_DEVICE, quick);
            run_case(ctx, grid, nd, w, m, GW_HALO_PATH_IPC, quick);
            run_case(ctx, grid, nd, w, m, GW_HALO_PATH_AUTO, quick); /* device fields: IPC */
            cases += 4;
          } else {
            run_case(ctx, grid, nd, w, m, m == MEM_HOST ? GW_HALO_PATH_HOST : GW_HALO_PATH_AUTO,
                     quick);
            cases++;
          }
        }
      }
      gw_grid_destroy(grid);
    }
  if (g_rank == 0) printf("values: %ld cases (x %d fields x %d modes) ok\n", cases, NF, MODE_COUNT);
}

/* ---- the grid helpers ------------------------------------------------------------------ */

static void test_grid(gw_context *ctx) {
  const int64_t global[3] = {7, 5, 6};
  const int periods[3] = {1, 0, 1};
  for (int nd = 1; nd <= 3; nd++) {
    gw_grid *g;
    ASSERT_OK(gw_grid_create(MPI_COMM_WORLD, nd, global, periods, NULL, &g));
    gw_grid_info in;
    ASSERT_OK(gw_grid_query(g, &in));
    ASSERT_EQ_LONG(in.ndims, nd);
    ASSERT_EQ_LONG(in.size, g_size);
    int dims[3] = {0, 0, 0}, prod = 1;
    MPI_Dims_create(g_size, nd, dims);
    int node_size;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    ASSERT_EQ_LONG(in.node_size, node_size);
    if (in.node_rank < 0 || in.node_rank >= in.node_size)
      FAIL_("node_rank %d of %d", in.node_rank, in.node_size);
    int coords[3];
    MPI_Cart_coords(gw_grid_comm(g), in.rank, nd, coords);
    int64_t sum_local = 0;
    for (int d = 0; d < nd; d++) {
      prod *= in.dims[d];
      ASSERT_EQ_LONG(in.dims[d], dims[d]);
      ASSERT_EQ_LONG(in.periods[d], periods[d]);
      ASSERT_EQ_LONG(in.coords[d], coords[d]);
      ASSERT_EQ_LONG(in.global[d], global[d]);
      /* the even split: the first global % dims coordinates get one more cell */
      int64_t base = global[d] / dims[d], rem = global[d] % dims[d];
      ASSERT_EQ_LONG(in.local[d], base + (coords[d] < rem));
      ASSERT_EQ_LONG(in.offset[d], coords[d] * base + (coords[d] < rem ? coords[d] : rem));
    }
    ASSERT_EQ_LONG(prod, g_size);
    /* the blocks tile the global box exactly */
    int64_t mine = in.local[0] * in.local[1] * in.local[2], total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_INT64_T, MPI_SUM, gw_grid_comm(g));
    ASSERT_EQ_LONG(total,
                   (nd > 0 ? global[0] : 1) * (nd > 1 ? global[1] : 1) * (nd > 2 ? global[2] : 1));
    int64_t l[3], o[3];
    ASSERT_OK(gw_grid_block(g, in.rank, l, o));
    for (int d = 0; d < 3; d++) {
      ASSERT_EQ_LONG(l[d], in.local[d]);
      ASSERT_EQ_LONG(o[d], in.offset[d]);
    }
    (void)sum_local;

    /* gather: each rank's field (width 1 along dim 0, 2 along the others; device memory)
     * holds val(global coordinate) in its interior and garbage in its halo; root gets the
     * global array */
    geom G = {.nd = nd, .t = GW_INT32, .gi = in};
    for (int d = 0; d < 3; d++) {
      G.w[d] = d < nd ? (d == 0 ? 1 : 2) : 0;
      G.n[d] = d < nd ? in.local[d] + 2 * G.w[d] : 1;
    }
    gw_array *field, *img, *glob = NULL;
    ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, G.t, nd, G.n, &field));
    ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, G.t, nd, G.n, &img));
    image(&G, 7, gw_host_data(img), 0);
    ASSERT_OK(gw_copy(field, img));
    int root = g_size - 1;
    if (in.rank == root) ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, G.t, nd, in.global, &glob));
    for (int explicit_w = 0; explicit_w < 2; explicit_w++) {
      if (glob) memset(gw_host_data(glob), 0, (size_t)gw_numel(glob) * 4);
      ASSERT_OK(gw_grid_gather(g, field, explicit_w ? G.w : NULL, glob, root));
      if (glob) {
        const unsigned char *p = gw_host_data(glob);
        int64_t gc[3] = {0, 0, 0}, gn[3] = {1, 1, 1};
        for (int d = 0; d < nd; d++) gn[d] = in.global[d];
        for (gc[0] = 0; gc[0] < gn[0]; gc[0]++)
          for (gc[1] = 0; gc[1] < gn[1]; gc[1]++)
            for (gc[2] = 0; gc[2] < gn[2]; gc[2]++)
              for (size_t b = 0; b < 4; b++) {
                unsigned char want = ref_byte(7, gc, 0, b, G.t);
                size_t at = (size_t)((gc[0] * gn[1] + gc[1]) * gn[2] + gc[2]) * 4 + b;
                if (p[at] != want)
                  FAIL_("gather %d-D: global cell (%lld,%lld,%lld) byte %zu is 0x%02x, want 0x%02x",
                        nd, (long long)gc[0], (long long)gc[1], (long long)gc[2], b, p[at], want);
              }
        g_checks++;
      }
    }
    /* errors, on every rank alike */
    int badw[3] = {2, 2, 2};
    ASSERT_STATUS(gw_grid_gather(g, field, badw, glob, root), GW_EINVAL);
    ASSERT_MSG("width");
    ASSERT_STATUS(gw_grid_gather(g, field, NULL, glob, g_size), GW_EINVAL);
    ASSERT_MSG("root");
    gw_array *wrong = NULL;
    if (in.rank == root) ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT32, nd, in.global, &wrong));
    ASSERT_STATUS(gw_grid_gather(g, field, NULL, wrong, root), GW_EINVAL);
    gw_release(wrong);

    gw_context *c2;
    ASSERT_OK(gw_grid_context_create(g, GW_BACKEND_CPU, &c2));
    int count = 0;
    ASSERT_OK(gw_backend_device_count(GW_BACKEND_CPU, &count));
    ASSERT_EQ_LONG(gw_context_device(c2), in.node_rank % count);
    gw_context_destroy(c2);

    gw_release(glob);
    gw_release(img);
    gw_release(field);
    gw_grid_destroy(g);
  }
  /* from the local size: global = dims * local */
  const int64_t local[2] = {3, 4};
  gw_grid *g;
  ASSERT_OK(gw_grid_create_local(MPI_COMM_WORLD, 2, local, NULL, NULL, &g));
  gw_grid_info in;
  ASSERT_OK(gw_grid_query(g, &in));
  for (int d = 0; d < 2; d++) {
    ASSERT_EQ_LONG(in.local[d], local[d]);
    ASSERT_EQ_LONG(in.global[d], local[d] * in.dims[d]);
    ASSERT_EQ_LONG(in.offset[d], local[d] * in.coords[d]);
    ASSERT_EQ_LONG(in.periods[d], 0);
  }
  ASSERT_EQ_LONG(in.local[2], 1);
  gw_grid_destroy(g);
  /* fixed dims */
  int fixed[2] = {g_size, 1};
  ASSERT_OK(gw_grid_create_local(MPI_COMM_WORLD, 2, local, NULL, fixed, &g));
  ASSERT_OK(gw_grid_query(g, &in));
  ASSERT_EQ_LONG(in.dims[0], g_size);
  ASSERT_EQ_LONG(in.dims[1], 1);
  gw_grid_destroy(g);
  if (g_rank == 0) printf("grid helpers: ok\n");
}

/* ---- errors -------------------------------------------------------------------------- */

static void test_errors(gw_context *ctx) {
  const int64_t local[3] = {4, 4, 4};
  const int periods[3] = {1, 1, 1};
  gw_grid *g3, *g2;
  ASSERT_OK(gw_grid_create_local(MPI_COMM_WORLD, 3, local, periods, NULL, &g3));
  ASSERT_OK(gw_grid_create_local(MPI_COMM_WORLD, 2, local, periods, NULL, &g2));
  MPI_Comm c3 = gw_grid_comm(g3);
  int64_t n3[3] = {6, 6, 6}, n2[2] = {6, 6}, flat[3] = {1, 16, 16};
  gw_array *a, *b, *two, *thin, *ro;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT64, 3, n3, &a));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_INT16, 3, n3, &b));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT32, 2, n2, &two));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT32, 3, flat, &thin));
  ASSERT_OK(gw_wrap(ctx, gw_host_data(a), GW_FLOAT64, 3, n3, NULL,
                    GW_WRAP_READONLY | GW_WRAP_NO_REGISTER, &ro));
  gw_halo *h = NULL;
  gw_halo_field ok[2] = {{a, {1, 1, 1}}, {b, {1, 1, 1}}};

  ASSERT_STATUS(gw_halo_create_multi(NULL, 1, c3, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_MSG("fields");
  ASSERT_STATUS(gw_halo_create_multi(ok, 0, c3, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_MSG("nfields");
  ASSERT_STATUS(gw_halo_create_multi(ok, 2, c3, GW_HALO_PATH_AUTO, NULL), GW_EINVAL);
  ASSERT_MSG("out");
  gw_halo_field nul[2] = {{a, {1, 1, 1}}, {NULL, {1, 1, 1}}};
  ASSERT_STATUS(gw_halo_create_multi(nul, 2, c3, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_MSG("fields[1].field");
  gw_halo_field neg[2] = {{a, {1, 1, 1}}, {b, {1, 1, -1}}};
  ASSERT_STATUS(gw_halo_create_multi(neg, 2, c3, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_MSG("fields[1].width[2]");
  gw_halo_field big[1] = {{a, {1, 3, 1}}};
  ASSERT_STATUS(gw_halo_create_multi(big, 1, c3, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_MSG("3*width");
  ASSERT_MSG("fields[0].field extent"); /* the field's index, not a literal "i" */
  gw_halo_field mixed[2] = {{a, {1, 1, 1}}, {two, {1, 1, 0}}};
  ASSERT_STATUS(gw_halo_create_multi(mixed, 2, c3, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_MSG("fields[1].field has 2 dims");
  gw_halo_field two_only[1] = {{two, {1, 1, 0}}};
  ASSERT_STATUS(gw_halo_create_multi(two_only, 1, c3, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_MSG("cart has 3 dims");
  ASSERT_STATUS(gw_halo_create_multi(ok, 2, MPI_COMM_WORLD, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_MSG("Cartesian");
  ASSERT_STATUS(gw_halo_create_multi(ok, 2, c3, (gw_halo_path)9, &h), GW_EINVAL);
  ASSERT_MSG("path");
  gw_halo_field rof[1] = {{ro, {1, 1, 1}}};
  ASSERT_STATUS(gw_halo_create_multi(rof, 1, c3, GW_HALO_PATH_AUTO, &h), GW_EREADONLY);
  ASSERT_MSG("fields[0].field is read-only");
  ASSERT_STATUS(gw_halo_create_multi(ok, 2, c3, GW_HALO_PATH_DEVICE, &h), GW_EINVAL); /* pageable */
  ASSERT_MSG("DEVICE");
  if (h) FAIL_("a failed create wrote *out");
  /* the {1,16,16} field of the issue: width 0 turns dim 0 off */
  gw_halo_field th[1] = {{thin, {0, 1, 1}}};
  ASSERT_OK(gw_halo_create_multi(th, 1, c3, GW_HALO_PATH_AUTO, &h));
  ASSERT_OK(gw_halo_update(h));
  gw_halo_destroy(h);
  /* the legacy call keeps its contract, and its messages name its own argument, `field` */
  int w0[3] = {1, 0, 1}, w1[3] = {1, 1, 1}, w3[3] = {1, 3, 1};
  ASSERT_STATUS(gw_halo_create(a, c3, w0, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_STATUS(gw_halo_create(ro, c3, w1, GW_HALO_PATH_AUTO, &h), GW_EREADONLY);
  ASSERT_MSG("gw_halo_create: field is read-only");
  ASSERT_STATUS(gw_halo_create(a, c3, w3, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_MSG("gw_halo_create: field extent");
  /* a 2-D plan */
  gw_halo_field tw[1] = {{two, {1, 1, 0}}};
  ASSERT_OK(gw_halo_create_multi(tw, 1, gw_grid_comm(g2), GW_HALO_PATH_AUTO, &h));
  ASSERT_OK(gw_halo_update(h));
  gw_halo_destroy(h);

  /* stream-ordered calls */
  gw_stream *s;
  ASSERT_OK(gw_stream_create(ctx, &s));
  ASSERT_OK(gw_halo_create_multi(ok, 2, c3, GW_HALO_PATH_AUTO, &h));
  ASSERT_STATUS(gw_halo_start_on(NULL, s), GW_EINVAL);
  ASSERT_STATUS(gw_halo_start_on(h, NULL), GW_EINVAL);
  ASSERT_MSG("stream");
  ASSERT_STATUS(gw_halo_finish_on(h, s), GW_EINVAL);
  ASSERT_MSG("no gw_halo_start");
  ASSERT_STATUS(gw_halo_update_on(h, NULL), GW_EINVAL);
  ASSERT_OK(gw_halo_start_on(h, s));
  ASSERT_STATUS(gw_halo_start_on(h, s), GW_EINVAL);
  ASSERT_STATUS(gw_halo_update(h), GW_EINVAL);
  ASSERT_STATUS(gw_halo_finish_on(h, NULL), GW_EINVAL);
  ASSERT_OK(gw_halo_finish_on(h, s));
  /* mixing host- and stream-ordered halves */
  ASSERT_OK(gw_halo_start_on(h, s));
  ASSERT_OK(gw_halo_finish(h));
  ASSERT_OK(gw_halo_start(h));
  ASSERT_OK(gw_halo_finish_on(h, s));
  ASSERT_OK(gw_halo_start_on(h, s));
  gw_halo_destroy(h); /* completes the update in flight */
  ASSERT_OK(gw_stream_synchronize(s));
  gw_stream_destroy(s);

  /* grid errors */
  gw_grid *g = NULL;
  int bad_dims[3] = {g_size + 1, 1, 1};
  ASSERT_STATUS(gw_grid_create(MPI_COMM_WORLD, 0, local, NULL, NULL, &g), GW_EINVAL);
  ASSERT_MSG("ndims");
  ASSERT_STATUS(gw_grid_create(MPI_COMM_WORLD, 3, NULL, NULL, NULL, &g), GW_EINVAL);
  ASSERT_MSG("global");
  ASSERT_STATUS(gw_grid_create(MPI_COMM_WORLD, 3, local, NULL, bad_dims, &g), GW_EINVAL);
  ASSERT_MSG("dims");
  ASSERT_STATUS(gw_grid_create(MPI_COMM_NULL, 3, local, NULL, NULL, &g), GW_EINVAL);
  ASSERT_MSG("comm");
  int64_t tiny[1] = {g_size - 1};
  int one_dim[1] = {g_size};
  if (g_size > 1) {
    ASSERT_STATUS(gw_grid_create(MPI_COMM_WORLD, 1, tiny, NULL, one_dim, &g), GW_EINVAL);
    ASSERT_MSG("every rank");
  }
  int64_t zero[2] = {4, 0};
  ASSERT_STATUS(gw_grid_create_local(MPI_COMM_WORLD, 2, zero, NULL, NULL, &g), GW_EINVAL);
  ASSERT_MSG("local[1]");
  if (g) FAIL_("a failed grid create wrote *out");
  ASSERT_STATUS(gw_grid_query(NULL, NULL), GW_EINVAL);
  gw_grid_destroy(NULL);
  if (gw_grid_comm(NULL) != MPI_COMM_NULL) FAIL_("gw_grid_comm(NULL)");

  gw_release(ro);
  gw_release(a);
  gw_release(b);
  gw_release(two);
  gw_release(thin);
  gw_grid_destroy(g2);
  gw_grid_destroy(g3);
  if (g_rank == 0) printf("errors: ok\n");
}

/*
 * Local periodic copies: on a communicator of this rank alone (periodic in every dim) an
 * update makes exactly one backend copy call for all its dims (the halo shells of every
 * field folded into one batch; the CPU model counts a batch as one GW_CPU_OP_COPY),
 * whatever the number of fields, dims and sides, in the
 * blocking, split and stream-ordered modes; and the halos are right (each halo cell
 * equals the interior cell it wraps to, edges and corners included). Only when the
 * fields share memory may the copies go one by one (checked: still right).
 */
static void test_local_batch(gw_context *ctx) {
  static const int periods[3] = {1, 1, 1}, dims1[3] = {1, 1, 1};
  for (int nd = 1; nd <= 3; nd++) {
    MPI_Comm cart;
    if (MPI_Cart_create(MPI_COMM_SELF, nd, dims1, periods, 0, &cart) != MPI_SUCCESS)
      FAIL_("MPI_Cart_create");
    /* three fields: float64 widths 1, uint8 widths 2 (dim 1 off), complex64 width 1 */
    static const gw_dtype types[3] = {GW_FLOAT64, GW_UINT8, GW_COMPLEX64};
    static const int widths[3][3] = {{1, 1, 1}, {2, 0, 2}, {1, 1, 1}};
    gw_array *a[3];
    gw_halo_field f[3];
    int64_t shape[3] = {7, 8, 9};
    for (int k = 0; k < 3; k++) {
      ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, types[k], nd, shape, &a[k]));
      size_t bytes = (size_t)gw_numel(a[k]) * gw_dtype_size(types[k]);
      unsigned char *img = malloc(bytes);
      for (size_t b = 0; b < bytes; b++) img[b] = (unsigned char)(mix(b * 7 + (uint64_t)k) & 0xff);
      gw_array *hw;
      ASSERT_OK(gw_wrap(ctx, img, types[k], nd, shape, NULL, GW_WRAP_NO_REGISTER, &hw));
      ASSERT_OK(gw_copy(a[k], hw));
      gw_release(hw);
      free(img);
      f[k].field = a[k];
      memcpy(f[k].width, widths[k], sizeof f[k].width);
    }
    gw_halo *h;
    ASSERT_OK(gw_halo_create_multi(f, 3, cart, GW_HALO_PATH_HOST, &h));
    gw_stream *s;
    ASSERT_OK(gw_stream_create(ctx, &s));
    ASSERT_OK(gw_halo_update(h)); /* warm */
    for (int mode = 0; mode < 3; mode++) {
      long c0 = gw_cpu_op_calls(GW_CPU_OP_COPY);
      if (mode == 0) {
        ASSERT_OK(gw_halo_update(h));
      } else if (mode == 1) {
        ASSERT_OK(gw_halo_start(h));
        ASSERT_OK(gw_halo_finish(h));
      } else {
        ASSERT_OK(gw_halo_update_on(h, s));
        ASSERT_OK(gw_stream_synchronize(s));
      }
      /* every dim is periodic on this one rank: the whole shell of the three fields is
       * one prepared batch, one backend copy per update (the values are checked below) */
      ASSERT_EQ_LONG(gw_cpu_op_calls(GW_CPU_OP_COPY) - c0, 1);
    }
    /* the halos wrap: cell i of a dim with width w holds cell i +- (n - 2w) */
    for (int k = 0; k < 3; k++) {
      size_t e = gw_dtype_size(types[k]), bytes = (size_t)gw_numel(a[k]) * e;
      unsigned char *got = malloc(bytes);
      gw_array *hw;
      ASSERT_OK(gw_wrap(ctx, got, types[k], nd, shape, NULL, GW_WRAP_NO_REGISTER, &hw));
      ASSERT_OK(gw_copy(hw, a[k]));
      gw_release(hw);
      int64_t n[3] = {1, 1, 1};
      for (int d = 0; d < nd; d++) n[d] = shape[d];
      for (int64_t i0 = 0; i0 < n[0]; i0++)
        for (int64_t i1 = 0; i1 < n[1]; i1++)
          for (int64_t i2 = 0; i2 < n[2]; i2++) {
            int64_t i[3] = {i0, i1, i2}, j[3] = {i0, i1, i2};
            for (int d = 0; d < nd; d++) {
              int w = widths[k][d];
              if (w == 0) continue;
              if (i[d] < w)
                j[d] = i[d] + n[d] - 2 * w;
              else if (i[d] >= n[d] - w)
                j[d] = i[d] - (n[d] - 2 * w);
            }
            size_t oi = (size_t)((i[0] * n[1] + i[1]) * n[2] + i[2]) * e;
            size_t oj = (size_t)((j[0] * n[1] + j[1]) * n[2] + j[2]) * e;
            g_checks++;
            if (memcmp(got + oi, got + oj, e) != 0)
              FAIL_("%d-D field %d: cell (%lld,%lld,%lld) != its wrap (%lld,%lld,%lld)", nd, k,
                    (long long)i0, (long long)i1, (long long)i2, (long long)j[0], (long long)j[1],
                    (long long)j[2]);
          }
      free(got);
    }
    gw_halo_destroy(h);
    gw_stream_destroy(s);
    for (int k = 0; k < 3; k++) gw_release(a[k]);

    /* two fields over one buffer (the second a view of the first): the pairs meet, so the
     * copies go one by one (each field's 3^nd - 1 shell boxes), with the same right halos */
    int64_t sh[3] = {6, 6, 6};
    gw_array *b, *v;
    ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, nd, sh, &b));
    static const float one = 1.0f;
    ASSERT_OK(gw_fill(b, &one));
    const int64_t z[3] = {0, 0, 0};
    ASSERT_OK(gw_view(b, z, sh, NULL, &v));
    gw_halo_field g[2] = {{b, {1, 1, 1}}, {v, {1, 1, 1}}};
    ASSERT_OK(gw_halo_create_multi(g, 2, cart, GW_HALO_PATH_HOST, &h));
    long c0 = gw_cpu_op_calls(GW_CPU_OP_COPY);
    ASSERT_OK(gw_halo_update(h));
    long boxes = nd == 1 ? 2 : nd == 2 ? 8 : 26;
    ASSERT_EQ_LONG(gw_cpu_op_calls(GW_CPU_OP_COPY) - c0, 2 * boxes);
    gw_halo_destroy(h);
    gw_release(v);
    gw_release(b);
    MPI_Comm_free(&cart);
  }
}

/*
 * Stream order of a plan without messages (its copies go on the caller's stream): with
 * the CPU model's stream work delayed, the field is written by an asynchronous copy on
 * stream s, updated with start_on(s) / finish_on(t) (a second stream), and read back by an
 * asynchronous copy on t. Every halo cell must equal the cell it wraps to, in the values
 * written on s: a start that does not follow s, or a finish that does not make t wait,
 * reads or returns stale cells. Then once more with update_on(t) alone, and with the
 * blocking gw_halo_update of a pinned field read by the host right after it returns (it
 * must be complete on return: fails when the update does not wait for its copies).
 */
static void test_local_order(void) {
  if (setenv("GPUWRAP_CPU_STREAM_DELAY_US", "20000", 1) != 0) FAIL_("setenv");
  gw_context *ctx;
  if (gw_context_create(GW_BACKEND_CPU, 0, &ctx) != GW_OK)
    FAIL_("gw_context_create: %s", gw_last_error());
  unsetenv("GPUWRAP_CPU_STREAM_DELAY_US");
  static const int periods[3] = {1, 1, 1}, dims1[3] = {1, 1, 1}, width[3] = {1, 2, 1};
  MPI_Comm cart;
  if (MPI_Cart_create(MPI_COMM_SELF, 3, dims1, periods, 0, &cart) != MPI_SUCCESS)
    FAIL_("MPI_Cart_create");
  int64_t n[3] = {5, 8, 6};
  size_t cells = (size_t)(n[0] * n[1] * n[2]);
  double *init = malloc(cells * sizeof *init), *got = malloc(cells * sizeof *got);
  gw_array *a, *hi, *hg;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 3, n, &a));
  ASSERT_OK(gw_wrap(ctx, init, GW_FLOAT64, 3, n, NULL, GW_WRAP_NO_REGISTER, &hi));
  ASSERT_OK(gw_wrap(ctx, got, GW_FLOAT64, 3, n, NULL, GW_WRAP_NO_REGISTER, &hg));
  gw_halo *h, *hp;
  gw_halo_field f = {a, {width[0], width[1], width[2]}};
  ASSERT_OK(gw_halo_create_multi(&f, 1, cart, GW_HALO_PATH_HOST, &h));
  /* the blocking round's field: pinned, so the host reads it with no gpuwrap call between */
  gw_array *p;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT64, 3, n, &p));
  gw_halo_field fp = {p, {width[0], width[1], width[2]}};
  ASSERT_OK(gw_halo_create_multi(&fp, 1, cart, GW_HALO_PATH_HOST, &hp));
  gw_stream *s, *t;
  ASSERT_OK(gw_stream_create(ctx, &s));
  ASSERT_OK(gw_stream_create(ctx, &t));
  static const char *const how[3] = {"start_on(s)/finish_on(t)", "update_on", "blocking update"};
  for (int round = 0; round < 3; round++) {
    for (size_t c = 0; c < cells; c++)
      init[c] = (double)(mix(g_seed + c * 31 + (uint64_t)round) % 1000003);
    for (size_t c = 0; c < cells; c++) got[c] = -1.0; /* poison */
    ASSERT_OK(gw_copy_async(round < 2 ? a : p, hi, round ? t : s));
    if (round == 0) {
      ASSERT_OK(gw_halo_start_on(h, s));
      ASSERT_OK(gw_halo_finish_on(h, t));
    } else if (round == 1) {
      ASSERT_OK(gw_halo_update_on(h, t));
    } else {
      /* Complete on return: the host reads the new halos straight away. */
      ASSERT_OK(gw_halo_update(hp));
    }
    if (round < 2) {
      ASSERT_OK(gw_copy_async(hg, a, t));
      ASSERT_OK(gw_stream_synchronize(t));
    } else {
      memcpy(got, gw_host_data(p), cells * sizeof *got);
    }
    for (int64_t i0 = 0; i0 < n[0]; i0++)
      for (int64_t i1 = 0; i1 < n[1]; i1++)
        for (int64_t i2 = 0; i2 < n[2]; i2++) {
          int64_t i[3] = {i0, i1, i2}, j[3] = {i0, i1, i2};
          for (int d = 0; d < 3; d++) {
            if (i[d] < width[d])
              j[d] = i[d] + (n[d] - 2 * width[d]);
            else if (i[d] >= n[d] - width[d])
              j[d] = i[d] - (n[d] - 2 * width[d]);
          }
          double want = init[(j[0] * n[1] + j[1]) * n[2] + j[2]];
          double have = got[(i0 * n[1] + i1) * n[2] + i2];
          g_checks++;
          if (have != want)
            FAIL_("%s: cell (%lld,%lld,%lld) is %g, its wrap (%lld,%lld,%lld) was written as %g",
                  how[round], (long long)i0, (long long)i1, (long long)i2, have, (long long)j[0],
                  (long long)j[1], (long long)j[2], want);
        }
  }
  gw_halo_destroy(h);
  gw_halo_destroy(hp);
  gw_stream_destroy(s);
  gw_stream_destroy(t);
  gw_release(a);
  gw_release(p);
  gw_release(hi);
  gw_release(hg);
  free(init);
  free(got);
  MPI_Comm_free(&cart);
  gw_context_destroy(ctx);
  if (g_rank == 0) printf("local stream order: ok\n");
}

/*
 * Buffer reuse on the shared-memory transport (and on MPI's): stream-ordered updates in a
 * row, never waited for in between, on a CPU model whose stream work runs late. Rank r's
 * 1-D periodic field holds step k's values (written on the stream), is updated with
 * start_on/finish_on, and read back on the stream into a buffer of its own per step.
 * A neighbour that packed step k+1 into this rank's receive buffer before this rank
 * unpacked step k (no "free again" wait) would leave step k+1's value in step k's halo:
 * rank 0's stream work runs much later than its neighbours', so that race would be won.
 */
static void test_reuse(void) {
  if (g_size < 2) return;
  /* rank 0 unpacks slowly, its neighbours pack fast: their next pack lands long before
   * rank 0's unpack runs, unless they wait for its token */
  if (setenv("GPUWRAP_CPU_STREAM_DELAY_US", g_rank == 0 ? "20000" : "500", 1) != 0) FAIL_("setenv");
  gw_context *ctx;
  if (gw_context_create(GW_BACKEND_CPU, 0, &ctx) != GW_OK)
    FAIL_("gw_context_create: %s", gw_last_error());
  unsetenv("GPUWRAP_CPU_STREAM_DELAY_US");
  int dims[1] = {g_size}, periods[1] = {1};
  MPI_Comm cart;
  if (MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart) != MPI_SUCCESS)
    FAIL_("MPI_Cart_create");
  int me, lo, hi;
  MPI_Comm_rank(cart, &me);
  MPI_Cart_shift(cart, 0, 1, &lo, &hi);
  enum { STEPS = 8, M = 64 }; /* M interior cells, width 1 */
  int64_t n = M + 2;
  static double init[STEPS][M + 2], got[STEPS][M + 2];
  gw_array *a, *hi_w[STEPS], *go_w[STEPS];
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 1, &n, &a));
  for (int k = 0; k < STEPS; k++) {
    for (int i = 0; i < M + 2; i++) {
      init[k][i] = 1e6 * k + 1e3 * me + i; /* step, rank and cell in the value */
      got[k][i] = -1.0;
    }
    ASSERT_OK(gw_wrap(ctx, init[k], GW_FLOAT64, 1, &n, NULL, GW_WRAP_NO_REGISTER, &hi_w[k]));
    ASSERT_OK(gw_wrap(ctx, got[k], GW_FLOAT64, 1, &n, NULL, GW_WRAP_NO_REGISTER, &go_w[k]));
  }
  gw_halo *h;
  gw_halo_field f = {a, {1, 0, 0}};
  ASSERT_OK(gw_halo_create_multi(&f, 1, cart, GW_HALO_PATH_HOST, &h));
  gw_stream *s;
  ASSERT_OK(gw_stream_create(ctx, &s));
  for (int k = 0; k < STEPS; k++) {
    ASSERT_OK(gw_copy_async(a, hi_w[k], s));
    ASSERT_OK(gw_halo_start_on(h, s));
    ASSERT_OK(gw_halo_finish_on(h, s));
    ASSERT_OK(gw_copy_async(go_w[k], a, s));
  }
  ASSERT_OK(gw_stream_synchronize(s));
  for (int k = 0; k < STEPS; k++) {
    /* the low halo is the low neighbour's last interior cell, the high one its first */
    double want_lo = 1e6 * k + 1e3 * lo + M, want_hi = 1e6 * k + 1e3 * hi + 1;
    g_checks += 2;
    if (got[k][0] != want_lo || got[k][M + 1] != want_hi)
      FAIL_("step %d: halos %.0f / %.0f, want %.0f / %.0f (the neighbours' values of step %d)", k,
            got[k][0], got[k][M + 1], want_lo, want_hi, k);
    for (int i = 1; i <= M; i++) {
      g_checks++;
      if (got[k][i] != init[k][i]) FAIL_("step %d: interior cell %d changed", k, i);
    }
  }
  gw_halo_destroy(h);
  gw_stream_destroy(s);
  for (int k = 0; k < STEPS; k++) {
    gw_release(hi_w[k]);
    gw_release(go_w[k]);
  }
  gw_release(a);
  MPI_Comm_free(&cart);
  gw_context_destroy(ctx);
  if (g_rank == 0) printf("buffer reuse (stream-ordered updates in a row): ok\n");
}

/* Corners of a non-periodic boundary: 2-D, one dim split over the ranks (periodic), the
 * other whole on every rank and non-periodic, so its halo cells are boundary values,
 * different on every rank. Along the split dim the halo must hold the neighbour's cells
 * along the other dim's whole extent, its boundary cells included, whichever dim is split
 * (the faces spanned only the interior of the dims after the exchanged one: with dim 0
 * split the corners kept their own values, with dim 1 split they got the neighbour's).
 * Every cell is checked, for both paths, blocking, split and stream-ordered. */
static double corner_value(int rank, const int64_t c[2]) {
  return 1000.0 * rank + 10.0 * (double)c[0] + (double)c[1];
}

static void test_boundary_corners(gw_context *ctx) {
  for (int d = 0; d < 2; d++) { /* the split dim */
    int dims[2] = {1, 1}, periods[2] = {0, 0};
    dims[d] = g_size;
    periods[d] = 1;
    MPI_Comm cart;
    if (MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart) != MPI_SUCCESS)
      FAIL_("MPI_Cart_create");
    int me, lo, hi;
    MPI_Comm_rank(cart, &me);
    MPI_Cart_shift(cart, d, 1, &lo, &hi);
    int64_t n[2] = {5, 6};
    enum { CELLS = 30 };
    double init[CELLS], got[CELLS];
    for (int64_t i = 0; i < n[0]; i++)
      for (int64_t j = 0; j < n[1]; j++) init[i * n[1] + j] = corner_value(me, (int64_t[2]){i, j});
    gw_array *a, *hw, *gwr;
    ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 2, n, &a));
    ASSERT_OK(gw_wrap(ctx, init, GW_FLOAT64, 2, n, NULL, GW_WRAP_NO_REGISTER, &hw));
    ASSERT_OK(gw_wrap(ctx, got, GW_FLOAT64, 2, n, NULL, GW_WRAP_NO_REGISTER, &gwr));
    gw_halo_field f = {a, {1, 1, 0}};
    for (int path = 0; path < 2; path++)
      for (int mode = 0; mode < 3; mode++) {
        gw_halo *h;
        ASSERT_OK(
            gw_halo_create_multi(&f, 1, cart, path ? GW_HALO_PATH_DEVICE : GW_HALO_PATH_HOST, &h));
        ASSERT_OK(gw_copy(a, hw));
        if (mode == 0) {
          ASSERT_OK(gw_halo_update(h));
        } else if (mode == 1) {
          ASSERT_OK(gw_halo_start(h));
          ASSERT_OK(gw_halo_finish(h));
        } else {
          gw_stream *s;
          ASSERT_OK(gw_stream_create(ctx, &s));
          ASSERT_OK(gw_halo_update_on(h, s));
          ASSERT_OK(gw_stream_synchronize(s));
          gw_stream_destroy(s);
        }
        for (int k = 0; k < CELLS; k++) got[k] = -1.0;
        ASSERT_OK(gw_copy(gwr, a));
        for (int64_t i = 0; i < n[0]; i++)
          for (int64_t j = 0; j < n[1]; j++) {
            int64_t c[2] = {i, j};
            int from = me;
            if (c[d] == 0) { /* low halo: the low neighbour's last interior layer */
              from = lo;
              c[d] = n[d] - 2;
            } else if (c[d] == n[d] - 1) { /* high halo: the high neighbour's first */
              from = hi;
              c[d] = 1;
            }
            double want = corner_value(from, c);
            g_checks++;
            if (got[i * n[1] + j] != want)
              FAIL_("boundary corners, dim %d split, %s path, mode %d: cell (%lld, %lld) = %.0f, "
                    "want %.0f",
                    d, path ? "device" : "host", mode, (long long)i, (long long)j,
                    got[i * n[1] + j], want);
          }
        gw_halo_destroy(h);
      }
    gw_release(gwr);
    gw_release(hw);
    gw_release(a);
    MPI_Comm_free(&cart);
  }
  if (g_rank == 0) printf("boundary corners: ok\n");
}

/* Fields of extent 0 along a dim that is not exchanged: every face is empty. Each way of
 * updating returns GW_OK at once on every rank count (it hung with 2 and 4 ranks: the
 * empty messages were posted without their neighbours, all to one side). */
static void test_empty_faces(gw_context *ctx) {
  for (int nd = 2; nd <= 3; nd++) {
    int dims[3] = {g_size, 1, 1}, periods[3] = {1, 0, 1};
    MPI_Comm cart;
    if (MPI_Cart_create(MPI_COMM_WORLD, nd, dims, periods, 0, &cart) != MPI_SUCCESS)
      FAIL_("MPI_Cart_create");
    int64_t n[3] = {4, nd == 2 ? 0 : 3, 0};
    gw_array *a;
    ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, nd, n, &a));
    gw_halo_field f = {a, {1, nd == 2 ? 0 : 1, 0}};
    for (int path = 0; path < 2; path++) {
      gw_halo *h;
      ASSERT_OK(
          gw_halo_create_multi(&f, 1, cart, path ? GW_HALO_PATH_DEVICE : GW_HALO_PATH_HOST, &h));
      gw_halo_info info;
      ASSERT_OK(gw_halo_query(h, &info));
      g_checks++;
      if (info.buffer_bytes != 0)
        FAIL_("%d-D empty faces: %zu bytes of buffers", nd, (size_t)info.buffer_bytes);
      ASSERT_OK(gw_halo_update(h));
      ASSERT_OK(gw_halo_start(h));
      ASSERT_OK(gw_halo_finish(h));
      gw_stream *s;
      ASSERT_OK(gw_stream_create(ctx, &s));
      ASSERT_OK(gw_halo_update_on(h, s));
      ASSERT_OK(gw_halo_start_on(h, s));
      ASSERT_OK(gw_halo_finish_on(h, s));
      ASSERT_OK(gw_stream_synchronize(s));
      gw_stream_destroy(s);
      gw_halo_destroy(h);
      g_checks++;
    }
    gw_release(a);
    MPI_Comm_free(&cart);
  }
  if (g_rank == 0) printf("empty faces: ok\n");
}

/* Every rank got `want` alike (collective), the message saying `needle`. */
static void all_fail(gw_status got, gw_status want, const char *needle) {
  ASSERT_STATUS(got, want);
  int mine = (int)got, lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  ASSERT_EQ_LONG(lo, hi);
  g_checks++;
  if (!strstr(gw_halo_last_error(), needle)) FAIL_("message does not say \"%s\"", needle);
}

/* The IPC path's life: 1000 plans made and destroyed leave no mapping, event page or
 * descriptor; the export, an open, an event's creation or its open failing on one rank
 * (injected) fails every rank alike with nothing mapped; forcing it for host memory fails
 * every rank alike, saying why. */
static void test_ipc(gw_context *ctx) {
  int dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1};
  MPI_Dims_create(g_size, 3, dims);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
  int64_t n[3] = {6, 7, 8};
  int w[3] = {1, 2, 1};
  gw_array *a, *host;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 3, n, &a));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT64, 3, n, &host));
  ASSERT_EQ_LONG(gw_cpu_ipc_mappings(), 0);
  int fds0 = proc_open_fds(), evts0 = proc_maps_naming("gw-cpu-evt-"),
      devs0 = proc_maps_naming("gw-cpu-dev-");
  for (int i = 0; i < 1000; i++) {
    gw_halo *h;
    ASSERT_OK(gw_halo_create(a, cart, w, GW_HALO_PATH_IPC, &h));
    if (i % 250 == 0) ASSERT_OK(gw_halo_update(h));
    gw_halo_destroy(h);
    ASSERT_EQ_LONG(gw_cpu_ipc_mappings(), 0);
    if (i % 100 == 0) {
      ASSERT_EQ_LONG(proc_open_fds(), fds0);
      ASSERT_EQ_LONG(proc_maps_naming("gw-cpu-evt-"), evts0);
      ASSERT_EQ_LONG(proc_maps_naming("gw-cpu-dev-"), devs0);
    }
  }
  /* the injected rank: the lowest with an on-node neighbour (IPC messages), if any */
  gw_halo *h = (gw_halo *)0x1;
  int ipc = 0, victim = -1;
  ASSERT_OK(gw_halo_create(a, cart, w, GW_HALO_PATH_IPC, &h));
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 2; s++) {
      int r;
      gw_halo_path p;
      ASSERT_OK(gw_halo_neighbour(h, d, s, &r, &p));
      ipc |= p == GW_HALO_PATH_IPC;
    }
  gw_halo_destroy(h);
  int me = ipc ? g_rank : g_size;
  MPI_Allreduce(&me, &victim, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  const int remote = victim < g_size;
  static const struct {
    gw_cpu_op op;
    const char *says;
  } inject[4] = {{GW_CPU_OP_IPC_EXPORT, "gw_ipc_export"},
                 {GW_CPU_OP_IPC_OPEN, "gw_ipc_open"},
                 {GW_CPU_OP_IPC_EVENT_CREATE, "gw__ipc_event_create"},
                 {GW_CPU_OP_IPC_EVENT_OPEN, "gw__ipc_event_open"}};
  /* GPUWRAP_HALO_IPC_DIRECT=1: each of the victim's exports (its fields') and opens (its
   * neighbours' fields') failing in turn makes every rank fall back to the receive buffers
   * alike: a plan that holds them and updates, nothing left mapped. (A buffer's export or
   * open failing fails every rank alike: the same test without the setting, below.) */
  for (int k = 0; ipc_direct() && remote && k < 2; k++) {
    long calls = gw_cpu_op_calls(inject[k].op), total = 0, fell = 0;
    ASSERT_OK(gw_halo_create(a, cart, w, GW_HALO_PATH_IPC, &h));
    gw_halo_info info;
    ASSERT_OK(gw_halo_query(h, &info));
    /* into the ghost cells: no IPC buffers (the host path's off the node, if any) */
    long mine = (long)info.buffer_bytes, b0 = 0;
    MPI_Allreduce(&mine, &b0, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    gw_halo_destroy(h);
    calls = gw_cpu_op_calls(inject[k].op) - calls;
    MPI_Allreduce(&calls, &total, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    for (long nth = 1; nth <= total; nth++) {
      long hit = gw_cpu_failures_injected(), hits = 0;
      if (g_rank == victim) gw_cpu_fail_op(inject[k].op, nth, GW_EBACKEND);
      gw_status st = gw_halo_create(a, cart, w, GW_HALO_PATH_IPC, &h);
      hit = gw_cpu_failures_injected() - hit;
      gw_cpu_fail_reset();
      MPI_Allreduce(&hit, &hits, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
      ASSERT_EQ_LONG(hits, 1);
      ASSERT_OK(st);
      ASSERT_OK(gw_halo_query(h, &info));
      long b = 0; /* the IPC receive buffers, on every rank */
      mine = (long)info.buffer_bytes;
      MPI_Allreduce(&mine, &b, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      ASSERT_OK(gw_halo_update(h));
      long ev = gw_cpu_op_calls(GW_CPU_OP_EVENT_RECORD), events = 0;
      ASSERT_OK(gw_halo_update(h));
      ev = gw_cpu_op_calls(GW_CPU_OP_EVENT_RECORD) - ev;
      MPI_Allreduce(&ev, &events, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      /* the fields' export or open: back to the receive buffers; the signal block's
       * (GPUWRAP_HALO_IPC_SIGNAL=1, halo_ipc_signal.c): still into the ghost cells, but
       * signalled by interprocess events (recorded in each update) instead */
      ASSERT_EQ_LONG(b > b0 || (b == b0 && events > 0), 1);
      gw_halo_destroy(h);
      fell++;
      ASSERT_EQ_LONG(gw_cpu_ipc_mappings(), 0);
      ASSERT_EQ_LONG(proc_open_fds(), fds0);
      ASSERT_EQ_LONG(proc_maps_naming("gw-cpu-evt-"), evts0);
      ASSERT_EQ_LONG(proc_maps_naming("gw-cpu-dev-"), devs0);
    }
    if (!fell) FAIL_("%s: no call to fail", inject[k].says);
    g_checks++;
  }
  for (int k = 0; k < 4; k++) {
    /* the victim's first call of that kind fails (with GPUWRAP_HALO_IPC_DIRECT=1 the
     * export's and the open's are the fields': every rank falls back, above) */
    if (ipc_direct() && k < 2) continue;
    if (g_rank == victim) gw_cpu_fail_op(inject[k].op, 1, GW_EBACKEND);
    gw_status st = gw_halo_create(a, cart, w, GW_HALO_PATH_IPC, &h);
    gw_cpu_fail_reset();
    if (remote)
      all_fail(st, GW_EBACKEND, inject[k].says);
    else
      ASSERT_OK(st);
    if (st == GW_OK) gw_halo_destroy(h);
    h = (gw_halo *)0x1;
    ASSERT_EQ_LONG(gw_cpu_ipc_mappings(), 0);
    ASSERT_EQ_LONG(proc_open_fds(), fds0);
    ASSERT_EQ_LONG(proc_maps_naming("gw-cpu-evt-"), evts0);
  }
  all_fail(gw_halo_create(host, cart, w, GW_HALO_PATH_IPC, &h), GW_EINVAL, "path IPC");
  ASSERT_EQ_LONG(h == (gw_halo *)0x1, 1);
  gw_release(a);
  gw_release(host);
  MPI_Comm_free(&cart);
  if (g_rank == 0) printf("ipc: 1000 plans, injected failures, host fields: ok\n");
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  int quick = argc > 1 && !strcmp(argv[1], "quick");
  unsigned long long seed = halo_test_seed();
  if (g_rank == 0) printf("test_halo_fields: %d ranks, seed %llu\n", g_size, seed);
  gw_context *ctx;
  if (gw_context_create(GW_BACKEND_CPU, 0, &ctx) != GW_OK)
    FAIL_("gw_context_create: %s", gw_last_error());
  test_errors(ctx);
  test_grid(ctx);
  test_values(ctx, quick);
  test_ipc(ctx);
  test_local_batch(ctx);
  test_local_order();
  test_reuse();
  test_empty_faces(ctx);
  test_boundary_corners(ctx);
  long total = 0;
  MPI_Reduce(&g_checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) printf("test_halo_fields: %ld checks passed\n", total);
  gw_context_destroy(ctx);
  MPI_Finalize();
  return 0;
}
