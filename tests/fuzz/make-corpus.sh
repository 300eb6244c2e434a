#!/bin/bash
# Regenerate the seed corpora under tests/fuzz/corpus/ from the test inputs
# (golden layouts, zoo shapes), hand-made safetensors files and the issue-8
# reproducers.  Run from anywhere after `scripts/fuzz.sh 0` (it needs the
# clang build for the wire messages); the output is committed, so this only
# runs when the seeds should change.  Needs jq.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${DBUF_FUZZ_BUILD:-$top/_build-fuzz}
out=$top/tests/fuzz/corpus
data=$top/tests/data
# Only the folders made here (plan_json's seeds are kept as they are).
rm -rf "$out"/{shapes_text,shapes_json,owners,layout_json,wire,st_header,st_index,units,layout_file}
mkdir -p "$out"/{shapes_text,shapes_json,owners,layout_json,wire,st_header,st_index,units,layout_file}

# --- golden layouts: every 16th non-error case (all kinds, block sizes) ---
jq -c 'select(has("expect_error") | not)' "$data/golden/layouts.jsonl" | awk 'NR % 16 == 1' |
  while IFS= read -r c; do
    name=$(jq -r .name <<<"$c")
    jq -r '.shapes | to_entries[] | "t\(.key) \(.value | map(tostring) | join("x"))"' \
      <<<"$c" >"$out/shapes_text/golden-$name"
    jq -c '[.shapes | to_entries[] | {name: "t\(.key)", shape: .value}]' \
      <<<"$c" >"$out/shapes_json/golden-$name"
    if jq -e 'has("owners")' <<<"$c" >/dev/null; then
      jq -r '.owners[]' <<<"$c" >"$out/owners/golden-$name"
    fi
    # The layout JSON schema (README, "Layout JSON") from the expected values.
    jq -c '{layout, dp_size, block_size, size: .expected.size,
            rank_offsets: .expected.rank_offsets}
           + (if .expected.chunk_size then {chunk_size: .expected.chunk_size} else {} end)
           + {tensors: [.shapes | to_entries[] | {name: "t\(.key)", shape: .value}]
                       | to_entries | map(.value + {offset: 0})}' <<<"$c" >"$out/layout_json/golden-$name.tmp"
    jq -c --argjson c "$c" '.tensors |= (to_entries | map(.value
           + {offset: $c.expected.tensor_offsets[.key]}
           + (if $c.owners then {owner: $c.owners[.key]} else {} end)))' \
      "$out/layout_json/golden-$name.tmp" >"$out/layout_json/golden-$name"
    rm "$out/layout_json/golden-$name.tmp"
  done

# --- zoo shapes: the first 40 lines of two models (real names and dims) ---
for m in llama-3.2-1b mixtral-8x7b; do
  head -40 "$data/zoo/$m.shapes" >"$out/shapes_text/zoo-$m"
done

# --- shape-list edge cases and issue-8 inputs ---
t=$out/shapes_text
printf '' >"$t/empty"
printf '# only a comment\n\n   \n' >"$t/comments-only"
printf 'a 4x4  # trailing comment\n\tb\t7\r\nc 0x3\n' >"$t/comments-tabs-cr"
printf 'big 9223372036854775807\nnext 1\n' >"$t/int64-max-dim"
printf 'a 4294967296x4294967296\n' >"$t/numel-overflow"
printf 'a 3074457345618258602x3\n' >"$t/numel-overflow-3"
printf 'a 2x3\na 4\n' >"$t/duplicate"
printf 'a 1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1\n' >"$t/17-dims"
printf 'a -3x2\n' >"$t/negative"
printf 'a 2x0\n' >"$t/zero-inner"
j=$out/shapes_json
printf '[]' >"$j/empty-array"
printf '[{"name":"a","shape":[9223372036854775807]},{"name":"b","shape":[1]}]' >"$j/int64-max"
printf '[{"name":"a","shape":[0,4294967296,4294967296]}]' >"$j/empty-huge-rows"
printf '[{"name":"a","shape":[2,3],"extra":true},{"name":"a","shape":[1]}]' >"$j/duplicate"
printf '[{"name":"a","shape":[1.5]}]' >"$j/float-dim"
printf '[{"name":"a\\u0001b","shape":[1]}]' >"$j/control-char"
o=$out/owners
printf '0\n1\n# comment\n\n1\n0\n' >"$o/comments"
printf '%s\n' -1 2147483648 9223372036854775807 >"$o/out-of-range"
printf '0 1\n' >"$o/two-per-line"

