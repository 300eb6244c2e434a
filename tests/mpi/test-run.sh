#!/bin/bash
# Tests of the MPI service (`mpirun -np N dbuf-shard`): every layout kind at
# 1, 2, 3, 4 and 8 ranks (8 oversubscribed), more ranks than rows, dp a
# multiple of the ranks, the default model, two simulated nodes, every fault
# injection (every problem listed), rank 0 failing on bad input (the report still written), inputs differing between ranks,
# a rank killed mid-run, --report on a FIFO, a socket and device nodes, and
# the text report on a full stdout.  Report values are checked against
# `dbuf-shard plan` (serial, no MPI), which computes them independently of
# the MPI run.
# Every mpirun runs under timeout: a hanging rank would hang the job forever.
set -u
# shellcheck source=tests/mpi/lib.sh
. "$(dirname "$0")/lib.sh"

# A small model: 2-D, 1-D and empty tensors, rows of different sizes.
cat >"$T/small.shapes" <<'EOF'
embed 64x48
norm0 48
q 48x48
k 16x48
empty 0x8
v 16x48
o 48x48
up 96x48
down 48x96
norm1 48
head 40x48
EOF
# Fewer rows than ranks: 3 rows in all.
printf 'a 2x3\nb 1\n' >"$T/tiny.shapes"

# check_run NP DP KIND SHAPES: the report against the serial plan.
check_run() {
  local np=$1 dp=$2 kind=$3 shapes=$4 name per
  name="$kind np $np dp $dp $(basename "$shapes")"
  per=$((dp / np))
  "$DBUF" plan --shapes "$shapes" --dp "$dp" --layout "$kind" --format json >"$T/plan.json" ||
    { fail "$name: plan failed"; return; }
  rm -f "$T/report.json"
  mpi "$np" -q --shapes "$shapes" --dp "$dp" --layout "$kind" --report "$T/report.json"
  if [ "$CODE" -ne 0 ] || [ ! -s "$T/report.json" ]; then
    fail "$name: exit $CODE: $ERR"
    return
  fi
  jq_is "$T/report.json" '[.verdict, .problem_count, .problems, .plan.size, .plan.dp, .plan.layout]' \
    "$(jq -c --arg k "$kind" '["PASS", 0, [], .size, .dp_size, $k]' "$T/plan.json")" "$name: verdict and plan"
  # Rank r holds segments [r per, (r+1) per): its offset and end from the plan.
  jq_is "$T/report.json" '[.ranks[] | [.rank, .offset, .end, .elements, .verify, .materialized]]' \
    "$(jq -c --argjson per "$per" --argjson np "$np" \
      '(.rank_offsets + [.size]) as $o | [range(0; $np) as $r |
        [$r, $o[$r * $per], $o[($r + 1) * $per], ($o[($r + 1) * $per] - $o[$r * $per]), "ok", true]]' \
      "$T/plan.json")" "$name: rank ranges"
  jq_is "$T/report.json" '[(.nodes | length), .nodes[0].ranks, .nodes[0].offset, .nodes[0].elements]' \
    "$(jq -c --argjson np "$np" '[1, [range(0; $np)], 0, .size]' "$T/plan.json")" "$name: one node"
}

for kind in padded unpadded tensor; do
  for np in 1 2 3 4 8; do
    check_run "$np" "$np" "$kind" "$T/small.shapes"
  done
  check_run 8 8 "$kind" "$T/tiny.shapes"   # more ranks than rows: empty segments
done
check_run 2 4 padded "$T/small.shapes"     # two segments per rank
check_run 2 2 compact "$T/small.shapes"
check_run 4 4 compact "$T/small.shapes"
check_run 2 4 compact "$T/small.shapes"
# Node-aware compact on 4 ranks, nodes of 2: the run agrees with the plan.
"$DBUF" plan --shapes "$T/small.shapes" --dp 4 --layout compact --node-size 2 --format json >"$T/plan.json"
mpi 4 -q --shapes "$T/small.shapes" --layout compact --node-size 2 --report "$T/report.json"
expect_code 0 "compact --node-size 2 on 4 ranks"
jq_is "$T/report.json" '[.verdict, .plan.size, .plan.layout]' \
  "$(jq -c '["PASS", .size, "compact"]' "$T/plan.json")" "compact --node-size 2: verdict and size"
