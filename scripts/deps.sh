#!/usr/bin/env bash
# Installs what building and testing gpuwrap needs on Debian (12 or newer), only when it is
# missing, so the README's two commands work on a fresh machine and cost nothing after.
set -euo pipefail
pkgs=(cmake make gcc g++ pkg-config clang libclang-rt-14-dev valgrind
      libopenmpi-dev openmpi-bin python3 python3-numpy libamdhip64-dev hipcc)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "deps: installing ${missing[*]}" >&2
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
