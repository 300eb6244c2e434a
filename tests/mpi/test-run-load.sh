#!/bin/bash
# `dbuf-shard run --load`: real weights from checkpoints this script writes
# (one file, and two shards with an index; BF16, F32 and F16 tensors whose
# rows straddle rank boundaries; more ranks than rows; a tensor order that is
# not the file order) at np 1, 2, 4 and 8 under every row layout kind, with
# --units layer, every --io; a flipped byte named by tensor, row and rank;
# every error ending every rank with one line and exit 2; and node-local
# copies that differ, for every spread of 3 to 5 ranks over 2 or 3 nodes,
# named with a checker on another node.
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
command -v jq >/dev/null || { echo "SKIP: jq not found"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }

# ---- the checkpoints ----
# Random finite values.  In each file the data lies in another order than
# the header lists the tensors, and in the shards the index lists them in
# yet another.  Shapes (rows = first dim; a 1-D tensor has one row per
# element):
# (even first dims, for --block-size 2)
#   model.embed_tokens.weight   BF16 14x8  14 rows 224 B   shard 1
#   model.layers.0.attn.weight  F32   6x5   6 rows 120 B   shard 1
#   model.layers.0.norm.weight  F16   6     6 rows  12 B   shard 1
#   model.layers.1.attn.weight  BF16 10x3  10 rows  60 B   shard 2
#   model.layers.1.mlp.weight   F16  10x4  10 rows  80 B   shard 2
#   lm_head.weight              F32   2x8   2 rows  64 B   shard 2
ROWS=48       # 14 + 6 + 6 + 10 + 10 + 2
BYTES=560     # 224 + 120 + 12 + 60 + 80 + 64
NARROW=188    # elements not stored as F32: 112 + 6 + 30 + 40
TO_BF16=92    # elements not stored as BF16: 30 + 16 + 6 + 40
python3 - "$T" <<'PY'
import json, os, random, struct, sys
random.seed(9)
d = sys.argv[1]
ts = [("model.embed_tokens.weight", "BF16", [14, 8], 1), ("model.layers.0.attn.weight", "F32", [6, 5], 1),
      ("model.layers.0.norm.weight", "F16", [6], 1), ("model.layers.1.attn.weight", "BF16", [10, 3], 2),
      ("model.layers.1.mlp.weight", "F16", [10, 4], 2), ("lm_head.weight", "F32", [2, 8], 2)]
def data(dt, n):
    out = b""
    for _ in range(n):
        v = random.uniform(-3, 3)
        f = struct.pack("<f", v)
        if dt == "F32":
            out += f
        elif dt == "BF16":
            out += f[2:]
        else:
            out += struct.pack("<e", v)
    return out
