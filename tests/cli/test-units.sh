#!/bin/bash
# Plans of several buffers (issue 14): --units, --dtype-map, dtypes from a
# shapes file's third column and from a safetensors header, JSON version 2
# through verify, --state, and every error with its one line and exit 2.
# Expected figures are derived by hand in the comments from the shapes.
set -u
. "$(dirname "$0")/lib.sh"
S=$DATA/golden-out/seed.shapes # P0 2x6 (12), P1 4x4 (16), P2 4x4 (16), P3 1x2 (2), P4 1x6 (6): 52

# ---- re:REGEX and --dtype-map: P0 and P1 their own units, the rest root;
# P1 fp32.  Unpadded (no padding), dp 2: P0/bf16 12 el = 24 B, P1/fp32 16 el
# = 64 B, root/bf16 16+2+6 = 24 el = 48 B; 136 B in all.
run plan --shapes "$S" --dp 2 --layout unpadded --units 're:(P[01])' --dtype-map P1=fp32
expect_code 0 "re: and --dtype-map"
expect_out_has "layout:          unpadded, dp 2, 3 buffers (units re:(P[01]))" "summary: buffer count"
expect_out_has "logical size:    52 elements, 136 bytes" "summary: bytes in each buffer's dtype"
run plan --shapes "$S" --dp 2 --layout unpadded --units 're:(P[01])' --dtype-map P1=fp32 --format json
expect_json '[.version, [.buffers[] | [.unit, .dtype, .size, [.tensors[].name]]]]' \
  '[2, [["P0","bf16",12,["P0"]],["P1","fp32",16,["P1"]],["root","bf16",24,["P2","P3","P4"]]]]' \
  "json v2: buffers in order of their first tensor"
run plan --shapes "$S" --dp 2 --layout unpadded --units 're:(P[01])' --dtype-map P1=fp32 --format csv
expect_out_has "unit,dtype,rank,tensor,name," "csv: unit and dtype columns"
expect_out_has "P1,fp32,0,0,P1,0,2,8,0,0" "csv: P1 rows 0-1 (8 el) on rank 0"
run plan --shapes "$S" --dp 2 --units 're:(P[01])' --format table
expect_out_has "buffer root/bf16:" "table: a block per buffer"

# ---- --dtype-map norm=fp32 alone, --units none: one unit, two dtypes.
printf 'a.w 4x4\na.norm 4\nb.w 2x4\n' >"$T/n.shapes"
# bf16: a.w 16 + b.w 8 = 24 el = 48 B; fp32: a.norm 4 el = 16 B; 64 B.
run plan --shapes "$T/n.shapes" --dtype-map norm=fp32 --format json
expect_json '[.buffers[] | [.unit, .dtype, .logical_size]]' '[["all","bf16",24],["all","fp32",4]]' \
  "--dtype-map norm=fp32: a second buffer"
run plan --shapes "$T/n.shapes" --dtype-map norm=fp32
expect_out_has "logical size:    28 elements, 64 bytes" "--dtype-map: fp32 bytes counted at 4"

# ---- a shapes file with a dtype column: the same plan.
printf 'a.w 4x4 bf16\na.norm 4 fp32\nb.w 2x4\n' >"$T/c.shapes"
run plan --shapes "$T/c.shapes"
expect_out_has "logical size:    28 elements, 64 bytes" "shapes dtype column"

# ---- a checkpoint with F32 and BF16 tensors; and one of F32 only.
# a BF16 2x3 = 12 B, b F32 [4] = 16 B: 28 B, the header's own data size.
st_write "$T/mix.safetensors" '{"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[4],"data_offsets":[12,28]}}' 28
run plan --safetensors "$T/mix.safetensors" --layout unpadded
expect_out_has "logical size:    10 elements, 28 bytes" "checkpoint: its own dtypes"
st_write "$T/f32.safetensors" '{"w":{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]}}' 64
run plan --safetensors "$T/f32.safetensors" --layout unpadded
expect_out_has "dtype fp32, 4 bytes per element" "F32 checkpoint: fp32, not bf16"
expect_out_has "logical size:    16 elements, 64 bytes" "F32 checkpoint: 64 bytes"
run plan --safetensors "$T/f32.safetensors" --format json
expect_json '[.version, .dtype]' '[1, "fp32"]' "F32 checkpoint: version 1 with its dtype"

