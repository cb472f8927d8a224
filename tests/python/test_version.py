"""gpuwrap.__version__ is the loaded library's gw_version_string(), and the installed
package's metadata carries the same version: both come from CMake's project(VERSION)."""
import importlib.metadata
import os
import re

import gpuwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"^project\(gpuwrap VERSION ([0-9]+\.[0-9]+\.[0-9]+)", f.read(), re.M).group(1)


def test_version_is_the_project_version():
    assert gpuwrap.__version__ == project_version()


def test_version_is_the_library_string():
    import ctypes
    f = gpuwrap.load_library().gw_version_string
    f.restype = ctypes.c_char_p
    assert f().decode() == gpuwrap.__version__


def test_package_metadata_version():
    assert importlib.metadata.version("gpuwrap") == gpuwrap.__version__
