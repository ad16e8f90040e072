#!/usr/bin/env bash
# Gets a Debian 12 machine ready for tutti: installs the Debian packages the
# build and the tests need (only those missing), then configures build/ with
# clang 19 (if it is not configured yet) and builds it. Safe to run again.
#
#   bash tools/setup.sh                 install, configure, build
#   bash tools/setup.sh --no-build      install only
#   bash tools/setup.sh --build-dir D   use D instead of build/
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# clang 19: Debian 12's g++ 12 cannot build C++20 named modules (import tutti;).
# libclang-rt-19-dev: the sanitizer runtimes, for -Db_sanitize=... builds.
# libpmix-dev and openmpi-bin: joining jobs started by mpirun (PMIx), tested.
# libopenmpi-dev, mpich, libmpich-dev: the MPI reference benchmarks.
# libssl-dev: libcrypto's HMAC, with which TCP connections prove the job secret.
# iproute2: `ip netns`, with which the tests pose several hosts on one machine.
# python3-matplotlib: tools/plot_bench.py turns tutti-bench CSVs into plots.
packages=(
    clang-19 libclang-rt-19-dev meson ninja-build pkg-config
    libasio-dev libboost-serialization-dev libfmt-dev
    doctest-dev nlohmann-json3-dev libcli11-dev libhwloc-dev
    clang-format
    libpmix-dev openmpi-bin libopenmpi-dev mpich libmpich-dev
    libssl-dev iproute2 python3-matplotlib
)

usage() {
    sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

die() {
    echo "setup.sh: $*" >&2
    exit 1
}

build=1
builddir=build
while [[ $# -gt 0 ]]; do
    case $1 in
    --no-build) build=0 ;;
    --build-dir)
        [[ $# -ge 2 ]] || die "--build-dir needs a directory"
        builddir=$2
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        usage >&2
        die "unknown option '$1'"
        ;;
    esac
    shift
done

if [[ ! -r /etc/debian_version ]] || ! command -v apt-get >/dev/null ||
    ! command -v dpkg-query >/dev/null; then
    die "this script installs Debian packages with apt-get, and this system has no apt-get/dpkg.
  Install the equivalents of these Debian 12 packages yourself:
    ${packages[*]}
  then build with:
    meson setup $builddir --native-file meson/clang-19.ini && meson compile -C $builddir"
fi
if [[ -r /etc/os-release ]]; then
    # shellcheck disable=SC1091
    . /etc/os-release
    if [[ ${ID:-} != debian || ${VERSION_ID:-} != 12 ]]; then
        echo "setup.sh: note: made for Debian 12; this is ${PRETTY_NAME:-unknown}, trying anyway" >&2
    fi
fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "setup.sh: every package is installed"
else
    if [[ $(id -u) -eq 0 ]]; then
        as_root=()
    elif command -v sudo >/dev/null; then
        as_root=(sudo)
    else
        die "these packages are missing and installing them needs root (or sudo): ${missing[*]}"
    fi
    echo "setup.sh: installing ${missing[*]}"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null ||
        die "apt-get update failed"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null ||
        die "apt-get install failed for: ${missing[*]}"
fi

[[ $build -eq 1 ]] || exit 0

native=meson/clang-19.ini
if [[ ! -f $builddir/meson-private/coredata.dat ]]; then
    echo "setup.sh: configuring $builddir"
    meson setup "$builddir" --native-file "$native"
elif ! grep -qs 'clang++-19' "$builddir/build.ninja"; then
    # Configured with another compiler (which cannot build the module), or
    # a configuration that failed half way: start that directory afresh.
    echo "setup.sh: $builddir is not configured for clang++-19; configuring it again"
    meson setup --wipe "$builddir" --native-file "$native"
fi
echo "setup.sh: building $builddir"
meson compile -C "$builddir"
