#!/bin/bash
# The run over a plan of several buffers (--units, the checkpoint's own
# dtypes), a fault caught in one buffer and named with it, and the memory
# pre-flight that refuses a run before any allocation.
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
command -v jq >/dev/null || { echo "SKIP: jq not found"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }

# ---- a built-in model, --units layer, np 2 and 4 ----
# The units, derived here from the model's tensor names: "root", then every
# "model.layers.N" prefix in order of first appearance.
"$DBUF" plan --model llama-3.2-1b --format json >"$T/plan.json"
want_units=$(jq -c '[.tensors[].name | (capture("^(?<u>.*?layers\\.[0-9]+)\\.") // {u: "root"}) | .u]
  | reduce .[] as $u ([]; if index([$u]) then . else . + [$u] end)' "$T/plan.json")
logical=$(jq '[.tensors[] | .shape | reduce .[] as $d (1; . * $d)] | add' "$T/plan.json")
for np in 2 4; do
  mpi "$np" --model llama-3.2-1b --units layer --no-materialize -q --report "$T/r$np.json"
  expect_code 0 "units layer np $np: exit 0"
  expect_out_has "PASS: every row owned exactly once on $np ranks" "units layer np $np: PASS"
  jq_is "$T/r$np.json" '[.buffers[].unit]' "$want_units" "units layer np $np: buffer names"
  jq_is "$T/r$np.json" '[.plan.buffers, .plan.units, ([.buffers[].logical] | add), .plan.logical]' \
    "[$(jq length <<<"$want_units"), \"layer\", $logical, $logical]" \
    "units layer np $np: buffer count and logical elements (totals)"
  jq_is "$T/r$np.json" '[.buffers[] | .bytes == .size * .elem_size] | all' true \
    "units layer np $np: bytes per buffer"
  jq_is "$T/r$np.json" '(.ranks | map(.bytes) | add) == .plan.bytes' true \
    "units layer np $np: the ranks hold every byte"
done
# Materialized at np 4: every element of every buffer verified.
mpi 4 --model llama-3.2-1b --units layer --dp 4 -q --report "$T/m4.json" --force
expect_code 0 "units layer np 4 materialized: exit 0"
jq_is "$T/m4.json" '[.verdict, ([.buffers[].data] | unique)]' '["PASS", ["PASS"]]' \
  "units layer np 4 materialized: every buffer PASS"

# ---- a checkpoint of mixed dtypes ----
python3 - "$T/mixed.safetensors" <<'PY'
import json, struct, sys
ts = [("model.embed_tokens.weight", "F32", [64, 16]), ("model.layers.0.attn.weight", "BF16", [16, 16]),
      ("model.layers.0.norm.weight", "F32", [16]), ("model.layers.1.attn.weight", "BF16", [16, 16]),
      ("model.layers.1.norm.weight", "F32", [16]), ("model.layers.1.mlp.weight", "F16", [32, 16]),
      ("lm_head.weight", "BF16", [64, 16])]
size = {"F32": 4, "BF16": 2, "F16": 2}
h, at = {}, 0
for n, d, s in ts:
    b = size[d]
    for x in s:
        b *= x
    h[n] = {"dtype": d, "shape": s, "data_offsets": [at, at + b]}
    at += b
hj = json.dumps(h).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(hj)) + hj + bytes(at))
PY
# Buffers (unit order of first tensor, dtypes by first appearance) and their
# logical bytes, from the table above.
want='[["root","fp32",4,4096],["root","bf16",2,2048],["model.layers.0","bf16",2,512],["model.layers.0","fp32",4,64],["model.layers.1","bf16",2,512],["model.layers.1","fp32",4,64],["model.layers.1","fp16",2,1024]]'
for np in 2 4; do
  mpi "$np" --safetensors "$T/mixed.safetensors" --units layer -q --report "$T/s$np.json"
  expect_code 0 "mixed dtypes np $np: exit 0"
  jq_is "$T/s$np.json" '[.buffers[] | [.unit, .dtype, .elem_size, .logical * .elem_size]]' "$want" \
    "mixed dtypes np $np: buffers, dtypes and logical bytes"
  jq_is "$T/s$np.json" '[.plan.dtype, .plan.elem_size, ([.buffers[] | .size * .elem_size] | add) == .plan.bytes]' \
    '["mixed", 0, true]' "mixed dtypes np $np: total bytes from each dtype's size"
  jq_is "$T/s$np.json" '[.verdict, ([.buffers[].structure, .buffers[].data] | unique)]' '["PASS", ["PASS"]]' \
    "mixed dtypes np $np: PASS"
done

