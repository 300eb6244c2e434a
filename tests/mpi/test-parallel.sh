#!/bin/bash
# MPI tests of the model-parallel options and of --layout-file:
#  - `--tp 2 --pp 2` at 2 and 4 ranks: every rank is one data-parallel rank
#    of one model-parallel group; the run holds the largest stage, checked
#    against `dbuf-shard plan` (serial) and by hand;
#  - --layout-file of a good file (PASS, the same ranges as the file) and of
#    a broken one written by hand (FAIL listing all four problems, exit 1 on
#    every rank), another dp_size (exit 2), and conflicting options.
# Every mpirun runs under timeout: a hanging rank would hang the job forever.
set -u
# shellcheck source=tests/mpi/lib.sh
. "$(dirname "$0")/lib.sh"

# llama-3.2-1b (hidden 2048, ffn 8192, 16 layers, 32 heads of 64, 8 kv
# heads, vocab 128256, tied) at tp 2, pp 2: stage 0 = embedding + 8 layers,
# stage 1 = 8 layers + final norm + its own output layer copy: stage 1 is
# the largest (by 2048), so the run holds stage 1.
H=2048
LAYER=$(((2048 + 2 * 512) * H / 2 + 2048 * H / 2 + 3 * 8192 * H / 2 + 2 * H))
EMB=$((128256 / 2 * H))
STAGE1=$((8 * LAYER + H + EMB))

for np in 2 4; do
  name="tp 2 pp 2 np $np"
  "$DBUF" plan --model llama-3.2-1b --tp 2 --pp 2 --stage 1 --dp "$np" --format json >"$T/plan.json" ||
    fail "$name: plan"
  jq_is "$T/plan.json" .logical_size "$STAGE1" "$name: plan of stage 1 by hand"
  extra=(--no-materialize)
  [ "$np" -eq 2 ] && extra=() # one materialized run
  rm -f "$T/report.json"
  mpi "$np" -q --model llama-3.2-1b --tp 2 --pp 2 "${extra[@]}" --report "$T/report.json"
  if [ "$CODE" -ne 0 ] || [ ! -s "$T/report.json" ]; then
    fail "$name: exit $CODE: $ERR"
    continue
  fi
  jq_is "$T/report.json" '[.verdict, .problems, .plan.logical, .plan.size, .plan.dp, .plan.tensors]' \
    "$(jq -c '["PASS", [], .logical_size, .size, .dp_size, (.tensors | length)]' "$T/plan.json")" \
    "$name: the largest stage, dp = ranks"
  jq_is "$T/report.json" '.plan.source | test("stage 1 [(]layers 8-15[)]")' true "$name: source names the stage"
  jq_is "$T/report.json" '[.ranks[] | [.offset, .end]]' \
    "$(jq -c '(.rank_offsets + [.size]) as $o | [range(0; .dp_size) as $r | [$o[$r], $o[$r + 1]]]' "$T/plan.json")" \
    "$name: rank ranges"
done

# --stage picks another stage; megatron names.
mpi 2 -q --model llama-3.2-1b --tp 2 --pp 2 --stage 0 --naming megatron --no-materialize \
  --report "$T/report.json"
jq_is "$T/report.json" '[.verdict, .plan.logical]' "[\"PASS\", $((EMB + 8 * LAYER))]" "--stage 0 --naming megatron"

# A refused configuration: exit 2 on every rank, rank 0's message.
mpi 2 --model llama-3.2-1b --tp 3
if [ "$CODE" -eq 2 ] && [ "$ERR" = "dbuf-shard: rank 0: model llama-3.2-1b: num_attention_heads (32) is not divisible by --tp 3" ]; then
  pass "tp 3 refused on every rank"
else
  fail "tp 3: exit $CODE: $ERR"
fi

# --layout-file, a good file: the run holds exactly the file's ranges.
printf 'embed 64x48\nnorm 48\nq 48x48\nempty 0x8\nup 96x48\nhead 40x48\n' >"$T/small.shapes"
for np in 2 4; do
  "$DBUF" plan --shapes "$T/small.shapes" --dp "$np" --format json >"$T/good.json"
  rm -f "$T/report.json"
  mpi "$np" -q --layout-file "$T/good.json" --check-inputs --report "$T/report.json"
  if [ "$CODE" -ne 0 ]; then
    fail "layout file np $np: exit $CODE: $ERR"
    continue
  fi
  jq_is "$T/report.json" '[.verdict, .plan.size, .plan.layout, ([.ranks[] | .offset])]' \
    "$(jq -c '["PASS", .size, .layout, .rank_offsets]' "$T/good.json")" "layout file np $np: PASS, the file's ranges"
done