def write(path, group):
    h, blobs, at = {}, [], 0
    for n, dt, s, _ in reversed(group):     # data in reverse order ...
        cnt = 1
        for x in s:
            cnt *= x
        b = data(dt, cnt)
        h[n] = {"dtype": dt, "shape": s, "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = dict(sorted(h.items()))              # ... the header by name
    hj = json.dumps(h).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
random.seed(9)
write(os.path.join(d, "one.safetensors"), ts)
os.mkdir(os.path.join(d, "sh"))
names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
for k in (1, 2):
    write(os.path.join(d, "sh", names[k - 1]), [t for t in ts if t[3] == k])
wm = {n: names[k - 1] for n, _, _, k in sorted(ts, key=lambda t: t[0][::-1])}
with open(os.path.join(d, "sh", "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {}, "weight_map": wm}, f)
with open(os.path.join(d, "order.txt"), "w") as f:   # the layout's order: by name, reversed
    f.write("\n".join(sorted((t[0] for t in ts), reverse=True)) + "\n")
PY
ONE="$T/one.safetensors"
IDX="$T/sh/model.safetensors.index.json"

# ---- PASS at np 1, 2, 4 and 8 under every row layout kind ----
# Each run rotates the input, --io, --units and --order, so every one of them
# meets several layouts and rank counts.  The figures are the table's.
ios=(posix mpiio mpiio-coll)
n=0
for np in 1 2 4 8; do
  for kind in padded unpadded compact tensor "padded --block-size 2"; do
    n=$((n + 1))
    io=${ios[$((n % 3))]}
    if [ $((n % 2)) -eq 0 ]; then input=("$IDX"); files=2; else input=("$ONE"); files=1; fi
    extra=()
    [ $((n % 4)) -eq 1 ] && extra+=(--units layer)
    [ $((n % 5)) -eq 2 ] && extra+=(--order "$T/order.txt")
    what="np $np --layout $kind --io $io ${extra[*]} ($files file(s))"
    # shellcheck disable=SC2086
    mpi "$np" --safetensors "${input[@]}" --load --io "$io" --layout $kind "${extra[@]}" -q \
      --report "$T/r.json"
    expect_code 0 "$what: exit 0"
    jq_is "$T/r.json" '[.verdict, .load.verdict, .load.files, .load.tensors, .load.rows, .load.bytes, .load.io, .load.problems]' \
      "[\"PASS\", \"PASS\", $files, 6, $ROWS, $BYTES, \"$io\", []]" "$what: load figures"
    jq_is "$T/r.json" '[.load.checked.rows, .load.checked.bytes, ([.load.ranks[].bytes] | add), (.load.ranks | length)]' \
      "[$ROWS, $BYTES, $BYTES, $np]" "$what: every row checked, every byte read once"
    # One machine: each rank's rows re-read by another rank, at one rank by itself.
    if [ "$np" -eq 1 ]; then by="the same rank"; else by="another rank"; fi
    expect_out_has "B checked against the checkpoint by $by" "$what: checked by $by"
  done
done
expect_out_has "Load check: PASS: 6 tensors, $ROWS rows, $BYTES B checked against the checkpoint by another rank" \
  "the text report's load check"

# ---- --dtype converts on the way in ----
mpi 2 --safetensors "$IDX" --load --dtype fp32 -q --report "$T/c.json"
expect_code 0 "--dtype fp32: exit 0"
jq_is "$T/c.json" '[.load.verdict, .load.bytes, .load.convert.values, .load.convert.changed, .plan.bytes >= 4 * 48]' \
  "[\"PASS\", $BYTES, $NARROW, 0, true]" "--dtype fp32: every narrow value widened, exactly"
mpi 2 --safetensors "$ONE" --load --dtype int8 -q --report "$T/e.json"
expect_code 2 "--dtype int8: exit 2"
expect_err_has "in $ONE: no conversion from " "--dtype int8: the tensor and file named"
jq_is "$T/e.json" '[.verdict, has("load")]' '["ERROR", false]' "--dtype int8: no PASS report"
# The same in one of four buffers (--dtype-map): refused while the
# checkpoint is opened, before any buffer is read (no "loading" line).
mpi 2 --safetensors "$ONE" --load --dtype-map lm_head=int8 --report "$T/e.json"
expect_code 2 "--dtype-map lm_head=int8: exit 2"
expect_err "dbuf-shard: buffer all/int8: rank 0: tensor lm_head.weight in $ONE: no conversion from fp32 to int8 (only fp32, bf16 and fp16 convert into each other)" \
  "--dtype-map lm_head=int8: one line naming the buffer, tensor and file"
jq_is "$T/e.json" '[.verdict, .phase, has("load")]' '["ERROR", "opening the checkpoint", false]' \
  "--dtype-map lm_head=int8: the report says where"
# A data file written again after its header was read (DBUF_FAULT=rewrite:1
# moves its modification time on, before any rank opens it for data): every
# --io refuses it by name instead of reading at the old offsets.
for io in posix mpiio mpiio-coll; do
  DBUF_FAULT=rewrite:1 mpi 2 --safetensors "$ONE" --load --io "$io" --dtype fp32 -q --report "$T/e.json"
  expect_code 2 "file written again, --io $io: exit 2"
  expect_err "dbuf-shard: rank 0: $ONE: changed since its header was read: written again (modification time)" \
    "file written again, --io $io: one line naming the file"
  jq_is "$T/e.json" '[.verdict, .phase, has("load")]' '["ERROR", "materialization", false]' \
    "file written again, --io $io: no load report"
done

# ---- a flipped byte: caught, named with tensor, row and rank ----
# One buffer (--dtype fp32): the fault flips the first byte of the rank's
# first row, which the report's rank record names independently.
for np in 2 4; do
  r=$((np - 1))
  DBUF_FAULT=flip:$r mpi "$np" --safetensors "$ONE" --load --dtype fp32 --layout unpadded -q \
    --report "$T/f.json"
  expect_code 1 "flip:$r at np $np: exit 1"
  name=$(jq -r ".ranks[$r].first.name" "$T/f.json")
  row=$(jq -r ".ranks[$r].first.row" "$T/f.json")
  rows=$(jq -r --arg n "$name" '{"model.embed_tokens.weight":14,"model.layers.0.attn.weight":6,"model.layers.0.norm.weight":6,"model.layers.1.attn.weight":10,"model.layers.1.mlp.weight":10,"lm_head.weight":2}[$n]' "$T/f.json")
  line="tensor $name row $row (rank $r) differs from the checkpoint as rank $(((r + 1) % np)) read it (1 of its $rows rows differ)"
  jq_is "$T/f.json" '[.verdict, .load.verdict, .load.problems, .load.problem_count, .message]' \
    "[\"FAIL\", \"FAIL\", [\"$line\"], 1, \"$line\"]" "flip:$r at np $np: named"
  expect_err_has "dbuf-shard: $line" "flip:$r at np $np: on stderr"
  expect_out_has "FAIL: $line (1 problem)" "flip:$r at np $np: the text report"
done

# ---- errors: one line, exit 2 on every rank, no PASS report ----
# stopped NP 'message' what ARGS...: exit 2, exactly that line, an ERROR report.
stopped() {
  local np=$1 want=$2 what=$3
  shift 3
  mpi "$np" "$@" -q --report "$T/s.json"
  if [ "$CODE" -eq 2 ] && [ "$ERR" = "$want" ]; then pass "$what"; else
    fail "$what: exit $CODE, stderr '$ERR', want '$want'"; fi
  jq_is "$T/s.json" '.verdict' '"ERROR"' "$what: the report says ERROR"
}
# Usage errors stop the run before --report is checked: no report at all.
rm -f "$T/s.json"
mpi 2 --safetensors "$ONE" --load --io fast -q --report "$T/s.json"
if [ "$CODE" -eq 2 ] && [ "$ERR" = "dbuf-shard: --io: 'fast' is not posix, mpiio or mpiio-coll" ] &&
   [ ! -e "$T/s.json" ]; then pass "bad --io"; else fail "bad --io: exit $CODE, '$ERR'"; fi
mpi 2 --load -q
if [ "$CODE" -eq 2 ] && [ "$ERR" = "dbuf-shard: --load needs a checkpoint: give --safetensors FILE... or --safetensors INDEX.json" ]; then
  pass "--load without a checkpoint"; else fail "--load without a checkpoint: exit $CODE, '$ERR'"; fi
mpi 2 --io mpiio -q
if [ "$CODE" -eq 2 ] && [ "$ERR" = "dbuf-shard: --io applies to --load only" ]; then
  pass "--io without --load"; else fail "--io without --load: exit $CODE, '$ERR'"; fi
mpi 2 --safetensors "$ONE" --load --no-materialize -q
if [ "$CODE" -eq 2 ] && [ "$ERR" = "dbuf-shard: --load writes the segments: drop --no-materialize" ]; then
  pass "--load --no-materialize"; else fail "--load --no-materialize: exit $CODE, '$ERR'"; fi
# --load and --io are options every rank must share: rank 0's ARGS0, rank 1's
# ARGS1 (each a word list), the option and the two values named.
differs() {
  local opt=$1 want=$2 got
  # shellcheck disable=SC2086
  timed mpirun_in "$MPI_TIMEOUT" -np 1 "$DBUF" --safetensors "$ONE" -q $3 : \
    -np 1 "$DBUF" --safetensors "$ONE" -q $4 >"$T/stdout" 2>"$T/stderr.all"
  got=$(grep '^dbuf-shard: ' "$T/stderr.all")
  if [ "$CODE" -eq 2 ] && [ "$got" = "dbuf-shard: option $opt differs between ranks: $want" ]; then
    pass "$opt differs between ranks"; else fail "$opt differs: exit $CODE, '$got'"; fi
}
differs --load "rank 0 has off, rank 1 has on" "" "--load"
differs --io "rank 0 has posix, rank 1 has mpiio" "--load" "--load --io mpiio"
# A missing shard: rank 0 cannot read the checkpoint.
mkdir -p "$T/miss"
cp "$IDX" "$T/sh/model-00001-of-00002.safetensors" "$T/miss/"
mpi 2 --safetensors "$T/miss/model.safetensors.index.json" --load -q
if [ "$CODE" -eq 2 ] && grep -q "^dbuf-shard: rank 0: .*$T/miss/model-00002-of-00002.safetensors" "$T/stderr" &&
   [ "$(wc -l <"$T/stderr")" -eq 1 ]; then pass "missing shard: one line naming it and rank 0"; else
  fail "missing shard: exit $CODE, '$ERR'"; fi
# A file shorter than its header says.
head -c $(($(stat -c %s "$ONE") - 7)) "$ONE" >"$T/short.safetensors"
mpi 2 --safetensors "$T/short.safetensors" --load -q
if [ "$CODE" -eq 2 ] && grep -q "^dbuf-shard: rank 0: $T/short.safetensors: .*truncated file" "$T/stderr"; then
  pass "short file: named"; else fail "short file: exit $CODE, '$ERR'"; fi
# A tensor of the layout missing from the checkpoint: a trainer's layout
# (--layout-file) with one more tensor than the checkpoint.
{ python3 -c '
import json, sys
h = json.loads(open(sys.argv[1], "rb").read()[8:8 + int.from_bytes(open(sys.argv[1], "rb").read(8), "little")])
for n in sorted(h):
    print(n, "x".join(map(str, h[n]["shape"])))' "$ONE"; echo "extra.weight 4x4"; } >"$T/extra.shapes"
"$DBUF" plan --shapes "$T/extra.shapes" --dp 2 --format json -o "$T/extra.json"
stopped 2 "dbuf-shard: rank 0: tensor extra.weight: not in the checkpoint" "tensor missing from the checkpoint" \
  --layout-file "$T/extra.json" --safetensors "$ONE" --load
# The layout file of the checkpoint's own tensors loads (converted to bf16).
head -n 6 "$T/extra.shapes" >"$T/own.shapes"
"$DBUF" plan --shapes "$T/own.shapes" --dp 2 --format json -o "$T/own.json"
mpi 2 --layout-file "$T/own.json" --safetensors "$ONE" --load -q --report "$T/lf.json"
jq_is "$T/lf.json" '[.verdict, .load.verdict, .load.rows, .load.bytes, .load.convert.values]' \
  "[\"PASS\", \"PASS\", $ROWS, $BYTES, $TO_BF16]" "--layout-file --load: F32 and F16 converted to bf16"
# A layout file of the second shard's tensors only, loaded from the index of
# both shards: one file read (the table: 10 + 10 + 2 rows, 60 + 80 + 64 B).
grep -E '^(model\.layers\.1\.|lm_head\.)' "$T/own.shapes" >"$T/sh2.shapes"
for io in posix mpiio mpiio-coll; do
  for np in 2 4; do
    "$DBUF" plan --shapes "$T/sh2.shapes" --dp "$np" --format json -o "$T/sh2.json"
    mpi "$np" --layout-file "$T/sh2.json" --safetensors "$IDX" --load --io "$io" -q --report "$T/lf2.json"
    jq_is "$T/lf2.json" '[.verdict, .load.verdict, .load.files, .load.tensors, .load.rows, .load.bytes]' \
      '["PASS", "PASS", 1, 3, 22, 204]' "--layout-file of one shard's tensors, np $np --io $io: 1 file read"
  done
done
# A version-2 layout file that lists a tensor in two buffers (a trainer's
# buffers a = {attn} and b = {attn, mlp}, each a valid layout): a problem
# naming it and both buffers, verdict FAIL and nothing read (before, the
# tensor's rows were read twice and the proof said PASS).
grep -F model.layers.1.attn.weight "$T/own.shapes" >"$T/a.shapes"
grep -F model.layers.1. "$T/own.shapes" >"$T/b.shapes"
"$DBUF" plan --shapes "$T/a.shapes" --dp 2 --layout unpadded --format json -o "$T/a.json"
"$DBUF" plan --shapes "$T/b.shapes" --dp 2 --layout unpadded --format json -o "$T/b.json"
jq -s '{format: .[0].format, version: 2, buffers: [
         (.[0] | del(.format, .version) + {unit: "a", dtype: "bf16"}),
         (.[1] | del(.format, .version) + {unit: "b", dtype: "bf16"})]}' \
  "$T/a.json" "$T/b.json" >"$T/dup.json"
rm -f "$T/dup-report.json"
mpi 2 --layout-file "$T/dup.json" --safetensors "$IDX" --load --report "$T/dup-report.json"
want="duplicate: tensor model.layers.1.attn.weight is in buffer a/bf16 and in buffer b/bf16 (a tensor belongs to one buffer)"
if [ "$CODE" -eq 1 ] && grep -qxF "$T/dup.json: $want" "$T/stdout" && ! grep -q PASS "$T/stdout"; then
  pass "tensor in two buffers: FAIL naming it and both buffers"
else
  fail "tensor in two buffers: exit $CODE, stdout $(cat "$T/stdout")"
fi
jq_is "$T/dup-report.json" '[.verdict, .problem_count, .problems[0], .load]' \
  "[\"FAIL\", 1, \"$want\", null]" "tensor in two buffers: the report's problem, nothing loaded"
# A file readable on one rank only: the same relative name, another working
# folder per rank (a node-local copy missing on the second node, or short).
mkdir -p "$T/w0" "$T/w1" "$T/w2"
cp "$ONE" "$T/w0/m.safetensors"
cp "$ONE" "$T/w2/m.safetensors"
truncate -s -3 "$T/w2/m.safetensors"
for case in "w1 cannot open" "w2 truncated file"; do
  set -- $case
  timed mpirun_in "$MPI_TIMEOUT" -np 1 -wdir "$T/w0" "$DBUF" --safetensors m.safetensors --load -q : \
    -np 1 -wdir "$T/$1" "$DBUF" --safetensors m.safetensors --load -q >"$T/stdout" 2>"$T/stderr.all"
  grep '^dbuf-shard: ' "$T/stderr.all" >"$T/stderr"
  if [ "$CODE" -eq 2 ] && [ "$(wc -l <"$T/stderr")" -eq 1 ] &&
     grep -q "^dbuf-shard: rank 1: m.safetensors: .*$2" "$T/stderr" && ! grep -q PASS "$T/stdout"; then
    pass "file $2 on rank 1 only: one line naming rank 1 and the file"
  else
    fail "file $2 on rank 1 only: exit $CODE, $(cat "$T/stderr")"
  fi
done

# Node-local copies that differ (tests/mpi/fake-rsh.sh makes the nodes): every
# rank's rows must be re-read by a rank of another node, whatever the ranks
# per node; re-read on the same node, from the same copy, a copy that differs
# there passes.  The checkpoint: 16 tensors of 4 rows of 8 F32, unpadded, so
# at 5 ranks or fewer a rank holds 12 rows or more and the first rows of two
# ranks are never in one tensor.  For each spread of 3, 4 and 5 ranks over
# 2 or 3 nodes, each node's copy differs in one byte of the first row of the
# node's first rank: each of those rows must be named, one line a tensor,
# with a checker on another node.
mkdir -p "$T/nl/1" "$T/nl/2" "$T/nl/3"
python3 - "$T/nl/m.safetensors" <<'PY'
import json, struct, sys
h, blob = {}, b""
for i in range(16):
    b = bytes((i * 37 + k) % 64 for k in range(4 * 8 * 4))
    h["t%02d" % i] = {"dtype": "F32", "shape": [4, 8], "data_offsets": [len(blob), len(blob) + len(b)]}
    blob += b
hj = json.dumps(h).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hj)) + hj + blob)
PY
nl_args=(--safetensors m.safetensors --load --layout unpadded -q --report "$T/nl.json")
# on_nodes COUNT...: dbuf-shard on the nodes nodeA, nodeB, ... of COUNT ranks
# each, the ranks of the k-th node in $T/nl/k (its copy); sets CODE and SECS.
on_nodes() {
  local hosts="" ctx=() k=0 c names=(A B C)
  for c in "$@"; do
    [ $k -gt 0 ] && ctx+=(:)
    hosts+="${hosts:+,}node${names[$k]}:$c"
    k=$((k + 1))
    ctx+=(-np "$c" -wdir "$T/nl/$k" "$DBUF" "${nl_args[@]}")
  done
  timed timeout "$MPI_TIMEOUT" "$MPIRUN" --mca plm_rsh_agent "$HERE/fake-rsh.sh" --host "$hosts" \
    "${ctx[@]}" >"$T/stdout" 2>"$T/stderr.all"
}
# copies BAD COUNT...: the copy of each node (as on_nodes), that of node BAD
# (1-based; 0: of every node) with one byte changed in the first row of the
# node's first rank (found from the plan's rank offsets).  Prints the hosts
# of the ranks and, sorted, the problem lines wanted (the checker as "rank
# Y"), each with true.
copies() {
  local bad=$1 np=0 c
  shift
  for c in "$@"; do np=$((np + c)); done
  "$DBUF" plan --safetensors "$T/nl/m.safetensors" --layout unpadded --dp "$np" --format json \
    -o "$T/nl/plan.json" || fail "plan at dp $np"
  python3 - "$T/nl" "$bad" "$@" <<'PY'
import json, struct, sys
d, bad, counts = sys.argv[1], int(sys.argv[2]), [int(c) for c in sys.argv[3:]]
good = open(d + "/m.safetensors", "rb").read()
n = struct.unpack("<Q", good[:8])[0]
h = json.loads(good[8:8 + n])
plan = json.load(open(d + "/plan.json"))
hosts, lines, rank = [], [], 0
for k, c in enumerate(counts):
    copy = bytearray(good)
    if bad in (0, k + 1):
        at = plan["rank_offsets"][rank]
        t = [x for x in plan["tensors"] if x["offset"] <= at < x["offset"] + 32][0]
        row = (at - t["offset"]) // 8
        copy[8 + n + h[t["name"]]["data_offsets"][0] + row * 32 + 5] ^= 0x40
        lines.append(["tensor %s row %d (rank %d) differs from the checkpoint as rank Y read it "
                      "(1 of its 4 rows differ)" % (t["name"], row, rank), True])
    open("%s/%d/m.safetensors" % (d, k + 1), "wb").write(bytes(copy))
    hosts += ["node" + "ABC"[k]] * c
    rank += c
print(json.dumps([hosts, sorted(lines)]))
PY
}
# The hosts of the ranks and, sorted, each problem line with its checker as
# "rank Y" and whether that checker is on another node than the holder.
# shellcheck disable=SC2016 # jq's own variables
nl_filter='[.ranks[].host] as $h | [$h, ([.load.problems[]
  | capture("\\(rank (?<x>[0-9]+)\\) differs from the checkpoint as rank (?<y>[0-9]+) read") as $c
  | [sub("as rank [0-9]+ read"; "as rank Y read"), $h[$c.x | tonumber] != $h[$c.y | tonumber]]]
  | sort)]'
