/*
 * gpuwrap._gpuwrap: the CPython extension behind `import gpuwrap` (the hot path).
 *
 * Why C: the calls made per array (wrap, release, properties, the DLPack capsule and its
 * deleter, the CUDA Array Interface) cost several microseconds through ctypes; here each
 * is one C call. Thread safety comes from the GIL: every method reads and changes an
 * object's handle while holding it, so release()/close() take a handle out exactly once
 * and no call can see it half-gone. A call that is slow (a fill, a copy, a stream
 * synchronisation) drops the GIL only around the gpuwrap call, and only after pinning
 * what it uses: an array by a gw_retain of its own, a context or stream by a count of
 * running calls (the last of them frees a handle that close() took meanwhile).
 *
 * What stays in Python (gpuwrap/__init__.py): from_dlpack's producer protocol, the CUDA
 * Array Interface import, stream-object conversion, errors' classes, the default context.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "gpuwrap.h"
#include "gpuwrap/dlpack.h"
#include "_exchange.h" /* issue 37: the DLPack C exchange API (_exchange.c) */

#if PY_VERSION_HEX < 0x030B0000 /* public from 3.11 */
#define PyFloat_Pack2 _PyFloat_Pack2
#endif

#ifdef GW_PY_WITH_INFO
int gw_tool_info(int argc, char **argv); /* tools/cmd_info.c, compiled in */
#endif

/* ---- module state (one interpreter: the module is single-phase) ------------------------ */

static PyObject *ErrorType;      /* gpuwrap.GpuwrapError */
static PyObject *BufErrorType;   /* gpuwrap.DLPackBufferError (BufferError + GpuwrapError) */
static PyObject *DtypeCache;     /* dtype spelling -> gw_dtype (int): names, 'f4', np.float32, ... */
static PyObject *ResolveDtype;   /* Python fallback for a spelling not in the cache (fills it) */
static PyObject *OfferType;      /* gpuwrap._Offer */
static PyObject *ArrayHook;      /* gpuwrap._numpy_array(a, dtype, copy) for __array__ */
static PyObject *AuxStreams;     /* {context address: Stream}: kept for exports (see aux_wait) */
static PyObject *OpenContexts;   /* {context address}: the C contexts of open Python Contexts */
static PyObject *InterfaceMemory; /* gpuwrap._interface_memory(ctx, obj) for Context.wrap(obj) */
static PyObject *DtypeNames[GW_DTYPE_COUNT];
static PyObject *KindNames[5];
static PyObject *BackendNames[4];
static PyObject *S_stream, *S_max_version, *S_dl_device, *S_copy, *S_readonly, *S_no_register,
    *S_own, *S_deleter;

static const char *const DTYPE_STR[GW_DTYPE_COUNT] = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128"};
/* NumPy typestrs in this host's byte order (bfloat16 has none). */
#if PY_LITTLE_ENDIAN
#define BO "<"
#else
#define BO ">"
#endif
static const char *const TYPESTR[GW_DTYPE_COUNT] = {
    "|b1", "|i1", BO "i2", BO "i4", BO "i8", "|u1", BO "u2", BO "u4", BO "u8",
    BO "f2", NULL, BO "f4", BO "f8", BO "c8", BO "c16"};

/* Raise exc(call, status, detail), detail read now: gw_last_error is this thread's. */
static PyObject *raise_status(PyObject *exc, const char *call, gw_status s) {
  const char *detail = gw_last_error();
  PyObject *e = PyObject_CallFunction(exc ? exc : PyExc_RuntimeError, "siz", call, (int)s,
                                      detail && *detail ? detail : NULL);
  if (e) {
    PyErr_SetObject((PyObject *)Py_TYPE(e), e);
    Py_DECREF(e);
  }
  return NULL;
}
#define RAISE(call, s) raise_status(ErrorType, (call), (s))

/* ---- Context --------------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  gw_context *h;       /* NULL once closed */
  gw_context *pending; /* closed while calls ran without the GIL: the last of them frees it */
  int users;           /* calls running without the GIL */
  int backend, device; /* constant for the context's life */
} ContextObject;

static PyTypeObject ContextType, ArrayType, StreamType;
static PyObject *int64_tuple(const int64_t *v, int n, int64_t scale);
static int int_arg(PyObject *o, const char *what, Py_ssize_t i, long long min, unsigned long long max,
                   long long *out, int *big);

static gw_context *ctx_get(ContextObject *c) {
  if (!c->h) PyErr_SetString(PyExc_ValueError, "gpuwrap: context closed");
  return c->h;
}
/* Around a call without the GIL: hold, (drop GIL, call, take GIL), unhold. */
static gw_context *ctx_hold(ContextObject *c) {
  gw_context *h = ctx_get(c);
  if (h) c->users++;
  return h;
}
static void ctx_unhold(ContextObject *c) {
  if (--c->users == 0 && c->pending) {
    gw_context *h = c->pending;
    c->pending = NULL;
    gw_context_destroy(h);
  }
}

static void aux_drop(gw_context *h);

/* Only a context in OpenContexts gets a stream kept in AuxStreams: that entry goes with
 * the Context (close), so no export after the close can make one that nothing drops. */
