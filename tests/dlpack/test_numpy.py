"""gpuwrap <-> NumPy through DLPack (python/gpuwrap.py, CPU backend): same memory both ways,
values, and the producers' deleters run exactly once. Exit 77 (skipped) without numpy.

Run: GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python /usr/bin/python3 tests/dlpack/test_numpy.py
"""
import ctypes
import gc
import os
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: no numpy")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpuwrap  # noqa: E402

NP_VERSION = tuple(int(x) for x in np.__version__.split(".")[:2])
NP_VERSIONED = NP_VERSION >= (2, 1)  # numpy asks for versioned capsules, flags readonly
NP_2 = NP_VERSION >= (2, 0)  # numpy 1.x: imports are read-only arrays, no bool, no re-export
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def run(fn):
    try:
        fn()
        print("ok  ", fn.__name__)
    except Exception as e:  # report and go on: one line per test
        import traceback
        traceback.print_exc()
        failures.append(f"{fn.__name__}: {type(e).__name__}: {e}")
        print("FAIL", fn.__name__)


ctx = gpuwrap.Context("cpu")


class Counter:
    def __init__(self):
        self.calls = 0
        self.ptr = None

    def __call__(self, ptr):
        self.calls += 1
        self.ptr = ptr


def wrapped_buffer(n, ctype=ctypes.c_float, dtype="float32", **kw):
    buf = (ctype * n)(*range(n))
    counter = Counter()
    a = ctx.wrap(ctypes.addressof(buf), dtype, (n,), deleter=counter, **kw)
    return buf, a, counter


def test_gpuwrap_to_numpy():
    buf, a, counter = wrapped_buffer(12)
    a2 = a.view((0,), (12,))
    n = np.from_dlpack(a2).reshape(3, 4)
    check(n.ctypes.data == ctypes.addressof(buf), "numpy sees the same address (no copy)")
    check(n.dtype == np.float32, f"dtype float32, got {n.dtype}")
    check(n[2, 3] == 11.0 and n[0, 1] == 1.0, "values")
    if n.flags.writeable:  # numpy 1.x makes imported arrays read-only
        n[1, 1] = 42.0  # numpy writes, the C buffer sees it
        check(buf[5] == 42.0, "a numpy write lands in the wrapped buffer")
    a.fill(3.5)  # gpuwrap writes, numpy sees it
    check(bool((n == 3.5).all()), "a gpuwrap fill is seen by numpy")
    a.release()
    a2.release()
    gc.collect()
    check(counter.calls == 0, "numpy's view keeps the memory alive after gpuwrap's handles go")
    del n
    gc.collect()
    check(counter.calls == 1, f"deleter ran exactly once after numpy let go (calls={counter.calls})")
    check(counter.ptr == ctypes.addressof(buf), "deleter got the wrapped pointer")


def test_release_orders():
    # array, numpy view, unconsumed capsule: every order, exactly one deleter call, last.
    import itertools
    for order in itertools.permutations(range(3)):
        buf, a, counter = wrapped_buffer(8)
        objs = [a, np.from_dlpack(a), a.__dlpack__(max_version=(1, 0))]
        for i in order:
            check(counter.calls == 0, f"order {order}: deleter ran early")
            if i == 0:
                objs[0].release()
            objs[i] = None
            gc.collect()
        check(counter.calls == 1, f"order {order}: deleter calls {counter.calls}")
        del a


def test_strided_and_zero_size():
    buf, a, counter = wrapped_buffer(20, ctypes.c_double, "float64")
    v = a.view((19,), (5,), (-3,))  # 19, 16, 13, 10, 7
    n = np.from_dlpack(v)
    check(list(n) == [19.0, 16.0, 13.0, 10.0, 7.0], f"negative strides: {list(n)}")
    check(n.strides == (-24,), f"numpy strides in bytes: {n.strides}")
    z = ctx.wrap(0, "int32", (0, 4))
    nz = np.from_dlpack(z)
    check(nz.shape == (0, 4) and nz.dtype == np.int32, f"zero-size: {nz.shape} {nz.dtype}")
    del n, nz, v, z
    a.release()
    gc.collect()
    check(counter.calls == 1, "deleter once")


def test_dtypes():
    for name in (["bool"] if NP_2 else []) + ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64", "complex64", "complex128"]:
        x = np.zeros(4, dtype=name)
        g = gpuwrap.from_dlpack(x, ctx)
        check(g.dtype == name, f"numpy {name} -> gpuwrap {g.dtype}")
        back = np.from_dlpack(g)
        check(back.dtype == np.dtype(name), f"gpuwrap {name} -> numpy {back.dtype}")
        check(back.ctypes.data == x.ctypes.data, f"{name}: same address")


