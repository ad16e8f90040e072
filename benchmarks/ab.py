#!/usr/bin/env python3
"""Before/after: two or more tutti-bench binaries, interleaved.

Runs each binary in turn under tuttirun with the same collectives, sizes
and rank count, rotating the order every round (the machine is shared and
noisy: only figures taken in the same run compare), and prints per
collective and size the median over rounds of the slowest rank's mean
latency. Keep the "before" binary by copying it out of the build directory
before rebuilding (tutti-bench links libtutti statically):

    cp build/tools/tutti-bench/tutti-bench /tmp/before
    ... change, rebuild ...
    python3 benchmarks/ab.py --ranks 2 --bind core -c all_reduce,barrier -m 8 \\
        before=/tmp/before after=build/tools/tutti-bench/tutti-bench

This machine switches between a quick and a slow mode every few minutes
(one cache line between the two cores: about 55 or 250 ns), and every
small-message figure moves with it. With --calm-below 80, a round runs only
when build/benchmarks/line_bounce reads below 80 ns, and counts only when
it still does after the round; --slow-above 180 keeps the slow mode's
rounds instead.

Below the medians, every label after the first is paired with the first
round by round (they ran minutes apart at most, in the same round): the
median of its per-round ratio to the first, in how many rounds it was the
quicker, and a `*` where a two-sided sign test puts that count beyond
chance (p < 0.05; 9 rounds need 8 wins either way, 5 rounds cannot reach
it). Two labels of the same binary (an A/A run) show how far this
machine's noise alone moves the medians. Next to it the same pairing of
the other figure, the whole iteration (or, with --per-iteration, the
call): a change can make the call quicker and the loop around it slower,
when it lets some ranks out early and their work lands in the next
barrier (docs/performance.md, sixty-eighth session).

A NAME=PATH may be a script that runs tutti-bench with more options, to
compare algorithms: `exec tutti-bench "$@" -a binomial`, or settings:
`TUTTI_TCP_CONGESTION=reno exec tutti-bench "$@"`.

With --netns, every rank runs in a network namespace of its own over the
TCP transport, as compare.py --mode netns does (needs root and iproute2);
with --ranks-per-host K as well, K ranks share each namespace, over shared
memory within it and TCP between (shm+tcp).

SIGTERM, SIGINT or SIGHUP stops the run: the ranks running are killed, the
namespaces removed, and the rounds complete before it reported (exit status
1).
"""

import argparse
import contextlib
import csv
import os
import statistics
import subprocess
import sys
import tempfile

