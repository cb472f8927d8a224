/*
 * gpuwrap._gpuwrap: the DLPack C exchange API (issue 37), both ways.
 *
 * Why: gpuwrap.from_dlpack(obj) through the Python protocol (__dlpack_device__, then
 * __dlpack__(stream=...), a capsule) costs microseconds that are all Python calls. A
 * producer of DLPack 1.2+ publishes C functions on its type instead
 * (`type(obj).__dlpack_c_exchange_api__`, a capsule named "dlpack_exchange_api"); the
 * consumer calls them directly.
 *
 * Consumer (exchange_import, called first by gpuwrap.from_dlpack): the table is looked up
 * once per type and cached (the type held weakly, the cache bounded: lookup_api); the
 * producer converts obj to a DLManagedTensorVersioned; its current work stream on the
 * tensor's device is ordered before gpuwrap's stream (the legacy default stream, or the
 * caller's) with an event on the device, never a host wait (the rule __dlpack__'s stream
 * argument gives a producer); gw_from_dlpack takes the tensor (its deleter runs exactly
 * once). Whatever is not usable (no attribute, another capsule,
 * a major version gpuwrap does not know, a conversion that refuses obj with an error other
 * than BufferError) answers None: from_dlpack falls back to __dlpack__.
 *
 * Producer (the class attribute of gpuwrap.Array): gpuwrap has no "current stream": its
 * synchronous calls are ordered on the legacy default stream, which current_work_stream
 * names (NULL). The conversions fold the array's pending asynchronous work into it the way
 * __dlpack__ does for a consumer that passes no stream: the legacy default stream waits
 * for it on the device (GPU device types); a host tensor (kDLCPU) waits on the host, since
 * CPU consumers query no stream.
 *
 * Every function is entered with the GIL held (the specification's rule) except the tensor
 * deleters, which take it.
 */
#include "_gpuwrap.h"

#include <stdatomic.h>
#include <string.h>

#include "core/private.h" /* gw__stream_order, gw__dtype_from_dl */

static const char API_NAME[] = "dlpack_exchange_api";

/* {type address (int): (weak reference to the type, capsule | None | False)}: see lookup_api. */
static PyObject *ApiCache;
static PyObject *S_attr;     /* "__dlpack_c_exchange_api__" */
static PyObject *DefaultCtx; /* gpuwrap._default_context, fetched on first need */
static PyObject *DeviceCtx;  /* {(backend, device): Context} for tensors handed to gpuwrap */
static atomic_long n_fast, n_fallback;

/* ---- consumer ----------------------------------------------------------------------- */

/* The table of a major version gpuwrap knows, from a capsule: the newest such in the
 * prev_api chain; NULL when none (no exception). */
static const DLPackExchangeAPI *usable_api(PyObject *cap) {
  if (!PyCapsule_CheckExact(cap) || !PyCapsule_IsValid(cap, API_NAME)) return NULL;
  const DLPackExchangeAPIHeader *h = PyCapsule_GetPointer(cap, API_NAME);
  for (int hops = 0; h && hops < 64; h = h->prev_api, hops++)
    if (h->version.major == GW_DLPACK_EXCHANGE_MAJOR) {
      const DLPackExchangeAPI *api = (const DLPackExchangeAPI *)h;
      if (api->managed_tensor_from_py_object_no_sync && api->current_work_stream) return api;
      return NULL;
    }
  return NULL;
}

/* At most this many types are remembered; a new one past it starts the cache afresh (each
 * type is looked up again on its next use: one attribute lookup). */
#define API_CACHE_MAX 1024

/* The callback of an entry's weak reference (bound to the entry's key): the type is going,
 * so is its entry, unless a newer type at the same address has replaced it. */
static PyObject *api_cache_drop(PyObject *key, PyObject *ref) {
  PyObject *e = PyDict_GetItemWithError(ApiCache, key);
  if (e && PyTuple_GET_ITEM(e, 0) == ref) {
    if (PyDict_DelItem(ApiCache, key) < 0) return NULL;
  } else if (!e && PyErr_Occurred()) {
    return NULL;
  }
  Py_RETURN_NONE;
}
static PyMethodDef api_cache_drop_def = {"_api_cache_drop", api_cache_drop, METH_O, NULL};

