"""Success bodies: what each route answers, as the OpenAPI document declares it.

Each model describes exactly the JSON the route has always sent: its fields in
the order the route builds them (the order they are sent in), every field
required, nulls sent as nulls. A game's own data (its rules, a round's state,
an outcome, a bet, an action's arguments) is free-form JSON the game defines,
so it stays `dict[str, Any]`.

The models are closed and strict: an answer the route builds that its model
does not describe (a new key, an int sent as a bool) fails the request (500,
which the contract tests catch) instead of being silently dropped or coerced.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ledger.http.models import DEPRECATED
from ledger.http.tokens import ApiRole

RoundStatus = Literal["betting", "closed", "decided", "settled", "voided"]

# Personal data (docs/privacy.md): sealed in the log, shown to this node's callers.
PERSONAL = (
    "personal data, sealed in the log under its data subject's key and shown here in clear; "
    "`[erased]` once erased (`ledger erase`), `[sealed]` where this node holds no key for it"
)


def next_cursor() -> Any:
    """Every list's next page (docs/http.md, "Lists")."""
    return Field(
        description="pass it as `cursor`, with the same filters, for the next page; null: this "
        "page is the last"
    )


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# Accounts.
class AccountOpened(Answer):
    account_id: str = Field(description="the new wallet's id (a UUID)")


class Account(Answer):
    account_id: str
    kind: Literal["player", "house"] = Field(description="a player's wallet or a table's house")
    owner: str = Field(description=PERSONAL)
    currency: str = Field(description="ISO 4217 code")
    balance: int = Field(description="minor units")
    closed: bool


class AccountSummary(Answer):
    """A row of the accounts' read model; its times are ISO 8601, UTC."""

    account_id: str
    kind: Literal["player", "house"]
    owner: str = Field(description=PERSONAL)
    currency: str = Field(description="ISO 4217 code")
    status: Literal["open", "closed"]
    balance: int = Field(description="minor units")
    deposits: int = Field(description="paid in by the cashier, minor units")
    withdrawals: int = Field(description="paid out to the cashier, minor units")
    staked: int = Field(description="bets placed less bets withdrawn, minor units")
    returned: int = Field(description="paid back by settlements and voids, minor units")
    opened_at: str
    closed_at: str | None


class Accounts(Answer):
    accounts: list[AccountSummary] = Field(description="oldest first (by opening time, then id)")
    next_cursor: str | None = next_cursor()


class WalletBalance(Answer):
    balance: int = Field(description="the wallet's balance after the command, minor units")


class AccountClosed(Answer):
    closed: str = Field(description="the closed account's id")


# Tables and their seeds.
class TableOpened(Answer):
    table_id: str = Field(description="the new table's id (a UUID)")


class TableLimits(Answer):
    min_bet: int = Field(description="minor units")
    max_bet: int = Field(description="minor units")
    max_round: int = Field(description="one player's total stake in one round, minor units")


class Table(Answer):
    table_id: str
    name: str
    game: str = Field(description="the game's id (GET /v1/games)")
    variant: str = Field(  # alias
        description="deprecated alias of `game` (the same value), kept for integrators",
        json_schema_extra=DEPRECATED,
    )
    kind: Literal["rng", "physical"] | None = Field(
        description="rng: draws from its committed seed; physical: its dealer device reports "
        "every outcome; null for a table opened before release 0.4 (no recorded kind)"
    )
    currency: str
    limits: TableLimits
    house_account: str = Field(description="the table's house account id")
    active_seed: str | None = Field(description="the seed in use (an RNG table), else null")
    rounds_in_play: int = Field(description="rounds opened and not yet settled or voided")


class TableSummary(Answer):
    """A row of the tables' read model (GET /v1/tables/{table_id} has the rest)."""

    table_id: str
    name: str
    game: str = Field(description="the game's id (GET /v1/games)")
    currency: str
    house_account: str = Field(description="the table's house account id")
    opened_at: str = Field(description="ISO 8601, UTC")


