"""Corrections (rules §1.3): an operator corrects what a physical table's
device misread. The settlement in force is reversed with compensating postings
and the round settled again on the right result, every wallet and the house
adjusted, in one commit. Never on an RNG table (a computed result is never
wrong: the remedy for a broken RNG is a void)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eventsourcing.domain import Aggregate

from ledger.casino import attestation, payouts
from ledger.casino.context import Context, bets_of
from ledger.casino.legality import outcome_action_of, stored_outcome
from ledger.casino.runner import Body, Work
from ledger.crypto.actor import sign_fact
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.domain.round import Round
from ledger.domain.round_records import SETTLED, BetResult
from ledger.domain.signed_facts import correction_fact
from ledger.errors import InvalidCommandError
from ledger.games.replay import declared, replay, settlements_from
from ledger.plugins.registry import LoadedGame

Done = tuple[list[BetResult], list[Aggregate]]


def correct(
    context: Context, round_id: str, outcome: dict[str, Any], reason: str, operator: Signer
) -> Body:
    """A settled round's outcome corrected: `correct_step` of its last action,
    the right result given as an outcome ({kind: drawn}, or the arguments of a
    move that draws nothing)."""

    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        _check_correctable(game_round)
        game = context.game_of(game_round)
        number = game_round.actions - 1
        at = game_round.action_entry(number)
        _, before_step = replay(game, bets_of(game_round), game_round.log[:at])
        right_action = outcome_action_of(game, game_round, before_step, outcome)
        right = stored_outcome(game, before_step, right_action)
        return _correction(context, work, game, game_round, number, right, reason, operator)

    return body


def correct_step(
    context: Context, round_id: str, step: int, drawn: list[int], reason: str, operator: Signer
) -> Body:
    """What action number `step` of a physical API-2 round drew, corrected."""

    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        game = context.game_of(game_round)
        return _correction(
            context, work, game, game_round, step, drawn, reason, operator, as_drawn=True
        )

    return body


def _check_correctable(game_round: Round) -> None:
    """A settled round of a physical table, played action by action."""
    if game_round.is_rng:
        raise InvalidCommandError(
            f"round {game_round.id} is on an RNG table: an RNG result is computed, never "
            "corrected (void the round if the RNG malfunctioned)",
            code="wrong_table_kind",
        )
    if game_round.status != SETTLED:
        raise InvalidCommandError(
            f"only a settled round can be corrected ({game_round.status})",
            code="correction_refused",
        )
    if game_round.settlement_api < 2:
        raise InvalidCommandError(
            f"round {game_round.id} was settled under settlement API 1 (release 0.2 and "
            "before), which this release reads and re-settles but no longer writes: its "
            "result is not corrected here",
            code="needs_migration",
        )


def _deltas(results: list[BetResult], before: dict[str, int]) -> list[BetResult]:
    """Per bet, what the new settlement returns against what the reversed one did."""
    return [
        {
            "bet_id": r["bet_id"],
            "account_id": r["account_id"],
            "stake": before[r["bet_id"]],  # what the reversed settlement returned
            "returned": r["returned"],
        }
        for r in results
    ]


def _correction(
    context: Context,
    work: Work,
    game: LoadedGame,
    game_round: Round,
    step: int,
    right: Any,
    reason: str,
    operator: Signer,
    *,
    as_drawn: bool = False,
) -> Done:
    """`right` is what action `step` drew (`as_drawn`), else its outcome as
    rounds store it ({kind: drawn}, or a move's arguments)."""
    _check_correctable(game_round)
    wrong, fixed, returns = _rederive(game, game_round, step, right, as_drawn)
    fact = correction_fact(game_round.id, wrong, fixed, reason, step)
    signed = sign_fact(attestation.check_operator(context, operator), fact, Role.OPERATOR)
    before = {r["bet_id"]: r["returned"] for r in game_round.results}
    results = game_round.correct_step(step, wrong, fixed, returns, reason, {**signed})
    return results, [
        game_round,
        *payouts.pay(work, game_round, _deltas(results, before), "correction"),
    ]


def _rederive(
    game: LoadedGame, game_round: Round, step: int, right: Any, as_drawn: bool
) -> tuple[dict[str, Any], dict[str, Any], dict[str, tuple[int, int]]]:
    """Replay the round with action `step` corrected: its wrong and right
    outcome ({kind: drawn}, or its arguments for a move that draws nothing),
    and per bet settled from that action on (action number, return)."""
    at = game_round.action_entry(step)
    done = game_round.log[at]["action"]
    bets = bets_of(game_round)
    _, current = replay(game, bets, game_round.log[:at])
    draw = current["moves"].get(done["actor"], {}).get(done["action"])
    if draw is None:
        if as_drawn or done["action"] in declared(game):
            raise InvalidCommandError(
                f"action {step} drew nothing to correct", code="correction_refused", param="step"
            )
        if not isinstance(right, Mapping):
            raise InvalidCommandError(
                f"an outcome is an object, not {right!r}", code="invalid_value"
            )
        wrong = dict(done["args"])
        fixed = game.validate_args(done["actor"], done["action"], right)
        corrected = {**done, "args": fixed}
    else:
        kind = draw["kind"]
        wrong = {kind: list(done["drawn"])}
        if not as_drawn:  # {kind: drawn}, as `correct` is given it
            right = right.get(kind) if isinstance(right, Mapping) and len(right) == 1 else None
        values = game.draw_range(kind)  # the values the game declares
        low, high = values["low"], values["high"]
        if (
            not isinstance(right, list)
            or len(right) != draw["count"]
            or not all(type(v) is int and low <= v <= high for v in right)
        ):
            raise InvalidCommandError(
                f"bad correction: action {step} draws {draw['count']} {kind} "
                f"({low}..{high}), got {right!r}",
                code="invalid_draw",
            )
        others = [c for c in game_round.dealt if c not in wrong[kind]]
        if kind == "cards" and (set(right) & set(others) or len(set(right)) < len(right)):
            raise InvalidCommandError(
                "bad correction: a card would be dealt twice from the round's deck",
                code="invalid_draw",
            )
        fixed = {kind: list(right)}
        corrected = {**done, "drawn": list(right)}
    if fixed == wrong:
        raise InvalidCommandError(
            "the corrected draw is the one already recorded", code="correction_refused"
        )
    log = list(game_round.log)
    log[at] = {"action": corrected}
    try:
        returns, last = settlements_from(game, bets, log, at)
    except InvalidCommandError as exc:
        raise InvalidCommandError(
            f"round {game_round.id}: with the corrected draw, {exc}: void the round instead",
            code="correction_refused",
        ) from None
    if not last["over"]:
        raise InvalidCommandError(
            f"round {game_round.id}: with the corrected draw the round is not over: "
            "void it instead",
            code="correction_refused",
        )
    return wrong, fixed, returns