# ---- --units layer on llama-3.2-1b: root and 16 layers; the buffers'
# logical elements sum to the model's (as --units none counts them).
run plan --model llama-3.2-1b --dp 8 --units layer --format json -o "$T/l.json"
expect_code 0 "--units layer"
cp "$T/l.json" "$T/stdout"
want_units=$(printf '"root"'; for i in $(seq 0 15); do printf ',"model.layers.%d"' "$i"; done)
expect_json '[.buffers[].unit]' "[$want_units]" "--units layer: root and model.layers.0-15"
run plan --model llama-3.2-1b --dp 8 --format json
total=$(jq .logical_size "$T/stdout")
cp "$T/l.json" "$T/stdout"
expect_json '[.buffers[].logical_size] | add' "$total" "--units layer: elements sum to --units none's"
[ "$total" = 1235814400 ] && pass "llama-3.2-1b: 1,235,814,400 elements" || fail "total $total"

# ---- JSON v2 through verify.
run verify "$T/l.json" --model llama-3.2-1b --units layer
expect_code 0 "verify v2 against its model"
expect_out_has "OK: 17 buffers, dp 8, 146 tensors" "verify v2: every buffer"
run verify "$T/l.json" --model llama-3.2-1b
expect_code 1 "verify v2 against other units"
expect_out_has "extra: buffer root/bf16 (2 tensors) is not in model llama-3.2-1b" "verify names the buffer"
run verify "$T/l.json" --units layer
expect_code 2 "--units without a tensor list"
expect_err "dbuf-shard: --units applies with a tensor list to compare with (--shapes, --model or --safetensors)" "--units without a list: message"
jq '.buffers[1].dtype = "fp99"' "$T/l.json" >"$T/bad.json"
run verify "$T/bad.json"
expect_code 2 "v2: bad dtype"
expect_err_has "$T/bad.json: buffers[1]: \"dtype\" must be one of" "v2: bad dtype names the buffer"
jq 'del(.buffers[2].size)' "$T/l.json" >"$T/bad.json"
run verify "$T/bad.json"
expect_err "dbuf-shard: $T/bad.json: buffer model.layers.1/bf16: missing \"size\"" "v2: missing key names buffer and key"

# ---- node reports per buffer: dp 4 in nodes of 2 ranks is 2 nodes for
# every buffer, in the JSON v2 too (each buffer object has its own arrays).
run plan --model llama-3.2-1b --units 're:(layers\.1[01])\.' --dp 4 --ranks-per-node 2 --format json
expect_json '[.buffers[] | [.unit, (.nodes | length), (.crossing | type)]]' \
  '[["root",2,"array"],["layers.10",2,"array"],["layers.11",2,"array"]]' "json v2: a node report per buffer"
run plan --model llama-3.2-1b --units 're:(layers\.1[01])\.' --dp 4 --ranks-per-node 2
[ "$(grep -c '^buffer .*/bf16:$' "$T/stdout")" -eq 3 ] && pass "summary: a node report per buffer" || fail "summary: node reports per buffer"

# ---- FILE units.
printf 'P0 a\nP1 a\nP2 b\nP3 b\nP4 b\n' >"$T/u"
run plan --shapes "$S" --units "$T/u" --format json
expect_json '[.buffers[] | [.unit, [.tensors[].name]]]' '[["a",["P0","P1"]],["b",["P2","P3","P4"]]]' "FILE units"
# bad_units WHAT FORMAT REST: the units file printf FORMAT writes is refused
# with the one line "--units: FILE" REST.
bad_units() {
  # shellcheck disable=SC2059 # the file's text is the format
  printf "$2" >"$T/u"
  bad "units file: $1" "dbuf-shard: --units: $T/u$3" plan --shapes "$S" --units "$T/u"
}
bad_units "unknown tensor" 'P0 a\nP1 a\nP2 b\nP3 b\nP9 b\n' ":5: tensor P9 is not a tensor of the model"
bad_units "missing tensor" 'P0 a\nP1 a\nP2 b\nP3 b\n' ": tensor P4 has no unit (every tensor needs a 'TENSOR UNIT' line)"
bad_units "three fields" 'P0 a x\n' ":1: expected 'TENSOR UNIT', got more: 'x'"

