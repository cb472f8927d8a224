/*
 * What every file of the GPU backend needs around a runtime call: failure reports (vendor
 * error -> gw_status and message), the core's settings through the host API, and the
 * current device and capture mode around an operation (gwg_enter / gwg_leave).
 * It calls nothing else in the plugin: the ops table (gpu_backend.c) calls down into the
 * mechanism files (gpu_copy.c, gpu_streams.c, gpu_ipc.c, gpu_staging.c), and they, and
 * gpu_backend.c, call down into this one.
 */
#include "gpu_internal.h"

#include <stdarg.h>
#include <stdio.h>

const gw__host_api *gwg_host;

/* ---- errors ------------------------------------------------------------------------ */

static gw_status map_err(gwv_err e) {
  if (GWV_IS_ALREADY_REGISTERED(e)) return GW_EALREADY;
  if (GWV_IS_NOT_REGISTERED(e)) return GW_ENOTREG;
  if (GWV_IS_OOM(e)) return GW_ENOMEM;
  if (GWV_IS_NODEV(e)) return GW_ENODEV;
  return GW_EBACKEND;
}

static gw_status vfail(gw_status s, gwv_err e, const char *fmt, va_list ap) {
  char what[256];
  vsnprintf(what, sizeof what, fmt, ap);
  /* Non-sticky errors stay in the runtime's last-error slot: clear them, so the caller's
   * next cudaGetLastError() does not report gpuwrap's handled failure as theirs. */
  (void)gwv_GetLastError();
  return gwg_host->fail(s, "%s: %s: %s", what, gwv_GetErrorName(e), gwv_GetErrorString(e));
}

gw_status gwg_setting(gw__setting_id id, long long *out) {
  return gwg_host->setting_int((int)id, out);
}

gw_status gwg_fail(gwv_err e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gw_status s = vfail(map_err(e), e, fmt, ap);
  va_end(ap);
  return s;
}

gw_status gwg_fail_as(gw_status st, gwv_err e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gw_status s = vfail(st, e, fmt, ap);
  va_end(ap);
  return s;
}

/* ---- current device ------------------------------------------------------------------ */

/* Per device, the vendor's token for its primary context (gwv_primary_token), set when a
 * gpuwrap context opens the device; devices past the table take the runtime's answer. */
#define GWG_TOKEN_DEVICES 64
static gwv_ctxtok primary_token[GWG_TOKEN_DEVICES];

void gwg_token_note(int device) {
  if ((unsigned)device < GWG_TOKEN_DEVICES)
    __atomic_store_n(&primary_token[device], gwv_primary_token(device), __ATOMIC_RELAXED);
}

gw_status gwg_enter(int device, gwg_prev *prev) {
  prev->switched = 0;
  prev->mode = gwv_capture_relax();
  gwv_ctxtok want = NULL;
  if ((unsigned)device < GWG_TOKEN_DEVICES) {
    want = __atomic_load_n(&primary_token[device], __ATOMIC_RELAXED);
    if (!want && (want = gwv_primary_token(device)) != NULL) /* it became active */
      __atomic_store_n(&primary_token[device], want, __ATOMIC_RELAXED);
  }
  gwv_ctxtok cur = gwv_current();
  /* Already in the device's primary context (nearly every call): nothing to switch. */
  if (want && cur == want) return GW_OK;
  /* Else the runtime's answer: a thread with no context yet, another device's, or a
   * context of the caller's own (cuCtxCreate) on this device, in which the work then runs
   * as any runtime call of the thread would (docs/API.md, "Current device and context"). */
  int d = 0;
  gwv_err e = gwv_GetDevice(&d);
  if (e != GWV_SUCCESS) {
    gwv_capture_restore(prev->mode);
    return gwg_fail(e, GWV_CALL("GetDevice"));
  }
  if (d != device) {
    if ((e = gwv_SetDevice(device)) != GWV_SUCCESS) {
      gwv_capture_restore(prev->mode);
      return gwg_fail(e, GWV_CALL("SetDevice(%d)"), device);
    }
    prev->switched = 1;
    prev->device = d;
    prev->ctx = cur;
  }
  return GW_OK;
}

void gwg_leave(gwg_prev prev) {
  if (!prev.switched) {
    gwv_capture_restore(prev.mode);
    return;
  }
  /* Switching back to what was current a moment ago cannot fail in a way the caller could
   * act on; the operation's own result is what matters. The context that was current goes
   * back as it was (a primary one, or the caller's own from cuCtxCreate, which
   * cudaSetDevice would replace by that device's primary context, creating it if need
   * be); the runtime takes its device from it. With none current (HIP, or a thread that
   * had not used the device yet), the runtime's device. */
  if (prev.ctx) {
    if (!gwv_set_current(prev.ctx)) (void)gwv_GetLastError();
  } else if (gwv_SetDevice(prev.device) != GWV_SUCCESS) {
    (void)gwv_GetLastError();
  }
  gwv_capture_restore(prev.mode);
}
