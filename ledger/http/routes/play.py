"""A round's play, by its table's device or an operator: `POST /act`, the
game's next action, its one play command; and its aliases, kept for
integrators (`ledger.casino.aliases`, listed in docs/cli.md): betting closed,
the draw (an RNG table's dice, a physical table's reported outcome or fault),
and the settlement, which a draw or action has already made."""

from __future__ import annotations

from typing import Any

from ledger.casino import Casino
from ledger.http import models, responses
from ledger.http.dependencies import (
    PLAY,
    Caller,
    CasinoDep,
    IdempotencyKey,
    RoundId,
    ServiceDep,
    check_own_table,
)
from ledger.http.routing import Router
from ledger.http.tokens import Token
from ledger.rng.server import RngServer

router = Router()


@router.endpoint("POST", "/rounds/{round_id}/close-betting", PLAY, responses.BettingClosed)
def close_betting(
    round_id: RoundId, key: IdempotencyKey, caller: Caller, casino: CasinoDep
) -> responses.BettingClosed:
    """Close betting: an alias of `POST /act` with the move the game declares
    closes betting (its `close_action`, `close_betting` in the shipped games)."""
    check_own_table(caller, casino, round_id)
    casino.close_betting(request_id=key, round_id=round_id)
    return responses.BettingClosed(closed=round_id)


@router.endpoint("POST", "/rounds/{round_id}/draw", PLAY, responses.Drawn)
def draw(
    round_id: RoundId, key: IdempotencyKey, caller: Caller, casino: CasinoDep, service: ServiceDep
) -> responses.Drawn:
    """An RNG table's dice draw, from its committed seed: an alias of `POST /act`.

    Its dice move, when the game draws dice next. A game that draws cards
    draws them through `POST /act`; a physical table's outcome comes in its
    device's report (`POST /outcome`)."""
    return responses.Drawn(drawn=draw_dice(round_id, key, caller, casino, service.rng))


@router.endpoint("POST", "/rounds/{round_id}/throw", PLAY, responses.Thrown, deprecated=True)
def throw_dice(
    round_id: RoundId, key: IdempotencyKey, caller: Caller, casino: CasinoDep, service: ServiceDep
) -> responses.Thrown:
    """Deprecated alias of `POST /rounds/{round_id}/draw`, answering `thrown`.

    The same command as `/draw` (a retry of one with the other's key gets the
    first answer back), kept for integrators who use it; `/draw` replaces it."""
    return responses.Thrown(thrown=draw_dice(round_id, key, caller, casino, service.rng))


def draw_dice(
    round_id: str, key: str, caller: Token, casino: Casino, rng: RngServer
) -> dict[str, Any]:
    """`/draw` and `/throw`: the round's next dice from its table's committed seed."""
    check_own_table(caller, casino, round_id)
    return casino.throw_dice(request_id=key, round_id=round_id, rng=rng)


@router.endpoint("POST", "/rounds/{round_id}/outcome", PLAY, responses.OutcomeRecorded)
def record_outcome(
    round_id: RoundId,
    body: models.Outcome,
    key: IdempotencyKey,
    caller: Caller,
    casino: CasinoDep,
    service: ServiceDep,
) -> responses.OutcomeRecorded:
    """A physical table's outcome, in its device's throw report: an alias of `POST /act`."""
    check_own_table(caller, casino, round_id)
    casino.record_outcome(
        request_id=key, round_id=round_id, outcome=body.outcome, source=body.source
    )
    return responses.OutcomeRecorded(recorded=round_id)


@router.endpoint("POST", "/rounds/{round_id}/faults", PLAY, responses.FaultRecorded)
def record_fault(
    round_id: RoundId,
    body: models.Fault,
    key: IdempotencyKey,
    caller: Caller,
    casino: CasinoDep,
    service: ServiceDep,
) -> responses.FaultRecorded:
    """A faulty physical throw, in its device's fault report: an alias of `POST /act`
    with the game's `fault_action` (`fault` in the shipped games)."""
    check_own_table(caller, casino, round_id)
    fault = casino.record_fault(
        request_id=key, round_id=round_id, reason=body.reason, source=body.source
    )
    return responses.FaultRecorded.model_validate({"fault": fault})


@router.endpoint("POST", "/rounds/{round_id}/act", PLAY, responses.ActionTaken)
def act(
    round_id: RoundId,
    body: models.Act,
    key: IdempotencyKey,
    caller: Caller,
    casino: CasinoDep,
    service: ServiceDep,
) -> responses.ActionTaken:
    """The game's next action (a draw, a card, a decision); on a physical table
    once betting is closed, in the dealer device's signed report. A decision
    the node records as its own command names the token that asked for it
    (`source.by`), as every play route does; a retry must come from the same token."""
    check_own_table(caller, casino, round_id)
    played = casino.act(
        request_id=key,
        round_id=round_id,
        actor=body.actor,
        action=body.action,
        args=body.args,
        source=body.source,
        rng=service.rng,
    )
    return responses.ActionTaken.model_validate({"played": played})


@router.endpoint("POST", "/rounds/{round_id}/settle", PLAY, responses.Settlement)
def settle(
    round_id: RoundId, key: IdempotencyKey, caller: Caller, casino: CasinoDep
) -> responses.Settlement:
    """Kept for integrators: nothing is left to settle (a draw or action settles).

    Refused (already settled, or not yet over); a retry of a settlement it
    answered before, under settlement API 1, gets every bet's return again."""
    check_own_table(caller, casino, round_id)
    results = casino.settle(request_id=key, round_id=round_id)
    return responses.Settlement.model_validate({"results": results})
