"""pytest setup for the installed gpuwrap package (scripts/test-python.sh runs these from
outside the source tree, so `import gpuwrap` is the installed package, never python/).

The CPU model runs stream work on worker threads; each copy or fill queued on a stream
sleeps GPUWRAP_CPU_STREAM_DELAY_US before it runs, so "read before the stream ran it" is
deterministic. It is read when the library loads: set here, before gpuwrap is imported."""
import ctypes
import importlib.util
import os
import subprocess
import sys
import sysconfig

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


def _generated_include():
    """The folder with the build's generated gpuwrap/version.h (which gpuwrap.h includes):
    beside the library the package was built from, or the install prefix's include/."""
    cands = []
    try:
        from gpuwrap import _build_info  # an installed package: where its library came from
        if _build_info.PREFIX:
            cands.append(os.path.join(_build_info.PREFIX, "include"))
        cands.append(os.path.join(os.path.dirname(os.path.dirname(_build_info.SOURCE)), "include"))
    except ImportError:  # compiled from the source tree (gpuwrap/_loader.py)
        pass
    lib = os.path.realpath(gpuwrap._c.library_path())
    cands.append(os.path.join(os.path.dirname(os.path.dirname(lib)), "include"))
    for d in cands:
        if os.path.exists(os.path.join(d, "gpuwrap", "version.h")):
            return d
    pytest.fail(f"no gpuwrap/version.h in any of {cands}: cannot build the test extension")


@pytest.fixture(scope="session")
def exchange_testmod(tmp_path_factory):
    """tests/python/_exchange_testmod.c (a DLPack exchange producer and a C consumer, test
    code kept out of the installed package), compiled with this interpreter's compiler
    flags and imported once per session."""
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    src = os.path.join(here, "_exchange_testmod.c")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    out = str(tmp_path_factory.mktemp("ext") / ("_exchange_testmod" + suffix))
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    cmd = cc + ["-shared", "-fPIC", "-O2", "-std=gnu11", "-Wall", "-Werror",
                "-I" + sysconfig.get_paths()["include"], "-I" + os.path.join(repo, "include"),
                "-I" + _generated_include(), src, "-o", out]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        pytest.fail(f"compiling the test extension failed:\n{' '.join(cmd)}\n{r.stdout}")
    spec = importlib.util.spec_from_file_location("_exchange_testmod", out)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_exchange_testmod"] = mod
    spec.loader.exec_module(mod)
    return mod