/* Whether weak reference `ref` still refers to `type`. */
static int refers_to(PyObject *ref, PyObject *type) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject *o = NULL;
  if (PyWeakref_GetRef(ref, &o) < 0) {
    PyErr_Clear();
    return 0;
  }
  Py_XDECREF(o); /* only compared */
  return o == type;
#else
  return PyWeakref_GetObject(ref) == type;
#endif
}

/* The table for obj's type: 1 found (*out, and *keep: a reference to its capsule that the
 * caller drops after its last use of the table: the capsule may own it), 0 none, -1
 * exception. One attribute lookup per type while the type lives (the specification lets a
 * consumer cache it). The cache must not keep the type alive: a program that makes classes
 * (one per model, per test) would keep every one it ever passed to from_dlpack. So an
 * entry holds the type only weakly (its callback removes the entry when the type goes),
 * and the cache is bounded. The capsule is held: a type's attribute may be replaced while
 * the type lives, and the table must outlive this call. */
static int lookup_api(PyObject *obj, const DLPackExchangeAPI **out, PyObject **keep) {
  PyObject *type = (PyObject *)Py_TYPE(obj);
  PyObject *key = PyLong_FromVoidPtr(type);
  if (!key) return -1;
  /* Cached: the capsule; None (no attribute); False (one gpuwrap cannot use). */
  PyObject *e = PyDict_GetItemWithError(ApiCache, key), *cap = NULL;
  if (e && refers_to(PyTuple_GET_ITEM(e, 0), type)) {
    cap = Py_NewRef(PyTuple_GET_ITEM(e, 1));
  } else if (!e && PyErr_Occurred()) {
    Py_DECREF(key);
    return -1;
  }
  if (!cap) {
    PyObject *attr = PyObject_GetAttr(type, S_attr);
    if (!attr) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
        Py_DECREF(key);
        return -1;
      }
      PyErr_Clear();
    }
    cap = Py_NewRef(!attr ? Py_None : usable_api(attr) ? attr : Py_False);
    Py_XDECREF(attr);
    PyObject *cb = PyCFunction_New(&api_cache_drop_def, key);
    PyObject *ref = cb ? PyWeakref_NewRef(type, cb) : NULL;
    Py_XDECREF(cb); /* the weak reference keeps it */
    PyObject *entry = ref ? PyTuple_Pack(2, ref, cap) : NULL;
    Py_XDECREF(ref);
    if (entry && PyDict_GET_SIZE(ApiCache) >= API_CACHE_MAX) PyDict_Clear(ApiCache);
    int r = entry ? PyDict_SetItem(ApiCache, key, entry) : -1;
    Py_XDECREF(entry);
    if (r < 0) PyErr_Clear(); /* not cached (a type without weak references): looked up again */
  }
  Py_DECREF(key);
  if (cap == Py_None || cap == Py_False) {
    if (cap == Py_False) atomic_fetch_add(&n_fallback, 1);
    Py_DECREF(cap);
    return 0;
  }
  *out = usable_api(cap);
  *keep = cap;
  return 1;
}

static PyObject *exchange_cache_size(PyObject *m, PyObject *unused) {
  return PyLong_FromSsize_t(PyDict_GET_SIZE(ApiCache));
}

/* A gpuwrap.Context's open handle; NULL with TypeError (not a Context) or ValueError (closed). */
static gw_context *context_of(PyObject *o) {
  if (!PyObject_TypeCheck(o, &ContextType)) {
    PyErr_Format(PyExc_TypeError, "ctx must be a gpuwrap.Context, not %s", Py_TYPE(o)->tp_name);
    return NULL;
  }
  return ctx_get((ContextObject *)o);
}

static int has_streams(int t) {
  return t == kDLCUDA || t == kDLCUDAHost || t == kDLCUDAManaged || t == kDLROCM ||
         t == kDLROCMHost || t == kDLExtDev;
}

