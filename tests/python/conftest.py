"""pytest setup for the installed gpuwrap package (scripts/test-python.sh runs these from
outside the source tree, so `import gpuwrap` is the installed package, never python/).

The CPU model runs stream work on worker threads; each copy or fill queued on a stream
sleeps GPUWRAP_CPU_STREAM_DELAY_US before it runs, so "read before the stream ran it" is
deterministic. It is read when the library loads: set here, before gpuwrap is imported."""
import ctypes
import os

os.environ.setdefault("GPUWRAP_CPU_STREAM_DELAY_US", "50000")
os.environ.setdefault("GPUWRAP_BACKEND", "cpu")

import pytest  # noqa: E402

np = pytest.importorskip("numpy")
import gpuwrap  # noqa: E402


@pytest.fixture(scope="session")
def ctx():
    c = gpuwrap.Context("cpu")
    yield c
    c.close()


@pytest.fixture(scope="session")
def lib():
    """The CPU model's test controls (gw_cpu_*), through ctypes on the same library."""
    lib = gpuwrap.load_library()
    lib.gw_cpu_stream_create_external.restype = ctypes.c_int
    lib.gw_cpu_stream_create_external.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    lib.gw_cpu_stream_destroy_external.restype = ctypes.c_int
    lib.gw_cpu_stream_destroy_external.argtypes = [ctypes.c_void_p]
    lib.gw_cpu_op_calls.restype, lib.gw_cpu_op_calls.argtypes = ctypes.c_long, [ctypes.c_int]
    lib.gw_cpu_runtime_alloc.restype = ctypes.c_int
    lib.gw_cpu_runtime_alloc.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t,
                                         ctypes.POINTER(ctypes.c_void_p)]
    lib.gw_cpu_runtime_free.restype = ctypes.c_int
    lib.gw_cpu_runtime_free.argtypes = [ctypes.c_void_p]
    # graph capture (gpuwrap/cpu.h): begin/end, launch, destroy, items recorded so far
    lib.gw_cpu_stream_capture_begin.restype = ctypes.c_int
    lib.gw_cpu_stream_capture_begin.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.gw_cpu_stream_capture_end.restype = ctypes.c_int
    lib.gw_cpu_stream_capture_end.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.gw_cpu_graph_launch.restype = ctypes.c_int
    lib.gw_cpu_graph_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.gw_cpu_graph_destroy.restype, lib.gw_cpu_graph_destroy.argtypes = None, [ctypes.c_void_p]
    lib.gw_cpu_stream_capture_items.restype = ctypes.c_int
    lib.gw_cpu_stream_capture_items.argtypes = [ctypes.c_void_p]
    return lib


class Counter:
    """A deleter that counts its calls (thread-safe enough under the GIL)."""

    def __init__(self):
        self.calls = 0
        self.ptr = None

    def __call__(self, ptr):
        self.calls += 1
        self.ptr = ptr


@pytest.fixture
def counter():
    return Counter()
