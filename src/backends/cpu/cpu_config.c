/*
 * The CPU model's environment: the GPUWRAP_CPU_* settings, read once (the devices modelled,
 * what the runtime allows, the streams' delay), the devices a process sees and their UUIDs,
 * and the per-device slots that are the backend's context states. The bottom of the model:
 * every other file of it reads this one, and it calls none of them.
 */
#include "cpu_internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static gw__cpu_config config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static char config_error[160];

typedef struct {
  int device;
} device_slot;
static device_slot slots[GW__CPU_MAX_DEVICES];

/* One setting into *out; the first bad one is kept for context_init to report (a silently
 * clamped device count or delay would make the tests that set them lie). */
static long long setting(gw__setting_id id) {
  long long v;
  if (gw__setting_int(id, &v) != GW_OK && !config.error) {
    snprintf(config_error, sizeof config_error, "%s", gw_last_error());
    config.error = config_error;
  }
  return v;
}

static void read_visible(void);

static void read_config(void) {
  for (int i = 0; i < GW__CPU_MAX_DEVICES; i++) slots[i].device = i;
  _Static_assert(GW__CPU_MAX_DEVICES == 64, "GPUWRAP_CPU_DEVICES' range in settings_table.h");
  config.devices = (int)setting(GW__SET_CPU_DEVICES);
  config.stream_delay_us = setting(GW__SET_CPU_STREAM_DELAY_US);
  config.pageable_access = (int)setting(GW__SET_CPU_PAGEABLE_ACCESS);
  config.host_ptr_for_registered = !setting(GW__SET_CPU_NO_HOST_PTR);
  config.readonly_register = !setting(GW__SET_CPU_NO_READONLY_REGISTER);
  config.mps = (int)setting(GW__SET_CPU_MPS);
  config.ipc_no_alloc_id = (int)setting(GW__SET_CPU_IPC_NO_ALLOC_ID);
  read_visible();
  if (config.error) config.devices = 0;
}

/* GPUWRAP_CPU_VISIBLE_DEVICES, as CUDA_VISIBLE_DEVICES: the machine's model devices (of
 * GPUWRAP_CPU_DEVICES) this process sees, listed in the order of its own ordinals; unset
 * or empty: all of them, in order. A device's UUID is its number on the machine, so two
 * processes that number one device differently agree on its UUID. */
static void read_visible(void) {
  for (int i = 0; i < GW__CPU_MAX_DEVICES; i++) config.physical[i] = i;
  const char *v = gw__setting_text(GW__SET_CPU_VISIBLE_DEVICES);
  if (!v || !*v || config.error) return;
  bool seen[GW__CPU_MAX_DEVICES] = {false};
  int n = 0;
  const char *at = v, *why = NULL;
  while (!why) {
    if (*at < '0' || *at > '9') {
      why = "expected a comma-separated list of device numbers";
      break;
    }
    long d = 0;
    for (; *at >= '0' && *at <= '9'; at++)
      if (d <= GW__CPU_MAX_DEVICES) d = d * 10 + (*at - '0');
    if (d >= config.devices)
      why = "a device number is not below GPUWRAP_CPU_DEVICES";
    else if (seen[d])
      why = "a device is listed twice";
    else if (*at != ',' && *at != '\0')
      why = "expected a comma-separated list of device numbers";
    if (why) break;
    seen[d] = true;
    config.physical[n++] = (int)d;
    if (*at++ == '\0') break;
  }
  if (why) {
    snprintf(config_error, sizeof config_error, "GPUWRAP_CPU_VISIBLE_DEVICES='%.40s': %s", v, why);
    config.error = config_error;
    return;
  }
  config.devices = n;
}

void gw__cpu_device_uuid(int device, unsigned char uuid[16]) {
  const gw__cpu_config *c = gw__cpu_config_get();
  memset(uuid, 0, 16);
  memcpy(uuid, "gw-cpu-model-", 13);
  uuid[14] = (unsigned char)c->physical[device];
}

const gw__cpu_config *gw__cpu_config_get(void) {
  pthread_once(&config_once, read_config);
  return &config;
}

void *gw__cpu_device_state(int device) {
  gw__cpu_config_get();
  return &slots[device];
}

int gw__cpu_state_device(const void *state) { return ((const device_slot *)state)->device; }
