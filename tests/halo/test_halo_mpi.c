/*
 * Halo exchange on the CPU backend, run under mpirun with 1, 2 and 4 ranks.
 *
 * Every cell starts as a function of its global coordinate; halo cells that have a
 * neighbour start poisoned; halo cells on a non-periodic global boundary hold a boundary
 * value (another function of the extended coordinate, the same on every rank). After an
 * update every cell must hold: the value of the global cell it mirrors (periodic wrap
 * included) or, on a non-periodic boundary, the boundary value. Checked for all 15 dtypes,
 * width 1 and 2, periodic / non-periodic / mixed, two decompositions, four memory
 * layouts and paths, blocking and split-phase; then registration and allocation counts
 * across repeated updates, argument errors and injected failures.
 *
 * Usage: test_halo_mpi [quick]   (quick: fewer dtypes, for a fast smoke run)
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include "gpuwrap.h"
#include "gpuwrap/cpu_testing.h"
#include "gpuwrap/halo.h"

#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo_test.h"

/* ---- reference values ---------------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Byte b of the value at (extended) global coordinate g; `boundary` selects the second
 * function. Bool elements stay 0/1. */
static unsigned char ref_byte(const int64_t g[3], int boundary, size_t b, gw_dtype t) {
  uint64_t h = mix(
      mix(mix(mix((uint64_t)(g[0] + 1000)) ^ (uint64_t)(g[1] + 1000)) ^ (uint64_t)(g[2] + 1000)) ^
      (b * 2 + (unsigned)boundary));
  return t == GW_BOOL ? (unsigned char)(h & 1) : (unsigned char)h;
}

typedef struct {
  int dims[3], periods[3], coords[3];
  int64_t m[3]; /* interior extent per rank */
  int w[3];
  int64_t n[3]; /* local extent, halos included */
} geometry;

typedef enum { CELL_INTERIOR, CELL_HALO, CELL_BOUNDARY } cell_class;

/* What cell i of this rank must hold after an update; g receives the coordinate. */
static cell_class classify(const geometry *geo, const int64_t i[3], int64_t g[3]) {
  cell_class c = CELL_INTERIOR;
  int boundary = 0;
  for (int d = 0; d < 3; d++) {
    int64_t N = geo->m[d] * geo->dims[d];
    g[d] = geo->coords[d] * geo->m[d] + i[d] - geo->w[d];
    if (i[d] < geo->w[d] || i[d] >= geo->n[d] - geo->w[d]) c = CELL_HALO;
    if (g[d] < 0 || g[d] >= N) {
      if (geo->periods[d])
        g[d] = (g[d] + N) % N;
      else
        boundary = 1;
    }
  }
  return boundary ? CELL_BOUNDARY : c;
}

/* Fill a C-contiguous host image of the local field: after=0 gives the initial state
 * (halos poisoned), after=1 the expected state. */
static void image(const geometry *geo, gw_dtype t, unsigned char *p, int after) {
  size_t elem = gw_dtype_size(t);
  int64_t i[3], g[3];
  for (i[0] = 0; i[0] < geo->n[0]; i[0]++)
    for (i[1] = 0; i[1] < geo->n[1]; i[1]++)
      for (i[2] = 0; i[2] < geo->n[2]; i[2]++) {
        cell_class c = classify(geo, i, g);
        unsigned char *cell = p + (size_t)((i[0] * geo->n[1] + i[1]) * geo->n[2] + i[2]) * elem;
        for (size_t b = 0; b < elem; b++) {
          unsigned char v = ref_byte(g, c == CELL_BOUNDARY, b, t);
          if (!after && c == CELL_HALO) v ^= t == GW_BOOL ? 1 : 0xff; /* poison */
          cell[b] = v;
        }
      }
}

static void compare(const geometry *geo, gw_dtype t, const unsigned char *got,
                    const unsigned char *want, const char *what) {
  size_t elem = gw_dtype_size(t);
  g_checks++;
  for (int64_t k = 0; k < geo->n[0] * geo->n[1] * geo->n[2]; k++) {
    if (memcmp(got + k * elem, want + k * elem, elem) == 0) continue;
    int64_t i[3] = {k / (geo->n[1] * geo->n[2]), k / geo->n[2] % geo->n[1], k % geo->n[2]}, g[3];
    cell_class c = classify(geo, i, g);
    FAIL_("%s: dtype %s width (%d,%d,%d) dims (%d,%d,%d) periods (%d,%d,%d): local cell "
          "(%lld,%lld,%lld) "
          "[%s, global (%lld,%lld,%lld)] byte 0 is 0x%02x, want 0x%02x",
          what, gw_dtype_name(t), geo->w[0], geo->w[1], geo->w[2], geo->dims[0], geo->dims[1],
          geo->dims[2], geo->periods[0], geo->periods[1], geo->periods[2], (long long)i[0],
          (long long)i[1], (long long)i[2],
          c == CELL_INTERIOR ? "interior"
          : c == CELL_HALO   ? "halo"
                             : "boundary",
          (long long)g[0], (long long)g[1], (long long)g[2], got[k * elem], want[k * elem]);
  }
}

