#!/bin/bash
# dbuf-shard quick start, on a fresh Debian 12 machine as root:
# installs the dependencies, builds, installs dbuf-shard into PREFIX
# (default /usr/local), and runs the main job,
#   mpirun -np 8 dbuf-shard
# on the built-in default model (llama-3.2-1b, bf16, padded, dp = 8).
# Extra arguments go to dbuf-shard, e.g. scripts/quickstart.sh --layout unpadded
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
prefix=${PREFIX:-/usr/local}
build=${DBUF_BUILD_DIR:-$top/_build}

"$top/scripts/install-deps.sh"
cd "$top"
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
mkdir -p "$build"
cd "$build"
"$top/configure" -q --prefix="$prefix"
make -j2 >/dev/null
make install >/dev/null
ldconfig 2>/dev/null || true
export PATH="$prefix/bin:$PATH"

# One machine, loopback only; mpirun refuses root without these.  More ranks
# than cores needs --oversubscribe (ranks are then left unbound).
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
extra=()
[ "$(nproc)" -lt 8 ] && extra=(--oversubscribe)
echo "== mpirun -np 8 ${extra[*]} dbuf-shard $*"
exec timeout 600 mpirun -np 8 "${extra[@]}" dbuf-shard "$@"
