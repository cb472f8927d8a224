#!/usr/bin/env bash
# What building gpuwrap needs, checked before anything is built, installed only when it is
# missing and only when it can be (apt-get, as root or through sudo without a password).
#   scripts/deps.sh demo   the tools the demo needs (scripts/run-demo): cmake >= the
#                          project's minimum, a working C compiler, make or ninja. Checked as
#                          TOOLS on PATH, not packages: GPU nodes bring their own (cmake from a
#                          virtual environment or a module, a vendor compiler), often without
#                          root or network. CUDA is optional: reported, never installed.
#   scripts/deps.sh test   the demo's tools, then everything the whole suite needs on Debian 12
#                          (scripts/run-tests, CI): MPI, clang and its sanitizer runtimes,
#                          valgrind, Python with NumPy, HIP headers and hipcc, gfortran,
#                          pkg-config, static libc (the install tests).
# Exit status 0 when everything needed is there (after installing), 1 with a list of what is
# missing otherwise. Nothing is downloaded when nothing is missing.
set -euo pipefail
set_name=${1:-test}
case $set_name in demo | test) ;; *) echo "usage: scripts/deps.sh [demo|test]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "deps: $*" >&2; }

# Installing is possible with apt-get, as root or with a sudo that asks no password.
sudo=none
if command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then sudo=""
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=sudo
  fi
fi
apt_updated=0
apt_install() { # packages...
  if [ "$sudo" = none ]; then return 1; fi
  say "installing $*"
  if [ $apt_updated = 0 ]; then
    $sudo apt-get update -q >/dev/null 2>&1 || say "apt-get update failed (no network?); trying the cached lists"
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$@"
}

# ---- the demo's tools ---------------------------------------------------------------------
cmake_min=$(sed -n 's/^cmake_minimum_required(VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt" | head -1)
cmake_ok() {
  command -v cmake >/dev/null 2>&1 || return 1
  local v
  v=$(cmake --version 2>/dev/null | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')
  [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$cmake_min" "$v" | sort -V | head -1)" = "$cmake_min" ]
}
c_compiler() { # prints the first C compiler that builds a program
  local c probe
  probe=$(mktemp -d)
  for c in ${CC:-} cc gcc clang; do
    command -v "$c" >/dev/null 2>&1 || continue
    if printf '#include <stdio.h>\nint main(void) { return puts("") < 0; }\n' |
       "$c" -x c - -o "$probe/a.out" >/dev/null 2>&1; then
      echo "$c"; rm -rf "$probe"; return 0
    fi
  done
  rm -rf "$probe"; return 1
}
build_tool_ok() { command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1; }

check_demo() { # sets missing=(what is missing, in words) and pkgs=(what apt would install)
  missing=(); pkgs=()
  if ! cmake_ok; then
    if command -v cmake >/dev/null 2>&1; then
      missing+=("cmake >= $cmake_min (found $(cmake --version | head -1) at $(command -v cmake))")
    else
      missing+=("cmake >= $cmake_min")
    fi
    pkgs+=(cmake)
  fi
  if ! c_compiler >/dev/null; then
    missing+=("a C compiler that builds a program (cc, gcc or clang, with the C library's headers)")
    pkgs+=(gcc libc6-dev)
  fi
  if ! build_tool_ok; then
    missing+=("make or ninja")
    pkgs+=(make)
  fi
}

check_demo
tried=0
if [ ${#missing[@]} -gt 0 ] && [ "$sudo" != none ]; then
  tried=1
  apt_install "${pkgs[@]}" || true
  hash -r
  check_demo
fi
if [ ${#missing[@]} -gt 0 ]; then
  say "missing for building gpuwrap:"
  for m in "${missing[@]}"; do say "  - $m"; done
  if [ $tried = 1 ]; then
    say "apt-get could not install them (no network or no such package?): apt-get install ${pkgs[*]}"
  elif command -v apt-get >/dev/null 2>&1; then
    say "not installed: that needs root or password-less sudo (as root: apt-get install ${pkgs[*]})"
  else
    say "not installed: no apt-get here; load or install them yourself (e.g. a module)"
  fi
  if [[ " ${pkgs[*]} " == *" cmake "* ]]; then
    say "any cmake >= $cmake_min first on PATH does, e.g. 'python3 -m pip install cmake' in a virtual environment"
  fi
  exit 1
fi

if [ "$set_name" = demo ]; then
  cc=$(c_compiler)
  say "cmake $(cmake --version | sed -n 's/^cmake version //p' | head -1), C compiler $cc, $(command -v make >/dev/null && echo make || echo ninja)"
  nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
  if [ -n "$nvcc" ]; then
    say "CUDA toolkit: $nvcc (the CUDA backend is built)"
  else
    say "no CUDA toolkit (nvcc): the CUDA backend is not built; the demo runs on the CPU backend"
  fi
  exit 0
fi

# ---- the whole suite: Debian packages -------------------------------------------------------
pkgs=(cmake make gcc g++ libc6-dev pkg-config clang clang-format libclang-rt-14-dev valgrind
      libopenmpi-dev openmpi-bin python3 python3-numpy libamdhip64-dev hipcc gfortran
      python3-venv python3-pip python3-setuptools python3-wheel python3-dev python3-pytest)
if ! command -v dpkg-query >/dev/null 2>&1; then
  say "not a Debian system: install the equivalents of ${pkgs[*]} yourself"
  exit 1
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! apt_install "${missing[@]}"; then
  say "missing Debian packages for the test suite: ${missing[*]}"
  [ "$sudo" = none ] && say "installing them needs root or password-less sudo"
  exit 1
fi
