"""gpuwrap from Python: any existing pointer as a typed N-d array, shared without copies.

    import numpy as np, gpuwrap
    ctx = gpuwrap.Context("cpu")
    x = np.zeros((3, 4))
    w = ctx.wrap(x, "float64", (3, 4), (4, 1))    # x's memory (kept, span checked); strides
                                                  # in elements, never NumPy's bytes
    a = ctx.alloc("pinned", "float32", (4, 5))
    n = np.asarray(a)                             # NumPy view of the same memory
    v = a[1:4, ::-2]                              # a gpuwrap view (NumPy's basic slicing)
    b = gpuwrap.from_dlpack(np.arange(6.0), ctx)  # gpuwrap array over NumPy's memory
    t = torch.from_dlpack(a.offer("cuda"))        # pinned memory offered as kDLCUDA
    h = ctx.alloc("device", "float32", 8).ipc_handle()  # to another process (picklable);
    d = ctx.ipc_open(h)                           # there: an Array over the same memory

The per-array calls (Context.wrap, Array and its properties, release, __dlpack__,
__cuda_array_interface__, __array_interface__, the DLPack deleter) are a C extension,
gpuwrap._gpuwrap, linked against libgpuwrap. Which libgpuwrap:
  - GPUWRAP_LIB (a path), when set, is loaded first and used (it must be the same ABI;
    a file that is not libgpuwrap, or one the extension does not use, fails the import);
  - an installed package uses the copy bundled at install time (gpuwrap/lib/, with the
    backend plugins under gpuwrap/lib/gpuwrap/) or the prefix recorded at install time
    (GPUWRAP_PREFIX): see python/setup.py;
  - imported from the source tree (PYTHONPATH=python, as CTest and scripts/h200.sh do),
    the extension is compiled on first import against GPUWRAP_LIB, else ../build/lib,
    into <that library's build dir>/python-ext/ (needs a C compiler and Python.h).
ctypes is used only for what is never on a hot path: load_library() gives the same
library as a ctypes.CDLL (for the CPU model's test controls, gw_cpu_*).

Use the interpreter that has the packages you share memory with: on Debian that is
/usr/bin/python3 for the distribution's NumPy (a pyenv `python3` first on PATH may have
none), or the environment where torch/CuPy are installed.

Threads: every object (Context, Array, Stream, exported capsules, offers) may be used and
released from any thread. The extension changes an object's handle only while holding the
GIL, so release()/close() take it out exactly once; slow calls (fill, copy, synchronize)
drop the GIL only after pinning what they use. A use after release raises ValueError
("array released", "context closed", "stream closed").

Streams: Context.stream() makes a gpuwrap stream (blocking, as cudaStreamCreate makes);
ExternalStream(handle, ctx) borrows someone else's (an int cudaStream_t / hipStream_t, 0 or
None = the legacy default stream, a torch.cuda.Stream or CuPy stream, any object with the
cuda.core __cuda_stream__ protocol), and closing it never destroys the native stream.
fill(value, stream=S) and copy_from(src, stream=S) queue the work on S and return. An
array released before S has run that work waits for it when the release frees memory (an
allocation, an imported tensor's buffer) or a registration gpuwrap made; memory wrapped
from a raw address that gpuwrap holds nothing of must stay valid until S is synchronized.
Synchronous calls (no stream) are ordered
on the legacy default stream and complete on return.

Streams across libraries (the Python array API and the CUDA Array Interface v3):
  - as a DLPack consumer, from_dlpack(obj, ctx, stream=S) passes the producer the stream
    gpuwrap will use the array on (S's handle; without S the legacy default stream: 1 on
    CUDA, 0 on ROCm); the producer orders its pending work before that stream's work;
  - as a DLPack producer, Array.__dlpack__(stream=S) makes the consumer's stream S wait,
    on the device, for gpuwrap's pending asynchronous work on the array (gw_array_wait:
    an event, never a host synchronisation); None means the legacy default stream on
    CUDA and ROCm and, for a kDLCPU export, a host consumer: then pending work is waited
    for on the host (as __array_interface__ does);
  - Array.__cuda_array_interface__ gives stream None when no gpuwrap work is pending, else
    a stream of the context's (created once, kept per context) made to wait for it;
  - from_dlpack of an object with only __cuda_array_interface__ (Numba, older CuPy) wraps
    its memory (the object is kept alive until the last gpuwrap reference goes) and
    honours its `stream` entry by synchronizing that stream on the host.

Lifetimes: an exported capsule holds a reference on the array until its consumer calls
the tensor's deleter (or the capsule is garbage collected unconsumed); an imported
tensor's deleter runs when the last gpuwrap reference to it goes. np.asarray(a) (the
array interface) makes NumPy hold the Python object `a`, which from its first
__array_interface__ keeps a gpuwrap reference of its own until it is collected: a.release()
then cannot free the memory under NumPy's view (the memory goes when both are gone). A
wrap's deleter and wrapped object are held by a collector-tracked object, so a deleter that
refers back to its holder (deleter=self._free) is a cycle the collector breaks.
"""

