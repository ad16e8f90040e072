#!/usr/bin/env python3
"""tutti against Open MPI and MPICH, in one command: runs tutti-bench and the
MPI reference (benchmarks/mpi_collectives.cpp, built once per MPI) in turn
with the same collectives, sizes and rank counts, repeats the round with the
order rotated (the machines are shared and noisy: compare only figures taken
in the same run, as medians), and prints per size the median latency of
each, the ratio tutti / best MPI (below 1: tutti is faster) and bandwidths.
The column `won` pairs tutti with the best MPI round by round (benchmarks/
paired.py): the rounds in which tutti was quicker, and * where a sign test
puts that count beyond chance (p < 0.05; 8 of 9 rounds either way, so use
--repeats 9 or more where the ratio is near 1).

    python3 benchmarks/compare.py                                  # shm, 2 ranks, defaults
    python3 benchmarks/compare.py --ranks 2,4,8 --collectives all_reduce --sizes 8,1M
    python3 benchmarks/compare.py --mode tcp --ranks 2,4 --sizes 64K:16M
    python3 benchmarks/compare.py --mode netns --ranks 2,4 --sizes 64K,1M,16M
    python3 benchmarks/compare.py --mode netns --ranks 4 --ranks-per-host 2
    python3 benchmarks/compare.py --memcpy --csv ratios.csv --raw runs.csv -- --buffers 4
    python3 benchmarks/compare.py --implementations tutti,tutti-blocking,openmpi --sizes 8

Arguments after `--` go to every benchmark program (tutti-bench options:
-i, --min-iterations, --budget, -w, --time-limit, --buffers, ...).

Modes: shm (tutti with TUTTI_TRANSPORT=shm; the MPIs' defaults, shared
memory between ranks of one machine) and tcp (TUTTI_TRANSPORT=tcp; Open MPI
`--mca btl tcp,self --mca pml ob1 --mca btl_tcp_if_include lo`; MPICH
`MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp UCX_NET_DEVICES=lo`), and netns: TCP as
in tcp, but every rank in a network namespace of its own, so that every
connection crosses veth pairs and a bridge (MTU 1500) as between hosts
(benchmarks/netns_hosts.py; needs root and iproute2; the MPIs use eth0
instead of lo, Open MPI's PMIx listens on the launcher's leg of the
bridge). With --ranks-per-host K > 1 (netns mode only) rank r runs on host
r // K, and every implementation uses shared memory within a host and TCP
between hosts: tutti TUTTI_TRANSPORT=auto (shm+tcp), the MPIs their defaults
(Open MPI `--mca btl vader,tcp,self --mca pml ob1`), each started as on a
cluster, one daemon per host (mpirun `--host h0:K,...` with
benchmarks/netns_agent.sh as its remote shell, mpiexec `-hosts` and
`-launcher-exec` likewise). As root, Open MPI is given OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1, and
`--oversubscribe` above 2 ranks on this 2-core machine.

--raw writes every run's rows (tutti-bench CSV columns plus `repeat`), which
tools/plot_bench.py plots as medians. SIGTERM, SIGINT or SIGHUP stops the
run: the running launcher's ranks are killed, namespaces and temporary files
removed, and the rounds complete before it reported. Exit status: 0, or 1
when a run failed, a result was wrong or the run was stopped.
"""
import argparse
import contextlib
import csv
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

import paired
from calm import add_mode_options, gate_from
from netns_hosts import enter_hosts
from stopping import stop_on_signals, stopped_by_signal

# Variants of tutti measured as series of their own: tutti-bench's options
# for each, and the heading of its ratio column.
# tutti-shared: its buffers allocated through tutti (tutti::shared_allocator)
# so that peers copy out of their mapping.
# tutti-blocking: every call through tutti::wait, one at a time, as a program
# without coroutines makes them (and as the MPI reference calls MPI).
TUTTI_VARIANTS = {
    "tutti-shared": (["--memory", "shared"], "shared"),
    "tutti-blocking": (["--form", "blocking"], "blocking"),
}
IMPLEMENTATIONS = ["tutti", "tutti-shared", "tutti-blocking", "openmpi", "mpich"]
# tutti-blocking only when asked for: it adds a fifth program to every round.
DEFAULT_IMPLEMENTATIONS = ["tutti", "tutti-shared", "openmpi", "mpich"]
TUTTIS = ["tutti"] + list(TUTTI_VARIANTS)
MPIS = ["openmpi", "mpich"]


