"""Finding libgpuwrap and the extension (gpuwrap._gpuwrap) for `import gpuwrap`.

Order, and why:
  1. GPUWRAP_LIB (a path) is loaded first when set: the extension's dependency on
     libgpuwrap.so.N is then satisfied by that already-loaded library (the dynamic loader
     matches its soname), so it overrides the bundled or recorded one at run time. A
     GPUWRAP_LIB that is not libgpuwrap, or that the extension does not end up using (a
     libgpuwrap of another soname), fails the import saying so: it is never passed over.
  2. An installed package imports its compiled extension, which finds the library through
     its rpath: $ORIGIN/lib (the copy bundled at install time, plugins in lib/gpuwrap/,
     where the library's own dladdr lookup finds them) or the recorded GPUWRAP_PREFIX.
  3. From the source tree (PYTHONPATH=python: CTest, scripts/h200.sh) there is no compiled
     extension: it is compiled here, once per source/library/interpreter, against
     GPUWRAP_LIB or ../build/lib/libgpuwrap.so, into <build>/python-ext/ (override:
     GPUWRAP_PYEXT_DIR). One implementation either way: the same sources, every .c file
     of this folder (sources() below; setup.py takes the same list).

Both builds include the library's private ABI header from the source tree (src/core/
private.h, never installed): the extension checks gw__private_abi() against it at import.
"""
import ctypes
import glob
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
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise ImportError(f"gpuwrap: GPUWRAP_LIB={path} cannot be loaded: {e}") from None
        # The symbol must be the file's own: dlsym through a handle also finds it in the
        # file's dependencies (libgpuwrap_halo.so has it from libgpuwrap.so).
        owner = _defining_file(lib, "gw__private_abi")
        if owner is None or not _same_file(owner, path):
            raise ImportError(f"gpuwrap: GPUWRAP_LIB={path} is not libgpuwrap (" +
                              (f"it only depends on {owner}" if owner else "it has no gw__private_abi") +
                              "): point it at libgpuwrap.so of the build to use, or unset it")
        _preloaded = lib
    return path


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _dladdr(addr):
    """The file holding addr (dladdr), None if unknown."""
    for name in (None, "libc.so.6", "libdl.so.2"):  # glibc < 2.34 has dladdr in libdl
        try:
            fn = ctypes.CDLL(name).dladdr
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        if fn(addr, ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
        return None
    return None


def _defining_file(lib, symbol):
    try:
        return _dladdr(ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value)
    except AttributeError:
        return None


def _same_file(owner, path):
    """owner (a path from dladdr) is the file GPUWRAP_LIB names: by path, or by name where
    GPUWRAP_LIB is a bare name the loader found through its search path."""
    if os.sep not in path:
        return os.path.basename(owner) == path
    return os.path.realpath(owner) == os.path.realpath(path)


def _check_env_lib(mod, env_lib):
    """The extension uses the GPUWRAP_LIB that was asked for, else the import fails."""
    if not env_lib:
        return mod
    used = mod.library_path()
    if used and _same_file(used, env_lib):
        return mod
    sys.modules.pop("gpuwrap._gpuwrap", None)
    raise ImportError(f"gpuwrap: GPUWRAP_LIB={env_lib} was loaded, but the extension uses "
                      f"{used} (a libgpuwrap of another soname, or another file under the same "
                      "soname loaded first): point GPUWRAP_LIB at the library the extension "
                      "was built for, or unset it")


def load_extension():
    env_lib = _preload()
    try:
        from . import _gpuwrap  # installed (or built in place)
    except ImportError as e:
        if os.path.exists(os.path.join(_HERE, "_build_info.py")):
            raise ImportError(f"gpuwrap: the installed extension does not load: {e}") from e
        return _check_env_lib(_compile_and_load(env_lib), env_lib)
    return _check_env_lib(_gpuwrap, env_lib)


def sources(pkg_dir=_HERE):
    """The extension's C files: every .c file of the package folder, one per mechanism
    (_gpuwrap.h lists them); a new file there is built without editing a list."""
    return sorted(glob.glob(os.path.join(pkg_dir, "*.c")))


def private_headers(repo):
    """The private ABI header the extension includes ("core/private.h", under <repo>/src)
    and the headers that one includes: a change to any of them rebuilds the extension."""
    core = os.path.join(repo, "src", "core")
    return [os.path.join(core, n) for n in ("private.h", "settings.h", "settings_table.h", "signals.h")]


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
    srcs = sources()
    include = os.path.join(repo, "include")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    h = hashlib.sha1()
    for p in srcs + sorted(glob.glob(os.path.join(_HERE, "*.h"))) + private_headers(repo):
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
                    "-I" + include, "-I" + os.path.join(os.path.dirname(libdir), "include"),
                    "-I" + os.path.join(repo, "src")] + srcs
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
