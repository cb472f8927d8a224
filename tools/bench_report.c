/* `gpuwrap bench` outputs: the table, the performance targets (docs/BENCHMARKS.md), JSON
 * and CSV. */
#include "bench.h"

#include <string.h>
#include <unistd.h>

static const char *fmt_stat(const gw_result *r, const gw_stat *s, char *buf, size_t n) {
  if (!s->n) {
    snprintf(buf, n, "%s", "n/a");
  } else if (r->unit == GW_UNIT_BANDWIDTH) {
    /* bandwidth: median, and the range from the slowest to the fastest rep */
    snprintf(buf, n, "%.2f GB/s [%.2f..%.2f]", (double)r->bytes / s->med / 1e9,
             (double)r->bytes / s->max / 1e9, (double)r->bytes / s->min / 1e9);
  } else if (s->med >= 1e-3) {
    snprintf(buf, n, "%.3f ms [%.3f..%.3f]", s->med * 1e3, s->min * 1e3, s->max * 1e3);
  } else {
    snprintf(buf, n, "%.0f ns [%.0f..%.0f]", s->med * 1e9, s->min * 1e9, s->max * 1e9);
  }
  return buf;
}

void gw_bench_print_table(const gw_bench *b, FILE *f) {
  const char *last = "";
  for (int i = 0; i < b->nres; i++) {
    const gw_result *r = &b->res[i];
    if (strcmp(r->section, last) != 0) {
      fprintf(f, "\n%-9s %-28s %9s %3s  %-30s %-30s %7s %6s\n", r->section, "path", "size", "thr",
              "raw median [min..max]", "gpuwrap median [min..max]", "ratio", "allocs");
      last = r->section;
    }
    char sz[32] = "-", a[64], g[64], ratio[16] = "n/a", al[16] = "-";
    if (r->bytes) gw_tool_fmt_size(r->bytes, sz, sizeof sz);
    double q = gw_result_ratio(r);
    if (q >= 0) snprintf(ratio, sizeof ratio, "%.2fx", q);
    if (r->allocs_per_op >= 0) snprintf(al, sizeof al, "%.1f", r->allocs_per_op);
    fprintf(f, "%-9s %-28s %9s %3d  %-30s %-30s %7s %6s\n", "", r->path, sz, r->threads,
            fmt_stat(r, &r->raw, a, sizeof a), fmt_stat(r, &r->gw, g, sizeof g), ratio, al);
  }
  fprintf(f,
          "\nratio: gpuwrap/raw time for latencies (lower is better), gpuwrap/raw bandwidth for\n"
          "bandwidths (higher is better). allocs: heap allocations per gpuwrap operation.\n");
}

/* The single-thread (threaded: multi-thread) result with this section/path and the
 * largest size. */
static const gw_result *find_in(const gw_bench *b, const char *section, const char *path,
                                int threaded) {
  const gw_result *best = NULL;
  for (int i = 0; i < b->nres; i++) {
    const gw_result *r = &b->res[i];
    if (strcmp(r->section, section) || strcmp(r->path, path) || (r->threads > 1) != threaded)
      continue;
    if (!best || r->bytes > best->bytes) best = r;
  }
  return best;
}

static const gw_result *find(const gw_bench *b, const char *section, const char *path) {
  return find_in(b, section, path, 0);
}

typedef struct {
  char what[80], target[40], measured[64];
  int met;  /* 1 met, 0 missed, -1 not measured (or nothing to meet) */
  int info; /* informational: no target in docs/BENCHMARKS.md, never counted as missed */
} target_row;

static int add_row(target_row *rows, int n, const char *what, const char *target, int met,
                   const char *fmt, double v) {
  target_row *t = &rows[n];
  snprintf(t->what, sizeof t->what, "%s", what);
  snprintf(t->target, sizeof t->target, "%s", target);
  if (met < 0)
    snprintf(t->measured, sizeof t->measured, "not measured");
  else
    snprintf(t->measured, sizeof t->measured, fmt, v);
  t->met = met;
  t->info = 0;
  return n + 1;
}

