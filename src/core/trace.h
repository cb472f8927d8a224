/*
 * Compile-time trace points, for the probes of tools/probes: the time between two points
 * of one call, per named span, in a trace build only.
 *
 *     GW_TRACE_NOW(t0);                       a time stamp named t0
 *     ...
 *     GW_TRACE_NOW(t1);
 *     GW_TRACE_SPAN("fill: synchronize", t0, t1);
 *
 * Without GW_TRACE (every build but `cmake -DGW_TRACE=ON`) both are empty statements: no
 * code, no data. In a trace build the spans' samples are kept per file that includes this
 * header (the names are compared as strings, the first 16384 samples of a span kept) and,
 * at exit, their medians and 10th/90th percentiles in ns are printed to stderr: that is what
 * a trace build is for (`GPUWRAP_BACKEND=cuda build/bin/fill_gap`); no other build prints.
 */
#ifndef GW_TRACE_H
#define GW_TRACE_H

#ifndef GW_TRACE

#define GW_TRACE_NOW(t) ((void)0)
#define GW_TRACE_SPAN(name, t0, t1) ((void)0)

#else

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef CLOCK_MONOTONIC
#error \
    "trace.h needs clock_gettime: #define _POSIX_C_SOURCE 200809L before the file's first #include"
#endif

#define GW_TRACE_SPANS 16
#define GW_TRACE_SAMPLES 16384

typedef struct {
  const char *name;
  unsigned n; /* samples taken; the first GW_TRACE_SAMPLES are kept */
  uint32_t ns[GW_TRACE_SAMPLES];
} gw_trace_span;

static gw_trace_span gw_trace_spans[GW_TRACE_SPANS];
static pthread_mutex_t gw_trace_lock = PTHREAD_MUTEX_INITIALIZER;

static inline uint64_t gw_trace_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void gw_trace_add(const char *name, uint64_t t0, uint64_t t1) {
  pthread_mutex_lock(&gw_trace_lock);
  for (int i = 0; i < GW_TRACE_SPANS; i++) {
    gw_trace_span *s = &gw_trace_spans[i];
    if (s->name == NULL) s->name = name;
    if (strcmp(s->name, name) == 0) {
      if (s->n < GW_TRACE_SAMPLES)
        s->ns[s->n] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
      s->n++;
      break;
    }
  }
  pthread_mutex_unlock(&gw_trace_lock);
}

static int gw_trace_cmp(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

__attribute__((destructor)) static void gw_trace_report(void) {
  for (int i = 0; i < GW_TRACE_SPANS && gw_trace_spans[i].name; i++) {
    gw_trace_span *s = &gw_trace_spans[i];
    unsigned k = s->n < GW_TRACE_SAMPLES ? s->n : GW_TRACE_SAMPLES;
    qsort(s->ns, k, sizeof s->ns[0], gw_trace_cmp);
    fprintf(stderr, "gpuwrap trace: %-40s n=%-7u median %6u ns [p10 %u .. p90 %u]\n", s->name, s->n,
            s->ns[k / 2], s->ns[k / 10], s->ns[k * 9 / 10]);
  }
}

#define GW_TRACE_NOW(t) uint64_t t = gw_trace_now()
#define GW_TRACE_SPAN(name, t0, t1) gw_trace_add((name), (t0), (t1))

#endif /* GW_TRACE */

#endif /* GW_TRACE_H */
