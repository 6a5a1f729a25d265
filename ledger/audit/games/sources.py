"""Who stated each outcome and fault, re-checked (`verify --level settlement`,
docs/rules.md §1.4).

- A round of an RNG table (its Round.Opened names the seed it draws from)
  takes dice and cards only from that seed, committed on its table before the
  round opened and not yet revealed, in draw order: each draw of dice is
  recomputed from the round's committed seed and the round's own draw
  counter (cards from its deck's positions), never from what the draw itself
  names, once the seed is revealed (and the revealed
  seed must match its commitment). Every draw precedes its seed's reveal in
  the log: a draw from a revealed seed was known before it was made. And
  every round opened on a seed is over (settled or voided) before the seed's
  reveal in the log (`in_play_at_reveal`): a round still in play would be
  played on with its remaining draws known (a Xì dách dealer who stops
  knowing the next card), though it draws nothing after the reveal. Both are
  judged by log position, never by the table stream's own order. Draws
  whose seed is still secret are counted, not checked. An RNG draw is never
  faulty, and never corrected.
- A table opened as RNG opens its rounds only on a seed, and a table opened
  as physical commits no seed (tables opened before release 0.4 record no
  kind: a seed in use makes their round RNG).
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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventsourcing.utils import get_topic

from ledger.audit.log.key_times import SignedWhen
from ledger.crypto.actor import actor_signature, verify_fact
from ledger.crypto.keys import Keyring, Role
from ledger.domain.asked_by import by_problem
from ledger.domain.game_table import GameTable
from ledger.domain.request import Request
from ledger.domain.round import Round
from ledger.domain.round_records import SETTLED, VOIDED
from ledger.domain.signed_facts import FAULT_FACT, action_fact, fault_fact, throw_fact
from ledger.domain.stored_names import SIGNED_THROW, is_fault
from ledger.errors import VerificationError
from ledger.rng.deck import shuffled_deck
from ledger.rng.dice import commitment, throw

if TYPE_CHECKING:
    from ledger.audit.games.round_facts import RoundFacts

_TABLE_OPENED = get_topic(GameTable.Opened)
_COMMITTED = get_topic(GameTable.SeedCommitted)
SEED_REVEALED = get_topic(GameTable.SeedRevealed)
_OPENED = get_topic(Round.Opened)
_OUTCOME = get_topic(Round.OutcomeRecorded)
_FAULT = get_topic(Round.FaultRecorded)
_CORRECTED = get_topic(Round.Corrected)
_ACTION = get_topic(Round.ActionRecorded)
_REQUEST = get_topic(Request.Completed)

#: The rule release 0.2 added, that release 0.1 stores break (RULES §1.4).
RNG_NEVER_FAULTY = "rng-never-faulty"


@dataclass(frozen=True)
class Located:
    """Where a draw was recorded: what a finding about it names."""

    position: int | None
    stream: str
    where: str


@dataclass(frozen=True)
class _RngDraw:
    round_id: str
    counter: int  # a dice draw's counter; -1 for cards
    positions: tuple[int, ...]  # the deck positions of cards
    drawn: tuple[int, ...]  # the dice faces or the cards
    at: Located


@dataclass(frozen=True)
class Late:
    """A problem found after its event: an RNG draw recomputed at its seed's reveal."""

    error: VerificationError
    at: Located


@dataclass(frozen=True)
class OlderRelease:
    """An event a rule of today refuses, recorded by a release that allowed it."""

    rule: str
    release: str
    message: str
    at: Located


def in_play_at_reveal(
    seed_id: object, rounds: Iterable[RoundFacts], where: str
) -> Iterator[tuple[RoundFacts, VerificationError]]:
    """Each of `rounds` (those the log has opened and not yet ended, in log
    order up to the reveal at `where`) still in play on seed `seed_id` when it
    is revealed, with its problem; a round already found at fault is left out."""
    for facts in rounds:
        if facts.seed == seed_id and not facts.tainted and facts.status not in (SETTLED, VOIDED):
            yield (
                facts,
                VerificationError(
                    f"seed {seed_id} was revealed while round {facts.round_id}, which deals "
                    "from it, was still in play: the rest of its play was known (a seed is "
                    "revealed only once every round drawing from it is over)",
                    where=where,
                ),
            )


