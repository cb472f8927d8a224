/* Small helpers shared by the tool's commands. */
#include "tool.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int gw_tool_parse_backend(const char *s, gw_backend *out) {
  static const struct {
    const char *name;
    gw_backend b;
  } names[] = {{"auto", GW_BACKEND_AUTO},
               {"cpu", GW_BACKEND_CPU},
               {"cuda", GW_BACKEND_CUDA},
               {"hip", GW_BACKEND_HIP}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcasecmp(s, names[i].name) == 0) {
      *out = names[i].b;
      return 0;
    }
  }
  return -1;
}

size_t gw_tool_parse_size(const char *s) {
  char *end = NULL;
  /* digits first: strtoull would take "-1" (as ULLONG_MAX) and leading blanks */
  if (*s < '0' || *s > '9') return 0;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno == ERANGE) return 0;
  unsigned shift = 0;
  switch (*end) {
  case '\0': break;
  case 'k':
  case 'K':
    shift = 10;
    end++;
    break;
  case 'm':
  case 'M':
    shift = 20;
    end++;
    break;
  case 'g':
  case 'G':
    shift = 30;
    end++;
    break;
  default: return 0;
  }
  if (*end == 'i') end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end != '\0') return 0;
  if (v > (unsigned long long)(SIZE_MAX >> shift)) return 0; /* would wrap */
  return (size_t)(v << shift);
}

int gw_tool_parse_int(const char *s, long lo, long hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

const char *gw_tool_fmt_size(size_t bytes, char *buf, size_t n) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  size_t v = bytes;
  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    u++;
  }
  snprintf(buf, n, "%zu %s", v, units[u]);
  return buf;
}

const char *gw_tool_ptrflags(unsigned flags, char *buf, size_t n) {
  buf[0] = '\0';
  if (flags & GW_PTR_GPUWRAP_REGISTERED) snprintf(buf, n, "gpuwrap-registered");
  if (flags & GW_PTR_HOST_REGISTERED) {
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, "%shost-registered", l ? "|" : "");
  }
  unsigned rest = flags & ~(GW_PTR_GPUWRAP_REGISTERED | GW_PTR_HOST_REGISTERED);
  if (rest) {
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, "%s0x%x", l ? "|" : "", rest);
  }
  if (!buf[0]) snprintf(buf, n, "-");
  return buf;
}

void gw_tool_print_ptrinfo(FILE *f, const char *indent, const gw_ptrinfo *pi) {
  char fl[96];
  fprintf(f, "%skind=%s device=%d base=%p extent=%zu device_ptr=%p host_ptr=%p flags=%s\n", indent,
          gw_memkind_name(pi->kind), pi->device, pi->base, pi->extent, pi->device_ptr, pi->host_ptr,
          gw_tool_ptrflags(pi->flags, fl, sizeof fl));
}

double gw_tool_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int gw_tool_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gpuwrap%s%s: ", *cmd ? " " : "", cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nRun 'gpuwrap%s%s --help' for the usage.\n", *cmd ? " " : "", cmd);
  return GW_TOOL_EXIT_USAGE;
}

void gw_tool_context_error(const char *cmd, gw_backend requested, int device, gw_status s) {
  const char *why = gw_last_error(); /* read first: the calls below are gpuwrap calls too */
  char whybuf[512];
  snprintf(whybuf, sizeof whybuf, "%s", why);
  const char *env = NULL; /* the GPUWRAP_BACKEND now, through the library's settings table */
  gw_setting_info si = {.struct_size = sizeof si};
  for (int i = 0; i < gw_setting_count(); i++)
    if (gw_setting_describe(i, &si) == GW_OK && strcmp(si.name, "GPUWRAP_BACKEND") == 0)
      env = si.value;
  if (requested == GW_BACKEND_AUTO && env && *env && strcasecmp(env, "auto") != 0) {
    /* AUTO was overridden: say which backend that made it, not "auto" */
    fprintf(stderr,
            "gpuwrap %s: cannot use the %s backend (GPUWRAP_BACKEND=%s), device %d: %s: %s\n", cmd,
            env, env, device, gw_err_name(s), whybuf);
  } else {
    fprintf(stderr, "gpuwrap %s: cannot use the %s backend, device %d: %s: %s\n", cmd,
            requested == GW_BACKEND_AUTO ? "auto-chosen" : gw_backend_name(requested), device,
            gw_err_name(s), whybuf);
  }
}
