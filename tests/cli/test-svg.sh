#!/bin/bash
# CLI tests of `plan --format svg`: every zoo model at dp 8, 64 and 1024 is
# well-formed XML (python3 xml.etree) and renders with rsvg-convert to a PNG
# that is not blank (decoded here with zlib: several colors, a good share of
# pixels not white); bands per rank, per node and per group of ranks; the
# --ranks zoom and its errors; MoE roles in the legend, each in its own
# color; the padding total of the legend against the layout JSON.
# Skips (77) without rsvg-convert or python3.
set -u
. "$(dirname "$0")/lib.sh"
command -v rsvg-convert >/dev/null || { echo "SKIP: rsvg-convert is missing (librsvg2-bin)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is missing"; exit 77; }
ZOO=$DATA/zoo

# check.py FILE...: one line per file, "ok <what>" or "bad <what>: <why>".
# An .svg must parse; a .png is decoded (8-bit RGB/RGBA, the filters of the
# PNG spec) and must hold at least 3 colors and 10% of pixels not white.
cat >"$T/check.py" <<'PY'
import struct, sys, zlib
import xml.etree.ElementTree as ET

def png_pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, head = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = head
    if depth != 8 or ctype not in (2, 6) or interlace != 0:
        raise ValueError("unsupported PNG: depth %d, color type %d" % (depth, ctype))
    bpp = 4 if ctype == 6 else 3
    raw, stride = zlib.decompress(b"".join(idat)), w * bpp
    prev, rows = bytearray(stride), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows

for path in sys.argv[1:]:
    try:
        if path.endswith(".svg"):
            ET.parse(path)
            print("ok %s parses" % path)
            continue
        w, h, bpp, rows = png_pixels(path)
        colors, inked = set(), 0
        for line in rows:
            for x in range(0, len(line), bpp):
                px = line[x:x + 3]
                colors.add(px)
                inked += px != b"\xff\xff\xff"
        share = inked / (w * h)
        if len(colors) >= 3 and share >= 0.10:
            print("ok %s: %dx%d, %d colors, %.0f%% inked" % (path, w, h, len(colors), 100 * share))
        else:
            print("bad %s: %dx%d, %d colors, %.1f%% inked" % (path, w, h, len(colors), 100 * share))
    except Exception as e:
        print("bad %s: %s" % (path, e))
PY
# checked FILE...: pass/fail per line of check.py.
checked() {
  local line
  while IFS= read -r line; do
    case $line in ok\ *) pass "${line#ok }" ;; *) fail "${line#bad }" ;; esac
  done < <(python3 "$T/check.py" "$@")
}
bands() { grep -c '<rect class="band"' "$1"; }

# The checker itself: a blank picture and one of two colors fail it.
printf '<svg xmlns="http://www.w3.org/2000/svg" width="80" height="40"><rect width="80" height="40" fill="#ffffff"/></svg>\n' >"$T/blank.svg"
printf '<svg xmlns="http://www.w3.org/2000/svg" width="80" height="40"><rect width="80" height="40" fill="#4e79a7"/></svg>\n' >"$T/flat.svg"
printf '<svg xmlns="http://www.w3.org/2000/svg"><rect></svg>\n' >"$T/broken.svg"
rsvg-convert "$T/blank.svg" -o "$T/blank.png" && rsvg-convert "$T/flat.svg" -o "$T/flat.png"
[ "$(python3 "$T/check.py" "$T/blank.png" "$T/flat.png" "$T/broken.svg" | grep -c '^bad ')" -eq 3 ] &&
  pass "the checker fails a blank PNG, a flat PNG and broken XML" || fail "the checker passes bad pictures"

