#!/usr/bin/env python3
"""Smoke test of the benchmarks' netns mode: compare.py --mode netns runs
tutti and Open MPI (when built) with every rank in a network namespace of its
own, one short round with every result checked, and ab.py --netns runs two
labels of tutti-bench the same way. Checks the tables name every size, that
tutti reports the TCP transport, and that no namespace or interface of the
runs is left behind.

    netns_smoke.py BUILD_DIR

Also runs compare.py with two hosts of two ranks (--ranks-per-host 2: tutti
over shm+tcp, Open MPI with one daemon per host), and checks refusals:
netns_rank.sh without its environment, more ranks than the namespaces'
subnet holds, --ranks-per-host outside the netns mode, an unknown host
given to netns_agent.sh. Exit status 0 when all holds, 77
(skipped, for meson) where network namespaces cannot be made (not root, no
iproute2), else 1 with the reason.
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.dirname(HERE)
failures = []
passes = []


def check(condition, what):
    print(f"{'ok' if condition else 'FAIL'}: {what}", flush=True)
    (passes if condition else failures).append(what)


def ours_left():
    """Namespaces and links named as netns_hosts names them (tcmp<pid>)."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [w for w in (names + links).split() if w.startswith("tcmp")]


def run(command):
    # In the sanitizer build the MPI reference is instrumented too, and Open
    # MPI leaves what its components allocated in MPI_Init; they are unloaded
    # before the check, so no suppression can name them. Leaks of tutti-bench
    # are checked by tutti-bench-smoke; this test is about the namespaces.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    return done.returncode, done.stdout, done.stderr


