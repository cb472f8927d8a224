/*
 * Array: one gw_array reference per Python object, given up exactly once (release(),
 * `with`, or the collector), and the collector support that lets a wrap's Python deleter
 * refer back to its array; the properties, view, fill, copy_from, and the type with its
 * method table. The protocols live beside it: DLPack in _dlpack.c, the array interfaces
 * in _cai.c, IPC in _ipc.c.
 */
#include "_gpuwrap.h"

#include <stdio.h>

/* gw__array_refs, for owns_keeper: the library's private ABI, checked at import. */
#include "core/private.h"

#if PY_VERSION_HEX < 0x030B0000 /* public from 3.11 */
#define PyFloat_Pack2 _PyFloat_Pack2
#endif

PyObject *array_new(gw_array *h) {
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

gw_array *arr_get(ArrayObject *a) {
  if (!a->h) PyErr_SetString(PyExc_ValueError, "gpuwrap: array released");
  return a->h;
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
  a->h = NULL;                    /* taken out before anything can run (a deleter): exactly once */
  if (!a->kept) a->keeper = NULL; /* kept (NumPy's views) holds the root, and so the Keeper */
  if (h) gw_release(h);
  Py_RETURN_NONE;
}

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
static PyObject *Array_get_released(ArrayObject *a, void *u) {
  return PyBool_FromLong(a->h == NULL);
}
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
PyObject *int64_tuple(const int64_t *v, int n, int64_t scale) {
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
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:view", kwlist, &start_o, &shape_o, &step_o))
    return NULL;
  int64_t start[GW_MAX_DIMS], shape[GW_MAX_DIMS], step[GW_MAX_DIMS];
  int n0 = int64_seq(start_o, start, "start"),
      n1 = n0 < 0 ? -1 : int64_seq(shape_o, shape, "shape");
  if (n1 < 0) return NULL;
  int n2 = step_o == Py_None ? n1 : int64_seq(step_o, step, "step");
  if (n2 < 0) return NULL;
  ARR_OR_NULL(a, h);
  if (n0 != gw_ndim(h) || n1 != gw_ndim(h) || n2 != gw_ndim(h)) {
    PyErr_Format(PyExc_ValueError,
                 "view: start, shape and step need %d values each (got %d, %d, %d)", gw_ndim(h), n0,
                 n1, n2);
    return NULL;
  }
  gw_array *out = NULL;
  gw_status s = gw_view(h, start, shape, step_o == Py_None ? NULL : step, &out);
  if (s != GW_OK) return RAISE("gw_view", s);
  return array_new(out);
}

/* a[index]: NumPy's basic slicing, as a view sharing the memory (it keeps the memory
 * alive). An index is an int (the dim goes; negative counts from the end; out of range:
 * IndexError), a slice (any step, negative too), Ellipsis (once: the dims it stands for
 * are whole), or a tuple of these; dims left over are whole. All ints: a 0-d view.
 * Anything else (None, lists, arrays, bools) is advanced indexing, which needs a copy or a
 * gather gpuwrap never makes: TypeError, pointing to the consumer library. Built from
 * gw_view (start, extent, step per dim), then gw_reshape without the dims the ints took
 * (a reshape that only drops extent-1 dims is a view of any layout). */
static PyObject *not_basic(PyObject *item) {
  PyErr_Format(PyExc_TypeError,
               "gpuwrap.Array index: %s is not basic slicing (ints, slices, ..., or a tuple of "
               "them); gpuwrap makes views only: for advanced indexing (lists, arrays, booleans, "
               "None/newaxis) use the consumer library on the shared memory (np.asarray(a)[...], "
               "cupy.from_dlpack(a)[...], torch.from_dlpack(a)[...])",
               Py_TYPE(item)->tp_name);
  return NULL;
}

/* A bool is a mask to NumPy (advanced indexing), never the int 0 or 1 it converts to;
 * NumPy's bool scalar is one too (NumPy 1.x converts it to an index with a warning). */
static int is_bool(PyObject *o) {
  const char *t = Py_TYPE(o)->tp_name;
  return PyBool_Check(o) || !strcmp(t, "numpy.bool_") || !strcmp(t, "numpy.bool");
}

static PyObject *Array_subscript(ArrayObject *a, PyObject *index) {
  ARR_OR_NULL(a, h);
  int nd = gw_ndim(h);
  const int64_t *pshape = gw_shape(h);
  PyObject *tuple = PyTuple_Check(index) ? Py_NewRef(index) : PyTuple_Pack(1, index);
  if (!tuple) return NULL;
  Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  int64_t start[GW_MAX_DIMS], shape[GW_MAX_DIMS], step[GW_MAX_DIMS], keep[GW_MAX_DIMS];
  int used = 0, ellipsis = -1, kept = 0;
  /* First pass: what each item is, and how many dims the items other than ... take. */
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *it = PyTuple_GET_ITEM(tuple, i);
    if (it == Py_Ellipsis) {
      if (ellipsis >= 0) {
        Py_DECREF(tuple);
        PyErr_SetString(PyExc_IndexError,
                        "gpuwrap.Array index: an index can only have a single ellipsis ('...')");
        return NULL;
      }
      ellipsis = (int)i;
    } else if (PySlice_Check(it) || (!is_bool(it) && PyIndex_Check(it))) {
      used++;
    } else {
      Py_DECREF(tuple);
      return not_basic(it);
    }
  }
  if (used > nd) {
    Py_DECREF(tuple);
    PyErr_Format(PyExc_IndexError,
                 "gpuwrap.Array index: too many indices: the array is %d-dimensional, but %d "
                 "were indexed",
                 nd, used);
    return NULL;
  }
  /* Second pass: start, extent and step per dim; `keep` the extents of the dims kept. */
  int d = 0;
  for (Py_ssize_t i = 0; i <= n; i++) {
    PyObject *it = i < n ? PyTuple_GET_ITEM(tuple, i) : NULL;
    if (!it || it == Py_Ellipsis) { /* whole dims: those ... stands for, or those left over */
      for (int stop = it ? d + nd - used : nd; d < stop; d++) {
        start[d] = 0, shape[d] = pshape[d], step[d] = 1;
        keep[kept++] = pshape[d];
      }
    } else if (PySlice_Check(it)) {
      Py_ssize_t b, e, st;
      if (PySlice_Unpack(it, &b, &e, &st) < 0) goto fail; /* a step of 0: ValueError */
      Py_ssize_t len = PySlice_AdjustIndices((Py_ssize_t)pshape[d], &b, &e, st);
      start[d] = b, shape[d] = len, step[d] = st;
      keep[kept++] = len;
      d++;
    } else {
      Py_ssize_t v = PyNumber_AsSsize_t(it, PyExc_IndexError);
      if (v == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) { /* an array of more than one element */
          PyErr_Clear();
          not_basic(it);
        }
        goto fail;
      }
      int64_t at = v < 0 ? (int64_t)v + pshape[d] : (int64_t)v;
      if (at < 0 || at >= pshape[d]) {
        PyErr_Format(PyExc_IndexError,
                     "gpuwrap.Array index: %zd is out of bounds for axis %d with size %lld", v, d,
                     (long long)pshape[d]);
        goto fail;
      }
      start[d] = at, shape[d] = 1, step[d] = 1;
      d++;
    }
  }
  Py_DECREF(tuple);
  gw_array *v = NULL, *r = NULL;
  gw_status st = gw_view(h, start, shape, step, &v);
  if (st != GW_OK) return RAISE("gw_view", st);
  if (kept == nd) return array_new(v);
  st = gw_reshape(v, kept, keep, &r); /* the dims the ints took go: a view still */
  gw_release(v);
  if (st != GW_OK) return RAISE("gw_reshape", st);
  return array_new(r);
