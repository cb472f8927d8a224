#!/usr/bin/env bash
# The installed tree as a user gets it: `cmake --install` into a temporary prefix, MOVE the
# tree (so nothing may depend on where it was installed or built), then build and run
# consumers from a directory outside the source tree:
#   - no build-tree or install-time absolute path in the installed binaries;
#   - CMake find_package(gpuwrap) without components (must not look for MPI), with
#     COMPONENTS halo (a 2-rank update under mpirun), COMPONENTS nonsense and version 0.2
#     (both must fail);
#   - pkg-config gpuwrap, shared and static (libgpuwrap.a from the prefix), and gpuwrap-halo;
#   - the Fortran and C++ consumers in tests/install/consumers/{fortran,cpp} when present
#     (CMake projects: built against the prefix, then their ctest run);
#   - `gpuwrap info` from the moved prefix: the CUDA and HIP plugins found in
#     <libdir>/gpuwrap, their runtimes reported with the loader's own message; and
#     GPUWRAP_PLUGIN_DIR winning over the installed plugins.
# Usage: tests/install/run.sh [BUILD_DIR]   (default build/ci; configured and built if absent)
# Called by scripts/run-tests as its own step. Exit status 0 when every check passed.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build/ci}
case $build in /*) ;; *) build=$src/$build ;; esac
jobs=$(nproc)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j"$jobs" >/dev/null

tmp=$(mktemp -d /tmp/gpuwrap-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { printf '  ok    %s\n' "$*"; }
bad() { printf '  FAIL  %s\n' "$*"; fail=1; }
skip() { printf '  skip  %s\n' "$*"; }
# Whether a log says something (CMake wraps its messages: compare with lines joined).
says() { tr -s ' \n' '  ' <"$1" | grep -q "$2"; }
# Run a step quietly; on failure show its log.
quiet() {
  local log=$tmp/log.$RANDOM
  if "$@" >"$log" 2>&1; then return 0; fi
  tail -40 "$log" | sed 's/^/        /'
  return 1
}

cmake --install "$build" --prefix "$tmp/staged" >/dev/null
mv "$tmp/staged" "$tmp/moved"
P=$tmp/moved
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
libdir=${libdir:-lib}
echo "installed, then moved to $P"

# ---- no absolute path of the build or of the install prefix in installed binaries ------
# What could be looked up at run time (a plugin directory, an rpath) would name the build
# tree, the staging prefix, or a configure-time libdir. Debug sections are left out, and the
# source tree may be named: debuggers and gfortran's run-time error locations ("At line 3
# of file .../gpuwrap.f90") name sources, by design; nothing is looked up there.
leaks=0
while IFS= read -r f; do
  case $(head -c 7 "$f" | od -An -c | tr -d ' ') in "177ELF"*|"!<arch>"*) ;; *) continue ;; esac
  cp "$f" "$tmp/probe" && objcopy --strip-debug "$tmp/probe" 2>/dev/null || true
  if strings -a "$tmp/probe" | grep -qE "$build|$tmp/staged|/usr/local/lib/gpuwrap"; then
    bad "$(basename "$f") names $(strings -a "$tmp/probe" | grep -oE "($build|$tmp/staged|/usr/local/lib/gpuwrap)[^ ]*" | head -1)"
    leaks=1
  fi
  if readelf -d "$f" 2>/dev/null | grep -E 'RPATH|RUNPATH' | grep -vq '\$ORIGIN'; then
    bad "$(basename "$f") has a non-\$ORIGIN rpath: $(readelf -d "$f" | grep -E 'RPATH|RUNPATH')"
    leaks=1
  fi
done < <(find "$P" -type f \( -name '*.so*' -o -name '*.a' -o -path '*/bin/*' \))
# Text files (CMake package, pkg-config files, headers) neither.
for f in $(grep -rlI -e "$src" -e "$tmp/staged" "$P" || true); do
  bad "${f#$P/} names $(grep -ohE "($src|$tmp/staged)[^ \"]*" "$f" | head -1)"
  leaks=1
done
[ $leaks = 0 ] && ok "the installed tree names no build or install path (rpaths are \$ORIGIN)"

# ---- gpuwrap info from the moved prefix ------------------------------------------------
info=$("$P/bin/gpuwrap" info 2>&1) || bad "gpuwrap info exited $?"
for b in cuda hip; do
  line=$(grep "^backend $b:" <<<"$info" || true)
  if [ ! -e "$P/$libdir/gpuwrap/libgpuwrap-$b.so" ]; then
    skip "$b plugin not built here ($line)"
  elif grep -q "not found" <<<"$line"; then
    bad "$b plugin installed but not found from the moved prefix: $line"
  elif grep -qE "present|lib(cuda|amdhip64)[^ ]*: cannot open" <<<"$line"; then
    # present (its runtime loaded, no device here) or absent for the runtime's own reason
    ok "$b plugin found in the moved prefix: ${line#backend }"
  else
    bad "$b: unexpected: $line"
  fi
done
# An explicit GPUWRAP_PLUGIN_DIR wins over the installed plugins.
mkdir -p "$tmp/override" && echo "not a plugin" >"$tmp/override/libgpuwrap-cuda.so"
line=$(GPUWRAP_PLUGIN_DIR=$tmp/override "$P/bin/gpuwrap" info 2>&1 | grep '^backend cuda:' || true)
if grep -q "$tmp/override/libgpuwrap-cuda.so" <<<"$line"; then
  ok "GPUWRAP_PLUGIN_DIR is looked at first"
else
  bad "GPUWRAP_PLUGIN_DIR ignored: $line"
fi

# ---- consumers, copied outside the source tree -----------------------------------------
cp -r "$src/tests/install/consumers" "$tmp/consumers"
C=$tmp/consumers/c

# MPI launcher flags: Open MPI refuses root and more ranks than cores unless told; shared
# memory without CMA for containers (as the halo tests in ctest do).
mpirun=()
if command -v mpirun >/dev/null; then
  mpirun=(mpirun)
  if mpirun --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
    mpirun+=(--oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
    [ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
  fi
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# CMake, no components: the C library only; must not look for MPI.
if quiet cmake -S "$C" -B "$tmp/b-plain" -DCMAKE_PREFIX_PATH="$P" &&
   quiet cmake --build "$tmp/b-plain" -j"$jobs" &&
   quiet "$tmp/b-plain/hello" && quiet "$tmp/b-plain/hello_static"; then
  ok "find_package(gpuwrap): hello (shared) and hello_static run: $("$tmp/b-plain/hello")"
else
  bad "find_package(gpuwrap) consumer"
fi

# CMake with COMPONENTS halo, run on 2 ranks.
halo_built=0
[ -f "$P/$libdir/cmake/gpuwrap/gpuwrapHaloTargets.cmake" ] && halo_built=1
if [ $halo_built = 1 ] && [ ${#mpirun[@]} -gt 0 ]; then
  if quiet cmake -S "$C" -B "$tmp/b-halo" -DCMAKE_PREFIX_PATH="$P" -DWITH_HALO=ON &&
     quiet cmake --build "$tmp/b-halo" -j"$jobs" &&
     quiet env GPUWRAP_BACKEND=cpu "${mpirun[@]}" -np 2 "$tmp/b-halo/halo"; then
    ok "find_package(gpuwrap COMPONENTS halo): mpirun -np 2 halo"
  else
    bad "find_package(gpuwrap COMPONENTS halo) consumer"
  fi
else
  skip "halo (not built, or no mpirun)"
fi

# Wrong requests must fail to configure, with a message that says why.
if cmake -S "$C" -B "$tmp/b-nonsense" -DCMAKE_PREFIX_PATH="$P" -DGW_COMPONENTS=nonsense \
     >"$tmp/nonsense.log" 2>&1; then
  bad "find_package(gpuwrap COMPONENTS nonsense) succeeded"
elif says "$tmp/nonsense.log" "unknown component 'nonsense'"; then
  ok "find_package(gpuwrap COMPONENTS nonsense) refused: unknown component"
else
  bad "COMPONENTS nonsense failed without saying why"; tail -15 "$tmp/nonsense.log"
fi
# COMPONENTS fortran: accepted when the install has the module, else refused with the reason.
if [ -f "$P/$libdir/cmake/gpuwrap/gpuwrapFortranTargets.cmake" ]; then
  if quiet cmake -S "$C" -B "$tmp/b-comp-fortran" -DCMAKE_PREFIX_PATH="$P" -DGW_COMPONENTS=fortran; then
    ok "find_package(gpuwrap COMPONENTS fortran) accepted (the module is installed)"
  else
    bad "find_package(gpuwrap COMPONENTS fortran) failed with the module installed"
  fi
elif cmake -S "$C" -B "$tmp/b-comp-fortran" -DCMAKE_PREFIX_PATH="$P" -DGW_COMPONENTS=fortran \
       >"$tmp/fortran.log" 2>&1; then
  bad "find_package(gpuwrap COMPONENTS fortran) succeeded without the module"
elif says "$tmp/fortran.log" "built without a Fortran compiler"; then
  ok "find_package(gpuwrap COMPONENTS fortran) refused: built without a Fortran compiler"
else
  bad "COMPONENTS fortran failed without saying why"; tail -15 "$tmp/fortran.log"
fi
if cmake -S "$C" -B "$tmp/b-v02" -DCMAKE_PREFIX_PATH="$P" -DGW_WANT_VERSION=0.2 \
     >"$tmp/v02.log" 2>&1; then
  bad "find_package(gpuwrap 0.2) accepted 0.1 (0.x must be SameMinorVersion)"
else
  ok "find_package(gpuwrap 0.2) refused by 0.1 (SameMinorVersion)"
fi

# pkg-config: shared (rpath to the moved libdir), static, and the halo.
export PKG_CONFIG_PATH=$P/$libdir/pkgconfig
cc=${CC:-cc}
pclib=$(pkg-config --variable=libdir gpuwrap)
if quiet $cc -o "$tmp/pc-shared" "$C/hello.c" $(pkg-config --cflags --libs gpuwrap) -Wl,-rpath,"$pclib" &&
   quiet "$tmp/pc-shared" && readelf -d "$tmp/pc-shared" | grep -q 'NEEDED.*libgpuwrap\.so'; then
  ok "pkg-config gpuwrap (shared)"
else
  bad "pkg-config gpuwrap (shared)"
fi
# Static: libgpuwrap.a taken from the prefix by name, the rest from Libs.private.
static_libs=$(pkg-config --static --libs gpuwrap)
if quiet $cc -o "$tmp/pc-static" "$C/hello.c" $(pkg-config --cflags gpuwrap) \
     ${static_libs/-lgpuwrap /-l:libgpuwrap.a } &&
   ! readelf -d "$tmp/pc-static" | grep -q 'NEEDED.*libgpuwrap' && quiet "$tmp/pc-static"; then
  ok "pkg-config --static gpuwrap (libgpuwrap.a: $static_libs)"
else
  bad "pkg-config --static gpuwrap"
fi
# Fully static (-static): the linker must find libgpuwrap.a itself and Libs.private must be
# complete. glibc warns that dlopen in a static program needs its shared libraries.
if quiet $cc -static -o "$tmp/pc-fullstatic" "$C/hello.c" $(pkg-config --static --cflags --libs gpuwrap) &&
   quiet "$tmp/pc-fullstatic"; then
  ok "pkg-config --static gpuwrap, cc -static"
else
  bad "pkg-config --static gpuwrap, cc -static"
fi
if [ $halo_built = 1 ] && [ ${#mpirun[@]} -gt 0 ]; then
  if quiet $cc -o "$tmp/pc-halo" "$C/halo.c" $(pkg-config --cflags --libs gpuwrap-halo) -Wl,-rpath,"$pclib" &&
     quiet env GPUWRAP_BACKEND=cpu "${mpirun[@]}" -np 2 "$tmp/pc-halo"; then
    ok "pkg-config gpuwrap-halo ($(pkg-config --print-requires gpuwrap-halo | tr '\n' ' ')): mpirun -np 2"
  else
    bad "pkg-config gpuwrap-halo"
  fi
fi

# ---- the other faces' consumers ----------------------------------------------------------
# tests/install/consumers/<face>/ is a CMake project, configured against the prefix (with
# -DGW_CONSUMER_HALO=ON when the install has the halo and mpirun exists) and built; then its
# ctest runs if it defines tests, else every program it built runs: those named *halo*
# under mpirun -np 2, the others directly. (A run.sh there instead is called as
# run.sh PREFIX WORKDIR, with the mpirun command line in $GW_MPIRUN.)
export GW_MPIRUN="${mpirun[*]}"
face() { # fortran | cpp
  local name=$1 dir=$tmp/consumers/$1 b=$tmp/b-$1
  if [ ! -f "$dir/run.sh" ] && [ ! -f "$dir/CMakeLists.txt" ]; then
    skip "$name consumer (tests/install/consumers/$name absent)"; return
  fi
  if [ "$name" = fortran ] && ! command -v "${FC:-gfortran}" >/dev/null; then
    skip "fortran consumer (no Fortran compiler)"; return
  fi
  if [ "$name" = fortran ] && [ ! -f "$P/$libdir/cmake/gpuwrap/gpuwrapFortranTargets.cmake" ]; then
    bad "fortran consumer present, but the install has no gpuwrapFortranTargets.cmake"; return
  fi
  if [ -f "$dir/run.sh" ]; then
    if quiet env GPUWRAP_BACKEND=cpu bash "$dir/run.sh" "$P" "$b"; then
      ok "$name consumer (run.sh)"
    else
      bad "$name consumer (run.sh)"
    fi
    return
  fi
  local halo_opt=OFF preflags
  [ $halo_built = 1 ] && [ ${#mpirun[@]} -gt 0 ] && halo_opt=ON
  preflags=$(IFS=';'; echo "${mpirun[*]:1}")
  if ! quiet cmake -S "$dir" -B "$b" -DCMAKE_PREFIX_PATH="$P" -DGW_CONSUMER_HALO=$halo_opt \
         "-DMPIEXEC_PREFLAGS=$preflags" || ! quiet cmake --build "$b" -j"$jobs"; then
    bad "$name consumer: configure or build"; return
  fi
  if ctest --test-dir "$b" -N 2>/dev/null | grep -qE "Total Tests: [1-9]"; then
    if quiet env GPUWRAP_BACKEND=cpu ctest --test-dir "$b" --output-on-failure; then
      ok "$name consumer: $(ctest --test-dir "$b" -N | tail -1)"
    else
      bad "$name consumer: ctest"
    fi
    return
  fi
  local exe ran=() failed=0
  while IFS= read -r exe; do
    case $(basename "$exe") in
      *halo*) quiet env GPUWRAP_BACKEND=cpu "${mpirun[@]}" -np 2 "$exe" || { bad "$name: mpirun -np 2 $(basename "$exe")"; failed=1; continue; }
              ran+=("mpirun -np 2 $(basename "$exe")") ;;
      *)      quiet env GPUWRAP_BACKEND=cpu "$exe" || { bad "$name: $(basename "$exe")"; failed=1; continue; }
              ran+=("$(basename "$exe")") ;;
    esac
  done < <(find "$b" -maxdepth 1 -type f -perm -u+x ! -name '*.so*' | sort)
  if [ ${#ran[@]} -gt 0 ] && [ $failed = 0 ]; then
    ok "$name consumer: $(IFS=,; echo "${ran[*]}" | sed 's/,/, /g')"
  elif [ ${#ran[@]} -eq 0 ] && [ $failed = 0 ]; then
    bad "$name consumer built no program"
  fi
}
face fortran
face cpp

if [ $fail = 0 ]; then echo "install tests passed"; else echo "install tests FAILED"; fi
exit $fail