# ---- other errors.
bad "regex without group" "dbuf-shard: --units: regular expression 'P[01]' has no capture group to name the unit (e.g. 'layers\\.([0-9]+)\\.')" plan --shapes "$S" --units 're:P[01]'
bad "bad regex" "dbuf-shard: --units: regular expression '(P[01': Unmatched [, [^, [:, [., or [=" plan --shapes "$S" --units 're:(P[01'
bad "unknown dtype in --dtype-map" "dbuf-shard: --dtype-map: 'P1=fp99' is not PATTERN=DTYPE (a part of tensor names, then one of bf16, fp16, fp32, fp64, fp8-e4m3 (fp8), fp8-e5m2, fp8-e8m0, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool, c64)" plan --shapes "$S" --dtype-map P1=fp99
bad "bad --state" "dbuf-shard: --state: 'foo' is not adam, sgd or none" plan --shapes "$S" --state foo
bad "--state with table" "dbuf-shard: --state applies to --format summary only" plan --shapes "$S" --state sgd --format table
# Bytes past int64: one buffer (2^60 fp64 elements are 2^63 bytes), and two
# buffers of 2^62 bytes each whose sum is 2^63.
printf 'a 1152921504606846976 fp64\n' >"$T/b1"
bad "buffer bytes overflow" "dbuf-shard: $T/b1: plan: buffer all/fp64: 1152921504606846976 elements of 8 bytes overflow 64 bits" plan --shapes "$T/b1" --dp 2
printf 'a 576460752303423488 fp64\nb 576460752303423488 fp64\n' >"$T/b2"
bad "plan bytes overflow" "dbuf-shard: plan totals: the bytes of the buffers together: 64-bit count overflow" plan --shapes "$T/b2" --dp 2 --units 're:^(.)'

# ---- re: patterns are measured before they are compiled: regcomp takes
# about 2^k bytes for k stacked '+' (24 here: gigabytes), and minutes for
# a loop over a part that matches the empty string, so each refusal must
# come at once, with the pattern and the limit.
# bad_re WHAT PATTERN WHY: plan --units re:PATTERN exits 2 with the one line
# "regular expression 'PATTERN': WHY" within 3 s (run under a 1 GiB
# address space, but not with sanitizers or valgrind, which need more, and
# cut at 30 s).
bad_re() {
  local t0 secs
  t0=$(date +%s)
  (
    [ -n "${DBUF_TEST_SANITIZERS:-}${DBUF_VALGRIND:-}" ] || ulimit -v 1048576
    exec timeout $((30 * TIME_SCALE)) "$DBUF" plan --shapes "$S" --units "re:$2" >"$T/stdout" 2>"$T/stderr"
  )
  CODE=$?
  ERR=$(cat "$T/stderr")
  secs=$(($(date +%s) - t0))
  expect_code 2 "re: $1: exit 2"
  expect_err "dbuf-shard: --units: regular expression '$(head -c 60 <<<"$2")$([ ${#2} -gt 60 ] && echo ...)': $3" "re: $1: the line"
  [ "$secs" -le $((3 * TIME_SCALE)) ] && pass "re: $1: refused in $secs s" || fail "re: $1: refused after $secs s"
}
bad_re "24 stacked repetitions" "(a$(printf '+%.0s' $(seq 24)))" "nests repetitions 24 deep (at most 4)"
bad_re "bounds that multiply" '(a{1,100}){1,100}' "its repetitions expand it to 10201 atoms (at most 1000)"
bad_re "a loop over a part that matches the empty string" '((a|){0,9}){20,}' \
  "repeats a part that can match the empty string (as (a?)*, (a|b*)+ or (^|x)? do)"
bad_re "a back-reference" '(P)\1' \
  "back-references (\\1 to \\9) are not taken (matching one can take time exponential in the name's length)"
bad_re "too long" "$(head -c 1100 /dev/zero | tr '\0' a)" "1100 bytes long (at most 1024)"
# Realistic patterns pass, with the units they name.
run plan --model llama-3.2-1b --units 're:layers\.([0-9]+)\.' --format json
expect_json '[.buffers[].unit] | [length, .[0], .[1], .[16]]' '[17, "root", "0", "15"]' "re: layers\\.([0-9]+)\\."
run plan --model llama-3.2-1b --units 're:^model\.(layers\.[0-9]+)' --format json
expect_json '[.buffers[].unit][1]' '"layers.0"' "re: ^model\\.(layers\\.[0-9]+)"
run plan --model llama-3.2-1b --units 're:(.*)\.weight' --format json
expect_json '[.buffers[].unit] | length' '146' "re: (.*)\\.weight: a unit a tensor"

