"""Which rounds an archive takes: finished (settled to the end, or voided), every
event of theirs signed before the horizon and under the checkpoint the
archive is verified against. A round's stream leaves whole, so no chain in
the store ever starts at an archived event; accounts, tables, seeds and the
registers stay (they carry balances and keys forward, and a player's history
walks its account's chain: docs/archive.md)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from ledger.crypto.envelope import ENVELOPE_PREFIX, SIGNED_AT_OFFSET
from ledger.crypto.merkle import LEAF_PREFIX
from ledger.store.archived import ArchivedEntry
from ledger.store.merkle_log import MerkleLogTables, stream_of

ROUND_TOPIC = "ledger.domain.round:Round."
_SETTLED = ROUND_TOPIC + "Settled"
_VOIDED = ROUND_TOPIC + "Voided"
_OPENED = ROUND_TOPIC + "Opened"
READ_BATCH = 5000


@dataclass
class _Round:
    currency: str | None = None
    finished: bool = False
    newest: int = 0  # the newest signing time, µs


@dataclass
class Due:
    """The rounds due and each of their events' entries, in log order."""

    rounds: dict[str, str | None] = field(default_factory=dict)  # round id -> currency
    entries: list[ArchivedEntry] = field(default_factory=list)


def rounds_due(
    tables: MerkleLogTables,
    horizon: int,
    size: int,
    progress: Callable[[int], None] | None = None,
) -> Due:
    """Read the log's first `size` positions once: the finished rounds whose every
    event was signed before `horizon` (µs), with their events' entries."""
    rounds: dict[str, _Round] = {}
    entries: dict[str, list[ArchivedEntry]] = {}
    position, after = 0, 0
    at = ENVELOPE_PREFIX.size + SIGNED_AT_OFFSET
    while position < size and (rows := tables.rows_after(after, min(READ_BATCH, size - position))):
        for notification_id, originator_id, version, topic, state in rows:
            if type(topic) is str and topic.startswith(ROUND_TOPIC):
                stream = stream_of(originator_id)
                found = rounds.setdefault(stream, _Round())
                header_end = ENVELOPE_PREFIX.size + int.from_bytes(state[4:6], "big")
                found.newest = max(found.newest, int(state[at : state.index(b",", at)]))
                if topic == _OPENED:
                    currency = _payload(state, header_end).get("currency")
                    found.currency = currency if isinstance(currency, str) else None
                elif topic == _VOIDED:
                    found.finished = True
                elif topic == _SETTLED:
                    settled = _payload(state, header_end)
                    found.finished |= settled.get("step") is None or bool(settled.get("over"))
                leaf = _leaf(state, header_end)
                entries.setdefault(stream, []).append(
                    ArchivedEntry(position, notification_id, stream, version, leaf)
                )
            position += 1
        after = rows[-1][0]
        if progress is not None:
            progress(len(rows))
    due = Due()
    for stream, found in rounds.items():
        # A stream the walk met part of (a marker row: archived already) is not due.
        if found.finished and found.newest < horizon and entries[stream][0].version == 1:
            due.rounds[stream] = found.currency
    due.entries = sorted(
        (entry for stream in due.rounds for entry in entries[stream]), key=lambda e: e.position
    )
    return due


def _payload(state: bytes, header_end: int) -> dict[str, object]:
    try:
        found = json.loads(state[header_end + 64 :])
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _leaf(state: bytes, header_end: int) -> bytes:
    return hashlib.sha256(LEAF_PREFIX + state[ENVELOPE_PREFIX.size : header_end]).digest()
