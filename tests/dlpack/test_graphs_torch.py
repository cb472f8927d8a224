"""gpuwrap inside torch.cuda.graph, on a CUDA GPU (H200): issue 35.

torch.cuda.graph captures its side stream in the global capture mode; gpuwrap borrows that
stream (ExternalStream(torch.cuda.current_stream())) inside the `with` block:
  - recorded: a fill (device), copies device->device, device->pinned, device->managed and
    managed->device; the graph is replayed 50 times, inputs refreshed and outputs
    poisoned before each replay, every element checked after it;
  - refused before queueing (GpuwrapError GW_ENOTSUP), the capture still valid (torch
    raises at the end of the `with` block when it is not): a copy from pageable
    (unregistered) memory, a fill of it, a synchronize of the capturing stream;
  - another thread's synchronous gpuwrap copy (device->pinned) and query during the
    global-mode capture (the H200 case that invalidated the capture before the fix).
Exit 0 all passed, 1 a failure, 77 skipped (no torch with CUDA, or gpuwrap without its CUDA
backend).

Run (source tree: the extension is compiled on first import into build/python-ext/):
  GPUWRAP_LIB=build/lib/libgpuwrap.so PYTHONPATH=python python3 tests/dlpack/test_graphs_torch.py
"""
import sys
import threading

import gpuwrap

try:
    import torch
    if not torch.cuda.is_available():
        torch = None
except Exception:
    torch = None
if torch is None:
    print("SKIP: no torch with a CUDA device")
    sys.exit(77)
try:
    ctx = gpuwrap.Context("cuda", 0)
except gpuwrap.GpuwrapError as e:
    print(f"SKIP: no gpuwrap CUDA context: {e}")
    sys.exit(77)

N = 1 << 18  # float32: 1 MiB
LAUNCHES = 50
failed = 0


def check(what, ok):
    global failed
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    failed += 0 if ok else 1


dev = "cuda:0"
x_in = torch.rand(N, device=dev)  # not changed before the capture's end (the neighbour reads it)
d1 = torch.empty(N, device=dev)
d2 = torch.empty(N, device=dev)
d3 = torch.empty(N, device=dev)
pin = torch.empty(N, pin_memory=True)
side_pin = torch.empty(N, pin_memory=True)
g_in, g_d1, g_d2, g_d3 = (gpuwrap.from_dlpack(t, ctx) for t in (x_in, d1, d2, d3))
g_pin = gpuwrap.from_dlpack(pin, ctx)
g_side_pin = gpuwrap.from_dlpack(side_pin, ctx)
man = ctx.alloc("managed", "float32", (N,))
pageable = ctx.alloc("host", "float32", (N,))  # malloc'd, never registered
v = 0.625
torch.cuda.synchronize()

refusals = []
neighbour = {}


def other_thread():
    # gpuwrap's synchronous device->pinned copy while the main thread captures in the global
    # mode (no torch CUDA call here: torch's own would invalidate the capture); checked after
    try:
        g_side_pin.copy_from(g_in)
        neighbour["ok"] = True
    except Exception as e:  # reported below
        neighbour["error"] = repr(e)


graph = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(graph):
        s = gpuwrap.ExternalStream(torch.cuda.current_stream(), ctx)
        g_d1.copy_from(g_in, stream=s)      # device -> device
        g_pin.copy_from(g_d1, stream=s)     # device -> pinned
        man.copy_from(g_d1, stream=s)       # device -> managed
        g_d2.copy_from(man, stream=s)       # managed -> device
        g_d3.fill(v, stream=s)
        for name, call in (("copy from pageable", lambda: g_d1.copy_from(pageable, stream=s)),
                           ("fill of pageable", lambda: pageable.fill(v, stream=s)),
                           ("synchronize", s.synchronize)):
            try:
                call()
                refusals.append((name, "not refused"))
            except gpuwrap.GpuwrapError as e:
                refusals.append((name, e.name))
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        s.close()
    check("capture valid and instantiated (torch.cuda.graph raised nothing)", True)
except Exception as e:
    check(f"capture: {e!r}", False)
    print(f"{failed} failure(s)")
    sys.exit(1)

for name, what in refusals:
    check(f"refused inside the capture: {name}: {what}", what == "GW_ENOTSUP")
check(f"another thread's synchronous copy during the capture: {neighbour}",
      neighbour.get("ok") is True and torch.equal(side_pin, x_in.cpu()))

bad = 0
for k in range(LAUNCHES):
    x_in.copy_(torch.rand(N, device=dev))
    for t in (d1, d2, d3):
        t.fill_(float("nan"))
    pin.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    ok = (torch.equal(d1, x_in) and torch.equal(d2, x_in) and bool((d3 == v).all())
          and torch.equal(pin, x_in.cpu()))
    bad += 0 if ok else 1
check(f"{LAUNCHES} replays, fresh inputs, every element ({bad} wrong)", bad == 0)

del graph
for a in (g_in, g_d1, g_d2, g_d3, g_pin, g_side_pin, man, pageable):
    a.release()
print(f"{failed} failure(s)")
sys.exit(1 if failed else 0)