static int ctx_is_open(gw_context *h) {
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

/* A backend name ("auto", "cpu", "cuda", "hip") or its gw_backend value. */
static int parse_backend(PyObject *o, int *out) {
  if (PyUnicode_Check(o)) {
    for (int i = 0; i < 4; i++)
      if (PyUnicode_Compare(o, BackendNames[i]) == 0) {
        *out = i;
        return 0;
      }
    if (PyErr_Occurred()) return -1;
    PyErr_Format(PyExc_ValueError, "backend %R: expected one of 'auto', 'cpu', 'cuda', 'hip'", o);
    return -1;
  }
  long long v;
  if (int_arg(o, "backend", -1, INT_MIN, INT_MAX, &v, NULL) < 0) return -1;
  *out = (int)v;
  return 0;
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
  Py_END_ALLOW_THREADS
  if (s != GW_OK) {
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
static PyObject *Context_get_closed(ContextObject *c, void *u) { return PyBool_FromLong(c->h == NULL); }

static PyObject *Context_synchronize(ContextObject *c, PyObject *unused) {
  gw_context *h = ctx_hold(c);
  if (!h) return NULL;
  gw_status s;
  Py_BEGIN_ALLOW_THREADS
  s = gw_synchronize(h);
  Py_END_ALLOW_THREADS
  ctx_unhold(c);
  if (s != GW_OK) return RAISE("gw_synchronize", s);
  Py_RETURN_NONE;
}

static PyObject *enter_self(PyObject *self, PyObject *unused) { return Py_NewRef(self); }

/* ---- dtype, shape --------------------------------------------------------------------- */

/* Any spelling of a dtype -> gw_dtype: a cache hit for every spelling seen before. */
static int dtype_index(PyObject *o) {
  /* True and 1.0 hash as 1, the index of int8, in the cache: ResolveDtype refuses them */
  PyObject *v = PyBool_Check(o) || PyFloat_Check(o) ? NULL : PyDict_GetItemWithError(DtypeCache, o);
  if (!v) {
    if (PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
      PyErr_Clear();
    }
    v = PyObject_CallOneArg(ResolveDtype, o); /* raises ValueError naming the valid ones */
    if (!v) return -1;
    long i = PyLong_AsLong(v);
    Py_DECREF(v);
    return (int)i;
  }
  return (int)PyLong_AsLong(v);
}

/* Every int an argument gives (an address, a stream, a device pair, a shape, a version,
 * a backend or kind number) is read here: anything with __index__ (int, numpy.int64) but
 * bool, checked against [min, max] before any C conversion can truncate it, the error
 * naming the argument (`what`, and its position when i >= 0) and the value as given.
 * *out: the value, two's complement when it is above INT64_MAX (only max > INT64_MAX
 * allows that: `*big` is then set, where the caller passed it). */
static int int_arg(PyObject *o, const char *what, Py_ssize_t i, long long min, unsigned long long max,
                   long long *out, int *big) {
  char at[32] = "";
  if (i >= 0) snprintf(at, sizeof at, "[%zd]", i);
  if (big) *big = 0;
  if (PyBool_Check(o) || !PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s%s: %s %R is not an int", what, at, Py_TYPE(o)->tp_name, o);
    return -1;
  }
  PyObject *n = PyNumber_Index(o);
  if (!n) return -1;
  int overflow = 0, ok;
  long long v = PyLong_AsLongLongAndOverflow(n, &overflow);
  if (v == -1 && !overflow && PyErr_Occurred()) {
    Py_DECREF(n);
    return -1;
  }
  if (!overflow) {
    ok = v >= min && (v < 0 || (unsigned long long)v <= max);
  } else {
    unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(n) : 0;
    ok = overflow > 0 && !PyErr_Occurred() && u <= max;
    PyErr_Clear();
    v = (long long)u;
    if (big) *big = 1;
  }
  Py_DECREF(n);
  if (!ok) {
    PyErr_Format(PyExc_OverflowError, "%s%s: %R does not fit in %lld .. %llu", what, at, o, min, max);
    return -1;
  }
  *out = v;
  return 0;
}

/* One int of a shape or strides into *out (int64). */
static int int64_item(PyObject *o, int64_t *out, const char *what, Py_ssize_t i) {
  long long v;
  if (int_arg(o, what, i, INT64_MIN, INT64_MAX, &v, NULL) < 0) return -1;
  *out = v;
  return 0;
}

/* A shape or strides sequence (or one int) into out[GW_MAX_DIMS]; the count, or -1. */
static int int64_seq(PyObject *o, int64_t *out, const char *what) {
  if (PyIndex_Check(o) || PyBool_Check(o)) return int64_item(o, out, what, -1) ? -1 : 1;
  if (!PyTuple_Check(o) && !PyList_Check(o) && !PySequence_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: %s is not a sequence of ints (nor an int)", what, Py_TYPE(o)->tp_name);
    return -1;
  }
  PyObject *seq = PySequence_Fast(o, what);
  if (!seq) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > GW_MAX_DIMS) {
    Py_DECREF(seq);
    PyErr_Format(PyExc_ValueError, "%s: %zd dimensions, at most %d", what, n, GW_MAX_DIMS);
    return -1;
  }
  PyObject **items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < n; i++) {
    if (int64_item(items[i], &out[i], what, i) != 0) {
      Py_DECREF(seq);
      return -1;
    }
  }
  Py_DECREF(seq);
  return (int)n;
}

/* An address: None (NULL) or an int 0 .. UINTPTR_MAX (a bool is not one). */
static int parse_ptr(PyObject *o, void **out, const char *what) {
  if (o == Py_None) {
    *out = NULL;
    return 0;
  }
  long long v;
  if (int_arg(o, what, -1, 0, UINTPTR_MAX, &v, NULL) < 0) return -1;
  *out = (void *)(uintptr_t)(unsigned long long)v;
  return 0;
}

/* ---- Array ------------------------------------------------------------------------------ */

typedef struct {
  PyObject_HEAD
  gw_array *h;    /* NULL once released */
  gw_array *kept; /* taken by the first __array_interface__: NumPy's views hold this object
                   * (their base), not a gpuwrap reference, so the object keeps one until it
                   * is collected, and release() cannot free memory under such a view */
  /* The Keeper of the wrap that made this array (borrowed: the library holds the reference,
   * py_deleter drops it), while this object holds the wrap's root (h or kept). The
   * collector is shown it while this object's references are all the root has
   * (owns_keeper), so a deleter or wrapped object that refers back to the array
   * (self.arr = ctx.wrap(..., deleter=self._free)) is a cycle it can find and break
   * (Array_finalize, Array_clear); NULL for every other array, which it does not track. */
  PyObject *keeper;
  PyObject *aux;          /* a Stream for exports after the context closed (aux_get) */
  unsigned ai_given;      /* __array_interface__ dicts handed out */
  unsigned ai_traversed;  /* ai_given when the collector last traversed this object */
} ArrayObject;

static PyObject *array_new(gw_array *h) {
  ArrayObject *a = PyObject_GC_New(ArrayObject, &ArrayType);
  if (!a) {
    gw_release(h);
    return NULL;
  }
  a->h = h;
  a->kept = NULL;
  a->keeper = NULL;
  a->aux = NULL;
  a->ai_given = a->ai_traversed = 0;
  return (PyObject *)a;
}

static gw_array *arr_get(ArrayObject *a) {
  if (!a->h) PyErr_SetString(PyExc_ValueError, "gpuwrap: array released");
  return a->h;
}

/* ---- Keeper: what the library holds for a wrap with a Python deleter or of an object --- */

/* The library's user pointer of such a wrap: the deleter and the object whose memory is
 * wrapped (its buffer export held: a bytearray cannot resize under the array), kept until
 * the last reference goes. A Python object the collector tracks, so a cycle through the
 * deleter or the object back to the array can be found (see owns_keeper). It has no
 * tp_clear: clearing it would drop the deleter before the library calls it; the array's
 * tp_clear breaks such a cycle instead, by giving up its references, which runs it. */
typedef struct {
  PyObject_HEAD
  PyObject *deleter; /* deleter(ptr), or NULL */
  PyObject *obj;     /* an interface object (not a buffer's: view.obj holds that), or NULL */
  Py_buffer view;
  int has_view;
} KeeperObject;

static int Keeper_traverse(KeeperObject *k, visitproc visit, void *arg) {
  Py_VISIT(k->deleter);
  Py_VISIT(k->obj);
  if (k->has_view) Py_VISIT(k->view.obj);
  return 0;
}

static void Keeper_dealloc(KeeperObject *k) {
  PyObject_GC_UnTrack(k);
  if (k->has_view) {
    k->has_view = 0;
    PyBuffer_Release(&k->view);
  }
  Py_CLEAR(k->deleter);
  Py_CLEAR(k->obj);
  PyObject_GC_Del(k);
}

static PyTypeObject KeeperType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuwrap._gpuwrap._Keeper",
    .tp_basicsize = sizeof(KeeperObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)Keeper_dealloc,
    .tp_traverse = (traverseproc)Keeper_traverse,
};

/* The library's deleter for a Keeper: called with the GIL (from whichever thread drops the
 * last reference), never swallowing an exception already pending there (a release during
 * unwinding). Runs the Python deleter, then lets the object go. */
static void py_deleter(void *ptr, void *user) {
  if (!Py_IsInitialized()) return; /* at exit, after Python: the callable is gone with it */
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  KeeperObject *k = user;
  if (k->deleter) {
    PyObject *r = PyObject_CallFunction(k->deleter, "N", PyLong_FromVoidPtr(ptr));
    if (!r) PyErr_WriteUnraisable(k->deleter);
    Py_XDECREF(r);
  }
  Py_DECREF(k);
  PyErr_Restore(et, ev, tb);
  PyGILState_Release(g);
}

/* Raise exc(call, status, detail) with a detail of the face's own (not gw_last_error). */
static PyObject *raise_detail(const char *call, gw_status st, PyObject *detail) {
  if (!detail) return NULL;
  PyObject *e = PyObject_CallFunction(ErrorType, "siO", call, (int)st, detail);
  Py_DECREF(detail);
  if (e) {
    PyErr_SetObject((PyObject *)Py_TYPE(e), e);
    Py_DECREF(e);
  }
  return NULL;
}

/* The memory an object exposes: the buffer protocol (the export held in k->view), else
 * __array_interface__ / __cuda_array_interface__ (gpuwrap._interface_memory reads them,
 * waiting for a CUDA producer's stream; k->obj keeps the object). *base: its element 0,
 * [*lo, *hi): its bytes relative to *base. */
static int object_memory(PyObject *ctx, PyObject *o, KeeperObject *k, void **base, long long *lo,
                         long long *hi, int *readonly) {
  if (PyObject_CheckBuffer(o)) {
    if (PyObject_GetBuffer(o, &k->view, PyBUF_STRIDES) < 0) return -1;
    k->has_view = 1;
    Py_buffer *v = &k->view;
    *base = v->buf;
    *readonly = v->readonly;
    *lo = 0;
    *hi = v->len;
    if (v->strides && v->len) { /* a strided export: its first and last bytes */
      long long l = 0, h = 0;
      for (int i = 0; i < v->ndim; i++) {
        long long span = (long long)(v->shape[i] - 1) * v->strides[i];
        if (span < 0) l += span; else h += span;
      }
      *lo = l;
      *hi = h + v->itemsize;
    }
    return 0;
  }
  PyObject *r = PyObject_CallFunctionObjArgs(InterfaceMemory, ctx, o, NULL);
  if (!r) return -1;
  unsigned long long addr;
  int ok = PyArg_ParseTuple(r, "KLLp", &addr, lo, hi, readonly);
  Py_DECREF(r);
  if (!ok) return -1;
  k->obj = Py_NewRef(o);
  *base = (void *)(uintptr_t)addr;
  return 0;
}

/* Whether shape/strides (elements of `size` bytes) from element 0 stay inside [lo, hi)
 * bytes of it; 0 with elo .. ehi (the bytes they reach) when not, also on overflow. */
static int span_inside(int nd, const int64_t *shape, const int64_t *strides, size_t size, long long lo,
                       long long hi, long long *elo, long long *ehi) {
  long long l = 0, h = 0, run = 1;
  for (int i = nd - 1; i >= 0; i--)
    if (shape[i] <= 0) { /* no elements (or a negative extent, which gw_wrap refuses) */
      *elo = *ehi = 0;
      return 1;
    }
  int over = 0;
  for (int i = nd - 1; i >= 0; i--) {
    long long st = strides ? strides[i] : run, span;
    over |= __builtin_mul_overflow(shape[i] - 1, st, &span);
    if (span < 0) over |= __builtin_add_overflow(l, span, &l);
    else over |= __builtin_add_overflow(h, span, &h);
    if (!strides) over |= __builtin_mul_overflow(run, shape[i], &run);
  }
  long long sz = (long long)size;
  over |= __builtin_mul_overflow(l, sz, elo);
  over |= __builtin_mul_overflow(h, sz, ehi) || __builtin_add_overflow(*ehi, sz, ehi);
  if (over) {
    *elo = LLONG_MIN;
    *ehi = LLONG_MAX;
    return 0;
  }
  return *elo >= lo && *ehi <= hi;
}

/* Context.wrap(ptr, dtype, shape, strides=None, *, readonly=False, no_register=False,
 * own=False, deleter=None): the hot path, parsed by hand (no argument-parser overhead). */
