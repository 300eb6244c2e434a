#!/bin/bash
# CLI tests of `dbuf-shard plan --ranks-per-node K`: the node report of the
# MPI run, without MPI.  Small layouts whose nodes and crossing tensors are
# derived by hand below, a node report checked against the plan's own pieces
# on a real model, and the errors.  (tests/mpi/test-run.sh checks that plan
# and the two-node MPI run give the same nodes and crossings.)
set -u
. "$(dirname "$0")/lib.sh"

# ---- the seed example, padded, dp 5 ----
# Segments of 12 (see test-formats.sh): rank 0 P0 rows 0-1, rank 1 P1 rows
# 0-2, rank 2 P1 row 3 + P3 + gap + P2 row 0, rank 3 P2 rows 1-3, rank 4 P4.
printf 'P0 2x6\nP1 4x4\nP2 4x4\nP3 1x2\nP4 1x6\n' >"$T/seed"

# K = 2: nodes {0,1} [0,24), {2,3} [24,48), {4} [48,60) (the last node is
# smaller).  P1 is on ranks 1 and 2, so on node0 (rows 0-2) and node1 (row 3);
# P2 is on ranks 2 and 3, both node1: not a crossing.  Bytes: bf16.
run plan --shapes "$T/seed" --dp 5 --ranks-per-node 2
expect_code 0 "seed K=2: exit"
"$DBUF" plan --shapes "$T/seed" --dp 5 >"$T/summary"
expect_out "$(cat "$T/summary")

Nodes (3):
  node host             ranks      global range                             elements      bytes
  0    node0            0-1        [0, 24)                                        24       48 B
  1    node1            2-3        [24, 48)                                       24       48 B
  2    node2            4          [48, 60)                                       12       24 B
Tensors crossing node boundaries (1):
  P1 (4x4): node0 rows 0-2 (rank 1) | node1 row 3 (rank 2)" "seed K=2: the summary, then the node report"

# K = 3: nodes {0,1,2} [0,36), {3,4} [36,60).  P2 (offset 32) has row 0 on
# rank 2 (node0) and rows 1-3 on rank 3 (node1); P1 stays on node0.
run plan --shapes "$T/seed" --dp 5 --ranks-per-node 3 --format json
expect_code 0 "seed K=3 json: exit"
expect_json '[.nodes[] | [.host, .node, .ranks, .contiguous, .offset, .end, .elements, .bytes]]' \
  '[["node0", 0, [0, 1, 2], true, 0, 36, 36, 72], ["node1", 1, [3, 4], true, 36, 60, 24, 48]]' \
  "seed K=3 json: nodes"
expect_json '.crossing' '[{"tensor": 2, "name": "P2", "rows": 4, "sides": [
    {"host": "node0", "node": 0, "first_rank": 2, "last_rank": 2, "first_row": 0, "rows": 1, "elements": 4},
    {"host": "node1", "node": 1, "first_rank": 3, "last_rank": 3, "first_row": 1, "rows": 3, "elements": 12}]}]' \
  "seed K=3 json: P2 crosses, row 0 | rows 1-3"
expect_json '[.format, .dp_size, .size, .logical_size, (.tensors | length), (keys_unsorted | .[-2:])]' \
  '["dbuf-shard-layout", 5, 60, 52, 5, ["nodes", "crossing"]]' "seed K=3 json: the layout file, nodes last"
cp "$T/stdout" "$T/seed3.json"
run verify "$T/seed3.json"
expect_code 0 "seed K=3 json: verify reads it"
run plan --shapes "$T/seed" --dp 5 --format json
jq 'del(.nodes, .crossing)' "$T/seed3.json" >"$T/a.json"
jq . "$T/stdout" >"$T/b.json"
cmp -s "$T/a.json" "$T/b.json" && pass "seed K=3 json: the layout itself unchanged" ||
  fail "seed K=3 json: the layout differs from plain --format json"

