"""One round's facts, folded once from its events in log order (`verify --level
settlement`): the record the money, source, rules and payout checks read.

`RoundFold.apply` is the only writer: each check reads the facts as they
were before the event it checks, then the fold applies the event. The game
is replayed once per round, forwards (`RoundFacts.step`): each recorded
entry is translated and stepped once, not once per later action, unless the
round's bets changed (a faulty draw that reopened betting), when the step
is recomputed from the first entry with the bets standing now, exactly as
the node computes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eventsourcing.utils import get_topic

from ledger.audit.games.postings import expected_settlement_postings
from ledger.domain.round import Round
from ledger.domain.round_records import BETTING, CLOSED, DECIDED, SETTLED, VOIDED, LogEntry
from ledger.domain.stored_names import SIGNED_THROW, is_fault
from ledger.errors import InvalidCommandError
from ledger.games.api import BetView, RecordedAction, Step
from ledger.games.replay import describe_entry, entry_action, replay_from
from ledger.plugins.registry import LoadedGame

OPENED = get_topic(Round.Opened)
BET = get_topic(Round.BetPlaced)
WITHDRAWN = get_topic(Round.BetWithdrawn)
CLOSED_BETTING = get_topic(Round.BettingClosed)
REOPENED = get_topic(Round.BettingReopened)
OUTCOME = get_topic(Round.OutcomeRecorded)
FAULT = get_topic(Round.FaultRecorded)
ACTION = get_topic(Round.ActionRecorded)
SETTLED_TOPIC = get_topic(Round.Settled)
VOIDED_TOPIC = get_topic(Round.Voided)
RESUMED = get_topic(Round.Resumed)
CORRECTED = get_topic(Round.Corrected)

#: Every event type a round's stream holds.
ROUND_TOPICS = frozenset(
    {
        OPENED,
        BET,
        WITHDRAWN,
        CLOSED_BETTING,
        REOPENED,
        OUTCOME,
        FAULT,
        ACTION,
        SETTLED_TOPIC,
        VOIDED_TOPIC,
        RESUMED,
        CORRECTED,
    }
)


@dataclass
class RoundFacts:
    """What one round's events say so far."""

    round_id: str
    game_id: str  # the game as recorded
    game: LoadedGame | None  # None: no installed game re-derives it (not checked)
    house: str
    currency: str
    table_id: str
    seed: str | None  # the committed seed of an RNG round; None at a physical table
    pins: dict[str, Any] = field(default_factory=dict)  # what Round.Opened pinned its game by
    status: str = BETTING
    bets: dict[str, BetView] = field(default_factory=dict)  # standing: placed, not withdrawn
    requests: set[str] = field(default_factory=set)  # the request ids that placed its bets
    log: list[LogEntry] = field(default_factory=list)  # every entry the game replays
    outcome: Any = None  # the last outcome recorded (settlement API 1)
    faults: int = 0  # faulty draws and fault actions
    after_fault: bool = False  # a faulty draw, and no draw since
    must_void: bool = False  # the game's step says the rules void the round
    reopens_betting: bool = False  # the game's step after the last fault reopened betting
    actions: int = 0  # actions recorded (settlement API 2)
    drawn: int = 0  # actions that drew randomness: part of the outcome
    draws: int = 0  # the next dice draw's counter (faulty or not; cards: `dealt`)
    dealt: list[int] = field(default_factory=list)  # cards dealt so far, in order
    betting: bool = True  # betting open before the next action, as recorded (API 2)
    settled: set[str] = field(default_factory=set)  # bets a step settled (API 2)
    at: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)  # bet -> (step, result)
    in_force: list[dict[str, Any]] = field(default_factory=list)  # the postings in force
    tainted: bool = False  # a finding in this round: the rest of it is not checked
    # The replay, continued: the log's first entries as actions, the step after them.
    _replayed: list[RecordedAction] = field(default_factory=list)
    _step: Step | None = None
    _peeked: tuple[int, LogEntry, RecordedAction, Step] | None = None

    def to_json(self) -> dict[str, Any]:
        """Every fact as plain JSON (the replay is not kept: it is recomputed)."""
        return {
            "round_id": self.round_id,
            "game_id": self.game_id,
            "pins": self.pins,
            "house": self.house,
            "currency": self.currency,
            "table_id": self.table_id,
            "seed": self.seed,
            "status": self.status,
            "bets": self.bets,
            "requests": sorted(self.requests),
            "log": self.log,
            "outcome": self.outcome,
            "faults": self.faults,
            "after_fault": self.after_fault,
            "must_void": self.must_void,
            "reopens_betting": self.reopens_betting,
            "actions": self.actions,
            "drawn": self.drawn,
            "draws": self.draws,
            "dealt": self.dealt,
            "betting": self.betting,
            "settled": sorted(self.settled),
            "at": {bet: [n, result] for bet, (n, result) in self.at.items()},
            "in_force": self.in_force,
            "tainted": self.tainted,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], game: LoadedGame | None) -> RoundFacts:
        facts = cls(
            **{k: v for k, v in data.items() if k not in ("settled", "at", "requests")},
            game=game,
        )
        facts.settled = set(data["settled"])
        facts.requests = set(data.get("requests", ()))  # (a state saved before they were kept)
        facts.at = {bet: (n, result) for bet, (n, result) in data["at"].items()}
        return facts

    def step(self) -> Step:
        """The game's step after the whole log with the bets standing now;
        InvalidCommandError if an entry is not a move the game offered."""
        game = self.game
        assert game is not None
        if self._step is None:
            self._replayed = []
            self._step = game.step(self.bets, self._replayed)
        if len(self._replayed) < len(self.log):
            _, self._step = replay_from(game, self.bets, self.log, self._replayed, self._step)
        return self._step

    def step_with(self, entry: LogEntry) -> Step:
        """The game's step after the log and `entry`, not yet folded in (the checks
        ask; the fold then keeps it)."""
        peeked = self._peeked
        if peeked is not None and peeked[0] == len(self.log) and peeked[1] is entry:
            return peeked[3]
        game = self.game
        assert game is not None
        before = self.step()
        action = entry_action(game, before, entry)
        if action is None:
            raise InvalidCommandError(
                f"{describe_entry(entry)} is not a move the game offered", code="move_not_offered"
            )
        after = game.step(self.bets, [*self._replayed, action])
        self._peeked = (len(self.log), entry, action, after)
        return after

    def append(self, entry: LogEntry) -> None:
        peeked = self._peeked
        if (
            peeked is not None
            and peeked[0] == len(self.log)
            and peeked[1] is entry
            and self._step is not None
            and len(self._replayed) == len(self.log)
        ):
            self._replayed.append(peeked[2])
            self._step = peeked[3]
        self._peeked = None
        self.log.append(entry)

    def replace_log(self, log: list[LogEntry]) -> None:
        """A correction rewrote the log: the next step replays it from the first entry."""
        self.log = log
        self.forget_steps()

    def forget_steps(self) -> None:
        """The bets changed: steps are recomputed with the bets standing now."""
        self._step, self._peeked = None, None


