#!/bin/bash
# Runs the comm suite (tests/check_comm) under mpirun at 1, 2, 3 and 4 ranks,
# each run bounded by timeout (tests/mpi/lib.sh).
set -u
# shellcheck source=tests/mpi/lib.sh
. "$(dirname "$0")/lib.sh"
prog=${DBUF_CHECK_COMM:-./tests/check_comm}
for np in 1 2 3 4; do
  mpirun_in "$MPI_TIMEOUT" -np "$np" "$prog"
  code=$?
  if [ "$code" -eq 0 ]; then
    pass "check_comm at np $np"
  else
    fail "check_comm at np $np (exit $code)"
  fi
done
finish
