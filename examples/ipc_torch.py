"""A PyTorch CUDA tensor shared with another process through gpuwrap's IPC, without copies.

  1. The producer (this process) makes a CUDA tensor, wraps it through DLPack
     (gpuwrap.from_dlpack) and exports it: Array.ipc_handle(), a picklable IpcHandle.
  2. The consumer, a process started with multiprocessing's "spawn" (CUDA cannot be used in
     a forked child), opens the handle (Context.ipc_open: the allocation is mapped once) and
     hands the array to PyTorch through DLPack (torch.from_dlpack). It checks every value
     against a copy the producer sent, then doubles the tensor in place.
  3. The producer sees the doubled values in its own tensor: the same memory.

The producer keeps its tensor alive until the consumer is done (CUDA requires the exporter's
memory to outlive its importers' use); the consumer's mapping is closed when its last
gpuwrap reference (the DLPack export held by its tensor included) goes.

Run with the installed package (README, "Python"), in the environment that has PyTorch:
  python3 examples/ipc_torch.py
or from the source tree:
  GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python python3 examples/ipc_torch.py
Exit status 0 when every value checked out, 1 on a mismatch; 77 (skipped, as every example
and test: CTest's SKIP_RETURN_CODE) with a SKIP line when there is no PyTorch, no CUDA
device, or no gpuwrap CUDA backend (nothing to show on this machine).
"""
import multiprocessing
import sys

import gpuwrap


def skip(why):
    # Not a success: nothing was shown. 77 is the suite's "skipped" (CTest SKIP_RETURN_CODE).
    print(f"SKIP: examples/ipc_torch.py: {why}", file=sys.stderr)
    sys.exit(77)


def consumer(handle, device, expected, out):
    """The other process: open, give to PyTorch, check every value, write back."""
    import torch
    try:
        ctx = gpuwrap.Context("cuda", device)
        b = ctx.ipc_open(handle)
        u = torch.from_dlpack(b)  # the producer's memory, seen by this process's PyTorch
        same = u.shape == expected.shape and u.dtype == expected.dtype and torch.equal(u.cpu(), expected)
        print(f"consumer: opened {b}, torch {u.device} {tuple(u.shape)}, values match: {same}")
        u.mul_(2)
        torch.cuda.synchronize()  # the writes are done before the producer reads them
        del u  # the DLPack export's reference, then ours: the mapping is closed
        b.release()
        ctx.close()
        out.put(bool(same))
    except BaseException as e:  # noqa: B902 (the producer reports it)
        out.put(f"consumer failed: {e!r}")


def main():
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

    # 1. the producer's tensor, wrapped (DLPack) and exported
    t = torch.randn(1000, 257, device=f"cuda:{ctx.device}")
    torch.cuda.synchronize()  # its values are written before another process reads them
    expected = t.cpu()
    a = gpuwrap.from_dlpack(t, ctx)
    h = a.ipc_handle()
    print(f"producer: tensor {tuple(t.shape)} at 0x{t.data_ptr():x}, exported {a} as {h}")

    # 2. the consumer, in a process of its own
    spawn = multiprocessing.get_context("spawn")
    q = spawn.Queue()
    p = spawn.Process(target=consumer, args=(h, ctx.device, expected, q))
    p.start()
    result = q.get(timeout=300)
    p.join(300)
    if result is not True or p.exitcode != 0:
        print(f"FAIL: consumer: {result}, exit status {p.exitcode}")
        return 1

    # 3. the consumer's writes, in the producer's tensor
    doubled = torch.equal(t.cpu(), expected * 2)
    print(f"producer: the consumer's writes are in the tensor: {doubled}")
    a.release()
    ctx.close()
    return 0 if doubled else 1


if __name__ == "__main__":
    sys.exit(main())
