#!/usr/bin/env python3
"""compare.py stopped by a signal in the middle of a run (a `timeout`, Ctrl-C,
a closed terminal): the launcher it started, which runs in a session of its
own, goes with it — no rank is left running — its temporary directory is
removed, the rounds complete before the signal are still reported, and the
exit status is 1.

    compare_stopped.py BUILD_DIR

Exit status 0 when all holds, else 1 with the reason.
"""
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(os.path.dirname(HERE), "compare.py")


def fail(message):
    print(f"compare stopped: FAIL: {message}", file=sys.stderr)
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


def main():
    build = sys.argv[1]
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    # Each run measures for about a second, so the signal lands inside one.
    process = subprocess.Popen(
        [sys.executable, COMPARE, "--build", build, "--implementations", "tutti",
         "--collectives", "all_reduce", "--sizes", "8", "--repeats", "1000", "--",
         "-i", "100000000", "--time-limit", "1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = []
    deadline = time.monotonic() + 120
    # Wait for the second round's launcher: one round is then complete.
    while not (len(said) >= 2 and said[-2].startswith("compare: round 2 of")
               and said[-1].startswith("compare: /")):
        line = process.stderr.readline()
        if not line or time.monotonic() > deadline:
            process.kill()
            fail(f"no second round started; stderr so far {said[-5:]!r}")
        said.append(line.rstrip("\n"))
    csv = re.search(r"--csv (\S+)", said[-1])
    if not csv:
        fail(f"no --csv in the launcher's line {said[-1]!r}")
    scratch = os.path.dirname(csv.group(1))
    time.sleep(0.3)
    if not processes_naming(scratch):
        fail(f"no rank of the second round is running (looked for {scratch})")
    process.send_signal(signal.SIGTERM)
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        fail("compare.py did not stop within 60 s of SIGTERM")
    err = "\n".join(said) + "\n" + err
    if process.returncode != 1:
        fail(f"exit status {process.returncode}, not 1; stderr {err[-600:]!r}")
    if "compare: stopped by SIGTERM in round 2 of 1000" not in err:
        fail(f"the stop is not said; stderr {err[-600:]!r}")
    if not re.search(r"medians of 1 rounds", out) or not re.search(r"^all_reduce\s+2\s", out,
                                                                   re.MULTILINE):
        fail(f"the complete round is not reported; stdout {out[-600:]!r}")
    # The ranks were killed with their launcher's process group; give the
    # kernel a moment to reap them.
    for _ in range(50):
        left = processes_naming(scratch)
        if not left:
            break
        time.sleep(0.1)
    if left:
        fail(f"processes left running after the stop: {left}")
    if os.path.exists(scratch):
        fail(f"temporary directory {scratch} left behind")
    print("compare stopped: the launcher's ranks killed, the complete round reported")


if __name__ == "__main__":
    main()
