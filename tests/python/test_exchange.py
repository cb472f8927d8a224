"""The DLPack C exchange API (DLPack 1.2/1.3, `__dlpack_c_exchange_api__`) both ways, on the
CPU model: gpuwrap.Array's table called as a C consumer would (_exchange_testmod.call), and
from_dlpack consuming a hand-made producer (_exchange_testmod.producer_api: its objects
describe memory in `_spec`, its current_work_stream answers the stream producer_set gives).
_exchange_testmod is tests/python/_exchange_testmod.c, compiled for the tests by
conftest.py (fixture exchange_testmod): the installed package has no test code."""
import ctypes
import gc
import os
import threading

import numpy as np
import pytest

import gpuwrap

_c = gpuwrap._c
_t = None  # _exchange_testmod, set by the fixture below
SEED = int(os.environ.get("GW_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
rng = np.random.default_rng(SEED)
NS = 4096
CODES = {"f": 2, "i": 0, "u": 1}


@pytest.fixture(autouse=True, scope="module")
def _testmod(exchange_testmod):
    global _t
    _t = exchange_testmod


@pytest.fixture
def external(lib):
    """Streams "of another library" (the CPU model's external streams)."""
    made = []

    def make(nonblocking=True):
        h = ctypes.c_void_p()
        assert lib.gw_cpu_stream_create_external(0, int(nonblocking), ctypes.byref(h)) == 0
        made.append(h.value)
        return h.value
    yield make
    for h in made:
        assert lib.gw_cpu_stream_destroy_external(h) == 0


def counts():
    """(converted, deleted, stream queries) of the test producer; leaves its settings."""
    return _t.producer_set()


def make_producer(name="dlpack_exchange_api", major=1, prev_major=-1):
    """A producer type with the test table, and a __dlpack__ (NumPy's) that counts."""
    class Producer:
        __dlpack_c_exchange_api__ = _t.producer_api(name, major, prev_major)
        python_calls = 0

        def __init__(self, x, readonly=False):
            self.x = x
            base = x.__array_interface__["data"][0]
            self._spec = (base, (CODES[x.dtype.kind], 8 * x.itemsize), x.shape,
                          tuple(s // x.itemsize for s in x.strides), 0, readonly, (1, 0))

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kw):
            type(self).python_calls += 1
            kw.pop("stream", None)
            kw.pop("max_version", None)
            return self.x.__dlpack__(**kw)
    return Producer


def fresh_counts():
    gc.collect()
    return counts()


def test_installed_module_has_no_test_code():
    """The producer and consumer of these tests live in _exchange_testmod, not in the
    extension users install (they were gpuwrap._c._exchange_test_api/_set/_call)."""
    assert [n for n in dir(_c) if n.startswith(("_exchange_test", "_exchange_call"))] == []


def test_gpuwrap_table_header():
    cap = gpuwrap.Array.__dlpack_c_exchange_api__
    assert type(cap).__name__ == "PyCapsule"
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    p = get(cap, b"dlpack_exchange_api")
    major, minor = (ctypes.c_uint32 * 2).from_address(p)
    prev = ctypes.c_void_p.from_address(p + 8).value
    fns = (ctypes.c_void_p * 5).from_address(p + 16)
    assert (major, minor) == (1, 3) and prev is None
    assert all(fns), "every member set (dltensor_from_py_object too)"


def test_gpuwrap_producer(ctx):
    print(f"seed {SEED} (GW_TEST_SEED replays)")
    cap = gpuwrap.Array.__dlpack_c_exchange_api__
    x = rng.random((24, 36))
    a = gpuwrap.from_dlpack(x, ctx)
    before = _c.exchange_produced()
    for obj, ro in ((a, False), (ctx.wrap(x, "float64", x.shape, readonly=True), True)):
        (addr, shape, strides, dev), flag, version = _t.call(cap, "managed", obj)
        assert (addr, shape, strides, dev) == (obj.host_ptr, (24, 36), (36, 1), (1, 0))
        assert flag == ro and version[0] == 1
    assert _c.exchange_produced() == before + 2
    v = a.view((2, 1), (6, 15), (3, 2))  # x[2:20:3, 1:30:2]
    addr, shape, strides, dev = _t.call(cap, "view", v)
    n = x[2:20:3, 1:30:2]
    assert (addr, shape, strides) == (n.__array_interface__["data"][0], n.shape, (108, 2))
    back = _t.call(cap, "roundtrip", v)
    assert isinstance(back, gpuwrap.Array) and back.host_ptr == v.host_ptr
    assert back.shape == n.shape and back.strides == (108, 2)
    assert np.array_equal(np.asarray(back), n), "every element"
    back.release()
    al = _t.call(cap, "alloc", ((5, 7), (2, 32), (1, 0)))
    assert isinstance(al, gpuwrap.Array) and al.shape == (5, 7) and al.dtype == "float32"
    al.release()
    with pytest.raises(TypeError, match="not a gpuwrap.Array"):
        _t.call(cap, "managed", x)
    with pytest.raises(ValueError, match="not a type gpuwrap has"):
        _t.call(cap, "alloc", ((5,), (2, 24), (1, 0)))
    assert _t.call(cap, "stream", (2, 0)) == 0
    released = ctx.alloc("host", "int32", (4,))
    released.release()
    with pytest.raises(ValueError, match="released"):
        _t.call(cap, "managed", released)
    a.release()


def test_gpuwrap_to_gpuwrap_waits_for_pending_work(ctx, external):
    # An Array with a fill pending on a non-blocking stream, imported through gpuwrap's own
    # table: its tensor is kDLCPU (host) on the CPU model, so the conversion waits on the
    # host as __dlpack__ does for a host consumer. Remove the export_wait call of
    # producer_ready (_exchange.c) and the host reads the old values.
    s = gpuwrap.ExternalStream(external(), ctx)
    x = rng.random(NS)
    g = gpuwrap.from_dlpack(x, ctx)
    v = float(rng.random())
    g.fill(v, stream=s)
    fast = _c.exchange_counts()[0]
    imp = gpuwrap.from_dlpack(g, ctx)
    assert _c.exchange_counts()[0] == fast + 1
    assert (x == v).all(), f"{int((x != v).sum())} of {NS} stale"
    for arr in (imp, g):
        arr.release()
    s.close()


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "uint8", "int64"])
def test_consumer_values_views_readonly(ctx, dtype):
    P = make_producer()
    c0, d0, _ = fresh_counts()
    base = (rng.random((20, 30)) * 100).astype(dtype)
    for x, ro in ((base, False), (base[1:19:3, 2:29:4], False), (base[::-1, ::2], True)):
        fast, d = _c.exchange_counts()[0], counts()[1]
        p = P(x, readonly=ro)
        a = gpuwrap.from_dlpack(p, ctx)
        assert _c.exchange_counts()[0] == fast + 1 and P.python_calls == 0, "the C table was used"
        assert a.readonly == ro and a.dtype == dtype and a.shape == x.shape
        assert a.strides == tuple(s // x.itemsize for s in x.strides)
        out = np.full(x.shape, 77, dtype=dtype)  # poisoned
        gpuwrap.from_dlpack(out, ctx).copy_from(a)
        assert np.array_equal(out, x), "every element"
        del p
        assert counts()[1] == d, "the deleter waits for the array"
        a.release()
    c1, d1, _ = fresh_counts()
    assert c1 - c0 == 3 and d1 - d0 == 3, "each deleter exactly once"


def test_consumer_orders_producer_stream(ctx, external):
    # The producer's work (a fill, behind three others) is queued on its current work
    # stream, a non-blocking stream of "another library". from_dlpack must order that
    # stream before gpuwrap's (legacy, or the caller's) with an event, without a host
    # wait. Remove the gw__stream_order call of order_producer (_exchange.c) and the
    # copies read the old values.
    P = make_producer()
    pstream = gpuwrap.ExternalStream(external(), ctx)
    scratch = ctx.alloc("pinned", "float64", (NS,))
    try:
        for mine in (None, ctx.stream()):
            _t.producer_set(pstream.handle, 0)
            x = rng.random(NS)
            g = gpuwrap.from_dlpack(x, ctx)
            old, v = x.copy(), float(rng.random())
            for _ in range(3):
                scratch.fill(0.0, stream=pstream)
            g.fill(v, stream=pstream)
            q = counts()[2]
            a = gpuwrap.from_dlpack(P(x), ctx, stream=mine)
            assert counts()[2] == q + 1, "current_work_stream asked"
            assert np.array_equal(x, old), "no host wait"
            y = np.zeros(NS)
            gy = gpuwrap.from_dlpack(y, ctx)
            if mine is None:
                gy.copy_from(a)  # synchronous: ordered on the legacy default stream
            else:
                gy.copy_from(a, stream=mine)
                mine.synchronize()
            assert (y == v).all(), f"{int((y != v).sum())} of {NS} stale: {mine}"
            pstream.synchronize()
            for arr in (a, g, gy):
                arr.release()
            if mine is not None:
                mine.close()
    finally:
        _t.producer_set(None, 0)
        scratch.release()
        pstream.close()


def test_consumer_many_threads(ctx):
    P = make_producer()
    c0, d0, _ = fresh_counts()
    xs = [rng.random(64) for _ in range(8)]
    errors = []
    cap = gpuwrap.Array.__dlpack_c_exchange_api__  # noqa: F841  (both tables at once)

    def work(i):
        try:
            x = xs[i]
            src = gpuwrap.from_dlpack(x, ctx)
            for k in range(1000):
                a = gpuwrap.from_dlpack(P(x) if k % 2 else src, ctx)
                if k % 100 == 0:
                    assert np.array_equal(np.asarray(a), x)
                a.release()
            src.release()
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    c1, d1, _ = fresh_counts()
    assert c1 - c0 == 8 * 500 and d1 - d0 == 8 * 500


def test_fallbacks(ctx):
    x = rng.random(100)
    cases = [(make_producer(name="dlpack_exchange_api_x"), 0),  # another capsule name
             (make_producer(major=2), 0),                       # an unknown major version
             (make_producer(major=2, prev_major=1), 1)]         # ... with a 1.x prev_api
    for P, fast in cases:
        f0, b0 = _c.exchange_counts()
        a = gpuwrap.from_dlpack(P(x), ctx)
        assert np.array_equal(np.asarray(a), x)
        f1, b1 = _c.exchange_counts()
        assert (f1 - f0, b1 - b0, P.python_calls) == ((1, 0, 0) if fast else (0, 1, 1))
        a.release()

    class NoTable:
        def __init__(self, x):
            self.x = x

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kw):
            return self.x.__dlpack__()
    f0, b0 = _c.exchange_counts()
    gpuwrap.from_dlpack(NoTable(x), ctx).release()
    assert _c.exchange_counts() == (f0, b0), "no attribute: not counted as a fallback"
    # The conversion refuses the object with a TypeError: __dlpack__ is asked; with a
    # BufferError (DLPack cannot describe it): raised, no fallback.
    P = make_producer()
    try:
        _t.producer_set(None, 1)
        gpuwrap.from_dlpack(P(x), ctx).release()
        assert P.python_calls == 1
        _t.producer_set(None, 2)
        with pytest.raises(BufferError, match="refused"):
            gpuwrap.from_dlpack(P(x), ctx)
        assert P.python_calls == 1
    finally:
        _t.producer_set(None, 0)


def test_stream_query_failure_deletes_tensor(ctx):
    P = make_producer()
    c0, d0, _ = fresh_counts()
    try:
        _t.producer_set(None, 3)
        with pytest.raises(RuntimeError, match="no stream"):
            gpuwrap.from_dlpack(P(rng.random(10)), ctx)
    finally:
        _t.producer_set(None, 0)
    c1, d1, _ = fresh_counts()
    assert (c1 - c0, d1 - d0) == (1, 1), "the tensor taken was deleted once"


# ---- issue 43 item 3: both conversions place the data alike -------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", ctypes.c_uint8 * 4), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_Managed._fields_ = [("version", ctypes.c_uint32 * 2), ("manager_ctx", ctypes.c_void_p),
                     ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))),
                     ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]

