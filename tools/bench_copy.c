/*
 * bench sections "copy" (every pair of host, pinned, device, managed; 4 KiB .. max size)
 * and "face" (halo faces of an N^3 float64 device array to/from packed pinned buffers).
 *
 * Each kind has one arena of at least twice the largest size; rep r of a size uses slot
 * r mod (arena / size), so successive reps touch different memory and caches do not
 * flatter small sizes. The arenas are wrapped (the pageable one with GW_WRAP_NO_REGISTER,
 * so both sides copy pageable memory); the raw copy and gw_copy (between views of the
 * slots) take turns rep by rep. The last rep's slots are compared.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

enum { NK = 4 };
static const gw_memkind kinds[NK] = {GW_MEM_HOST, GW_MEM_PINNED, GW_MEM_DEVICE, GW_MEM_MANAGED};

typedef struct {
  void *p[NK];
  size_t bytes[NK];
} arenas;

static const char *kname(gw_memkind k) { return gw_memkind_name(k); }

static void arena_free(gw_bench *b, arenas *a) {
  for (int i = 0; i < NK; i++) {
    if (!a->p[i]) continue;
    if (kinds[i] == GW_MEM_HOST)
      gw_bench_host_free(a->p[i], a->bytes[i]);
    else
      b->raw.free(kinds[i], a->p[i]);
    a->p[i] = NULL;
  }
}

static void pattern(uint32_t *p, size_t bytes, uint32_t seed) {
  for (size_t i = 0, n = bytes / 4; i < n; i++) p[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

static int arena_alloc(gw_bench *b, arenas *a, size_t want) {
  memset(a, 0, sizeof *a);
  size_t free_mem = b->raw.device_free_mem();
  for (int i = 0; i < NK; i++) {
    size_t n = want;
    if (kinds[i] == GW_MEM_MANAGED && n > ((size_t)1 << 30))
      n = (size_t)1 << 30; /* never more than 1 GiB managed */
    if (kinds[i] == GW_MEM_MANAGED || kinds[i] == GW_MEM_DEVICE)
      while (n > 4096 && n > free_mem / 2) n /= 2; /* and never more than the card has free */
    a->bytes[i] = n;
    int rc = kinds[i] == GW_MEM_HOST ? ((a->p[i] = gw_bench_host_alloc(n, 1)) == NULL)
                                     : b->raw.alloc(kinds[i], n, &a->p[i]);
    if (rc) {
      /* an error, not a skip: its target lines would read "not measured" and --strict pass */
      gw_bench_error(b, "copy: no %s arena of %zu bytes (%s): that kind is not measured",
                     kname(kinds[i]), n,
                     kinds[i] == GW_MEM_HOST ? "mmap failed" : b->raw.last_error());
      a->p[i] = NULL;
    }
  }
  if (!a->p[0]) return -1;
  /* Distinct contents per kind; device memory gets its pattern through the pinned arena. */
  if (a->p[2] && a->p[1]) {
    size_t n = a->bytes[2] < a->bytes[1] ? a->bytes[2] : a->bytes[1];
    pattern(a->p[1], n, 0xdeu);
    if (b->raw.copy(a->p[2], a->p[1], n))
      gw_bench_error(b, "copy: init device arena: %s", b->raw.last_error());
  }
  pattern(a->p[0], a->bytes[0], 0x11u);
  if (a->p[1]) pattern(a->p[1], a->bytes[1], 0x22u);
  if (a->p[3]) pattern(a->p[3], a->bytes[3], 0x33u);
  return 0;
}

/* Compare the head and tail of two equal-sized regions (any kinds) through host copies. */
static int same_ends(gw_bench *b, const char *x, const char *y, size_t s) {
  unsigned char hx[64], hy[64];
  size_t n = s < 32 ? s : 32;
  if (b->raw.copy(hx, x, n) || b->raw.copy(hx + 32, x + s - n, n) || b->raw.copy(hy, y, n) ||
      b->raw.copy(hy + 32, y + s - n, n))
    return 0;
  return memcmp(hx, hy, n) == 0 && memcmp(hx + 32, hy + 32, n) == 0;
}