/* ---- one case -------------------------------------------------------------------------- */

typedef enum {
  LAYOUT_HOST,       /* gw_alloc GW_MEM_HOST, C order, path HOST */
  LAYOUT_DEVICE,     /* gw_alloc GW_MEM_DEVICE (not host-accessible), path HOST */
  LAYOUT_DEVICE_MPI, /* GW_MEM_DEVICE, path DEVICE: buffers handed to MPI */
  LAYOUT_STRIDED,    /* a view into a larger pageable array, column-major, path AUTO */
  LAYOUT_COUNT
} layout;
static const char *layout_name[] = {"host", "device", "device+mpi", "strided"};

typedef struct {
  gw_array *field; /* what the plan gets */
  gw_array *owner; /* what holds the memory */
  void *raw;       /* LAYOUT_STRIDED: malloc'd memory */
} field_t;

static void field_make(gw_context *ctx, const geometry *geo, gw_dtype t, layout l, field_t *f) {
  memset(f, 0, sizeof *f);
  if (l == LAYOUT_STRIDED) {
    /* column-major array one cell larger on each side; the field is its inner block */
    int64_t big[3] = {geo->n[0] + 2, geo->n[1] + 2, geo->n[2] + 2};
    int64_t st[3] = {1, big[0], big[0] * big[1]};
    size_t bytes = (size_t)(big[0] * big[1] * big[2]) * gw_dtype_size(t);
    f->raw = malloc(bytes);
    if (!f->raw) FAIL_("malloc");
    memset(f->raw, 0x5a, bytes);
    ASSERT_OK(gw_wrap(ctx, f->raw, t, 3, big, st, 0, &f->owner));
    int64_t start[3] = {1, 1, 1};
    ASSERT_OK(gw_view(f->owner, start, geo->n, NULL, &f->field));
  } else {
    ASSERT_OK(
        gw_alloc(ctx, l == LAYOUT_HOST ? GW_MEM_HOST : GW_MEM_DEVICE, t, 3, geo->n, &f->field));
    f->owner = gw_retain(f->field);
  }
}

static void field_free(field_t *f) {
  gw_release(f->field);
  gw_release(f->owner);
  free(f->raw);
}

static gw_halo_path layout_path(layout l) {
  return l == LAYOUT_DEVICE_MPI ? GW_HALO_PATH_DEVICE
         : l == LAYOUT_STRIDED  ? GW_HALO_PATH_AUTO
                                : GW_HALO_PATH_HOST;
}

static void run_case(gw_context *ctx, MPI_Comm cart, const geometry *geo, gw_dtype t, layout l) {
  gw_array *init, *want, *got;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, t, 3, geo->n, &init));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, t, 3, geo->n, &want));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, t, 3, geo->n, &got));
  image(geo, t, gw_host_data(init), 0);
  image(geo, t, gw_host_data(want), 1);

  field_t f;
  field_make(ctx, geo, t, l, &f);
  gw_halo *h;
  ASSERT_OK(gw_halo_create(f.field, cart, geo->w, layout_path(l), &h));
  gw_halo_info info;
  ASSERT_OK(gw_halo_query(h, &info));
  ASSERT_EQ_LONG(info.path, l == LAYOUT_DEVICE_MPI ? GW_HALO_PATH_DEVICE : GW_HALO_PATH_HOST);
  /* struct_size (gpuwrap.h, Conventions): set, or left as garbage, the library writes the
   * first layout exactly: the guard bytes after it stay poisoned. */
  union {
    gw_halo_info info;
    unsigned char b[sizeof(gw_halo_info) + 32];
  } u;
  for (int k = 0; k < 2; k++) {
    memset(&u, 0xA5, sizeof u);
    if (k == 0) u.info.struct_size = sizeof u.info;
    ASSERT_OK(gw_halo_query(h, &u.info));
    ASSERT_EQ_LONG((long)u.info.struct_size, (long)sizeof u.info);
    ASSERT_EQ_LONG(u.info.path, info.path);
    ASSERT_EQ_LONG((long)u.info.buffer_bytes, (long)info.buffer_bytes);
    for (size_t i = sizeof u.info; i < sizeof u; i++) ASSERT_EQ_LONG(u.b[i], 0xA5);
  }

  char what[96];
  for (int split = 0; split < 2; split++) {
    ASSERT_OK(gw_copy(f.field, init));
    if (split) {
      ASSERT_OK(gw_halo_start(h));
      ASSERT_OK(gw_halo_finish(h));
    } else {
      ASSERT_OK(gw_halo_update(h));
    }
    ASSERT_OK(gw_copy(got, f.field));
    snprintf(what, sizeof what, "%s update, layout %s", split ? "split-phase" : "blocking",
             layout_name[l]);
    compare(geo, t, gw_host_data(got), gw_host_data(want), what);
  }
  /* a second update over exchanged halos changes nothing */
  ASSERT_OK(gw_halo_update(h));
  ASSERT_OK(gw_copy(got, f.field));
  compare(geo, t, gw_host_data(got), gw_host_data(want), "repeated update");

  gw_halo_destroy(h);
  field_free(&f);
  gw_release(init);
  gw_release(want);
  gw_release(got);
}

