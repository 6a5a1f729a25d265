"""Where every throw came from, re-checked (`verify --level settlement`):
a dealer device's report must carry a valid device signature; an RNG throw
must be what its seed gives, once the seed is revealed and matches the
commitment made before the round opened."""

from __future__ import annotations

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


class DiceAudit:
    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring
        self.commitments: dict[str, str] = {}
        self.seeds: dict[str, bytes] = {}
        self.throws: dict[str, int] = {}  # round id -> throws so far
        self.rng_throws: list[tuple[str, str, int, Any, str]] = []
        self.device_reports = 0

    def observe(self, stream: str, topic: str, state: dict[str, Any], where: str) -> None:
        if topic == _COMMITTED:
            self.commitments[state["seed_id"]] = state["commitment"]
        elif topic == _REVEALED:
            seed = bytes.fromhex(state["seed"])
            if commitment(seed) != self.commitments.get(state["seed_id"]):
                raise VerificationError("revealed seed does not match its commitment", where=where)
            self.seeds[state["seed_id"]] = seed
        elif topic == _OPENED:
            seed_id = state.get("dice_seed")
            if seed_id is not None and seed_id not in self.commitments:
                raise VerificationError("round throws from a seed never committed", where=where)
            self.throws[stream] = 0
        elif topic in (_OUTCOME, _FAULT):
            counter = self.throws.get(stream, 0)
            self.throws[stream] = counter + 1
            source = state.get("source") or {}
            if source.get("kind") == "device":
                fact = (
                    throw_fact(stream, counter, state["outcome"])
                    if topic == _OUTCOME
                    else fault_fact(stream, counter, state["reason"])
                )
                verify_fact(self.keyring, fact, actor_signature(source), Role.DEALER_DEVICE, where)
                self.device_reports += 1
            elif source.get("kind") == "rng":
                if topic == _FAULT or source.get("counter") != counter:
                    raise VerificationError("an RNG throw out of sequence", where=where)
                self.rng_throws.append(
                    (source["seed_id"], stream, counter, state["outcome"], where)
                )

    def finish(self) -> tuple[int, int]:
        """Recompute every RNG throw whose seed is revealed: (checked, awaiting reveal)."""
        checked = pending = 0
        for seed_id, round_id, counter, outcome, where in self.rng_throws:
            seed = self.seeds.get(seed_id)
            if seed is None:
                pending += 1
                continue
            if list(throw(seed, round_id, counter)) != list(outcome.get("dice", [])):
                raise VerificationError(
                    f"RNG throw {counter} is not what seed {seed_id} gives", where=where
                )
            checked += 1
        return checked, pending
