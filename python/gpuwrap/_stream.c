/*
 * Stream: a gw_stream per Python object, made by gpuwrap (destroyed by close() after its
 * work) or borrowed from a native stream (close() drops gpuwrap's handle only); and the
 * stream kept per context, which exports (the CUDA Array Interface, a host consumer's
 * DLPack) make wait for gpuwrap's pending work on an array.
 */
#include "_gpuwrap.h"

#include <stdio.h>

gw_stream *stream_hold(StreamObject *s) {
  if (!s->h) {
    PyErr_SetString(PyExc_ValueError, "gpuwrap: stream closed");
    return NULL;
  }
  s->users++;
  return s->h;
}
static void stream_destroy_nogil(gw_stream *h) {
  /* A created stream's destroy waits for its work: without the GIL (the handle is out of
   * every object already, nothing else can reach it). */
  Py_BEGIN_ALLOW_THREADS gw_stream_destroy(h);
  Py_END_ALLOW_THREADS
}
void stream_unhold(StreamObject *s) {
  if (--s->users == 0 && s->pending) {
    gw_stream *h = s->pending;
    s->pending = NULL;
    stream_destroy_nogil(h);
  }
}

static PyObject *Stream_close(StreamObject *s, PyObject *unused) {
  gw_stream *h = s->h;
  if (!h) Py_RETURN_NONE;
  s->h = NULL;
  if (s->users)
    s->pending = h;
  else
    stream_destroy_nogil(h);
  Py_RETURN_NONE;
}

static void Stream_dealloc(StreamObject *s) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  if (s->h) {
    PyObject *r = Stream_close(s, NULL);
    Py_XDECREF(r);
  }
  Py_CLEAR(s->ctx);
  Py_CLEAR(s->source);
  PyErr_Restore(et, ev, tb);
  Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *stream_adopt(PyTypeObject *cls, gw_stream *h, PyObject *ctx, int backend,
                              int borrowed, PyObject *source) {
  StreamObject *s = (StreamObject *)cls->tp_alloc(cls, 0);
  if (!s) {
    gw_stream_destroy(h);
    return NULL;
  }
  s->h = h;
  s->native = (uintptr_t)gw_stream_native(h);
  s->cuda = backend == GW_BACKEND_CUDA;
  s->borrowed = (char)borrowed;
  s->ctx = Py_NewRef(ctx);
  s->source = Py_NewRef(source);
  return (PyObject *)s;
}

static int check_stream_cls(PyObject *cls) {
  if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &StreamType)) {
    PyErr_SetString(PyExc_TypeError, "a gpuwrap Stream class");
    return -1;
  }
  return 0;
}

/* stream_create(cls, ctx): a new gw_stream on ctx's device. */
PyObject *mod_stream_create(PyObject *m, PyObject *args) {
  PyObject *cls;
  ContextObject *c;
  if (!PyArg_ParseTuple(args, "OO!", &cls, &ContextType, &c) || check_stream_cls(cls) < 0)
    return NULL;
  gw_context *ch = ctx_hold(c);
  if (!ch) return NULL;
  gw_stream *h = NULL;
  gw_status s = gw_stream_create(ch, &h);
  ctx_unhold(c);
  if (s != GW_OK) return RAISE("gw_stream_create", s);
  return stream_adopt((PyTypeObject *)cls, h, (PyObject *)c, c->backend, 0, Py_None);
}

/* stream_borrow(cls, ctx, native, source): borrow a native stream (an int; or a gpuwrap
 * Stream, whose handle is read and borrowed under the GIL, so a close() elsewhere cannot
 * come in between). */
PyObject *mod_stream_borrow(PyObject *m, PyObject *args) {
  PyObject *cls, *native_o, *source;
  ContextObject *c;
  if (!PyArg_ParseTuple(args, "OO!OO", &cls, &ContextType, &c, &native_o, &source) ||
      check_stream_cls(cls) < 0)
    return NULL;
  void *native;
  if (PyObject_TypeCheck(native_o, &StreamType)) {
    StreamObject *src = (StreamObject *)native_o;
    if (!src->h) {
      PyErr_SetString(PyExc_ValueError, "gpuwrap: stream closed");
      return NULL;
    }
    native = (void *)src->native;
  } else if (parse_ptr(native_o, &native, "stream handle") < 0) {
    return NULL;
  }
  gw_context *ch = ctx_get(c);
  if (!ch) return NULL;
  gw_stream *h = NULL;
  gw_status s = gw_stream_wrap(ch, native, &h);
  if (s != GW_OK) return RAISE("gw_stream_wrap", s);
  return stream_adopt((PyTypeObject *)cls, h, (PyObject *)c, c->backend, 1, source);
}