# --- layout JSON: issue-8 reproducers (defects 1 and 2) and edge layouts ---
l=$out/layout_json
printf '%s' '{"layout":"unpadded","dp_size":2,"block_size":4294967296,"size":8589934592,"rank_offsets":[0,1],"tensors":[{"name":"a","shape":[2,4294967296],"offset":0}]}' >"$l/issue8-block-times-row"
printf '%s' '{"layout":"unpadded","dp_size":3,"size":4,"rank_offsets":[0,-9223372036854775808,2],"tensors":[{"name":"a","shape":[4],"offset":0}]}' >"$l/issue8-rank-int64-min"
printf '%s' '{"layout":"unpadded","dp_size":1,"size":9223372036854775807,"rank_offsets":[0],"tensors":[{"name":"a","shape":[9223372036854775807],"offset":1}]}' >"$l/issue8-offset-plus-numel"
printf '%s' '{"layout":"unpadded","dp_size":1,"size":9223372036854775807,"rank_offsets":[0],"tensors":[{"name":"a","shape":[2],"offset":9223372036854775807}]}' >"$l/issue8-offset-int64-max"
printf '%s' '{"layout":"padded","dp_size":2,"chunk_size":0,"size":4,"rank_offsets":[0,2],"tensors":[{"name":"a","shape":[4],"offset":0}]}' >"$l/padded-chunk-0"
printf '%s' '{"layout":"tensor","dp_size":2,"size":0,"rank_offsets":[0,0],"tensors":[]}' >"$l/tensor-empty"
printf '%s' '{"layout":"tensor","dp_size":2,"size":6,"rank_offsets":[0,4],"tensors":[{"name":"a","shape":[4],"offset":0,"owner":1},{"name":"b","shape":[2],"offset":4,"owner":1}]}' >"$l/tensor-wrong-owner"

