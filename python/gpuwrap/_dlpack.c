/*
 * DLPack: the export (__dlpack__, __dlpack_device__) with the array API's stream rules
 * (the consumer's stream made to wait for gpuwrap's pending work, never a host wait on a
 * device), and the import of a capsule (from_dlpack's producer protocol is in
 * __init__.py). A capsule is named dltensor[_versioned] until its consumer takes it and
 * renames it used_*: the rename, under the GIL, is what makes a capsule taken once.
 */
#include "_gpuwrap.h"

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

PyObject *Array_dlpack_device(ArrayObject *a, PyObject *unused) {
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

static int stream_is(const stream_arg_t *st, long long v) {
  return st->has && !st->big && st->v == v;
}

/* The consumer's stream for an export as `type`, checked as the array API defines it.
 * `model`: a CPU-backend array, whose streams are handles > 2. */
static int check_stream(const stream_arg_t *st, int type, int model) {
  if (!st->has || stream_is(st, -1)) return 0;
  int neg = !st->big && st->v < 0;
  if (is_cuda_type(type)) {
    if (stream_is(st, 0) || neg) {
      PyErr_Format(PyExc_BufferError,
                   "__dlpack__: stream %R is not valid on CUDA: use 1 (legacy "
                   "default stream), 2 (per-thread default stream) or a stream handle",
                   st->o);
      return -1;
    }
  } else if (is_rocm_type(type)) {
    if (stream_is(st, 1) || stream_is(st, 2) || neg) {
      PyErr_Format(PyExc_BufferError,
                   "__dlpack__: stream %R is not valid on ROCm: use 0 (default "
                   "stream) or a stream handle",
                   st->o);
      return -1;
    }
  } else if (!(model && (st->big || st->v > 2))) {
    /* The CPU model's streams are handles > 2 (gw_stream_native), never 0, 1 or 2: a test
     * passes one as a GPU consumer passes its stream; gw_stream_wrap checks it. */
    PyErr_Format(PyExc_BufferError,
                 "__dlpack__: stream %R given for device type %d, which has "
                 "no streams: pass None",
                 st->o, type);
    return -1;
  }
  return 0;
}

static int parse_stream_arg(PyObject *o, stream_arg_t *st) {
  *st = (stream_arg_t){.o = o};
  if (o == NULL || o == Py_None) return 0;
  if (PyBool_Check(o) || !PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "__dlpack__: stream must be an int or None, not %s",
                 Py_TYPE(o)->tp_name);
    return -1;
  }
  /* A handle is a pointer value (up to UINT64_MAX); negative ones are classed below. */
  if (int_arg(o, "__dlpack__: stream", -1, INT64_MIN, UINT64_MAX, &st->v, &st->big) < 0) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_BufferError,
                 "__dlpack__: stream %R is not a stream handle (not in %lld .. %llu)", o,
                 (long long)INT64_MIN, (unsigned long long)UINT64_MAX);
    return -1;
  }
  st->has = 1;
  return 0;
}

static int consumer_wait(gw_array *h, const stream_arg_t *st, int type);

