#!/usr/bin/python3
"""The code blocks of the docs, as a reader pastes them (issue 32, item 12).

Every fenced block of README.md, docs/*.md and python/README.md in a checked language is
compiled or run, unless the line before its fence says otherwise:

  ```c        a complete program: compiled (-std=c11 -Wall -Wextra -Werror), linked against
              the built library, run with GPUWRAP_BACKEND=cpu; exit status 0 expected
  ```python   run with this interpreter, the package from python/ (PYTHONPATH) on the
              built library (GPUWRAP_LIB), GPUWRAP_BACKEND=cpu; exit status 0 expected
  ```sh       syntax-checked (bash -n): the commands build, install or need MPI/GPUs, so
              they are run by their own tests (docs.python_install runs the pip ones)

  <!-- snippet: fragment; given: DECLARATIONS -->   C statements: compiled inside a
              function after the includes below and DECLARATIONS (the names the text
              around it defines), not run
  <!-- snippet: toplevel; given: DECLARATIONS -->   C declarations or definitions: compiled
              at file scope after the includes and DECLARATIONS (optional), not run
  <!-- snippet: skip: REASON -->   not checked, for the stated reason (printed)
  <!-- snippet: run -->   sh: run with bash -e from the repository root, HOME a fresh
              directory (so ~/... is new), GPUWRAP_BUILD_DIR the build directory

Blocks that need MPI are compiled with $MPICC (skipped, saying so, when it is empty);
Python blocks are skipped, saying so, when this interpreter has no NumPy.

Usage: check_snippets.py BUILD_DIR [FILES...]; exit status 1 when a block fails (each
failure names file:line and shows the compiler's or the program's output).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDES = "".join(f"#include <{h}>\n" for h in (
    "gpuwrap.h", "gpuwrap/dlpack.h", "stdint.h", "stdio.h", "stdlib.h", "string.h", "unistd.h"))
HALO_INCLUDES = "#include <mpi.h>\n#include <gpuwrap/halo.h>\n"
FENCE = re.compile(r"^```(\w*)\s*$")
MARK = re.compile(r"^<!--\s*snippet:\s*(fragment|toplevel|skip|run)\s*(?:[:;]\s*(.*?))?\s*-->\s*$")


def blocks(path):
    """(line of the fence, language, marker or None, marker argument, code) per block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        prev = lines[start - 1] if start > 0 else ""
        mk = MARK.match(prev)
        yield (start + 1, lang, mk.group(1) if mk else None, (mk.group(2) or "") if mk else "",
               "\n".join(lines[start + 1:j]) + "\n")
        i = j + 1


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300, **kw)
    return p.returncode, p.stdout


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    files = sys.argv[2:] or (["README.md", "python/README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md")))
    cc = os.environ.get("CC", "cc")
    mpicc = os.environ.get("MPICC", "mpicc")
    have_numpy = run([sys.executable, "-c", "import numpy"])[0] == 0
    libdir = os.path.join(build, "lib")
    # the source tree's headers and the build's generated one (gpuwrap/version.h)
    cflags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "include"),
              "-I" + os.path.join(build, "include")]
    env = dict(os.environ, GPUWRAP_BACKEND="cpu", GPUWRAP_LIB=os.path.join(libdir, "libgpuwrap.so"),
               PYTHONPATH=os.path.join(ROOT, "python"))
    counts = {"ok": 0, "failed": 0, "skipped": 0}
    tmp = tempfile.mkdtemp(prefix="gw-snippets-")
    for f in files:
        for line, lang, mark, arg, code in blocks(os.path.join(ROOT, f)):
            where = f"{f}:{line}"
            if lang not in ("c", "python", "sh"):
                continue
            arg = re.sub(r"^given:\s*", "", arg)
            if mark == "skip":
                print(f"skip {where} ({lang}): {arg or 'no reason given'}")
                counts["skipped"] += 1
                if not arg:
                    counts["failed"] += 1
                    print(f"FAIL {where}: a skipped block must say why")
                continue
            if lang == "sh" and mark == "run":
                home = tempfile.mkdtemp(prefix="home-", dir=tmp)
                rc, out = run(["bash", "-e", "-c", code], cwd=ROOT,
                              env=dict(os.environ, HOME=home, GPUWRAP_BUILD_DIR=build))
            elif lang == "sh":
                rc, out = run(["bash", "-n"], input=code)
            elif lang == "python" and not have_numpy:
                print(f"skip {where} (python): {sys.executable} has no NumPy")
                counts["skipped"] += 1
                continue
            elif lang == "python":
                src = os.path.join(tmp, f"snippet_{len(os.listdir(tmp))}.py")
                open(src, "w").write(code)
                rc, out = run([sys.executable, src], env=env, cwd=tmp)
            else:
                halo = re.search(r"\bgw_(halo|grid)|\bMPI_|gpuwrap/halo\.h", code + arg) is not None
                if halo and not mpicc:
                    print(f"skip {where} (c): needs MPI, and MPICC is empty (gpuwrap built without MPI)")
                    counts["skipped"] += 1
                    continue
                compiler = mpicc if halo else cc
                src = os.path.join(tmp, f"snippet_{len(os.listdir(tmp))}.c")
                exe = src[:-2]
                pre = INCLUDES + (HALO_INCLUDES if halo else "")
                if mark == "fragment":
                    text = (pre + "void snippet_fragment(void);\nvoid snippet_fragment(void) {\n" + arg + "\n"
                            + code + "}\n")
                    cmd = [compiler, *cflags, "-Wno-unused", "-Wno-uninitialized",
                           "-Wno-maybe-uninitialized", "-c", src, "-o", exe + ".o"]
                elif mark == "toplevel":
                    text = pre + arg + "\n" + code
                    cmd = [compiler, *cflags, "-c", src, "-o", exe + ".o"]
                else:
                    text = code
                    libs = ["-lgpuwrap_halo"] if halo else []
                    cmd = [compiler, *cflags, src, "-o", exe, "-L" + libdir, *libs, "-lgpuwrap",
                           "-Wl,-rpath," + libdir]
                open(src, "w").write(text)
                rc, out = run(cmd)
                if rc == 0 and mark is None:
                    rc, out = run([exe], env=env, cwd=tmp)
            if rc == 0:
                counts["ok"] += 1
                print(f"ok   {where} ({lang}{', ' + mark if mark else ''})")
            else:
                counts["failed"] += 1
                print(f"FAIL {where} ({lang}{', ' + mark if mark else ''}): exit {rc}\n{code}---\n{out}")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"snippets: {counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
