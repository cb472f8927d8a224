/*
 * The module: its init (which checks the private ABI before anything else), the state its
 * files share, how errors become GpuwrapError, the parsing every argument goes through
 * (ints, addresses, dtypes, shapes), and the module's small functions.
 */
#include "_gpuwrap.h"

#include <dlfcn.h>
#include <stdio.h>

/* The only calls the extension makes outside the public API: gw__array_refs (the
 * collector support in _array.c), gw__stream_order and gw__dtype_from_dl (the DLPack C
 * exchange, _exchange.c) and gw__private_abi (the check in PyInit__gpuwrap). Declared
 * once, in the library's private ABI header, never by hand here. */
#include "core/private.h"

/* ---- module state (one interpreter: the module is single-phase) ------------------------ */
/* The Python objects come from gpuwrap/__init__.py through _init(), once, at import. */

PyObject *ErrorType, *BufErrorType, *DtypeCache, *ResolveDtype, *OfferType, *ArrayHook, *AuxStreams,
    *OpenContexts, *InterfaceMemory;
PyObject *DtypeNames[GW_DTYPE_COUNT];
PyObject *KindNames[5];
PyObject *BackendNames[4];
PyObject *S_stream, *S_max_version, *S_dl_device, *S_copy, *S_readonly, *S_no_register, *S_own,
    *S_deleter;

const char *const DTYPE_STR[GW_DTYPE_COUNT] = {
    "bool",   "int8",    "int16",    "int32",   "int64",   "uint8",     "uint16",    "uint32",
    "uint64", "float16", "bfloat16", "float32", "float64", "complex64", "complex128"};
/* NumPy typestrs in this host's byte order (bfloat16 has none). */
#if PY_LITTLE_ENDIAN
#define BO "<"
#else
#define BO ">"
#endif
const char *const TYPESTR[GW_DTYPE_COUNT] = {"|b1", "|i1",   BO "i2", BO "i4", BO "i8",
                                             "|u1", BO "u2", BO "u4", BO "u8", BO "f2",
                                             NULL,  BO "f4", BO "f8", BO "c8", BO "c16"};