class Tables(Answer):
    tables: list[TableSummary] = Field(description="oldest first (by opening time, then id)")
    next_cursor: str | None = next_cursor()


class SeedCommitted(Answer):
    seed_id: str = Field(description="the committed seed's id (its SHA-256 is recorded)")


class SeedRetired(Answer):
    seed_id: str = Field(description="the revealed seed's id")


# Rounds.
class RoundOpened(Answer):
    round_id: str


class AskedBy(Answer):
    """The authenticated session that asked for a command (docs/export.md, "Requests")."""

    token: str = Field(description="the API token's id (never its secret)")
    role: ApiRole


class RoundBet(Answer):
    account_id: str
    bet: dict[str, Any] = Field(description="the bet as the game validated it (game-defined)")
    stake: int = Field(description="minor units")
    asked_by: AskedBy | None = Field(
        description="who asked for the bet, as its signed event records it; null: the node's "
        "own command (the CLI, the Python API), or a bet recorded before the node recorded it"
    )


class BetResult(Answer):
    bet_id: str
    account_id: str
    stake: int = Field(description="minor units")
    returned: int = Field(
        description="paid back to the wallet, minor units: 0 (lost), the stake (push or void), "
        "stake + win"
    )


class Round(Answer):
    round_id: str
    table_id: str
    game: str = Field(description="the game's id")
    game_version: str = Field(description="the game plugin's version (information)")
    variant: str = Field(  # alias
        description="deprecated alias of `game` (the same value), kept for integrators",
        json_schema_extra=DEPRECATED,
    )
    variant_version: str = Field(  # alias
        description="deprecated alias of `game_version` (the same value), kept for integrators",
        json_schema_extra=DEPRECATED,
    )
    rules_hash: str = Field(description="the game's rules the round is pinned to")
    settlement_api: int = Field(
        description="1: settled at once on its outcome; 2: played and settled action by action"
    )
    currency: str
    limits: TableLimits = Field(description="the table's limits as the round opened")
    dealer: str = Field(description=PERSONAL)
    status: RoundStatus
    seed_id: str | None = Field(
        description="the table's committed seed its dice or cards are drawn from; null at a "
        "physical table"
    )
    draws: int = Field(
        description="draws so far, faulty or not (dice drawn, outcomes a device reported with "
        "POST /outcome, faults): the counter the next one is drawn or signed at; a card game's "
        "cards are in `dealt` instead"
    )
    dice_seed: str | None = Field(  # alias
        description="deprecated alias of `seed_id` (the same value), kept for integrators",
        json_schema_extra=DEPRECATED,
    )
    throws: int = Field(  # alias
        description="deprecated alias of `draws` (the same value), kept for integrators",
        json_schema_extra=DEPRECATED,
    )
    actions: int = Field(description="actions recorded so far: the next action's step number")
    faults: int = Field(description="faulty draws so far")
    bets: dict[str, RoundBet] = Field(description="bet id -> bet (withdrawn bets are gone)")
    outcome: dict[str, Any] | None = Field(
        description="settlement API 2: null until the round is settled, then what it drew, "
        "{cards: [...]} (the cards dealt, in order) or {dice: [...]} (every die drawn, in "
        "order), as corrected; settlement API 1: the recorded outcome (game-defined)"
    )
    results: list[BetResult] = Field(description="each settled (or voided) bet's return")
    dealt: list[int] = Field(description="cards dealt, in order")
    log: list[dict[str, Any]] = Field(
        description="the round's steps as recorded, each one of {close_betting}, {outcome}, "
        "{fault} or {action: {actor, action, args, drawn}}"
    )
    moves: dict[str, list[str]] = Field(
        description="who may do what next (POST /act): actor -> actions; empty once the "
        "round is over, and for a settlement-API-1 round (its commands are fixed)"
    )


