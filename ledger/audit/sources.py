"""Who stated each outcome and fault, re-checked (`verify --level settlement`,
RULES.md §1.4).

- A round of an RNG table (its Round.Opened names the seed it throws from)
  takes dice only from that seed, committed on its table before the round
  opened and not yet revealed, in throw order: each throw is recomputed from
  the round's committed seed and the round's own throw counter, never from
  what the throw itself names, once the seed is revealed (and the revealed
  seed must match its commitment). Throws whose seed is still secret are
  counted, not checked. An RNG throw is never faulty, and never corrected.
- A round of a physical table takes outcomes and faults only from a dealer
  device's report: its signature must verify with a `dealer-device` key of
  the keyring, valid when the event was recorded.
- Any other source fails, naming the round.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventsourcing.utils import get_topic

from ledger.crypto.actor import actor_signature, verify_fact
from ledger.crypto.keys import Keyring, Role
from ledger.domain.game_table import GameTable
from ledger.domain.round import Round, fault_fact, throw_fact
from ledger.errors import VerificationError
from ledger.rng.dice import commitment, throw

_COMMITTED = get_topic(GameTable.SeedCommitted)
_REVEALED = get_topic(GameTable.SeedRevealed)
_OPENED = get_topic(Round.Opened)
_OUTCOME = get_topic(Round.OutcomeRecorded)
_FAULT = get_topic(Round.FaultRecorded)
_CORRECTED = get_topic(Round.Corrected)


@dataclass
class _Round:
    seed: str | None  # the committed seed of an RNG round; None on a physical table
    throws: int = 0  # throws so far, faulty or not: the next throw's counter


@dataclass(frozen=True)
class _RngThrow:
    seed: str
    round_id: str
    counter: int
    dice: Any
    where: str


class SourceAudit:
    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring
        self.commitments: dict[str, tuple[str, str]] = {}  # seed id -> (table, commitment)
        self.seeds: dict[str, bytes] = {}  # revealed
        self.rounds: dict[str, _Round] = {}
        self.rng_throws: list[_RngThrow] = []
        self.device_reports = 0

    def observe(self, stream: str, topic: str, state: dict[str, Any], where: str) -> None:
        if topic == _COMMITTED:
            self.commitments[state["seed_id"]] = (stream, state["commitment"])
        elif topic == _REVEALED:
            seed = bytes.fromhex(state["seed"])
            table, committed = self.commitments.get(state["seed_id"], ("", ""))
            if table != stream or commitment(seed) != committed:
                raise VerificationError("revealed seed does not match its commitment", where=where)
            self.seeds[state["seed_id"]] = seed
        elif topic == _OPENED:
            self.rounds[stream] = self._opened(stream, state, where)
        elif topic in (_OUTCOME, _FAULT):
            game = self.rounds.get(stream)
            if game is None:
                raise VerificationError(f"round {stream}: a throw before it opened", where=where)
            counter = game.throws
            game.throws += 1
            if game.seed is not None:
                self._rng(stream, game.seed, counter, topic, state, where)
            else:
                self._device(stream, counter, topic, state, where)
        elif topic == _CORRECTED:
            game = self.rounds.get(stream)
            if game is not None and game.seed is not None:
                raise VerificationError(
                    f"round {stream} is on an RNG table: its result was corrected, but an "
                    "RNG result is computed, never corrected",
                    where=where,
                )

    def _opened(self, stream: str, state: dict[str, Any], where: str) -> _Round:
        seed = state.get("dice_seed")
        if seed is None:
            return _Round(None)
        table, _ = self.commitments.get(seed, ("", ""))
        if table != str(state["table_id"]):
            raise VerificationError(
                f"round {stream} throws from seed {seed}, never committed on its table",
                where=where,
            )
        if seed in self.seeds:
            raise VerificationError(
                f"round {stream} opened on seed {seed}, already revealed: its dice were known",
                where=where,
            )
        return _Round(seed)

    def _rng(
        self, stream: str, seed: str, counter: int, topic: str, state: dict[str, Any], where: str
    ) -> None:
        if topic == _FAULT:
            raise VerificationError(
                f"round {stream} is on an RNG table: a faulty throw was recorded, but an RNG "
                "throw is never faulty",
                where=where,
            )
        source = state.get("source") or {}
        if source.get("kind") != "rng":
            raise VerificationError(
                f"round {stream} is on an RNG table: its outcome came from a "
                f"{source.get('kind')!r} source, not from its committed seed",
                where=where,
            )
        if source.get("seed_id") != seed:
            raise VerificationError(
                f"round {stream}: RNG throw {counter} names seed {source.get('seed_id')}, but "
                f"the round committed to seed {seed}",
                where=where,
            )
        if source.get("counter") != counter:
            raise VerificationError(
                f"round {stream}: an RNG throw out of sequence (counter "
                f"{source.get('counter')}, expected {counter})",
                where=where,
            )
        self.rng_throws.append(_RngThrow(seed, stream, counter, state["outcome"], where))

    def _device(
        self, stream: str, counter: int, topic: str, state: dict[str, Any], where: str
    ) -> None:
        source = state.get("source") or {}
        what = "outcome" if topic == _OUTCOME else "faulty throw"
        if source.get("kind") != "device":
            raise VerificationError(
                f"round {stream} is on a physical table: its {what} came from a "
                f"{source.get('kind')!r} source, not a dealer device's signed report",
                where=where,
            )
        fact = (
            throw_fact(stream, counter, state["outcome"])
            if topic == _OUTCOME
            else fault_fact(stream, counter, state["reason"])
        )
        signed = actor_signature(source)
        verify_fact(self.keyring, fact, signed, Role.DEALER_DEVICE, f"round {stream}: {where}")
        record = self.keyring.get(signed["key_id"])
        recorded_at = state.get("timestamp")
        if (
            record is not None
            and isinstance(recorded_at, datetime)
            and not record.valid_at(recorded_at)
        ):
            raise VerificationError(
                f"round {stream}: the dealer device key {record.name} was not valid when "
                f"its {what} was recorded",
                where=where,
            )
        self.device_reports += 1

    def finish(self) -> tuple[int, int]:
        """Recompute every RNG throw whose seed is revealed: (recomputed, not checked yet)."""
        checked = pending = 0
        for made in self.rng_throws:
            seed = self.seeds.get(made.seed)
            if seed is None:
                pending += 1
                continue
            dice = made.dice.get("dice", []) if isinstance(made.dice, dict) else made.dice
            if list(throw(seed, made.round_id, made.counter)) != list(dice):
                raise VerificationError(
                    f"round {made.round_id}: RNG throw {made.counter} is not what the round's "
                    f"committed seed {made.seed} gives",
                    where=made.where,
                )
            checked += 1
        return checked, pending
