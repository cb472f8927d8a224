/*
 * The IPC path's device-side signals (halo_ipc.c) under a slow receiver, on the CPU model
 * with 2 ranks. Rank 1's streams are slow (GPUWRAP_CPU_STREAM_DELAY_US, set on that rank
 * only) and it runs stream-ordered updates back to back without a host wait, so its host
 * is ahead of its device work; rank 0 is fast and runs blocking updates. Every update k
 * carries fresh random interior values; rank 1 snapshots its field on its stream right
 * after each update_on, and every halo cell of every snapshot must hold rank 0's values
 * of that update k. Rank 0 checks its own halos after each blocking update the same way.
 * Rank 0's pack k+1 into rank 1's receive buffer is issued while rank 1's unpack k may
 * still be queued: only the wait for rank 1's "freed" event keeps it from overwriting the
 * buffer first (snapshot k would then hold update k+1's values); rank 1's unpack k must
 * wait for rank 0's "landed" event of pack k (else it reads the previous update's).
 * Then a plan without a stream (stream_create refused) through split, stream-ordered and
 * blocking updates: its unpacks complete at once, and each must still send its "free
 * again" token.
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

#define UPDATES 12
#define N 16 /* interior cells; one halo cell on each side */

static uint64_t g_state;
static double next_value(void) {
  uint64_t x = (g_state += 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return (double)((x ^ (x >> 31)) >> 11);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (g_size != 2) {
    if (g_rank == 0) printf("test_halo_ipc_order: needs 2 ranks, skipped\n");
    MPI_Finalize();
    return 77;
  }
  /* before the model reads its settings (the first gpuwrap call) */
  if (g_rank == 1) setenv("GPUWRAP_CPU_STREAM_DELAY_US", "3000", 1);
  unsigned long long seed = halo_test_seed();
  gw_context *ctx;
  if (gw_context_create(GW_BACKEND_CPU, 0, &ctx) != GW_OK)
    FAIL_("gw_context_create: %s", gw_last_error());
  int dims[1] = {2}, periods[1] = {0};
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
  int64_t n = N + 2;
  gw_array *field, *host[UPDATES], *snap[UPDATES];
  ASSERT_OK(gw_alloc(ctx, GW_MEM_DEVICE, GW_FLOAT64, 1, &n, &field));
  /* both ranks draw every rank's values of every update from the one seed */
  double want[2][UPDATES][N];
  g_state = seed;
  for (int k = 0; k < UPDATES; k++)
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < N; i++) want[r][k][i] = next_value();
  for (int k = 0; k < UPDATES; k++) {
    ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT64, 1, &n, &host[k]));
    ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT64, 1, &n, &snap[k]));
    double *h = gw_host_data(host[k]), *s = gw_host_data(snap[k]);
    h[0] = h[N + 1] = -1.0; /* poisoned halo cells: the update must overwrite the one used */
    memcpy(h + 1, want[g_rank][k], sizeof want[g_rank][k]);
    for (int i = 0; i < N + 2; i++) s[i] = -2.0;
  }
  gw_halo_field hf = {field, {1, 0, 0}};
  gw_halo *h;
  ASSERT_OK(gw_halo_create_multi(&hf, 1, cart, GW_HALO_PATH_IPC, &h));
  /* GPUWRAP_HALO_IPC_DIRECT=1: packs into the neighbour's ghost cells (no buffers), whose
   * "ghosts free" and "landed" waits this test needs alike: without the first, rank 0's
   * pack k lands before rank 1's slow stream has written its poisoned halo cell of update
   * k (snapshot k holds -1); without the second, rank 0's blocking update returns before
   * rank 1's slow pack has landed in its halo (it holds update k-1's value). */
  const char *direct = getenv("GPUWRAP_HALO_IPC_DIRECT");
  /* "blocking": the slow rank 1 runs blocking updates too, after an asynchronous copy into
   * its field: rank 0 may read its halo only after rank 1's slow pack (else it holds update
   * k-1's value), and, into the ghost cells, rank 0's pack must land after rank 1's slow
   * copy of update k's poisoned halo (else snapshot k holds -1) */
  const int slow_blocking = argc > 1 && !strcmp(argv[1], "blocking");
  /* "legacy": the same, but rank 1's slow copy runs on the legacy default stream into a
   * second wrap of the field's memory, work gpuwrap does not track for the field (as a
   * program's own kernel on the default stream): a blocking update is ordered after the
   * legacy stream's earlier work all the same (the ordering contract of synchronous
   * calls), so rank 0's pack into the ghost cells must land after that copy */
  const int slow_legacy = argc > 1 && !strcmp(argv[1], "legacy");
  gw_halo_info info;
  ASSERT_OK(gw_halo_query(h, &info));
  ASSERT_EQ_LONG(info.buffer_bytes == 0, direct && !strcmp(direct, "1"));
  gw_stream *s, *legacy;
  ASSERT_OK(gw_stream_create(ctx, &s));
  ASSERT_OK(gw_stream_wrap(ctx, NULL, &legacy));
  gw_array *alias; /* the field's memory, unknown to the plan */
  ASSERT_OK(gw_wrap(ctx, gw_data(field), GW_FLOAT64, 1, &n, NULL, 0, &alias));
  /* rank 0's halo cell is its high one (index N+1: rank 1's first interior cell); rank
   * 1's its low one (index 0: rank 0's last interior cell) */
  int mine = g_rank == 0 ? N + 1 : 0, theirs = g_rank == 0 ? 0 : N - 1;
  for (int k = 0; k < UPDATES; k++) {
    if (g_rank == 0) {
      ASSERT_OK(gw_copy(field, host[k]));
      ASSERT_OK(gw_halo_update(h));
      ASSERT_OK(gw_copy(snap[k], field));
    } else if (slow_blocking) {
      ASSERT_OK(gw_copy_async(field, host[k], s)); /* (the update waits for it) */
      ASSERT_OK(gw_halo_update(h));
      ASSERT_OK(gw_copy(snap[k], field));
    } else if (slow_legacy) {
      ASSERT_OK(gw_copy_async(alias, host[k], legacy)); /* (ordered by the stream alone) */
      ASSERT_OK(gw_halo_update(h));
      ASSERT_OK(gw_copy(snap[k], field));
    } else {
      ASSERT_OK(gw_copy_async(field, host[k], s));
      ASSERT_OK(gw_halo_update_on(h, s));
      ASSERT_OK(gw_copy_async(snap[k], field, s));
    }
  }
  ASSERT_OK(gw_stream_synchronize(s));
  ASSERT_OK(gw_stream_synchronize(legacy));
  gw_release(alias);
  gw_stream_destroy(legacy);
  for (int k = 0; k < UPDATES; k++) {
    const double *got = gw_host_data(snap[k]);
    if (got[mine] != want[!g_rank][k][theirs])
      FAIL_("update %d: halo cell %d holds %.17g, want rank %d's value of that update %.17g "
            "(update %d's: %.17g)",
            k, mine, got[mine], !g_rank, want[!g_rank][k][theirs], k + 1 < UPDATES ? k + 1 : k,
            want[!g_rank][k + 1 < UPDATES ? k + 1 : k][theirs]);
    g_checks++;
    for (int i = 0; i < N; i++) ASSERT_EQ_LONG(got[1 + i] == want[g_rank][k][i], 1);
  }
  gw_halo_destroy(h);
  /* A plan without a stream (the backend's stream_create says GW_ENOTSUP: copies run one by
   * one, complete on return) through every kind of update: a split or stream-ordered one
   * must still send each sender its "free again" token (0 bytes: its unpacks are done), or
   * the next update waits for it forever (cpu.halo.ipc_order.np2's short TIMEOUT). */
  gw_cpu_fail_op(GW_CPU_OP_STREAM_CREATE, 1, GW_ENOTSUP);
  ASSERT_OK(gw_halo_create_multi(&hf, 1, cart, GW_HALO_PATH_IPC, &h));
  ASSERT_EQ_LONG(gw_cpu_failures_injected(), 1); /* the plan's stream_create, refused */
  gw_cpu_fail_reset();
  for (int k = 0; k < UPDATES; k++) {
    double *hk = gw_host_data(host[k]);
    ASSERT_OK(gw_copy(field, host[k])); /* poisoned halo cells, this update's interior */
    switch (k % 4) {
    case 0:
      ASSERT_OK(gw_halo_start(h));
      ASSERT_OK(gw_halo_finish(h));
      break;
    case 1:
      ASSERT_OK(gw_halo_update_on(h, s));
      ASSERT_OK(gw_stream_synchronize(s));
      break;
    case 2:
      ASSERT_OK(gw_halo_start_on(h, s));
      ASSERT_OK(gw_halo_finish(h));
      break;
    default: ASSERT_OK(gw_halo_update(h));
    }
    ASSERT_OK(gw_copy(snap[k], field));
    const double *got = gw_host_data(snap[k]);
    if (got[mine] != want[!g_rank][k][theirs])
      FAIL_("stream-less plan, update %d: halo cell %d holds %.17g, want rank %d's %.17g", k, mine,
            got[mine], !g_rank, want[!g_rank][k][theirs]);
    g_checks++;
    for (int i = 0; i < N; i++) ASSERT_EQ_LONG(got[1 + i] == hk[1 + i], 1);
    ASSERT_EQ_LONG(got[g_rank == 0 ? 0 : N + 1] == -1.0, 1); /* no neighbour: untouched */
  }
  gw_halo_destroy(h);
  gw_stream_destroy(s);
  for (int k = 0; k < UPDATES; k++) {
    gw_release(host[k]);
    gw_release(snap[k]);
  }
  gw_release(field);
  MPI_Comm_free(&cart);
  long total = 0;
  MPI_Reduce(&g_checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) printf("test_halo_ipc_order: %ld checks passed (seed %llu)\n", total, seed);
  gw_context_destroy(ctx);
  MPI_Finalize();
  return 0;
}
