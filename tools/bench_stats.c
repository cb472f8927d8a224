/* Statistics, the result list, progress and errors of `gpuwrap bench`. */
#include "bench.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Linear interpolation between order statistics of sorted v. */
static double quantile(const double *v, int n, double q) {
  double pos = q * (n - 1);
  int i = (int)pos;
  if (i >= n - 1) return v[n - 1];
  return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

gw_stat gw_stat_of(double *samples, int n) {
  gw_stat s;
  memset(&s, 0, sizeof s);
  if (n <= 0) return s;
  qsort(samples, (size_t)n, sizeof *samples, cmp_double);
  s.n = n;
  s.min = samples[0];
  s.max = samples[n - 1];
  s.med = quantile(samples, n, 0.5);
  s.q1 = quantile(samples, n, 0.25);
  s.q3 = quantile(samples, n, 0.75);
  return s;
}

gw_stat gw_paired_of(const double *raw, const double *gw, int n, int bandwidth) {
  gw_stat s;
  memset(&s, 0, sizeof s);
  double *q = n > 0 ? malloc((size_t)n * sizeof *q) : NULL;
  if (!q) return s;
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (!(raw[i] > 0) || !(gw[i] > 0)) continue; /* a round below the timer's resolution */
    q[m++] = bandwidth ? raw[i] / gw[i] : gw[i] / raw[i];
  }
  s = gw_stat_of(q, m);
  free(q);
  return s;
}

void gw_bench_timer_floor(gw_bench *b) {
  struct timespec res;
  b->timer_res_s = clock_getres(CLOCK_MONOTONIC, &res) == 0
                       ? (double)res.tv_sec + (double)res.tv_nsec * 1e-9
                       : 0;
  enum { ROUNDS = 31, STEPS = 2000 };
  double read[ROUNDS], loop[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = gw_tool_now();
    for (int k = 0; k < STEPS; k++) (void)gw_tool_now();
    read[r] = (gw_tool_now() - t0) / STEPS;
    /* the batches' loop around nothing: what a batch of a timed row costs on its own */
    t0 = gw_tool_now();
    for (int k = 0; k < STEPS; k++) __asm__ __volatile__("" ::: "memory");
    loop[r] = (gw_tool_now() - t0) / STEPS;
  }
  b->timer_read_s = gw_stat_of(read, ROUNDS).med;
  b->empty_loop_s = gw_stat_of(loop, ROUNDS).med;
}

gw_verdict gw_bench_verdict(double lo, double hi, double target, int at_most) {
  if (!(lo > 0) || !(hi >= lo)) return GW_VERDICT_NONE;
  if (at_most)
    return hi <= target ? GW_VERDICT_YES : lo > target ? GW_VERDICT_NO : GW_VERDICT_UNSURE;
  return lo >= target ? GW_VERDICT_YES : hi < target ? GW_VERDICT_NO : GW_VERDICT_UNSURE;
}

gw_verdict gw_verdict_all(gw_verdict a, gw_verdict b) {
  if (a == GW_VERDICT_NO || b == GW_VERDICT_NO) return GW_VERDICT_NO;
  if (a == GW_VERDICT_UNSURE || b == GW_VERDICT_UNSURE) return GW_VERDICT_UNSURE;
  if (a == GW_VERDICT_YES || b == GW_VERDICT_YES) return GW_VERDICT_YES;
  return GW_VERDICT_NONE;
}

int gw_bench_self_test(FILE *f) {
  static const struct {
    double lo, hi, target;
    int at_most;
    gw_verdict want;
  } vc[] = {
      /* "<= 1.10x": the spread below, above, across, touching the bound */
      {1.02, 1.08, 1.10, 1, GW_VERDICT_YES},
      {1.12, 1.19, 1.10, 1, GW_VERDICT_NO},
      {1.07, 1.13, 1.10, 1, GW_VERDICT_UNSURE},
      {1.05, 1.10, 1.10, 1, GW_VERDICT_YES},
      {1.10, 1.12, 1.10, 1, GW_VERDICT_UNSURE},
      {1.11, 1.11, 1.10, 1, GW_VERDICT_NO},
      /* ">= 0.97x" */
      {0.98, 1.03, 0.97, 0, GW_VERDICT_YES},
      {0.92, 0.94, 0.97, 0, GW_VERDICT_NO},
      {0.95, 0.99, 0.97, 0, GW_VERDICT_UNSURE},
      {0.97, 0.99, 0.97, 0, GW_VERDICT_YES},
      {0.95, 0.97, 0.97, 0, GW_VERDICT_UNSURE},
      /* not measured: no spread, or a spread that is not one */
      {0, 0, 1.10, 1, GW_VERDICT_NONE},
      {-1, -1, 0.97, 0, GW_VERDICT_NONE},
      {1.2, 1.1, 1.10, 1, GW_VERDICT_NONE},
  };
  static const struct {
    gw_verdict a, b, want;
  } ac[] = {
      {GW_VERDICT_YES, GW_VERDICT_YES, GW_VERDICT_YES},
      {GW_VERDICT_YES, GW_VERDICT_UNSURE, GW_VERDICT_UNSURE},
      {GW_VERDICT_UNSURE, GW_VERDICT_NO, GW_VERDICT_NO},
      {GW_VERDICT_NONE, GW_VERDICT_YES, GW_VERDICT_YES},
      {GW_VERDICT_NONE, GW_VERDICT_NONE, GW_VERDICT_NONE},
  };
  int bad = 0, n = 0;
  for (size_t i = 0; i < sizeof vc / sizeof vc[0]; i++, n++) {
    gw_verdict v = gw_bench_verdict(vc[i].lo, vc[i].hi, vc[i].target, vc[i].at_most);
    if (v != vc[i].want)
      bad += fprintf(f, "verdict [%.2f..%.2f] %s %.2f: got %d, want %d\n", vc[i].lo, vc[i].hi,
                     vc[i].at_most ? "<=" : ">=", vc[i].target, (int)v, (int)vc[i].want) > 0;
  }
  for (size_t i = 0; i < sizeof ac / sizeof ac[0]; i++, n++) {
    gw_verdict v = gw_verdict_all(ac[i].a, ac[i].b);
    if (v != ac[i].want)
      bad += fprintf(f, "all(%d, %d): got %d, want %d\n", (int)ac[i].a, (int)ac[i].b, (int)v,
                     (int)ac[i].want) > 0;
  }
  /* Paired rounds: latency gw/raw, bandwidth raw/gw per round; the median and quartiles of
   * those, not the ratio of the sides' medians. Rounds of 0 s (below the timer) are left out. */
  {
    const double raw[5] = {100, 200, 100, 200, 0}, gw[5] = {110, 220, 120, 200, 5};
    gw_stat l = gw_paired_of(raw, gw, 5, 0), w = gw_paired_of(raw, gw, 5, 1);
    n += 2;
    if (l.n != 4 || l.min != 1.0 || l.max != 1.2 || l.med < 1.0999 || l.med > 1.1001)
      bad += fprintf(f, "paired latency: n %d med %g [%g..%g]\n", l.n, l.med, l.min, l.max) > 0;
    if (w.n != 4 || w.max != 1.0 || w.min < 0.8333 || w.min > 0.8334)
      bad += fprintf(f, "paired bandwidth: n %d med %g [%g..%g]\n", w.n, w.med, w.min, w.max) > 0;
  }
  fprintf(f, "gpuwrap bench --self-test: %s%d of %d cases passed\n", bad ? "FAILED, " : "", n - bad,
          n);
  return bad ? 1 : 0;
}