static PyObject *Stream_get_handle(StreamObject *s, void *u) {
  if (!s->h) {
    PyErr_SetString(PyExc_ValueError, "gpuwrap: stream closed");
    return NULL;
  }
  return PyLong_FromUnsignedLongLong(s->native);
}
static PyObject *Stream_get_closed(StreamObject *s, void *u) {
  return PyBool_FromLong(s->h == NULL);
}
static PyObject *Stream_get_borrowed(StreamObject *s, void *u) {
  return PyBool_FromLong(s->borrowed);
}

/* __cuda_stream__: a callable giving (0, handle); only CUDA streams have it. */
static PyMethodDef cuda_stream_def = {"__cuda_stream__", enter_self, METH_NOARGS, NULL};
static PyObject *Stream_get_cuda_stream(StreamObject *s, void *u) {
  if (!s->cuda) {
    PyErr_SetString(PyExc_AttributeError, "__cuda_stream__: not a CUDA stream");
    return NULL;
  }
  if (!s->h) {
    PyErr_SetString(PyExc_ValueError, "gpuwrap: stream closed");
    return NULL;
  }
  PyObject *t = Py_BuildValue("(iK)", 0, (unsigned long long)s->native);
  if (!t) return NULL;
  PyObject *f = PyCFunction_New(&cuda_stream_def, t);
  Py_DECREF(t);
  return f;
}

static PyObject *Stream_synchronize(StreamObject *s, PyObject *unused) {
  gw_stream *h = stream_hold(s);
  if (!h) return NULL;
  gw_status st;
  Py_BEGIN_ALLOW_THREADS st = gw_stream_synchronize(h);
  Py_END_ALLOW_THREADS stream_unhold(s);
  if (st != GW_OK) return RAISE("gw_stream_synchronize", st);
  Py_RETURN_NONE;
}

static PyObject *Stream_repr(StreamObject *s) {
  if (!s->h) return PyUnicode_FromFormat("<gpuwrap.%s closed>", _PyType_Name(Py_TYPE(s)));
  return PyUnicode_FromFormat("<gpuwrap.%s handle=%p>", _PyType_Name(Py_TYPE(s)),
                              (void *)s->native);
}

static PyMethodDef Stream_methods[] = {
    {"synchronize", (PyCFunction)Stream_synchronize, METH_NOARGS,
     "Wait on the host until the work queued on the stream so far has run."},
    {"close", (PyCFunction)Stream_close, METH_NOARGS,
     "Destroy a stream gpuwrap made (after its work); a borrowed one: drop gpuwrap's handle only."},
    {"__enter__", enter_self, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Stream_close, METH_VARARGS, NULL},
    {NULL}};
static PyMemberDef Stream_members[] = {
    {"ctx", T_OBJECT, offsetof(StreamObject, ctx), READONLY,
     "the Context (None for a kept stream)"},
    {"_source", T_OBJECT, offsetof(StreamObject, source), READONLY, NULL},
    {NULL}};
static PyGetSetDef Stream_getset[] = {
    {"handle", (getter)Stream_get_handle, NULL, "the native stream as an int (0: legacy default)",
     NULL},
    {"closed", (getter)Stream_get_closed, NULL, NULL, NULL},
    {"borrowed", (getter)Stream_get_borrowed, NULL, NULL, NULL},
    {"__cuda_stream__", (getter)Stream_get_cuda_stream, NULL, "cuda.core stream protocol", NULL},
    {NULL}};

PyTypeObject StreamType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuwrap._gpuwrap.Stream",
    .tp_basicsize = sizeof(StreamObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_dealloc = (destructor)Stream_dealloc,
    .tp_repr = (reprfunc)Stream_repr,
    .tp_methods = Stream_methods,
    .tp_members = Stream_members,
    .tp_getset = Stream_getset,
};

/* ---- the stream kept per context ------------------------------------------------------ */
/* A CUDA Array Interface export hands a stream handle to its consumer, who uses it after
 * the property returned, so it must outlive the call: one gpuwrap stream per open Python
 * Context, made on first need and closed with it (Context.close). Keyed by the C context's
 * address: the stream holds a C reference on the context, so the address is not reused
 * while the entry lives. An array that outlived its Context (or came from a context
 * Python never opened: Array(handle)) has none kept: a host wait uses a stream of its
 * own, destroyed before it returns; a CUDA Array Interface export keeps one on the Array
 * object (holder), destroyed with it. Nothing made for such exports outlives an array. */
