"""gpuwrap from Python: a small ctypes module over libgpuwrap.so (no build step).

It gives gpuwrap arrays the Python DLPack protocol, so that NumPy, PyTorch, CuPy, JAX, ...
share their memory with gpuwrap (and with C code using gpuwrap) without copies:

    import numpy as np, gpuwrap
    ctx = gpuwrap.Context("cpu")
    a = ctx.alloc("pinned", "float32", (4, 5))
    n = np.from_dlpack(a)                      # numpy view of the same memory
    b = gpuwrap.from_dlpack(np.arange(6.0), ctx)  # gpuwrap array over numpy's memory

    t = torch.from_dlpack(a.offer("cuda"))     # pinned memory offered as kDLCUDA (torch
                                               # does not import kDLCUDAHost)

The library is found through the GPUWRAP_LIB environment variable (a path), then
../build/lib/libgpuwrap.so next to this file, then ctypes.util.find_library("gpuwrap").
The module itself needs only the standard library (CPython 3). Use the interpreter
that has the packages you share memory with: on Debian that is /usr/bin/python3 for the
distribution's NumPy (the tests run under it; a pyenv or venv `python3` first on PATH may
have no NumPy), or the environment where torch/cupy are installed.

Threads: every object (Context, Array, exported capsules, offers) may be used and
released from any thread. ctypes drops the GIL during each C call, so each object counts
its running calls under a lock: release()/close() take the handle out exactly once, and
the C reference is dropped when the last running call on it returns. Using an object
after its release raises ValueError ("array released", "context closed").

Streams (DLPack): from_dlpack passes the producer the stream gpuwrap will read on, as the
Python array API requires: gpuwrap's calls are synchronous and ordered on the legacy
default stream, so it passes stream=1 for CUDA tensors (kDLCUDA, kDLCUDAManaged,
kDLCUDAHost), 0 for ROCm ones and None for CPU ones; the producer then orders its pending
work (e.g. PyTorch's side-stream kernels) before gpuwrap's reads. A capsule taken with
stream=None is not so ordered (measured with PyTorch 2.11 on an H200).

Lifetimes: an exported capsule holds a reference on the array until its consumer calls
the tensor's deleter (or, if never consumed, until the capsule is garbage collected); an
imported tensor's deleter runs when the last gpuwrap reference to it goes.
"""

import ctypes
import ctypes.util
import itertools
import os
import sys
import threading

__all__ = [
    "Array", "Context", "GpuwrapError", "from_dlpack", "load_library",
    "kDLCPU", "kDLCUDA", "kDLCUDAHost", "kDLROCM", "kDLROCMHost", "kDLCUDAManaged",
]

# ---- DLPack ABI --------------------------------------------------------------------------

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


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
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

# ---- gpuwrap enums -----------------------------------------------------------------------

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
KINDS = ["unknown", "host", "pinned", "device", "managed"]
BACKENDS = ["auto", "cpu", "cuda", "hip"]
WRAP_OWN, WRAP_NO_REGISTER, WRAP_READONLY = 1, 2, 4


def _dtype_index(dtype):
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if name is None:  # a numpy dtype class or a type such as numpy.float32
        name = getattr(getattr(dtype, "dtype", None), "name", None) or getattr(dtype, "__name__", str(dtype))
    if name == "bool_":
        name = "bool"
    try:
        return DTYPES.index(name)
    except ValueError:
        raise ValueError(f"dtype {dtype!r}: expected one of {', '.join(DTYPES)}") from None


# ---- the library ---------------------------------------------------------------------------

_lib = None
_lib_lock = threading.Lock()
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


