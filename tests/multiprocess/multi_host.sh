#!/usr/bin/env bash
# Starts one tutti job over several hosts the way a user would: one tuttirun
# per host, each starting its part of the ranks (--first-rank, --size) with a
# shared --job-id, --rendezvous and --secret-file. The hosts are either posed
# on this machine (each tuttirun gives its ranks TUTTI_NODE=hostH, so ranks of
# one host share memory and the others talk TCP over loopback), or, with
# --netns, network namespaces joined by veth pairs to a bridge in a namespace
# of its own, so TCP between hosts crosses real interfaces with addresses of
# their own. Namespaces and files are removed on every exit.
#
#   multi_host.sh [--netns] --hosts H --ranks-per-host K [--timeout S]
#                 [--grace-ms MS] -- TUTTIRUN PROGRAM [ARGS...]
#
# --ranks-per-host also takes one count per host, e.g. 2,1 (then --hosts is
# the number of counts).
#
# Prints each rank's output as tuttirun passes it on, then one line per host
# with its tuttirun's status; exits 0 when every host's ranks succeeded, else
# the first failing host's status. Exits 77 (a skipped test for meson) when
# --netns is asked for and network namespaces cannot be created here.
set -u

netns=0
hosts=2
per_host=2
timeout_s=600
grace_ms=2000
while [ $# -gt 0 ]; do
    case "$1" in
    --netns) netns=1 ;;
    --hosts) hosts=$2; shift ;;
    --ranks-per-host) per_host=$2; shift ;;
    --timeout) timeout_s=$2; shift ;;
    --grace-ms) grace_ms=$2; shift ;;
    --) shift; break ;;
    *) echo "multi_host.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
if [ $# -lt 2 ]; then
    echo "multi_host.sh: usage: multi_host.sh [--netns] --hosts H --ranks-per-host K -- TUTTIRUN PROGRAM [ARGS...]" >&2
    exit 2
fi
tuttirun=$1
shift

# counts[h]: ranks on host h; first[h]: its first rank.
IFS=, read -r -a counts <<<"$per_host"
if [ "${#counts[@]}" = 1 ]; then
    counts=()
    for ((h = 0; h < hosts; h++)); do counts+=("$per_host"); done
fi
hosts=${#counts[@]}
first=()
size=0
for ((h = 0; h < hosts; h++)); do
    first+=("$size")
    size=$((size + counts[h]))
done

job_id=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
work=$(mktemp -d "${TMPDIR:-/tmp}/tutti-multi-host.XXXXXX")
namespaces=()
pids=()

cleanup() {
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    for ns in "${namespaces[@]}"; do
        ip netns delete "$ns" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# host h's namespace: tutti-<job>-h<h>, addresses 10.77.0.<h+1> on a bridge
# in tutti-<job>-sw. The names carry the job id, so concurrent runs differ.
make_namespaces() {
    local switch="tutti-$job_id-sw"
    if ! ip netns add "$switch" 2>"$work/netns.err"; then
        echo "multi_host.sh: SKIP: cannot create network namespaces here (ip netns add: $(cat "$work/netns.err")); needs root or CAP_SYS_ADMIN and iproute2" >&2
        exit 77
    fi
    namespaces+=("$switch")
    ip -n "$switch" link add br0 type bridge || return 1
    ip -n "$switch" link set br0 up || return 1
    for ((h = 0; h < hosts; h++)); do
        local ns="tutti-$job_id-h$h"
        ip netns add "$ns" || return 1
        namespaces+=("$ns")
        ip -n "$ns" link set lo up || return 1
        ip -n "$ns" link add eth0 type veth peer name port$h netns "$switch" || return 1
        ip -n "$switch" link set port$h master br0 || return 1
        ip -n "$switch" link set port$h up || return 1
        ip -n "$ns" addr add "10.77.0.$((h + 1))/24" dev eth0 || return 1
        ip -n "$ns" link set eth0 up || return 1
    done
}

if [ "$netns" = 1 ]; then
    if ! make_namespaces; then
        echo "multi_host.sh: setting up the namespaces failed" >&2
        exit 1
    fi
    rendezvous="10.77.0.1:29500"
else
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    rendezvous="127.0.0.1:$port"
fi

for ((h = 0; h < hosts; h++)); do
    command=("$tuttirun" -n "${counts[h]}" --first-rank "${first[h]}" --size "$size"
        --job-id "$job_id" --rendezvous "$rendezvous" --secret-file "$work/secret"
        --node "host$h" --timeout "$timeout_s" --grace-ms "$grace_ms" -- "$@")
    if [ "$netns" = 1 ]; then
        ip netns exec "tutti-$job_id-h$h" "${command[@]}" &
    else
        "${command[@]}" &
    fi
    pids+=($!)
done

first_failure=0
for ((h = 0; h < hosts; h++)); do
    wait "${pids[$h]}"
    status=$?
    echo "multi_host.sh: host $h (ranks ${first[h]}..$((first[h] + counts[h] - 1))): tuttirun exited with $status"
    if [ "$status" != 0 ] && [ "$first_failure" = 0 ]; then first_failure=$status; fi
done
pids=()
exit "$first_failure"