# ---- every zoo model at dp 8, 64 and 1024 renders, not blank ----
start=$(date +%s%N)
files=()
for shapes in "$ZOO"/*.shapes; do
  m=$(basename "$shapes" .shapes)
  for dp in 8 64 1024; do
    run plan --shapes "$shapes" --dp "$dp" --format svg -o "$T/$m-$dp.svg"
    if [ "$CODE" -ne 0 ]; then fail "$m dp $dp: exit $CODE: $ERR"; continue; fi
    # A quarter of the size keeps the pure-Python decoding fast.
    if rsvg-convert -z 0.25 "$T/$m-$dp.svg" -o "$T/$m-$dp.png" 2>"$T/rsvg.err"; then
      files+=("$T/$m-$dp.svg" "$T/$m-$dp.png")
    else
      fail "$m dp $dp: rsvg-convert: $(head -1 "$T/rsvg.err")"
    fi
  done
done
checked "${files[@]}"
echo "zoo renders in $(( ($(date +%s%N) - start) / 1000000 )) ms"
[ "$(bands "$T/llama-3.1-8b-64.svg")" -eq 64 ] && pass "dp 64: a band per rank" || fail "dp 64 bands"
[ "$(bands "$T/llama-3.1-8b-1024.svg")" -eq 64 ] && pass "dp 1024: 64 bands of 16 ranks" ||
  fail "dp 1024 bands: $(bands "$T/llama-3.1-8b-1024.svg")"
grep -q '<title>ranks 1008-1023 \[' "$T/llama-3.1-8b-1024.svg" && pass "dp 1024: the last band holds ranks 1008-1023" ||
  fail "dp 1024: no band of ranks 1008-1023"

# ---- bands per rank, per group of ranks, per node ----
L1B="$ZOO/llama-3.2-1b.shapes"
# band_count ARGS... WANT what
band_count() {
  local want=${*: -2:1} what=${*: -1}
  run plan --shapes "$L1B" --format svg "${@:1:$#-2}"
  if [ "$CODE" -eq 0 ] && [ "$(bands "$T/stdout")" -eq "$want" ]; then pass "$what"; else
    fail "$what: exit $CODE, $(bands "$T/stdout") bands, want $want: $ERR"
  fi
}
band_count --dp 255 255 "dp 255: a band per rank"
band_count --dp 256 64 "dp 256: 64 bands of 4 ranks"
band_count --dp 1000 63 "dp 1000: 63 bands of 16 ranks (the last of 8)"
band_count --dp 1024 --node-size 8 128 "dp 1024, nodes of 8: a band per node"
expect_out_has "One band per node of 8 ranks" "nodes of 8: subtitle"
expect_out_has "node boundary cutting a tensor" "nodes of 8: legend names node boundaries"
band_count --dp 1024 --node-size 4 128 "dp 1024, nodes of 4: a band per 2 nodes"
expect_out_has "One band per 2 nodes of 4 ranks" "nodes of 4: subtitle"
band_count --dp 300 --node-size 6 50 "dp 300, nodes of 6: a band per node"
band_count --dp 64 --node-size 8 64 "dp 64 with nodes: still a band per rank"

# ---- --ranks A-B ----
band_count --dp 1024 --ranks 100-131 32 "--ranks 100-131: 32 bands"
expect_out_has "dp 1024, ranks 100-131" "--ranks: title"
grep -q '<title>rank 100 \[' "$T/stdout" && grep -q '<title>rank 131 \[' "$T/stdout" &&
  ! grep -q '<title>rank 99 \[' "$T/stdout" && ! grep -q '<title>rank 132 \[' "$T/stdout" &&
  pass "--ranks: bands of ranks 100..131 only" || fail "--ranks: wrong bands"
band_count --dp 1024 --ranks 7-7 1 "--ranks 7-7: one band"
band_count --dp 1024 --ranks 0-299 38 "--ranks 0-299: 38 bands of 8 ranks"
band_count --dp 1024 --ranks 1020-1023 4 "--ranks 1020-1023: the last ranks"
for r in x 5 5- -5 3-2 1-1024 1-2-3 +1-2 "1- 2" 99999999999999999999-1; do
  bad "--ranks '$r'" "$(case $r in
    3-2) echo "dbuf-shard: --ranks: 3-2 ends before it starts" ;;
    1-1024) echo "dbuf-shard: --ranks: 1-1024 is outside the ranks 0-1023 of --dp 1024" ;;
    *) echo "dbuf-shard: --ranks: '$r' is not a range A-B of ranks" ;;
  esac)" plan --shapes "$L1B" --dp 1024 --format svg --ranks "$r"
done
bad "--ranks with a table" "dbuf-shard: --ranks applies to --format svg only" \
  plan --shapes "$L1B" --dp 8 --format table --ranks 1-2
bad "--ranks with json" "dbuf-shard: --ranks applies to --format svg only" \
  plan --shapes "$L1B" --dp 8 --format json --ranks 1-2

# ---- MoE roles: legend entries, each its own color ----
# roles FILE: the legend's class entries as "fill name" lines.
roles() {
  python3 - "$1" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
for fill, name in re.findall(r'<rect x="\d+" y="\d+" width="(?:7|14)" height="12" fill="(#[0-9a-f]{6})"[^>]*/>'
                             r'(?:<rect[^>]*/>)?<text x="\d+" y="\d+">([^<(]+) \(', s):
    print(fill, name)
PY
}
roles "$T/deepseek-v3-64.svg" >"$T/ds.roles"
for r in "routed experts" "shared experts" "dense MLP" "attention" "router" \
  "embeddings and output head" "norms"; do
  grep -q " $r\$" "$T/ds.roles" && pass "deepseek-v3 legend: $r" || fail "deepseek-v3 legend lacks $r: $(cat "$T/ds.roles")"
