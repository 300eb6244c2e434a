#!/bin/bash
# A first-time user's first hour: the --help texts against their golden
# copies, "did you mean" for misspelled options, commands and models, absurd
# --dp refused at once with the reason, warnings for valid but odd requests,
# and the README's two-node example run as written (build-tree paths).
set -u
. "$(dirname "$0")/lib.sh"
GOLDEN=$DATA/golden-out
SRC=${top_srcdir:?top_srcdir is not set}
# configure --without-mpi builds no run: its cases are left out there.
WITH_MPI=${DBUF_WITH_MPI:-yes}

# ---- --help of the command and of each subcommand, byte for byte ----
# To accept a deliberate change: rerun each command below into its file and
# read the diff.
for name in main plan verify compare models run; do
  if [ "$WITH_MPI" != yes ] && { [ "$name" = main ] || [ "$name" = run ]; }; then
    echo "SKIP: --help of $name (built without MPI: the text differs by design)"
    continue
  fi
  if [ "$name" = main ]; then run --help; else run "$name" --help; fi
  if [ "$CODE" -eq 0 ] && [ -z "$ERR" ] && cmp -s "$T/stdout" "$GOLDEN/help-$name.txt"; then
    pass "--help of $name as in golden-out/help-$name.txt"
  else
    fail "--help of $name (exit $CODE, stderr '$ERR') differs from golden-out/help-$name.txt:"
    diff "$GOLDEN/help-$name.txt" "$T/stdout"
  fi
done

# ---- did you mean ----
# usage "what" 'expected stderr' args...: exit 2, exactly that stderr, no stdout.
usage() {
  local what=$1 want=$2
  shift 2
  run "$@"
  if [ "$CODE" -eq 2 ] && [ "$ERR" = "$want" ] && [ ! -s "$T/stdout" ]; then
    pass "$what"
  else
    fail "$what: exit $CODE, stderr '$ERR', want '$want'"
  fi
}
printf 'P0 2x6\nP1 4x4\nP2 4x4\nP3 1x2\nP4 1x6\n' >"$T/seed"
usage "plan --modle" "dbuf-shard: plan: unknown option '--modle'; did you mean '--model'? (see 'dbuf-shard plan --help')" \
  plan --modle llama-3.1-8b
usage "plan --fromat=json (value attached)" "dbuf-shard: plan: unknown option '--fromat=json'; did you mean '--format'? (see 'dbuf-shard plan --help')" \
  plan --fromat=json
usage "plan --layuot (transposition)" "dbuf-shard: plan: unknown option '--layuot'; did you mean '--layout'? (see 'dbuf-shard plan --help')" \
  plan --layuot padded
usage "plan -model (one dash)" "dbuf-shard: plan: unknown option '-m'; did you mean '--model'? (see 'dbuf-shard plan --help')" \
  plan -model llama-3.1-8b
# After a "--flag=value" word, an unknown short option is still itself
# (it used to be taken for '--format' given a value).
usage "plan --format=json -model" "dbuf-shard: plan: unknown option '-m'; did you mean '--model'? (see 'dbuf-shard plan --help')" \
  plan --format=json -model llama-3.1-8b
usage "plan --pieces=1 (a flag with a value)" "dbuf-shard: plan: option '--pieces' takes no value (see 'dbuf-shard plan --help')" \
  plan --pieces=1
usage "plan --frobnicate: nothing close" "dbuf-shard: plan: unknown option '--frobnicate' (see 'dbuf-shard plan --help')" \
  plan --frobnicate
usage "verify --alll" "dbuf-shard: verify: unknown option '--alll'; did you mean '--all'? (see 'dbuf-shard verify --help')" \
  verify "$T/seed" --alll
usage "compare --schemas" "dbuf-shard: compare: unknown option '--schemas'; did you mean '--schemes'? (see 'dbuf-shard compare --help')" \
  compare --dp 2 --schemas fsdp1