static MPI_Comm make_cart(const int dims[3], const int periods[3], geometry *geo) {
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
  int r;
  MPI_Comm_rank(cart, &r);
  MPI_Cart_coords(cart, r, 3, geo->coords);
  for (int d = 0; d < 3; d++) {
    geo->dims[d] = dims[d];
    geo->periods[d] = periods[d];
  }
  return cart;
}

static void set_width(geometry *geo, int w) {
  static const int64_t interior[3] = {3, 4, 5}; /* distinct, so a mixed-up dim shows */
  for (int d = 0; d < 3; d++) {
    geo->w[d] = w;
    geo->m[d] = interior[d] + (w > 1 ? 1 : 0);
    geo->n[d] = geo->m[d] + 2 * w;
  }
}

static void test_values(gw_context *ctx, int quick) {
  static const int period_sets[][3] = {{1, 1, 1}, {0, 0, 0}, {1, 0, 1}};
  int dims_sets[2][3] = {{0, 0, 0}};
  MPI_Dims_create(g_size, 3, dims_sets[0]);
  for (int d = 0; d < 3; d++) dims_sets[1][d] = dims_sets[0][2 - d];
  int ncases = 0;
  for (int dt = 0; dt < GW_DTYPE_COUNT; dt++) {
    gw_dtype t = (gw_dtype)dt;
    if (quick && t != GW_BOOL && t != GW_FLOAT64 && t != GW_COMPLEX128) continue;
    for (int w = 1; w <= 2; w++)
      for (int p = 0; p < 3; p++)
        for (int ds = 0; ds < 2; ds++)
          for (int l = 0; l < LAYOUT_COUNT; l++) {
            geometry geo;
            MPI_Comm cart = make_cart(dims_sets[ds], period_sets[p], &geo);
            set_width(&geo, w);
            run_case(ctx, cart, &geo, t, (layout)l);
            MPI_Comm_free(&cart);
            ncases++;
          }
  }
  if (g_rank == 0) printf("values: %d cases ok on %d ranks\n", ncases, g_size);
}

