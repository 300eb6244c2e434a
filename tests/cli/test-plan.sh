#!/bin/bash
# CLI tests of `dbuf-shard plan`: every golden case through the command,
# then bad inputs with their exact messages and exit codes.
set -u
. "$(dirname "$0")/lib.sh"

golden="$DATA/golden/layouts.jsonl"
n=0
while IFS= read -r case; do
  n=$((n + 1))
  # Under valgrind (DBUF_VALGRIND, scripts/test.sh) every error case and
  # every 8th other one: the point there is memory errors on each code path,
  # not every answer again.
  [ -n "${DBUF_VALGRIND:-}" ] && [ $((n % 8)) -ne 1 ] &&
    [[ $case != *'"expect_error"'* ]] && continue
  name=$(jq -r .name <<<"$case")
  jq -r '.shapes | to_entries[] | "t\(.key) \(.value | map(tostring) | join("x"))"' \
    <<<"$case" >"$T/shapes"
  args=(plan --format json --shapes "$T/shapes" --dp "$(jq .dp_size <<<"$case")"
        --layout "$(jq -r .layout <<<"$case")" --block-size "$(jq .block_size <<<"$case")")
  if jq -e 'has("owners")' <<<"$case" >/dev/null; then
    jq -r '.owners[]' <<<"$case" >"$T/owners"
    args+=(--owners "$T/owners")
  fi
  rm -f "$T/out.json"
  "$DBUF" "${args[@]}" -o "$T/out.json" >"$T/stdout" 2>"$T/stderr"
  code=$?
  if jq -e 'has("expect_error")' <<<"$case" >/dev/null; then
    # 0-D shapes cannot even be written in the text format: an empty shape.
    if [ $code -eq 2 ] && [ ! -e "$T/out.json" ] && [ "$(wc -l <"$T/stderr")" -eq 1 ] &&
       grep -q '^dbuf-shard: ' "$T/stderr"; then
      pass "golden $name: exit 2, $(cat "$T/stderr")"
    else
      fail "golden $name: expected exit 2 and one error line, got $code: $(cat "$T/stderr")"
    fi
    continue
  fi
  if [ $code -ne 0 ]; then
    fail "golden $name: exit $code: $(cat "$T/stderr")"
    continue
  fi
  got=$(jq -c '{size, chunk_size, tensor_offsets: [.tensors[].offset], rank_offsets}' "$T/out.json")
  want=$(jq -c '.expected | {size, chunk_size, tensor_offsets, rank_offsets}' <<<"$case")
  if [ "$got" = "$want" ]; then
    pass "golden $name"
  else
    fail "golden $name: got $got want $want"
  fi
done <"$golden"
[ $n -ge 300 ] || fail "only $n golden cases read"

# The seed example, checked field by field, from stdin.
printf 'P0 2x6\nP1 4x4\n# comment\n\nP2 4x4   # trailing comment\nP3 1x2\nP4 1x6\n' >"$T/seed"
run plan --format json --shapes - --dp 5 <"$T/seed"
expect_code 0 "seed from stdin"
expect_json '.layout' '"padded"' "seed layout kind"
expect_json '.chunk_size' '12' "seed chunk"
expect_json '[.tensors[].offset]' '[0,12,32,28,48]' "seed offsets"
expect_json '[.tensors[].name]' '["P0","P1","P2","P3","P4"]' "seed names"
expect_json '.tensors[1].shape' '[4,4]' "seed shape"
expect_json '.rank_offsets' '[0,12,24,36,48]' "seed ranks"
expect_json '.logical_size' '52' "seed logical size"

run plan --format json --shapes "$T/seed" --dp 5 --pieces
expect_code 0 "pieces"
expect_json '[.ranks[2].pieces[] | [.tensor, .first_row, .rows, .offset]]' \
  '[[1,3,1,0],[3,0,1,4],[2,0,1,8]]' "rank 2 pieces: P1 row 3, P3, P2 row 0"

run plan --format json --shapes "$T/seed" --dp 2 --layout tensor --owners auto
expect_code 0 "auto owners"
# LPT by hand: P1 16 -> r0, P2 16 -> r1, P0 12 -> r0 (tie, lowest rank),
# P4 6 -> r1 (16 < 28), P3 2 -> r1 (22 < 28).
expect_json '[.tensors[].owner]' '[0,0,1,1,1]' "LPT owners"
expect_json '.rank_offsets' '[0,28]' "LPT rank 0 holds 28 elements"

