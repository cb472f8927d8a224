/*
 * _exchange_testmod: the DLPack C exchange API's other side, for tests/python/test_exchange.py
 * only (never part of the installed package). conftest.py compiles it with the interpreter
 * running the tests (fixture exchange_testmod); it needs Python.h and gpuwrap/dlpack.h, and
 * nothing of libgpuwrap.
 *
 * A hand-made producer (producer_api, producer_set), for gpuwrap.from_dlpack to consume,
 * and a C consumer (call) that calls any table, gpuwrap.Array's included, as a consumer
 * written in C would.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "gpuwrap/dlpack.h"

static const char API_NAME[] = "dlpack_exchange_api";

/* ---- the producer -------------------------------------------------------------------------- */
/*
 * producer_api(name, major, prev_major): a capsule named `name` over a table whose
 * from_py_object reads obj._spec = (address, (code, bits), shape, strides, byte_offset,
 * readonly, (device_type, device_id)) and keeps obj alive until the tensor's deleter;
 * current_work_stream answers the stream set by producer_set(stream, fail) (without
 * arguments it only returns (converted, deleted, stream queries)). With
 * prev_major >= 0 the table's major is `major` and prev_api points to one of prev_major.
 * fail: 1 TypeError, 2 BufferError from the conversion; 3 current_work_stream fails.
 */
static atomic_long t_converted, t_deleted, t_queried;
static void *t_stream;
static int t_fail;

typedef struct {
  DLManagedTensorVersioned t;
  PyObject *keep;
  int64_t dims[2 * 32];
} test_tensor;

static void test_deleter(DLManagedTensorVersioned *self) {
  test_tensor *tt = (test_tensor *)self;
  if (Py_IsInitialized()) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(tt->keep);
    PyGILState_Release(g);
  }
  atomic_fetch_add(&t_deleted, 1);
  PyMem_RawFree(tt);
}