# ---- the trainer's own plan file (--layout-file, version 2) ----
# The plan of the checkpoint written as version-2 JSON and run from the file:
# the same buffers, dtypes and bytes as the planned run above.
"$DBUF" plan --safetensors "$T/mixed.safetensors" --units layer --dp 2 --format json >"$T/v2.json"
mpi 2 --layout-file "$T/v2.json" -q --report "$T/l2.json"
expect_code 0 "layout file v2 np 2: exit 0"
jq_is "$T/l2.json" '[.buffers[] | [.unit, .dtype, .elem_size, .logical * .elem_size]]' "$want" \
  "layout file v2 np 2: the file's buffers, dtypes and logical bytes"
jq_is "$T/l2.json" '[.verdict, .plan.units, ([.buffers[].data] | unique)]' '["PASS", "layout-file", ["PASS"]]' \
  "layout file v2 np 2: PASS, units from the file"
mpi 4 --layout-file "$T/v2.json" -q
expect_code 2 "layout file v2 at np 4: exit 2"
expect_err_has "v2.json: dp_size 2 does not match the 4 ranks of the job" "layout file v2 at np 4: names dp_size"
mpi 2 --layout-file "$T/v2.json" --dtype fp32 -q
expect_code 2 "layout file v2 --dtype: exit 2"
expect_err_has "v2.json: --dtype cannot retype a plan of 7 buffers" "layout file v2 --dtype: refused with the count"
# Planning options the file already decided are refused, not ignored.
for o in "--node-size 2" "--align-bytes 64" "--order $T/v2.json"; do
  mpi 2 --layout-file "$T/v2.json" $o -q
  expect_code 2 "layout file with ${o%% *}: exit 2"
  expect_err_has "dbuf-shard: --layout-file replaces planning: drop ${o%% *}" "layout file with ${o%% *}: refused by name"
done
# A version-1 file holds one layout: its dtype is the file's (bf16 here),
# or --dtype's.
"$DBUF" plan --safetensors "$T/mixed.safetensors" --dtype bf16 --dp 2 --format json >"$T/v1.json"
mpi 2 --layout-file "$T/v1.json" -q --report "$T/l1.json"
jq_is "$T/l1.json" '[.verdict, [.buffers[] | [.unit, .dtype, .elem_size]]]' '["PASS", [["all", "bf16", 2]]]' \
  "layout file v1: one buffer all/bf16"
mpi 2 --layout-file "$T/v1.json" --dtype fp32 -q --report "$T/l1f.json"
jq_is "$T/l1f.json" '[.verdict, [.buffers[] | [.unit, .dtype, .elem_size]], .plan.bytes == .plan.size * 4]' \
  '["PASS", [["all", "fp32", 4]], true]' "layout file v1 --dtype fp32: the buffer retyped"
# The same single layout written as version 2 (one buffer "all"): --dtype
# retypes it too.
jq '{format, version: 2, buffers: [{unit: "all", dtype: "bf16"} + del(.format, .version)]}' "$T/v1.json" >"$T/one2.json"
mpi 2 --layout-file "$T/one2.json" --dtype fp32 -q --report "$T/l12.json"
expect_code 0 "layout file v2 of one buffer --dtype fp32: exit 0"
jq_is "$T/l12.json" '[.verdict, [.buffers[] | [.unit, .dtype, .elem_size]]]' '["PASS", [["all", "fp32", 4]]]' \
  "layout file v2 of one buffer --dtype fp32: retyped"

# ---- a fault caught in one buffer, named with it ----
DBUF_FAULT=corrupt:1 mpi 2 --safetensors "$T/mixed.safetensors" --units layer -q --report "$T/f.json"
expect_code 1 "corrupt:1 in a buffer: exit 1"
bad=$(jq -r '[.buffers[] | select(.data == "FAIL") | "\(.unit)/\(.dtype)"] | join(" ")' "$T/f.json")
if [ -n "$bad" ] && [ "$(wc -w <<<"$bad")" -eq 1 ]; then pass "corrupt:1: one buffer fails ($bad)"; else fail "corrupt:1: failing buffers '$bad'"; fi
expect_err_has "dbuf-shard: buffer $bad: rank 1: " "corrupt:1: the message names the buffer and the rank"
jq_is "$T/f.json" '[.verdict, (.message | startswith("buffer '"$bad"': rank 1: "))]' '["FAIL", true]' \
  "corrupt:1: the report names the buffer"

# ---- buffers whose bytes add up past int64 (2^62 + 2^62): no report of
# wrapped totals, every rank stops with the reason ----
printf 'a 576460752303423488 fp64\nb 576460752303423488 fp64\n' >"$T/b2.shapes"
mpi 2 --shapes "$T/b2.shapes" --units 're:^(.)' --no-materialize -q
expect_code 2 "plan bytes overflow: exit 2"
expect_err_has "plan: the bytes of its 2 buffers together: 64-bit count overflow" "plan bytes overflow: named"
if grep -q PASS "$T/stdout"; then fail "plan bytes overflow: a PASS report"; else pass "plan bytes overflow: no PASS"; fi

