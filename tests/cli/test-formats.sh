#!/bin/bash
# CLI tests of `dbuf-shard plan --format`: every output format with its
# expected text on the seed example, byte options, -o written atomically,
# no output file on errors, and deepseek-v3 at 1024 ranks.
set -u
. "$(dirname "$0")/lib.sh"

printf 'P0 2x6\nP1 4x4\nP2 4x4\nP3 1x2\nP4 1x6\n' >"$T/seed"

# ---- summary is the default ----
run plan --shapes "$T/seed" --dp 5
expect_code 0 "summary (default)"
expect_out "layout:          padded (RowAtomic), dp 5, chunk 12 elements
tensors:         5 ($T/seed), dtype bf16, 2 bytes per element
logical size:    52 elements, 104 bytes
buffer size:     60 elements, 120 bytes
padding:         8 elements (13.33% of the buffer), 2 in gaps, 6 at the end
per rank:        min 12 (rank 0), max 12 (rank 0), mean 12 elements
per rank bytes:  min 24, max 24, mean 24
split tensors:   2 of 5 held by more than one rank
largest tensor:  P1 4x4, 16 elements, 32 bytes, on ranks 1-2" "summary text"
cp "$T/stdout" "$T/default"
run plan --shapes "$T/seed" --dp 5 --format summary
if cmp -s "$T/stdout" "$T/default"; then pass "--format summary = default"; else fail "--format summary differs from the default"; fi

# --dtype and --align-bytes in the byte figures.
run plan --shapes "$T/seed" --dp 5 --dtype fp32 --align-bytes 4096
expect_code 0 "summary fp32 aligned"
expect_out_has "tensors:         5 ($T/seed), dtype fp32, 4 bytes per element" "dtype line"
expect_out_has "logical size:    52 elements, 208 bytes" "fp32 logical bytes"
expect_out_has "aligned:         segments rounded up to 4,096 bytes (4.00 KiB): max 4,096 bytes (4.00 KiB) per rank, 20,480 bytes (20.00 KiB) in all" "aligned line"
run plan --shapes "$T/seed" --dp 2 --layout tensor
expect_out_has "load balance:    max/mean 1.0769 (rank 0)" "tensor load balance"
run plan --shapes "$T/seed" --dp 2 --layout unpadded --dtype fp8
expect_out_has "per rank bytes:  min 24, max 28, mean 26" "fp8 bytes"
run plan --model llama-3.1-8b --dp 8
expect_out_has "tensors:         291 (model llama-3.1-8b), dtype bf16, 2 bytes per element" "model summary source"
expect_out_has "logical size:    8,030,261,248 elements, 16,060,522,496 bytes (14.96 GiB)" "model summary size"

# ---- table ----
run plan --shapes "$T/seed" --dp 5 --format table
expect_code 0 "table"
expect_out "rank  offset  elements  bytes  padding  tensors  first     last
   0       0        12     24        0        1  P0 row 0  P0 row 1
   1      12        12     24        0        1  P1 row 0  P1 row 2
   2      24        12     24        2        3  P1 row 3  P2 row 0
   3      36        12     24        0        1  P2 row 1  P2 row 3
   4      48        12     24        6        1  P4 row 0  P4 row 0" "table text"
run plan --shapes "$T/seed" --dp 5 --format table --align-bytes 64
expect_out_has "rank  offset  elements  bytes  aligned  padding" "table aligned column"
expect_out_has "   4      48        12     24       64        6" "table aligned value"

