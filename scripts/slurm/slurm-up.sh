#!/bin/bash
# slurm-up.sh - bring up a private, loopback-only Slurm cluster on this machine.
#
# Usage: scripts/slurm/slurm-up.sh STATE_DIR [--nodes 1|2]
#
# Needs root. Installs Debian's munge, slurmctld, slurmd and slurm-client if
# missing (without letting apt start any daemon), starts munged if it is not
# already running, writes STATE_DIR/slurm.conf, starts one slurmctld and one
# slurmd per node, and waits (at most SLURM_UP_WAIT seconds, default 30) until
# sinfo shows every node idle.
#
# Nodes are named node1 (and node2). Each slurmd runs in its own UTS
# namespace whose hostname is its node name, and everything it starts (batch
# scripts, srun tasks, orted) inherits that namespace. So tasks see
# `hostname` = node name, MPI_Get_processor_name reports node1/node2, and Open
# MPI's shared-memory file names (which embed the hostname) do not collide
# between the two fake nodes. No wrapper around the program is needed.
#
# Clients (srun, sbatch, squeue, sinfo, scontrol, scancel) find this cluster
# through SLURM_CONF; after this script succeeds:
#   . STATE_DIR/slurm.env            # export SLURM_CONF=STATE_DIR/slurm.conf
#   srun -K -n 4 PROG                # or: SLURM_CONF=STATE_DIR/slurm.conf srun -K ...
# Stop it with scripts/slurm/slurm-down.sh STATE_DIR. On failure this script
# stops what it had started itself and exits 1 (2 for a usage error).
#
# Ports: SlurmctldPort = SLURM_UP_PORT_BASE (default 17000), node N listens on
# SLURM_UP_PORT_BASE + N. Use another base to run two clusters at once.
#
# PIDs of the daemons this script started are recorded one per line as
# "NAME PID" in STATE_DIR/pids (munged only if this script started it), and
# each node's UTS namespace as "NODE uts:[INODE]" in STATE_DIR/uts.
set -euo pipefail

prog=slurm-up.sh
here=$(cd "$(dirname "$0")" && pwd)

usage() {
    echo "usage: $prog STATE_DIR [--nodes 1|2]"
}
die() { echo "$prog: $*" >&2; exit 1; }

state=""
nnodes=1
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --nodes) [ $# -ge 2 ] || { usage >&2; exit 2; }; nnodes=$2; shift 2 ;;
        --nodes=*) nnodes=${1#--nodes=}; shift ;;
        -*) echo "$prog: unknown option '$1'" >&2; usage >&2; exit 2 ;;
        *) [ -z "$state" ] || { usage >&2; exit 2; }; state=$1; shift ;;
    esac
done
[ -n "$state" ] || { usage >&2; exit 2; }
case $nnodes in 1|2) ;; *) echo "$prog: --nodes must be 1 or 2, not '$nnodes'" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || die "must run as root (slurmd runs tasks as root and needs unshare)"

mkdir -p "$state"
state=$(cd "$state" && pwd)
conf=$state/slurm.conf
port_base=${SLURM_UP_PORT_BASE:-17000}
wait_s=${SLURM_UP_WAIT:-30}

if [ -s "$state/pids" ]; then
    while read -r _ pid; do
        if kill -0 "$pid" 2>/dev/null; then
            die "$state already has running daemons (pid $pid); run slurm-down.sh $state first"
        fi
    done < "$state/pids"
fi

# On failure, stop whatever this script started (recorded in $state/pids).
on_exit() {
    local rc=$?
    if [ "$rc" -ne 0 ] && [ -s "$state/pids" ]; then
        echo "$prog: failed; stopping the daemons it started" >&2
        "$here/slurm-down.sh" "$state" >&2 || true
    fi
}
trap on_exit EXIT

### 1. packages ###############################################################

pkgs=(munge slurmctld slurmd slurm-client)
policy=/usr/sbin/policy-rc.d
policy_saved=""
policy_ours=0

# Undo the policy-rc.d change: remove ours, put back a saved one.
restore_policy() {
    if [ "$policy_ours" -eq 1 ]; then rm -f "$policy"; policy_ours=0; fi
    if [ -n "$policy_saved" ]; then mv -f "$policy_saved" "$policy"; policy_saved=""; fi
}

# Make invoke-rc.d refuse to start daemons (exit 101) while apt runs: without
# systemd the packages' init scripts would start slurmd/slurmctld/munged with
# /etc/slurm/slurm.conf. A pre-existing policy-rc.d that already refuses is
# left untouched; any other is moved aside and put back afterwards.
deny_starts() {
    if [ -e "$policy" ] || [ -L "$policy" ]; then
        local rc=0
        "$policy" slurmd start >/dev/null 2>&1 || rc=$?
        [ "$rc" -eq 101 ] && return 0
        policy_saved=$policy.slurm-up.$$
        mv "$policy" "$policy_saved"
    fi
    printf '#!/bin/sh\n# temporary, written by %s: no daemon starts during apt\nexit 101\n' "$prog" > "$policy"
    chmod 0755 "$policy"
    policy_ours=1
}

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "$prog: installing ${missing[*]}"
    trap 'restore_policy; on_exit' EXIT
    deny_starts
    export DEBIAN_FRONTEND=noninteractive
    apt=(apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold)
    if ! timeout 600 "${apt[@]}" "${missing[@]}" >"$state/apt.log" 2>&1; then
        # A fresh machine may have no or stale package lists.
        timeout 300 apt-get update -q >>"$state/apt.log" 2>&1 || true
        timeout 600 "${apt[@]}" "${missing[@]}" >>"$state/apt.log" 2>&1 ||
            { tail -n 20 "$state/apt.log" >&2; die "apt-get install ${missing[*]} failed (log: $state/apt.log)"; }
    fi
    restore_policy
    trap on_exit EXIT