usage "command plna" "dbuf-shard: unknown command 'plna'; did you mean 'plan'? (see 'dbuf-shard --help')" plna
usage "command verfiy" "dbuf-shard: unknown command 'verfiy'; did you mean 'verify'? (see 'dbuf-shard --help')" verfiy x.json
usage "command model" "dbuf-shard: unknown command 'model'; did you mean 'models'? (see 'dbuf-shard --help')" model
usage "command xyzzy: nothing close" "dbuf-shard: unknown command 'xyzzy' (see 'dbuf-shard --help')" xyzzy
usage "model llama-3.1-8" "dbuf-shard: --model: unknown model 'llama-3.1-8'; did you mean 'llama-3.1-8b'? (see 'dbuf-shard models')" \
  plan --model llama-3.1-8
usage "model Llama-3.1-70B (case)" "dbuf-shard: --model: unknown model 'Llama-3.1-70B'; did you mean 'llama-3.1-70b'? (see 'dbuf-shard models')" \
  plan --model Llama-3.1-70B
usage "model mixtral-7x8b" "dbuf-shard: --model: unknown model 'mixtral-7x8b'; did you mean 'mixtral-8x7b'? (see 'dbuf-shard models')" \
  compare --dp 8 --model mixtral-7x8b
usage "model llama-3.1: three start with it" "dbuf-shard: --model: unknown model 'llama-3.1'; did you mean 'llama-3.1-8b', 'llama-3.1-70b' or 'llama-3.1-405b'? (see 'dbuf-shard models')" \
  plan --model llama-3.1 --tp 2
usage "model gpt5: nothing close, the list" "dbuf-shard: --model: unknown model 'gpt5' (built-in models: $("$DBUF" models | awk 'NR > 1 { printf "%s%s", sep, $1; sep = ", " }'))" \
  plan --model gpt5
"$DBUF" plan --shapes "$T/seed" --dp 2 --layout unpadded --format json -o "$T/seed.json"
usage "verify --model deepseek-v4" "dbuf-shard: --model: unknown model 'deepseek-v4'; did you mean 'deepseek-v3'? (see 'dbuf-shard models')" \
  verify "$T/seed.json" --model deepseek-v4

# ---- absurd requests fail fast ----
# Before the limit, --dp 2147483647 planned until memory ran out (16 GiB of
# rank offsets): under 2 GB of address space and 20 s it must now be refused
# at once, exit 2, with the reason on one line.
reason="is above the limit of 16777216 (2^24) ranks: planning keeps 8 bytes or more per rank"
# fast "what" 'expected stderr' args...: like usage, bounded in memory and time.
fast() {
  local what=$1 want=$2
  shift 2
  # ulimit -v proves nothing runs away; a sanitizer's shadow memory needs
  # the address space, so there the refusal's message is checked alone.
  if [ -n "${DBUF_TEST_SANITIZERS:-}" ]; then
    timeout 20 "$DBUF" "$@" >"$T/stdout" 2>"$T/stderr"
  else
    (ulimit -v 2000000; exec timeout 20 "$DBUF" "$@") >"$T/stdout" 2>"$T/stderr"
  fi
  CODE=$?
  ERR=$(cat "$T/stderr")
  if [ "$CODE" -eq 2 ] && [ "$ERR" = "$want" ] && [ ! -s "$T/stdout" ]; then
    pass "$what"
  else
    fail "$what: exit $CODE, stderr '$ERR', want '$want'"
  fi
}
fast "plan --dp 2^31-1" "dbuf-shard: --dp 2147483647 $reason (16.0 GiB here) and the reports a line per rank" \
  plan --layout unpadded --dp 2147483647
fast "plan --dp 2^24+1" "dbuf-shard: --dp 16777217 $reason (0.1 GiB here) and the reports a line per rank" \
  plan --dp 16777217
fast "compare --dp 2^31-1" "dbuf-shard: --dp 2147483647 $reason (16.0 GiB here) and the reports a line per rank" \
  compare --dp 2147483647
usage "plan --dp 0" "dbuf-shard: --dp: 0 is out of range [1, 2147483647]" plan --dp 0
# 2^24 itself is allowed (unpadded: 128 MiB of offsets, under a second).
run plan --shapes "$T/seed" --layout unpadded --dp 16777216 --format summary
[ "$CODE" -eq 0 ] && grep -q "dp 16777216" "$T/stdout" && pass "plan --dp 2^24 is planned" ||
  fail "plan --dp 2^24: exit $CODE: $ERR"

