"""gpuwrap <-> PyTorch and gpuwrap <-> CuPy through DLPack, on a CUDA GPU (H200).

Both directions, device / pinned / managed memory (1 MiB each), versioned and legacy
capsules, the protocol (torch.from_dlpack, cupy.from_dlpack) and raw capsules
(torch.utils.dlpack.to_dlpack / from_dlpack), and stream ordering: a tensor written on a
torch side stream is read through gpuwrap only after the write (from_dlpack passes the
producer stream=1, the legacy default stream gpuwrap's synchronous calls run on). Every case checks the consumer sees the same
address (no copy), the values both ways, and that the producer's deleter runs exactly once.
Consumers refuse some device types (measured: neither imports kDLCUDAHost, only CuPy
imports kDLCUDAManaged, only PyTorch imports kDLCPU): pinned and managed memory are then
offered as kDLCUDA or kDLCPU (gpuwrap.Array.offer), still without a copy.
Streams (issue 14): torch/CuPy side streams with a long kernel in front of the write, both
directions (from_dlpack(x, stream=S) read on S; a gpuwrap fill on a gpuwrap stream read by
torch on its current stream), ExternalStream(torch / CuPy stream) for copy_from and fill,
the CUDA Array Interface consumed by torch.as_tensor and cupy.asarray with work pending,
and a CAI-only producer imported with its stream honoured.
Prints a result table. Exit 0 all passed, 1 a failure, 77 skipped (no torch and no cupy,
no GPU, or gpuwrap without its CUDA backend).

Run (source tree: the extension is compiled on first import into build/python-ext/):
  GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python python3 tests/dlpack/test_torch_cupy.py
or against the installed package (python3 -m pip install --no-index --no-build-isolation ./python):
  python3 tests/dlpack/test_torch_cupy.py
"""
import ctypes
import gc
import os
import sys
import traceback

# The source tree's package only when asked for (PYTHONPATH=python, as scripts/h200.sh
# does), else whatever `import gpuwrap` finds: the installed package.
import gpuwrap  # noqa: E402

try:
    import torch
    import torch.utils.dlpack
    if not torch.cuda.is_available():
        torch = None
except Exception:
    torch = None
try:
    import cupy
    if cupy.cuda.runtime.getDeviceCount() < 1:
        cupy = None
except Exception:
    cupy = None

if torch is None and cupy is None:
    print("SKIP: neither torch nor cupy with a CUDA device")
    sys.exit(77)
try:
    ctx = gpuwrap.Context("cuda", 0)
except gpuwrap.GpuwrapError as e:
    print(f"SKIP: no gpuwrap CUDA context: {e}")
    sys.exit(77)

N = (1 << 20) // 4  # 1 MiB of float32
rows = []  # (direction, memory, path, result, verdict)
failed = 0


def record(direction, memory, path, result, verdict):
    global failed
    rows.append((direction, memory, path, result, verdict))
    if verdict == "FAIL":
        failed += 1


def sync():
    if torch is not None:
        torch.cuda.synchronize()
    if cupy is not None:
        cupy.cuda.Device().synchronize()
    ctx.synchronize()


def read_back(a, idx=(0, N - 1)):
    """Elements of a gpuwrap array, read through a gpuwrap copy into host memory."""
    h = ctx.alloc("host", "float32", a.shape)
    h.copy_from(a)
    vals = [ctypes.c_float.from_address(h.host_ptr + 4 * i).value for i in idx]
    h.release()
    return vals


class Counter:
    def __init__(self):
        self.calls = 0

    def __call__(self, ptr):
        self.calls += 1


def gw_buffer(kind, value):
    """A 1 MiB gpuwrap array over `kind` memory, wrapped with a counting deleter (the
    allocation itself is held by `base`)."""
    base = ctx.alloc(kind, "float32", (N,))
    c = Counter()
    a = ctx.wrap(base.data_ptr, "float32", (N,), deleter=c)
    a.fill(value)
    return base, a, c


