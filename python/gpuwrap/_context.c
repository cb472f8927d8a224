/*
 * Context: one gw_context per Python object, closed once (close(), `with`, or the
 * collector), while arrays made from it keep the C context alive by their own references.
 * Calls that run without the GIL hold the object (users): a close() meanwhile leaves the
 * destroy to the last of them. Context.wrap is in _wrap.c, Context.ipc_open in _ipc.c.
 */
#include "_gpuwrap.h"

#include <stdio.h>

gw_context *ctx_get(ContextObject *c) {
  if (!c->h) PyErr_SetString(PyExc_ValueError, "gpuwrap: context closed");
  return c->h;
}
gw_context *ctx_hold(ContextObject *c) {
  gw_context *h = ctx_get(c);
  if (h) c->users++;
  return h;
}
void ctx_unhold(ContextObject *c) {
  if (--c->users == 0 && c->pending) {
    gw_context *h = c->pending;
    c->pending = NULL;
    gw_context_destroy(h);
  }
}

/* Only a context in OpenContexts gets a stream kept in AuxStreams: that entry goes with
 * the Context (close), so no export after the close can make one that nothing drops. */
int ctx_is_open(gw_context *h) {
  PyObject *key = PyLong_FromVoidPtr(h);
  if (!key) return -1;
  int r = PySet_Contains(OpenContexts, key);
  Py_DECREF(key);
  return r;
}
static void ctx_forget(gw_context *h) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  PyObject *key = PyLong_FromVoidPtr(h);
  if (key) PySet_Discard(OpenContexts, key);
  Py_XDECREF(key);
  PyErr_Clear();
  PyErr_Restore(et, ev, tb);
}

static PyObject *Context_close(ContextObject *c, PyObject *unused) {
  gw_context *h = c->h;
  if (!h) Py_RETURN_NONE;
  c->h = NULL;
  ctx_forget(h);
  aux_drop(h); /* the stream kept for this context's exports holds a C reference on it */
  if (c->users)
    c->pending = h;
  else
    gw_context_destroy(h);
  Py_RETURN_NONE;
}

static void Context_dealloc(ContextObject *c) {
  if (c->h) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb); /* dealloc may run while an exception is pending */
    PyObject *r = Context_close(c, NULL);
    Py_XDECREF(r);
    PyErr_Restore(et, ev, tb);
  }
  Py_TYPE(c)->tp_free((PyObject *)c);
}

/* One of names[0..n) (compared by value) as its index, or an int taken as it is
 * (the C enum's value; the library checks it): a backend, a memory kind. */
static int parse_name(PyObject *o, const char *what, PyObject *const *names, int n,
                      const char *expected, int *out) {
  if (PyUnicode_Check(o)) {
    for (int i = 0; i < n; i++)
      if (PyUnicode_Compare(o, names[i]) == 0) {
        *out = i;
        return 0;
      }
    if (PyErr_Occurred()) return -1;
    PyErr_Format(PyExc_ValueError, "%s %R: expected one of %s", what, o, expected);
    return -1;
  }
  long long v;
  if (int_arg(o, what, -1, INT_MIN, INT_MAX, &v, NULL) < 0) return -1;
  *out = (int)v;
  return 0;
}

/* A backend name ("auto", "cpu", "cuda", "hip") or its gw_backend value. */
static int parse_backend(PyObject *o, int *out) {
  return parse_name(o, "backend", BackendNames, 4, "'auto', 'cpu', 'cuda', 'hip'", out);
}

static PyObject *Context_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"backend", "device", NULL};
  PyObject *backend = NULL;
  int device = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|Oi:Context", kwlist, &backend, &device)) return NULL;
  int b = 0;
  if (backend && parse_backend(backend, &b) < 0) return NULL;
  gw_context *h = NULL;
  gw_status s;
  Py_BEGIN_ALLOW_THREADS /* loading a plugin, initialising a runtime: slow, touches no object */
      s = gw_context_create((gw_backend)b, device, &h);
  Py_END_ALLOW_THREADS if (s != GW_OK) {
    char call[96];
    snprintf(call, sizeof call, "gw_context_create(%s, %d)",
             b >= 0 && b < 4 ? PyUnicode_AsUTF8(BackendNames[b]) : "?", device);
    return RAISE(call, s);
  }
  ContextObject *c = (ContextObject *)type->tp_alloc(type, 0);
  if (!c) {
    gw_context_destroy(h);
    return NULL;
  }
  c->h = h;
  c->backend = gw_context_backend(h);
  c->device = gw_context_device(h);
  PyObject *key = PyLong_FromVoidPtr(h);
  if (!key || PySet_Add(OpenContexts, key) < 0) {
    Py_XDECREF(key);
    Py_DECREF(c); /* closes h */
    return NULL;
  }
  Py_DECREF(key);
  return (PyObject *)c;
}

