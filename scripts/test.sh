#!/bin/bash
# dbuf-shard: the one test command.
#
# On a fresh Debian 12 machine, as root: installs every missing Debian package
# the build and the tests need, bootstraps, configures (warnings are errors),
# builds, and runs every test: `make check` (unit, CLI and MPI suites),
# `make distcheck`, the installed-library example, and the Slurm integration
# test.  Exits non-zero on any failure.
#
#   scripts/test.sh                 everything
#   DBUF_TEST_QUICK=1 scripts/test.sh   make check only (no distcheck, no Slurm)
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
step() { # step NAME COMMAND...: run, tally, never stop early
  local name=$1
  shift
  echo "== $name"
  if "$@"; then
    suites_passed=$((suites_passed + 1))
  else
    suites_failed=$((suites_failed + 1))
    echo "FAILED: $name"
  fi
}

check() {
  local rc=0
  make -j2 check >"$build/check.out" 2>&1 || rc=$?
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

if [ -z "${DBUF_TEST_QUICK:-}" ]; then
  for s in "$top"/scripts/test-*.sh; do
    [ -x "$s" ] && step "$(basename "$s")" "$s" "$build"
  done
  step "make distcheck" sh -c 'make -j2 distcheck >distcheck.out 2>&1 || { tail -60 distcheck.out; exit 1; }'
fi

echo "test-suites: $suites_passed passed, $suites_failed failed"
[ "$suites_failed" -eq 0 ]
