"""Objects used and released from many threads at once: each reference is dropped exactly
once, a use after a release raises ValueError, nothing is freed under a running call.

A binding that drops the GIL around its C calls and checks "if handle: release(handle)"
lets two threads both pass the check and release one reference twice (glibc then aborts
with a corrupted heap, or a deleter runs while the memory is still referenced): these
tests race threads on the same objects (release, use, close, the default context, one
capsule, streams, exports with pending work) and count exactly the references dropped."""
import ctypes
import gc
import sys
import threading
import time

import numpy as np
import pytest

import gpuwrap
from conftest import Counter


@pytest.fixture(autouse=True)
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: hit the windows
    yield
    sys.setswitchinterval(old)


class LockedCounter(Counter):
    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()

    def __call__(self, ptr):
        with self.lock:
            self.calls += 1


def race(n, body, timeout=30):
    barrier = threading.Barrier(n)
    errors = []

    def main(i):
        try:
            barrier.wait()
            body(i)
        except BaseException as e:  # noqa: B036 - re-raised in the main thread
            errors.append(e)
    threads = [threading.Thread(target=main, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))
        assert not t.is_alive(), "a thread did not finish: deadlock?"
    if errors:
        raise errors[0]


def test_release_same_arrays(ctx):
    lib = gpuwrap.load_library()
    for r in range(6):
        buf = (ctypes.c_float * 16)()
        counter = LockedCounter()
        base = ctx.wrap(ctypes.addressof(buf), "float32", (16,), deleter=counter)
        arrays = [gpuwrap.Array(lib.gw_retain(base.handle)) for _ in range(400)]
        race(8, lambda i: [a.release() for a in (arrays if i % 2 == 0 else arrays[::-1])])
        assert counter.calls == 0, f"round {r}: a reference was released twice"
        for a in arrays:
            with pytest.raises(ValueError, match="released"):
                a.shape
        base.release()
        base.release()
        assert counter.calls == 1


def test_use_while_releasing(ctx):
    buf = (ctypes.c_double * 64)()
    counter = LockedCounter()
    base = ctx.wrap(ctypes.addressof(buf), "float64", (8, 8), deleter=counter)
    arrays = [base.view((0, 0), (8, 8)) for _ in range(200)]
    bad = []

    def body(i):
        for a in arrays:
            try:
                k = i % 5
                if k == 0:
                    a.release()
                elif k == 1:
                    a.fill(float(i))
                elif k == 2:
                    if a.shape != (8, 8) or a.strides != (8, 1):
                        bad.append(a.shape)
                elif k == 3:
                    n = np.from_dlpack(a)
                    if n.shape != (8, 8):
                        bad.append(n.shape)
                else:
                    n = np.asarray(a)
                    if n.shape != (8, 8):
                        bad.append(n.shape)
            except ValueError as e:
                if "released" not in str(e):
                    raise
    race(10, body)
    assert not bad
    del arrays
    gc.collect()
    assert counter.calls == 0
    base.release()
    gc.collect()
    assert counter.calls == 1


def test_close_context_while_used():
    for _ in range(20):
        c = gpuwrap.Context("cpu")
        made = []

        def body(i):
            if i == 0:
                c.close()
                c.close()
                return
            for _ in range(20):
                try:
                    made.append(c.alloc("host", "float32", (4,)))
                except ValueError as e:
                    assert "closed" in str(e)
                    return
        race(6, body)
        with pytest.raises(ValueError):
            c.alloc("host", "float32", (4,))
        for a in made:  # arrays keep their C context alive after close
            a.fill(1.0)
            a.release()


def test_default_context_once():
    lib = gpuwrap.load_library()
    results = [None] * 16
    xs = [np.arange(4.0) for _ in range(16)]
    for _ in range(20):
        gpuwrap._default = None

        def body(i):
            results[i] = gpuwrap.from_dlpack(xs[i])
        race(16, body)
        assert len({lib.gw_array_context(a.handle) for a in results}) == 1
        for a in results:
            a.release()


def test_capsule_consumed_once(ctx):
    for _ in range(50):
        buf = (ctypes.c_float * 4)()
        counter = LockedCounter()
        a = ctx.wrap(ctypes.addressof(buf), "float32", (4,), deleter=counter)
        cap = a.__dlpack__()
        got = []

        def body(i):
            try:
                got.append(gpuwrap.from_dlpack(cap, ctx))
            except ValueError:
                pass
        race(8, body)
        assert len(got) == 1
        for g in got:
            g.release()
        a.release()
        del cap, got
        gc.collect()
        assert counter.calls == 1


def test_stream_close_while_used(ctx, lib):
    OP_STREAM_DESTROY = 11  # gw_cpu_op: GW_CPU_OP_STREAM_DESTROY
    a = ctx.alloc("pinned", "float64", (256,))
    before = lib.gw_cpu_op_calls(OP_STREAM_DESTROY)
    streams = [ctx.stream() for _ in range(60)]
    borrowed = []
    lock = threading.Lock()

    def body(i):
        for st in streams:
            try:
                if i % 4 == 0:
                    st.close()
                elif i % 4 == 1:
                    a.fill(float(i), stream=st)
                    st.synchronize()
                elif i % 4 == 2:
                    b = gpuwrap.ExternalStream(st, ctx)
                    with lock:
                        borrowed.append(b)
                    try:
                        a.fill(float(i), stream=b)
                    except gpuwrap.GpuwrapError as e:
                        # the owner closed st after the borrow: the model says so, no crash
                        assert "destroyed by its owner" in str(e)
                    if i % 8 == 2:
                        b.close()
                else:
                    st.handle
            except ValueError as e:
                assert "stream closed" in str(e)
    race(8, body)
    for b in borrowed:
        b.close()
    gc.collect()
    n = lib.gw_cpu_op_calls(OP_STREAM_DESTROY) - before
    assert n == len(streams) + len(borrowed), "each gw_stream destroyed exactly once"
    for st in streams:
        with pytest.raises(ValueError, match="stream closed"):
            st.synchronize()
    a.release()


def test_export_pending_while_context_closes():
    for r in range(10):
        c = gpuwrap.Context("cpu")
        xs = [np.zeros(1024) for _ in range(6)]
        arrays = [gpuwrap.from_dlpack(x, c) for x in xs]
        streams = [c.stream() for _ in range(6)]
        bad = []

        def body(i):
            if i == 6:
                c.close()
                return
            for k in range(20):
                v = float(r * 1000 + i * 100 + k)
                arrays[i].fill(v, stream=streams[i])
                n = np.from_dlpack(arrays[i]) if k % 2 else np.asarray(arrays[i])
                if not (n == v).all():
                    bad.append((i, k))
        race(7, body)
        assert not bad, f"round {r}: a NumPy read saw unfinished stream work: {bad[:3]}"
        for g in arrays:
            g.release()
        for st in streams:
            st.close()