gw_result *gw_bench_add(gw_bench *b, const char *section, const char *path, size_t bytes,
                        gw_unit unit) {
  if (b->nres == b->cap) {
    int cap = b->cap ? 2 * b->cap : 256;
    gw_result *r = realloc(b->res, (size_t)cap * sizeof *r);
    if (!r) {
      fprintf(stderr, "gpuwrap bench: out of memory\n");
      exit(1);
    }
    b->res = r;
    b->cap = cap;
  }
  gw_result *r = &b->res[b->nres++];
  memset(r, 0, sizeof *r);
  snprintf(r->section, sizeof r->section, "%s", section);
  snprintf(r->path, sizeof r->path, "%s", path);
  r->bytes = bytes;
  r->unit = unit;
  r->threads = 1;
  r->allocs_per_op = -1;
  return r;
}

static int progress_open;
static const char *progress_section = "";
static int progress_n, progress_total, progress_miscounts;

void gw_bench_progress_plan(const char *section, int total) {
  progress_section = section;
  progress_n = 0;
  progress_total = total;
}

int gw_bench_progress_miscounts(void) { return progress_miscounts; }

void gw_bench_error(gw_bench *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (progress_open) fputc('\n', stderr);
  progress_open = 0;
  fprintf(stderr, "gpuwrap bench: error: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  b->errors++;
}

void gw_bench_progress(const char *fmt, ...) {
  static int tty = -1;
  if (tty < 0) tty = isatty(STDERR_FILENO);
  va_list ap;
  va_start(ap, fmt);
  progress_n++;
  /* The total is the section's plan, counted before its first step: a line past it is a
   * plan that does not match the section's steps (reported by gw_bench_progress_done),
   * shown as it is rather than by raising the total as the count goes. */
  fprintf(stderr, "%s[bench %s %d/%d] ", tty ? "\r\033[K" : "", progress_section, progress_n,
          progress_total);
  vfprintf(stderr, fmt, ap);
  if (!tty) fputc('\n', stderr);
  fflush(stderr);
  progress_open = tty;
  va_end(ap);
}

void gw_bench_progress_done(void) {
  if (progress_open) fprintf(stderr, "\r\033[K");
  progress_open = 0;
  if (progress_n > progress_total) {
    fprintf(stderr, "gpuwrap bench: error: section %s ran %d steps, its plan said %d\n",
            progress_section, progress_n, progress_total);
    progress_miscounts++;
  }
  progress_n = progress_total = 0;
}

double gw_result_ratio(const gw_result *r) {
  if (!r->raw.n || !r->gw.n || r->raw.med <= 0 || r->gw.med <= 0) return -1;
  return r->unit == GW_UNIT_LATENCY ? r->gw.med / r->raw.med : r->raw.med / r->gw.med;
}

double gw_result_gbps(const gw_result *r, const gw_stat *s) {
  if (!s->n || s->med <= 0) return 0;
  return (double)r->bytes / s->med / 1e9;
}

int gw_bench_reps(const gw_bench *b, size_t bytes, int min_reps, int max_reps) {
  /* Aim at a fixed number of bytes per measurement so large sizes stay affordable. */
  double target = (b->quick ? 64.0 : 1024.0) * 1048576.0 * b->time_scale;
  double r = bytes ? target / (double)bytes : max_reps;
  if (r > max_reps) r = max_reps;
  if (r < min_reps) r = min_reps;
  return (int)r;
}

void *gw_bench_host_alloc(size_t bytes, int touch) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  if (touch) memset(p, 0x5a, bytes);
  return p;
}

void gw_bench_host_free(void *p, size_t bytes) {
  if (p) munmap(p, bytes);
}
