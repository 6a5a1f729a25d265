"""The views: what the routes read (an aggregate, a projection's rows, a proof, a
recall, a token), as the response model the route answers with
(`ledger.http.responses`, and the feed's `models.FeedPage`).

Each view builds the model from the same JSON the route has always sent, so the
model's strict check applies here as it does on every answer."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ledger.audit.proofs import Bundle
from ledger.audit.recall import Recall
from ledger.casino import BetOutcome
from ledger.crypto.checkpoint import Checkpoint
from ledger.domain.account import Account
from ledger.domain.game_table import GameTable
from ledger.domain.round import Round
from ledger.domain.round_records import SETTLED
from ledger.http import models, responses
from ledger.http.errors import status_of
from ledger.http.tokens import ApiRole, Token
from ledger.plugins.paytable import PaytableLine
from ledger.plugins.registry import LoadedGame
from ledger.privacy.personal import PersonalData
from ledger.projections.pages import AccountSummary, Page, TableSummary
from ledger.projections.queries import Balance, RoundSummary


def account(found: Account, personal: PersonalData) -> responses.Account:
    return responses.Account.model_validate(
        {
            "account_id": str(found.id),
            "kind": found.kind,
            "owner": personal.reveal("owner", found.owner),
            "currency": found.currency,
            "balance": found.balance,
            "closed": found.closed,
        }
    )


def table(found: GameTable) -> responses.Table:
    return responses.Table.model_validate(
        {
            "table_id": str(found.id),
            "name": found.name,
            "game": found.game,
            "variant": found.game,  # alias
            "kind": found.kind,
            "currency": found.currency,
            "limits": dict(found.limits),
            "house_account": str(found.house_account),
            "active_seed": found.active_seed,
            "rounds_in_play": found.rounds_in_play,
        }
    )


def round_state(
    found: Round, moves: dict[str, list[str]], personal: PersonalData
) -> responses.Round:
    """A round's state and log; `moves`: who may do what next (`Casino.moves`)."""
    return responses.Round.model_validate(
        {
            "round_id": str(found.id),
            "table_id": str(found.table_id),
            "game": found.game,
            "game_version": found.game_version,
            # The names before issue 39 and issue 20, kept for integrators (the same values).
            "variant": found.game,  # alias
            "variant_version": found.game_version,  # alias
            "rules_hash": found.rules_hash,
            "settlement_api": found.settlement_api,
            "currency": found.currency,
            "limits": dict(found.limits),
            "dealer": personal.reveal("dealer", found.dealer),
            "status": found.status,
            "seed_id": found.seed_id,
            "draws": found.draws,
            "dice_seed": found.seed_id,  # alias
            "throws": found.draws,  # alias
            "actions": found.actions,
            "faults": found.faults,
            "bets": {
                bet_id: {**record, "asked_by": _asked_by(found.bets_asked_by.get(bet_id))}
                for bet_id, record in found.bets.items()
            },
            "outcome": outcome(found),
            "results": found.results,
            "dealt": found.dealt,
            "log": found.log,
            "moves": moves,
        }
    )


def _asked_by(by: Mapping[str, str] | None) -> dict[str, Any] | None:
    """Who asked, as recorded ({"token", "role"}), its role as the API names it."""
    return None if by is None else {"token": by["token"], "role": ApiRole(by["role"])}


def outcome(found: Round) -> dict[str, Any] | None:
    """The round's outcome: under settlement API 1 as recorded; under API 2, once
    the round is settled, what it drew: the cards dealt in order (`{"cards":
    [...]}`, a card game's `dealt`) or else every die drawn in order (`{"dice":
    [...]}`), as corrected. None before it settles, and for a round drawing nothing."""
    if found.settlement_api < 2 or found.outcome is not None:
        return found.outcome
    if found.status != SETTLED:
        return None
    if found.dealt:
        return {"cards": list(found.dealt)}
    dice = [value for entry in found.log for value in entry.get("action", {}).get("drawn", [])]
    return {"dice": dice} if dice else None


def round_summaries(
    rows: Iterable[RoundSummary], personal: PersonalData, next_cursor: str | None
) -> responses.Rounds:
    return responses.Rounds.model_validate(
        {
            "rounds": [
                {
                    **dataclasses.asdict(r),
                    "dealer": personal.reveal("dealer", r.dealer),
                    **_older_names(r),
                }
                for r in rows
            ],
            "next_cursor": next_cursor,
        }
    )