# nl_fail WHAT BAD COUNT...: the copies (as copies BAD COUNT...), the run on
# those nodes: exit 1 within LIMIT, every changed row named.
nl_fail() {
  local what=$1 want
  shift
  want=$(copies "$@")
  shift
  on_nodes "$@"
  if [ "$CODE" -eq 1 ] && [ "$SECS" -le "$LIMIT" ]; then pass "$what: exit 1"; else
    fail "$what: exit $CODE after $SECS s: $(grep '^dbuf-shard: ' "$T/stderr.all")"; fi
  jq_is "$T/nl.json" "$nl_filter" "$want" "$what: named, checked on another node"
}
cp "$T/nl/m.safetensors" "$T/nl/1/"
cp "$T/nl/m.safetensors" "$T/nl/2/"
on_nodes 1 2
expect_code 0 "the same copies on nodes of 1 and 2 ranks: exit 0"
expect_out_has "Load check: PASS: 16 tensors, 64 rows, 2.00 KiB checked against the checkpoint by a rank of another node" \
  "the same copies on nodes of 1 and 2 ranks: checked on another node"
# Only the larger node's copy differs: checked by each other, its ranks
# would find nothing.
nl_fail "nodes of 1 and 2 ranks, the larger node's copy differing" 2 1 2
for split in "1 2" "2 1" "1 3" "2 2" "3 1" "1 1 3" "1 3 1" "3 1 1" "2 2 1" "1 2 2" "2 1 2"; do
  # shellcheck disable=SC2086
  nl_fail "nodes of $split ranks, each copy differing in its first rank's row" 0 $split
done

finish
