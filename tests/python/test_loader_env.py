"""GPUWRAP_LIB is used or the import fails saying why: never passed over in silence
(python/gpuwrap/_loader.py)."""
import ctypes.util
import os
import shutil
import subprocess
import sys

import pytest

import gpuwrap

CODE = "import gpuwrap; print('library', gpuwrap._c.library_path())"


def _import_with(lib, cwd="/"):
    env = dict(os.environ, GPUWRAP_LIB=lib)
    return subprocess.run([sys.executable, "-c", CODE], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)


def test_lib_that_is_not_libgpuwrap_fails_the_import():
    other = ctypes.util.find_library("m") or "libm.so.6"
    r = _import_with(other)
    assert r.returncode != 0, r.stdout
    assert f"GPUWRAP_LIB={other} is not libgpuwrap" in r.stdout, r.stdout


def test_lib_that_cannot_load_fails_the_import(tmp_path):
    r = _import_with(str(tmp_path / "libgpuwrap.so"))
    assert r.returncode != 0, r.stdout
    assert "cannot be loaded" in r.stdout, r.stdout


def test_lib_that_only_depends_on_libgpuwrap_fails_the_import():
    """libgpuwrap_halo.so has gw__private_abi through its dependency, not of its own."""
    real = os.path.realpath(gpuwrap._c.library_path())
    halo = os.path.join(os.path.dirname(real), "libgpuwrap_halo.so")
    if not os.path.exists(halo):
        pytest.skip(f"no {halo}")
    r = _import_with(halo)
    assert r.returncode != 0, r.stdout
    assert f"GPUWRAP_LIB={halo} is not libgpuwrap (it only depends on" in r.stdout, r.stdout


def test_lib_copy_is_the_one_used(tmp_path):
    """A copy of the library (same soname) is what the extension then uses."""
    real = os.path.realpath(gpuwrap._c.library_path())
    (tmp_path / "lib").mkdir()
    copy = tmp_path / "lib" / "libgpuwrap-copy.so"
    shutil.copy(real, copy)
    # from the source tree, the extension is compiled with the build's generated headers,
    # found beside the library's folder
    include = os.path.join(os.path.dirname(os.path.dirname(real)), "include")
    if os.path.isdir(include):
        os.symlink(include, tmp_path / "include")
    r = _import_with(str(copy))
    assert r.returncode == 0, r.stdout
    assert f"library {copy}" in r.stdout, r.stdout