import paired
from calm import add_mode_options, gate_from
from netns_hosts import enter_hosts
from stopping import stop_on_signals, stopped_by_signal


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binaries", nargs="+", metavar="NAME=PATH",
                        help="a label and a tutti-bench binary")
    parser.add_argument("--ranks", default="2")
    parser.add_argument("--bind", choices=["core", "none"], default="core")
    parser.add_argument("-c", "--collectives", default="all_reduce,broadcast,barrier")
    parser.add_argument("-m", "--sizes", default="8")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--time-limit", default="1")
    parser.add_argument("-i", "--iterations", default=None,
                        help="timed calls per size (tutti-bench -i; by default at most "
                             "10,000, fewer from 32 KiB)")
    parser.add_argument("--per-iteration", action="store_true",
                        help="compare whole iterations (the benchmark's barrier and the call, "
                             "the slowest rank's wall time; tutti-bench's iteration_us) instead "
                             "of the call alone")
    parser.add_argument("--netns", action="store_true",
                        help="TCP between network namespaces, one per rank (compare.py's "
                             "netns mode)")
    parser.add_argument("--ranks-per-host", type=int, default=1, metavar="K",
                        help="with --netns: K ranks per namespace (host), shared memory within "
                             "a host and TCP between (compare.py --ranks-per-host)")
    parser.add_argument("--tuttirun", default=None,
                        help="the launcher (default: build/tools/tuttirun/tuttirun)")
    add_mode_options(parser)
    args = parser.parse_args()
    if args.ranks_per_host != 1 and not args.netns:
        parser.error("--ranks-per-host places ranks on the hosts of --netns: give --netns")
    if args.ranks_per_host < 1:
        parser.error(f"--ranks-per-host must be at least 1, not {args.ranks_per_host}")

    labelled = []
    for item in args.binaries:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"'{item}' is not NAME=PATH")
        if not os.access(path, os.X_OK):
            parser.error(f"{path} is not an executable")
        if any(name == n for n, _ in labelled):
            parser.error(f"the label '{name}' is given twice; an A/A run needs two names")
        labelled.append((name, path))
    here = os.path.dirname(os.path.abspath(__file__))
    launcher = args.tuttirun or os.path.join(here, "..", "build", "tools", "tuttirun", "tuttirun")
    if not os.access(launcher, os.X_OK):
        parser.error(f"no launcher at {launcher}; pass --tuttirun")

    # From the launcher's build directory (build/tools/tuttirun/tuttirun).
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(launcher))))
    gate = gate_from(args, build, "ab")

    # The figure compared first, and the one paired beside it.
    column, other = ("iteration_us", "max_us") if args.per_iteration else ("max_us",
                                                                          "iteration_us")
    other_what, other_label = (("the call", "call") if args.per_iteration else
                               ("the whole iteration", "iteration"))
    taken = []
    stopped_early = False
    stop_on_signals()
    with contextlib.ExitStack() as cleanup:
        hosts = (enter_hosts(cleanup, int(args.ranks), "ab", args.ranks_per_host)
                 if args.netns else None)
        try:
            rounds(args, labelled, launcher, gate, (column, other), hosts, taken)
        except stopped_by_signal as stopped:
            # subprocess.run killed tuttirun, whose ranks die with it.
            print(f"ab: stopped by {stopped} in round {len(taken) + 1} of {args.rounds}; the "
                  "table holds the rounds complete before it", file=sys.stderr)
            stopped_early = True
    names = [n for n, _ in labelled]
    what = ("wall time per whole iteration" if args.per_iteration else "mean")
    calm = f"; {gate.describe()}" if gate else ""
    where = ""
    if args.netns and args.ranks_per_host == 1:
        where = "; TCP between network namespaces"
    elif args.netns:
        where = f"; {args.ranks_per_host} ranks per network namespace, shm within, TCP between"
    print(f"# median over {len(taken)} interleaved rounds of the slowest rank's {what}, µs; "
          f"{args.ranks} ranks, bind {args.bind}{calm}{where}")
    width = max(12, *(len(n) + 2 for n in names))
    print(f"{'collective':<16}{'bytes':>10}" + "".join(f"{n:>{width}}" for n in names))
    keys = sorted({key for one in taken for key in one})
    for key in keys:
        cells = ""
        for n in names:
            values = [one[key][n][column] for one in taken if n in one.get(key, {})]
            cells += f"{shown(statistics.median(values)):>{width}}" if values else f"{'-':>{width}}"
        print(f"{key[0]:<16}{key[1]:>10}{cells}")
    if len(names) < 2:
        return 1 if stopped_early else 0
    base = names[0]
    print(f"# paired with {base} round by round: median of the per-round ratio to {base}, "
          f"rounds in which it was quicker, * where a sign test gives p < 0.05; "
          f"then the same for {other_what}")
    print(f"{'collective':<16}{'bytes':>10}" +
          "".join(f"{n:>{width + 8}}{other_label:>{width + 8}}" for n in names[1:]))
    for key in keys:
        cells = ""
        for n in names[1:]:
            for figure in (column, other):
                pairs = [(one[key][n][figure], one[key][base][figure]) for one in taken
                         if figure in one.get(key, {}).get(n, {})
                         and figure in one.get(key, {}).get(base, {})]
                cells += f"{paired.shown(pairs):>{width + 8}}"
        print(f"{key[0]:<16}{key[1]:>10}{cells}")
    return 1 if stopped_early else 0


def rounds(args, labelled, launcher, gate, columns, hosts, kept):
    """Appends to kept one dict per round kept: (collective, bytes) -> label
    -> CSV column -> the slowest rank's figure. The first of columns is
    needed; the second is taken where the binary writes it."""
    column = columns[0]
    env = dict(os.environ)
    if hosts is not None:
        # Several ranks per host: shm+tcp (TUTTI_TRANSPORT=auto).
        env.update(hosts.environment(),
                   TUTTI_TRANSPORT="tcp" if hosts.ranks_per_host == 1 else "auto")
    r = 0
    while r < args.rounds:
        if gate:
            gate.wait()
        order = labelled[r % len(labelled):] + labelled[:r % len(labelled)]
        taken = {}
        for name, path in order:
            print(f"ab: round {r + 1} of {args.rounds}: {name}", file=sys.stderr)
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "run.csv")
                program = [path, args.collectives, "-m", args.sizes, "--time-limit",
                           args.time_limit, "-q", "--csv", out]
                if args.iterations:
                    program += ["-i", args.iterations]
                cmd = [launcher, "-n", args.ranks, "--bind", args.bind]
                if hosts is not None:
                    cmd += hosts.tuttirun_options() + ["--"] + hosts.wrap(program)
                else:
                    cmd += ["--"] + program
                done = subprocess.run(cmd, stdout=subprocess.DEVNULL, env=env)
                if done.returncode != 0:
                    sys.exit(f"ab: {' '.join(cmd)} failed with status {done.returncode}")
                with open(out) as f:
                    reader = csv.DictReader(f)
                    if column not in (reader.fieldnames or []):
                        sys.exit(f"ab: {path} writes no {column} column (built before it?)")
                    for row in reader:
                        key = (row["collective"], int(row["bytes"]))
                        taken.setdefault(key, {})[name] = {
                            c: float(row[c]) for c in columns if row.get(c)}
        if gate and not gate.held(args.rounds):
            continue
        kept.append(taken)
        r += 1


def shown(us):
    """Three significant digits below 100 µs: sub-µs differences matter there."""
    return f"{us:.3f}" if us < 1 else f"{us:.2f}" if us < 100 else f"{us:.0f}"


if __name__ == "__main__":
    sys.exit(main())