# --owners auto-ns against auto (the hand case of check_layout's
# test_auto_ns_hand).  Newton-Schulz costs numel x min(rows, cols), 1-D numel:
# A 4x8 128, B 8x2 32, C 100 100, D 2x3x5 60, E 3x3 27, F 0x4 0.
# auto-ns: A -> r0, C -> r1, D -> r1 (160), B -> r0 (160), E -> r0 (tie),
#   F -> r1: r0 = A B E (57 elements, cost 187), r1 = C D F (130, 160).
#   Elements 130 / (187 / 2) = 1.3904 (rank 1); cost 187 / (347 / 2) = 1.0778.
# auto: C -> r0 (100), the rest -> r1 (87 elements, cost 247):
#   100 / 93.5 = 1.0695 (rank 0); cost 247 / 173.5 = 1.4236 (rank 1).
printf 'A 4x8\nB 8x2\nC 100\nD 2x3x5\nE 3x3\nF 0x4\n' >"$T/ns"
run plan --shapes "$T/ns" --dp 2 --layout tensor --owners auto-ns --format json
expect_code 0 "auto-ns owners"
expect_json '[.tensors[].owner]' '[0,0,1,1,0,1]' "auto-ns LPT owners"
run plan --shapes "$T/ns" --dp 2 --layout tensor --owners auto-ns
expect_out_has "load balance:    max/mean 1.3904 (rank 1)" "auto-ns element balance"
expect_out_has "ns load balance: max/mean 1.0778 (rank 0)" "auto-ns cost balance"
run plan --shapes "$T/ns" --dp 2 --layout tensor --owners auto
expect_out_has "load balance:    max/mean 1.0695 (rank 0)" "auto element balance"
expect_out_has "ns load balance: max/mean 1.4236 (rank 1)" "auto cost balance"
# The JSON schema also reads back as a shape list.
run plan --format json --shapes "$T/seed" --dp 2 --layout tensor --owners auto
jq '[.tensors[] | {name, shape}]' "$T/stdout" >"$T/shapes.json"
run plan --shapes "$T/shapes.json" --dp 2 --layout tensor --owners auto
expect_code 0 "JSON shape list"

# Zoo model at dp 8 equals the golden vector.
run plan --format json --shapes "$DATA/zoo/llama-3.2-1b.shapes" --dp 8
expect_code 0 "llama-3.2-1b dp8"
want=$(jq -c 'select(.name=="llama-3.2-1b-dp8-padded") | .expected.tensor_offsets' "$DATA/golden/zoo-layouts.jsonl")
expect_json '[.tensors[].offset]' "$want" "llama-3.2-1b dp8 offsets"

# plan never initializes MPI: a broken MPI configuration does not matter.
OMPI_MCA_pml=no-such-component run plan --shapes "$T/seed" --dp 5
expect_code 0 "plan runs without MPI"