done
[ "$(cut -d' ' -f1 "$T/ds.roles" | sort -u | wc -l)" -eq "$(wc -l <"$T/ds.roles")" ] &&
  pass "deepseek-v3: every role its own color" || fail "deepseek-v3: colors shared: $(cat "$T/ds.roles")"
roles "$T/mixtral-8x7b-8.svg" >"$T/mx.roles"
grep -q " routed experts$" "$T/mx.roles" && ! grep -q " shared experts$" "$T/mx.roles" &&
  ! grep -q " dense MLP$" "$T/mx.roles" && pass "mixtral: routed experts, no shared or dense MLP" ||
  fail "mixtral roles: $(cat "$T/mx.roles")"
# The same role has the same color in both models.
[ "$(grep ' routed experts$' "$T/mx.roles" | cut -d' ' -f1)" = "$(grep ' routed experts$' "$T/ds.roles" | cut -d' ' -f1)" ] &&
  pass "routed experts: one color across models" || fail "routed experts colors differ"
roles "$T/llama-3.1-8b-8.svg" >"$T/ll.roles"
! grep -q "experts" "$T/ll.roles" && grep -q " mlp.gate_proj$" "$T/ll.roles" &&
  pass "llama (dense): tensor classes, no roles" || fail "llama roles: $(cat "$T/ll.roles")"
run plan --model deepseek-v3 --naming megatron --dp 8 --format svg
roles "$T/stdout" >"$T/mg.roles"
grep -q " routed experts$" "$T/mg.roles" && grep -q " shared experts$" "$T/mg.roles" &&
  grep -q " attention$" "$T/mg.roles" && grep -q " norms$" "$T/mg.roles" &&
  pass "deepseek-v3, Megatron names: roles" || fail "Megatron roles: $(cat "$T/mg.roles")"

# ---- padding: to scale, its total in the legend ----
# The worked example: padded, dp 3, chunk 45: a 3x5, b 7, c 2x9 take 40 of
# the 135 elements; rank 0 holds all three (40 of its 45).
printf 'a 3x5\nb 7\nc 2x9\n' >"$T/small"
run plan --shapes "$T/small" --dp 3 --format svg
expect_out_has "padding: 190 bytes, 70.37% of the buffer" "padding total: 95 elements of 2 bytes"
# To scale, 1092 px for 45 elements (x0 = 92, bands at y 104, 134, 164):
# rank 0's gap [18, 20) covers px 436.8 to 485.3 and its tail [42, 45)
# px 1019.2 to 1092; a pixel column goes to what holds most of it (436 and
# 485 stay tensor, 1019 is padding); ranks 1 and 2 are all padding.
expect_out_has '<path fill="url(#hatch)" d="M529 104h48v24h-48zM1111 104h73v24h-73zM92 134h1092v24h-1092zM92 164h1092v24h-1092z"/>' \
  "padding to scale: the gap, the tail, two empty ranks"
run plan --shapes "$T/small" --dp 3 --format svg --ranks 0-0 --dtype fp32
expect_out_has "padding: 20 bytes, 11.11% of ranks 0-0" "padding of rank 0: 5 elements of 4 bytes"
# A big figure: bytes exact and in binary units, against the layout JSON.
run plan --shapes "$ZOO/llama-3.1-70b.shapes" --dp 64 --format json
want=$(jq -r '(.size - .logical_size) * 2' "$T/stdout" | python3 -c '
import sys
v = int(sys.stdin.read())
u = max(i for i in range(7) if v >= 1024 ** i or i == 0)
print("padding: {:,} bytes".format(v) + (" ({:.2f} {})".format(v / 1024 ** u, ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"][u]) if u > 0 else ""))')
run plan --shapes "$ZOO/llama-3.1-70b.shapes" --dp 64 --format svg
expect_out_has "$want," "llama-3.1-70b dp 64: $want"
# A lone hole far below a pixel still shows: rank 1 of 2^20 elements ends
# in a hole of 64 (b's last 16383 rows follow its first row on rank 0),
# 0.07 of the 1092 px plot: a mark 2 px wide at the right edge (x 92 +
# 1090, band 1 at y 104 + 30), and nothing else hatched.
printf 'a 16383x64\nb 16384x64\n' >"$T/lone"
run plan --shapes "$T/lone" --dp 2 --layout padded --format svg
[ "$(grep 'fill="url(#hatch)" d=' "$T/stdout")" = '<path fill="url(#hatch)" d="M1182 134h2v24h-2z"/>' ] &&
  pass "lone hole: a 2 px mark at the end of rank 1" || fail "lone hole mark: $(grep 'hatch)" d=' "$T/stdout")"
expect_out_has "padding: 128 bytes, 0.00% of the buffer" "lone hole: 64 elements of padding"

finish
