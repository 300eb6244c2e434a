#!/bin/bash
# Fault tests of the MPI service: one rank given other options, ranks that
# claim other builds, a rank that dies (with the launcher's abort-on-failure
# on and off), a rank slow to end after MPI_Finalize, a rank that cannot
# allocate or lock its memory, rank 0 failing on its input (a missing file,
# a named pipe), inputs that differ with --check-inputs, a --report folder
# that does not exist, a --report FIFO that nobody reads, and rank 0's
# stdout on a full device.  Each must end EVERY rank non-zero (linger: that
# rank only) within 20 s with one line naming the rank or the option and
# the cause; no rank may wait forever.
# (Healthy, each case takes under a second here; 20 s leaves room for a
# loaded host, and any wait on a watchdog or a timeout is far longer.)
# Every mpirun runs under timeout.  Expected values come from the options
# given here or from `dbuf-shard plan` (serial, no MPI).
#
# Where every rank runs to its end, the time checked is the ranks' own: from
# the last rank's start to the last rank's exit.  mpirun's start-up comes
# before it, and mpirun's return comes later and varies: once a rank exits
# non-zero, Open MPI 4.1 signals the ranks still there and sleeps
# odls_base_sigkill_timeout (1 s) before it kills them.  Here that adds 0-2 s
# to a 0.4 s job (10-12 s with the parameter at 6); one CI run saw a job of
# this script take 12 s, on a host where make check took 2.4 times as long
# as usual.
set -u
# shellcheck source=tests/mpi/lib.sh
. "$(dirname "$0")/lib.sh"
# Every rank must have ended within LIMIT seconds (lib.sh: 20, stretched
# by DBUF_TEST_TIME_SCALE for slow builds).

# The rank wrapper: the ranks listed in ODD_RANKS run dbuf-shard with
# ODD_ARGS (after ODD_SETUP, e.g. a ulimit, and under ODD_PREFIX, e.g.
# setpriv), the others with BASE_ARGS; each writes its exit code to
# $T/exit.RANK and the times it started and ended (date +%s%N) to
# $T/start.RANK and $T/end.RANK, so the test sees every rank's status and
# time, not only mpirun's.
cat >"$T/wrap.sh" <<'EOF'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:?not under Open MPI}
date +%s%N >"$WRAP_DIR/start.$r"
prefix=
case " $ODD_RANKS " in
*" $r "*)
  eval "set -- $ODD_ARGS"
  eval "${ODD_SETUP:-:}"
  prefix=${ODD_PREFIX:-}
  ;;
*) eval "set -- $BASE_ARGS" ;;
esac
# shellcheck disable=SC2086
$prefix "$DBUF" "$@"
code=$?
date +%s%N >"$WRAP_DIR/end.$r"
echo $code >"$WRAP_DIR/exit.$r"
EOF
chmod +x "$T/wrap.sh"
export DBUF WRAP_DIR="$T"