check_run 3 6 unpadded "$T/small.shapes"

# --dp that is not a multiple of the ranks.
mpi 4 -q --shapes "$T/small.shapes" --dp 6
expect_code 2 "dp 6 on 4 ranks"
expect_err "dbuf-shard: --dp 6 is not a multiple of the 4 ranks" "dp 6 on 4 ranks: message"

# The default job: llama-3.2-1b, bf16, padded, dp = ranks.
mpi 8 --report "$T/default.json"
expect_code 0 "default model on 8 ranks"
expect_out_has "PASS: every row owned exactly once on 8 ranks, every element verified" "default: PASS line"
expect_out_has "  tensors:         146 (model llama-3.2-1b), dtype bf16, 2 bytes per element" "default: plan tensors line"
expect_out_has "  logical size:    1,235,814,400 elements, 2,471,628,800 bytes (2.30 GiB)" "default: plan size line"
expect_out_has "Ranks: dp 8 on 8 MPI ranks (1 segment per rank), layout checksum " "default: ranks line"
# The plan section is the summary `plan` prints (one writer for both).
"$DBUF" plan --dp 8 | sed 's/^/  /' >"$T/plan-summary"
sed -n '2,/^Ranks: /p' "$T/stdout" | sed '$d' >"$T/run-summary"
if [ "$(sed -n 1p "$T/stdout")" = "Plan:" ] && cmp -s "$T/run-summary" "$T/plan-summary"; then
  pass "default: the plan section is plan's summary"
else
  fail "default: plan section differs from 'plan --dp 8':"
  diff "$T/run-summary" "$T/plan-summary"
fi
expect_err_has "dbuf-shard: materializing 2.30 GiB on 8 ranks" "default: progress in binary units"
expect_out_has " numa   membind cpubind " "default: the binding columns say memory and CPU"
jq_is "$T/default.json" '[.format, .version, .verdict, .plan.layout, .plan.dp, .plan.dtype, (.ranks | length), ([.ranks[].bytes] | add)]' \
  '["dbuf-shard-report", 2, "PASS", "padded", 8, "bf16", 8, 2471755776]' "default: report"
jq_is "$T/default.json" '[.ranks[] | .materialized and .pages_on_node != null and .gbps > 0] | all' 'true' \
  "default: every rank materialized, located its pages and timed its fill"
jq_is "$T/default.json" '.timings | [.plan, .broadcast, .validate, .materialize, .verify, .total] | map(. >= 0) | all' \
  'true' "default: timings"

# --no-materialize: the structure only.
mpi 3 -q --shapes "$T/small.shapes" --no-materialize --report "$T/nomat.json"
expect_code 0 "no-materialize"
jq_is "$T/nomat.json" '[.verdict, .materialize, ([.ranks[].materialized] | any)]' '["PASS", false, false]' \
  "no-materialize: nothing allocated"

# Placement options.  This VM has one NUMA node holding both cores, so every
# policy that binds must end on node 0 with the binding read back from the
# kernel; --membind none binds nothing.
placement() { # placement WHAT JQ-WANT ARGS...: JQ-WANT is checked on the report
  local what=$1 want=$2
  shift 2
  mpi 3 -q --shapes "$T/small.shapes" --report "$T/place.json" "$@"
  expect_code 0 "$what: exit 0"
  jq_is "$T/place.json" "$PLACE_FILTER" "$want" "$what: report"
}
PLACE_FILTER='[.verdict, .membind, ([.ranks[].bound] | unique), ([.ranks[].numa] | unique), ([.ranks[].locked] | unique)]'
placement "membind local" '["PASS","local",[true],["0"],[false]]'
placement "membind node:0 strict" '["PASS","node:0",[true],["0"],[false]]' --membind node:0 --membind-strict
placement "membind interleave" '["PASS","interleave",[true],["0"],[false]]' --membind interleave
placement "membind none" '["PASS","none",[false],[""],[false]]' --membind none
placement "lock" '["PASS","local",[true],["0"],[true]]' --lock
PLACE_FILTER='[.verdict, ([.ranks[].cpu_bound] | unique), [.ranks[].cpus]]'
# --bind core: local index modulo the 2 cores.
placement "bind core" '["PASS",[true],["0","1","0"]]' --bind core

