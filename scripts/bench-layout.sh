#!/bin/bash
# Layout planning benchmark: measured build / validate / query times for the
# largest real model of the zoo (DeepSeek-V3, 45,395 tensors) at dp 8 and
# 1024, and for 1,000,000 tensors cycled from it, with the per-tensor cost
# ratio between the two sizes (1.0 = perfectly linear).
#   scripts/bench-layout.sh [BUILD_DIR]     (default: _build)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/_build}
make -C "$build" -s scripts/bench/bench_layout >/dev/null
bench="$build/scripts/bench/bench_layout"
shapes="$top/tests/data/zoo/deepseek-v3.shapes"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(date -u +%F)"
"$bench" "$shapes" --dp 8 --repeat 5
"$bench" "$shapes" --dp 1024 --repeat 5 | tee "$build/bench-small.txt"
"$bench" "$shapes" --dp 1024 --tensors 1000000 --repeat 2 | tee "$build/bench-big.txt"
echo "node-aware (--node-size 8), 1,000,000 tensors:"
"$bench" "$shapes" --dp 1024 --tensors 1000000 --repeat 2 --node-size 8
echo "per-tensor build cost, 1,000,000 vs 45,395 tensors (1.0 = linear):"
join <(awk '$2 == 1024 {print $1, $7}' "$build/bench-small.txt" | sort) \
     <(awk '$2 == 1024 {print $1, $7}' "$build/bench-big.txt" | sort) |
  awk '{printf "  %-9s %6.0f ns -> %6.0f ns per tensor: ratio %.2f\n", $1, $2, $3, $3 / $2}'
