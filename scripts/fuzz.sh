#!/bin/bash
# dbuf-shard: build the libFuzzer harnesses (tests/fuzz/) with clang under
# ASan+UBSan and run each for SECONDS (default 60), two at a time.
#
#   scripts/fuzz.sh [SECONDS]        build, replay, fuzz every harness
#   scripts/fuzz.sh 0                build and replay only
#   DBUF_FUZZ_ONLY="wire st_index" scripts/fuzz.sh 300   some harnesses
#
# Steps: an out-of-tree configure with CC=clang --enable-sanitizers in
# _build-fuzz (DBUF_FUZZ_BUILD overrides), `make libdbuf_core.la`, one binary
# per harness; then every stored reproducer (tests/fuzz/regress/HARNESS/) and
# every seed (tests/fuzz/corpus/HARNESS/) is replayed; then each harness
# fuzzes for SECONDS on a working corpus in the build folder that starts
# from the seeds and grows from run to run.  Any crash, sanitizer report,
# leak, timeout (10 s per input) or memory blow-up (2 GiB) is a finding: its
# input is copied to tests/fuzz/regress/HARNESS/ (commit it with the fix),
# its path printed, and the script exits 1.  Each run is appended to
# BUILD/fuzz-history.tsv (harness, seconds, runs, result, date), the record
# behind the README's "run clean in total" table.
set -euo pipefail

seconds=${1:-60}
case $seconds in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2 ;; esac
top=$(cd "$(dirname "$0")/.." && pwd)
build=${DBUF_FUZZ_BUILD:-$top/_build-fuzz}
jobs=${DBUF_FUZZ_JOBS:-2}
harnesses=(shapes_text shapes_json owners layout_json plan_json wire st_header st_index units
  layout_file)
[ -n "${DBUF_FUZZ_ONLY:-}" ] && read -r -a harnesses <<<"$DBUF_FUZZ_ONLY"

command -v clang >/dev/null || { echo "fuzz: clang is required (scripts/install-deps.sh)" >&2; exit 2; }
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# ------------------------------------------------------------------ build
[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi >/dev/null 2>&1)
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
  echo "== fuzz: configure ($build, clang, ASan+UBSan)"
  CC=clang CFLAGS="-g -O1 -fsanitize=fuzzer-no-link" \
    "$top/configure" -q --enable-sanitizers >/dev/null
fi
echo "== fuzz: build"
make -j2 libdbuf_core.la >make.out 2>&1 || { tail -30 make.out; exit 1; }
# shellcheck disable=SC2207 # pkg-config output is a flag list
deps=($(pkg-config --cflags --libs jansson libxxhash))
build_harness() { # build_harness NAME SOURCE [CPPFLAGS...]
  local name=$1 src=$2
  shift 2
  local out=$build/fuzz_$name
  if [ ! -x "$out" ] || [ -n "$(find "$top/tests/fuzz" "$build/.libs/libdbuf_core.a" \
       -newer "$out" -name '*.[cha]' -print -quit)" ]; then
    # shellcheck disable=SC2086 # $san is a flag list
    clang -std=c11 -g -O1 -Wall -Wextra -Werror -D_GNU_SOURCE $san -fsanitize=fuzzer \
      -I"$build/include" -I"$top/include" "$@" "$top/tests/fuzz/$src" "$top/tests/fuzz/fuzz_common.c" \
      "$build/.libs/libdbuf_core.a" "${deps[@]}" -o "$out"
  fi
}
for h in "${harnesses[@]}"; do
  case $h in
  shapes_text) build_harness "$h" fuzz_shapes.c -DFUZZ_SHAPES_JSON=0 ;;
  shapes_json) build_harness "$h" fuzz_shapes.c -DFUZZ_SHAPES_JSON=1 ;;
  wire) build_harness "$h" fuzz_wire.c -I"$top/src/core" ;; # the receiver's decoder too
  layout_file) build_harness "$h" fuzz_layout_file.c -I"$top/src/cli" "$top/src/cli/run_report.c" ;;
  *) build_harness "$h" "fuzz_$h.c" ;;
  esac