# wrapped NP: runs the wrapper on NP ranks (mpirun cut after WRAP_SECS, 60
# by default); sets CODE and JOB_SECS (mpirun's exit code and whole
# seconds), SECS (whole seconds from the last rank's start to the last
# rank's exit; a rank that wrote no time counts as the whole job), ERR
# (dbuf-shard's lines only), EXITS (every rank's exit code, "-" for a rank
# that wrote none).
wrapped() {
  local np=$1 r t0 t begin last
  rm -f "$T"/exit.* "$T"/start.* "$T"/end.*
  t0=$(date +%s%N)
  timed mpirun_in "${WRAP_SECS:-60}" -np "$np" "$T/wrap.sh" >"$T/stdout" 2>"$T/stderr.all"
  JOB_SECS=$SECS
  grep '^dbuf-shard: ' "$T/stderr.all" >"$T/stderr"
  ERR=$(cat "$T/stderr")
  EXITS=
  begin=$t0 last=$t0
  for r in $(seq 0 $((np - 1))); do
    EXITS="$EXITS $(cat "$T/exit.$r" 2>/dev/null || echo -)"
    t=$(cat "$T/start.$r" 2>/dev/null || echo "$t0")
    [ "$t" -gt "$begin" ] && begin=$t
    t=$(cat "$T/end.$r" 2>/dev/null || date +%s%N)
    [ "$t" -gt "$last" ] && last=$t
  done
  EXITS=${EXITS# }
  SECS=$(((last - begin) / 1000000000))
}
# every_rank WANT_CODE WANT_LINE NAME: each rank exited WANT_CODE, in time,
# mpirun was not cut by its timeout, and dbuf-shard printed exactly WANT_LINE.
every_rank() {
  local want_exits
  want_exits=$(for _ in $EXITS; do printf '%s ' "$1"; done)
  if [ "$EXITS " = "$want_exits" ] && [ "$SECS" -le "$LIMIT" ] && [ "$CODE" -ne 124 ] &&
    [ "$ERR" = "$2" ]; then
    pass "$3: every rank exit $1 in ${SECS}s (mpirun ${JOB_SECS}s): $ERR"
  else
    fail "$3: rank exits '$EXITS' (want $1 each) in ${SECS}s, mpirun $CODE in ${JOB_SECS}s, stderr '$ERR', want '$2'"
    sed 's/^/    /' "$T/stderr.all" | head -20
  fi
}

cat >"$T/small.shapes" <<'EOF'
embed 64x48
norm0 48
q 48x48
empty 0x8
up 96x48
down 48x96
head 40x48
EOF
BASE="-q --shapes $T/small.shapes"

# --- Options that differ between ranks ------------------------------------
# odd_option NAME OPTION... then the expected line: rank 2 of 3 adds OPTION.
odd_option() {
  local want=${*: -1}
  BASE_ARGS=$BASE ODD_RANKS=2 ODD_ARGS="$BASE ${*:1:$#-1}" wrapped 3
  every_rank 2 "$want" "rank 2 with ${*:1:$#-1}"
}
D="dbuf-shard: option"
# dp: 3 by default (the rank count); 6 is a multiple, 2000000000 far past the layout.
odd_option --dp 6 "$D --dp differs between ranks: rank 0 has 3, rank 2 has 6"
odd_option --dp 2000000000 "$D --dp differs between ranks: rank 0 has 3, rank 2 has 2000000000"
odd_option --dtype fp32 "$D --dtype differs between ranks: rank 0 has bf16, rank 2 has fp32"
# (with --check-inputs the file is compared by content, not name: --shapes differs too)
odd_option --check-inputs "$D --check-inputs differs between ranks: rank 0 has off, rank 2 has on (and 1 more value differs)"
odd_option --no-materialize "$D --no-materialize differs between ranks: rank 0 has off, rank 2 has on"
odd_option --layout unpadded "$D --layout differs between ranks: rank 0 has padded, rank 2 has unpadded"
odd_option --block-size 2 "$D --block-size differs between ranks: rank 0 has 1, rank 2 has 2"
odd_option --owners "$T/owners" "$D --owners differs between ranks: rank 0 has (not given), rank 2 has $T/owners"
odd_option --align-bytes 64 "$D --align-bytes differs between ranks: rank 0 has 0, rank 2 has 64"
odd_option --ranks-per-node 2 "$D --ranks-per-node differs between ranks: rank 0 has 0, rank 2 has 2"
odd_option --membind interleave "$D --membind differs between ranks: rank 0 has local, rank 2 has interleave"
odd_option --membind-strict "$D --membind-strict differs between ranks: rank 0 has off, rank 2 has on"
odd_option --bind core "$D --bind differs between ranks: rank 0 has none, rank 2 has core"
odd_option --lock "$D --lock differs between ranks: rank 0 has off, rank 2 has on"
odd_option --report "$T/r.json" "$D --report differs between ranks: rank 0 has (not given), rank 2 has $T/r.json"
odd_option --timeout 30 "$D --timeout differs between ranks: rank 0 has 600, rank 2 has 30"
# An option only rank 2 cannot parse: rank 0 parsed its own, so it prints
# rank 2's message (it used to end every rank with exit 2 and no word).
odd_option --dtype xyz "dbuf-shard: rank 2: --dtype: unknown type 'xyz' (bf16, fp16, fp32, fp64, fp8-e4m3 (fp8), fp8-e5m2, fp8-e8m0, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool, c64)"
odd_option --no-such-option "dbuf-shard: rank 2: run: unknown option '--no-such-option' (see 'dbuf-shard run --help')"
# Another input source: --shapes is the first option that differs, --model the second.
BASE_ARGS=$BASE ODD_RANKS=2 ODD_ARGS="-q --model llama-3.2-1b" wrapped 3
every_rank 2 "$D --shapes differs between ranks: rank 0 has $T/small.shapes, rank 2 has (not given) (and 1 more value differs)" \
  "rank 2 with --model instead of --shapes"
BASE_ARGS=$BASE ODD_RANKS=2 ODD_ARGS="-q --shapes $T/other.shapes" wrapped 3
every_rank 2 "$D --shapes differs between ranks: rank 0 has $T/small.shapes, rank 2 has $T/other.shapes" \
  "rank 2 with another --shapes"
# Two ranks differ: both named.
BASE_ARGS=$BASE ODD_RANKS="2 3" ODD_ARGS="$BASE --dtype fp64" wrapped 4
every_rank 2 "$D --dtype differs between ranks: rank 0 has bf16, rank 2 has fp64 (ranks 2-3 differ from rank 0)" \
  "ranks 2-3 with --dtype fp64"
# The values in effect are compared: defaults given explicitly agree.
BASE_ARGS=$BASE ODD_RANKS=1 ODD_ARGS="$BASE --dp 3 --layout padded --dtype bf16 --timeout 600 --membind local" wrapped 3
every_rank 0 "" "rank 1 giving the defaults explicitly"
# -q only silences progress: it may differ.
BASE_ARGS=$BASE ODD_RANKS=1 ODD_ARGS="--shapes $T/small.shapes" wrapped 2
every_rank 0 "" "rank 1 without -q"
# --- Ranks that run different builds ----------------------------------------
# DBUF_FAULT=version:R, wire:R and options:R make rank R claim another
# build: the next patch version, the next wire format version, or one more
# option compared (as a build with a longer option list would).  The ranks
# compare their builds before anything else: every rank exits 2, and one
# line names rank 0's build and that of the lowest rank that differs.
VERSION=$("$DBUF" --version | sed -n 's/^dbuf-shard //p')
NEXT=$(awk -F. '{ printf "%d.%d.%d", $1, $2, $3 + 1 }' <<<"$VERSION")
WIRE=$(sed -n 's/^#define DBUF_WIRE_VERSION \([0-9]*\)$/\1/p' "${top_srcdir:?}/include/dbuf/wire.h")
PLAN=$(sed -n 's/^#define DBUF_WIRE_PLAN_VERSION \([0-9]*\)$/\1/p' "$top_srcdir/include/dbuf/wire.h")
B="dbuf-shard: the ranks run different builds"
SAME="every rank must run the same dbuf-shard"
# build_of R: the build the last job's line names for rank R.
build_of() { sed -n "s/^$B: .*rank $1 has \([^,]*, [^,]*, [^)]*)\).*/\1/p" <<<"$ERR"; }
DBUF_FAULT=version:2 BASE_ARGS=$BASE ODD_RANKS=none ODD_ARGS='' wrapped 3
OURS=$(build_of 0)
if [[ "$OURS" =~ ^"$VERSION (wire $WIRE, plan $PLAN, options "[0-9a-f]{8}")"$ ]]; then
  pass "this build named as '$OURS'"
else
  fail "this build named as '$OURS', want '$VERSION (wire $WIRE, plan $PLAN, options XXXXXXXX)'"
fi
every_rank 2 "$B: rank 0 has $OURS, rank 2 has ${OURS/#$VERSION/$NEXT}; $SAME" \
  "rank 2 claims version $NEXT"
DBUF_FAULT=wire:2 BASE_ARGS=$BASE ODD_RANKS=none ODD_ARGS='' wrapped 3
every_rank 2 "$B: rank 0 has $OURS, rank 2 has ${OURS/(wire $WIRE,/(wire $((WIRE + 1)),}; $SAME" \
  "rank 2 claims wire format $((WIRE + 1))"
DBUF_FAULT=options:2 BASE_ARGS=$BASE ODD_RANKS=none ODD_ARGS='' wrapped 3
theirs=$(build_of 2)
if [[ "$theirs" =~ ^"$VERSION (wire $WIRE, plan $PLAN, options "[0-9a-f]{8}")"$ ]] &&
  [ "$theirs" != "$OURS" ]; then
  every_rank 2 "$B: rank 0 has $OURS, rank 2 has $theirs; $SAME" "rank 2 compares one more option"
else
  fail "rank 2 compares one more option: rank 2's build '$theirs', want options other than in '$OURS'; exits '$EXITS', stderr '$ERR'"
fi
# Rank 0 differs from every other rank: rank 1 is named.
DBUF_FAULT=version:0 BASE_ARGS=$BASE ODD_RANKS=none ODD_ARGS='' wrapped 3
every_rank 2 "$B: rank 0 has ${OURS/#$VERSION/$NEXT}, rank 1 has $OURS; $SAME" "rank 0 claims version $NEXT"
# Two ranks differ: the lowest is named.
DBUF_FAULT=options:2,version:1 BASE_ARGS=$BASE ODD_RANKS=none ODD_ARGS='' wrapped 3
every_rank 2 "$B: rank 0 has $OURS, rank 1 has ${OURS/#$VERSION/$NEXT}; $SAME" \
  "ranks 1 and 2 claim other builds"
# The same build everywhere (the fault names no rank of the job): the run goes on.
DBUF_FAULT=version:3,wire:3,options:3 BASE_ARGS=$BASE ODD_RANKS=none ODD_ARGS='' wrapped 3
every_rank 0 "" "the same build on every rank"

# Another command on one rank (its help, a serial command): that rank ends
# without starting MPI, and the others wait in MPI_Init, which no MPI call
# can end: their watchdog does (phase MPI_Init).  Ranks 0 and 2 start
# TIME_SCALE seconds late, so rank 1 has ended before any rank is in MPI_Init
# (else mpirun may see it end "improperly" and end the job itself); abort on
# failure off, so each rank's own watchdog must end it.  (Before the
# watchdog covered MPI_Init, they waited there until timeout cut mpirun.)
for odd in "--help" "models" "-q --he"; do
  OMPI_MCA_orte_abort_on_non_zero_status=0 BASE_ARGS="$odd" ODD_RANKS="0 2" ODD_SETUP="sleep $TIME_SCALE" \
    ODD_ARGS="$BASE --timeout 3" wrapped 3
  want="dbuf-shard: rank 0: timeout after 3 s in phase MPI_Init (no progress: another rank may have died or hung while the launcher keeps the job; --timeout sets the limit)"
  if [ "$EXITS" = "1 0 1" ] && [ "$SECS" -le "$LIMIT" ] && [ "$CODE" -ne 124 ] &&
    [ "$(grep -c 'timeout after 3 s in phase MPI_Init' "$T/stderr")" = 2 ] && grep -qxF "$want" "$T/stderr"; then
    pass "rank 1 given '$odd': ranks 0 and 2 ended by their watchdogs in MPI_Init in ${SECS}s"
  else
    fail "rank 1 given '$odd': exits '$EXITS' (want 1 0 1) in ${SECS}s, mpirun $CODE, stderr '$ERR'"
  fi
done

# --- A rank that dies -------------------------------------------------------
# With the launcher's abort on failure (the default): mpirun ends the job and
# names the rank.
# shellcheck disable=SC2086 # BASE: options, split into words
DBUF_FAULT=kill:1 timed mpirun_in 60 -np 3 "$DBUF" $BASE >"$T/stdout" 2>"$T/stderr.all"
if [ "$CODE" -ne 0 ] && [ "$CODE" -ne 124 ] && [ "$SECS" -le "$LIMIT" ] &&
  grep -q "process rank 1 with PID .* exited on signal 9" "$T/stderr.all"; then
  pass "rank 1 killed, abort on: job ended with $CODE in ${SECS}s, rank 1 named by mpirun"
else
  fail "rank 1 killed, abort on: exit $CODE after ${SECS}s"
  sed 's/^/    /' "$T/stderr.all" | head -20
fi
# With it off, only the watchdog ends the others: each names itself and the phase.
# shellcheck disable=SC2086 # BASE: options, split into words
DBUF_FAULT=kill:1 timed mpirun_in 60 --mca orte_abort_on_non_zero_status 0 -np 3 \
  "$DBUF" $BASE --timeout 3 >"$T/stdout" 2>"$T/stderr.all"
grep '^dbuf-shard: ' "$T/stderr.all" | sort >"$T/stderr"
if [ "$CODE" -ne 0 ] && [ "$CODE" -ne 124 ] && [ "$SECS" -le "$LIMIT" ] &&
  grep -q "^dbuf-shard: rank [02]: timeout after 3 s in phase materialization (" "$T/stderr" &&
  ! grep -q "^dbuf-shard: rank 1:" "$T/stderr"; then
  pass "rank 1 killed, abort off: the watchdog ended the job ($CODE) in ${SECS}s: $(head -1 "$T/stderr")"
else
  fail "rank 1 killed, abort off, --timeout 3: exit $CODE after ${SECS}s"
  sed 's/^/    /' "$T/stderr.all" | head -20
fi

# Killed inside MPI_Init, abort on failure off: depending on when rank 1
# dies, mpirun ends the other ranks itself (rank 1 "exiting improperly"),
# or they wait in MPI_Init and each one's watchdog ends it (exit 1).  Either
# way no rank is left: checked are the ranks' exits and that no process of
# the job is left within LIMIT.  mpirun itself may not return, even once
# every rank has ended (Open MPI 4.1.4's launcher; a plain job whose process
# kills itself hangs it too): it is cut after 10 s here.
tmo=$((3 * TIME_SCALE))
odd="--shapes $T/small.shapes --timeout $tmo"
OMPI_MCA_orte_abort_on_non_zero_status=0 WRAP_SECS=$((10 * TIME_SCALE)) BASE_ARGS="-q $odd" \
  ODD_RANKS=1 ODD_PREFIX="timeout -s KILL 0.1" ODD_ARGS="-q $odd" wrapped 3
left=1
for _ in $(seq 1 $((2 * LIMIT - 2 * JOB_SECS))); do
  pgrep -f -- "$odd" >/dev/null || { left=0; break; }
  sleep 0.5
done
# Ranks 0 and 2: each exit 1 with its watchdog's line, or ended by mpirun
# (no exit written, and mpirun's "exiting improperly").
read -r e0 e1 e2 <<<"$EXITS"
own=0 ended=0 bad=0
for e in "$e0" "$e2"; do
  case "$e" in 1) own=$((own + 1)) ;; -) ended=$((ended + 1)) ;; *) bad=1 ;; esac
