"""gpuwrap inside a PyTorch CUDA graph: capture once, replay many times.

torch.cuda.graph captures the work queued on its stream into a graph; gpuwrap's fills and
copies queued on that stream (borrowed as an ExternalStream) are captured with it and run
at every replay. Arguments are fixed at capture time (the same arrays, the same fill
value): refresh the data between replays, not the calls. What cannot be captured (a copy
through pageable memory, a synchronize) raises GpuwrapError GW_ENOTSUP before queueing
anything, and the capture stays valid.

Run with the installed package, in the environment that has PyTorch:
  python3 examples/graph_torch.py
or from the source tree (the extension is compiled on first import):
  GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python python3 examples/graph_torch.py
Exit status 0 when every replay checked out, 1 on a mismatch, 77 (skipped) without
PyTorch with CUDA or without gpuwrap's CUDA backend.
"""
import sys

import gpuwrap

try:
    import torch
except ImportError:
    print(f"SKIP: this example needs PyTorch, which {sys.executable} does not have", file=sys.stderr)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: this example needs a CUDA device", file=sys.stderr)
    sys.exit(77)
try:
    ctx = gpuwrap.Context("cuda", 0)
except gpuwrap.GpuwrapError as e:
    print(f"SKIP: gpuwrap has no CUDA context here: {e}", file=sys.stderr)
    sys.exit(77)

n = 1 << 20
field = torch.rand(n, device="cuda")             # the input, refreshed before each replay
snapshot = torch.empty(n, pin_memory=True)        # host copy of it, written by the graph
halo = torch.empty(n, device="cuda")              # reset by the graph
a_field, a_snapshot, a_halo = (gpuwrap.from_dlpack(t, ctx) for t in (field, snapshot, halo))
torch.cuda.synchronize()  # imports and registrations before the capture, not inside it

graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    s = gpuwrap.ExternalStream(torch.cuda.current_stream(), ctx)
    a_halo.fill(0.0, stream=s)                    # captured
    a_snapshot.copy_from(a_field, stream=s)       # captured: device -> pinned host
    s.close()                                     # gpuwrap's handle only, never torch's stream

ok = True
for step in range(10):
    field.copy_(torch.rand(n, device="cuda"))
    halo.fill_(1.0)
    graph.replay()
    torch.cuda.synchronize()
    ok &= torch.equal(snapshot, field.cpu()) and bool((halo == 0).all())
print("replays:", "ok" if ok else "MISMATCH")
del graph
for a in (a_field, a_snapshot, a_halo):
    a.release()
sys.exit(0 if ok else 1)
