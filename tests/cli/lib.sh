# Shared by the CLI test scripts: a temp dir, run/expect helpers, a tally.
# Every script ends with `finish`, which prints "N passed, M failed".
DBUF=${DBUF_SHARD:?DBUF_SHARD is not set (run through make check)}
DATA=${DBUF_TEST_DATA:?DBUF_TEST_DATA is not set (run through make check)}
command -v jq >/dev/null || { echo "FAIL: jq is required (scripts/test.sh installs it)"; exit 1; }
# DBUF_TEST_TIME_SCALE stretches the tests' wall-clock bounds for slow builds
# (scripts/test.sh sets 10 for ASan); TIME_SCALE is it rounded up to a whole
# number, and 1 for a value under 1 or not a number, as check_models.c and
# check_report.c read it.
TIME_SCALE=$(awk -v s="${DBUF_TEST_TIME_SCALE:-1}" 'BEGIN { s += 0; if (s < 1) s = 1; n = int(s); if (n < s) n++; print n }')
T=$(mktemp -d "${TMPDIR:-/tmp}/dbuf-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
# DBUF_VALGRIND=1: every dbuf-shard of the script runs under valgrind
# memcheck (through libtool, so the real binary is checked, not its wrapper
# script).  Any memory error or definite/indirect leak makes it exit 99,
# which no test expects, and its report is appended to the stderr the test
# sees; reports also go to $DBUF_VALGRIND_LOGS (default: the temp dir).
if [ -n "${DBUF_VALGRIND:-}" ]; then
  command -v valgrind >/dev/null || { echo "FAIL: DBUF_VALGRIND is set but valgrind is missing"; exit 1; }
  vg_logs=${DBUF_VALGRIND_LOGS:-$T}
  mkdir -p "$vg_logs"
  cat >"$T/dbuf-shard-vg" <<WRAP
#!/bin/sh
log="$vg_logs/vg.\$\$.log"
"$(dirname "$DBUF")/libtool" --mode=execute valgrind -q --error-exitcode=99 \
  --leak-check=full --show-leak-kinds=definite,indirect \
  --errors-for-leak-kinds=definite,indirect --log-file="\$log" "$DBUF" "\$@"
rc=\$?
[ \$rc -eq 99 ] && cat "\$log" >&2
exit \$rc
WRAP
  chmod +x "$T/dbuf-shard-vg"
  DBUF=$T/dbuf-shard-vg
fi
PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS: $1"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL: $1"; }
# run ARGS...: runs dbuf-shard; sets CODE, OUT (file $T/stdout), ERR (text).
run() {
  "$DBUF" "$@" >"$T/stdout" 2>"$T/stderr"
  CODE=$?
  ERR=$(cat "$T/stderr")
}
expect_code() { if [ "$CODE" -eq "$1" ]; then pass "$2"; else fail "$2: exit $CODE, want $1: $ERR"; fi; }
expect_err() { if [ "$ERR" = "$1" ]; then pass "$2"; else fail "$2: stderr '$ERR', want '$1'"; fi; }
expect_err_has() { if grep -qF -- "$1" "$T/stderr"; then pass "$2"; else fail "$2: stderr lacks '$1': $ERR"; fi; }
expect_out_has() { if grep -qF -- "$1" "$T/stdout"; then pass "$2"; else fail "$2: stdout lacks '$1'"; fi; }
# expect_out WANT what: stdout equals WANT exactly.
expect_out() {
  if [ "$(cat "$T/stdout")" = "$1" ]; then pass "$2"; else
    fail "$2: got:"; cat "$T/stdout"; echo "want:"; echo "$1"
  fi
}
# crossing_from_pieces FILE K: from the pieces of a `plan --format json
# --pieces` layout, independently of the node report, every tensor held by
# more than one node of K consecutive ranks, with the rows on each side:
# [{tensor, sides: [{node, first_row, rows}]}] in tensor order (compact).
crossing_from_pieces() {
  jq -c --argjson k "$2" '[.ranks[] as $r | $r.pieces[] |
      {t: .tensor, rank: $r.rank, node: ($r.rank / $k | floor), first_row, rows}]
    | sort_by(.t, .rank) | group_by(.t)
    | map(select((map(.node) | unique | length) > 1))
    | map({tensor: .[0].t, sides: (reduce .[] as $p ([];
        if length > 0 and .[-1].node == $p.node
        then .[-1].rows = ($p.first_row + $p.rows - .[-1].first_row)
        else . + [{node: $p.node, first_row: $p.first_row, rows: $p.rows}] end))})' "$1"
}
# The same projection of a node report's "crossing" array (plan or run JSON).
CROSSING_SIDES='[.crossing[] | {tensor, sides: [.sides[] | {node, first_row, rows}]}] | sort_by(.tensor)'
# expect_json FILTER WANT what: jq -c FILTER of stdout equals WANT (compact).
expect_json() {
  local got want
  got=$(jq -c "$1" "$T/stdout" 2>&1)
  want=$(jq -c . <<<"$2")
  if [ "$got" = "$want" ]; then pass "$3"; else fail "$3: $1 = $got, want $want"; fi
}
# expect_valid_json FILE what: FILE is one JSON document of valid UTF-8 (jq
# parses it but reads bytes that are not UTF-8 as U+FFFD; iconv refuses
# them, overlong forms and surrogates included).
expect_valid_json() {
  if iconv -f UTF-8 -t UTF-8 "$1" >/dev/null 2>&1 && jq -e -s 'length == 1' "$1" >/dev/null 2>&1; then
    pass "$2"
  else
    fail "$2: $1 is not valid UTF-8 JSON"
  fi
}
# bad "description" 'expected stderr' args...: dbuf-shard ARGS -o FILE
# exits 2 with exactly that stderr and leaves neither FILE nor a temporary.
bad() {
  local what=$1 want=$2
  shift 2
  rm -f "$T/o.json"
  run "$@" -o "$T/o.json"
  if [ "$CODE" -eq 2 ] && [ "$ERR" = "$want" ] && [ ! -e "$T/o.json" ] &&
     [ -z "$(ls "$T" | grep 'o.json.tmp' || true)" ]; then
    pass "$what"
  else
    fail "$what: exit $CODE, stderr '$ERR', want '$want'"
  fi
}
# The system's own nodes that the tests' commands touch (writing output to
# them, reading input from them): a script that leaves one of them a
# regular file has damaged the machine, whatever it asserted.
system_nodes_ok() {
  local n
  for n in /dev/null /dev/full /dev/zero; do
    [ -c "$n" ] || { echo "FAIL: $n is no longer a character device: $(ls -l "$n")"; return 1; }
  done
  [ -L /dev/stdout ] || { echo "FAIL: /dev/stdout is no longer a symlink: $(ls -l /dev/stdout)"; return 1; }
}
finish() {
  system_nodes_ok || FAILED=$((FAILED + 1))
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}
# st_write FILE HEADER DATA_BYTES: a safetensors file of that header (its
# 8-byte little-endian length first) and DATA_BYTES zero bytes.
st_write() {
  local f=$1 h=$2 n=${#2}
  printf "$(printf '\\x%02x' $((n & 255)) $(((n >> 8) & 255)) $(((n >> 16) & 255)) $(((n >> 24) & 255)) 0 0 0 0)" >"$f"
  printf '%s' "$h" >>"$f"
  head -c "$3" /dev/zero >>"$f"
}