def entry_of(state: dict[str, Any]) -> LogEntry:
    """An ActionRecorded event's log entry (what the game replays)."""
    return {"action": {k: state[k] for k in ("actor", "action", "args", "drawn")}}


class RoundFold:
    """Applies each round event to its facts, after the checks read them."""

    def apply(self, facts: RoundFacts, topic: str, state: dict[str, Any]) -> None:
        if topic == BET:
            facts.requests.add(state["request_id"])
            facts.bets[state["bet_id"]] = {
                "account_id": state["account_id"],
                "bet": state["bet"],
                "stake": state["stake"],
            }
            facts.forget_steps()
        elif topic == WITHDRAWN:
            facts.bets.pop(state["bet_id"], None)
            facts.forget_steps()
        elif topic == CLOSED_BETTING:
            facts.status = CLOSED
            facts.append({"close_betting": True})
        elif topic == REOPENED:
            facts.status, facts.after_fault = BETTING, False
        elif topic == OUTCOME:
            facts.draws += 1
            facts.status, facts.after_fault = DECIDED, False
            facts.outcome = state["outcome"]
            facts.append({"outcome": state["outcome"]})
        elif topic == FAULT:
            self._fault(facts, state)
        elif topic == ACTION:
            self._action(facts, state)
        elif topic == SETTLED_TOPIC:
            self._settled(facts, state)
        elif topic == CORRECTED:
            self._corrected(facts, state)
        elif topic == VOIDED_TOPIC:
            facts.status = VOIDED

    @staticmethod
    def _fault(facts: RoundFacts, state: dict[str, Any]) -> None:
        entry: LogEntry = {"fault": state["reason"]}
        facts.draws += 1
        facts.faults += 1
        facts.after_fault = True
        if facts.game is not None and not facts.tainted:
            step = facts.step_with(entry)  # the fault policy is the game's step after it
            facts.reopens_betting, facts.must_void = step["betting"], step["void"] is not None
        facts.append(entry)

    @staticmethod
    def _action(facts: RoundFacts, state: dict[str, Any]) -> None:
        entry = entry_of(state)
        source = state.get("source") or {}
        drawn, action = state["drawn"], state["action"]
        facts.actions += 1
        if drawn:
            facts.drawn += 1
        facts.faults += is_fault(action, source)
        # The draw counter and the deck, as the sources check reads them.
        draw = source.get("draw")
        if draw == "cards":
            facts.dealt.extend(drawn)
        elif facts.seed is not None:
            facts.draws += draw == "dice"
        elif drawn or is_fault(action, source) or source.get("signed") == SIGNED_THROW:
            facts.draws += 1
        facts.betting = bool(state.get("betting"))
        if facts.game is not None and not facts.tainted:
            step = facts.step_with(entry)
            facts.status = BETTING if step["betting"] else CLOSED
            facts.must_void = step["void"] is not None
            facts.reopens_betting = step["betting"]
            facts.after_fault = False
        facts.append(entry)

    @staticmethod
    def _settled(facts: RoundFacts, state: dict[str, Any]) -> None:
        expected = expected_settlement_postings(
            facts.round_id, facts.house, facts.currency, state["results"]
        )
        if state.get("step") is not None:  # a step's bets: added to those in force
            results = {r["bet_id"]: r for r in state["results"]}
            facts.settled |= set(results)
            facts.at.update({bet: (state["step"], r) for bet, r in results.items()})
            facts.in_force = [*facts.in_force, *expected]
            if state["over"]:
                facts.status = SETTLED
        else:
            facts.in_force = expected
            facts.status = SETTLED

    @staticmethod
    def _corrected(facts: RoundFacts, state: dict[str, Any]) -> None:
        if state.get("step") is not None:
            corrected = corrected_step_log(facts, state)
            if corrected is not None:
                facts.replace_log(corrected[0])
            facts.dealt = corrected_dealt(facts, state)
            facts.at.update(
                {r["bet_id"]: (state["settled_at"][r["bet_id"]], r) for r in state["results"]}
            )
            return
        facts.outcome = state["right_outcome"]
        if facts.log:
            facts.replace_log([*facts.log[:-1], {"outcome": state["right_outcome"]}])
        facts.in_force = expected_settlement_postings(
            facts.round_id, facts.house, facts.currency, state["results"]
        )