static int test_from_py_object(void *py_object, DLManagedTensorVersioned **out) {
  if (t_fail == 1 || t_fail == 2) {
    PyErr_SetString(t_fail == 1 ? PyExc_TypeError : PyExc_BufferError, "test producer: refused");
    return -1;
  }
  PyObject *spec = PyObject_GetAttrString(py_object, "_spec");
  if (!spec) return -1;
  unsigned long long addr, off;
  int code, bits, ro, dtype_, did;
  PyObject *shape, *strides;
  int ok = PyArg_ParseTuple(spec, "K(ii)OOKp(ii)", &addr, &code, &bits, &shape, &strides, &off, &ro,
                            &dtype_, &did);
  test_tensor *tt = NULL;
  Py_ssize_t n = ok ? PyTuple_Size(shape) : -1;
  if (ok && (n < 0 || n > 32 || PyTuple_Size(strides) != n)) {
    PyErr_SetString(PyExc_ValueError, "test producer: shape/strides");
    ok = 0;
  }
  if (ok && !(tt = PyMem_RawCalloc(1, sizeof *tt))) {
    PyErr_NoMemory();
    ok = 0;
  }
  for (Py_ssize_t i = 0; ok && i < n; i++) {
    tt->dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    tt->dims[32 + i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
    if (PyErr_Occurred()) ok = 0;
  }
  Py_DECREF(spec);
  if (!ok) {
    PyMem_RawFree(tt);
    return -1;
  }
  tt->t = (DLManagedTensorVersioned){.version = {1, 3},
                                     .manager_ctx = tt,
                                     .deleter = test_deleter,
                                     .flags = ro ? DLPACK_FLAG_BITMASK_READ_ONLY : 0,
                                     .dl_tensor = {.data = (void *)(uintptr_t)addr,
                                                   .device = {(DLDeviceType)dtype_, did},
                                                   .ndim = (int32_t)n,
                                                   .dtype = {(uint8_t)code, (uint8_t)bits, 1},
                                                   .shape = tt->dims,
                                                   .strides = tt->dims + 32,
                                                   .byte_offset = off}};
  tt->keep = Py_NewRef((PyObject *)py_object);
  atomic_fetch_add(&t_converted, 1);
  *out = &tt->t;
  return 0;
}

static int test_current_work_stream(DLDeviceType type, int32_t id, void **out) {
  atomic_fetch_add(&t_queried, 1);
  if (t_fail == 3) {
    PyErr_SetString(PyExc_RuntimeError, "test producer: no stream");
    return -1;
  }
  *out = t_stream;
  return 0;
}

static int test_to_py_object(DLManagedTensorVersioned *t, void **out) {
  if (t && t->deleter) t->deleter(t);
  PyErr_SetString(PyExc_NotImplementedError, "test producer: to_py_object");
  return -1;
}

static int test_allocator(DLTensor *p, DLManagedTensorVersioned **o, void *e,
                          void (*set_error)(void *, const char *, const char *)) {
  set_error(e, "NotImplementedError", "test producer: allocator");
  return -1;
}

static void test_api_free(PyObject *cap) {
  PyMem_RawFree(PyCapsule_GetPointer(cap, PyCapsule_GetName(cap)));
}

static PyObject *producer_api(PyObject *m, PyObject *args) {
  const char *name;
  int major, prev_major;
  if (!PyArg_ParseTuple(args, "sii", &name, &major, &prev_major)) return NULL;
  /* The capsule's name must outlive it: kept after the tables, in the same block. */
  size_t len = strlen(name) + 1;
  DLPackExchangeAPI *api = PyMem_RawCalloc(1, 2 * sizeof *api + len);
  if (!api) return PyErr_NoMemory();
  char *nm = (char *)(api + 2);
  memcpy(nm, name, len);
  for (int i = 0; i < 2; i++)
    api[i] = (DLPackExchangeAPI){.header = {.version = {(uint32_t)major, 3}},
                                 .managed_tensor_allocator = test_allocator,
                                 .managed_tensor_from_py_object_no_sync = test_from_py_object,
                                 .managed_tensor_to_py_object_no_sync = test_to_py_object,
                                 .current_work_stream = test_current_work_stream};
  if (prev_major >= 0) {
    api[1].header.version.major = (uint32_t)prev_major;
    api[0].header.prev_api = &api[1].header;
  }
  PyObject *cap = PyCapsule_New(api, nm, test_api_free);
  if (!cap) PyMem_RawFree(api);
  return cap;
}

static PyObject *producer_set(PyObject *m, PyObject *args) {
  PyObject *stream = NULL;
  int fail = 0;
  if (!PyArg_ParseTuple(args, "|Oi", &stream, &fail)) return NULL;
  if (stream) { /* without arguments: the counts only */
    void *s = stream == Py_None ? NULL : PyLong_AsVoidPtr(stream);
    if (!s && PyErr_Occurred()) return NULL;
    t_stream = s;
    t_fail = fail;
  }
  return Py_BuildValue("(lll)", atomic_load(&t_converted), atomic_load(&t_deleted),
                       atomic_load(&t_queried));
}

/* ---- the consumer ------------------------------------------------------------------------- */

/* call(capsule, what, obj): call a table's function as a consumer in C would.
 * what: "managed" -> (address, shape, strides, readonly, version) and the deleter run;
 * "roundtrip" -> the producer's to_py_object of its own from_py_object's tensor;
 * "view" -> (address, shape, strides) of the non-owning DLTensor; "stream" -> the current
 * work stream of obj (a (device_type, device_id) tuple); "alloc" -> obj = (shape,
 * (code, bits), (device_type, device_id)): the to_py_object of an allocated tensor. */
static void set_error_cb(void *ctx, const char *kind, const char *msg) {
  PyObject *b = PyEval_GetBuiltins();
  PyObject *exc = b ? PyDict_GetItemString(b, kind) : NULL;
  PyErr_SetString(exc ? exc : PyExc_RuntimeError, msg);
  *(int *)ctx = 1;
}

static PyObject *tensor_tuple(const DLTensor *t) {
  PyObject *shape = PyTuple_New(t->ndim), *strides = PyTuple_New(t->ndim);
  for (int i = 0; shape && strides && i < t->ndim; i++) {
    PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(t->shape[i]));
    PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(t->strides[i]));
  }
  if (!shape || !strides) {
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return NULL;
  }
  return Py_BuildValue("(KNN(ii))",
                       (unsigned long long)(uintptr_t)((char *)t->data + t->byte_offset), shape,
                       strides, (int)t->device.device_type, (int)t->device.device_id);
}

