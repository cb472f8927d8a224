/*
 * The C side of the Fortran diffusion test: writes the field diffusion3d.c computes, from
 * diffusion3d.c's own code (included, its main renamed), in the layout of
 * diffusion3d_f --dump (the global interior, raw float64, C order).
 *
 *   d3d_reference NP N STEPS PERIODIC(0|1) FILE
 *
 * It writes reference(): the one-rank run over the global grid of NP ranks of N^3 cells.
 * `diffusion3d --check` (run by the same test, same options) proves the C example's
 * distributed field equals that reference bit for bit, so equality with this file is
 * equality with the C example's field. Run under MPI (one rank): MPI_Dims_create picks the
 * rank grid exactly as the example does.
 */
#define main d3d_c_example_main
#include "../../examples/diffusion3d.c"
#undef main

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s NP N STEPS PERIODIC FILE\n", argv[0]);
    return 2;
  }
  MPI_Init(&argc, &argv);
  int np = atoi(argv[1]), steps = atoi(argv[3]), periodic = atoi(argv[4]), dims[3] = {0, 0, 0};
  int64_t m = atoll(argv[2]);
  MPI_Dims_create(np, 3, dims);
  const int64_t N[3] = {dims[0] * m, dims[1] * m, dims[2] * m},
                rn[3] = {N[0] + 2, N[1] + 2, N[2] + 2};
  double *ref = reference(N, steps, periodic);
  FILE *f = fopen(argv[5], "wb");
  if (!ref || !f) {
    perror(argv[5]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int64_t i = 1; i <= N[0]; i++)
    for (int64_t j = 1; j <= N[1]; j++)
      if (fwrite(ref + (i * rn[1] + j) * rn[2] + 1, sizeof *ref, (size_t)N[2], f) != (size_t)N[2])
        MPI_Abort(MPI_COMM_WORLD, 1);
  if (fclose(f)) MPI_Abort(MPI_COMM_WORLD, 1);
  free(ref);
  MPI_Finalize();
  return 0;
}
