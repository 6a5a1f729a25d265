"""A round's bets: placed from a wallet, withdrawn while betting is open.

An operator's bets are mostly answered before they reach this router, by
`ledger.http.bet_fast_path`, exactly as `place_bet` answers them."""

from __future__ import annotations

from ledger.casino import BetRequest
from ledger.http import models, responses, views
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


@router.endpoint("POST", "/rounds/{round_id}/bets/batch", PLAY, responses.BetBatchPlaced)
def place_bet_batch(
    round_id: RoundId, body: models.NewBetBatch, caller: Caller, casino: CasinoDep
) -> responses.BetBatchPlaced:
    """Place up to 1,000 bets on the round, each with its own request id.

    Each bet is accepted or refused on its own, with the status and error the
    single-bet route would answer it with (one refused bet spoils no other);
    the answer comes once every placed bet is committed. A retried batch
    answers each bet as the first time (no Idempotency-Key: each bet's
    `request_id` is its own). A batch malformed as a whole (not JSON, more
    than 1,000 bets, over the size limit) is refused whole."""
    check_own_table(caller, casino, round_id)
    bets = [BetRequest(b.request_id, b.account_id, b.bet, b.stake) for b in body.bets]
    return views.bet_batch(casino.place_bets(round_id=round_id, bets=bets))


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
