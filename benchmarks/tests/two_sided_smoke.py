"""line_bounce, cma_pieces and cell_copy: a short run of each prints its
figures, and bad options and a one-CPU affinity are refused with an error
naming them."""
import os
import re
import shutil
import subprocess
import sys

line_bounce, cma_pieces, cell_copy = sys.argv[1], sys.argv[2], sys.argv[3]
passed = failed = 0


def check(what, command, code, pattern):
    global passed, failed
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    text = run.stdout + run.stderr
    ok = (run.returncode == 0) == (code == 0) and (code == 0 or run.returncode == code)
    ok = ok and re.search(pattern, text) is not None
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAILED {what}: exit {run.returncode}, output:\n{text}")


two_cpus = len(os.sched_getaffinity(0)) >= 2
if two_cpus:
    check("line_bounce", [line_bounce, "-n", "1000"], 0, r"line bounce: [0-9.]+ ns")
    # Either the figure or the refusal that names the missing instruction.
    direct = subprocess.run([line_bounce, "-n", "1000", "--direct"], capture_output=True,
                            text=True, timeout=60)
    if direct.returncode == 0:
        check("line_bounce --direct", [line_bounce, "-n", "1000", "--direct"], 0,
              r"line bounce \(direct stores\): [0-9.]+ ns")
    else:
        check("line_bounce --direct", [line_bounce, "--direct"], 2, r"needs MOVDIR64B")
    check("cma_pieces", [cma_pieces, "-m", "64", "-n", "3", "-p", "0,16"], 0,
          r"64 KiB pieces:.*\n.*16 KiB pieces:")
    check("cell_copy", [cell_copy, "-m", "4096", "-n", "200"], 0,
          r"4096 bytes whole: [0-9]+ ns\n4096 bytes prefetched: [0-9]+ ns\n"
          r"4096 bytes progressive: [0-9]+ ns")
    check("cell_copy, a chunk longer than the message", [cell_copy, "-m", "100", "-n", "50",
          "--chunk", "4096"], 0, r"100 bytes progressive: [0-9]+ ns")
check("a length of 0", [cma_pieces, "-m", "0"], 105, r"--kib: Value 0 not in range")
check("a piece that is not a number", [cma_pieces, "-p", "0,abc"], 104, r"Could not convert")
check("a message over 1 MiB", [cell_copy, "-m", "2000000"], 105, r"--bytes: Value 2000000 not in range")
check("a chunk below a line", [cell_copy, "--chunk", "8"], 105, r"--chunk: Value 8 not in range")
if shutil.which("taskset"):
    check("one CPU", ["taskset", "-c", "0", cma_pieces], 2, r"it needs two")
    check("one CPU", ["taskset", "-c", "0", line_bounce], 2, r"it needs two")
    check("one CPU", ["taskset", "-c", "0", cell_copy], 2, r"it needs two")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