def test_numpy_to_gpuwrap():
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    refs = sys.getrefcount(x)
    g = gpuwrap.from_dlpack(x, ctx)
    check(g.host_ptr == x.ctypes.data, "gpuwrap sees numpy's address (no copy)")
    check(g.shape == (3, 4) and g.strides == (4, 1), f"shape {g.shape} strides {g.strides}")
    check(g.kind in ("host", "pinned"), f"kind {g.kind}")
    check(sys.getrefcount(x) == refs + 1, "the DLPack tensor holds numpy's array")
    g.fill(7.0)
    check(bool((x == 7.0).all()), "a gpuwrap fill is seen by numpy")
    v = g.view((0, 1), (3, 2), (1, 2))
    g.release()
    check(sys.getrefcount(x) == refs + 1, "a view keeps numpy's array")
    v.release()
    gc.collect()
    check(sys.getrefcount(x) == refs, "numpy's deleter ran exactly once (refcount back)")

    # a strided numpy view
    y = x[:, ::2]
    g = gpuwrap.from_dlpack(y, ctx)
    check(g.strides == (4, 2) and g.shape == (3, 2), f"strided: {g.shape} {g.strides}")
    g.release()


def test_round_trip():
    buf, a, counter = wrapped_buffer(6)
    if NP_2:  # numpy 1.x refuses to re-export the read-only arrays it imports
        b = gpuwrap.from_dlpack(np.from_dlpack(a), ctx)
    else:
        b = gpuwrap.from_dlpack(a, ctx)
    check(b.host_ptr == ctypes.addressof(buf), "gpuwrap -> numpy -> gpuwrap: same address")
    c = gpuwrap.from_dlpack(a.__dlpack__(max_version=(1, 0)), ctx)  # a versioned capsule
    check(c.host_ptr == ctypes.addressof(buf), "versioned capsule: same address")
    d = gpuwrap.from_dlpack(a.__dlpack__(), ctx)  # a legacy capsule
    check(d.host_ptr == ctypes.addressof(buf), "legacy capsule: same address")
    for x in (a, b, c, d):
        x.release()
    gc.collect()
    check(counter.calls == 1, f"deleter once (calls={counter.calls})")


def test_readonly():
    buf, a, counter = wrapped_buffer(4, readonly=True)
    try:
        a.__dlpack__()
        check(False, "legacy export of a read-only array must raise BufferError")
    except BufferError:
        pass
    cap = a.__dlpack__(max_version=(1, 0))
    g = gpuwrap.from_dlpack(cap, ctx)
    check(g.readonly, "READ_ONLY survives a versioned round trip")
    try:
        g.fill(1.0)
        check(False, "fill of a read-only import must fail")
    except gpuwrap.GpuwrapError as e:
        check(e.name == "GW_EREADONLY", e.name)
    if NP_VERSIONED:
        n = np.from_dlpack(a)
        check(not n.flags.writeable, "numpy >= 2.1 gets a read-only array")
        del n
    else:
        try:
            np.from_dlpack(a)
            check(False, "numpy < 2.1 (legacy only) must be refused a read-only array")
        except BufferError:
            pass
    g.release()
    a.release()
    del cap
    gc.collect()
    check(counter.calls == 1, f"deleter once (calls={counter.calls})")


def test_capsule_rules():
    buf, a, counter = wrapped_buffer(4)
    cap = a.__dlpack__(max_version=(1, 0))
    g = gpuwrap.from_dlpack(cap, ctx)
    try:
        gpuwrap.from_dlpack(cap, ctx)
        check(False, "a consumed capsule must not be imported again")
    except ValueError:
        pass
    try:
        a.__dlpack__(copy=True)
        check(False, "copy=True must raise BufferError")
    except BufferError:
        pass
    try:
        a.offer("cuda")
        check(False, "CPU-backend memory cannot be offered as kDLCUDA")
    except BufferError:
        pass
    check(a.__dlpack_device__() == (gpuwrap.kDLCPU, 0), f"device {a.__dlpack_device__()}")
    o = a.offer("cpu")
    n = np.from_dlpack(o)
    check(n.ctypes.data == ctypes.addressof(buf), "offer('cpu'): same address")
    del n, o, cap
    g.release()
    a.release()
    gc.collect()
    check(counter.calls == 1, f"deleter once (calls={counter.calls})")


