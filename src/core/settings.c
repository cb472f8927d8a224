/*
 * The one parser of the GPUWRAP_* settings (rows in settings_table.h). One policy for all:
 * an empty variable is unset; anything else must parse as its type and lie in its range,
 * or the caller gets GW_EINVAL naming the variable, the value and what was expected. A
 * value that is silently read as something else makes a run measure or test what it did
 * not mean to, so nothing is clamped or guessed.
 */
#include "settings.h"

#include "internal.h"
#include "out_struct.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { T_BOOL, T_INT, T_BYTES, T_CHOICE, T_TEXT } setting_type;

typedef struct {
  const char *name;
  setting_type type;
  const char *def;
  long long min, max;
  const char *choices;
  const char *who;
  const char *doc;
} setting_row;

static const setting_row rows[GW__SETTING_COUNT] = {
#define GW__SETTING_ROW_(id, name, type, def, min, max, choices, who, doc) \
  [GW__SET_##id] = {name, T_##type, def, min, max, choices, who, doc},
    GW__SETTINGS(GW__SETTING_ROW_)
#undef GW__SETTING_ROW_
};

static const char *const type_names[] = {"bool", "int", "bytes", "choice", "text"};

/* Index of word in a '|'-separated list (case-insensitive), -1 if absent. */
static int choice_index(const char *choices, const char *word) {
  size_t n = strlen(word);
  int i = 0;
  for (const char *c = choices; *c; i++) {
    const char *bar = strchr(c, '|');
    size_t len = bar ? (size_t)(bar - c) : strlen(c);
    if (len == n && strncasecmp(c, word, n) == 0) return i;
    if (!bar) break;
    c = bar + 1;
  }
  return -1;
}

/* Parse text as row r; 0 on success, else a reason in why. */
static int parse(const setting_row *r, const char *text, long long *out, char *why, size_t n) {
  switch (r->type) {
  case T_BOOL: {
    static const char *const on[] = {"1", "yes", "on", "true"}, *const off[] = {"0", "no", "off",
                                                                                "false"};
    for (size_t k = 0; k < 4; k++) {
      if (strcasecmp(text, on[k]) == 0) return *out = 1, 0;
      if (strcasecmp(text, off[k]) == 0) return *out = 0, 0;
    }
    snprintf(why, n, "expected 0 or 1 (also yes/no, on/off, true/false)");
    return -1;
  }
  case T_CHOICE: {
    int i = choice_index(r->choices, text);
    if (i >= 0) return *out = i, 0;
    snprintf(why, n, "expected one of %s", r->choices);
    return -1;
  }
  case T_INT:
  case T_BYTES: {
    char *end = NULL;
    errno = 0;
    /* Base 10: a user writes GPUWRAP_CPU_DEVICES=010 meaning ten (base 0 read it as octal
     * 8, and 08 as an error); hexadecimal is no one's way of writing a count. */
    long long v = strtoll(text, &end, 10);
    int ok = end != text && errno == 0 && !isspace((unsigned char)text[0]);
    if (ok && r->type == T_BYTES && *end) {
      int shift = strchr("kK", *end) ? 10 : strchr("mM", *end) ? 20 : strchr("gG", *end) ? 30 : -1;
      ok = shift >= 0 && !end[1] && v >= 0 && v <= (LLONG_MAX >> shift);
      if (ok) v <<= shift, end++;
    }
    if (ok && !*end && v >= r->min && v <= r->max) return *out = v, 0;
    snprintf(why, n, "expected %s from %lld to %lld%s",
             r->type == T_BYTES ? "a byte count" : "an integer", r->min, r->max,
             r->type == T_BYTES ? " (suffix k, m or g for KiB, MiB, GiB)" : "");
    return -1;
  }
  case T_TEXT: return 0;
  }
  return -1;
}

static const char *env_value(const setting_row *r) {
  const char *v = getenv(r->name);
  return v && *v ? v : NULL;
}

gw_status gw__setting_int(gw__setting_id id, long long *out) {
  if ((unsigned)id >= GW__SETTING_COUNT || !out)
    return gw__fail(GW_EINVAL, "setting id %d: out of the table", (int)id);
  const setting_row *r = &rows[id];
  char why[160];
  long long def = 0;
  if (parse(r, r->def, &def, why, sizeof why) != 0)
    def = 0; /* the table's own defaults parse (test_settings) */
  *out = def;
  const char *v = env_value(r);
  if (!v) return GW_OK;
  long long got;
  if (parse(r, v, &got, why, sizeof why) != 0)
    return gw__fail(GW_EINVAL, "%s='%.64s': %s", r->name, v, why);
  *out = got;
  return GW_OK;
}

const char *gw__setting_text(gw__setting_id id) {
  if ((unsigned)id >= GW__SETTING_COUNT) return NULL;
  const char *v = env_value(&rows[id]);
  return v ? v : *rows[id].def ? rows[id].def : NULL;
}

int gw_setting_count(void) { return GW__SETTING_COUNT; }

static const size_t layouts[] = GW__SETTING_INFO_LAYOUTS;
GW__LAYOUTS_CHECK(gw_setting_info, GW__SETTING_INFO_LAST);

static void describe(const setting_row *r, gw_setting_info *out) {
  memset(out, 0, sizeof *out);
  out->name = r->name;
  out->type = type_names[r->type];
  out->default_value = r->def;
  out->component = r->who;
  out->doc = r->doc;
  out->value = env_value(r);
  out->valid = 1;
  if (r->type == T_CHOICE)
    snprintf(out->range, sizeof out->range, "%s", r->choices);
  else if (r->type == T_BOOL)
    snprintf(out->range, sizeof out->range, "0|1");
  else if (r->type != T_TEXT)
    snprintf(out->range, sizeof out->range, "%lld..%lld", r->min, r->max);
  long long v;
  if (out->value && parse(r, out->value, &v, out->problem, sizeof out->problem) != 0)
    out->valid = 0;
}

gw_status gw_setting_describe(int i, gw_setting_info *out) {
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (i < 0 || i >= GW__SETTING_COUNT)
    return gw__fail(GW_EINVAL, "i: %d is not in [0, %d)", i, GW__SETTING_COUNT);
  gw_setting_info full;
  describe(&rows[i], &full);
  gw__out_copy(out, &full, layouts, sizeof layouts / sizeof layouts[0]);
  return GW_OK;
}

gw_status gw_settings_check(void) {
  for (int i = 0; i < GW__SETTING_COUNT; i++) {
    const char *v = env_value(&rows[i]);
    long long got;
    char why[160];
    if (v && parse(&rows[i], v, &got, why, sizeof why) != 0)
      return gw__fail(GW_EINVAL, "%s='%.64s': %s", rows[i].name, v, why);
  }
  return GW_OK;
}