# What we expect each consumer to do with each device type (the 2026-11-30 baseline);
# a refusal that is expected is a pass, an acceptance of one is reported as news.
ACCEPTS = {
    "torch": {gpuwrap.kDLCUDA: True, gpuwrap.kDLCPU: True, gpuwrap.kDLCUDAHost: False,
              gpuwrap.kDLCUDAManaged: False},
    "cupy": {gpuwrap.kDLCUDA: True, gpuwrap.kDLCPU: False, gpuwrap.kDLCUDAHost: False,
             gpuwrap.kDLCUDAManaged: True},
}
DEVNAME = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 13: "kDLCUDAManaged"}


def consumer_ptr(x):
    return x.data_ptr() if torch is not None and isinstance(x, torch.Tensor) else x.data.ptr


def consumer_first(x):
    return float(x[0].item()) if torch is not None and isinstance(x, torch.Tensor) else float(x[0])


def consume(consumer, how, a, offer, versioned):
    """Run one consumer path; returns the consumer's array."""
    src = a.offer(offer) if offer else a
    if consumer == "torch":
        if how == "from_dlpack(obj)":
            return torch.from_dlpack(src)
        dev = src.__dlpack_device__()
        cap = a.__dlpack__(max_version=(1, 0) if versioned else None, dl_device=dev)
        return torch.utils.dlpack.from_dlpack(cap)
    return cupy.from_dlpack(src)


def gpuwrap_to_consumers():
    consumers = []
    if torch is not None:
        consumers += [("torch", "from_dlpack(obj)"), ("torch", "utils.from_dlpack(capsule)")]
    if cupy is not None:
        consumers += [("cupy", "from_dlpack(obj)")]
    for kind, value in (("device", 1.5), ("pinned", 2.5), ("managed", 3.5)):
        for offer in (None, "cuda", "cpu"):
            for consumer, how in consumers:
                for versioned in ((False, True) if "capsule" in how else (None,)):
                    label = f"{consumer}.{how}" + ({None: "", False: " legacy", True: " versioned"}[versioned])
                    base, a, c = gw_buffer(kind, value)
                    try:
                        try:
                            devtype = (a.offer(offer) if offer else a).__dlpack_device__()[0]
                        except BufferError as e:
                            ok = kind == "device" and offer == "cpu"
                            record("gpuwrap->" + consumer, kind, f"{label} as {offer}",
                                   f"offer refused: {str(e)[:60]}", "ok (no copy possible)" if ok else "FAIL")
                            continue
                        path = f"{label} as {DEVNAME.get(devtype, devtype)}"
                        try:
                            x = consume(consumer, how, a, offer, versioned)
                        except Exception as e:
                            if not ACCEPTS[consumer].get(devtype, False):
                                record("gpuwrap->" + consumer, kind, path,
                                       f"refused {type(e).__name__}", "ok (expected refusal)")
                            else:
                                record("gpuwrap->" + consumer, kind, path,
                                       f"{type(e).__name__}: {str(e)[:60]}", "FAIL")
                            continue
                        want_ptr = a.host_ptr if devtype == gpuwrap.kDLCPU else a.data_ptr
                        problems = []
                        if consumer_ptr(x) != want_ptr:
                            problems.append(f"address 0x{consumer_ptr(x):x} != 0x{want_ptr:x}")
                        if consumer_first(x) != value:
                            problems.append(f"x[0]={consumer_first(x)} != {value}")
                        x[N - 1] = 9.0  # the consumer writes, gpuwrap reads
                        sync()
                        if read_back(a)[1] != 9.0:
                            problems.append("consumer's write not seen by gpuwrap")
                        a.release()
                        gc.collect()
                        if c.calls != 0:
                            problems.append("deleter ran while the consumer held the memory")
                        del x
                        gc.collect()
                        sync()
                        if c.calls != 1:
                            problems.append(f"deleter calls {c.calls} != 1")
                        note = "" if ACCEPTS[consumer].get(devtype, False) else " (accepted: news vs baseline)"
                        record("gpuwrap->" + consumer, kind, path,
                               "; ".join(problems) or f"same ptr, values, deleter once{note}",
                               "FAIL" if problems else "ok")
                    except Exception as e:
                        traceback.print_exc()
                        record("gpuwrap->" + consumer, kind, label, f"{type(e).__name__}: {e}"[:80], "FAIL")
                    finally:
                        a.release()
                        base.release()


