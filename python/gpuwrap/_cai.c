/*
 * The array interfaces: the CUDA Array Interface v3 (device-accessible memory of a CUDA
 * context; its `stream` entry orders the consumer after gpuwrap's pending work) and
 * NumPy's __array_interface__ / __array__ (host-accessible memory, pending work waited for
 * on the host first). Importing an object by them is in __init__.py (_interface_memory).
 */
#include "_gpuwrap.h"

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
static PyObject *interface_dict(gw_array *h, const char *typestr, void *data, int with_stream,
                                PyObject *stream) {
  int dt = gw_array_dtype(h), nd = gw_ndim(h);
  const int64_t *sp = gw_shape(h), *tp = gw_strides(h);
  PyObject *shape = int64_tuple(sp, nd, 1);
  PyObject *strides = c_contiguous(sp, tp, nd)
                          ? Py_NewRef(Py_None)
                          : int64_tuple(tp, nd, (int64_t)gw_dtype_size((gw_dtype)dt));
  PyObject *d = NULL;
  if (shape && strides) {
    if (with_stream)
      d = Py_BuildValue("{s:O,s:s,s:(NO),s:O,s:i,s:O}", "shape", shape, "typestr", typestr, "data",
                        PyLong_FromVoidPtr(data), gw_is_readonly(h) ? Py_True : Py_False, "strides",
                        strides, "version", 3, "stream", stream);
    else
      d = Py_BuildValue("{s:O,s:s,s:(NO),s:O,s:i}", "shape", shape, "typestr", typestr, "data",
                        PyLong_FromVoidPtr(data), gw_is_readonly(h) ? Py_True : Py_False, "strides",
                        strides, "version", 3);
  }
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return d;
}

PyObject *Array_get_cai(ArrayObject *a, void *u) {
  /* AttributeError (hasattr() false) where there is none, so consumers fall back to
   * DLPack or __array_interface__: host-only memory, other backends than CUDA. */
  ARR_OR_NULL(a, h);
  if (gw_context_backend(gw_array_context(h)) != GW_BACKEND_CUDA) {
    PyErr_SetString(PyExc_AttributeError,
                    "__cuda_array_interface__: only arrays of a CUDA context have it");
    return NULL;
  }
  void *data = gw_data(h);
  if (gw_kind(h) == GW_MEM_HOST || (!data && gw_numel(h))) {
    PyErr_SetString(PyExc_AttributeError,
                    "__cuda_array_interface__: the memory is not device-accessible "
                    "(host-only array)");
    return NULL;
  }
  int dt = gw_array_dtype(h);
  if (!TYPESTR[dt]) {
    PyErr_Format(PyExc_AttributeError, "__cuda_array_interface__: %s has no typestr",
                 DTYPE_STR[dt]);
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
  PyObject *d = interface_dict(a->h, TYPESTR[dt], data, 1, stream);
  Py_DECREF(stream);
  return d;
}

PyObject *Array_get_ai(ArrayObject *a, void *u) {
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
  /* NumPy has no bfloat16: its elements are given as what they are to NumPy, two opaque
   * bytes ('|V2', the same memory), which .view(np.uint16) shows as their bits and
   * .view(ml_dtypes.bfloat16) as numbers. A TypeError would leave no way to share the
   * memory with NumPy at all. */
  int dt = gw_array_dtype(h);
  const char *typestr = dt == GW_BFLOAT16 ? "|V2" : TYPESTR[dt];
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
  return interface_dict(h, typestr, hp, 0, NULL);
}

PyObject *Array_array(ArrayObject *a, PyObject *args, PyObject *kw) {
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
