#!/bin/sh
# Runs the comm suite (tests/check_comm) under mpirun at 1, 2, 3 and 4 ranks.
# Loopback-only Open MPI as root needs the variables below; every run is
# bounded by timeout, since a rank that hangs would hang the job forever.
set -u
prog=${DBUF_CHECK_COMM:-./tests/check_comm}
mpirun=${MPIRUN:-mpirun}
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
passed=0 failed=0
for np in 1 2 3 4; do
  if timeout 120 "$mpirun" --oversubscribe -np "$np" "$prog"; then
    echo "PASS: check_comm at np $np"
    passed=$((passed + 1))
  else
    echo "FAIL: check_comm at np $np (exit $?)"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
