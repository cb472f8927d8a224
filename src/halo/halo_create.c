/*
 * The halo plan's create sequence. A plan is all or nothing on every rank: each collective
 * step is entered by every rank of the plan's communicator whatever it found before, so a
 * rank that fails first tells the others (gw__halo_agree) before the next collective step,
 * and the result is agreed on at the end. create() is the list of phases; each phase below
 * says which of its steps are this rank's and which are collective.
 */
#include "halo_internal.h"

#include <stdlib.h>

/* Phase 1, before any collective: check `cart` (every rank of it finds the same) and
 * duplicate it, so the plan's messages never meet the caller's. */
static gw_status dup_cart(const char *fn, MPI_Comm cart, MPI_Comm *comm) {
  gw_status st = gw__halo_check_cart(fn, cart);
  if (st != GW_OK) return st;
  return gw__halo_mpi(MPI_Comm_dup(cart, comm), "MPI_Comm_dup", -1);
}

/* Phase 2, this rank's checks: MPI errors returned on the plan's communicator, the private
 * ABI of libgpuwrap, the arguments (`missing`: a NULL argument of gw_halo_create, found
 * before create) and the settings. Local: the agreement after it makes a failure every
 * rank's. */
static gw_status check_local(const char *fn, const gw_halo_field *fields, int nfields,
                             MPI_Comm comm, gw_halo_path path, gw_halo **out, int strict,
                             const char *missing, gw__halo_settings *set) {
  gw_status st =
      gw__halo_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", -1);
  /* This library calls libgpuwrap's private ABI (private.h): a libgpuwrap of
   * another build fails here, with both numbers, before any such call. */
  if (st == GW_OK && gw__private_abi() != GW__PRIVATE_ABI)
    st = gw__halo_fail(GW_EINVAL,
                       "%s: libgpuwrap has private ABI %d, this gpuwrap_halo "
                       "was built for %d (install "
                       "both from one build)",
                       fn, gw__private_abi(), GW__PRIVATE_ABI);
  if (st == GW_OK)
    st = missing ? gw__halo_fail(GW_EINVAL, "%s: %s is NULL", fn, missing)
                 : gw__halo_check_args(fn, fields, nfields, comm, path, out, strict);
  /* a bad setting is this rank's error, which the agreement after makes every
   * rank's */
  if (st == GW_OK) st = gw__halo_read_settings(fn, set);
  return st;
}

/* Phase 3, this rank's: the plan and its per-field arrays, owning `comm` from here on
 * (gw__halo_plan_free frees it). NULL, or a plan with NULL arrays, when out of memory. */
static gw_halo *alloc_plan(MPI_Comm comm, const gw__halo_settings *set, int nfields, int ndim) {
  gw_halo *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->set = *set;
  h->comm = comm;
  h->shm_win = MPI_WIN_NULL;
  h->shm_node = MPI_COMM_NULL;
  h->inflight = -1;
  h->nfields = nfields;
  h->ndim = ndim;
  h->field = calloc((size_t)nfields, sizeof *h->field);
  h->width = calloc((size_t)nfields, sizeof *h->width);
  h->face = calloc((size_t)nfields * 3, sizeof *h->face);
  return h;
}

/* Phase 4, collective: NCCL is every rank's path or none's, its communicator spans them
 * all. */
static gw_status agree_nccl(const char *fn, MPI_Comm comm, gw_halo_path path) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  struct {
    int v, rank;
  } in[2] = {{path == GW_HALO_PATH_NCCL ? 0 : 1, rank},
             {path == GW_HALO_PATH_NCCL ? 100 : (int)path, rank}},
    all[2];
  gw_status st =
      gw__halo_mpi(MPI_Allreduce(in, all, 2, MPI_2INT, MPI_MINLOC, comm), "MPI_Allreduce", -1);
  if (st == GW_OK && all[0].v == 0 && all[1].v < 100)
    st = gw__halo_fail(GW_EINVAL,
                       "%s: path: rank %d has nccl, rank %d has %s (the NCCL "
                       "path is every rank's or "
                       "none's)",
                       fn, all[0].rank, all[1].rank, gw_halo_path_name((gw_halo_path)all[1].v));
  return st;
}

/* Phases 2 to 4, up to the plan every rank holds: on failure nothing is left (the plan
 * and the duplicated communicator are freed) and every rank fails alike. */