import ctypes
import operator
import os
import sys
import threading

from . import _loader

_c = _loader.load_extension()

__all__ = [
    "Array", "Context", "ExternalStream", "GpuwrapError", "IpcHandle", "Stream", "from_dlpack",
    "info", "info_report", "load_library",
    "kDLCPU", "kDLCUDA", "kDLCUDAHost", "kDLROCM", "kDLROCMHost", "kDLCUDAManaged",
]

# ---- DLPack ABI (ctypes declarations: for tests and hand-made producers, never hot) -----

kDLCPU, kDLCUDA, kDLCUDAHost, kDLROCM, kDLROCMHost, kDLCUDAManaged = 1, 2, 3, 10, 11, 13
DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0

_DEVICE_NAMES = {
    "cpu": kDLCPU, "cuda": kDLCUDA, "cuda_host": kDLCUDAHost, "rocm": kDLROCM,
    "rocm_host": kDLROCMHost, "cuda_managed": kDLCUDAManaged,
}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
        ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor),
]

# ---- gpuwrap enums ------------------------------------------------------------------------

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
KINDS = ["unknown", "host", "pinned", "device", "managed"]
BACKENDS = ["auto", "cpu", "cuda", "hip"]
WRAP_OWN, WRAP_NO_REGISTER, WRAP_READONLY = 1, 2, 4

# Every spelling seen is cached here (the extension looks dtypes up in this dict first):
# names, NumPy's character codes with and without a byte order, numpy types and dtypes.
_BO = "<" if sys.byteorder == "little" else ">"
_CODES = {"bool": "b1", "int8": "i1", "int16": "i2", "int32": "i4", "int64": "i8", "uint8": "u1",
          "uint16": "u2", "uint32": "u4", "uint64": "u8", "float16": "f2", "float32": "f4",
          "float64": "f8", "complex64": "c8", "complex128": "c16"}
_CHARS = {"bool": "?", "int8": "b", "uint8": "B", "float16": "e", "float32": "f", "float64": "d",
          "complex64": "F", "complex128": "D", "int16": "h", "uint16": "H", "int32": "i",
          "uint32": "I", "int64": "q", "uint64": "Q"}
_dtype_cache = {}
for _i, _n in enumerate(DTYPES):
    _dtype_cache[_n] = _i
    _dtype_cache[_i] = _i
    if _n in _CODES:
        _code = _CODES[_n]
        _dtype_cache[_code] = _i
        _dtype_cache[_CHARS[_n]] = _i
        for _o in ("<", ">", "=", "|"):
            if _o in ("=", "|", _BO) or _code in ("b1", "i1", "u1"):
                _dtype_cache[_o + _code] = _i
_dtype_cache["bool_"] = 0
_dtype_cache[bool] = 0
_dtype_cache[complex] = DTYPES.index("complex128")
_dtype_cache[float] = DTYPES.index("float64")


