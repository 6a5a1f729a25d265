"""Settlement API 1, behind one adapter: rounds opened before games were played
action by action (release 0.2 and before) keep their own write path: close
betting, one outcome (or faulty throws and the game's fault policy), then a
settlement of every bet at once. Newer rounds never come here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eventsourcing.domain import Aggregate

from ledger.casino import attestation, payouts
from ledger.casino.context import Context
from ledger.casino.legality import canonical_outcome, legal_actor, refusal, step_of
from ledger.casino.runner import Work
from ledger.domain.round import BetResult, Round, fault_fact, throw_fact
from ledger.errors import InvalidCommandError
from ledger.games.api import Draw
from ledger.games.replay import CLOSE_BETTING, FAULT
from ledger.rng.server import RngServer

Done = tuple[Any, list[Aggregate]]


def close_betting(context: Context, game_round: Round) -> Done:
    legal_actor(context, context.variant_of(game_round), game_round, CLOSE_BETTING)
    game_round.close_betting()
    return None, [game_round]


def record_outcome(
    context: Context, game_round: Round, outcome: dict[str, Any], source: dict[str, Any]
) -> Done:
    variant = context.variant_of(game_round)
    checked = canonical_outcome(context, variant, game_round, outcome)
    game_round.check_awaiting_throw()
    attestation.check_source(
        context, game_round, source, throw_fact(game_round.id, game_round.draws, checked)
    )
    game_round.record_outcome(checked, source)
    return None, [game_round]


def throw_dice(context: Context, game_round: Round, draw: Draw, rng: RngServer) -> Done:
    variant = context.variant_of(game_round)
    assert game_round.seed_id is not None
    counter = game_round.draws
    drawn = list(rng.throw(game_round.seed_id, str(game_round.id), counter))
    outcome = canonical_outcome(
        context, variant, game_round, {draw["kind"]: drawn[: draw["count"]]}
    )
    game_round.record_outcome(outcome, game_round.rng_source())
    return outcome, [game_round]


def record_fault(
    context: Context,
    work: Work,
    game_round: Round,
    reason: str,
    reason_args: dict[str, Any],
    source: dict[str, Any],
) -> Done:
    """A faulty throw, then what the game's fault policy says: throw again with
    bets locked, reopen betting, or void the round after too many."""
    variant = context.variant_of(game_round)
    game_round.check_awaiting_throw("a throw")
    attestation.check_source(
        context, game_round, source, fault_fact(game_round.id, game_round.draws, reason)
    )
    faults = game_round.record_fault(reason_args["reason"], source)
    step = step_of(context, variant, game_round)
    if step["void"] is not None:
        returns = game_round.void(step["void"], None)
        changed = [
            game_round,
            *payouts.pay(work, game_round, returns),
            *payouts.ended(work, game_round),
        ]
        return {"faults": faults, "then": "voided"}, changed
    if step["betting"]:
        game_round.reopen_betting(f"faulty throw: {reason}")
        return {"faults": faults, "then": "betting reopened"}, [game_round]
    return {"faults": faults, "then": "throw again"}, [game_round]


def settle(context: Context, work: Work, game_round: Round) -> Done:
    game_round.check_settleable()
    variant = context.variant_of(game_round)
    returns = step_of(context, variant, game_round)["settle"]
    results: list[BetResult] = game_round.settle(returns)
    return results, [
        game_round,
        *payouts.pay(work, game_round, results),
        *payouts.ended(work, game_round),
    ]


def act(
    context: Context,
    work: Work,
    game_round: Round,
    actor: str,
    action: str,
    args: Mapping[str, Any] | None,
    source: dict[str, Any] | None,
    rng: RngServer | None,
) -> Done:
    """`Casino.act` on an API-1 round: the old command its action stands for."""
    variant = context.variant_of(game_round)
    step = step_of(context, variant, game_round)
    if action not in step["moves"].get(actor, {}):
        raise refusal(game_round, actor, action, step)
    given = variant.validate_args(actor, action, dict(args or {}))
    if action == CLOSE_BETTING:
        return close_betting(context, game_round)
    if action == FAULT:
        reason = given.get("reason", "")
        reason_args = variant.validate_args(actor, FAULT, {"reason": reason})
        return record_fault(context, work, game_round, reason, reason_args, source or {})
    draw = step["moves"][actor][action]
    if game_round.is_rng and draw is not None:
        if rng is None:
            raise InvalidCommandError(f"round {game_round.id} is on an RNG table: pass its RNG")
        return throw_dice(context, game_round, draw, rng)
    outcome = given if draw is None else dict(args or {})
    return record_outcome(context, game_round, outcome, source or {})
