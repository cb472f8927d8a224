"""A PyTorch tensor of expandable segments shared with another process through gpuwrap.

PyTorch run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the setting large-model
users run) makes its memory with the CUDA driver's VMM calls: physical chunks (cuMemCreate,
with a POSIX file descriptor as their shareable handle) mapped back to back in one reserved
range. Legacy CUDA IPC (cudaIpcGetMemHandle) refuses such memory; gpuwrap exports it as a
version-3 handle naming each chunk's descriptor, which the other process takes with
pidfd_open + pidfd_getfd (docs/IPC.md, "VMM memory").

  1. The consumer (this process, run as `python3 examples/ipc_torch_expandable.py`) starts
     the producer: this file again, with exec (subprocess), its environment saying
     PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
  2. The producer makes a CUDA tensor of random values (from a seed the consumer chose),
     wraps it through DLPack (gpuwrap.from_dlpack), exports it (Array.ipc_handle()) and
     prints the handle's 256 bytes as hex.
  3. The consumer opens the handle (Context.ipc_open: each chunk imported and mapped once),
     hands the array to PyTorch through DLPack, checks every value against the same seed's,
     doubles the tensor in place and releases it.
  4. The producer sees the doubled values in its own tensor: the same memory.

Why the producer is the child: taking another process's descriptor needs ptrace access to
it, and Yama's ptrace_scope 1 (Ubuntu's default) grants that only to an ancestor. A
producer that is not the consumer's child would call prctl(PR_SET_PTRACER, consumer's pid)
first. Where the kernel refuses anyway (a container's seccomp profile without
CAP_SYS_PTRACE, Linux < 5.6), ipc_open raises GpuwrapError GW_ENOTSUP naming the cause.

Run with the installed package (README, "Python"), in the environment that has PyTorch:
  python3 examples/ipc_torch_expandable.py
or from the source tree:
  GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python python3 examples/ipc_torch_expandable.py
Exit status 0 when every value checked out, 1 on a mismatch or failure; 77 (skipped, as
every example and test) with a SKIP line when there is no PyTorch, no CUDA device, no gpuwrap
CUDA backend, or the kernel refuses pidfd_getfd.
"""
import os
import secrets
import subprocess
import sys

import gpuwrap

SHAPE = (3000, 2049)  # 24 MiB of float32: more than one of PyTorch's 20 MiB chunks


def skip(why):
    # Not a success: nothing was shown. 77 is the suite's "skipped" (CTest SKIP_RETURN_CODE).
    print(f"SKIP: examples/ipc_torch_expandable.py: {why}", file=sys.stderr)
    sys.exit(77)


def expected(torch, seed):
    return torch.randn(SHAPE, generator=torch.Generator().manual_seed(seed))


def producer(seed):
    """The child: make, fill, export; then wait for the consumer and check its writes."""
    import torch
    ctx = gpuwrap.Context("cuda")
    t = torch.empty(SHAPE, device=f"cuda:{ctx.device}")
    want = expected(torch, seed)
    t.copy_(want)
    torch.cuda.synchronize()  # its values are written before another process reads them
    a = gpuwrap.from_dlpack(t, ctx)
    print(bytes(a.ipc_handle()).hex(), flush=True)  # the handle: plain bytes, any channel
    print(f"producer: tensor {tuple(t.shape)} at 0x{t.data_ptr():x} exported", file=sys.stderr)
    sys.stdin.readline()  # the consumer is done (its arrays released)
    doubled = torch.equal(t.cpu(), want * 2)
    print(f"producer: the consumer's writes are in the tensor: {doubled}", file=sys.stderr)
    print("ok" if doubled else "mismatch", flush=True)
    a.release()  # the tensor's memory outlived every use of the consumer's mapping
    return 0


def consumer():
    try:
        import torch
    except ImportError:
        skip(f"{sys.executable} has no PyTorch")
    if not torch.cuda.is_available():
        skip("PyTorch sees no CUDA device")
    try:
        ctx = gpuwrap.Context("cuda")
    except gpuwrap.GpuwrapError as e:
        skip(f"no gpuwrap CUDA backend here ({e})")

    seed = secrets.randbits(63)
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--producer", str(seed)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    try:
        line = p.stdout.readline().strip()
        if not line:
            print(f"FAIL: the producer exited ({p.wait()}) without a handle")
            return 1
        h = gpuwrap.IpcHandle(bytes.fromhex(line))
        if bytes(h)[4] != 3 or bytes(h)[239] != 2:  # docs/IPC.md, "Handle layout"
            print("FAIL: not a VMM handle (version 3, kind 2): did PyTorch use expandable segments?")
            return 1
        try:
            b = ctx.ipc_open(h)
        except gpuwrap.GpuwrapError as e:
            if e.name == "GW_ENOTSUP" and "pidfd" in (e.detail or ""):
                skip(f"this system refuses to pass the descriptors: {e}")
            raise
        u = torch.from_dlpack(b)  # the producer's memory, in this process's PyTorch
        same = torch.equal(u.cpu(), expected(torch, seed))
        print(f"consumer: opened {b}, torch {u.device} {tuple(u.shape)}, every value matches: {same}")
        u.mul_(2)
        torch.cuda.synchronize()  # the writes are done before the producer reads them
        del u  # the DLPack export's reference, then ours: the chunks are unmapped
        b.release()
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