def readonly_cases():
    base, a0, c = gw_buffer("device", 4.5)
    ro = ctx.wrap(a0.data_ptr, "float32", (N,), readonly=True, deleter=c)
    a0.release()
    c.calls = 0  # a0's wrap deleter is `c` too: count only ro's from here
    try:
        ro.__dlpack__()
        record("gpuwrap->any", "device", "legacy export of read-only", "exported", "FAIL")
    except BufferError:
        record("gpuwrap->any", "device", "legacy export of read-only", "BufferError", "ok")
    for consumer in (["torch"] if torch is not None else []) + (["cupy"] if cupy is not None else []):
        try:
            x = torch.from_dlpack(ro) if consumer == "torch" else cupy.from_dlpack(ro)
            same = consumer_ptr(x) == ro.data_ptr
            del x
            record("gpuwrap->" + consumer, "device", "read-only versioned",
                   f"imported (consumer may ignore READ_ONLY), same ptr {same}", "ok" if same else "FAIL")
        except Exception as e:
            record("gpuwrap->" + consumer, "device", "read-only versioned",
                   f"refused {type(e).__name__}: {str(e)[:50]}", "ok (info)")
    ro.release()
    gc.collect()
    sync()
    record("gpuwrap->any", "device", "read-only: deleter", f"calls {c.calls}", "ok" if c.calls == 1 else "FAIL")
    base.release()


def torch_to_gpuwrap():
    cases = [("device", lambda: torch.full((N,), 5.5, device="cuda")),
             ("pinned", lambda: torch.full((N,), 6.5).pin_memory()),
             ("cpu pageable", lambda: torch.full((N,), 7.5))]
    for mem, make in cases:
        for path in ("from_dlpack(tensor)", "to_dlpack capsule (legacy)", "__dlpack__ versioned"):
            try:
                t = make()
                ptr, value = t.data_ptr(), float(t[0].item())
                sync()
                before = torch.cuda.memory_allocated()
                if path.startswith("from"):
                    g = gpuwrap.from_dlpack(t, ctx)
                elif "legacy" in path:
                    g = gpuwrap.from_dlpack(torch.utils.dlpack.to_dlpack(t), ctx)
                else:
                    g = gpuwrap.from_dlpack(t.__dlpack__(max_version=(1, 0)), ctx)
                problems = []
                gp = g.data_ptr if mem == "device" else g.host_ptr
                if gp != ptr:
                    problems.append(f"address 0x{gp or 0:x} != 0x{ptr:x}")
                want_kind = {"device": "device", "pinned": "pinned", "cpu pageable": "pinned"}[mem]
                if g.kind != want_kind:
                    problems.append(f"kind {g.kind} != {want_kind}")
                if read_back(g)[0] != value:
                    problems.append("values differ")
                g.fill(8.0)  # gpuwrap writes, torch reads
                if float(t[N - 1].item()) != 8.0:
                    problems.append("gpuwrap's write not seen by torch")
                del t
                gc.collect()
                if mem == "device":  # the tensor's memory lives until gpuwrap lets go
                    sync()
                    if torch.cuda.memory_allocated() != before:
                        problems.append("torch freed the memory while gpuwrap held it")
                g.release()
                gc.collect()
                sync()
                if mem == "device" and torch.cuda.memory_allocated() != before - 4 * N:
                    problems.append(f"deleter: memory_allocated {torch.cuda.memory_allocated()} "
                                    f"!= {before - 4 * N}")
                record("torch->gpuwrap", mem, path,
                       "; ".join(problems) or f"same ptr, kind {want_kind}, values, freed once",
                       "FAIL" if problems else "ok")
            except Exception as e:
                traceback.print_exc()
                record("torch->gpuwrap", mem, path, f"{type(e).__name__}: {e}"[:80], "FAIL")