/* Raise exc(call, status, detail), detail read now: gw_last_error is this thread's. */
PyObject *raise_status(PyObject *exc, const char *call, gw_status s) {
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

/* Raise exc(call, status, detail) with a detail of the face's own (not gw_last_error). */
PyObject *raise_detail(const char *call, gw_status st, PyObject *detail) {
  if (!detail) return NULL;
  PyObject *e = PyObject_CallFunction(ErrorType, "siO", call, (int)st, detail);
  Py_DECREF(detail);
  if (e) {
    PyErr_SetObject((PyObject *)Py_TYPE(e), e);
    Py_DECREF(e);
  }
  return NULL;
}

/* ---- dtype, shape --------------------------------------------------------------------- */

/* Any spelling of a dtype -> gw_dtype: a cache hit for every spelling seen before. */
int dtype_index(PyObject *o) {
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
int int_arg(PyObject *o, const char *what, Py_ssize_t i, long long min, unsigned long long max,
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
    PyErr_Format(PyExc_OverflowError, "%s%s: %R does not fit in %lld .. %llu", what, at, o, min,
                 max);
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
int int64_seq(PyObject *o, int64_t *out, const char *what) {
  if (PyIndex_Check(o) || PyBool_Check(o)) return int64_item(o, out, what, -1) ? -1 : 1;
  if (!PyTuple_Check(o) && !PyList_Check(o) && !PySequence_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: %s is not a sequence of ints (nor an int)", what,
                 Py_TYPE(o)->tp_name);
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
int parse_ptr(PyObject *o, void **out, const char *what) {
  if (o == Py_None) {
    *out = NULL;
    return 0;
  }
  long long v;
  if (int_arg(o, what, -1, 0, UINTPTR_MAX, &v, NULL) < 0) return -1;
  *out = (void *)(uintptr_t)(unsigned long long)v;
  return 0;
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

PyObject *enter_self(PyObject *self, PyObject *unused) { return Py_NewRef(self); }

/* info(flags): the library's report (what `gpuwrap info` prints) on the process's stdout.
 * gw_info_report writes through C's stdio: the caller flushes sys.stdout first, and the
 * report is flushed here, so the two streams' text comes out in order. The report is
 * written even when a setting is invalid; that failure is then raised. */
static PyObject *mod_info(PyObject *m, PyObject *arg) {
  long long flags;
  if (int_arg(arg, "info: flags", -1, 0, UINT_MAX, &flags, NULL) < 0) return NULL;
  gw_status s;
  Py_BEGIN_ALLOW_THREADS /* creates a context per device: slow */
      s = gw_info_report(stdout, (unsigned)flags);
  fflush(stdout);
  Py_END_ALLOW_THREADS if (s != GW_OK) return RAISE("gw_info_report", s);
  Py_RETURN_NONE;
}

/* info_text(flags): the same report as a str (gw_info_report into a memory stream), with
 * what the call returned: (text, status, detail); the caller raises, keeping the text. */
static PyObject *mod_info_text(PyObject *m, PyObject *arg) {
  long long flags;
  if (int_arg(arg, "info: flags", -1, 0, UINT_MAX, &flags, NULL) < 0) return NULL;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return PyErr_SetFromErrno(PyExc_OSError);
  gw_status s;
  int closed;
  char detail[512] = "";
  PyObject *r = NULL;
  Py_BEGIN_ALLOW_THREADS s = gw_info_report(f, (unsigned)flags);
  if (s != GW_OK) snprintf(detail, sizeof detail, "%s", gw_last_error()); /* this thread's */
  closed = fclose(f);
  Py_END_ALLOW_THREADS r = closed == 0 && buf
                               ? Py_BuildValue("(s#is)", buf, (Py_ssize_t)len, (int)s, detail)
                               : PyErr_NoMemory(); /* the memory stream's */
  free(buf);
  return r;
}

static PyObject *mod_init(PyObject *m, PyObject *args) {
  if (!PyArg_ParseTuple(args, "OOOOOOO", &ErrorType, &BufErrorType, &ResolveDtype, &OfferType,
                        &ArrayHook, &DtypeCache, &InterfaceMemory))
    return NULL;
  Py_INCREF(InterfaceMemory);
  Py_INCREF(ErrorType);
  Py_INCREF(BufErrorType);
  Py_INCREF(ResolveDtype);
  Py_INCREF(OfferType);
  Py_INCREF(ArrayHook);
  Py_INCREF(DtypeCache);
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
    {"info", mod_info, METH_O, "info(flags): print gw_info_report(stdout, flags)."},
    {"info_text", mod_info_text, METH_O,
     "info_text(flags): (the report as a str, gw_info_report's status, its detail)."},
    {NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_gpuwrap", NULL, -1, mod_methods};

PyMODINIT_FUNC PyInit__gpuwrap(void) {
  /* Checked before any other call: a libgpuwrap of another tree whose private ABI
   * differs (a mixed install, GPUWRAP_LIB pointing elsewhere) fails here with both numbers
   * instead of making a wrong call later. */
  int abi = gw__private_abi();
  if (abi != GW__PRIVATE_ABI) {
    Dl_info info;
    const char *where =
        dladdr((void *)&gw__private_abi, &info) && info.dli_fname ? info.dli_fname : "libgpuwrap";
    PyErr_Format(PyExc_ImportError,
                 "gpuwrap: %s has private ABI %d, this extension was built for "
                 "private ABI %d (src/core/private.h): build the extension against the same tree "
                 "as the library",
                 where, abi, GW__PRIVATE_ABI);
    return NULL;
  }
  if (PyType_Ready(&ContextType) < 0 || PyType_Ready(&ArrayType) < 0 ||
      PyType_Ready(&StreamType) < 0 || PyType_Ready(&KeeperType) < 0 ||
      PyType_Ready(&IpcHandleType) < 0)
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
      PyModule_AddObjectRef(m, "IpcHandle", (PyObject *)&IpcHandleType) < 0 ||
      PyModule_AddIntConstant(m, "IPC_HANDLE_BYTES", GW_IPC_HANDLE_BYTES) < 0 ||
      PyModule_AddIntConstant(m, "PRIVATE_ABI", GW__PRIVATE_ABI) < 0 ||
      PyModule_AddIntConstant(m, "INFO_JSON", GW_INFO_JSON) < 0 ||
      PyModule_AddIntConstant(m, "INFO_ALL_SETTINGS", GW_INFO_ALL_SETTINGS) < 0 ||
      PyModule_AddIntConstant(m, "DLPACK_MAJOR", DLPACK_MAJOR_VERSION) < 0 ||
      PyModule_AddIntConstant(m, "DLPACK_MINOR", DLPACK_MINOR_VERSION) < 0 ||
      gwpy_exchange_init(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