# ---- unit names are UTF-8 without blanks or control characters, of at
# most 4096 bytes (the wire's limit), checked where they come in.
bad_units "not UTF-8" 'P0 a\nP1 a\xffb\nP2 b\nP3 b\nP4 b\n' ":2: unit name 'a\\xffb' is not UTF-8"
bad_units "a control character" 'P0 a\nP1 a\nP2 b\nP3 b\x1bc\nP4 b\n' ":4: unit name 'b\\x1bc' has a blank or control character"
bad_units "a NUL byte" 'P0 a\nP1 a\0\nP2 b\nP3 b\nP4 b\n' ":2: a NUL byte (binary file?)"
u4096=$(head -c 4096 /dev/zero | tr '\0' u)
printf 'P0 %s\nP1 %s\nP2 b\nP3 b\nP4 %s\n' "$u4096" "$u4096" "${u4096}v" >"$T/u"
bad "units file: 4097 bytes" "dbuf-shard: --units: $T/u:5: unit name of 4097 bytes (at most 4096)" plan --shapes "$S" --units "$T/u"
printf 'P0 %s\nP1 %s\nP2 b\nP3 b\nP4 b\n' "$u4096" "$u4096" >"$T/u"
run plan --shapes "$S" --units "$T/u" --format json
expect_code 0 "units file: 4096 bytes"
expect_json '[.buffers[].unit | length]' '[4096, 1]' "units file: the 4096-byte unit in the JSON"
# A capture may end inside a character (the C locale matches bytes).
printf 'blk.\xc3\xa9.w 4x4\nother 2\n' >"$T/utf.shapes"
bad "re: a capture that is not UTF-8" "dbuf-shard: --units: tensor blk.$(printf '\xc3\xa9').w: unit name 'blk.\\xc3' is not UTF-8 (the capture of '^(blk\\..)')" \
  plan --shapes "$T/utf.shapes" --units 're:^(blk\..)'
run plan --shapes "$T/utf.shapes" --units 're:^(blk\...)' --format json
expect_json '[.buffers[].unit]' "[\"blk.$(printf '\xc3\xa9')\", \"root\"]" "re: a whole character captured"

# ---- every JSON writer's output is valid UTF-8 JSON, with names that need
# escapes or are long: quotes, backslashes, characters of 2 to 4 bytes, a
# tensor name of 4,000 bytes and a unit name of 4,096.
n4000=$(head -c 4000 /dev/zero | tr '\0' n)
{
  printf 'q"uote\\back 4x4\n'
  printf '\xc3\xa9t\xc3\xa9.\xe5\xb1\xa4.\xf0\x9f\x98\x80 3x2\n'
  printf '%s 8\n' "$n4000"
  printf 'plain 2x2\n'
} >"$T/odd.shapes"
{
  printf 'q"uote\\back u"1\\\n'
  printf '\xc3\xa9t\xc3\xa9.\xe5\xb1\xa4.\xf0\x9f\x98\x80 \xe5\xb1\xa4\xf0\x9f\x98\x80\n'
  printf '%s %s\n' "$n4000" "$u4096"
  printf 'plain u"1\\\n'
} >"$T/odd.units"
run plan --shapes "$T/odd.shapes" --dp 3 --format json -o "$T/odd1.json"
expect_code 0 "odd names: version 1"
expect_valid_json "$T/odd1.json" "odd names: version 1 is valid JSON"
cp "$T/odd1.json" "$T/stdout"
expect_json '[.tensors[].name | length]' '[11, 7, 4000, 5]' "odd names: version 1 names back (in characters)"
run plan --shapes "$T/odd.shapes" --dp 3 --units "$T/odd.units" --dtype-map plain=fp32 --ranks-per-node 2 \
  --pieces --format json -o "$T/odd2.json"
expect_code 0 "odd names: version 2"
expect_valid_json "$T/odd2.json" "odd names: version 2 (nodes, pieces) is valid JSON"
cp "$T/odd2.json" "$T/stdout"
expect_json '[.buffers[] | [.unit, .dtype]] | .[0:3]' "[[\"u\\\"1\\\\\", \"bf16\"], [\"u\\\"1\\\\\", \"fp32\"], [\"$(printf '\xe5\xb1\xa4\xf0\x9f\x98\x80')\", \"bf16\"]]" \
  "odd names: version 2 units and dtypes back"
expect_json '.buffers[3].unit | length' '4096' "odd names: the 4096-byte unit back"
run verify "$T/odd2.json" --shapes "$T/odd.shapes" --units "$T/odd.units" --dtype-map plain=fp32
expect_code 0 "odd names: version 2 reads back and verifies"

# ---- --state: padded dp 5 gives every rank 12 bf16 elements (golden
# seed.padded.dp5.summary): params 24 B, gradients 24, main 4x12 = 48,
# moments 8x12 = 96, total 192; sgd: 24 + 24 = 48.
run plan --shapes "$S" --dp 5 --state adam
expect_out_has "  rank 0 (most)                        24               24               48               96              192" "--state adam"
run plan --shapes "$S" --dp 5 --state sgd
expect_out_has "  rank 0 (most)                        24               24                0                0               48" "--state sgd"

# ---- --units none with one dtype: today's output (the goldens hold it too).
(cd "$DATA/golden-out" && "$DBUF" plan --shapes seed.shapes --dp 5 --units none) >"$T/stdout" 2>/dev/null
cmp -s "$T/stdout" "$DATA/golden-out/seed.padded.dp5.summary" && pass "--units none: the golden summary" || fail "--units none differs from the golden"
finish
