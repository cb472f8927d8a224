/*
 * Context.wrap: an address (unchecked) or an object's memory (the buffer protocol,
 * __array_interface__, __cuda_array_interface__: kept alive, the span checked) as an
 * Array, without copying; with a Python deleter run exactly once by the library. The
 * Keeper is what the library holds for such a wrap (its user pointer), and what the
 * collector follows from the Array (_array.c, owns_keeper) to break a cycle through it.
 */
#include "_gpuwrap.h"

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

PyTypeObject KeeperType = {
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
        if (span < 0)
          l += span;
        else
          h += span;
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
static int span_inside(int nd, const int64_t *shape, const int64_t *strides, size_t size,
                       long long lo, long long hi, long long *elo, long long *ehi) {
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
    if (span < 0)
      over |= __builtin_add_overflow(l, span, &l);
    else
      over |= __builtin_add_overflow(h, span, &h);
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
PyObject *Context_wrap(ContextObject *c, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames) {
  PyObject *ptr_o = NULL, *dtype_o = NULL, *shape_o = NULL, *strides_o = Py_None,
           *deleter = Py_None;
  unsigned flags = 0;
  if (nargs < 3 || nargs > 4) {
    PyErr_Format(PyExc_TypeError,
                 "wrap(ptr, dtype, shape, strides=None, *, readonly, "
                 "no_register, own, deleter): %zd positional arguments",
                 nargs);
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
  int is_obj = ptr_o != Py_None && !PyLong_Check(ptr_o) &&
               (!PyIndex_Check(ptr_o) || PySequence_Check(ptr_o));
  if (!is_obj && parse_ptr(ptr_o, &ptr, "wrap: ptr") < 0) return NULL;
  if (is_obj && (flags & GW_WRAP_OWN)) {
    PyErr_Format(PyExc_ValueError,
                 "wrap: own=True with a %s: its memory is the object's (the array "
                 "keeps the object alive while wrapped; nothing is freed)",
                 Py_TYPE(ptr_o)->tp_name);
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
        raise_detail(
            "gw_wrap", GW_ERANGE,
            PyUnicode_FromFormat("ptr: shape %R, strides %R (in elements of %zu bytes, not bytes) "
                                 "reach bytes %lld .. %lld "
                                 "from element 0, outside the %s's memory, bytes %lld .. %lld",
                                 shp, str, size, elo, ehi, Py_TYPE(ptr_o)->tp_name, lo, hi));
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
