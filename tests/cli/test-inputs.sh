#!/bin/bash
# CLI tests of every input: built-in models (and `dbuf-shard models`), the
# text and JSON shape lists, stdin, and safetensors checkpoints generated
# here with printf (8-byte little-endian header length, JSON header, zero
# bytes of data): valid, sharded with an index, several files, --order, and
# every kind of broken file, each with its one-line message and exit 2.
set -u
. "$(dirname "$0")/lib.sh"

# ---- built-in models ----
run models
expect_code 0 "models"
got=$(awk 'NR > 1 { print $1, $2, $3 }' "$T/stdout")
want="llama-3.2-1b 146 1235814400
tinyllama-1.1b 201 1100048384
llama-3.1-8b 291 8030261248
llama-3.1-70b 723 70553706496
llama-3.1-405b 1137 405853388800
mixtral-8x7b 995 46702792704
qwen2.5-72b 963 72706203648
deepseek-v3 45395 671026419200
gpt3-175b 1156 174615846912"
[ "$got" = "$want" ] && pass "models: names, tensors, parameters" || fail "models: got $got"
expect_out_has "MODEL             TENSORS         PARAMETERS  CONFIG" "models header"
expect_out_has "qkv bias" "qwen2.5 config has QKV biases"
expect_out_has "Megatron-Core names" "gpt3 config names Megatron-Core"
while read -r m n p; do
  run plan --format json --model "$m"
  expect_json '[(.tensors | length), .logical_size]' "[$n, $p]" "--model $m: $n tensors, $p parameters"
  if [ -f "$DATA/zoo/$m.shapes" ]; then
    jq -r '.tensors[] | "\(.name) \(.shape | map(tostring) | join("x"))"' "$T/stdout" >"$T/gen"
    grep -v '^#' "$DATA/zoo/$m.shapes" | grep -v '^$' | sed 's/[[:space:]]*#.*//' >"$T/zoo"
    cmp -s "$T/gen" "$T/zoo" && pass "--model $m equals the zoo file" || fail "--model $m differs from zoo"
  fi
done <<<"$want"
run plan --format json
expect_json '[(.tensors | length), .logical_size]' '[146, 1235814400]' "default model is llama-3.2-1b"
run plan --format json --model gpt3-175b
expect_json '.tensors[0]' '{"name": "embedding.word_embeddings.weight", "shape": [51200, 12288], "offset": 0}' "gpt3 vocab padded to 51200"
run plan --format json --model qwen2.5-72b
expect_json '[.tensors[] | select(.name | endswith("q_proj.bias"))] | length' '80' "qwen2.5 QKV biases"
run plan --model no-such-model
expect_code 2 "unknown model"
expect_err "dbuf-shard: --model: unknown model 'no-such-model' (built-in models: llama-3.2-1b, tinyllama-1.1b, llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, mixtral-8x7b, qwen2.5-72b, deepseek-v3, gpt3-175b)" "unknown model message"
run models extra
expect_code 2 "models with an argument"
run models --help
expect_code 0 "models --help"

# ---- shape lists ----
printf '# the seed\n\nP0 2x6\nP1 4x4   # comment\nP2 4x4\nP3 1x2\nP4 1x6\n' >"$T/seed"
run plan --format json --shapes "$T/seed" --dp 5
expect_json '[.tensors[] | [.name, .shape]]' '[["P0",[2,6]],["P1",[4,4]],["P2",[4,4]],["P3",[1,2]],["P4",[1,6]]]' "text shape list"
run plan --format json --shapes - --dp 5 <"$T/seed"
expect_json '[.tensors[].offset]' '[0,12,32,28,48]' "text shape list from stdin"
printf '  [{"name": "P0", "shape": [2, 6]},\n {"name": "P1", "shape": [4, 4]}, {"name": "e", "shape": [0, 3]}, {"name": "v", "shape": [5]}]\n' >"$T/shapes.json"
run plan --format json --shapes "$T/shapes.json" --dp 2 --layout unpadded
expect_json '[.tensors[] | [.name, .shape]]' '[["P0",[2,6]],["P1",[4,4]],["e",[0,3]],["v",[5]]]' "JSON shape list"
run plan --format json --shapes - <"$T/shapes.json"
expect_json '.tensors | length' '4' "JSON shape list from stdin"
printf '[{"name": "a", "shape": [2, 3]},\n {"name": "b"}]\n' >"$T/nameonly.json"
run plan --shapes "$T/nameonly.json"
expect_code 2 "JSON entry without a shape"
grep -q "^dbuf-shard: $T/nameonly.json" "$T/stderr" && [ "$(wc -l <"$T/stderr")" -eq 1 ] &&
  pass "JSON entry without a shape: one line naming the file" || fail "JSON entry without a shape: $ERR"
