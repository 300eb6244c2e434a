#!/bin/bash
# CLI tests of `dbuf-shard compare`: every column of every scheme on a model
# sharded by hand (tests/data/compare.shapes), the JSON keys, the options
# and the errors.
set -u
. "$(dirname "$0")/lib.sh"
M="$DATA/compare.shapes"

# a 6x4 (24), b 3x2 (6), c 5 (1-D), d 2x3 (6): 41 elements, dp 4, bf16,
# nodes of 2 ranks (the node boundary is rank 2).  In elements:
#
# padded: chunk LCM(4, 2, 1, 3) = 12.  a (>= chunk) at 0; the fragments go
#   to the tail by size, then id: b at 24, d at 30 (a multiple of its row,
#   3), c at 36; end 41 -> 48, segments of 12.  Boundaries 12 (a's row 3
#   start), 24 and 36 (tensor starts): no row cut; only a (ranks 0-1) split;
#   the node boundary 24 is a tensor start: no crossing.
#   bytes: 96 buffer, 14 padding (7/48 = 14.5833%), 24 a rank.
# compact: the padding lower bound ceil(41 / (12 x 4)) x 48 = 48, segments of
#   12; every tensor at a multiple of its own row, in id order: a 0, b 24,
#   c 30, d 36 (35 is no multiple of 3).  The same boundaries as padded: the
#   same figures.
# unpadded: ideal cuts 10.25, 20.5, 30.75 move to the nearest row boundary:
#   12 (a: 8 or 12), 20 (a: 20 or 24), 31 (c, rows of 1); segments 12, 8,
#   11, 10 (24 and 16 bytes at most and least).  a (ranks 0-2) and c (30-35,
#   ranks 2-3) split; the node boundary 20 is inside a: 1 crossing.
# tensor: LPT by elements, a -> 0, b -> 1, d -> 2, c -> 3 (24, 6, 6, 5):
#   48 and 10 bytes at most and least, nothing split.
# fsdp2: ceil(d0 / 4) rows a rank: a 2 rows of 4, b 1 of 2, c 2 of 1, d 1
#   of 3: 8 + 2 + 2 + 3 = 15 a rank (30 bytes), 60 in all (120 bytes),
#   padding 19 (38 bytes, 31.6667%).  Rows never cut; ranks with rows:
#   a ceil(6/2) = 3, b 3, c ceil(5/2) = 3, d 2: all 4 split, a b c reach
#   rank 2 (node 1): 3 crossing.
# fsdp1: one flat parameter of 41 padded to 44, 11 a rank (22 bytes, 6
#   bytes padding, 6.8182%).  Boundaries 11 and 22 fall inside a's rows 2
#   and 5, 33 inside c (rows of 1): 2 rows cut; a and c split; node
#   boundary 22 inside a: 1 crossing.
# zero3: partitions ceil(numel / 4): a 6, b 2, c 2, d 2 = 12 a rank (24
#   bytes), 48 in all (96 bytes), padding 0 + 2 + 3 + 2 = 7 (14 bytes).
#   a: boundaries 6, 12, 18 on rows of 4 cut rows 1 and 4; b: 2, 4 on rows
#   of 2 cut none; d: 2, 4 on rows of 3 cut rows 0 and 1: 4 rows cut.  Each
#   tensor has elements on ranks 0-2 or 0-3: 4 split, 4 crossing.
run compare --shapes "$M" --dp 4 --node-size 2
expect_code 0 "text: exit"
expect_out "compare: $M, 4 tensors, 41 elements, dtype bf16, dp 4, nodes of 2 ranks
scheme    buffer bytes  padding bytes   padding  max rank bytes  min rank bytes  rows cut  tensors split  crossing nodes
padded              96             14  14.5833%              24              24         0              1               0
compact             96             14  14.5833%              24              24         0              1               0
unpadded            82              0   0.0000%              24              16         0              2               1
tensor              82              0   0.0000%              48              10         0              0               0
fsdp2              120             38  31.6667%              30              30         0              4               3
fsdp1               88              6   6.8182%              22              22         2              2               1
zero3               96             14  14.5833%              24              24         4              4               4" \
  "text: every column by hand"

run compare --shapes "$M" --dp 4 --node-size 2 --format json
expect_code 0 "json: exit"
expect_json '[.[] | keys_unsorted] | unique' \
  '[["scheme", "buffer_bytes", "padding_bytes", "max_rank_bytes", "min_rank_bytes", "rows_cut", "tensors_split", "tensors_crossing_nodes"]]' \
  "json: exactly the keys, in order"
