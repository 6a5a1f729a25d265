"""Who stated each outcome and fault, re-checked (`verify --level settlement`,
RULES.md §1.4).

- A round of an RNG table (its Round.Opened names the seed it throws from)
  takes dice only from that seed, committed on its table before the round
  opened and not yet revealed, in throw order: each throw is recomputed from
  the round's committed seed and the round's own throw counter, never from
  what the throw itself names, once the seed is revealed (and the revealed
  seed must match its commitment). Every draw precedes its seed's reveal in
  the log: a draw from a revealed seed was known before it was made. Throws
  whose seed is still secret are counted, not checked. An RNG throw is never
  faulty, and never corrected.
- A round of a physical table takes outcomes and faults only from a dealer
  device's report: its signature must verify with a `dealer-device` key of
  the keyring that may sign when the event was signed (its validity period,
  and not revoked unless a checkpoint older than the revocation covers it).
- A decision recorded as the node's own command may name the session that
  asked for it (`by`: exactly {token, role}, `ledger.domain.asked_by`): the
  node's statement under its own signature, checked for shape only.
- Any other source fails, naming the round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eventsourcing.utils import get_topic

from ledger.audit.key_times import SignedWhen
from ledger.crypto.actor import actor_signature, verify_fact
from ledger.crypto.keys import Keyring, Role
from ledger.domain.asked_by import by_problem
from ledger.domain.game_table import GameTable
from ledger.domain.round import Round, action_fact, fault_fact, throw_fact
from ledger.errors import VerificationError
from ledger.rng.deck import shuffled_deck
from ledger.rng.dice import commitment, throw

_COMMITTED = get_topic(GameTable.SeedCommitted)
_REVEALED = get_topic(GameTable.SeedRevealed)
_OPENED = get_topic(Round.Opened)
_OUTCOME = get_topic(Round.OutcomeRecorded)
_FAULT = get_topic(Round.FaultRecorded)
_CORRECTED = get_topic(Round.Corrected)
_ACTION = get_topic(Round.ActionRecorded)


@dataclass
class _Round:
    seed: str | None  # the committed seed of an RNG round; None on a physical table
    throws: int = 0  # throws so far, faulty or not: the next throw's counter
    dealt: list[int] = field(default_factory=list)  # cards dealt so far, in order
    betting: bool = True  # betting open before the next action (API 2 rounds)


@dataclass(frozen=True)
class _RngCards:
    seed: str
    round_id: str
    positions: list[int]
    cards: list[int]
    where: str


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
        self.revealed_where: dict[str, str] = {}  # seed id -> where it was revealed
        self.rounds: dict[str, _Round] = {}
        self.rng_throws: list[_RngThrow] = []
        self.rng_cards: list[_RngCards] = []
        self.cards_checked = 0  # RNG card draws recomputed from their round's deck
        self.cards_pending = 0  # RNG card draws whose seed is still secret: NOT recomputed
        self.device_reports = 0
        self._when = SignedWhen(0)  # the event being observed: when it was signed

    def observe(
        self, stream: str, topic: str, state: dict[str, Any], where: str, when: SignedWhen
    ) -> None:
        self._when = when
        if topic == _COMMITTED:
            self.commitments[state["seed_id"]] = (stream, state["commitment"])
        elif topic == _REVEALED:
            seed = bytes.fromhex(state["seed"])
            table, committed = self.commitments.get(state["seed_id"], ("", ""))
            if table != stream or commitment(seed) != committed:
                raise VerificationError("revealed seed does not match its commitment", where=where)
            self.seeds[state["seed_id"]] = seed
            self.revealed_where[state["seed_id"]] = where
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
        elif topic == _ACTION:
            game = self.rounds.get(stream)
            if game is None:
                raise VerificationError(f"round {stream}: an action before it opened", where=where)
            self._action(stream, game, state, where)
        elif topic == _CORRECTED:
            game = self.rounds.get(stream)
            if game is not None and game.seed is not None:
                raise VerificationError(
                    f"round {stream} is on an RNG table: its result was corrected, but an "
                    "RNG result is computed, never corrected",
                    where=where,
                )
            if game is not None and state.get("step") is not None:
                wrong = state["wrong_outcome"].get("cards") or []
                right = state["right_outcome"].get("cards") or []
                dealt = [right[wrong.index(c)] if c in wrong else c for c in game.dealt]
                if len(set(dealt)) != len(dealt):
                    raise VerificationError(
                        f"round {stream}: the correction deals a card twice from the round's deck",
                        where=where,
                    )
                game.dealt = dealt

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
        self._before_reveal(stream, seed, where)
        self.rng_throws.append(_RngThrow(seed, stream, counter, state["outcome"], where))

    def _before_reveal(self, stream: str, seed: str, where: str) -> None:
        """An RNG draw comes from a seed still secret: once revealed, anyone
        (the house first) knows every draw it would give."""
        revealed = self.revealed_where.get(seed)
        if revealed is not None:
            raise VerificationError(
                f"round {stream} drew from seed {seed} after it was revealed ({revealed}): "
                "its draws were known",
                where=where,
            )

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
        self._device_signature(fact, source, f"round {stream}: {where}")
        self.device_reports += 1

    def _action(self, stream: str, game: _Round, state: dict[str, Any], where: str) -> None:
        """Settlement API 2: at an RNG table randomness only from the round's seed and
        every other move the node's command; at a physical table every action
        (draws, faults, decisions) only from a dealer device's signed report."""
        source = state.get("source") or {}
        kind, drawn, action = source.get("kind"), state["drawn"], state["action"]

        def fail(message: str) -> VerificationError:
            return VerificationError(f"round {stream}: {message}", where=where)

        decision = not drawn and action != "fault"
        if "by" in source:  # who asked the node: on its own commands and RNG draws only
            if kind not in ("command", "rng"):
                raise fail(f"{action}: a {kind!r} source names no session that asked (by)")
            if (problem := by_problem(source["by"])) is not None:
                raise fail(f"{action}: the {kind}'s source is malformed: {problem}")
        betting_before, game.betting = game.betting, bool(state.get("betting"))
        if decision and (game.seed is not None or (betting_before and kind == "command")):
            # At an RNG table a decision is the node's own command; at a physical
            # table only while betting is still open (once bets are locked the
            # dealer device reports every action).
            if kind != "command":
                raise fail(f"{action} is a command, recorded with a {kind!r} source")
            return
        draw = source.get("draw")
        if drawn and draw not in ("dice", "cards"):
            raise fail(f"{action} drew {drawn!r} but its source names no dice or cards")
        if draw == "cards":
            again = sorted(c for c in set(drawn) if c in game.dealt or drawn.count(c) > 1)
            if again:
                raise fail(f"card {again[0]} dealt twice from the round's deck")
        if game.seed is not None:
            if action == "fault":
                raise fail("a faulty draw on an RNG table: an RNG draw is never faulty")
            if kind != "rng" or source.get("seed_id") != game.seed:
                raise fail(
                    f"{action} drew from a {kind!r} source (seed {source.get('seed_id')}), "
                    f"not from its committed seed {game.seed}"
                )
            self._before_reveal(stream, game.seed, where)
            if draw == "dice":
                if source.get("counter") != game.throws:
                    raise fail(
                        f"an RNG throw out of sequence (counter {source.get('counter')}, "
                        f"expected {game.throws})"
                    )
                self.rng_throws.append(_RngThrow(game.seed, stream, game.throws, drawn, where))
                game.throws += 1
            else:
                expected = list(range(len(game.dealt), len(game.dealt) + len(drawn)))
                if source.get("positions") != expected:
                    raise fail(
                        f"cards dealt from deck positions {source.get('positions')}, "
                        f"expected {expected}"
                    )
                self.rng_cards.append(_RngCards(game.seed, stream, expected, drawn, where))
                game.dealt.extend(drawn)
            return
        if kind != "device":
            raise fail(
                f"{action} on a physical table came from a {kind!r} source, not a dealer "
                "device's signed report"
            )
        if source.get("signed") == "throw":  # record_outcome: signed by throw counter
            outcome = {draw: list(drawn)} if draw in ("dice", "cards") else state["args"]
            fact = throw_fact(stream, game.throws, outcome)
        elif source.get("signed") == "fault":  # record_fault
            if action != "fault":
                raise fail(f"{action} recorded with a faulty throw's report")
            fact = fault_fact(stream, game.throws, state["args"].get("reason"))
        else:
            fact = action_fact(
                stream, state["step"], state["actor"], action, state["args"], list(drawn)
            )
        self._device_signature(fact, source, f"round {stream}: {where}")
        if draw == "cards":
            game.dealt.extend(drawn)
        elif not decision or source.get("signed") == "throw":
            game.throws += 1
        self.device_reports += 1

    def _device_signature(self, fact: dict[str, Any], source: dict[str, Any], where: str) -> None:
        """A dealer device's signature over `fact`, by a `dealer-device` key that
        may sign when the event carrying it was signed (validity and revocation)."""
        when = self._when
        verify_fact(
            self.keyring,
            fact,
            actor_signature(source),
            Role.DEALER_DEVICE,
            where,
            at=when.at,
            covered_at=when.covered_at,
            covered_size=when.covered_size,
        )

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
        for dealt in self.rng_cards:
            seed = self.seeds.get(dealt.seed)
            if seed is None:
                self.cards_pending += 1
                continue
            deck = shuffled_deck(seed, dealt.round_id)
            if [deck[p] for p in dealt.positions] != dealt.cards:
                raise VerificationError(
                    f"round {dealt.round_id}: cards {dealt.cards} at deck positions "
                    f"{dealt.positions} are not what the round's committed seed "
                    f"{dealt.seed} deals",
                    where=dealt.where,
                )
            self.cards_checked += 1
        return checked, pending