class SourceAudit:
    """The seeds (commitments and reveals, per table) and every draw and report;
    each round's draw counter and dealt cards are its facts."""

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring
        self.commitments: dict[str, tuple[str, str]] = {}  # seed id -> (table, commitment)
        self.physical: set[str] = set()  # tables opened as physical
        self.rng: set[str] = set()  # tables opened as RNG
        self.revealed: set[str] = set()
        self.revealed_where: dict[str, str] = {}  # seed id -> where it was revealed
        self.waiting: dict[str, list[_RngDraw]] = {}  # seed id -> draws awaiting its reveal
        self.late: list[Late] = []  # problems found at a reveal, for the caller to report
        self.older: list[OlderRelease] = []  # accepted under an older release's rules
        self.rng_dice = 0  # RNG dice draws recomputed from their round's revealed seed
        self.cards_checked = 0  # RNG card draws recomputed from their round's deck
        self.device_reports = 0
        self._when = SignedWhen(0)  # the event being observed: when it was signed
        self._at = Located(None, "", "")
        self._release: str | None = None

    def observe(
        self,
        stream: str,
        topic: str,
        state: dict[str, Any],
        at: Located,
        when: SignedWhen,
        facts: RoundFacts | None,
        release: str | None = None,
    ) -> None:
        """`release`: the release that recorded the event when its envelope says
        (a v1 envelope: 0.1), else None (this release's rules apply)."""
        self._when, self._at, self._release = when, at, release
        where = at.where
        asked = state.get("asked_by") if topic == _REQUEST else None  # who asked: one shape
        if asked is not None and (problem := by_problem(asked)) is not None:
            raise VerificationError(
                f"request {state.get('request_id')!r}: its asked_by is malformed: {problem}",
                where=where,
            )
        if topic == _TABLE_OPENED:
            self._table_opened(stream, state.get("kind"), where)
        elif topic == _COMMITTED:
            if stream in self.physical:
                raise VerificationError(
                    f"table {stream} was opened as a physical table, yet a seed was committed "
                    "on it",
                    where=where,
                )
            self.commitments[state["seed_id"]] = (stream, state["commitment"])
        elif topic == SEED_REVEALED:
            seed = bytes.fromhex(state["seed"])
            table, committed = self.commitments.get(state["seed_id"], ("", ""))
            if table != stream or commitment(seed) != committed:
                raise VerificationError("revealed seed does not match its commitment", where=where)
            self.revealed.add(state["seed_id"])
            self.revealed_where[state["seed_id"]] = where
            self._recompute(state["seed_id"], seed)
        elif topic == _OPENED:
            self._opened(stream, state, where)
        elif topic in (_OUTCOME, _FAULT):
            if facts is None:
                raise VerificationError(f"round {stream}: a draw before it opened", where=where)
            if facts.seed is not None:
                self._rng(stream, facts.seed, facts.draws, topic, state, where)
            else:
                self._device(stream, facts.draws, topic, state, where)
        elif topic == _ACTION:
            if facts is None:
                raise VerificationError(f"round {stream}: an action before it opened", where=where)
            self._action(stream, facts, state, where)
        elif topic == _CORRECTED and facts is not None:
            if facts.seed is not None:
                raise VerificationError(
                    f"round {stream} is on an RNG table: its result was corrected, but an "
                    "RNG result is computed, never corrected",
                    where=where,
                )
            if state.get("step") is not None:
                from ledger.audit.games.round_facts import corrected_dealt

                dealt = corrected_dealt(facts, state)
                if len(set(dealt)) != len(dealt):
                    raise VerificationError(
                        f"round {stream}: the correction deals a card twice from the round's deck",
                        where=where,
                    )

    def _table_opened(self, stream: str, kind: object, where: str) -> None:
        if kind == "physical":
            self.physical.add(stream)
        elif kind == "rng":
            self.rng.add(stream)
        elif kind is not None:
            raise VerificationError(
                f"table {stream} was opened as {kind!r}, neither 'rng' nor 'physical'",
                where=where,
            )

    def _opened(self, stream: str, state: dict[str, Any], where: str) -> None:
        seed, table_id = state.get("seed_id"), str(state["table_id"])
        if seed is None and table_id in self.rng:
            raise VerificationError(
                f"round {stream} opened on RNG table {table_id} without a seed to draw from",
                where=where,
            )
        if seed is not None and table_id in self.physical:
            raise VerificationError(
                f"round {stream} opened on physical table {table_id} with a seed",
                where=where,
            )
        if seed is None:
            return
        table, _ = self.commitments.get(seed, ("", ""))
        if table != str(state["table_id"]):
            raise VerificationError(
                f"round {stream} draws from seed {seed}, never committed on its table",
                where=where,
            )
        if seed in self.revealed:
            raise VerificationError(
                f"round {stream} opened on seed {seed}, already revealed: its dice were known",
                where=where,
            )

    def _rng(
        self, stream: str, seed: str, counter: int, topic: str, state: dict[str, Any], where: str
    ) -> None:
        if topic == _FAULT:
            message = (
                f"round {stream} is on an RNG table: a faulty draw was recorded, but an RNG "
                "draw is never faulty"
            )
            if self._release == "0.1":  # release 0.1 re-threw an RNG "fault": its rules then
                self.older.append(
                    OlderRelease(RNG_NEVER_FAULTY, "0.1", f"{where}: {message}", self._at)
                )
                return
            raise VerificationError(message, where=where)
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
        outcome = state["outcome"]
        dice = outcome.get("dice", []) if isinstance(outcome, dict) else outcome
        self._wait(seed, _RngDraw(stream, counter, (), tuple(dice), self._at))

    def _wait(self, seed: str, draw: _RngDraw) -> None:
        self.waiting.setdefault(seed, []).append(draw)

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
        what = "outcome" if topic == _OUTCOME else "faulty draw"
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

    def _action(self, stream: str, facts: RoundFacts, state: dict[str, Any], where: str) -> None:
        """Settlement API 2: at an RNG table randomness only from the round's seed and
        every other move the node's command; at a physical table every action
        (draws, faults, decisions) only from a dealer device's signed report."""
        source = state.get("source") or {}
        kind, drawn, action = source.get("kind"), state["drawn"], state["action"]

        def fail(message: str) -> VerificationError:
            return VerificationError(f"round {stream}: {message}", where=where)

        fault = is_fault(action, source)
        decision = not drawn and not fault
        if "by" in source:  # who asked the node: on its own commands and RNG draws only
            if kind not in ("command", "rng"):
                raise fail(f"{action}: a {kind!r} source names no session that asked (by)")
            if (problem := by_problem(source["by"])) is not None:
                raise fail(f"{action}: the {kind}'s source is malformed: {problem}")
        if decision and (facts.seed is not None or (facts.betting and kind == "command")):
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
            dealt = set(facts.dealt)
            again = sorted(c for c in set(drawn) if c in dealt or drawn.count(c) > 1)
            if again:
                raise fail(f"card {again[0]} dealt twice from the round's deck")
        if facts.seed is not None:
            if fault:
                raise fail("a faulty draw on an RNG table: an RNG draw is never faulty")
            if kind != "rng" or source.get("seed_id") != facts.seed:
                raise fail(
                    f"{action} drew from a {kind!r} source (seed {source.get('seed_id')}), "
                    f"not from its committed seed {facts.seed}"
                )
            self._before_reveal(stream, facts.seed, where)
            if draw == "dice":
                if source.get("counter") != facts.draws:
                    raise fail(
                        f"an RNG throw out of sequence (counter {source.get('counter')}, "
                        f"expected {facts.draws})"
                    )
                self._wait(facts.seed, _RngDraw(stream, facts.draws, (), tuple(drawn), self._at))
            else:
                first = len(facts.dealt)
                expected = list(range(first, first + len(drawn)))
                if source.get("positions") != expected:
                    raise fail(
                        f"cards dealt from deck positions {source.get('positions')}, "
                        f"expected {expected}"
                    )
                self._wait(
                    facts.seed, _RngDraw(stream, -1, tuple(expected), tuple(drawn), self._at)
                )
            return
        if kind != "device":
            raise fail(
                f"{action} on a physical table came from a {kind!r} source, not a dealer "
                "device's signed report"
            )
        if source.get("signed") == SIGNED_THROW:  # record_outcome: signed by draw counter
            outcome = {draw: list(drawn)} if draw in ("dice", "cards") else state["args"]
            fact = throw_fact(stream, facts.draws, outcome)
        elif source.get("signed") == FAULT_FACT:  # record_fault
            if not fault:
                raise fail(f"{action} recorded with a faulty draw's report")
            fact = fault_fact(stream, facts.draws, state["args"].get("reason"))
        else:
            fact = action_fact(
                stream, state["step"], state["actor"], action, state["args"], list(drawn)
            )
        self._device_signature(fact, source, f"round {stream}: {where}")
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

    def _recompute(self, seed_id: str, seed: bytes) -> None:
        """At a seed's reveal, every draw made from it, recomputed (and forgotten:
        memory holds only the draws of seeds still secret)."""
        for draw in self.waiting.pop(seed_id, []):
            if draw.counter >= 0:
                if list(throw(seed, draw.round_id, draw.counter)) == list(draw.drawn):
                    self.rng_dice += 1
                    continue
                wrong = f"RNG throw {draw.counter} is not what the round's committed seed"
                wrong += f" {seed_id} gives"
            else:
                deck = shuffled_deck(seed, draw.round_id)
                if tuple(deck[p] for p in draw.positions) == draw.drawn:
                    self.cards_checked += 1
                    continue
                wrong = (
                    f"cards {list(draw.drawn)} at deck positions {list(draw.positions)} are "
                    f"not what the round's committed seed {seed_id} deals"
                )
            error = VerificationError(f"round {draw.round_id}: {wrong}", where=draw.at.where)
            self.late.append(Late(error, draw.at))

    def saved(self) -> dict[str, Any]:
        """What the next events need (`ledger.audit.verify_state`)."""
        assert not self.late and not self.older, "reported before a state is taken"
        return {
            "commitments": self.commitments,
            "physical": sorted(self.physical),
            "rng": sorted(self.rng),
            "revealed": sorted(self.revealed),
            "revealed_where": self.revealed_where,
            "waiting": {
                seed: [
                    [
                        d.round_id,
                        d.counter,
                        d.positions,
                        d.drawn,
                        d.at.position,
                        d.at.stream,
                        d.at.where,
                    ]
                    for d in draws
                ]
                for seed, draws in self.waiting.items()
            },
            "counts": [self.rng_dice, self.cards_checked, self.device_reports],
        }

    def restore(self, data: dict[str, Any]) -> None:
        self.commitments = {k: (str(t), str(c)) for k, (t, c) in data["commitments"].items()}
        self.physical = set(data["physical"])
        self.rng = set(data["rng"])
        self.revealed = set(data["revealed"])
        self.revealed_where = dict(data["revealed_where"])
        self.waiting = {
            seed: [
                _RngDraw(r, int(n), tuple(p), tuple(d), Located(at, stream, where))
                for r, n, p, d, at, stream, where in draws
            ]
            for seed, draws in data["waiting"].items()
        }
        self.rng_dice, self.cards_checked, self.device_reports = map(int, data["counts"])

    def pending(self) -> tuple[int, int]:
        """(RNG dice draws, RNG card draws) whose seed is still secret: NOT recomputed."""
        draws = [d for waiting in self.waiting.values() for d in waiting]
        return sum(d.counter >= 0 for d in draws), sum(d.counter < 0 for d in draws)