/* Overwrite the first and last 32 bytes (or all, when fewer) of a region of any kind with
 * eight equal words, which pattern() never writes (its consecutive words differ); 1 on
 * success. */
static int poison_ends(gw_bench *b, char *x, size_t s) {
  unsigned char p[32];
  memset(p, 0xa5, sizeof p);
  size_t n = s < 32 ? s : 32;
  return !b->raw.copy(x, p, n) && !b->raw.copy(x + s - n, p, n);
}

/* The pageable arena is wrapped with GW_WRAP_NO_REGISTER: its copies then take gpuwrap's
 * staged pageable path, the one comparable with the raw copy of pageable memory (a
 * registering wrap would turn it into pinned memory and compare pinned with pageable). */
static gw_array *wrap_bytes(gw_bench *b, void *p, size_t bytes, gw_memkind kind) {
  int64_t shape[1] = {(int64_t)(bytes / 4)};
  gw_array *a = NULL;
  unsigned flags = kind == GW_MEM_HOST ? GW_WRAP_NO_REGISTER : 0;
  if (gw_wrap(b->ctx, p, GW_FLOAT32, 1, shape, NULL, flags, &a) != GW_OK) {
    gw_bench_error(b, "copy: gw_wrap of an arena: %s", gw_last_error());
    return NULL;
  }
  return a;
}

static gw_array *slot_view(gw_bench *b, gw_array *arena, size_t slot, size_t s) {
  int64_t start[1] = {(int64_t)(slot * s / 4)}, shape[1] = {(int64_t)(s / 4)};
  gw_array *v = NULL;
  if (gw_view(arena, start, shape, NULL, &v) != GW_OK)
    gw_bench_error(b, "copy: gw_view: %s", gw_last_error());
  return v;
}

/*
 * One pair of kinds, every size: the raw copy and gw_copy take turns, one rep each, which
 * one goes first alternating (raw gw | gw raw | ...), so a drift of the machine (the link's
 * clock, the host's phase, another tenant) lands on both sides, and the targets are judged
 * on the per-rep ratios. Rep k's raw copy uses slot 2k, its gw_copy slot 2k + 1 (mod the
 * slots a size has), so neither side finds the other's data in cache.
 */