class RoundSummary(Answer):
    """A row of the rounds projection; its times are ISO 8601, UTC."""

    round_id: str
    table_id: str
    table_name: str | None = Field(description="null when the table is not projected")
    game: str
    game_version: str
    variant: str = Field(  # alias
        description="deprecated alias of `game` (the same value)", json_schema_extra=DEPRECATED
    )
    variant_version: str = Field(  # alias
        description="deprecated alias of `game_version` (the same value)",
        json_schema_extra=DEPRECATED,
    )
    currency: str
    dealer: str = Field(description=PERSONAL)
    status: RoundStatus
    bets: int = Field(description="standing bets: placed and not withdrawn")
    bets_withdrawn: int
    stakes: int = Field(description="the standing bets' stakes, minor units")
    returned: int = Field(description="paid back by settlements and voids, minor units")
    opened_at: str
    betting_closed_at: str | None
    decided_at: str | None
    ended_at: str | None
    last_event_at: str


class Rounds(Answer):
    rounds: list[RoundSummary] = Field(description="oldest first (by opening time, then id)")
    next_cursor: str | None = next_cursor()


class BetPlaced(Answer):
    bet_id: str


class BatchBetAnswer(Answer):
    request_id: str
    status: int = Field(
        description="201: placed (or placed before: a retry); else the status "
        "POST /rounds/{round_id}/bets answers that bet with (400, 404, 409, ...)"
    )
    bet_id: str | None = Field(description="the bet's id when placed, else null")
    error: str | None = Field(
        description="when refused: the kind of error, as the error body's `error`"
    )
    detail: str | None = Field(description="when refused: why, in one line")
    code: str | None = Field(
        description="when refused: what went wrong, as the error body's `code` "
        "(docs/http.md, the error codes)"
    )
    param: str | None = Field(description="when refused: the field at fault, if one is")


class BetBatchPlaced(Answer):
    placed: int = Field(description="bets placed (or placed before)")
    refused: int = Field(description="bets refused, each with its own error")
    bets: list[BatchBetAnswer] = Field(description="one answer a bet, in the batch's order")


class BetWithdrawn(Answer):
    withdrawn: str = Field(description="the withdrawn bet's id")


class BettingClosed(Answer):
    closed: str = Field(description="the round's id")


class Drawn(Answer):
    drawn: dict[str, Any] = Field(
        description="what the draw drew: {kind: drawn} (e.g. {dice: [1, 4, 6]}); on a "
        "settlement-API-1 round, the outcome as the game recorded it"
    )


class Thrown(Answer):
    """The deprecated `POST /throw`'s answer: `Drawn` under its old key."""

    thrown: dict[str, Any] = Field(
        description="what the throw drew, as `Drawn.drawn` (deprecated: `POST /draw` answers "
        "`drawn`)"
    )


class OutcomeRecorded(Answer):
    recorded: str = Field(description="the round's id")


class FaultAnswer(Answer):
    faults: int = Field(description="faulty draws in the round so far, this one included")
    then: Literal["throw again", "betting reopened", "voided"] = Field(
        description="what the game's fault policy did"
    )


class FaultRecorded(Answer):
    fault: FaultAnswer


class ActionPlayed(Answer):
    """A settlement-API-2 round's action, and what the game's step after it settled."""

    step: int = Field(description="the action's number in the round, from 0")
    drawn: list[int] = Field(description="dice faces or cards drawn; empty when none")
    state: dict[str, Any] = Field(description="the game's state after it (game-defined)")
    settled: list[BetResult] = Field(description="the bets it settled (or voided)")
    void: str | None = Field(description="why the game voided the round, else null")
    over: bool = Field(description="every bet is settled: the round is over")
    moves: dict[str, list[str]] = Field(
        description="who may do what next: actor -> the actions /act takes from them now "
        "(empty once the round is over)"
    )


class ActionTaken(Answer):
    played: ActionPlayed | FaultAnswer | dict[str, Any] | None = Field(
        description="settlement API 2: the action played (ActionPlayed). On a settlement-API-1 "
        "round, the old command the action stands for: a fault's FaultAnswer, a throw's or "
        "an outcome's recorded outcome (game-defined), or null (closing betting, or an "
        "outcome a device reported)"
    )


