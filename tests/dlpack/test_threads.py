"""gpuwrap's Python package under threads (python/gpuwrap, CPU backend).

A binding that drops the GIL around its C calls (ctypes did, in the first versions)
and checks "if handle: release(handle)" lets two threads both pass the check and release one reference twice (glibc then aborts
with a corrupted heap, or a deleter runs while the memory is still referenced). These
tests race many threads on the same objects and check, exactly, how many references
were dropped:
  - many threads release() the same Array objects: each object drops its one reference
    once, so the deleter of the shared array runs exactly once, and only when the last
    reference (held back by the test) goes;
  - threads use arrays (fill, shape, __dlpack__) while others release them: no crash, and
    a use after the release raises ValueError ("array released");
  - threads close a Context while others use it: the destroy waits for the live calls;
  - 16 threads import with the default context: one context is created, not several;
  - threads import the same capsule: exactly one consumes it;
  - threads close Stream objects (made and borrowed) while others queue work on them:
    each gw_stream is destroyed exactly once, uses after close raise ValueError;
  - threads export arrays with pending stream work (the kDLCPU host wait through the
    context's kept stream) while the context is closed: every element is right.
Bounded: a few seconds. Exit 77 (skipped) without numpy.

Run: GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python GPUWRAP_BACKEND=cpu \
     /usr/bin/python3 tests/dlpack/test_threads.py
"""
import ctypes
import gc
import os
import sys
import threading
import time

try:
    import numpy as np
except ImportError:
    print("SKIP: no numpy")
    sys.exit(77)

# Appended, not inserted: a module given through PYTHONPATH (e.g. an older copy, to see
# this test fail against it) comes first.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import gpuwrap  # noqa: E402

failures = []
DEADLINE = time.monotonic() + 20  # a hang is a failure too (ctest's TIMEOUT is the backstop)


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def run(fn):
    t0 = time.monotonic()
    try:
        fn()
        print(f"ok   {fn.__name__} ({time.monotonic() - t0:.2f} s)")
    except Exception as e:
        import traceback
        traceback.print_exc()
        failures.append(f"{fn.__name__}: {type(e).__name__}: {e}")
        print("FAIL", fn.__name__)


def race(n_threads, body):
    """Run body(i) in n_threads threads started together; re-raise the first error."""
    barrier = threading.Barrier(n_threads)
    errors = []

    def main(i):
        try:
            barrier.wait()
            body(i)
        except BaseException as e:  # noqa: B036 - reported in the main thread
            errors.append(e)
    threads = [threading.Thread(target=main, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.1, DEADLINE - time.monotonic()))
        if t.is_alive():
            raise RuntimeError("a thread did not finish: deadlock?")
    if errors:
        raise errors[0]


ctx = gpuwrap.Context("cpu")
_lib = gpuwrap.load_library()
# Switch threads as often as possible so the check-then-act windows are hit.
sys.setswitchinterval(1e-6)


class Counter:
    def __init__(self):
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, ptr):
        with self.lock:
            self.calls += 1


def test_release_same_arrays():
    # K Array objects each hold one reference (gw_retain) on one wrapped buffer; `base`
    # holds one more. T threads release every object. Exactly K references may go: the
    # deleter must not run before base is released, and must run once then.
    T, K, ROUNDS = 8, 400, 6
    for r in range(ROUNDS):
        buf = (ctypes.c_float * 16)()
        counter = Counter()
        base = ctx.wrap(ctypes.addressof(buf), "float32", (16,), deleter=counter)
        arrays = [gpuwrap.Array(_lib.gw_retain(base.handle)) for _ in range(K)]

        def body(i):
            order = arrays if i % 2 == 0 else arrays[::-1]
            for a in order:
                a.release()
        race(T, body)
        check(counter.calls == 0, f"round {r}: a reference was released twice "
                                  f"(deleter ran while an array still held the memory)")
        for a in arrays:
            try:
                a.shape
                check(False, "use of a released array must raise")
                break
            except ValueError as e:
                if "released" not in str(e):
                    check(False, f"the error says 'released': {e}")
                    break
        base.release()
        base.release()  # a second release of the same object is a no-op
        check(counter.calls == 1, f"round {r}: deleter calls {counter.calls} != 1")
        del arrays


def test_use_while_releasing():
    # Threads fill, read shape and export while others release: a call either works on a
    # live array or raises ValueError; nothing is freed under a running call.
    T, K = 8, 200
    buf = (ctypes.c_double * 64)()
    counter = Counter()
    base = ctx.wrap(ctypes.addressof(buf), "float64", (8, 8), deleter=counter)
    arrays = [base.view((0, 0), (8, 8)) for _ in range(K)]
    bad = []

    def body(i):
        for a in arrays:
            try:
                if i % 4 == 0:
                    a.release()
                elif i % 4 == 1:
                    a.fill(float(i))
                elif i % 4 == 2:
                    if a.shape != (8, 8) or a.strides != (8, 1):
                        bad.append((a.shape, a.strides))
                else:
                    n = np.from_dlpack(a)
                    if n.shape != (8, 8):
                        bad.append(n.shape)
                    del n
            except ValueError as e:
                if "released" not in str(e):
                    raise
    race(T, body)
    check(not bad, f"live arrays read wrong metadata: {bad[:3]}")
    del arrays
    gc.collect()
    check(counter.calls == 0, "views released more than once")
    base.release()
    gc.collect()
    check(counter.calls == 1, f"deleter calls {counter.calls} != 1")