def human(size):
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def find_build(root, given):
    candidates = [given] if given else [os.path.join(root, "build")] + sorted(
        os.path.join(root, d) for d in os.listdir(root) if d.startswith("build"))
    for build in candidates:
        if os.path.exists(os.path.join(build, "tools", "tutti-bench", "tutti-bench")):
            return os.path.abspath(build)
    sys.exit("compare: no build directory with tools/tutti-bench/tutti-bench "
             f"(looked in {', '.join(candidates)}); build first or give --build")


class runner:
    def __init__(self, args, build):
        self.args = args
        self.build = build
        self.tuttirun = os.path.join(build, "tools", "tuttirun", "tuttirun")
        self.bench = os.path.join(build, "tools", "tutti-bench", "tutti-bench")
        self.mpi = {m: os.path.join(build, "benchmarks", f"mpi_collectives_{m}") for m in MPIS}
        self.openmpi_run = shutil.which("mpirun.openmpi") or shutil.which("mpiexec.openmpi")
        self.mpich_run = shutil.which("mpiexec.mpich") or shutil.which("mpirun.mpich")
        self.failures = 0
        # compare.py's netns mode: the namespaces, one per rank (netns_hosts).
        self.hosts = None
        self.transport = "shm" if args.mode == "shm" else "tcp"
        # Several ranks per host: shared memory within, TCP between.
        self.per_host = args.ranks_per_host
        self.hierarchical = args.mode == "netns" and self.per_host > 1
        self.interface = "eth0" if args.mode == "netns" else "lo"

    def in_namespaces(self, program, env):
        """program, started in its rank's namespace in the netns mode."""
        if self.hosts is None:
            return program
        env.update(self.hosts.environment())
        return self.hosts.wrap(program)

    def available(self, impl):
        if impl in TUTTIS:
            return os.path.exists(self.tuttirun) and os.path.exists(self.bench)
        launcher = self.openmpi_run if impl == "openmpi" else self.mpich_run
        return launcher is not None and os.path.exists(self.mpi[impl])

    def openmpi_prefix(self, ranks, env):
        if os.geteuid() == 0:
            env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        command = [self.openmpi_run, "-n", str(ranks)]
        oversubscribed = ranks > (os.cpu_count() or 1)
        if self.hierarchical:
            return command + self.openmpi_hosts(ranks, oversubscribed, env)
        if oversubscribed:
            command.append("--oversubscribe")
        command += self.openmpi_binding(oversubscribed)
        if self.transport == "tcp":
            command += ["--mca", "btl", "tcp,self", "--mca", "pml", "ob1",
                        "--mca", "btl_tcp_if_include", self.interface]
        if self.hosts is not None:
            # The ranks, each in its namespace, reach mpirun's PMIx server
            # over the launcher's leg of the bridge, not over loopback.
            env.update(PMIX_MCA_ptl_tcp_remote_connections="1",
                       PMIX_MCA_ptl_tcp_if_include=self.hosts.leg)
        return command

    def openmpi_hosts(self, ranks, oversubscribed, env):
        """mpirun's options for one daemon per host, started in the host's
        namespace through netns_agent.sh, shared memory within a host."""
        env.update(self.hosts.environment())
        options = ["--host", self.hosts.host_list(ranks),
                   "--mca", "plm_rsh_agent", self.hosts.agent(),
                   "--mca", "plm_rsh_no_tree_spawn", "1",
                   # Each daemon would map its topology at the same address
                   # as mpirun's, on one machine: orted crashes.
                   "--mca", "rtc_hwloc_vmhole", "none",
                   # mpirun reaches the daemons over its leg, they it and each
                   # other over their eth0.
                   "--mca", "oob_tcp_if_include", f"{self.hosts.leg},eth0",
                   "--mca", "pml", "ob1", "--mca", "btl", "vader,tcp,self",
                   "--mca", "btl_tcp_if_include", "eth0"]
        if oversubscribed:
            # What --oversubscribe sets on one host; the daemons of the hosts
            # do not know that the hosts share two cores.
            options += ["--mca", "mpi_yield_when_idle", "1"]
        return options + self.openmpi_binding(oversubscribed)

    def openmpi_binding(self, oversubscribed):
        """--bind-to for mpirun. Two ranks to a core, as tuttirun --bind core
        places them, mpirun refuses unless told that it may."""
        if self.args.bind == "default":
            return []
        if self.args.bind == "core" and oversubscribed:
            return ["--bind-to", "core:overload-allowed"]
        return ["--bind-to", self.args.bind]

    def command_for(self, impl, ranks, program_args, env):
        if impl in TUTTIS:
            if impl in TUTTI_VARIANTS:
                program_args = program_args + TUTTI_VARIANTS[impl][0]
            env["TUTTI_TRANSPORT"] = "auto" if self.hierarchical else self.transport
            program = self.in_namespaces([self.bench] + program_args, env)
            if self.args.tutti_launcher == "mpirun":
                return self.openmpi_prefix(ranks, env) + program
            command = [self.tuttirun, "-n", str(ranks), "--timeout",
                       str(int(self.args.timeout * 1000))]
            if self.args.bind != "default":
                command += ["--bind", self.args.bind]
            if self.hosts is not None:
                command += self.hosts.tuttirun_options()
            return command + ["--"] + program
        if self.hierarchical:
            # Their daemons start the ranks in the hosts' namespaces.
            program = [self.mpi[impl]] + program_args + ["--transport", "shm+tcp"]
        else:
            program = self.in_namespaces(
                [self.mpi[impl]] + program_args + ["--transport", self.transport], env)
        if impl == "openmpi":
            return self.openmpi_prefix(ranks, env) + program
        command = [self.mpich_run, "-n", str(ranks)]
        if self.hierarchical:
            env.update(self.hosts.environment(), UCX_NET_DEVICES="eth0")
            command += ["-launcher", "ssh", "-launcher-exec", self.hosts.agent(),
                        "-iface", self.hosts.leg, "-hosts", self.hosts.host_list(ranks)]
        elif self.transport == "tcp":
            env.update(MPIR_CVAR_NOLOCAL="1", UCX_TLS="tcp", UCX_NET_DEVICES=self.interface)
        if self.args.bind != "default":
            command += ["-bind-to", self.args.bind]
        return command + program

    def run(self, impl, ranks, program_args, csv_path):
        env = dict(os.environ)
        command = self.command_for(impl, ranks, program_args + ["--csv", csv_path, "-q"], env)
        shown = " ".join(command)
        print(f"compare: {shown}", file=sys.stderr, flush=True)
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        timed_out = False
        try:
            out, err = process.communicate(timeout=self.args.timeout + 30)
        except stopped_by_signal:
            # The launcher runs in a session of its own (so a timeout can
            # kill all its ranks); a signal to compare.py alone would leave
            # them running and spinning on the cores.
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
        except subprocess.TimeoutExpired:
            timed_out = True
            # The rows written so far are kept (the programs write the CSV
            # as rows complete).
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            print(f"compare: TIMEOUT after {self.args.timeout + 30} s: {shown}", file=sys.stderr)
            self.failures += 1
        if not timed_out and process.returncode != 0:
            # Status 2 with a usage line, or with nothing measured, is the
            # programs' (and tuttirun's) answer to arguments they refuse.
            if process.returncode == 2 and ("--help" in err or "nothing measured" in err):
                raise refused(f"compare: stopped: {shown}\nrefused its arguments:\n{out}{err}")
            print(f"compare: FAILED (status {process.returncode}): {shown}\n{out}{err}",
                  file=sys.stderr)
            self.failures += 1
        if not os.path.exists(csv_path) or os.path.getsize(csv_path) == 0:
            return []
        with open(csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
        os.unlink(csv_path)
        if impl in TUTTI_VARIANTS:
            for row in rows:
                row["implementation"] = impl
        return rows

    def round(self, repeat, gate, implementations, program_args, extra, csv_path, raw):
        """One round: every implementation once per rank count, the order
        rotated. Its rows join raw unless the mode gate saw the machine
        change mode during it; returns the next round's index."""
        if gate:
            gate.wait()
        print(f"compare: round {repeat + 1} of {self.args.repeats}", file=sys.stderr, flush=True)
        rows = []
        for ranks in self.args.ranks:
            shift = (repeat + ranks) % len(implementations)
            for impl in implementations[shift:] + implementations[:shift]:
                rows += self.run(impl, ranks, program_args, csv_path)
        if self.args.memcpy:
            rows += self.run("tutti", 1, ["--memcpy", "-m", self.args.sizes] + extra, csv_path)
        if gate and not gate.held(self.args.repeats):
            return repeat
        for row in rows:
            row["repeat"] = str(repeat)
        raw += rows
        return repeat + 1


def median_latency(rows, column="max_us"):
    return statistics.median(float(r[column]) for r in rows) if rows else None


def rank_counts(text):
    """--ranks: a comma list of whole numbers of at least 1."""
    try:
        counts = [int(n) for n in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: rank counts are whole numbers of at least 1, as 2 or 2,4,8")
    return counts


def at_least_one(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of at least 1")
    return value


class refused(Exception):
    """A program refused its arguments: every other run would too."""


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--build", help="the build directory (default: build/, else build-*)")
    parser.add_argument("--mode", choices=["shm", "tcp", "netns"], default="shm",
                        help="shm, tcp over loopback, or tcp between network namespaces")
    parser.add_argument("--ranks", type=rank_counts, default="2", help="rank counts, e.g. 2,4,8")
    parser.add_argument("--ranks-per-host", type=int, default=1, metavar="K",
                        help="netns mode: K ranks per namespace (host), shared memory "
                             "within a host and TCP between (default 1: TCP between all)")
    parser.add_argument("--collectives", default="all_reduce,broadcast,barrier,all_gather,all_to_all",
                        help="comma list, or all")
    parser.add_argument("--sizes", default="8,1M,16M", help="as tutti-bench -m: 8,1M or 8:64M")
    parser.add_argument("--repeats", type=at_least_one, default=5,
                        help="rounds, each running every implementation once (order rotated)")
    parser.add_argument("--implementations", default=",".join(DEFAULT_IMPLEMENTATIONS),
                        help=f"comma list of {', '.join(IMPLEMENTATIONS)} (default: "
                        f"{','.join(DEFAULT_IMPLEMENTATIONS)})")
    parser.add_argument("--memcpy", action="store_true",
                        help="also measure memcpy (one rank) and give tutti's fraction of it")
    parser.add_argument("--bind", choices=["default", "core", "none"], default="default",
                        help="rank binding for every launcher (default: each launcher's own)")
    parser.add_argument("--tutti-launcher", choices=["tuttirun", "mpirun"], default="tuttirun",
                        help="start tutti's ranks with tuttirun, or Open MPI's mpirun (PMIx)")
    parser.add_argument("--no-validate", action="store_true",
                        help="skip the one checked call per size")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    add_mode_options(parser)
    parser.add_argument("--csv", help="write the comparison table here")
    parser.add_argument("--raw", help="write every run's rows here (for tools/plot_bench.py)")
    parser.add_argument("extra", nargs=argparse.REMAINDER,
                        help="after --: options for every benchmark program")
    args = parser.parse_args()
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    if args.ranks_per_host != 1 and args.mode != "netns":
        parser.error("--ranks-per-host places ranks on the hosts of the netns mode: "
                     "give --mode netns")
    if args.ranks_per_host < 1:
        parser.error(f"--ranks-per-host must be at least 1, not {args.ranks_per_host}")

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = find_build(root, args.build)
    r = runner(args, build)
    gate = gate_from(args, build, "compare")
    implementations = []
    for impl in args.implementations.split(","):
        if impl not in IMPLEMENTATIONS:
            sys.exit(f"compare: unknown implementation {impl!r} (known: {IMPLEMENTATIONS})")
        if r.available(impl):
            implementations.append(impl)
        else:
            print(f"compare: {impl} is not built or its launcher is missing; left out",
                  file=sys.stderr)
    if "tutti" not in implementations:
        sys.exit("compare: tutti-bench or tuttirun is missing")
    cores = len(os.sched_getaffinity(0))
    if "mpich" in implementations and max(args.ranks) > cores:
        # Said before the first round: such a run can take the whole
        # --timeout, every round (an 8-rank run on 2 cores took over 630 s).
        print(f"compare: WARNING: MPICH's ranks spin without yielding; at "
              f"{max(args.ranks)} ranks on {cores} cores each of its runs may take up to "
              f"--timeout ({args.timeout:g} s). --implementations tutti,openmpi leaves it out.",
              file=sys.stderr, flush=True)
    program_args = [args.collectives, "-m", args.sizes] + extra
    if not args.no_validate:
        program_args.append("--validate")

    raw = []
    stopped = None
    stop_on_signals()
    with contextlib.ExitStack() as cleanup, tempfile.TemporaryDirectory(
            prefix="tutti-compare.") as tmp:
        if args.mode == "netns":
            r.hosts = enter_hosts(cleanup, max(args.ranks), "compare", args.ranks_per_host)
        csv_path = os.path.join(tmp, "run.csv")
        repeat = 0
        try:
            while repeat < args.repeats:
                repeat = r.round(repeat, gate, implementations, program_args, extra, csv_path, raw)
        except stopped_by_signal as signal_name:
            # The rounds already complete are still reported below.
            stopped = signal_name
            print(f"compare: stopped by {stopped} in round {repeat + 1} of {args.repeats}; "
                  "the table holds the rounds complete before it", file=sys.stderr, flush=True)

    wrong = [x for x in raw if x.get("valid") == "NO"]
    for x in wrong:
        print(f"compare: WRONG RESULT: {x['implementation']} {x['collective']} "
              f"{x['bytes']} B, {x['ranks']} ranks", file=sys.stderr)

    # (collective, ranks, bytes) -> implementation -> rows
    groups = {}
    memcpy = {}
    for x in raw:
        if x["collective"] == "memcpy":
            memcpy.setdefault(int(x["bytes"]), []).append(x)
            continue
        key = (x["collective"], int(x["ranks"]), int(x["bytes"]))
        groups.setdefault(key, {}).setdefault(x["implementation"], []).append(x)
    transports = sorted({x["transport"] for x in raw if x["implementation"] == "tutti"})
    if transports and not any(r.transport in t for t in transports):
        print(f"compare: WARNING: mode {args.mode}, but tutti reports transport "
              f"{', '.join(transports)} (is TUTTI_TRANSPORT={r.transport} supported by this "
              "build?)",
              file=sys.stderr)

    mpis = [m for m in implementations if m not in TUTTIS]
    variants = [v for v in TUTTI_VARIANTS if v in implementations]
    header = ["collective", "ranks", "bytes"] + [f"{i}_us" for i in implementations]
    header += ["ratio"] + [f"{TUTTI_VARIANTS[v][1]}_ratio" for v in variants]
    header += ["mean_over_ranks_ratio", "iteration_ratio", "tutti_rounds_won", "rounds",
               "sign_test_p"]
    header += ["tutti_GBps", "best_mpi_GBps", "tutti_spread"]
    if args.memcpy:
        header += ["memcpy_GBps", "tutti_of_memcpy"]
    table = []
    for (collective, ranks, size), by_impl in sorted(
            groups.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        lat = {i: median_latency(by_impl.get(i, [])) for i in implementations}
        best = min((lat[m] for m in mpis if lat[m]), default=None)
        tutti = lat["tutti"]
        runs = [float(x["max_us"]) for x in by_impl.get("tutti", [])]
        entry = {"collective": collective, "ranks": ranks, "bytes": size}
        for i in implementations:
            entry[f"{i}_us"] = lat[i]
        entry["ratio"] = tutti / best if tutti and best else None
        for v in variants:
            entry[f"{TUTTI_VARIANTS[v][1]}_ratio"] = lat[v] / best if lat[v] and best else None
        # The ranks' mean (OSU's "Avg Latency"): where a rooted call's ranks
        # leave it far apart, the slowest rank alone says little of the call.
        mean = {i: median_latency(by_impl.get(i, []), "avg_us") for i in implementations}
        best_mean = min((mean[m] for m in mpis if mean[m]), default=None)
        entry["mean_over_ranks_ratio"] = (mean["tutti"] / best_mean
                                          if mean["tutti"] and best_mean else None)
        # Whole iterations (the benchmark's barrier and the call): where the
        # ranks leave a call apart, the barrier after it absorbs the gap.
        whole = {i: median_latency(by_impl.get(i, []), "iteration_us") for i in implementations}
        best_whole = min((whole[m] for m in mpis if whole[m]), default=None)
        entry["iteration_ratio"] = (whole["tutti"] / best_whole
                                    if whole["tutti"] and best_whole else None)
        # Round by round: tutti against the quicker MPI of the same round.
        by_round = {}
        for impl in ["tutti"] + mpis:
            for x in by_impl.get(impl, []):
                by_round.setdefault(x["repeat"], {})[impl] = float(x["max_us"])
        pairs = [(one["tutti"], min(one[m] for m in mpis if m in one))
                 for one in by_round.values()
                 if "tutti" in one and any(m in one for m in mpis)]
        entry["won"] = paired.shown(pairs, with_ratio=False)
        won = paired.summary(pairs)
        entry["tutti_rounds_won"], entry["rounds"], entry["sign_test_p"] = (
            won[1:] if won else (None, None, None))
        entry["tutti_GBps"] = size / tutti / 1e3 if tutti and size else None
        entry["best_mpi_GBps"] = size / best / 1e3 if best and size else None
        entry["tutti_spread"] = max(runs) / min(runs) if runs and min(runs) > 0 else None
        if args.memcpy:
            m = median_latency(memcpy.get(size, []))
            entry["memcpy_GBps"] = size / m / 1e3 if m and size else None
            entry["tutti_of_memcpy"] = (entry["tutti_GBps"] / entry["memcpy_GBps"]
                                        if entry["tutti_GBps"] and entry["memcpy_GBps"] else None)
        table.append(entry)

    def show(value, spec):
        return "-" if value is None else format(value, spec)

    placed = f", {args.ranks_per_host} ranks per host" if r.hierarchical else ""
    print(f"# tutti vs MPI, mode {args.mode}{placed} (tutti transport: "
          f"{', '.join(transports) or '?'}), "
          f"medians of {repeat} rounds of the max-over-ranks mean latency;\n"
          f"# ratio = tutti / best MPI (below 1: tutti faster); shared = the same for tutti-shared "
          f"(buffers from tutti::shared_allocator), blocking for tutti-blocking (each call "
          f"through tutti::wait); spread = slowest / fastest "
          f"tutti round;\n# mean = the same ratio for the mean over ranks (OSU's Avg Latency); "
          f"iter = the same ratio for whole iterations (the benchmark's barrier "
          f"and the call, slowest rank); won = rounds in which tutti beat the best MPI of the "
          f"round, * where a sign test gives p < 0.05" + (f"; {gate.describe()}" if gate else ""))
    widths = [15, 6, 9] + [max(16, len(i) + 5) for i in implementations]
    widths += [8] + [9] * len(variants) + [8, 8, 9, 11, 14, 8]
    if args.memcpy:
        widths += [12, 10]
    names = ["collective", "ranks", "bytes"] + [f"{i} µs" for i in implementations]
    names += ["ratio"] + [TUTTI_VARIANTS[v][1] for v in variants] + ["mean", "iter", "won"]
    names += ["tutti GB/s", "best MPI GB/s", "spread"]
    if args.memcpy:
        names += ["memcpy GB/s", "of memcpy"]
    print("".join(f"{n:<{w}}" if k == 0 else f"{n:>{w}}"
                  for k, (n, w) in enumerate(zip(names, widths))))
    for e in table:
        cells = [e["collective"], str(e["ranks"]), human(e["bytes"])]
        cells += [show(e[f"{i}_us"], ".2f") for i in implementations]
        cells += [show(e["ratio"], ".2f")]
        cells += [show(e[f"{TUTTI_VARIANTS[v][1]}_ratio"], ".2f") for v in variants]
        cells += [show(e["mean_over_ranks_ratio"], ".2f"), show(e["iteration_ratio"], ".2f"),
                  e["won"]]
        cells += [show(e["tutti_GBps"], ".2f"),
                  show(e["best_mpi_GBps"], ".2f"), show(e["tutti_spread"], ".2f")]
        if args.memcpy:
            cells += [show(e["memcpy_GBps"], ".2f"), show(e["tutti_of_memcpy"], ".0%")]
        print("".join(f"{c:<{w}}" if k == 0 else f"{c:>{w}}"
                      for k, (c, w) in enumerate(zip(cells, widths))))

    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            for e in table:
                writer.writerow({k: ("" if v is None else v) for k, v in e.items() if k != "won"})
    if args.raw and raw:
        with open(args.raw, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(raw[0].keys()))
            writer.writeheader()
            writer.writerows(raw)
    return 1 if r.failures or wrong or stopped else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except refused as stop:
        print(stop, file=sys.stderr)
        sys.exit(2)
