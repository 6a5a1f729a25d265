"""What `ledger verify` found: every finding of one run, each with where it is
and what kind it is (`--findings FILE` writes them as JSON Lines; the schema
is docs/schemas/finding.json).

Verification goes on past a finding: an altered event keeps its place in its
stream and in the Merkle tree, a round with a finding is not checked further
(its finding says so), and the money of every other round still is. What a
finding in one stream implies downstream in that same stream (a payout that
no longer matches an altered bet) is counted, not listed again.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO, Any

from ledger.errors import (
    CannotCheckError,
    CannotReDeriveError,
    FindingKind,
    LedgerError,
    VerificationError,
)

#: The finding record's version (docs/schemas/finding.json).
FINDINGS_SCHEMA = 1


class Step(StrEnum):
    """`ledger verify`'s checklist, in the order it runs (7 while the workers do
    4-6; `ledger.audit.verify.CHECKLIST` names the code of each); each finding
    names its step."""

    KEYS = "1 keys"  # the log's revocations and who signed them
    CHECKPOINTS = "2 checkpoints"  # every checkpoint's note, signature, key and time
    RUNS = "3 recorded runs"  # auditors' recorded verification runs: signatures
    ENVELOPES = "4 envelopes"  # every row: envelope, signer, signing time, signature
    CHAINS = "5 chains"  # every stream's versions and links, across chunks
    MERKLE = "6 merkle"  # roots at every checkpoint, the kept one, recorded runs
    PROOFS = "7 proofs"  # the consistency proofs the store (or bundle) serves
    MONEY = "8 money"  # movements, postings, wallets, operator signatures
    SOURCES = "9 sources"  # every outcome's source: seeds, devices
    RULES = "10 round rules"  # step order, voids, fault policy
    PAYOUTS = "11 payouts"  # every settlement re-settled by the round's game

    @property
    def number(self) -> int:
        return int(self.value.split()[0])


#: The settlement level's steps, in the order they read each event.
SETTLEMENT_STEPS: tuple[Step, ...] = (Step.MONEY, Step.SOURCES, Step.RULES, Step.PAYOUTS)

#: Steps whose `altered` findings mean an event's bytes are not what was signed.
_BYTE_STEPS = frozenset({Step.ENVELOPES, Step.CHAINS})


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    step: Step
    text: str  # the whole message, as `ledger verify` prints its first finding
    position: int | None = None  # log position of the event at fault, if one is
    stream: str | None = None
    round_id: str | None = None
    rule: str | None = None  # an older release's finding: the rule refusing it today
    release: str | None = None  # ... and the release that recorded it

    def line(self) -> str:
        return f"[{self.kind.value}] {self.text}"

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "schema": FINDINGS_SCHEMA,
            "kind": self.kind.value,
            "step": self.step.value,
            "position": self.position,
            "stream": self.stream,
            "round": self.round_id,
            "message": self.text,
        }
        if self.rule is not None:
            record["rule"] = self.rule
            record["release"] = self.release
        return record

    def as_error(self) -> LedgerError:
        if self.kind is FindingKind.NOT_CHECKED:
            return CannotReDeriveError(self.text.removeprefix("could not check: "))
        return VerificationError(self.text)


@dataclass
class Findings:
    """Every finding of a run, in the order found (`ordered` sorts them)."""

    items: list[Finding] = field(default_factory=list)
    implied: int = 0  # findings left out: implied by an earlier one in the same stream
    _altered_streams: set[str] = field(default_factory=set)
    _altered_positions: set[int] = field(default_factory=set)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.ordered())

    def add(self, finding: Finding, *, front: bool = False, readable: bool = False) -> None:
        """`front`: found before everything so far (a removed event, found last).
        `readable`: an altered stream's event that is itself as signed (events
        before it are missing): the settlement level still reads what it says."""
        if finding.kind is not FindingKind.ALTERED and finding.stream in self._altered_streams:
            self.implied += 1  # e.g. a payout that no longer matches an altered bet
            return
        self.items.insert(0, finding) if front else self.items.append(finding)
        if finding.kind is FindingKind.ALTERED and finding.step in _BYTE_STEPS:
            if finding.stream is not None and finding.stream not in self._altered_streams:
                self._altered_streams.add(finding.stream)
                # What a later step found in it before this was known follows from it too.
                kept = [
                    f
                    for f in self.items
                    if f.kind is FindingKind.ALTERED or f.stream != finding.stream
                ]
                self.implied += len(self.items) - len(kept)
                self.items = kept
            if finding.position is not None and not readable:
                self._altered_positions.add(finding.position)

    def add_error(
        self,
        step: Step,
        exc: LedgerError,
        *,
        kind: FindingKind,
        position: int | None = None,
        stream: str | None = None,
        round_id: str | None = None,
    ) -> None:
        """A check's error as a finding: the error's own kind wins (a forged actor
        signature found by a rules step), a check not made is `not-checked`."""
        if isinstance(exc, CannotCheckError):
            kind = FindingKind.NOT_CHECKED
        elif isinstance(exc, VerificationError) and exc.kind is not None:
            kind = exc.kind
        self.add(Finding(kind, step, str(exc), position, stream, round_id))

    def altered_at(self, position: int) -> bool:
        """Whether the event at `position` failed its envelope checks (its payload
        is not what was signed: the settlement level does not read it)."""
        return position in self._altered_positions

    def ordered(self) -> list[Finding]:
        """By log position (findings without one, e.g. a checkpoint's, last in the order found)."""
        return sorted(self.items, key=_by_position)

    def counts(self) -> Counter[str]:
        return Counter(f.kind.value for f in self.items)

    def headline(self) -> LedgerError | None:
        """The error `ledger verify` exits with: the first failure (exit 1) if any,
        else the first check that could not be made (exit 3). First means: the
        earliest phase (keys and checkpoints, then the log's bytes, then what
        the events say), then the earliest log position."""
        failures = [f for f in self.items if f.kind is not FindingKind.NOT_CHECKED]
        chosen = failures or self.items
        if not chosen:
            return None
        order = {id(f): i for i, f in enumerate(chosen)}
        return min(
            chosen, key=lambda f: (_phase(f.step), *_by_position(f), order[id(f)])
        ).as_error()

    def write_jsonl(self, out: IO[str]) -> None:
        for finding in self.ordered():
            out.write(json.dumps(finding.to_json(), sort_keys=True) + "\n")

    def summary(self) -> str:
        counts = self.counts()
        kinds = ", ".join(f"{counts[k.value]} {k.value}" for k in FindingKind if counts[k.value])
        implied = (
            f"; {self.implied} more implied by an altered event in the same stream, not listed"
            if self.implied
            else ""
        )
        n = len(self.items)
        return f"FAILED: {n} finding{'' if n == 1 else 's'} ({kinds}){implied}"


def _phase(step: Step) -> int:
    return 0 if step.number <= 3 else 1 if step.number <= 7 else 2


def _by_position(finding: Finding) -> tuple[bool, int]:
    return finding.position is None, finding.position or 0