int dlpack_export_wait(gw_array *h, int device_type) {
  stream_arg_t none = {0};
  return consumer_wait(h, &none, device_type);
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
       * device, so the export waits here for the pending work. So does the CPU model's
       * kDLExtDev (its device memory) without a stream: done on return, for any stream. */
      return aux_wait(h, 1, NULL) == (uintptr_t)-1 ? -1 : 0;
    }
    native = NULL; /* the array API: None means the legacy default stream on CUDA / ROCm */
  } else if (is_cuda_type(type)) {
    /* 1: the legacy default stream (handle NULL); 2: cudaStreamPerThread's own value. */
    if (!pending && (stream_is(st, 1) || stream_is(st, 2)))
      return 0; /* valid, nothing to wait for */
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

PyObject *Array_dlpack(ArrayObject *a, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *stream_o = NULL, *maxv = NULL, *dl_device = NULL, *copy = NULL;
  if (nargs) {
    PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only "
                                     "(stream, max_version, dl_device, copy)");
    return NULL;
  }
  Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nk; i++) {
    PyObject *k = PyTuple_GET_ITEM(kwnames, i), *v = args[i];
    if (k == S_stream || PyUnicode_Compare(k, S_stream) == 0)
      stream_o = v;
    else if (k == S_max_version || PyUnicode_Compare(k, S_max_version) == 0)
      maxv = v;
    else if (k == S_dl_device || PyUnicode_Compare(k, S_dl_device) == 0)
      dl_device = v;
    else if (k == S_copy || PyUnicode_Compare(k, S_copy) == 0)
      copy = v;
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
      PyErr_SetString(PyExc_BufferError,
                      "__dlpack__: gpuwrap never copies (copy=True asked for a copy)");
      return NULL;
    }
  }
  int versioned = 0;
  if (maxv && maxv != Py_None) {
    /* The consumer's highest DLPack (major, minor): >= 1.0 gets a versioned capsule (ours
     * is 1.x, which any 1.y consumer reads), 0.x a legacy one. */
    if (!PyTuple_Check(maxv) || PyTuple_GET_SIZE(maxv) != 2 ||
        !PyLong_Check(PyTuple_GET_ITEM(maxv, 0)) || !PyLong_Check(PyTuple_GET_ITEM(maxv, 1))) {
      PyErr_Format(PyExc_TypeError,
                   "__dlpack__: max_version must be a (major, minor) tuple of ints, not %R", maxv);
      return NULL;
    }
    long long major, minor; /* DLPackVersion's fields are uint32 */
    if (int_arg(PyTuple_GET_ITEM(maxv, 0), "__dlpack__: max_version", 0, LLONG_MIN, UINT32_MAX,
                &major, NULL) < 0 ||
        int_arg(PyTuple_GET_ITEM(maxv, 1), "__dlpack__: max_version", 1, LLONG_MIN, UINT32_MAX,
                &minor, NULL) < 0)
      return NULL;
    if (major < 0 || minor < 0) {
      PyErr_Format(PyExc_ValueError, "__dlpack__: max_version %R is not a version", maxv);
      return NULL;
    }
    versioned = major >= 1;
  }
  DLDevice want;
  if (dl_device && dl_device != Py_None &&
      parse_device_pair(dl_device, &want, "__dlpack__: dl_device") < 0)
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
    s = as ? gw_to_dlpack_as(h, want, (DLManagedTensorVersioned **)&t)
           : gw_to_dlpack(h, (DLManagedTensorVersioned **)&t);
  else
    s = as ? gw_to_dlpack_legacy_as(h, want, (DLManagedTensor **)&t)
           : gw_to_dlpack_legacy(h, (DLManagedTensor **)&t);
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

/* ---- module functions ------------------------------------------------------------------- */

/* import_capsule(ctx, capsule): take a DLPack capsule's tensor (the name check and the
 * rename to used_* happen under the GIL: two threads cannot both take it). */
PyObject *mod_import_capsule(PyObject *m, PyObject *args) {
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
    PyErr_Format(PyExc_ValueError, "not a DLPack capsule, or one already consumed: %s",
                 name ? name : "NULL");
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

/* check_stream(stream, device_type, model=False): __dlpack__'s rules for `stream`, for
 * producers written in Python (gpuwrap._check_stream). */
PyObject *mod_check_stream(PyObject *m, PyObject *args) {
  PyObject *stream;
  int type, model = 0;
  if (!PyArg_ParseTuple(args, "Oi|p", &stream, &type, &model)) return NULL;
  stream_arg_t st;
  if (parse_stream_arg(stream, &st) < 0 || check_stream(&st, type, model) < 0) return NULL;
  Py_RETURN_NONE;
}
