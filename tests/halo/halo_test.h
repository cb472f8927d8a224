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

#endif /* GW_HALO_TEST_H */