expect_json '[.[] | [.scheme, .buffer_bytes, .padding_bytes, .max_rank_bytes, .min_rank_bytes, .rows_cut, .tensors_split, .tensors_crossing_nodes]]' \
  '[["padded", 96, 14, 24, 24, 0, 1, 0], ["compact", 96, 14, 24, 24, 0, 1, 0],
    ["unpadded", 82, 0, 24, 16, 0, 2, 1],
    ["tensor", 82, 0, 48, 10, 0, 0, 0], ["fsdp2", 120, 38, 30, 30, 0, 4, 3],
    ["fsdp1", 88, 6, 22, 22, 2, 2, 1], ["zero3", 96, 14, 24, 24, 4, 4, 4]]' "json: the hand figures"

# --node-size builds padded, compact and unpadded node-aware (as plan does).
# tests/data/compare-nodes.shapes: 1-D a 5, b 4, c 2, d 1 (12 elements,
# rows of 1, chunk 1), dp 4, nodes of 2 ranks: node boundary at rank 2.
# padded/compact: lower bound 12, segments of 3, nodes [0, 6) and [6, 12).
#   First fit, largest first: a at 0 (node 0, 1 free), b at 6 (node 1, 2
#   free), c at 10 (node 1), d at 5 (node 0).  Rank cuts 3 (inside a), 6 (b's
#   start), 9 (inside b): a and b split, no row cut (rows of 1), node
#   boundary 6 is a tensor start: 0 crossing (without --node-size, back to
#   back, b [5, 9) would cross 6).  6 bytes a rank, no padding.
# unpadded: back to back a 0, b 5, c 9, d 11; ideal cuts 3, 6, 9; the node
#   cut 6 is inside b (4 <= node share 2 x 12 / 4 = 6), 1 from its start: it
#   moves to 5.  Segments 3, 2, 4, 3 (8 and 4 bytes); only a split; 0 crossing.
# tensor: LPT a -> 0, b -> 1, c -> 2, d -> 3: 10 and 2 bytes, nothing split.
# fsdp2: ceil(d0 / 4) rows: a 2, b 1, c 1, d 1 = 5 a rank (10 bytes), 20 in
#   all (40 bytes, padding 8 = 16 bytes, 40%); holders a 3, b 4, c 2, d 1:
#   3 split; a and b reach rank 2: 2 crossing.
# fsdp1: 12 flat, 3 a rank (6 bytes): boundaries 3 (in a), 6 (in b), 9 (c's
#   start): a and b split; node boundary 6 inside b: 1 crossing.
# zero3: partitions a 2, b 1, c 1, d 1: as fsdp2, 5 a rank, holders a 3,
#   b 4, c 2, d 1: 3 split, 2 crossing; rows of 1: no row cut.
run compare --shapes "$DATA/compare-nodes.shapes" --dp 4 --node-size 2 --format json
expect_code 0 "node-aware: exit"
expect_json '[.[] | [.scheme, .buffer_bytes, .padding_bytes, .max_rank_bytes, .min_rank_bytes, .rows_cut, .tensors_split, .tensors_crossing_nodes]]' \
  '[["padded", 24, 0, 6, 6, 0, 2, 0], ["compact", 24, 0, 6, 6, 0, 2, 0],
    ["unpadded", 24, 0, 8, 4, 0, 1, 0],
    ["tensor", 24, 0, 10, 2, 0, 0, 0], ["fsdp2", 40, 16, 10, 10, 0, 3, 2],
    ["fsdp1", 24, 0, 6, 6, 0, 2, 1], ["zero3", 40, 16, 10, 10, 0, 3, 2]]' \
  "node-aware: the hand figures"
# Without --node-size the same model's padded layout is back to back: b at 5
# is cut by rank 2's start 6, so a and b are split as above but unpadded
# keeps the ideal cut 6: a, b split (6 bytes a rank).
run compare --shapes "$DATA/compare-nodes.shapes" --dp 4 --schemes padded,unpadded --format json
expect_json '[.[] | [.scheme, .max_rank_bytes, .min_rank_bytes, .tensors_split, .tensors_crossing_nodes]]' \
  '[["padded", 6, 6, 2, null], ["unpadded", 6, 6, 2, null]]' "node-aware: without --node-size"