def cupy_to_gpuwrap():
    pool = cupy.get_default_memory_pool()
    cases = [("device", lambda: cupy.full((N,), 5.5, dtype=cupy.float32))]

    def managed():
        m = cupy.cuda.malloc_managed(4 * N)
        x = cupy.ndarray((N,), dtype=cupy.float32, memptr=m)
        x.fill(6.5)
        return x
    cases.append(("managed", managed))
    for mem, make in cases:
        for path in ("from_dlpack(array)", "__dlpack__ legacy", "__dlpack__ versioned"):
            try:
                x = make()
                ptr, value = x.data.ptr, float(x[0])
                sync()
                used = pool.used_bytes()
                if path.startswith("from"):
                    g = gpuwrap.from_dlpack(x, ctx)
                elif "legacy" in path:
                    g = gpuwrap.from_dlpack(x.__dlpack__(), ctx)
                else:
                    g = gpuwrap.from_dlpack(x.__dlpack__(max_version=(1, 0)), ctx)
                problems = []
                if g.data_ptr != ptr:
                    problems.append(f"address 0x{g.data_ptr or 0:x} != 0x{ptr:x}")
                if g.kind != mem:
                    problems.append(f"kind {g.kind} != {mem}")
                if read_back(g)[0] != value:
                    problems.append("values differ")
                g.fill(8.0)
                if float(x[N - 1]) != 8.0:
                    problems.append("gpuwrap's write not seen by cupy")
                del x
                gc.collect()
                if mem == "device" and pool.used_bytes() != used:
                    problems.append("cupy freed the memory while gpuwrap held it")
                g.release()
                gc.collect()
                if mem == "device" and pool.used_bytes() != used - 4 * N:
                    problems.append(f"deleter: pool used {pool.used_bytes()} != {used - 4 * N}")
                record("cupy->gpuwrap", mem, path,
                       "; ".join(problems) or "same ptr, kind, values, freed once",
                       "FAIL" if problems else "ok")
            except Exception as e:
                traceback.print_exc()
                record("cupy->gpuwrap", mem, path, f"{type(e).__name__}: {e}"[:80], "FAIL")


def round_trips():
    if torch is None:
        return
    base, a, c = gw_buffer("device", 1.25)
    try:
        t = torch.from_dlpack(a)
        g = gpuwrap.from_dlpack(t, ctx)  # torch re-exports what it imported from gpuwrap
        same = g.data_ptr == a.data_ptr
        a.release()
        del t
        gc.collect()
        early = c.calls
        g.release()
        gc.collect()
        sync()
        ok = same and early == 0 and c.calls == 1
        record("gpuwrap->torch->gpuwrap", "device", "from_dlpack both ways",
               f"same ptr {same}, deleter {early} then {c.calls}", "ok" if ok else "FAIL")
    except Exception as e:
        traceback.print_exc()
        record("gpuwrap->torch->gpuwrap", "device", "from_dlpack both ways", str(e)[:80], "FAIL")
    finally:
        a.release()
        base.release()


