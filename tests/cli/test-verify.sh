#!/bin/bash
# CLI tests of `dbuf-shard verify`: good layouts (from plan and by hand),
# one hand-written broken layout per invariant with its exact report and
# exit 1, comparisons with a tensor list, and unreadable inputs (exit 2).
set -u
. "$(dirname "$0")/lib.sh"

printf 'P0 2x6\nP1 4x4\nP2 4x4\nP3 1x2\nP4 1x6\n' >"$T/seed"

# verify_out FILE CODE WANT what [ARGS...]: stdout equals WANT, exit CODE,
# stderr empty.
verify_out() {
  local file=$1 code=$2 want=$3 what=$4
  shift 4
  run verify "$file" "$@"
  if [ "$CODE" -eq "$code" ] && [ "$(cat "$T/stdout")" = "$want" ] && [ -z "$ERR" ]; then
    pass "$what"
  else
    fail "$what: exit $CODE (want $code), stderr '$ERR', stdout:"
    cat "$T/stdout"
    echo "want:"
    echo "$want"
  fi
}

# ---- good layouts ----
for kind in padded unpadded tensor; do
  "$DBUF" plan --format json --shapes "$T/seed" --dp 3 --layout $kind -o "$T/good-$kind.json"
done
verify_out "$T/good-padded.json" 0 "$T/good-padded.json: OK: padded layout, dp 3, 5 tensors, 72 elements" "good padded"
verify_out "$T/good-unpadded.json" 0 "$T/good-unpadded.json: OK: unpadded layout, dp 3, 5 tensors, 52 elements" "good unpadded"
verify_out "$T/good-tensor.json" 0 "$T/good-tensor.json: OK: tensor layout, dp 3, 5 tensors, 52 elements" "good tensor"
verify_out "$T/good-padded.json" 0 "$T/good-padded.json: OK: padded layout, dp 3, 5 tensors, 72 elements; names, order and shapes match $T/seed" \
  "good padded against its shapes" --shapes "$T/seed"
"$DBUF" plan --format json --shapes "$T/seed" --dp 5 --pieces -o "$T/pieces.json"
verify_out "$T/pieces.json" 0 "$T/pieces.json: OK: padded layout, dp 5, 5 tensors, 60 elements" "good layout with pieces"
run verify - <"$T/good-padded.json"
expect_code 0 "layout from stdin"
expect_out_has "<stdin>: OK: padded layout" "stdin is named <stdin>"

# Written by hand for another framework: only the fields the reader needs.
cat >"$T/hand.json" <<'EOF'
{"layout": "unpadded", "dp_size": 2, "size": 30, "rank_offsets": [0, 16],
 "tensors": [{"name": "P0", "shape": [2, 6], "offset": 0},
             {"name": "P1", "shape": [4, 4], "offset": 12},
             {"name": "P2", "shape": [1, 2], "offset": 28}]}
EOF
verify_out "$T/hand.json" 0 "$T/hand.json: OK: unpadded layout, dp 2, 3 tensors, 30 elements" "hand-written layout"

# Every built-in model at dp 8 verifies against its own tensor list.
for m in $("$DBUF" models | awk 'NR > 1 { print $1 }'); do
  "$DBUF" plan --format json --model "$m" --dp 8 -o "$T/m.json"
  run verify "$T/m.json" --model "$m"
  if [ "$CODE" -eq 0 ] && grep -q "; names, order and shapes match model $m\$" "$T/stdout"; then
    pass "model $m verifies"
  else
    fail "model $m: exit $CODE: $(cat "$T/stdout") $ERR"
  fi
done

# ---- one broken layout per invariant ----
cat >"$T/overlap.json" <<'EOF'
{"layout": "padded", "dp_size": 2, "chunk_size": 4, "size": 32, "rank_offsets": [0, 16],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 0},
             {"name": "b", "shape": [4, 4], "offset": 8}]}
EOF
verify_out "$T/overlap.json" 1 "$T/overlap.json: FAILED: 1 problem (overlap 1)
$T/overlap.json: overlap: tensor b [8, 24) overlaps tensor a [0, 16)" "overlapping tensors"