static StreamObject *aux_get(gw_context *ctxp, ArrayObject *holder, int *temp) {
  *temp = 0;
  int open = ctx_is_open(ctxp);
  if (open < 0) return NULL;
  PyObject *key = NULL;
  StreamObject *st = NULL;
  if (open) {
    if (!(key = PyLong_FromVoidPtr(ctxp))) return NULL;
    st = (StreamObject *)PyDict_GetItemWithError(AuxStreams, key);
  } else if (holder) {
    st = (StreamObject *)holder->aux;
  }
  if (st && st->h) {
    Py_XDECREF(key);
    return (StreamObject *)Py_NewRef(st);
  }
  if (PyErr_Occurred()) {
    Py_XDECREF(key);
    return NULL;
  }
  gw_stream *h = NULL;
  gw_status s = gw_stream_create(ctxp, &h);
  if (s != GW_OK) {
    Py_XDECREF(key);
    return (StreamObject *)RAISE("gw_stream_create", s);
  }
  st = (StreamObject *)stream_adopt(&StreamType, h, Py_None, gw_context_backend(ctxp), 0, Py_None);
  if (st && open && PyDict_SetItem(AuxStreams, key, (PyObject *)st) < 0) Py_CLEAR(st);
  Py_XDECREF(key);
  if (!st) return NULL;
  if (!open && holder)
    Py_XSETREF(holder->aux, Py_NewRef((PyObject *)st));
  else if (!open)
    *temp = 1;
  return st;
}

void aux_drop(gw_context *h) {
  PyObject *key = PyLong_FromVoidPtr(h);
  if (!key) {
    PyErr_Clear();
    return;
  }
  PyObject *st = PyDict_GetItemWithError(AuxStreams, key);
  if (st) {
    Py_INCREF(st);
    PyDict_DelItem(AuxStreams, key);
    PyObject *r = Stream_close((StreamObject *)st, NULL); /* waits for it, without the GIL */
    Py_XDECREF(r);
    Py_DECREF(st);
  }
  PyErr_Clear();
  Py_DECREF(key);
}

/* Make a stream of a's context wait for a's pending work (with `host`, also wait for it on
 * the host); its native handle, or (uintptr_t)-1 with an exception. `a` is pinned by the
 * caller (gw_retain); `holder`: the Array object that keeps the stream when the context
 * has no kept one (NULL: a host wait, after which such a stream is destroyed). */
uintptr_t aux_wait(gw_array *a, int host, ArrayObject *holder) {
  int temp;
  StreamObject *st = aux_get(gw_array_context(a), holder, &temp);
  if (!st) return (uintptr_t)-1;
  gw_stream *sh = stream_hold(st);
  gw_status s = gw_array_wait(a, sh);
  if (s == GW_OK && host) {
    Py_BEGIN_ALLOW_THREADS s = gw_stream_synchronize(sh);
    Py_END_ALLOW_THREADS
  }
  uintptr_t native = st->native;
  stream_unhold(st);
  if (temp) {
    PyObject *r = Stream_close(st, NULL);
    Py_XDECREF(r);
  }
  Py_DECREF(st);
  if (s != GW_OK) {
    RAISE(host ? "gw_stream_synchronize" : "gw_array_wait", s);
    return (uintptr_t)-1;
  }
  return native;
}

/* sync_native(ctx, native): wait on the host for a borrowed native stream's work. */
PyObject *mod_sync_native(PyObject *m, PyObject *args) {
  ContextObject *c;
  PyObject *native_o;
  if (!PyArg_ParseTuple(args, "O!O", &ContextType, &c, &native_o)) return NULL;
  void *native;
  if (parse_ptr(native_o, &native, "native stream") < 0) return NULL;
  gw_context *ch = ctx_get(c);
  if (!ch) return NULL;
  gw_stream *b = NULL;
  gw_status s = gw_stream_wrap(ch, native, &b);
  if (s != GW_OK) {
    char call[80];
    snprintf(call, sizeof call, "__cuda_array_interface__ stream %p", native);
    return RAISE(call, s);
  }
  Py_BEGIN_ALLOW_THREADS /* b is ours alone */
      s = gw_stream_synchronize(b);
  Py_END_ALLOW_THREADS gw_stream_destroy(b); /* borrowed: the producer's stream lives on */
  if (s != GW_OK) return RAISE("gw_stream_synchronize", s);
  Py_RETURN_NONE;
}
