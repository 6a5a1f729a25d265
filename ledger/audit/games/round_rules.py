"""Each round's life re-derived from its events (`verify --level settlement`):
the order of its steps, who may void it, and its game's fault policy
(docs/rules.md §1.2, §1.4), read from the rules data of the game version the
round opened with, never from the game's name.

- A request places one bet: a request id on two bets of a round is a retry
  placed twice (the request index lost the row that answers retries).
- Bets are placed and withdrawn only while betting is open; an outcome or a
  faulty draw only once betting is closed; a settlement only on an outcome;
  a correction only of a settled round.
- After a faulty draw, a `rethrow` policy (e.g. `taixiu`) keeps the bets
  locked: no bet placed or withdrawn, betting never reopened, the next draw
  comes with the same bets. A `reopen-betting` policy (e.g. `sicbo-void`)
  reopens betting before the next draw.
- At the policy's limit of faulty draws (`void_after`) the round is voided
  at once, every standing stake returned in full.
- A void without an operator's signature is only the game's own void (its
  fault policy, a device-reported misdeal); an operator's void is never made
  once a valid outcome is recorded, in part or whole: an outcome, a settled
  bet, or any draw of randomness (the first card dealt, RULES §1.4).
"""

from __future__ import annotations

from typing import Any

from ledger.audit.games.round_facts import (
    ACTION,
    BET,
    CLOSED_BETTING,
    CORRECTED,
    FAULT,
    OUTCOME,
    REOPENED,
    SETTLED_TOPIC,
    VOIDED_TOPIC,
    WITHDRAWN,
    RoundFacts,
    entry_of,
)
from ledger.domain.asked_by import by_problem
from ledger.domain.round_records import BETTING, CLOSED, DECIDED, SETTLED, VOIDED
from ledger.domain.stored_names import is_fault
from ledger.errors import InvalidCommandError, VerificationError


def _policy(reopens_betting: bool) -> str:
    """What the game's step said after the last faulty draw."""
    return (
        "its game reopened betting after the faulty draw"
        if reopens_betting
        else "its game kept bets locked after the faulty draw"
    )


