"""Which of an account's events a history holds: the span's rule, shared by the
proof's maker and its checker so the two cannot disagree.

The events are walked from the account's head back, version by version. A
span of the **last N rounds** holds every event up to the first one of an
(N+1)th round; a span **since a time** every event up to the first one stamped
before it. That first event outside the span is the **boundary**: the proof
holds it too, to show the span ends for its reason and not because the
prover stopped early. A span that reaches the account's first event (version
1) has no boundary: it holds the account's whole history.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.errors import ConfigError
from ledger.inputs import parse_moment

DEFAULT_LAST = 10  # AGCO's recall: the most recent game and the nine before it
MAX_LAST = 10_000


@dataclass(frozen=True)
class Movement:
    """One account event as the history shows it (amounts in minor units)."""

    version: int
    type: str  # `Account.Debited`, ...
    at: datetime  # the event's signed timestamp
    amount: int | None
    round: str | None
    reference: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "type": self.type,
            "at": self.at.isoformat(),
            "amount": self.amount,
            "round": self.round,
            "reference": self.reference,
        }


@dataclass(frozen=True)
class Span:
    last: int | None = None  # rounds
    since: datetime | None = None

    @classmethod
    def of(cls, last: int | None, since: str | None) -> Span:
        """From the user's `--last`/`--since` (or the query's): one line of error each."""
        if last is not None and since is not None:
            raise ConfigError("give --last or --since, not both")
        if since is not None:
            return cls(since=parse_since(since))
        count = DEFAULT_LAST if last is None else last
        if type(count) is not int or not 1 <= count <= MAX_LAST:
            raise ConfigError(f"--last must be a whole number of rounds from 1 to {MAX_LAST}")
        return cls(last=count)

    def to_json(self) -> dict[str, Any]:
        if self.since is not None:
            return {"since": self.since.isoformat()}
        return {"last": self.last}

    @classmethod
    def from_json(cls, data: object) -> Span:
        if isinstance(data, dict) and set(data) == {"since"} and isinstance(data["since"], str):
            return cls(since=parse_since(data["since"]))
        if isinstance(data, dict) and set(data) == {"last"} and type(data["last"]) is int:
            return cls.of(data["last"], None)
        raise ValueError('the span is not {"last": N} or {"since": "<ISO 8601 time>"}')

    def describe(self) -> str:
        if self.since is not None:
            return f"since {self.since.isoformat()}"
        return f"the last {self.last} rounds"


def parse_since(text: str) -> datetime:
    """A date (`2026-12-01`, midnight UTC) or a time with a UTC offset."""
    return parse_moment(text, "--since")


def walk(span: Span, movements: Iterable[Movement]) -> Iterator[tuple[Movement, bool]]:
    """(movement, is the boundary) for each event the span takes, newest first;
    stops after the boundary (or when `movements` end: the account's first event)."""
    rounds: set[str] = set()
    for movement in movements:
        if span.since is not None:
            outside = movement.at < span.since
        else:
            assert span.last is not None
            outside = (
                movement.round is not None
                and movement.round not in rounds
                and len(rounds) == span.last
            )
            if movement.round is not None and not outside:
                rounds.add(movement.round)
        yield movement, outside
        if outside:
            return


def rounds_of(movements: list[Movement]) -> list[dict[str, Any]]:
    """Each round the movements name, newest first, with what the account paid
    into it and took from it (minor units)."""
    summary: dict[str, dict[str, Any]] = {}
    for movement in movements:
        if movement.round is None:
            continue
        entry = summary.setdefault(
            movement.round, {"round": movement.round, "debited": 0, "credited": 0}
        )
        if movement.type == "Account.Debited":
            entry["debited"] += movement.amount or 0
        elif movement.type == "Account.Credited":
            entry["credited"] += movement.amount or 0
    return list(summary.values())
