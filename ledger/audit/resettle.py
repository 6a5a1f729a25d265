"""Re-settling every round from its recorded facts, with the game and rules it
opened with: its recorded steps are replayed through the game as actions
(ledger.games.replay) and the payouts in the log must be what the game's step
settles."""

from __future__ import annotations

from typing import Any

from eventsourcing.utils import get_topic

from ledger.audit.round_variants import RoundVariants
from ledger.domain.round import LogEntry, Round
from ledger.errors import InvalidCommandError, VerificationError
from ledger.games.api import Step
from ledger.games.replay import replay, settlements_from
from ledger.plugins.registry import LoadedGame

_OPENED = get_topic(Round.Opened)
_BET = get_topic(Round.BetPlaced)
_WITHDRAWN = get_topic(Round.BetWithdrawn)
_OUTCOME = get_topic(Round.OutcomeRecorded)
_FAULT = get_topic(Round.FaultRecorded)
_CLOSED = get_topic(Round.BettingClosed)
_SETTLED = get_topic(Round.Settled)
_VOIDED = get_topic(Round.Voided)
_CORRECTED = get_topic(Round.Corrected)
_ACTION = get_topic(Round.ActionRecorded)


class Resettler:
    """Follows the log in order; at each settlement, settles again and compares."""

    def __init__(self, variants: RoundVariants) -> None:
        self.variants = variants
        self.rounds: dict[str, dict[str, Any]] = {}
        self.resettled = 0  # settlements and corrections settled again
        self.bets = 0  # bets whose return was re-derived

    def observe(self, stream: str, topic: str, state: dict[str, Any], where: str) -> None:
        if topic == _OPENED:
            self.rounds[stream] = {
                "variant": self.variants.of(stream, state),
                "bets": {},
                "outcome": None,
                "log": [],
                "actions": 0,
                "settled": set(),
                "at": {},  # bet -> (action number settling it, its result in force)
            }
            return
        game = self.rounds.get(stream)
        if game is None:
            return
        if topic == _BET:
            game["bets"][state["bet_id"]] = {
                "account_id": state["account_id"],
                "bet": state["bet"],
                "stake": state["stake"],
            }
        elif topic == _WITHDRAWN:
            game["bets"].pop(state["bet_id"], None)
        elif topic == _CLOSED:
            game["log"].append({"close_betting": True})
        elif topic == _FAULT:
            game["log"].append({"fault": state["reason"]})
        elif topic == _OUTCOME:
            game["outcome"] = state["outcome"]
            game["log"].append({"outcome": state["outcome"]})
        elif topic == _ACTION:
            if state["step"] != game["actions"]:
                raise VerificationError(
                    f"action number {state['step']} recorded as the round's action "
                    f"{game['actions']}",
                    where=where,
                )
            game["actions"] += 1
            done = {k: state[k] for k in ("actor", "action", "args", "drawn")}
            game["log"].append({"action": done})
            self._replay(game, where)  # the game offered it, and says what follows
        elif topic == _VOIDED:
            del self.rounds[stream]
        elif topic == _SETTLED and state.get("step") is not None:
            # Named by round: a partial settlement is one step of a round's play.
            self._check_step(game, state, f"round {stream} at {where}")
        elif topic == _SETTLED:
            self._check(game, state["results"], where)  # kept: a correction may follow
        elif topic == _CORRECTED and state.get("step") is not None:
            self._check_correction(game, state, f"round {stream} at {where}")
        elif topic == _CORRECTED:
            if state["wrong_outcome"] != game["outcome"]:
                raise VerificationError(
                    "the correction names a wrong outcome that was not the one recorded",
                    where=where,
                )
            game["outcome"] = state["right_outcome"]
            game["log"][-1] = {"outcome": state["right_outcome"]}
            self._check(game, state["results"], where)

    @staticmethod
    def _replay(game: dict[str, Any], where: str) -> Step:
        try:
            return replay(game["variant"], game["bets"], game["log"])[1]
        except InvalidCommandError as exc:
            raise VerificationError(
                f"the game does not accept this round: {exc}", where=where
            ) from None

    def _check_step(self, game: dict[str, Any], state: dict[str, Any], where: str) -> None:
        """A partial settlement: exactly the bets, and the returns, that the game's
        step after the recorded action it names settles, each bet once."""
        if state["step"] != game["actions"] - 1:
            raise VerificationError(
                f"a settlement of action {state['step']} recorded after action "
                f"{game['actions'] - 1}",
                where=where,
            )
        step = self._replay(game, where)
        returns = step["settle"]
        recorded = {r["bet_id"]: r for r in state["results"]}
        if len(recorded) != len(state["results"]) or set(recorded) != set(returns):
            raise VerificationError(
                f"the settlement of action {state['step']} covers bets "
                f"{sorted(recorded)}, the game's step settles {sorted(returns)}",
                where=where,
            )
        twice = set(recorded) & game["settled"]
        if twice:
            raise VerificationError(f"bet {sorted(twice)[0]} settled twice", where=where)
        self._compare(game, recorded, returns, where)
        game["settled"] |= set(recorded)
        game["at"].update({bet: (state["step"], result) for bet, result in recorded.items()})
        if bool(state["over"]) != step["over"]:
            raise VerificationError(
                f"the settlement says the round is {'over' if state['over'] else 'not over'}, "
                "the game's step says otherwise",
                where=where,
            )
        self.resettled += 1
        self.bets += len(recorded)

    def _check_correction(self, game: dict[str, Any], state: dict[str, Any], where: str) -> None:
        """A step correction: it names the draw recorded at that action, reverses
        exactly the settlements in force from that action on, and re-settles
        what the game re-derives with the corrected draw and the same later
        actions."""
        step, wrong, right = state["step"], state["wrong_outcome"], state["right_outcome"]
        entries = [i for i, entry in enumerate(game["log"]) if "action" in entry]
        if not isinstance(step, int) or not 0 <= step < len(entries):
            raise VerificationError(f"a correction of action {step!r}, never recorded", where=where)
        at = entries[step]
        done = game["log"][at]["action"]
        if done["drawn"]:  # a draw: {kind: drawn}
            named = next(iter(wrong.values())) if len(wrong) == 1 else None
            if set(wrong) != set(right) or named != done["drawn"]:
                raise VerificationError(
                    f"the correction names a wrong draw {wrong!r} for action {step}, which drew "
                    f"{done['drawn']!r}",
                    where=where,
                )
            corrected = {**done, "drawn": next(iter(right.values()))}
        elif wrong != done["args"]:
            raise VerificationError(
                f"the correction names wrong arguments {wrong!r} for action {step}, recorded "
                f"as {done['args']!r}",
                where=where,
            )
        else:
            corrected = {**done, "args": dict(right)}
        log = list(game["log"])
        log[at] = {"action": corrected}
        try:
            returns, last = settlements_from(game["variant"], game["bets"], log, at)
        except InvalidCommandError as exc:
            raise VerificationError(
                f"the game does not accept the corrected round: {exc}", where=where
            ) from None
        in_force = {b: r for b, (n, r) in game["at"].items() if n >= step}
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
        self._compare(game, recorded, {b: paid for b, (_, paid) in returns.items()}, where)
        game["log"] = log
        game["at"].update({b: (settled_at[b], r) for b, r in recorded.items()})
        self.resettled += 1
        self.bets += len(recorded)

    @staticmethod
    def _compare(
        game: dict[str, Any],
        recorded: dict[str, dict[str, Any]],
        returns: dict[str, int],
        where: str,
    ) -> None:
        for bet_id, result in recorded.items():
            bet = game["bets"][bet_id]
            if (result["account_id"], result["stake"]) != (bet["account_id"], bet["stake"]):
                raise VerificationError(
                    f"bet {bet_id} settled for the wrong player or stake", where=where
                )
            if result["returned"] != returns[bet_id]:
                raise VerificationError(
                    f"bet {bet_id} returned {result['returned']}, the rules pay {returns[bet_id]}",
                    where=where,
                )

    def _check(self, game: dict[str, Any], results: list[dict[str, Any]], where: str) -> None:
        if game["outcome"] is None:
            raise VerificationError("settled without a recorded outcome", where=where)
        variant: LoadedGame = game["variant"]
        log: list[LogEntry] = game["log"]
        try:
            _, step = replay(variant, game["bets"], log)
        except InvalidCommandError as exc:
            raise VerificationError(
                f"the game does not accept this round: {exc}", where=where
            ) from None
        returns = step["settle"]
        if not step["over"] or set(returns) != set(game["bets"]):
            raise VerificationError(
                "settled, but the game's step does not settle every bet", where=where
            )
        recorded = {r["bet_id"]: r for r in results}
        if set(recorded) != set(game["bets"]):
            raise VerificationError(
                "the settlement does not cover exactly the round's bets", where=where
            )
        for bet_id, bet in game["bets"].items():
            result = recorded[bet_id]
            if (result["account_id"], result["stake"]) != (bet["account_id"], bet["stake"]):
                raise VerificationError(
                    f"bet {bet_id} settled for the wrong player or stake", where=where
                )
            if result["returned"] != returns[bet_id]:
                raise VerificationError(
                    f"bet {bet_id} returned {result['returned']}, the rules pay {returns[bet_id]}",
                    where=where,
                )
        self.resettled += 1
        self.bets += len(results)