class Settlement(Answer):
    results: list[BetResult] = Field(
        description="each bet the command settled, with its return; for a correction, the bets "
        "re-settled with their new returns"
    )


class Voided(Answer):
    results: list[BetResult] = Field(description="each unsettled bet, its stake returned")


class Resumed(Answer):
    resumed: str = Field(description="the round's id")


class OperatorFact(Answer):
    key_id: str = Field(description="the operator key that is to sign it")
    message: str = Field(description="the exact bytes to sign (Ed25519), base64")


# Queries.
class LedgerBalance(Answer):
    account: str = Field(
        description="a ledger account's name: wallet:<id>, in-play:<round>, cashier:<CUR>, ..."
    )
    currency: str
    balance: int = Field(description="minor units")
    postings: int = Field(description="postings to it so far")


class Balances(Answer):
    balances: list[LedgerBalance]
    totals: dict[str, int] = Field(
        description="currency -> the sum of every account's balance: 0 when the postings balance"
    )


class KeyUse(Answer):
    key_id: str
    name: str | None = Field(description="the key's name in the keyring; null when unknown")
    role: str | None = Field(description="the key's role in the keyring; null when unknown")
    signed: str = Field(description='what it signed: "envelope", "device report", ...')


class RecalledEvent(Answer):
    version: int = Field(description="the event's version in the round's stream")
    kind: str = Field(description='the event type\'s short name: "BetPlaced", ...')
    position: int | None = Field(description="log position (Merkle leaf); null when none matches")
    signed_at: str | None = Field(description="ISO 8601")
    keys: list[KeyUse] = Field(description="the keys that signed its facts")
    facts: dict[str, Any] | None = Field(
        description="the event's facts, plain JSON; null when the event did not verify"
    )
    problem: str | None = Field(description="the check it fails, else null")
    asked: str | None = Field(
        description='who asked for a command-sourced action ("by token T (role R)", or '
        '"node command"), else null'
    )


class Recall(Answer):
    replay: Literal[True] = Field(description="always true: re-derived, not a live view")
    note: str
    round: str = Field(description="the round's id")
    currency: str | None
    verified: bool = Field(description="false when a check failed (see problems)")
    events: list[RecalledEvent]
    checked: list[str] = Field(description="what was checked")
    not_checked: list[str] = Field(description="what a recall does not check")
    problems: list[str]


class HistoryHead(Answer):
    version: int = Field(description="the account stream's newest version under the checkpoint")
    position: int = Field(description="its log position (Merkle leaf index)")
    entry_hash: str = Field(description="its entry hash, hex")


class HistoryMovement(Answer):
    version: int
    type: str = Field(description="the account event's type, e.g. Account.Debited")
    at: str = Field(description="the event's signed timestamp, ISO 8601")
    amount: int | None = Field(description="minor units (None: the event moves no money)")
    round: str | None = Field(description="the round it paid into or out of")
    reference: str | None = Field(description="stake <bet id>, return <bet id>, ...")


class HistoryRound(Answer):
    round: str
    debited: int = Field(
        description="what the account paid into the round in the span, minor units"
    )
    credited: int = Field(description="what it took from the round in the span, minor units")


class HistoryAsked(Answer):
    version: int = Field(description="the movement's version (a deposit, withdrawal or stake)")
    asked_by: AskedBy | None = Field(
        description="who asked for it, as its request record (in `requests`) says; null: the "
        "node's own command, or a request recorded before the node recorded it"
    )


