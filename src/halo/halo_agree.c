/*
 * The neighbour agreement of plan creation (halo_create.c's create() calls it):
 * what two neighbouring ranks' arguments must share for their messages to
 * match.
 */
#include "halo_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- what neighbours must agree on
 * ----------------------------------------------------- */
/*
 * Every rank checks its own arguments, but a message is made of two ranks'
 * arguments: the face a rank sends along d must be, byte for byte, the halo its
 * neighbour receives. So before anything is laid out each rank tells each
 * neighbour (along every dim split over ranks, widths of 0 included: a dim one
 * rank exchanges and the other does not would hang) its field count, and then
 * per field its dtype, width along d and face extents; each compares the
 * neighbour's with its own. A difference fails every rank alike (create()
 * agrees on it), the message naming the argument and both ranks' values.
 */
enum { DESC = 5 }; /* per field: dtype, width[d], face extents along dims 0..2 */

static int tag_check(int d, int toward_high, int round) {
  return 12 * EPOCHS + 6 + 6 * round + 2 * d + toward_high;
}

static void describe(const gw_halo *h, int d, int *out) {
  for (int f = 0; f < h->nfields; f++) {
    int *o = out + f * DESC;
    const int64_t *n = gw_shape(h->field[f]);
    o[0] = (int)gw_array_dtype(h->field[f]);
    o[1] = h->width[f][d];
    for (int e = 0; e < 3; e++) {
      int64_t x = e >= h->ndim ? 1 : e == d ? h->width[f][d] : n[e];
      o[2 + e] = x > INT_MAX ? -1 : (int)x; /* (an extent past INT_MAX has no face MPI carries) */
    }
  }
}

static gw_status mismatch(const gw_halo *h, const char *fn, int strict, int d, int s, int rank,
                          int peer, const int *mine, const int *theirs) {
  char where[64];
  snprintf(where, sizeof where, "its %c%c neighbour rank %d", s ? '+' : '-', "xyz"[d], peer);
  for (int f = 0; f < h->nfields; f++) {
    const int *a = mine + f * DESC, *b = theirs + f * DESC;
    char fld[32], wid[40];
    if (strict) {
      snprintf(fld, sizeof fld, "field");
      snprintf(wid, sizeof wid, "width[%d]", d);
    } else {
      snprintf(fld, sizeof fld, "fields[%d].field", f);
      snprintf(wid, sizeof wid, "fields[%d].width[%d]", f, d);
    }
    if (a[0] != b[0])
      return gw__halo_fail(GW_EINVAL,
                           "%s: %s dtype: rank %d has %s, %s has %s (the faces "
                           "along dim %d must match)",
                           fn, fld, rank, gw_dtype_name((gw_dtype)a[0]), where,
                           gw_dtype_name((gw_dtype)b[0]), d);
    if (a[1] != b[1])
      return gw__halo_fail(GW_EINVAL,
                           "%s: %s: rank %d has %d, %s has %d (the faces along "
                           "dim %d must match)",
                           fn, wid, rank, a[1], where, b[1], d);
    for (int e = 0; e < 3 && a[1] > 0; e++)
      if (a[2 + e] != b[2 + e])
        return gw__halo_fail(GW_EINVAL,
                             "%s: %s extent along dim %d: rank %d has %d, %s "
                             "has %d (the faces along "
                             "dim %d must match)",
                             fn, fld, e, rank, a[2 + e], where, b[2 + e], d);
  }
  return GW_OK;
}

/* Point to point with each neighbour (every rank takes part, whatever it
 * finds): this rank's verdict, recorded; create() (halo_create.c) makes it every
 * rank's. */
gw_status gw__halo_check_neighbours(gw_halo *h, const char *fn, int strict) {
  int dims[3], periods[3], coords[3], peer[3][2], rank = 0;
  gw_status st =
      gw__halo_mpi(MPI_Cart_get(h->comm, h->ndim, dims, periods, coords), "MPI_Cart_get", -1);
  if (st == GW_OK) st = gw__halo_mpi(MPI_Comm_rank(h->comm, &rank), "MPI_Comm_rank", -1);
  for (int d = 0; st == GW_OK && d < h->ndim; d++)
    st = gw__halo_mpi(MPI_Cart_shift(h->comm, d, 1, &peer[d][0], &peer[d][1]), "MPI_Cart_shift", d);
  if (st != GW_OK) return st; /* (MPI failing on the plan's own duplicate: on every rank) */
  size_t per = (size_t)h->nfields * DESC;
  int *mine = malloc(3 * per * sizeof *mine), *theirs = malloc(6 * per * sizeof *theirs);
  /* -1: this rank cannot describe its fields; the pair then skips the second
   * round */
  int my_n = mine && theirs ? h->nfields : -1, their_n[3][2];
  if (my_n < 0) st = gw__halo_fail(GW_ENOMEM, "%s: out of memory", fn);
  for (int d = 0; d < h->ndim && my_n > 0; d++) describe(h, d, mine + (size_t)d * per);
  MPI_Request req[24];
  for (int round = 0; round < 2; round++) {
    int nreq = 0;
    for (int d = 0; d < h->ndim; d++)
      for (int s = 0; s < 2 && dims[d] > 1; s++) {
        if (peer[d][s] == MPI_PROC_NULL || (round == 1 && (my_n < 0 || their_n[d][s] != my_n)))
          continue;
        void *in = round ? (void *)(theirs + (size_t)(2 * d + s) * per) : (void *)&their_n[d][s];
        void *out = round ? (void *)(mine + (size_t)d * per) : (void *)&my_n;
        int count = round ? (int)per : 1;
        int rc =
            MPI_Irecv(in, count, MPI_INT, peer[d][s], tag_check(d, !s, round), h->comm, &req[nreq]);
        if (rc == MPI_SUCCESS) {
          nreq++;
          rc = MPI_Isend(out, count, MPI_INT, peer[d][s], tag_check(d, s, round), h->comm,
                         &req[nreq]);
          nreq += rc == MPI_SUCCESS;
        }
        if (rc != MPI_SUCCESS && st == GW_OK)
          st = gw__halo_mpi(rc, "MPI_Isend/MPI_Irecv (the plan's agreement)", d);
      }
    int rc = MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS && st == GW_OK)
      st = gw__halo_mpi(rc, "MPI_Waitall (the plan's agreement)", -1);
  }
  for (int d = 0; st == GW_OK && d < h->ndim; d++)
    for (int s = 0; st == GW_OK && s < 2 && dims[d] > 1; s++) {
      if (peer[d][s] == MPI_PROC_NULL || their_n[d][s] < 0)
        continue; /* (-1: that rank failed, and says so) */
      if (their_n[d][s] != my_n)
        st = gw__halo_fail(GW_EINVAL,
                           "%s: nfields: rank %d has %d, its %c%c neighbour rank %d has %d (a "
                           "message "
                           "carries every field's face: the neighbours' fields must match)",
                           fn, rank, my_n, s ? '+' : '-', "xyz"[d], peer[d][s], their_n[d][s]);
      else
        st = mismatch(h, fn, strict, d, s, rank, peer[d][s], mine + (size_t)d * per,
                      theirs + (size_t)(2 * d + s) * per);
    }
  free(mine);
  free(theirs);
  return st;
}