# ---- unpadded, rows of 4, fp32 ----
# big 12x4 then small 4x4: 64 elements, dp 4 gives segments of 16 = 4 rows:
# ranks 0, 1, 2 hold big rows 0-3, 4-7, 8-11; rank 3 holds small.
printf 'big 12x4\nsmall 4x4\n' >"$T/bs"
# K = 2: node0 ranks 0-1 [0,32), node1 ranks 2-3 [32,64), 32 x 4 bytes each;
# big: node0 rows 0-7 (ranks 0-1, 32 elements) | node1 rows 8-11 (rank 2, 16).
run plan --shapes "$T/bs" --dp 4 --layout unpadded --dtype fp32 --ranks-per-node 2 --format table
expect_code 0 "bs K=2 table: exit"
expect_out "$("$DBUF" plan --shapes "$T/bs" --dp 4 --layout unpadded --dtype fp32 --format table)

Nodes (2):
  node host             ranks      global range                             elements      bytes
  0    node0            0-1        [0, 32)                                        32      128 B
  1    node1            2-3        [32, 64)                                       32      128 B
Tensors crossing node boundaries (1):
  big (12x4): node0 rows 0-7 (ranks 0-1) | node1 rows 8-11 (rank 2)" "bs K=2: the table, then the node report"
run plan --shapes "$T/bs" --dp 4 --layout unpadded --dtype fp32 --ranks-per-node 2 --format json
expect_json '[.nodes[] | [.ranks, .offset, .end, .bytes]]' '[[[0, 1], 0, 32, 128], [[2, 3], 32, 64, 128]]' \
  "bs K=2 json: nodes"
expect_json '[.crossing[] | [.name, .rows, [.sides[] | [.host, .first_rank, .last_rank, .first_row, .rows, .elements]]]]' \
  '[["big", 12, [["node0", 0, 1, 0, 8, 32], ["node1", 2, 2, 8, 4, 16]]]]' "bs K=2 json: big crosses at row 8"
# K = 1: every rank its own node; big has three sides.
run plan --shapes "$T/bs" --dp 4 --layout unpadded --ranks-per-node 1 --format diagram
expect_code 0 "bs K=1 diagram: exit"
expect_out_has "Nodes (4):" "bs K=1: four nodes"
expect_out_has "  big (12x4): node0 rows 0-3 (rank 0) | node1 rows 4-7 (rank 1) | node2 rows 8-11 (rank 2)" \
  "bs K=1: big on three nodes"
grep -q '^  small' "$T/stdout" && fail "bs K=1: small (one rank) listed as crossing" || pass "bs K=1: small does not cross"
# K = dp and K > dp: one node holds everything; nothing crosses.
for k in 4 9; do
  run plan --shapes "$T/bs" --dp 4 --layout unpadded --ranks-per-node $k --format json
  expect_json '[(.nodes | length), .nodes[0].ranks, .nodes[0].end, .crossing]' '[1, [0, 1, 2, 3], 64, []]' \
    "bs K=$k: one node, no crossing"
done
run plan --shapes "$T/bs" --dp 4 --layout unpadded --ranks-per-node 4
expect_out_has "Nodes (1):" "bs K=4 text: one node"
grep -q '^Tensors crossing' "$T/stdout" && fail "bs K=4 text: crossing section with one node" ||
  pass "bs K=4 text: no crossing section with one node"
# TensorAtomic: no tensor can cross; empty segments are nodes too.
run plan --shapes "$T/bs" --dp 4 --layout tensor --ranks-per-node 1
expect_out_has "Tensors crossing node boundaries: none" "tensor layout: nothing crosses"
expect_out_has "  3    node3            3          [64, 64)                                        0        0 B" \
  "tensor layout: an empty rank is an empty node"

