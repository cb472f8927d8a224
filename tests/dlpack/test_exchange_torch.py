"""gpuwrap <-> PyTorch through the DLPack C exchange API (issue 37), on a CUDA GPU (H200).

gpuwrap.from_dlpack(torch tensor) through torch.Tensor.__dlpack_c_exchange_api__ (checked by
gpuwrap._c.exchange_counts, so a silent fallback to __dlpack__ fails): values of every
element, read-only flags are kept (torch exports writable tensors), views and strides, a
tensor written on a torch side stream that is current at the import (a long kernel in front
of the write: the import orders that stream before gpuwrap's with an event), the caller's
stream, the deleter exactly once (the tensor's storage is freed only after the gpuwrap
array goes), 8 threads x 1000 imports. Prints (no assertion) the time per call of
gpuwrap.from_dlpack(torch tensor) and torch.from_dlpack(gpuwrap array), and whether
torch.from_dlpack used gpuwrap's exchange API (gpuwrap._c.exchange_produced).
Exit 0 all passed, 1 a failure, 77 skipped (no torch, no CUDA, or no exchange API in torch).

Run: GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python python3 tests/dlpack/test_exchange_torch.py
"""
import gc
import sys
import threading
import time
import traceback

import gpuwrap

try:
    import torch
    if not torch.cuda.is_available():
        torch = None
except Exception:
    torch = None

_c = gpuwrap._c
results = []


def check(name, fn):
    try:
        fn()
        results.append((name, "ok"))
    except Exception:
        traceback.print_exc()
        results.append((name, "FAIL"))


def fast(fn):
    """Run fn, which imports once; assert the exchange API (not __dlpack__) was used."""
    f0, b0 = _c.exchange_counts()
    r = fn()
    f1, b1 = _c.exchange_counts()
    assert (f1 - f0, b1 - b0) == (1, 0), f"exchange imports {f1 - f0}, fallbacks {b1 - b0}"
    return r


def test_values_views(ctx):
    for dtype in (torch.float32, torch.float64, torch.int32, torch.uint8, torch.bfloat16):
        t = (torch.rand(64, 96, device="cuda") * 100).to(dtype)
        for v in (t, t[3:60:3, 5:90:4], t.t(), t[::2]):
            a = fast(lambda: gpuwrap.from_dlpack(v, ctx))
            assert a.data_ptr == v.data_ptr() and a.shape == tuple(v.shape)
            assert a.strides == tuple(v.stride()) and not a.readonly
            out = torch.full(tuple(v.shape), 77, dtype=dtype, device="cuda")  # poisoned
            gpuwrap.from_dlpack(out, ctx).copy_from(a)
            assert torch.equal(out, v), "every element"
            a.release()


def test_deleter_once(ctx):
    t = torch.rand(1 << 18, device="cuda")
    before = torch.cuda.memory_allocated()
    a = fast(lambda: gpuwrap.from_dlpack(t, ctx))
    del t
    gc.collect()
    assert torch.cuda.memory_allocated() == before, "gpuwrap holds the storage"
    a.release()
    gc.collect()
    assert torch.cuda.memory_allocated() == before - 4 * (1 << 18), "the deleter ran once"


def test_side_stream(ctx):
    # A long kernel then the write on a torch side stream, current at the import: gpuwrap's
    # synchronous copy (legacy stream) must see the write without a host wait at import.
    n = 1 << 22
    big = torch.rand(4096, 4096, device="cuda")
    side = torch.cuda.Stream()
    for mine in (None, "caller"):
        t = torch.zeros(n, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            for _ in range(8):
                big = big @ big / 4096  # long work in front of the write
            t.fill_(3.0)
            s = None if mine is None else gpuwrap.ExternalStream(side.cuda_stream, ctx)
            a = fast(lambda: gpuwrap.from_dlpack(t, ctx, stream=s))
            assert not side.query(), "no host wait at import (the work is still queued)"
        out = torch.zeros(n, device="cuda")
        g = gpuwrap.from_dlpack(out, ctx)
        if s is None:
            g.copy_from(a)
        else:
            g.copy_from(a, stream=s)
            s.synchronize()
        torch.cuda.synchronize()
        assert bool((out == 3.0).all()), f"{int((out != 3.0).sum())} of {n} stale"
        a.release()
        g.release()


def test_threads(ctx):
    ts_ = [torch.rand(256, device="cuda") for _ in range(8)]
    errors = []

    def work(i):
        try:
            for _ in range(1000):
                gpuwrap.from_dlpack(ts_[i], ctx).release()
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    f0, b0 = _c.exchange_counts()
    th = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errors, errors
    f1, b1 = _c.exchange_counts()
    assert (f1 - f0, b1 - b0) == (8000, 0)


def timing(ctx):
    t = torch.rand(1024, device="cuda")
    g = ctx.alloc("device", "float32", (1024,))
    for name, fn in (("gpuwrap.from_dlpack(torch tensor)", lambda: gpuwrap.from_dlpack(t, ctx).release()),
                     ("torch.from_dlpack(gpuwrap array)", lambda: torch.from_dlpack(g))):
        for _ in range(1000):
            fn()
        best = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(10000):
                fn()
            best.append((time.perf_counter() - t0) / 10000 * 1e6)
        print(f"timing: {name}: {min(best):.2f} us per call (best of 5 x 10000)")
    p0 = _c.exchange_produced()
    torch.from_dlpack(g)
    used = _c.exchange_produced() > p0
    print(f"torch.from_dlpack uses gpuwrap's __dlpack_c_exchange_api__: {'yes' if used else 'no'}")


def main():
    if torch is None:
        print("skipped: no torch with CUDA")
        return 77
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        print(f"skipped: torch {torch.__version__} has no __dlpack_c_exchange_api__")
        return 77
    try:
        ctx = gpuwrap.Context("cuda", 0)
    except gpuwrap.GpuwrapError as e:
        print(f"skipped: no CUDA context ({e})")
        return 77
    for name, fn in (("values, views, strides", test_values_views), ("deleter once", test_deleter_once),
                     ("side stream current at import", test_side_stream),
                     ("8 threads x 1000 imports", test_threads)):
        check(name, lambda: fn(ctx))
    timing(ctx)
    for name, r in results:
        print(f"{r:5} {name}")
    return 0 if all(r == "ok" for _, r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
