"""A round's play by `act`, its one play command (settlement API 2, the one
generation the write path has; the older play commands are its aliases,
`ledger.casino.aliases`), and an operator's voids and resumes (each a command
body)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eventsourcing.domain import Aggregate

from ledger.casino import attestation, payouts
from ledger.casino.context import Context
from ledger.casino.play import chosen, play
from ledger.casino.runner import Body, Work
from ledger.crypto.actor import sign_fact
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.domain.signed_facts import operator_fact
from ledger.rng.server import RngServer

Done = tuple[Any, list[Aggregate]]


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