static void copy_pair(gw_bench *b, arenas *a, int si, int di, const size_t *sizes, int nsizes) {
  const int same = si == di;
  char path[64];
  snprintf(path, sizeof path, "%s->%s", kname(kinds[si]), kname(kinds[di]));
  /* The pageable arena is wrapped with GW_WRAP_NO_REGISTER (wrap_bytes): it stays pageable
   * for the raw side's copies too. */
  gw_array *wa_s = wrap_bytes(b, a->p[si], a->bytes[si], kinds[si]);
  gw_array *wa_d = same ? gw_retain(wa_s) : wrap_bytes(b, a->p[di], a->bytes[di], kinds[di]);
  for (int z = 0; z < nsizes && wa_s && wa_d; z++) {
    size_t s = sizes[z], ns = a->bytes[si] / s, nd = a->bytes[di] / s;
    if (ns < (size_t)(same ? 2 : 1) || nd < (size_t)(same ? 2 : 1)) continue;
    char sz[32];
    gw_bench_progress("copy %s %s: raw and gpuwrap, alternating", path,
                      gw_tool_fmt_size(s, sz, sizeof sz));
    gw_result *r = gw_bench_add(b, "copy", path, s, GW_UNIT_BANDWIDTH);
    if (kinds[si] == GW_MEM_HOST || kinds[di] == GW_MEM_HOST)
      snprintf(r->note, sizeof r->note,
               "raw: pageable; gpuwrap: pageable wrapped with GW_WRAP_NO_REGISTER (staged copy)");
    /* >= 9 pairs: the ratio's spread needs a few, even at the largest sizes */
    int reps = gw_bench_reps(b, s, 9, 200);
    size_t nslot = (size_t)reps + 2;
    gw_array **vs = calloc(nslot, sizeof *vs), **vd = calloc(nslot, sizeof *vd);
    double *vr = calloc((size_t)reps, sizeof *vr), *vg = calloc((size_t)reps, sizeof *vg);
    int failed = !vs || !vd || !vr || !vg;
    if (failed) gw_bench_error(b, "copy %s: out of host memory", path);
    size_t so = 0, dof = 0;
    for (size_t k = 0; k < nslot && !failed; k++) {
      so = (2 * k + 1) % ns;
      dof = same ? (so + ns / 2) % ns : (2 * k + 1) % nd;
      /* Views of slots reused across reps are still distinct objects: cheap. */
      vs[k] = slot_view(b, wa_s, so, s);
      vd[k] = slot_view(b, wa_d, dof, s);
      failed = !vs[k] || !vd[k];
    }
    for (int rr = -2; rr < reps && !failed; rr++) {
      size_t k = (size_t)(rr + 2);
      for (int side = 0; side < 2 && !failed; side++) {
        int raw_side = (side == 0) == ((rr & 1) == 0);
        double t;
        if (raw_side) {
          size_t rs = (2 * k) % ns, rd = same ? (rs + ns / 2) % ns : (2 * k) % nd;
          b->raw.timer_begin();
          int bad = b->raw.copy((char *)a->p[di] + rd * s, (char *)a->p[si] + rs * s, s);
          t = b->raw.timer_end();
          if (bad) {
            gw_bench_error(b, "copy %s raw: %s", path, b->raw.last_error());
            failed = 1;
          }
          if (rr >= 0) vr[rr] = t;
        } else {
          b->raw.timer_begin();
          gw_status st = gw_copy(vd[k], vs[k]);
          t = b->raw.timer_end();
          if (st != GW_OK) {
            gw_bench_error(b, "copy %s gw_copy: %s: %s", path, gw_err_name(st), gw_last_error());
            failed = 1;
          }
          if (rr >= 0) vg[rr] = t;
        }
      }
    }
    if (!failed) {
      r->paired = gw_paired_of(vr, vg, reps, 1);
      r->raw = gw_stat_of(vr, reps);
      r->gw = gw_stat_of(vg, reps);
      /* gw_copy copied this source slot into this destination slot before: poison the
       * destination's ends, copy once more (untimed), then compare, so a gw_copy that wrote
       * nothing cannot pass on an earlier copy's bytes. */
      char *dst = (char *)a->p[di] + dof * s;
      if (!poison_ends(b, dst, s) || gw_copy(vd[nslot - 1], vs[nslot - 1]) != GW_OK ||
          !same_ends(b, dst, (char *)a->p[si] + so * s, s))
        gw_bench_error(b, "copy %s %zu bytes: destination differs from source after gw_copy", path,
                       s);
    }
    for (size_t k = 0; k < nslot && vs && vd; k++) {
      gw_bench_release(vs[k]);
      gw_bench_release(vd[k]);
    }
    free(vs);
    free(vd);
    free(vr);
    free(vg);
  }
  gw_bench_release(wa_s);
  gw_bench_release(wa_d);
}

void gw_bench_copy(gw_bench *b) {
  size_t sizes[32];
  int nsizes = 0;
  for (size_t s = 4096; s <= b->max_size && nsizes < 32; s *= 4) sizes[nsizes++] = s;
  size_t want = 2 * sizes[nsizes - 1];
  size_t rot = (b->quick ? 8u : 256u) << 20; /* at least this much memory rotates through */
  if (want < rot) want = rot;
  arenas a;
  if (arena_alloc(b, &a, want)) {
    gw_bench_error(b, "copy: cannot allocate the host arena");
    return;
  }
  int npairs = 0;
  for (int si = 0; si < NK; si++)
    for (int di = 0; di < NK; di++) npairs += a.p[si] && a.p[di];
  gw_bench_progress_plan("copy", npairs * nsizes); /* each size: raw and gpuwrap together */
  for (int si = 0; si < NK; si++)
    for (int di = 0; di < NK; di++)
      if (a.p[si] && a.p[di]) copy_pair(b, &a, si, di, sizes, nsizes);
  arena_free(b, &a);
  gw_bench_progress_done();
}

/* ---- halo faces ---------------------------------------------------------------------- */

