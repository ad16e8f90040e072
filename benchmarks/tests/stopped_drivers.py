#!/usr/bin/env python3
"""compare.py and ab.py stopped by SIGTERM in the middle of a run (a
`timeout`, a `kill`): the ranks they launched go with them — compare.py's
launcher runs in a session of its own, which a signal to the driver alone
does not reach — their temporary directories are removed, the rounds
complete before the signal are still reported, and the exit status is 1.

    stopped_drivers.py BUILD_DIR

Exit status 0 when all holds, else 1 with the reason.
"""
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.dirname(HERE)
# Calls enough for a run to last its --time-limit of a second, so the signal
# lands inside one; an odd count marks this test's ranks among others'.
MARKER = "99999989"


def fail(message):
    print(f"stopped drivers: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def processes_naming(text):
    """The pids whose command line holds text."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in command and int(pid) != os.getpid():
            found.append(int(pid))
    return found


def stop_in_second_round(name, command, second_round):
    """Runs command, sends it SIGTERM once a line starting second_round is
    said and that round's ranks run; returns (stdout, stderr)."""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    process = subprocess.Popen([sys.executable, *command], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    said = []
    deadline = time.monotonic() + 120
    while not any(line.startswith(second_round) for line in said):
        line = process.stderr.readline()
        if not line or time.monotonic() > deadline:
            process.kill()
            fail(f"{name}: no second round started; stderr so far {said[-5:]!r}")
        said.append(line.rstrip("\n"))
    for _ in range(100):
        if processes_naming(MARKER):
            break
        time.sleep(0.05)
    else:
        fail(f"{name}: no rank of the second round is running")
    process.send_signal(signal.SIGTERM)
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        fail(f"{name} did not stop within 60 s of SIGTERM")
    err = "\n".join(said) + "\n" + err
    if process.returncode != 1:
        fail(f"{name}: exit status {process.returncode}, not 1; stderr {err[-600:]!r}")
    if f"{name}: stopped by SIGTERM in round 2 of 1000" not in err:
        fail(f"{name}: the stop is not said; stderr {err[-600:]!r}")
    # The ranks were killed with their launcher; give the kernel a moment
    # to reap them.
    for _ in range(50):
        left = processes_naming(MARKER)
        if not left:
            break
        time.sleep(0.1)
    if left:
        fail(f"{name}: processes left running after the stop: {left}")
    return out, err


def main():
    build = sys.argv[1]
    bench = os.path.join(build, "tools", "tutti-bench", "tutti-bench")

    out, err = stop_in_second_round(
        "compare", [os.path.join(BENCHMARKS, "compare.py"), "--build", build,
                    "--implementations", "tutti", "--collectives", "all_reduce", "--sizes", "8",
                    "--repeats", "1000", "--", "-i", MARKER, "--time-limit", "1"],
        "compare: round 2 of")
    if "medians of 1 rounds" not in out or not re.search(r"^all_reduce\s+2\s", out,
                                                         re.MULTILINE):
        fail(f"compare: the complete round is not reported; stdout {out[-600:]!r}")
    scratch = re.search(r"--csv (\S+)/run\.csv", err)
    if not scratch:
        fail("compare: no --csv in the launchers' lines")
    if os.path.exists(scratch.group(1)):
        fail(f"compare: temporary directory {scratch.group(1)} left behind")

    # ab.py runs its label a in round 2 after b, so round 2's line comes
    # once round 1 (a, then b) is complete.
    out, _ = stop_in_second_round(
        "ab", [os.path.join(BENCHMARKS, "ab.py"), "--ranks", "2", "-c", "all_reduce", "-m", "8",
               "--rounds", "1000", "--time-limit", "1", "-i", MARKER,
               "--tuttirun", os.path.join(build, "tools", "tuttirun", "tuttirun"),
               f"a={bench}", f"b={bench}"],
        "ab: round 2 of")
    if "median over 1 interleaved rounds" not in out or not re.search(
            r"^all_reduce\s+8\s", out, re.MULTILINE):
        fail(f"ab: the complete round is not reported; stdout {out[-600:]!r}")
    print("stopped drivers: the ranks killed, the complete round reported (compare.py, ab.py)")


if __name__ == "__main__":
    main()