printf '[{"name": "a", "shape": [2, 3]}' >"$T/broken.json"
run plan --shapes "$T/broken.json"
expect_code 2 "broken JSON shape list"
expect_err_has "dbuf-shard: $T/broken.json:1:" "broken JSON shape list names file and line"

# ---- safetensors ----
# Keys out of data order: the tensor order follows data_offsets.
st_write "$T/one.safetensors" '{"__metadata__":{"format":"pt"},"b.weight":{"dtype":"F32","shape":[4],"data_offsets":[12,28]},"a.weight":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}}' 28
# --dtype bf16: one dtype, one buffer (the mixed dtypes are test-units.sh's)
run plan --format json --safetensors "$T/one.safetensors" --dtype bf16
expect_code 0 "safetensors file"
expect_json '[.tensors[] | [.name, .shape]]' '[["a.weight",[2,3]],["b.weight",[4]]]' "safetensors: data order, metadata skipped"
run plan --safetensors "$T/one.safetensors" --format table --dp 2 --layout unpadded
expect_code 0 "safetensors table"

# Sharded: two files and an index; files in index order.
st_write "$T/model-00001-of-00002.safetensors" '{"x.weight":{"dtype":"F16","shape":[4,2],"data_offsets":[0,16]},"y.bias":{"dtype":"F16","shape":[2],"data_offsets":[16,20]}}' 20
st_write "$T/model-00002-of-00002.safetensors" '{"z.weight":{"dtype":"F8_E4M3","shape":[3,3],"data_offsets":[0,9]}}' 9
printf '{"metadata": {"total_size": 29}, "weight_map": {"z.weight": "model-00002-of-00002.safetensors", "x.weight": "model-00001-of-00002.safetensors", "y.bias": "model-00001-of-00002.safetensors"}}\n' >"$T/model.safetensors.index.json"
run plan --format json --safetensors "$T/model.safetensors.index.json" --layout unpadded --dp 2 --dtype bf16
expect_code 0 "sharded checkpoint"
expect_json '[.tensors[] | [.name, .shape]]' '[["x.weight",[4,2]],["y.bias",[2]],["z.weight",[3,3]]]' "sharded: index order"
# Several files on the command line, in the order given.
run plan --format json --dtype bf16 --safetensors "$T/model-00002-of-00002.safetensors" "$T/model-00001-of-00002.safetensors"
expect_json '[.tensors[].name]' '["z.weight","x.weight","y.bias"]' "several files in the order given"
# --order names the order.
printf 'y.bias\n# comment\nz.weight\nx.weight\n' >"$T/order"
run plan --format json --dtype bf16 --safetensors "$T/model.safetensors.index.json" --order "$T/order"
expect_json '[.tensors[].name]' '["y.bias","z.weight","x.weight"]' "--order"
printf 'y.bias\nz.weight\n' >"$T/order-short"
run plan --safetensors "$T/model.safetensors.index.json" --order "$T/order-short"
expect_code 2 "--order missing a tensor"
[ "$(wc -l <"$T/stderr")" -eq 1 ] && expect_err_has "x.weight" "--order missing a tensor names it"
printf 'y.bias\nz.weight\nx.weight\nw.weight\n' >"$T/order-extra"
run plan --safetensors "$T/model.safetensors.index.json" --order "$T/order-extra"
expect_code 2 "--order with an unknown name"
expect_err_has "w.weight" "--order unknown name named"
run plan --shapes "$T/seed" --order "$T/order"
expect_code 2 "--order without --safetensors"
expect_err "dbuf-shard: --order applies to --safetensors only" "--order without --safetensors message"
# verify a layout planned from a checkpoint against the checkpoint.
"$DBUF" plan --format json --dtype bf16 --safetensors "$T/model.safetensors.index.json" --dp 2 -o "$T/st.json"
run verify "$T/st.json" --dtype bf16 --safetensors "$T/model.safetensors.index.json"
expect_code 0 "verify against a checkpoint"
run verify "$T/st.json" --dtype bf16 --safetensors "$T/model.safetensors.index.json" --order "$T/order"
expect_code 1 "verify against a checkpoint in another order"
expect_out_has "order: tensor" "verify names the reordered tensor"