class AccountHistory(Answer):
    """A player's history, proven complete: docs/history.md specifies every field
    and how to check it with the public keys alone."""

    format: Literal["casino-ledger/account-history/v2"]
    account: str
    span: dict[str, int | str] = Field(description='{"last": N} or {"since": ISO 8601 time}')
    checkpoint: str = Field(description="the signed checkpoint note (with its accounts line)")
    head: HistoryHead
    map_proof: list[str] = Field(description="the account heads map's siblings, root first, hex")
    events: list[str] = Field(description="the account's envelopes, base64, newest first")
    movements: list[HistoryMovement]
    rounds: list[HistoryRound]
    requests: list[str] = Field(
        description="the signed request records of the movements in `asked`, base64, in order"
    )
    asked: list[HistoryAsked] = Field(description="who asked for each movement with a request")


class NewestCheckpoint(Answer):
    size: int = Field(description="how many events of the log it covers (Merkle leaves)")
    note: str = Field(description="the signed checkpoint note, as kept for consistency proofs")


class Checkpoints(Answer):
    checkpoints: list[NewestCheckpoint] = Field(
        description="checkpoints of sizes above `after`, by size, one per size"
    )
    next_after: int | None = Field(
        description="the size to ask from next (the last one listed); null when none was"
    )


class InclusionProof(Answer):
    stream: str
    version: int
    leaf_index: int = Field(description="the event's Merkle leaf")
    header: str = Field(description="the event's signed header, base64")
    signature: str = Field(description="the envelope's signature, base64")
    proof: list[str] = Field(description="the audit path's hashes, base64")
    checkpoint: str = Field(description="the checkpoint note it is proved under")


class ConsistencyProof(Answer):
    # "from" is a Python keyword: the field goes by its alias, which is what is sent.
    from_: str = Field(alias="from", description="the kept checkpoint's note")
    to: str = Field(description="the newest checkpoint's note")
    proof: list[str] = Field(description="the consistency proof's hashes, base64")


class InstalledGame(Answer):
    id: str
    plugin: str = Field(description="the plugin distribution providing it")
    version: str = Field(description="the plugin's version")
    rules_hash: str
    settlement_api: int
    bets: list[str] = Field(description="the kinds of bet a player may place")
    capabilities: list[str] = Field(description='e.g. "exact-paytable", sorted')


class GameRules(InstalledGame):
    """An installed game with its rules data: the SHA-256 of the rules' canonical
    JSON (RFC 8785) is `rules_hash`, the hash every round of the game pins."""

    rules: dict[str, Any] = Field(
        description="the game's rules data (game-defined): hashed as canonical JSON (RFC 8785) "
        "it gives `rules_hash`"
    )


class Games(Answer):
    games: list[InstalledGame] = Field(description="by id")


class ExactFraction(Answer):
    numerator: int
    denominator: int


class PaytableLine(Answer):
    bet: str
    pays: str = Field(description="what it pays, as the game states it")
    return_: ExactFraction = Field(
        alias="return", description="the theoretical return per unit staked, exactly"
    )


class Paytable(Answer):
    game: str
    lines: list[PaytableLine]


# Tokens.
class TokenInfo(Answer):
    """A token as listed: never its secret or its hash."""

    token_id: str
    role: ApiRole
    table: str | None = Field(description="a table device's own table, else null")
    created_at: str = Field(description="ISO 8601")
    expires_at: str | None = Field(description="ISO 8601; null: it does not expire")
    revoked_at: str | None = Field(description="ISO 8601; null: not revoked")


class Tokens(Answer):
    tokens: list[TokenInfo]


# The node's health.
class SelfVerification(Answer):
    every_seconds: int | None = Field(
        description="how often the node verifies its log, seconds; null: off (or not this node)"
    )
    last_run_at: str | None = Field(
        description="when the last run began (ISO 8601); null: none yet"
    )
    result: Literal["passed", "failed"] | None = Field(description="the last run's; null: none yet")
    tree_size: int | None = Field(description="the events the last run verified")
    finding: str | None = Field(description="the last run's first finding, in one line; null: none")


class Health(Answer):
    status: Literal["ok", "degraded"] = Field(
        description="degraded while the last self-verification failed; bets are still taken"
    )
    self_verification: SelfVerification
