#!/bin/bash
# slurm-down.sh - stop the Slurm cluster that slurm-up.sh started for STATE_DIR.
#
# Usage: scripts/slurm/slurm-down.sh STATE_DIR
#
# 1. cancels the cluster's jobs while slurmctld still runs (bounded wait);
# 2. stops the daemons recorded in STATE_DIR/pids, each only if that pid is
#    still the named program: slurmd and slurmctld together, then munged (only
#    recorded if slurm-up.sh started it); SIGKILL after SLURM_DOWN_WAIT seconds
#    (default 10);
# 3. ends whatever is left in the nodes' UTS namespaces (STATE_DIR/uts): a
#    job's slurmstepd and tasks outlive slurmd, and slurmstepd blocks SIGTERM.
#    Only processes started by this cluster's slurmd live in those namespaces.
# Then empties the records, so a second call does nothing. Safe for a state
# folder where nothing was started. Leaves logs and slurm.conf in place.
# Exit 0 when nothing recorded is left running, 1 otherwise.
set -euo pipefail

prog=slurm-down.sh
if [ $# -ne 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: $prog STATE_DIR" >&2
    exit 2
fi
state=$1
pids_file=$state/pids
uts_file=$state/uts
wait_s=${SLURM_DOWN_WAIT:-10}

[ -s "$pids_file" ] || [ -s "$uts_file" ] || exit 0
touch "$pids_file" "$uts_file"

# alive NAME PID: true if PID runs and is NAME (guards against pid reuse).
alive() {
    local comm
    comm=$(cat "/proc/$2/comm" 2>/dev/null) || return 1
    [ "$comm" = "$1" ]
}

# ns_pids NS: the pids of the processes in UTS namespace NS.
ns_pids() {
    find /proc/[0-9]*/ns/uts -maxdepth 0 -printf '%p %l\n' 2>/dev/null |
        awk -v ns="$1" '$2 == ns { split($1, f, "/"); print f[3] }' || true
}

# 3. End what is left in a node's namespace: SIGTERM, 2 s, SIGKILL.
sweep_ns() {
    local node=$1 ns=$2 pids i
    # Never the namespace of the machine itself or of this script.
    if [ -z "$ns" ] || [ "$ns" = "$(readlink /proc/1/ns/uts)" ] ||
        [ "$ns" = "$(readlink /proc/self/ns/uts)" ]; then
        return 0
    fi
    pids=$(ns_pids "$ns")
    [ -n "$pids" ] || return 0
    echo "$prog: ending processes left in $node's namespace: $(tr '\n' ' ' <<<"$pids")" >&2
    # shellcheck disable=SC2086 # one pid a word
    kill -TERM $pids 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
        pids=$(ns_pids "$ns")
        [ -n "$pids" ] || return 0
        sleep 0.1
    done
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
}

# 1. Jobs: cancel them so their steps end cleanly (KillWait=5 in slurm.conf).
if grep -q '^slurmctld ' "$pids_file" && alive slurmctld "$(awk '$1 == "slurmctld" {print $2; exit}' "$pids_file")"; then
    export SLURM_CONF=$state/slurm.conf
    jobs=$(timeout 10 squeue -h -o %i 2>/dev/null) || jobs=""
    if [ -n "$jobs" ]; then
        # shellcheck disable=SC2086 # one job id a word
        timeout 10 scancel $jobs 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            [ -n "$(timeout 10 squeue -h -o %i 2>/dev/null)" ] || break
            sleep 0.1
        done
    fi
fi

# 2. Daemons. Each takes 1.5-2 s to exit after SIGTERM, so stop the Slurm
# ones together, then munged, which they use to the end.
for names in "slurmd slurmctld" munged; do
    targets=()
    while read -r n pid; do
        case " $names " in *" $n "*) ;; *) continue ;; esac
        if alive "$n" "$pid"; then
            kill -TERM "$pid" 2>/dev/null || true
            targets+=("$n:$pid")
        fi
    done < "$pids_file"
    deadline=$((SECONDS + wait_s))
    for t in "${targets[@]}"; do
        while alive "${t%%:*}" "${t#*:}"; do
            if [ "$SECONDS" -ge "$deadline" ]; then
                echo "$prog: ${t%%:*} (pid ${t#*:}) ignored SIGTERM for ${wait_s}s; sending SIGKILL" >&2
                kill -KILL "${t#*:}" 2>/dev/null || true
                sleep 0.2
                break
            fi
            sleep 0.1
        done
    done
    if [ "$names" != munged ]; then
        while read -r node ns; do sweep_ns "$node" "$ns"; done < "$uts_file"
    fi
done

left=0
while read -r n pid; do
    if alive "$n" "$pid"; then echo "$prog: $n (pid $pid) still running" >&2; left=1; fi
done < "$pids_file"
[ "$left" -eq 0 ] || exit 1
: > "$pids_file"
: > "$uts_file"
echo "$prog: stopped the daemons of $state"