# A broken file, written by hand: four problems, all of them listed.
#   c [24, 30) ends past the buffer of 28     -> bounds
#   b [14, 22) overlaps a [0, 16)              -> overlap
#   rank 1 starts at 10, inside row 2 of a     -> cut
#   the tensors hold 16 + 8 + 6 = 30 elements,
#   2 more than the buffer size 28           -> bounds
cat >"$T/broken.json" <<'EOF2'
{"format": "dbuf-shard-layout", "version": 1, "layout": "unpadded", "dp_size": 2, "block_size": 1,
 "size": 28, "logical_size": 30, "rank_offsets": [0, 10],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 0}, {"name": "b", "shape": [2, 4], "offset": 14},
             {"name": "c", "shape": [3, 2], "offset": 24}]}
EOF2
rm -f "$T/report.json"
mpi 2 --layout-file "$T/broken.json" --report "$T/report.json"
[ "$CODE" -eq 1 ] && pass "broken layout file: exit 1" || fail "broken layout file: exit $CODE: $ERR"
jq_is "$T/report.json" '[.verdict, .problem_count, (.problems | map(split(":")[0]) | sort)]' \
  '["FAIL", 4, ["bounds", "bounds", "cut", "overlap"]]' "broken layout file: every problem in the report"
jq_is "$T/report.json" '[.problems[] | select(test("^bounds: the tensors hold 30 elements, 2 more than the buffer size 28$"))] | length' \
  1 "broken layout file: the size problem counted by hand"
jq_is "$T/report.json" '[.problems[] | select(test("^overlap: tensor b \\[14, 22\\) overlaps tensor a \\[0, 16\\)$|^cut: rank 1: boundary 10 cuts tensor a inside row 2 |^bounds: tensor c: "))] | length' \
  3 "broken layout file: the problems name tensors, rank and offsets"
[ "$(grep -c "^$T/broken.json: \(bounds\|overlap\|cut\|gap\): " "$T/stdout")" -eq 4 ] &&
  pass "broken layout file: four lines on stdout" || fail "broken layout file: stdout: $(cat "$T/stdout")"
grep -q "^FAIL: $T/broken.json breaks the layout invariants (4 problems)" "$T/stdout" &&
  pass "broken layout file: FAIL line" || fail "broken layout file: no FAIL line"
# Each rank exits 1 (mpirun reports the first non-zero one; check every rank
# through a wrapper that records its own code).
cat >"$T/wrap.sh" <<EOF2
#!/bin/bash
"$DBUF" "\$@"
echo \$? >"$T/code.\${OMPI_COMM_WORLD_RANK:-x}"
EOF2
chmod +x "$T/wrap.sh"
rm -f "$T"/code.*
mpirun_in "$MPI_TIMEOUT" -np 2 "$T/wrap.sh" --layout-file "$T/broken.json" >/dev/null 2>&1
[ "$(cat "$T/code.0" "$T/code.1" 2>/dev/null | tr '\n' ' ')" = "1 1 " ] &&
  pass "broken layout file: exit 1 on every rank" || fail "broken layout file: codes $(cat "$T"/code.* | tr '\n' ' ')"

# Another dp_size: exit 2 on every rank, naming both counts.
"$DBUF" plan --shapes "$T/small.shapes" --dp 4 --format json >"$T/dp4.json"
rm -f "$T"/code.*
mpirun_in "$MPI_TIMEOUT" -np 2 "$T/wrap.sh" --layout-file "$T/dp4.json" >/dev/null 2>"$T/stderr.all"
[ "$(cat "$T/code.0" "$T/code.1" 2>/dev/null | tr '\n' ' ')" = "2 2 " ] &&
  pass "dp_size 4 on 2 ranks: exit 2 on every rank" || fail "dp_size 4: codes $(cat "$T"/code.* | tr '\n' ' ')"
grep -qF "dbuf-shard: rank 0: $T/dp4.json: dp_size 4 does not match the 2 ranks of the job (run it with mpirun -np 4)" \
  "$T/stderr.all" && pass "dp_size 4 on 2 ranks: message" || fail "dp_size: $(cat "$T/stderr.all")"

# Options that make no sense with a layout file; an unreadable file.
mpi 2 --layout-file "$T/good.json" --model llama-3.2-1b
[ "$CODE" -eq 2 ] && [ "$ERR" = "dbuf-shard: --layout-file replaces planning: drop --model" ] &&
  pass "--layout-file with --model" || fail "--layout-file with --model: $CODE $ERR"
mpi 2 --layout-file "$T/good.json" --tp 2
[ "$CODE" -eq 2 ] && [ "$ERR" = "dbuf-shard: --layout-file replaces planning: drop --tp" ] &&
  pass "--layout-file with --tp" || fail "--layout-file with --tp: $CODE $ERR"
mpi 2 --layout-file "$T/none.json"
[ "$CODE" -eq 2 ] && grep -qF "$T/none.json" "$T/stderr" && pass "missing layout file: exit 2" ||
  fail "missing layout file: $CODE $ERR"

finish