/* The backend whose memory a device type is (-1: host memory, any backend). */
static int type_backend(int t) {
  if (t == kDLCUDA || t == kDLCUDAHost || t == kDLCUDAManaged) return GW_BACKEND_CUDA;
  if (t == kDLROCM || t == kDLROCMHost) return GW_BACKEND_HIP;
  if (t == kDLExtDev) return GW_BACKEND_CPU; /* the CPU model's device memory */
  return -1;
}

static PyObject *context_for(DLDevice d);

/* Order the producer's current work stream on the tensor's device before the stream the
 * caller uses (native, of ch's device; NULL: the legacy default stream). 0, or -1 with an
 * exception. */
static int order_producer(const DLPackExchangeAPI *api, gw_context *ch, DLDevice dev,
                          void *native) {
  /* The CPU model's pinned and managed memory is kDLCPU: there, as on a GPU, the producer's
   * work may be queued on a stream. A GPU context's kDLCPU tensors are host memory: no
   * stream. */
  if (!has_streams(dev.device_type) && gw_context_backend(ch) != GW_BACKEND_CPU) return 0;
  /* Memory of another backend: gw_from_dlpack refuses it, naming both. */
  int tb = type_backend(dev.device_type);
  if (tb >= 0 && tb != (int)gw_context_backend(ch)) return 0;
  /* The producer's stream is one of the tensor's device, which need not be ch's: wrapped in
   * ch it would be another device's handle (CUDA: invalid resource handle). It is wrapped
   * in a context of its own device, whose event the caller's stream then waits for across
   * devices (cudaStreamWaitEvent allows it). */
  gw_context *pc = ch;
  int named = dev.device_type == kDLCUDA || dev.device_type == kDLROCM ||
              dev.device_type == kDLExtDev; /* the types that carry a device id */
  if (named && dev.device_id != gw_context_device(ch)) {
    PyObject *c = context_for(dev);
    if (!c || !(pc = context_of(c))) return -1;
  }
  void *ps = NULL;
  if (api->current_work_stream(dev.device_type, dev.device_id, &ps) != 0) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_RuntimeError, "from_dlpack: the producer's current_work_stream failed");
    return -1;
  }
  if (ps == native && pc == ch) return 0;             /* one stream: in order */
  if (!ps && !has_streams(dev.device_type)) return 0; /* no stream on the host */
  gw_stream *first = NULL, *then = NULL;
  const char *call = "gw_stream_wrap (the producer's current work stream)";
  gw_status s = gw_stream_wrap(pc, ps, &first);
  if (s == GW_OK) {
    call = "gw_stream_wrap (stream)";
    s = gw_stream_wrap(ch, native, &then);
  }
  if (s == GW_OK) {
    call = "from_dlpack: order the producer's stream before gpuwrap's";
    s = gw__stream_order(first, then);
  }
  gw_stream_destroy(then); /* borrowed: the handles only */
  gw_stream_destroy(first);
  if (s != GW_OK) {
    RAISE(call, s);
    return -1;
  }
  return 0;
}

/* exchange_import with the table of obj's type. */
static PyObject *exchange_import_with(const DLPackExchangeAPI *api, PyObject *ctx, PyObject *obj,
                                      PyObject *native_o) {
  void *native = NULL;
  if (native_o != Py_None) {
    native = PyLong_AsVoidPtr(native_o);
    if (!native && PyErr_Occurred()) return NULL;
  }
  gw_context *ch = context_of(ctx);
  if (!ch) return NULL;
  DLManagedTensorVersioned *t = NULL;
  if (api->managed_tensor_from_py_object_no_sync(obj, &t) != 0 || !t) {
    /* BufferError: the data cannot be described by DLPack, which __dlpack__ would say
     * again. Anything else (the producer's API refusing this object, e.g. a subclass it
     * does not convert): its Python protocol may still do. */
    if (!PyErr_Occurred()) {
      if (t && t->deleter) t->deleter(t);
      PyErr_SetString(PyExc_RuntimeError,
                      "from_dlpack: the producer's conversion failed without an error");
      return NULL;
    }
    if (PyErr_ExceptionMatches(PyExc_BufferError)) return NULL;
    PyErr_Clear();
    atomic_fetch_add(&n_fallback, 1);
    Py_RETURN_NONE;
  }
  /* A tensor of another major version has another layout after `flags`: gw_from_dlpack
   * reads nothing else, deletes it and says so. */
  if (t->version.major == 1 && order_producer(api, ch, t->dl_tensor.device, native) < 0) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb); /* the deleter may call into Python */
    if (t->deleter) t->deleter(t);
    PyErr_Restore(et, ev, tb);
    return NULL;
  }
  gw_array *out = NULL;
  gw_status s = gw_from_dlpack(ch, t, &out); /* takes t, also on failure */
  if (s != GW_OK) return RAISE("from_dlpack", s);
  atomic_fetch_add(&n_fast, 1);
  return array_new(out);
}