void gw_bench_face(gw_bench *b) {
  int64_t n = b->quick ? 64 : 256;
  size_t cube = (size_t)(n * n * n) * 8, face = (size_t)(n * n) * 8;
  void *d = NULL, *h = NULL;
  if (b->raw.alloc(GW_MEM_DEVICE, cube, &d) || b->raw.alloc(GW_MEM_PINNED, face, &h)) {
    gw_bench_error(b, "face: allocation: %s", b->raw.last_error());
    if (d) b->raw.free(GW_MEM_DEVICE, d);
    return;
  }
  memset(h, 0, face);
  int64_t shape[3] = {n, n, n};
  gw_array *dev = NULL;
  if (gw_wrap(b->ctx, d, GW_FLOAT64, 3, shape, NULL, 0, &dev) != GW_OK) {
    gw_bench_error(b, "face: gw_wrap: %s", gw_last_error());
    goto out;
  }
  /* a[z][y][x], x fastest. The face at x = 0 is the most strided one (one element per row). */
  static const char axes[3] = {'x', 'y', 'z'};
  gw_bench_progress_plan("face", 3 * 2); /* each axis, each direction */
  for (int ax = 0; ax < 3; ax++) {
    int64_t start[3] = {0, 0, 0}, fshape[3] = {n, n, n};
    fshape[2 - ax] = 1;
    size_t width = ax == 0 ? 8 : ax == 1 ? (size_t)n * 8 : face;
    size_t height = face / width;
    size_t spitch = ax == 0 ? (size_t)n * 8 : ax == 1 ? (size_t)(n * n) * 8 : face;
    gw_array *view = NULL, *pin = NULL;
    if (gw_view(dev, start, fshape, NULL, &view) != GW_OK ||
        gw_wrap(b->ctx, h, GW_FLOAT64, 3, fshape, NULL, 0, &pin) != GW_OK) {
      gw_bench_error(b, "face %c: view/wrap: %s", axes[ax], gw_last_error());
      gw_bench_release(view);
      continue;
    }
    for (int dir = 0; dir < 2; dir++) {
      char path[64];
      snprintf(path, sizeof path, "%c-face %s", axes[ax],
               dir == 0 ? "device->pinned" : "pinned->device");
      gw_bench_progress("face %s (N=%lld)", path, (long long)n);
      gw_result *r = gw_bench_add(b, "face", path, face, GW_UNIT_BANDWIDTH);
      snprintf(r->note, sizeof r->note, "N=%lld float64; raw: 2-D pitched copy (%zu B x %zu rows)",
               (long long)n, width, height);
      int reps = b->quick ? 9 : 51;
      double *vr = calloc((size_t)reps, sizeof *vr), *vg = calloc((size_t)reps, sizeof *vg);
      int failed = !vr || !vg;
      for (int rr = -2; rr < reps && !failed; rr++) {
        b->raw.timer_begin();
        failed = dir == 0 ? b->raw.copy2d(h, width, d, spitch, width, height)
                          : b->raw.copy2d(d, spitch, h, width, width, height);
        double t = b->raw.timer_end();
        if (rr >= 0) vr[rr] = t;
      }
      if (failed) gw_bench_error(b, "face %s raw: %s", path, b->raw.last_error());
      for (int rr = -2; rr < reps && !failed; rr++) {
        b->raw.timer_begin();
        gw_status st = dir == 0 ? gw_copy(pin, view) : gw_copy(view, pin);
        double t = b->raw.timer_end();
        if (st != GW_OK) {
          gw_bench_error(b, "face %s gw_copy: %s: %s", path, gw_err_name(st), gw_last_error());
          failed = 1;
        }
        if (rr >= 0) vg[rr] = t;
      }
      if (!failed) {
        r->raw = gw_stat_of(vr, reps);
        r->gw = gw_stat_of(vg, reps);
      }
      free(vr);
      free(vg);
    }
    gw_bench_release(view);
    gw_bench_release(pin);
  }
out:
  gw_bench_release(dev);
  b->raw.free(GW_MEM_DEVICE, d);
  b->raw.free(GW_MEM_PINNED, h);
  gw_bench_progress_done();
}