done
[ "$(grep -c "^dbuf-shard: rank [02]: timeout after $tmo s in phase " "$T/stderr")" = "$own" ] || bad=1
[ "$ended" = 0 ] || grep -q "exiting improperly" "$T/stderr.all" || bad=1
if [ "$e1" = 137 ] && [ "$bad" = 0 ] && [ "$left" = 0 ]; then
  pass "rank 1 killed in MPI_Init, abort off: $own ended by their watchdogs, $ended by mpirun (mpirun $([ "$CODE" = 124 ] && echo "did not return, cut at ${JOB_SECS}s" || echo "exit $CODE in ${JOB_SECS}s"))"
else
  fail "rank 1 killed in MPI_Init, abort off: exits '$EXITS' in ${SECS}s, processes left: $left, mpirun $CODE in ${JOB_SECS}s, stderr '$ERR'"
  sed 's/^/    /' "$T/stderr.all" | head -20
fi

# --timeout 0 disables the watchdog: then nothing ends the job (cut at 8 s here).
# shellcheck disable=SC2086 # BASE: options, split into words
DBUF_FAULT=kill:1 timed mpirun_in 8 --mca orte_abort_on_non_zero_status 0 -np 3 \
  "$DBUF" $BASE --timeout 0 >"$T/stdout" 2>"$T/stderr.all"
