/*
 * gpuwrap._gpuwrap: the DLPack C exchange API (DLPack 1.2/1.3, `__dlpack_c_exchange_api__`)
 * both ways, in _exchange.c. What it needs of the rest of the extension comes through
 * these hooks, so that it depends on no file layout of _gpuwrap.c.
 */
#ifndef GPUWRAP_PY_EXCHANGE_H
#define GPUWRAP_PY_EXCHANGE_H

#include <Python.h>

#include "gpuwrap.h"
#include "gpuwrap/dlpack.h"

typedef struct {
  /* A gpuwrap.Context's open handle; NULL with TypeError / ValueError. */
  gw_context *(*context)(PyObject *ctx);
  /* A gpuwrap.Array's handle (borrowed); NULL with ValueError when released. */
  gw_array *(*array)(PyObject *a);
  /* A new gpuwrap.Array object that takes h (released on failure). */
  PyObject *(*array_new)(gw_array *h);
  /* __dlpack__'s wait for a consumer that passed no stream: device types with streams get
   * gpuwrap's pending work ordered before the legacy default stream (on the device), host
   * types wait on the host. 0, or -1 with an exception. */
  int (*export_wait)(gw_array *h, int device_type);
  /* Raise GpuwrapError (buffer: DLPackBufferError) for a failed call; returns NULL. */
  PyObject *(*raise)(int buffer, const char *call, gw_status s);
} gwpy_exchange_hooks;

/* At module init: adds the module's exchange functions and sets the class attribute
 * `__dlpack_c_exchange_api__` of array_type. 0, or -1 with an exception. */
int gwpy_exchange_init(PyObject *module, PyTypeObject *array_type, const gwpy_exchange_hooks *hooks);

#endif