def side_stream_ordering():
    """A torch tensor written on a side stream behind a long kernel, imported with
    gpuwrap.from_dlpack and read through gpuwrap (a synchronous copy, on the legacy default
    stream): every element must be the written value. from_dlpack passes stream=1, so torch
    makes that stream wait for its current stream (the side stream) before it hands out
    the capsule; a capsule taken with stream=None is not so ordered (PyTorch 2.11)."""
    s = torch.cuda.Stream()  # torch's streams are non-blocking: no implicit legacy sync
    for path in ("from_dlpack(tensor)", "capsule taken with stream=None (hazard, info)"):
        try:
            x = torch.zeros(N, device="cuda")
            torch.cuda.synchronize()
            with torch.cuda.stream(s):
                torch.cuda._sleep(1 << 30)  # ~0.5 s of spinning on an H200, then the write
                x.fill_(5.0)
                # Imported while the side stream is torch's current stream, as a user would
                # right after writing the tensor: that is the stream torch orders.
                if path.startswith("from"):
                    g = gpuwrap.from_dlpack(x, ctx)
                else:
                    g = gpuwrap.from_dlpack(x.__dlpack__(stream=None), ctx)
            h = ctx.alloc("host", "float32", (N,))
            h.copy_from(g)
            vals = (ctypes.c_float * N).from_address(h.host_ptr)
            bad = sum(1 for v in vals if v != 5.0)
            h.release()
            g.release()
            torch.cuda.synchronize()
            del x
            if path.startswith("from"):
                record("torch->gpuwrap", "device", "side stream: " + path,
                       f"{bad} of {N} elements != 5.0" if bad else "every element 5.0 (ordered)",
                       "FAIL" if bad else "ok")
            else:
                record("torch->gpuwrap", "device", "side stream: " + path,
                       f"{bad} of {N} elements not yet written" if bad else "ordered anyway",
                       "ok (info)")
        except Exception as e:
            traceback.print_exc()
            record("torch->gpuwrap", "device", "side stream: " + path, f"{type(e).__name__}: {e}"[:80],
                   "FAIL" if path.startswith("from") else "ok (info)")


# ---- streams (issue 14): borrowed streams, the DLPack and CAI stream protocols ----------
# Every case puts a long kernel (torch.cuda._sleep, ~0.5 s on an H200, or a CuPy spin
# kernel) in front of the write on a non-blocking stream, so a missing wait reads the old
# values instead of passing by luck; every element is checked. "pending after" checks that
# the export or import returned while the work was still queued: ordered on the device,
# not by a host synchronisation.
SLEEP = 1 << 30
_spin_kernel = None


def spin(handle, cycles=SLEEP):
    """Queue a long-running kernel on the native stream `handle` (not 0)."""
    global _spin_kernel
    if torch is not None:
        with torch.cuda.stream(torch.cuda.ExternalStream(handle)):
            torch.cuda._sleep(cycles)
        return
    if _spin_kernel is None:
        _spin_kernel = cupy.RawKernel(r"""extern "C" __global__ void gw_spin(long long n) {
            long long t0 = clock64(); while (clock64() - t0 < n) {} }""", "gw_spin")
    with cupy.cuda.ExternalStream(handle):
        _spin_kernel((1,), (1,), (cupy.int64(cycles),))


def pending(a):
    return int(a.pending())


def all_equal(a, value):
    """Every element of gpuwrap array a, read with a synchronous gpuwrap copy (after the
    caller's synchronisation), == value: (bad count)."""
    h = ctx.alloc("host", "float32", a.shape)
    h.copy_from(a)
    vals = (ctypes.c_float * a.size).from_address(h.host_ptr)
    bad = sum(1 for v in vals if v != value)
    h.release()
    return bad


def stream_case(direction, path, fn):
    try:
        problems = fn()
        record(direction, "device", path, "; ".join(problems) or "every element right",
               "FAIL" if problems else "ok")
    except Exception as e:
        traceback.print_exc()
        record(direction, "device", path, f"{type(e).__name__}: {e}"[:80], "FAIL")
    finally:
        sync()


def torch_side_stream_to_gpuwrap_stream():
    """torch writes on a side stream behind a long kernel; gpuwrap imports with
    from_dlpack(x, stream=S) and reads on S (a gpuwrap stream, or a borrowed torch
    stream): torch makes S wait for its current stream (the side stream)."""
    side = torch.cuda.Stream()  # non-blocking
    for label in ("gpuwrap Stream", "ExternalStream(torch.cuda.Stream)"):
        def case():
            consumer_torch = torch.cuda.Stream()
            s = ctx.stream() if label.startswith("gpuwrap") else gpuwrap.ExternalStream(consumer_torch, ctx)
            problems = []
            if not label.startswith("gpuwrap") and s.handle != consumer_torch.cuda_stream:
                problems.append(f"borrowed handle {s.handle:#x} != {consumer_torch.cuda_stream:#x}")
            x = torch.zeros(N, device="cuda")
            out = ctx.alloc("device", "float32", (N,))
            out.fill(-1.0)
            torch.cuda.synchronize()
            with torch.cuda.stream(side):
                torch.cuda._sleep(SLEEP)
                x.fill_(5.0)
                g = gpuwrap.from_dlpack(x, ctx, stream=s)  # torch: s waits for `side`
            out.copy_from(g, stream=s)  # device to device: queued on s
            if pending(out) != 1:
                problems.append("the import or the copy synchronized the host (nothing pending)")
            s.synchronize()
            bad = all_equal(out, 5.0)
            if bad:
                problems.append(f"{bad} of {N} elements read before torch's write")
            g.release()
            out.release()
            s.close()
            return problems
        stream_case("torch->gpuwrap", f"side stream, from_dlpack(stream={label})", case)