/* Nothing is registered, wrapped or allocated per update; destroy gives everything back. */
static void test_counts(gw_context *ctx) {
  static const int periods[3] = {1, 0, 1};
  int dims[3] = {0, 0, 0};
  MPI_Dims_create(g_size, 3, dims);
  geometry geo;
  MPI_Comm cart = make_cart(dims, periods, &geo);
  set_width(&geo, 2);
  gw_array *field;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT32, 3, geo.n, &field));
  size_t regs0 = gw_cpu_live_registrations(), allocs0 = gw_cpu_live_allocations(),
         ranges0 = gw_registry_ranges();

  gw_halo *h;
  ASSERT_OK(gw_halo_create(field, cart, geo.w, GW_HALO_PATH_HOST, &h));
  gw_halo_info info;
  ASSERT_OK(gw_halo_query(h, &info));
  /* one block, once; on the shared-memory transport also each distinct neighbour's block
   * on this node, which this rank's copies write into (every rank of these tests shares
   * one node, so it is used unless GPUWRAP_HALO_SHM=0; GPUWRAP_HALO_SHM_GROUP=N makes
   * "nodes" of N consecutive ranks, so that some neighbours go through MPI) */
  const char *shm_env = getenv("GPUWRAP_HALO_SHM"), *grp_env = getenv("GPUWRAP_HALO_SHM_GROUP");
  int shm_on = g_size > 1 && !(shm_env && !strcmp(shm_env, "0"));
  int group = grp_env && atoi(grp_env) > 0 ? atoi(grp_env) : g_size; /* ranks of one "node" */
  int peers[6], npeers = 0;
  for (int d = 0; d < 3; d++)
    for (int dir = 0; dir < 2 && geo.dims[d] > 1; dir++) {
      int lo, hi;
      MPI_Cart_shift(cart, d, 1, &lo, &hi);
      int p = dir ? hi : lo, seen = p == MPI_PROC_NULL || !shm_on || p / group != g_rank / group;
      for (int k = 0; k < npeers; k++) seen |= peers[k] == p;
      if (!seen) peers[npeers++] = p; /* a distinct neighbour on this rank's node */
    }
  ASSERT_EQ_LONG(info.shared_memory, npeers > 0);
  if (g_size > 1) ASSERT_EQ_LONG(gw_cpu_live_registrations(), regs0 + 1 + npeers);
  ASSERT_OK(gw_halo_update(h));
  long reg = gw_cpu_op_calls(GW_CPU_OP_REGISTER), unreg = gw_cpu_op_calls(GW_CPU_OP_UNREGISTER);
  long alloc = gw_cpu_op_calls(GW_CPU_OP_ALLOC), query = gw_cpu_op_calls(GW_CPU_OP_QUERY);
  for (int k = 0; k < 20; k++) {
    if (k % 2) {
      ASSERT_OK(gw_halo_update(h));
    } else {
      ASSERT_OK(gw_halo_start(h));
      ASSERT_OK(gw_halo_finish(h));
    }
  }
  ASSERT_EQ_LONG(gw_cpu_op_calls(GW_CPU_OP_REGISTER), reg);
  ASSERT_EQ_LONG(gw_cpu_op_calls(GW_CPU_OP_UNREGISTER), unreg);
  ASSERT_EQ_LONG(gw_cpu_op_calls(GW_CPU_OP_ALLOC), alloc);
  ASSERT_EQ_LONG(gw_cpu_op_calls(GW_CPU_OP_QUERY), query);

  /* info adds up: faces of w cells along their dim times the whole extent of the others
   * (halo cells included, as ImplicitGlobalGrid's) per neighbour */
  int64_t face[3] = {(int64_t)geo.w[0] * geo.n[1] * geo.n[2],
                     (int64_t)geo.n[0] * geo.w[1] * geo.n[2],
                     (int64_t)geo.n[0] * geo.n[1] * geo.w[2]};
  size_t sent = 0, local = 0;
  int msgs = 0;
  for (int d = 0; d < 3; d++) {
    int nb = geo.dims[d] > 1
                 ? (geo.periods[d] ? 2 : (geo.coords[d] > 0) + (geo.coords[d] < geo.dims[d] - 1))
                 : 0;
    msgs += nb;
    sent += (size_t)nb * (size_t)face[d] * 4;
    if (geo.dims[d] == 1 && geo.periods[d]) local += 2 * (size_t)face[d] * 4;
  }
  ASSERT_EQ_LONG(info.neighbours, msgs);
  ASSERT_EQ_LONG(info.bytes_sent, sent);
  ASSERT_EQ_LONG(info.bytes_local, local);

  gw_halo_destroy(h);
  ASSERT_EQ_LONG(gw_cpu_live_registrations(), regs0);
  ASSERT_EQ_LONG(gw_cpu_live_allocations(), allocs0);
  ASSERT_EQ_LONG(gw_registry_ranges(), ranges0);
  gw_release(field);
  MPI_Comm_free(&cart);
  if (g_rank == 0)
    printf("counts: ok (%d messages, %zu bytes sent per update per rank 0)\n", msgs, sent);
}