def _resolve_dtype(dtype):
    """A dtype spelling the cache has not seen: a NumPy dtype or type, torch dtype, or
    anything with .dtype or .name; cached (when hashable) for the next call."""
    name = None
    if isinstance(dtype, (bool, float)):  # True == 1 and 1.0 == 1 would find int8's index
        raise TypeError(f"dtype {dtype!r}: a {type(dtype).__name__} is not a dtype (a name such as "
                        "'float64', a NumPy dtype or type, or a gpuwrap dtype index)")
    if isinstance(dtype, str):
        name = dtype
    else:
        # A NumPy dtype of the other byte order has this host's name ('float32' for '>f4'):
        # gpuwrap has no byte-swapped types, so it is refused, as the string '>f4' is.
        for holder in (dtype, getattr(dtype, "dtype", None)):  # a dtype, or what has one
            bo = getattr(holder, "byteorder", None)
            if isinstance(bo, str) and bo in ("<", ">") and bo != _BO:
                raise ValueError(f"dtype {dtype!r}: byte order '{bo}', not this host's ('{_BO}'): "
                                 "gpuwrap has no byte-swapped types (convert with "
                                 "x.astype(x.dtype.newbyteorder('=')))")
        d = getattr(dtype, "dtype", None)  # numpy.float32 (a type) -> its .dtype attribute...
        if d is not None and not isinstance(d, type) and hasattr(d, "name"):
            name = d.name
        else:
            name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None)
        if name is None and type(dtype).__module__ == "torch":  # torch.float32 -> 'float32'
            name = str(dtype).rpartition(".")[2]
    if isinstance(name, str) and name.startswith("numpy."):
        name = name[6:]
    idx = _dtype_cache.get(name) if isinstance(name, str) else None
    if idx is None:
        raise ValueError(f"dtype {dtype!r}: expected one of {', '.join(DTYPES)} "
                         "(a name, a NumPy spelling such as 'f4' or '<f4', np.float32 or a NumPy dtype)")
    try:
        _dtype_cache[dtype] = idx
    except TypeError:  # unhashable: looked up each time
        pass
    return idx


# ---- errors ------------------------------------------------------------------------------

class GpuwrapError(RuntimeError):
    """A gpuwrap call failed: .status (a negative int), .name ("GW_EINVAL"), .detail
    (gw_last_error(): which argument, and why) and .call (what failed)."""

    def __init__(self, call, status, detail=None):
        status = int(status)
        if detail is None:  # raised from Python after a ctypes call, in the failing thread
            detail = _c.last_error()
        self.call, self.status, self.detail = call, status, detail or ""
        self.name = _c.err_name(status)
        super().__init__(f"{call}: {self.name}: {self.detail or _c.strerror(status)}")

    def __reduce__(self):
        return (type(self), (self.call, self.status, self.detail))


class DLPackBufferError(BufferError, GpuwrapError):
    """A DLPack export that is impossible without a copy, or a consumer stream that is not
    one (what the protocol calls a BufferError), with gpuwrap's status and message."""
    # BufferError defines __init__ itself and comes first in the MRO: without this the
    # message, .status and .name would never be set.
    __init__ = GpuwrapError.__init__


# ---- the library through ctypes (never on a hot path) ------------------------------------

_lib = None
_lib_lock = threading.Lock()


def load_library():
    """The libgpuwrap the extension uses, as a ctypes.CDLL (for calls the extension does not
    wrap, e.g. the CPU model's gw_cpu_* controls in tests). Same file, same handles."""
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = ctypes.CDLL(_c.library_path())
            vp = ctypes.c_void_p
            for name, res, args in [("gw_retain", vp, [vp]), ("gw_release", None, [vp]),
                                    ("gw_array_context", vp, [vp]), ("gw_array_pending", ctypes.c_int, [vp]),
                                    ("gw_last_error", ctypes.c_char_p, [])]:
                f = getattr(_lib, name)
                f.restype, f.argtypes = res, args
        return _lib


def _library_version():
    f = ctypes.CDLL(_c.library_path()).gw_version_string
    f.restype = ctypes.c_char_p
    return f().decode()


__version__ = _library_version()  # the loaded library's, from CMake's project(VERSION)


def _info_flags(settings, json):
    return (_c.INFO_ALL_SETTINGS if settings else 0) | (_c.INFO_JSON if json else 0)


def info(settings=False, json=False, file=None):
    """Print what `gpuwrap info` prints (backends, devices, capabilities, settings): the
    library's own report, gw_info_report. settings=True: every GPUWRAP_* setting with its
    default, value and doc (`--settings`); json=True: the report as one JSON object
    (`--json`). file: where to write it (any object with .write; None: the process's
    stdout, in order with what Python printed before). Returns 0; a setting that is set but
    not valid raises GpuwrapError (GW_EINVAL naming it) after the report is printed. To
    keep the report instead: info_report()."""
    if file is not None:
        text, status, detail = _c.info_text(_info_flags(settings, json))
        file.write(text)
        if status != 0:
            raise GpuwrapError("gw_info_report", status, detail)
        return 0
    sys.stdout.flush()  # the report goes through C's stdout: after what Python wrote
    _c.info(_info_flags(settings, json))
    return 0


