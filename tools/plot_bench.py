#!/usr/bin/env python3
"""Plots tutti-bench CSV files (also the MPI reference's, and the raw rows of
benchmarks/compare.py): one PNG per collective, latency (or bandwidth)
against message size on log-log axes, one line per series. A series is a
label (tutti, openmpi, mpich, or --label) with its algorithm when forced,
and its rank count and transport when the files hold several. Rows repeated
for a series and size (runs repeated to cope with noise) are reduced to
their median.

    python3 tools/plot_bench.py tutti.csv openmpi.csv mpich.csv -o plots/
    python3 tools/plot_bench.py raw.csv -o plots/ --metric bandwidth --collective all_reduce

Needs python3-matplotlib.
"""
import argparse
import csv
import os
import statistics
import sys
from collections import defaultdict


def load(paths, stat):
    """The rows of every file, each with the columns the plot reads, as numbers
    where they are numbers; a file that cannot be read or is not a tutti-bench
    CSV ends the program, naming it."""
    needed = {"label", "collective", "bytes", f"{stat}_us"}
    rows = []
    for path in paths:
        try:
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                missing = needed - set(reader.fieldnames or [])
                if missing:
                    sys.exit(f"plot_bench: {path} is not a tutti-bench CSV (no {sorted(missing)})")
                for line, row in enumerate(reader, start=2):
                    try:
                        row["bytes"] = int(row["bytes"])
                        row[f"{stat}_us"] = float(row[f"{stat}_us"])
                    except (TypeError, ValueError):
                        sys.exit(f"plot_bench: {path}, line {line}: bytes {row['bytes']!r} and "
                                 f"{stat}_us {row[f'{stat}_us']!r} are not numbers")
                    rows.append(row)
        except OSError as e:
            sys.exit(f"plot_bench: cannot read {path}: {e.strerror}")
    return rows


def series_name(row, vary_ranks, vary_transport):
    name = row["label"] or row.get("implementation", "?")
    algorithm = row.get("algorithm", "auto")
    if algorithm and algorithm != "auto" and algorithm != name:
        name += f" {algorithm}"
    if vary_ranks:
        name += f", {row['ranks']} ranks"
    if vary_transport:
        name += f", {row['transport']}"
    return name


def add_point(data, row, args, vary_ranks, vary_transport):
    latency = row[f"{args.stat}_us"]
    size = row["bytes"]
    if args.metric == "latency":
        value = latency
    else:
        value = size / latency / 1e3 if latency > 0 else 0.0
    data[row["collective"]][series_name(row, vary_ranks, vary_transport)][size].append(value)


def human(size):
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="+", help="CSV files written by tutti-bench --csv")
    parser.add_argument("-o", "--output", default="bench-plots",
                        help="directory for the PNGs (made if missing)")
    parser.add_argument("--metric", choices=["latency", "bandwidth"], default="latency")
    parser.add_argument("--stat", choices=["avg", "min", "max"], default="max",
                        help="which latency over ranks (max: the method's latency)")
    parser.add_argument("--collective", action="append",
                        help="only this collective (repeatable)")
    args = parser.parse_args()
    rows = load(args.csv, args.stat)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_bench: matplotlib is missing (Debian: apt-get install python3-matplotlib)")

    if args.collective:
        rows = [r for r in rows if r["collective"] in args.collective]
    if not rows:
        sys.exit("plot_bench: no rows to plot")
    by_collective = defaultdict(list)
    for r in rows:
        by_collective[r["collective"]].append(r)

    # collective -> series -> bytes -> values; a series names its rank count
    # or transport only when they differ within the collective's rows.
    data = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for collective_rows in by_collective.values():
        vary_ranks = len({r.get("ranks") for r in collective_rows}) > 1
        vary_transport = len({r.get("transport") for r in collective_rows}) > 1
        for r in collective_rows:
            add_point(data, r, args, vary_ranks, vary_transport)

    os.makedirs(args.output, exist_ok=True)
    unit = "µs" if args.metric == "latency" else "GB/s"
    for collective, series in sorted(data.items()):
        fig, ax = plt.subplots(figsize=(8, 5))
        sizes = sorted({s for points in series.values() for s in points})
        if sizes == [0]:
            # barrier: no message, one figure per series
            names = sorted(series)
            values = [statistics.median(series[n][0]) for n in names]
            ax.bar(names, values)
            ax.set_ylabel(f"{args.metric} ({unit})")
        else:
            for name in sorted(series):
                points = sorted((s, statistics.median(v)) for s, v in series[name].items()
                                if s > 0)
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                        label=name)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ticks = [s for s in sizes if s > 0]
            step = max(1, len(ticks) // 12)
            ax.set_xticks(ticks[::step])
            ax.set_xticklabels([human(s) for s in ticks[::step]], rotation=45, ha="right")
            ax.set_xlabel("message size (largest buffer per rank)")
            ax.set_ylabel(f"{args.metric} ({unit})")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        what = f"{args.stat} over ranks of the mean per call" if args.metric == "latency" \
            else f"bytes / {args.stat} latency"
        ax.set_title(f"{collective}: {args.metric} ({what})")
        fig.tight_layout()
        path = os.path.join(args.output, f"{collective}.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        print(path)


if __name__ == "__main__":
    main()