done

# The seed maker of tests/fuzz/make-corpus.sh (no fuzzer runtime).
# shellcheck disable=SC2086
clang -std=c11 -g -O1 -Wall -Wextra -Werror $san -I"$build/include" -I"$top/include" \
  "$top/tests/fuzz/wire_seed.c" "$build/.libs/libdbuf_core.a" "${deps[@]}" -o "$build/wire_seed"

# ------------------------------------------------------------------ replay
findings=0
mkdir -p "$build/logs"
echo "== fuzz: replay of the stored reproducers and seeds"
for h in "${harnesses[@]}"; do
  files=()
  for d in "$top/tests/fuzz/regress/$h" "$top/tests/fuzz/corpus/$h"; do
    [ -d "$d" ] && while IFS= read -r f; do files+=("$f"); done < <(find "$d" -type f | sort)
  done
  [ ${#files[@]} -eq 0 ] && continue
  if "$build/fuzz_$h" -timeout=10 -rss_limit_mb=2048 "${files[@]}" \
       >"$build/logs/replay-$h.log" 2>&1; then
    printf '  %-12s %4d inputs  ok\n' "$h" "${#files[@]}"
  else
    findings=$((findings + 1))
    printf '  %-12s %4d inputs  FAILED (see %s)\n' "$h" "${#files[@]}" "$build/logs/replay-$h.log"
    grep -E '^(Running|==[0-9]+==ERROR|SUMMARY|fuzz: )|runtime error' \
      "$build/logs/replay-$h.log" | tail -5 | sed 's/^/    /'
  fi
done

# ------------------------------------------------------------------ fuzz
fuzz_one() { # fuzz_one NAME: one run; writes logs/NAME.log and NAME.result
  local h=$1 corpus=$build/corpus/$1 art=$build/artifacts/$1 rc=0
  local dict=()
  mkdir -p "$corpus" "$art"
  [ -f "$top/tests/fuzz/$h.dict" ] && dict=(-dict="$top/tests/fuzz/$h.dict")
  "$build/fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -print_final_stats=1 "${dict[@]}" -artifact_prefix="$art/" \
    "$corpus" "$top/tests/fuzz/corpus/$h" >"$build/logs/$h.log" 2>&1 || rc=$?
  echo "$rc" >"$build/logs/$h.rc"
}
if [ "$seconds" -gt 0 ]; then
  echo "== fuzz: ${seconds} s per harness, $jobs at a time"
  rm -rf "$build/artifacts"
  for h in "${harnesses[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    fuzz_one "$h" &
  done
  wait
  printf '%-12s %12s %8s  %s\n' harness runs seconds result
  for h in "${harnesses[@]}"; do
    log=$build/logs/$h.log
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    result=clean
    if [ "$(cat "$build/logs/$h.rc")" -ne 0 ]; then
      findings=$((findings + 1))
      result=FINDING
      mkdir -p "$top/tests/fuzz/regress/$h"
      for a in "$build/artifacts/$h"/*; do
        [ -f "$a" ] || continue
        cp "$a" "$top/tests/fuzz/regress/$h/"
        result="FINDING: tests/fuzz/regress/$h/$(basename "$a")"
      done
    fi
    printf '%-12s %12s %8s  %s\n' "$h" "${runs:-?}" "${secs:-?}" "$result"
    printf '%s\t%s\t%s\t%s\t%s\n' "$h" "${secs:-0}" "${runs:-0}" "${result%%:*}" \
      "$(date -u +%FT%TZ)" >>"$build/fuzz-history.tsv"
    if [ "$result" != clean ]; then
      grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz: )|runtime error' "$log" | head -5 | sed 's/^/    /'
      echo "    log: $log"
    fi
  done
fi
if [ "$findings" -ne 0 ]; then
  echo "fuzz: $findings harness(es) with findings; reproduce with $build/fuzz_HARNESS FILE"
  exit 1
fi
echo "fuzz: no findings"