def cupy_side_stream_to_gpuwrap_stream():
    cs = cupy.cuda.Stream(non_blocking=True)

    def case():
        s = ctx.stream()
        x = cupy.zeros(N, dtype=cupy.float32)
        out = ctx.alloc("device", "float32", (N,))
        out.fill(-1.0)
        cupy.cuda.Device().synchronize()
        spin(cs.ptr)
        with cs:
            x.fill(6.0)
            g = gpuwrap.from_dlpack(x, ctx, stream=s)  # CuPy: s waits for cs
        out.copy_from(g, stream=s)
        problems = [] if pending(out) == 1 else ["the import synchronized the host"]
        s.synchronize()
        bad = all_equal(out, 6.0)
        if bad:
            problems.append(f"{bad} of {N} elements read before cupy's write")
        g.release()
        out.release()
        s.close()
        return problems
    stream_case("cupy->gpuwrap", "side stream, from_dlpack(stream=gpuwrap Stream)", case)


def gpuwrap_stream_to_torch():
    """gpuwrap fills on its own stream behind a long kernel; torch imports on its current
    stream (the default one, and a non-blocking side stream): gpuwrap's __dlpack__ makes
    torch's stream wait for the fill (gw_array_wait), without a host wait."""
    for where in ("default stream", "side stream"):
        def case():
            s = ctx.stream()
            a = ctx.alloc("device", "float32", (N,))
            a.fill(0.0)
            spin(s.handle)
            a.fill(7.0, stream=s)
            problems = []
            ts = torch.cuda.Stream() if where == "side stream" else torch.cuda.current_stream()
            with torch.cuda.stream(ts):
                t = torch.from_dlpack(a)  # torch passes its current stream to __dlpack__
                if pending(a) != 1:
                    problems.append("__dlpack__ synchronized the host (nothing pending after it)")
                y = t.clone()  # on ts: must run after gpuwrap's fill
            ts.synchronize()
            bad = int((y != 7.0).sum().item())
            if bad:
                problems.append(f"{bad} of {N} elements read before gpuwrap's fill")
            if t.data_ptr() != a.data_ptr:
                problems.append("not the same memory")
            del t, y
            a.release()
            s.close()
            return problems
        stream_case("gpuwrap->torch", f"fill(stream=gpuwrap) -> torch.from_dlpack on its {where}", case)


