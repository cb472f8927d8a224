"""Streams on the CPU model (its stream work runs GPUWRAP_CPU_STREAM_DELAY_US late on a
worker thread): queued work, borrowed streams, the export protocols' waits, and the streams
from_dlpack hands to (fake) producers.

The ordering tests say which wait of the package they guard: each was checked to fail with
that wait removed (stale elements), and to pass with it."""
import ctypes
import gc
import os
import weakref

import numpy as np
import pytest

import gpuwrap

SEED = int(os.environ.get("GW_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
rng = np.random.default_rng(SEED)
NS = 4096


def host(ctx, n=NS):
    """Random numpy data and a gpuwrap array over it (registered: pinned, so stream work
    on it is asynchronous)."""
    x = rng.random(n)
    return x, gpuwrap.from_dlpack(x, ctx)


@pytest.fixture
def external(lib):
    made = []

    def make(nonblocking=True):
        h = ctypes.c_void_p()
        assert lib.gw_cpu_stream_create_external(0, int(nonblocking), ctypes.byref(h)) == 0
        made.append(h.value)
        return h.value
    yield make
    for h in made:
        assert lib.gw_cpu_stream_destroy_external(h) == 0, "gpuwrap destroyed a borrowed stream"


def test_fill_copy_async(ctx):
    print(f"seed {SEED} (GW_TEST_SEED replays)")
    s = ctx.stream()
    assert s.ctx is ctx and not s.borrowed and not s.closed and s.handle not in (0, 1, 2)
    x, g = host(ctx)
    assert g.kind == "pinned"
    old, v = x.copy(), float(rng.random())
    g.fill(v, stream=s)
    assert np.array_equal(x, old) and g.pending()
    s.synchronize()
    assert (x == v).all() and not g.pending()
    xs, gs = host(ctx)
    xd, gd = host(ctx)
    old = xd.copy()
    gd.copy_from(gs, stream=s)
    assert np.array_equal(xd, old)
    s.synchronize()
    assert np.array_equal(xd, xs)
    # Two streams, ordered through the DLPack protocol: t waits for s (gpuwrap's streams are
    # blocking, ordered with the legacy stream, not with each other). Remove the
    # gw_array_wait call of consumer_wait in python/gpuwrap/_dlpack.c and this fails:
    # three fills queued in front keep s busy past t's copy, which copies old values.
    t = ctx.stream()
    scratch = ctx.alloc("pinned", "float64", (NS,))
    for _ in range(3):
        scratch.fill(0.0, stream=s)
    v = float(rng.random())
    gs.fill(v, stream=s)
    gs.__dlpack__(stream=t.handle)
    gd.copy_from(gs, stream=t)
    t.synchronize()
    assert (xd == v).all(), f"{int((xd != v).sum())} of {NS} elements stale: t did not wait for s"
    with ctx.stream() as u:
        u.synchronize()
    assert u.closed
    for a in (g, gs, gd, scratch):
        a.release()
    s.close()
    s.close()
    t.close()


def test_external_stream(ctx, external):
    native = external()
    e = gpuwrap.ExternalStream(native, ctx)
    assert e.borrowed and e.handle == native and e.ctx is ctx
    x, g = host(ctx)
    v = float(rng.random())
    old = x.copy()
    g.fill(v, stream=e)
    assert np.array_equal(x, old)
    e.synchronize()
    assert (x == v).all()
    e.close()
    e2 = gpuwrap.ExternalStream(native, ctx)  # the native stream outlived the borrow
    g.fill(1.0, stream=e2)
    e2.synchronize()
    assert (x == 1.0).all()
    e2.close()
    # A gpuwrap stream's own handle, borrowed: the same queue as the stream.
    s = ctx.stream()
    for src in (s.handle, s, type("S", (), {"__cuda_stream__": lambda self: (0, s.handle)})()):
        b = gpuwrap.ExternalStream(src, ctx)
        assert b.handle == s.handle
        old, v = x.copy(), float(rng.random())
        g.fill(v, stream=b)
        assert np.array_equal(x, old), "queued on the borrow"
        s.synchronize()  # the owner's synchronize waits for work queued through the borrow
        assert (x == v).all()
        b.close()
    v = float(rng.random())
    g.fill(v, stream=s)  # the owner is unharmed by its borrows' close
    s.synchronize()
    assert (x == v).all()
    # 0 / None: the legacy default stream, which synchronous calls are ordered after.
    for src in (0, None):
        b = gpuwrap.ExternalStream(src, ctx)
        assert b.handle == 0
        v = float(rng.random())
        g.fill(v, stream=b)
        y, gy = host(ctx)
        gy.copy_from(g)  # synchronous: ordered after the legacy stream's fill
        assert (y == v).all(), src
        gy.release()
        b.close()
    s.close()
    g.release()


def test_exports_wait_for_pending_work(ctx, external):
    # gpuwrap's fill is pending on s; a consumer (another library's non-blocking side
    # stream) asks for the array with __dlpack__(stream=its handle), then reads it on that
    # stream. Remove the gw_array_wait call of consumer_wait in python/gpuwrap/_dlpack.c
    # and this fails: the consumer's copy runs one delay after it was queued, the fill
    # (behind three others on s) four, so gd gets the old values.
    s = ctx.stream()
    consumer = gpuwrap.ExternalStream(external(), ctx)
    scratch = ctx.alloc("pinned", "float64", (NS,))
    x, g = host(ctx)
    xd, gd = host(ctx)
    old_d = xd.copy()
    v = float(rng.random())
    for _ in range(3):
        scratch.fill(0.0, stream=s)
    g.fill(v, stream=s)
    imported = gpuwrap.from_dlpack(g.__dlpack__(max_version=(1, 0), stream=consumer.handle), ctx)
    assert imported.host_ptr == g.host_ptr, "the capsule is over the array's memory"
    assert np.array_equal(xd, old_d), "no host wait"
    gd.copy_from(imported, stream=consumer)
    consumer.synchronize()
    assert (xd == v).all(), f"{int((xd != v).sum())} of {NS} elements stale: the consumer did not wait"
    # stream=None on kDLCPU, and the array interface: the host is the consumer, so the
    # export waits on the host (aux_wait in python/gpuwrap/_stream.c: remove its gw_array_wait and
    # gw_stream_synchronize and NumPy reads the old values).
    for read in (np.from_dlpack, np.asarray):
        v = float(rng.random())
        for _ in range(3):
            scratch.fill(0.0, stream=s)
        g.fill(v, stream=s)
        n = read(g)
        assert (n == v).all(), f"{read.__name__}: {int((n != v).sum())} of {NS} elements stale"
        del n
    old, v = x.copy(), float(rng.random())
    g.fill(v, stream=s)
    gpuwrap.from_dlpack(g.__dlpack__(stream=-1), ctx).release()
    assert np.array_equal(x, old), "stream=-1 waits for nothing"
    s.synchronize()
    for a in (imported, g, gd, scratch):
        a.release()
    consumer.close()
    s.close()


def test_stream_argument_rules(ctx):
    x, g = host(ctx)
    for stream in (None, -1):  # kDLCPU: the host, or no synchronization
        imp = gpuwrap.from_dlpack(g.__dlpack__(stream=stream), ctx)
        assert imp.host_ptr == g.host_ptr
        imp.release()
    for stream, exc in [("1", TypeError), (1.0, TypeError), (True, TypeError), (object(), TypeError),
                        (1, BufferError), (0, BufferError), (2, BufferError), (-2, BufferError)]:
        with pytest.raises(exc, match="stream"):
            g.__dlpack__(stream=stream)
    with pytest.raises(BufferError, match="stream") as e:  # not a stream of the model
        g.__dlpack__(stream=0x7F00DEAD0000)
    assert isinstance(e.value, gpuwrap.GpuwrapError) and e.value.name == "GW_EINVAL"
    # the device rules, as the array API gives them
    C, R = gpuwrap.kDLCUDA, gpuwrap.kDLROCM
    for dev, stream in [(C, None), (C, -1), (C, 1), (C, 2), (C, 0x7F00DEAD0000), (gpuwrap.kDLCUDAHost, 1),
                        (gpuwrap.kDLCUDAManaged, 2), (R, 0), (R, -1), (R, 0x7F00DEAD0000)]:
        gpuwrap._check_stream(stream, dev)
    for dev, stream in [(C, 0), (C, -2), (R, 1), (R, 2)]:
        with pytest.raises(BufferError):
            gpuwrap._check_stream(stream, dev)
    s = ctx.stream()
    for bad in (123, "s", object(), s.handle):
        with pytest.raises(TypeError, match="gpuwrap.Stream"):
            g.fill(1.0, stream=bad)
        with pytest.raises(TypeError, match="gpuwrap.Stream"):
            g.copy_from(g, stream=bad)
    for bad, exc in [(-5, ValueError), (1 << 64, ValueError), (True, TypeError), (object(), TypeError),
                     ("0x1", TypeError)]:
        with pytest.raises(exc, match="stream"):
            gpuwrap.ExternalStream(bad, ctx)
    with pytest.raises(gpuwrap.GpuwrapError) as e:
        gpuwrap.ExternalStream(0x7F00DEAD0000, ctx)
    assert e.value.name == "GW_EINVAL"
    with pytest.raises(TypeError):
        gpuwrap.from_dlpack(x, ctx, stream="s")
    assert not hasattr(g, "__cuda_array_interface__") and not hasattr(s, "__cuda_stream__")
    s.close()
    for use in (lambda: s.handle, s.synchronize, lambda: g.fill(1.0, stream=s),
                lambda: gpuwrap.ExternalStream(s, ctx)):
        with pytest.raises(ValueError, match="stream closed"):
            use()
    c = gpuwrap.Context("cpu")
    c.close()
    with pytest.raises(ValueError, match="context closed"):
        c.stream()
    g.release()


ABSENT = "absent"  # what a FakeProducer records when no stream keyword was passed


class FakeProducer:
    """A DLPack producer on `devtype` that records the stream from_dlpack passes and hands
    out a numpy capsule over fresh random data (CPU memory, whatever device it claims: the
    CPU backend imports the capsule as what it is). `signature` is the protocol generation
    it implements ("2023": every keyword, "2021": stream only, "none": no keywords);
    `refuse_stream` makes it raise that exception for any stream but None (as PyTorch does
    for the pinned tensors it exports as kDLCUDAHost); `require` makes it raise unless
    given that stream."""

    def __init__(self, devtype, signature="2023", refuse_stream=None, require=ABSENT):
        self.devtype, self.signature = devtype, signature
        self.refuse_stream, self.require = refuse_stream, require
        self.x = rng.random(6)
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
        return self.x.__dlpack__()  # numpy's legacy capsule (every numpy version has it)


def check_import(ctx, p, **kw):
    g = gpuwrap.from_dlpack(p, ctx, **kw)
    assert g.host_ptr == p.x.ctypes.data and g.shape == (6,), "the producer's memory"
    assert np.array_equal(np.asarray(g), p.x)
    g.release()


def test_from_dlpack_passes_stream(ctx):
    # The array API: a consumer passes the stream it will use. gpuwrap reads on the legacy
    # default stream: 1 on CUDA, 0 on ROCm, None (or nothing) for CPU tensors.
    for devtype, want in [(gpuwrap.kDLCUDA, 1), (gpuwrap.kDLCUDAManaged, 1), (gpuwrap.kDLCUDAHost, 1),
                          (gpuwrap.kDLROCM, 0), (gpuwrap.kDLCPU, None)]:
        p = FakeProducer(devtype, require=want if want is not None else ABSENT)
        check_import(ctx, p)
        (got,) = p.streams
        if want is None:
            assert got in (None, ABSENT), (devtype, got)
        else:
            assert got == want and type(got) is int, (devtype, got)
    # Older producers: __dlpack__(stream=...) only (2021), no keywords at all.
    for devtype, signature, want in [(gpuwrap.kDLCUDA, "2021", [1]), (gpuwrap.kDLCUDA, "none", [ABSENT]),
                                     (gpuwrap.kDLCPU, "2021", [ABSENT])]:
        p = FakeProducer(devtype, signature=signature)
        check_import(ctx, p)
        assert p.streams == want, (devtype, signature, p.streams)
    # Pinned host memory whose producer refuses streams (PyTorch): retried without one.
    p = FakeProducer(gpuwrap.kDLCUDAHost, refuse_stream=AssertionError)
    check_import(ctx, p)
    assert p.streams == [1, ABSENT]
    # ... but a device tensor's refusal is the producer's answer, not swallowed.
    p = FakeProducer(gpuwrap.kDLCUDA, refuse_stream=BufferError)
    with pytest.raises(BufferError, match="stream should be None"):
        gpuwrap.from_dlpack(p, ctx)
    assert p.streams == [1]
    # A pinned producer whose export fails with a GpuwrapError (a gpuwrap producer whose wait
    # for pending work failed, GW_EBACKEND = -9) is raised: not a refusal of the stream, so
    # not retried without one (it was: RuntimeError was in the retry's list).
    def backend_failure(msg):
        return gpuwrap.GpuwrapError("__dlpack__", -9, msg)
    p = FakeProducer(gpuwrap.kDLCUDAHost, refuse_stream=backend_failure)
    with pytest.raises(gpuwrap.GpuwrapError, match="stream should be None") as e:
        gpuwrap.from_dlpack(p, ctx)
    assert e.value.name == "GW_EBACKEND" and not isinstance(e.value, BufferError)
    assert p.streams == [1]
    # ... while gpuwrap's own refusal (DLPackBufferError, a BufferError) is still retried
    p = FakeProducer(gpuwrap.kDLCUDAHost, refuse_stream=lambda m: gpuwrap.DLPackBufferError("__dlpack__", -4, m))
    check_import(ctx, p)
    assert p.streams == [1, ABSENT]


def test_from_dlpack_consumer_stream(ctx):
    # from_dlpack(obj, ctx, stream=S) tells the producer the stream S the array will be used on.
    s = ctx.stream()
    e = gpuwrap.ExternalStream(0, ctx)
    C, R = gpuwrap.kDLCUDA, gpuwrap.kDLROCM
    for dev, stream, want in [(C, None, 1), (R, None, 0), (C, s, s.handle), (C, s.handle, s.handle),
                              (gpuwrap.kDLCUDAManaged, e, 1), (C, 0, 1), (C, 2, 2), (R, 0, 0),
                              (R, s, s.handle), (gpuwrap.kDLCPU, s, ABSENT), (gpuwrap.kDLCPU, None, ABSENT)]:
        p = FakeProducer(dev)
        check_import(ctx, p, stream=stream)
        assert p.streams == [want], (dev, stream, p.streams)
    p = FakeProducer(C)
    g = gpuwrap.Context.from_dlpack(ctx, p, stream=s)
    assert p.streams == [s.handle], "Context.from_dlpack passes the stream"
    g.release()
    e.close()
    s.close()


class CAIOnly:
    """A producer with only the CUDA Array Interface (as Numba's device arrays and older
    CuPy): no __dlpack__."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def test_cuda_array_interface_import(ctx, lib, external):
    nbytes = NS * 8
    p = ctypes.c_void_p()
    assert lib.gw_cpu_runtime_alloc(gpuwrap.KINDS.index("device"), 0, nbytes, ctypes.byref(p)) == 0
    ptr = p.value
    old = rng.random(NS)
    ctypes.memmove(ptr, old.ctypes.data, nbytes)  # the model's device memory is host memory
    dev = ctx.wrap(ptr, "float64", (NS,))
    assert dev.kind == "device"
    # The producer's work is pending on its own non-blocking stream, named in `stream`: the
    # import must wait for it. Remove the gw_stream_synchronize of mod_sync_native in
    # python/gpuwrap/_stream.c (what gpuwrap._from_cuda_array_interface calls) and the read
    # below (a synchronous copy: legacy stream, not ordered with a non-blocking one) sees
    # the old values.
    native = external()
    e = gpuwrap.ExternalStream(native, ctx)
    v = float(rng.random())
    dev.fill(v, stream=e)
    prod = CAIOnly({"shape": (NS,), "typestr": "<f8", "data": (ptr, False), "version": 3,
                    "strides": None, "stream": native})
    alive = weakref.ref(prod)
    imp = gpuwrap.from_dlpack(prod, ctx)
    assert imp.data_ptr == ptr and imp.kind == "device" and imp.shape == (NS,) and not imp.readonly
    y, gy = host(ctx)
    gy.copy_from(imp)
    assert (y == v).all(), f"{int((y != v).sum())} of {NS} elements stale: the import did not wait"
    del prod
    gc.collect()
    assert alive() is not None, "the producer is kept alive while gpuwrap holds its memory"
    imp.release()
    gc.collect()
    assert alive() is None, "the producer is let go with the last gpuwrap reference"
    # Strides in bytes, read-only, the legacy stream (1), no stream (None; v2 has none).
    for extra in ({"stream": 1}, {"stream": None}, {"version": 2}):
        cai = {"shape": (NS // 2,), "typestr": "<f8", "data": (ptr + 8, True), "version": 3,
               "strides": (16,)}
        cai.update(extra)
        imp = gpuwrap.from_dlpack(CAIOnly(cai), ctx)
        assert imp.strides == (2,) and imp.readonly and imp.data_ptr == ptr + 8, extra
        z, gz = host(ctx, NS // 2)
        gz.copy_from(imp)
        assert (z == v).all(), f"{extra}: every odd element read"
        with pytest.raises(gpuwrap.GpuwrapError) as ex:
            imp.fill(0.0)
        assert ex.value.name == "GW_EREADONLY"
        imp.release()
        gz.release()
    for bad_cai, exc in [({"stream": 0}, ValueError), ({"typestr": ">f8"}, ValueError),
                         ({"typestr": "<f3"}, ValueError), ({"strides": (12,)}, ValueError),
                         ({"mask": object()}, ValueError), ({"stream": "1"}, TypeError),
                         ({"stream": 0x7F00DEAD0000}, gpuwrap.GpuwrapError)]:
        cai = {"shape": (NS,), "typestr": "<f8", "data": (ptr, False), "version": 3}
        cai.update(bad_cai)
        with pytest.raises(exc):
            gpuwrap.from_dlpack(CAIOnly(cai), ctx)
    e.close()
    dev.release()
    gy.release()
    assert lib.gw_cpu_runtime_free(ptr) == 0


def test_kept_stream_closed_with_context():
    c = gpuwrap.Context("cpu")
    s = c.stream()
    x = rng.random(NS)
    g = gpuwrap.from_dlpack(x, c)
    v = float(rng.random())
    g.fill(v, stream=s)
    assert (np.from_dlpack(g) == v).all()
    key = c.handle
    assert key in gpuwrap._aux_streams
    c.close()
    assert key not in gpuwrap._aux_streams
    g.release()
    s.close()


def _threads():
    return len(os.listdir("/proc/self/task"))


def test_export_after_context_close_leaks_nothing():
    """Exports of arrays whose Context was closed while their fill was queued: each waits
    with a stream of its own that goes with it (a stream kept per closed context was never
    dropped, with its worker thread and the C context it held)."""
    other = gpuwrap._default_context()
    gc.collect()
    threads, kept = _threads(), len(gpuwrap._aux_streams)
    for i in range(20):
        c = gpuwrap.Context("cpu")
        s = c.stream()
        g = c.alloc("pinned", "float64", (NS,))
        v = float(rng.random())
        g.fill(v, stream=s)
        c.close()
        assert g.pending()
        if i % 2:
            n = np.asarray(g)  # waits on the host, on a stream made for it
        else:
            n = np.from_dlpack(g)  # a kDLCPU export waits on the host too
        assert (n == v).all()
        imp = gpuwrap.from_dlpack(g, other)
        assert (np.asarray(imp) == v).all()
        s.close()
        imp.release()
        g.release()
        del n, imp, g, s
        gc.collect()
    assert len(gpuwrap._aux_streams) == kept, "no stream is kept for a closed context"
    assert _threads() == threads, "no stream worker thread outlives the arrays"