static PyObject *call(PyObject *m, PyObject *args) {
  PyObject *cap, *obj;
  const char *what;
  if (!PyArg_ParseTuple(args, "OsO", &cap, &what, &obj)) return NULL;
  const DLPackExchangeAPI *api = PyCapsule_GetPointer(cap, API_NAME);
  if (!api) return NULL;
  if (!strcmp(what, "managed") || !strcmp(what, "roundtrip")) {
    DLManagedTensorVersioned *t = NULL;
    if (api->managed_tensor_from_py_object_no_sync(obj, &t) != 0) return NULL;
    if (!strcmp(what, "roundtrip")) {
      void *o = NULL;
      if (api->managed_tensor_to_py_object_no_sync(t, &o) != 0) return NULL;
      return o;
    }
    PyObject *r = tensor_tuple(&t->dl_tensor);
    PyObject *res =
        r ? Py_BuildValue("(Ni(II))", r, (int)(t->flags & DLPACK_FLAG_BITMASK_READ_ONLY),
                          t->version.major, t->version.minor)
          : NULL;
    if (t->deleter) t->deleter(t);
    return res;
  }
  if (!strcmp(what, "view")) {
    if (!api->dltensor_from_py_object_no_sync) Py_RETURN_NONE;
    DLTensor t;
    if (api->dltensor_from_py_object_no_sync(obj, &t) != 0) return NULL;
    return tensor_tuple(&t);
  }
  if (!strcmp(what, "stream")) {
    int type, id;
    if (!PyArg_ParseTuple(obj, "ii", &type, &id)) return NULL;
    void *s = (void *)1;
    if (api->current_work_stream((DLDeviceType)type, id, &s) != 0) return NULL;
    return PyLong_FromVoidPtr(s);
  }
  if (!strcmp(what, "alloc")) {
    PyObject *shape;
    int code, bits, type, id;
    if (!PyArg_ParseTuple(obj, "O(ii)(ii)", &shape, &code, &bits, &type, &id)) return NULL;
    int64_t dims[32];
    Py_ssize_t n = PyTuple_Size(shape);
    if (n < 0 || n > 32) return PyErr_Format(PyExc_ValueError, "shape");
    for (Py_ssize_t i = 0; i < n; i++) dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    if (PyErr_Occurred()) return NULL;
    DLTensor proto = {.device = {(DLDeviceType)type, id},
                      .ndim = (int32_t)n,
                      .dtype = {(uint8_t)code, (uint8_t)bits, 1},
                      .shape = dims};
    DLManagedTensorVersioned *t = NULL;
    int failed = 0;
    if (api->managed_tensor_allocator(&proto, &t, &failed, set_error_cb) != 0) {
      if (!failed || !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "allocator failed without SetError");
      return NULL;
    }
    void *o = NULL;
    if (api->managed_tensor_to_py_object_no_sync(t, &o) != 0) return NULL;
    return o;
  }
  return PyErr_Format(PyExc_ValueError, "call: what %s", what);
}

static PyMethodDef methods[] = {{"producer_api", producer_api, METH_VARARGS, NULL},
                                {"producer_set", producer_set, METH_VARARGS, NULL},
                                {"call", call, METH_VARARGS, NULL},
                                {NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_exchange_testmod", NULL, -1, methods};

PyMODINIT_FUNC PyInit__exchange_testmod(void) { return PyModule_Create(&moddef); }
