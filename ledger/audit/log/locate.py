"""Naming the event at fault once verification has failed (failure path only).

The checks themselves trust nothing stored but the events; once a check
fails, the stored Merkle leaves (what the checkpointer saw: position,
notification id, entry hash) help say *where*: the first position whose event
is gone or differs. A leaf row edited too can only make the location vaguer,
never make verification pass.
"""

from __future__ import annotations

from ledger.audit.log.chunks import Problem
from ledger.crypto.envelope import open_envelope, where
from ledger.errors import VerificationError
from ledger.store.merkle_log import MerkleLogTables, stream_of

_SCAN_LIMIT = 1 << 16  # rows read looking for a missing event's successor


def _leaf_id(tables: MerkleLogTables, position: int) -> int | None:
    found = tables.leaves(position, position + 1)
    return found[0][1] if found else None


def first_removed(tables: MerkleLogTables, begin: int, end: int) -> Problem | None:
    """The first position in [begin, end) whose checkpointed event is gone.

    Removing rows shifts every later row down one position, so the stored
    leaves' notification ids and the rows' ids agree before the gap and differ
    from it on: a binary search finds it in O(log n) lookups."""
    end = min(end, tables.tail()[0])
    low, high = begin, end
    while low < high:
        middle = (low + high) // 2
        if _leaf_id(tables, middle) == tables.id_at_offset(middle):
            low = middle + 1
        else:
            high = middle
    if low >= end:
        return None
    found = tables.leaves(low, low + 1)
    if not found or tables.row_by_id(found[0][1]) is not None:
        return None  # not a removal (rows reordered or leaves edited): say nothing more
    _, notification_id, entry_hash = found[0]
    return Problem(low, _missing_message(tables, low, notification_id, entry_hash))


def _missing_message(
    tables: MerkleLogTables, position: int, notification_id: int, entry_hash: bytes
) -> str:
    """Name the missing event by the next event of its stream, which links to it."""
    after = tables.id_at_offset(position - 1) if position else 0
    for _, originator_id, version, _, state in tables.rows_after(after or 0, _SCAN_LIMIT):
        try:
            envelope = open_envelope(state, stream="?", version=version)
        except VerificationError:
            continue
        if envelope.prev_hash == entry_hash:
            stream = stream_of(originator_id)
            return (
                f"{where(stream, envelope.version - 1)}: event missing: it stood at this "
                f"position under a checkpoint, and version {envelope.version} links to it"
            )
    return (
        f"event {notification_id} missing: it stood at this position under a checkpoint "
        "(no later event of its stream names it)"
    )


def first_difference(tables: MerkleLogTables, begin: int, size: int) -> Problem:
    """The first position in [begin, size) whose event differs from the leaf the
    checkpointer stored, after a Merkle root over the first `size` events failed."""
    removed = first_removed(tables, begin, size)
    if removed is not None:
        return removed
    after = tables.id_at_offset(begin - 1) if begin else 0
    position = begin
    while position < size and (rows := tables.rows_after(after or 0, 4096)):
        stored = {i: leaf for i, _, leaf in tables.leaves(position, position + len(rows))}
        for _, originator_id, version, _, state in rows[: size - position]:
            stream = stream_of(originator_id)
            try:
                entry_hash = open_envelope(state, stream=stream, version=version).entry_hash
            except VerificationError as exc:
                return Problem(position, str(exc))
            if stored.get(position, entry_hash) != entry_hash:
                return Problem(
                    position,
                    f"{where(stream, version)}: differs from the event the checkpoint "
                    f"of size {size} signed",
                )
            position += 1
        after = rows[-1][0]
    return Problem(
        begin,
        f"the Merkle root of the first {size} events does not match its checkpoint: an "
        f"event at a log position from {begin} to {size - 1} was changed, removed or "
        "inserted (the stored Merkle leaves, which would say which, were changed too)",
    )
