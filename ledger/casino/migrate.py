"""`ledger migrate`: end every round still open under settlement API 1, so the
write path has one generation.

Release 0.2 and before played a game as one outcome: betting closed, the
outcome (or faulty draws and the game's fault policy), then a command of its
own settled every bet at once. A store upgraded with such a round open keeps
it open until this: one rule for each, the same for every game.

- **Its outcome is recorded** (decided): it is settled on that outcome, every
  bet at once as API 1 settled (`Round.Settled`, step None), by its game
  replaying the round through the translation of API-1 entries
  (`ledger.games.replay`); the node's signature, as the old `settle` had.
- **No outcome** (betting open or closed, faulty draws only): there is
  nothing to settle on, and it is voided, every stake back to its wallet,
  signed by an operator key as any operator's void (`ledger rounds void`).

Every round is ended in one command and one commit: a refusal (no operator
key for a void, the round's game not installed to settle it) records nothing.
Run again, it finds nothing open and records nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate
from eventsourcing.utils import get_topic

from ledger.casino import attestation, payouts
from ledger.casino.context import Context
from ledger.casino.legality import step_of
from ledger.casino.runner import Body, Work
from ledger.crypto.actor import sign_fact
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.domain.round import Round
from ledger.domain.round_records import DECIDED, OperatorSignature
from ledger.domain.signed_facts import operator_fact
from ledger.errors import InvalidCommandError
from ledger.store.application import LedgerApplication
from ledger.store.stream_ids import Kind

SETTLE = "settle"
VOID = "void"
REASON = "settlement API 1 retired by ledger migrate: the round was left open under it"
_OPENED = get_topic(Round.Opened)
_PAGE = 1_000


@dataclass(frozen=True)
class Migration:
    """What `ledger migrate` does to one round still open under settlement API 1."""

    round_id: str
    table_id: str
    game: str
    status: str  # as found: betting, closed or decided
    faults: int  # faulty draws recorded
    outcome: dict[str, Any] | None  # the outcome recorded, when decided
    action: str  # SETTLE (its outcome is recorded) or VOID (none is)
    bets: int
    staked: int  # minor units in play
    returned: int  # minor units going back to the wallets
    currency: str

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def open_api_1_rounds(app: LedgerApplication) -> list[Round]:
    """Every round of the store still open under settlement API 1, in log order
    (each `Round.Opened` read by its topic, and only those of API 1 in full)."""
    found: list[Round] = []
    after = 0
    while batch := app.recorder.select_notifications(
        start=after, limit=_PAGE, topics=[_OPENED], inclusive_of_start=False
    ):
        for row in batch:
            opened = app.mapper.to_domain_event(row)
            if getattr(opened, "settlement_api", 1) < 2:
                game_round: Aggregate = app.repository.get(UUID(str(row.originator_id)))
                assert isinstance(game_round, Round)
                if game_round.is_open:
                    found.append(game_round)
        after = batch[-1].id
    return found


def plan(context: Context, rounds: Sequence[Round]) -> list[Migration]:
    """What migrating each round does, or raise (nothing recorded) when one
    cannot be ended: a decided round whose game is not installed here."""
    return [_plan_one(context, game_round) for game_round in rounds]


def _plan_one(context: Context, game_round: Round) -> Migration:
    staked = sum(bet["stake"] for bet in game_round.bets.values())
    if game_round.status == DECIDED:
        returned = sum(_returns(context, game_round).values())
        action = SETTLE
    else:
        returned = staked
        action = VOID
    return Migration(
        round_id=str(game_round.id),
        table_id=str(game_round.table_id),
        game=game_round.game,
        status=game_round.status,
        faults=game_round.faults,
        outcome=game_round.outcome,
        action=action,
        bets=len(game_round.bets),
        staked=staked,
        returned=returned,
        currency=game_round.currency,
    )


def _returns(context: Context, game_round: Round) -> dict[str, int]:
    """Each bet's return on the recorded outcome, as the round's game says."""
    try:
        game = context.game_of(game_round)
    except InvalidCommandError as exc:
        raise InvalidCommandError(
            f"cannot settle round {game_round.id} on its recorded outcome: {exc}; install a "
            "release of its game declaring its rules, then run ledger migrate again",
            code="cannot_migrate",
        ) from None
    step = step_of(context, game, game_round)
    if not step["over"] or set(step["settle"]) != set(game_round.bets):
        raise InvalidCommandError(
            f"cannot settle round {game_round.id}: its game ({game_round.game}) does not "
            "settle every bet on the recorded outcome",
            code="cannot_migrate",
        )
    return dict(step["settle"])


def request_id(rounds: Sequence[Migration]) -> str:
    """One request id for migrating these rounds: a retry (or another node
    migrating the same rounds at once) gets the first answer."""
    names = ",".join(sorted(m.round_id for m in rounds))
    return f"migrate-{hashlib.sha256(names.encode()).hexdigest()[:40]}"


def finish(
    context: Context, rounds: Sequence[Migration], reason: str, operator: Signer | None
) -> Body:
    """The command: each round still open under API 1 settled or voided, as
    it is now (one another writer ended meanwhile is left as it is)."""

    def body(work: Work) -> tuple[list[dict[str, Any]], list[Aggregate]]:
        done: list[dict[str, Any]] = []
        changed: dict[Any, Aggregate] = {}
        for planned in rounds:
            # Not `work.round`: the write path refuses a round open under API 1.
            game_round = work.get(Round, planned.round_id, Kind.ROUND)
            if game_round.settlement_api >= 2 or not game_round.is_open:
                continue
            migration = _plan_one(context, game_round)
            if migration.action == SETTLE:
                results = game_round.settle_on_outcome(_returns(context, game_round))
            else:
                signed = _signed_void(context, game_round, reason, operator)
                results = game_round.void(reason, signed)
            for aggregate in (
                game_round,
                *payouts.pay(work, game_round, results),
                *payouts.ended(work, game_round),
            ):
                changed[aggregate.id] = aggregate
            done.append(migration.as_json())
        return done, list(changed.values())

    return body


def _signed_void(
    context: Context, game_round: Round, reason: str, operator: Signer | None
) -> OperatorSignature:
    if operator is None:
        raise InvalidCommandError(
            f"round {game_round.id} has no outcome to settle on: ledger migrate voids it, "
            "signed by an operator key (--operator-key NAME, or the only one held)",
            code="cannot_migrate",
        )
    fact = operator_fact("void", game_round.id, reason)
    signed = sign_fact(attestation.check_operator(context, operator), fact, Role.OPERATOR)
    return {"key_id": signed["key_id"], "signature": signed["signature"]}


def from_json(found: Sequence[dict[str, Any]]) -> list[Migration]:
    return [Migration(**item) for item in found]
