#!/usr/bin/env bash
# The whole test suite: installs what is missing and builds (tools/setup.sh),
# runs every test program through `meson test`, and ends with one line
# "N passed, N failed" that adds up the doctest test cases of all programs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash tools/setup.sh

output=$(mktemp)
trap 'rm -f "$output"' EXIT
status=0
meson test -C build --print-errorlogs 2>&1 | tee "$output" || status=$?

# Every doctest program ends with "[doctest] test cases: N | P passed | F failed | S skipped".
read -r passed failed skipped < <(awk -F'|' '
    /^\[doctest\] test cases:/ {
        for (i = 2; i <= NF; i++) {
            n = $i; gsub(/[^0-9]/, "", n)
            if ($i ~ /passed/) p += n; else if ($i ~ /failed/) f += n; else if ($i ~ /skipped/) s += n
        }
    }
    END { printf "%d %d %d\n", p, f, s }' build/meson-logs/testlog.txt)

# A program that crashed or timed out printed no summary: count it as failed.
crashed=$(awk '/^(Fail|Timeout):/ { n += $2 } END { print n + 0 }' "$output")
if [[ $status -ne 0 && $failed -eq 0 ]]; then
    failed=$((crashed > 0 ? crashed : 1))
fi

echo
if [[ $((passed + failed)) -eq 0 ]]; then
    echo "test.sh: no doctest summary found: no test ran"
    status=1
fi
summary="$passed passed, $failed failed"
[[ $skipped -eq 0 ]] || summary+=", $skipped skipped"
echo "$summary"
[[ $failed -eq 0 && $status -eq 0 ]]
