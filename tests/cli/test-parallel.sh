#!/bin/bash
# CLI tests of the model-parallel options of `plan` (--tp, --pp, --pp-layers,
# --stage, --ep, --expert-tp, --vocab-divisor, --naming).  Expected figures
# are computed here in shell arithmetic from the models' public configs,
# not taken from the program.
set -u
. "$(dirname "$0")/lib.sh"

# llama-3.1-8b: hidden 4096, ffn 14336, 32 layers, 32 heads of 128, 8 kv
# heads, vocab 128256, untied.  One layer on tp rank 0 of tp T:
l8b_layer() { # T
  local t=$1 h=4096 f=14336 q=$((32 * 128)) kv=$((8 * 128))
  echo $(((q + 2 * kv) * h / t + q * h / t + 3 * f * h / t + 2 * h))
}
vp() { # V DIVISOR T: V padded to a multiple of DIVISOR x T
  local m=$(($2 * $3))
  echo $((($1 + m - 1) / m * m))
}
L1=$(l8b_layer 1)
L2=$(l8b_layer 2)
EMB2=$(($(vp 128256 128 2) / 2 * 4096))

# --tp 2: the note's worked check, 4,015,263,744 elements per rank.
run plan --model llama-3.1-8b --tp 2 --format json
expect_code 0 "tp 2: plans"
expect_json '[.logical_size, (.tensors | length)]' "[$((EMB2 + 32 * L2 + 4096 + EMB2)), 291]" \
  "tp 2: elements and tensors"
[ $((EMB2 + 32 * L2 + 4096 + EMB2)) -eq 4015263744 ] && pass "tp 2: the formula gives 4,015,263,744" ||
  fail "tp 2: formula $((EMB2 + 32 * L2 + 4096 + EMB2))"
expect_json '[.tensors[] | select(.name | test("^model[.]layers[.]0[.](self_attn|mlp)[.]")) | [.name, .shape]]' \
  '[["model.layers.0.self_attn.q_proj.weight",[2048,4096]],
    ["model.layers.0.self_attn.k_proj.weight",[512,4096]],
    ["model.layers.0.self_attn.v_proj.weight",[512,4096]],
    ["model.layers.0.self_attn.o_proj.weight",[4096,2048]],
    ["model.layers.0.mlp.gate_proj.weight",[7168,4096]],
    ["model.layers.0.mlp.up_proj.weight",[7168,4096]],
    ["model.layers.0.mlp.down_proj.weight",[4096,7168]]]' "tp 2: column dim 0, row dim 1"

