/* Statistics, the result list, progress and errors of `gpuwrap bench`. */
#include "bench.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
