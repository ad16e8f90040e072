"""Round-by-round comparison of two series measured in the same rounds.

ab.py and compare.py run what they compare in turn within each round, so a
round's two figures were taken minutes apart at most, while the machine's
noise moves whole rounds (a 4-rank TCP A/A run's medians differed by 17 %,
docs/performance.md, thirty-seventh session). Pairing by round and counting
who was quicker (a sign test) says whether a difference is beyond chance.
"""

import math
import statistics


def sign_test(wins, losses):
    """Two-sided p of a sign test: how likely a split at least this uneven is
    when either is as likely to be quicker in a round (ties left out)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def summary(pairs):
    """(median ratio, wins, rounds, p) of (value, base) pairs, or None when
    there are none: wins are the rounds where value was the quicker."""
    pairs = [(value, base) for value, base in pairs if base > 0]
    if not pairs:
        return None
    ratio = statistics.median(value / base for value, base in pairs)
    wins = sum(value < base for value, base in pairs)
    losses = sum(value > base for value, base in pairs)
    return ratio, wins, len(pairs), sign_test(wins, losses)


def shown(pairs, with_ratio=True):
    """'0.82 8/9 *': the median ratio, the rounds won, and * where p < 0.05."""
    s = summary(pairs)
    if s is None:
        return "-"
    ratio, wins, rounds, p = s
    mark = " *" if p < 0.05 else "  "
    return (f"{ratio:.2f} " if with_ratio else "") + f"{wins}/{rounds}{mark}"
