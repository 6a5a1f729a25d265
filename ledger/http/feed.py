"""The event feed: the log from a position on, in the export bundle's event
record format (`ledger.export.records`), each event with its Merkle leaf index.

Positions are log positions (0-based, the order of the log, which is the
Merkle log's leaf order). A consumer keeps the last position it processed and
asks for what comes after it: the log only grows at its end (both stores
commit events in notification order), so a consumer that stops and restarts
from its last position sees no gap and no duplicate. What it read it can
prove: `GET /v1/checkpoints/newest`, then an inclusion proof of any event, or a
consistency proof from a checkpoint it kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ledger.errors import InvalidCommandError
from ledger.export.currencies import StreamCurrencies
from ledger.export.records import event_record
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import MerkleLogTables, stream_of

MAX_LIMIT = 1000


def _start(tables: MerkleLogTables, after: int | None) -> int:
    """The notification id of log position `after` (0 before the first)."""
    if after is None:
        return 0
    found = tables.id_at_offset(after)
    if found is None:
        size, _ = tables.event_count()
        raise InvalidCommandError(
            f"position {after} is past the end of the log (positions 0..{size - 1})",
            code="invalid_value",
            param="after",
        )
    return found


def check_position(app: LedgerApplication, after: int | None) -> None:
    _start(app.tables, after)


def events_after(app: LedgerApplication, after: int | None, limit: int) -> list[dict[str, Any]]:
    """At most `limit` event records after log position `after` (None: from the
    start). An archived event's place (`ledger.store.archived`) is not served:
    the records' positions jump over it, and a page reads on past a run of them."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidCommandError(
            f"limit is 1..{MAX_LIMIT}, not {limit}", code="invalid_value", param="limit"
        )
    tables = app.tables
    currencies = StreamCurrencies(tables)
    records: list[dict[str, Any]] = []
    start, first = _start(tables, after), 0 if after is None else after + 1
    while len(records) < limit and (rows := tables.rows_after(start, limit - len(records))):
        # One query for the page's leaf indexes (one a row cost the feed two thirds of its time).
        leaf_of = tables.leaf_indexes(rows[0][0], rows[-1][0])
        for offset, row in enumerate(rows):
            if row[3] is None:  # an archived event's place: its event is in an archive
                continue
            record = event_record(first + offset, bytes(row[4]), None)
            stream = stream_of(row[1])
            record["currency"] = currencies.of(stream, record["version"], record["payload"])
            record["leaf_index"] = leaf_of.get(row[0])  # None until checkpointed
            records.append(record)
        start, first = rows[-1][0], first + len(rows)
    return records


def stream_lines(
    app: LedgerApplication, after: int | None, limit: int, batch: int = 200
) -> Iterator[bytes]:
    """The same records as JSON Lines, read `batch` at a time (a long read stays small)."""
    sent = 0
    while sent < limit:
        records = events_after(app, after, min(batch, limit - sent))
        if not records:
            return
        for record in records:
            yield json.dumps(record, separators=(",", ":")).encode() + b"\n"
        sent += len(records)
        after = records[-1]["position"]