/* exchange_import(ctx, obj, native): a gpuwrap Array through the producer's exchange API,
 * or None when from_dlpack must use __dlpack__. native: None (gpuwrap's synchronous calls:
 * the legacy default stream) or the handle of the stream the caller uses. */
static PyObject *exchange_import(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "exchange_import(ctx, obj, native)");
    return NULL;
  }
  PyObject *obj = args[1], *keep = NULL;
  const DLPackExchangeAPI *api = NULL;
  int found = lookup_api(obj, &api, &keep);
  if (found <= 0) {
    if (found < 0) return NULL;
    Py_RETURN_NONE;
  }
  PyObject *r = exchange_import_with(api, args[0], obj, args[2]);
  Py_DECREF(keep); /* after the table's last use */
  return r;
}

static PyObject *exchange_counts(PyObject *m, PyObject *unused) {
  return Py_BuildValue("(ll)", atomic_load(&n_fast), atomic_load(&n_fallback));
}

/* ---- producer: gpuwrap.Array.__dlpack_c_exchange_api__ ------------------------------------ */

static atomic_long n_produced;

static gw_array *producer_array(void *py_object) {
  PyObject *o = py_object;
  if (!PyObject_TypeCheck(o, &ArrayType)) {
    PyErr_Format(PyExc_TypeError,
                 "gpuwrap's __dlpack_c_exchange_api__: py_object is a %s, "
                 "not a gpuwrap.Array",
                 Py_TYPE(o)->tp_name);
    return NULL;
  }
  return arr_get((ArrayObject *)o);
}

/* Pin a (the wait may drop the GIL), wait as __dlpack__ does for a consumer without a
 * stream; its device type in *type. */
static int producer_ready(gw_array *a, int *type) {
  DLDevice d;
  gw_status s = gw_dlpack_device(a, &d);
  if (s != GW_OK) {
    raise_status((s == GW_ENOTSUP) ? BufErrorType : ErrorType, "gw_dlpack_device", s);
    return -1;
  }
  *type = d.device_type;
  return dlpack_export_wait(a, d.device_type);
}

static int api_from_py_object(void *py_object, DLManagedTensorVersioned **out) {
  gw_array *a = producer_array(py_object);
  if (!a) return -1;
  gw_retain(a);
  int type, r = producer_ready(a, &type);
  if (r == 0) {
    gw_status s = gw_to_dlpack(a, out);
    if (s != GW_OK) {
      raise_status((s == GW_ENOTSUP) ? BufErrorType : ErrorType, "gw_to_dlpack", s);
      r = -1;
    }
  }
  gw_release(a);
  if (r == 0) atomic_fetch_add(&n_produced, 1);
  return r;
}

/* The non-owning view: placed by the library's own export (gw_to_dlpack), the one function
 * that computes data, byte_offset and device for every DLPack face (the managed conversion,
 * __dlpack__), so the two conversions cannot disagree: a rule of its own here gave NULL for
 * the CPU model's device memory (kDLCPU, but no host address). The export's block is freed
 * at once (its deleter drops only the reference it took on `a`); the shape and strides are
 * the array's own (never NULL), valid while the producer's object is, which the caller holds
 * across the call. */
static int api_dltensor_from_py_object(void *py_object, DLTensor *out) {
  gw_array *a = producer_array(py_object);
  if (!a) return -1;
  int type;
  gw_retain(a);
  int r = producer_ready(a, &type);
  DLManagedTensorVersioned *t = NULL;
  if (r == 0) {
    gw_status s = gw_to_dlpack(a, &t);
    if (s != GW_OK) {
      raise_status((s == GW_ENOTSUP) ? BufErrorType : ErrorType, "gw_to_dlpack", s);
      r = -1;
    }
  }
  if (r == 0) {
    *out = t->dl_tensor;
    out->shape = (int64_t *)gw_shape(a);
    out->strides = (int64_t *)gw_strides(a);
    t->deleter(t);
  }
  gw_release(a);
  return r;
}

