"""A game's fault policy (its rules profile's `faults`, docs/rules.md §1.2), read
the same way by the casino, which applies it, and by `verify`, which re-derives
it from the events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

RETHROW = "rethrow"  # bets stay locked; the dealer draws again (a stored rules value)
REOPEN_BETTING = "reopen-betting"  # the draw is void; betting reopens, then a new draw


@dataclass(frozen=True)
class FaultPolicy:
    after_fault: str
    void_after: int | None  # this many faulty draws void the round, every stake back

    @classmethod
    def of(cls, rules: Mapping[str, Any] | None) -> FaultPolicy:
        """The policy in a rules profile; without one: draw again, never void."""
        policy = (rules or {}).get("faults") or {}
        after = policy.get("after_fault", RETHROW)
        limit = policy.get("void_after")
        return cls(
            after_fault=REOPEN_BETTING if after == REOPEN_BETTING else RETHROW,
            void_after=limit if type(limit) is int and limit > 0 else None,
        )

    @property
    def reopens_betting(self) -> bool:
        return self.after_fault == REOPEN_BETTING

    def voids_at(self, faults: int) -> bool:
        return self.void_after is not None and faults >= self.void_after

    def describe(self) -> str:
        after = (
            "betting reopens after a faulty draw"
            if self.reopens_betting
            else "bets stay locked after a faulty draw, the dealer draws again"
        )
        limit = f"; void after {self.void_after}" if self.void_after else ""
        return after + limit
