"""Array.ipc_handle() / Context.ipc_open() of the memory today's frameworks hand over, on a
CUDA GPU (issue 45, item 3; docs/IPC.md, "Pool memory", "VMM memory"):
  - a PyTorch CUDA tensor made in a process started with
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (VMM memory whose chunks PyTorch made
    with the POSIX-fd handle type), wrapped through DLPack (gpuwrap.from_dlpack) and by
    address (Context.wrap of data_ptr()), whole, a view with an offset, one over several
    of PyTorch's 20 MiB chunks, and the 8-chunk limit;
  - a cuda.core IPC-enabled DeviceMemoryResource's Buffer (a stream-ordered pool made with
    the POSIX-fd handle type), by address and through DLPack, at an offset in its pool.
The memory is made, filled with fresh random values and exported by a second interpreter
started with exec (tests/python/_ipc_peer.py), whose parent, this process, opens it (the
direction Yama's ptrace_scope 1 allows pidfd_getfd), checks every element, hands it to
PyTorch through DLPack where PyTorch is here, writes new values through it and releases
it; the peer then checks every element of its memory.

Each case SKIPS, with the reason, without a CUDA device, a gpuwrap CUDA backend, PyTorch
or cuda.core, when cuda.core's API is not the one this test knows, or when the kernel
refuses pidfd_getfd (a container's seccomp profile). Runs under pytest (CI: skipped) and
as a script, without pytest, on the GPU machine (scripts/gpu-py45.sh):
  GPUWRAP_LIB=build/gpu-py45/lib/libgpuwrap.so PYTHONPATH=python python3 tests/python/test_ipc_pool_vmm_gpu.py
exit 0 all passed (skips allowed), 1 a failure, 77 all skipped.
"""
import os
import secrets
import sys
import traceback

try:
    import numpy as np
except ImportError as e:  # (under pytest the conftest skips without NumPy first)
    if __name__ != "__main__":
        raise
    print(f"SKIP: tests/python/test_ipc_pool_vmm_gpu.py: {sys.executable} has no NumPy ({e})")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpuwrap  # noqa: E402
from _ipc_peer import (HANDLE_KIND_AT, HANDLE_VERSION_AT, KIND_POOL, KIND_VMM, Peer,  # noqa: E402
                       PeerError, from_host, index, to_host, values)

try:
    import pytest
except ImportError:  # run as a script on a machine without pytest
    pytest = None


class Skipped(Exception):
    """A skip where pytest is not here (the script's runner reports it)."""


SKIPS = (Skipped,) + ((pytest.skip.Exception,) if pytest else ())


def skip(why):
    if pytest is not None:
        pytest.skip(why)
    raise Skipped(why)