/* A latency row: the raw call's median of the same row beside the measurement ("1.13x,
 * raw 151 ns"). On the H200 test machines the raw query swings between ~55-80 and ~85-170
 * ns with the host's phase, minutes apart, and the query and wrap lines are met in the fast
 * phase and missed in the slow one (docs/BENCHMARKS.md, 2026-12-02): the raw figure tells
 * a reader which phase a run had. Nothing is added where there is no raw side. */
static void with_raw(target_row *t, const gw_result *r) {
  if (t->met < 0 || !r || !r->raw.n) return;
  size_t len = strlen(t->measured);
  snprintf(t->measured + len, sizeof t->measured - len, ", raw %.0f ns", r->raw.med * 1e9);
}

/* An informational row (never counted as missed): v shown when ok, `met` the verdict or -1. */
static int add_info(target_row *rows, int n, const char *what, const char *target, int ok, int met,
                    const char *fmt, double v) {
  n = add_row(rows, n, what, target, ok ? 1 : -1, fmt, v); /* met >= 0 makes add_row format v */
  rows[n - 1].met = ok ? met : -1;
  rows[n - 1].info = 1;
  return n;
}

/*
 * The performance contract (DESIGN.md's table, issue 18), set for an H200: every bound the
 * target lines test, in one place. `--strict` exits 1 when a line is missed.
 */
#define T_QUERY_MAX 1.10    /* gw_pointer_query / raw cuPointerGetAttributes, every kind */
#define T_WRAP_MAX_S 150e-9 /* gw_wrap + gw_release of device/pinned/managed memory */
#define T_WARM_MAX_S \
  150e-9                       /* warm wrap + release of a gw_pin'ned range (DESIGN.md; the
                                  table said 1 us until 2026-12-01, looser than the contract) */
#define T_WRAP_ALLOCS_MAX 1.0  /* heap allocations per gw_wrap (+ release) of device memory */
#define T_WARM_THREADS_MAX 1.3 /* warm wraps vs device wraps, both from N threads */
#define T_FILL_MIN 0.97        /* gw_fill of device memory / raw fill kernel ... */
#define T_FILL_FROM ((size_t)4 << 20) /* ... at every size from 4 MiB (to 1 GiB) */
#define T_PINNED_MIN 0.98             /* device<->pinned copies / raw, largest size */
#define T_D2D_MIN 0.97                /* device->device / raw, largest size */
#define T_LINK_FRAC 0.85              /* pageable copies / the pinned link (raw pinned copy, same */
#define T_LINK_FROM ((size_t)64 << 20)    /* direction and size), every size from 64 MiB */
#define T_PAGEABLE_MIN 2.0                /* pageable copies / raw pageable copy ... */
#define T_PAGEABLE_FROM ((size_t)1 << 20) /* ... at every size from 1 MiB */
#define T_ZEROCOPY_MIN 0.90               /* kernel fill of wrapped pinned memory / the link */

static const gw_result *find_size(const gw_bench *b, const char *section, const char *path,
                                  size_t bytes) {
  for (int i = 0; i < b->nres; i++) {
    const gw_result *r = &b->res[i];
    if (r->threads <= 1 && r->bytes == bytes && !strcmp(r->section, section) &&
        !strcmp(r->path, path))
      return r;
  }
  return NULL;
}

/* The smallest gw/raw ratio of a path over sizes >= from; *at: that size. < 0 if none. */
static double min_ratio_from(const gw_bench *b, const char *section, const char *path, size_t from,
                             size_t *at) {
  double m = -1;
  for (int i = 0; i < b->nres; i++) {
    const gw_result *r = &b->res[i];
    if (r->threads > 1 || r->bytes < from || strcmp(r->section, section) || strcmp(r->path, path))
      continue;
    double q = gw_result_ratio(r);
    if (q >= 0 && (m < 0 || q < m)) {
      m = q;
      *at = r->bytes;
    }
  }
  return m;
}

/* The smallest fraction of the pinned link (raw `link` path at the same size) a pageable
 * path reaches over sizes >= from. */
static double min_link_from(const gw_bench *b, const char *path, const char *link, size_t from,
                            size_t *at) {
  double m = -1;
  for (int i = 0; i < b->nres; i++) {
    const gw_result *r = &b->res[i];
    if (r->threads > 1 || r->bytes < from || strcmp(r->section, "copy") || strcmp(r->path, path) ||
        !r->gw.n)
      continue;
    const gw_result *l = find_size(b, "copy", link, r->bytes);
    double lb = l && l->raw.n ? gw_result_gbps(l, &l->raw) : 0;
    if (lb <= 0) continue;
    double q = gw_result_gbps(r, &r->gw) / lb;
    if (m < 0 || q < m) {
      m = q;
      *at = r->bytes;
    }
  }
  return m;
}

