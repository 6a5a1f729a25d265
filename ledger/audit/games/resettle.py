"""Re-settling every round from its recorded facts, with the game and rules it
opened with: its recorded steps are replayed through the game as actions
(ledger.games.replay) and the payouts in the log must be what the game's step
settles."""

from __future__ import annotations

from typing import Any

from ledger.audit.games.round_facts import (
    ACTION,
    CORRECTED,
    SETTLED_TOPIC,
    RoundFacts,
    corrected_step_log,
)
from ledger.errors import InvalidCommandError, VerificationError
from ledger.games.api import Step
from ledger.games.replay import settlements_from


class Resettler:
    """At each settlement, settles again from the round's facts and compares."""

    def __init__(self) -> None:
        self.resettled = 0  # settlements and corrections settled again
        self.bets = 0  # bets whose return was re-derived

    def observe(self, facts: RoundFacts, topic: str, state: dict[str, Any], where: str) -> None:
        if topic == ACTION:
            if state["step"] != facts.actions:
                raise VerificationError(
                    f"action number {state['step']} recorded as the round's action {facts.actions}",
                    where=where,
                )
        elif topic == SETTLED_TOPIC and state.get("step") is not None:
            # Named by round: a partial settlement is one step of a round's play.
            self._check_step(facts, state, f"round {facts.round_id} at {where}")
        elif topic == SETTLED_TOPIC:
            if facts.outcome is None:
                raise VerificationError("settled without a recorded outcome", where=where)
            self._check(facts, _step(facts, where), state["results"], where)
        elif topic == CORRECTED and state.get("step") is not None:
            self._check_correction(facts, state, f"round {facts.round_id} at {where}")
        elif topic == CORRECTED:
            if state["wrong_outcome"] != facts.outcome:
                raise VerificationError(
                    "the correction names a wrong outcome that was not the one recorded",
                    where=where,
                )
            corrected = {"outcome": state["right_outcome"]}
            log = [*facts.log[:-1], corrected]
            try:
                step = _replayed(facts, log)
            except InvalidCommandError as exc:
                raise VerificationError(
                    f"the game does not accept this round: {exc}", where=where
                ) from None
            self._check(facts, step, state["results"], where)

    def _check_step(self, facts: RoundFacts, state: dict[str, Any], where: str) -> None:
        """A partial settlement: exactly the bets, and the returns, that the game's
        step after the recorded action it names settles, each bet once."""
        if state["step"] != facts.actions - 1:
            raise VerificationError(
                f"a settlement of action {state['step']} recorded after action {facts.actions - 1}",
                where=where,
            )
        step = _step(facts, where)
        returns = step["settle"]
        recorded = {r["bet_id"]: r for r in state["results"]}
        if len(recorded) != len(state["results"]) or set(recorded) != set(returns):
            raise VerificationError(
                f"the settlement of action {state['step']} covers bets "
                f"{sorted(recorded)}, the game's step settles {sorted(returns)}",
                where=where,
            )
        twice = set(recorded) & facts.settled
        if twice:
            raise VerificationError(f"bet {sorted(twice)[0]} settled twice", where=where)
        _compare(facts, recorded, returns, where)
        if bool(state["over"]) != step["over"]:
            raise VerificationError(
                f"the settlement says the round is {'over' if state['over'] else 'not over'}, "
                "the game's step says otherwise",
                where=where,
            )
        self.resettled += 1
        self.bets += len(recorded)

    def _check_correction(self, facts: RoundFacts, state: dict[str, Any], where: str) -> None:
        """A step correction: it names the draw recorded at that action, reverses
        exactly the settlements in force from that action on, and re-settles
        what the game re-derives with the corrected draw and the same later
        actions."""
        step, wrong = state["step"], state["wrong_outcome"]
        entries = [i for i, entry in enumerate(facts.log) if "action" in entry]
        if not isinstance(step, int) or not 0 <= step < len(entries):
            raise VerificationError(f"a correction of action {step!r}, never recorded", where=where)
        corrected = corrected_step_log(facts, state)
        if corrected is None:
            done = facts.log[entries[step]]["action"]
            if done["drawn"]:
                raise VerificationError(
                    f"the correction names a wrong draw {wrong!r} for action {step}, which drew "
                    f"{done['drawn']!r}",
                    where=where,
                )
            raise VerificationError(
                f"the correction names wrong arguments {wrong!r} for action {step}, recorded "
                f"as {done['args']!r}",
                where=where,
            )
        log, at = corrected
        assert facts.game is not None
        try:
            returns, last = settlements_from(facts.game, facts.bets, log, at)
        except InvalidCommandError as exc:
            raise VerificationError(
                f"the game does not accept the corrected round: {exc}", where=where
            ) from None
        in_force = {b: r for b, (n, r) in facts.at.items() if n >= step}
        reversed_results = {r["bet_id"]: r for r in state["reversed_results"]}
        if reversed_results != in_force or len(reversed_results) != len(state["reversed_results"]):
            raise VerificationError(
                f"the correction reverses {sorted(reversed_results)}, not the settlements in "
                f"force from action {step} on ({sorted(in_force)})",
                where=where,
            )
        recorded = {r["bet_id"]: r for r in state["results"]}
        settled_at = {b: n for b, (n, _) in returns.items()}
        if (
            len(recorded) != len(state["results"])
            or set(recorded) != set(returns)
            or state["settled_at"] != settled_at
            or set(returns) != set(in_force)
            or not last["over"]
        ):
            raise VerificationError(
                f"the correction re-settles {sorted(recorded)} at {state['settled_at']}, the "
                f"game re-derives {settled_at} (over: {last['over']})",
                where=where,
            )
        _compare(facts, recorded, {b: paid for b, (_, paid) in returns.items()}, where)
        self.resettled += 1
        self.bets += len(recorded)

    def _check(
        self, facts: RoundFacts, step: Step, results: list[dict[str, Any]], where: str
    ) -> None:
        returns = step["settle"]
        if not step["over"] or set(returns) != set(facts.bets):
            raise VerificationError(
                "settled, but the game's step does not settle every bet", where=where
            )
        recorded = {r["bet_id"]: r for r in results}
        if set(recorded) != set(facts.bets):
            raise VerificationError(
                "the settlement does not cover exactly the round's bets", where=where
            )
        _compare(facts, recorded, returns, where)
        self.resettled += 1
        self.bets += len(results)


def _step(facts: RoundFacts, where: str) -> Step:
    try:
        return facts.step()
    except InvalidCommandError as exc:
        raise VerificationError(
            f"the game does not accept this round: {exc}", where=where
        ) from None


def _replayed(facts: RoundFacts, log: list[Any]) -> Step:
    """The game's step after another log than the round's (a correction's)."""
    from ledger.games.replay import replay

    assert facts.game is not None
    return replay(facts.game, facts.bets, log)[1]


def _compare(
    facts: RoundFacts,
    recorded: dict[str, dict[str, Any]],
    returns: dict[str, int],
    where: str,
) -> None:
    for bet_id, result in recorded.items():
        bet = facts.bets.get(bet_id)
        if bet is None or (result["account_id"], result["stake"]) != (
            bet["account_id"],
            bet["stake"],
        ):
            raise VerificationError(
                f"bet {bet_id} settled for the wrong player or stake", where=where
            )
        if result["returned"] != returns[bet_id]:
            raise VerificationError(
                f"bet {bet_id} returned {result['returned']}, the rules pay {returns[bet_id]}",
                where=where,
            )
