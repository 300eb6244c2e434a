# shellcheck shell=bash
# Shared by the MPI test scripts (tests/mpi/*.sh), sourced after `set -u`.
# Skips the script (exit 77, automake's SKIP) when there is no mpirun; loads
# tests/cli/lib.sh ($T, $DBUF, pass/fail/finish, the expect_* helpers); sets
# Open MPI up for one loopback-only machine, as root too; and runs every
# mpirun under timeout, since a rank that hangs would hang the job forever.
HERE=$(cd "$(dirname "$0")" && pwd)
MPIRUN=${MPIRUN:-mpirun}
if ! command -v "$MPIRUN" >/dev/null 2>&1; then
  echo "SKIP: $MPIRUN not found (Open MPI's launcher: Debian package openmpi-bin)"
  exit 77
fi
# shellcheck source=tests/cli/lib.sh
. "$HERE/../cli/lib.sh"
# The TCP transports skip 127.0.0.0/8 unless told to use it; as root, mpirun
# starts only with both ALLOW variables.
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A fault is injected only where a test asks for it, never inherited.
unset DBUF_FAULT
# Seconds one mpirun may take before timeout ends it (exit 124).
MPI_TIMEOUT=120
# Seconds within which a job that fails must have ended (a healthy one takes
# a second or two here), stretched by TIME_SCALE (tests/cli/lib.sh).
# shellcheck disable=SC2034 # read by the scripts that source this one
LIMIT=$((20 * TIME_SCALE))

# mpirun_in SECS ARGS...: mpirun --oversubscribe ARGS... (more ranks than
# cores), ended after SECS: exit 124.  A launcher stuck after its ranks
# have gone (Open MPI 4.1.4, abort on failure off) may outlive timeout's
# SIGTERM: it is killed 5 s later, and that is reported as 124 too.
mpirun_in() {
  local secs=$1 t0 code
  shift
  t0=$(date +%s)
  timeout -k 5 "$secs" "$MPIRUN" --oversubscribe "$@"
  code=$?
  [ "$code" -eq 137 ] && [ $(($(date +%s) - t0)) -ge "$((secs + 5))" ] && code=124
  return "$code"
}
# timed COMMAND...: runs COMMAND; sets CODE and SECS (whole seconds taken).
timed() {
  local t0
  t0=$(date +%s%N)
  "$@"
  CODE=$?
  # shellcheck disable=SC2034 # read by the scripts that source this one
  SECS=$((($(date +%s%N) - t0) / 1000000000))
}
# mpi NP ARGS...: dbuf-shard ARGS on NP ranks; sets CODE, SECS, ERR (only the
# lines dbuf-shard printed, its progress lines aside: mpirun adds its own);
# stdout in $T/stdout, the whole stderr in $T/stderr.all.
mpi() {
  local np=$1
  shift
  timed mpirun_in "$MPI_TIMEOUT" -np "$np" "$DBUF" "$@" >"$T/stdout" 2>"$T/stderr.all"
  grep '^dbuf-shard: ' "$T/stderr.all" | grep -v ': rank 0: [0-9]*% (' >"$T/stderr"
  ERR=$(cat "$T/stderr")
}
# jq_is FILE FILTER WANT what: jq -c FILTER of FILE equals WANT (compact).
jq_is() {
  local got want
  got=$(jq -c "$2" "$1" 2>&1)
  want=$(jq -c . <<<"$3")
  if [ "$got" = "$want" ]; then pass "$4"; else fail "$4: $2 = $got, want $want"; fi
}
