"""Finding libgpuwrap and the extension (gpuwrap._gpuwrap) for `import gpuwrap`.

Order, and why:
  1. GPUWRAP_LIB (a path) is loaded first when set: the extension's dependency on
     libgpuwrap.so.N is then satisfied by that already-loaded library (the dynamic loader
     matches its soname), so it overrides the bundled or recorded one at run time.
  2. An installed package imports its compiled extension, which finds the library through
     its rpath: $ORIGIN/lib (the copy bundled at install time, plugins in lib/gpuwrap/,
     where the library's own dladdr lookup finds them) or the recorded GPUWRAP_PREFIX.
  3. From the source tree (PYTHONPATH=python: CTest, scripts/h200.sh) there is no compiled
     extension: it is compiled here, once per source/library/interpreter, against
     GPUWRAP_LIB or ../build/lib/libgpuwrap.so, into <build>/python-ext/ (override:
     GPUWRAP_PYEXT_DIR). One implementation either way: the same _gpuwrap.c.
"""
import ctypes
import hashlib
import importlib.util
import os
import subprocess
import sys
import sysconfig

_HERE = os.path.dirname(os.path.abspath(__file__))
_preloaded = None  # the GPUWRAP_LIB handle, kept so the library stays loaded


def _preload():
    global _preloaded
    path = os.environ.get("GPUWRAP_LIB")
    if path and _preloaded is None:
        try:
            _preloaded = ctypes.CDLL(path)
        except OSError as e:
            raise ImportError(f"gpuwrap: GPUWRAP_LIB={path} cannot be loaded: {e}") from None
    return path


def load_extension():
    env_lib = _preload()
    try:
        from . import _gpuwrap  # installed (or built in place)
        return _gpuwrap
    except ImportError as e:
        if os.path.exists(os.path.join(_HERE, "_build_info.py")):
            raise ImportError(f"gpuwrap: the installed extension does not load: {e}") from e
    return _compile_and_load(env_lib)


def _compile_and_load(env_lib):
    repo = os.path.dirname(os.path.dirname(_HERE))
    lib = env_lib or os.path.join(repo, "build", "lib", "libgpuwrap.so")
    if not os.path.exists(lib):
        raise ImportError(
            f"gpuwrap: no compiled extension and no library at {lib}: install the package "
            "(python3 -m pip install --no-index --no-build-isolation ./python, see README) "
            "or build the library and set GPUWRAP_LIB")
    lib = os.path.realpath(lib)
    libdir = os.path.dirname(lib)
    src = os.path.join(_HERE, "_gpuwrap.c")
    srcs = [src, os.path.join(_HERE, "_exchange.c")]
    info_src = os.path.join(repo, "tools", "cmd_info.c")
    include = os.path.join(repo, "include")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    h = hashlib.sha1()
    for p in srcs + [os.path.join(_HERE, "_exchange.h"), info_src]:
        if os.path.exists(p):
            with open(p, "rb") as f:
                h.update(f.read())
    h.update(f"{lib}|{sys.version}|{suffix}".encode())
    outdir = os.environ.get("GPUWRAP_PYEXT_DIR") or os.path.join(os.path.dirname(libdir), "python-ext")
    out = os.path.join(outdir, f"_gpuwrap-{h.hexdigest()[:16]}{suffix}")
    if not os.path.exists(out):
        os.makedirs(outdir, exist_ok=True)
        tmp = f"{out}.{os.getpid()}.tmp"
        cc = (sysconfig.get_config_var("CC") or "cc").split()
        cmd = cc + ["-shared", "-fPIC", "-O2", "-std=gnu11", "-I" + sysconfig.get_paths()["include"],
                    "-I" + include, "-I" + os.path.join(os.path.dirname(libdir), "include")] + srcs
        if os.path.exists(info_src):
            cmd += ["-DGW_PY_WITH_INFO", "-I" + os.path.join(repo, "tools"), info_src]
        cmd += ["-o", tmp, lib, "-Wl,-rpath," + libdir, "-ldl"]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise ImportError("gpuwrap: compiling the extension from the source tree failed "
                              f"(needs a C compiler and Python.h):\n{' '.join(cmd)}\n{r.stdout}")
        os.replace(tmp, out)  # atomic: concurrent first imports each build, one file wins
    spec = importlib.util.spec_from_file_location("gpuwrap._gpuwrap", out)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpuwrap._gpuwrap"] = mod
    spec.loader.exec_module(mod)
    return mod
