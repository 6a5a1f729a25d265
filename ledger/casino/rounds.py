"""A round's play, voids and resumes (each a command body), every play through
`play` (settlement API 2: the one generation the write path has)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eventsourcing.domain import Aggregate

from ledger.casino import attestation, payouts
from ledger.casino.context import Context
from ledger.casino.legality import legal_actor, offers, step_of
from ledger.casino.play import chosen, fault_reported, play, reported, wrapped
from ledger.casino.runner import Body, Work
from ledger.crypto.actor import sign_fact
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.domain.round import BETTING, SETTLED, Round, operator_fact
from ledger.errors import InvalidCommandError
from ledger.games.replay import CLOSE_BETTING, FAULT, outcome_move
from ledger.rng.server import RngServer

Done = tuple[Any, list[Aggregate]]


def close_betting(context: Context, round_id: str) -> Body:
    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        return None, play(context, work, game_round, wrapped(context, CLOSE_BETTING, None))[1]

    return body


def record_outcome(
    context: Context, round_id: str, outcome: dict[str, Any], source: dict[str, Any]
) -> Body:
    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        return None, play(context, work, game_round, reported(context, outcome, source))[1]

    return body


def throw_dice(context: Context, round_id: str, rng: RngServer) -> Body:
    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        if game_round.seed_id is None:
            raise InvalidCommandError(f"round {game_round.id} has no RNG seed: a physical table")
        variant = context.variant_of(game_round)
        step = step_of(context, variant, game_round)
        move = outcome_move(step)
        draw = move[2] if move is not None else None
        if draw is None or draw["kind"] != "dice":
            raise InvalidCommandError(
                f"round {game_round.id}: the game draws no dice now ({offers(step)})"
            )
        assert move is not None  # the throw settles what the game says
        played, changed = play(context, work, game_round, wrapped(context, move[1], rng))
        return {draw["kind"]: played["drawn"]}, changed

    return body


def record_fault(context: Context, round_id: str, reason: str, source: dict[str, Any]) -> Body:
    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        variant = context.variant_of(game_round)
        actor = legal_actor(context, variant, game_round, FAULT)
        reason_args = variant.validate_args(actor, FAULT, {"reason": reason})
        played, changed = play(
            context, work, game_round, fault_reported(context, reason_args, source)
        )
        after = changed[0]  # the round, as the fault left it
        assert isinstance(after, Round)
        then = (
            "voided"
            if played["void"] is not None
            else "betting reopened"
            if after.status == BETTING
            else "throw again"
        )
        return {"faults": after.faults, "then": then}, changed

    return body


def settle(context: Context, round_id: str) -> Body:
    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        # Its game's steps settle it as they are played (a draw, an action):
        # there is never anything left for this command to settle.
        if game_round.status == SETTLED:
            raise InvalidCommandError(f"round {game_round.id} is already settled")
        raise InvalidCommandError(
            f"round {game_round.id} has no outcome to settle on (it is {game_round.status}): "
            "its game settles it as it is played"
        )

    return body


def act(
    context: Context,
    round_id: str,
    actor: str,
    action: str,
    args: Mapping[str, Any] | None,
    source: dict[str, Any] | None,
    rng: RngServer | None,
    asked_by: dict[str, str] | None,
) -> Body:
    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        choose = chosen(context, actor, action, args, source, rng, asked_by)
        return play(context, work, game_round, choose)

    return body


def void_round(context: Context, round_id: str, reason: str, operator: Signer) -> Body:
    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        fact = operator_fact("void", game_round.id, reason)
        signed = sign_fact(attestation.check_operator(context, operator), fact, Role.OPERATOR)
        returns = game_round.void(reason, {**signed})
        return returns, [
            game_round,
            *payouts.pay(work, game_round, returns),
            *payouts.ended(work, game_round),
        ]

    return body


def resume_round(context: Context, round_id: str, reason: str, operator: Signer) -> Body:
    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        fact = operator_fact("resume", game_round.id, reason)
        signed = sign_fact(attestation.check_operator(context, operator), fact, Role.OPERATOR)
        game_round.resume(reason, {**signed})
        return None, [game_round]

    return body
