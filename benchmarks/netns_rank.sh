#!/bin/sh
# Runs one rank of a benchmark in the network namespace of its host, one that
# benchmarks/netns_hosts.py made (compare.py --mode netns): the rank comes
# from whichever launcher started it (tuttirun: TUTTI_RANK, Open MPI:
# OMPI_COMM_WORLD_RANK, MPICH's hydra: PMI_RANK), the namespaces' prefix from
# TUTTI_COMPARE_NETNS, and rank r runs on host r / TUTTI_COMPARE_RANKS_PER_HOST
# (default 1). tutti's ranks also get TUTTI_NODE=host<host>, since every
# namespace stands for a host of its own.
#
#   TUTTI_COMPARE_NETNS=PREFIX [TUTTI_COMPARE_RANKS_PER_HOST=K] netns_rank.sh PROGRAM [ARGS...]
rank=${TUTTI_RANK:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}}
if [ -z "$rank" ] || [ -z "${TUTTI_COMPARE_NETNS:-}" ]; then
    echo "netns_rank.sh: needs TUTTI_COMPARE_NETNS and a rank (TUTTI_RANK, OMPI_COMM_WORLD_RANK or PMI_RANK) in the environment" >&2
    exit 2
fi
per_host=${TUTTI_COMPARE_RANKS_PER_HOST:-1}
case $per_host in
    '' | *[!0-9]* | 0)
        echo "netns_rank.sh: TUTTI_COMPARE_RANKS_PER_HOST must be a positive number, not '$per_host'" >&2
        exit 2
        ;;
esac
host=$((rank / per_host))
export TUTTI_NODE="host$host"
exec ip netns exec "$TUTTI_COMPARE_NETNS-h$host" "$@"