# ---- valid but odd: a warning on stderr, the plan on stdout, exit 0 ----
# warn "what" 'expected stderr' args...: exit 0, stdout not empty.
warn() {
  local what=$1 want=$2
  shift 2
  run "$@"
  if [ "$CODE" -eq 0 ] && [ "$ERR" = "$want" ] && [ -s "$T/stdout" ]; then
    pass "$what"
  else
    fail "$what: exit $CODE, stderr '$ERR', want '$want'"
  fi
}
# seed: 2 + 4 + 4 + 1 + 1 = 12 rows; unpadded has no padding.
warn "dp 13 > 12 rows" "dbuf-shard: warning: dp 13 is more than the 12 rows of $T/seed: at least 1 rank holds no row (valid, but probably not what was meant)" \
  plan --shapes "$T/seed" --layout unpadded --dp 13
warn "dp 64 > 12 rows" "dbuf-shard: warning: dp 64 is more than the 12 rows of $T/seed: at least 52 ranks hold no row (valid, but probably not what was meant)" \
  plan --shapes "$T/seed" --layout unpadded --dp 64 --format json
warn "dp 12 = rows: no warning" "" plan --shapes "$T/seed" --layout unpadded --dp 12
# One 1-D tensor of 17 elements, padded over 4 ranks: ceil(17 / 4) = 5 a rank,
# 20 in all, 3 of them padding: 15% > 10%.  18 elements: 2 of 20, exactly
# 10%, not above.
echo "a 17" >"$T/a17"
echo "a 18" >"$T/a18"
warn "padding 15%" "dbuf-shard: warning: padding is 15.00% of the buffer (3 of 20 elements); --layout unpadded has none" \
  plan --shapes "$T/a17" --dp 4
warn "padding 10%: no warning" "" plan --shapes "$T/a18" --dp 4
# The Megatron-FSDP seed at dp 5: 60 elements for 52 (see test-plan.sh), 13.33%.
warn "seed padded at dp 5" "dbuf-shard: warning: padding is 13.33% of the buffer (8 of 60 elements); --layout unpadded has none" \
  plan --shapes "$T/seed" --dp 5 --format diagram

# With --node-size, plan also builds the layout without it to compare: its
# warnings are not the user's (they used to print twice).
printf 'a 2x4\nb 2x4\n' >"$T/r4"
warn "dp 8 > 4 rows with --node-size: each warning once" "dbuf-shard: warning: dp 8 is more than the 4 rows of $T/r4: at least 4 ranks hold no row (valid, but probably not what was meant)
dbuf-shard: warning: padding is 50.00% of the buffer (16 of 32 elements); --layout unpadded has none" \
  plan --shapes "$T/r4" --dp 8 --node-size 4

# ---- what a one-machine user needs, in the README's one-host MPI section
# and in the man page's ENVIRONMENT and EXAMPLES ----
first=$(sed -n '/^## One-host MPI environment/,/^## Building by hand/p' "$SRC/README.md")
env_man=$(sed -n '/^\.SH ENVIRONMENT/,/^\.SH EXIT STATUS/p' "$SRC/dbuf-shard.1")
ex_man=$(sed -n '/^\.SH EXAMPLES/,/^\.SH SEE ALSO/p' "$SRC/dbuf-shard.1")
for w in OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo \
         OMPI_MCA_oob_tcp_if_include=lo --oversubscribe dbuf-fake-rsh; do
  grep -qF -- "$w" <<<"$first" && pass "README one-host MPI section has $w" ||
    fail "README: $w is not in the one-host MPI section"
  esc=$(sed 's/-/\\-/g' <<<"$w")
  grep -qF -e "$w" -e "$esc" <<<"$env_man$ex_man" && pass "man ENVIRONMENT/EXAMPLES: $w" ||
    fail "man: $w is in neither ENVIRONMENT nor EXAMPLES"
done