cat >"$T/past.json" <<'EOF'
{"layout": "padded", "dp_size": 2, "chunk_size": 4, "size": 32, "rank_offsets": [0, 16],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 0},
             {"name": "b", "shape": [4, 4], "offset": 32}]}
EOF
verify_out "$T/past.json" 1 "$T/past.json: FAILED: 1 problem (bounds 1)
$T/past.json: bounds: tensor b: [32, +16) is outside the buffer [0, 32)" "offset past the end"

cat >"$T/cut.json" <<'EOF'
{"layout": "unpadded", "dp_size": 2, "size": 24, "rank_offsets": [0, 10],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 0},
             {"name": "b", "shape": [2, 4], "offset": 16}]}
EOF
verify_out "$T/cut.json" 1 "$T/cut.json: FAILED: 1 problem (cut 1)
$T/cut.json: cut: rank 1: boundary 10 cuts tensor a inside row 2 (element 10 of a 4-element row)" "rank cut inside a row"

cat >"$T/align.json" <<'EOF'
{"layout": "padded", "dp_size": 1, "chunk_size": 12, "size": 36, "rank_offsets": [0],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 0},
             {"name": "b", "shape": [2, 6], "offset": 16}]}
EOF
verify_out "$T/align.json" 1 "$T/align.json: FAILED: 1 problem (align 1)
$T/align.json: align: tensor b: offset 16 is not a multiple of its block x row size 6" "misaligned tensor"

cat >"$T/unequal.json" <<'EOF'
{"layout": "padded", "dp_size": 2, "chunk_size": 4, "size": 32, "rank_offsets": [0, 12],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 0},
             {"name": "b", "shape": [4, 4], "offset": 16}]}
EOF
verify_out "$T/unequal.json" 1 "$T/unequal.json: FAILED: 1 problem (unequal 1)
$T/unequal.json: unequal: rank 1: segment [12, 32) has 20 elements, rank 0 has 12 (padded segments must be equal)" "unequal padded segments"

cat >"$T/split.json" <<'EOF'
{"layout": "tensor", "dp_size": 2, "size": 32, "rank_offsets": [0, 8],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 0, "owner": 0},
             {"name": "b", "shape": [4, 4], "offset": 16, "owner": 1}]}
EOF
verify_out "$T/split.json" 1 "$T/split.json: FAILED: 2 problems (split 2)
$T/split.json: split: tensor a [0, 16) is split at 8 between rank 0 and rank 1 (TensorAtomic)
$T/split.json: split: tensor a [0, 16) is not inside the segment [0, 8) of its owner rank 0" "TensorAtomic tensor split across ranks"

cat >"$T/gap.json" <<'EOF'
{"layout": "unpadded", "dp_size": 1, "size": 36, "rank_offsets": [0],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 0},
             {"name": "b", "shape": [4, 4], "offset": 20}]}
EOF
verify_out "$T/gap.json" 1 "$T/gap.json: FAILED: 1 problem (gap 1)
$T/gap.json: gap: unpadded layout has 4 padding elements (first hole at 16); it promises none" "padding in an unpadded layout"

cat >"$T/chunk.json" <<'EOF'
{"layout": "padded", "dp_size": 1, "chunk_size": 8, "size": 48, "rank_offsets": [0],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 0},
             {"name": "b", "shape": [2, 6], "offset": 24}]}
EOF
verify_out "$T/chunk.json" 1 "$T/chunk.json: FAILED: 1 problem (chunk 1)
$T/chunk.json: chunk: chunk size 8 is not the LCM of block x row sizes" "wrong chunk size"

cat >"$T/block.json" <<'EOF'
{"layout": "unpadded", "dp_size": 1, "block_size": 2, "size": 12, "rank_offsets": [0],
 "tensors": [{"name": "a", "shape": [3, 4], "offset": 0}]}
EOF
verify_out "$T/block.json" 1 "$T/block.json: FAILED: 1 problem (block 1)
$T/block.json: block: tensor a: dim 0 = 3 not divisible by block size 2" "rows not divisible by the block size"

cat >"$T/range.json" <<'EOF'
{"layout": "unpadded", "dp_size": 3, "size": 16, "rank_offsets": [0, 12, 8],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 0}]}
EOF
verify_out "$T/range.json" 1 "$T/range.json: FAILED: 1 problem (range 1)
$T/range.json: range: rank 1: segment [12, 8) ends before it starts" "rank offsets going back"

