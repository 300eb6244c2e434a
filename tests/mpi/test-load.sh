#!/bin/bash
# The collective load and its proof (tests/mpi/mpi_load.c) at 1, 2 and 4
# ranks: posix, mpiio and mpiio-coll reads of a sharded mixed-dtype
# checkpoint, PASS, a flipped byte named by tensor, row and rank, padding
# that is not zero, and a missing or short file on one rank failing every
# rank with the same message.  Each run is bounded by 60 s.
set -u
# shellcheck source=tests/mpi/lib.sh
. "$(dirname "$0")/lib.sh"
prog=${DBUF_MPI_LOAD:-./tests/mpi/mpi_load}
for np in 1 2 4; do
  d="$T/np$np"
  mkdir -p "$d"
  mpirun_in 60 -np "$np" "$prog" "$d" >"$T/out" 2>&1
  code=$?
  if [ "$code" -eq 0 ] && grep -q "mpi_load at np $np: PASS" "$T/out"; then
    pass "mpi_load at np $np"
  else
    fail "mpi_load at np $np (exit $code): $(grep -E 'FAIL|rror' "$T/out" | head -5)"
  fi
done
finish
