#!/usr/bin/env python3
"""Smoke test of compare.py over shared memory with ranks bound two to a
core: --bind core at 4 ranks on a machine of fewer cores, where tuttirun
places two ranks on each core and Open MPI's mpirun refuses such a binding
unless it is told that it may. One short round of the 8-byte barrier and
broadcast, every result checked; the run must succeed and, where the Open
MPI reference is built (not in the sanitizer build), Open MPI must have
measured every row.

    compare_smoke.py BUILD_DIR

Exit status 0 when all holds, else 1 with the reason.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.dirname(HERE)


def main():
    build = sys.argv[1]
    # Oversubscribed wherever this runs with fewer than 4 cores, as in CI;
    # with more, the same command binds a rank to a core of its own.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    done = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "compare.py"), "--build", build, "--bind",
         "core", "--ranks", "4", "--collectives", "barrier,broadcast", "--sizes", "8",
         "--repeats", "1", "--implementations", "tutti,openmpi", "--", "--time-limit", "0.05"],
        capture_output=True, text=True, timeout=300, env=env)
    failures = []
    if done.returncode != 0:
        failures.append(f"compare.py --bind core --ranks 4 exited {done.returncode}; "
                        f"stderr: {done.stderr[-2000:]}")
    lines = done.stdout.splitlines()
    header = next((line.split() for line in lines if line.startswith("collective")), [])
    rows = [line.split() for line in lines if line.split()[:2] in (["barrier", "4"],
                                                                   ["broadcast", "4"])]
    if len(rows) != 2:
        failures.append(f"the table has the 4-rank barrier and broadcast: {done.stdout[-2000:]}")
    if "openmpi" in header:
        # A row: collective, ranks, the size (two words), tutti's µs, Open MPI's µs.
        for row in rows:
            if row[5] == "-":
                failures.append(f"Open MPI measured the {row[0]} bound two to a core: {row}")
    for failure in failures:
        print(f"FAIL: {failure}")
    if not failures:
        print("ok: compare.py binds 4 ranks two to a core in every launcher")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