def corrected_step_log(
    facts: RoundFacts, state: dict[str, Any]
) -> tuple[list[LogEntry], int] | None:
    """A step correction's log (the corrected action in place) and where it is;
    None if it names an action never recorded or a draw/arguments it did not have."""
    step, wrong, right = state["step"], state["wrong_outcome"], state["right_outcome"]
    entries = [i for i, entry in enumerate(facts.log) if "action" in entry]
    if not isinstance(step, int) or not 0 <= step < len(entries):
        return None
    at = entries[step]
    done = facts.log[at]["action"]
    if done["drawn"]:  # a draw: {kind: drawn}
        named = next(iter(wrong.values())) if len(wrong) == 1 else None
        if set(wrong) != set(right) or named != done["drawn"]:
            return None
        corrected = {**done, "drawn": next(iter(right.values()))}
    elif wrong != done["args"]:
        return None
    else:
        corrected = {**done, "args": dict(right)}
    log = list(facts.log)
    log[at] = {"action": corrected}
    return log, at


def corrected_dealt(facts: RoundFacts, state: dict[str, Any]) -> list[int]:
    """The round's dealt cards with a step correction's cards in place."""
    wrong = state["wrong_outcome"].get("cards") or []
    right = state["right_outcome"].get("cards") or []
    return [right[wrong.index(c)] if c in wrong else c for c in facts.dealt]
