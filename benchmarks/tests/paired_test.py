#!/usr/bin/env python3
"""benchmarks/paired.py, which ab.py and compare.py pair rounds with: the
sign test's p-values are the exact binomial tails, a cell shows the median
ratio, the rounds won and the mark only where p < 0.05; and ab.py refuses a
label given twice before anything runs (an A/A run needs two names).

    paired_test.py
"""
import os
import subprocess
import sys

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCHMARKS)
import paired  # noqa: E402

passed = failed = 0


def check(condition, what):
    global passed, failed
    if condition:
        passed += 1
    else:
        failed += 1
        print(f"FAILED {what}")


# Two-sided tails of Binomial(n, 1/2): 2 * sum_{i <= k} C(n, i) / 2^n.
check(paired.sign_test(9, 0) == 2 / 512, f"9 of 9: p = 2/512 ({paired.sign_test(9, 0)})")
check(paired.sign_test(1, 8) == 2 * 10 / 512, f"1 of 9: p = 20/512 ({paired.sign_test(1, 8)})")
check(paired.sign_test(7, 2) == 2 * 46 / 512, f"7 of 9: p = 92/512 ({paired.sign_test(7, 2)})")
check(paired.sign_test(5, 0) == 2 / 32, f"5 of 5 cannot reach 0.05 ({paired.sign_test(5, 0)})")
check(paired.sign_test(3, 3) == 1.0, f"an even split: p = 1 ({paired.sign_test(3, 3)})")
check(paired.sign_test(0, 0) == 1.0, "no decided round: p = 1")

# (label, base) per round: quicker in 8 of 9 at half the time, one slower.
cell = paired.shown([(1.0, 2.0)] * 8 + [(3.0, 2.0)])
check(cell == "0.50 8/9 *", f"8 of 9 quicker is marked ({cell!r})")
cell = paired.shown([(2.0, 1.0)] * 9)
check(cell == "2.00 0/9 *", f"9 of 9 slower is marked too ({cell!r})")
cell = paired.shown([(1.0, 2.0)] * 5)
check(cell == "0.50 5/5  ", f"5 of 5 is not marked ({cell!r})")
cell = paired.shown([(2.0, 2.0), (1.0, 2.0), (3.0, 2.0)])
check(cell == "1.00 1/3  ", f"a tie counts as no win ({cell!r})")
check(paired.shown([]) == "-", "no pair: '-'")
cell = paired.shown([(1.0, 2.0)] * 8 + [(3.0, 2.0)], with_ratio=False)
check(cell == "8/9 *", f"without the ratio, as compare.py's column ({cell!r})")
check(paired.summary([(1.0, 2.0)] * 8 + [(3.0, 2.0)]) == (0.5, 8, 9, 2 * 10 / 512),
      "summary: median ratio, wins, rounds, p")

done = subprocess.run([sys.executable, os.path.join(BENCHMARKS, "ab.py"), "--tuttirun",
                       sys.executable, f"same={sys.executable}", f"same={sys.executable}"],
                      capture_output=True, text=True, timeout=60)
check(done.returncode == 2 and "the label 'same' is given twice" in done.stderr,
      f"a label given twice is refused ({done.returncode}: {done.stderr.strip()[-300:]})")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
