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
        _check("gw_dlpack_capsule_layout", lib.gw_dlpack_capsule_layout(_CAPSULE_PTR_OFF, _CAPSULE_NAME_OFF))
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


# ---- contexts and arrays ------------------------------------------------------------------------

class Context:
    """A (backend, device) pair: backend "auto", "cpu", "cuda" or "hip"."""

    def __init__(self, backend="auto", device=0):
        self._h = None  # close() runs even when creation fails
        lib = load_library()
        b = BACKENDS.index(backend) if isinstance(backend, str) else int(backend)
        h = ctypes.c_void_p()
        _check(f"gw_context_create({backend!r}, {device})", lib.gw_context_create(b, device, ctypes.byref(h)))
        self._h = h

    @property
    def handle(self):
        return self._h.value

    @property
    def backend(self):
        return BACKENDS[_lib.gw_context_backend(self._h)]

    @property
    def device(self):
        return _lib.gw_context_device(self._h)

    def synchronize(self):
        _check("gw_synchronize", _lib.gw_synchronize(self._h))

    def close(self):
        """Drop this reference; arrays made through the context keep it alive."""
        if self._h and _lib is not None:
            _lib.gw_context_destroy(self._h)
        self._h = None

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
        if deleter is None:
            s = _lib.gw_wrap(self._h, ptr, _dtype_index(dtype), n, cshape, cstrides, flags, ctypes.byref(h))
        else:
            key = next(_deleter_ids)
            _deleters[key] = deleter
            s = _lib.gw_wrap_with_deleter(self._h, ptr, _dtype_index(dtype), n, cshape, cstrides,
                                          flags, _run_python_deleter, key, ctypes.byref(h))
            if s != 0:
                _deleters.pop(key, None)  # not called on failure: the memory stays the caller's
        _check("gw_wrap", s)
        return Array(h.value)

    def alloc(self, kind, dtype, shape):
        """A C-contiguous array of `kind` memory ("host", "pinned", "device", "managed")."""
        shape = tuple(int(s) for s in shape)
        cshape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        h = ctypes.c_void_p()
        _check(f"gw_alloc({kind!r})", _lib.gw_alloc(self._h, KINDS.index(kind), _dtype_index(dtype),
                                                   len(shape), cshape, ctypes.byref(h)))
        return Array(h.value)

    def from_dlpack(self, obj):
        return from_dlpack(obj, self)


def _device_arg(device_type, device_id):
    if isinstance(device_type, str):
        device_type = _DEVICE_NAMES[device_type]
    return DLDevice(int(device_type), int(device_id))


class Array:
    """A gpuwrap array (one reference, dropped by release() or garbage collection)."""

    def __init__(self, handle):
        self._h = ctypes.c_void_p(handle)

    def release(self):
        if self._h and self._h.value and _lib is not None:
            _lib.gw_release(self._h)
        self._h = None

    __del__ = release

    def _handle(self):
        if not self._h:
            raise ValueError("array already released")
        return self._h

    @property
    def handle(self):
        return self._handle().value

    @property
    def data_ptr(self):
        """Device-usable address of element 0 (None if not device-accessible)."""
        return _lib.gw_data(self._handle())

    @property
    def host_ptr(self):
        """Host-usable address of element 0 (None if not host-accessible)."""
        return _lib.gw_host_data(self._handle())

    @property
    def kind(self):
        return KINDS[_lib.gw_kind(self._handle())]

    @property
    def device(self):
        return _lib.gw_device(self._handle())

    @property
    def dtype(self):
        return DTYPES[_lib.gw_array_dtype(self._handle())]

    @property
    def itemsize(self):
        return _lib.gw_dtype_size(_lib.gw_array_dtype(self._handle()))

    @property
    def ndim(self):
        return _lib.gw_ndim(self._handle())

    @property
    def shape(self):
        p = _lib.gw_shape(self._handle())
        return tuple(p[i] for i in range(self.ndim))

    @property
    def strides(self):
        """Strides in elements."""
        p = _lib.gw_strides(self._handle())
        return tuple(p[i] for i in range(self.ndim))

    @property
    def size(self):
        return _lib.gw_numel(self._handle())

    @property
    def readonly(self):
        return bool(_lib.gw_is_readonly(self._handle()))

    def __repr__(self):
        if not self._h:
            return "<gpuwrap.Array released>"
        return (f"<gpuwrap.Array {self.dtype}{list(self.shape)} {self.kind} device={self.device}"
                f"{' readonly' if self.readonly else ''} data=0x{(self.data_ptr or 0):x}>")

    def view(self, start, shape, step=None):
        n = self.ndim
        arr = lambda v: (ctypes.c_int64 * max(n, 1))(*[int(x) for x in v])
        h = ctypes.c_void_p()
        _check("gw_view", _lib.gw_view(self._handle(), arr(start), arr(shape),
                                       None if step is None else arr(step), ctypes.byref(h)))
        return Array(h.value)

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
        _check("gw_fill", _lib.gw_fill(self._handle(), buf))

    def copy_from(self, src):
        _check("gw_copy", _lib.gw_copy(self._handle(), src._handle()))

    # ---- DLPack ----

    def dlpack_device(self):
        d = DLDevice()
        _check("gw_dlpack_device", _lib.gw_dlpack_device(self._handle(), ctypes.byref(d)))
        return (d.device_type, d.device_id)

    def __dlpack_device__(self):
        return self.dlpack_device()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this array's memory, never a copy.

        max_version >= (1, 0) gives a "dltensor_versioned" capsule, else a legacy "dltensor"
        one (which cannot carry READ_ONLY: read-only arrays raise BufferError). dl_device
        (a (type, id) pair) picks how pinned or managed memory is offered (kDLCUDA through
        its device address, kDLCPU through its host address). `stream` needs no action:
        gpuwrap's synchronous calls have completed when they return.
        """
        if copy:
            raise BufferError("gpuwrap exports without copying (copy=True asked for a copy)")
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        out = ctypes.c_void_p()
        h = self._handle()
        if dl_device is not None:
            want = _device_arg(*dl_device)
            f = _lib.gw_to_dlpack_as if versioned else _lib.gw_to_dlpack_legacy_as
            s = f(h, want, ctypes.byref(out))
        else:
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


def _is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


def from_dlpack(obj, ctx=None):
    """Import any object with the DLPack protocol (or a DLPack capsule) as a gpuwrap Array,
    without copying. The producer's deleter runs when the last gpuwrap reference goes."""
    if ctx is None:
        ctx = _default_context()
    if _is_capsule(obj):
        cap = obj
    else:
        try:
            cap = obj.__dlpack__(max_version=(1, 1))
        except TypeError:  # a producer older than DLPack 1.0 (e.g. NumPy < 2.1)
            cap = obj.__dlpack__()
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
    _check("from_dlpack", fn(ctx._h, ptr, ctypes.byref(h)))
    return Array(h.value)


_default = None


def _default_context():
    global _default
    if _default is None:
        _default = Context("auto")
    return _default