# Several problems at once: all reported, one per line.
cat >"$T/many.json" <<'EOF'
{"layout": "padded", "dp_size": 2, "chunk_size": 4, "size": 32, "rank_offsets": [0, 12],
 "tensors": [{"name": "a", "shape": [4, 4], "offset": 2},
             {"name": "b", "shape": [4, 4], "offset": 40}]}
EOF
run verify "$T/many.json"
expect_code 1 "several problems"
expect_out_has "$T/many.json: bounds: tensor b: [40, +16) is outside the buffer [0, 32)" "several: bounds"
expect_out_has "$T/many.json: align: tensor a: offset 2 is not a multiple of its block x row size 4" "several: align"
expect_out_has "$T/many.json: unequal: rank 1: segment [12, 32) has 20 elements" "several: unequal"
expect_out_has "$T/many.json: FAILED: 4 problems (bounds 1, align 1, cut 1, unequal 1)" "several: count"

# More than 20 problems of one kind: the summary first, 20 lines, then the
# rest counted; --all lists every one.  Tensor a (26 rows of 4) on 26 ranks,
# rank k starting at 4k + 1: 25 boundaries, each inside row k.
offs=$(seq 1 25 | awk '{ printf ", %d", 4 * $1 + 1 }')
printf '{"layout": "unpadded", "dp_size": 26, "size": 104, "rank_offsets": [0%s],\n "tensors": [{"name": "a", "shape": [26, 4], "offset": 0}]}\n' "$offs" >"$T/cuts.json"
seq 1 25 | awk -v F="$T/cuts.json" '{ b = 4 * $1 + 1
  printf "%s: cut: rank %d: boundary %d cuts tensor a inside row %d (element %d of a 4-element row)\n", F, $1, b, $1, b }' >"$T/cuts.want"
verify_out "$T/cuts.json" 1 "$T/cuts.json: FAILED: 25 problems (cut 25)
$(head -n 20 "$T/cuts.want")
$T/cuts.json: cut: ... 5 more (use --all)" "25 cuts: summary, 20 of them, 5 more"
verify_out "$T/cuts.json" 1 "$T/cuts.json: FAILED: 25 problems (cut 25)
$(cat "$T/cuts.want")" "25 cuts with --all: every one" --all

# A tensor name in two buffers of a version-2 file (each buffer valid on
# its own): one duplicate problem naming the tensor and both buffers.
cat >"$T/twice.json" <<'EOF'
{"format": "dbuf-shard-layout", "version": 2, "buffers": [
 {"unit": "u0", "dtype": "bf16", "layout": "unpadded", "dp_size": 2, "size": 24, "rank_offsets": [0, 8],
  "tensors": [{"name": "a", "shape": [4, 4], "offset": 0}, {"name": "b", "shape": [2, 4], "offset": 16}]},
 {"unit": "u1", "dtype": "fp32", "layout": "unpadded", "dp_size": 2, "size": 24, "rank_offsets": [0, 8],
  "tensors": [{"name": "c", "shape": [2, 4], "offset": 0}, {"name": "a", "shape": [4, 4], "offset": 8}]}]}
EOF
verify_out "$T/twice.json" 1 "$T/twice.json: FAILED: 1 problem (duplicate 1)
$T/twice.json: duplicate: tensor a is in buffer u0/bf16 and in buffer u1/fp32 (a tensor belongs to one buffer)" \
  "a tensor in two buffers"

