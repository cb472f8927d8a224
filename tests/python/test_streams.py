"""Streams on the CPU model (its stream work runs GPUWRAP_CPU_STREAM_DELAY_US late on a
worker thread): queued work, borrowed streams, and the export protocols' waits."""
import ctypes
import os

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
    assert s.ctx is ctx and not s.borrowed and s.handle not in (0, 1, 2)
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
    # two streams, ordered through the DLPack protocol: t waits for s
    t = ctx.stream()
    scratch = ctx.alloc("pinned", "float64", (NS,))
    for _ in range(3):
        scratch.fill(0.0, stream=s)
    v = float(rng.random())
    gs.fill(v, stream=s)
    gs.__dlpack__(stream=t.handle)
    gd.copy_from(gs, stream=t)
    t.synchronize()
    assert (xd == v).all()
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
    s = ctx.stream()
    for src in (s.handle, s, type("S", (), {"__cuda_stream__": lambda self: (0, s.handle)})()):
        b = gpuwrap.ExternalStream(src, ctx)
        assert b.handle == s.handle
        b.close()
    for src in (0, None):
        b = gpuwrap.ExternalStream(src, ctx)
        assert b.handle == 0
        b.close()
    s.close()
    g.release()


def test_exports_wait_for_pending_work(ctx, external):
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
    assert np.array_equal(xd, old_d), "no host wait"
    gd.copy_from(imported, stream=consumer)
    consumer.synchronize()
    assert (xd == v).all(), "the consumer's stream waited for the pending fill"
    # stream=None on kDLCPU, and the array interface: the host is the consumer
    for read in (np.from_dlpack, np.asarray):
        v = float(rng.random())
        for _ in range(3):
            scratch.fill(0.0, stream=s)
        g.fill(v, stream=s)
        assert (read(g) == v).all(), read.__name__
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
    for stream, exc in [("1", TypeError), (1.0, TypeError), (True, TypeError), (1, BufferError),
                        (0, BufferError), (2, BufferError), (-2, BufferError)]:
        with pytest.raises(exc, match="stream"):
            g.__dlpack__(stream=stream)
    C, R = gpuwrap.kDLCUDA, gpuwrap.kDLROCM
    for dev, stream in [(C, None), (C, -1), (C, 1), (C, 2), (C, 0x7F00DEAD0000), (R, 0), (R, -1)]:
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
    for bad, exc in [(-5, ValueError), (1 << 64, ValueError), (True, TypeError), ("0x1", TypeError)]:
        with pytest.raises(exc, match="stream"):
            gpuwrap.ExternalStream(bad, ctx)
    with pytest.raises(gpuwrap.GpuwrapError) as e:
        gpuwrap.ExternalStream(0x7F00DEAD0000, ctx)
    assert e.value.name == "GW_EINVAL"
    assert not hasattr(g, "__cuda_array_interface__") and not hasattr(s, "__cuda_stream__")
    s.close()
    for use in (lambda: s.handle, s.synchronize, lambda: g.fill(1.0, stream=s),
                lambda: gpuwrap.ExternalStream(s, ctx)):
        with pytest.raises(ValueError, match="stream closed"):
            use()
    g.release()


def test_from_dlpack_passes_stream(ctx):
    class Producer:
        def __init__(self, dev):
            self.dev, self.x, self.streams = dev, np.arange(6.0), []

        def __dlpack_device__(self):
            return (self.dev, 0)

        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            self.streams.append(stream)
            return self.x.__dlpack__()
    s = ctx.stream()
    for dev, stream, want in [(gpuwrap.kDLCUDA, None, 1), (gpuwrap.kDLROCM, None, 0),
                              (gpuwrap.kDLCPU, None, None), (gpuwrap.kDLCUDA, s, s.handle),
                              (gpuwrap.kDLCUDA, 0, 1), (gpuwrap.kDLCUDA, 2, 2), (gpuwrap.kDLCPU, s, None)]:
        p = Producer(dev)
        g = gpuwrap.from_dlpack(p, ctx, stream=stream)
        assert p.streams == [want] and g.host_ptr == p.x.ctypes.data, (dev, stream, p.streams)
        g.release()
    s.close()


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
