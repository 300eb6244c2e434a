#!/bin/bash
# A MoE-like shape list of exactly N tensors for the benchmarks, on stdout:
# DeepSeek-V3-like layers (multi-head latent attention, a router, 256 routed
# experts of three matrices and one shared expert, their norms: 782 tensors a
# layer, 2-D matrices with 1-D norms and biases among them), the embedding
# first and the final norm and head last, cut at N lines.  Deterministic.
#   scripts/bench/gen-shapes.sh N > FILE
set -euo pipefail
n=${1:?usage: gen-shapes.sh N}
[[ $n =~ ^[1-9][0-9]*$ && $n -ge 3 ]] || { echo "gen-shapes.sh: N must be an integer of at least 3, not '$n'" >&2; exit 2; }
awk -v n="$n" 'BEGIN {
  k = 0
  line("embed.weight", "129280x7168")
  for (L = 0; k < n - 2; L++) {
    p = "layers." L "."
    line(p "attn_norm.weight", "7168")
    line(p "attn.wq_a.weight", "1536x7168")
    line(p "attn.q_norm.weight", "1536")
    line(p "attn.wq_b.weight", "24576x1536")
    line(p "attn.wkv_a.weight", "576x7168")
    line(p "attn.kv_norm.weight", "512")
    line(p "attn.wkv_b.weight", "32768x512")
    line(p "attn.wo.weight", "7168x16384")
    line(p "ffn_norm.weight", "7168")
    line(p "ffn.gate.weight", "256x7168")
    line(p "ffn.gate.bias", "256")
    for (e = 0; e < 256; e++) {
      q = p "ffn.experts." e "."
      line(q "w1.weight", "2048x7168")
      line(q "w2.weight", "7168x2048")
      line(q "w3.weight", "2048x7168")
    }
    line(p "ffn.shared.w1.weight", "2048x7168")
    line(p "ffn.shared.w2.weight", "7168x2048")
    line(p "ffn.shared.w3.weight", "2048x7168")
  }
  k = n - 2
  last = 1
  line("norm.weight", "7168")
  line("head.weight", "129280x7168")
}
function line(name, shape) {
  if (k < n - 2 || last)
    print name, shape
  k++
}'
