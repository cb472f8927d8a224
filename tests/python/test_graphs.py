"""gpuwrap calls on a stream being captured into a graph, on the CPU model's capture
control (gpuwrap/cpu.h: gw_cpu_stream_capture_begin ...), as torch.cuda.graph captures its
side stream: the stream is borrowed as an ExternalStream, gpuwrap's fills and copies on it
are recorded and run at every launch; what cannot be recorded is refused (GpuwrapError,
GW_ENOTSUP) with nothing recorded and the capture still valid. The H200 twin with
torch.cuda.graph is tests/dlpack/test_graphs_torch.py."""
import ctypes
import os

import numpy as np
import pytest

import gpuwrap

SEED = int(os.environ.get("GW_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
rng = np.random.default_rng(SEED)
N = 1031
LAUNCHES = 50
GLOBAL = 0  # GW_CPU_CAPTURE_GLOBAL


@pytest.fixture
def capture_stream(lib):
    h = ctypes.c_void_p()
    assert lib.gw_cpu_stream_create_external(0, 1, ctypes.byref(h)) == 0  # non-blocking
    yield h.value
    assert lib.gw_cpu_stream_destroy_external(h.value) == 0


def end_capture(lib, native):
    g = ctypes.c_void_p()
    st = lib.gw_cpu_stream_capture_end(native, ctypes.byref(g))
    assert st == 0, f"capture invalidated: {gpuwrap.load_library().gw_last_error().decode()}"
    return g


def test_captured_fill_and_copies_replayed(ctx, lib, capture_stream):
    print(f"seed {SEED} (GW_TEST_SEED replays)")
    s = gpuwrap.ExternalStream(capture_stream, ctx)
    x_in = np.zeros(N)
    g_in = gpuwrap.from_dlpack(x_in, ctx)  # registered before the capture
    dev = ctx.alloc("device", "float64", (N,))
    man = ctx.alloc("managed", "float64", (N,))
    x_out = np.zeros(N)
    g_out = gpuwrap.from_dlpack(x_out, ctx)
    filled = ctx.alloc("device", "float64", (N,))
    x_out2 = np.zeros(N)
    g_out2 = gpuwrap.from_dlpack(x_out2, ctx)
    v = float(rng.random())

    assert lib.gw_cpu_stream_capture_begin(capture_stream, GLOBAL) == 0
    dev.copy_from(g_in, stream=s)
    man.copy_from(dev, stream=s)
    g_out.copy_from(man, stream=s)
    filled.fill(v, stream=s)
    g_out2.copy_from(filled, stream=s)
    assert lib.gw_cpu_stream_capture_items(capture_stream) == 5
    graph = end_capture(lib, capture_stream)
    assert not g_out.pending()  # captured, not launched: nothing queued

    try:
        for k in range(LAUNCHES):
            x_in[:] = rng.random(N)  # fresh inputs, poisoned outputs
            x_out[:] = np.nan
            x_out2[:] = np.nan
            filled.fill(-1.0)
            assert lib.gw_cpu_graph_launch(graph, capture_stream) == 0
            s.synchronize()
            assert np.array_equal(x_out, x_in), f"launch {k}"
            assert (x_out2 == v).all(), f"launch {k}"
    finally:
        lib.gw_cpu_graph_destroy(graph)
    for a in (g_in, dev, man, g_out, filled, g_out2):
        a.release()
    s.close()


def test_refused_before_recording(ctx, lib, capture_stream):
    s = gpuwrap.ExternalStream(capture_stream, ctx)
    dev = ctx.alloc("device", "float64", (N,))
    pageable = ctx.alloc("host", "float64", (N,))  # malloc'd, not registered
    x_out = np.zeros(N)
    g_out = gpuwrap.from_dlpack(x_out, ctx)
    v = float(rng.random())
    assert lib.gw_cpu_stream_capture_begin(capture_stream, GLOBAL) == 0
    dev.fill(v, stream=s)
    copies = lib.gw_cpu_op_calls(7)  # GW_CPU_OP_COPY
    for call in (lambda: dev.copy_from(pageable, stream=s),
                 lambda: pageable.copy_from(dev, stream=s),
                 lambda: pageable.fill(v, stream=s),
                 s.synchronize):
        with pytest.raises(gpuwrap.GpuwrapError) as e:
            call()
        assert e.value.name == "GW_ENOTSUP" and "captured into a graph" in e.value.detail
        assert lib.gw_cpu_stream_capture_items(capture_stream) == 1
    assert lib.gw_cpu_op_calls(7) == copies
    g_out.copy_from(dev, stream=s)
    graph = end_capture(lib, capture_stream)  # still valid
    try:
        for k in range(LAUNCHES):
            x_out[:] = np.nan
            dev.fill(-1.0)
            assert lib.gw_cpu_graph_launch(graph, capture_stream) == 0
            s.synchronize()
            assert (x_out == v).all(), f"launch {k}"
    finally:
        lib.gw_cpu_graph_destroy(graph)
    for a in (dev, pageable, g_out):
        a.release()
    s.close()
