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
Prints a result table. Exit 0 all passed, 1 a failure, 77 skipped (no torch and no cupy,
no GPU, or gpuwrap without its CUDA backend).

Run: GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python python3 tests/dlpack/test_torch_cupy.py
"""
import ctypes
import gc
import os
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
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


gpuwrap_to_consumers()
readonly_cases()
if torch is not None:
    torch_to_gpuwrap()
    side_stream_ordering()
if cupy is not None:
    cupy_to_gpuwrap()
round_trips()

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
