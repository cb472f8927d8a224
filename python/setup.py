"""Build of the gpuwrap Python package: the C extension gpuwrap._gpuwrap, and the
libgpuwrap it uses. Everything else is in pyproject.toml.

Which library (read at build time, i.e. when pip installs):
  GPUWRAP_PREFIX=<prefix>    an installed gpuwrap (cmake --install): the extension links
                             <prefix>/lib*/libgpuwrap.so.N with an absolute rpath, nothing
                             is bundled, and the prefix is recorded in gpuwrap/_build_info.py.
  GPUWRAP_BUILD_DIR=<dir>    a CMake build directory (default: ../build next to this file):
                             its libgpuwrap.so.N and the backend plugins that were built
                             (libgpuwrap-cuda.so, libgpuwrap-hip.so) are copied into the
                             package, as gpuwrap/lib/libgpuwrap.so.N and gpuwrap/lib/gpuwrap/
                             (where the library's own dladdr lookup finds its plugins), and
                             the extension's rpath is $ORIGIN/lib: the installed package
                             needs no environment variable and survives the build dir.
At run time GPUWRAP_LIB still overrides both (gpuwrap/_loader.py).

The private ABI: besides the public headers, the extension includes the library's private
ABI header, src/core/private.h (gw__array_refs for the collector support; gw__stream_order
and gw__dtype_from_dl for the DLPack C exchange; gw__private_abi),
which is never installed. Both ways it is taken from the source tree this python/ folder
is part of (pip builds ./python in place), also with GPUWRAP_PREFIX: the header declares
only GW_API functions that libgpuwrap exports, and at import the extension checks
gw__private_abi() against the GW__PRIVATE_ABI it was built with, so an installed library of
another tree whose private ABI differs fails the import with both numbers, never a wrong call.
"""
import glob
import os
import re
import shutil
import sys

# The build needs setuptools, and wheel for pip's bdist_wheel. pip --no-build-isolation
# (the offline install) takes both from the interpreter running it: one without them (a
# pyenv python3) failed with "invalid command 'bdist_wheel'" and no hint.
_HINT = ("use Debian's /usr/bin/python3 in a venv made with --system-site-packages "
         "(apt-get install python3-setuptools python3-wheel; see python/README.md), or "
         "install setuptools and wheel into this interpreter")
try:
    from setuptools import Extension, setup
    from setuptools.command.build_ext import build_ext
except ImportError:
    sys.exit(f"gpuwrap setup: {sys.executable} has no setuptools: {_HINT}")
# pip's metadata step (dist_info) runs bdist_wheel's code too
if any(cmd in sys.argv for cmd in ("bdist_wheel", "dist_info", "editable_wheel")):
    try:
        import wheel  # noqa: F401  (bdist_wheel is its command)
    except ImportError:
        sys.exit(f"gpuwrap setup: {sys.executable} has no wheel package, which pip needs to "
                 f"build a wheel (else: invalid command 'bdist_wheel'): {_HINT}")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def fail(msg):
    sys.exit(f"gpuwrap setup: {msg}")


def soname_file(libdir):
    """libgpuwrap.so.N in libdir (what the extension's NEEDED names), else libgpuwrap.so."""
    names = [p for p in glob.glob(os.path.join(libdir, "libgpuwrap.so.*"))
             if re.fullmatch(r"libgpuwrap\.so\.\d+", os.path.basename(p))]
    if names:
        return sorted(names)[0]
    p = os.path.join(libdir, "libgpuwrap.so")
    return p if os.path.exists(p) else None


