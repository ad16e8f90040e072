#!/bin/sh
# The remote shell through which Open MPI's mpirun (plm_rsh_agent) and MPICH's
# mpiexec (-launcher ssh -launcher-exec) start their daemons on the hosts of
# compare.py's netns mode with several ranks per host: instead of logging in
# to host h<n>, it runs the daemon's command in that host's network namespace
# (TUTTI_COMPARE_NETNS-h<n>, made by benchmarks/netns_hosts.py), under a host
# name of its own (a UTS namespace), since the MPIs name their session
# directories and shared-memory files after the host and two daemons of one
# host name on one machine would share them.
#
#   TUTTI_COMPARE_NETNS=PREFIX netns_agent.sh [SSH OPTIONS] HOST COMMAND...
while [ "${1#-}" != "$1" ]; do shift; done # ssh options such as hydra's -x
host=${1:-}
if [ -z "$host" ] || [ $# -lt 2 ] || [ -z "${TUTTI_COMPARE_NETNS:-}" ]; then
    echo "netns_agent.sh: needs TUTTI_COMPARE_NETNS in the environment, a host and a command" >&2
    exit 2
fi
case $host in
    h[0-9]*) ;;
    *)
        echo "netns_agent.sh: '$host' is not a host of the netns mode (h0, h1, ...)" >&2
        exit 2
        ;;
esac
shift
exec ip netns exec "$TUTTI_COMPARE_NETNS-$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
