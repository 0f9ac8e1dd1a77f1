#!/usr/bin/env bash
# Installs the Debian 12 packages Optimus needs, only the missing ones (as root, or through sudo).
set -euo pipefail

packages=(cmake ninja-build g++ libeigen3-dev doctest-dev libopenblas-dev nlohmann-json3-dev libxxhash-dev python3-venv)
if [[ "${OPTIMUS_WITH_MPI:-ON}" != "OFF" ]]; then
  packages+=(libopenmpi-dev openmpi-bin libscalapack-openmpi-dev)
fi
if [[ "${OPTIMUS_FUZZ:-OFF}" == "ON" ]]; then
  packages+=(clang libclang-rt-14-dev)  # libFuzzer (scripts/test.sh --fuzz)
fi

if ! command -v dpkg-query >/dev/null; then
  echo "install_deps: not a Debian system; make sure these are installed: ${packages[*]}" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install_deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "install_deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