def _candidates():
    env = os.environ.get("GPUWRAP_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "..", "build", "lib", "libgpuwrap.so")
    found = ctypes.util.find_library("gpuwrap")
    if found:
        yield found


def load_library():
    """The loaded libgpuwrap (ctypes.CDLL), loading it on first use."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path)
                break
            except OSError as e:
                errors.append(f"{path}: {e}")
        else:
            raise OSError("libgpuwrap not found (set GPUWRAP_LIB): " + ("; ".join(errors) or "no candidate"))
        _declare(lib)
        _lib = lib
        return lib


def _declare(lib):
    vp, i32, st = ctypes.c_void_p, ctypes.c_int, ctypes.c_int
    P64 = ctypes.POINTER(ctypes.c_int64)
    sig = {
        "gw_strerror": (ctypes.c_char_p, [st]),
        "gw_err_name": (ctypes.c_char_p, [st]),
        "gw_last_error": (ctypes.c_char_p, []),
        "gw_context_create": (st, [i32, i32, ctypes.POINTER(vp)]),
        "gw_context_destroy": (None, [vp]),
        "gw_context_backend": (i32, [vp]),
        "gw_context_device": (i32, [vp]),
        "gw_synchronize": (st, [vp]),
        "gw_wrap": (st, [vp, vp, i32, i32, P64, P64, ctypes.c_uint, ctypes.POINTER(vp)]),
        "gw_wrap_with_deleter": (st, [vp, vp, i32, i32, P64, P64, ctypes.c_uint, _DELETER, vp,
                                      ctypes.POINTER(vp)]),
        "gw_alloc": (st, [vp, i32, i32, i32, P64, ctypes.POINTER(vp)]),
        "gw_retain": (vp, [vp]),
        "gw_release": (None, [vp]),
        "gw_data": (vp, [vp]),
        "gw_host_data": (vp, [vp]),
        "gw_kind": (i32, [vp]),
        "gw_device": (i32, [vp]),
        "gw_array_dtype": (i32, [vp]),
        "gw_ndim": (i32, [vp]),
        "gw_shape": (P64, [vp]),
        "gw_strides": (P64, [vp]),
        "gw_numel": (ctypes.c_int64, [vp]),
        "gw_is_readonly": (i32, [vp]),
        "gw_array_context": (vp, [vp]),
        "gw_dtype_size": (ctypes.c_size_t, [i32]),
        "gw_view": (st, [vp, P64, P64, P64, ctypes.POINTER(vp)]),
        "gw_copy": (st, [vp, vp]),
        "gw_fill": (st, [vp, vp]),
        "gw_dlpack_device": (st, [vp, ctypes.POINTER(DLDevice)]),
        "gw_to_dlpack": (st, [vp, ctypes.POINTER(vp)]),
        "gw_to_dlpack_as": (st, [vp, DLDevice, ctypes.POINTER(vp)]),
        "gw_to_dlpack_legacy": (st, [vp, ctypes.POINTER(vp)]),
        "gw_to_dlpack_legacy_as": (st, [vp, DLDevice, ctypes.POINTER(vp)]),
        "gw_from_dlpack": (st, [vp, vp, ctypes.POINTER(vp)]),
        "gw_from_dlpack_legacy": (st, [vp, vp, ctypes.POINTER(vp)]),
        "gw_dlpack_capsule_destructor": (None, [vp]),
        "gw_dlpack_capsule_layout": (st, [ctypes.c_size_t, ctypes.c_size_t]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


class GpuwrapError(RuntimeError):
    """A gpuwrap call failed: .status (negative int), .name ("GW_EINVAL"), .detail."""

    def __init__(self, call, status):
        lib = load_library()
        self.status = status
        self.name = lib.gw_err_name(status).decode()
        self.detail = lib.gw_last_error().decode(errors="replace")
        super().__init__(f"{call}: {self.name}: {self.detail or lib.gw_strerror(status).decode()}")


class DLPackBufferError(BufferError, GpuwrapError):
    """A DLPack export that is impossible without a copy (what the protocol calls a BufferError)."""


def _check(call, status, exc=GpuwrapError):
    if status != 0:
        raise exc(call, status)


# ---- Python's capsule API ------------------------------------------------------------------

_api = ctypes.pythonapi
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

_VERSIONED, _LEGACY = b"dltensor_versioned", b"dltensor"
_USED_VERSIONED, _USED_LEGACY = b"used_dltensor_versioned", b"used_dltensor"
# A capsule keeps a pointer to its name: ours are C strings that are never freed, so that
# they outlive every capsule, even one freed after this module at interpreter exit.
_libc = ctypes.CDLL(None)
_libc.strdup.restype = ctypes.c_void_p
_libc.strdup.argtypes = [ctypes.c_char_p]
_NAME_ADDR = {True: _libc.strdup(_VERSIONED), False: _libc.strdup(_LEGACY)}
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p)(("PyCapsule_New", _api))


def _capsule_layout():
    """Offsets of a capsule's pointer and name fields, found on a probe capsule (so no
    assumption about the object header's size)."""
    marker = 0x5EED0000DEAD
    probe = _capsule_new(marker, _NAME_ADDR[True], None)
    size = ctypes.sizeof(ctypes.c_void_p)
    slots = list((ctypes.c_void_p * (sys.getsizeof(probe) // size)).from_address(id(probe)))
    if slots.count(marker) != 1 or slots.count(_NAME_ADDR[True]) != 1:
        raise RuntimeError("gpuwrap: unexpected PyCapsule layout")
    return slots.index(marker) * size, slots.index(_NAME_ADDR[True]) * size


_CAPSULE_PTR_OFF, _CAPSULE_NAME_OFF = _capsule_layout()


def _new_capsule(ptr, versioned):
    # The destructor is libgpuwrap's C function: it runs when the capsule is freed, possibly
    # while an exception is pending, where no Python code may run (ctypes would raise, and so
    # swallow, the pending exception); it calls the tensor's deleter if no consumer renamed
    # the capsule "used_...".
    lib = load_library()
    if not _layout_set:
        with _lib_lock:  # once, whichever thread exports first
            if not _layout_set:
                _check("gw_dlpack_capsule_layout",
                       lib.gw_dlpack_capsule_layout(_CAPSULE_PTR_OFF, _CAPSULE_NAME_OFF))
                _layout_set.append(True)
    return _capsule_new(ptr, _NAME_ADDR[versioned], ctypes.cast(lib.gw_dlpack_capsule_destructor, ctypes.c_void_p).value)


_layout_set = []


# ---- deleters written in Python --------------------------------------------------------------

_deleters = {}
_deleter_ids = itertools.count(1)


@_DELETER
def _run_python_deleter(ptr, user):
    # An exception raised here is reported by ctypes as unraisable; none is caught here, so
    # an error already pending (a release during unwinding) is never swallowed.
    fn = _deleters.pop(user, None)
    if fn is not None:
        fn(ptr)


# ---- handles shared by threads ---------------------------------------------------------------

class _Handle:
    """One gpuwrap reference (an array's or a context's) shared by threads.

    ctypes drops the GIL during every C call, so "if self._h: gw_release(self._h)" lets
    two threads pass the check and drop one reference twice (a heap corruption), and a
    release in one thread could free an array under a call still running on it in
    another. So every call runs inside `with ref as h:`, which counts it under a lock;
    take() removes the handle exactly once, and the C free runs once, in whichever thread
    comes last (take() itself, or the last running call's exit), outside the lock: a free
    can run Python deleters, which may take other locks or release other objects.
    """
    __slots__ = ("_lock", "_h", "_users", "_pending", "_free", "_gone")

    def __init__(self, h, free, gone):
        self._lock = threading.Lock()
        self._h = h            # None once taken
        self._users = 0        # calls running on the handle now
        self._pending = None   # a handle taken while calls ran: freed by the last of them
        self._free = free      # kept here, so a free at interpreter exit needs no globals
        self._gone = gone      # the message of a use after take()

    def peek(self):
        """The handle now (None once taken); for reporting, not for calls."""
        return self._h

    def __enter__(self):
        with self._lock:
            h = self._h
            if h is None:
                raise ValueError(f"gpuwrap: {self._gone}")
            self._users += 1
        return h

    def __exit__(self, *exc):
        h = None
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._pending is not None:
                h, self._pending = self._pending, None
        if h is not None:
            self._free(h)
        return False

    def take(self):
        """Drop the reference, exactly once however many threads call this."""
        with self._lock:
            h, self._h = self._h, None
            if h is None:
                return
            if self._users:
                self._pending = h
                return
        self._free(h)


# ---- contexts and arrays ------------------------------------------------------------------------

class Context:
    """A (backend, device) pair: backend "auto", "cpu", "cuda" or "hip"."""

    def __init__(self, backend="auto", device=0):
        self._ref = None  # close() (from __del__) runs even when creation fails
        lib = load_library()
        b = BACKENDS.index(backend) if isinstance(backend, str) else int(backend)
        h = ctypes.c_void_p()
        _check(f"gw_context_create({backend!r}, {device})", lib.gw_context_create(b, device, ctypes.byref(h)))
        self._ref = _Handle(h.value, lib.gw_context_destroy, "context closed")

    def _use(self):
        if self._ref is None:
            raise ValueError("gpuwrap: context closed")
        return self._ref

    @property
    def handle(self):
        return self._use().peek()

    @property
    def closed(self):
        return self._ref is None or self._ref.peek() is None

    @property
    def backend(self):
        with self._use() as h:
            return BACKENDS[_lib.gw_context_backend(h)]

    @property
    def device(self):
        with self._use() as h:
            return _lib.gw_context_device(h)

    def synchronize(self):
        with self._use() as h:
            _check("gw_synchronize", _lib.gw_synchronize(h))

    def close(self):
        """Drop this reference; arrays made through the context keep it alive. Calls
        running on the context in other threads finish first (the destroy waits for the
        last of them); later calls raise ValueError. A second close does nothing."""
        ref = getattr(self, "_ref", None)
        if ref is not None:
            ref.take()

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def wrap(self, ptr, dtype, shape, strides=None, *, readonly=False, no_register=False,
             own=False, deleter=None):
        """Wrap memory at address `ptr` (an int) without copying. `deleter(ptr)` (a Python
        callable) runs exactly once when the last reference goes."""
        shape = tuple(int(s) for s in shape)
        n = len(shape)
        cshape = (ctypes.c_int64 * max(n, 1))(*shape)
        cstrides = None if strides is None else (ctypes.c_int64 * max(n, 1))(*[int(s) for s in strides])
        flags = (WRAP_READONLY if readonly else 0) | (WRAP_NO_REGISTER if no_register else 0) | (WRAP_OWN if own else 0)
        h = ctypes.c_void_p()
        with self._use() as ch:
            if deleter is None:
                s = _lib.gw_wrap(ch, ptr, _dtype_index(dtype), n, cshape, cstrides, flags, ctypes.byref(h))
            else:
                key = next(_deleter_ids)  # itertools.count: atomic under the GIL
                _deleters[key] = deleter
                s = _lib.gw_wrap_with_deleter(ch, ptr, _dtype_index(dtype), n, cshape, cstrides,
                                              flags, _run_python_deleter, key, ctypes.byref(h))
                if s != 0:
                    _deleters.pop(key, None)  # not called on failure: the memory stays the caller's
            _check("gw_wrap", s)  # in the same thread as the call: gw_last_error is per thread
        return Array(h.value)

    def alloc(self, kind, dtype, shape):
        """A C-contiguous array of `kind` memory ("host", "pinned", "device", "managed")."""
        shape = tuple(int(s) for s in shape)
        cshape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        h = ctypes.c_void_p()
        with self._use() as ch:
            _check(f"gw_alloc({kind!r})", _lib.gw_alloc(ch, KINDS.index(kind), _dtype_index(dtype),
                                                       len(shape), cshape, ctypes.byref(h)))
        return Array(h.value)

    def from_dlpack(self, obj):
        return from_dlpack(obj, self)


def _device_arg(device_type, device_id):
    if isinstance(device_type, str):
        device_type = _DEVICE_NAMES[device_type]
    return DLDevice(int(device_type), int(device_id))


class Array:
    """A gpuwrap array: one reference, dropped by release() (from any thread, once however
    many threads call it) or by garbage collection. Any use after release() raises
    ValueError("gpuwrap: array released")."""

    def __init__(self, handle):
        """Adopt one reference to the gw_array at address `handle` (an int)."""
        if not handle:
            raise ValueError("gpuwrap.Array: NULL handle")
        self._ref = _Handle(handle, (_lib or load_library()).gw_release, "array released")

    def release(self):
        ref = getattr(self, "_ref", None)  # absent if __init__ raised
        if ref is not None:
            ref.take()

    __del__ = release

    @property
    def released(self):
        return self._ref.peek() is None

    @property
    def handle(self):
        with self._ref as h:
            return h

    @property
    def data_ptr(self):
        """Device-usable address of element 0 (None if not device-accessible)."""
        with self._ref as h:
            return _lib.gw_data(h)

    @property
    def host_ptr(self):
        """Host-usable address of element 0 (None if not host-accessible)."""
        with self._ref as h:
            return _lib.gw_host_data(h)

    @property
    def kind(self):
        with self._ref as h:
            return KINDS[_lib.gw_kind(h)]

    @property
    def device(self):
        with self._ref as h:
            return _lib.gw_device(h)

    @property
    def dtype(self):
        with self._ref as h:
            return DTYPES[_lib.gw_array_dtype(h)]

    @property
    def itemsize(self):
        with self._ref as h:
            return _lib.gw_dtype_size(_lib.gw_array_dtype(h))

    @property
    def nbytes(self):
        with self._ref as h:
            return _lib.gw_numel(h) * _lib.gw_dtype_size(_lib.gw_array_dtype(h))

    @property
    def ndim(self):
        with self._ref as h:
            return _lib.gw_ndim(h)

    @property
    def shape(self):
        with self._ref as h:  # the pointer is into the array: read it while the array lives
            p = _lib.gw_shape(h)
            return tuple(p[i] for i in range(_lib.gw_ndim(h)))

    @property
    def strides(self):
        """Strides in elements."""
        with self._ref as h:
            p = _lib.gw_strides(h)
            return tuple(p[i] for i in range(_lib.gw_ndim(h)))

    @property
    def size(self):
        with self._ref as h:
            return _lib.gw_numel(h)

    @property
    def readonly(self):
        with self._ref as h:
            return bool(_lib.gw_is_readonly(h))

    def __repr__(self):
        try:
            with self._ref:  # one use, so a release meanwhile cannot cut the repr in half
                return (f"<gpuwrap.Array {self.dtype}{list(self.shape)} {self.kind} device={self.device}"
                        f"{' readonly' if self.readonly else ''} data=0x{(self.data_ptr or 0):x}>")
        except ValueError:
            return "<gpuwrap.Array released>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def view(self, start, shape, step=None):
        out = ctypes.c_void_p()
        with self._ref as h:
            n = _lib.gw_ndim(h)
            arr = lambda v: (ctypes.c_int64 * max(n, 1))(*[int(x) for x in v])
            _check("gw_view", _lib.gw_view(h, arr(start), arr(shape),
                                           None if step is None else arr(step), ctypes.byref(out)))
        return Array(out.value)

    def fill(self, value):
        """Set every element to `value` (runs where the memory is)."""
        import struct
        fmt = {"bool": "?", "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B",
               "uint16": "H", "uint32": "I", "uint64": "Q", "float16": "e", "float32": "f",
               "float64": "d"}
        dt = self.dtype
        if dt in fmt:
            raw = struct.pack("=" + fmt[dt], value)
        elif dt == "bfloat16":
            raw = struct.pack("=f", value)[2:]  # upper half of a float32 (truncation)
        else:
            c = complex(value)
            raw = struct.pack("=ff" if dt == "complex64" else "=dd", c.real, c.imag)
        buf = ctypes.create_string_buffer(raw, 16)
        with self._ref as h:
            _check("gw_fill", _lib.gw_fill(h, buf))

    def copy_from(self, src):
        with self._ref as h, src._ref as sh:
            _check("gw_copy", _lib.gw_copy(h, sh))

    # ---- DLPack ----

    def dlpack_device(self):
        d = DLDevice()
        with self._ref as h:
            _check("gw_dlpack_device", _lib.gw_dlpack_device(h, ctypes.byref(d)))
        return (d.device_type, d.device_id)

    def __dlpack_device__(self):
        return self.dlpack_device()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this array's memory, never a copy.

        max_version >= (1, 0) gives a "dltensor_versioned" capsule, else a legacy "dltensor"
        one (which cannot carry READ_ONLY: read-only arrays raise BufferError).
        dl_device (a (type, id) pair) picks how pinned or managed memory is offered
        (kDLCUDA through its device address, kDLCPU through its host address).

        `stream` is the consumer's stream, checked against the exported device type as the
        array API defines it: None or -1 (no synchronization) always; on CUDA devices
        (kDLCUDA, kDLCUDAManaged, kDLCUDAHost) 1 (legacy default stream), 2 (per-thread
        default stream) or a stream handle > 2; on ROCm 0 (default stream) or a handle > 2;
        on kDLCPU only None or -1. A value that is not an int or None raises TypeError, an
        int that is not valid for the device BufferError. A valid stream needs no further
        action: this module's calls are synchronous, so no gpuwrap work on the memory is
        pending when this returns, and the consumer may use the memory on any stream.
        """
        if copy:
            raise BufferError("gpuwrap exports without copying (copy=True asked for a copy)")
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        out = ctypes.c_void_p()
        with self._ref as h:
            # The capsule's tensor holds its own reference on the array, taken inside this
            # use: a release() in another thread meanwhile cannot free it under the export.
            if dl_device is not None:
                want = _device_arg(*dl_device)
                _check_stream(stream, want.device_type)
                f = _lib.gw_to_dlpack_as if versioned else _lib.gw_to_dlpack_legacy_as
                s = f(h, want, ctypes.byref(out))
            else:
                d = DLDevice()
                _check("gw_dlpack_device", _lib.gw_dlpack_device(h, ctypes.byref(d)))
                _check_stream(stream, d.device_type)
                f = _lib.gw_to_dlpack if versioned else _lib.gw_to_dlpack_legacy
                s = f(h, ctypes.byref(out))
            if s in (-4, -8):  # GW_ENOTSUP, GW_EREADONLY: not shareable this way without a copy
                raise DLPackBufferError("__dlpack__", s)
            _check("__dlpack__", s)
        return _new_capsule(out.value, versioned)

    def offer(self, device_type, device_id=0):
        """An object whose DLPack protocol offers this array as `device_type` ("cpu", "cuda",
        "rocm", ... or a DLDeviceType value), e.g. torch.from_dlpack(a.offer("cuda")) for
        pinned memory. Checked now: raises BufferError if impossible without a copy."""
        return _Offer(self, _device_arg(device_type, device_id))


class _Offer:
    def __init__(self, array, device):
        self.array = array
        self.device = (device.device_type, device.device_id)
        self.array.__dlpack__(max_version=(1, 0), dl_device=self.device)  # raises if impossible

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.array.__dlpack__(stream=stream, max_version=max_version,
                                     dl_device=dl_device or self.device, copy=copy)


def _check_stream(stream, device_type):
    """Validate a consumer's `stream` for an export as `device_type` (see Array.__dlpack__)."""
    if stream is None:
        return
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(f"__dlpack__: stream must be an int or None, not {type(stream).__name__}")
    if stream == -1:  # the consumer opts out of any synchronization
        return
    if device_type in _CUDA_TYPES:
        if stream == 0 or stream < -1:  # 0 is ambiguous on CUDA (legacy or per-thread?)
            raise BufferError(f"__dlpack__: stream {stream} is not valid on CUDA: use 1 (legacy "
                              "default stream), 2 (per-thread default stream) or a stream handle")
    elif device_type in _ROCM_TYPES:
        if stream in (1, 2) or stream < -1:
            raise BufferError(f"__dlpack__: stream {stream} is not valid on ROCm: use 0 (default "
                              "stream) or a stream handle")
    else:
        raise BufferError(f"__dlpack__: stream {stream} given for device type {device_type}, "
                          "which has no streams: pass None")


_CUDA_TYPES = (kDLCUDA, kDLCUDAManaged, kDLCUDAHost)
_ROCM_TYPES = (kDLROCM, kDLROCMHost)
# The stream gpuwrap reads on, as a DLPack consumer: its calls are synchronous and ordered
# on the legacy default stream, which the array API numbers 1 on CUDA and 0 on ROCm.
_CONSUMER_STREAM = {t: 1 for t in _CUDA_TYPES}
_CONSUMER_STREAM.update({t: 0 for t in _ROCM_TYPES})
_HOST_TYPES = (kDLCUDAHost, kDLROCMHost)


def _is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


def _consumer_stream(obj):
    """(device type, the stream from_dlpack passes obj.__dlpack__): None for CPU tensors
    and for producers without __dlpack_device__."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None:
        return None, None
    device_type = int(dev()[0])  # an IntEnum in some producers
    return device_type, _CONSUMER_STREAM.get(device_type)


def _take_capsule(obj):
    """Ask a DLPack producer for a capsule, passing the stream gpuwrap will use."""
    device_type, stream = _consumer_stream(obj)
    if stream is not None and device_type in _HOST_TYPES:
        # Pinned host memory: producers disagree on whether it has streams (PyTorch exports
        # its pinned tensors as kDLCUDAHost but refuses any stream for them, with an
        # AssertionError); a producer that refuses a stream for host memory has no stream
        # work to order, so its capsule is then taken without one.
        try:
            return _call_dlpack(obj, stream)
        except (AssertionError, BufferError, ValueError, RuntimeError, NotImplementedError):
            return _call_dlpack(obj, None)
    return _call_dlpack(obj, stream)


def _call_dlpack(obj, stream):
    kw = {} if stream is None else {"stream": stream}
    try:
        return obj.__dlpack__(max_version=(1, 1), **kw)
    except TypeError:  # a producer older than DLPack 1.0 (no max_version; e.g. NumPy < 2.1)
        pass
    if kw:
        try:
            return obj.__dlpack__(**kw)  # the 2021 protocol: __dlpack__(*, stream=None)
        except TypeError:
            pass
    # No keywords at all (pre-protocol objects): such a producer orders nothing for us.
    return obj.__dlpack__()


# Consuming a capsule is a check-then-act on its name: two threads importing one capsule
# must not both take its tensor (its deleter would run twice).
_capsule_lock = threading.Lock()


def from_dlpack(obj, ctx=None):
    """Import any object with the DLPack protocol (or a DLPack capsule) as a gpuwrap Array,
    without copying. The producer's deleter runs when the last gpuwrap reference goes.

    An object is passed the stream gpuwrap reads on (the legacy default stream: stream=1
    for CUDA tensors, 0 for ROCm ones, None for CPU ones), so that the producer orders its
    pending work on the memory, on whichever of its streams, before gpuwrap's calls. A raw
    capsule carries no such promise: whoever made it chose its stream."""
    if ctx is None:
        ctx = _default_context()
    cap = obj if _is_capsule(obj) else _take_capsule(obj)
    with _capsule_lock:
        name = _api.PyCapsule_GetName(cap)
        if name == _VERSIONED:
            used, fn = _USED_VERSIONED, _lib.gw_from_dlpack
        elif name == _LEGACY:
            used, fn = _USED_LEGACY, _lib.gw_from_dlpack_legacy
        else:
            raise ValueError(f"not a DLPack capsule, or one already consumed: {name!r}")
        ptr = _api.PyCapsule_GetPointer(cap, name)
        # gpuwrap takes the tensor (even when the import fails): the capsule must not delete it.
        _api.PyCapsule_SetName(cap, used)
    h = ctypes.c_void_p()
    with ctx._use() as ch:
        _check("from_dlpack", fn(ch, ptr, ctypes.byref(h)))
    return Array(h.value)


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