static int api_current_work_stream(DLDeviceType type, int32_t id, void **out) {
  (void)type, (void)id;
  *out = NULL; /* the legacy default stream (CUDA, ROCm); none on the host */
  return 0;
}

/* A context for tensors handed to gpuwrap: the package's default one for host tensors,
 * else one per (backend, device), kept for the life of the module. Borrowed; NULL with an
 * exception. */
static PyObject *context_for(DLDevice d) {
  const char *backend = NULL;
  if (d.device_type == kDLCUDA || d.device_type == kDLCUDAHost || d.device_type == kDLCUDAManaged)
    backend = "cuda";
  else if (d.device_type == kDLROCM || d.device_type == kDLROCMHost)
    backend = "hip";
  else if (d.device_type == kDLExtDev)
    backend = "cpu"; /* the CPU model's device memory, of its device */
  if (!backend) {
    if (!DefaultCtx) {
      PyObject *pkg = PyImport_ImportModule("gpuwrap");
      if (!pkg) return NULL;
      DefaultCtx = PyObject_GetAttrString(pkg, "_default_context");
      Py_DECREF(pkg);
      if (!DefaultCtx) return NULL;
    }
    PyObject *c = PyObject_CallNoArgs(DefaultCtx);
    if (c) Py_DECREF(c); /* the package keeps it */
    return c;
  }
  PyObject *key = Py_BuildValue("(si)", backend, (int)d.device_id);
  if (!key) return NULL;
  PyObject *c = PyDict_GetItemWithError(DeviceCtx, key);
  if (!c && !PyErr_Occurred()) {
    PyObject *pkg = PyImport_ImportModule("gpuwrap");
    PyObject *cls = pkg ? PyObject_GetAttrString(pkg, "Context") : NULL;
    Py_XDECREF(pkg);
    if (cls) {
      PyObject *made = PyObject_Call(cls, key, NULL);
      Py_DECREF(cls);
      if (made && PyDict_SetItem(DeviceCtx, key, made) == 0) c = made;
      Py_XDECREF(made); /* the dict keeps it */
    }
  }
  Py_DECREF(key);
  return c;
}

static int api_to_py_object(DLManagedTensorVersioned *t, void **out) {
  if (!t) {
    PyErr_SetString(PyExc_ValueError,
                    "gpuwrap's managed_tensor_to_py_object_no_sync: tensor is NULL");
    return -1;
  }
  /* The device is read only from a layout gpuwrap knows; gw_from_dlpack refuses others. */
  DLDevice d = t->version.major == 1 ? t->dl_tensor.device : (DLDevice){kDLCPU, 0};
  PyObject *c = context_for(d);
  gw_context *ch = c ? context_of(c) : NULL;
  if (!ch) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (t->deleter) t->deleter(t); /* taken, also on failure */
    PyErr_Restore(et, ev, tb);
    return -1;
  }
  gw_array *a = NULL;
  gw_status s = gw_from_dlpack(ch, t, &a);
  if (s != GW_OK) {
    RAISE("gpuwrap's managed_tensor_to_py_object_no_sync", s);
    return -1;
  }
  PyObject *o = array_new(a);
  if (!o) return -1;
  *out = o;
  return 0;
}

