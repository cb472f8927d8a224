/*
 * The halo tests' shared harness (test_halo_mpi.c, test_halo_fields.c, test_halo_nccl.c):
 * every rank counts its checks, and a failed one prints the rank, the place, the seed (0
 * for the tests without random data) and both libraries' last errors, then aborts the job
 * (MPI_Abort: one failing rank must not leave the others waiting in a collective).
 */
#ifndef GW_HALO_TEST_H
#define GW_HALO_TEST_H

#include "gpuwrap.h"
#include "gpuwrap/halo.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_rank, g_size;
static long g_checks;
static uint64_t g_seed; /* set by the tests that draw random data, printed with a failure */

#define FAIL_(...)                                                                           \
  do {                                                                                       \
    fprintf(stderr, "[rank %d] %s:%d (seed %llu): ", g_rank, __FILE__, __LINE__,             \
            (unsigned long long)g_seed);                                                     \
    fprintf(stderr, __VA_ARGS__);                                                            \
    fprintf(stderr, "\n  halo: %s\n  gpuwrap: %s\n", gw_halo_last_error(), gw_last_error()); \
    MPI_Abort(MPI_COMM_WORLD, 1);                                                            \
  } while (0)
#define ASSERT_EQ_LONG(a, b)                                       \
  do {                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);            \
    g_checks++;                                                    \
    if (a_ != b_) FAIL_("%s == %s: %lld != %lld", #a, #b, a_, b_); \
  } while (0)
#define ASSERT_STATUS(expr, want)                                                              \
  do {                                                                                         \
    gw_status s_ = (expr);                                                                     \
    g_checks++;                                                                                \
    if (s_ != (want)) FAIL_("%s: got %s, want %s", #expr, gw_err_name(s_), gw_err_name(want)); \
  } while (0)
#define ASSERT_OK(expr) ASSERT_STATUS(expr, GW_OK)
/* The halo's last error says `needle`. */
#define ASSERT_MSG(needle)                                                    \
  do {                                                                        \
    g_checks++;                                                               \
    if (!strstr(gw_halo_last_error(), needle))                                \
      FAIL_("message does not say \"%s\": %s", needle, gw_halo_last_error()); \
  } while (0)

/* The run's seed (fresh every run, the same on every rank, printed so that a failure can
 * be replayed with GW_HALO_TEST_SEED=<seed>); also g_seed. Collective. */
static inline unsigned long long halo_test_seed(void) {
  unsigned long long seed =
      (unsigned long long)time(NULL) * 2654435761ull ^ (unsigned long long)clock();
  const char *env = getenv("GW_HALO_TEST_SEED");
  if (env) seed = strtoull(env, NULL, 0);
  MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  g_seed = seed;
  return seed;
}

/*
 * The path GW_HALO_PATH_AUTO must take for device fields on `device` of the CPU model
 * (collective over comm; MPI not GPU-aware, no NCCL), worked out here independently of the
 * library: IPC where it pays, i.e. no two ranks of one node on one device unless the
 * model's MPS is on (GPUWRAP_CPU_MPS); HOST otherwise. The node: GPUWRAP_HALO_SHM_GROUP
 * consecutive ranks, else the whole job (the tests' ranks share one machine).
 */
static inline gw_halo_path auto_device_path(MPI_Comm comm, int device) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const char *g = getenv("GPUWRAP_HALO_SHM_GROUP"), *m = getenv("GPUWRAP_CPU_MPS");
  int group = g && *g ? atoi(g) : 0, mps = m && (!strcmp(m, "1") || !strcmp(m, "yes"));
  int *dev = malloc((size_t)size * sizeof *dev), shared = 0;
  if (!dev) FAIL_("out of memory");
  MPI_Allgather(&device, 1, MPI_INT, dev, 1, MPI_INT, comm);
  for (int a = 0; a < size; a++)
    for (int b = a + 1; b < size; b++)
      if (dev[a] == dev[b] && (group <= 0 || a / group == b / group)) shared = 1;
  free(dev);
  int any = 0; /* (every rank takes IPC or none) */
  MPI_Allreduce(&shared, &any, 1, MPI_INT, MPI_MAX, comm);
  return any && !mps ? GW_HALO_PATH_HOST : GW_HALO_PATH_IPC;
}

#endif /* GW_HALO_TEST_H */