def info_report(settings=False, as_dict=False):
    """The report info() prints, returned: a str (the text of `gpuwrap info`), or with
    as_dict=True the JSON form (`gpuwrap info --json`) as a dict: "version", "backends"
    (each with its devices and what they can do), "auto", "settings". settings=True: every
    GPUWRAP_* setting, not only those set. A setting that is set but not valid raises
    GpuwrapError (GW_EINVAL naming it), whose .report holds the report all the same."""
    text, status, detail = _c.info_text(_info_flags(settings, as_dict))
    result = text
    if as_dict:
        import json as _json
        result = _json.loads(text)
    if status != 0:
        e = GpuwrapError("gw_info_report", status, detail)
        e.report = result
        raise e
    return result


# ---- streams ------------------------------------------------------------------------------

def _native_handle(obj):
    """The native stream handle (an int; 0 = NULL, the legacy default stream) that `obj`
    names: None, an int (a cudaStream_t / hipStream_t, or the CPU model's handle), a
    gpuwrap Stream, an object with the cuda.core protocol __cuda_stream__() -> (version,
    handle), a torch.cuda.Stream (.cuda_stream), or a CuPy stream (.ptr)."""
    if obj is None:
        return 0
    if isinstance(obj, _c.Stream):
        return obj.handle
    if isinstance(obj, bool):  # an int to Python, never a stream
        raise TypeError("stream: a bool is not a stream handle")
    try:
        h = operator.index(obj)  # ints, numpy integers
    except TypeError:
        h = None
    if h is None:
        proto = getattr(obj, "__cuda_stream__", None)
        if proto is not None:
            v = proto() if callable(proto) else proto
            if not (isinstance(v, tuple) and len(v) == 2):
                raise TypeError(f"stream: __cuda_stream__ gave {v!r}, not (version, handle)")
            return _native_handle(v[1])
        if hasattr(obj, "cuda_stream"):  # torch.cuda.Stream / torch.cuda.ExternalStream
            return _native_handle(obj.cuda_stream)
        if type(obj).__module__.split(".")[0] == "cupy" and hasattr(obj, "ptr"):
            return _native_handle(obj.ptr)  # older CuPy streams, without __cuda_stream__
        raise TypeError(f"stream: {type(obj).__name__} is not a stream (an int handle, a "
                        "gpuwrap.Stream, or an object with __cuda_stream__ / .cuda_stream)")
    if h < 0 or h >= 1 << (8 * ctypes.sizeof(ctypes.c_void_p)):
        raise ValueError(f"stream: handle {h} is not a pointer value")
    return h


class Stream(_c.Stream):
    """A gpuwrap stream (gw_stream): made by Context.stream(), or borrowed by
    ExternalStream. `handle` is the native stream (cudaStream_t / hipStream_t as an int,
    0 for the legacy default stream; an opaque handle on the CPU backend). close() (also
    through `with` and garbage collection) destroys a stream gpuwrap made after waiting
    for its work; from any thread, once however many call it; later uses raise ValueError."""
    __slots__ = ()

    def __new__(cls, ctx=None):
        return _c.stream_create(cls, ctx if ctx is not None else _default_context())


class ExternalStream(Stream):
    """Borrow a native stream someone else made (gw_stream_wrap): an int handle (0 or None
    = the legacy default stream on CUDA, also cudaStreamPerThread = 2), a torch.cuda.Stream,
    a CuPy stream, anything with __cuda_stream__, or a gpuwrap Stream. The native stream must
    outlive this object (the Python object it came from is kept referenced: CuPy destroys
    its stream when the object goes); close() drops only gpuwrap's handle."""
    __slots__ = ()

    def __new__(cls, handle, ctx=None):
        ctx = ctx if ctx is not None else _default_context()
        if isinstance(handle, _c.Stream):  # read and borrowed under the GIL, in C
            return _c.stream_borrow(cls, ctx, handle, handle)
        native = _native_handle(handle)
        return _c.stream_borrow(cls, ctx, native, None if isinstance(handle, int) else handle)


# ---- contexts and arrays -------------------------------------------------------------------

