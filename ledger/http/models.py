"""Request bodies: strict (no coercion: a float or a string for money is refused),
closed (an unknown field is refused) and bounded (no megabyte strings).

Only the shape is checked here; what the values mean (a positive amount, a
known account, a legal move) is the Python API's to decide.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from ledger.casino import MAX_BETS, MAX_REQUEST_ID
from ledger.error_codes import CATALOGUE, describe

# Money: integer minor units only. The bound is the canonical JSON range every
# fingerprint needs; the Python API refuses what it does not accept within it.
Money = Annotated[StrictInt, Field(ge=-(2**53), le=2**53)]
Text = Annotated[StrictStr, Field(min_length=1, max_length=1000)]
Name = Annotated[StrictStr, Field(min_length=1, max_length=200)]
Currency = Annotated[StrictStr, Field(min_length=1, max_length=8)]
Id = Annotated[StrictStr, Field(min_length=1, max_length=64)]
RequestId = Annotated[
    StrictStr,
    Field(
        min_length=1,
        max_length=MAX_REQUEST_ID,
        description="the bet's request id: the same id again returns its first result",
    ),
]
Step = Annotated[StrictInt, Field(ge=0, le=2**31)]
Json = dict[str, Any]


class ErrorBody(BaseModel):
    """Every error, from every route and from the layers in front of them
    (authentication, the body limit): one line, what kind of error it is, its
    code for a program and the field at fault, if one is."""

    detail: str = Field(description="what went wrong, in one line (never the input echoed)")
    error: str = Field(
        description="the kind of error: a ledger error's class name (InvalidCommandError, "
        "NotFoundError, RequestIdReusedError, ...), InvalidRequest for a body or parameter "
        "the API refuses, or the HTTP status's name (Unauthorized, Forbidden, BodyTooLarge, "
        "StoreUnavailable, ...)"
    )
    code: str = Field(
        description="what went wrong, for a program to branch on: a stable code of the "
        "catalogue (docs/http.md, the error codes); each value's description gives the "
        "status it comes with and the field it names",
        json_schema_extra={
            "enum": [entry.code for entry in CATALOGUE],
            "x-enum-descriptions": [describe(entry) for entry in CATALOGUE],
        },
    )
    param: str | None = Field(
        default=None,
        description="the field at fault, when one is (`stake`, `bet`, a body field's "
        "dotted path such as `bets.0.stake`, a parameter's name); absent otherwise",
    )


class FeedRecord(BaseModel):
    """One event of the feed: the export bundle's record (docs/export.md,
    docs/schemas/event.json) and its Merkle leaf index. A JSON Lines line of
    `/v1/events/stream`, an item of `/v1/events`."""

    position: int = Field(description="log position, from 0")
    stream: str
    version: int
    type: str = Field(description="the event's type, e.g. Round.BetPlaced")
    currency: str | None = Field(description="the stream's currency; None without money")
    envelope: str = Field(description="the stored envelope, base64: what was signed")
    header: dict[str, Any] = Field(description="the envelope's signed header")
    payload: dict[str, Any] = Field(description="the decoded payload (docs/schemas/payloads.json)")
    leaf_index: int | None = Field(description="its Merkle leaf; None until checkpointed")


class FeedPage(BaseModel):
    events: list[FeedRecord]
    next_after: int | None = Field(description="the position to ask from next")


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NewAccount(Body):
    owner: Name
    currency: Currency


class Amount(Body):
    amount: Money


class Reason(Body):
    reason: Text


class Limits(Body):
    min_bet: Money
    max_bet: Money
    max_round: Money


#: An older field name, kept: described as such and marked deprecated in the OpenAPI document.
DEPRECATED: dict[str, Any] = {"deprecated": True}


class NewTable(Body):
    name: Name
    game: Name | None = Field(
        default=None,
        description="the game its rounds play (its id: GET /v1/games); required, or its "
        "deprecated alias",
    )
    variant: Name | None = Field(  # alias
        default=None,
        description="deprecated alias of `game` (the same game if both are given)",
        json_schema_extra=DEPRECATED,
    )
    kind: Literal["rng", "physical"] = Field(
        description=(
            "rng: its rounds draw every die and card from the seed the table commits to "
            "(POST /v1/tables/{table_id}/seeds, before its first round); physical: its "
            "dealer device reports every outcome, signed"
        )
    )
    currency: Currency
    limits: Limits


class NewRound(Body):
    table_id: Id
    dealer: Name


class NewBet(Body):
    account_id: Id
    bet: Json
    stake: Money


class BatchBet(Body):
    request_id: RequestId
    account_id: Id
    bet: Json
    stake: Money


class NewBetBatch(Body):
    bets: list[BatchBet] = Field(
        min_length=1,
        max_length=MAX_BETS,
        description=f"1..{MAX_BETS} bets on the round, each with its own request id",
    )


class BetWithdrawal(Body):
    account_id: Id


class Outcome(Body):
    outcome: Json
    source: Json = Field(description="the dealer device's signed report (ledger.devices)")


class Fault(Body):
    reason: Text
    source: Json = Field(description="the dealer device's signed report (ledger.devices)")


class Act(Body):
    actor: Name
    action: Name
    args: Json = Field(default_factory=dict)
    source: Json | None = Field(
        default=None, description="on a physical table, the dealer device's signed report"
    )


class ActorSignature(Body):
    key_id: Annotated[StrictStr, Field(min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")]
    signature: Annotated[StrictStr, Field(min_length=1, max_length=200)]


class OperatorReason(Body):
    reason: Text
    operator: ActorSignature = Field(description="the operator's signature of the recorded fact")


class Correction(Body):
    outcome: Json
    reason: Text
    operator: ActorSignature


class StepCorrection(Body):
    step: Step
    drawn: Annotated[list[StrictInt], Field(max_length=52)]
    reason: Text
    operator: ActorSignature


class TrustedCheckpoint(Body):
    checkpoint: Annotated[StrictStr, Field(min_length=1, max_length=10_000)]


class FactToSign(Body):
    """Which operator command will be sent, with its arguments (all but the signature)."""

    command: Literal["void", "resume", "correct", "correct_step"]
    key_id: Annotated[StrictStr, Field(min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")]
    reason: Text
    outcome: Json | None = None
    step: Step | None = None
    drawn: Annotated[list[StrictInt], Field(max_length=52)] | None = None
