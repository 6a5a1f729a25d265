"""A round's bets: placed from a wallet, withdrawn while betting is open.

An operator's bets are mostly answered before they reach this router, by
`ledger.http.bet_fast_path`, exactly as `place_bet` answers them."""

from __future__ import annotations

from ledger.http import models, responses
from ledger.http.dependencies import (
    PLAY,
    Caller,
    CasinoDep,
    IdempotencyKey,
    RoundId,
    Uuid,
    check_own_table,
)
from ledger.http.routing import Router

router = Router()


@router.endpoint("POST", "/rounds/{round_id}/bets", PLAY, responses.BetPlaced, status=201)
def place_bet(
    round_id: RoundId,
    body: models.NewBet,
    key: IdempotencyKey,
    caller: Caller,
    casino: CasinoDep,
) -> responses.BetPlaced:
    """Place a bet from a wallet (the stake leaves it now)."""
    check_own_table(caller, casino, round_id)
    bet_id = casino.place_bet(
        request_id=key,
        round_id=round_id,
        account_id=body.account_id,
        bet=body.bet,
        stake=body.stake,
    )
    return responses.BetPlaced(bet_id=bet_id)


@router.endpoint("POST", "/rounds/{round_id}/bets/{bet_id}/withdraw", PLAY, responses.BetWithdrawn)
def withdraw_bet(
    round_id: RoundId,
    bet_id: Uuid,
    body: models.BetWithdrawal,
    key: IdempotencyKey,
    caller: Caller,
    casino: CasinoDep,
) -> responses.BetWithdrawn:
    """Withdraw a bet while betting is open (the stake goes back)."""
    check_own_table(caller, casino, round_id)
    casino.withdraw_bet(
        request_id=key, round_id=round_id, account_id=body.account_id, bet_id=bet_id
    )
    return responses.BetWithdrawn(withdrawn=bet_id)