def refusals(build):
    """Bad input, refused with its reason before any namespace is made."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TUTTI_COMPARE_NETNS", "TUTTI_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")}
    done = subprocess.run([os.path.join(BENCHMARKS, "netns_rank.sh"), "true"],
                          capture_output=True, text=True, env=env)
    check(done.returncode == 2 and "needs TUTTI_COMPARE_NETNS and a rank" in done.stderr,
          f"netns_rank.sh without its environment exits 2 naming what it needs "
          f"({done.returncode}: {done.stderr.strip()})")
    status, _, err = run([sys.executable, os.path.join(BENCHMARKS, "compare.py"), "--build",
                          build, "--mode", "netns", "--ranks", "254", "--repeats", "1",
                          "--implementations", "tutti"])
    check(status == 1 and "cannot place 254 ranks" in err,
          f"compare.py --mode netns --ranks 254 exits 1 naming the limit ({status}: "
          f"{err.strip()[-300:]})")
    status, _, err = run([sys.executable, os.path.join(BENCHMARKS, "compare.py"), "--build",
                          build, "--ranks-per-host", "2", "--repeats", "1",
                          "--implementations", "tutti"])
    check(status == 2 and "give --mode netns" in err,
          f"compare.py --ranks-per-host without the netns mode exits 2 naming why ({status}: "
          f"{err.strip()[-300:]})")
    done = subprocess.run([os.path.join(BENCHMARKS, "netns_agent.sh"), "-x", "elsewhere", "true"],
                          capture_output=True, text=True, env=dict(env, TUTTI_COMPARE_NETNS="x"))
    check(done.returncode == 2 and "'elsewhere' is not a host of the netns mode" in done.stderr,
          f"netns_agent.sh refuses a host it does not know ({done.returncode}: "
          f"{done.stderr.strip()})")


def main():
    build = os.path.abspath(sys.argv[1])
    refusals(build)
    if failures:
        print(f"{len(passes)} passed, {len(failures)} failed")
        return 1
    if shutil.which("ip") is None:
        print("netns smoke: SKIP: iproute2's ip is not installed")
        return 77
    probe = subprocess.run(["ip", "netns", "add", f"tcmpprobe{os.getpid()}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"netns smoke: SKIP: cannot make network namespaces here ({probe.stderr.strip()})")
        return 77
    subprocess.run(["ip", "netns", "delete", f"tcmpprobe{os.getpid()}"])
    before = ours_left()

    status, out, err = run([sys.executable, os.path.join(BENCHMARKS, "compare.py"), "--build",
                            build, "--mode", "netns", "--ranks", "2", "--collectives",
                            "all_reduce,broadcast", "--sizes", "8,64K", "--repeats", "1",
                            "--implementations", "tutti,tutti-blocking,openmpi", "--",
                            "--time-limit", "0.05"])
    check(status == 0, f"compare.py --mode netns exits 0 (it exited {status}"
                       f"{'; stderr: ' + err[-2000:] if status else ''})")
    rows = [line.split() for line in out.splitlines() if line and not line.startswith("#")]
    for collective in ("all_reduce", "broadcast"):
        for size in (["8", "B"], ["64", "KiB"]):
            check(any(r[:1] == [collective] and r[2:4] == size for r in rows),
                  f"compare.py's table has {collective} of {' '.join(size)}")
    check("tutti transport: tcp" in out, "tutti reports the TCP transport")
    check(any(line.startswith("collective") and "tutti-blocking µs" in line and "blocking" in
              line.split() for line in out.splitlines()),
          "the table has tutti-blocking's column and its ratio")
    check(not any(r[:1] == ["all_reduce"] and r[5] == "-" for r in rows if len(r) > 5),
          "tutti-blocking measured every all_reduce")
    # Where Open MPI is not built (the sanitizer build), `won` has no MPI to pair with.
    header = next((line for line in out.splitlines() if line.startswith("collective")), "")
    if "openmpi" in header:
        check("won" in header.split() and all(
            any(re.fullmatch(r"[01]/1", cell) for cell in r)
            for r in rows if r[:1] in (["all_reduce"], ["broadcast"])),
            "every row says whether tutti won its one round against Open MPI")
    else:
        check("won" in header.split(), "the table has the column won, without an MPI to pair")
    check("WRONG RESULT" not in err, "no wrong result")

    # Two hosts of two ranks: shm within, TCP between; Open MPI started as
    # on a cluster, one daemon per host through netns_agent.sh.
    status, out, err = run([sys.executable, os.path.join(BENCHMARKS, "compare.py"), "--build",
                            build, "--mode", "netns", "--ranks", "4", "--ranks-per-host", "2",
                            "--collectives", "all_reduce", "--sizes", "64K", "--repeats", "1",
                            "--timeout", "120", "--implementations", "tutti,openmpi", "--",
                            "--time-limit", "0.05"])
    check(status == 0, f"compare.py --mode netns --ranks-per-host 2 exits 0 (it exited {status}"
                       f"{'; stderr: ' + err[-2000:] if status else ''})")
    check("2 ranks per host (tutti transport: shm+tcp)" in out,
          "with 2 ranks per host tutti reports shm+tcp")
    lines = out.splitlines()
    header = next((line for line in lines if line.startswith("collective")), "")
    row = next((line.split() for line in lines if line.split()[:4] == ["all_reduce", "4", "64",
                                                                        "KiB"]), None)
    check(row is not None, "its table has the 4-rank 64 KiB all_reduce")
    if row is not None and "openmpi" in header:
        check(row[5] != "-", f"Open MPI ran on the two hosts (its column: {row[5]})")
    check("WRONG RESULT" not in err, "no wrong result on two hosts")

    bench = os.path.join(build, "tools", "tutti-bench", "tutti-bench")
    status, out, err = run([sys.executable, os.path.join(BENCHMARKS, "ab.py"), "--netns",
                            "--rounds", "1", "--bind", "none", "-c", "all_reduce", "-m", "64K",
                            "--time-limit", "0.05", "--tuttirun",
                            os.path.join(build, "tools", "tuttirun", "tuttirun"),
                            f"one={bench}", f"two={bench}"])
    check(status == 0, f"ab.py --netns exits 0 (it exited {status}"
                       f"{'; stderr: ' + err[-2000:] if status else ''})")
    check("between network namespaces" in out and any(
        line.split()[:2] == ["all_reduce", "65536"] for line in out.splitlines()),
        "ab.py's table has the 64 KiB all_reduce, taken between namespaces")
    check("# paired with one round by round" in out and any(
        re.fullmatch(r"all_reduce\s+65536\s+[0-9]+\.[0-9]{2} [01]/1\s+[0-9]+\.[0-9]{2} [01]/1",
                     line.strip()) for line in out.splitlines()),
        "ab.py pairs the second label with the first: its ratio and wins in the one round, "
        "for the call and for the whole iteration")

    status, out, err = run([sys.executable, os.path.join(BENCHMARKS, "ab.py"), "--netns",
                            "--ranks", "4", "--ranks-per-host", "2", "--rounds", "1", "--bind",
                            "none", "-c", "all_reduce", "-m", "1M", "--time-limit", "0.05",
                            "--tuttirun", os.path.join(build, "tools", "tuttirun", "tuttirun"),
                            f"one={bench}"])
    check(status == 0 and "2 ranks per network namespace" in out and any(
        line.split()[:2] == ["all_reduce", "1048576"] for line in out.splitlines()),
        f"ab.py --netns --ranks-per-host 2 measures the 1 MiB all_reduce on two hosts "
        f"(status {status}{'; stderr: ' + err[-2000:] if status else ''})")

    check(ours_left() == before, f"no namespace or link left behind ({ours_left()})")
    print(f"{len(passes)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
