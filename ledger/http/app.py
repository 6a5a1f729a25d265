"""The routes: each parses its request, checks the caller's role, and makes one
call to the Python API (`Casino`, the projections' queries, the proofs).

Every write needs an `Idempotency-Key` header, which becomes the Python API's
request id: a retry gets the first result (and the same status) back and
records nothing; the same key with another command or other arguments is
refused (409), because the Python API keeps a SHA-256 of each request's
canonical command and arguments with its result.

The handlers are plain functions, which the server runs on its worker threads:
concurrent requests reach the Python API together, whose command runner
applies them in order and saves them in shared commits (group commit); each
response is sent once its command's commit is durable. Only the event
stream's generator runs on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Path, Query, Request, Security
from fastapi.exceptions import HTTPException
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPBearer
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel

from ledger.audit.proofs import consistency_from, inclusion_of, newest_checkpoint
from ledger.audit.recall import recall_round
from ledger.casino import MAX_REQUEST_ID
from ledger.crypto.checkpoint import Checkpoint
from ledger.domain.money import wallet
from ledger.errors import NotFoundError
from ledger.http import feed, models, responses, views
from ledger.http.bet_fast_path import BetFastPath
from ledger.http.errors import ERROR_STATUSES, WRITE_STATUSES, install_error_handlers
from ledger.http.middleware import DOCS_ASSETS, Authenticate, BodyLimit
from ledger.http.service import Service
from ledger.http.tokens import ApiRole, Token, TokenStore
from ledger.plugins.paytable import paytable
from ledger.projections import queries
from ledger.rng.server import RngServer
from ledger.store.application import LedgerApplication

__all__ = ["Service", "create_app", "openapi_document"]

FOLLOW_POLL = 0.2  # seconds between looks at the log's end for a following stream
MAX_BODY = 64 * 1024  # bytes: a bet or a signed report is well under 2 KiB
TITLE = "casino-ledger"
API_VERSION = "1"

DEVICE, CASHIER, OPERATOR, AUDITOR, ADMIN = (
    ApiRole.TABLE_DEVICE,
    ApiRole.CASHIER,
    ApiRole.OPERATOR,
    ApiRole.AUDITOR,
    ApiRole.ADMIN,
)
READERS = (AUDITOR, OPERATOR, CASHIER)
PLAY = (DEVICE, OPERATOR)  # a round's play: a device for its own table, or an operator

IdempotencyKey = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=MAX_REQUEST_ID,
        description="the request id: a retry with the same key returns the first result",
    ),
]
RoundId = Annotated[str, Path(min_length=1, max_length=64)]
Uuid = Annotated[str, Path(min_length=1, max_length=64)]


def error_responses(method: str) -> dict[int | str, dict[str, Any]]:
    """The error statuses a route may answer, each with the one error body."""
    statuses = {**ERROR_STATUSES, **(WRITE_STATUSES if method != "GET" else {})}
    return {
        status: {"model": models.ErrorBody, "description": text}
        for status, text in sorted(statuses.items())
    }


def token_of(request: Request, allowed: tuple[ApiRole, ...]) -> Token:
    token: Token = request.state.token  # set by Authenticate
    if token.role not in allowed:
        raise HTTPException(
            403,
            f"a {token.role.value} token may not do this (allowed: "
            f"{', '.join(r.value for r in allowed)})",
        )
    return token


def create_app(service: Service, *, max_body: int = MAX_BODY, fast_bets: bool = True) -> FastAPI:
    """The ASGI application over `service` (see `ledger serve`); `fast_bets` serves
    operators' bets through `ledger.http.bet_fast_path` (tests turn it off to
    compare it with the route)."""
    # /docs with Swagger UI's files from the fastapi-offline package: no CDN.
    api = FastAPIOffline(
        title=TITLE,
        version=API_VERSION,
        description=__doc__,
        docs_url="/docs",
        redoc_url=None,
        static_url=DOCS_ASSETS,
    )
    install_error_handlers(api)
    casino = service.casino
    bearer = HTTPBearer(auto_error=False)  # documents the scheme; Authenticate enforces it

    def route(
        method: str,
        path: str,
        roles: tuple[ApiRole, ...],
        response_model: type[BaseModel] | None = None,
        *,
        status: int = 200,
        success: dict[int | str, dict[str, Any]] | None = None,
        response_class: type[Response] = JSONResponse,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A route open to `roles`, its roles in the OpenAPI document (x-roles).

        `response_model` is its success body (`ledger.http.responses`), checked on
        every answer; naming `response_class` keeps FastAPI rendering that body
        with `JSONResponse` (json.dumps), byte for byte what the route always sent,
        not with pydantic's own JSON encoder."""

        def add(handler: Callable[..., Any]) -> Callable[..., Any]:
            async def check(request: Request) -> Token:
                return token_of(request, roles)

            api.add_api_route(
                f"/v1{path}",
                handler,
                methods=[method],
                status_code=status,
                dependencies=[Security(bearer), Depends(check)],
                openapi_extra={"x-roles": [r.value for r in roles]},
                summary=(handler.__doc__ or "").strip().splitlines()[0] or None,
                responses={**(success or {}), **error_responses(method)},
                response_model=response_model,
                response_class=response_class,
            )
            return handler

        return add

    def round_of_own_table(request: Request, round_id: str) -> None:
        """A table device may play only its own table's rounds."""
        token: Token = request.state.token
        if token.role is DEVICE:
            table_id = casino.table_of_round(round_id)
            if table_id != token.table:
                raise HTTPException(403, "this table device's token is for another table")

    # Accounts.
    @route("POST", "/accounts", (CASHIER,), responses.AccountOpened, status=201)
    def open_account(body: models.NewAccount, key: IdempotencyKey) -> dict[str, Any]:
        """Open a player's wallet."""
        return {
            "account_id": casino.open_account(
                request_id=key, owner=body.owner, currency=body.currency
            )
        }

    @route("GET", "/accounts/{account_id}", READERS, responses.Account)
    def get_account(account_id: Uuid) -> responses.Account:
        """An account's state, from its events."""
        return views.account(casino.account(account_id))

    @route("POST", "/accounts/{account_id}/deposits", (CASHIER,), responses.WalletBalance)
    def deposit(account_id: Uuid, body: models.Amount, key: IdempotencyKey) -> dict[str, Any]:
        """Deposit into a wallet (minor units): the balance after it."""
        return {
            "balance": casino.deposit(request_id=key, account_id=account_id, amount=body.amount)
        }

    @route("POST", "/accounts/{account_id}/withdrawals", (CASHIER,), responses.WalletBalance)
    def withdraw(account_id: Uuid, body: models.Amount, key: IdempotencyKey) -> dict[str, Any]:
        """Withdraw from a wallet (minor units): the balance after it."""
        return {
            "balance": casino.withdraw(request_id=key, account_id=account_id, amount=body.amount)
        }

    @route("POST", "/accounts/{account_id}/close", (CASHIER,), responses.AccountClosed)
    def close_account(account_id: Uuid, body: models.Reason, key: IdempotencyKey) -> dict[str, Any]:
        """Close a wallet."""
        casino.close_account(request_id=key, account_id=account_id, reason=body.reason)
        return {"closed": account_id}

    # Tables and their seeds.
    @route("POST", "/tables", (OPERATOR,), responses.TableOpened, status=201)
    def open_table(body: models.NewTable, key: IdempotencyKey) -> dict[str, Any]:
        """Open a table (and its house account)."""
        table_id = casino.open_table(
            request_id=key,
            name=body.name,
            variant=body.variant,
            kind=body.kind,
            currency=body.currency,
            limits=body.limits.model_dump(),  # type: ignore[arg-type]
        )
        return {"table_id": table_id}

    @route("GET", "/tables/{table_id}", (*READERS, DEVICE), responses.Table)
    def get_table(request: Request, table_id: Uuid) -> responses.Table:
        """A table's state, from its events."""
        token: Token = request.state.token
        if token.role is DEVICE and token.table != str(casino.table(table_id).id):
            raise HTTPException(403, "this table device's token is for another table")
        return views.table(casino.table(table_id))

    @route("POST", "/tables/{table_id}/seeds", (OPERATOR,), responses.SeedCommitted, status=201)
    def commit_seed(table_id: Uuid, key: IdempotencyKey) -> dict[str, Any]:
        """Commit an RNG table to a new secret seed (its hash, signed)."""
        return {"seed_id": casino.commit_seed(request_id=key, table_id=table_id, rng=service.rng)}

    @route("POST", "/tables/{table_id}/seeds/retire", (OPERATOR,), responses.SeedRetired)
    def retire_seed(table_id: Uuid, key: IdempotencyKey) -> dict[str, Any]:
        """Reveal the table's seed in use, so anyone can recompute its draws."""
        return {"seed_id": casino.retire_seed(request_id=key, table_id=table_id, rng=service.rng)}

    # Rounds.
    @route("POST", "/rounds", (OPERATOR,), responses.RoundOpened, status=201)
    def open_round(body: models.NewRound, key: IdempotencyKey) -> dict[str, Any]:
        """Open a round at a table."""
        round_id = casino.open_round(request_id=key, table_id=body.table_id, dealer=body.dealer)
        return {"round_id": round_id}

    @route("GET", "/rounds/{round_id}", (*READERS, DEVICE), responses.Round)
    def get_round(request: Request, round_id: RoundId) -> responses.Round:
        """A round's state and log, from its events."""
        round_of_own_table(request, round_id)
        return views.round_state(casino.round(round_id), casino.moves(round_id))

    @route("GET", "/rounds", READERS, responses.Rounds)
    def list_rounds(
        open_only: Annotated[bool, Query(alias="open")] = False,
    ) -> responses.Rounds:
        """Round summaries (the rounds projection, caught up first)."""
        service.catch_up()
        return views.round_summaries(queries.rounds(service.app, open_only=open_only))

    @route("POST", "/rounds/{round_id}/bets", PLAY, responses.BetPlaced, status=201)
    def place_bet(
        request: Request, round_id: RoundId, body: models.NewBet, key: IdempotencyKey
    ) -> dict[str, Any]:
        """Place a bet from a wallet (the stake leaves it now)."""
        round_of_own_table(request, round_id)
        bet_id = casino.place_bet(
            request_id=key,
            round_id=round_id,
            account_id=body.account_id,
            bet=body.bet,
            stake=body.stake,
        )
        return {"bet_id": bet_id}

    @route("POST", "/rounds/{round_id}/bets/{bet_id}/withdraw", PLAY, responses.BetWithdrawn)
    def withdraw_bet(
        request: Request,
        round_id: RoundId,
        bet_id: Uuid,
        body: models.BetWithdrawal,
        key: IdempotencyKey,
    ) -> dict[str, Any]:
        """Withdraw a bet while betting is open (the stake goes back)."""
        round_of_own_table(request, round_id)
        casino.withdraw_bet(
            request_id=key, round_id=round_id, account_id=body.account_id, bet_id=bet_id
        )
        return {"withdrawn": bet_id}

    @route("POST", "/rounds/{round_id}/close-betting", PLAY, responses.BettingClosed)
    def close_betting(request: Request, round_id: RoundId, key: IdempotencyKey) -> dict[str, Any]:
        """Close betting."""
        round_of_own_table(request, round_id)
        casino.close_betting(request_id=key, round_id=round_id)
        return {"closed": round_id}

    @route("POST", "/rounds/{round_id}/throw", PLAY, responses.Thrown)
    def throw_dice(request: Request, round_id: RoundId, key: IdempotencyKey) -> dict[str, Any]:
        """An RNG table's throw, from its committed seed."""
        round_of_own_table(request, round_id)
        return {"thrown": casino.throw_dice(request_id=key, round_id=round_id, rng=service.rng)}

    @route("POST", "/rounds/{round_id}/outcome", PLAY, responses.OutcomeRecorded)
    def record_outcome(
        request: Request, round_id: RoundId, body: models.Outcome, key: IdempotencyKey
    ) -> dict[str, Any]:
        """A physical table's outcome, in its dealer device's signed report."""
        round_of_own_table(request, round_id)
        casino.record_outcome(
            request_id=key, round_id=round_id, outcome=body.outcome, source=body.source
        )
        return {"recorded": round_id}

    @route("POST", "/rounds/{round_id}/faults", PLAY, responses.FaultRecorded)
    def record_fault(
        request: Request, round_id: RoundId, body: models.Fault, key: IdempotencyKey
    ) -> dict[str, Any]:
        """A faulty physical throw, in its dealer device's signed report."""
        round_of_own_table(request, round_id)
        return {
            "fault": casino.record_fault(
                request_id=key, round_id=round_id, reason=body.reason, source=body.source
            )
        }

    @route("POST", "/rounds/{round_id}/act", PLAY, responses.ActionTaken)
    def act(
        request: Request, round_id: RoundId, body: models.Act, key: IdempotencyKey
    ) -> dict[str, Any]:
        """The game's next action (a draw, a card, a decision); on a physical table
        once betting is closed, in the dealer device's signed report. A decision
        the node records as its own command names the token that asked for it
        (`source.by`); a retry must come from the same token."""
        round_of_own_table(request, round_id)
        token: Token = request.state.token
        return {
            "played": casino.act(
                request_id=key,
                round_id=round_id,
                actor=body.actor,
                action=body.action,
                args=body.args,
                source=body.source,
                rng=service.rng,
                attested_by={"token": token.token_id, "role": token.role.value},
            )
        }

    @route("POST", "/rounds/{round_id}/settle", PLAY, responses.Settlement)
    def settle(request: Request, round_id: RoundId, key: IdempotencyKey) -> dict[str, Any]:
        """Settle a decided round: every bet's return."""
        round_of_own_table(request, round_id)
        return {"results": casino.settle(request_id=key, round_id=round_id)}

    @route("POST", "/rounds/{round_id}/void", (OPERATOR,), responses.Voided)
    def void_round(
        round_id: RoundId, body: models.OperatorReason, key: IdempotencyKey
    ) -> dict[str, Any]:
        """Void a round (every stake back), signed by the operator."""
        returns = casino.void_round(
            request_id=key,
            round_id=round_id,
            reason=body.reason,
            operator=service.operator(body.operator),
        )
        return {"results": returns}

    @route("POST", "/rounds/{round_id}/resume", (OPERATOR,), responses.Resumed)
    def resume_round(
        round_id: RoundId, body: models.OperatorReason, key: IdempotencyKey
    ) -> dict[str, Any]:
        """Resume an interrupted round, signed by the operator."""
        casino.resume_round(
            request_id=key,
            round_id=round_id,
            reason=body.reason,
            operator=service.operator(body.operator),
        )
        return {"resumed": round_id}

    @route("POST", "/rounds/{round_id}/corrections", (OPERATOR,), responses.Settlement)
    def correct(round_id: RoundId, body: models.Correction, key: IdempotencyKey) -> dict[str, Any]:
        """Correct a settled physical round's outcome, signed by the operator."""
        results = casino.correct(
            request_id=key,
            round_id=round_id,
            outcome=body.outcome,
            reason=body.reason,
            operator=service.operator(body.operator),
        )
        return {"results": results}

    @route("POST", "/rounds/{round_id}/step-corrections", (OPERATOR,), responses.Settlement)
    def correct_step(
        round_id: RoundId, body: models.StepCorrection, key: IdempotencyKey
    ) -> dict[str, Any]:
        """Correct what a physical table's device misread at one action, signed."""
        results = casino.correct_step(
            request_id=key,
            round_id=round_id,
            step=body.step,
            drawn=body.drawn,
            reason=body.reason,
            operator=service.operator(body.operator),
        )
        return {"results": results}

    @route("POST", "/rounds/{round_id}/fact-to-sign", (OPERATOR,), responses.OperatorFact)
    def fact_to_sign(round_id: RoundId, body: models.FactToSign) -> responses.OperatorFact:
        """The exact bytes an operator signs (Ed25519) for a void, resume or correction
        with these arguments; nothing is recorded. Send the signature, base64, with
        the command itself."""
        message = casino.fact_to_sign(
            command=body.command,
            round_id=round_id,
            key_id=body.key_id,
            reason=body.reason,
            outcome=body.outcome,
            step=body.step,
            drawn=body.drawn,
        )
        return views.operator_fact(body.key_id, message)

    # Queries.
    @route("GET", "/balances", READERS, responses.Balances)
    def balances(
        account: Annotated[str | None, Query(max_length=100)] = None,
    ) -> responses.Balances:
        """Balances from the postings (the balances projection, caught up first):
        every ledger account, or one (an account id, or a name like cashier:EUR)."""
        service.catch_up()
        if account is None:
            rows = queries.balances(service.app)
        else:
            rows = queries.balances(service.app, account) or queries.balances(
                service.app, wallet(account)
            )
            if not rows:
                raise NotFoundError(f"no ledger account {account!r}")
        return views.balances(rows, queries.currency_totals(service.app))

    @route("GET", "/rounds/{round_id}/recall", READERS, responses.Recall)
    def recall(round_id: RoundId) -> responses.Recall:
        """Game recall: the round replayed step by step from its signed events, each
        event's envelope, signature and chain checked as it is read (`ledger recall`);
        `verified` is false, with the problems named, when a check failed."""
        return views.recall(
            recall_round(service.app, service.app.current_keyring(), service.games, round_id)
        )

    @route("GET", "/checkpoints/newest", READERS, responses.NewestCheckpoint)
    def newest() -> responses.NewestCheckpoint:
        """The newest stored checkpoint whose signature verifies."""
        found = newest_checkpoint(service.app, service.app.current_keyring())
        if found is None:
            raise NotFoundError("no checkpoint yet")
        return views.newest_checkpoint(found)

    @route("GET", "/proofs/inclusion", READERS, responses.InclusionProof)
    def inclusion(
        stream: Annotated[str, Query(min_length=1, max_length=64)],
        version: Annotated[int, Query(ge=1, le=2**63 - 1)],
    ) -> responses.InclusionProof:
        """An event's inclusion proof under the newest checkpoint (checkable offline)."""
        return views.inclusion_proof(
            inclusion_of(service.app, stream, version, service.app.current_keyring())
        )

    @route("POST", "/proofs/consistency", READERS, responses.ConsistencyProof)
    def consistency(body: models.TrustedCheckpoint) -> responses.ConsistencyProof:
        """Proof that the log only grew since a checkpoint kept from earlier."""
        trusted = Checkpoint.from_note(body.checkpoint)
        return views.consistency_proof(
            consistency_from(service.app, trusted, service.app.current_keyring())
        )

    @route("GET", "/games", READERS, responses.Games)
    def games() -> responses.Games:
        """The installed games."""
        return views.games(service.games)

    @route("GET", "/games/{game_id}/paytable", READERS, responses.Paytable)
    def get_paytable(game_id: Annotated[str, Path(max_length=100)]) -> responses.Paytable:
        """A game's payouts and exact theoretical returns (as fractions)."""
        return views.paytable(game_id, paytable(casino.variant(game_id)))

    # The event feed.
    @route("GET", "/events", READERS, models.FeedPage)
    def events(
        after: Annotated[int | None, Query(ge=0, le=2**62)] = None,
        limit: Annotated[int, Query(ge=1, le=feed.MAX_LIMIT)] = 100,
    ) -> models.FeedPage:
        """Events after log position `after` (from the start without it), in the export
        bundle's record format, each with its Merkle leaf index; `next_after` is the
        position to ask from next."""
        return views.feed_page(feed.events_after(service.app, after, limit), after)

    @route(
        "GET",
        "/events/stream",
        READERS,
        success={
            200: {
                "description": "JSON Lines: one FeedRecord a line",
                "content": {
                    "application/x-ndjson": {"schema": {"$ref": "#/components/schemas/FeedRecord"}}
                },
            }
        },
        response_class=StreamingResponse,
    )
    async def events_stream(
        after: Annotated[int | None, Query(ge=0, le=2**62)] = None,
        limit: Annotated[int, Query(ge=1, le=10**9)] = 10**9,
        follow: bool = False,
    ) -> StreamingResponse:
        """The same records as JSON Lines, one event a line, up to `limit`; with
        `follow`, waiting for new events until the client goes away."""
        feed.check_position(service.app, after)  # a bad position is a 400, not a cut stream

        async def lines() -> AsyncIterator[bytes]:
            position, sent = after, 0
            while sent < limit:
                got = 0
                for line in feed.stream_lines(service.app, position, limit - sent):
                    got += 1
                    yield line
                if got:
                    sent += got
                    position = (position if position is not None else -1) + got
                elif not follow:
                    return
                else:
                    await asyncio.sleep(FOLLOW_POLL)

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    # Tokens (created on the command line only: the secret is shown once, there).
    @route("GET", "/tokens", (ADMIN,), responses.Tokens)
    def list_tokens() -> responses.Tokens:
        """Every token's id, role, table and dates (never a secret or a hash)."""
        return views.tokens(service.tokens.list())

    @route("POST", "/tokens/{token_id}/revoke", (ADMIN,), responses.TokenInfo)
    def revoke_token(
        token_id: Annotated[str, Path(max_length=64)], key: IdempotencyKey
    ) -> responses.TokenInfo:
        """Revoke a token (at once, on every worker); revoking twice changes nothing."""
        return views.token(service.tokens.revoke(token_id))

    if fast_bets:
        api.add_middleware(BetFastPath, casino=casino)  # inside: after the token and the size
    api.add_middleware(BodyLimit, limit=max_body)
    api.add_middleware(Authenticate, tokens=service.tokens)
    return api


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document, which depends on the routes only (no store is opened)."""
    from pathlib import Path
    from typing import cast

    idle = Service(cast(LedgerApplication, None), {}, RngServer(), TokenStore(Path(".")))
    document: dict[str, Any] = create_app(idle).openapi()
    return document