static PyObject *Context_wrap(ContextObject *c, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
  PyObject *ptr_o = NULL, *dtype_o = NULL, *shape_o = NULL, *strides_o = Py_None, *deleter = Py_None;
  unsigned flags = 0;
  if (nargs < 3 || nargs > 4) {
    PyErr_Format(PyExc_TypeError, "wrap(ptr, dtype, shape, strides=None, *, readonly, "
                                  "no_register, own, deleter): %zd positional arguments", nargs);
    return NULL;
  }
  ptr_o = args[0];
  dtype_o = args[1];
  shape_o = args[2];
  if (nargs == 4) strides_o = args[3];
  Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nk; i++) {
    PyObject *k = PyTuple_GET_ITEM(kwnames, i), *v = args[nargs + i];
    unsigned bit = 0;
    if (k == S_readonly || PyUnicode_Compare(k, S_readonly) == 0)
      bit = GW_WRAP_READONLY;
    else if (k == S_no_register || PyUnicode_Compare(k, S_no_register) == 0)
      bit = GW_WRAP_NO_REGISTER;
    else if (k == S_own || PyUnicode_Compare(k, S_own) == 0)
      bit = GW_WRAP_OWN;
    else if (k == S_deleter || PyUnicode_Compare(k, S_deleter) == 0) {
      deleter = v;
      continue;
    } else if (nargs == 3 && PyUnicode_CompareWithASCIIString(k, "strides") == 0) {
      strides_o = v;
      continue;
    } else {
      PyErr_Format(PyExc_TypeError, "wrap() got an unexpected keyword argument %R", k);
      return NULL;
    }
    int t = PyObject_IsTrue(v);
    if (t < 0) return NULL;
    if (t) flags |= bit;
  }
  void *ptr = NULL;
  int64_t shape[GW_MAX_DIMS], strides[GW_MAX_DIMS];
  /* An int (or None, or an integer scalar such as numpy.uint64) is an address nothing can
   * check; anything else must expose its memory, which the array keeps and must stay
   * inside. NumPy arrays have __index__ too (a one-element one converts): not addresses. */
  int is_obj = ptr_o != Py_None && !PyLong_Check(ptr_o) && (!PyIndex_Check(ptr_o) || PySequence_Check(ptr_o));
  if (!is_obj && parse_ptr(ptr_o, &ptr, "wrap: ptr") < 0) return NULL;
  if (is_obj && (flags & GW_WRAP_OWN)) {
    PyErr_Format(PyExc_ValueError, "wrap: own=True with a %s: its memory is the object's (the array "
                 "keeps the object alive while wrapped; nothing is freed)", Py_TYPE(ptr_o)->tp_name);
    return NULL;
  }
  int dt = dtype_index(dtype_o);
  if (dt < 0) return NULL;
  int nd = int64_seq(shape_o, shape, "shape");
  if (nd < 0) return NULL;
  if (strides_o != Py_None) {
    int ns = int64_seq(strides_o, strides, "strides");
    if (ns < 0) return NULL;
    if (ns != nd) {
      PyErr_Format(PyExc_ValueError, "strides: %d values for %d dimensions", ns, nd);
      return NULL;
    }
  }
  if (deleter != Py_None && !PyCallable_Check(deleter)) {
    PyErr_SetString(PyExc_TypeError, "wrap: deleter must be a callable deleter(ptr) or None");
    return NULL;
  }
  const int64_t *sp = strides_o == Py_None ? NULL : strides;
  KeeperObject *k = NULL;
  if (is_obj || deleter != Py_None) {
    if (!(k = PyObject_GC_New(KeeperObject, &KeeperType))) return NULL;
    k->deleter = deleter == Py_None ? NULL : Py_NewRef(deleter);
    k->obj = NULL;
    k->has_view = 0;
    PyObject_GC_Track(k);
  }
  if (is_obj) {
    long long lo, hi, elo, ehi;
    int ro = 0;
    if (object_memory((PyObject *)c, ptr_o, k, &ptr, &lo, &hi, &ro) < 0) goto fail;
    if (ro) flags |= GW_WRAP_READONLY;
    size_t size = gw_dtype_size((gw_dtype)dt);
    if (!span_inside(nd, shape, sp, size, lo, hi, &elo, &ehi)) {
      PyObject *shp = int64_tuple(shape, nd, 1);
      PyObject *str = sp ? int64_tuple(sp, nd, 1) : PyUnicode_FromString("None (C order)");
      if (shp && str)
        raise_detail("gw_wrap", GW_ERANGE, PyUnicode_FromFormat(
            "ptr: shape %R, strides %R (in elements of %zu bytes, not bytes) reach bytes %lld .. %lld "
            "from element 0, outside the %s's memory, bytes %lld .. %lld", shp, str, size, elo, ehi,
            Py_TYPE(ptr_o)->tp_name, lo, hi));
      Py_XDECREF(shp);
      Py_XDECREF(str);
      goto fail;
    }
  }
  gw_context *h = ctx_get(c); /* last: the parsing above may run Python code (__index__) */
  if (!h) goto fail;
  gw_array *out = NULL;
  gw_status s;
  if (!k)
    s = gw_wrap(h, ptr, (gw_dtype)dt, nd, shape, sp, flags, &out);
  else /* the library holds k's reference from here, dropped by py_deleter */
    s = gw_wrap_with_deleter(h, ptr, (gw_dtype)dt, nd, shape, sp, flags, py_deleter, k, &out);
  if (s != GW_OK) {
    RAISE("gw_wrap", s); /* the deleter is not called on failure: the memory stays the caller's */
    goto fail;
  }
  PyObject *a = array_new(out);
  if (a && k) {
    ((ArrayObject *)a)->keeper = (PyObject *)k;
    PyObject_GC_Track(a);
  }
  return a;
fail:
  Py_XDECREF(k);
  return NULL;
}

static int parse_kind(PyObject *o, int *out) {
  if (PyUnicode_Check(o)) {
    for (int i = 0; i < 5; i++)
      if (PyUnicode_Compare(o, KindNames[i]) == 0) {
        *out = i;
        return 0;
      }
    if (PyErr_Occurred()) return -1;
    PyErr_Format(PyExc_ValueError, "kind %R: expected one of 'host', 'pinned', 'device', 'managed'", o);
    return -1;
  }
  long long v;
  if (int_arg(o, "kind", -1, INT_MIN, INT_MAX, &v, NULL) < 0) return -1;
  *out = (int)v;
  return 0;
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
  Py_END_ALLOW_THREADS
  ctx_unhold(c);
  if (s != GW_OK) {
    char call[64];
    snprintf(call, sizeof call, "gw_alloc('%s')", kind >= 0 && kind < 5 ? PyUnicode_AsUTF8(KindNames[kind]) : "?");
    return RAISE(call, s);
  }
  return array_new(out);
}

static PyMethodDef Context_methods[] = {
    {"wrap", (PyCFunction)(void (*)(void))Context_wrap, METH_FASTCALL | METH_KEYWORDS,
     "wrap(obj, dtype, shape, strides=None, *, readonly=False, no_register=False, deleter=None), "
     "wrap(ptr, ..., own=False, ...): wrap an object's memory (buffer protocol, __array_interface__, "
     "__cuda_array_interface__; kept alive, the span checked: GW_ERANGE outside it) or the memory at "
     "int address ptr (unchecked), without copying. Strides in elements, not bytes. deleter(ptr) "
     "runs exactly once when the last reference goes."},
    {"alloc", (PyCFunction)Context_alloc, METH_VARARGS,
     "alloc(kind, dtype, shape): a C-contiguous array of 'host', 'pinned', 'device' or 'managed' memory."},
    {"synchronize", (PyCFunction)Context_synchronize, METH_NOARGS, "Wait for all work of the device."},
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

static PyTypeObject ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuwrap._gpuwrap.Context",
    .tp_basicsize = sizeof(ContextObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Context(backend='auto', device=0): a (backend, device) pair.",
    .tp_new = Context_new,
    .tp_dealloc = (destructor)Context_dealloc,
    .tp_methods = Context_methods,
    .tp_getset = Context_getset,
};

/* ---- Stream ----------------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  gw_stream *h, *pending;
  int users;
  char cuda, borrowed;
  uintptr_t native;
  PyObject *ctx;    /* the Python Context (None for a kept stream) */
  PyObject *source; /* the torch/CuPy stream object a borrow came from: kept alive */
} StreamObject;

