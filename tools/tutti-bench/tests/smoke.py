#!/usr/bin/env python3
"""Smoke test of tutti-bench: a short sweep of every collective under
`tuttirun -n 2` with every result checked, then the CSV and JSON it wrote are
parsed and compared (same rows, the expected columns, sane numbers), and
tools/plot_bench.py turns the CSV into a PNG when matplotlib is installed.

Exit status 0 when all holds; otherwise the first failure is printed.
"""
import argparse
import csv
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

COLLECTIVES = ["barrier", "broadcast", "reduce", "all_reduce", "gather", "scatter",
               "all_gather", "all_to_all", "all_to_allv", "reduce_scatter", "scan", "exscan"]
COLUMNS = ["implementation", "label", "transport", "collective", "algorithm", "chosen", "ranks",
           "bytes", "iterations", "warmup", "buffers", "avg_us", "min_us", "max_us",
           "algbw_GBps", "iteration_us", "valid"]
SIZES = "8,1K,256K"  # eager, chunked and (from 256 KiB) single-copy paths of shm


def fail(message):
    print(f"tutti-bench smoke: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(command, timeout):
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(command)} did not finish in {timeout} s")
    if done.returncode != 0:
        fail(f"{' '.join(command)} exited with {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def plotting_python():
    """This interpreter when it has matplotlib, else Debian's (python3-matplotlib
    installs there, while python3 on PATH may be another one), else None."""
    if importlib.util.find_spec("matplotlib") is not None:
        return sys.executable
    system = "/usr/bin/python3"
    if os.path.exists(system) and subprocess.run(
            [system, "-c", "import matplotlib"], capture_output=True).returncode == 0:
        return system
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tuttirun", required=True)
    parser.add_argument("--bench", required=True)
    parser.add_argument("--plot", required=True)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tutti-bench-smoke.") as tmp:
        csv_path = os.path.join(tmp, "out.csv")
        json_path = os.path.join(tmp, "out.json")
        run([args.tuttirun, "-n", "2", "--timeout", "60", args.bench, "all", "-m", SIZES,
             "--validate", "-i", "20", "--min-iterations", "2", "-w", "2", "--buffers", "3",
             "--csv", csv_path, "--json", json_path, "--label", "smoke"], timeout=90)

        with open(csv_path, newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames != COLUMNS:
                fail(f"CSV columns {reader.fieldnames}, expected {COLUMNS}")
            rows = list(reader)
        with open(json_path) as f:
            doc = json.load(f)
        results = doc["results"]

        # barrier has one row; every other collective one per size.
        expected = 1 + (len(COLLECTIVES) - 1) * len(SIZES.split(","))
        if len(rows) != expected or len(results) != expected:
            fail(f"{len(rows)} CSV rows and {len(results)} JSON rows, expected {expected}")
        if (doc["ranks"] != 2 or doc["implementation"] != "tutti" or doc["label"] != "smoke"
                or doc.get("form") != "coroutine"):
            fail(f"JSON head {doc['ranks']=} {doc['implementation']=} {doc['label']=} "
                 f"{doc.get('form')=}")
        seen = set()
        for row, result in zip(rows, results):
            if row["collective"] != result["collective"] or int(row["bytes"]) != result["bytes"]:
                fail(f"CSV row {row} and JSON row {result} differ")
            seen.add(row["collective"])
            if row["valid"] != "yes":
                fail(f"{row['collective']} {row['bytes']} B: valid is {row['valid']!r}")
            if row["ranks"] != "2" or row["implementation"] != "tutti":
                fail(f"row {row}")
            low, mean, high = float(row["min_us"]), float(row["avg_us"]), float(row["max_us"])
            if not 0 < low <= mean <= high:
                fail(f"{row['collective']}: min/avg/max {low}/{mean}/{high} out of order")
            # A whole iteration holds the timed call (and a barrier).
            if not float(row["iteration_us"]) >= high:
                fail(f"{row['collective']}: iteration {row['iteration_us']} µs shorter than "
                     f"its call's {high}")
            if row["collective"] != "barrier" and float(row["algbw_GBps"]) <= 0:
                fail(f"{row['collective']}: no bandwidth")
            if not row["chosen"]:
                fail(f"{row['collective']}: no algorithm named")
        if seen != set(COLLECTIVES):
            fail(f"collectives measured {sorted(seen)}, expected all {len(COLLECTIVES)}")

        # A forced algorithm that a collective lacks is skipped, not an error.
        done = run([args.tuttirun, "-n", "2", "--timeout", "30", args.bench, "barrier,all_reduce",
                    "-a", "ring", "-m", "64", "-i", "5", "--validate", "-q"], timeout=60)
        if "skipped" not in done.stdout or "ring" not in done.stdout:
            fail(f"expected barrier skipped and all_reduce with ring:\n{done.stdout}")

        # A name no collective asked for knows: one skipped row (not one per
        # size), and the run fails, nothing having been measured.
        wrong = subprocess.run([args.tuttirun, "-n", "2", "--timeout", "30", args.bench,
                                "all_reduce", "-a", "nonexistent", "-m", "8,64,1K", "-q"],
                               capture_output=True, text=True, timeout=60)
        if (wrong.returncode != 2 or wrong.stdout.count("skipped") != 1
                or "unknown all_reduce algorithm 'nonexistent'" not in wrong.stdout
                or "tutti-bench: nothing measured" not in wrong.stderr):
            fail(f"-a nonexistent: exit {wrong.returncode}\n{wrong.stdout}\n{wrong.stderr}")

        # A size no machine holds (about 195 TiB of buffers on each rank) is
        # skipped by every rank before anything is allocated, saying why; the
        # sizes that fit are measured.
        done = run([args.tuttirun, "-n", "2", "--timeout", "30", args.bench, "all_reduce",
                    "-m", "8,100000G", "-i", "5", "--validate", "-q"], timeout=60)
        if ("skipped: its buffers take 200000.0 GiB on each rank" not in done.stdout
                or "which has" not in done.stdout or done.stdout.count(" yes") != 1):
            fail(f"-m 8,100000G: expected the 8-byte row and a skipped one:\n{done.stdout}")

        # The blocking form: every collective through tutti::wait, each
        # result checked, the rows labelled as its series.
        blocking_csv = os.path.join(tmp, "blocking.csv")
        blocking_json = os.path.join(tmp, "blocking.json")
        done = run([args.tuttirun, "-n", "3", "--timeout", "60", args.bench, "all", "-m", SIZES,
                    "--form", "blocking", "--validate", "-i", "20", "--min-iterations", "2",
                    "-w", "2", "--csv", blocking_csv, "--json", blocking_json, "-q"], timeout=90)
        if "tutti, blocking form over" not in done.stdout:
            fail(f"blocking form: the table's head does not say so:\n{done.stdout[:400]}")
        with open(blocking_json) as f:
            head = json.load(f)
        if head.get("form") != "blocking" or head["label"] != "tutti-blocking":
            fail(f"blocking form: JSON head {head.get('form')=} {head['label']=}")
        with open(blocking_csv, newline="") as f:
            blocking = list(csv.DictReader(f))
        if len(blocking) != expected:
            fail(f"blocking form: {len(blocking)} rows, expected {expected}")
        for row in blocking:
            if row["valid"] != "yes" or row["label"] != "tutti-blocking" or row["ranks"] != "3":
                fail(f"blocking form: row {row}")

        # A non-commutative operation of the program's own: every reduction
        # checked against the rank-ordered composition, the run saying so.
        compose_json = os.path.join(tmp, "compose.json")
        done = run([args.tuttirun, "-n", "3", "--timeout", "60", args.bench,
                    "reduce,all_reduce,reduce_scatter,scan,exscan", "-m", SIZES, "--op", "compose",
                    "--validate", "-i", "20", "--min-iterations", "2", "-w", "2", "--json",
                    compose_json, "-q"], timeout=90)
        if "--op compose" not in done.stdout:
            fail(f"--op compose: the table's head does not say so:\n{done.stdout[:400]}")
        with open(compose_json) as f:
            composed = json.load(f)
        if composed["settings"].get("op") != "compose":
            fail(f"--op compose: JSON settings {composed['settings']}")
        if len(composed["results"]) != 5 * len(SIZES.split(",")):
            fail(f"--op compose: {len(composed['results'])} rows")
        for row in composed["results"]:
            if row["valid"] != "yes":
                fail(f"--op compose: row {row}")

        # Receive buffers 16 bytes into a page, send buffers at a page's
        # start (--misalign): every result still checked, the run saying so.
        misalign_json = os.path.join(tmp, "misalign.json")
        done = run([args.tuttirun, "-n", "2", "--timeout", "60", args.bench,
                    "gather,scatter,all_gather,all_to_all,broadcast", "-m", "8,64K,1M",
                    "--misalign", "16", "--validate", "-i", "20", "--min-iterations", "2",
                    "-w", "2", "--json", misalign_json, "-q"], timeout=90)
        if "receive buffers 16 bytes into a page (--misalign)" not in done.stdout:
            fail(f"--misalign: the table's head does not say so:\n{done.stdout[:400]}")
        with open(misalign_json) as f:
            placed = json.load(f)
        if placed["settings"].get("misalign") != 16 or len(placed["results"]) != 15:
            fail(f"--misalign: JSON settings {placed['settings']}, {len(placed['results'])} rows")
        for row in placed["results"]:
            if row["valid"] != "yes":
                fail(f"--misalign: row {row}")

        # A form it does not know is a usage error naming the option.
        wrong = subprocess.run([args.bench, "--form", "blockin", "barrier"], capture_output=True,
                               text=True, timeout=30)
        if wrong.returncode != 2 or "--form: blockin not in" not in wrong.stderr:
            fail(f"--form blockin: exit {wrong.returncode}, stderr {wrong.stderr!r}")
        # So is a count out of range, in words.
        wrong = subprocess.run([args.bench, "--buffers", "0", "barrier"], capture_output=True,
                               text=True, timeout=30)
        if wrong.returncode != 2 or "--buffers: must be above 0 (got 0)" not in wrong.stderr:
            fail(f"--buffers 0: exit {wrong.returncode}, stderr {wrong.stderr!r}")
        # So is an operation it does not know.
        wrong = subprocess.run([args.bench, "--op", "product", "all_reduce"], capture_output=True,
                               text=True, timeout=30)
        if wrong.returncode != 2 or "--op: product not in {sum,compose}" not in wrong.stderr:
            fail(f"--op product: exit {wrong.returncode}, stderr {wrong.stderr!r}")

        # The plot script names a file it cannot use, before it needs
        # matplotlib: one missing, one whose numbers are not numbers.
        bad = subprocess.run([sys.executable, args.plot, os.path.join(tmp, "missing.csv")],
                             capture_output=True, text=True, timeout=60)
        if bad.returncode != 1 or "plot_bench: cannot read" not in bad.stderr:
            fail(f"plot of a missing file: exit {bad.returncode}, stderr {bad.stderr!r}")
        broken = os.path.join(tmp, "broken.csv")
        with open(broken, "w") as f:
            f.write(",".join(COLUMNS) + "\n")
            f.write(",".join("many" if c == "bytes" else "1" for c in COLUMNS) + "\n")
        bad = subprocess.run([sys.executable, args.plot, broken], capture_output=True, text=True,
                             timeout=60)
        if bad.returncode != 1 or "line 2: bytes 'many'" not in bad.stderr:
            fail(f"plot of a broken file: exit {bad.returncode}, stderr {bad.stderr!r}")

        python = plotting_python()
        if python is None:
            print("tutti-bench smoke: matplotlib missing, plot not tried")
        else:
            plots = os.path.join(tmp, "plots")
            run([python, args.plot, csv_path, "-o", plots], timeout=120)
            pngs = [p for p in os.listdir(plots) if p.endswith(".png")]
            if len(pngs) != len(COLLECTIVES):
                fail(f"plot wrote {sorted(pngs)}, expected one PNG per collective")
            for p in pngs:
                with open(os.path.join(plots, p), "rb") as f:
                    if f.read(8) != b"\x89PNG\r\n\x1a\n":
                        fail(f"{p} is not a PNG")
    print("tutti-bench smoke: ok")


if __name__ == "__main__":
    main()
