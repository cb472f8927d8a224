#!/usr/bin/env python3
"""Per-call cost of gpuwrap's Python hot path against its peers, side by side in one process.

  wrap:   gpuwrap ctx.wrap(device ptr) + release()
          vs CuPy  cupy.ndarray(..., MemoryPointer(UnownedMemory(ptr, nbytes, owner), 0))
          vs torch torch.as_tensor(an object with __cuda_array_interface__)
  dlpack: torch.from_dlpack(gpuwrap array) vs torch.from_dlpack(cupy array)
          (and cupy.from_dlpack(gpuwrap array) where CuPy is present)
Each figure is the median over REPEATS rounds of the mean of N calls; the candidates of a
group run round-robin (round r of every candidate before round r+1), so drifts in clock or
load hit them alike. What is missing (no GPU, no torch, no cupy) is skipped and said; the
exit status is 0 either way. Without a CUDA device it still times gpuwrap on the CPU
backend (host memory), for a figure to compare builds with.

Run: python3 tools/bench_python.py [--n 2000] [--repeats 31]
(the installed package, or PYTHONPATH=python GPUWRAP_LIB=build/lib/libgpuwrap.so)
"""
import argparse
import statistics
import sys
import time


def measure(cases, n, repeats):
    """cases: [(label, fn)] -> {label: median microseconds per call}."""
    for _, fn in cases:  # warm up: first-call costs (imports, caches, allocator pools)
        for _ in range(max(100, n // 10)):
            fn()
    samples = {label: [] for label, _ in cases}
    clock = time.perf_counter_ns
    for _ in range(repeats):
        for label, fn in cases:
            t0 = clock()
            for _ in range(n):
                fn()
            samples[label].append((clock() - t0) / n / 1000.0)
    return {label: statistics.median(v) for label, v in samples.items()}


def report(title, res, ref_label):
    print(f"\n{title}")
    ref = res.get(ref_label)
    for label, us in res.items():
        ratio = f"{us / ref:6.2f}x {ref_label.split()[0]}" if ref and label != ref_label else ""
        print(f"  {label:58s} {us:8.3f} us  {ratio}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="calls per round")
    ap.add_argument("--repeats", type=int, default=31, help="rounds (the median is reported)")
    args = ap.parse_args()
    import gpuwrap
    print(f"gpuwrap from {gpuwrap.__file__}; library {gpuwrap._c.library_path()}")
    print(f"Python {sys.version.split()[0]}; {args.repeats} rounds x {args.n} calls, median")

    try:
        import torch
        if not torch.cuda.is_available():
            print("torch: present, no CUDA device: skipped")
            torch = None
    except ImportError:
        print("torch: not installed: skipped")
        torch = None
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            cupy = None
    except Exception as e:  # ImportError, or a CuPy without a driver
        print(f"cupy: unavailable ({type(e).__name__}): skipped")
        cupy = None

    N = 1 << 20
    try:
        ctx = gpuwrap.Context("cuda", 0)
    except gpuwrap.GpuwrapError as e:
        print(f"gpuwrap CUDA context: {e.name}: CPU backend only")
        ctx = gpuwrap.Context("cpu")
        h = ctx.alloc("pinned", "float32", (N,))
        ptr, wrap = h.data_ptr, ctx.wrap
        res = measure([("gpuwrap ctx.wrap(pinned ptr) + release  [cpu backend]",
                        lambda: wrap(ptr, "float32", (N,)).release())], args.n, args.repeats)
        report("wrap + release (CPU backend, no peers)", res, "")
        h.release()
        return 0

    dev = "unknown GPU"
    if torch is not None:
        dev = torch.cuda.get_device_name(0)
    elif cupy is not None:
        dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"device: {dev}; torch {getattr(torch, '__version__', '-')}; cupy {getattr(cupy, '__version__', '-')}")

    base = ctx.alloc("device", "float32", (N,))
    ptr, nbytes, wrap = base.data_ptr, 4 * N, ctx.wrap
    shape = (N,)
    cases = [("gpuwrap ctx.wrap(device ptr) + release()", lambda: wrap(ptr, "float32", shape).release())]
    if cupy is not None:
        Unowned, MemPtr, ndarray, f32 = cupy.cuda.UnownedMemory, cupy.cuda.MemoryPointer, cupy.ndarray, cupy.float32
        cases.append(("cupy ndarray(UnownedMemory(ptr) + MemoryPointer)",
                      lambda: ndarray(shape, f32, MemPtr(Unowned(ptr, nbytes, base), 0))))
    else:
        print("cupy: skipped (UnownedMemory + ndarray)")
    if torch is not None:
        class CAI:
            __cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (ptr, False),
                                        "strides": None, "version": 3, "stream": None}
        cai, as_tensor = CAI(), torch.as_tensor
        cases.append(("torch.as_tensor(__cuda_array_interface__ object)", lambda: as_tensor(cai, device="cuda")))
    res = measure(cases, args.n, args.repeats)
    report("wrap of a device pointer (an array object made and dropped per call)", res,
           "cupy ndarray(UnownedMemory(ptr) + MemoryPointer)" if cupy is not None else cases[0][0])
    if cupy is not None:
        r = res[cases[0][0]] / res[cases[1][0]]
        print(f"  target gpuwrap <= CuPy: {r:.2f}x -> {'met' if r <= 1.0 else 'NOT met'}")

    if torch is not None:
        from_dlpack = torch.from_dlpack
        ga = ctx.alloc("device", "float32", (N,))
        cases = [("torch.from_dlpack(gpuwrap array)", lambda: from_dlpack(ga))]
        if cupy is not None:
            ca = cupy.empty(shape, dtype=cupy.float32)
            cases.append(("torch.from_dlpack(cupy array)", lambda: from_dlpack(ca)))
            cases.append(("cupy.from_dlpack(gpuwrap array)", lambda: cupy.from_dlpack(ga)))
        res = measure(cases, args.n, args.repeats)
        ref = "torch.from_dlpack(cupy array)" if cupy is not None else cases[0][0]
        report("DLPack hand-over to torch (a tensor made and dropped per call)", res, ref)
        if cupy is not None:
            r = res[cases[0][0]] / res[ref]
            print(f"  target gpuwrap <= CuPy: {r:.2f}x -> {'met' if r <= 1.0 else 'NOT met'}")
        ga.release()
    else:
        print("torch: skipped (from_dlpack hand-over)")
    base.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