prefix = os.environ.get("GPUWRAP_PREFIX")
if prefix:
    prefix = os.path.abspath(prefix)
    libs = [soname_file(d) for d in [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")]
            + glob.glob(os.path.join(prefix, "lib", "*-linux-gnu"))]
    libs = [p for p in libs if p]
    if not libs:
        fail(f"GPUWRAP_PREFIX={prefix}: no libgpuwrap.so under {prefix}/lib*")
    LIB = libs[0]
    INCLUDE = os.path.join(prefix, "include")
    RPATH = os.path.dirname(LIB)
    BUNDLE = []
else:
    build = os.path.abspath(os.environ.get("GPUWRAP_BUILD_DIR") or os.path.join(REPO, "build"))
    LIB = soname_file(os.path.join(build, "lib"))
    if not LIB:
        fail(f"no libgpuwrap.so in {build}/lib: build the library first (cmake -S . -B build && "
             "cmake --build build), or set GPUWRAP_BUILD_DIR=<build dir> or GPUWRAP_PREFIX=<prefix>")
    INCLUDE = os.path.join(REPO, "include")
    RPATH = "$ORIGIN/lib"  # literal: setuptools runs the linker without a shell
    BUNDLE = [(LIB, os.path.basename(LIB))] + [
        (p, os.path.join("gpuwrap", os.path.basename(p)))
        for p in sorted(glob.glob(os.path.join(build, "lib", "libgpuwrap-*.so")))]
if not os.path.exists(os.path.join(INCLUDE, "gpuwrap.h")):
    fail(f"no gpuwrap.h in {INCLUDE}")
# The version's one source is CMake's project(VERSION): its generated gpuwrap/version.h,
# in the build tree (beside the source headers) or installed with them.
GENERATED = os.path.join(prefix, "include") if prefix else os.path.join(build, "include")
try:
    with open(os.path.join(GENERATED, "gpuwrap", "version.h")) as f:
        VERSION = re.search(r'#define GW_VERSION_STRING "([^"]+)"', f.read()).group(1)
except (OSError, AttributeError) as e:
    fail(f"no GW_VERSION_STRING in {GENERATED}/gpuwrap/version.h ({e}): configure the library with CMake")

# The extension: every .c file of gpuwrap/, one per mechanism (gpuwrap/_gpuwrap.h lists them;
# gpuwrap/_loader.py's in-tree compile takes the same list).
sources = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "gpuwrap", "*.c")))
PRIVATE = os.path.join(REPO, "src")  # "core/private.h" (see the docstring)
if not os.path.exists(os.path.join(PRIVATE, "core", "private.h")):
    fail(f"no src/core/private.h in {REPO}: build the package from the gpuwrap source tree")
includes = [INCLUDE] + ([GENERATED] if GENERATED != INCLUDE else []) + [PRIVATE]
# Rebuilt when a header changes too (setuptools compares only the sources' times otherwise,
# and the build folder outlives one install).
depends = (sorted(glob.glob(os.path.join(HERE, "gpuwrap", "*.h")))
           + [os.path.join(PRIVATE, "core", n) for n in ("private.h", "settings.h", "settings_table.h", "signals.h")]
           + [os.path.join(INCLUDE, "gpuwrap.h"), os.path.join(INCLUDE, "gpuwrap", "dlpack.h")])


class BuildExt(build_ext):
    """Also bundles the library (+ plugins) and records where it came from."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "gpuwrap")
        libdir = os.path.join(pkg, "lib")
        if BUNDLE:
            shutil.rmtree(libdir, ignore_errors=True)
            for src, rel in BUNDLE:
                dst = os.path.join(libdir, rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(os.path.realpath(src), dst)  # the file, not a symlink
        with open(os.path.join(pkg, "_build_info.py"), "w") as f:
            f.write('"""Written by setup.py: where this package\'s libgpuwrap came from."""\n')
            f.write(f"BUNDLED = {bool(BUNDLE)!r}\nSOURCE = {os.path.realpath(LIB)!r}\n"
                    f"PREFIX = {prefix!r}\n")


# Per build directory, so builds from several CMake build dirs at once do not collide.
build_base = os.path.join(os.path.dirname(os.path.dirname(LIB)) if not prefix else HERE,
                          "python-setuptools" if not prefix else "build")

setup(
    version=VERSION,
    ext_modules=[Extension(
        "gpuwrap._gpuwrap", sources=sources, include_dirs=includes, depends=depends,
        extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wno-missing-field-initializers"],
        extra_objects=[LIB], extra_link_args=["-Wl,-rpath," + RPATH], libraries=["dl"])],
    cmdclass={"build_ext": BuildExt},
    # egg_info too: its metadata folder is a build output (it was left in python/).
    options={"build": {"build_base": build_base}, "egg_info": {"egg_base": build_base}},
)