/* "0.93x at 4 MiB" */
static void at_size(char *buf, size_t n, double v, const char *unit, size_t at) {
  char sz[32];
  snprintf(buf, n, "%.2f%s at %s", v, unit, gw_tool_fmt_size(at, sz, sizeof sz));
}

/*
 * Wraps from b->threads threads at once. Under N threads the registry must not become the
 * bottleneck; the runtime query itself serialises. The device wrap shares nothing but the
 * runtime query, so it is the contended floor; a warm pageable wrap adds a registry
 * reference taken and dropped under the registry's read lock. The target: the warm wrap's
 * median within T_WARM_THREADS_MAX of the device wrap's.
 */
static int threaded_wraps(const gw_bench *b, target_row *rows, int n) {
  const gw_result *dev = find_in(b, "wrap", "wrap device (threads)", 1);
  const gw_result *warm = find_in(b, "wrap", "wrap pageable warm (threads)", 1);
  int dok = dev && dev->gw.n, wok = warm && warm->gw.n;
  char thr[24] = "N threads", what[80], tg[40]; /* N: not run (--threads 1) */
  if (b->threads > 1) snprintf(thr, sizeof thr, "%d threads", b->threads);
  snprintf(what, sizeof what, "gw_wrap + gw_release, device memory, %s", thr);
  n = add_info(rows, n, what, "(informational)", dok, -1, "%.0f ns", dok ? dev->gw.med * 1e9 : 0);
  snprintf(what, sizeof what, "warm wrap + release of a gw_pin'ned range, %s", thr);
  n = add_info(rows, n, what, "(informational)", wok, -1, "%.0f ns", wok ? warm->gw.med * 1e9 : 0);
  double q = dok && wok && dev->gw.med > 0 ? warm->gw.med / dev->gw.med : -1;
  snprintf(what, sizeof what, "registry not the bottleneck: warm vs device wrap, %s", thr);
  snprintf(tg, sizeof tg, "<= %.1fx", T_WARM_THREADS_MAX);
  return add_row(rows, n, what, tg, q < 0 ? -1 : q <= T_WARM_THREADS_MAX, "%.2fx", q);
}

