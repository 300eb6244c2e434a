#!/bin/bash
# Rank 0's progress lines of a run: the load's (bytes of the whole job, GB/s,
# time left) and the pattern fill's, each line's figures checked, and none
# with -q.  DBUF_PROGRESS_ALL=1 (tests only) prints at every step of the
# loader instead of once a second, so that a small checkpoint shows them.
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }

# Four shards of one F32 tensor each, 1024x256 (1 MiB): 4 MiB in all, so
# every rank of np 2 reads two files, one read (one step) each at least.
python3 - "$T" <<'PY'
import json, struct, sys
d, wm = sys.argv[1], {}
for k in range(4):
    name, f = "layers.%d.w.weight" % k, "model-%05d-of-00004.safetensors" % (k + 1)
    h = json.dumps({name: {"dtype": "F32", "shape": [1024, 256], "data_offsets": [0, 1 << 20]}}).encode()
    with open("%s/%s" % (d, f), "wb") as o:
        o.write(struct.pack("<Q", len(h)) + h + bytes(1 << 20))
    wm[name] = f
json.dump({"metadata": {}, "weight_map": wm}, open(d + "/model.safetensors.index.json", "w"))
PY
IDX=$T/model.safetensors.index.json

DBUF_PROGRESS_ALL=1 mpi 2 --safetensors "$IDX" --load
expect_code 0 "load with progress: exit 0"
grep '^dbuf-shard: rank 0: [0-9]*% (' "$T/stderr.all" >"$T/progress"
n=$(wc -l <"$T/progress")
if [ "$n" -ge 2 ]; then pass "load progress: $n lines"; else fail "load progress: $n lines: $(cat "$T/stderr.all")"; fi
bad=$(grep -cvE '^dbuf-shard: rank 0: [0-9]+% \([0-9]+ of 4 MiB loaded, [0-9]+\.[0-9]{2} GB/s, ETA [0-9]+ s\)$' "$T/progress")
if [ "$bad" -eq 0 ]; then pass "load progress: every line names percent, MiB of the job's 4, GB/s and ETA"; else fail "load progress: $bad malformed: $(head -3 "$T/progress")"; fi
# The percentages never go back and stay within 100; the MiB agree with them.
if awk '{ p = $4 + 0; m = substr($5, 2) + 0
          if (p < last || p > 100 || m > 4 || (m * 25 - p > 13 || p - m * 25 > 13)) bad = 1; last = p }
        END { exit bad }' "$T/progress"; then
  pass "load progress: percent rising, at most 100, matching the MiB"
else
  fail "load progress: $(cat "$T/progress")"
fi

DBUF_PROGRESS_ALL=1 mpi 2 --safetensors "$IDX" --load -q
expect_code 0 "load -q: exit 0"
if grep -q '^dbuf-shard: rank 0: [0-9]*% (' "$T/stderr.all"; then fail "load -q: progress printed"; else pass "load -q: no progress"; fi

# The pattern fill (no --load) reports every 64 MiB of rank 0's part: one
# bf16 tensor of 131072x1024 (256 MiB) on 2 ranks is 128 MiB each, so one
# line at 64 of 128 MiB (none at the end).
printf 'w 131072x1024\n' >"$T/fill.shapes"
DBUF_PROGRESS_ALL=1 mpi 2 --shapes "$T/fill.shapes" --force
expect_code 0 "fill with progress: exit 0"
grep '^dbuf-shard: rank 0: [0-9]*% (' "$T/stderr.all" >"$T/progress"
if [ "$(cat "$T/progress")" = "dbuf-shard: rank 0: 50% (64 of 128 MiB)" ]; then
  pass "fill progress: one line at 64 of rank 0's 128 MiB"
else
  fail "fill progress: $(cat "$T/stderr.all")"
fi

finish
