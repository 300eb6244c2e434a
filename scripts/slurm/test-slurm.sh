#!/bin/bash
# test-slurm.sh - integration test: run an MPI program under a real Slurm on
# this one machine, one node and then two nodes.
#
# Usage: scripts/slurm/test-slurm.sh BINARY
#
# BINARY is dbuf-shard (or a stand-in) and must accept `--report FILE` and write
#   {"verdict":"PASS","ranks":[{"rank":0,"host":"node1",...},...],
#    "nodes":[{"host":"node1","ranks":[0,1,2,3],...},...]}
# Needs root (installs packages, starts munged/slurmctld/slurmd). Installs jq
# from Debian if missing. Brings Slurm up in a mktemp folder and always stops
# it again, also when a step fails or the test is interrupted; the folder (logs,
# reports) is removed on success and kept, and named, on failure.
#
# Steps:
#   a. srun -K -n 4 BINARY --report R: 4 ranks, verdict PASS
#   b. sbatch dbuf-shard.sbatch with 8 tasks (srun launcher), polled with a
#      deadline (a job that pends is cancelled and FAILS): 8 ranks, PASS
#   c. the same with DBUF_LAUNCHER=mpirun
#   d. two-node Slurm: srun -K -N 2 -n 8 --ntasks-per-node=4: nodes node1 and
#      node2 with 4 ranks each
# Prints one PASS/FAIL line per step and "N passed, M failed"; exits 0 only
# when nothing failed (1 on failure, 2 on a usage error).
set -uo pipefail

prog=test-slurm.sh
here=$(cd "$(dirname "$0")" && pwd)