# ---- a real model: the node report agrees with the plan's own pieces ----
# dp 8, K = 3: nodes of 3, 3 and 2 ranks.
run plan --model llama-3.2-1b --dp 8 --ranks-per-node 3 --format json --pieces
expect_code 0 "llama-3.2-1b K=3: exit"
cp "$T/stdout" "$T/l1b.json"
want=$(crossing_from_pieces "$T/l1b.json" 3)
[ "$want" != "[]" ] && pass "llama-3.2-1b K=3: some tensor crosses" || fail "llama-3.2-1b K=3: no crossing to compare"
expect_json "$CROSSING_SIDES" "$want" "llama-3.2-1b K=3: crossings from the pieces"
expect_json '[.nodes[] | [.ranks, .offset, .end, .elements, .bytes]]' \
  "$(jq -c '(.rank_offsets + [.size]) as $o | [[0, 3], [3, 6], [6, 8]] | map(. as [$a, $b] |
      [[range($a; $b)], $o[$a], $o[$b], $o[$b] - $o[$a], 2 * ($o[$b] - $o[$a])])' "$T/l1b.json")" \
  "llama-3.2-1b K=3: node ranges from the rank offsets"
run plan --model llama-3.2-1b --dp 8 --ranks-per-node 3 --format json --pieces -o "$T/l1b-o.json"
cmp -s "$T/l1b.json" "$T/l1b-o.json" && pass "-o writes the same bytes" || fail "-o differs from stdout"

# ---- errors: exit 2, one line, no output file ----
for bad in 0 -1 x 2147483648; do
  run plan --shapes "$T/seed" --dp 5 --ranks-per-node "$bad"
  expect_code 2 "--ranks-per-node $bad"
done
run plan --shapes "$T/seed" --dp 5 --ranks-per-node 0
expect_err "dbuf-shard: --ranks-per-node: 0 is out of range [1, 2147483647]" "--ranks-per-node 0: message"
for f in csv svg; do
  rm -f "$T/never"
  run plan --shapes "$T/seed" --dp 5 --ranks-per-node 2 --format $f -o "$T/never"
  expect_code 2 "--ranks-per-node with $f"
  expect_err "dbuf-shard: --ranks-per-node applies to --format summary, table, diagram and json" \
    "--ranks-per-node with $f: message"
  [ ! -e "$T/never" ] && pass "--ranks-per-node with $f: no file" || fail "--ranks-per-node with $f: file written"
done
run plan --help
expect_out_has "[--ranks-per-node K]" "plan --help: usage names --ranks-per-node"
expect_out_has "named node0, node1, ..." "plan --help: host names of plan"

# ---- a large plan: the layout JSON is written in chunks ----
# 40 layers of 250 tensors (about 1 MB of JSON, many 64 KiB chunks of the
# writer): version 1 and version 2 (--units layer) with --ranks-per-node 3
# are the plain layout JSON with each buffer's "nodes" and "crossing" added,
# whatever chunk a buffer's closing line falls in.
awk 'BEGIN { for (i = 0; i < 10000; i++) printf "model.layers.%d.w%d.weight %dx%d\n", i / 250, i, 1 + i % 37, 1 + i % 5 }' \
  >"$T/big.shapes"
for units in none layer; do
  "$DBUF" plan --shapes "$T/big.shapes" --dp 8 --units $units --format json >"$T/plain.json"
  run plan --shapes "$T/big.shapes" --dp 8 --units $units --ranks-per-node 3 --format json \
    -o "$T/nodes.json"
  expect_code 0 "big $units json K=3: exit"
  if [ $units = none ]; then
    filter='del(.nodes, .crossing)' count='[.nodes | length]'
  else
    filter='del(.buffers[].nodes, .buffers[].crossing)' count='[.buffers[].nodes | length]'
  fi
  jq "$filter" "$T/nodes.json" >"$T/a.json"
  jq . "$T/plain.json" >"$T/b.json"
  [ "$(stat -c %s "$T/plain.json")" -gt 655360 ] && cmp -s "$T/a.json" "$T/b.json" &&
    pass "big $units json K=3: the layout itself unchanged" ||
    fail "big $units json K=3: the layout differs from plain --format json"
  want=$([ $units = none ] && echo '[3]' || echo "[$(yes 3 | head -n 40 | paste -sd,)]")
  got=$(jq -c "$count" "$T/nodes.json")
  [ "$got" = "$want" ] && pass "big $units json K=3: three nodes in every buffer" ||
    fail "big $units json K=3: nodes per buffer $got, want $want"
done

finish
