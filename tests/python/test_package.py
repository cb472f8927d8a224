"""The installed package: found without the source tree or environment variables."""
import os
import subprocess
import sys

import pytest

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


def run_module(*args, env=None):
    return subprocess.run([sys.executable, "-m", "gpuwrap", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env or dict(os.environ), cwd="/")


def test_module_info_settings_and_json():
    """python3 -m gpuwrap info takes the CLI's --settings and --json (gw_info_report's flags)."""
    import json
    r = run_module("info", "--settings")
    assert r.returncode == 0, r.stderr
    assert "GPUWRAP_BACKEND" in r.stdout and "GPUWRAP_CPU_STREAM_DELAY_US" in r.stdout, r.stdout
    r = run_module("info", "--json", "--settings")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)  # one JSON object, nothing else on stdout
    assert report["version"] == gpuwrap.__version__
    names = [s["name"] for s in report["settings"]]
    assert "GPUWRAP_BACKEND" in names and len(names) == len(set(names)) > 10, names
    r = run_module("info", "--bogus")
    assert r.returncode == 2 and "usage" in r.stderr


def test_module_info_bad_setting():
    """A setting that is set but not valid: the report, then the reason on stderr, status 1
    (as `gpuwrap info`); gpuwrap.info() raises GpuwrapError GW_EINVAL naming it."""
    env = dict(os.environ, GPUWRAP_BACKEND="nonsense")
    r = run_module("info", env=env)
    assert r.returncode == 1 and r.stdout.startswith("gpuwrap "), (r.stdout, r.stderr)
    assert "GPUWRAP_BACKEND='nonsense'" in r.stderr, r.stderr
    code = ("import gpuwrap\ntry:\n    gpuwrap.info()\nexcept gpuwrap.GpuwrapError as e:\n"
            "    print('raised', e.name, e.detail)\n")
    r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, cwd="/")
    assert "raised GW_EINVAL GPUWRAP_BACKEND='nonsense'" in r.stdout, (r.stdout, r.stderr)


def test_info_output_in_order_with_python_prints():
    """The report is written by C's stdio: what Python printed before comes first, what it
    prints after comes last, through a pipe (block-buffered on both sides)."""
    code = ("import gpuwrap\nprint('before')\nassert gpuwrap.info() == 0\nprint('after')\n")
    r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=dict(os.environ), cwd="/")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "before" and lines[1].startswith("gpuwrap ") and lines[-1] == "after", lines


def test_extension_calls_no_hand_declared_internals():
    """The extension reaches the library's internals only through src/core/private.h, and
    never builds the command line's code (tools/)."""
    import glob
    import re
    srcs = glob.glob(os.path.join(SOURCE, "gpuwrap", "*.[ch]"))
    assert len(srcs) >= 8, srcs
    with open(os.path.join(SOURCE, "..", "src", "core", "private.h")) as f:
        private = set(re.findall(r"GW_API\s[^;(]*\b(gw__\w+)\s*\(", f.read()))
    assert "gw__array_refs" in private and "gw__private_abi" in private, private
    for p in srcs:
        with open(p) as f:
            text = f.read()
        assert not re.search(r"^\s*extern\b[^;]*\bgw__", text, re.M), p
        assert "cmd_info" not in text and "gw_tool_" not in text, p
        for name in re.findall(r"\b(gw__\w+)\s*\(", text):
            assert name in private, (p, name)
    for p in (os.path.join(SOURCE, "setup.py"), os.path.join(SOURCE, "gpuwrap", "_loader.py")):
        with open(p) as f:
            text = f.read()
        assert "tools" not in text.replace("setuptools", "") and "GW_PY_WITH_INFO" not in text, p