if [ "$CODE" -eq 124 ] && ! grep -q "timeout after" "$T/stderr.all"; then
  pass "rank 1 killed, abort off, --timeout 0: no watchdog, the job waits (cut by timeout 8)"
else
  fail "rank 1 killed, abort off, --timeout 0: exit $CODE, want 124 from timeout"
fi
for bad in -1 604801 x; do
  BASE_ARGS="$BASE --timeout $bad" ODD_RANKS=none ODD_ARGS='' wrapped 2
  if [ "$bad" = x ]; then want="dbuf-shard: --timeout: 'x' is not an integer"; else
    want="dbuf-shard: --timeout: $bad is out of range [0, 604800]"; fi
  every_rank 2 "$want" "--timeout $bad"
done

# --- Memory -----------------------------------------------------------------
# The default model on 2 ranks: rank 1 holds [rank_offsets[1], size) x 2 bytes.
"$DBUF" plan --dp 2 --format json >"$T/plan2.json"
bytes1=$(jq '(.size - .rank_offsets[1]) * 2' "$T/plan2.json")
# Under AddressSanitizer (DBUF_TEST_SANITIZERS, set by scripts/test.sh) the
# shadow memory needs the address space that ulimit -v takes away (ASan
# aborts at start-up), and ASan's runtime intercepts mlock(2) as a no-op that
# succeeds, so no limit can make it fail: these two run in the plain build
# only.
if [ -n "${DBUF_TEST_SANITIZERS:-}" ]; then
  echo "SKIP: ulimit -v and ulimit -l cases under a sanitizer build"