# Broken checkpoints: exit 2, one line naming the file (and the tensor).
printf 'x' >"$T/tiny.safetensors"
bad "shorter than 8 bytes" "dbuf-shard: $T/tiny.safetensors: file is 1 bytes, shorter than the 8-byte header length" plan --safetensors "$T/tiny.safetensors"
st_write "$T/trunc.safetensors" '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}' 8
bad "truncated data" "dbuf-shard: $T/trunc.safetensors: tensor 'a': data_offsets [0, 16] run past the end of the file (data region is 8 bytes): truncated file?" plan --safetensors "$T/trunc.safetensors"
printf '\x40\x00\x00\x00\x00\x00\x00\x00{}' >"$T/hdr.safetensors"
bad "truncated header" "dbuf-shard: $T/hdr.safetensors: header length 64 runs past the end of the file (10 bytes): truncated file?" plan --safetensors "$T/hdr.safetensors"
printf '\x01\xe1\xf5\x05\x00\x00\x00\x00{}' >"$T/big.safetensors"
bad "oversized header" "dbuf-shard: $T/big.safetensors: header length 100000001 is over the safetensors limit of 100000000 bytes" plan --safetensors "$T/big.safetensors"
st_write "$T/ovl.safetensors" '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}' 16
bad "overlapping offsets" "dbuf-shard: $T/ovl.safetensors: tensor 'b': data_offsets [8, 16] overlap tensor 'a' [0, 16]" plan --safetensors "$T/ovl.safetensors"
st_write "$T/gap.safetensors" '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}' 20
bad "gapped offsets" "dbuf-shard: $T/gap.safetensors: tensor 'b': data_offsets [12, 20] leave a gap of 4 bytes after tensor 'a' [0, 8]" plan --safetensors "$T/gap.safetensors"
st_write "$T/tail.safetensors" '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}' 24
bad "bytes after the last tensor" "dbuf-shard: $T/tail.safetensors: 8 bytes after the last tensor ('a', ends at data offset 16) belong to no tensor" plan --safetensors "$T/tail.safetensors"
st_write "$T/json.safetensors" '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}' 8
bad "bad JSON header" "dbuf-shard: $T/json.safetensors: header is not valid JSON: '}' expected near end of file (line 1, column 53)" plan --safetensors "$T/json.safetensors"
st_write "$T/dtype.safetensors" '{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}}' 8
bad "unknown dtype" "dbuf-shard: $T/dtype.safetensors: tensor 'a': unknown dtype 'Q4'" plan --safetensors "$T/dtype.safetensors"
st_write "$T/size.safetensors" '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}' 8
bad "offsets disagree with the shape" "dbuf-shard: $T/size.safetensors: tensor 'a': data_offsets [0, 8] hold 8 bytes, shape 3 F32 needs 12" plan --safetensors "$T/size.safetensors"
bad "missing file" "dbuf-shard: $T/none.safetensors: cannot open: No such file or directory" plan --safetensors "$T/none.safetensors"
printf '{"weight_map": {"x.weight": "model-00001-of-00002.safetensors", "q.weight": "model-00003-of-00003.safetensors"}}' >"$T/bad.index.json"
run plan --safetensors "$T/bad.index.json"
expect_code 2 "index naming a missing shard"
grep -q "model-00003-of-00003.safetensors" "$T/stderr" && [ "$(wc -l <"$T/stderr")" -eq 1 ] &&
  pass "index naming a missing shard: one line naming it" || fail "index: $ERR"
printf '{"weight_map": {"x.weight": "model-00001-of-00002.safetensors"}}' >"$T/short.index.json"
run plan --safetensors "$T/short.index.json"
expect_code 2 "index missing a tensor of its file"
expect_err_has "y.bias" "index missing a tensor names it"

finish
