#!/bin/bash
# dbuf-shard: the one test command.
#
# On a fresh Debian 12 machine, as root: installs every missing Debian package
# the build and the tests need, bootstraps, configures (warnings are errors),
# builds, and runs every test: `make check` (unit, CLI and MPI suites),
# the whole `make check` again in an ASan+UBSan build (_build-asan), the
# core alone built --without-mpi and its `make check` (_build-nompi), the
# serial CLI tests under valgrind memcheck, every fuzz harness for 60 s
# (scripts/fuzz.sh, clang, ASan+UBSan), `make distcheck`, the
# installed-library example, and the Slurm integration test.  Exits non-zero
# on any failure; prints how long each step took.
#
#   scripts/test.sh                 everything
#   DBUF_TEST_QUICK=1 scripts/test.sh   make check only (no sanitizers,
#                                   valgrind, fuzzing, distcheck or Slurm)
#   DBUF_FUZZ_SECONDS=N             fuzz each harness N s (default 60)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${DBUF_BUILD_DIR:-$top/_build}

"$top/scripts/install-deps.sh"

# Open MPI on one loopback-only machine, possibly as root (see README).
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "== bootstrap"
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
mkdir -p "$build"
cd "$build"
echo "== configure ($build)"
"$top/configure" -q --enable-werror
echo "== build"
make -j2 >/dev/null

suites_passed=0
suites_failed=0
timings=()
step() { # step NAME COMMAND...: run, tally, time, never stop early
  local name=$1 start=$SECONDS
  shift
  echo "== $name"
  if "$@"; then
    suites_passed=$((suites_passed + 1))
  else
    suites_failed=$((suites_failed + 1))
    echo "FAILED: $name"
  fi
  timings+=("$(printf '%6d s  %s' $((SECONDS - start)) "$name")")
}

check() { # check [MAKE ARGS...]: make check in the current build folder
  local rc=0 build=$PWD
  make -j2 check "$@" >"$build/check.out" 2>&1 || rc=$?
  grep -E '^(PASS|FAIL|XFAIL|XPASS|ERROR|SKIP):' "$build/check.out" || true
  # Each Check suite's own summary line, and each script's tally.
  find tests -name '*.log' ! -name test-suite.log | sort | while read -r log; do
    printf '%s: %s\n' "$log" "$(grep -hE 'Checks: [0-9]+|^[0-9]+ passed, [0-9]+ failed|^PASS: ' "$log" | tail -1)"
  done
  if [ $rc -ne 0 ]; then
    echo "---- failing test logs ----"
    find tests -name '*.trs' -exec grep -l -E ':test-result: (FAIL|ERROR)' {} + |
      while read -r trs; do
        echo "---- ${trs%.trs}.log"
        tail -40 "${trs%.trs}.log"
      done
  fi
  return $rc
}
step "make check" check

# The whole suite again with AddressSanitizer and UBSan (UB aborts: see
# configure.ac).  allocator_may_return_null: the tests ask for impossible
# sizes and expect ENOMEM, not an ASan abort.  Check's per-test timeouts
# are multiplied by 10 (ASan is 2-3x slower, and CI machines are shared).
# Leak detection is on for the unit and CLI suites (tests/lsan.supp names
# hwloc and Open MPI libraries only) and off for the MPI suites (tests/mpi/):
# Open MPI's components are dlopen'ed and unloaded before LSan reports, so
# their allocations from MPI_Init show up as leaks from "<unknown module>"
# that no suppression can name; dbuf's own leaks are caught by the serial
# suites and by valgrind.
asan_check() {
  local asan=${DBUF_ASAN_BUILD_DIR:-$top/_build-asan} rc=0 t serial="" mpi=""
  mkdir -p "$asan"
  cd "$asan"
  "$top/configure" -q --enable-sanitizers --enable-werror
  make -j2 >make.out 2>&1 || { tail -30 make.out; cd "$build"; return 1; }
  for t in $(printf 'print-tests:\n\t@echo $(TESTS)\n' | make -s -f Makefile -f - print-tests); do
    case $t in tests/mpi/*) mpi="$mpi $t" ;; *) serial="$serial $t" ;; esac
  done
  export DBUF_TEST_SANITIZERS=1 CK_TIMEOUT_MULTIPLIER=10 DBUF_TEST_TIME_SCALE=10 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export LSAN_OPTIONS=suppressions=$top/tests/lsan.supp:print_suppressions=0
  ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 check TESTS="$serial" || rc=1
  ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=0 check TESTS="$mpi" || rc=1
  unset DBUF_TEST_SANITIZERS CK_TIMEOUT_MULTIPLIER DBUF_TEST_TIME_SCALE UBSAN_OPTIONS LSAN_OPTIONS
  cd "$build"
  return $rc
}
# valgrind memcheck on the serial CLI tests (tests/cli/lib.sh, DBUF_VALGRIND).
valgrind_check() {
  DBUF_VALGRIND=1 check TESTS="$valgrind_tests"
}
valgrind_tests="tests/cli/test-plan.sh tests/cli/test-verify.sh tests/cli/test-inputs.sh"

# configure --without-mpi: libdbuf and the serial commands alone, with the
# core, CLI and library tests (the MPI and memory suites are left out).
nompi_check() {
  local nompi=${DBUF_NOMPI_BUILD_DIR:-$top/_build-nompi} rc=0
  mkdir -p "$nompi"
  cd "$nompi"
  "$top/configure" -q --enable-werror --without-mpi
  make -j2 >make.out 2>&1 || { tail -30 make.out; cd "$build"; return 1; }
  check || rc=1
  cd "$build"
  return $rc
}

if [ -z "${DBUF_TEST_QUICK:-}" ]; then
  step "make check (ASan+UBSan)" asan_check
  step "_build-nompi: configure --without-mpi, make check" nompi_check
  step "valgrind: $valgrind_tests" valgrind_check
  step "fuzz ${DBUF_FUZZ_SECONDS:-60} s per harness" "$top/scripts/fuzz.sh" "${DBUF_FUZZ_SECONDS:-60}"
  for s in "$top"/scripts/test-*.sh; do
    [ -x "$s" ] && step "$(basename "$s")" "$s" "$build"
  done
  step "make distcheck" sh -c 'make -j2 distcheck >distcheck.out 2>&1 || { tail -60 distcheck.out; exit 1; }'
fi

echo "== timings"
printf '%s\n' "${timings[@]}"
echo "test-suites: $suites_passed passed, $suites_failed failed"
[ "$suites_failed" -eq 0 ]