# --naming megatron: fused qkv and fc1, norms fused, 1 + 32 x 6 + 2 tensors.
run plan --model llama-3.1-8b --tp 2 --naming megatron --format json
expect_json '[.logical_size, (.tensors | length), .tensors[0].name, .tensors[0].shape,
  (.tensors[1:7] | map([.name, .shape])), .tensors[-1].name]' \
  "[4015263744, 195, \"embedding.word_embeddings.weight\", [64128, 4096],
    [[\"decoder.layers.0.self_attention.linear_proj.weight\", [4096, 2048]],
     [\"decoder.layers.0.self_attention.linear_qkv.layer_norm_weight\", [4096]],
     [\"decoder.layers.0.self_attention.linear_qkv.weight\", [$(((32 + 2 * 8) * 128 / 2)), 4096]],
     [\"decoder.layers.0.mlp.linear_fc1.layer_norm_weight\", [4096]],
     [\"decoder.layers.0.mlp.linear_fc1.weight\", [$((2 * 14336 / 2)), 4096]],
     [\"decoder.layers.0.mlp.linear_fc2.weight\", [4096, $((14336 / 2))]]],
    \"output_layer.weight\"]" "megatron names and fused shapes"

# --pp 2: one block per stage; stage 0 embedding + 16 layers, stage 1 16
# layers + final norm + output layer.
S0=$((EMB2 + 16 * L2))
S1=$((16 * L2 + 4096 + EMB2))
run plan --model llama-3.1-8b --tp 2 --pp 2 --dp 4
expect_code 0 "pp 2: plans every stage"
commas() { # N with thousands separators
  local n=$1 out=""
  while [ "${#n}" -gt 3 ]; do out=",${n: -3}$out"; n=${n:0:${#n}-3}; done
  echo "$n$out"
}
[ "$(grep -c '^stage [01] of 2:$' "$T/stdout")" -eq 2 ] && pass "pp 2: two blocks" || fail "pp 2: blocks"
expect_out_has "logical size:    $(commas $S0) elements" "pp 2: stage 0 elements"
expect_out_has "logical size:    $(commas $S1) elements" "pp 2: stage 1 elements"
expect_out_has "stage 0 (layers 0-15)" "pp 2: stage 0 layers"
expect_out_has "stage 1 (layers 16-31)" "pp 2: stage 1 layers"
run plan --model llama-3.1-8b --tp 2 --pp 2 --stage 0 --format json
expect_json '[.logical_size, .tensors[0].name, .tensors[-1].name]' \
  "[$S0, \"model.embed_tokens.weight\", \"model.layers.15.post_attention_layernorm.weight\"]" "stage 0 alone"
run plan --model llama-3.1-8b --tp 2 --pp 2 --stage 1 --format json
expect_json '[.logical_size, .tensors[0].name, .tensors[-1].name]' \
  "[$S1, \"model.layers.16.self_attn.q_proj.weight\", \"lm_head.weight\"]" "stage 1 alone"
run plan --model llama-3.1-8b --tp 2 --pp 2 --stage 1 --naming megatron --format json
expect_json '[.logical_size, .tensors[0].name]' \
  "[$S1, \"decoder.layers.0.self_attention.linear_proj.weight\"]" "megatron: a stage numbers its layers from 0"

# --pp-layers: 10 then 22 layers (tp 1).
run plan --model llama-3.1-8b --pp 2 --pp-layers 10,22 --stage 0 --format json
expect_json .logical_size "$((128256 * 4096 + 10 * L1))" "pp-layers 10,22: stage 0"
run plan --model llama-3.1-8b --pp 2 --pp-layers 10,22 --stage 1 --format json
expect_json .logical_size "$((22 * L1 + 4096 + 128256 * 4096))" "pp-layers 10,22: stage 1"

# Tied llama-3.2-1b at pp 2: the last stage holds its own output layer.
run plan --model llama-3.2-1b --pp 2 --stage 1 --format json
expect_json '[.tensors[-1].name, .tensors[-1].shape]' '["lm_head.weight", [128256, 2048]]' \
  "tied: output copy on the last stage"

# --ep / --expert-tp: mixtral-8x7b (hidden 4096, 8 experts of ffn 14336,
# vocab 32000) at tp 2, ep 2, expert tp 1.
MIX_LAYER=$(((4096 + 2 * 1024) * 4096 / 2 + 4096 * 4096 / 2 + 8 * 4096 + 8 / 2 * 3 * 14336 * 4096 + 2 * 4096))
MIX_EMB=$(($(vp 32000 128 2) / 2 * 4096))
run plan --model mixtral-8x7b --tp 2 --ep 2 --expert-tp 1 --format json
expect_json '[.logical_size, ([.tensors[].name | select(test("^model[.]layers[.]0[.].*experts[.][0-9]+[.]w1"))] | length),
  (.tensors[] | select(.name == "model.layers.0.block_sparse_moe.experts.3.w2.weight") | .shape)]' \
  "[$((MIX_EMB + 32 * MIX_LAYER + 4096 + MIX_EMB)), 4, [4096, 14336]]" "ep 2, expert tp 1"
run plan --model mixtral-8x7b --tp 2 --ep 2 --format json
expect_json '(.tensors[] | select(.name == "model.layers.0.block_sparse_moe.experts.3.w2.weight") | .shape)' \
  '[4096, 7168]' "expert tp defaults to tp"

# --vocab-divisor 1000 at tp 2: 128256 padded to 130000, 65000 rows each.
run plan --model llama-3.1-8b --tp 2 --vocab-divisor 1000 --format json
expect_json '[.tensors[0].shape, .tensors[-1].shape]' '[[65000, 4096], [65000, 4096]]' "vocab divisor"

# Errors: exit 2, one line naming the setting or tensor, the dim and the degree.
bad() { # WANT ARGS...
  local want=$1
  shift
  run plan "$@"
  if [ "$CODE" -eq 2 ] && [ "$ERR" = "dbuf-shard: $want" ]; then pass "error: $*"; else
    fail "error: $*: exit $CODE, '$ERR', want 'dbuf-shard: $want'"
  fi
}
bad "model llama-3.1-8b: num_attention_heads (32) is not divisible by --tp 3" --model llama-3.1-8b --tp 3
bad "model llama-3.1-8b: num_query_groups (key/value heads) (8) is not divisible by --tp 16" \
  --model llama-3.1-8b --tp 16
bad "model mixtral-8x7b: num_experts (8) is not divisible by --ep 3" --model mixtral-8x7b --ep 3
bad "model llama-3.2-1b has no experts: --ep 2 needs a MoE model" --ep 2
bad "model tinyllama-1.1b: num_layers (22) is not divisible by --pp 4; give the layers of each stage with --pp-layers" \
  --model tinyllama-1.1b --pp 4
bad "model llama-3.1-8b: --pp-layers adds up to 20 layers, the model has num_layers 32" \
  --model llama-3.1-8b --pp 2 --pp-layers 10,10
bad "--pp-layers names 2 stages, --pp is 3" --model llama-3.1-8b --pp 3 --pp-layers 16,16
bad "--pp-layers: 0 is out of range [1, 2147483647]" --pp 2 --pp-layers 0,16
bad "--pp-layers: 'x' is not an integer" --pp 2 --pp-layers 8,x
bad "--pp-layers: '' is not an integer" --pp 2 --pp-layers 8,
bad "stage 2 out of range: --pp 2 has stages 0..1" --pp 2 --stage 2
bad "stage 1 out of range: --pp 1 has stages 0..0" --stage 1
bad "tensor model.layers.0.block_sparse_moe.experts.0.w1.weight: dim 0 (14336) is not divisible by --expert-tp 3" \
  --model mixtral-8x7b --expert-tp 3
bad "tensor decoder.layers.0.mlp.experts.linear_fc1.weight0: dim 0 holds gate and up of 14336 rows each, not divisible by --expert-tp 3" \
  --model mixtral-8x7b --expert-tp 3 --naming megatron
bad "--naming: 'mcore' is not hf or megatron" --naming mcore
bad "--tp: 0 is out of range [1, 2147483647]" --tp 0
bad "--vocab-divisor: 'x' is not an integer" --vocab-divisor x
bad "--format json writes one layout: give --stage S (0..1) with --pp 2" --pp 2 --format json
bad "--format csv writes one layout: give --stage S (0..3) with --pp 4" --pp 4 --format csv
printf 'a 4x4\n' >"$T/a.shapes"
bad "--tp applies to the built-in models (--model) only" --shapes "$T/a.shapes" --tp 2
bad "--naming applies to the built-in models (--model) only" --shapes "$T/a.shapes" --naming megatron

# verify compares a layout with one model-parallel rank's tensors: the plan
# of stage 1 matches itself and not stage 0 (other names and shapes).
"$DBUF" plan --model llama-3.1-8b --tp 2 --pp 2 --stage 1 --dp 4 --naming megatron --format json \
  >"$T/s1.json"
run verify "$T/s1.json" --model llama-3.1-8b --tp 2 --pp 2 --naming megatron
expect_code 0 "verify: stage 1 against the largest stage"
expect_out_has "names, order and shapes match model llama-3.1-8b, tp 2, pp 2 stage 1 (layers 16-31)" \
  "verify: names the stage"
run verify "$T/s1.json" --model llama-3.1-8b --tp 2 --pp 2 --stage 0 --naming megatron
expect_code 1 "verify: stage 1 against stage 0 fails"
expect_out_has "$T/s1.json: missing: tensor embedding.word_embeddings.weight (64128x4096) of model llama-3.1-8b" \
  "verify: the embedding of stage 0 is missing"

finish
