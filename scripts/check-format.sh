#!/bin/sh
# Whether the tracked C, C++ and CUDA sources (*.c *.h *.cu *.hpp) are formatted as
# .clang-format says, with clang-format 14 (Debian 12: apt-get install clang-format-14).
# Changes nothing: prints the files that differ and exits 1; 0 when all are formatted,
# 2 when clang-format is missing. To format a file: clang-format -i FILE.
# Environment: CLANG_FORMAT (default clang-format-14, else clang-format).
set -u
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
  if command -v clang-format-14 >/dev/null 2>&1; then cf=clang-format-14; else cf=clang-format; fi
fi
if ! command -v "$cf" >/dev/null 2>&1; then
  echo "check-format: $cf not found (Debian: apt-get install clang-format-14)" >&2
  exit 2
fi
case $("$cf" --version) in
  *" 14."*) ;;
  *) echo "check-format: $("$cf" --version): not clang-format 14, results may differ" >&2 ;;
esac
bad=$(git ls-files -z -- '*.c' '*.h' '*.cu' '*.hpp' |
  xargs -0 -r -n 50 sh -c 'for f; do "$0" --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"; done' "$cf")
if [ -n "$bad" ]; then
  echo "check-format: not formatted as .clang-format says (clang-format -i FILE):"
  printf '%s\n' "$bad" | sed 's/^/  /'
  exit 1
fi
echo "check-format: all formatted"
