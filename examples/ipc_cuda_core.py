"""A cuda.core IPC-enabled memory resource's Buffer shared with another process through gpuwrap.

cuda.core's DeviceMemoryResource with ipc_enabled=True is a stream-ordered memory pool
made with a POSIX file descriptor as its shareable handle (cudaMemPoolCreate). gpuwrap
exports a Buffer of it as a version-3 handle naming the pool's descriptor and the buffer's
export data (cudaMemPoolExportPointer); the other process takes the descriptor with
pidfd_open + pidfd_getfd, imports the pool once and then the pointer (docs/IPC.md, "Pool
memory"). No cuda.core is needed on the consumer's side: any gpuwrap user opens it.

  1. The consumer (this process, run as `python3 examples/ipc_cuda_core.py`) starts the
     producer: this file again, with exec (subprocess).
  2. The producer allocates a Buffer from an IPC-enabled DeviceMemoryResource, at an offset
     in its pool (another buffer first), wraps it by address (Context.wrap of
     int(buf.handle)) as float32, fills it with random values from a seed the consumer
     chose, exports it (Array.ipc_handle()) and prints the handle's 256 bytes as hex.
  3. The consumer opens it (Context.ipc_open), checks every value against the same seed's,
     writes new values (their negation) and releases it.
  4. The producer checks every value of its buffer: the consumer's.

The producer is the child because Yama's ptrace_scope 1 (Ubuntu's default) lets only an
ancestor take a process's descriptors (see examples/ipc_torch_expandable.py). cuda.core's
API has moved between releases (cuda.core.experimental before 0.4): an API this example
does not know is a SKIP naming it, as is a missing GPU, cuda.core or NumPy.

Run with the installed package (README, "Python"), in the environment that has cuda.core:
  python3 examples/ipc_cuda_core.py
or from the source tree:
  GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python python3 examples/ipc_cuda_core.py
Exit status 0 when every value checked out, 1 on a mismatch or failure, 77 skipped.
"""
import os
import secrets
import subprocess
import sys

import gpuwrap

N = 1 << 22  # float32 elements: 16 MiB


def skip(why):
    print(f"SKIP: examples/ipc_cuda_core.py: {why}", file=sys.stderr)
    sys.exit(77)


def values(np, seed):
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


def to_host(ctx, np, a):
    h = ctx.alloc("host", a.dtype, a.shape)
    h.copy_from(a)
    out = np.asarray(h).copy()
    h.release()
    return out


def from_host(ctx, np, a, v):
    h = ctx.alloc("host", a.dtype, a.shape)
    np.asarray(h)[...] = v
    a.copy_from(h)
    h.release()


def cuda_core():
    """(Device, DeviceMemoryResource, DeviceMemoryResourceOptions) of the installed cuda.core."""
    for mod in ("cuda.core", "cuda.core.experimental"):
        try:
            m = __import__(mod, fromlist=["Device"])
            return m.Device, m.DeviceMemoryResource, m.DeviceMemoryResourceOptions
        except (ImportError, AttributeError):
            pass
    return None


def producer(seed):
    """The child: allocate, wrap, fill, export; check the consumer's writes. Exit 77 (and
    no handle) where cuda.core's API is not the one this example knows."""
    import numpy as np
    ctx = gpuwrap.Context("cuda")
    Device, DMR, DMROptions = cuda_core()
    try:
        dev = Device(ctx.device)
        dev.set_current()
        mr = DMR(dev, DMROptions(ipc_enabled=True, max_size=1 << 26))
        stream = dev.default_stream
        first = mr.allocate(3 << 20, stream=stream)  # so the buffer is not at the pool's start
        buf = mr.allocate(4 * N, stream=stream)
        dev.sync()  # the allocations' stream work is done before gpuwrap uses the buffer
        ptr = int(buf.handle)
    except Exception as e:  # noqa: B902 (an API this example does not know)
        print(f"cuda.core's API differs from this example's: {type(e).__name__}: {e}", file=sys.stderr)
        return 77
    a = ctx.wrap(ptr, "float32", (N,))  # by address: gpuwrap finds the pool allocation
    want = values(np, seed)
    from_host(ctx, np, a, want)
    print(bytes(a.ipc_handle()).hex(), flush=True)
    print(f"producer: {buf} exported as {a}", file=sys.stderr)
    sys.stdin.readline()  # the consumer is done (its array released)
    ok = bool((to_host(ctx, np, a) == -want).all())
    print(f"producer: every value is the consumer's: {ok}", file=sys.stderr)
    print("ok" if ok else "mismatch", flush=True)
    a.release()
    buf.close()  # after every importer released it (CUDA's rule)
    first.close()
    dev.sync()
    mr.close()
    return 0


def consumer():
    try:
        import numpy as np
    except ImportError:
        skip(f"{sys.executable} has no NumPy")
    if cuda_core() is None:
        skip(f"{sys.executable} has no cuda.core with DeviceMemoryResource(Options)")
    try:
        ctx = gpuwrap.Context("cuda")
    except gpuwrap.GpuwrapError as e:
        skip(f"no gpuwrap CUDA backend or device here ({e})")

    seed = secrets.randbits(63)
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--producer", str(seed)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().strip()
        if not line:
            rc = p.wait()
            if rc == 77:
                skip("the producer could not allocate through this cuda.core (its message above)")
            print(f"FAIL: the producer exited ({rc}) without a handle")
            return 1
        h = gpuwrap.IpcHandle(bytes.fromhex(line))
        if bytes(h)[4] != 3 or bytes(h)[239] != 1:  # docs/IPC.md, "Handle layout"
            print("FAIL: not a pool handle (version 3, kind 1)")
            return 1
        try:
            b = ctx.ipc_open(h)
        except gpuwrap.GpuwrapError as e:
            if e.name == "GW_ENOTSUP" and "pidfd" in (e.detail or ""):
                skip(f"this system refuses to pass the pool's descriptor: {e}")
            raise
        want = values(np, seed)
        same = bool((to_host(ctx, np, b) == want).all())
        print(f"consumer: opened {b}, every value matches: {same}")
        from_host(ctx, np, b, -want)
        ctx.synchronize()
        b.release()  # the pointer is freed here; the imported pool goes with its last pointer
        p.stdin.write("done\n")
        p.stdin.flush()
        verdict = p.stdout.readline().strip()
        rc = p.wait(120)
        print(f"consumer: the producer says {verdict!r}, exit status {rc}")
        return 0 if same and verdict == "ok" and rc == 0 else 1
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--producer":
        sys.exit(producer(int(sys.argv[2])))
    sys.exit(consumer())
