"""Rounds of a benchmark taken only in the machine's quick mode.

This machine switches between a quick and a slow mode every few minutes
(one cache line between the two cores: about 55 or 250 ns), and every
small-message figure moves with it. benchmarks/line_bounce reads the mode;
a calm_gate waits for the quick mode before a round and says after it
whether the mode held, so that ab.py and compare.py keep only the rounds
taken in one mode (--calm-below NS).
"""

import os
import subprocess
import sys
import time


class calm_gate:
    def __init__(self, build, below_ns, who):
        self.bouncer = os.path.join(build, "benchmarks", "line_bounce")
        self.below_ns = below_ns
        self.who = who
        self.dropped = 0
        if not os.access(self.bouncer, os.X_OK):
            sys.exit(f"{who}: --calm-below needs {self.bouncer} (build it with ninja -C {build})")

    def line_ns(self):
        out = subprocess.run([self.bouncer], capture_output=True, text=True, check=True).stdout
        return float(out.split()[-2])

    def wait(self):
        """Returns once a line bounces below the limit; exits after ten minutes."""
        for _ in range(60):
            ns = self.line_ns()
            if ns < self.below_ns:
                return
            print(f"{self.who}: line bounce {ns:.0f} ns, not below {self.below_ns:g}: waiting",
                  file=sys.stderr)
            time.sleep(10)
        sys.exit(f"{self.who}: the machine stayed in its slow mode for ten minutes")

    def held(self, rounds):
        """Whether the quick mode held through the round just taken; a round
        that it did not is counted as dropped (at most 4 * rounds of them)."""
        ns = self.line_ns()
        if ns < self.below_ns:
            return True
        self.dropped += 1
        print(f"{self.who}: line bounce {ns:.0f} ns after the round: round dropped",
              file=sys.stderr)
        if self.dropped > 4 * rounds:
            sys.exit(f"{self.who}: too many rounds dropped; the machine is not calm enough")
        return False

    def describe(self):
        return (f"rounds kept while a line bounced below {self.below_ns:g} ns "
                f"({self.dropped} dropped)")