static gw_stream *stream_hold(StreamObject *s) {
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
  Py_BEGIN_ALLOW_THREADS
  gw_stream_destroy(h);
  Py_END_ALLOW_THREADS
}
static void stream_unhold(StreamObject *s) {
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
static PyObject *mod_stream_create(PyObject *m, PyObject *args) {
  PyObject *cls;
  ContextObject *c;
  if (!PyArg_ParseTuple(args, "OO!", &cls, &ContextType, &c) || check_stream_cls(cls) < 0) return NULL;
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
static PyObject *mod_stream_borrow(PyObject *m, PyObject *args) {
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
static PyObject *Stream_get_closed(StreamObject *s, void *u) { return PyBool_FromLong(s->h == NULL); }
static PyObject *Stream_get_borrowed(StreamObject *s, void *u) { return PyBool_FromLong(s->borrowed); }

/* __cuda_stream__: a callable giving (0, handle); only CUDA streams have it. */
static PyObject *return_self(PyObject *self, PyObject *unused) { return Py_NewRef(self); }
static PyMethodDef cuda_stream_def = {"__cuda_stream__", return_self, METH_NOARGS, NULL};
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
  Py_BEGIN_ALLOW_THREADS
  st = gw_stream_synchronize(h);
  Py_END_ALLOW_THREADS
  stream_unhold(s);
  if (st != GW_OK) return RAISE("gw_stream_synchronize", st);
  Py_RETURN_NONE;
}

static PyObject *Stream_repr(StreamObject *s) {
  if (!s->h) return PyUnicode_FromFormat("<gpuwrap.%s closed>", _PyType_Name(Py_TYPE(s)));
  return PyUnicode_FromFormat("<gpuwrap.%s handle=%p>", _PyType_Name(Py_TYPE(s)), (void *)s->native);
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
    {"ctx", T_OBJECT, offsetof(StreamObject, ctx), READONLY, "the Context (None for a kept stream)"},
    {"_source", T_OBJECT, offsetof(StreamObject, source), READONLY, NULL},
    {NULL}};
static PyGetSetDef Stream_getset[] = {
    {"handle", (getter)Stream_get_handle, NULL, "the native stream as an int (0: legacy default)", NULL},
    {"closed", (getter)Stream_get_closed, NULL, NULL, NULL},
    {"borrowed", (getter)Stream_get_borrowed, NULL, NULL, NULL},
    {"__cuda_stream__", (getter)Stream_get_cuda_stream, NULL, "cuda.core stream protocol", NULL},
    {NULL}};

static PyTypeObject StreamType = {
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

static void aux_drop(gw_context *h) {
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
static uintptr_t aux_wait(gw_array *a, int host, ArrayObject *holder) {
  int temp;
  StreamObject *st = aux_get(gw_array_context(a), holder, &temp);
  if (!st) return (uintptr_t)-1;
  gw_stream *sh = stream_hold(st);
  gw_status s = gw_array_wait(a, sh);
  if (s == GW_OK && host) {
    Py_BEGIN_ALLOW_THREADS
    s = gw_stream_synchronize(sh);
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

/* ---- Array: properties ---------------------------------------------------------------- */

/* Give up this object's references (the deleter may run: a pending exception is kept). */
static void array_drop(ArrayObject *a) {
  gw_array *h = a->h, *k = a->kept;
  a->h = a->kept = NULL;
  a->keeper = NULL; /* before the release: the deleter may run, and a collection in it */
  if (h || k) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    gw_release(h);
    gw_release(k);
    PyErr_Restore(et, ev, tb);
  }
}

static void Array_dealloc(ArrayObject *a) {
  PyObject_GC_UnTrack(a);
  array_drop(a);
  Py_CLEAR(a->aux);
  PyObject_GC_Del(a);
}

/* libgpuwrap's count of an array's references (exported for this face, src/core/array.c). */
extern int gw__array_refs(const gw_array *a);

/* Whether giving up this object's references (h, and kept: the same root) would drop the
 * wrap's root and so run the deleter: only then does the library's reference to the
 * Keeper stand for this object's, and may the collector count it as this object's.
 * Anything else holding the root (a gpuwrap view, a DLPack export, a capsule not yet
 * consumed, a call that pinned it with the GIL dropped) keeps the Keeper alive and all it
 * refers to reachable. NumPy arrays made by __array_interface__ hold this object (their
 * base), not a root reference, and are not tracked by the collector: while one lives,
 * this object looks referenced from outside and is never garbage. A reference made from
 * the handle by C code without the GIL while a collection runs can make the answer change
 * between the collector's passes (docs/RELIABILITY.md, "Left"). */
static int owns_keeper(const ArrayObject *a) {
  gw_array *r = a->h ? a->h : a->kept;
  return a->keeper && r && gw__array_refs(r) == (a->h != NULL) + (a->kept != NULL);
}

static int Array_traverse(ArrayObject *a, visitproc visit, void *arg) {
  a->ai_traversed = a->ai_given; /* every collection traverses before any finalizer runs */
  if (owns_keeper(a)) Py_VISIT(a->keeper);
  return 0;
}

/* An array found in unreachable garbage whose references are the root's last ones (PEP
 * 442: before anything is cleared, so the deleter runs with the objects it refers to
 * intact): give them up, which runs the deleter. Asked again here: a finalizer of the
 * same garbage that ran first may have made a view or export. kept is given up here only
 * when no NumPy array was made from this object since the collection traversed it (a
 * finalizer of the same garbage may have made one, and keep it past the collection):
 * else Array_clear gives it up, which runs only for garbage nothing resurrected. */
static void Array_finalize(ArrayObject *a) {
  if (!owns_keeper(a) || (a->kept && a->ai_given != a->ai_traversed)) return;
  array_drop(a);
}

/* Garbage that stayed garbage after every finalizer ran: nothing can reach a NumPy array
 * of this object any more, so both references go (the cycle through the Keeper breaks). */
static int Array_clear(ArrayObject *a) {
  array_drop(a);
  Py_CLEAR(a->aux);
  return 0;
}

static PyObject *Array_new(PyTypeObject *t, PyObject *args, PyObject *kw) {
  PyObject *o;
  if (kw && PyDict_GET_SIZE(kw)) {
    PyErr_SetString(PyExc_TypeError, "Array(handle) takes no keywords");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "O:Array", &o)) return NULL;
  void *h;
  if (parse_ptr(o, &h, "Array(handle)") < 0) return NULL;
  if (!h) {
    PyErr_SetString(PyExc_ValueError, "gpuwrap.Array: NULL handle");
    return NULL;
  }
  return array_new((gw_array *)h); /* adopts one reference */
}

static PyObject *Array_release(ArrayObject *a, PyObject *unused) {
  gw_array *h = a->h;
  a->h = NULL; /* taken out before anything can run (a deleter): exactly once */
  if (!a->kept) a->keeper = NULL; /* kept (NumPy's views) holds the root, and so the Keeper */
  if (h) gw_release(h);
  Py_RETURN_NONE;
}

#define ARR_OR_NULL(a, h)                                                                  \
  gw_array *h = arr_get(a);                                                                \
  if (!h) return NULL

static PyObject *ptr_or_none(void *p) {
  if (!p) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(p);
}
static PyObject *Array_get_data_ptr(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return ptr_or_none(gw_data(h));
}
static PyObject *Array_get_host_ptr(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return ptr_or_none(gw_host_data(h));
}
static PyObject *Array_get_handle(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return PyLong_FromVoidPtr(h);
}
static PyObject *Array_get_released(ArrayObject *a, void *u) { return PyBool_FromLong(a->h == NULL); }
static PyObject *Array_get_kind(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  unsigned k = (unsigned)gw_kind(h);
  return Py_NewRef(KindNames[k < 5 ? k : 0]);
}
static PyObject *Array_get_device(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return PyLong_FromLong(gw_device(h));
}
static PyObject *Array_get_dtype(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return Py_NewRef(DtypeNames[gw_array_dtype(h)]);
}
static PyObject *Array_get_itemsize(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return PyLong_FromSize_t(gw_dtype_size(gw_array_dtype(h)));
}
static PyObject *Array_get_nbytes(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return PyLong_FromLongLong(gw_numel(h) * (long long)gw_dtype_size(gw_array_dtype(h)));
}
static PyObject *Array_get_size(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return PyLong_FromLongLong(gw_numel(h));
}
static PyObject *Array_get_ndim(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return PyLong_FromLong(gw_ndim(h));
}
static PyObject *Array_get_readonly(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return PyBool_FromLong(gw_is_readonly(h));
}
static PyObject *int64_tuple(const int64_t *v, int n, int64_t scale) {
  PyObject *t = PyTuple_New(n);
  if (!t) return NULL;
  for (int i = 0; i < n; i++) {
    PyObject *x = PyLong_FromLongLong(v[i] * scale);
    if (!x) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, i, x);
  }
  return t;
}
static PyObject *Array_get_shape(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return int64_tuple(gw_shape(h), gw_ndim(h), 1);
}
static PyObject *Array_get_strides(ArrayObject *a, void *u) {
  ARR_OR_NULL(a, h);
  return int64_tuple(gw_strides(h), gw_ndim(h), 1);
}

static PyObject *Array_repr(ArrayObject *a) {
  gw_array *h = a->h;
  if (!h) return PyUnicode_FromString("<gpuwrap.Array released>");
  PyObject *shape = int64_tuple(gw_shape(h), gw_ndim(h), 1);
  if (!shape) return NULL;
  PyObject *list = PySequence_List(shape);
  Py_DECREF(shape);
  if (!list) return NULL;
  void *d = gw_data(h), *hp = gw_host_data(h);
  char addr[80];
  /* The device address where there is one; the host address where it differs or is the
   * only one (pageable and host-only arrays have no device address). */
  if (d && hp && hp != d)
    snprintf(addr, sizeof addr, "data=%p host=%p", d, hp);
  else if (d)
    snprintf(addr, sizeof addr, "data=%p", d);
  else if (hp)
    snprintf(addr, sizeof addr, "host=%p", hp);
  else
    snprintf(addr, sizeof addr, "data=0x0");
  unsigned k = (unsigned)gw_kind(h);
  PyObject *r = PyUnicode_FromFormat("<gpuwrap.Array %U%R %U device=%d%s %s>",
                                     DtypeNames[gw_array_dtype(h)], list, KindNames[k < 5 ? k : 0],
                                     gw_device(h), gw_is_readonly(h) ? " readonly" : "", addr);
  Py_DECREF(list);
  return r;
}

/* ---- Array: view, fill, copy ---------------------------------------------------------- */

static PyObject *Array_view(ArrayObject *a, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"start", "shape", "step", NULL};
  PyObject *start_o, *shape_o, *step_o = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:view", kwlist, &start_o, &shape_o, &step_o)) return NULL;
  int64_t start[GW_MAX_DIMS], shape[GW_MAX_DIMS], step[GW_MAX_DIMS];
  int n0 = int64_seq(start_o, start, "start"), n1 = n0 < 0 ? -1 : int64_seq(shape_o, shape, "shape");
  if (n1 < 0) return NULL;
  int n2 = step_o == Py_None ? n1 : int64_seq(step_o, step, "step");
  if (n2 < 0) return NULL;
  ARR_OR_NULL(a, h);
  if (n0 != gw_ndim(h) || n1 != gw_ndim(h) || n2 != gw_ndim(h)) {
    PyErr_Format(PyExc_ValueError, "view: start, shape and step need %d values each (got %d, %d, %d)",
                 gw_ndim(h), n0, n1, n2);
    return NULL;
  }
  gw_array *out = NULL;
  gw_status s = gw_view(h, start, shape, step_o == Py_None ? NULL : step, &out);
  if (s != GW_OK) return RAISE("gw_view", s);
  return array_new(out);
}

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* a quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

/* value -> the dtype's bytes in buf (16 bytes). */
static int pack_value(int dt, PyObject *v, unsigned char *buf) {
  switch (dt) {
  case GW_BOOL: {
    int t = PyObject_IsTrue(v);
    if (t < 0) return -1;
    buf[0] = (unsigned char)t;
    return 0;
  }
  case GW_INT8: case GW_INT16: case GW_INT32: case GW_INT64: {
    PyObject *i = PyNumber_Index(v);
    if (!i) return -1;
    long long x = PyLong_AsLongLong(i);
    Py_DECREF(i);
    if (x == -1 && PyErr_Occurred()) return -1;
    size_t n = gw_dtype_size((gw_dtype)dt);
    long long lo = n == 8 ? INT64_MIN : -(1LL << (8 * n - 1)), hi = n == 8 ? INT64_MAX : (1LL << (8 * n - 1)) - 1;
    if (x < lo || x > hi) goto range;
    int8_t a8 = (int8_t)x; int16_t a16 = (int16_t)x; int32_t a32 = (int32_t)x; int64_t a64 = x;
    memcpy(buf, n == 1 ? (void *)&a8 : n == 2 ? (void *)&a16 : n == 4 ? (void *)&a32 : (void *)&a64, n);
    return 0;
  }
  case GW_UINT8: case GW_UINT16: case GW_UINT32: case GW_UINT64: {
    PyObject *i = PyNumber_Index(v);
    if (!i) return -1;
    unsigned long long x = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) goto range;
    size_t n = gw_dtype_size((gw_dtype)dt);
    if (n < 8 && x >> (8 * n)) goto range;
    uint8_t a8 = (uint8_t)x; uint16_t a16 = (uint16_t)x; uint32_t a32 = (uint32_t)x; uint64_t a64 = x;
    memcpy(buf, n == 1 ? (void *)&a8 : n == 2 ? (void *)&a16 : n == 4 ? (void *)&a32 : (void *)&a64, n);
    return 0;
  }
  case GW_FLOAT16: case GW_BFLOAT16: case GW_FLOAT32: case GW_FLOAT64: {
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) return -1;
    if (dt == GW_FLOAT64) {
      memcpy(buf, &d, 8);
    } else if (dt == GW_FLOAT32) {
      float f = (float)d;
      memcpy(buf, &f, 4);
    } else if (dt == GW_BFLOAT16) {
      uint16_t b = f32_to_bf16((float)d);
      memcpy(buf, &b, 2);
    } else if (PyFloat_Pack2(d, (char *)buf, PY_LITTLE_ENDIAN) < 0) {
      return -1;
    }
    return 0;
  }
  case GW_COMPLEX64: case GW_COMPLEX128: {
    Py_complex c = PyComplex_AsCComplex(v);
    if (c.real == -1.0 && PyErr_Occurred()) return -1;
    if (dt == GW_COMPLEX128) {
      memcpy(buf, &c.real, 8);
      memcpy(buf + 8, &c.imag, 8);
    } else {
      float re = (float)c.real, im = (float)c.imag;
      memcpy(buf, &re, 4);
      memcpy(buf + 4, &im, 4);
    }
    return 0;
  }
  }
  PyErr_SetString(PyExc_ValueError, "fill: unknown dtype");
  return -1;
range:
  PyErr_Clear();
  PyErr_Format(PyExc_OverflowError, "fill: %R does not fit in %s", v, DTYPE_STR[dt]);
  return -1;
}

