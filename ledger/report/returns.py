"""Observed return with a 95% confidence interval, from integer sums.

Bets on one round share its outcome (small and big on the same draw, every
seat against the same dealer), so the independent samples are rounds, not
bets: for each round, a family's stakes `s` and returns `y` are summed, and
the observed return is the ratio estimator R = sum(y) / sum(s). Its variance
is estimated from the round clusters as n/(n-1) * sum((y - R*s)^2) / sum(s)^2,
which expands into sums of s^2, y^2 and s*y: all kept as exact integers, so
no float ever touches an amount. Only the statistic (the square root, the
interval's bounds) is a float.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
#: Below this many rounds the normal approximation is not trusted: no interval is shown.
MIN_ROUNDS = 30


@dataclass
class Cluster:
    """One round's bets of one family: the sample unit."""

    bets: int = 0
    staked: int = 0
    returned: int = 0
    expected: Fraction = field(default_factory=Fraction)  # sum of stake * theoretical return
    unpriced: int = 0  # stakes whose bet has no theoretical return here

    def settle(self, stake: int, returned: int, theory: Fraction | None) -> None:
        self.bets += 1
        self.staked += stake
        self.returned += returned
        if theory is None:
            self.unpriced += stake
        else:
            self.expected += stake * theory


@dataclass
class Returns:
    """Settled bets of one game and family, summed over rounds in integers."""

    rounds: int = 0
    bets: int = 0
    staked: int = 0
    returned: int = 0
    staked_sq: int = 0  # sum over rounds of s^2
    returned_sq: int = 0  # sum over rounds of y^2
    cross: int = 0  # sum over rounds of s*y
    expected: Fraction = field(default_factory=Fraction)
    unpriced: int = 0

    def add(self, cluster: Cluster) -> None:
        s, y = cluster.staked, cluster.returned
        self.rounds += 1
        self.bets += cluster.bets
        self.staked += s
        self.returned += y
        self.staked_sq += s * s
        self.returned_sq += y * y
        self.cross += s * y
        self.expected += cluster.expected
        self.unpriced += cluster.unpriced

    def rereturn(self, staked: int, old: int, new: int) -> None:
        """A correction changed a counted round's return from `old` to `new`."""
        self.returned += new - old
        self.returned_sq += new * new - old * old
        self.cross += staked * (new - old)

    @property
    def house(self) -> int:
        return self.staked - self.returned

    @property
    def observed(self) -> Fraction | None:
        return Fraction(self.returned, self.staked) if self.staked else None

    @property
    def theoretical(self) -> Fraction | None:
        """The stake-weighted theoretical return; None unless every stake is priced."""
        return self.expected / self.staked if self.staked and not self.unpriced else None

    def interval(self) -> tuple[float, float] | None:
        """The observed return's 95% confidence interval (None below `MIN_ROUNDS`)."""
        if self.rounds < MIN_ROUNDS or not self.staked:
            return None
        ratio = Fraction(self.returned, self.staked)
        spread = self.returned_sq - 2 * ratio * self.cross + ratio * ratio * self.staked_sq
        variance = Fraction(self.rounds, self.rounds - 1) * spread / (self.staked * self.staked)
        half = Z95 * math.sqrt(max(variance, Fraction(0)))
        return float(ratio) - half, float(ratio) + half
