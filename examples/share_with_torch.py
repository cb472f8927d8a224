"""One buffer shared between C code, gpuwrap and PyTorch, without copies.

  1. "C code" owns a buffer (libc malloc here; in a real program a pointer handed over
     from C, Fortran or MPI). gpuwrap wraps it, with a deleter that frees it exactly once.
  2. PyTorch gets it through DLPack. On a GPU backend the wrapped host buffer is pinned
     memory, whose DLPack type kDLCUDAHost PyTorch does not import, so it is offered as
     kDLCUDA (a CUDA tensor reading the host memory over the link, zero-copy) or as kDLCPU.
  3. The other way: a PyTorch tensor imported into gpuwrap, filled by gpuwrap.

Run with the installed package (README, "Python"), in the environment that has PyTorch:
  python3 examples/share_with_torch.py
or from the source tree (the extension is compiled on first import):
  GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python python3 examples/share_with_torch.py
Exit status 0 when every step checked out, 1 on a mismatch, 77 (skipped) without PyTorch.
GPUWRAP_BACKEND=cpu|cuda picks the backend (default: the GPU if there is one).
"""
import ctypes
import gc
import os
import sys

import gpuwrap  # noqa: E402

try:
    import torch
except ImportError:
    # Not a success: nothing was shown. 77 is the suite's "skipped" (CTest SKIP_RETURN_CODE).
    print(f"SKIP: this example needs PyTorch, which {sys.executable} does not have", file=sys.stderr)
    sys.exit(77)

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

n = 1 << 20
ctx = gpuwrap.Context("auto")
print(f"gpuwrap backend {ctx.backend}, device {ctx.device}")

# 1. the C buffer
ptr = libc.malloc(4 * n)
buf = (ctypes.c_float * n).from_address(ptr)
for i in range(8):
    buf[i] = float(i)
freed = []


def free_buffer(p):
    freed.append(p)
    libc.free(p)


a = ctx.wrap(ptr, "float32", (n,), deleter=free_buffer)
print(f"1. wrapped C buffer 0x{ptr:x}: {a}")

# 2. to PyTorch, no copy
use_gpu = ctx.backend in ("cuda", "hip") and torch.cuda.is_available()
t = torch.from_dlpack(a.offer("cuda" if ctx.backend == "cuda" else "rocm") if use_gpu else a.offer("cpu"))
same = t.data_ptr() == (a.data_ptr if use_gpu else a.host_ptr)
print(f"2. torch tensor on {t.device}, data_ptr 0x{t.data_ptr():x}, same memory: {same}")
t[:8].mul_(10)  # PyTorch writes (a GPU kernel over pinned host memory when on cuda)
if use_gpu:
    torch.cuda.synchronize()
print(f"   C sees PyTorch's write: buf[:4] = {list(buf[:4])}")
a.release()
gc.collect()
print(f"   gpuwrap handle released; buffer freed yet: {bool(freed)}")

# 3. a PyTorch tensor into gpuwrap, filled by gpuwrap
d = torch.zeros(n, device="cuda" if use_gpu else "cpu")
g = gpuwrap.from_dlpack(d, ctx)
g.fill(4.0)
print(f"3. torch {d.device} tensor imported as {g}; after gw_fill torch sees d[:3] = {d[:3].tolist()}")
g.release()

del t
gc.collect()
print(f"done: C buffer freed {len(freed)} time(s), by gpuwrap's deleter, after PyTorch let go")
sys.exit(0 if len(freed) == 1 and same else 1)
