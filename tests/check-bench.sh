#!/bin/sh
# The benchmark suite (scripts/bench, not run here): its scripts parse, its
# helpers are built, and bench_rusage reports a real peak and passes the
# exit code through.
set -eu
src=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(dirname "${DBUF_SHARD:?DBUF_SHARD is not set}")
fail=0
for f in "$src"/scripts/bench/*.sh; do
  bash -n "$f" || { echo "FAIL: $f does not parse"; fail=1; }
done
helpers="bench_rusage bench_wire"
[ "${DBUF_WITH_MPI:-yes}" = no ] || helpers="$helpers bench_mem mpi_null"
for h in $helpers; do
  [ -x "$build/scripts/bench/$h" ] || { echo "FAIL: scripts/bench/$h is not built"; fail=1; }
done
# N lines for N tensors; fewer than 3 is refused.
n=$("$src/scripts/bench/gen-shapes.sh" 1000 | wc -l)
[ "$n" -eq 1000 ] || { echo "FAIL: gen-shapes.sh 1000 gave $n lines"; fail=1; }
if "$src/scripts/bench/gen-shapes.sh" 2 >/dev/null 2>&1; then
  echo "FAIL: gen-shapes.sh 2 was accepted"; fail=1
fi
# A child that touches 64 MiB peaks above 64 MiB; its exit code comes back.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
code=0
"$build/scripts/bench/bench_rusage" "$out" sh -c 'dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null; exit 3' || code=$?
[ "$code" -eq 3 ] || { echo "FAIL: bench_rusage returned $code, the child 3"; fail=1; }
read -r wall kib rc <"$out"
[ "$rc" -eq 3 ] || { echo "FAIL: bench_rusage recorded exit $rc, not 3"; fail=1; }
[ "$kib" -ge 65536 ] || { echo "FAIL: bench_rusage peak $kib KiB, below the 65536 KiB touched"; fail=1; }
echo "bench_rusage: ${wall} s, ${kib} KiB peak"
exit $fail
