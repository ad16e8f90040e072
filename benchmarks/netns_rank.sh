#!/bin/sh
# Runs one rank of a benchmark in its own network namespace, the one
# benchmarks/netns_hosts.py made for it (compare.py --mode netns): the rank
# comes from whichever launcher started it (tuttirun: TUTTI_RANK, Open MPI:
# OMPI_COMM_WORLD_RANK, MPICH's hydra: PMI_RANK), the namespaces' prefix from
# TUTTI_COMPARE_NETNS. tutti's ranks also get TUTTI_NODE=host<rank>, since
# every namespace stands for a host of its own.
#
#   TUTTI_COMPARE_NETNS=PREFIX netns_rank.sh PROGRAM [ARGS...]
rank=${TUTTI_RANK:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}}
if [ -z "$rank" ] || [ -z "${TUTTI_COMPARE_NETNS:-}" ]; then
    echo "netns_rank.sh: needs TUTTI_COMPARE_NETNS and a rank (TUTTI_RANK, OMPI_COMM_WORLD_RANK or PMI_RANK) in the environment" >&2
    exit 2
fi
export TUTTI_NODE="host$rank"
exec ip netns exec "$TUTTI_COMPARE_NETNS-h$rank" "$@"
