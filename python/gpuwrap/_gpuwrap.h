/*
 * gpuwrap._gpuwrap: the CPython extension behind `import gpuwrap` (the hot path). What its
 * files share; private to the extension.
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
 * One file per mechanism (every .c file in this folder is compiled into the extension:
 * python/setup.py and _loader.py take them all):
 *   _module.c   module init (and the private-ABI check), its state, errors, the parsing of
 *               int arguments, dtypes and shapes, the module's small functions
 *   _context.c  Context: lifetime, alloc, the method table (wrap is in _wrap.c)
 *   _wrap.c     Context.wrap: addresses and objects' memory, the Keeper of a Python deleter
 *   _array.c    Array: lifetime and the collector, properties, view, fill, copy, the type
 *   _stream.c   Stream, ExternalStream's borrow, and the stream kept per context for exports
 *   _dlpack.c   DLPack export (__dlpack__, its stream rules) and import of a capsule
 *   _cai.c      the CUDA Array Interface and NumPy's array interface (__array__ too)
 *   _ipc.c      IpcHandle, Array.ipc_handle() and Context.ipc_open() (memory of another process)
 *   _exchange.c the DLPack C exchange API (__dlpack_c_exchange_api__) both ways
 *
 * What stays in Python (gpuwrap/__init__.py): from_dlpack's producer protocol, the CUDA
 * Array Interface import, stream-object conversion, errors' classes, the default context.
 */
#ifndef GW_PY_GPUWRAP_H
#define GW_PY_GPUWRAP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <string.h>

#include "gpuwrap.h"
#include "gpuwrap/dlpack.h"

/* The names below are shared between the extension's files only. Hidden, so that none of
 * them can be bound to (or interposed by) a symbol of the same name in another loaded
 * library: the extension exports PyInit__gpuwrap alone (PyMODINIT_FUNC sets its
 * visibility explicitly). */
#pragma GCC visibility push(hidden)

/* ---- module state (_module.c; one interpreter: the module is single-phase) ------------ */

extern PyObject *ErrorType;    /* gpuwrap.GpuwrapError */
extern PyObject *BufErrorType; /* gpuwrap.DLPackBufferError (BufferError + GpuwrapError) */
extern PyObject *DtypeCache;   /* dtype spelling -> gw_dtype (int): names, 'f4', np.float32, ... */
extern PyObject *ResolveDtype; /* Python fallback for a spelling not in the cache (fills it) */
extern PyObject *OfferType;    /* gpuwrap._Offer */
extern PyObject *ArrayHook;    /* gpuwrap._numpy_array(a, dtype, copy) for __array__ */
extern PyObject *AuxStreams;   /* {context address: Stream}: kept for exports (see aux_wait) */
extern PyObject *OpenContexts; /* {context address}: the C contexts of open Python Contexts */
extern PyObject *InterfaceMemory; /* gpuwrap._interface_memory(ctx, obj) for Context.wrap(obj) */
extern PyObject *DtypeNames[GW_DTYPE_COUNT];
extern PyObject *KindNames[5];
extern PyObject *BackendNames[4];
/* Interned keyword names: the hand-written parsers of the hot calls compare by identity first. */
extern PyObject *S_stream, *S_max_version, *S_dl_device, *S_copy, *S_readonly, *S_no_register,
    *S_own, *S_deleter;

extern const char *const DTYPE_STR[GW_DTYPE_COUNT];
extern const char *const TYPESTR[GW_DTYPE_COUNT]; /* NumPy typestrs, this host's byte order */

/* ---- errors and argument parsing (_module.c) ------------------------------------------ */

/* Raise exc(call, status, detail), detail read now: gw_last_error is this thread's. */
PyObject *raise_status(PyObject *exc, const char *call, gw_status s);
#define RAISE(call, s) raise_status(ErrorType, (call), (s))
/* Raise GpuwrapError(call, status, detail) with a detail of the face's own (a new reference,
 * consumed; NULL: an exception is already set). */
PyObject *raise_detail(const char *call, gw_status st, PyObject *detail);

int dtype_index(PyObject *o);
int int_arg(PyObject *o, const char *what, Py_ssize_t i, long long min, unsigned long long max,
            long long *out, int *big);