else
  BASE_ARGS="-q" ODD_RANKS=1 ODD_ARGS="-q" ODD_SETUP="ulimit -v 1000000" wrapped 2
  every_rank 1 "dbuf-shard: rank 1: cannot allocate a segment of $bytes1 bytes: Cannot allocate memory" \
    "rank 1 cannot allocate (ulimit -v 1000000)"
  # mlock forbidden on rank 1: RLIMIT_MEMLOCK 0 (root also loses CAP_IPC_LOCK).
  "$DBUF" plan --shapes "$T/small.shapes" --dp 2 --format json >"$T/plan-small2.json"
  lock1=$(jq '(.size - .rank_offsets[1]) * 2' "$T/plan-small2.json")
  prefix=
  [ "$(id -u)" -eq 0 ] && prefix="setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock"
  BASE_ARGS="$BASE --lock" ODD_RANKS=1 ODD_ARGS="$BASE --lock" ODD_SETUP="ulimit -l 0" \
    ODD_PREFIX=$prefix wrapped 2
  every_rank 1 "dbuf-shard: rank 1: mlock of $lock1 bytes failed (Operation not permitted): RLIMIT_MEMLOCK is 0 bytes (hard limit 0 bytes) and the segment needs $lock1 bytes plus what this process already locked; raise it (ulimit -l) or grant CAP_IPC_LOCK" \
    "rank 1 may not lock (ulimit -l 0)"
