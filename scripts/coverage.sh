#!/bin/bash
# Line and function coverage of src/ by the test suite.
#
# Configures its own build folder (_build-cov/: gcc --coverage -O0, static
# libraries only, so each source file has one object and one .gcda), clears
# the old counts, runs `make check` there, and prints for every source file
# under src/ the lines and functions executed, read from gcov's JSON
# (`gcov --json-format --stdout`, no lcov needed).  Every process the tests
# start adds its counts when it exits normally: the Check suites' forked
# tests, the children tests/check_mem.c forks (they call __gcov_dump before
# _exit), dbuf-shard, and every MPI rank of the mpirun tests.
#
# Exits 1 if make check fails or if any src/ file has under DBUF_COV_MIN
# percent of its lines executed (default 80); the table is printed either way.
#
#   scripts/coverage.sh                       build, run make check, report
#   DBUF_COV_TESTS='tests/check_mem' scripts/coverage.sh
#                                             only these tests (quicker; the
#                                             others' files then fall short)
#   DBUF_COV_REPORT_ONLY=1 scripts/coverage.sh   report the counts already there
#   DBUF_COV_BUILD_DIR=DIR, DBUF_COV_MIN=N    another folder, another bar
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${DBUF_COV_BUILD_DIR:-$top/_build-cov}
min=${DBUF_COV_MIN:-80}
for tool in gcc gcov jq; do
  command -v "$tool" >/dev/null || { echo "coverage.sh: $tool is required" >&2; exit 1; }
done

# Open MPI on one loopback-only machine, possibly as root (see README).
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# -O0 with counters is slower: give the timed MPI tests room.
export DBUF_TEST_TIME_SCALE=${DBUF_TEST_TIME_SCALE:-3}

check_rc=0
if [ -z "${DBUF_COV_REPORT_ONLY:-}" ]; then
  cd "$top"
  [ -x configure ] || autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
  mkdir -p "$build"
  cd "$build"
  if [ ! -f Makefile ]; then
    echo "== configure ($build: --coverage -O0, static)"
    # No --enable-werror: gcc warns differently at -O0 (format truncation),
    # and the normal build already holds the code to its warnings.
    "$top/configure" -q --disable-shared CC=gcc \
      CFLAGS="--coverage -O0 -g" LDFLAGS="--coverage"
  fi
  echo "== build"
  # -O0 brings other warnings (kept in build.err, shown if the build fails).
  make -j2 >/dev/null 2>"$build/build.err" || { cat "$build/build.err"; exit 1; }
  find "$build" -name '*.gcda' -delete
  echo "== make check${DBUF_COV_TESTS:+ TESTS='$DBUF_COV_TESTS'}"
  start=$SECONDS
  if [ -n "${DBUF_COV_TESTS:-}" ]; then
    make -j2 check TESTS="$DBUF_COV_TESTS" >"$build/check.out" 2>&1 || check_rc=$?
  else
    make -j2 check >"$build/check.out" 2>&1 || check_rc=$?
  fi
  grep -E '^(FAIL|ERROR|XPASS|SKIP):' "$build/check.out" || true
  grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR):' "$build/check.out" | tail -5 || true
  echo "   ($((SECONDS - start)) s)"
fi

cd "$build"
# One .gcno per object compiled from src/; a file no test ran has no .gcda
# and gcov reports it as not executed.
mapfile -t notes < <(find src -name '*.gcno' | sort)
[ "${#notes[@]}" -gt 0 ] || { echo "coverage.sh: no .gcno under $build/src: not a --coverage build" >&2; exit 1; }
json=$build/coverage.json
# gcov writes one JSON document per object; merge them by source file: a
# line (function) counts as executed if any object executed it.
gcov --json-format --stdout "${notes[@]}" 2>"$build/gcov.err" |
  jq -s --arg top "$top/" '
    [.[].files[] | .file |= (ltrimstr($top) | sub("^(\\.\\./)+"; ""))
     | select(.file | test("^src/.*\\.c$"))]
    | group_by(.file)
    | map({file: .[0].file,
           lines: ([.[].lines[] | {n: .line_number, hit: (.count > 0)}]
                   | group_by(.n) | map(any(.[]; .hit))),
           funcs: ([.[].functions[] | {n: .name, hit: (.execution_count > 0)}]
                   | group_by(.n) | map(any(.[]; .hit)))})
    | map({file,
           lines: (.lines | length), lines_hit: (.lines | map(select(.)) | length),
           funcs: (.funcs | length), funcs_hit: (.funcs | map(select(.)) | length)})' >"$json"

jq -r --argjson min "$min" '
  def pct(a; b): if b == 0 then 100 else (a * 1000 / b | floor) / 10 end;
  def fmt: (. * 10 | round) as $t | "\($t / 10 | floor).\($t % 10)";
  def row(name; lh; l; fh; f; mark):
    "\(name | . + " " * ([36 - length, 1] | max))"
    + "\(pct(lh; l) | fmt | " " * (6 - length) + .)%  \("\(lh)/\(l)" | " " * (11 - length) + .)"
    + "   \(pct(fh; f) | fmt | " " * (6 - length) + .)%  \("\(fh)/\(f)" | " " * (7 - length) + .)"
    + mark;
  "file                                 lines                   functions",
  (.[] | row(.file; .lines_hit; .lines; .funcs_hit; .funcs;
             if pct(.lines_hit; .lines) < $min then "   < \($min)% lines" else "" end)),
  row("total"; (map(.lines_hit) | add); (map(.lines) | add);
      (map(.funcs_hit) | add); (map(.funcs) | add); "")' "$json"

low=$(jq --argjson min "$min" \
  '[.[] | select(.lines > 0 and .lines_hit * 100 < $min * .lines)] | length' "$json")
status=0
if [ "$check_rc" -ne 0 ]; then
  echo "coverage.sh: make check failed (see $build/check.out and the tests' .log files)"
  status=1
fi
if [ "$low" -gt 0 ]; then
  echo "coverage.sh: $low file(s) under $min% of lines"
  status=1
fi
exit $status