# ---- bad inputs: one line, exit 2, nothing written ----
printf 'a 4x4\nb 4xx4\n' >"$T/s1"
bad "bad shape text" "dbuf-shard: $T/s1:2: tensor b: shape '4xx4': expected a non-negative integer at 'x4'" plan --shapes "$T/s1"
printf 'a 4x4\n\nb\n' >"$T/s2"
bad "missing shape" "dbuf-shard: $T/s2:3: tensor b: missing shape (expected 'NAME d0xd1...')" plan --shapes "$T/s2"
printf 'a 4x0\n' >"$T/s3"
bad "zero non-leading dim" "dbuf-shard: $T/s3:1: tensor a: zero-sized non-leading dim 1" plan --shapes "$T/s3"
printf 'a 4x4\na 2\n' >"$T/s4"
bad "duplicate name" "dbuf-shard: $T/s4:2: tensor a: duplicate name (tensor 0)" plan --shapes "$T/s4"
printf 'a 3x4\n' >"$T/s5"
bad "block size" "dbuf-shard: $T/s5: tensor a (shape 3x4): dim 0 = 3 not divisible by block size 2" plan --shapes "$T/s5" --block-size 2
printf 'a 9223372036854775807x2\n' >"$T/s6"
bad "overflow" "dbuf-shard: $T/s6:1: tensor a: element count overflows 64 bits" plan --shapes "$T/s6"
printf 'a 99999999999999999999\n' >"$T/s7"
bad "dim too big" "dbuf-shard: $T/s7:1: tensor a: shape '99999999999999999999': dim 0 does not fit in 64 bits" plan --shapes "$T/s7"
printf 'a 4x4 bf16 extra\n' >"$T/s8"
bad "trailing text" "dbuf-shard: $T/s8:1: tensor a: unexpected text 'extra' after the dtype" plan --shapes "$T/s8"
printf 'a 4x4 extra\n' >"$T/s8"
bad "unknown dtype column" "dbuf-shard: $T/s8:1: tensor a: unknown dtype 'extra' (bf16, fp16, fp32, fp64, fp8-e4m3 (fp8), fp8-e5m2, fp8-e8m0, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool, c64)" plan --shapes "$T/s8"
bad "missing file" "dbuf-shard: $T/nope: cannot open: No such file or directory" plan --shapes "$T/nope"
bad "dp 0" "dbuf-shard: --dp: 0 is out of range [1, 2147483647]" plan --shapes "$T/seed" --dp 0
bad "dp text" "dbuf-shard: --dp: 'x3' is not an integer" plan --shapes "$T/seed" --dp x3
bad "block 0" "dbuf-shard: --block-size: 0 is out of range [1, 9223372036854775807]" plan --shapes "$T/seed" --block-size 0
bad "layout kind" "dbuf-shard: --layout: 'rows' is not padded, unpadded, tensor or compact" plan --shapes "$T/seed" --layout rows
printf '0\n1\n7\n0\n0\n' >"$T/own"
bad "owner out of range" "dbuf-shard: $T/own:3: owner 7 of tensor P2 out of range [0, 2)" plan --shapes "$T/seed" --dp 2 --layout tensor --owners "$T/own"
printf '0\n1\n' >"$T/own2"
bad "owner count" "dbuf-shard: $T/own2: owners count mismatch: 2 owners for 5 tensors" plan --shapes "$T/seed" --dp 2 --layout tensor --owners "$T/own2"
printf '0\nx\n' >"$T/own3"
bad "owner not a number" "dbuf-shard: $T/own3:2: expected one integer, got 'x'" plan --shapes "$T/seed" --dp 2 --layout tensor --owners "$T/own3"
bad "owners on padded" "dbuf-shard: --owners applies to --layout tensor only" plan --shapes "$T/seed" --owners auto
printf 'small 3\nhuge 2147483648x2147483648\n' >"$T/nsbig"
bad "auto-ns cost overflow" "dbuf-shard: $T/nsbig: tensor huge (shape 2147483648x2147483648): Newton-Schulz cost 4611686018427387904 x 2147483648 overflows 64 bits" \
  plan --shapes "$T/nsbig" --dp 2 --layout tensor --owners auto-ns
run plan --shapes "$T/nsbig" --dp 2 --layout tensor --owners auto --dtype int8
expect_code 0 "auto owners with a cost past 64 bits"
expect_out_has "ns load balance: n/a (tensor huge (shape 2147483648x2147483648): Newton-Schulz cost 4611686018427387904 x 2147483648 overflows 64 bits)" "summary names the overflowing tensor"

printf '[{"name": "a", "shape": [4, 4]}, {"name": "b", "shape": [4, "x"]}]' >"$T/j1"
bad "JSON shape list" "dbuf-shard: $T/j1: entry 1: tensor b: dim 1 is not an integer" plan --shapes "$T/j1"
printf '[{"name": "a", "shape": []}]' >"$T/j2"
bad "JSON 0-D" "dbuf-shard: $T/j2: entry 0: tensor a: 0-D shape (scalars cannot be sharded by rows)" plan --shapes "$T/j2"
bad "unknown option" "dbuf-shard: plan: unknown option '--frobnicate' (see 'dbuf-shard plan --help')" plan --frobnicate
bad "format" "dbuf-shard: --format: 'xml' is not a known format (summary, table, diagram, json, csv, svg)" plan --shapes "$T/seed" --format xml
bad "two inputs" "dbuf-shard: give only one of --shapes, --model and --safetensors" plan --shapes "$T/seed" --model llama-3.2-1b

# An unwritable output: exit non-zero, no partial file.
run plan --shapes "$T/seed" --layout unpadded -o "$T/no/such/dir/out.json"
expect_code 2 "unwritable output"
expect_err "dbuf-shard: -o $T/no/such/dir/out.json: cannot create: No such file or directory" "unwritable output message"