class RoundRulesAudit:
    """Each round's life against its facts before the event (`RoundFacts`)."""

    def __init__(self) -> None:
        self.faults = 0  # faulty draws whose policy consequence was re-derived

    def observe(self, facts: RoundFacts, topic: str, state: dict[str, Any], where: str) -> None:
        def fail(message: str) -> VerificationError:
            return VerificationError(
                f"round {facts.round_id} ({facts.game_id}): {message}", where=where
            )

        policy = _policy(facts.reopens_betting)
        if topic == BET and state["request_id"] in facts.requests:
            # A retry is answered with its first bet, never placed again: a
            # second bet of one request is a request index that lost its row.
            raise fail(
                f"request {state['request_id']!r} placed a second bet ({state['bet_id']}): "
                "a request is placed once"
            )
        asked = state.get("asked_by") if topic == BET else None  # who asked: one shape
        if asked is not None and (problem := by_problem(asked)) is not None:
            raise fail(f"bet {state['bet_id']}'s asked_by is malformed: {problem}")
        if topic in (BET, WITHDRAWN):
            if facts.after_fault and not facts.reopens_betting:
                raise fail(
                    f"a bet {'placed' if topic == BET else 'withdrawn'} after a faulty draw, "
                    f"but its rules lock bets ({policy})"
                )
            if facts.status != BETTING:
                raise fail(f"a bet changed while the round was {facts.status}")
        elif topic == CLOSED_BETTING:
            _expect(facts, BETTING, "betting closed", fail)
        elif topic == REOPENED:
            _expect(facts, CLOSED, "betting reopened", fail)
            if not (facts.after_fault and facts.reopens_betting):
                raise fail(
                    "betting reopened"
                    + (" after a faulty draw" if facts.after_fault else " without a faulty draw")
                    + f", but its rules say: {policy}"
                )
        elif topic in (OUTCOME, FAULT):
            what = "an outcome" if topic == OUTCOME else "a faulty draw"
            _expect(facts, CLOSED, what, fail)
            if facts.must_void:
                raise fail(
                    f"{what} after {facts.faults} faulty draws: its rules void the round ({policy})"
                )
            if facts.after_fault and facts.reopens_betting:
                raise fail(f"{what} after a faulty draw without betting reopened first ({policy})")
            if topic == FAULT:
                self._fault(facts, state, fail)
        elif topic == ACTION:
            self._action(facts, state, fail)
        elif topic == SETTLED_TOPIC and state.get("step") is not None:
            if facts.status != CLOSED or facts.must_void:
                raise fail(f"a step's settlement while the round was {facts.status}")
        elif topic == SETTLED_TOPIC:
            _expect(facts, DECIDED, "a settlement", fail)
        elif topic == CORRECTED:
            _expect(facts, SETTLED, "a correction", fail)
        elif topic == VOIDED_TOPIC:
            self._voided(facts, state, fail)

    def _fault(self, facts: RoundFacts, state: dict[str, Any], fail: Any) -> None:
        self.faults += 1
        number = facts.faults + 1
        if state.get("faults") != number:
            raise fail(f"faulty draw {number} is recorded as number {state.get('faults')}")
        try:  # the fault policy is the game's: its step after this fault says
            facts.step_with({"fault": state["reason"]})
        except InvalidCommandError as exc:
            raise fail(f"the game does not accept this faulty draw: {exc}") from None

    def _action(self, facts: RoundFacts, state: dict[str, Any], fail: Any) -> None:
        """Settlement API 2: the game's step after it says what may follow."""
        if facts.must_void:
            raise fail(
                f"{state['action']} after {facts.faults} faulty draws: its rules void the round"
            )
        if facts.status in (DECIDED, SETTLED, VOIDED):
            raise fail(f"an action while the round was {facts.status}")
        fault = is_fault(state["action"], state.get("source") or {})
        game = facts.game
        if game is not None and fault != (state["action"] == game.fault_action):
            raise fail(
                f"{state['action']} is recorded as {'a' if fault else 'no'} faulty draw, "
                f"but the game's fault is {game.fault_action!r}"
            )
        self.faults += fault
        try:
            step = facts.step_with(entry_of(state))
        except InvalidCommandError as exc:
            raise fail(f"the game does not accept this action: {exc}") from None
        if step["betting"] != state["betting"] and fault:
            done = "reopened" if state["betting"] else "kept locked"
            raise fail(
                f"betting {done} after a faulty draw, but its rules say: {_policy(step['betting'])}"
            )
        if step["betting"] != state["betting"]:
            raise fail("the action records betting open or closed against the game's step")

    @staticmethod
    def _voided(facts: RoundFacts, state: dict[str, Any], fail: Any) -> None:
        if facts.status in (SETTLED, VOIDED):
            raise fail(f"voided when already {facts.status}")
        if state.get("operator") is None:
            if not facts.must_void:
                raise fail(
                    f"voided without an operator's signature after {facts.faults} faulty "
                    f"draws, and its rules do not void it ({_policy(facts.reopens_betting)})"
                )
        elif facts.status == DECIDED:
            raise fail("an operator voided the round after its outcome was recorded")
        elif facts.drawn:
            raise fail(
                f"an operator voided the round after it drew its outcome ({facts.drawn} draws: "
                "every dealt card is part of it); only the game's own void (a fault, a "
                "device-reported misdeal) may end it then"
            )
        elif facts.settled:
            raise fail("an operator voided the round after some of its bets were settled")
        returned = sorted(
            (r["bet_id"], r["account_id"], r["stake"], r["returned"]) for r in state["returns"]
        )
        standing = sorted(
            (b, v["account_id"], v["stake"], v["stake"])
            for b, v in facts.bets.items()
            if b not in facts.settled
        )
        if returned != standing:
            raise fail("the void does not return every standing stake in full")


def _expect(facts: RoundFacts, status: str, what: str, fail: Any) -> None:
    if facts.status != status:
        raise fail(f"{what} while the round was {facts.status}")