static int targets(const gw_bench *b, target_row *rows) {
  int n = 0;
  char tg[40];
  static const char *qk[] = {"device", "pinned", "managed", "pageable"};
  snprintf(tg, sizeof tg, "<= %.2fx raw query", T_QUERY_MAX);
  for (int i = 0; i < 4; i++) {
    char path[64], what[80];
    snprintf(path, sizeof path, "query %s", qk[i]);
    snprintf(what, sizeof what, "gw_pointer_query, %s pointer", qk[i]);
    const gw_result *r = find(b, "query", path);
    double q = r ? gw_result_ratio(r) : -1;
    n = add_row(rows, n, what, tg, q < 0 ? -1 : q <= T_QUERY_MAX, "%.2fx", q);
    with_raw(&rows[n - 1], r);
  }
  static const char *wk[] = {"device", "pinned", "managed"};
  snprintf(tg, sizeof tg, "<= %.0f ns", T_WRAP_MAX_S * 1e9);
  for (int i = 0; i < 3; i++) {
    char path[64], what[80];
    snprintf(path, sizeof path, "wrap %s", wk[i]);
    snprintf(what, sizeof what, "gw_wrap + gw_release, %s memory", wk[i]);
    const gw_result *r = find(b, "wrap", path);
    int ok = r && r->gw.n;
    n = add_row(rows, n, what, tg, ok ? r->gw.med <= T_WRAP_MAX_S : -1, "%.0f ns",
                ok ? r->gw.med * 1e9 : 0);
    with_raw(&rows[n - 1], r);
  }
  {
    /* "one heap allocation" (DESIGN.md): the most any of the three kinds took */
    double most = -1;
    for (int i = 0; i < 3; i++) {
      char path[64];
      snprintf(path, sizeof path, "wrap %s", wk[i]);
      const gw_result *w = find(b, "wrap", path);
      if (w && w->allocs_per_op >= 0 && w->allocs_per_op > most) most = w->allocs_per_op;
    }
    snprintf(tg, sizeof tg, "<= %.0f", T_WRAP_ALLOCS_MAX);
    n = add_row(rows, n, "heap allocations per gw_wrap + gw_release (device/pinned/managed)", tg,
                most < 0 ? -1 : most <= T_WRAP_ALLOCS_MAX, "%.1f", most);
  }
  const gw_result *r = find(b, "wrap", "wrap pageable warm");
  int ok = r && r->gw.n;
  snprintf(tg, sizeof tg, "<= %.0f ns", T_WARM_MAX_S * 1e9);
  n = add_row(rows, n, "warm wrap + release of a gw_pin'ned range", tg,
              ok ? r->gw.med <= T_WARM_MAX_S : -1, "%.0f ns", ok ? r->gw.med * 1e9 : 0);
  n = threaded_wraps(b, rows, n);
  static const struct {
    const char *path, *what;
    double min;
  } cp[] = {
      {"device->pinned", "copy device->pinned (largest size)", T_PINNED_MIN},
      {"pinned->device", "copy pinned->device (largest size)", T_PINNED_MIN},
      {"device->device", "copy device->device (largest size)", T_D2D_MIN},
  };
  for (size_t i = 0; i < sizeof cp / sizeof cp[0]; i++) {
    r = find(b, "copy", cp[i].path);
    double q = r ? gw_result_ratio(r) : -1;
    snprintf(tg, sizeof tg, ">= %.2fx raw", cp[i].min);
    n = add_row(rows, n, cp[i].what, tg, q < 0 ? -1 : q >= cp[i].min, "%.2fx", q);
  }
  /* Pageable copies: against the pinned link from 64 MiB, against the raw pageable copy
   * from 1 MiB; each line reports its worst size. */
  static const struct {
    const char *path, *link, *dir;
  } pg[] = {
      {"host->device", "pinned->device", "pageable host->device"},
      {"device->host", "device->pinned", "device->pageable host"},
  };
  for (size_t i = 0; i < 2; i++) {
    char what[80], m[64] = "not measured";
    size_t at = 0;
    double q = min_link_from(b, pg[i].path, pg[i].link, T_LINK_FROM, &at);
    snprintf(what, sizeof what, "copy %s vs pinned link, every size >= 64 MiB", pg[i].dir);
    snprintf(tg, sizeof tg, ">= %.0f%% of link", T_LINK_FRAC * 100);
    if (q >= 0) at_size(m, sizeof m, q * 100, "%", at);
    n = add_row(rows, n, what, tg, q < 0 ? -1 : q >= T_LINK_FRAC, "%.2f", q);
    snprintf(rows[n - 1].measured, sizeof rows[n - 1].measured, "%s", m);
    q = min_ratio_from(b, "copy", pg[i].path, T_PAGEABLE_FROM, &at);
    snprintf(what, sizeof what, "copy %s vs raw pageable, every size >= 1 MiB", pg[i].dir);
    snprintf(tg, sizeof tg, ">= %.0fx raw pageable", T_PAGEABLE_MIN);
    snprintf(m, sizeof m, "not measured");
    if (q >= 0) at_size(m, sizeof m, q, "x", at);
    n = add_row(rows, n, what, tg, q < 0 ? -1 : q >= T_PAGEABLE_MIN, "%.2f", q);
    snprintf(rows[n - 1].measured, sizeof rows[n - 1].measured, "%s", m);
  }
  {
    char m[64] = "not measured";
    size_t at = 0;
    /* both patterns: the 32-bit one (a memset underneath) and the 8-byte one (the kernel) */
    size_t at64 = 0;
    double q = min_ratio_from(b, "fill", "fill device", T_FILL_FROM, &at);
    double q64 = min_ratio_from(b, "fill", "fill device f64", T_FILL_FROM, &at64);
    if (q64 >= 0 && (q < 0 || q64 < q)) {
      q = q64;
      at = at64;
    }
    snprintf(tg, sizeof tg, ">= %.2fx raw fill", T_FILL_MIN);
    if (q >= 0) at_size(m, sizeof m, q, "x", at);
    n = add_row(rows, n,
                "gw_fill of device memory (f32 and f64) vs raw fill kernel, every size >= 4 MiB",
                tg, q < 0 ? -1 : q >= T_FILL_MIN, "%.2f", q);
    snprintf(rows[n - 1].measured, sizeof rows[n - 1].measured, "%s", m);
  }
  {
    /* Against the runtime's own 32-bit memset, the fastest raw fill: shown, not a target
     * (the target is against a fill kernel, as the issue set it). */
    char m[64] = "not measured";
    size_t at = 0;
    double q = min_ratio_from(b, "fill", "fill device vs memset", T_FILL_FROM, &at);
    if (q >= 0) at_size(m, sizeof m, q, "x", at);
    n = add_info(rows, n,
                 "gw_fill of device memory (f32) vs the runtime's memset, every size >= 4 MiB",
                 "(informational)", q >= 0, -1, "%.2f", q);
    snprintf(rows[n - 1].measured, sizeof rows[n - 1].measured, "%s", m);
  }
  /* Link bandwidth: the raw pinned copy in the kernel's direction (device writes host). */
  const gw_result *link = find(b, "copy", "device->pinned");
  r = find(b, "zerocopy", "fill pinned (zero-copy)");
  double lbw = link ? gw_result_gbps(link, &link->raw) : 0, zbw = r ? gw_result_gbps(r, &r->gw) : 0;
  snprintf(tg, sizeof tg, ">= %.2fx link", T_ZEROCOPY_MIN);
  n = add_row(rows, n, "gw_fill of wrapped pinned memory vs link (raw device->pinned copy)", tg,
              lbw > 0 && zbw > 0 ? zbw / lbw >= T_ZEROCOPY_MIN : -1, "%.2fx",
              lbw > 0 ? zbw / lbw : 0);
  /* The halo's targets (DESIGN.md: <= 0.02 ms one-rank periodic, <= 0.8x the raw stages
   * on two ranks) need MPI ranks: diffusion3d --halo-bench measures them (docs/HALO.md). */
  n = add_info(rows, n, "halo update (diffusion3d --halo-bench measures it)", "(docs/HALO.md)", 0,
               -1, "%g", 0);
  return n;
}

