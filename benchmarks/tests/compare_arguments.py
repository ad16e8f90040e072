#!/usr/bin/env python3
"""compare.py's answers to arguments it cannot use: rank counts and repeats
that are not whole numbers of at least 1 are refused before anything runs,
and a run whose program refuses its arguments (a size that is not one)
stops the comparison at once, with that program's message, instead of being
repeated for every round and implementation. And the MPI reference, where
built, skips a size no machine holds, saying why, as tutti-bench does.

    compare_arguments.py BUILD_DIR

Exit status 0 when all holds, else 1 with the reason.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(os.path.dirname(HERE), "compare.py")


def fail(message):
    print(f"compare arguments: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def compare(build, *args):
    # As compare_smoke.py: the sanitizer build's programs, leaks not checked.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    return subprocess.run([sys.executable, COMPARE, "--build", build, *args], env=env,
                          capture_output=True, text=True, timeout=120)


def main():
    build = sys.argv[1]
    for args, says in [
            (["--ranks", "0"], "argument --ranks: '0': rank counts are whole numbers of at least 1"),
            (["--ranks", "2,x"], "argument --ranks: '2,x': rank counts are whole numbers"),
            (["--repeats", "0"], "argument --repeats: '0': a whole number of at least 1")]:
        done = compare(build, *args)
        if done.returncode != 2 or says not in done.stderr:
            fail(f"{args}: exit {done.returncode}, stderr {done.stderr[-400:]!r}")
        if "compare: round" in done.stderr:
            fail(f"{args}: refused only after starting to run")

    done = compare(build, "--implementations", "tutti", "--collectives", "all_reduce", "--sizes",
                   "bogus", "--repeats", "3")
    launched = [line for line in done.stderr.splitlines()
                if line.startswith("compare: /") or line.startswith("compare: FAILED")]
    if (done.returncode != 2 or "compare: stopped:" not in done.stderr
            or "'bogus' is not a size" not in done.stderr or len(launched) != 1):
        fail(f"--sizes bogus: exit {done.returncode}, {len(launched)} runs, "
             f"stderr {done.stderr[-600:]!r}")
    # The MPI reference skips a size no machine holds as tutti-bench does,
    # saying why, and measures the others (where it and Open MPI are built).
    reference = os.path.join(build, "benchmarks", "mpi_collectives_openmpi")
    mpirun = shutil.which("mpirun.openmpi")
    if os.path.exists(reference) and mpirun:
        # Open MPI's own allocations outlive MPI_Finalize: leaks not checked.
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   ASAN_OPTIONS=":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                        "detect_leaks=0"])))
        done = subprocess.run([mpirun, "-n", "2", "--oversubscribe", reference, "all_reduce", "-m",
                               "8,100000G", "-i", "5", "--validate", "-q"], env=env,
                              capture_output=True, text=True, timeout=120)
        if (done.returncode != 0
                or "skipped: its buffers take 200000.0 GiB on each rank" not in done.stdout
                or done.stdout.count(" yes") != 1):
            fail(f"mpi_collectives -m 8,100000G: exit {done.returncode}\n{done.stdout}"
                 f"\n{done.stderr[-600:]}")
    print("compare arguments: ok")


if __name__ == "__main__":
    main()