static StreamObject *stream_arg(PyObject *stream) {
  if (!PyObject_TypeCheck(stream, &StreamType)) {
    PyErr_Format(PyExc_TypeError, "stream must be a gpuwrap.Stream (Context.stream(), ExternalStream) "
                                  "or None, not %s", Py_TYPE(stream)->tp_name);
    return NULL;
  }
  return (StreamObject *)stream;
}

static PyObject *Array_fill(ArrayObject *a, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"value", "stream", NULL};
  PyObject *value, *stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:fill", kwlist, &value, &stream)) return NULL;
  StreamObject *so = NULL;
  if (stream != Py_None && !(so = stream_arg(stream))) return NULL;
  unsigned char buf[16] = {0};
  ARR_OR_NULL(a, h0);
  if (pack_value(gw_array_dtype(h0), value, buf) < 0) return NULL;
  gw_array *h = arr_get(a); /* again: packing may have run Python code */
  if (!h) return NULL;
  gw_stream *sh = NULL;
  if (so && !(sh = stream_hold(so))) return NULL;
  gw_retain(h); /* pinned while the GIL is dropped: a release() elsewhere cannot free it */
  gw_status s;
  Py_BEGIN_ALLOW_THREADS
  s = sh ? gw_fill_async(h, buf, sh) : gw_fill(h, buf);
  Py_END_ALLOW_THREADS
  gw_release(h);
  if (so) stream_unhold(so);
  if (s != GW_OK) return RAISE(sh ? "gw_fill_async" : "gw_fill", s);
  Py_RETURN_NONE;
}

static PyObject *Array_copy_from(ArrayObject *a, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"src", "stream", NULL};
  PyObject *src, *stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:copy_from", kwlist, &src, &stream)) return NULL;
  if (!PyObject_TypeCheck(src, &ArrayType)) {
    PyErr_Format(PyExc_TypeError, "copy_from: src must be a gpuwrap.Array, not %s", Py_TYPE(src)->tp_name);
    return NULL;
  }
  StreamObject *so = NULL;
  if (stream != Py_None && !(so = stream_arg(stream))) return NULL;
  ARR_OR_NULL(a, h);
  gw_array *sh_a = arr_get((ArrayObject *)src);
  if (!sh_a) return NULL;
  gw_stream *sh = NULL;
  if (so && !(sh = stream_hold(so))) return NULL;
  gw_retain(h);
  gw_retain(sh_a);
  gw_status s;
  Py_BEGIN_ALLOW_THREADS
  s = sh ? gw_copy_async(h, sh_a, sh) : gw_copy(h, sh_a);
  Py_END_ALLOW_THREADS
  gw_release(sh_a);
  gw_release(h);
  if (so) stream_unhold(so);
  if (s != GW_OK) return RAISE(sh ? "gw_copy_async" : "gw_copy", s);
  Py_RETURN_NONE;
}

/* ---- Array: DLPack ---------------------------------------------------------------------- */

static const char NAME_V[] = "dltensor_versioned", NAME_L[] = "dltensor";
static const char USED_V[] = "used_dltensor_versioned", USED_L[] = "used_dltensor";

static int is_cuda_type(int t) { return t == kDLCUDA || t == kDLCUDAManaged || t == kDLCUDAHost; }
static int is_rocm_type(int t) { return t == kDLROCM || t == kDLROCMHost; }

/* An unconsumed capsule (still named dltensor*) deletes its tensor; the GIL is held. */
static void capsule_destructor(PyObject *cap) {
  /* It may run while an exception is pending (a capsule dropped during unwinding): that
   * exception is kept, and nothing raised here leaks out. */
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  const char *name = PyCapsule_GetName(cap);
  if (name && strcmp(name, NAME_V) == 0) {
    DLManagedTensorVersioned *t = PyCapsule_GetPointer(cap, NAME_V);
    if (t && t->deleter) t->deleter(t);
  } else if (name && strcmp(name, NAME_L) == 0) {
    DLManagedTensor *t = PyCapsule_GetPointer(cap, NAME_L);
    if (t && t->deleter) t->deleter(t);
  }
  PyErr_Clear();
  PyErr_Restore(et, ev, tb);
}

static PyObject *Array_dlpack_device(ArrayObject *a, PyObject *unused) {
  ARR_OR_NULL(a, h);
  DLDevice d;
  gw_status s = gw_dlpack_device(h, &d);
  if (s != GW_OK) return RAISE("gw_dlpack_device", s);
  return Py_BuildValue("(ii)", (int)d.device_type, (int)d.device_id);
}

/* A consumer's `stream` argument, parsed once: `has` 0 for None; `v` the value (two's
 * complement above INT64_MAX, `big` then set); `o` the object, which every message shows
 * as given. */
typedef struct {
  int has, big;
  long long v;
  PyObject *o;
} stream_arg_t;

static int stream_is(const stream_arg_t *st, long long v) { return st->has && !st->big && st->v == v; }

/* The consumer's stream for an export as `type`, checked as the array API defines it.
 * `model`: a CPU-backend array, whose streams are handles > 2. */
static int check_stream(const stream_arg_t *st, int type, int model) {
  if (!st->has || stream_is(st, -1)) return 0;
  int neg = !st->big && st->v < 0;
  if (is_cuda_type(type)) {
    if (stream_is(st, 0) || neg) {
      PyErr_Format(PyExc_BufferError, "__dlpack__: stream %R is not valid on CUDA: use 1 (legacy "
                   "default stream), 2 (per-thread default stream) or a stream handle", st->o);
      return -1;
    }
  } else if (is_rocm_type(type)) {
    if (stream_is(st, 1) || stream_is(st, 2) || neg) {
      PyErr_Format(PyExc_BufferError, "__dlpack__: stream %R is not valid on ROCm: use 0 (default "
                   "stream) or a stream handle", st->o);
      return -1;
    }
  } else if (!(model && (st->big || st->v > 2))) {
    /* The CPU model's streams are handles > 2 (gw_stream_native), never 0, 1 or 2: a test
     * passes one as a GPU consumer passes its stream; gw_stream_wrap checks it. */
    PyErr_Format(PyExc_BufferError, "__dlpack__: stream %R given for device type %d, which has "
                 "no streams: pass None", st->o, type);
    return -1;
  }
  return 0;
}