if [ $# -ne 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: $prog BINARY" >&2
    exit 2
fi
case $1 in
    */*) bin=$(realpath -e -- "$1" 2>/dev/null) || bin="" ;;
    *) bin=$(command -v -- "$1") || bin="" ;;
esac
if [ -z "$bin" ] || [ ! -x "$bin" ]; then echo "$prog: '$1' is not an executable program" >&2; exit 2; fi
[ "$(id -u)" -eq 0 ] || { echo "$prog: must run as root (it installs and starts Slurm)" >&2; exit 1; }

# Seconds: one srun, a batch job from submission to end, pending at most.
step_timeout=${TEST_SLURM_STEP_TIMEOUT:-60}
job_deadline=${TEST_SLURM_JOB_DEADLINE:-90}
pend_limit=${TEST_SLURM_PEND_LIMIT:-20}

npass=0
nfail=0
pass() { echo "PASS: $*"; npass=$((npass + 1)); }
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }

start=$SECONDS
state=$(mktemp -d /tmp/dbuf-slurm.XXXXXX) || { echo "$prog: mktemp failed" >&2; exit 1; }
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    "$here/slurm-down.sh" "$state" >/dev/null || { fail "slurm-down.sh $state"; }
    if [ "$nfail" -eq 0 ]; then
        rm -rf "$state"
    else
        echo "$prog: logs and reports kept in $state"
    fi
    echo "$npass passed, $nfail failed ($((SECONDS - start)) s)"
    [ "$nfail" -eq 0 ] || exit 1
}
trap cleanup EXIT
trap 'fail "interrupted"; exit 1' INT TERM HUP

# show_log FILE: the tail of a failed step's output, indented.
show_log() { tail -n 15 "$1" 2>/dev/null | sed 's/^/    /'; }

# check_report FILE NRANKS [NNODES]: verdict PASS, ranks 0..NRANKS-1 once
# each, and when NNODES is given, that many distinct nodes of NRANKS/NNODES
# ranks each whose host names match the ranks' entries.
check_report() {
    [ -s "$1" ] || { echo "no report $1"; return 1; }
    jq -e --argjson n "$2" --argjson nn "${3:-0}" '
        .verdict == "PASS"
        and ([.ranks[].rank] | sort) == [range($n)]
        and ($nn == 0 or (
            (.nodes | length) == $nn
            and ([.nodes[].host] | unique | length) == $nn
            and all(.nodes[]; (.ranks | length) == ($n / $nn))
            and ([.nodes[].ranks[]] | sort) == [range($n)]
        ))' "$1" >/dev/null || { echo "report $1 does not match:"; jq -c . "$1"; return 1; }
    if [ "${3:-0}" -ne 0 ]; then
        # Every rank's own host must be the host of the node that lists it.
        jq -e '(.ranks | map({(.rank | tostring): .host}) | add) as $h
               | [.nodes[] as $node | $node.ranks[] | $h[tostring] == $node.host] | all' \
            "$1" >/dev/null || { echo "report $1: rank hosts disagree with nodes"; return 1; }
        # The tensors crossing the node boundary: at least one (a padded
        # layout of 8 segments over 2 nodes always cuts between them unless
        # a tensor ends exactly there), each split over 2+ of the nodes with
        # rows that add up to the tensor's rows.
        jq -e '([.nodes[].host]) as $hosts
               | (.crossing | length) >= 1
                 and all(.crossing[];
                         (.sides | length) >= 2
                         and ([.sides[].host] | unique | length) >= 2
                         and all(.sides[]; .host as $x | $hosts | index($x) != null)
                         and ([.sides[].rows] | add) == .rows)' \
            "$1" >/dev/null || { echo "report $1: crossing tensors wrong:"; jq -c .crossing "$1"; return 1; }
    fi
}

# --- tools ---------------------------------------------------------------
if ! command -v jq >/dev/null; then
    echo "$prog: installing jq"
    export DEBIAN_FRONTEND=noninteractive
    timeout 300 apt-get install -y -q --no-install-recommends jq >"$state/apt-jq.log" 2>&1 || {
        timeout 300 apt-get update -q >>"$state/apt-jq.log" 2>&1
        timeout 300 apt-get install -y -q --no-install-recommends jq >>"$state/apt-jq.log" 2>&1
    } || { fail "install jq"; show_log "$state/apt-jq.log"; exit 1; }
fi

# Open MPI's TCP transports skip 127.0.0.0/8 unless told; srun passes these on.
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export SLURM_CONF=$state/slurm.conf
cd "$state" || exit 1

# --- one node --------------------------------------------------------------
if timeout 900 "$here/slurm-up.sh" "$state" --nodes 1 >"$state/up1.log" 2>&1; then
    pass "slurm-up.sh --nodes 1 ($(grep -c . "$state/pids") daemons)"

    # a. srun, 4 ranks
    if timeout -k 5 "$step_timeout" srun -K -n 4 "$bin" --report "$state/r1.json" >"$state/a.log" 2>&1 &&
        check_report "$state/r1.json" 4 >>"$state/a.log" 2>&1; then
        pass "srun -n 4: 4 ranks, verdict PASS"
    else
        fail "srun -n 4 (rc or report)"; show_log "$state/a.log"
    fi

    # b, c. the batch template, 8 tasks, with each launcher
    for launcher in srun mpirun; do
        log=$state/sbatch-$launcher.log
        jobid=$(DBUF_SHARD=$bin DBUF_LAUNCHER=$launcher DBUF_MPI_IF=lo DBUF_TIMEOUT=$step_timeout \
                timeout 30 sbatch --parsable --nodes=1 --ntasks-per-node=8 --time=00:03:00 \
                "$here/dbuf-shard.sbatch" 2>"$log") || jobid=""
        jobid=${jobid%%;*}
        if [ -z "$jobid" ]; then
            fail "sbatch ($launcher): not submitted"; show_log "$log"; continue
        fi
        # Poll: a job that pends longer than pend_limit, or runs past the
        # deadline, is cancelled and fails the step.
        t0=$SECONDS
        why=""
        while :; do
            st=$(timeout 10 squeue -h -j "$jobid" -o %T 2>/dev/null) || st="?"
            case $st in
                ""|COMPLETED|COMPLETING|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;;
                PENDING) [ $((SECONDS - t0)) -lt "$pend_limit" ] || { why="pending for ${pend_limit}s"; break; } ;;
            esac
            [ $((SECONDS - t0)) -lt "$job_deadline" ] || { why="not done after ${job_deadline}s"; break; }
            sleep 0.5
        done
        if [ -n "$why" ]; then
            timeout 10 scancel "$jobid"
            fail "sbatch ($launcher) job $jobid: $why, cancelled"; show_log "$state/dbuf-shard-$jobid.out"
            continue
        fi
        # COMPLETING means the script ended; wait briefly for the final state.
        for _ in $(seq 20); do
            info=$(timeout 10 scontrol -o show job "$jobid" 2>/dev/null) || info=""
            case $info in *JobState=COMPLETING*) sleep 0.25 ;; *) break ;; esac
        done
        jstate=$(grep -o 'JobState=[A-Z_]*' <<<"$info")
        jexit=$(grep -o ' ExitCode=[0-9:]*' <<<"$info")
        if [ "$jstate" = JobState=COMPLETED ] && [ "$jexit" = " ExitCode=0:0" ] &&
            check_report "$state/dbuf-shard-$jobid.json" 8 >>"$log" 2>&1; then
            pass "sbatch dbuf-shard.sbatch, 8 tasks via $launcher: job $jobid $jstate, 8 ranks, PASS ($((SECONDS - t0)) s)"
        else
            fail "sbatch ($launcher) job $jobid: ${jstate:-no state}${jexit}, or its report"
            show_log "$log"; show_log "$state/dbuf-shard-$jobid.out"
        fi
    done
else
    fail "slurm-up.sh --nodes 1"; show_log "$state/up1.log"
fi

# --- two nodes ---------------------------------------------------------------
if ! "$here/slurm-down.sh" "$state" >"$state/down1.log" 2>&1; then
    fail "slurm-down.sh before the two-node cluster"; show_log "$state/down1.log"
elif timeout 300 "$here/slurm-up.sh" "$state" --nodes 2 >"$state/up2.log" 2>&1; then
    pass "slurm-up.sh --nodes 2"
    # d. With CPUs=8 on each node, plain -N 2 -n 8 packs 7+1: ask for 4 a node.
    if timeout -k 5 "$step_timeout" srun -K -N 2 -n 8 --ntasks-per-node=4 "$bin" --report "$state/r2.json" \
            >"$state/d.log" 2>&1 &&
        check_report "$state/r2.json" 8 2 >>"$state/d.log" 2>&1; then
        pass "srun -N 2 -n 8: nodes $(jq -r '[.nodes[] | "\(.host):\(.ranks | length)"] | join(",")' "$state/r2.json"), crossing $(jq -r '[.crossing[].name] | join(",")' "$state/r2.json"), PASS"
    else
        fail "srun -N 2 -n 8 (rc or report)"; show_log "$state/d.log"
    fi
else
    fail "slurm-up.sh --nodes 2"; show_log "$state/up2.log"
fi
exit 0   # the EXIT trap tears down, prints the summary and sets the code