MiB = 1 << 20
TORCH_ENV = {"GW_PEER_BACKEND": "cuda", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
_ctx = None


def cuda_ctx():
    """This process's CUDA context, or a skip naming why there is none."""
    global _ctx
    if _ctx is None:
        try:
            _ctx = gpuwrap.Context("cuda")
        except gpuwrap.GpuwrapError as e:
            skip(f"no gpuwrap CUDA context here: {e}")
    return _ctx


def torch_here():
    try:
        import torch
    except ImportError as e:
        skip(f"no PyTorch: {e}")
    if not torch.cuda.is_available():
        skip("PyTorch sees no CUDA device")
    return torch


def share(spec, env, kind, use_torch):
    """The peer makes spec's memory and exports it; this process opens it, checks every
    element (through gpuwrap, and through PyTorch when use_torch), writes new values and
    releases it; the peer checks every element of its memory."""
    if spec["what"] == "torch" or use_torch:
        torch_here()
    ctx = cuda_ctx()
    seed, new = secrets.randbits(63), secrets.randbits(63)
    peer = Peer(env=env)
    try:
        r = peer.ask("make", spec=spec, seed=seed)
        if "skip" in r:
            skip(r["skip"])
        h = gpuwrap.IpcHandle(bytes.fromhex(r["handle"]))
        b = bytes(h)
        assert len(b) == 256 and (b[:4], b[HANDLE_VERSION_AT], b[HANDLE_KIND_AT]) == \
            (b"GWIP", 3, kind), f"not a version-3 handle of kind {kind}: {b[:8]!r} kind {b[HANDLE_KIND_AT]}"
        dtype = r["dtype"]  # a cuda.core Buffer through DLPack is bytes
        full_shape = r.get("full_shape") or spec["shape"]
        if dtype != spec["dtype"]:
            full_shape = [int(np.prod(spec["shape"])) * np.dtype(spec["dtype"]).itemsize]
        want = values(seed, dtype, full_shape)[index(spec.get("view"))]
        try:
            a = ctx.ipc_open(h)
        except gpuwrap.GpuwrapError as e:
            if e.name == "GW_ENOTSUP" and "pidfd" in (e.detail or ""):
                skip(f"the kernel refuses pidfd_getfd of the peer's descriptor: {e}")
            raise
        assert (a.kind, a.dtype, list(a.shape), list(a.strides)) == \
            ("device", dtype, list(want.shape), r["strides"]), a
        np.testing.assert_array_equal(to_host(ctx, a), want)  # every element, through gpuwrap
        if use_torch:
            torch = torch_here()
            u = torch.from_dlpack(a)  # the peer's memory, seen by this process's PyTorch
            assert u.data_ptr() == a.data_ptr
            np.testing.assert_array_equal(u.cpu().numpy(), want)
            a.release()  # u keeps the mapping: read it again after the array went
            torch.cuda.synchronize()
            np.testing.assert_array_equal(u.cpu().numpy(), want)
            u.copy_(torch.from_numpy(values(new, dtype, want.shape)))
            torch.cuda.synchronize()
            del u  # the last reference: the mapping is closed
        else:
            from_host(ctx, a, values(new, dtype, want.shape))
            ctx.synchronize()
            a.release()
        assert peer.ask("check", seed=seed, new=new) == dict(ok=True, bad=0)
        peer.close()
    finally:
        peer.kill()


# ---- PyTorch, expandable segments (VMM) ------------------------------------------------


def test_torch_expandable_dlpack_whole():
    share(dict(what="torch", wrap="dlpack", dtype="float32", shape=[1000, 257]), TORCH_ENV,
          KIND_VMM, use_torch=True)


def test_torch_expandable_address_whole():
    share(dict(what="torch", wrap="address", dtype="int32", shape=[3, 4099]), TORCH_ENV,
          KIND_VMM, use_torch=False)


def test_torch_expandable_dlpack_view_with_offset():
    # rows 7.. and every other column from 3: the first element well inside the tensor
    share(dict(what="torch", wrap="dlpack", dtype="float64", shape=[512, 300],
               view=[[7, None, None], [3, 299, 2]]), TORCH_ENV, KIND_VMM, use_torch=True)


def test_torch_expandable_address_view_over_chunks():
    # 48 MiB: several of PyTorch's 20 MiB chunks mapped back to back; a view from 1 MiB in
    n = 48 * MiB // 4
    share(dict(what="torch", wrap="address", dtype="float32", shape=[n],
               view=[[MiB // 4 + 1, n - 5, None]]), TORCH_ENV, KIND_VMM, use_torch=True)


def test_torch_expandable_more_than_8_chunks():
    """A tensor over more than 8 of PyTorch's 20 MiB chunks (200 MiB: 10 or 11 of them)
    exports with a manifest listing them (docs/IPC.md "VMM memory") and opens in another
    process, every element checked both ways."""
    n = 200 * MiB // 4
    share(dict(what="torch", wrap="dlpack", dtype="float32", shape=[n]), TORCH_ENV, KIND_VMM,
          use_torch=True)


# ---- cuda.core, an IPC-enabled memory resource (pool) -----------------------------------


def test_cuda_core_ipc_buffer_address():
    share(dict(what="cuda_core", wrap="address", dtype="float32", shape=[777, 41], pad=3 * MiB),
          {"GW_PEER_BACKEND": "cuda"}, KIND_POOL, use_torch=False)


def test_cuda_core_ipc_buffer_address_view():
    share(dict(what="cuda_core", wrap="address", dtype="int64", shape=[64, 1000], pad=12345,
               view=[[5, 60, 3], [100, None, None]]), {"GW_PEER_BACKEND": "cuda"}, KIND_POOL,
          use_torch=False)


def test_cuda_core_ipc_buffer_dlpack():
    share(dict(what="cuda_core", wrap="dlpack", dtype="float32", shape=[4096], pad=MiB),
          {"GW_PEER_BACKEND": "cuda"}, KIND_POOL, use_torch=False)


# ---- as a script -------------------------------------------------------------------------


def main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    passed = failed = skipped = 0
    for name, f in tests:
        try:
            f()
            passed += 1
            print(f"PASS {name}", flush=True)
        except SKIPS as e:
            skipped += 1
            print(f"SKIP {name}: {e}", flush=True)
        except Exception:  # noqa: B902 (reported, the run goes on)
            failed += 1
            print(f"FAIL {name}", flush=True)
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    if failed:
        return 1
    return 77 if passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
