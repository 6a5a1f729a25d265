"""A minimal aggregate for the store, tamper and checkpoint tests and the
benchmarks (tools/_benchlib.py): plain events with no game behind them, so a
test can write a stream of any length. Not part of the shipped package."""

from __future__ import annotations

from eventsourcing.domain import Aggregate, event


class Table(Aggregate):
    """A casino table whose dealer opens it, throws dice, and closes it."""

    @event("Opened")
    def __init__(self, name: str, dealer: str) -> None:
        self.name = name
        self.dealer = dealer
        self.throws: list[list[int]] = []
        self.closed = False

    @event("DiceThrown")
    def throw_dice(self, dice: list[int]) -> None:
        if len(dice) != 3 or any(not 1 <= d <= 6 for d in dice):
            raise ValueError(f"three dice between 1 and 6 expected, got {dice}")
        self.throws.append(list(dice))

    @event("Closed")
    def close(self) -> None:
        self.closed = True