int int64_seq(PyObject *o, int64_t *out, const char *what);
int parse_ptr(PyObject *o, void **out, const char *what);
PyObject *int64_tuple(const int64_t *v, int n, int64_t scale);
PyObject *enter_self(PyObject *self, PyObject *unused); /* __enter__ of every type */

/* ---- Context (_context.c) --------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  gw_context *h;       /* NULL once closed */
  gw_context *pending; /* closed while calls ran without the GIL: the last of them frees it */
  int users;           /* calls running without the GIL */
  int backend, device; /* constant for the context's life */
} ContextObject;

extern PyTypeObject ContextType;
gw_context *ctx_get(ContextObject *c); /* ValueError once closed */
/* Around a call without the GIL: hold, (drop GIL, call, take GIL), unhold. */
gw_context *ctx_hold(ContextObject *c);
void ctx_unhold(ContextObject *c);
int ctx_is_open(gw_context *h);

/* ---- Context.wrap (_wrap.c) ------------------------------------------------------------- */

extern PyTypeObject KeeperType;
PyObject *Context_wrap(ContextObject *c, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames);

/* ---- Array (_array.c) ------------------------------------------------------------------- */

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
  PyObject *aux;         /* a Stream for exports after the context closed (aux_get) */
  unsigned ai_given;     /* __array_interface__ dicts handed out */
  unsigned ai_traversed; /* ai_given when the collector last traversed this object */
} ArrayObject;

extern PyTypeObject ArrayType;
/* A new Array object adopting one reference to h (released on failure). */
PyObject *array_new(gw_array *h);
gw_array *arr_get(ArrayObject *a); /* ValueError once released */
#define ARR_OR_NULL(a, h)   \
  gw_array *h = arr_get(a); \
  if (!h) return NULL

/* ---- Stream (_stream.c) ----------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  gw_stream *h, *pending;
  int users;
  char cuda, borrowed;
  uintptr_t native;
  PyObject *ctx;    /* the Python Context (None for a kept stream) */
  PyObject *source; /* the torch/CuPy stream object a borrow came from: kept alive */
} StreamObject;

extern PyTypeObject StreamType;
gw_stream *stream_hold(StreamObject *s);
void stream_unhold(StreamObject *s);
/* The stream kept for a's context made to wait for a's pending work (with `host`, waited
 * for on the host too): its native handle, or (uintptr_t)-1 with an exception. */
uintptr_t aux_wait(gw_array *a, int host, ArrayObject *holder);
void aux_drop(gw_context *h);
PyObject *mod_stream_create(PyObject *m, PyObject *args);
PyObject *mod_stream_borrow(PyObject *m, PyObject *args);
PyObject *mod_sync_native(PyObject *m, PyObject *args);

/* ---- DLPack (_dlpack.c) ----------------------------------------------------------------- */

PyObject *Array_dlpack_device(ArrayObject *a, PyObject *unused);
PyObject *Array_dlpack(ArrayObject *a, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *mod_import_capsule(PyObject *m, PyObject *args);
PyObject *mod_check_stream(PyObject *m, PyObject *args);

/* ---- array interfaces (_cai.c) ---------------------------------------------------------- */

PyObject *Array_get_cai(ArrayObject *a, void *u);
PyObject *Array_get_ai(ArrayObject *a, void *u);
PyObject *Array_array(ArrayObject *a, PyObject *args, PyObject *kw);

/* ---- memory of another process (_ipc.c) ------------------------------------------------- */

extern PyTypeObject IpcHandleType;
PyObject *Array_ipc_handle(ArrayObject *a, PyObject *unused);
PyObject *Context_ipc_open(ContextObject *c, PyObject *handle);

#pragma GCC visibility pop

/* ---- DLPack (_dlpack.c) and its C exchange API (_exchange.c) ------------------------ */

/* __dlpack__'s wait for a consumer that passed no stream: device types with streams get
 * gpuwrap's pending work ordered before the legacy default stream (on the device), host
 * types wait on the host. 0, or -1 with an exception. */
int dlpack_export_wait(gw_array *h, int device_type);
/* At module init: the module's exchange functions, and the class attribute
 * `__dlpack_c_exchange_api__` of gpuwrap.Array. 0, or -1 with an exception. */
int gwpy_exchange_init(PyObject *module);

#endif /* GW_PY_GPUWRAP_H */