def external_torch_stream_copy():
    """ExternalStream(torch.cuda.Stream): gpuwrap's copy_from queued on torch's stream,
    after torch's own long kernel there; closing the borrow leaves torch's stream usable."""
    def case():
        ts = torch.cuda.Stream()
        e = gpuwrap.ExternalStream(ts, ctx)
        problems = [] if e.handle == ts.cuda_stream else [f"handle {e.handle:#x} != {ts.cuda_stream:#x}"]
        src = ctx.alloc("device", "float32", (N,))
        dst = ctx.alloc("device", "float32", (N,))
        src.fill(3.0)
        dst.fill(0.0)
        with torch.cuda.stream(ts):
            torch.cuda._sleep(SLEEP)
        dst.copy_from(src, stream=e)
        if pending(dst) != 1:
            problems.append("copy_from(stream=) did not stay queued behind torch's kernel")
        ts.synchronize()  # torch's own synchronize waits for gpuwrap's copy: the same stream
        bad = all_equal(dst, 3.0)
        if bad:
            problems.append(f"{bad} of {N} elements not copied")
        e.close()
        with torch.cuda.stream(ts):
            z = torch.ones(4, device="cuda") * 2  # the native stream is alive after the close
        ts.synchronize()
        if z.sum().item() != 8.0:
            problems.append("torch's stream broken after the borrow was closed")
        cur = gpuwrap.ExternalStream(torch.cuda.current_stream(), ctx)
        if cur.handle != torch.cuda.current_stream().cuda_stream:
            problems.append("ExternalStream(torch.cuda.current_stream()) handle differs")
        cur.close()
        src.release()
        dst.release()
        return problems
    stream_case("torch stream->gpuwrap", "ExternalStream(torch.cuda.Stream) for copy_from", case)
    if cupy is not None:
        def cupy_case():
            cs = cupy.cuda.Stream(non_blocking=True)
            e = gpuwrap.ExternalStream(cs, ctx)
            problems = [] if e.handle == cs.ptr else [f"handle {e.handle:#x} != {cs.ptr:#x}"]
            a = ctx.alloc("device", "float32", (N,))
            spin(cs.ptr)
            a.fill(2.0, stream=e)
            cs.synchronize()
            bad = all_equal(a, 2.0)
            if bad:
                problems.append(f"{bad} of {N} elements not filled")
            e.close()
            a.release()
            return problems
        stream_case("cupy stream->gpuwrap", "ExternalStream(cupy.cuda.Stream) for fill", cupy_case)


