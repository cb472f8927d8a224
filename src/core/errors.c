/* Status text and the thread-local detail behind gw_last_error(). */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

#define GW_LAST_ERROR_MAX 512

static _Thread_local char last_error[GW_LAST_ERROR_MAX];

const char *gw_strerror(gw_status s) {
  switch (s) {
#define GW_STATUS_TEXT_(name, value, text) \
  case name: return text;
    GW_STATUS_TABLE(GW_STATUS_TEXT_)
#undef GW_STATUS_TEXT_
  }
  /* The value itself is the useful part; a per-thread buffer keeps it race-free. */
  static _Thread_local char unknown[48];
  snprintf(unknown, sizeof unknown, "unknown gpuwrap status %d", (int)s);
  return unknown;
}

const char *gw_err_name(gw_status s) {
  switch (s) {
#define GW_STATUS_NAME_(name, value, text) \
  case name: return #name;
    GW_STATUS_TABLE(GW_STATUS_NAME_)
#undef GW_STATUS_NAME_
  }
  return "GW_UNKNOWN";
}

const char *gw_last_error(void) { return last_error; }

gw_status gw__fail(gw_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return s;
}