fail:
  Py_DECREF(tuple);
  return NULL;
}

static PyMappingMethods Array_as_mapping = {.mp_subscript = (binaryfunc)Array_subscript};

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* a quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

/* The low n (1, 2, 4 or 8) bytes of x, as an integer of that width stores them. */
static void store_int(unsigned char *buf, uint64_t x, size_t n) {
  uint8_t a8 = (uint8_t)x;
  uint16_t a16 = (uint16_t)x;
  uint32_t a32 = (uint32_t)x;
  memcpy(buf, n == 1 ? (void *)&a8 : n == 2 ? (void *)&a16 : n == 4 ? (void *)&a32 : (void *)&x, n);
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
  case GW_INT8:
  case GW_INT16:
  case GW_INT32:
  case GW_INT64: {
    PyObject *i = PyNumber_Index(v);
    if (!i) return -1;
    long long x = PyLong_AsLongLong(i);
    Py_DECREF(i);
    if (x == -1 && PyErr_Occurred()) return -1;
    size_t n = gw_dtype_size((gw_dtype)dt);
    long long lo = n == 8 ? INT64_MIN : -(1LL << (8 * n - 1)),
              hi = n == 8 ? INT64_MAX : (1LL << (8 * n - 1)) - 1;
    if (x < lo || x > hi) goto range;
    store_int(buf, (uint64_t)x, n); /* (two's complement: the low n bytes) */
    return 0;
  }
  case GW_UINT8:
  case GW_UINT16:
  case GW_UINT32:
  case GW_UINT64: {
    PyObject *i = PyNumber_Index(v);
    if (!i) return -1;
    unsigned long long x = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) goto range;
    size_t n = gw_dtype_size((gw_dtype)dt);
    if (n < 8 && x >> (8 * n)) goto range;
    store_int(buf, x, n);
    return 0;
  }
  case GW_FLOAT16:
  case GW_BFLOAT16:
  case GW_FLOAT32:
  case GW_FLOAT64: {
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
      /* Python's own words would name the struct module's 'e' format, not the fill. */
      if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
      PyErr_Clear();
      PyErr_Format(PyExc_OverflowError,
                   "fill: %R is out of range for float16 (its finite values are -65504 "
                   "to 65504; pass float('inf') for infinity)",
                   v);
      return -1;
    }
    return 0;
  }
  case GW_COMPLEX64:
  case GW_COMPLEX128: {
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
    PyErr_Format(PyExc_TypeError,
                 "stream must be a gpuwrap.Stream (Context.stream(), ExternalStream) "
                 "or None, not %s",
                 Py_TYPE(stream)->tp_name);
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
  Py_BEGIN_ALLOW_THREADS s = sh ? gw_fill_async(h, buf, sh) : gw_fill(h, buf);
  Py_END_ALLOW_THREADS gw_release(h);
  if (so) stream_unhold(so);
  if (s != GW_OK) return RAISE(sh ? "gw_fill_async" : "gw_fill", s);
  Py_RETURN_NONE;
}

