#!/bin/sh
# The Python package's tests, against the INSTALLED package (what a user gets):
#   1. builds the C library if needed (CPU backend is enough; an existing build is reused),
#   2. makes a virtual environment under build/python/ with --system-site-packages (for
#      Debian's NumPy and pytest), using Debian's /usr/bin/python3,
#   3. installs ./python into it offline (pip --no-index --no-build-isolation), bundling
#      the library of that build,
#   4. runs pytest on tests/python from outside the source tree (so `import gpuwrap` can only
#      be the installed package), with GPUWRAP_LIB unset.
# Exit status: pytest's, except that "no tests collected" (5) is an error too.
# Environment: GPUWRAP_BUILD_DIR (default build), PYTHON (default /usr/bin/python3),
# GW_TEST_PYTHON_DIR (default build/python); extra arguments go to pytest.
# Debian packages: python3 python3-venv python3-pip python3-setuptools python3-wheel
# python3-dev python3-numpy python3-pytest (plus the library's cmake and gcc).
set -eu
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-/usr/bin/python3}
BUILD=${GPUWRAP_BUILD_DIR:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=${GW_TEST_PYTHON_DIR:-build/python}
case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac

for mod in venv pip setuptools wheel numpy pytest; do
  if ! "$PY" -c "import $mod" >/dev/null 2>&1; then
    echo "test-python: $PY lacks $mod (Debian: apt-get install python3-venv python3-pip python3-setuptools python3-wheel python3-dev python3-numpy python3-pytest)" >&2
    exit 1
  fi
done

if [ ! -e "$BUILD/lib/libgpuwrap.so" ]; then
  echo "test-python: building the library in $BUILD"
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" >/dev/null
  cmake --build "$BUILD" -j"$(nproc 2>/dev/null || echo 2)" --target gpuwrap
  # the backend plugins, where they are configured (bundled into the package when built)
  for t in gpuwrap-cuda gpuwrap-hip; do
    cmake --build "$BUILD" --target "$t" >/dev/null 2>&1 || true
  done
fi

VENV=$OUT/venv
rm -rf "$VENV"
"$PY" -m venv --system-site-packages "$VENV"
# --force-reinstall: the package is rebuilt from this tree even at the same version.
GPUWRAP_BUILD_DIR=$BUILD "$VENV/bin/python" -m pip install --no-index --no-build-isolation \
  --no-deps --force-reinstall --quiet "$ROOT/python"

cd "$OUT"  # outside the source tree: python/ is not on sys.path
unset GPUWRAP_LIB PYTHONPATH || true
"$VENV/bin/python" -m gpuwrap info >/dev/null
set +e
"$VENV/bin/python" -m pytest -p no:cacheprovider --rootdir "$ROOT/tests/python" "$ROOT/tests/python" "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
  echo "test-python: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit $rc