fi

### 2. munge ##################################################################

record() { echo "$1 $2" >> "$state/pids"; }

munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

# Wait up to $1 tenths of a second for a non-empty pid file $2; print the pid.
wait_pidfile() {
    local i
    for ((i = 0; i < $1; i++)); do
        if [ -s "$2" ]; then cat "$2"; return 0; fi
        sleep 0.1
    done
    return 1
}

if munge_ok; then
    echo "$prog: munged already running; using it (slurm-down.sh will leave it running)"
else
    if [ ! -s /etc/munge/munge.key ]; then
        install -d -o munge -g munge -m 0700 /etc/munge
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    # /run/munge normally comes from systemd-tmpfiles; make it by hand.
    install -d -o munge -g munge -m 0755 /run/munge
    rm -f /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged
    pid=$(wait_pidfile 50 /run/munge/munged.pid) || die "munged wrote no pid file"
    record munged "$pid"
    for ((i = 0; i < 50; i++)); do munge_ok && break; sleep 0.1; done
    munge_ok || die "munged (pid $pid) does not answer: munge -n | unmunge fails"
fi

### 3. slurm.conf #############################################################

rm -rf "$state/ctld" "$state/spool" "$state/tmp" "$state/run" "$state/uts"
mkdir -p "$state/ctld" "$state/log" "$state/run"
for ((n = 1; n <= nnodes; n++)); do
    # Per-node spool and TmpFS: PMIx puts its server directory and sockets
    # there, and two slurmd sharing one would collide (fresh dirs = no stale
    # PMIx sockets from an earlier run).
    mkdir -p "$state/spool/node$n" "$state/tmp/node$n"
done

{
    cat <<EOF
# Written by scripts/slurm/$prog: a loopback-only test cluster.
# Clients: export SLURM_CONF=$conf
ClusterName=dbuf
SlurmctldHost=localhost
SlurmctldAddr=127.0.0.1
SlurmctldPort=$port_base
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Trust CPUs=8 from this file: with the real 2 CPUs a job asking for
# 8 tasks would pend forever instead of failing.
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=5
InactiveLimit=0
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/%n
TmpFS=$state/tmp/%n
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd-%n.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
EOF
    for ((n = 1; n <= nnodes; n++)); do
        echo "NodeName=node$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port_base + n)) CPUs=8 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$conf"
echo "export SLURM_CONF=$conf" > "$state/slurm.env"
export SLURM_CONF=$conf

### 4. daemons ################################################################

# die_log NAME LOG: stop with the end of a daemon's log.
die_log() {
    tail -n 3 "$2" >&2 2>/dev/null || true
    die "$1 did not start (log: $2; \"Address already in use\": another cluster? set SLURM_UP_PORT_BASE)"
}

# started NAME PIDFILE LOG: wait for the pid file, check the daemon stayed up.
started() {
    local pid
    pid=$(wait_pidfile 100 "$2") || die_log "$1" "$3"
    sleep 0.2
    kill -0 "$pid" 2>/dev/null || die_log "$1" "$3"
    record "${1%% *}" "$pid"
    echo "$pid"
}

slurmctld -c -f "$conf"   # -c: a new cluster, ignore any saved state
started slurmctld "$state/run/slurmctld.pid" "$state/log/slurmctld.log" >/dev/null

for ((n = 1; n <= nnodes; n++)); do
    # The new UTS namespace (hostname nodeN) is inherited by slurmd's children.
    # shellcheck disable=SC2016 # expanded by the inner sh
    unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "node$n" \
        slurmd -f "$conf" -N "node$n"
    pid=$(started "slurmd node$n" "$state/run/slurmd-node$n.pid" "$state/log/slurmd-node$n.log")
    # slurm-down.sh ends the jobs' leftovers (slurmstepd, tasks) by namespace.
    echo "node$n $(readlink "/proc/$pid/ns/uts")" >> "$state/uts"
done

### 5. wait until every node is idle ##########################################

deadline=$((SECONDS + wait_s))
while :; do
    states=$(timeout 10 sinfo -h -N -o '%N=%T' 2>/dev/null | sort -u | tr '\n' ' ') || states=""
    idle=$(grep -o '=idle' <<<"$states" | wc -l) || true
    [ "$idle" -eq "$nnodes" ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "$prog: nodes not idle after ${wait_s}s: ${states:-sinfo gave nothing}" >&2
        tail -n 5 "$state"/log/*.log >&2 || true
        die "Slurm did not come up"
    fi
    sleep 0.2
done
echo "$prog: up: $nnodes node(s) idle; SLURM_CONF=$conf"