static int api_allocator(DLTensor *proto, DLManagedTensorVersioned **out, void *error_ctx,
                         void (*set_error)(void *, const char *, const char *)) {
  PyGILState_STATE g = PyGILState_Ensure(); /* contexts are Python objects */
  char msg[256] = "";
  const char *kind = "ValueError";
  int r = -1;
  gw_memkind mk = GW_MEM_UNKNOWN;
  gw_dtype dtype;
  if (!proto || !out) {
    snprintf(msg, sizeof msg, "gpuwrap's managed_tensor_allocator: %s is NULL",
             proto ? "out" : "prototype");
    goto done;
  }
  switch (proto->device.device_type) {
  case kDLCPU: mk = GW_MEM_HOST; break;
  case kDLCUDA:
  case kDLROCM: mk = GW_MEM_DEVICE; break;
  case kDLCUDAHost:
  case kDLROCMHost: mk = GW_MEM_PINNED; break;
  case kDLCUDAManaged: mk = GW_MEM_MANAGED; break;
  default:
    snprintf(msg, sizeof msg,
             "gpuwrap's managed_tensor_allocator: prototype device type %d "
             "is not one gpuwrap allocates",
             (int)proto->device.device_type);
    goto done;
  }
  if (!gw__dtype_from_dl(proto->dtype, &dtype)) {
    snprintf(msg, sizeof msg,
             "gpuwrap's managed_tensor_allocator: prototype dtype (code %u, bits "
             "%u, lanes %u) is not a type gpuwrap has",
             proto->dtype.code, proto->dtype.bits, proto->dtype.lanes);
    goto done;
  }
  PyObject *c = context_for(proto->device);
  gw_context *ch = c ? context_of(c) : NULL;
  gw_array *a = NULL;
  gw_status s = ch ? gw_alloc(ch, mk, dtype, proto->ndim, proto->shape, &a) : GW_OK;
  if (ch && s == GW_OK) {
    s = gw_to_dlpack(a, out); /* the tensor holds the array */
    gw_release(a);
  }
  if (!ch) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *str = ev ? PyObject_Str(ev) : NULL;
    snprintf(msg, sizeof msg, "gpuwrap's managed_tensor_allocator: no context for the device: %s",
             str ? PyUnicode_AsUTF8(str) : "?");
    Py_XDECREF(str);
    Py_XDECREF(et), Py_XDECREF(ev), Py_XDECREF(tb);
    PyErr_Clear();
    kind = "RuntimeError";
  } else if (s != GW_OK) {
    snprintf(msg, sizeof msg, "gpuwrap's managed_tensor_allocator: %s: %s", gw_err_name(s),
             gw_last_error());
    kind = s == GW_ENOMEM ? "MemoryError" : "RuntimeError";
  } else {
    r = 0;
  }
done:
  if (r != 0) set_error(error_ctx, kind, msg);
  PyGILState_Release(g);
  return r;
}

static const DLPackExchangeAPI GpuwrapApi = {
    .header = {.version = {GW_DLPACK_EXCHANGE_MAJOR, GW_DLPACK_EXCHANGE_MINOR}, .prev_api = NULL},
    .managed_tensor_allocator = api_allocator,
    .managed_tensor_from_py_object_no_sync = api_from_py_object,
    .managed_tensor_to_py_object_no_sync = api_to_py_object,
    .dltensor_from_py_object_no_sync = api_dltensor_from_py_object,
    .current_work_stream = api_current_work_stream,
};

static PyObject *exchange_produced(PyObject *m, PyObject *unused) {
  return PyLong_FromLong(atomic_load(&n_produced));
}

static PyMethodDef methods[] = {
    {"exchange_import", (PyCFunction)(void (*)(void))exchange_import, METH_FASTCALL, NULL},
    {"_exchange_cache_size", exchange_cache_size, METH_NOARGS,
     "types the exchange-API cache remembers now"},
    {"exchange_counts", exchange_counts, METH_NOARGS,
     "(imports through the exchange API, fallbacks)"},
    {"exchange_produced", exchange_produced, METH_NOARGS, "tensors gpuwrap's exchange API made"},
    {NULL}};

int gwpy_exchange_init(PyObject *module) {
  PyTypeObject *array_type = &ArrayType;
  ApiCache = PyDict_New();
  DeviceCtx = PyDict_New();
  S_attr = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  if (!ApiCache || !DeviceCtx || !S_attr || PyModule_AddFunctions(module, methods) < 0) return -1;
  PyObject *cap = PyCapsule_New((void *)&GpuwrapApi, API_NAME, NULL);
  if (!cap) return -1;
  int r = PyDict_SetItem(array_type->tp_dict, S_attr, cap);
  Py_DECREF(cap);
  if (r == 0) PyType_Modified(array_type);
  return r;
}