# ---- diagram: the seed document's pictures ----
run plan --shapes "$T/seed" --dp 5 --format diagram
expect_code 0 "diagram"
expect_out "rank 0 [ 0, 12): | P0 row 0              | P0 row 1               |
rank 1 [12, 24): | P1 row 0      | P1 row 1      | P1 row 2       |
rank 2 [24, 36): | P1 row 3      | P3    | gap   | P2 row 0       |
rank 3 [36, 48): | P2 row 1      | P2 row 2      | P2 row 3       |
rank 4 [48, 60): | P4                    | pad                    |" "diagram of the padded seed"
printf 'P0 2x6\nP1 4x4\nP2 1x2\n' >"$T/seed2"
run plan --shapes "$T/seed2" --dp 2 --layout unpadded --format diagram
expect_out "rank 0 [ 0, 16): | P0 row 0              | P0 row 1              | P1 row 0       |
rank 1 [16, 30): | P1 row 1      | P1 row 2      | P1 row 3      | P2     |" "diagram of the unpadded seed"
run plan --model llama-3.2-1b --dp 4 --format diagram
expect_code 0 "condensed diagram"
expect_out_has "# rank [start, end) elements: first piece | +N tensors | last piece | padding" "condensed header"
expect_out_has "rank 0 [         0,  308961280)  308961280: model.embed_tokens.weight | +6 tensors | model.layers.0.mlp.down_proj.weight rows 0-274" "condensed rank 0"
expect_out_has "rank 3 [ 926883840, 1235845120)  308961280: model.layers.10.mlp.down_proj.weight rows 1465-2047 | +67 tensors | model.norm.weight | padding 30720" "condensed rank 3"
[ "$(wc -l <"$T/stdout")" -eq 5 ] && pass "condensed: header + 4 ranks" || fail "condensed: $(wc -l <"$T/stdout") lines"

# ---- csv ----
run plan --shapes "$T/seed" --dp 5 --format csv
expect_code 0 "csv"
expect_out "rank,tensor,name,first_row,rows,elements,offset,global_offset
0,0,P0,0,2,12,0,0
1,1,P1,0,3,12,0,12
2,1,P1,3,1,4,0,24
2,3,P3,0,1,2,4,28
2,2,P2,0,1,4,8,32
3,2,P2,1,3,12,0,36
4,4,P4,0,1,6,0,48" "csv text"
run plan --model tinyllama-1.1b --dp 16 --format csv
sum=$(awk -F, 'NR > 1 { s += $6 } END { print s }' "$T/stdout")
[ "$sum" = 1100048384 ] && pass "csv elements sum to the model" || fail "csv sum $sum"

# ---- json keeps the schema; --pieces only there ----
run plan --shapes "$T/seed" --dp 5 --format json --pieces
expect_code 0 "json"
expect_json '[.format, .version, .layout, .dp_size, .chunk_size, .size, .logical_size]' \
  '["dbuf-shard-layout", 1, "padded", 5, 12, 60, 52]' "json header"
expect_json '[.ranks[] | .pieces | length]' '[1,1,3,1,1]' "json pieces"
run plan --shapes "$T/seed" --dp 5 --pieces
expect_code 2 "--pieces without json"
expect_err "dbuf-shard: --pieces applies to --format json only" "--pieces message"

# ---- svg ----
run plan --shapes "$T/seed" --dp 5 --format svg
expect_code 0 "svg"
head -c 4 "$T/stdout" | grep -q '^<svg' && pass "svg starts with <svg" || fail "svg start"
[ "$(grep -c '<rect class="band"' "$T/stdout")" -eq 5 ] && pass "svg: 5 bands" || fail "svg bands"
tail -1 "$T/stdout" | grep -qx '</svg>' && pass "svg ends with </svg>" || fail "svg end"
if command -v xmllint >/dev/null; then
  xmllint --noout "$T/stdout" 2>"$T/xml.err" && pass "svg is well-formed XML (xmllint)" || fail "xmllint: $(cat "$T/xml.err")"
fi
if command -v rsvg-convert >/dev/null; then
  rsvg-convert "$T/stdout" -o "$T/seed.png" 2>"$T/rsvg.err" &&
    [ "$(head -c 4 "$T/seed.png" | od -An -c | tr -d ' ')" = '211PNG' ] &&
    pass "svg renders (rsvg-convert)" || fail "rsvg-convert: $(cat "$T/rsvg.err")"
fi

