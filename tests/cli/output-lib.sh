# shellcheck shell=bash
# Shared by test-output.sh and test-output-dev.sh, sourced after lib.sh:
# every option of the serial commands that writes a file, and checks on
# what became of the node it named.
printf 'embed 64x48\nnorm 48\nq 48x48\nempty 0x8\nhead 40x48\n' >"$T/out.shapes"
# One writer a line: the arguments, the output option last (its file follows).
# shellcheck disable=SC2034 # read by the scripts that source this one
WRITERS="plan --shapes $T/out.shapes --dp 2 -o
plan --shapes $T/out.shapes --dp 2 --format json --output
plan --shapes $T/out.shapes --dp 2 --format csv -o
compare --shapes $T/out.shapes --dp 2 -o
compare --shapes $T/out.shapes --dp 2 --format json --output"
# Seconds a writer may take; a run cut by timeout (exit 124) hung.
OUT_TIMEOUT=$((20 * TIME_SCALE))
WRITER_NO=0

# write_to WRITER FILE: dbuf-shard WRITER FILE under timeout; sets CODE, ERR,
# and WANT (a file holding what the writer prints on stdout without it).
write_to() {
  local -a args
  read -ra args <<<"$1"
  WRITER_NO=$((WRITER_NO + 1))
  WANT=$T/want.$WRITER_NO
  "$DBUF" "${args[@]:0:${#args[@]}-1}" >"$WANT" 2>/dev/null
  timeout "$OUT_TIMEOUT" "$DBUF" "${args[@]}" "$2" >"$T/stdout" 2>"$T/stderr"
  CODE=$?
  ERR=$(cat "$T/stderr")
}
# expect_node TEST FILE what: `test TEST FILE` holds (-c, -b, -p, -S, -L, -f).
expect_node() {
  if test "$1" "$2"; then pass "$3"; else fail "$3: test $1 $2 is false: $(ls -ld "$2" 2>&1)"; fi
}
# expect_no_temp FILE what: no temporary of FILE is left beside it.
expect_no_temp() {
  local left
  left=$(find "$(dirname "$1")" -maxdepth 1 -name "$(basename "$1").tmp.*")
  if [ -z "$left" ]; then pass "$2"; else fail "$2: left $left"; fi
}
# refused WRITER FILE KIND TEST: exit 2 with the one line naming FILE as
# KIND (after -o, whichever spelling was given), the node still passes
# TEST, and no temporary is left.
refused() {
  write_to "$1" "$2"
  expect_code 2 "$1 $3: refused"
  expect_err "dbuf-shard: -o $2: $3; give a regular file, a character device or a FIFO" \
    "$1 $3: message"
  expect_node "$4" "$2" "$1 $3: still $3"
  expect_no_temp "$2" "$1 $3: no temporary"
}
