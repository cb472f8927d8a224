/*
 * bench sections "zerocopy" (gw_fill of a wrapped pinned host array: a device kernel writing
 * host memory over the link) and "fill" (device and managed memory). Raw side: the raw
 * fill (PTX kernel on CUDA, a store loop on the CPU backend) at the device address of the
 * same memory, both sides synchronous. Device memory has three rows: "fill device", a
 * float32 1.5f (a 32-bit pattern: gpuwrap's CUDA backend takes the runtime's memset for it);
 * "fill device f64", a float64 1.5 (an 8-byte pattern: gpuwrap's own kernel), both against
 * the raw kernel; and "fill device vs memset", the float32 fill against the runtime's own
 * 32-bit memset (cuMemsetD32; CUDA only), the fastest raw call there is.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

typedef enum { FILL_F32, FILL_F64, FILL_F32_VS_MEMSET } fill_variant;

static void fill_kind(gw_bench *b, gw_memkind kind, fill_variant var, const size_t *sizes,
                      int nsizes) {
  if (var == FILL_F32_VS_MEMSET && !b->raw.memset32) return;
  const gw_dtype dt = var == FILL_F64 ? GW_FLOAT64 : GW_FLOAT32;
  const size_t esz = gw_dtype_size(dt);
  size_t want = 2 * sizes[nsizes - 1], rot = (b->quick ? 8u : 256u) << 20;
  if (want < rot) want = rot;
  if (kind == GW_MEM_MANAGED && want > ((size_t)1 << 30)) want = (size_t)1 << 30;
  if (kind != GW_MEM_PINNED)
    while (want > 4096 && want > b->raw.device_free_mem() / 2) want /= 2;
  void *p = NULL, *dp = NULL;
  if (b->raw.alloc(kind, want, &p)) {
    gw_bench_error(b, "fill: no %s memory (%s): not measured", gw_memkind_name(kind),
                   b->raw.last_error());
    return;
  }
  if (kind == GW_MEM_PINNED) {
    if (b->raw.device_ptr(p, &dp)) {
      gw_bench_error(b, "fill: device address of pinned memory: %s", b->raw.last_error());
      b->raw.free(kind, p);
      return;
    }
  } else {
    dp = p;
  }
  int64_t shape[1] = {(int64_t)(want / esz)};
  gw_array *arena = NULL;
  if (gw_wrap(b->ctx, p, dt, 1, shape, NULL, 0, &arena) != GW_OK) {
    gw_bench_error(b, "fill: gw_wrap %s: %s", gw_memkind_name(kind), gw_last_error());
    b->raw.free(kind, p);
    return;
  }
  const float value32 = 1.5f;
  const double value64 = 1.5;
  const void *value = var == FILL_F64 ? (const void *)&value64 : (const void *)&value32;
  uint32_t word;
  memcpy(&word, &value32, 4);
  const char *section = kind == GW_MEM_PINNED ? "zerocopy" : "fill";
  char path[64];
  snprintf(path, sizeof path, kind == GW_MEM_PINNED ? "fill pinned (zero-copy)" : "fill %s%s",
           gw_memkind_name(kind),
           var == FILL_F64             ? " f64"
           : var == FILL_F32_VS_MEMSET ? " vs memset"
                                       : "");
  for (int z = 0; z < nsizes; z++) {
    size_t s = sizes[z], nslot = want / s;
    if (nslot < 1) continue;
    char sz[32];
    gw_bench_progress("%s %s", path, gw_tool_fmt_size(s, sz, sizeof sz));
    gw_result *r = gw_bench_add(b, section, path, s, GW_UNIT_BANDWIDTH);
    snprintf(r->note, sizeof r->note, "raw: %s",
             var == FILL_F32_VS_MEMSET ? "the runtime's 32-bit memset" : b->raw.fill_what);
    int reps = gw_bench_reps(b, s, 9, 200); /* >= 9 pairs: a spread of the ratio */
    double *vr = calloc((size_t)reps, sizeof *vr), *vg = calloc((size_t)reps, sizeof *vg);
    gw_array **views = calloc((size_t)reps + 2, sizeof *views);
    int failed = !vr || !vg || !views;
    for (int k = 0; k < reps + 2 && !failed; k++) {
      /* Slots after the raw side's, so neither side finds the other's data in cache. */
      int64_t start[1] = {(int64_t)(((size_t)(k + reps + 2) % nslot) * s / esz)},
              vshape[1] = {(int64_t)(s / esz)};
      if (gw_view(arena, start, vshape, NULL, &views[k]) != GW_OK) {
        gw_bench_error(b, "%s: gw_view: %s", path, gw_last_error());
        failed = 1;
      }
    }
    /* The two sides take turns, one rep each, which one goes first alternating. A fill of
     * 4-16 MiB is mostly the launch + synchronize round trip (~10 us), whose cost drifts;
     * with the sides run as two blocks, the medians moved 4-5% between runs on the H200
     * (2026-12-01), as much as the gap being measured. Taking turns puts any drift on both. */
    for (int rr = -2; rr < reps && !failed; rr++) {
      for (int side = 0; side < 2 && !failed; side++) {
        int raw_side = (side == 0) == ((rr & 1) == 0);
        double t;
        if (raw_side) {
          size_t off = ((size_t)(rr + 2) % nslot) * s;
          b->raw.timer_begin();
          int bad = (var == FILL_F32_VS_MEMSET ? b->raw.memset32 : b->raw.fill32)((char *)dp + off,
                                                                                  s, word ^ 1u);
          t = b->raw.timer_end();
          if (bad) {
            gw_bench_error(b, "%s raw: %s", path, b->raw.last_error());
            failed = 1;
          }
          if (rr >= 0) vr[rr] = t;
        } else {
          b->raw.timer_begin();
          gw_status st = gw_fill(views[rr + 2], value);
          t = b->raw.timer_end();
          if (st != GW_OK) {
            gw_bench_error(b, "%s gw_fill: %s: %s", path, gw_err_name(st), gw_last_error());
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
      size_t off = ((size_t)(2 * reps + 3) % nslot) * s;
      unsigned char got[2][8] = {{0}};
      if (b->raw.copy(got[0], (char *)p + off, esz) ||
          b->raw.copy(got[1], (char *)p + off + s - esz, esz) || memcmp(got[0], value, esz) ||
          memcmp(got[1], value, esz))
        gw_bench_error(b, "%s %zu bytes: memory does not hold the filled value after gw_fill", path,
                       s);
    }
    for (int k = 0; views && k < reps + 2; k++) gw_bench_release(views[k]);
    free(views);
    free(vr);
    free(vg);
  }
  gw_release(arena);
  b->raw.free(kind, p);
}

void gw_bench_fill(gw_bench *b) {
  size_t sizes[32];
  int nsizes = 0;
  for (size_t s = 4096; s <= b->max_size && nsizes < 32; s *= 4) sizes[nsizes++] = s;
  gw_bench_progress_plan("fill", 5 * nsizes); /* the five fill_kind calls below */
  fill_kind(b, GW_MEM_PINNED, FILL_F32, sizes, nsizes);
  fill_kind(b, GW_MEM_DEVICE, FILL_F32, sizes, nsizes);
  fill_kind(b, GW_MEM_DEVICE, FILL_F64, sizes, nsizes);
  fill_kind(b, GW_MEM_DEVICE, FILL_F32_VS_MEMSET, sizes, nsizes);
  fill_kind(b, GW_MEM_MANAGED, FILL_F32, sizes, nsizes);
  gw_bench_progress_done();
}
