#!/usr/bin/env python3
"""Smoke test of compare.py over shared memory with ranks bound two to a
core: --bind core at 4 ranks on a machine of fewer cores, where tuttirun
places two ranks on each core and Open MPI's mpirun refuses such a binding
unless it is told that it may. One short round of the 8-byte barrier and
broadcast, every result checked; the run must succeed and, where the Open
MPI reference is built (not in the sanitizer build), Open MPI must have
measured every row, and the CSV must hold each row's ratios: of the slowest
rank, of the mean over ranks and of whole iterations.

    compare_smoke.py BUILD_DIR

Exit status 0 when all holds, else 1 with the reason.
"""
import csv
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.dirname(HERE)


def main():
    build = sys.argv[1]
    # Oversubscribed wherever this runs with fewer than 4 cores, as in CI;
    # with more, the same command binds a rank to a core of its own.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    with tempfile.TemporaryDirectory(prefix="compare-smoke.") as tmp:
        table = os.path.join(tmp, "table.csv")
        done = subprocess.run(
            [sys.executable, os.path.join(BENCHMARKS, "compare.py"), "--build", build, "--bind",
             "core", "--ranks", "4", "--collectives", "barrier,broadcast", "--sizes", "8",
             "--repeats", "1", "--implementations", "tutti,openmpi", "--csv", table, "--",
             "--time-limit", "0.05"],
            capture_output=True, text=True, timeout=300, env=env)
        written = []
        if os.path.exists(table):
            with open(table, newline="") as f:
                written = list(csv.DictReader(f))
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
        if len(written) != 2:
            failures.append(f"--csv wrote the 2 rows of the table: {written}")
        for row in written:
            for ratio in ("ratio", "mean_over_ranks_ratio", "iteration_ratio"):
                try:
                    value = float(row.get(ratio) or "nan")
                except ValueError:
                    value = float("nan")
                if not value > 0:
                    failures.append(f"the {row.get('collective')} row's {ratio} is a positive "
                                    f"number: {row}")
    for failure in failures:
        print(f"FAIL: {failure}")
    if not failures:
        print("ok: compare.py binds 4 ranks two to a core in every launcher")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
