/* A 2-rank halo update on the CPU backend through an installed gpuwrap::halo (or
 * gpuwrap-halo.pc): ranks split dim 0; each fills its interior with its rank + 1 and its halo
 * with -1, exchanges, and checks that the halo facing the other rank holds the other rank's
 * value and the outer (non-periodic) halo kept -1. Run: mpirun -np 2 ./halo */
#include <gpuwrap.h>
#include <gpuwrap/halo.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                 \
  do {                                                                              \
    gw_status s_ = (call);                                                          \
    if (s_ != GW_OK) {                                                              \
      fprintf(stderr, "%s: %s: %s | %s\n", #call, gw_err_name(s_), gw_last_error(), \
              gw_halo_last_error());                                                \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
    }                                                                               \
  } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    fprintf(stderr, "run with 2 ranks (mpirun -np 2)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int dims[3] = {2, 1, 1}, periods[3] = {0, 0, 0};
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
  MPI_Comm_rank(cart, &rank);

  gw_context *ctx;
  CHECK(gw_context_create(GW_BACKEND_CPU, 0, &ctx));
  enum { N0 = 8, N1 = 6, N2 = 5, W = 1 };
  double *f = malloc(sizeof(double) * N0 * N1 * N2);
  if (!f) MPI_Abort(MPI_COMM_WORLD, 1);
  /* Row-major [N0][N1][N2]: element (i, j, k) at f[(i * N1 + j) * N2 + k]. */
  for (int i = 0; i < N0; i++)
    for (int j = 0; j < N1; j++)
      for (int k = 0; k < N2; k++) {
        int interior = i >= W && i < N0 - W && j >= W && j < N1 - W && k >= W && k < N2 - W;
        f[(i * N1 + j) * N2 + k] = interior ? rank + 1 : -1;
      }
  int64_t shape[3] = {N0, N1, N2};
  gw_array *a;
  CHECK(gw_wrap(ctx, f, GW_FLOAT64, 3, shape, NULL, 0, &a));
  int width[3] = {W, W, W};
  gw_halo *h;
  CHECK(gw_halo_create(a, cart, width, GW_HALO_PATH_AUTO, &h));
  CHECK(gw_halo_update(h));
  CHECK(gw_synchronize(ctx));

  long bad = 0;
  int other = (rank == 0 ? 1 : 0) + 1;
  int facing = rank == 0 ? N0 - 1 : 0; /* the halo plane towards the other rank */
  int outer = rank == 0 ? 0 : N0 - 1;  /* the global boundary: never written */
  for (int j = W; j < N1 - W; j++)
    for (int k = W; k < N2 - W; k++) {
      bad += f[(facing * N1 + j) * N2 + k] != other;
      bad += f[(outer * N1 + j) * N2 + k] != -1;
      bad += f[((N0 / 2) * N1 + j) * N2 + k] != rank + 1;
    }
  gw_halo_destroy(h);
  gw_release(a);
  gw_context_destroy(ctx);
  free(f);
  long total = 0;
  MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("halo: 2 ranks, %ld wrong cells\n", total);
  MPI_Comm_free(&cart);
  MPI_Finalize();
  return total != 0;
}