def tables(page: Page[TableSummary], next_cursor: str | None) -> responses.Tables:
    return responses.Tables.model_validate(
        {"tables": [dataclasses.asdict(r) for r in page.rows], "next_cursor": next_cursor}
    )


def accounts(
    page: Page[AccountSummary], next_cursor: str | None, personal: PersonalData
) -> responses.Accounts:
    listed = [
        {**dataclasses.asdict(r), "owner": personal.reveal("owner", r.owner)} for r in page.rows
    ]
    return responses.Accounts.model_validate({"accounts": listed, "next_cursor": next_cursor})


def _older_names(row: RoundSummary) -> dict[str, str]:
    """A summary's fields under the names before issue 39 (the same values)."""
    return {"variant": row.game, "variant_version": row.game_version}  # alias


def balances(rows: Iterable[Balance], totals: dict[str, int]) -> responses.Balances:
    return responses.Balances.model_validate(
        {"balances": [dataclasses.asdict(r) for r in rows], "totals": totals}
    )


def operator_fact(key_id: str, message: bytes) -> responses.OperatorFact:
    return responses.OperatorFact(key_id=key_id, message=base64.b64encode(message).decode())


def recall(replayed: Recall) -> responses.Recall:
    return responses.Recall.model_validate(replayed.to_json())


def newest_checkpoint(found: Checkpoint) -> responses.NewestCheckpoint:
    return responses.NewestCheckpoint(size=found.size, note=found.to_note())


def checkpoints(found: list[Checkpoint]) -> responses.Checkpoints:
    return responses.Checkpoints(
        checkpoints=[newest_checkpoint(c) for c in found],
        next_after=found[-1].size if found else None,
    )


def inclusion_proof(bundle: Bundle) -> responses.InclusionProof:
    return responses.InclusionProof.model_validate(bundle)


def consistency_proof(bundle: Bundle) -> responses.ConsistencyProof:
    return responses.ConsistencyProof.model_validate(bundle)


def games(installed: Mapping[str, LoadedGame]) -> responses.Games:
    return responses.Games.model_validate(
        {"games": [_game(g) for g in sorted(installed.values(), key=lambda g: g.id)]}
    )


def game_rules(game: LoadedGame) -> responses.GameRules:
    return responses.GameRules.model_validate({**_game(game), "rules": dict(game.rules)})


def _game(g: LoadedGame) -> dict[str, Any]:
    return {
        "id": g.id,
        "plugin": g.plugin,
        "version": g.version,
        "rules_hash": g.rules_hash,
        "settlement_api": g.settlement_api,
        "bets": list(g.bets),
        "capabilities": sorted(g.capabilities),
    }


def paytable(game_id: str, lines: Iterable[PaytableLine]) -> responses.Paytable:
    return responses.Paytable.model_validate(
        {
            "game": game_id,
            "lines": [
                {
                    "bet": line.bet,
                    "pays": line.pays,
                    "return": {
                        "numerator": line.theoretical_return.numerator,
                        "denominator": line.theoretical_return.denominator,
                    },
                }
                for line in lines
            ],
        }
    )


def feed_page(records: list[dict[str, Any]], after: int | None) -> models.FeedPage:
    """A page of the event feed; `next_after` is where the next page starts."""
    return models.FeedPage.model_validate(
        {"events": records, "next_after": records[-1]["position"] if records else after}
    )


def token(found: Token) -> responses.TokenInfo:
    """A token as listed: never its secret or its hash."""
    return responses.TokenInfo.model_validate(found.public())


def tokens(found: Iterable[Token]) -> responses.Tokens:
    return responses.Tokens.model_validate({"tokens": [t.public() for t in found]})


def bet_batch(outcomes: list[BetOutcome]) -> responses.BetBatchPlaced:
    answers = [
        responses.BatchBetAnswer(
            request_id=o.request_id,
            status=201 if o.error is None else status_of(o.error),
            bet_id=o.bet_id,
            error=None if o.error is None else type(o.error).__name__,
            detail=None if o.error is None else str(o.error),
            code=None if o.error is None else o.error.code,
            param=None if o.error is None else o.error.param,
        )
        for o in outcomes
    ]
    placed = sum(o.error is None for o in outcomes)
    return responses.BetBatchPlaced(placed=placed, refused=len(outcomes) - placed, bets=answers)