# ---- comparisons with a tensor list ----
printf 'P0 2x6\nP1 4x4\nP2 4x4\nP3 1x2\nP4 1x8\n' >"$T/shape"
verify_out "$T/good-padded.json" 1 "$T/good-padded.json: FAILED: 1 problem (shape 1)
$T/good-padded.json: shape: tensor P4 has shape 1x6 in the layout, 1x8 in $T/shape" "shape mismatch" --shapes "$T/shape"
printf 'P0 2x6\nP1 4x4\nP3 1x2\nP2 4x4\nP4 1x6\n' >"$T/order"
verify_out "$T/good-padded.json" 1 "$T/good-padded.json: FAILED: 1 problem (order 1)
$T/good-padded.json: order: tensor P2 is tensor 2 in the layout but 3 in $T/order" "reordered tensors" --shapes "$T/order"
printf 'P0 2x6\nP1 4x4\nP2 4x4\nP4 1x6\nP5 7\n' >"$T/missing"
verify_out "$T/good-padded.json" 1 "$T/good-padded.json: FAILED: 2 problems (missing 1, extra 1)
$T/good-padded.json: extra: tensor P3 (1x2) is not in $T/missing
$T/good-padded.json: missing: tensor P5 (7) of $T/missing is not in the layout" "missing and extra tensors" --shapes "$T/missing"
# JSON shape lists too.
printf '[{"name": "P0", "shape": [2, 6]}, {"name": "P1", "shape": [4, 4]}, {"name": "P2", "shape": [4, 4]}, {"name": "P3", "shape": [1, 2]}, {"name": "P4", "shape": [1, 6]}]' >"$T/seed.json"
verify_out "$T/good-tensor.json" 0 "$T/good-tensor.json: OK: tensor layout, dp 3, 5 tensors, 52 elements; names, order and shapes match $T/seed.json" \
  "JSON shape list matches" --shapes "$T/seed.json"
# A layout of one model checked against another.
"$DBUF" plan --format json --model llama-3.2-1b --dp 4 -o "$T/l1b.json"
run verify "$T/l1b.json" --model tinyllama-1.1b
expect_code 1 "other model"
expect_out_has "$T/l1b.json: shape: tensor model.embed_tokens.weight has shape 128256x2048 in the layout, 32000x2048 in model tinyllama-1.1b" "other model: embedding shape"
# tinyllama has 55 tensors more (6 layers of 9, and its own lm_head): 20
# listed, 35 counted, and --all lists the head, the last of them.
expect_out_has "$T/l1b.json: missing: ... 35 more (use --all)" "other model: missing tensors cut short"
run verify "$T/l1b.json" --model tinyllama-1.1b --all
expect_out_has "$T/l1b.json: missing: tensor lm_head.weight (32000x2048) of model tinyllama-1.1b is not in the layout" "other model: untied head"
[ "$(grep -c ': missing: tensor ' "$T/stdout")" -eq 55 ] && pass "other model --all: 55 missing" ||
  fail "other model --all: $(grep -c ': missing: tensor ' "$T/stdout") missing lines, want 55"
# Invariants and shapes together.
printf 'a 4x4\nb 4x2\n' >"$T/ab"
verify_out "$T/overlap.json" 1 "$T/overlap.json: FAILED: 2 problems (overlap 1, shape 1)
$T/overlap.json: overlap: tensor b [8, 24) overlaps tensor a [0, 16)
$T/overlap.json: shape: tensor b has shape 4x4 in the layout, 4x2 in $T/ab" "broken layout and shapes" --shapes "$T/ab"