def test_close_context_while_used():
    # One thread closes a context while others allocate through it: every call either runs
    # on a live context or raises ValueError ("context closed"); close runs once.
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
                    if "closed" not in str(e):
                        raise
                    return
        race(6, body)
        try:
            c.alloc("host", "float32", (4,))
            check(False, "alloc through a closed context must raise")
        except ValueError:
            pass
        for a in made:  # arrays keep their context alive after close
            a.fill(1.0)
            a.release()


def test_default_context_once():
    # 16 threads import through the default context at once: one context for all.
    results = [None] * 16
    xs = [np.arange(4.0) for _ in range(16)]

    def body(i):
        results[i] = gpuwrap.from_dlpack(xs[i])
    for _ in range(20):
        gpuwrap._default = None  # as at first use
        race(16, body)
        ctxs = {_lib.gw_array_context(a.handle) for a in results}
        check(len(ctxs) == 1, f"default context created {len(ctxs)} times")
        for a in results:
            a.release()


def test_capsule_consumed_once():
    # Threads import the same capsule: one gets the array, the others ValueError; the
    # tensor's deleter runs once.
    for _ in range(50):
        buf = (ctypes.c_float * 4)()
        counter = Counter()
        a = ctx.wrap(ctypes.addressof(buf), "float32", (4,), deleter=counter)
        cap = a.__dlpack__()
        got = []

        def body(i):
            try:
                got.append(gpuwrap.from_dlpack(cap, ctx))
            except ValueError:
                pass
        race(8, body)
        check(len(got) == 1, f"a capsule was imported {len(got)} times")
        for g in got:
            g.release()
        a.release()
        del cap, got
        gc.collect()
        check(counter.calls == 1, f"deleter calls {counter.calls} != 1")


def test_stream_close_while_used():
    # K Stream objects (created, and borrowed from them); threads close them all while
    # others queue fills on them, synchronize and borrow them. Each gw_stream is destroyed
    # exactly once (the model counts stream_destroy calls), whatever the interleaving.
    T, K = 8, 60
    destroy = gpuwrap.load_library().gw_cpu_op_calls
    destroy.restype, destroy.argtypes = ctypes.c_long, [ctypes.c_int]
    OP_STREAM_DESTROY = 11  # gw_cpu_op: GW_CPU_OP_STREAM_DESTROY
    buf = (ctypes.c_double * 256)()
    a = ctx.alloc("pinned", "float64", (256,))
    before = destroy(OP_STREAM_DESTROY)
    streams = [ctx.stream() for _ in range(K)]
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
                    b = gpuwrap.ExternalStream(st, ctx)  # a borrow of a live stream
                    with lock:
                        borrowed.append(b)
                    try:
                        a.fill(float(i), stream=b)
                    except gpuwrap.GpuwrapError as e:
                        # The owner closed st after the borrow: a use of the borrow breaks
                        # ExternalStream's contract, and the model says so (no crash).
                        if "destroyed by its owner" not in str(e):
                            raise
                    if i % 8 == 2:
                        b.close()
                else:
                    st.handle
            except ValueError as e:
                if "stream closed" not in str(e):
                    raise
    race(T, body)
    for b in borrowed:  # borrows outlive the stream they came from as handles; close them
        b.close()
    gc.collect()
    n = destroy(OP_STREAM_DESTROY) - before
    check(n == K + len(borrowed), f"stream_destroy calls {n} != {K} streams + {len(borrowed)} borrows")
    for st in streams:
        try:
            st.synchronize()
            check(False, "a closed stream must raise")
            break
        except ValueError:
            pass
    a.release()
    del buf


def test_export_pending_while_context_closes():
    # Threads fill their arrays on their own streams and export them to NumPy at once
    # (stream=None on kDLCPU: a host wait through the context's kept stream) while one
    # thread closes the context: every element NumPy reads is the filled value.
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
                n = np.from_dlpack(arrays[i])
                if not (n == v).all():
                    bad.append((i, k, int((n != v).sum())))
                del n
        race(7, body)
        check(not bad, f"round {r}: a NumPy read saw unfinished stream work: {bad[:3]}")
        for g in arrays:
            g.release()
        for st in streams:
            st.close()


for f in [test_release_same_arrays, test_use_while_releasing, test_close_context_while_used,
          test_default_context_once, test_capsule_consumed_once, test_stream_close_while_used,
          test_export_pending_while_context_closes]:
    run(f)

print(f"threads: {'FAILED: ' + str(len(failures)) if failures else 'all passed'}")
sys.exit(1 if failures else 0)