# ---- the memory pre-flight ----
# DeepSeek-V3 in bf16 (about 1.3 TB) fits no test machine: every rank exits
# 1 before allocating, one line per short rank.
mpi 2 --model deepseek-v3 -q --report "$T/ds.json"
expect_code 1 "pre-flight deepseek-v3 np 2: exit 1"
n=$(grep -c '^dbuf-shard: rank [01] on .* needs .*, .* for 2 ranks needing .*$' "$T/stderr")
if [ "$n" -eq 2 ]; then pass "pre-flight: one line per short rank"; else fail "pre-flight: $n lines: $ERR"; fi
jq_is "$T/ds.json" '[.verdict, .phase, .exit_code]' '["ERROR", "memory pre-flight", 1]' \
  "pre-flight: stopped before materializing"
mpi 2 --model deepseek-v3 --force --no-materialize -q
expect_code 0 "pre-flight: --force --no-materialize still runs"
# A faked figure (test-only DBUF_FAKE_MEM_AVAIL): exact lines; --force runs.
# Each rank of np 2 holds half the checkpoint's padded bytes.
mpi 2 --safetensors "$T/mixed.safetensors" --units layer -q --report "$T/p.json" --force
need=$(jq '.ranks[1].bytes' "$T/p.json")
DBUF_FAKE_MEM_AVAIL=2000 mpi 2 --safetensors "$T/mixed.safetensors" --units layer -q
expect_code 1 "pre-flight faked: exit 1"
want_line=$(python3 -c "
v=$need; u=-1
while v>=1024 and u<4: v/=1024; u+=1
print('%.1f %s' % (v, ['KiB','MiB','GiB','TiB','PiB'][u]))")
expect_err_has "dbuf-shard: rank 1 on $(hostname) needs $want_line, NUMA node 0 has 2.0 KiB free for 2 ranks" \
  "pre-flight faked: the line names the rank, its need and the node's free memory"
DBUF_FAKE_MEM_AVAIL=2000 mpi 2 --safetensors "$T/mixed.safetensors" --units layer -q --force
expect_code 0 "pre-flight faked: --force skips it"
DBUF_FAKE_MEM_AVAIL=100000000 mpi 2 --safetensors "$T/mixed.safetensors" --units layer -q
expect_code 0 "pre-flight faked: enough memory passes"
# Uneven ranks share the node's memory by what they need together, not by
# an equal split: owners auto puts a (1024x4 bf16, 8,192 bytes) on rank 0
# and b (256x4, 2,048 bytes) on rank 1, 10,240 bytes in all.
printf 'a 1024x4\nb 256x4\n' >"$T/uneven.shapes"
DBUF_FAKE_MEM_AVAIL=10240 mpi 2 --shapes "$T/uneven.shapes" --layout tensor -q
expect_code 0 "pre-flight uneven: 8,192 + 2,048 bytes fit in 10,240"
DBUF_FAKE_MEM_AVAIL=10239 mpi 2 --shapes "$T/uneven.shapes" --layout tensor -q
expect_code 1 "pre-flight uneven: not in 10,239"
expect_err_has "dbuf-shard: rank 1 on $(hostname) needs 2.0 KiB, NUMA node 0 has 10.0 KiB free for 2 ranks needing 10.0 KiB" \
  "pre-flight uneven: the small rank is short with its node"

# ---- the report is valid UTF-8 JSON whatever the text it quotes: a shapes
# path, a --units pattern and a message quoting a shapes file, with bytes
# that are not UTF-8, are written with those bytes as \xNN.
odd=$T/m$(printf '\xff').shapes
printf 'P0 4x4\nP1 4x4\nP2 2\n' >"$odd"
mpi 2 --shapes "$odd" --units "re:(P[01])$(printf '\xfe')?" -q --report "$T/odd.json"
expect_code 0 "odd bytes: exit 0"
expect_valid_json "$T/odd.json" "odd bytes: the report is valid JSON"
jq_is "$T/odd.json" '[(.plan.source | endswith("/m\\xff.shapes")), .plan.units]' '[true, "re:(P[01])\\xfe?"]' \
  "odd bytes: the source path and the pattern, escaped"
printf 'P0 4x4\na\xffb 2\n' >"$T/bad.shapes"
mpi 2 --shapes "$T/bad.shapes" -q --report "$T/stopped.json"
expect_code 2 "odd tensor name: exit 2"
expect_err "dbuf-shard: rank 0: $T/bad.shapes:2: tensor 1: name 'a\\xffb' is empty, not UTF-8, or has spaces or control characters" \
  "odd tensor name: one line, the byte escaped"
expect_valid_json "$T/stopped.json" "odd tensor name: the stopped run's report is valid JSON"
jq_is "$T/stopped.json" '[.verdict, (.message | endswith("name '"'"'a\\xffb'"'"' is empty, not UTF-8, or has spaces or control characters"))]' \
  '["ERROR", true]' "odd tensor name: the report's verdict and message"

finish
