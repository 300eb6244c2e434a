#!/bin/bash
# The benchmark suite of dbuf-shard (issue 10): one command, one table of
# measured values beside their baselines and the ratios, every figure
# measured in this run.
#
#   scripts/bench/run-all.sh [--build DIR] [--quick] [--work DIR] [--only LIST]
#
#   --build DIR  the build folder holding dbuf-shard (default: $DBUF_BUILD,
#                else ./_build); the helpers of scripts/bench are built there
#   --quick      10k and 100k tensors, fewer rounds (under a minute here;
#                the full suite: about 2 minutes)
#   --work DIR   where shape lists, reports and raw measurements go
#                (default: DIR/bench)
#   --only LIST  run only these sections, comma-separated (1,2,3,4,5,r16;
#                e.g. --only 5 for the load); a ratio to a section not run
#                shows as -
#
# Sections (each row names its baseline):
#   1 plan: wall time and peak memory of `dbuf-shard plan --dp 8` for every
#     layout kind, summary and --format json, at 10k, 100k (and 1M) tensors
#     of a MoE-like list (gen-shapes.sh), beside `sort` of the same file;
#     bytes per tensor = peak RSS / tensors; time(1M) / time(100k)
#   2 service: `mpirun -np 2 dbuf-shard --shapes F --no-materialize` at the
#     largest size: per-phase times (report JSON) and peak memory per rank;
#     the size of the layout message and its encode, decode and validate
#     times in one process (bench_wire)
#   3 materialize: fill and verify GB/s of `mpirun -np 2 dbuf-shard` (default
#     model) beside bench_mem (first touch + memset, 64-bit sum read pass of
#     the same bytes, allocated bound and huge-page advised like the
#     service), the two alternated round by round, which goes first
#     alternating too (5 rounds, --quick 2); the fill's target row takes
#     the first touch of bench_mem's first segment (a new process's first
#     large segment, as the service's), another row the best of every
#     round; the same fill and verify
#     run by bench_mem itself, alternated with its touch; then the same first
#     touch after 10 s without a run (a VM may have given the freed memory
#     back to its host)
#   4 start-up: `mpirun -np 2 dbuf-shard --no-materialize` beside an MPI
#     program that only initializes and finalizes, alternated
#   r16 ranks: `mpirun -np 16 --oversubscribe dbuf-shard --no-materialize
#     --model deepseek-v3` per-phase times
#   5 load: `mpirun -np 2 dbuf-shard --load --io X` of a checkpoint of 4
#     shards and an index (about 1 GiB; --quick 256 MiB of BF16) for posix,
#     mpiio and mpiio-coll, beside `cat FILES > /dev/null` of the same files
#     in the same run (warm page cache: cat runs first); a cold read of each
#     only where `echo 3 > /proc/sys/vm/drop_caches` works (else a row says
#     it was skipped).  GB/s of the load: bytes read / the slowest rank's
#     seconds (report .load.gbps), the best of 3 rounds (--quick 2) after
#     one untimed load; cold: one round
# Times are the best of the rounds (the machine is shared); peak memory is
# the largest of the rounds.  Not run by make check.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
build=${DBUF_BUILD:-./_build}
quick=0
work=
only=
usage() { sed -n '6,17p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=${2:?--build needs a folder}; shift 2 ;;
    --build=*) build=${1#--build=}; shift ;;
    --work) work=${2:?--work needs a folder}; shift 2 ;;
    --work=*) work=${1#--work=}; shift ;;
    --quick) quick=1; shift ;;
    --only) only=${2:?--only needs a list of sections}; shift 2 ;;
    --only=*) only=${1#--only=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run-all.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for sec in ${only//,/ }; do
  case $sec in 1|2|3|4|5|r16) ;; *) echo "run-all.sh: --only: no section '$sec' (1,2,3,4,5,r16)" >&2; exit 2 ;; esac
done
# want SECTION: whether --only (or its absence) selects it.
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
declare -A plan_t plan_kib # section 1's times, section 2's baseline
[ -x "$build/dbuf-shard" ] || { echo "run-all.sh: no dbuf-shard in '$build' (--build DIR or DBUF_BUILD)" >&2; exit 2; }
command -v jq >/dev/null || { echo "run-all.sh: jq is needed to read the report JSON" >&2; exit 2; }
build=$(cd "$build" && pwd)
work=${work:-$build/bench}
mkdir -p "$work"
work=$(cd "$work" && pwd)