static gw_status begin(const char *fn, const gw_halo_field *fields, int nfields, MPI_Comm comm,
                       gw_halo_path path, gw_halo **out, int strict, const char *missing,
                       gw_halo **plan) {
  gw__halo_settings set;
  gw_status st = check_local(fn, fields, nfields, comm, path, out, strict, missing, &set);
  gw_halo *h = st == GW_OK ? alloc_plan(comm, &set, nfields, gw_ndim(fields[0].field)) : NULL;
  if (st == GW_OK && (!h || !h->field || !h->width || !h->face))
    st = gw__halo_fail(GW_ENOMEM, "%s: out of memory", fn);
  st = gw__halo_agree(comm, st, fn);
  if (st == GW_OK) st = agree_nccl(fn, comm, path);
  if (st != GW_OK) {
    if (h)
      gw__halo_plan_free(h); /* frees comm too */
    else
      MPI_Comm_free(&comm);
    return st;
  }
  *plan = h;
  return GW_OK;
}

/* Phase 5, this rank's: the fields (retained) and their widths. */
static void take_fields(gw_halo *h, const gw_halo_field *fields) {
  for (int f = 0; f < h->nfields; f++) {
    h->field[f] = gw_retain(fields[f].field);
    for (int d = 0; d < h->ndim; d++) h->width[f][d] = fields[f].width[d];
  }
  h->ctx = gw_array_context(fields[0].field);
}

/* Pieces of large host-path messages pipeline the three stages (pack, MPI, unpack).
 * GPUWRAP_HALO_CHUNK=bytes overrides the size (0: whole messages); the ranks agree on the
 * smallest, as both ends of a message must cut it alike (every rank takes part, whatever
 * path its fields gave it). The device path leaves pipelining to MPI. Collective, with the
 * shared-memory window's decision before it (*node: halo_shm.c). */
static gw_status agree_chunk(gw_halo *h, gw_halo_path path, MPI_Comm *node) {
  unsigned long long c = h->set.chunk, all = 0;
  if (path != GW_HALO_PATH_HOST && path != GW_HALO_PATH_IPC)
    c = 0; /* a device-path neighbour sends whole messages */
  gw_status st = gw__halo_shm_decide(h, path, node);
  if (st == GW_OK)
    st = gw__halo_mpi(MPI_Allreduce(&c, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, h->comm),
                      "MPI_Allreduce", -1);
  h->chunk = (size_t)all;
  return st;
}

/* Phase 6, collective: the path. NCCL (forced, or AUTO's first choice) is decided by every
 * rank together: its communicator is collective, so no rank may take it alone. Then IPC
 * (forced, or AUTO's choice for device fields without a GPU-aware MPI, where it pays:
 * halo_ipc.c), then AUTO's host or device path; then the message pieces. *path becomes the
 * path taken; h->info says it. (Where AUTO picks per mode, this is the host-ordered calls'
 * path, IPC, and phase 12 makes the stream-ordered calls' plan.) */
static gw_status choose_path(gw_halo *h, const char *fn, gw_halo_path *path_io) {
  gw_halo_path path = *path_io;
  int device_ok = 1, device_only = 1;
  for (int f = 0; f < h->nfields; f++) {
    gw_memkind kind = gw_kind(h->field[f]);
    device_only &= kind == GW_MEM_DEVICE;
    device_ok &= (kind == GW_MEM_DEVICE || kind == GW_MEM_MANAGED) && gw_data(h->field[f]) != NULL;
  }
  h->info.gpu_aware = path == GW_HALO_PATH_DEVICE ||
                      gw__halo_gpu_aware(gw_context_backend(h->ctx), h->set.gpu_aware);
  h->info.path = path;
  int use = 0;
  gw_status st = gw__halo_nccl_setup(h, fn, path == GW_HALO_PATH_AUTO || path == GW_HALO_PATH_NCCL,
                                     path == GW_HALO_PATH_NCCL, &use);
  if (st == GW_OK && use) path = GW_HALO_PATH_NCCL;
  MPI_Comm node = MPI_COMM_NULL;
  if (st == GW_OK) st = gw__halo_node_split(h, &node);
  if (st == GW_OK) st = gw__halo_ipc_decide(h, fn, path, device_only, node);
  if (h->ipc) path = GW_HALO_PATH_IPC;
  if (path == GW_HALO_PATH_AUTO)
    path = h->info.gpu_aware && device_ok ? GW_HALO_PATH_DEVICE : GW_HALO_PATH_HOST;
  h->info.path = path;
  if (st == GW_OK) st = agree_chunk(h, path, &node);
  if (node != MPI_COMM_NULL) MPI_Comm_free(&node); /* (not the window's) */
  *path_io = path;
  return st;
}

/* Phase 9 (after 7, faces and local copies, and 8, buffers), this rank's: the plan's
 * stream, where it has anything to copy. */
