"""A mirror's store as it would be with the events it is about to add.

The mirror checks what the source sent before it writes a byte: `verify`
itself runs (resumed from the mirror's saved state) over the mirror store's
rows followed by the new ones, held here in memory with the notification ids
they will be stored under, their Merkle leaves and nodes, and the source's
checkpoints among them. Every lookup verification makes answers as the store
will once they are written, so the saved state it leaves holds the row ids
and digests the next run re-reads from the store.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection
from typing import Any

from ledger.store.merkle_log import CheckpointRow, MerkleLogTables, stream_of
from ledger.store.recorders import Cursor, LeafRow, NodeRow, Row


class PendingTables(MerkleLogTables):
    """The stored tables, then `rows` (ids above every stored one, ascending),
    `leaves`, `nodes` and `checkpoints` not yet written."""

    def __init__(
        self,
        stored: MerkleLogTables,
        rows: list[Row],
        leaves: list[LeafRow],
        nodes: list[NodeRow],
        checkpoints: list[CheckpointRow],
    ) -> None:
        super().__init__(stored.recorder)
        self._mine_count, self._top = stored.event_count()
        if rows and rows[0][0] <= self._top:
            raise ValueError("pending rows must come after every stored row")
        self.pending = rows
        self._mine_ids = [row[0] for row in rows]
        self._mine_by_id = {row[0]: row for row in rows}
        self._mine_by_stream = {(stream_of(row[1]), row[2]): row for row in rows}
        self._pleaves = {leaf[0]: leaf for leaf in leaves}
        # Every pending leaf and node lies at or past this leaf: ranges below it are the store's.
        self._first_pending = min(self._pleaves, default=None)
        self._mine_leaf_of = {leaf[1]: leaf[0] for leaf in leaves}
        self._mine_nodes = {(level, index): value for level, index, value in nodes}
        self._mine_checkpoints = checkpoints

    def _pending_between(self, after_id: int, last_id: int) -> list[Row]:
        begin = bisect.bisect_right(self._mine_ids, after_id)
        end = bisect.bisect_right(self._mine_ids, last_id)
        return self.pending[begin:end]

    # Events.
    def rows_after(self, after_id: int, limit: int, cursor: Cursor | None = None) -> list[Row]:
        stored = super().rows_after(after_id, limit, cursor) if after_id < self._top else []
        more = self._pending_between(after_id, self._mine_ids[-1]) if self._mine_ids else []
        return (stored + more)[:limit]

    def rows_between(self, after_id: int, last_id: int) -> list[Row]:
        stored = (
            super().rows_between(after_id, min(last_id, self._top)) if after_id < self._top else []
        )
        return stored + self._pending_between(after_id, last_id)

    def streams_between(self, after_id: int, last_id: int) -> set[object]:
        stored = super().streams_between(after_id, last_id) if after_id < self._top else set()
        return stored | {row[1] for row in self._pending_between(after_id, last_id)}

    def row_by_id(self, notification_id: int, cursor: Cursor | None = None) -> Row | None:
        found = self._mine_by_id.get(notification_id)
        return found if found is not None else super().row_by_id(notification_id, cursor)

    def row_by_stream(self, stream: str, version: int, cursor: Cursor | None = None) -> Row | None:
        found = super().row_by_stream(stream, version, cursor)
        return found if found is not None else self._mine_by_stream.get((stream, version))

    def last_row(self) -> Row | None:
        return self.pending[-1] if self.pending else super().last_row()

    def event_count(self) -> tuple[int, int]:
        return self._mine_count + len(self.pending), self.highest_id()

    def highest_id(self, cursor: Cursor | None = None) -> int:
        return self._mine_ids[-1] if self._mine_ids else self._top

    def count_between(self, after_id: int, last_id: int, cursor: Cursor | None = None) -> int:
        stored = super().count_between(after_id, last_id, cursor) if after_id < self._top else 0
        return stored + len(self._pending_between(after_id, last_id))

    def position_of(self, notification_id: int) -> int:
        if notification_id <= self._top + 1:
            return super().position_of(notification_id)
        return self._mine_count + bisect.bisect_left(self._mine_ids, notification_id)

    def id_at_offset(self, offset: int) -> int | None:
        if offset < self._mine_count:
            return super().id_at_offset(offset)
        index = offset - self._mine_count
        return self._mine_ids[index] if index < len(self._mine_ids) else None

    def id_after(self, after_id: int, offset: int) -> int | None:
        stored = super().count_between(after_id, self._top) if after_id < self._top else 0
        if offset < stored:
            return super().id_after(after_id, offset)
        later = self._mine_ids[bisect.bisect_right(self._mine_ids, after_id) :]
        index = offset - stored
        return later[index] if index < len(later) else None

    # The Merkle tables.
    def tail(self, cursor: Cursor | None = None) -> tuple[int, int]:
        if self._pleaves:
            last = self._pleaves[max(self._pleaves)]
            return last[0] + 1, last[1]
        return super().tail(cursor)

    def leaf_hash(self, index: int, cursor: Cursor | None = None) -> bytes | None:
        found = self._pleaves.get(index)
        return found[2] if found is not None else super().leaf_hash(index, cursor)

    def leaves(self, begin: int, end: int) -> list[LeafRow]:
        stored = super().leaves(begin, end)
        return stored + [self._pleaves[i] for i in sorted(self._pleaves) if begin <= i < end]

    def tree_rows(
        self, begin: int, end: int, cursor: Cursor | None = None
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        leaves, nodes = super().tree_rows(begin, end, cursor)
        if self._first_pending is None or end <= self._first_pending:
            return leaves, nodes
        leaves += [self._pleaves[i] for i in sorted(self._pleaves) if begin <= i < end]
        levels = (end - begin).bit_length() - 1
        mine = sorted(
            (level, index, value)
            for (level, index), value in self._mine_nodes.items()
            if 1 <= level <= levels and begin >> level <= index < end >> level
        )
        # As the store will answer once they are written, by level and index: a
        # level's pending nodes come after its stored ones (they are further right).
        merged: list[tuple[Any, ...]] = []
        for row in nodes:
            while mine and type(row[0]) is int and mine[0][0] < row[0]:
                merged.append(mine.pop(0))
            merged.append(row)
        return leaves, merged + mine  # the pending leaves come after every stored one

    def leaf_index_of(self, notification_id: int) -> int | None:
        found = self._mine_leaf_of.get(notification_id)
        return found if found is not None else super().leaf_index_of(notification_id)

    def node(self, level: int, index: int, cursor: Cursor | None = None) -> bytes | None:
        if level == 0:
            return self.leaf_hash(index, cursor)
        found = self._mine_nodes.get((level, index))
        return found if found is not None else super().node(level, index, cursor)

    def nodes_at(
        self, keys: Collection[tuple[int, int]], cursor: Cursor | None = None
    ) -> dict[tuple[int, int], bytes]:
        found = super().nodes_at(keys, cursor)
        for level, index in keys:
            mine = self._pleaves.get(index) if level == 0 else None
            value = mine[2] if mine is not None else self._mine_nodes.get((level, index))
            if value is not None:
                found[(level, index)] = value
        return found

    def checkpoint_rows(
        self, from_size: int | None = None, cursor: Cursor | None = None
    ) -> list[CheckpointRow]:
        mine = [
            row
            for row in self._mine_checkpoints
            if from_size is None or (type(row[0]) is int and row[0] >= from_size)
        ]
        return super().checkpoint_rows(from_size, cursor) + mine

    def newest_checkpoint_row(self) -> CheckpointRow | None:
        rows: list[Any] = [row for row in self.checkpoint_rows() if type(row[0]) is int]
        return max(rows, key=lambda row: row[0]) if rows else super().newest_checkpoint_row()