make -C "$build" -s dbuf-shard scripts/bench/bench_rusage scripts/bench/bench_wire \
  scripts/bench/bench_mem scripts/bench/mpi_null >/dev/null
# The program itself, not libtool's wrapper script around it (a shell that
# starts before every run, which the baselines do not pay); the wrapper
# only finds the libraries of the build, as LD_LIBRARY_PATH does here.
dbuf=$build/dbuf-shard
if [ -x "$build/.libs/dbuf-shard" ]; then
  dbuf=$build/.libs/dbuf-shard
  export LD_LIBRARY_PATH=$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
rusage=$build/scripts/bench/bench_rusage
export OMPI_MCA_btl_tcp_if_include=${OMPI_MCA_btl_tcp_if_include:-lo}
export OMPI_MCA_oob_tcp_if_include=${OMPI_MCA_oob_tcp_if_include:-lo}
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mpirun="timeout 300 mpirun"

if [ "$quick" = 1 ]; then
  sizes="10000 100000"; reps_small=3; reps_big=3; mat_rounds=2; start_rounds=3; svc_rounds=2
else
  sizes="10000 100000 1000000"; reps_small=3; reps_big=3; mat_rounds=5; start_rounds=5; svc_rounds=2
fi
kinds="padded unpadded tensor compact"
big=${sizes##* }

# Table rows: section, case, measured, baseline, ratio, note.
table=$work/table.txt
: >"$table"
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$table"; }
# fmt EXPR [FORMAT], ratio EXPR EXPR: arithmetic by awk (EXPR from numbers
# this script measured).
fmt() { awk "BEGIN { printf \"${2:-%.3f}\", ($1) }"; }
ratio() { awk "BEGIN { a = ($1); b = ($2); if (b > 0) printf \"%.2fx\", a / b; else print \"-\" }"; }

# run_best REPS OUT CMD...: best wall time (best_t, seconds) and largest
# peak RSS (best_kib) of REPS runs; the command's stdout goes to /dev/null.
# Not in a subshell, so that a failure ends the suite.
run_best() {
  local reps=$1 out=$2 i
  shift 2
  : >"$out.all"
  for ((i = 0; i < reps; i++)); do
    if ! "$rusage" "$out.one" "$@" >/dev/null 2>"$out.err"; then
      echo "run-all.sh: failed: $* (see $out.err)" >&2
      cat "$out.err" >&2
      exit 1
    fi
    cat "$out.one" >>"$out.all"
  done
  read -r best_t best_kib < <(awk 'NR == 1 || $1 < t { t = $1 } $2 > m { m = $2 }
    END { printf "%.6f %d\n", t, m }' "$out.all")
}

echo "run-all.sh: $(date -u '+%F %T') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "build $build, $([ "$quick" = 1 ] && echo quick || echo full)" >&2

# ---------------------------------------------------------------------------
# 1. plan
if want 1; then # (section body not indented)
for n in $sizes; do
  shapes=$work/moe-$n.shapes
  [ -s "$shapes" ] || "$top/scripts/bench/gen-shapes.sh" "$n" >"$shapes"
  reps=$reps_small
  [ "$n" -ge 1000000 ] && reps=$reps_big
  echo "run-all.sh: plan, $n tensors ($(($(stat -c %s "$shapes") / 1000)) kB)" >&2
  run_best "$reps" "$work/sort-$n" env LC_ALL=C sort "$shapes"
  sort_s=$best_t sort_kib=$best_kib
  row 1 "LC_ALL=C sort, $n lines" "$(fmt "$sort_s") s" "" "" "peak $(fmt "$sort_kib/1024" %.1f) MiB"
  for kind in $kinds; do
    for format in summary json; do
      run_best "$reps" "$work/plan-$n-$kind-$format" \
        "$dbuf" plan --shapes "$shapes" --dp 8 --layout "$kind" --format "$format"
      t=$best_t kib=$best_kib
      plan_t[$n.$kind.$format]=$t
      plan_kib[$n.$kind.$format]=$kib
      target=1.5x
      [ "$format" = json ] && target=2x
      row 1 "plan $n $kind $format" "$(fmt "$t") s" "sort $(fmt "$sort_s") s" \
        "$(ratio "$t" "$sort_s")" \
        "target $target, 150 B/tensor; peak $(fmt "$kib/1024" %.1f) MiB, $(fmt "$kib*1024/$n" %.0f) B/tensor"
    done
  done
done
# Growth from the second largest size to the largest (10x more tensors):
# time ratio (linear: 10x) and the memory each added tensor costs.
prev=$(echo "$sizes" | awk '{ print $(NF - 1) }')
for kind in $kinds; do
  for format in summary json; do
    a=$prev.$kind.$format z=$big.$kind.$format
    row 1 "plan time $big / $prev, $kind $format" "$(fmt "${plan_t[$z]}") s" \
      "$(fmt "${plan_t[$a]}") s" "$(ratio "${plan_t[$z]}" "${plan_t[$a]}")" \
      "target 11x; $(fmt "(${plan_kib[$z]} - ${plan_kib[$a]}) * 1024 / ($big - $prev)" %.0f) B a tensor added"
  done
done
fi # section 1

# ---------------------------------------------------------------------------
# 2. the service at the largest size, np 2, no materialization
if want 2; then # (section body not indented)
echo "run-all.sh: service, $big tensors, np 2" >&2
shapes=$work/moe-$big.shapes
# The round with the shortest total; peak memory per rank over the rounds.
rep=$work/service-$big.json
best_tot=
for ((i = 0; i < svc_rounds; i++)); do
  $mpirun -np 2 "$rusage" "$work/service-rank.%r.$i" "$dbuf" --shapes "$shapes" --no-materialize \
    --report "$work/service-$i.json" -q >"$work/service.out" 2>"$work/service.err" ||
    { echo "run-all.sh: the service failed (see $work/service.err)" >&2; cat "$work/service.err" >&2; exit 1; }
  t=$(jq .timings.total "$work/service-$i.json")
  if [ -z "$best_tot" ] || awk "BEGIN { exit !($t < $best_tot) }"; then
    best_tot=$t
    cp "$work/service-$i.json" "$rep"
  fi
done
read -r p b v tot < <(jq -r '.timings | "\(.plan) \(.broadcast) \(.validate) \(.total)"' "$rep")
plan1=${plan_t[$big.padded.summary]:-0}
row 2 "service $big: plan (rank 0)" "$(fmt "$p") s" "plan command $(fmt "$plan1") s" "$(ratio "$p" "$plan1")" ""
row 2 "service $big: broadcast + decode + validate" "$(fmt "$b") s" "" "" "report timings.broadcast"
row 2 "service $big: structure proof" "$(fmt "$v") s" "" "" "report timings.validate"
row 2 "service $big: broadcast + validate over plan" "$(fmt "$b+$v") s" "plan $(fmt "$p") s" \
  "$(ratio "$b+$v" "$p")" "target 0.5x"
row 2 "service $big: total" "$(fmt "$tot") s" "" "" "report timings.total, best of $svc_rounds"
# The message every rank receives, and the serial work on it (one process).
"$build/scripts/bench/bench_wire" "$shapes" 2 >"$work/wire.out"
read -r _ _ _ wbytes _ wper _ wenc _ wdec _ wval <"$work/wire.out"
row 2 "wire message, $big tensors dp 2" "$wbytes bytes" "" "" "$wper B/tensor (dbuf_wire_encode)"
row 2 "wire encode / decode / validate, one process" \
  "$(fmt "$wenc") / $(fmt "$wdec") / $(fmt "$wval") s" "" "" "best of 3 (bench_wire)"
for r in 0 1; do
  kib=$(cat "$work"/service-rank.$r.* | awk '$2 > m { m = $2 } END { print m }')
  row 2 "service $big: peak memory rank $r" "$(fmt "$kib/1024" %.1f) MiB" "" "" \
    "$(fmt "$kib*1024/$big" %.0f) B/tensor$([ $r = 1 ] && echo ", target 150")"
done
fi # section 2

# ---------------------------------------------------------------------------
# 3. materialize and verify (default model, np 2) beside bench_mem, alternated
if want 3; then # (section body not indented)
echo "run-all.sh: materialize, np 2, $mat_rounds rounds" >&2
: >"$work/mat.svc"
: >"$work/mat.base"
bytes=0
mat_svc() {
  local rep=$work/mat-$1.json
  $mpirun -np 2 "$dbuf" --report "$rep" -q >"$work/mat.out" 2>"$work/mat.err" ||
    { echo "run-all.sh: materialize failed (see $work/mat.err)" >&2; cat "$work/mat.err" >&2; exit 1; }
  # Each rank's fill GB/s (the slowest rank), verify GB/s of the largest
  # segment over the verify phase (rank 0's clock, ends with an agreement).
  jq -r '([.ranks[].bytes] | max) as $b | [([.ranks[].gbps] | min), $b / .timings.verify / 1e9,
         $b, ([.ranks[] | .bound and .hugepage] | all)] | @tsv' "$rep" >>"$work/mat.svc"
  bytes=$(tail -n 1 "$work/mat.svc" | cut -f3)
}
mat_base() {
  $mpirun -np 2 "$build/scripts/bench/bench_mem" "$bytes" 2 llama-3.2-1b >"$work/mat-base-$1.out" \
    2>"$work/mat-base.err" ||
    { echo "run-all.sh: bench_mem failed (see $work/mat-base.err)" >&2; cat "$work/mat-base.err" >&2; exit 1; }
  awk '/^touch/ { t = $3 } /^read/ { r = $3 } /^write/ { w = $3 } /^bound/ { b = $2 && $4 ? "true" : "false" }
       /^fill/ { f = $3 } /^verify/ { v = $3 } /^first/ { t1 = $2 }
       END { printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t, r, w, b, f, v, t1 }' "$work/mat-base-$1.out" >>"$work/mat.base"
}
# Which goes first alternates too: on this VM the first touch depends on
# what the process before did with its memory, and when (see
# docs/performance.md, "Fresh memory on this VM").  The first round runs the
# service first: bench_mem needs its byte count.
for ((i = 0; i < mat_rounds; i++)); do
  if ((i % 2 == 0)); then
    mat_svc "$i"
    mat_base "$i"
  else
    mat_base "$i"
    mat_svc "$i"
  fi
done
best() { sort -g -k"$1,$1" "$2" | tail -n 1 | cut -f"$1"; }
fill=$(best 1 "$work/mat.svc")
verify=$(best 2 "$work/mat.svc")
touch_=$(best 1 "$work/mat.base")
read_=$(best 2 "$work/mat.base")
write_=$(best 3 "$work/mat.base")
svc_ok=$(cut -f4 "$work/mat.svc" | sort -u | paste -sd/)
base_ok=$(cut -f4 "$work/mat.base" | sort -u | paste -sd/)
# The service's fill is the first large segment of a new process: beside
# the first touch of bench_mem's first segment (its round 0, touch first),
# like for like, and beside the best touch of any round (the later ones
# follow a free in the same process and are often faster on this VM).
touch1=$(best 7 "$work/mat.base")
row 3 "fill, $(fmt "$bytes/1e9" %.2f) GB a rank" "$(fmt "$fill" %.2f) GB/s" \
  "a process's first touch $(fmt "$touch1" %.2f) GB/s" "$(ratio "$fill" "$touch1")" "target 0.90x"
row 3 "fill, beside any round's first touch" "$(fmt "$fill" %.2f) GB/s" \
  "first touch + memset $(fmt "$touch_" %.2f) GB/s" "$(ratio "$fill" "$touch_")" "best of every round"
row 3 "verify, $(fmt "$bytes/1e9" %.2f) GB a rank" "$(fmt "$verify" %.2f) GB/s" \
  "64-bit sum read $(fmt "$read_" %.2f) GB/s" "$(ratio "$verify" "$read_")" "target 0.50x"
# The same fill and verify in bench_mem's own process, alternated with its
# touch (which goes first changes from round to round): the VM's memory is
# then in the same state for both.
bfill=$(best 5 "$work/mat.base")
bverify=$(best 6 "$work/mat.base")
row 3 "fill in bench_mem, same process" "$(fmt "$bfill" %.2f) GB/s" \
  "first touch + memset $(fmt "$touch_" %.2f) GB/s" "$(ratio "$bfill" "$touch_")" "target 0.90x, alternated"
row 3 "verify in bench_mem, same process" "$(fmt "$bverify" %.2f) GB/s" \
  "64-bit sum read $(fmt "$read_" %.2f) GB/s" "$(ratio "$bverify" "$read_")" "target 0.50x"
row 3 "memset of touched memory" "$(fmt "$write_" %.2f) GB/s" "" "" \
  "bound+hugepage: service $svc_ok, baseline $base_ok"
# On a VM the host may take back memory the guest freed: a first touch long
# after the last run can be much slower than one right after it.
sleep 10
$mpirun -np 2 "$build/scripts/bench/bench_mem" "$bytes" 1 >"$work/mat-cold.out" 2>"$work/mat-base.err" ||
  { echo "run-all.sh: bench_mem failed (see $work/mat-base.err)" >&2; cat "$work/mat-base.err" >&2; exit 1; }
cold=$(awk '/^touch/ { print $3 }' "$work/mat-cold.out")
row 3 "first touch + memset after 10 s idle" "$(fmt "$cold" %.2f) GB/s" \
  "right after a run $(fmt "$touch_" %.2f) GB/s" "$(ratio "$cold" "$touch_")" "the VM's memory, not dbuf-shard"
fi # section 3

# ---------------------------------------------------------------------------
# 4. start-up: the service without data beside an MPI program that does nothing
if want 4; then # (section body not indented)
echo "run-all.sh: start-up, np 2, $start_rounds rounds" >&2
: >"$work/start.svc"
: >"$work/start.null"
for ((i = 0; i < start_rounds; i++)); do
  run_best 1 "$work/start-svc" $mpirun -np 2 "$dbuf" --no-materialize -q
  echo "$best_t" >>"$work/start.svc"
  run_best 1 "$work/start-null" $mpirun -np 2 "$build/scripts/bench/mpi_null"
  echo "$best_t" >>"$work/start.null"
done
s_svc=$(sort -g "$work/start.svc" | head -n 1)
s_null=$(sort -g "$work/start.null" | head -n 1)
row 4 "mpirun -np 2 dbuf-shard --no-materialize" "$(fmt "$s_svc") s" "MPI init+finalize $(fmt "$s_null") s" \
  "$(ratio "$s_svc" "$s_null")" "best of $start_rounds alternated"
fi # section 4

# ---------------------------------------------------------------------------
# 5. load a checkpoint beside cat of its files
if want 5; then # (section body not indented)
ck=$work/ckpt
tensors_per_file=4 load_rounds=3
[ "$quick" = 1 ] && tensors_per_file=1 load_rounds=2
ck_bytes=$((4 * tensors_per_file * 4096 * 8192 * 2))
if [ "$(cat "$ck/.bytes" 2>/dev/null)" != "$ck_bytes" ]; then
  echo "run-all.sh: load, writing a checkpoint of $((ck_bytes >> 20)) MiB" >&2
  rm -rf "$ck"
  mkdir -p "$ck"
  # Four shards of BF16 [4096, 8192] tensors: a header, then random bytes.
  for k in 1 2 3 4; do
    f=$ck/model-0000$k-of-00004.safetensors
    python3 - "$f" "$k" "$tensors_per_file" <<'PY'
import json, struct, sys
f, k, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
b = 4096 * 8192 * 2
h = {"model.layers.%d.w%d.weight" % (k, i): {"dtype": "BF16", "shape": [4096, 8192],
     "data_offsets": [i * b, (i + 1) * b]} for i in range(n)}
hj = json.dumps(h).encode()
open(f, "wb").write(struct.pack("<Q", len(hj)) + hj)
PY
    head -c $((tensors_per_file * 4096 * 8192 * 2)) /dev/urandom >>"$f"
  done
  python3 - "$ck" "$tensors_per_file" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
wm = {"model.layers.%d.w%d.weight" % (k, i): "model-0000%d-of-00004.safetensors" % k
      for k in (1, 2, 3, 4) for i in range(n)}
json.dump({"metadata": {}, "weight_map": wm}, open(d + "/model.safetensors.index.json", "w"))
PY
  echo "$ck_bytes" >"$ck/.bytes"
fi
ck_files=("$ck"/model-0000?-of-00004.safetensors)
ck_size=$(stat -c %s "${ck_files[@]}" | awk '{ s += $1 } END { print s }')
# cat_gbps: GB/s of cat over the files (file bytes, headers included).
cat_gbps() {
  local t0 t1
  t0=$(date +%s%N)
  cat "${ck_files[@]}" >/dev/null
  t1=$(date +%s%N)
  fmt "$ck_size / (($t1 - $t0) / 1e9) / 1e9" %.2f
}
# load_gbps IO TAG: the load's GB/s from its report (PASS required).
load_gbps() {
  local rep=$work/load-$2.json
  $mpirun -np 2 "$dbuf" --safetensors "$ck/model.safetensors.index.json" --load --io "$1"     --report "$rep" -q >"$work/load.out" 2>"$work/load.err" ||
    { echo "run-all.sh: load --io $1 failed (see $work/load.err)" >&2; cat "$work/load.err" >&2; exit 1; }
  jq -r 'if .load.verdict == "PASS" then .load.gbps else error("load verdict \(.load.verdict)") end' "$rep" |
    xargs printf '%.2f'
}
echo "run-all.sh: load, $((ck_size >> 20)) MiB in 4 files, np 2, warm, $load_rounds rounds" >&2
cat "${ck_files[@]}" >/dev/null # into the page cache
# One load untimed: the first one after a pause pays for memory the VM gave
# back (see section 3).  Then rounds of cat and the three methods, best of each.
load_gbps posix warm-up >/dev/null
declare -A load_best
warm_cat=0
for ((i = 0; i < load_rounds; i++)); do
  c=$(cat_gbps)
  awk "BEGIN { exit !($c > $warm_cat) }" && warm_cat=$c
  for io in posix mpiio mpiio-coll; do
    g=$(load_gbps "$io" "warm-$io")
    awk "BEGIN { exit !($g > ${load_best[$io]:-0}) }" && load_best[$io]=$g
  done
done
for io in posix mpiio mpiio-coll; do
  g=${load_best[$io]}
  row 5 "load --io $io, $((ck_size >> 20)) MiB, np 2, warm" "$g GB/s" "cat $warm_cat GB/s" \
    "$(ratio "$g" "$warm_cat")" "target 0.70x; best of $load_rounds, report .load.gbps, PASS"
done
if sync && (echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
  cold_cat=$(cat_gbps)
  for io in posix mpiio mpiio-coll; do
    sync
    echo 3 >/proc/sys/vm/drop_caches
    g=$(load_gbps "$io" "cold-$io")
    row 5 "load --io $io, np 2, cold" "$g GB/s" "cat cold $cold_cat GB/s" "$(ratio "$g" "$cold_cat")" \
      "page cache dropped before each"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    cold_cat=$(cat_gbps)
  done
else
  row 5 "load, cold page cache" "skipped" "" "" "echo 3 > /proc/sys/vm/drop_caches is not allowed here"
fi
fi # section 5

# ---------------------------------------------------------------------------
# 6. 16 ranks on 2 cores, DeepSeek-V3 (45,395 tensors)
if want r16; then # (section body not indented)
echo "run-all.sh: np 16 --oversubscribe, deepseek-v3" >&2
rep=$work/np16.json
run_best 1 "$work/np16" $mpirun -np 16 --oversubscribe "$dbuf" --no-materialize \
  --model deepseek-v3 --report "$rep" -q
w16=$best_t
read -r p b v tot < <(jq -r '.timings | "\(.plan) \(.broadcast) \(.validate) \(.total)"' "$rep")
row r16 "np 16 deepseek-v3: plan / broadcast / validate" "$(fmt "$p") / $(fmt "$b") / $(fmt "$v") s" \
  "" "" "verdict $(jq -r .verdict "$rep")"
row r16 "np 16 deepseek-v3: total (report) / mpirun wall" "$(fmt "$tot") / $(fmt "$w16") s" "" "" \
  "2 cores, 16 ranks"
fi # section r16

# ---------------------------------------------------------------------------
printf '# %s UTC, %s, %s cores, load %s, %s\n' "$(date -u '+%F %T')" "$(uname -r)" "$(nproc)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$([ "$quick" = 1 ] && echo "--quick" || echo full)"
{
  printf 'sec\tcase\tmeasured\tbaseline\tratio\tnote\n'
  cat "$table"
} | column -t -s $'\t'