static int parse_stream_arg(PyObject *o, stream_arg_t *st) {
  *st = (stream_arg_t){.o = o};
  if (o == NULL || o == Py_None) return 0;
  if (PyBool_Check(o) || !PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "__dlpack__: stream must be an int or None, not %s", Py_TYPE(o)->tp_name);
    return -1;
  }
  /* A handle is a pointer value (up to UINT64_MAX); negative ones are classed below. */
  if (int_arg(o, "__dlpack__: stream", -1, INT64_MIN, UINT64_MAX, &st->v, &st->big) < 0) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_BufferError, "__dlpack__: stream %R is not a stream handle (not in %lld .. %llu)",
                 o, (long long)INT64_MIN, (unsigned long long)UINT64_MAX);
    return -1;
  }
  st->has = 1;
  return 0;
}

/* Make the consumer's stream wait, on the device, for gpuwrap's pending work on `h`. */
static int consumer_wait(gw_array *h, const stream_arg_t *st, int type) {
  if (stream_is(st, -1)) return 0; /* the consumer opted out of synchronization */
  int pending = gw_array_pending(h);
  void *native = (void *)(uintptr_t)(unsigned long long)st->v; /* ROCm 0; handles */
  if (!st->has) {
    if (!pending) return 0;
    if (!is_cuda_type(type) && !is_rocm_type(type)) {
      /* A kDLCPU consumer reads on the host (NumPy): no consumer stream to wait on the
       * device, so the export waits here for the pending work. */
      return aux_wait(h, 1, NULL) == (uintptr_t)-1 ? -1 : 0;
    }
    native = NULL; /* the array API: None means the legacy default stream on CUDA / ROCm */
  } else if (is_cuda_type(type)) {
    /* 1: the legacy default stream (handle NULL); 2: cudaStreamPerThread's own value. */
    if (!pending && (stream_is(st, 1) || stream_is(st, 2))) return 0; /* valid, nothing to wait for */
    if (stream_is(st, 1)) native = NULL;
  } else {
    if (!pending && stream_is(st, 0) && is_rocm_type(type)) return 0;
  }
  if (PyErr_Occurred()) return -1;
  gw_stream *b = NULL;
  gw_status s = gw_stream_wrap(gw_array_context(h), native, &b);
  if (s != GW_OK) { /* not a stream of this backend / device: the consumer gave a bad one */
    PyObject *call = PyUnicode_FromFormat("__dlpack__(stream=%R)", st->o);
    if (call) raise_status(BufErrorType, PyUnicode_AsUTF8(call), s);
    Py_XDECREF(call);
    return -1;
  }
  s = gw_array_wait(h, b); /* a handle given explicitly waits even when nothing is pending */
  gw_stream_destroy(b);    /* borrowed: drops gpuwrap's handle only */
  if (s != GW_OK) {
    RAISE("gw_array_wait", s);
    return -1;
  }
  return 0;
}

static int parse_device_pair(PyObject *o, DLDevice *d, const char *what) {
  if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2) {
    PyErr_Format(PyExc_TypeError, "%s must be a (device_type, device_id) tuple, not %R", what, o);
    return -1;
  }
  long long t, i; /* both int32 in DLDevice */
  if (int_arg(PyTuple_GET_ITEM(o, 0), what, 0, INT32_MIN, INT32_MAX, &t, NULL) < 0 ||
      int_arg(PyTuple_GET_ITEM(o, 1), what, 1, INT32_MIN, INT32_MAX, &i, NULL) < 0)
    return -1;
  d->device_type = (DLDeviceType)t;
  d->device_id = (int32_t)i;
  return 0;
}

static PyObject *Array_dlpack(ArrayObject *a, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *stream_o = NULL, *maxv = NULL, *dl_device = NULL, *copy = NULL;
  if (nargs) {
    PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only "
                                     "(stream, max_version, dl_device, copy)");
    return NULL;
  }
  Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nk; i++) {
    PyObject *k = PyTuple_GET_ITEM(kwnames, i), *v = args[i];
    if (k == S_stream || PyUnicode_Compare(k, S_stream) == 0) stream_o = v;
    else if (k == S_max_version || PyUnicode_Compare(k, S_max_version) == 0) maxv = v;
    else if (k == S_dl_device || PyUnicode_Compare(k, S_dl_device) == 0) dl_device = v;
    else if (k == S_copy || PyUnicode_Compare(k, S_copy) == 0) copy = v;
    else {
      PyErr_Format(PyExc_TypeError, "__dlpack__() got an unexpected keyword argument %R", k);
      return NULL;
    }
  }
  if (copy && copy != Py_None) {
    if (!PyBool_Check(copy)) {
      PyErr_Format(PyExc_TypeError, "__dlpack__: copy must be True, False or None, not %R", copy);
      return NULL;
    }
    if (copy == Py_True) {
      PyErr_SetString(PyExc_BufferError, "__dlpack__: gpuwrap never copies (copy=True asked for a copy)");
      return NULL;
    }
  }
  int versioned = 0;
  if (maxv && maxv != Py_None) {
    /* The consumer's highest DLPack (major, minor): >= 1.0 gets a versioned capsule (ours
     * is 1.x, which any 1.y consumer reads), 0.x a legacy one. */
    if (!PyTuple_Check(maxv) || PyTuple_GET_SIZE(maxv) != 2 || !PyLong_Check(PyTuple_GET_ITEM(maxv, 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(maxv, 1))) {
      PyErr_Format(PyExc_TypeError, "__dlpack__: max_version must be a (major, minor) tuple of ints, not %R", maxv);
      return NULL;
    }
    long long major, minor; /* DLPackVersion's fields are uint32 */
    if (int_arg(PyTuple_GET_ITEM(maxv, 0), "__dlpack__: max_version", 0, LLONG_MIN, UINT32_MAX, &major, NULL) < 0 ||
        int_arg(PyTuple_GET_ITEM(maxv, 1), "__dlpack__: max_version", 1, LLONG_MIN, UINT32_MAX, &minor, NULL) < 0)
      return NULL;
    if (major < 0 || minor < 0) {
      PyErr_Format(PyExc_ValueError, "__dlpack__: max_version %R is not a version", maxv);
      return NULL;
    }
    versioned = major >= 1;
  }
  DLDevice want;
  if (dl_device && dl_device != Py_None && parse_device_pair(dl_device, &want, "__dlpack__: dl_device") < 0)
    return NULL;
  stream_arg_t st;
  if (parse_stream_arg(stream_o, &st) < 0) return NULL;

  ARR_OR_NULL(a, h);
  gw_retain(h); /* the export may drop the GIL (a host wait): pin the array */
  PyObject *result = NULL;
  int type;
  if (dl_device && dl_device != Py_None) {
    type = want.device_type;
  } else {
    DLDevice d;
    gw_status s = gw_dlpack_device(h, &d);
    if (s != GW_OK) {
      RAISE("gw_dlpack_device", s);
      goto out;
    }
    type = d.device_type;
  }
  int model = gw_context_backend(gw_array_context(h)) == GW_BACKEND_CPU;
  if (check_stream(&st, type, model) < 0) goto out;
  if (consumer_wait(h, &st, type) < 0) goto out;
  void *t = NULL;
  gw_status s;
  int as = dl_device && dl_device != Py_None;
  if (versioned)
    s = as ? gw_to_dlpack_as(h, want, (DLManagedTensorVersioned **)&t) : gw_to_dlpack(h, (DLManagedTensorVersioned **)&t);
  else
    s = as ? gw_to_dlpack_legacy_as(h, want, (DLManagedTensor **)&t) : gw_to_dlpack_legacy(h, (DLManagedTensor **)&t);
  if (s == GW_EREADONLY && !versioned) { /* the library's message names its C calls */
    PyObject *e = PyObject_CallFunction(
        BufErrorType, "sis", "__dlpack__", (int)s,
        "a read-only array, and the consumer asked for a legacy capsule (no max_version, or "
        "one below (1, 0)), which cannot say read-only: a consumer of DLPack >= 1.0 gets it "
        "(a.__dlpack__(max_version=(1, 0)); NumPy >= 2.1's np.from_dlpack); np.asarray(a) "
        "shares it read-only through the array interface");
    if (e) {
      PyErr_SetObject((PyObject *)Py_TYPE(e), e);
      Py_DECREF(e);
    }
    goto out;
  }
  if (s == GW_ENOTSUP || s == GW_EREADONLY) { /* not shareable this way without a copy */
    raise_status(BufErrorType, "__dlpack__", s);
    goto out;
  }
  if (s != GW_OK) {
    RAISE("__dlpack__", s);
    goto out;
  }
  result = PyCapsule_New(t, versioned ? NAME_V : NAME_L, capsule_destructor);
  if (!result) {
    if (versioned)
      ((DLManagedTensorVersioned *)t)->deleter(t);
    else
      ((DLManagedTensor *)t)->deleter(t);
  }
out:
  gw_release(h);
  return result;
}

/* ---- Array: CUDA Array Interface, NumPy's array interface ----------------------------- */

static int c_contiguous(const int64_t *shape, const int64_t *strides, int n) {
  for (int i = 0; i < n; i++)
    if (shape[i] == 0) return 1;
  int64_t want = 1;
  for (int i = n - 1; i >= 0; i--) {
    if (shape[i] != 1 && strides[i] != want) return 0;
    want *= shape[i];
  }
  return 1;
}

