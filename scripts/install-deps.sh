#!/bin/bash
# Install the Debian packages dbuf-shard needs to build, test and run.
# Installs only what is missing; needs root for that (apt-get).
set -euo pipefail

packages=(build-essential autoconf automake libtool pkg-config
  libopenmpi-dev openmpi-bin libhwloc-dev hwloc check libjansson-dev
  libxxhash-dev jq librsvg2-bin util-linux procps
  clang libclang-rt-14-dev valgrind)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing Debian packages, and installing them needs root: ${missing[*]}" >&2
  exit 2
fi
echo "== installing: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
