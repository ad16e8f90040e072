"""Rounds of a benchmark taken only in one of the machine's modes.

This machine switches between a quick and a slow mode every few minutes
(one cache line between the two cores: about 55 or 250 ns), and every
small-message figure moves with it. benchmarks/line_bounce reads the mode;
a calm_gate waits for the wanted mode before a round and says after it
whether the mode held, so that ab.py and compare.py keep only the rounds
taken in one mode: the quick one (--calm-below NS), or, to study the slow
one, the slow one (ab.py --slow-above NS).
"""

import os
import subprocess
import sys
import time


class calm_gate:
    """Rounds while a line bounces below below_ns, or with slow=True above it."""

    def __init__(self, build, below_ns, who, slow=False):
        self.bouncer = os.path.join(build, "benchmarks", "line_bounce")
        self.below_ns = below_ns
        self.slow = slow
        self.who = who
        self.dropped = 0
        if not os.access(self.bouncer, os.X_OK):
            sys.exit(f"{who}: the mode gate needs {self.bouncer} (build it with ninja -C {build})")

    def line_ns(self):
        out = subprocess.run([self.bouncer], capture_output=True, text=True, check=True).stdout
        return float(out.split()[-2])

    def wanted(self, ns):
        return ns >= self.below_ns if self.slow else ns < self.below_ns

    def wanted_words(self):
        return f"{'above' if self.slow else 'below'} {self.below_ns:g}"

    def wait(self):
        """Returns once the wanted mode holds; exits after ten minutes."""
        for _ in range(60):
            ns = self.line_ns()
            if self.wanted(ns):
                return
            print(f"{self.who}: line bounce {ns:.0f} ns, not {self.wanted_words()}: waiting",
                  file=sys.stderr)
            time.sleep(10)
        sys.exit(f"{self.who}: the machine stayed out of the wanted mode for ten minutes")

    def held(self, rounds):
        """Whether the quick mode held through the round just taken; a round
        that it did not is counted as dropped (at most 4 * rounds of them)."""
        ns = self.line_ns()
        if self.wanted(ns):
            return True
        self.dropped += 1
        print(f"{self.who}: line bounce {ns:.0f} ns after the round: round dropped",
              file=sys.stderr)
        if self.dropped > 4 * rounds:
            sys.exit(f"{self.who}: too many rounds dropped; the machine is not calm enough")
        return False

    def describe(self):
        return (f"rounds kept while a line bounced {self.wanted_words()} ns "
                f"({self.dropped} dropped)")


def add_mode_options(parser):
    """--calm-below and --slow-above, for a script that runs rounds."""
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--calm-below", type=float, default=None, metavar="NS",
                       help="run a round only while a cache line bounces between the two "
                            "cores in less than NS ns (benchmarks/line_bounce), and take it "
                            "again if it stopped doing so during the round")
    modes.add_argument("--slow-above", type=float, default=None, metavar="NS",
                       help="the opposite, to study the machine's slow mode: rounds only "
                            "while the line bounce reads above NS ns")


def gate_from(args, build, who):
    """The calm_gate that add_mode_options' arguments ask for, or None."""
    if args.calm_below is not None:
        return calm_gate(build, args.calm_below, who)
    if args.slow_above is not None:
        return calm_gate(build, args.slow_above, who, slow=True)
    return None
