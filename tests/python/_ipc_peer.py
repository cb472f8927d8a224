"""The second process of the pool and VMM IPC tests (test_ipc_pool_vmm.py on the CPU model,
test_ipc_pool_vmm_gpu.py with PyTorch and cuda.core), and the helpers both sides share.

Run as a script it is the peer: a fresh interpreter started with subprocess (exec, never a
fork: on CUDA a forked child cannot use the runtime, and the descriptors must really travel
by pidfd_getfd), reading one JSON command a line on stdin and answering one JSON line on
stdout. Anything a library prints goes to stderr (the replies have a descriptor of their
own), so the protocol cannot be corrupted by a warning.

Commands:
  make   {spec, seed}: allocate memory as spec says (a CPU-model VMM segment or pool, a
         PyTorch tensor under expandable segments, a cuda.core IPC pool Buffer), wrap it
         (by address or through DLPack), fill every element with values(seed), export the
         array or its view: {handle (hex), dtype, shape, strides} or {skip: why}
  check  {seed, new}: every element of the memory made is values(seed) except the exported
         view's, which are values(new) (written by the importer): {ok, bad}
  open   {handle, seed, new, full_shape, view}: open a handle, check every element is
         values(seed) (of full_shape, at view, for a view's handle), write values(new)
         through it, release it: {ok, bad, kind, shape, dtype}
  quit   release everything and exit 0.

The values are drawn from the seed the parent chose (a fresh random one per run), so both
processes know every element without sending them.
"""
import ctypes
import json
import os
import select
import subprocess
import sys

import numpy as np

import gpuwrap

# docs/IPC.md, "Handle layout": the version byte, and version 3's memory kind
HANDLE_VERSION_AT, HANDLE_KIND_AT = 4, 239
KIND_POOL, KIND_VMM = 1, 2
TIMEOUT = 300  # seconds a peer may take to answer (the first CUDA context is slow)

# ---- values, and reading / writing any gpuwrap array ------------------------------------