class Context(_c.Context):
    """A (backend, device) pair: backend "auto", "cpu", "cuda" or "hip". wrap(), alloc(),
    synchronize(), close() and the properties are the extension's (no Python frame)."""
    __slots__ = ()

    def stream(self):
        """A new gpuwrap Stream on this context's device (gw_stream_create: a blocking
        stream, ordered with the legacy default stream as cudaStreamCreate's are)."""
        return Stream(self)

    def from_dlpack(self, obj, stream=None):
        return from_dlpack(obj, self, stream)

    def __repr__(self):
        if self.closed:
            return "<gpuwrap.Context closed>"
        return f"<gpuwrap.Context {self.backend} device={self.device}>"


Array = _c.Array
# Array.ipc_handle() gives one; Context.ipc_open(h) takes it or its bytes (docs/IPC.md).
IpcHandle = _c.IpcHandle


def _device_arg(device_type, device_id):
    if isinstance(device_type, str):
        try:
            device_type = _DEVICE_NAMES[device_type]
        except KeyError:
            raise ValueError(f"device type {device_type!r}: expected one of "
                             f"{', '.join(repr(k) for k in _DEVICE_NAMES)} or a DLDeviceType value") from None
    return (int(device_type), int(device_id or 0))


class _Offer:
    """What Array.offer() returns: the array's DLPack protocol with dl_device fixed."""
    __slots__ = ("array", "device")

    def __init__(self, array, device_type, device_id=None):
        self.array = array
        self.device = _device_arg(device_type, device_id)
        self.array.__dlpack__(max_version=(1, 0), dl_device=self.device)  # raises if impossible

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.array.__dlpack__(stream=stream, max_version=max_version,
                                     dl_device=dl_device or self.device, copy=copy)


class _Interface:
    __slots__ = ("__array_interface__", "owner")


def _numpy_array(a, dtype=None, copy=None):
    """Array.__array__ for host-accessible memory: NumPy's view through the interface."""
    import numpy as np
    holder = _Interface()
    holder.__array_interface__ = a.__array_interface__
    holder.owner = a  # the NumPy array's base keeps `a` alive
    n = np.asarray(holder)
    if copy:
        n = n.copy()
    return n if dtype is None else n.astype(dtype, copy=False)


def _check_stream(stream, device_type, model=False):
    """Validate a consumer's DLPack `stream` for an export as `device_type` (the rules of
    Array.__dlpack__; TypeError / BufferError)."""
    _c.check_stream(stream, int(device_type), bool(model))


_aux_streams = _c.aux_streams  # {C context address: the Stream kept for its exports}

# ---- import: from_dlpack ----------------------------------------------------------------------

_CUDA_TYPES = (kDLCUDA, kDLCUDAManaged, kDLCUDAHost)
_ROCM_TYPES = (kDLROCM, kDLROCMHost)
# The stream gpuwrap reads on, as a DLPack consumer: its calls are synchronous and ordered
# on the legacy default stream, which the array API numbers 1 on CUDA and 0 on ROCm.
_CONSUMER_STREAM = {t: 1 for t in _CUDA_TYPES}
_CONSUMER_STREAM.update({t: 0 for t in _ROCM_TYPES})
_HOST_TYPES = (kDLCUDAHost, kDLROCMHost)


def _is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