# --units: every scheme shards each buffer (unit, dtype) on its own; the
# line sums the buffers, max/min rank over the per-rank sums.  Units u1 = a,
# b (30 elements), u2 = c, d (11), dp 4, nodes of 2 ranks.
# padded/compact (node-aware): u1 chunk 4, bound 32, segments of 8, node
#   span 16: a (24 > 16) at 0 crosses 16, b at 24; cuts 8, 16 (a's row
#   starts), 24: a split.  u2 chunk 3, bound 12, segments of 3, span 6:
#   d (6) at 0, c at 6; cut 3 is d's row start, 9 inside c (rows of 1): c
#   and d split, none crosses.  44 elements (88 bytes), padding 2 + 1 (6),
#   8 + 3 a rank (22), 3 split, 1 crossing.
# unpadded: u1 cuts 7.5, 15, 22.5 go to a's row starts 8, 16, 24 (a larger
#   than a node's share 15: it may cross); u2 cuts 2.75 -> 3, 5.5 -> 5 (d's
#   start), 8.25 -> 8 (d's row 1).  Ranks 8+3, 8+2, 8+3, 6+3: 22 and 18
#   bytes; a, c, d split; a crosses.
# tensor (LPT per buffer, ties lowest rank): a -> 0, b -> 1; d -> 0, c -> 1:
#   ranks 30, 11, 0, 0 elements: 60 and 0 bytes.
# fsdp2, zero3: per parameter anyway: as without units.
# fsdp1: one flat parameter a buffer.  u1 30 -> 32, 8 a rank: boundaries 8,
#   16 (a's row starts), 24 (b's start): no row cut, a split and crosses 16.
#   u2 11 -> 12, 3 a rank: 3 inside c (rows of 1), 6 and 9 inside d's rows
#   [5, 8) and [8, 11): 2 rows cut, c and d split, d crosses 6.  88 bytes,
#   6 padding, 22 a rank, 2 rows cut, 3 split, 2 crossing.
printf 'a u1\nb u1\nc u2\nd u2\n' >"$T/units.txt"
run compare --shapes "$M" --dp 4 --node-size 2 --units "$T/units.txt" --format json
expect_code 0 "units: exit"
expect_json '[.[] | [.scheme, .buffer_bytes, .padding_bytes, .max_rank_bytes, .min_rank_bytes, .rows_cut, .tensors_split, .tensors_crossing_nodes]]' \
  '[["padded", 88, 6, 22, 22, 0, 3, 1], ["compact", 88, 6, 22, 22, 0, 3, 1],
    ["unpadded", 82, 0, 22, 18, 0, 3, 1],
    ["tensor", 82, 0, 60, 0, 0, 0, 0], ["fsdp2", 120, 38, 30, 30, 0, 4, 3],
    ["fsdp1", 88, 6, 22, 22, 2, 3, 2], ["zero3", 96, 14, 24, 24, 4, 4, 4]]' "units: the hand figures"
run compare --shapes "$M" --dp 4 --units "$T/units.txt" --schemes fsdp1
expect_out "compare: $M, 4 tensors, 41 elements, dtype bf16, dp 4, units $T/units.txt (2 buffers)
scheme  buffer bytes  padding bytes  padding  max rank bytes  min rank bytes  rows cut  tensors split  crossing nodes
fsdp1             88              6  6.8182%              22              22         2              3               -" \
  "units: text head"
# --units none with c in fp32: buffers all/bf16 (a, b, d: 36) and all/fp32
# (c).  fsdp2: a 8 + b 2 + d 3 bf16 and c 2 fp32 a rank = 34 bytes, 136 in
# all, logical 72 + 20 = 92.  fsdp1: 36 bf16 elements, 9 a rank: 9 and 18
# inside a's rows 2 and 4, 27 inside b's row 1: 3 rows cut, a and b split;
# c 5 -> 8, 2 a rank, split.  72 + 32 = 104 bytes, padding 3 x 4 = 12, 9 x 2
# + 2 x 4 = 26 a rank.  Without --units every tensor counts as --dtype (bf16).
printf 'a 6x4\nb 3x2\nc 5 fp32\nd 2x3\n' >"$T/mixed.shapes"
run compare --shapes "$T/mixed.shapes" --dp 4 --units none --schemes fsdp2,fsdp1 --format json
expect_json '[.[] | [.scheme, .buffer_bytes, .padding_bytes, .max_rank_bytes, .min_rank_bytes, .rows_cut, .tensors_split]]' \
  '[["fsdp2", 136, 44, 34, 34, 0, 4], ["fsdp1", 104, 12, 26, 26, 3, 3]]' "units: each buffer's dtype"
run compare --shapes "$T/mixed.shapes" --dp 4 --schemes fsdp2 --format json
expect_json '[.[] | .buffer_bytes]' '[120]' "no units: one element size"
bad "units regex" "dbuf-shard: --units: regular expression '(x': Unmatched ( or \\(" \
  compare --shapes "$M" --dp 4 --units 're:(x'
bad "units file" "dbuf-shard: --units: $T/none.txt: cannot open: No such file or directory" \
  compare --shapes "$M" --dp 4 --units "$T/none.txt"