def values(seed, dtype, shape):
    """The array of `shape` that `seed` stands for: every element random."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)


def to_host(ctx, a):
    """A NumPy copy of any array (device memory is not host-accessible), through a poisoned
    host array, so an element the copy misses shows."""
    h = ctx.alloc("host", a.dtype, a.shape)
    n = np.asarray(h)
    n[...] = np.array(0x5A, dtype=n.dtype)
    h.copy_from(a)
    out = n.copy()
    del n
    h.release()
    return out


def from_host(ctx, a, vals):
    """Write vals (a NumPy array of a's shape) into any array a."""
    h = ctx.alloc("host", a.dtype, a.shape)
    np.asarray(h)[...] = vals
    a.copy_from(h)
    h.release()


def index(view):
    """A view as [[start, stop, step], ...] (JSON) -> the tuple of slices that takes it,
    from a gpuwrap Array and from a NumPy array alike."""
    return tuple(slice(*s) for s in view) if view is not None else ()


# ---- the CPU model's VMM and pools (gpuwrap/cpu_testing.h), through ctypes ----------------

GW_CPU_HANDLE_POSIX_FD = 1
_cpu = None


def cpu_lib():
    """libgpuwrap (the one the extension uses) with the model's controls declared."""
    global _cpu
    if _cpu is None:
        lib = gpuwrap.load_library()
        vp, sz, st = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        for name, res, args in [
                ("gw_cpu_vmm_granularity", sz, []),
                ("gw_cpu_vmm_reserve", st, [sz, ctypes.POINTER(vp)]),
                ("gw_cpu_vmm_free", st, [vp, sz]),
                ("gw_cpu_vmm_create", st, [ctypes.c_int, sz, ctypes.c_uint, ctypes.POINTER(vp)]),
                ("gw_cpu_vmm_release", st, [vp]),
                ("gw_cpu_vmm_map", st, [vp, sz, vp]),
                ("gw_cpu_vmm_unmap", st, [vp, sz]),
                ("gw_cpu_pool_create", st, [ctypes.c_int, sz, ctypes.c_uint, ctypes.POINTER(vp)]),
                ("gw_cpu_pool_alloc", st, [vp, sz, ctypes.POINTER(vp)]),
                ("gw_cpu_pool_free", st, [vp]),
                ("gw_cpu_pool_destroy", st, [vp]),
                ("gw_cpu_vmm_live", sz, []),
                ("gw_cpu_ipc_pool_mappings", sz, []),
                ("gw_cpu_ipc_force_pidfd_errno", None, [ctypes.c_int])]:
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        _cpu = lib
    return _cpu


def _ok(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: status {status}: {cpu_lib().gw_last_error().decode()}")


class Segment:
    """A reservation of `slots` chunks of `chunk` bytes, the first `mapped` of them mapped
    back to back, each made with the POSIX-fd handle type: PyTorch's expandable segments."""

    def __init__(self, slots, mapped, chunk=None):
        lib = cpu_lib()
        self.cs = chunk or 2 * lib.gw_cpu_vmm_granularity()
        self.slots, self.mapped = slots, mapped
        base = ctypes.c_void_p()
        _ok(lib.gw_cpu_vmm_reserve(self.cs * slots, ctypes.byref(base)), "gw_cpu_vmm_reserve")
        self.base = base.value
        for k in range(mapped):
            c = ctypes.c_void_p()
            _ok(lib.gw_cpu_vmm_create(0, self.cs, GW_CPU_HANDLE_POSIX_FD, ctypes.byref(c)),
                "gw_cpu_vmm_create")
            _ok(lib.gw_cpu_vmm_map(self.base + k * self.cs, self.cs, c), "gw_cpu_vmm_map")
            _ok(lib.gw_cpu_vmm_release(c), "gw_cpu_vmm_release")  # the mapping holds it

    def free(self):
        lib = cpu_lib()
        for k in range(self.mapped):
            _ok(lib.gw_cpu_vmm_unmap(self.base + k * self.cs, self.cs), "gw_cpu_vmm_unmap")
        _ok(lib.gw_cpu_vmm_free(self.base, self.cs * self.slots), "gw_cpu_vmm_free")


class Pool:
    """An IPC pool of the model (a memfd, as cudaMemPoolCreate with the POSIX-fd type) and
    allocations from it; the first one, `pad` bytes, puts the next at an offset in the pool."""

    def __init__(self, max_bytes=1 << 22):
        lib = cpu_lib()
        p = ctypes.c_void_p()
        _ok(lib.gw_cpu_pool_create(0, max_bytes, GW_CPU_HANDLE_POSIX_FD, ctypes.byref(p)),
            "gw_cpu_pool_create")
        self.pool, self.ptrs = p.value, []

    def alloc(self, nbytes):
        q = ctypes.c_void_p()
        _ok(cpu_lib().gw_cpu_pool_alloc(self.pool, nbytes, ctypes.byref(q)), "gw_cpu_pool_alloc")
        self.ptrs.append(q.value)
        return q.value

    def free(self):
        lib = cpu_lib()
        for q in self.ptrs:
            _ok(lib.gw_cpu_pool_free(q), "gw_cpu_pool_free")
        _ok(lib.gw_cpu_pool_destroy(self.pool), "gw_cpu_pool_destroy")


def maps_naming(prefix):
    """Mappings of this process whose file name starts with prefix (memfds show as
    /memfd:NAME)."""
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if f"/memfd:{prefix}" in line)


def open_fds():
    return len(os.listdir("/proc/self/fd"))


PR_SET_PTRACER = 0x59616D61  # Yama's: let `pid` take this process's descriptors


def allow_ptracer(pid):
    """Let process `pid` take this process's descriptors with pidfd_getfd under Yama's
    ptrace_scope 1, which otherwise lets only an ancestor do so (docs/IPC.md). Without Yama
    the call fails with EINVAL and nothing is needed; returns whether it was set."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                           ctypes.c_ulong]
    return libc.prctl(PR_SET_PTRACER, pid, 0, 0, 0) == 0


# ---- making the memory a spec describes --------------------------------------------------


class Skip(Exception):
    """The memory cannot be made here (a missing package, an API this test does not know):
    the test skips with the reason."""


class Made:
    """Memory made for a test: `full` wraps all of it, `out` is what is exported (full or a
    view of it), `keep` what must stay alive meanwhile (the allocation's owners)."""

    def __init__(self, ctx, full, out, keep, free=None):
        self.ctx, self.full, self.out, self.keep, self._free = ctx, full, out, keep, free

    def release(self):
        for a in {id(self.out): self.out, id(self.full): self.full}.values():
            a.release()
        if self._free:
            self._free()
        self.keep = None


def make(ctx, spec, seed):
    """Allocate, wrap and fill what spec asks for:
      what:  'vmm' (CPU model: {slots, mapped, at (bytes from the segment's base)}),
             'pool' (CPU model: {pad: bytes allocated first}), 'torch' (a CUDA tensor; the
             process must run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True),
             'cuda_core' (an IPC-enabled DeviceMemoryResource's Buffer)
      wrap:  'address' (Context.wrap of the address) or 'dlpack' (gpuwrap.from_dlpack)
      dtype, shape, strides (elements; None: C order); view: [[start, stop, step], ...]"""
    dtype, shape = spec["dtype"], tuple(spec["shape"])
    strides = tuple(spec["strides"]) if spec.get("strides") else None
    item = np.dtype(dtype).itemsize
    what, wrap = spec["what"], spec.get("wrap", "address")
    keep, free = None, None
    if what == "vmm":
        seg = Segment(spec["slots"], spec["mapped"])
        full = ctx.wrap(seg.base + spec["at"], dtype, shape, strides)
        keep, free = seg, seg.free
    elif what == "pool":
        pool = Pool()
        if spec.get("pad"):
            pool.alloc(spec["pad"])
        ptr = pool.alloc(int(np.prod(shape)) * item)
        full = ctx.wrap(ptr, dtype, shape, strides)
        keep, free = pool, pool.free
    elif what == "torch":
        full, keep = _make_torch(ctx, spec, dtype, shape, wrap)
    elif what == "cuda_core":
        full, keep, free = _make_cuda_core(ctx, spec, dtype, shape, wrap)
    else:
        raise ValueError(f"unknown memory {what!r}")
    from_host(ctx, full, values(seed, full.dtype, full.shape))
    out = full[index(spec.get("view"))] if spec.get("view") is not None else full
    return Made(ctx, full, out, keep, free)


def _make_torch(ctx, spec, dtype, shape, wrap):
    try:
        import torch
    except ImportError as e:
        raise Skip(f"no PyTorch: {e}")
    if not torch.cuda.is_available():
        raise Skip("PyTorch sees no CUDA device")
    if "expandable_segments:True" not in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        raise ValueError("the peer must be started with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    t = torch.empty(shape, dtype=getattr(torch, dtype), device=f"cuda:{ctx.device}")
    torch.cuda.synchronize()
    snap = torch.cuda.memory_snapshot()
    # (a PyTorch whose snapshot does not say is left to the handle's kind, which the test checks)
    if any("is_expandable" in s for s in snap) and not any(s.get("is_expandable") for s in snap):
        raise Skip("PyTorch made no expandable segment under expandable_segments:True "
                   f"(torch {torch.__version__}): nothing of VMM memory to test")
    if wrap == "dlpack":  # the whole tensor; a view is taken as a gpuwrap view of it
        full = gpuwrap.from_dlpack(t, ctx)
    else:
        full = ctx.wrap(t.data_ptr(), dtype, tuple(t.shape), tuple(t.stride()))
    return full, t


def cuda_core_api():
    """(Device, DeviceMemoryResource, DeviceMemoryResourceOptions) of the installed
    cuda.core (top-level since 0.4, cuda.core.experimental before), or Skip naming why."""
    errors = []
    for mod in ("cuda.core", "cuda.core.experimental"):
        try:
            m = __import__(mod, fromlist=["Device"])
            return m.Device, m.DeviceMemoryResource, m.DeviceMemoryResourceOptions
        except (ImportError, AttributeError) as e:
            errors.append(f"{mod}: {e}")
    raise Skip("no cuda.core with Device, DeviceMemoryResource, DeviceMemoryResourceOptions ("
               + "; ".join(errors) + ")")


def _make_cuda_core(ctx, spec, dtype, shape, wrap):
    Device, DMR, DMROptions = cuda_core_api()
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    try:
        dev = Device(ctx.device)
        dev.set_current()
        mr = DMR(dev, DMROptions(ipc_enabled=True, max_size=max(1 << 26, 2 * nbytes)))
        if not getattr(mr, "is_ipc_enabled", True):
            raise Skip("cuda.core made a DeviceMemoryResource without IPC")
        pad = None
        try:
            stream = dev.default_stream
            if spec.get("pad"):  # an allocation first: the buffer is not at the pool's start
                pad = mr.allocate(spec["pad"], stream=stream)
            buf = mr.allocate(nbytes, stream=stream)
        except TypeError:  # an older allocate(size, stream=None)
            if spec.get("pad"):
                pad = mr.allocate(spec["pad"])
            buf = mr.allocate(nbytes)
        dev.sync()  # the allocation's stream work is done before gpuwrap uses it
        ptr = int(buf.handle)
    except Skip:
        raise
    except Exception as e:  # an API this test does not know: not gpuwrap's failure
        raise Skip(f"cuda.core's API differs from what this test expects: {type(e).__name__}: {e}")
    if wrap == "dlpack":
        if not hasattr(buf, "__dlpack__"):
            raise Skip("this cuda.core's Buffer has no __dlpack__")
        try:
            raw = gpuwrap.from_dlpack(buf, ctx)
        except (BufferError, TypeError) as e:
            raise Skip(f"cuda.core's Buffer.__dlpack__ is not usable here: {e}")
        # A Buffer is bytes (cuda.core exports it as 1-D 8-bit integers): exported as it
        # came, its values drawn for its own dtype.
        if raw.data_ptr != ptr or raw.nbytes != nbytes:
            raise AssertionError(f"from_dlpack(Buffer): {raw} is not the buffer's {nbytes} bytes at {ptr:#x}")
        full = raw
    else:
        full = ctx.wrap(ptr, dtype, shape)

    def free():
        buf.close()
        if pad is not None:
            pad.close()
        dev.sync()
        mr.close()
    return full, (mr, buf, pad), free


# ---- the peer's side of the conversation -------------------------------------------------


def check_made(made, spec, seed, new):
    """Every element of the whole memory: values(seed), the exported view's values(new)."""
    dtype = made.full.dtype
    want = values(seed, dtype, made.full.shape)
    if spec.get("view") is not None:
        want[index(spec["view"])] = values(new, dtype, made.out.shape)
    else:
        want = values(new, dtype, made.full.shape)
    got = to_host(made.ctx, made.full)
    return int(np.count_nonzero(got != want))


def open_and_check(ctx, handle, seed, new, full_shape=None, view=None):
    """Open a handle, check every element against values(seed) (of full_shape, taken at
    view, when the handle is of a view), write values(new)."""
    with ctx.ipc_open(bytes.fromhex(handle)) as b:
        want = values(seed, b.dtype, full_shape or b.shape)[index(view)]
        bad = int(np.count_nonzero(to_host(ctx, b) != want))
        from_host(ctx, b, values(new, b.dtype, b.shape))
        ctx.synchronize()
        return dict(ok=bad == 0, bad=bad, kind=b.kind, shape=list(b.shape), dtype=b.dtype)


def _serve(out):
    backend = os.environ.get("GW_PEER_BACKEND", "cpu")
    ctx = gpuwrap.Context(backend)
    made, spec = None, None
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        try:
            if op == "make":
                spec = cmd["spec"]
                made = make(ctx, spec, cmd["seed"])
                a = made.out
                r = dict(handle=bytes(a.ipc_handle()).hex(), dtype=a.dtype, shape=list(a.shape),
                         strides=list(a.strides), kind=a.kind)
            elif op == "check":
                bad = check_made(made, spec, cmd["seed"], cmd["new"])
                r = dict(ok=bad == 0, bad=bad)
            elif op == "open":
                r = open_and_check(ctx, cmd["handle"], cmd["seed"], cmd["new"], cmd.get("full_shape"),
                                   cmd.get("view"))
            elif op == "quit":
                if made is not None:
                    made.release()
                ctx.close()
                out.write(json.dumps(dict(ok=True)) + "\n")
                out.flush()
                return 0
            else:
                r = dict(error=f"unknown op {op!r}")
        except Skip as e:
            r = dict(skip=str(e))
        except gpuwrap.GpuwrapError as e:
            r = dict(error=f"{op}: {e}", status=e.name, detail=e.detail or "")
        except Exception as e:  # noqa: B902 (the parent shows it)
            r = dict(error=f"{op}: {type(e).__name__}: {e}")
        out.write(json.dumps(r) + "\n")
        out.flush()
    return 0


def main():
    out = os.fdopen(os.dup(1), "w")  # the replies' own descriptor
    os.dup2(2, 1)                     # whatever else is printed goes to stderr
    return _serve(out)


# ---- the test's side ---------------------------------------------------------------------


class PeerError(AssertionError):
    def __init__(self, reply):
        super().__init__(f"peer: {reply.get('error')}")
        self.reply = reply


class Peer:
    """The peer process, started with exec (subprocess), its environment this one's plus
    `env`."""

    def __init__(self, env=None):
        e = dict(os.environ)
        e.update(env or {})
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=e, text=True)

    @property
    def pid(self):
        return self.p.pid

    def ask(self, op, **kw):
        """Send a command; its reply (a dict). A peer that fails raises PeerError."""
        self.p.stdin.write(json.dumps(dict(op=op, **kw)) + "\n")
        self.p.stdin.flush()
        ready, _, _ = select.select([self.p.stdout], [], [], TIMEOUT)
        if not ready:
            self.p.kill()
            raise AssertionError(f"peer: no answer to {op} in {TIMEOUT} s")
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError(f"peer: exited with status {self.p.wait(30)} during {op}")
        r = json.loads(line)
        if "error" in r:
            raise PeerError(r)
        return r

    def close(self):
        """Ask the peer to release everything and exit; its exit status must be 0."""
        if self.p.poll() is None:
            try:
                self.ask("quit")
            finally:
                self.p.stdin.close()
                rc = self.p.wait(60)
        else:
            rc = self.p.returncode
        self.p.stdout.close()
        assert rc == 0, f"peer exited with status {rc}"

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(30)


if __name__ == "__main__":
    sys.exit(main())
