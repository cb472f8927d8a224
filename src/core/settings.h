/*
 * The settings table as ids, for the code that reads a setting: the core and the CPU
 * backend call these directly, the halo library through its export (GW_API, declared
 * here for it), GPU plugins through the host API (backend.h), whose ABI number covers
 * the ids.
 */
#ifndef GW_CORE_SETTINGS_H
#define GW_CORE_SETTINGS_H

#include "gpuwrap.h"
#include "settings_table.h"

typedef enum {
#define GW__SETTING_ID_(id, ...) GW__SET_##id,
  GW__SETTINGS(GW__SETTING_ID_)
#undef GW__SETTING_ID_
      GW__SETTING_COUNT
} gw__setting_id;

/*
 * The value of a BOOL (0/1), INT, BYTES or CHOICE (the choice's index) setting: the
 * default when unset, GW_EINVAL (gw_last_error() naming the variable, the value and what is
 * expected; *out = the default) when the value does not parse or is out of range. Reads
 * the environment on every call: callers that need it once keep what they read.
 */
GW_API gw_status gw__setting_int(gw__setting_id id, long long *out);
/* A TEXT setting's value: the environment's, else its default; NULL when both are empty. */
GW_API const char *gw__setting_text(gw__setting_id id);

#endif /* GW_CORE_SETTINGS_H */