# PYFUNCTYPE: called with the GIL held (the table's rule), an error raised as the exception set.
_FromPy = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.POINTER(_Managed)))
_ViewPy = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(_DLTensor))


def _gpuwrap_table():
    """gpuwrap's managed_tensor_from_py_object_no_sync and dltensor_from_py_object_no_sync,
    read from the capsule as a C consumer reads them."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    p = get(gpuwrap.Array.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    fns = (ctypes.c_void_p * 5).from_address(p + 16)  # allocator, from, to, dltensor, stream
    return _FromPy(fns[1]), _ViewPy(fns[3])


def _placements(a):
    """(data, byte_offset, (device_type, device_id), shape, strides) from each conversion."""
    managed, view = _gpuwrap_table()
    out = ctypes.POINTER(_Managed)()
    assert managed(a, ctypes.byref(out)) == 0
    t = out.contents.dl_tensor
    m = (t.data, t.byte_offset, (t.device.device_type, t.device.device_id),
         tuple(t.shape[i] for i in range(t.ndim)), tuple(t.strides[i] for i in range(t.ndim)))
    out.contents.deleter(out)
    d = _DLTensor()
    assert view(a, ctypes.byref(d)) == 0
    v = (d.data, d.byte_offset, (d.device.device_type, d.device.device_id),
         tuple(d.shape[i] for i in range(d.ndim)), tuple(d.strides[i] for i in range(d.ndim)))
    return m, v


@pytest.mark.parametrize("kind", ["device", "pinned", "managed", "host"])
def test_exchange_view_and_managed_place_alike(ctx, kind):
    """dltensor_from_py_object_no_sync gave data NULL for the CPU model's device memory while
    managed_tensor_from_py_object_no_sync gave its address: both must give the same data,
    byte_offset and device, the array's own address, for every kind and for views with an
    offset (negative steps too)."""
    a = ctx.alloc(kind, "float32", (6, 8))
    views = [a, a.view((1, 2), (3, 4)), a.view((5, 7), (3, 4), (-2, -2)), a.view((2, 0), (1, 8)),
             a.view((4, 3), (2, 2), (1, -1))]
    refused = False
    for v in views:
        try:
            m, w = _placements(v)
        except BufferError as e:  # a model that refuses to export this kind: both must
            managed, view = _gpuwrap_table()  # (the managed conversion raised: the view must)
            with pytest.raises(type(e)):
                view(v, ctypes.byref(_DLTensor()))
            refused = True
            continue
        assert m == w, (kind, v.shape, m, w)
        data, off, dev, shape, strides = w
        assert data is not None and data != 0
        assert dev == tuple(v.__dlpack_device__())
        # the address of element 0: the host one for a host device type (kDLCPU, pinned
        # kinds), else the device one, as the array reports them
        host_type = dev[0] in (gpuwrap.kDLCPU, gpuwrap.kDLCUDAHost, gpuwrap.kDLROCMHost)
        want = v.host_ptr if host_type and v.host_ptr is not None else v.data_ptr
        assert data + off == want
        assert shape == v.shape and strides == v.strides
    if refused:
        return
    # the offset of a view is its parent's plus its start, in bytes
    m0, _ = _placements(a)
    m1, _ = _placements(views[1])
    assert (m1[0] + m1[1]) - (m0[0] + m0[1]) == (1 * 8 + 2) * 4


# ---- issue 43 item 4: the table cache holds no type ----------------------------------------------

def _dynamic_classes(n, with_api):
    """n classes made at run time, each a producer (the test table, or only __dlpack__)."""
    made = []
    for i in range(n):
        body = {"__init__": lambda self, x: setattr(self, "x", x),
                "__dlpack__": lambda self, **kw: self.x.__dlpack__(),
                "__dlpack_device__": lambda self: (1, 0)}
        if with_api:
            body["__dlpack_c_exchange_api__"] = _t.producer_api("dlpack_exchange_api", 1, -1)
        made.append(type(f"Dyn{i}", (), body))
    return made


@pytest.mark.parametrize("with_api", [True, False])
def test_exchange_cache_keeps_no_type_alive(ctx, with_api):
    """from_dlpack's table cache kept every producer type alive (3000 of 3000 classes made at
    run time survived gc): an entry must hold its type weakly, and the cache stay bounded,
    while a type seen before still goes through its table."""
    import weakref
    n = 3000
    classes = _dynamic_classes(n, with_api)
    refs = [weakref.ref(c) for c in classes]
    fast0 = _c.exchange_counts()[0]
    x = np.arange(12.0)
    for c in classes:
        obj = c(x)
        if with_api:
            spec = (x.__array_interface__["data"][0], (2, 64), (12,), (1,), 0, False, (1, 0))
            obj._spec = spec
        a = gpuwrap.from_dlpack(obj, ctx)
        assert np.array_equal(np.asarray(a), x)
        a.release()
        del a, obj
        assert _c._exchange_cache_size() <= 1024  # bounded however many types come
    if with_api:
        assert _c.exchange_counts()[0] - fast0 == n  # every one through its table
    del classes, c
    gc.collect()
    alive = sum(r() is not None for r in refs)
    assert alive <= 1, f"{alive} of {n} producer types survived gc"
    # a type seen before is still remembered (one entry while it lives) and still converted
    # through its table
    P = make_producer()
    y = rng.standard_normal(64)
    p = P(y)
    before = _c.exchange_counts()[0]
    size0 = _c._exchange_cache_size()
    for _ in range(100):
        b = gpuwrap.from_dlpack(p, ctx)
        assert np.array_equal(np.asarray(b), y)
    assert _c.exchange_counts()[0] - before == 100
    assert _c._exchange_cache_size() <= size0 + 1
    assert P.python_calls == 0
    r = weakref.ref(P)
    del P, p, b
    gc.collect()
    assert r() is None
_TWO_DEVICES = r'''
import ctypes, importlib.util, os, sys
import numpy as np
import gpuwrap

spec = importlib.util.spec_from_file_location("_exchange_testmod", os.environ["GW_EXCHANGE_TESTMOD"])
_t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(_t)
lib = gpuwrap.load_library()
lib.gw_cpu_stream_create_external.restype = ctypes.c_int
lib.gw_cpu_stream_create_external.argtypes = [ctypes.c_int, ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_void_p)]
lib.gw_cpu_stream_destroy_external.argtypes = [ctypes.c_void_p]
NS = 4096
ctx0, ctx1 = gpuwrap.Context("cpu", 0), gpuwrap.Context("cpu", 1)
mem = ctx1.alloc("device", "float64", (NS,))  # device 1's memory: kDLExtDev, id 1
assert mem.__dlpack_device__() == (12, 1)


class Producer:
    """Another library's tensor on device 1, its work queued on its own stream there."""
    __dlpack_c_exchange_api__ = _t.producer_api("dlpack_exchange_api", 1, -1)

    def __init__(self):
        self._spec = (mem.data_ptr, (2, 64), (NS,), (1,), 0, False, (12, 1))

    def __dlpack_device__(self):
        return (12, 1)