fi

# A rank slow to end after MPI_Finalize (DBUF_FAULT=linger:R waits --timeout
# + 2 s there): the watchdog's shutdown phase ends that rank alone, exit 1,
# with its line, and makes no MPI call after MPI_Finalize (an MPI_Abort there
# makes Open MPI print "MPI_Abort() ... called after MPI_FINALIZE").
tmo=$((2 * TIME_SCALE))
DBUF_FAULT=linger:1 BASE_ARGS="$BASE --timeout $tmo" ODD_RANKS=none ODD_ARGS='' wrapped 2
if [ "$EXITS" = "0 1" ] && [ "$SECS" -le "$LIMIT" ] && [ "$CODE" -ne 124 ] &&
  [ "$ERR" = "dbuf-shard: rank 1: timeout after $tmo s in phase shutdown (no progress: another rank may have died or hung while the launcher keeps the job; --timeout sets the limit)" ] &&
  ! grep -q MPI_FINALIZE "$T/stderr.all"; then
  pass "rank 1 slow after MPI_Finalize: the watchdog ends it alone (exit 1) in ${SECS}s, no MPI call after MPI_Finalize"
else
  fail "rank 1 slow after MPI_Finalize: rank exits '$EXITS' (want 0 1) in ${SECS}s, mpirun $CODE, stderr '$ERR'"
  sed 's/^/    /' "$T/stderr.all" | head -20
