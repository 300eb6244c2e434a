#!/bin/bash
# The exporters of scripts/export/ (Python 3, standard library): their unit
# tests (tests/export, expected layouts worked out by hand), then their
# layouts through `dbuf-shard verify`: Megatron-FSDP's and FSDP2's pass;
# FSDP1's flat parameter of llama-3.2-1b at W = 8 cuts rows, and verify must
# name exactly the rows that an independent computation (awk, below) finds.
set -u
export PYTHONDONTWRITEBYTECODE=1 # never write into the source tree (read-only in distcheck)
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }
. "$(dirname "$0")/lib.sh"
SRC=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
EXPORT="$SRC/scripts/export/dbuf_export.py"

if PYTHONPATH="$SRC/scripts/export" python3 -m unittest discover -s "$SRC/tests/export" \
     -p 'test_*.py' >"$T/unittest" 2>&1; then
  pass "exporter unit tests ($(grep -o 'Ran [0-9]* tests' "$T/unittest"))"
else
  fail "exporter unit tests:"
  cat "$T/unittest"
fi

# FSDP1, one unit holding the whole model, 8 ranks.
SHAPES="$DATA/zoo/llama-3.2-1b.shapes"
python3 "$EXPORT" fsdp1 "$SHAPES" 8 >"$T/fsdp1.json" || fail "fsdp1 export"
run verify "$T/fsdp1.json" --shapes "$SHAPES"
expect_code 1 "fsdp1 llama-3.2-1b W=8: verify fails"
# The rows FSDP1 cuts, by hand: flat offsets in file order, total n,
# boundaries k n / 8 (n is a multiple of 8 here), a cut wherever a boundary
# falls inside a row of the tensor holding it.
awk -v W=8 -v F="$T/fsdp1.json" '
  { split($2, d, "x"); row = 1; for (i = 2; i in d; i++) row *= d[i];
    name[NR] = $1; off[NR] = n; rowel[NR] = row; n += d[1] * row }
  END { if (n % W) { print "n not a multiple of W"; exit 1 }
        t = 1
        for (k = 1; k < W; k++) {
          b = k * n / W
          while (off[t + 1] <= b && t < NR) t++
          if ((b - off[t]) % rowel[t])
            printf "%s: cut: rank %d: boundary %d cuts tensor %s inside row %d\n", F, k, b, name[t], int((b - off[t]) / rowel[t])
        } }' "$SHAPES" >"$T/want"
sed 's/ (element .*//' "$T/stdout" | grep ': cut: ' >"$T/got"
if [ -s "$T/want" ] && cmp -s "$T/want" "$T/got"; then
  pass "fsdp1 llama-3.2-1b W=8: verify names the $(wc -l <"$T/want") cut rows"
else
  fail "fsdp1 cut rows differ:"
  diff "$T/want" "$T/got"
fi
expect_out_has "$T/fsdp1.json: FAILED: $(wc -l <"$T/want") problems" "fsdp1: nothing but the cuts"

# FSDP2: every parameter of the same model on 8 ranks is a valid layout.
bad=0
for name in model.embed_tokens.weight model.layers.0.self_attn.k_proj.weight model.norm.weight; do
  python3 "$EXPORT" fsdp2 "$SHAPES" 8 "$name" >"$T/fsdp2.json"
  run verify "$T/fsdp2.json"
  [ "$CODE" -eq 0 ] || { bad=1; fail "fsdp2 $name: $(cat "$T/stdout")"; }
done
[ $bad -eq 0 ] && pass "fsdp2: per-parameter dim-0 chunks never cut a row"

# Megatron-FSDP's documented row-atomic example verifies clean.
PYTHONPATH="$SRC/scripts/export" python3 -c '
import dbuf_export as dx, sys
sys.stdout.write(dx.dumps(dx.from_global_layout(["P0", "P1", "P2", "P3", "P4"],
    [(2, 6), (4, 4), (4, 4), (1, 2), (1, 6)], [0, 12, 32, 28, 48], [0, 12, 24, 36, 48], 60)))' \
  >"$T/mfsdp.json"
run verify "$T/mfsdp.json"
expect_code 0 "megatron-fsdp GlobalLayout example: verify OK"

# Bad usage of the command line: exit 2.
python3 "$EXPORT" fsdp1 "$T/none" 8 2>"$T/stderr"
[ $? -eq 2 ] && grep -q "dbuf_export: .*none" "$T/stderr" && pass "exporter: missing file exit 2" ||
  fail "exporter: missing file: $(cat "$T/stderr")"

finish