def test_capsule_dropped_while_error_pending():
    # An unconsumed capsule freed by C code while an exception is set (here: the partial
    # tuple that tuple() drops when the generator raises) releases its tensor and leaves
    # the exception alone.
    buf, a, counter = wrapped_buffer(4)

    def gen():
        yield a.__dlpack__(max_version=(1, 0))
        yield a.__dlpack__()
        raise KeyError("pending")
    for _ in range(3):
        try:
            tuple(gen())
            check(False, "tuple() must raise")
        except KeyError:
            pass
    a.release()
    gc.collect()
    check(counter.calls == 1, f"deleter once after capsules dropped mid-error (calls={counter.calls})")


# A hand-made producer: import errors still run its deleter exactly once.
deleted = []
V_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(gpuwrap.DLManagedTensorVersioned))


@V_DELETER
def v_deleter(p):
    deleted.append(1)


def test_import_refusals():
    data = (ctypes.c_float * 4)()
    shape = (ctypes.c_int64 * 1)(4)
    strides = (ctypes.c_int64 * 1)(1)
    for devtype, major, want in [(gpuwrap.kDLCUDA, 1, "GW_EDEVICE"), (gpuwrap.kDLCPU, 2, "GW_ENOTSUP")]:
        t = gpuwrap.DLTensor(ctypes.addressof(data), gpuwrap.DLDevice(devtype, 0), 1,
                             gpuwrap.DLDataType(2, 32, 1), shape, strides, 0)
        m = gpuwrap.DLManagedTensorVersioned(gpuwrap.DLPackVersion(major, 0), None, v_deleter, 0, t)
        cap = gpuwrap._api.PyCapsule_New(ctypes.addressof(m), b"dltensor_versioned",
                                         ctypes.cast(None, gpuwrap._CAPSULE_DESTRUCTOR))
        before = len(deleted)
        try:
            gpuwrap.from_dlpack(cap, ctx)
            check(False, f"device {devtype} major {major} must be refused")
        except gpuwrap.GpuwrapError as e:
            check(e.name == want, f"{e.name} != {want}: {e}")
        check(len(deleted) == before + 1, "refused tensor's deleter ran exactly once")


ABSENT = "absent"  # what a fake producer records when no stream keyword was passed


class FakeProducer:
    """A DLPack producer on `devtype` that records the stream from_dlpack passes and hands
    out a numpy capsule (CPU memory, whatever device it claims: the CPU backend imports the
    capsule as what it is). `signature` picks the protocol generation it implements;
    `refuse_stream` makes it reject any stream that is not None (as PyTorch does for its
    pinned tensors, which it exports as kDLCUDAHost); `require` makes it raise unless
    given that stream."""

    def __init__(self, devtype, signature="2023", refuse_stream=None, require=ABSENT):
        self.devtype, self.signature = devtype, signature
        self.refuse_stream, self.require = refuse_stream, require
        self.x = np.arange(6.0)
        self.streams = []

    def __dlpack_device__(self):
        return (self.devtype, 0)

    def __dlpack__(self, **kw):
        allowed = {"2023": {"stream", "max_version", "dl_device", "copy"},
                   "2021": {"stream"}, "none": set()}[self.signature]
        if set(kw) - allowed:
            raise TypeError(f"__dlpack__() got an unexpected keyword argument {sorted(set(kw) - allowed)}")
        stream = kw.get("stream", ABSENT)
        self.streams.append(stream)
        if self.refuse_stream and stream not in (ABSENT, None):
            raise self.refuse_stream("stream should be None on cpu.")
        if self.require is not ABSENT and stream != self.require:
            raise BufferError(f"this producer needs stream {self.require}, got {stream}")
        return self.x.__dlpack__()  # numpy's legacy capsule (works on every numpy version)