# ---- -o: atomic, same bytes as stdout, nothing on errors ----
for f in summary table diagram json csv svg; do
  run plan --model llama-3.2-1b --dp 8 --format $f
  cp "$T/stdout" "$T/want.$f"
  rm -f "$T/out.$f"
  run plan --model llama-3.2-1b --dp 8 --format $f -o "$T/out.$f"
  if [ "$CODE" -eq 0 ] && [ ! -s "$T/stdout" ] && cmp -s "$T/out.$f" "$T/want.$f"; then
    pass "-o $f equals stdout"
  else
    fail "-o $f: exit $CODE"
  fi
done
ls "$T" | grep -q '\.tmp\.' && fail "temporary files left behind" || pass "no temporary files"
echo "keep me" >"$T/existing"
run plan --shapes "$T/nope" --format svg -o "$T/existing"
expect_code 2 "input error with -o"
[ "$(cat "$T/existing")" = "keep me" ] && pass "existing output kept on error" || fail "existing output clobbered"
rm -f "$T/fresh"
run plan --shapes "$T/seed" --dp 5 --block-size 3 --format table -o "$T/fresh"
expect_code 2 "layout error with -o"
[ ! -e "$T/fresh" ] && pass "no output file on a layout error" || fail "output file written on error"
run plan --shapes "$T/seed" --layout unpadded --format table -o "$T/no/such/dir/out.txt"
expect_code 2 "unwritable output"
expect_err "dbuf-shard: -o $T/no/such/dir/out.txt: cannot create: No such file or directory" "unwritable output message"

# ---- big: deepseek-v3 at 1024 ranks ----
for f in summary table diagram csv svg; do
  start=$(date +%s%N)
  run plan --model deepseek-v3 --dp 1024 --format $f -o "$T/ds.$f"
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [ "$CODE" -eq 0 ] && [ "$ms" -lt $((3000 * TIME_SCALE)) ]; then
    pass "deepseek-v3 dp1024 $f in $ms ms"
  else
    fail "deepseek-v3 dp1024 $f: exit $CODE in $ms ms: $ERR"
  fi
done
[ "$(grep -c '<rect class="band"' "$T/ds.svg")" -eq 64 ] && pass "deepseek svg: 64 bands of 16 ranks" || fail "deepseek svg bands"
if command -v xmllint >/dev/null; then
  xmllint --noout "$T/ds.svg" 2>"$T/xml.err" && pass "deepseek svg is well-formed XML" || fail "xmllint: $(head -3 "$T/xml.err")"
fi
size=$(wc -c <"$T/ds.svg")
[ "$size" -lt 4000000 ] && pass "deepseek svg is $size bytes" || fail "deepseek svg is $size bytes"
[ "$(wc -l <"$T/ds.table")" -eq 1025 ] && pass "deepseek table: 1025 lines" || fail "deepseek table lines"
grep -q '^split tensors:   988 of 45,395 held by more than one rank$' "$T/ds.summary" &&
  pass "deepseek split tensors" || fail "deepseek summary: $(cat "$T/ds.summary")"

# ---- errors ----
run plan --shapes "$T/seed" --format xml
expect_code 2 "unknown format"
expect_err "dbuf-shard: --format: 'xml' is not a known format (summary, table, diagram, json, csv, svg)" "unknown format message"
run plan --shapes "$T/seed" --dtype fp7
expect_code 2 "unknown dtype"
expect_err "dbuf-shard: --dtype: unknown type 'fp7' (bf16, fp16, fp32, fp64, fp8-e4m3 (fp8), fp8-e5m2, fp8-e8m0, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool, c64)" "unknown dtype message"
run plan --shapes "$T/seed" --align-bytes 0
expect_code 2 "align 0"
expect_err "dbuf-shard: --align-bytes: 0 is out of range [1, 9223372036854775807]" "align 0 message"
printf 'a 4611686018427387904\n' >"$T/huge"
run plan --shapes "$T/huge" --dtype fp32
expect_code 2 "byte overflow"
expect_err "dbuf-shard: $T/huge: plan: buffer all/fp32: 4611686018427387904 elements of 4 bytes overflow 64 bits" "byte overflow message"

finish
