#!/usr/bin/env bash
# The whole test suite: installs what is missing and builds (tools/setup.sh),
# runs every test program through `meson test` twice, in the normal build
# (build/) and in a build with AddressSanitizer and UndefinedBehaviorSanitizer
# (build-sanitize/), and ends with one line "N passed, N failed" that adds up
# the doctest test cases of every program in both.
#
#   bash tools/test.sh                    both builds
#   bash tools/test.sh --no-sanitizers    the normal build only (quicker)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

sanitizers=1
case ${1:-} in
--no-sanitizers) sanitizers=0 ;;
"") ;;
-h | --help)
    sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
    ;;
*)
    echo "test.sh: unknown option '$1' (try --help)" >&2
    exit 2
    ;;
esac

bash tools/setup.sh
builds=(build)
if [[ $sanitizers -eq 1 ]]; then
    # Unoptimized: it compiles in about half the time of -O2, which is most
    # of this script's time, and the tests still run in a few minutes.
    # The library shared: one instrumented copy instead of one per program
    # (2.3 GB of build tree became 0.8 GB).
    if [[ ! -f build-sanitize/meson-private/coredata.dat ]]; then
        meson setup build-sanitize --native-file meson/clang-19.ini \
            -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=0 \
            -Ddefault_library=shared
    fi
    # Only what the tests run: the examples and the benchmarks no test runs
    # are built (and run) in the normal build.
    ninja -C build-sanitize meson-test-prereq
    builds+=(build-sanitize)
fi

output=$(mktemp)
trap 'rm -f "$output"' EXIT
status=0
passed=0 failed=0
for b in "${builds[@]}"; do
    echo "== tests in $b"
    # A sanitizer finding makes the program fail, never just print.
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C "$b" --print-errorlogs 2>&1 | tee "$output" || status=$?

    # Every doctest program ends with "[doctest] test cases: N | P passed | F failed | S skipped".
    # Skipped cases are not added up: tutti-tests runs as two halves, each
    # skipping the other's cases (tests/meson.build), and no case is marked skip.
    read -r p f < <(awk -F'|' '
        /^\[doctest\] test cases:/ {
            for (i = 2; i <= NF; i++) {
                n = $i; gsub(/[^0-9]/, "", n)
                if ($i ~ /passed/) p += n; else if ($i ~ /failed/) f += n
            }
        }
        END { printf "%d %d\n", p, f }' "$b/meson-logs/testlog.txt")
    # A program that crashed or timed out printed no summary: count it as failed.
    crashed=$(awk '/^(Fail|Timeout):/ { n += $2 } END { print n + 0 }' "$output")
    if [[ $crashed -gt 0 && $f -eq 0 ]]; then
        f=$crashed
    fi
    passed=$((passed + p)) failed=$((failed + f))
done

if [[ $status -ne 0 && $failed -eq 0 ]]; then
    failed=1 # meson failed without any program failing: count that once
fi

echo
if [[ $((passed + failed)) -eq 0 ]]; then
    echo "test.sh: no doctest summary found: no test ran"
    status=1
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $status -eq 0 ]]