static void test_errors(gw_context *ctx) {
  static const int periods[3] = {1, 1, 1};
  int dims[3] = {0, 0, 0};
  MPI_Dims_create(g_size, 3, dims);
  geometry geo;
  MPI_Comm cart = make_cart(dims, periods, &geo);
  set_width(&geo, 1);
  gw_array *field, *flat, *small, *ro;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_INT32, 3, geo.n, &field));
  gw_halo *h = NULL;
  int w0[3] = {1, 0, 1}, w4[3] = {1, 4, 1};

  ASSERT_STATUS(gw_halo_create(NULL, cart, geo.w, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_STATUS(gw_halo_create(field, cart, NULL, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_STATUS(gw_halo_create(field, cart, geo.w, GW_HALO_PATH_AUTO, NULL), GW_EINVAL);
  ASSERT_STATUS(gw_halo_create(field, cart, w0, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_STATUS(gw_halo_create(field, cart, w4, GW_HALO_PATH_AUTO, &h),
                GW_EINVAL); /* extent < 3w */
  if (!strstr(gw_halo_last_error(), "3*width"))
    FAIL_("message does not explain: %s", gw_halo_last_error());
  ASSERT_STATUS(gw_halo_create(field, cart, geo.w, (gw_halo_path)7, &h), GW_EINVAL);
  ASSERT_STATUS(gw_halo_create(field, MPI_COMM_WORLD, geo.w, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_STATUS(gw_halo_create(field, MPI_COMM_NULL, geo.w, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  int64_t flat_shape[2] = {geo.n[0], geo.n[1] * geo.n[2]};
  ASSERT_OK(gw_reshape(field, 2, flat_shape, &flat));
  ASSERT_STATUS(gw_halo_create(flat, cart, geo.w, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  int64_t start[3] = {0, 0, 0}, two[3] = {geo.n[0], 2, geo.n[2]};
  ASSERT_OK(gw_view(field, start, two, NULL, &small));
  ASSERT_STATUS(gw_halo_create(small, cart, geo.w, GW_HALO_PATH_AUTO, &h), GW_EINVAL);
  ASSERT_OK(gw_wrap(ctx, gw_host_data(field), GW_INT32, 3, geo.n, NULL,
                    GW_WRAP_READONLY | GW_WRAP_NO_REGISTER, &ro));
  ASSERT_STATUS(gw_halo_create(ro, cart, geo.w, GW_HALO_PATH_AUTO, &h), GW_EREADONLY);
  ASSERT_STATUS(gw_halo_create(field, cart, geo.w, GW_HALO_PATH_DEVICE, &h),
                GW_EINVAL); /* pageable: no device address */
  if (h) FAIL_("a failed create wrote *out");

  ASSERT_STATUS(gw_halo_update(NULL), GW_EINVAL);
  ASSERT_STATUS(gw_halo_start(NULL), GW_EINVAL);
  ASSERT_STATUS(gw_halo_finish(NULL), GW_EINVAL);
  gw_halo_destroy(NULL);

  ASSERT_OK(gw_halo_create(field, cart, geo.w, GW_HALO_PATH_AUTO, &h));
  ASSERT_STATUS(gw_halo_finish(h), GW_EINVAL);
  ASSERT_OK(gw_halo_start(h));
  ASSERT_STATUS(gw_halo_start(h), GW_EINVAL);
  ASSERT_STATUS(gw_halo_update(h), GW_EINVAL);
  ASSERT_OK(gw_halo_finish(h));
  ASSERT_OK(gw_halo_start(h));
  gw_halo_destroy(h); /* completes the update in flight */

  /* the plan keeps the field alive */
  gw_array *tmp;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_INT32, 3, geo.n, &tmp));
  ASSERT_OK(gw_halo_create(tmp, cart, geo.w, GW_HALO_PATH_AUTO, &h));
  gw_release(tmp);
  ASSERT_OK(gw_halo_update(h));
  gw_halo_destroy(h);

  gw_release(ro);
  gw_release(small);
  gw_release(flat);
  gw_release(field);
  MPI_Comm_free(&cart);
  if (g_rank == 0) printf("errors: ok\n");
}

/* Injected backend failures: every rank fails alike (so no rank waits on one that gave
 * up), the status comes back, nothing leaks, and the plan works afterwards. */
static void test_injected(gw_context *ctx) {
  static const int periods[3] = {1, 1, 0};
  int dims[3] = {0, 0, 0};
  MPI_Dims_create(g_size, 3, dims);
  geometry geo;
  MPI_Comm cart = make_cart(dims, periods, &geo);
  set_width(&geo, 1);
  gw_array *field, *init, *want, *got;
  gw_dtype t = GW_UINT16;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, t, 3, geo.n, &field));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, t, 3, geo.n, &init));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, t, 3, geo.n, &want));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, t, 3, geo.n, &got));
  image(&geo, t, gw_host_data(init), 0);
  image(&geo, t, gw_host_data(want), 1);
  size_t regs0 = gw_cpu_live_registrations(), allocs0 = gw_cpu_live_allocations(),
         ranges0 = gw_registry_ranges();
  gw_halo *h = NULL;

  /* every rank has a remote neighbour along dim 0 (periodic) when there are several */
  if (g_size > 1) {
    gw_cpu_fail_op(GW_CPU_OP_REGISTER, 1, GW_EBACKEND);
    ASSERT_STATUS(gw_halo_create(field, cart, geo.w, GW_HALO_PATH_HOST, &h), GW_EBACKEND);
    gw_cpu_fail_reset();
    ASSERT_EQ_LONG(gw_cpu_live_registrations(), regs0);
    ASSERT_EQ_LONG(gw_registry_ranges(), ranges0);
  }
  /* One rank alone fails (its first registration: the pin of its buffers): on the shared-
   * memory transport the window and the neighbours' offsets are collective, so every rank
   * must fail, none may hang, and nothing is left registered or allocated. */
  if (g_size > 1) {
    if (g_rank == g_size - 1) gw_cpu_fail_op(GW_CPU_OP_REGISTER, 1, GW_EBACKEND);
    gw_status one = gw_halo_create(field, cart, geo.w, GW_HALO_PATH_HOST, &h);
    gw_cpu_fail_reset();
    const char *shm_env = getenv("GPUWRAP_HALO_SHM");
    if (!(shm_env && !strcmp(shm_env, "0"))) { /* (through MPI the others need no pin of it) */
      if (one == GW_OK)
        FAIL_("gw_halo_create succeeded while rank %d failed to pin its buffers", g_size - 1);
      if (g_rank != g_size - 1 && !strstr(gw_halo_last_error(), "another rank failed"))
        FAIL_("message does not say another rank failed: %s", gw_halo_last_error());
    } else if (one == GW_OK) {
      gw_halo_destroy(h);
    }
    ASSERT_EQ_LONG(gw_cpu_live_registrations(), regs0);
    ASSERT_EQ_LONG(gw_registry_ranges(), ranges0);
  }
  gw_cpu_fail_op(GW_CPU_OP_ALLOC, 1, GW_ENOMEM);
  gw_status st = gw_halo_create(field, cart, geo.w, GW_HALO_PATH_DEVICE, &h);
  gw_cpu_fail_reset();
  if (g_size > 1)
    ASSERT_EQ_LONG(st, GW_ENOMEM);
  else
    ASSERT_OK(st); /* no remote neighbour: no buffers to allocate */
  if (st == GW_OK) gw_halo_destroy(h);
  ASSERT_EQ_LONG(gw_cpu_live_allocations(), allocs0);

  for (int path = GW_HALO_PATH_HOST; path <= GW_HALO_PATH_DEVICE; path++) {
    ASSERT_OK(gw_halo_create(field, cart, geo.w, (gw_halo_path)path, &h));
    ASSERT_OK(gw_copy(field, init));
    gw_cpu_fail_op(GW_CPU_OP_COPY, 1, GW_EBACKEND); /* the first pack or local copy */
    ASSERT_STATUS(gw_halo_update(h), GW_EBACKEND);
    gw_cpu_fail_reset();
    if (!strstr(gw_halo_last_error(), "gw_copy"))
      FAIL_("message does not say what failed: %s", gw_halo_last_error());
    ASSERT_OK(gw_halo_update(h)); /* idle again after the failure */
    ASSERT_OK(gw_copy(got, field));
    compare(&geo, t, gw_host_data(got), gw_host_data(want), "update after an injected failure");
    gw_halo_destroy(h);
  }
  ASSERT_EQ_LONG(gw_cpu_live_registrations(), regs0);
  ASSERT_EQ_LONG(gw_cpu_live_allocations(), allocs0);
  gw_release(field);
  gw_release(init);
  gw_release(want);
  gw_release(got);
  MPI_Comm_free(&cart);
  if (g_rank == 0) printf("injected failures: ok\n");
}

/* The IPC path's failed updates (with GPUWRAP_HALO_IPC_DIRECT=1: packing into the
 * neighbours' ghost cells, whose "ghosts free" tokens are received in the update that
 * uses them). Every rank's nth copy, event record, event wait or stream synchronization of one update fails, in
 * each mode (blocking, split, stream-ordered: its copies only), so every point between the
 * receives posted and the last wait is a failure point once: every rank must get the failure, none may
 * hang, and the next update of the same plan must give every cell its value (no token of
 * the failed update matched by the next one, no stale pack landing after a fresh one). */
static int ipc_run(gw_halo *h, int mode, gw_stream *s) {
  gw_status st;
  switch (mode) {
  case 0: return gw_halo_update(h);
  case 1: st = gw_halo_start(h); return st == GW_OK ? gw_halo_finish(h) : st;
  default:
    st = gw_halo_update_on(h, s);
    if (st == GW_OK) st = gw_stream_synchronize(s);
    return st;
  }
}

static void test_injected_ipc(gw_context *ctx) {
  if (g_size < 2) return;
  static const int periods[3] = {1, 1, 1};
  static const gw_cpu_op ops[] = {GW_CPU_OP_COPY, GW_CPU_OP_EVENT_RECORD,
                                  GW_CPU_OP_STREAM_WAIT_EVENT, GW_CPU_OP_STREAM_SYNCHRONIZE};
  static const char *const mode_name[] = {"gw_halo_update", "gw_halo_start/finish",
                                          "gw_halo_update_on"};
  int dims[3] = {0, 0, 0};
  MPI_Dims_create(g_size, 3, dims);
  geometry geo;
  MPI_Comm cart = make_cart(dims, periods, &geo);
  set_width(&geo, 1);
  gw_dtype t = GW_UINT32;
  gw_array *big, *field, *init, *want, *got;
  /* the field is a view inside a larger device allocation (an offset, padded strides):
   * what a neighbour opens and packs into is that view's ghost cells, not the allocation's */
  int64_t outer[3], start[3] = {1, 2, 3};
  for (int d = 0; d < 3; d++) outer[d] = geo.n[d] + 2 * start[d];
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, t, 3, outer, &big));
  ASSERT_OK(gw_fill(big, &(uint32_t){0x5a5a5a5au}));
  ASSERT_OK(gw_view(big, start, geo.n, NULL, &field));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, t, 3, geo.n, &init));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, t, 3, geo.n, &want));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, t, 3, geo.n, &got));
  image(&geo, t, gw_host_data(init), 0);
  image(&geo, t, gw_host_data(want), 1);
  gw_halo *h;
  ASSERT_OK(gw_halo_create(field, cart, geo.w, GW_HALO_PATH_IPC, &h));
  gw_halo_info info;
  ASSERT_OK(gw_halo_query(h, &info));
  const char *direct = getenv("GPUWRAP_HALO_IPC_DIRECT");
  ASSERT_EQ_LONG(info.buffer_bytes == 0, direct && !strcmp(direct, "1"));
  gw_stream *s;
  ASSERT_OK(gw_stream_create(ctx, &s));
  char what[160];
  long failed = 0;
  for (int mode = 0; mode < 3; mode++)
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
      /* (the calls of an update in the steady state: not of the first after a failed one,
       * which may wait for what the failure left pending) */
      ASSERT_OK(gw_copy(field, init));
      ASSERT_OK(ipc_run(h, mode, s));
      ASSERT_OK(gw_copy(field, init));
      long c0 = gw_cpu_op_calls(ops[k]);
      ASSERT_OK(ipc_run(h, mode, s));
      long calls = gw_cpu_op_calls(ops[k]) - c0, lo = 0, hi = 0;
      MPI_Allreduce(&calls, &lo, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
      MPI_Allreduce(&calls, &hi, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
      /* (only where every rank makes as many: then the same step fails everywhere; a rank
       * polling a pack's event makes a varying number) */
      if (lo != hi) continue;
      /* (stream-ordered: whether the caller's stream's token and the field still have work
       * pending when they are waited for varies with timing, so the nth event call is not the
       * same step on every rank, and a failure on one rank only is fatal by contract) */
      if (mode == 2 && ops[k] != GW_CPU_OP_COPY) continue;
      for (long nth = 1; nth <= calls; nth++) {
        ASSERT_OK(gw_copy(field, init));
        long hit = gw_cpu_failures_injected();
        gw_cpu_fail_op(ops[k], nth, GW_EBACKEND);
        gw_status st = ipc_run(h, mode, s);
        gw_cpu_fail_reset();
        hit = gw_cpu_failures_injected() - hit;
        if (hit != 1)
          FAIL_("%s, op %d call %ld of %ld: %ld failures injected", mode_name[mode], (int)ops[k],
                nth, calls, hit);
        long bad = st != GW_OK, all = 0; /* (a call whose failure the update survives: every
                                            rank's update succeeds, its values checked) */
        MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        ASSERT_EQ_LONG(all == 0 || all == g_size, 1);
        (void)gw_stream_synchronize(s);
        if (st == GW_OK) {
          ASSERT_OK(gw_copy(got, field));
          snprintf(what, sizeof what, "IPC %s surviving op %d call %ld", mode_name[mode],
                   (int)ops[k], nth);
          compare(&geo, t, gw_host_data(got), gw_host_data(want), what);
        }
        /* the next update: every cell right */
        for (int again = 0; again < 2; again++) {
          ASSERT_OK(gw_copy(field, init));
          ASSERT_OK(ipc_run(h, (mode + again) % 3, s));
          ASSERT_OK(gw_copy(got, field));
          snprintf(what, sizeof what, "IPC update %d after %s failed at op %d call %ld", again,
                   mode_name[mode], (int)ops[k], nth);
          compare(&geo, t, gw_host_data(got), gw_host_data(want), what);
        }
        failed++;
      }
    }
  if (!failed) FAIL_("no call to fail");
  gw_stream_destroy(s);
  gw_halo_destroy(h);
  /* nothing outside the view written: the padding still holds its fill */
  gw_array *all;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, t, 3, outer, &all));
  ASSERT_OK(gw_copy(all, big));
  const uint32_t *a = gw_host_data(all);
  for (int64_t i = 0; i < outer[0]; i++)
    for (int64_t j = 0; j < outer[1]; j++)
      for (int64_t k = 0; k < outer[2]; k++) {
        int in = i >= start[0] && i < start[0] + geo.n[0] && j >= start[1] &&
                 j < start[1] + geo.n[1] && k >= start[2] && k < start[2] + geo.n[2];
        if (!in) ASSERT_EQ_LONG(a[(i * outer[1] + j) * outer[2] + k], 0x5a5a5a5al);
      }
  g_checks++;
  gw_release(all);
  gw_release(big);
  gw_release(field);
  gw_release(init);
  gw_release(want);
  gw_release(got);
  MPI_Comm_free(&cart);
  if (g_rank == 0) printf("injected IPC update failures: %ld ok\n", failed);
}

