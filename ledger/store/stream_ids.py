"""One way to resolve an id a user names (a round, a table, an account) to
the stream of that kind, on every command that takes one.

An id names a stream; what the stream is, its first event says (a round's
opens with `Round.Opened`, a table's with `GameTable.Opened`, ...). A command
given an id of another kind refuses it in one line naming what the id is
("ID is a table, not a round"), and one given an id that names nothing or is
no UUID says so ("no round ID in this store"): a `NotFoundError` (exit 2 on the CLI,
404 over HTTP), before anything is written or created.

Two entry points, one wording: `require_stream` judges an id from the store's
rows (commands that read the log: `export --round`, `recall`, a token's
table), `require_aggregate` judges an aggregate the repository returned (the
Python API's commands, and through it the HTTP API and the CLI's round
commands). From the rows, a stream is of the kind its first event's signed
header names, or that its stored type column names: a relabelled row can
neither hide a round from an audit of it nor pass a table off as one, as
verify judges the row itself.
"""

from __future__ import annotations

from enum import StrEnum
from uuid import UUID

from eventsourcing.domain import Aggregate

from ledger.crypto.envelope import open_envelope
from ledger.domain.account import Account
from ledger.domain.audit_trail import AuditTrail
from ledger.domain.erasures import Erasures
from ledger.domain.game_rules import GameRules
from ledger.domain.game_table import GameTable
from ledger.domain.key_registry import KeyRegistry
from ledger.domain.request import Request
from ledger.domain.round import Round
from ledger.domain.witness_reports import WitnessReports
from ledger.errors import NotFoundError, VerificationError, with_article
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.recorders import Row


class Kind(StrEnum):
    """The kinds of stream a user names by id."""

    ACCOUNT = "account"
    TABLE = "table"
    ROUND = "round"


# What each aggregate's stream is called in a message, by class name (the
# part of an event's topic between ":" and the event's own name).
NOUNS: dict[str, str] = {
    Account.__name__: Kind.ACCOUNT,
    GameTable.__name__: Kind.TABLE,
    Round.__name__: Kind.ROUND,
    Request.__name__: "request record",
    KeyRegistry.__name__: "key registry",
    AuditTrail.__name__: "audit trail",
    Erasures.__name__: "erasure register",
    GameRules.__name__: "rules register",
    WitnessReports.__name__: "witness report stream",
}
_CLASSES: dict[str, type[Aggregate]] = {
    Kind.ACCOUNT: Account,
    Kind.TABLE: GameTable,
    Kind.ROUND: Round,
}


def noun_of_topic(topic: str) -> str:
    """`ledger.domain.game_table:GameTable.Opened` -> "table"."""
    name = topic.partition(":")[2].partition(".")[0]
    return NOUNS.get(name, f"{name or 'unnamed'} stream")


def unknown(given: object, kind: Kind) -> NotFoundError:
    return NotFoundError(f"no {kind} {given} in this store")


def wrong_kind(given: object, noun: str, kind: Kind) -> NotFoundError:
    return NotFoundError(f"{given} is {with_article(noun)}, not {with_article(kind)}")


def parse_id(given: object, kind: Kind) -> UUID:
    """`given` as a UUID (a UUID, or text in any form `uuid.UUID` reads)."""
    if isinstance(given, UUID):
        return given
    try:
        return UUID(str(given))
    except ValueError:
        raise unknown(given, kind) from None


def archived(stream: object, kind: Kind) -> NotFoundError:
    return NotFoundError(
        f"{kind} {stream} is archived: its events are in an archive directory "
        "(ledger recall ROUND --archive DIR reads it there; docs/archive.md)"
    )


def require_aggregate(
    found: Aggregate | None, given: object, kind: Kind, tables: MerkleLogTables | None = None
) -> Aggregate:
    """`found` (what the repository holds for id `given`, None: nothing) when
    it is a `kind`; else the one refusal (`tables`: to tell an archived stream)."""
    if found is None:
        if tables is not None:
            first = tables.row_by_stream(str(parse_id(given, kind)), 1)
            if first is not None and first[3] is None:  # (ledger.store.archived)
                raise archived(given, kind)
        raise unknown(given, kind)
    if not isinstance(found, _CLASSES[kind]):
        raise wrong_kind(given, NOUNS.get(type(found).__name__, type(found).__name__), kind)
    return found


def require_stream(tables: MerkleLogTables, given: object, kind: Kind) -> str:
    """The canonical id of stream `given` when the store holds it as a `kind`
    (judged by its first event); else the one refusal."""
    key = parse_id(given, kind)
    stream = str(key)
    first = tables.row_by_stream(stream, 1)
    if first is None:
        raise unknown(stream, kind)
    if first[3] is None:  # an archived event's marker row (ledger.store.archived)
        raise archived(stream, kind)
    nouns = [noun_of_topic(t) for t in (_signed_type(first), first[3]) if t is not None]
    if kind not in nouns:
        raise wrong_kind(stream, nouns[0], kind)
    return stream


def _signed_type(row: Row) -> str | None:
    """The event type the row's envelope header signs (None: it does not open)."""
    try:
        return open_envelope(bytes(row[4]), stream=stream_of(row[1]), version=row[2]).event_type
    except (VerificationError, TypeError):
        return None
