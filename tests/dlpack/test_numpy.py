"""gpuwrap <-> NumPy through DLPack (the python/gpuwrap package, CPU backend): same memory both ways,
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

# The CPU model runs stream work on worker threads; each copy or fill queued on a stream
# sleeps this long before it runs, so "read before the stream has run it" is deterministic
# in the stream tests below. Set before the library loads (it reads it at first use);
# synchronous calls are not delayed.
STREAM_DELAY_US = 50000
os.environ.setdefault("GPUWRAP_CPU_STREAM_DELAY_US", str(STREAM_DELAY_US))

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


capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def test_import_refusals():
    data = (ctypes.c_float * 4)()
    shape = (ctypes.c_int64 * 1)(4)
    strides = (ctypes.c_int64 * 1)(1)
    for devtype, major, want in [(gpuwrap.kDLCUDA, 1, "GW_EDEVICE"), (gpuwrap.kDLCPU, 2, "GW_ENOTSUP")]:
        t = gpuwrap.DLTensor(ctypes.addressof(data), gpuwrap.DLDevice(devtype, 0), 1,
                             gpuwrap.DLDataType(2, 32, 1), shape, strides, 0)
        m = gpuwrap.DLManagedTensorVersioned(gpuwrap.DLPackVersion(major, 0), None, v_deleter, 0, t)
        cap = capsule_new(ctypes.addressof(m), b"dltensor_versioned", None)
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
    # gpuwrap as a producer validates the consumer's stream (what it then does with a valid
    # one, a wait for pending stream work: test_dlpack_export_waits_for_pending_work).
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


# ---- streams (issue 14) ------------------------------------------------------------------
# Fresh random data each run (the seed is printed so a failure can be replayed), and every
# element is checked: a stream that ran half its work, or ran it twice, shows up.
SEED = int(os.environ.get("GW_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
print(f"stream tests: seed {SEED} (GW_TEST_SEED={SEED} replays), "
      f"GPUWRAP_CPU_STREAM_DELAY_US={os.environ['GPUWRAP_CPU_STREAM_DELAY_US']}")
rng = np.random.default_rng(SEED)
NS = 4096
lib = gpuwrap.load_library()
lib.gw_cpu_stream_create_external.restype = ctypes.c_int
lib.gw_cpu_stream_create_external.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
lib.gw_cpu_stream_destroy_external.restype = ctypes.c_int
lib.gw_cpu_stream_destroy_external.argtypes = [ctypes.c_void_p]
lib.gw_cpu_runtime_alloc.restype = ctypes.c_int
lib.gw_cpu_runtime_alloc.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
lib.gw_cpu_runtime_free.restype = ctypes.c_int
lib.gw_cpu_runtime_free.argtypes = [ctypes.c_void_p]


def external_stream(nonblocking=True):
    """A stream made outside gpuwrap (the model's cudaStreamCreateWithFlags), as PyTorch
    or CuPy make their side streams (non-blocking: ordered with nothing but itself)."""
    h = ctypes.c_void_p()
    s = lib.gw_cpu_stream_create_external(0, int(nonblocking), ctypes.byref(h))
    if s != 0:
        raise gpuwrap.GpuwrapError("gw_cpu_stream_create_external", s)
    return h.value


def destroy_external(h):
    s = lib.gw_cpu_stream_destroy_external(h)
    check(s == 0, f"gw_cpu_stream_destroy_external: status {s} (destroyed by gpuwrap?)")


def random_host(n=NS):
    """Random float64 numpy data and a gpuwrap array over it (registered: pinned, so that
    stream work on it is asynchronous; pageable memory would complete on return)."""
    x = rng.random(n)
    g = gpuwrap.from_dlpack(x, ctx)
    return x, g


def pending(a):
    return int(a.pending())


def test_stream_fill_copy_async():
    s = ctx.stream()
    check(s.ctx is ctx and not s.borrowed and not s.closed, "a Context.stream() stream")
    check(s.handle not in (0, 1, 2), f"the model's native handle is opaque, > 2: {s.handle:#x}")
    x, g = random_host()
    check(g.kind == "pinned", f"numpy's memory was registered: kind {g.kind}")
    old, v = x.copy(), float(rng.random())
    g.fill(v, stream=s)
    # The fill is queued: the host still sees every old value until the stream has run it.
    check(np.array_equal(x, old), "fill(stream=) returned before it ran: old data on the host")
    check(pending(g) == 1, "the array has pending work")
    s.synchronize()
    check(bool((x == v).all()), "after synchronize every element is the filled value")
    check(pending(g) == 0, "nothing pending after synchronize")

    xs, gs = random_host()
    xd, gd = random_host()
    old_d = xd.copy()
    gd.copy_from(gs, stream=s)
    check(np.array_equal(xd, old_d), "copy_from(stream=) returned before it ran: old data")
    s.synchronize()
    check(np.array_equal(xd, xs), "after synchronize every element is copied")

    # Two streams with a dependency, stated through the DLPack protocol: t waits for s
    # (gpuwrap's streams are blocking, ordered with the legacy stream, not with each other).
    # The same gw_array_wait line as in test_dlpack_export_waits_for_pending_work, removed,
    # makes this fail: three fills queued in front keep s busy past t's copy.
    t = ctx.stream()
    scratch = ctx.alloc("pinned", "float64", (NS,))
    xa, ga = random_host()
    xb, gb = random_host()
    v = float(rng.random())
    for _ in range(3):
        scratch.fill(0.0, stream=s)
    ga.fill(v, stream=s)
    ga.__dlpack__(stream=t.handle)  # t waits (on the device) for s's fill of ga
    gb.copy_from(ga, stream=t)
    t.synchronize()
    bad = int((xb != v).sum())
    check(bad == 0, f"the second stream's copy saw the first stream's fill ({bad} of {NS} stale)")
    for a in (g, gs, gd, ga, gb, scratch):
        a.release()
    with ctx.stream() as u:
        u.synchronize()
    check(u.closed, "a stream used as a context manager is closed after it")
    s.close()
    s.close()  # a no-op
    t.close()


def test_external_stream():
    native = external_stream(nonblocking=True)
    e = gpuwrap.ExternalStream(native, ctx)
    check(e.borrowed and e.handle == native and e.ctx is ctx, f"borrowed: handle {e.handle:#x}")
    x, g = random_host()
    old, v = x.copy(), float(rng.random())
    g.fill(v, stream=e)
    check(np.array_equal(x, old), "fill on a borrowed stream is queued: old data")
    e.synchronize()
    check(bool((x == v).all()), "after the borrowed stream's synchronize: every element")
    e.close()
    # Closing the borrowed handle left the native stream alone: it takes work again.
    e2 = gpuwrap.ExternalStream(native, ctx)
    v = float(rng.random())
    g.fill(v, stream=e2)
    e2.synchronize()
    check(bool((x == v).all()), "the native stream still runs work after a borrow was closed")
    e2.close()
    destroy_external(native)  # would be GW_EINVAL had gpuwrap destroyed it

    # A gpuwrap stream's own handle, borrowed: the same queue as the stream.
    s = ctx.stream()
    for how, src in [("handle", s.handle), ("Stream", s),
                     ("__cuda_stream__", type("S", (), {"__cuda_stream__": lambda self: (0, s.handle)})())]:
        b = gpuwrap.ExternalStream(src, ctx)
        check(b.handle == s.handle, f"ExternalStream({how}) borrows the same native stream")
        old, v = x.copy(), float(rng.random())
        g.fill(v, stream=b)
        check(np.array_equal(x, old), f"ExternalStream({how}): queued")
        s.synchronize()  # the owner's synchronize waits for work queued through the borrow
        check(bool((x == v).all()), f"ExternalStream({how}): the owner's stream ran it")
        b.close()
    g.fill(1.0, stream=s)  # the owner is unharmed by the borrows' close
    s.synchronize()
    check(bool((x == 1.0).all()), "the gpuwrap stream works after its borrows were closed")
    s.close()

    # 0 / None: the legacy default stream, which synchronous calls are ordered after.
    for src in (0, None):
        b = gpuwrap.ExternalStream(src, ctx)
        check(b.handle == 0, f"ExternalStream({src!r}) is the legacy default stream (handle 0)")
        v = float(rng.random())
        g.fill(v, stream=b)
        y, gy = random_host()
        gy.copy_from(g)  # synchronous: ordered after the legacy stream's fill
        check(bool((y == v).all()), f"ExternalStream({src!r}): a synchronous copy ran after it")
        gy.release()
        b.close()
    g.release()


def test_dlpack_export_waits_for_pending_work():
    # gpuwrap's fill is pending on a gpuwrap stream s; a consumer (a "side stream" of another
    # library, non-blocking) asks for the array with __dlpack__(stream=its handle) and then
    # reads it on that stream. Remove the gw_array_wait call of consumer_wait in
    # python/gpuwrap/_gpuwrap.c and this fails: the consumer's copy runs STREAM_DELAY_US
    # after it was queued, the fill (behind three others on s) 4x that, so dst gets the old
    # values.
    s = ctx.stream()
    native = external_stream(nonblocking=True)
    consumer = gpuwrap.ExternalStream(native, ctx)
    scratch = ctx.alloc("pinned", "float64", (NS,))
    x, g = random_host()
    xd, gd = random_host()
    old_d = xd.copy()
    v = float(rng.random())
    for _ in range(3):  # a long queue in front of the write (as torch.cuda._sleep on a GPU)
        scratch.fill(0.0, stream=s)
    g.fill(v, stream=s)
    cap = g.__dlpack__(max_version=(1, 0), stream=native)
    imported = gpuwrap.from_dlpack(cap, ctx)  # what the consumer got: the same memory
    check(imported.host_ptr == g.host_ptr, "the capsule is over the array's memory")
    check(np.array_equal(xd, old_d), "nothing ran on the host's account: no host wait")
    gd.copy_from(imported, stream=consumer)
    consumer.synchronize()
    bad = int((xd != v).sum())
    check(bad == 0, f"the consumer stream waited for the pending fill ({bad} of {NS} elements stale)")

    # stream=None on a kDLCPU export: the consumer is the host (NumPy), so the export
    # waits for the pending work on the host before NumPy can read.
    v = float(rng.random())
    for _ in range(3):
        scratch.fill(0.0, stream=s)
    g.fill(v, stream=s)
    n = np.from_dlpack(g)
    check(bool((n == v).all()), "np.from_dlpack after an async fill reads every filled element")
    del n
    # -1: the consumer opts out, nothing is waited for.
    old, v = x.copy(), float(rng.random())
    g.fill(v, stream=s)
    gpuwrap.from_dlpack(g.__dlpack__(stream=-1), ctx).release()
    check(np.array_equal(x, old), "stream=-1 waits for nothing")
    s.synchronize()
    check(bool((x == v).all()), "the fill ran")
    for a in (imported, g, gd, scratch):
        a.release()
    consumer.close()
    s.close()
    destroy_external(native)


class CAIOnly:
    """A producer with only the CUDA Array Interface (as Numba's device arrays and older
    CuPy): no __dlpack__."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def test_cuda_array_interface_import():
    import weakref
    nbytes = NS * 8
    p = ctypes.c_void_p()
    check(lib.gw_cpu_runtime_alloc(gpuwrap.KINDS.index("device"), 0, nbytes, ctypes.byref(p)) == 0,
          "model device memory")
    ptr = p.value
    old = rng.random(NS)
    ctypes.memmove(ptr, old.ctypes.data, nbytes)  # the model's device memory is host memory
    dev = ctx.wrap(ptr, "float64", (NS,))
    check(dev.kind == "device", f"kind {dev.kind}")

    # The producer's work is pending on its own non-blocking stream, named in `stream`:
    # the import must wait for it. Remove the gw_stream_synchronize line in
    # gpuwrap._from_cuda_array_interface and the read below (a synchronous copy, legacy
    # stream, not ordered with a non-blocking stream) sees the old values. (It is
    # _c.sync_native's gw_stream_synchronize now.)
    native = external_stream(nonblocking=True)
    e = gpuwrap.ExternalStream(native, ctx)
    v = float(rng.random())
    dev.fill(v, stream=e)
    prod = CAIOnly({"shape": (NS,), "typestr": "<f8", "data": (ptr, False), "version": 3,
                    "strides": None, "stream": native})
    alive = weakref.ref(prod)
    imp = gpuwrap.from_dlpack(prod, ctx)
    check(imp.data_ptr == ptr and imp.kind == "device" and imp.shape == (NS,) and not imp.readonly,
          f"CAI import: same memory, kind {imp.kind}, shape {imp.shape}")
    y, gy = random_host()
    gy.copy_from(imp)
    bad = int((y != v).sum())
    check(bad == 0, f"the import waited for the producer's stream ({bad} of {NS} elements stale)")
    del prod
    gc.collect()
    check(alive() is not None, "the producer is kept alive while gpuwrap holds its memory")
    imp.release()
    gc.collect()
    check(alive() is None, "the producer is let go with the last gpuwrap reference")

    # Strides in bytes, read-only, legacy stream (1) and no stream (None, v2 without one).
    for extra in ({"stream": 1}, {"stream": None}, {"version": 2}):
        cai = {"shape": (NS // 2,), "typestr": "<f8", "data": (ptr + 8, True), "version": 3,
               "strides": (16,)}
        cai.update(extra)
        imp = gpuwrap.from_dlpack(CAIOnly(cai), ctx)
        check(imp.strides == (2,) and imp.readonly and imp.data_ptr == ptr + 8,
              f"{extra}: strides {imp.strides} (elements), readonly {imp.readonly}")
        z, gz = random_host(NS // 2)
        gz.copy_from(imp)
        check(np.array_equal(z, np.full(NS // 2, v)), f"{extra}: every odd element read")
        try:
            imp.fill(0.0)
            check(False, "a read-only CAI import must refuse a fill")
        except gpuwrap.GpuwrapError as ex:
            check(ex.name == "GW_EREADONLY", ex.name)
        imp.release()
        gz.release()
    for bad_cai, exc in [({"stream": 0}, ValueError), ({"typestr": ">f8"}, ValueError),
                         ({"typestr": "<f3"}, ValueError), ({"strides": (12,)}, ValueError),
                         ({"mask": object()}, ValueError), ({"stream": "1"}, TypeError),
                         ({"stream": 0x7F00DEAD0000}, gpuwrap.GpuwrapError)]:
        cai = {"shape": (NS,), "typestr": "<f8", "data": (ptr, False), "version": 3}
        cai.update(bad_cai)
        try:
            gpuwrap.from_dlpack(CAIOnly(cai), ctx)
            check(False, f"CAI {bad_cai} must raise {exc.__name__}")
        except exc:
            pass
    e.close()
    destroy_external(native)
    dev.release()
    gy.release()
    check(lib.gw_cpu_runtime_free(ptr) == 0, "model device memory freed")


def test_stream_errors():
    x, g = random_host()
    s = ctx.stream()
    for bad in (123, "s", object(), s.handle):
        for what, call in [("fill", lambda: g.fill(1.0, stream=bad)),
                           ("copy_from", lambda: g.copy_from(g, stream=bad))]:
            try:
                call()
                check(False, f"{what}(stream={bad!r}) must raise TypeError (a gpuwrap.Stream or None)")
            except TypeError as e:
                check("gpuwrap.Stream" in str(e), f"{what}: message {e}")
    try:
        g.copy_from(x)
        check(False, "copy_from(a numpy array) must raise TypeError")
    except TypeError:
        pass
    for bad, exc in [(-5, ValueError), (1 << 64, ValueError), (True, TypeError), (object(), TypeError),
                     ("0x1", TypeError)]:
        try:
            gpuwrap.ExternalStream(bad, ctx)
            check(False, f"ExternalStream({bad!r}) must raise {exc.__name__}")
        except exc as e:
            check("stream" in str(e), f"ExternalStream({bad!r}): message {e}")
    try:  # not a live stream of the cpu backend: the model's gw_stream_wrap says so
        gpuwrap.ExternalStream(0x7F00DEAD0000, ctx)
        check(False, "ExternalStream(garbage) must fail")
    except gpuwrap.GpuwrapError as e:
        check(e.name == "GW_EINVAL", f"garbage handle: {e.name}")
    for stream in (0x7F00DEAD0000, 0, 1, 2, -2):  # kDLCPU: only None, -1 or a model handle
        try:
            g.__dlpack__(stream=stream)
            check(False, f"__dlpack__(stream={stream:#x}) must raise BufferError")
        except BufferError as e:
            check("stream" in str(e), f"__dlpack__(stream={stream:#x}): message {e}")
    try:
        g.__dlpack__(stream=0x7F00DEAD0000)
    except gpuwrap.GpuwrapError as e:  # the garbage handle's BufferError carries the status
        check(e.name == "GW_EINVAL", f"garbage consumer stream: {e.name}")
    try:
        gpuwrap.from_dlpack(x, ctx, stream="s")
        check(False, "from_dlpack(stream='s') must raise TypeError")
    except TypeError:
        pass
    check(not hasattr(g, "__cuda_array_interface__"), "no CUDA Array Interface on the CPU backend")
    check(not hasattr(s, "__cuda_stream__"), "no __cuda_stream__ on a CPU-backend stream")
    s.close()
    for what, use in [("handle", lambda: s.handle), ("synchronize", s.synchronize),
                      ("fill", lambda: g.fill(1.0, stream=s)), ("ExternalStream", lambda: gpuwrap.ExternalStream(s, ctx))]:
        try:
            use()
            check(False, f"{what} of a closed stream must raise ValueError")
        except ValueError as e:
            check("stream closed" in str(e), f"{what}: message {e}")
    c = gpuwrap.Context("cpu")
    c.close()
    try:
        c.stream()
        check(False, "stream() of a closed context must raise")
    except ValueError:
        pass
    g.release()


def test_from_dlpack_consumer_stream():
    # from_dlpack(obj, ctx, stream=S) tells the producer the stream S the array will be used on.
    s = ctx.stream()
    e = gpuwrap.ExternalStream(0, ctx)
    for dev, stream, want in [(gpuwrap.kDLCUDA, s, s.handle), (gpuwrap.kDLCUDA, s.handle, s.handle),
                              (gpuwrap.kDLCUDAManaged, e, 1), (gpuwrap.kDLCUDA, 0, 1),
                              (gpuwrap.kDLCUDA, 2, 2), (gpuwrap.kDLROCM, 0, 0),
                              (gpuwrap.kDLROCM, s, s.handle), (gpuwrap.kDLCPU, s, ABSENT)]:
        p = FakeProducer(dev)
        gpuwrap.from_dlpack(p, ctx, stream=stream).release()
        check(p.streams == [want], f"device {dev}, stream {stream!r}: passed {p.streams}, want {want}")
    p = FakeProducer(gpuwrap.kDLCUDA)
    gpuwrap.Context.from_dlpack(ctx, p, stream=s).release()
    check(p.streams == [s.handle], f"Context.from_dlpack passes the stream: {p.streams}")
    e.close()
    s.close()


def test_kept_stream_closed_with_context():
    # The stream kept for a context's exports (here: a host wait of a kDLCPU export) goes
    # with the context's close, not at exit.
    c = gpuwrap.Context("cpu")
    s = c.stream()
    x = rng.random(NS)
    g = gpuwrap.from_dlpack(x, c)
    v = float(rng.random())
    g.fill(v, stream=s)
    n = np.from_dlpack(g)
    check(bool((n == v).all()), "host wait through the kept stream")
    key = c.handle
    check(key in gpuwrap._aux_streams, "a stream is kept for the context")
    c.close()
    check(key not in gpuwrap._aux_streams, "closing the context closed its kept stream")
    del n
    g.release()
    s.close()


for f in [test_gpuwrap_to_numpy, test_release_orders, test_strided_and_zero_size, test_dtypes,
          test_numpy_to_gpuwrap, test_round_trip, test_readonly, test_capsule_rules,
          test_capsule_dropped_while_error_pending, test_import_refusals,
          test_from_dlpack_passes_stream, test_dlpack_stream_argument, test_use_after_release,
          test_stream_fill_copy_async, test_external_stream, test_dlpack_export_waits_for_pending_work,
          test_cuda_array_interface_import, test_stream_errors, test_from_dlpack_consumer_stream,
          test_kept_stream_closed_with_context]:
    run(f)

print(f"numpy {np.__version__}: {'FAILED: ' + str(len(failures)) if failures else 'all passed'}")
sys.exit(1 if failures else 0)