/* The dict both interfaces share: shape, typestr, data, strides (bytes, None when C
 * contiguous), version 3 (+ stream for the CUDA one). */
static PyObject *interface_dict(gw_array *h, void *data, int with_stream, PyObject *stream) {
  int dt = gw_array_dtype(h), nd = gw_ndim(h);
  const int64_t *sp = gw_shape(h), *tp = gw_strides(h);
  PyObject *shape = int64_tuple(sp, nd, 1);
  PyObject *strides = c_contiguous(sp, tp, nd) ? Py_NewRef(Py_None)
                                               : int64_tuple(tp, nd, (int64_t)gw_dtype_size((gw_dtype)dt));
  PyObject *d = NULL;
  if (shape && strides) {
    if (with_stream)
      d = Py_BuildValue("{s:O,s:s,s:(NO),s:O,s:i,s:O}", "shape", shape, "typestr", TYPESTR[dt], "data",
                        PyLong_FromVoidPtr(data), gw_is_readonly(h) ? Py_True : Py_False, "strides", strides,
                        "version", 3, "stream", stream);
    else
      d = Py_BuildValue("{s:O,s:s,s:(NO),s:O,s:i}", "shape", shape, "typestr", TYPESTR[dt], "data",
                        PyLong_FromVoidPtr(data), gw_is_readonly(h) ? Py_True : Py_False, "strides", strides,
                        "version", 3);
  }
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return d;
}

static PyObject *Array_get_cai(ArrayObject *a, void *u) {
  /* AttributeError (hasattr() false) where there is none, so consumers fall back to
   * DLPack or __array_interface__: host-only memory, other backends than CUDA. */
  ARR_OR_NULL(a, h);
  if (gw_context_backend(gw_array_context(h)) != GW_BACKEND_CUDA) {
    PyErr_SetString(PyExc_AttributeError, "__cuda_array_interface__: only arrays of a CUDA context have it");
    return NULL;
  }
  void *data = gw_data(h);
  if (gw_kind(h) == GW_MEM_HOST || (!data && gw_numel(h))) {
    PyErr_SetString(PyExc_AttributeError, "__cuda_array_interface__: the memory is not device-accessible "
                                          "(host-only array)");
    return NULL;
  }
  int dt = gw_array_dtype(h);
  if (!TYPESTR[dt]) {
    PyErr_Format(PyExc_AttributeError, "__cuda_array_interface__: %s has no typestr", DTYPE_STR[dt]);
    return NULL;
  }
  /* stream: None when no gpuwrap work is pending, else the kept stream made to wait for it
   * (on the device): the consumer orders its use after that stream, as v3 requires. */
  PyObject *stream = Py_NewRef(Py_None);
  if (gw_array_pending(h)) {
    gw_retain(h);
    uintptr_t native = aux_wait(h, 0, a);
    gw_release(h);
    Py_DECREF(stream);
    if (native == (uintptr_t)-1) return NULL;
    stream = PyLong_FromUnsignedLongLong(native);
    if (!stream) return NULL;
  }
  if (!a->h) { /* aux_wait ran Python code (a stream creation): released meanwhile? */
    Py_DECREF(stream);
    return arr_get(a), NULL;
  }
  PyObject *d = interface_dict(a->h, data, 1, stream);
  Py_DECREF(stream);
  return d;
}

static PyObject *Array_get_ai(ArrayObject *a, void *u) {
  /* Host-accessible memory only: AttributeError otherwise, so np.asarray() goes on to
   * __array__, which says why. Pending stream work is waited for on the host first (the
   * consumer, NumPy, reads on the host), as a kDLCPU DLPack export does. */
  ARR_OR_NULL(a, h);
  void *hp = gw_host_data(h);
  if (!hp && gw_numel(h)) {
    PyErr_Format(PyExc_AttributeError, "__array_interface__: %s memory is not host-accessible",
                 PyUnicode_AsUTF8(KindNames[gw_kind(h) < 5 ? gw_kind(h) : 0]));
    return NULL;
  }
  int dt = gw_array_dtype(h);
  if (!TYPESTR[dt]) {
    PyErr_Format(PyExc_AttributeError, "__array_interface__: NumPy has no %s", DTYPE_STR[dt]);
    return NULL;
  }
  if (gw_array_pending(h)) {
    gw_retain(h);
    uintptr_t r = aux_wait(h, 1, NULL);
    gw_release(h);
    if (r == (uintptr_t)-1) return NULL;
    if (!(h = arr_get(a))) return NULL;
  }
  if (!a->kept) a->kept = gw_retain(h);
  a->ai_given++;
  /* NumPy refuses a data address of 0 even with no elements (1.24: a TypeError from
   * np.asarray of an empty wrap(0, ...)), so an array without elements and without an
   * address points at a dummy that is never read nor written. */
  static _Alignas(16) unsigned char no_elements[16];
  if (!hp) hp = no_elements;
  return interface_dict(h, hp, 0, NULL);
}

static PyObject *Array_array(ArrayObject *a, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"dtype", "copy", NULL};
  PyObject *dtype = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:__array__", kwlist, &dtype, &copy)) return NULL;
  ARR_OR_NULL(a, h);
  if (!gw_host_data(h) && gw_numel(h)) {
    unsigned k = (unsigned)gw_kind(h);
    PyErr_Format(PyExc_TypeError,
                 "gpuwrap.Array of %s memory is not host-accessible: NumPy cannot read it. Copy it "
                 "into host memory first (ctx.alloc('host', ...).copy_from(a)), or share it with a "
                 "GPU library (torch.from_dlpack(a), cupy.from_dlpack(a))",
                 PyUnicode_AsUTF8(KindNames[k < 5 ? k : 0]));
    return NULL;
  }
  return PyObject_CallFunctionObjArgs(ArrayHook, (PyObject *)a, dtype, copy, NULL);
}

static PyObject *Array_offer(ArrayObject *a, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"device_type", "device_id", NULL};
  PyObject *type, *id = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:offer", kwlist, &type, &id)) return NULL;
  if (!arr_get(a)) return NULL;
  return PyObject_CallFunctionObjArgs(OfferType, (PyObject *)a, type, id ? id : Py_None, NULL);
}

static PyObject *Array_pending(ArrayObject *a, PyObject *unused) {
  ARR_OR_NULL(a, h);
  return PyBool_FromLong(gw_array_pending(h));
}

static PyMethodDef Array_methods[] = {
    {"release", (PyCFunction)Array_release, METH_NOARGS,
     "Drop this reference (once, from any thread); later uses raise ValueError."},
    {"view", (PyCFunction)(void (*)(void))Array_view, METH_VARARGS | METH_KEYWORDS,
     "view(start, shape, step=None): a view sharing the memory (keeps it alive)."},
    {"fill", (PyCFunction)(void (*)(void))Array_fill, METH_VARARGS | METH_KEYWORDS,
     "fill(value, stream=None): set every element; with a Stream, queued on it."},
    {"copy_from", (PyCFunction)(void (*)(void))Array_copy_from, METH_VARARGS | METH_KEYWORDS,
     "copy_from(src, stream=None): copy a gpuwrap Array of the same dtype and shape into this one."},
    {"offer", (PyCFunction)(void (*)(void))Array_offer, METH_VARARGS | METH_KEYWORDS,
     "offer(device_type, device_id=0): an object whose DLPack protocol offers this array as "
     "device_type ('cpu', 'cuda', 'rocm', ...); BufferError if impossible without a copy."},
    {"pending", (PyCFunction)Array_pending, METH_NOARGS,
     "Whether asynchronous gpuwrap work on the memory may not have completed (gw_array_pending)."},
    {"dlpack_device", (PyCFunction)Array_dlpack_device, METH_NOARGS, NULL},
    {"__dlpack_device__", (PyCFunction)Array_dlpack_device, METH_NOARGS, "(device_type, device_id)"},
    {"__dlpack__", (PyCFunction)(void (*)(void))Array_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None): a DLPack capsule "
     "over this array's memory, never a copy."},
    {"__array__", (PyCFunction)(void (*)(void))Array_array, METH_VARARGS | METH_KEYWORDS,
     "A NumPy array over host-accessible memory; TypeError for device-only memory."},
    {"__enter__", enter_self, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Array_release, METH_VARARGS, NULL},
    {NULL}};

static PyGetSetDef Array_getset[] = {
    {"data_ptr", (getter)Array_get_data_ptr, NULL, "device-usable address of element 0 (None if none)", NULL},
    {"host_ptr", (getter)Array_get_host_ptr, NULL, "host-usable address of element 0 (None if none)", NULL},
    {"handle", (getter)Array_get_handle, NULL, "the gw_array address", NULL},
    {"released", (getter)Array_get_released, NULL, NULL, NULL},
    {"kind", (getter)Array_get_kind, NULL, "'host', 'pinned', 'device', 'managed' or 'unknown'", NULL},
    {"device", (getter)Array_get_device, NULL, "owning device (-1: host memory)", NULL},
    {"dtype", (getter)Array_get_dtype, NULL, "dtype name ('float32')", NULL},
    {"itemsize", (getter)Array_get_itemsize, NULL, NULL, NULL},
    {"nbytes", (getter)Array_get_nbytes, NULL, NULL, NULL},
    {"size", (getter)Array_get_size, NULL, "element count", NULL},
    {"ndim", (getter)Array_get_ndim, NULL, NULL, NULL},
    {"shape", (getter)Array_get_shape, NULL, NULL, NULL},
    {"strides", (getter)Array_get_strides, NULL, "strides in elements", NULL},
    {"readonly", (getter)Array_get_readonly, NULL, NULL, NULL},
    {"__cuda_array_interface__", (getter)Array_get_cai, NULL, "CUDA Array Interface v3", NULL},
    {"__array_interface__", (getter)Array_get_ai, NULL, "NumPy array interface v3 (host memory)", NULL},
    {NULL}};

