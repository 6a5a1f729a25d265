"""`ledger history`: an account's history in a span, with the proof that none of
its rounds is missing (docs/history.md specifies the format).

The proof is made against the newest checkpoint that signs an account heads
map: the account's head as that map holds it (with the map's proof), then the
account's events from the head back, each linked to the next by its `prev`,
to the span's boundary. Nothing stored is taken on trust: the stored heads
must give the signed root, and each stored event the hash the one after it
(or the head) names, else the history is refused (`VerificationError`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

from ledger.audit.proofs import newest_checkpoint
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.heads_map import HeadsMap
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import hash_leaf
from ledger.errors import ConfigError, NotFoundError, VerificationError
from ledger.export.records import split_envelope
from ledger.history.account_events import AccountEvent, read_account_event
from ledger.history.bet_records import BetRecords
from ledger.history.requests import COMPLETED, RequestRecord, records_for
from ledger.history.span import Movement, Span, rounds_of, walk
from ledger.store.account_heads import AccountHeadsTable, Head, heads_map
from ledger.store.application import LedgerApplication
from ledger.store.recorders import Row
from ledger.store.stream_ids import Kind, require_stream

FORMAT = "casino-ledger/account-history/v2"  # v1: without who asked (requests, asked)


def history_proof(
    app: LedgerApplication, keyring: Keyring, given: object, span: Span
) -> dict[str, Any]:
    """The proof for the account id `given` (NotFoundError: no such account)."""
    account = UUID(require_stream(app.tables, given, Kind.ACCOUNT))
    checkpoint, head, built = _signed_head(app, keyring, account)
    read: list[AccountEvent] = []

    def movements_back() -> Iterator[Movement]:
        for event in _events_back(app, head):
            read.append(event)
            yield event.movement

    taken = list(walk(span, movements_back()))  # it stops reading at the boundary
    movements = [movement for movement, boundary in taken if not boundary]
    rounds = [m.round for m in movements if m.round]
    requests, asked = records_for(
        read[: len(movements)], str(account), keyring, _reader(app, str(account), rounds)
    )
    return {
        "format": FORMAT,
        "account": str(account),
        "span": span.to_json(),
        "checkpoint": checkpoint.to_note(),
        "head": {
            "version": head.version,
            "position": head.position,
            "entry_hash": head.entry_hash.hex(),
        },
        "map_proof": [sibling.hex() for sibling in built.proof(head.key)],
        "events": [base64.b64encode(event.state).decode() for event in read],
        "movements": [m.to_json() for m in movements],
        "rounds": rounds_of(movements),
        "requests": [base64.b64encode(state).decode() for state in requests],
        "asked": asked,
    }


RACES = 3  # a checkpoint committed between reading it and its heads: read both again


def _signed_head(
    app: LedgerApplication, keyring: Keyring, account: UUID
) -> tuple[Checkpoint, Head, HeadsMap]:
    """The newest checkpoint that signs a map, the account's head in it and the
    map: from the stored rows when they give its root (the head's own fields
    hashing to its leaf there), else read again from the events (rows lost or
    altered; a copy made before they existed); `VerificationError` when
    neither does."""
    table = AccountHeadsTable(app.tables.recorder)
    for _ in range(RACES):
        checkpoint = _newest_with_map(app, keyring)
        signed = checkpoint.accounts
        with app.tables.recorder.snapshot() as cursor:
            built = table.leaves(checkpoint.size, cursor)
            head = table.one(account, cursor)
        if built is None or built.root() != signed:
            continue
        if head is None:
            raise NotFoundError(
                f"account {account} is not under a checkpoint yet: run `ledger checkpoint`",
                code="not_checkpointed",
            )
        if built.leaf(head.key) != head.leaf:
            break  # the row was altered: the events say what it is
        return checkpoint, head, built
    heads = _heads_from_events(app, checkpoint.size)
    built = heads_map(heads.values())
    if built.root() != signed:
        raise VerificationError(
            f"neither the stored account heads nor the events give the map the checkpoint of "
            f"size {checkpoint.size} signs: the store was altered (`ledger verify` says where)"
        )
    if account not in heads:
        raise NotFoundError(
            f"account {account} is not under a checkpoint yet: run `ledger checkpoint`",
            code="not_checkpointed",
        )
    return checkpoint, heads[account], built


def _newest_with_map(app: LedgerApplication, keyring: Keyring) -> Checkpoint:
    checkpoint = newest_checkpoint(app, keyring)
    if checkpoint is None or checkpoint.accounts is None:
        raise ConfigError(
            "no checkpoint signs the accounts' heads yet: run `ledger checkpoint` "
            "(a store written before this release gets them from its next checkpoint)"
        )
    return checkpoint


def _heads_from_events(app: LedgerApplication, size: int) -> dict[UUID, Head]:
    """Unchecked: the root they give is held to the signed one."""
    last = app.tables.leaves(size - 1, size)
    last_id = last[0][1] if last else 0
    with app.tables.recorder.read() as cursor:
        return AccountHeadsTable(app.tables.recorder).heads_from_events(
            last_id, cursor, _entry_hash
        )


def _entry_hash(row: Row) -> bytes:
    try:
        return hash_leaf(split_envelope(row[4])[1])
    except ValueError:
        return b""  # not an envelope: the root will not match


BACK_BATCH = 32  # an account's events read a query at a time, newest first


def _events_back(app: LedgerApplication, head: Head) -> Iterator[AccountEvent]:
    """The account's events from `head` back, each the one its successor links to
    (read `BACK_BATCH` versions a query: a history of ten rounds is about 25)."""
    expected = head.entry_hash
    stream = str(head.account)
    high = head.version
    while high > 0:
        low = max(1, high - BACK_BATCH + 1)
        rows = _versions(app, stream, low, high)
        for version in range(high, low - 1, -1):
            row = rows.get(version)
            if row is None:
                raise VerificationError(f"account {stream} version {version} is missing")
            event = read_account_event(row, stream, version)
            if event.envelope.entry_hash != expected:
                raise VerificationError(
                    f"account {stream} version {version} is not the event its successor "
                    "(or the signed head) names: it was altered"
                )
            expected = event.envelope.prev_hash
            yield event
        high = low - 1


def _versions(app: LedgerApplication, stream: str, low: int, high: int) -> dict[int, bytes]:
    """Version -> stored bytes of `stream`'s events `low` to `high` (those there)."""
    recorder = app.tables.recorder
    statement = recorder.sql(
        "SELECT originator_version, state FROM {events} "
        "WHERE originator_id = %s AND originator_version BETWEEN %s AND %s"
    )
    with recorder.read() as cursor:
        cursor.execute(statement, (app.tables.stream_key(stream), low, high))
        return {
            int(version): bytes(state) for version, state in cursor.fetchall() if state is not None
        }


def _reader(
    app: LedgerApplication, account: str, rounds: list[str]
) -> Callable[[RequestRecord], bytes | None]:
    """Reads a movement's request record, as stored (held to it by `records_for`):
    a request's by its stream; a bet's among its round's (`bet_records`)."""
    bets = BetRecords(app.tables, account, rounds)

    def read(record: RequestRecord) -> bytes | None:
        if record.type == COMPLETED:
            row = app.tables.row_by_stream(record.stream, 1)
            return None if row is None or row[4] is None else bytes(row[4])
        return bets.find(record.stream, record.value)

    return read
