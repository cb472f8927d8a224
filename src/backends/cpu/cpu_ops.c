/*
 * The CPU backend's operations table. Each operation is one injection check (so every
 * backend call can be made to fail, with no state changed) followed by the model
 * (cpu_model.c) or the host loops (cpu_copy.c). The backend is synchronous: work is done
 * when a call returns, streams are tokens, and synchronizing waits for nothing.
 */
#include "cpu_internal.h"

#include <stdlib.h>

#define CHECK(op)                                                                           \
  do {                                                                                      \
    gw_status check_ = gw__cpu_check(op);                                                   \
    if (check_ != GW_OK)                                                                    \
      return check_;                                                                        \
  } while (0)

static gw_status config_error(void) {
  const gw__cpu_config *c = gw__cpu_config_get();
  if (c->error)
    return gw__fail(GW_EINVAL, "cpu backend: %s", c->error);
  const char *e = gw__cpu_inject_env_error();
  if (e)
    return gw__fail(GW_EINVAL, "cpu backend: %s", e);
  return GW_OK;
}

static gw_status cpu_device_count(int *count) {
  gw_status st = config_error();
  if (st)
    return st;
  *count = gw__cpu_config_get()->devices;
  return GW_OK;
}

static gw_status cpu_context_init(int device, void **state, gw__caps *caps) {
  CHECK(GW_CPU_OP_CONTEXT_INIT);
  gw_status st = config_error();
  if (st)
    return st;
  const gw__cpu_config *c = gw__cpu_config_get();
  if (device < 0 || device >= c->devices)
    return gw__fail(GW_ENODEV,
                    "cpu backend: no device %d (%d modelled: set GPUWRAP_CPU_DEVICES=N for more, "
                    "at most %d)",
                    device, c->devices, GW__CPU_MAX_DEVICES);
  *caps = (gw__caps){
      .pageable_access = c->pageable_access,
      .host_ptr_for_registered = c->host_ptr_for_registered,
      .tells_registered = 1,
      .kernels = 1,
      .gpu_aware_hint = 0,
      .host_register_readonly = c->readonly_register,
  };
  *state = gw__cpu_device_state(device);
  return GW_OK;
}

/* The state is a static per-device slot: nothing to release. */
static void cpu_context_fini(void *state) { (void)state; }

static gw_status cpu_query(void *state, const void *ptr, gw_ptrinfo *out) {
  (void)state;
  CHECK(GW_CPU_OP_QUERY);
  gw__cpu_model_query(ptr, out);
  return GW_OK;
}

static gw_status cpu_alloc(void *state, gw_memkind kind, size_t bytes, void **out) {
  CHECK(GW_CPU_OP_ALLOC);
  return gw__cpu_model_alloc("alloc", kind, gw__cpu_state_device(state), bytes, out);
}

static gw_status cpu_free(void *state, gw_memkind kind, int device, void *ptr) {
  (void)state;
  CHECK(GW_CPU_OP_FREE);
  return gw__cpu_model_free("free", kind, device, ptr);
}

static gw_status cpu_host_register(void *state, void *base, size_t bytes, unsigned flags) {
  CHECK(GW_CPU_OP_REGISTER);
  return gw__cpu_model_register("host_register", gw__cpu_state_device(state), base, bytes,
                                flags);
}

static gw_status cpu_host_unregister(void *state, void *base) {
  (void)state;
  CHECK(GW_CPU_OP_UNREGISTER);
  return gw__cpu_model_unregister("host_unregister", base);
}

static gw_status cpu_device_address(void *state, void *host, void **dev) {
  (void)state;
  CHECK(GW_CPU_OP_DEVICE_ADDRESS);
  return gw__cpu_model_device_address("device_address", host, dev);
}

static gw_status cpu_copy(void *state, const gw__xfer *x, void *stream) {
  (void)state, (void)stream;
  CHECK(GW_CPU_OP_COPY);
  return gw__cpu_copy(x);
}

static gw_status cpu_fill(void *state, const gw__fillspec *f, void *stream) {
  (void)state, (void)stream;
  CHECK(GW_CPU_OP_FILL);
  return gw__cpu_fill(f);
}

static gw_status cpu_synchronize(void *state) {
  (void)state;
  CHECK(GW_CPU_OP_SYNCHRONIZE);
  return GW_OK;
}

/* A real heap object, so a leaked or doubly destroyed stream shows up under ASan. */
typedef struct {
  int device;
} cpu_stream;

static gw_status cpu_stream_create(void *state, void **stream) {
  CHECK(GW_CPU_OP_STREAM_CREATE);
  cpu_stream *s = malloc(sizeof *s);
  if (!s)
    return gw__fail(GW_ENOMEM, "stream_create: out of memory");
  s->device = gw__cpu_state_device(state);
  *stream = s;
  return GW_OK;
}

static gw_status cpu_stream_destroy(void *state, void *stream) {
  (void)state;
  /* A runtime's stream destroy releases the stream even when it reports an error (the
   * handle is unusable after it either way), and gw_stream_destroy cannot retry: free it
   * before reporting an injected failure. */
  free(stream);
  CHECK(GW_CPU_OP_STREAM_DESTROY);
  return GW_OK;
}

static gw_status cpu_stream_synchronize(void *state, void *stream) {
  (void)state, (void)stream;
  CHECK(GW_CPU_OP_STREAM_SYNCHRONIZE);
  return GW_OK;
}

const gw__backend_ops gw__cpu_ops = {
    .name = "cpu",
    .id = GW_BACKEND_CPU,
    .abi = GW__BACKEND_ABI,
    .device_count = cpu_device_count,
    .context_init = cpu_context_init,
    .context_fini = cpu_context_fini,
    .query = cpu_query,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_register = cpu_host_register,
    .host_unregister = cpu_host_unregister,
    .device_address = cpu_device_address,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .synchronize = cpu_synchronize,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_synchronize = cpu_stream_synchronize,
};