fi

# --- Inputs -----------------------------------------------------------------
BASE_ARGS="-q --shapes $T/missing.shapes" ODD_RANKS=none ODD_ARGS='' wrapped 3
every_rank 2 "dbuf-shard: rank 0: $T/missing.shapes: cannot open: No such file or directory" \
  "rank 0 cannot read its input"
# A named pipe nobody writes: refused before it is opened (opening it for
# reading would block); --timeout 3 would end the job if it ever blocked again.
mkfifo "$T/fifo"
BASE_ARGS="-q --shapes $T/fifo --timeout 3" ODD_RANKS=none ODD_ARGS='' wrapped 3
every_rank 2 "dbuf-shard: rank 0: $T/fifo: not a regular file (a named pipe)" "a FIFO as input"
# --check-inputs: rank 2's copy of the file has other bytes.
cp "$T/small.shapes" "$T/other.shapes"
echo "extra 4x4" >>"$T/other.shapes"
BASE_ARGS="$BASE --check-inputs" ODD_RANKS=2 ODD_ARGS="-q --shapes $T/other.shapes --check-inputs" wrapped 3
line=$(head -1 "$T/stderr")
if [ "$EXITS" = "2 2 2" ] && [ "$SECS" -le "$LIMIT" ] && [ "$CODE" -ne 124 ] &&
  [ "$(wc -l <"$T/stderr")" -eq 1 ] &&
  [ "${line#dbuf-shard: input differs from rank 0\'s (}" != "$line" ] &&
  [ "${line% rank 2 (*}" != "$line" ]; then
  pass "check-inputs, rank 2 sees other bytes: every rank exit 2: $line"
else
  fail "check-inputs, rank 2 sees other bytes: exits '$EXITS' in ${SECS}s, mpirun $CODE in ${JOB_SECS}s, stderr '$ERR'"
fi

# --- Output -----------------------------------------------------------------
# --report into a folder that does not exist fails before the run (no plan printed).
BASE_ARGS="$BASE --report $T/no/such/dir/r.json" ODD_RANKS=none ODD_ARGS='' wrapped 3
every_rank 2 "dbuf-shard: --report $T/no/such/dir/r.json: cannot create: No such file or directory" \
  "--report into a missing folder"
if [ ! -s "$T/stdout" ]; then pass "--report into a missing folder: nothing run"; else fail "--report into a missing folder: the run went ahead"; fi
BASE_ARGS="$BASE --report $T" ODD_RANKS=none ODD_ARGS='' wrapped 2
every_rank 2 "dbuf-shard: --report $T: a directory; give a regular file, a character device or a FIFO" "--report naming a folder"
# A FIFO that nobody reads: refused before the run, not waited on at its end.
mkfifo "$T/report.fifo"
BASE_ARGS="$BASE --report $T/report.fifo" ODD_RANKS=none ODD_ARGS='' wrapped 2
every_rank 2 "dbuf-shard: --report $T/report.fifo: a FIFO with no reader" "--report on a FIFO with no reader"
# Rank 0's stdout on a full device: the report for people is lost, every rank exits 1.
BASE_ARGS=$BASE ODD_RANKS=0 ODD_ARGS=$BASE ODD_SETUP='exec >/dev/full' wrapped 2
every_rank 1 "dbuf-shard: <stdout>: write failed: No space left on device" "rank 0's stdout full"

# --- The watchdog off -------------------------------------------------------
# --timeout 0 (no watchdog thread) changes nothing for a run that goes well.
BASE_ARGS="$BASE --timeout 0" ODD_RANKS=none ODD_ARGS='' wrapped 2
every_rank 0 "" "--timeout 0 on a healthy run"

finish