def _consumer_stream(obj, native=None):
    """(device type, the stream from_dlpack passes obj.__dlpack__): None for CPU tensors
    and for producers without __dlpack_device__. `native`: the native handle of the stream
    the caller will use the array on (0 = the legacy default stream), None for gpuwrap's
    own (synchronous calls, the legacy default stream)."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None:
        return None, None
    device_type = int(dev()[0])  # an IntEnum in some producers
    if native is None or device_type not in _CUDA_TYPES + _ROCM_TYPES:
        return device_type, _CONSUMER_STREAM.get(device_type)
    if device_type in _CUDA_TYPES and native == 0:
        return device_type, 1  # the legacy default stream is 1 in the array API (0 is invalid)
    return device_type, native  # a handle; 2 = cudaStreamPerThread; 0 = ROCm's default


def _take_capsule(obj, native=None):
    """Ask a DLPack producer for a capsule, passing the stream gpuwrap will use."""
    device_type, stream = _consumer_stream(obj, native)
    if stream is not None and device_type in _HOST_TYPES:
        # Pinned host memory: producers disagree on whether it has streams (PyTorch exports
        # its pinned tensors as kDLCUDAHost but refuses any stream for them, with an
        # AssertionError); a producer that refuses a stream for host memory has no stream
        # work to order, so its capsule is then taken without one.
        try:
            return _call_dlpack(obj, stream)
        except BufferError:  # the protocol's refusal (gpuwrap's DLPackBufferError too)
            pass
        except GpuwrapError:  # a gpuwrap producer failed (e.g. its wait for pending work):
            raise             # not a refusal of the stream, so not retried without one
        except (AssertionError, ValueError, RuntimeError, NotImplementedError):
            pass
        return _call_dlpack(obj, None)
    return _call_dlpack(obj, stream)


def _call_dlpack(obj, stream):
    kw = {} if stream is None else {"stream": stream}
    try:
        return obj.__dlpack__(max_version=(_c.DLPACK_MAJOR, _c.DLPACK_MINOR), **kw)
    except TypeError:  # a producer older than DLPack 1.0 (no max_version; e.g. NumPy < 2.1)
        pass
    if kw:
        try:
            return obj.__dlpack__(**kw)  # the 2021 protocol: __dlpack__(*, stream=None)
        except TypeError:
            pass
    # No keywords at all (pre-protocol objects): such a producer orders nothing for us.
    return obj.__dlpack__()


def from_dlpack(obj, ctx=None, stream=None):
    """Import any object with the DLPack protocol (or a DLPack capsule), or failing that
    the CUDA Array Interface, as a gpuwrap Array, without copying. The producer's deleter
    runs (a CAI producer is let go) when the last gpuwrap reference goes.

    `stream` is the stream the caller will use the array on (a gpuwrap Stream, an
    ExternalStream, a native handle or stream object as ExternalStream takes); None means
    gpuwrap's synchronous calls, ordered on the legacy default stream. A DLPack producer is
    passed it as the array API requires (stream=1 for the legacy default stream on CUDA, 0
    on ROCm, the handle otherwise; nothing for CPU tensors). A raw capsule carries no such
    promise: whoever made it chose its stream. A CUDA Array Interface producer's `stream`
    entry (v3) is honoured by synchronizing that stream on the host before this returns."""
    if ctx is None:
        ctx = _default_context()
    native = None if stream is None else _native_handle(stream)
    a = _c.exchange_import(ctx, obj, native)  # issue 37: the producer's DLPack C exchange API
    if a is not None:
        return a
    if _is_capsule(obj):
        cap = obj
    elif not hasattr(obj, "__dlpack__") and not hasattr(obj, "__cuda_array_interface__"):
        raise TypeError(
            f"from_dlpack: a {type(obj).__name__} is not an array gpuwrap can import: expected an "
            "object with __dlpack__ (the DLPack protocol: NumPy, CuPy, PyTorch, JAX arrays...), "
            "a type with __dlpack_c_exchange_api__, a DLPack capsule ('dltensor' or "
            "'dltensor_versioned'), or an object with __cuda_array_interface__"
            + (" (for a Python sequence, make an array first: np.asarray(x))"
               if isinstance(obj, (list, tuple, range)) else ""))
    elif hasattr(obj, "__dlpack__"):
        try:
            cap = _take_capsule(obj, native)  # DLPack first: its stream protocol needs no host wait
        except BufferError as e:
            # A host array DLPack cannot carry: NumPy < 2 refuses to export a read-only
            # array (its own DLPack imports among them); its array interface can say so.
            # Not a gpuwrap producer's refusal (a bad stream, a device it cannot offer).
            if isinstance(e, GpuwrapError) or not hasattr(obj, "__array_interface__"):
                raise
            return _from_interface(obj, ctx, "__array_interface__")
    else:
        return _from_interface(obj, ctx, "__cuda_array_interface__")
    return _c.import_capsule(ctx, cap)



_TYPESTR = {"bool": "|b1", "int8": "|i1", "uint8": "|u1"}
_TYPESTR.update({f"{k}{b}": f"{_BO}{k[0]}{b // 8}" for k in ("int", "uint") for b in (16, 32, 64)})
_TYPESTR.update({"float16": _BO + "f2", "float32": _BO + "f4", "float64": _BO + "f8",
                 "complex64": _BO + "c8", "complex128": _BO + "c16"})  # bfloat16: none exists
_FROM_TYPESTR = {v[1:]: k for k, v in _TYPESTR.items()}


def _interface(obj, name):
    """Read obj's __array_interface__ or __cuda_array_interface__ (v0-v3): (address,
    readonly, dtype name, shape, strides in elements or None, the dict)."""
    d = getattr(obj, name)
    if not isinstance(d, dict):
        raise TypeError(f"{name} is a {type(d).__name__}, not a dict")
    if d.get("mask") is not None:
        raise ValueError(f"{name}: masked arrays are not supported")
    typestr = str(d["typestr"])
    order, code = typestr[:1], typestr[1:]
    dtype = _FROM_TYPESTR.get(code)
    if dtype is None or order not in ("|", "=", _BO) or (order == "|" and code not in ("b1", "i1", "u1")):
        raise ValueError(f"{name}: typestr {typestr!r} is not a type gpuwrap has "
                         "(in this host's byte order)")
    data = d.get("data")
    if not (isinstance(data, tuple) and len(data) == 2):
        raise TypeError(f"{name}: data {data!r} is not an (address, readonly) tuple")
    ptr, readonly = data
    shape = tuple(int(n) for n in d["shape"])
    item = int(_TYPESTR[dtype][2:])
    strides = d.get("strides")
    if strides is not None:
        if any(int(b) % item for b in strides):
            raise ValueError(f"{name}: strides {tuple(strides)} are not multiples "
                             f"of the item size {item}")
        strides = tuple(int(b) // item for b in strides)
    return int(ptr or 0), bool(readonly), dtype, shape, strides, d


def _cai_stream(ctx, d):
    """Wait for the work a CUDA Array Interface producer queued on its `stream` (v3)."""
    pstream = d.get("stream") if int(d.get("version", 0)) >= 3 else None
    if pstream is not None:
        # The producer's work on the memory is queued on pstream: wait for it before the
        # memory is used on any stream. gpuwrap has no public call that orders one stream
        # after another, so this waits on the host (the interface allows either).
        if isinstance(pstream, bool) or not isinstance(pstream, int):
            raise TypeError(f"__cuda_array_interface__: stream {pstream!r} is not an int")
        if pstream == 0:
            raise ValueError("__cuda_array_interface__: stream 0 is disallowed (ambiguous)")
        _c.sync_native(ctx, 0 if pstream == 1 else pstream)  # 1: legacy (NULL); 2: per-thread


def _interface_memory(ctx, obj):
    """Context.wrap(obj, ...) of an object without the buffer protocol: (address of its
    element 0, first byte, end byte relative to it, readonly), from __array_interface__ or
    __cuda_array_interface__ (whose producer's stream is waited for)."""
    for name in ("__array_interface__", "__cuda_array_interface__"):
        if hasattr(obj, name):
            break
    else:
        raise TypeError(f"wrap: ptr must be an address (an int), None, or an object that exposes "
                        f"its memory (the buffer protocol, __array_interface__, "
                        f"__cuda_array_interface__), not {type(obj).__name__}")
    ptr, readonly, dtype, shape, strides, d = _interface(obj, name)
    if name == "__cuda_array_interface__":
        _cai_stream(ctx, d)
    item = int(_TYPESTR[dtype][2:])
    if strides is None:
        strides, run = [0] * len(shape), 1
        for i in range(len(shape) - 1, -1, -1):
            strides[i], run = run, run * shape[i]
    lo = hi = 0
    if all(n > 0 for n in shape):
        for n, s in zip(shape, strides):
            lo, hi = (lo + (n - 1) * s, hi) if s < 0 else (lo, hi + (n - 1) * s)
        hi += 1
    return ptr, lo * item, hi * item, readonly


def _from_interface(obj, ctx, name):
    """from_dlpack of an object through its array interface: a gpuwrap Array over its memory
    (with its dtype, shape, strides, and read-only flag); the object is kept alive until
    the last gpuwrap reference goes."""
    _, _, dtype, shape, strides, _ = _interface(obj, name)
    return ctx.wrap(obj, dtype, shape, strides)


_default = None
_default_lock = threading.Lock()


def _default_context():
    """The context from_dlpack uses when given none: created once ("auto"), however many
    threads ask at once (creation drops the GIL, so the check is repeated under a lock)."""
    global _default
    ctx = _default
    if ctx is None or ctx.closed:
        with _default_lock:
            ctx = _default
            if ctx is None or ctx.closed:
                ctx = _default = Context("auto")
    return ctx


_c._init(GpuwrapError, DLPackBufferError, _resolve_dtype, _Offer, _numpy_array, _dtype_cache,
         _interface_memory)