# Two nodes of 4 ranks on this machine (tests/mpi/fake-rsh.sh): the node report
# must match the plan's pieces grouped by node (rank / 4), and
# `plan --ranks-per-node 4` (no MPI) must give the same nodes and crossings.
# two_nodes NAME ARGS...: runs dbuf-shard on nodeA:4,nodeB:4; the report in $T/two.json.
two_nodes() {
  local name=$1
  shift
  rm -f "$T/two.json"
  timeout 120 "$MPIRUN" --mca plm_rsh_agent "$HERE/fake-rsh.sh" --host nodeA:4,nodeB:4 -np 8 \
    "$DBUF" -q "$@" --report "$T/two.json" >"$T/stdout" 2>"$T/stderr"
  CODE=$?
  expect_code 0 "two nodes, $name: exit"
}
# same_as_plan NAME PLAN.json: nodes and crossings of $T/two.json equal those of
# `plan --ranks-per-node 4`, host names aside (nodeA, nodeB there; node0, node1 in plan).
same_as_plan() {
  local f='[.nodes[] | del(.host)], [.crossing[] | .sides |= map(del(.host))]'
  jq_is "$T/two.json" "[$f]" "$(jq -c "[$f]" "$2")" "two nodes, $1: nodes and crossings as plan --ranks-per-node 4"
  jq_is "$2" '[.nodes[].host]' '["node0", "node1"]' "two nodes, $1: plan names the nodes node0, node1"
}
"$DBUF" plan --shapes "$T/small.shapes" --dp 8 --ranks-per-node 4 --format json --pieces >"$T/plan8.json"
two_nodes "small" --shapes "$T/small.shapes"
jq_is "$T/two.json" '[.verdict, [.nodes[] | [.host, .ranks, .offset, .end]], [.ranks[].host]]' \
  "$(jq -c '(.rank_offsets + [.size]) as $o |
      ["PASS", [["nodeA", [0,1,2,3], $o[0], $o[4]], ["nodeB", [4,5,6,7], $o[4], $o[8]]],
       ["nodeA","nodeA","nodeA","nodeA","nodeB","nodeB","nodeB","nodeB"]]' "$T/plan8.json")" \
  "two nodes: 4 ranks each, ranges from the plan"
want=$(crossing_from_pieces "$T/plan8.json" 4)
if [ "$want" = "[]" ]; then
  fail "two nodes: the test shapes must put a tensor across the node boundary"
else
  jq_is "$T/two.json" "$CROSSING_SIDES" "$want" "two nodes: tensors crossing the boundary, rows on each side"
fi
expect_out_has "Tensors crossing node boundaries (" "two nodes: text report lists the crossing"
same_as_plan "small" "$T/plan8.json"
# The default model (structure only: materializing it twice adds nothing here).
"$DBUF" plan --dp 8 --ranks-per-node 4 --format json >"$T/plan-default.json"
two_nodes "default model" --no-materialize
jq_is "$T/two.json" '[.verdict, (.crossing | length > 0)]' '["PASS", true]' "two nodes, default model: PASS, a tensor crosses"
same_as_plan "default model" "$T/plan-default.json"
"$DBUF" plan --dp 8 --ranks-per-node 4 | sed -n '/^Tensors crossing/,$p' | sed 's/node0/nodeA/g; s/node1/nodeB/g' >"$T/plan-cross.txt"
if [ -s "$T/plan-cross.txt" ] && sed -n '/^Tensors crossing/,/^$/p' "$T/stdout" | sed '/^$/d' | cmp -s - "$T/plan-cross.txt"; then
  pass "two nodes, default model: text crossing lines as plan's"
else
  fail "two nodes, default model: text crossing lines differ from plan's"
fi