# The compact kind on the seed (derived by hand): chunk lcm(6, 4, 2) = 12,
# dp 5: stripe 60, logical 52, bound 60.  Cursor 0: P0 (unit 6) -> 0;
# 12: P1 (unit 4) -> 12; 28: P2 -> 28; 44: P3 (unit 2) -> 44; 46: only P4
# (unit 6) is left -> 48.  Cuts 24 and 36 fall 3 and 2 rows into P1 and P2.
run plan --format json --shapes "$T/seed" --dp 5 --layout compact -o "$T/compact.json"
expect_code 0 "compact seed"
cp "$T/compact.json" "$T/stdout"
expect_json '.layout' '"compact"' "compact kind"
expect_json '.chunk_size' '12' "compact chunk"
expect_json '[.tensors[].offset]' '[0,12,28,44,48]' "compact offsets"
expect_json '.rank_offsets' '[0,12,24,36,48]' "compact ranks"
expect_json '.size' '60' "compact size at the bound"
run verify "$T/compact.json"
expect_code 0 "compact verify"
expect_out_has "OK: compact layout, dp 5" "compact verify text"
for f in summary table diagram csv svg; do
  run plan --shapes "$T/seed" --dp 5 --layout compact --format $f
  expect_code 0 "compact --format $f"
done
expect_out_has "compact layout, dp 5" "compact svg title"
# --align-bytes 16 of bf16: offsets multiples of 8 elements; units P0, P4
# lcm(6, 8) = 24, P1-P3 8.  The ordered pass ends at 78 (P4 at 72), past
# the bound; the grouped pass (unit 24 first) puts P0 at 0, fills [12, 24)
# with P3 at 16, then P4 at 24, P1 at 32, P2 at 48: end 64, size 120.
run plan --format json --shapes "$T/seed" --dp 5 --layout compact --align-bytes 16
expect_code 0 "compact aligned"
expect_json '[.tensors[].offset]' '[0,32,48,16,24]' "compact aligned offsets"
expect_json '.size' '120' "compact aligned size"
# --node-size 2 at dp 4 (hand-derived, as in check_compact): without it
# the compact layout is t0 0, t1 5, t2 9, t3 11 in 12 elements, and the node
# cut at 6 splits t1 (4 elements, 8 bytes); with it first fit, largest
# first, in segments of 3 (nodes [0, 6), [6, 12)): t0 0, t3 5 | t1 6, t2 10,
# size 12 (no padding), nothing crosses.
printf 't0 5x1\nt1 4x1\nt2 2x1\nt3 1x1\n' >"$T/nodes"
run plan --format json --shapes "$T/nodes" --dp 4 --layout compact --node-size 2
expect_code 0 "node size json"
expect_json '[.tensors[].offset]' '[0,6,10,5]' "node size offsets"
expect_json '.node_packing' '{"node_size":2,"crossing_before":1,"crossing_after":0,"crossing_bytes_before":8,"crossing_bytes_after":0,"padding_before":0,"padding_after":0}' "node size before and after"
run plan --shapes "$T/nodes" --dp 4 --layout compact --node-size 2
expect_code 0 "node size summary"
expect_out_has "  tensors crossing node boundaries: 1 -> 0" "node size summary crossing"
expect_out_has "  padding elements:                 0 -> 0 (+0.0000% of the buffer without)" "node size summary padding"
bad "node size 0" "dbuf-shard: --node-size: 0 is out of range [1, 2147483647]" plan --shapes "$T/seed" --node-size 0
bad "node size on tensor" "dbuf-shard: --node-size applies to --layout padded, compact and unpadded" plan --shapes "$T/seed" --layout tensor --node-size 2

run plan --help
expect_code 0 "plan --help"
expect_out_has "Usage: dbuf-shard plan" "plan --help text"
run --version
expect_code 0 "--version"
expect_out_has "dbuf-shard " "--version text"

# Output that cannot be written: exit 1 and one line naming where.
"$DBUF" plan --shapes "$T/seed" --layout unpadded --dp 2 >/dev/full 2>"$T/stderr"
CODE=$?
ERR=$(cat "$T/stderr")
expect_code 1 "stdout on a full device"
expect_err "dbuf-shard: <stdout>: write failed: No space left on device" "stdout on a full device: message"
# The layout JSON is written as it is made: the same line, no other.
"$DBUF" plan --shapes "$T/seed" --layout unpadded --dp 2 --format json >/dev/full 2>"$T/stderr"
CODE=$?
ERR=$(cat "$T/stderr")
expect_code 1 "json to stdout on a full device"
expect_err "dbuf-shard: <stdout>: write failed: No space left on device" \
  "json to stdout on a full device: message"

finish