# ---- unreadable inputs: one line on stderr, exit 2, nothing on stdout ----
bad() { # bad "description" 'expected stderr' args...
  local what=$1 want=$2
  shift 2
  run "$@"
  if [ "$CODE" -eq 2 ] && [ "$ERR" = "$want" ] && [ ! -s "$T/stdout" ]; then
    pass "$what"
  else
    fail "$what: exit $CODE, stderr '$ERR', want '$want'"
  fi
}
printf '{"layout": "padded",\n "dp_size": 2,\n "size": 32 32}\n' >"$T/syntax.json"
bad "bad JSON" "dbuf-shard: $T/syntax.json:3: invalid JSON: '}' expected near '32'" verify "$T/syntax.json"
printf '{"layout": "padded", "dp_size": 1, "chunk_size": 4, "rank_offsets": [0], "tensors": []}' >"$T/nosize.json"
bad "missing size" "dbuf-shard: $T/nosize.json: missing \"size\"" verify "$T/nosize.json"
printf '{"layout": "rows", "dp_size": 1, "size": 0, "rank_offsets": [0], "tensors": []}' >"$T/kind.json"
bad "unknown kind" "dbuf-shard: $T/kind.json: \"layout\" must be \"padded\", \"unpadded\", \"tensor\" or \"compact\"" verify "$T/kind.json"
printf '{"layout": "unpadded", "dp_size": 2, "size": 0, "rank_offsets": [0], "tensors": []}' >"$T/dp.json"
bad "rank_offsets length" "dbuf-shard: $T/dp.json: \"rank_offsets\" must be an array of dp_size (2) integers" verify "$T/dp.json"
printf '{"layout": "unpadded", "dp_size": 1, "size": 4, "rank_offsets": [0], "tensors": [{"name": "a", "shape": [4, "x"], "offset": 0}]}' >"$T/dim.json"
bad "bad dim" "dbuf-shard: $T/dim.json: tensor a: dim 1 is not an integer" verify "$T/dim.json"
printf '{"layout": "tensor", "dp_size": 2, "size": 8, "rank_offsets": [0, 4], "tensors": [{"name": "a", "shape": [4], "offset": 0, "owner": 0}, {"name": "b", "shape": [4], "offset": 4}]}' >"$T/own.json"
bad "partial owners" "dbuf-shard: $T/own.json: 1 of 2 tensors have an \"owner\" (all or none)" verify "$T/own.json"
# "logical_size" is optional (hand.json has none), but when given it must be
# the sum of the tensors' elements: 12 + 16 + 2 = 30 here, not 31.
jq '.logical_size = 31' "$T/hand.json" >"$T/logical.json"
bad "wrong logical_size" "dbuf-shard: $T/logical.json: \"logical_size\" is 31 but the tensors hold 30 elements" verify "$T/logical.json"
jq '.logical_size = 52 | .tensors[0].shape = [3, 6]' "$T/good-unpadded.json" >"$T/logical2.json"
bad "logical_size of edited shapes" "dbuf-shard: $T/logical2.json: \"logical_size\" is 52 but the tensors hold 58 elements" verify "$T/logical2.json"
jq '.logical_size = "30"' "$T/hand.json" >"$T/logical3.json"
bad "logical_size not an integer" "dbuf-shard: $T/logical3.json: \"logical_size\" is not an integer" verify "$T/logical3.json"
jq '.logical_size = 30' "$T/hand.json" >"$T/logical4.json"
verify_out "$T/logical4.json" 0 "$T/logical4.json: OK: unpadded layout, dp 2, 3 tensors, 30 elements" "right logical_size"
printf '[1, 2]' >"$T/array.json"
bad "not an object" "dbuf-shard: $T/array.json: expected a JSON object" verify "$T/array.json"
: >"$T/empty.json"
bad "empty file" "dbuf-shard: $T/empty.json:1: invalid JSON: '[' or '{' expected near end of file" verify "$T/empty.json"
bad "missing file" "dbuf-shard: $T/nope.json: cannot open: No such file or directory" verify "$T/nope.json"
bad "no file" "dbuf-shard: verify: no layout file (see 'dbuf-shard verify --help')" verify
bad "two files" "dbuf-shard: verify: unexpected argument '$T/hand.json'" verify "$T/hand.json" "$T/hand.json"
bad "unknown option" "dbuf-shard: verify: unknown option '--dp'; did you mean '--tp', '--pp' or '--ep'? (see 'dbuf-shard verify --help')" verify "$T/hand.json" --dp 2
bad "option without value" "dbuf-shard: verify: option '--shapes' needs a value (see 'dbuf-shard verify --help')" verify "$T/hand.json" --shapes
bad "order without safetensors" "dbuf-shard: --order applies to --safetensors only" verify "$T/hand.json" --order "$T/seed"
bad "two tensor lists" "dbuf-shard: give only one of --shapes, --model and --safetensors" verify "$T/hand.json" --shapes "$T/seed" --model llama-3.2-1b
bad "unknown model" "dbuf-shard: --model: unknown model 'gpt5' (built-in models: llama-3.2-1b, tinyllama-1.1b, llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, mixtral-8x7b, qwen2.5-72b, deepseek-v3, gpt3-175b)" verify "$T/hand.json" --model gpt5
printf 'a 4x\n' >"$T/badshapes"
bad "bad shape list" "dbuf-shard: $T/badshapes:1: tensor a: shape '4x': expected a non-negative integer at ''" verify "$T/hand.json" --shapes "$T/badshapes"

run verify --help
expect_code 0 "verify --help"
expect_out_has "Usage: dbuf-shard verify LAYOUT.json" "verify --help text"

finish