# Fault injection: each detected, named, non-zero on every rank.
for f in shift:2 stale:1 corrupt:3 shift:0 stale:0; do
  rm -f "$T/fault.json"
  r=${f#*:}
  DBUF_FAULT=$f mpi 4 -q --shapes "$T/small.shapes" --layout unpadded --report "$T/fault.json"
  expect_code 1 "fault $f: exit 1"
  if head -1 "$T/stderr" | grep -Eq "^dbuf-shard: rank $r: .*tensor [a-z0-9]+ row [0-9]+"; then
    pass "fault $f: the first line names rank $r, the tensor and the row: $(head -1 "$T/stderr")"
  else
    fail "fault $f: stderr '$ERR'"
  fi
  jq_is "$T/fault.json" "[.verdict, (.problem_count > 0), (.problems[0] == .message), (.ranks[$r].verify != \"ok\")]" '["FAIL", true, true, true]' \
    "fault $f: report says FAIL and names the rank"
  # Every problem listed: the problem lines on stderr are the report's
  # problems, then (several problems) the count, which is problem_count.
  n=$(jq .problem_count "$T/fault.json")
  if [ "$n" -gt 1 ]; then
    jq -r '(.problems[] | "dbuf-shard: " + .), "dbuf-shard: FAIL: \(.problem_count) problems (above: the first of each rank that found one)"' \
      "$T/fault.json" >"$T/want.err"
  else
    jq -r '.problems[] | "dbuf-shard: " + .' "$T/fault.json" >"$T/want.err"
  fi
  if cmp -s "$T/stderr" "$T/want.err"; then
    pass "fault $f: stderr lists the report's $(jq '.problems | length' "$T/fault.json") problem line(s) and the count $n"
  else
    fail "fault $f: stderr '$ERR', want '$(cat "$T/want.err")'"
  fi
done
# stale:0 -- rank 0 holds the stale plan, and rank 1 sees its start moved:
# both ranks' own first problems are listed, rank 0's (the agreed one) first.
DBUF_FAULT=stale:0 mpi 4 -q --shapes "$T/small.shapes" --layout unpadded --report "$T/fault.json"
jq_is "$T/fault.json" '[(.problems | length), (.problems[0] | test("^rank 0: stale layout: ")), (.problems[1] | test("^rank 1: segment starts at "))]' \
  '[2, true, true]' "fault stale:0: the first problem of ranks 0 and 1 in the report"
for kind in padded tensor; do
  for f in shift:1 stale:1 corrupt:2; do
    DBUF_FAULT=$f mpi 3 -q --shapes "$T/small.shapes" --layout "$kind"
    if [ "$CODE" -eq 1 ] && grep -Eq "^dbuf-shard: rank ${f#*:}: .*tensor [a-z0-9]+ row [0-9]+" "$T/stderr"; then
      pass "fault $f, $kind: exit 1: $ERR"
    else
      fail "fault $f, $kind: exit $CODE, stderr '$ERR'"
    fi
  done
done
DBUF_FAULT=corrupt:1 mpi 2 -q --shapes "$T/small.shapes" --dtype fp32
expect_code 1 "fault corrupt, fp32: exit 1"
expect_err_has "dbuf-shard: rank 1: tensor " "fault corrupt, fp32: named"
DBUF_FAULT=nonsense mpi 2 -q --shapes "$T/small.shapes"
expect_code 2 "bad DBUF_FAULT"

# A rank killed mid-run: the job ends non-zero within seconds.
DBUF_FAULT=kill:2 mpi 4 -q --shapes "$T/small.shapes"
if [ "$CODE" -ne 0 ] && [ "$CODE" -ne 124 ] && [ "$SECS" -le "$LIMIT" ]; then
  pass "rank 2 killed: job ended with $CODE after ${SECS}s"
else
  fail "rank 2 killed: exit $CODE after ${SECS}s"
fi

# Rank 0 cannot read or plan: every rank exits 2 promptly, one message, and
# the report (options agreed) says why; a bad option writes no report.
printf 'a 4x3\nb 5xq\n' >"$T/bad.shapes"
bad_input() { # ARGS... then the expected message as the last argument
  local want=${*: -1} name="bad input ${*:1:$#-1}"
  rm -f "$T/stopped.json"
  mpi 4 -q --report "$T/stopped.json" "${@:1:$#-1}"
  if [ "$CODE" -eq 2 ] && [ "$ERR" = "$want" ] && [ "$SECS" -le "$LIMIT" ]; then
    pass "$name: exit 2 in ${SECS}s: $ERR"
  else
    fail "$name: exit $CODE after ${SECS}s, stderr '$ERR', want '$want'"
  fi
  if [ "${PHASE:-}" = "" ]; then
    [ ! -e "$T/stopped.json" ] && pass "$name: no report" || fail "$name: a report was written"
    return
  fi
  jq_is "$T/stopped.json" '[.verdict, .phase, .exit_code, .problem_count, .message == .problems[0], .ranks]' \
    "[\"ERROR\", \"$PHASE\", 2, 1, true, 4]" "$name: the report says ERROR, where and why"
  jq_is "$T/stopped.json" '"dbuf-shard: " + .message' "$(jq -n --arg m "$want" '$m')" \
    "$name: the report's reason is the message"
}
PHASE="planning and broadcast"
bad_input --shapes "$T/bad.shapes" \
  "dbuf-shard: rank 0: $T/bad.shapes:2: tensor b: shape '5xq': expected a non-negative integer at 'q'"
bad_input --shapes "$T/missing.shapes" "dbuf-shard: rank 0: $T/missing.shapes: cannot open: No such file or directory"
bad_input --shapes "$T/small.shapes" --block-size 7 \
  "$("$DBUF" plan --shapes "$T/small.shapes" --block-size 7 2>&1 | sed 's/^dbuf-shard: /dbuf-shard: rank 0: /')"
# --dp that is no multiple of the ranks: refused once the options are
# agreed, so the report is written (it used to be left out).
PHASE=start-up bad_input --shapes "$T/small.shapes" --dp 6 "dbuf-shard: --dp 6 is not a multiple of the 4 ranks"
PHASE=materialization bad_input --shapes "$T/small.shapes" --membind node:99 \
  "dbuf-shard: rank 0: NUMA node 99 does not exist: this system has 1 NUMA node(s), OS indexes 0"
PHASE=
bad_input --bogus "dbuf-shard: run: unknown option '--bogus' (see 'dbuf-shard run --help')"
bad_input --membind far "dbuf-shard: --membind: 'far' is not local, node:N, interleave or none"

# --check-inputs: ranks 2-3 are given another file (MPMD), so they see other bytes.
cp "$T/small.shapes" "$T/other.shapes"
echo "extra 4x4" >>"$T/other.shapes"
timeout 120 "$MPIRUN" --oversubscribe -np 2 "$DBUF" -q --check-inputs --shapes "$T/small.shapes" : \
  -np 2 "$DBUF" -q --check-inputs --shapes "$T/other.shapes" >"$T/stdout" 2>"$T/stderr.all"
CODE=$?
grep '^dbuf-shard: ' "$T/stderr.all" >"$T/stderr"
ERR=$(cat "$T/stderr")
expect_code 2 "check-inputs: different inputs"
expect_err_has "input differs from rank 0's (" "check-inputs: message"
expect_err_has "ranks 2-3 (" "check-inputs: names ranks 2-3 and their host"
mpi 3 -q --check-inputs --shapes "$T/small.shapes"
expect_code 0 "check-inputs: same input everywhere"

# Started without mpirun: one rank, and it says so (and how to start more)
# before anything else; under mpirun -np 1 it does not.
run --shapes "$T/small.shapes" --no-materialize
expect_code 0 "singleton: PASS"
if [ "$(head -1 "$T/stderr")" = "dbuf-shard: running as a single rank (started without mpirun); start more with 'mpirun -np 8 dbuf-shard'" ] &&
  [ "$(wc -l <"$T/stderr")" -eq 1 ]; then
  pass "singleton: one line says so"
else
  fail "singleton: stderr '$ERR'"
fi
mpi 1 --shapes "$T/small.shapes" --no-materialize
expect_code 0 "mpirun -np 1: PASS"
expect_err "" "mpirun -np 1: no singleton line"

# --- Where the report goes ------------------------------------------------
# --report on a FIFO is written in place, and refused before the run when
# nobody reads it; on a socket refused before the run; on device nodes made
# with mknod (root only): a character device is written in place, a block
# device refused without being opened.  Every node stays what it was.
REP_ARGS="-q --shapes $T/small.shapes --no-materialize"
# report_to FILE: the job on 2 ranks with --report FILE; sets CODE, ERR, SECS.
report_to() {
  # shellcheck disable=SC2086 # the words of REP_ARGS are the arguments
  mpi 2 $REP_ARGS --report "$1"
}
# report_refused NAME FILE WANT_LINE TEST: exit 2 in time with that one line,
# nothing run (no text report), and `test TEST FILE` still holds.
report_refused() {
  report_to "$2"
  if [ "$CODE" -eq 2 ] && [ "$ERR" = "$3" ] && [ ! -s "$T/stdout" ] && [ "$SECS" -le "$LIMIT" ]; then
    pass "$1: exit 2 before the run in ${SECS}s: $ERR"
  else
    fail "$1: exit $CODE after ${SECS}s, stdout $(wc -c <"$T/stdout") bytes, stderr '$ERR', want '$3'"
  fi
  test "$4" "$2" && pass "$1: the node stays" || fail "$1: now $(ls -ld "$2")"
}
mkfifo "$T/rfifo"
timeout "$MPI_TIMEOUT" cat "$T/rfifo" >"$T/rgot" &
reader=$!
report_to "$T/rfifo"
wait "$reader"
expect_code 0 "--report on a FIFO with a reader"
jq_is "$T/rgot" '[.verdict, (.ranks | length)]' '["PASS", 2]' "--report on a FIFO: the reader got the report"
[ -p "$T/rfifo" ] && pass "--report on a FIFO: still a FIFO" || fail "--report on a FIFO: now $(ls -ld "$T/rfifo")"
rm -f "$T/rfifo"
mkfifo "$T/rfifo"
report_refused "--report on a FIFO with no reader" "$T/rfifo" \
  "dbuf-shard: --report $T/rfifo: a FIFO with no reader" -p
if python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$T/rsock"; then
  report_refused "--report on a socket" "$T/rsock" \
    "dbuf-shard: --report $T/rsock: a socket; give a regular file, a character device or a FIFO" -S
else
  echo "SKIP: no Unix socket could be made (python3): --report on a socket"
fi
if [ "$(id -u)" -eq 0 ] && mknod "$T/rnull" c 1 3 && mknod "$T/rfull" c 1 7 &&
  mknod "$T/rblk" b 7 0; then
  report_to "$T/rnull"
  expect_code 0 "--report on (1,3)"
  expect_err "" "--report on (1,3): no message"
  [ -c "$T/rnull" ] && pass "--report on (1,3): still a character device" ||
    fail "--report on (1,3): now $(ls -ld "$T/rnull")"
  report_to "$T/rfull"
  expect_code 1 "--report on (1,7)"
  expect_err "dbuf-shard: --report $T/rfull: write failed: No space left on device" \
    "--report on (1,7): message"
  [ -c "$T/rfull" ] && pass "--report on (1,7): still a character device" ||
    fail "--report on (1,7): now $(ls -ld "$T/rfull")"
  report_refused "--report on a block device" "$T/rblk" \
    "dbuf-shard: --report $T/rblk: a block device; give a regular file, a character device or a FIFO" -b
else
  echo "SKIP: mknod needs root: --report on device nodes"
fi

# The text report on a full stdout: exit 1, one line.  Rank 0's own stdout
# must be the full device (mpirun's forwarding would hide the failure from
# it): alone, and as rank 0 of two under mpirun.
# shellcheck disable=SC2086 # the words of REP_ARGS are the arguments
"$DBUF" $REP_ARGS >/dev/full 2>"$T/stderr"
CODE=$?
ERR=$(cat "$T/stderr")
expect_code 1 "one rank, stdout full"
expect_err "dbuf-shard: <stdout>: write failed: No space left on device" "one rank, stdout full: message"
# shellcheck disable=SC2016,SC2086 # $0 and $@ are the inner shell's; REP_ARGS are words
timed mpirun_in "$MPI_TIMEOUT" -np 1 sh -c 'exec "$0" "$@" >/dev/full' "$DBUF" $REP_ARGS : \
  -np 1 "$DBUF" $REP_ARGS >"$T/stdout" 2>"$T/stderr.all"
grep '^dbuf-shard: ' "$T/stderr.all" >"$T/stderr"
ERR=$(cat "$T/stderr")
expect_code 1 "rank 0 of 2, stdout full"
expect_err "dbuf-shard: <stdout>: write failed: No space left on device" \
  "rank 0 of 2, stdout full: message"

# --help needs no MPI and prints once.
run run --help
expect_code 0 "run --help"
expect_out_has "--membind P" "run --help lists --membind"
mpi 2 run --help
expect_code 0 "help under mpirun"
if [ "$(grep -c '^Usage: mpirun' "$T/stdout")" -eq 1 ]; then
  pass "help printed once"
else
  fail "help printed $(grep -c '^Usage' "$T/stdout") times"
fi

finish