def test_private_abi_mismatch_fails_the_import(tmp_path):
    """An extension built for another private ABI than the loaded libgpuwrap's refuses to
    load, naming both numbers: the extension's sources compiled against a private.h whose
    GW__PRIVATE_ABI differs, then imported against this library."""
    import glob
    import re
    import shutil
    import sysconfig
    repo = os.path.dirname(SOURCE)
    core = tmp_path / "src" / "core"
    core.mkdir(parents=True)
    for name in ("settings.h", "settings_table.h", "signals.h"):
        shutil.copy(os.path.join(repo, "src", "core", name), core / name)
    with open(os.path.join(repo, "src", "core", "private.h")) as f:
        text = f.read()
    abi = int(re.search(r"#define GW__PRIVATE_ABI (\d+)", text).group(1))
    assert abi == gpuwrap._c.PRIVATE_ABI
    (core / "private.h").write_text(text.replace(f"#define GW__PRIVATE_ABI {abi}",
                                                 f"#define GW__PRIVATE_ABI {abi + 1000}"))
    lib = gpuwrap._c.library_path()
    try:
        from gpuwrap import _build_info  # the build (or prefix) the package was made from
        generated = (os.path.join(_build_info.PREFIX, "include") if _build_info.PREFIX
                     else os.path.join(os.path.dirname(os.path.dirname(_build_info.SOURCE)), "include"))
    except ImportError:  # the source tree's package: the library's build folder
        generated = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(lib))), "include")
    if not os.path.exists(os.path.join(generated, "gpuwrap", "version.h")):
        pytest.skip(f"no generated gpuwrap/version.h in {generated}")
    out = tmp_path / ("_gpuwrap" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    cmd = cc + ["-shared", "-fPIC", "-std=gnu11", "-I" + sysconfig.get_paths()["include"],
                "-I" + str(tmp_path / "src"), "-I" + os.path.join(repo, "include"), "-I" + generated,
                *sorted(glob.glob(os.path.join(SOURCE, "gpuwrap", "*.c"))), "-o", str(out), lib, "-Wl,-rpath," + os.path.dirname(lib), "-ldl"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0 and "Python.h" in r.stdout:
        pytest.skip("no Python.h to compile the extension with")
    assert r.returncode == 0, r.stdout
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('gpuwrap._gpuwrap', {str(out)!r})\n"
            "try:\n    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
            "except ImportError as e:\n    print('ImportError:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=dict(os.environ), cwd="/")
    assert f"has private ABI {abi}, this extension was built for private ABI {abi + 1000}" in r.stdout, r.stdout


def test_info_report_returned():
    """gpuwrap.info() could only print: info_report() returns the text, info_report(as_dict=
    True) the JSON form as a dict, and info(file=...) writes to a Python file object."""
    import io
    text = gpuwrap.info_report()
    assert text.startswith("gpuwrap ") and "backend cpu: present" in text and "auto picks:" in text
    d = gpuwrap.info_report(as_dict=True)
    assert d["version"] == gpuwrap.__version__
    assert any(b.get("name") == "cpu" for b in d["backends"]), d["backends"]
    every = gpuwrap.info_report(settings=True, as_dict=True)
    names = [s["name"] for s in every["settings"]]
    assert "GPUWRAP_BACKEND" in names and len(names) == len(set(names)) > 10
    assert "GPUWRAP_CPU_STREAM_DELAY_US" in gpuwrap.info_report(settings=True)
    f = io.StringIO()
    assert gpuwrap.info(file=f) == 0
    assert f.getvalue() == text  # the same report, whichever way it is asked for


def test_info_report_bad_setting_keeps_report():
    code = ("import gpuwrap, io\n"
            "try:\n    gpuwrap.info_report()\nexcept gpuwrap.GpuwrapError as e:\n"
            "    print('raised', e.name, e.detail, e.report.startswith('gpuwrap '))\n"
            "f = io.StringIO()\n"
            "try:\n    gpuwrap.info(file=f)\nexcept gpuwrap.GpuwrapError as e:\n"
            "    print('file', e.name, f.getvalue().startswith('gpuwrap '))\n")
    env = dict(os.environ, GPUWRAP_BACKEND="nonsense")
    r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, cwd="/")
    assert "raised GW_EINVAL GPUWRAP_BACKEND='nonsense'" in r.stdout and "True" in r.stdout, \
        (r.stdout, r.stderr)
    assert "file GW_EINVAL True" in r.stdout, (r.stdout, r.stderr)
