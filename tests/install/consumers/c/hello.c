/* The README's hello world: wrap a malloc'd array, fill it through gpuwrap, check every
 * element. Built against an installed (and moved) gpuwrap by tests/install/run.sh, through
 * CMake's find_package and through pkg-config, shared and static. */
#include <gpuwrap.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  gw_context *ctx;
  gw_status s = gw_context_create(GW_BACKEND_AUTO, 0, &ctx); /* CUDA, HIP, else CPU */
  if (s != GW_OK) {
    fprintf(stderr, "context: %s: %s\n", gw_err_name(s), gw_last_error());
    return 1;
  }
  enum { ROWS = 300, COLS = 200 };
  double *h = malloc(sizeof(double) * ROWS * COLS); /* plain pageable memory */
  if (!h) return 1;
  int64_t shape[2] = {ROWS, COLS};
  gw_array *a;
  s = gw_wrap(ctx, h, GW_FLOAT64, 2, shape, NULL, 0, &a); /* no copy */
  if (s != GW_OK) {
    fprintf(stderr, "wrap: %s: %s\n", gw_err_name(s), gw_last_error());
    return 1;
  }
  double value = 2.5;
  s = gw_fill(a, &value); /* on the device, writing straight into h */
  if (s == GW_OK) s = gw_synchronize(ctx);
  if (s != GW_OK) {
    fprintf(stderr, "fill: %s: %s\n", gw_err_name(s), gw_last_error());
    return 1;
  }
  long bad = 0;
  for (long i = 0; i < (long)ROWS * COLS; i++) bad += h[i] != value;
  gw_release(a);
  free(h);
  printf("hello from gpuwrap %d.%d.%d on %s: %ld of %d elements wrong\n", GW_VERSION_MAJOR,
         GW_VERSION_MINOR, GW_VERSION_PATCH, gw_backend_name(gw_context_backend(ctx)), bad,
         ROWS * COLS);
  gw_context_destroy(ctx);
  return bad != 0;
}