static PyTypeObject ArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuwrap.Array",
    .tp_basicsize = sizeof(ArrayObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A gpuwrap array: one reference, dropped by release() (from any thread, once) or "
              "by garbage collection. Array(handle) adopts one reference to a gw_array address.",
    .tp_new = Array_new,
    .tp_dealloc = (destructor)Array_dealloc,
    .tp_traverse = (traverseproc)Array_traverse,
    .tp_clear = (inquiry)Array_clear,
    .tp_finalize = (destructor)Array_finalize,
    .tp_repr = (reprfunc)Array_repr,
    .tp_methods = Array_methods,
    .tp_getset = Array_getset,
};

/* ---- module functions ------------------------------------------------------------------- */

/* import_capsule(ctx, capsule): take a DLPack capsule's tensor (the name check and the
 * rename to used_* happen under the GIL: two threads cannot both take it). */
static PyObject *mod_import_capsule(PyObject *m, PyObject *args) {
  ContextObject *c;
  PyObject *cap;
  if (!PyArg_ParseTuple(args, "O!O", &ContextType, &c, &cap)) return NULL;
  if (!PyCapsule_CheckExact(cap)) {
    PyErr_Format(PyExc_TypeError, "not a DLPack capsule: %s", Py_TYPE(cap)->tp_name);
    return NULL;
  }
  gw_context *ch = ctx_get(c);
  if (!ch) return NULL;
  const char *name = PyCapsule_GetName(cap);
  int versioned;
  if (name && strcmp(name, NAME_V) == 0)
    versioned = 1;
  else if (name && strcmp(name, NAME_L) == 0)
    versioned = 0;
  else {
    PyErr_Format(PyExc_ValueError, "not a DLPack capsule, or one already consumed: %s", name ? name : "NULL");
    return NULL;
  }
  void *t = PyCapsule_GetPointer(cap, name);
  if (!t) return NULL;
  /* gpuwrap takes the tensor (even when the import fails): the capsule must not delete it. */
  if (PyCapsule_SetName(cap, versioned ? USED_V : USED_L) < 0) return NULL;
  gw_array *out = NULL;
  gw_status s = versioned ? gw_from_dlpack(ch, t, &out) : gw_from_dlpack_legacy(ch, t, &out);
  if (s != GW_OK) return RAISE("from_dlpack", s);
  return array_new(out);
}

/* sync_native(ctx, native): wait on the host for a borrowed native stream's work. */
static PyObject *mod_sync_native(PyObject *m, PyObject *args) {
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
  Py_END_ALLOW_THREADS
  gw_stream_destroy(b); /* borrowed: the producer's stream lives on */
  if (s != GW_OK) return RAISE("gw_stream_synchronize", s);
  Py_RETURN_NONE;
}

static PyObject *mod_check_stream(PyObject *m, PyObject *args) {
  PyObject *stream;
  int type, model = 0;
  if (!PyArg_ParseTuple(args, "Oi|p", &stream, &type, &model)) return NULL;
  stream_arg_t st;
  if (parse_stream_arg(stream, &st) < 0 || check_stream(&st, type, model) < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject *mod_err_name(PyObject *m, PyObject *arg) {
  long long s;
  if (int_arg(arg, "status", -1, INT_MIN, INT_MAX, &s, NULL) < 0) return NULL;
  return PyUnicode_FromString(gw_err_name((gw_status)s));
}
static PyObject *mod_strerror(PyObject *m, PyObject *arg) {
  long long s;
  if (int_arg(arg, "status", -1, INT_MIN, INT_MAX, &s, NULL) < 0) return NULL;
  return PyUnicode_FromString(gw_strerror((gw_status)s));
}
static PyObject *mod_last_error(PyObject *m, PyObject *unused) {
  return PyUnicode_DecodeUTF8(gw_last_error(), (Py_ssize_t)strlen(gw_last_error()), "replace");
}

/* The file the dynamic loader took libgpuwrap from (what ctypes must load to be the same). */
static PyObject *mod_library_path(PyObject *m, PyObject *unused) {
  Dl_info info;
  if (!dladdr((void *)&gw_wrap, &info) || !info.dli_fname) Py_RETURN_NONE;
  return PyUnicode_DecodeFSDefault(info.dli_fname);
}

static PyObject *mod_info(PyObject *m, PyObject *unused) {
#ifdef GW_PY_WITH_INFO
  char name[] = "info";
  char *argv[] = {name, NULL};
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = gw_tool_info(1, argv);
  fflush(stdout);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(rc);
#else
  PyErr_SetString(PyExc_NotImplementedError, "built without tools/cmd_info.c");
  return NULL;
#endif
}

static PyObject *mod_init(PyObject *m, PyObject *args) {
  if (!PyArg_ParseTuple(args, "OOOOOOO", &ErrorType, &BufErrorType, &ResolveDtype, &OfferType, &ArrayHook,
                        &DtypeCache, &InterfaceMemory))
    return NULL;
  Py_INCREF(InterfaceMemory);
  Py_INCREF(ErrorType); Py_INCREF(BufErrorType); Py_INCREF(ResolveDtype);
  Py_INCREF(OfferType); Py_INCREF(ArrayHook); Py_INCREF(DtypeCache);
  Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
    {"_init", mod_init, METH_VARARGS, NULL},
    {"import_capsule", mod_import_capsule, METH_VARARGS, NULL},
    {"stream_create", mod_stream_create, METH_VARARGS, NULL},
    {"stream_borrow", mod_stream_borrow, METH_VARARGS, NULL},
    {"sync_native", mod_sync_native, METH_VARARGS, NULL},
    {"check_stream", mod_check_stream, METH_VARARGS, NULL},
    {"err_name", mod_err_name, METH_O, NULL},
    {"strerror", mod_strerror, METH_O, NULL},
    {"last_error", mod_last_error, METH_NOARGS, NULL},
    {"library_path", mod_library_path, METH_NOARGS, NULL},
    {"info", mod_info, METH_NOARGS, "Print what `gpuwrap info` prints; its exit status."},
    {NULL}};

/* ---- issue 37 hooks: what _exchange.c (the DLPack C exchange API) uses of this file ---- */
static gw_context *xh_context(PyObject *o) {
  if (!PyObject_TypeCheck(o, &ContextType)) {
    PyErr_Format(PyExc_TypeError, "ctx must be a gpuwrap.Context, not %s", Py_TYPE(o)->tp_name);
    return NULL;
  }
  return ctx_get((ContextObject *)o);
}
static gw_array *xh_array(PyObject *o) { return arr_get((ArrayObject *)o); }
static int xh_export_wait(gw_array *h, int type) {
  stream_arg_t none = {0};
  return consumer_wait(h, &none, type);
}
static PyObject *xh_raise(int buffer, const char *call, gw_status s) {
  return raise_status(buffer ? BufErrorType : ErrorType, call, s);
}
static const gwpy_exchange_hooks exchange_hooks = {xh_context, xh_array, array_new, xh_export_wait, xh_raise};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_gpuwrap", NULL, -1, mod_methods};

PyMODINIT_FUNC PyInit__gpuwrap(void) {
  if (PyType_Ready(&ContextType) < 0 || PyType_Ready(&ArrayType) < 0 || PyType_Ready(&StreamType) < 0 ||
      PyType_Ready(&KeeperType) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&moddef);
  if (!m) return NULL;
  for (int i = 0; i < GW_DTYPE_COUNT; i++) DtypeNames[i] = PyUnicode_InternFromString(DTYPE_STR[i]);
  static const char *kinds[5] = {"unknown", "host", "pinned", "device", "managed"};
  for (int i = 0; i < 5; i++) KindNames[i] = PyUnicode_InternFromString(kinds[i]);
  static const char *backends[4] = {"auto", "cpu", "cuda", "hip"};
  for (int i = 0; i < 4; i++) BackendNames[i] = PyUnicode_InternFromString(backends[i]);
  S_stream = PyUnicode_InternFromString("stream");
  S_max_version = PyUnicode_InternFromString("max_version");
  S_dl_device = PyUnicode_InternFromString("dl_device");
  S_copy = PyUnicode_InternFromString("copy");
  S_readonly = PyUnicode_InternFromString("readonly");
  S_no_register = PyUnicode_InternFromString("no_register");
  S_own = PyUnicode_InternFromString("own");
  S_deleter = PyUnicode_InternFromString("deleter");
  AuxStreams = PyDict_New();
  OpenContexts = PySet_New(NULL);
  if (!AuxStreams || !OpenContexts || PyModule_AddObjectRef(m, "aux_streams", AuxStreams) < 0 ||
      PyModule_AddObjectRef(m, "Context", (PyObject *)&ContextType) < 0 ||
      PyModule_AddObjectRef(m, "Array", (PyObject *)&ArrayType) < 0 ||
      PyModule_AddObjectRef(m, "Stream", (PyObject *)&StreamType) < 0 ||
      PyModule_AddIntConstant(m, "DLPACK_MAJOR", DLPACK_MAJOR_VERSION) < 0 ||
      PyModule_AddIntConstant(m, "DLPACK_MINOR", DLPACK_MINOR_VERSION) < 0 ||
      gwpy_exchange_init(m, &ArrayType, &exchange_hooks) < 0) { /* issue 37 */
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