static gw_status make_stream(gw_halo *h) {
  if (h->info.neighbours + (h->info.bytes_local > 0) == 0) return GW_OK;
  gw_status st = gw_stream_create(h->ctx, &h->stream);
  if (st == GW_ENOTSUP) return GW_OK; /* the backend has no streams: copies run one by one */
  return st == GW_OK ? GW_OK : gw__halo_call_failed(st, "gw_stream_create", -1);
}

static gw_status create(const char *fn, const gw_halo_field *fields, int nfields, MPI_Comm cart,
                        gw_halo_path path, gw_halo **out, int strict, const char *missing) {
  MPI_Comm comm = MPI_COMM_NULL;
  gw_status st = dup_cart(fn, cart, &comm); /* 1 */
  if (st != GW_OK) return st;
  gw_halo *h = NULL;
  st = begin(fn, fields, nfields, comm, path, out, strict, missing, &h); /* 2-4 */
  if (st != GW_OK) return st;
  take_fields(h, fields);         /* 5 */
  st = choose_path(h, fn, &path); /* 6 */
  int failed = st != GW_OK;       /* (alike on every rank so far) */
  /* 7: what each message's two ends must share (its own agreement: every rank fails
   * alike), then this rank's faces, messages and local copies */
  if (st == GW_OK)
    st = gw__halo_agree_once(h->comm, gw__halo_check_neighbours(h, fn, strict), fn, &failed);
  if (st == GW_OK) st = gw__halo_make_dims(h);
  if (st == GW_OK) st = gw__halo_make_self(h);
  /* 8: the buffers are made collectively (the shared-memory window, the neighbours'
   * offsets in it): every rank goes there or none, and learns afterwards whether every
   * rank's worked. */
  st = gw__halo_agree_once(h->comm, st, fn, &failed);
  /* (IPC: whether the packs go straight into the neighbours' ghost cells, every rank's
   * choice alike; an MPI failure of one rank is every rank's before the buffers) */
  if (st == GW_OK) st = gw__halo_agree_once(h->comm, gw__halo_ipc_ghosts(h), fn, &failed);
  if (st == GW_OK)
    st =
        gw__halo_make_buffers(h, path == GW_HALO_PATH_DEVICE || path == GW_HALO_PATH_NCCL, &failed);
  if (st == GW_OK) st = make_stream(h); /* 9 */
  /* 10: NCCL's first exchange is collective: no rank enters it alone */
  if (h->nccl) st = gw__halo_agree_once(h->comm, st, fn, &failed);
  if (st == GW_OK && h->nccl && h->stream) st = gw__halo_nccl_connect(h);
  /* 11: a plan on some ranks only would leave the others waiting in their first update */
  st = gw__halo_agree_once(h->comm, st, fn, &failed);
  /* (IPC into the ghost cells: whether the packs signal on the device, every rank's
   * choice alike) */
  if (st == GW_OK) st = gw__halo_agree_once(h->comm, gw__halo_ipc_signal(h), fn, &failed);
  /* 12: AUTO per mode (h->per_mode, alike on every rank: gw__halo_ipc_decide): the
   * stream-ordered calls' plan over the same fields, on the host path AUTO takes without
   * IPC (the IPC choice needs MPI not GPU-aware, and NCCL was not taken). A whole create
   * of its own, ending in its own agreement: it fails on every rank alike, and this plan
   * is then freed on every rank alike. */
  if (st == GW_OK && h->per_mode)
    st = create(fn, fields, nfields, cart, GW_HALO_PATH_HOST, &h->alt, strict, NULL);
  if (st != GW_OK) {
    gw__halo_plan_free(h);
    return st;
  }
  h->info.path_stream_ordered = h->info.path;
  if (h->alt) {
    h->info.path_stream_ordered = h->alt->info.path;
    h->info.buffer_bytes += h->alt->info.buffer_bytes;
    h->info.shared_memory |= h->alt->info.shared_memory;
  }
  *out = h;
  return GW_OK;
}

gw_status gw_halo_create(gw_array *field, MPI_Comm cart, const int width[3], gw_halo_path path,
                         gw_halo **out) {
  /* a NULL argument fails in create(), on every rank alike, not here before its
   * collectives */
  const char *missing = !field ? "field" : !width ? "width" : !out ? "out" : NULL;
  gw_halo_field one = {field, {width ? width[0] : 0, width ? width[1] : 0, width ? width[2] : 0}};
  return create("gw_halo_create", &one, 1, cart, path, out, 1, missing);
}

gw_status gw_halo_create_multi(const gw_halo_field fields[], int nfields, MPI_Comm cart,
                               gw_halo_path path, gw_halo **out) {
  return create("gw_halo_create_multi", fields, nfields, cart, path, out, 0, NULL);
}