int gw_bench_print_targets(const gw_bench *b, FILE *f) {
  target_row rows[32];
  int n = targets(b, rows), missed = 0;
  /* The bounds are an H200's: the CPU model's figures are shown beside them, never judged
   * against them (a "NO" there would say nothing about gpuwrap), and never missed. */
  int judged = b->backend != GW_BACKEND_CPU;
  if (judged)
    fprintf(f, "\nperformance targets (docs/BENCHMARKS.md; set for an H200)\n");
  else
    fprintf(f, "\nperformance targets (docs/BENCHMARKS.md): set for an H200, so not judged on the "
               "CPU backend\n"
               "(met: n/a; run `gpuwrap bench --backend cuda` on an H200 for verdicts)\n");
  fprintf(f, "%-66s %-22s %-24s %s\n", "what", "target", "measured", "met");
  for (int i = 0; i < n; i++) {
    fprintf(f, "%-66s %-22s %-24s %s\n", rows[i].what, rows[i].target, rows[i].measured,
            !judged           ? "n/a"
            : rows[i].met < 0 ? "-"
            : rows[i].met     ? "yes"
            : rows[i].info    ? "no"
                              : "NO");
    if (judged && rows[i].met == 0 && !rows[i].info) missed++;
  }
  /* More threads than CPUs time the scheduler too: a preempted lock holder stalls the rest. */
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus > 0 && b->threads > cpus)
    fprintf(
        f,
        "(%d threads on %ld CPUs: the threaded rows include time slicing, read them with care)\n",
        b->threads, cpus);
  fprintf(f, "(the halo update is measured by the halo exchange's own benchmark, diffusion3d "
             "--halo-bench, not here)\n");
  return missed;
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

static void json_stat(FILE *f, const gw_stat *s) {
  if (!s->n) {
    fprintf(f, "null");
    return;
  }
  fprintf(f,
          "{\"n\": %d, \"median_s\": %.6e, \"min_s\": %.6e, \"max_s\": %.6e, \"q1_s\": %.6e, "
          "\"q3_s\": %.6e}",
          s->n, s->med, s->min, s->max, s->q1, s->q3);
}