def test_from_dlpack_passes_stream():
    # The array API: a consumer passes the stream it will use. gpuwrap reads on the legacy
    # default stream: 1 on CUDA, 0 on ROCm, None (or nothing) for CPU tensors.
    for devtype, want in [(gpuwrap.kDLCUDA, 1), (gpuwrap.kDLCUDAManaged, 1), (gpuwrap.kDLCUDAHost, 1),
                          (gpuwrap.kDLROCM, 0), (gpuwrap.kDLCPU, None)]:
        p = FakeProducer(devtype, require=want if want is not None else ABSENT)
        g = gpuwrap.from_dlpack(p, ctx)
        got = p.streams[-1]
        if want is None:
            check(got in (None, ABSENT), f"device {devtype}: stream {got!r}, want None")
        else:
            check(got == want and type(got) is int, f"device {devtype}: stream {got!r}, want {want}")
        check(g.host_ptr == p.x.ctypes.data, f"device {devtype}: imported the producer's memory")
        g.release()

    # Older producers: __dlpack__(stream=None) only (2021), no keywords at all.
    p = FakeProducer(gpuwrap.kDLCUDA, signature="2021")
    gpuwrap.from_dlpack(p, ctx).release()
    check(p.streams == [1], f"2021 signature: retried with the stream only, got {p.streams}")
    p = FakeProducer(gpuwrap.kDLCUDA, signature="none")
    gpuwrap.from_dlpack(p, ctx).release()
    check(p.streams == [ABSENT], f"keyword-less producer: called bare, got {p.streams}")
    p = FakeProducer(gpuwrap.kDLCPU, signature="2021")
    gpuwrap.from_dlpack(p, ctx).release()
    check(p.streams == [ABSENT], f"2021 signature on CPU: no stream, got {p.streams}")

    # Pinned host memory whose producer refuses streams (PyTorch): taken without one.
    p = FakeProducer(gpuwrap.kDLCUDAHost, refuse_stream=AssertionError)
    gpuwrap.from_dlpack(p, ctx).release()
    check(p.streams == [1, ABSENT], f"kDLCUDAHost refusing a stream: retried, got {p.streams}")
    # ... but a device tensor's refusal is the producer's answer, not swallowed.
    p = FakeProducer(gpuwrap.kDLCUDA, refuse_stream=BufferError)
    try:
        gpuwrap.from_dlpack(p, ctx)
        check(False, "kDLCUDA producer refusing stream 1 must raise")
    except BufferError:
        pass


def test_dlpack_stream_argument():
    # gpuwrap as a producer validates the consumer's stream (and needs to do nothing with
    # a valid one: its calls are synchronous).
    buf, a, counter = wrapped_buffer(4)
    for stream in (None, -1):
        gpuwrap.from_dlpack(a.__dlpack__(stream=stream), ctx).release()
    for stream, exc in [("1", TypeError), (1.0, TypeError), (True, TypeError), (object(), TypeError),
                        (1, BufferError), (0, BufferError)]:
        try:
            a.__dlpack__(stream=stream)
            check(False, f"stream {stream!r} on kDLCPU must raise {exc.__name__}")
        except exc as e:
            check("stream" in str(e), f"the message names the stream: {e}")
    # The device rules, as the array API gives them.
    C, R = gpuwrap.kDLCUDA, gpuwrap.kDLROCM
    for dev, stream in [(C, None), (C, -1), (C, 1), (C, 2), (C, 0x7F00DEAD0000), (gpuwrap.kDLCUDAHost, 1),
                        (gpuwrap.kDLCUDAManaged, 2), (R, 0), (R, -1), (R, 0x7F00DEAD0000)]:
        gpuwrap._check_stream(stream, dev)
    for dev, stream in [(C, 0), (C, -2), (R, 1), (R, 2)]:
        try:
            gpuwrap._check_stream(stream, dev)
            check(False, f"stream {stream} on device type {dev} must raise BufferError")
        except BufferError:
            pass
    a.release()
    gc.collect()
    check(counter.calls == 1, f"deleter once (calls={counter.calls})")


def test_use_after_release():
    buf, a, counter = wrapped_buffer(4)
    a.release()
    a.release()  # a no-op
    for what, use in [("shape", lambda: a.shape), ("fill", lambda: a.fill(1.0)),
                      ("__dlpack__", lambda: a.__dlpack__()), ("view", lambda: a.view((0,), (1,)))]:
        try:
            use()
            check(False, f"{what} of a released array must raise")
        except ValueError as e:
            check("array released" in str(e), f"{what}: message {e}")
    check(repr(a) == "<gpuwrap.Array released>", repr(a))
    c = gpuwrap.Context("cpu")
    c.close()
    try:
        c.alloc("host", "float32", (1,))
        check(False, "alloc through a closed context must raise")
    except ValueError as e:
        check("context closed" in str(e), f"closed context: {e}")
    c.close()
    check(counter.calls == 1, f"deleter once (calls={counter.calls})")


for f in [test_gpuwrap_to_numpy, test_release_orders, test_strided_and_zero_size, test_dtypes,
          test_numpy_to_gpuwrap, test_round_trip, test_readonly, test_capsule_rules,
          test_capsule_dropped_while_error_pending, test_import_refusals,
          test_from_dlpack_passes_stream, test_dlpack_stream_argument, test_use_after_release]:
    run(f)

print(f"numpy {np.__version__}: {'FAILED: ' + str(len(failures)) if failures else 'all passed'}")
sys.exit(1 if failures else 0)
