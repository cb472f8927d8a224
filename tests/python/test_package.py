"""The installed package: found without the source tree or environment variables."""
import os
import subprocess
import sys

import gpuwrap

SOURCE = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))


def test_installed_not_source_tree():
    assert not os.path.realpath(gpuwrap.__file__).startswith(SOURCE + os.sep), gpuwrap.__file__
    from gpuwrap import _build_info
    lib = gpuwrap._c.library_path()
    if os.environ.get("GPUWRAP_LIB"):
        return
    if _build_info.BUNDLED:  # the bundled copy, next to the package
        assert os.path.dirname(os.path.realpath(lib)) == os.path.join(
            os.path.dirname(os.path.realpath(gpuwrap.__file__)), "lib"), lib


def test_fixed_names():
    for name in ["Context", "Array", "Stream", "ExternalStream", "from_dlpack", "GpuwrapError"]:
        assert hasattr(gpuwrap, name), name
    for name in ["wrap", "alloc", "stream", "synchronize", "close", "__enter__", "__exit__"]:
        assert hasattr(gpuwrap.Context, name), name
    for name in ["data_ptr", "host_ptr", "kind", "device", "dtype", "shape", "strides", "size",
                 "nbytes", "itemsize", "readonly", "view", "fill", "copy_from", "release", "offer",
                 "__dlpack__", "__dlpack_device__", "__cuda_array_interface__",
                 "__array_interface__", "__enter__", "__exit__"]:
        assert hasattr(gpuwrap.Array, name), name
    assert hasattr(gpuwrap.Stream, "handle") and hasattr(gpuwrap.Stream, "synchronize")


def test_module_info():
    env = {k: v for k, v in os.environ.items() if k != "GPUWRAP_LIB"}
    r = subprocess.run([sys.executable, "-m", "gpuwrap", "info"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env, cwd="/")
    assert r.returncode == 0, r.stdout
    assert r.stdout.startswith("gpuwrap ") and "backend cpu: present" in r.stdout, r.stdout
    assert "auto picks:" in r.stdout