static PyObject *Array_copy_from(ArrayObject *a, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"src", "stream", NULL};
  PyObject *src, *stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:copy_from", kwlist, &src, &stream)) return NULL;
  if (!PyObject_TypeCheck(src, &ArrayType)) {
    PyErr_Format(PyExc_TypeError, "copy_from: src must be a gpuwrap.Array, not %s",
                 Py_TYPE(src)->tp_name);
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
  Py_BEGIN_ALLOW_THREADS s = sh ? gw_copy_async(h, sh_a, sh) : gw_copy(h, sh_a);
  Py_END_ALLOW_THREADS gw_release(sh_a);
  gw_release(h);
  if (so) stream_unhold(so);
  if (s != GW_OK) return RAISE(sh ? "gw_copy_async" : "gw_copy", s);
  Py_RETURN_NONE;
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
     "copy_from(src, stream=None): copy a gpuwrap Array of the same dtype and shape into this "
     "one."},
    {"offer", (PyCFunction)(void (*)(void))Array_offer, METH_VARARGS | METH_KEYWORDS,
     "offer(device_type, device_id=0): an object whose DLPack protocol offers this array as "
     "device_type ('cpu', 'cuda', 'rocm', ...); BufferError if impossible without a copy."},
    {"ipc_handle", (PyCFunction)Array_ipc_handle, METH_NOARGS,
     "ipc_handle(): a gpuwrap.IpcHandle by which another process of this node opens this "
     "array's memory (Context.ipc_open); device memory only: cudaMalloc's, an IPC pool's "
     "(cuda.core ipc_enabled), VMM memory made shareable (PyTorch's expandable segments; "
     "its importer must be allowed to take this process's descriptors: docs/IPC.md). Keep "
     "the memory alive meanwhile."},
    {"pending", (PyCFunction)Array_pending, METH_NOARGS,
     "Whether asynchronous gpuwrap work on the memory may not have completed (gw_array_pending)."},
    {"dlpack_device", (PyCFunction)Array_dlpack_device, METH_NOARGS, NULL},
    {"__dlpack_device__", (PyCFunction)Array_dlpack_device, METH_NOARGS,
     "(device_type, device_id)"},
    {"__dlpack__", (PyCFunction)(void (*)(void))Array_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None): a DLPack capsule "
     "over this array's memory, never a copy."},
    {"__array__", (PyCFunction)(void (*)(void))Array_array, METH_VARARGS | METH_KEYWORDS,
     "A NumPy array over host-accessible memory; TypeError for device-only memory."},
    {"__enter__", enter_self, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Array_release, METH_VARARGS, NULL},
    {NULL}};

static PyGetSetDef Array_getset[] = {
    {"data_ptr", (getter)Array_get_data_ptr, NULL,
     "device-usable address of element 0 (None if none)", NULL},
    {"host_ptr", (getter)Array_get_host_ptr, NULL,
     "host-usable address of element 0 (None if none)", NULL},
    {"handle", (getter)Array_get_handle, NULL, "the gw_array address", NULL},
    {"released", (getter)Array_get_released, NULL, NULL, NULL},
    {"kind", (getter)Array_get_kind, NULL, "'host', 'pinned', 'device', 'managed' or 'unknown'",
     NULL},
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
    {"__array_interface__", (getter)Array_get_ai, NULL, "NumPy array interface v3 (host memory)",
     NULL},
    {NULL}};

PyTypeObject ArrayType = {
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
    .tp_as_mapping = &Array_as_mapping,
    .tp_methods = Array_methods,
    .tp_getset = Array_getset,
};