int gw_bench_write_json(const gw_bench *b, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\n  \"tool\": \"gpuwrap bench\",\n  \"version\": \"%d.%d.%d\",\n  \"backend\": ",
          GW_VERSION_MAJOR, GW_VERSION_MINOR, GW_VERSION_PATCH);
  json_str(f, gw_backend_name(b->backend));
  fprintf(f, ",\n  \"device\": %d,\n  \"quick\": %s,\n  \"raw\": ", b->device,
          b->quick ? "true" : "false");
  json_str(f, b->raw.name);
  fprintf(f, ",\n  \"timer\": ");
  json_str(f, b->raw.timer_what);
  fprintf(f, ",\n  \"errors\": %d,\n  \"results\": [\n", b->errors);
  for (int i = 0; i < b->nres; i++) {
    const gw_result *r = &b->res[i];
    fprintf(f, "    {\"section\": ");
    json_str(f, r->section);
    fprintf(f, ", \"path\": ");
    json_str(f, r->path);
    fprintf(f, ", \"bytes\": %zu, \"threads\": %d, \"unit\": \"%s\", \"raw\": ", r->bytes,
            r->threads, r->unit == GW_UNIT_BANDWIDTH ? "bandwidth" : "latency");
    json_stat(f, &r->raw);
    fprintf(f, ", \"gpuwrap\": ");
    json_stat(f, &r->gw);
    double q = gw_result_ratio(r);
    if (q >= 0)
      fprintf(f, ", \"ratio\": %.4f", q);
    else
      fprintf(f, ", \"ratio\": null");
    if (r->allocs_per_op >= 0) fprintf(f, ", \"allocs_per_op\": %.2f", r->allocs_per_op);
    fprintf(f, ", \"note\": ");
    json_str(f, r->note);
    fprintf(f, "}%s\n", i + 1 < b->nres ? "," : "");
  }
  fprintf(f, "  ],\n  \"targets\": [\n");
  target_row rows[32];
  int n = targets(b, rows);
  for (int i = 0; i < n; i++) {
    fprintf(f, "    {\"what\": ");
    json_str(f, rows[i].what);
    fprintf(f, ", \"target\": ");
    json_str(f, rows[i].target);
    fprintf(f, ", \"measured\": ");
    json_str(f, rows[i].measured);
    /* null on the CPU backend, as in the table: the bounds are an H200's */
    int met = b->backend == GW_BACKEND_CPU ? -1 : rows[i].met;
    fprintf(f, ", \"met\": %s, \"informational\": %s}%s\n",
            met < 0 ? "null"
            : met   ? "true"
                    : "false",
            rows[i].info ? "true" : "false", i + 1 < n ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  return fclose(f) == 0 ? 0 : -1;
}

int gw_bench_write_csv(const gw_bench *b, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "section,path,bytes,threads,unit,raw_median_s,raw_min_s,raw_max_s,raw_q1_s,raw_q3_s,"
             "gw_median_s,gw_min_s,gw_max_s,gw_q1_s,gw_q3_s,ratio,allocs_per_op\n");
  for (int i = 0; i < b->nres; i++) {
    const gw_result *r = &b->res[i];
    fprintf(f, "%s,\"%s\",%zu,%d,%s", r->section, r->path, r->bytes, r->threads,
            r->unit == GW_UNIT_BANDWIDTH ? "bandwidth" : "latency");
    const gw_stat *ss[2] = {&r->raw, &r->gw};
    for (int k = 0; k < 2; k++) {
      if (ss[k]->n)
        fprintf(f, ",%.6e,%.6e,%.6e,%.6e,%.6e", ss[k]->med, ss[k]->min, ss[k]->max, ss[k]->q1,
                ss[k]->q3);
      else
        fprintf(f, ",,,,,");
    }
    double q = gw_result_ratio(r);
    if (q >= 0)
      fprintf(f, ",%.4f", q);
    else
      fprintf(f, ",");
    if (r->allocs_per_op >= 0)
      fprintf(f, ",%.2f\n", r->allocs_per_op);
    else
      fprintf(f, ",\n");
  }
  return fclose(f) == 0 ? 0 : -1;
}