# ---- run: the cases that start MPI (a singleton, or mpirun) ----
# Open MPI's dlopen'ed components leave allocations LeakSanitizer cannot
# name (see scripts/test.sh): in a sanitizer build, leak checks stop here.
if [ -n "${DBUF_TEST_SANITIZERS:-}" ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
if [ "$WITH_MPI" = yes ]; then
  usage "run --no-materialise" "dbuf-shard: run: unknown option '--no-materialise'; did you mean '--no-materialize'? (see 'dbuf-shard run --help')" \
    run --no-materialise
  usage "run --dpp: two as close" "dbuf-shard: run: unknown option '--dpp'; did you mean '--dp' or '--pp'? (see 'dbuf-shard run --help')" \
    --dpp 4
fi
if [ "$WITH_MPI" = yes ]; then
  # What getopt takes for --help is help too (it used to end with exit 255
  # and no word): a prefix of --help, or -h inside a cluster of flags.
  for h in --he -qh; do
    run run $h
    if [ "$CODE" -eq 0 ] && [ -z "$ERR" ] && cmp -s "$T/stdout" "$GOLDEN/help-run.txt"; then
      pass "run $h prints run's help"
    else
      fail "run $h: exit $CODE, stderr '$ERR', stdout not run's help"
    fi
  done
  # Outside mpirun, run first says it is one rank (tests/mpi/test-run.sh).
  single="dbuf-shard: running as a single rank (started without mpirun); start more with 'mpirun -np 8 dbuf-shard'"
  fast "run --dp 2^31-1 (rank 0 refuses it before planning)" "$single
dbuf-shard: rank 0: --dp 2147483647 $reason (16.0 GiB here) and the reports a line per rank" \
    run --dp 2147483647
fi

# ---- the README's two-node example, as written ----
# The line is taken from README.md; only the installed launcher's path and the
# program name are replaced by the build tree's.
readme_cmd=$(grep -E '^(\$ )?mpirun --mca plm_rsh_agent /usr/local/libexec/dbuf-shard/dbuf-fake-rsh ' "$SRC/README.md" |
  sed 's/^\$ //' | sort -u)
if [ "$(printf '%s\n' "$readme_cmd" | grep -c .)" -ne 1 ]; then
  fail "README: one two-node example, the same everywhere; found: $readme_cmd"
elif [ "$WITH_MPI" != yes ]; then
  echo "SKIP: README two-node example (built without MPI)"
elif [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || [ -z "${MPIRUN:-}" ]; then
  echo "SKIP: README two-node example (needs root for unshare --uts, and mpirun)"
else
  # The variables the README exports first (root, loopback), as it writes them.
  for v in $(sed -n 's/^export \(OMPI_[^#]*\).*/\1/p' "$SRC/README.md"); do
    case $v in OMPI_*=*) export "${v?}" ;; esac
  done
  agent=$(dirname "$DBUF_SHARD")/dbuf-fake-rsh
  [ -x "$agent" ] && pass "the fake-node launcher is built as $agent" || fail "no $agent"
  read -r -a words <<<"$readme_cmd"
  cmd=()
  for w in "${words[@]}"; do
    case $w in
      mpirun) cmd+=("$MPIRUN") ;;
      dbuf-shard) cmd+=("$DBUF") ;;
      /usr/local/libexec/dbuf-shard/dbuf-fake-rsh) cmd+=("$agent") ;;
      *) cmd+=("$w") ;;
    esac
  done
  t0=$SECONDS
  timeout 240 "${cmd[@]}" >"$T/stdout" 2>"$T/stderr"
  CODE=$?
  ERR=$(cat "$T/stderr")
  expect_code 0 "README two-node example ($((SECONDS - t0)) s)"
  expect_out_has "PASS: every row owned exactly once on 8 ranks, every element verified" "README two-node example: PASS"
  # The report as the README shows it: nodeA holds ranks 0-3, nodeB 4-7.
  got=$(awk '/^Nodes \(2\):/ { on = 1; next } on && /^  [01] / { print $2, $3 } /^Tensors crossing/ { on = 0 }' "$T/stdout")
  [ "$got" = "$(printf 'nodeA 0-3\nnodeB 4-7')" ] && pass "README two-node example: nodeA 0-3, nodeB 4-7" ||
    fail "README two-node example: nodes '$got'"
fi

finish