# Without --node-size the column is "-" / null; fp32 doubles the bytes.
run compare --shapes "$M" --dp 4 --format json --dtype fp32 --schemes zero3,fsdp2
expect_json '.' '[{"scheme": "fsdp2", "buffer_bytes": 240, "padding_bytes": 76, "max_rank_bytes": 60,
    "min_rank_bytes": 60, "rows_cut": 0, "tensors_split": 4, "tensors_crossing_nodes": null},
  {"scheme": "zero3", "buffer_bytes": 192, "padding_bytes": 28, "max_rank_bytes": 48,
    "min_rank_bytes": 48, "rows_cut": 4, "tensors_split": 4, "tensors_crossing_nodes": null}]' \
  "json: --schemes in table order, fp32, no nodes"
run compare --shapes "$M" --dp 4 --schemes fsdp1
expect_out "compare: $M, 4 tensors, 41 elements, dtype bf16, dp 4
scheme  buffer bytes  padding bytes  padding  max rank bytes  min rank bytes  rows cut  tensors split  crossing nodes
fsdp1             88              6  6.8182%              22              22         2              2               -" \
  "text: one scheme, no nodes"

# dp 1: nothing is split or cut; padded and compact round 41 up to the chunk
# 12 (48).
run compare --shapes "$M" --dp 1 --format json
expect_json '[.[] | [.scheme, .buffer_bytes, .rows_cut, .tensors_split]]' \
  '[["padded", 96, 0, 0], ["compact", 96, 0, 0], ["unpadded", 82, 0, 0], ["tensor", 82, 0, 0],
    ["fsdp2", 82, 0, 0], ["fsdp1", 82, 0, 0], ["zero3", 82, 0, 0]]' "dp 1"

# -o writes the same bytes atomically.
run compare --shapes "$M" --dp 4 --format json -o "$T/c.json"
expect_code 0 "-o: exit"
"$DBUF" compare --shapes "$M" --dp 4 --format json >"$T/c2.json"
cmp -s "$T/c.json" "$T/c2.json" && pass "-o: same bytes" || fail "-o: differs from stdout"

# A real model: the unpadded schemes hold exactly the logical bytes.
run compare --model llama-3.2-1b --dp 8 --format json
expect_code 0 "model: exit"
expect_json '[.[] | select(.scheme == "unpadded" or .scheme == "tensor") | .buffer_bytes - .padding_bytes] | unique' \
  '[2471628800]' "model: unpadded and tensor hold the logical bytes"

bad "no dp" "dbuf-shard: compare: --dp N is required" compare --shapes "$M"
bad "dp 0" "dbuf-shard: --dp: 0 is out of range [1, 2147483647]" compare --shapes "$M" --dp 0
bad "node size 0" "dbuf-shard: --node-size: 0 is out of range [1, 2147483647]" compare --shapes "$M" --dp 4 --node-size 0
bad "unknown scheme" "dbuf-shard: --schemes: 'zero2' is not a scheme (padded, compact, unpadded, tensor, fsdp2, fsdp1, zero3)" \
  compare --shapes "$M" --dp 4 --schemes fsdp1,zero2
bad "empty scheme" "dbuf-shard: --schemes: '' is not a scheme (padded, compact, unpadded, tensor, fsdp2, fsdp1, zero3)" \
  compare --shapes "$M" --dp 4 --schemes fsdp1,
bad "format" "dbuf-shard: --format: 'csv' is not text or json" compare --shapes "$M" --dp 4 --format csv
bad "plan-only option" "dbuf-shard: compare: unknown option '--layout' (see 'dbuf-shard compare --help')" \
  compare --shapes "$M" --dp 4 --layout padded
printf 'a 4x4\nb 4xx4\n' >"$T/bad.shapes"
bad "bad shapes" "dbuf-shard: $T/bad.shapes:2: tensor b: shape '4xx4': expected a non-negative integer at 'x4'" \
  compare --shapes "$T/bad.shapes" --dp 4
# 3 x 2^61 on 2 ranks: fsdp2 stores 2 rows of 2^61 a rank, 2^63 in all.
printf 'big 3x2305843009213693952\n' >"$T/big.shapes"
bad "overflow" "dbuf-shard: $T/big.shapes: fsdp2: tensor big: the sharded size overflows 64 bits" \
  compare --shapes "$T/big.shapes" --dp 2 --dtype int8 --schemes fsdp2

run compare --help
expect_code 0 "--help"
expect_out_has "Usage: dbuf-shard compare" "--help text"
expect_out_has "  zero3     DeepSpeed ZeRO-3" "--help lists the schemes"

finish