# --- wire: every layout seed as 'J', and a few encoded messages as 'W' ---
for f in "$l"/*; do
  { printf 'J'; cat "$f"; } >"$out/wire/J-$(basename "$f")"
done
if [ -x "$build/wire_seed" ]; then
  for f in "$l"/golden-seed-* "$l"/golden-rand1-11-tensor "$l"/golden-rand1-33-padded "$l"/issue8-block-times-row; do
    [ -f "$f" ] && "$build/wire_seed" "$f" "$out/wire/W-$(basename "$f")"
  done
  # plan messages (two buffers of one layout) as 'P'
  for f in "$l"/golden-seed-* "$l"/golden-rand1-11-tensor; do
    [ -f "$f" ] && "$build/wire_seed" "$f" "$out/wire/P-$(basename "$f")" plan
  done
fi

# --- safetensors: a file is an 8-byte little-endian header length, the
# header, then the data region ---
st() { # st FILE HEADER DATA_BYTES
  local n=${#2} i
  {
    for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(((n >> (8 * i)) & 255)))"; done
    printf '%s' "$2"
    head -c "$3" /dev/zero
  } >"$1"
}
s=$out/st_header
st "$s/two-tensors" '{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}}' 24
st "$s/all-dtypes" '{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"b":{"dtype":"I8","shape":[2],"data_offsets":[8,10]},"c":{"dtype":"U16","shape":[1],"data_offsets":[10,12]},"d":{"dtype":"BOOL","shape":[1],"data_offsets":[12,13]},"e":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[13,16]}}' 16
st "$s/empty-tensor" '{"e":{"dtype":"F16","shape":[0,5],"data_offsets":[0,0]},"f":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}' 2
st "$s/overlap" '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}' 6
st "$s/gap" '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}}' 8
st "$s/huge-offsets" '{"a":{"dtype":"F64","shape":[1152921504606846976],"data_offsets":[0,9223372036854775807]}}' 0
st "$s/sub-byte" '{"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}' 1
st "$s/no-tensors" '{"__metadata__":{}}' 0
printf '\xff\xff\xff\xff\xff\xff\xff\x7f{}' >"$s/header-length-huge"
printf '\x04' >"$s/short"
x=$out/st_index
printf '%s' '{"metadata":{"total_size":44},"weight_map":{"x":"a.safetensors","y":"a.safetensors","z":"b.safetensors"}}' >"$x/valid"
printf '%s' '{"weight_map":{"x":"a.safetensors","y":"a.safetensors"}}' >"$x/missing-tensor"
printf '%s' '{"weight_map":{"x":"a.safetensors","y":"b.safetensors","z":"b.safetensors"}}' >"$x/wrong-file"
printf '%s' '{"weight_map":{"x":"../a.safetensors"}}' >"$x/dotdot"
printf '%s' '{"weight_map":{"x":"/etc/passwd"}}' >"$x/absolute"
printf '%s' '{"weight_map":{}}' >"$x/empty-map"
printf '%s' '{"weight_map":{"q":"c.safetensors"}}' >"$x/no-such-file"
printf '%s' '{"weight_map":{"x":"model.safetensors.index.json"}}' >"$x/names-itself"
# --- the malformed-input corpus of the CLI tests, where present ---
if [ -d "$data/malformed" ]; then
  for f in "$data/malformed"/*; do
    b=$(basename "$f")
    case $b in
    idx-*) cp "$f" "$x/malformed-$b" ;;
    st-* | shard-*) cp "$f" "$s/malformed-$b" ;;
    layout-*) cp "$f" "$l/malformed-$b"; { printf 'J'; cat "$f"; } >"$out/wire/J-malformed-$b" ;;
    json-*) cp "$f" "$j/malformed-$b" ;;
    owners-*) cp "$f" "$o/malformed-$b" ;;
    *.shapes | text-*) cp "$f" "$t/malformed-$b" ;;
    esac
  done
fi

# --- units: a re: pattern line, then a units file, against the tensor list
# of fuzz_units.c (its names, then 4136 x's and ".w") ---
u=$out/units
names=(model.embed_tokens.weight model.layers.0.self_attn.q_proj.weight
  model.layers.0.mlp.up_proj.weight model.layers.1.input_layernorm.weight
  model.layers.12.mlp.down_proj.weight h.3.attn.c_attn.bias blocks.7.w
  "blk.$(printf '\xc3\xa9').w" "$(printf '\xe5\xb1\xa4.0.\xe9\x87\x8d\xe3\x81\xbf')"
  "emoji.$(printf '\xf0\x9f\x98\x80').bias" 'q"uote\back' lm_head.weight
  "$(head -c 4136 /dev/zero | tr '\0' x).w")
units_file() { # units_file UNIT...: one line a tensor, the units in turn
  local units=("$@") i=0
  for name in "${names[@]}"; do
    printf '%s %s\n' "$name" "${units[i % ${#units[@]}]}"
    i=$((i + 1))
  done
}
{ printf '%s\n' 'layers\.([0-9]+)\.'; units_file a b "c\"d" "$(printf '\xe5\xb1\xa4')"; } >"$u/layers-and-file"
printf '%s\n' '(.*)\.weight' >"$u/weight"
printf '%s\n' '^(blk\..)' >"$u/capture-cuts-a-character"
printf '%s\n' '^([^.]*)' >"$u/first-component"
printf '%s\n' '(x+)' >"$u/capture-too-long"
printf '%s\n' '(a++++++++++++++++++++)' >"$u/stacked-plus"
printf '%s\n' '((a|){0,9}){20,}' >"$u/empty-loop"
printf '%s\n' '(a{1,100}){1,100}' >"$u/bounds-multiply"
printf '%s\n' '(a)\1' >"$u/back-reference"
printf '%s\n' '([[:alpha:]]+)[].[]' >"$u/brackets"
{ printf '\n'; units_file "a$(printf '\xff')b"; } >"$u/file-not-utf8"
{ printf '\n'; units_file "a$(printf '\x01')b"; } >"$u/file-control"
for n in 4096 4097; do # the last tensor's unit n bytes long
  { printf '\n'; units_file a | sed '$d'; printf '%s %s\n' "${names[12]}" "$(head -c $n /dev/zero | tr '\0' u)"; } >"$u/file-$n"
done
{ printf '\n'; printf 'lm_head.weight a\0b\n'; } >"$u/file-nul"

# --- layout_file: a line of outside text, then a shape list or layout file ---
f=$out/layout_file
{ printf '/data/m\xff.shapes\n'; head -20 "$data/zoo/llama-3.2-1b.shapes"; } >"$f/source-not-utf8"
{ printf 'host\x01\xc3\n'; printf 'q"uote\\back 4x4\n\xc3\xa9t\xc3\xa9.\xf0\x9f\x98\x80 3x2 fp32\nlayers.1.w 8\n'; } >"$f/odd-names"
{ printf '\n'; printf '[{"name":"layers.0.a\\u00e9","shape":[4,2]},{"name":"b","shape":[3],"dtype":"fp32"}]'; } >"$f/json-shapes"
for c in "$l"/golden-seed-padded-5ranks "$l"/tensor-wrong-owner "$out"/plan_json/v2-seed-re; do
  [ -f "$c" ] && { printf 'm\xe9ssage\n'; cat "$c"; } >"$f/layout-$(basename "$c")"
done
echo "corpus: $(find "$out" -type f | wc -l) seeds, $(du -sk "$out" | cut -f1) KiB"
