"""Tables, rounds and bets (each a command body).

A bet costs the same whatever its round already holds: the round is the
working set's live one (no copy), betting being open is what the game's last
step recorded on it, the game checks the bet against a read-only view of the
bets placed (no copy), and each player's stake in the round is a running total.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from eventsourcing.domain import Aggregate

from ledger.casino.context import Context, placed_view
from ledger.casino.legality import check_betting
from ledger.casino.runner import Body, Work
from ledger.domain.account import HOUSE, PLAYER, Account
from ledger.domain.game_table import GameTable, check_kind
from ledger.domain.money import check_currency
from ledger.domain.names import check_name
from ledger.domain.round import Round
from ledger.domain.round_records import Limits, check_limits
from ledger.errors import InvalidCommandError


def open_table(
    context: Context, name: str, game: str, kind: str, currency: str, limits: Limits
) -> Body:
    def body(work: Work) -> tuple[str, list[Aggregate]]:
        context.game(game)
        table_kind = check_kind(kind)
        code = check_currency(currency)  # one spelling for the table and its house
        house = Account.open(
            HOUSE, f"house of table {check_name(name, 'table name', limit=100, param='name')}", code
        )
        table = GameTable(
            name=name,
            game=game,
            currency=code,
            limits=check_limits(limits),
            house_account=house.id,
            kind=table_kind,
        )
        return str(table.id), [house, table]

    return body


def open_round(context: Context, table_id: str, dealer: str) -> Body:
    def body(work: Work) -> tuple[str, list[Aggregate]]:
        table = work.table(table_id)
        game = context.game(table.game)
        table.check_rng_round()
        sealed = context.personal.seal_dealer(dealer)  # after every refusal: no key for nothing
        game_round = Round(
            table_id=table.id,
            game=game.id,
            game_version=game.version,
            rules_hash=game.rules_hash,
            settlement_api=game.settlement_api,
            code_hash=game.code_hash,
            currency=table.currency,
            limits=table.limits,
            house_account=table.house_account,
            dealer=sealed,
            seed_id=table.active_seed,
        )
        if table.active_seed is None:
            return str(game_round.id), [game_round]
        table.round_opened()
        return str(game_round.id), [game_round, table]

    return body


def place_bet(
    context: Context,
    request_id: str,
    round_id: str,
    account_id: str,
    bet: dict[str, Any],
    stake: int,
) -> Body:
    def body(work: Work) -> tuple[str, list[Aggregate]]:
        game_round = work.round(round_id)
        account = work.account(account_id)
        if account.kind != PLAYER:
            raise InvalidCommandError(
                f"account {account.id} is not a player's wallet",
                code="not_a_player_account",
                param="account_id",
            )
        account.check_currency(game_round.currency)
        game = context.game_of(game_round)
        check_betting(context, game, game_round, "place a bet")
        canonical_bet = game.validate_bet(bet, placed_view(game_round))
        bet_id = str(uuid4())
        # Every check before anything changes: a refused bet leaves both as they were.
        amount = game_round.check_bet(bet_id, str(account.id), stake)
        account.check_debit(amount)
        game_round.place_bet(
            bet_id,
            str(account.id),
            canonical_bet,
            amount,
            request_id,
            work.fingerprint,
            work.asked_by,
        )
        account.debit(amount, game_round.id, f"stake {bet_id}")
        return bet_id, [game_round, account]

    return body


def withdraw_bet(
    context: Context, request_id: str, round_id: str, account_id: str, bet_id: str
) -> Body:
    def body(work: Work) -> tuple[None, list[Aggregate]]:
        game_round = work.round(round_id)
        check_betting(context, context.game_of(game_round), game_round, "withdraw a bet")
        account = work.account(account_id)
        record = game_round.withdraw_bet(bet_id, str(account.id), request_id)
        account.credit(record["stake"], game_round.id, f"withdrawn {bet_id}")
        return None, [game_round, account]

    return body