static PyObject *Context_get_backend(ContextObject *c, void *u) {
  if (!ctx_get(c)) return NULL;
  return Py_NewRef(BackendNames[c->backend & 3]);
}
static PyObject *Context_get_device(ContextObject *c, void *u) {
  if (!ctx_get(c)) return NULL;
  return PyLong_FromLong(c->device);
}
static PyObject *Context_get_handle(ContextObject *c, void *u) {
  gw_context *h = ctx_get(c);
  return h ? PyLong_FromVoidPtr(h) : NULL;
}
static PyObject *Context_get_closed(ContextObject *c, void *u) {
  return PyBool_FromLong(c->h == NULL);
}

static PyObject *Context_synchronize(ContextObject *c, PyObject *unused) {
  gw_context *h = ctx_hold(c);
  if (!h) return NULL;
  gw_status s;
  Py_BEGIN_ALLOW_THREADS s = gw_synchronize(h);
  Py_END_ALLOW_THREADS ctx_unhold(c);
  if (s != GW_OK) return RAISE("gw_synchronize", s);
  Py_RETURN_NONE;
}

/* A memory kind's name ("host", "pinned", "device", "managed") or its gw_memkind value. */
static int parse_kind(PyObject *o, int *out) {
  return parse_name(o, "kind", KindNames, 5, "'host', 'pinned', 'device', 'managed'", out);
}

static PyObject *Context_alloc(ContextObject *c, PyObject *args) {
  PyObject *kind_o, *dtype_o, *shape_o;
  if (!PyArg_ParseTuple(args, "OOO:alloc", &kind_o, &dtype_o, &shape_o)) return NULL;
  int kind, dt, nd;
  int64_t shape[GW_MAX_DIMS];
  if (parse_kind(kind_o, &kind) < 0 || (dt = dtype_index(dtype_o)) < 0 ||
      (nd = int64_seq(shape_o, shape, "shape")) < 0)
    return NULL;
  gw_context *h = ctx_hold(c);
  if (!h) return NULL;
  gw_array *out = NULL;
  gw_status s;
  Py_BEGIN_ALLOW_THREADS /* cudaMalloc / cudaMallocHost: slow; the context is held */
      s = gw_alloc(h, (gw_memkind)kind, (gw_dtype)dt, nd, shape, &out);
  Py_END_ALLOW_THREADS ctx_unhold(c);
  if (s != GW_OK) {
    char call[64];
    snprintf(call, sizeof call, "gw_alloc('%s')",
             kind >= 0 && kind < 5 ? PyUnicode_AsUTF8(KindNames[kind]) : "?");
    return RAISE(call, s);
  }
  return array_new(out);
}

static PyMethodDef Context_methods[] = {
    {"wrap", (PyCFunction)(void (*)(void))Context_wrap, METH_FASTCALL | METH_KEYWORDS,
     "wrap(obj, dtype, shape, strides=None, *, readonly=False, no_register=False, deleter=None), "
     "wrap(ptr, ..., own=False, ...): wrap an object's memory (buffer protocol, "
     "__array_interface__, "
     "__cuda_array_interface__; kept alive, the span checked: GW_ERANGE outside it) or the memory "
     "at "
     "int address ptr (unchecked), without copying. Strides in elements, not bytes. deleter(ptr) "
     "runs exactly once when the last reference goes."},
    {"alloc", (PyCFunction)Context_alloc, METH_VARARGS,
     "alloc(kind, dtype, shape): a C-contiguous array of 'host', 'pinned', 'device' or 'managed' "
     "memory."},
    {"ipc_open", (PyCFunction)Context_ipc_open, METH_O,
     "ipc_open(handle): an Array over the memory an IpcHandle (or its bytes) of Array.ipc_handle() "
     "describes, from this or another process of the node; the mapping is closed when its last "
     "array goes. Pool and VMM memory: GpuwrapError GW_ENOTSUP naming the cause where the "
     "kernel refuses pidfd_getfd of the exporter's descriptors (docs/IPC.md)."},
    {"synchronize", (PyCFunction)Context_synchronize, METH_NOARGS,
     "Wait for all work of the device."},
    {"close", (PyCFunction)Context_close, METH_NOARGS,
     "Drop this reference (arrays keep the C context alive); later uses raise ValueError."},
    {"__enter__", enter_self, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Context_close, METH_VARARGS, NULL},
    {NULL}};

static PyGetSetDef Context_getset[] = {
    {"backend", (getter)Context_get_backend, NULL, "'cpu', 'cuda' or 'hip'", NULL},
    {"device", (getter)Context_get_device, NULL, "device ordinal", NULL},
    {"handle", (getter)Context_get_handle, NULL, "the gw_context address", NULL},
    {"closed", (getter)Context_get_closed, NULL, NULL, NULL},
    {NULL}};

PyTypeObject ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuwrap._gpuwrap.Context",
    .tp_basicsize = sizeof(ContextObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Context(backend='auto', device=0): a (backend, device) pair.",
    .tp_new = Context_new,
    .tp_dealloc = (destructor)Context_dealloc,
    .tp_methods = Context_methods,
    .tp_getset = Context_getset,
};