h = ctypes.c_void_p()
assert lib.gw_cpu_stream_create_external(1, 1, ctypes.byref(h)) == 0
pstream = gpuwrap.ExternalStream(h.value, ctx1)
host = ctx0.alloc("pinned", "float64", (NS,))
for mine in (None, ctx0.stream()):
    v = float(np.random.default_rng().random()) + 1.0
    _t.producer_set(pstream.handle, 0)
    mem.fill(v, stream=pstream)  # delayed: pending on device 1's stream
    a = gpuwrap.from_dlpack(Producer(), ctx0, stream=mine)
    assert a.device == 1 and a.kind == "device"
    host.fill(0.0)
    if mine is None:
        host.copy_from(a)
    else:
        host.copy_from(a, stream=mine)
        mine.synchronize()
    got = np.asarray(host)
    assert (got == v).all(), f"{int((got != v).sum())} of {NS} stale ({mine})"
    pstream.synchronize()
    a.release()
    if mine is not None:
        mine.close()
_t.producer_set(None, 0)
pstream.close()
assert lib.gw_cpu_stream_destroy_external(h.value) == 0
print("ok")
'''


def test_consumer_orders_producer_on_its_own_device():
    # Issue 43 item 10: a tensor of device 1 imported into a context of device 0. The
    # producer's stream is device 1's: wrapped in the device-0 context it was another
    # device's handle (GW_EDEVICE on the model, "invalid resource handle" on CUDA). It is
    # ordered on its own device, and the caller's stream waits for it across devices.
    import subprocess
    import sys
    env = dict(os.environ, GPUWRAP_CPU_DEVICES="2", GPUWRAP_BACKEND="cpu",
               GW_EXCHANGE_TESTMOD=_t.__file__)
    r = subprocess.run([sys.executable, "-c", _TWO_DEVICES], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env, cwd="/")
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout


# ---- the C exchange allocator: every gpuwrap dtype by its DLDataType, others refused --------------

# (code, bits) per gpuwrap.DTYPES entry, as DLPack spells them (kDLInt 0, kDLUInt 1, kDLFloat 2,
# kDLBfloat 4, kDLComplex 5, kDLBool 6): written here from the specification, apart from the
# library's one map (gw__dtype_from_dl) that the allocator reads.
_DL_OF = {"bool": (6, 8), "int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64),
          "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
          "float16": (2, 16), "bfloat16": (4, 16), "float32": (2, 32), "float64": (2, 64),
          "complex64": (5, 64), "complex128": (5, 128)}
_SetError = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
_Alloc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_DLTensor),
                          ctypes.POINTER(ctypes.POINTER(_Managed)), ctypes.c_void_p, _SetError)


def _allocate(code, bits, lanes, shape):
    """managed_tensor_allocator for a kDLCPU prototype: (tensor or None, [(kind, message)])."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    p = get(gpuwrap.Array.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    alloc = _Alloc(ctypes.c_void_p.from_address(p + 16).value)
    errors = []
    on_error = _SetError(lambda _ctx, kind, msg: errors.append((kind.decode(), msg.decode())))
    dims = (ctypes.c_int64 * len(shape))(*shape)
    proto = _DLTensor(device=_DLDevice(gpuwrap.kDLCPU, 0), ndim=len(shape), shape=dims)
    proto.dtype[:] = [code, bits, lanes & 0xFF, lanes >> 8]
    out = ctypes.POINTER(_Managed)()
    rc = alloc(ctypes.byref(proto), ctypes.byref(out), None, on_error)
    assert (rc == 0) == (not errors), (rc, errors)
    return (out if rc == 0 else None), errors


@pytest.mark.parametrize("name", gpuwrap.DTYPES)
def test_exchange_allocator_makes_every_dtype(name):
    code, bits = _DL_OF[name]
    out, errors = _allocate(code, bits, 1, (3, 5))
    assert not errors
    t = out.contents.dl_tensor
    try:
        assert list(t.dtype) == [code, bits, 1, 0]
        assert (t.device.device_type, t.device.device_id) == (gpuwrap.kDLCPU, 0)
        assert [t.shape[i] for i in range(t.ndim)] == [3, 5]
        assert t.data
    finally:
        out.contents.deleter(out)


@pytest.mark.parametrize("code,bits,lanes", [(2, 32, 2), (2, 8, 1), (4, 32, 1), (6, 16, 1),
                                             (3, 64, 1), (99, 32, 1), (5, 32, 1)])
def test_exchange_allocator_refuses_other_dtypes(code, bits, lanes):
    out, errors = _allocate(code, bits, lanes, (4,))
    assert out is None
    assert errors == [("ValueError", "gpuwrap's managed_tensor_allocator: prototype dtype "
                       f"(code {code}, bits {bits}, lanes {lanes}) is not a type gpuwrap has")]