/* GPUWRAP_HALO_GPU_AWARE=1 makes AUTO pick the device path for device memory. */
static void test_auto_path(gw_context *ctx) {
  static const int periods[3] = {1, 1, 1};
  int dims[3] = {0, 0, 0};
  MPI_Dims_create(g_size, 3, dims);
  geometry geo;
  MPI_Comm cart = make_cart(dims, periods, &geo);
  set_width(&geo, 1);
  gw_array *dev, *host;
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 3, geo.n, &dev));
  ASSERT_OK(gw_alloc(ctx, GW_MEM_HOST, GW_FLOAT64, 3, geo.n, &host));
  gw_halo_path shared = auto_device_path(cart, gw_context_device(ctx));
  if (g_size > 1 && !getenv("GPUWRAP_CPU_MPS")) ASSERT_EQ_LONG(shared, GW_HALO_PATH_HOST);
  struct {
    const char *env;
    gw_array *field;
    gw_halo_path want;
    int aware;
  } cases[] = {
      {"1", dev, GW_HALO_PATH_DEVICE, 1},
      {"1", host, GW_HALO_PATH_HOST, 1},
      /* MPI not GPU-aware (the CPU backend's model is not): device fields take IPC where
       * it pays, the host path where ranks of a node share the device without MPS */
      {"0", dev, shared, 0},
      {NULL, dev, shared, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    if (cases[k].env)
      setenv("GPUWRAP_HALO_GPU_AWARE", cases[k].env, 1);
    else
      unsetenv("GPUWRAP_HALO_GPU_AWARE");
    gw_halo *h;
    gw_halo_info info;
    ASSERT_OK(gw_halo_create(cases[k].field, cart, geo.w, GW_HALO_PATH_AUTO, &h));
    ASSERT_OK(gw_halo_query(h, &info));
    ASSERT_EQ_LONG(info.path, cases[k].want);
    ASSERT_EQ_LONG(info.gpu_aware, cases[k].aware);
    ASSERT_OK(gw_halo_update(h));
    gw_halo_destroy(h);
  }
  unsetenv("GPUWRAP_HALO_GPU_AWARE");
  /* each rank on a device of its own (as many modelled devices as ranks): IPC pays
   * whether or not MPS runs; with fewer, the ranks that share one decide it */
  int ndev = 0;
  ASSERT_OK(gw_backend_device_count(GW_BACKEND_CPU, &ndev));
  gw_context *own;
  ASSERT_OK(gw_context_create(GW_BACKEND_CPU, g_rank % ndev, &own));
  gw_array *odev;
  ASSERT_OK(gw_alloc(own, GW_MEM_DEVICE, GW_FLOAT64, 3, geo.n, &odev));
  gw_halo_path want = auto_device_path(cart, g_rank % ndev);
  if (ndev >= g_size) ASSERT_EQ_LONG(want, GW_HALO_PATH_IPC);
  gw_halo *h;
  gw_halo_info info;
  ASSERT_OK(gw_halo_create(odev, cart, geo.w, GW_HALO_PATH_AUTO, &h));
  ASSERT_OK(gw_halo_query(h, &info));
  ASSERT_EQ_LONG(info.path, want);
  ASSERT_OK(gw_halo_update(h));
  gw_halo_destroy(h);
  gw_release(odev);
  gw_context_destroy(own);
  gw_release(dev);
  gw_release(host);
  MPI_Comm_free(&cart);
  if (g_rank == 0) printf("auto path: ok (%d modelled devices)\n", ndev);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  unsetenv("GPUWRAP_HALO_GPU_AWARE");
  gw_context *ctx;
  ASSERT_OK(gw_context_create(GW_BACKEND_CPU, 0, &ctx));

  test_errors(ctx);
  test_auto_path(ctx);
  test_counts(ctx);
  test_injected(ctx);
  test_injected_ipc(ctx);
  test_values(ctx, quick);

  gw_context_destroy(ctx);
  long total = 0;
  MPI_Reduce(&g_checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) printf("all ok: %ld checks over %d ranks\n", total, g_size);
  MPI_Finalize();
  return 0;
}
