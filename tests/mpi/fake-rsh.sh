#!/bin/sh
# fake-rsh.sh - an ssh stand-in that turns one machine into several MPI "nodes".
#
# Usage (as Open MPI's launch agent):
#   timeout 60 mpirun --mca plm_rsh_agent tests/mpi/fake-rsh.sh \
#       --host nodeA:4,nodeB:4 -np 8 PROG
#
# Open MPI calls the agent like ssh: `AGENT [ssh options] HOST COMMAND...`.
# We drop the ssh-style options, take HOST, and run COMMAND (joined with
# spaces, as ssh does) through sh on THIS machine, inside a new UTS namespace
# whose hostname is HOST. The separate hostname is what makes each fake node
# real to MPI: MPI_Get_processor_name reports HOST, MPI_COMM_TYPE_SHARED
# splits by it, and shared-memory file names (which embed the hostname) do
# not collide between the fake nodes (if they did, ranks segfault).
#
# Needs root (or CAP_SYS_ADMIN) for `unshare --uts`. Environment that mpirun
# needs on this kind of machine (loopback only, running as root):
#   OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
set -eu

prog=fake-rsh.sh
usage() { echo "usage: $prog [ssh options] HOST COMMAND..." >&2; exit 2; }

# ssh options that take an argument (separate or attached: -p 22, -p22).
while [ $# -gt 0 ]; do
    case $1 in
        --) shift; break ;;
        -[BbcDEeFIiJLlmOopQRSWw])
            [ $# -ge 2 ] || usage
            shift 2 ;;
        -?*) shift ;;           # flags (-x, -T, -4, -oKey=val, -p22, ...)
        *) break ;;
    esac
done
[ $# -ge 1 ] || usage
host=${1##*@}                   # user@host -> host
shift
case $host in
    ''|-*|*[!A-Za-z0-9.-]*) echo "$prog: bad host name '$host'" >&2; exit 2 ;;
esac
[ $# -ge 1 ] || { echo "$prog: no command given (interactive login is not supported)" >&2; exit 2; }

# shellcheck disable=SC2016 # expanded by the inner sh, not here
# Inner sh: $1 = host, the rest = the remote command line (words joined like ssh).
exec unshare --uts sh -c 'hostname "$1" && shift && exec sh -c "$*"' "$prog" "$host" "$@"