def cuda_array_interface_export():
    """Array.__cuda_array_interface__ consumed by torch.as_tensor and cupy.asarray, with a
    gpuwrap fill pending on a non-blocking stream (a borrowed torch/CuPy side stream)."""
    def check_dict(a, cai, want_stream):
        problems = []
        if cai["version"] != 3 or cai["typestr"] != "<f4" or cai["shape"] != (N,):
            problems.append(f"header {cai['version']} {cai['typestr']} {cai['shape']}")
        if cai["data"] != (a.data_ptr, False) or cai["strides"] is not None:
            problems.append(f"data {cai['data']} strides {cai['strides']}")
        if want_stream and not (isinstance(cai["stream"], int) and cai["stream"] > 2):
            problems.append(f"stream {cai['stream']!r} with work pending")
        if not want_stream and cai["stream"] is not None:
            problems.append(f"stream {cai['stream']!r} with nothing pending")
        return problems

    consumers = []
    if torch is not None:
        consumers += [("torch.as_tensor", "default stream"), ("torch.as_tensor", "side stream")]
    if cupy is not None:
        consumers += [("cupy.asarray", "side stream")]
    for consumer, where in consumers:
        def case():
            if torch is not None:
                side = torch.cuda.Stream()
                side_handle = side.cuda_stream
            else:
                side = cupy.cuda.Stream(non_blocking=True)
                side_handle = side.ptr
            e = gpuwrap.ExternalStream(side_handle, ctx)
            a = ctx.alloc("device", "float32", (N,))
            a.fill(0.0)
            problems = check_dict(a, a.__cuda_array_interface__, False)
            spin(side_handle)
            a.fill(9.0, stream=e)  # pending on a non-blocking stream
            problems += check_dict(a, a.__cuda_array_interface__, True)
            if pending(a) != 1:
                problems.append("__cuda_array_interface__ synchronized the host")
            if consumer.startswith("torch"):
                ts = torch.cuda.Stream() if where == "side stream" else torch.cuda.current_stream()
                with torch.cuda.stream(ts):
                    t = torch.as_tensor(a, device="cuda")
                    y = t.clone()
                ts.synchronize()
                ptr = t.data_ptr()
                bad = int((y != 9.0).sum().item())
            else:
                cs = cupy.cuda.Stream(non_blocking=True)
                with cs:
                    t = cupy.asarray(a)  # CuPy synchronizes with the CAI's stream (by default)
                    y = t.copy()
                cs.synchronize()
                ptr = t.data.ptr
                bad = int((y != 9.0).sum())
            if ptr != a.data_ptr:
                problems.append("not the same memory")
            if bad:
                problems.append(f"{bad} of {N} elements read before gpuwrap's fill")
            del t, y
            e.close()
            a.release()
            return problems
        label = f"__cuda_array_interface__ -> {consumer} on its {where}"
        if consumer.startswith("torch") and where == "side stream":
            # Correct only if torch honours the interface's `stream` (a consumer must);
            # torch's own export is v2 without one, so this records what torch does.
            try:
                problems = case()
                record("gpuwrap->torch", "device", label + " (info)",
                       "; ".join(problems) or "every element right", "ok (info)")
            except Exception as ex:
                record("gpuwrap->torch", "device", label + " (info)", f"{type(ex).__name__}: {ex}"[:80],
                       "ok (info)")
            finally:
                sync()
        else:
            stream_case("gpuwrap->" + consumer.split(".")[0], label, case)

    def not_on_host():
        h = ctx.alloc("host", "float32", (4,))
        problems = [] if not hasattr(h, "__cuda_array_interface__") else ["a host-only array has the CAI"]
        v = ctx.alloc("device", "float32", (N,))
        w = v.view((0,), (N // 2,), (2,))
        cai = w.__cuda_array_interface__
        if cai["strides"] != (8,):
            problems.append(f"strided view: strides {cai['strides']} (bytes) != (8,)")
        h.release()
        w.release()
        v.release()
        return problems
    stream_case("gpuwrap->any", "CAI: host-only array has none; strides in bytes", not_on_host)


class CAIOnly:
    """A producer with only the CUDA Array Interface (as Numba and older CuPy)."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def cuda_array_interface_import():
    """from_dlpack of a CAI-only object made from a torch tensor written on a side stream
    behind a long kernel; the interface names that stream (torch's own CAI is v2, so the
    test adds version 3 and the stream): gpuwrap waits for it before reading."""
    import weakref

    def case():
        side = torch.cuda.Stream()
        x = torch.zeros(N, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(SLEEP)
            x.fill_(4.0)
        cai = dict(x.__cuda_array_interface__, version=3, stream=side.cuda_stream)
        prod = CAIOnly(cai)
        alive = weakref.ref(prod)
        g = gpuwrap.from_dlpack(prod, ctx)  # not DLPack: CAIOnly has no __dlpack__
        problems = []
        if g.data_ptr != x.data_ptr() or g.kind != "device":
            problems.append(f"address/kind {g.kind}")
        bad = all_equal(g, 4.0)  # a synchronous copy: not ordered with torch's side stream
        if bad:
            problems.append(f"{bad} of {N} elements read before torch's write")
        del prod
        gc.collect()
        if alive() is None:
            problems.append("the producer was let go while gpuwrap held its memory")
        g.release()
        gc.collect()
        if alive() is not None:
            problems.append("the producer was kept after the last gpuwrap reference went")
        return problems
    stream_case("torch CAI->gpuwrap", "CAI-only object, v3 stream = torch side stream", case)


gpuwrap_to_consumers()
readonly_cases()
if torch is not None:
    torch_to_gpuwrap()
    side_stream_ordering()
if cupy is not None:
    cupy_to_gpuwrap()
round_trips()
if torch is not None:
    torch_side_stream_to_gpuwrap_stream()
    gpuwrap_stream_to_torch()
    external_torch_stream_copy()
    cuda_array_interface_import()
if cupy is not None:
    cupy_side_stream_to_gpuwrap_stream()
cuda_array_interface_export()

versions = []
if torch is not None:
    versions.append(f"torch {torch.__version__}")
if cupy is not None:
    versions.append(f"cupy {cupy.__version__}")
print(f"gpuwrap DLPack interop on {torch.cuda.get_device_name(0) if torch is not None else 'cuda:0'}; "
      + ", ".join(versions))
w = [max(len(str(r[i])) for r in rows) for i in range(5)]
for r in rows:
    print("  ".join(str(v).ljust(w[i]) for i, v in enumerate(r)))
print(f"{len(rows)} cases, {failed} failed")
sys.exit(1 if failed else 0)
