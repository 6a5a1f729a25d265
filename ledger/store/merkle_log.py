"""The Merkle log's tables: leaves in global log order, perfect subtree nodes,
and signed checkpoints. Derived data, append-only like the events; the
verifier never trusts it, only recomputes it and compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from uuid import UUID

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.merkle import hash_children
from ledger.store.recorders import LeafRow, NodeRow, Row, SealedRecorder


def stream_of(originator_id: object) -> str:
    """The stream id as the envelope signs it (UUIDs hyphenated on every store)."""
    if isinstance(originator_id, UUID):
        return str(originator_id)
    text = str(originator_id)
    if len(text) == 32:
        try:
            return str(UUID(hex=text))
        except ValueError:
            pass
    return text


class MerkleLogTables:
    """Typed access to the events (raw, in log order) and the Merkle tables."""

    def __init__(self, recorder: SealedRecorder) -> None:
        self.recorder = recorder
        sql = recorder.sql
        self._rows_after = sql(
            "SELECT {id}, originator_id, originator_version, topic, state FROM {events} "
            "WHERE {id} > %s ORDER BY {id} LIMIT %s"
        )
        self._rows_between = sql(
            "SELECT {id}, originator_id, originator_version, topic, state FROM {events} "
            "WHERE {id} > %s AND {id} <= %s ORDER BY {id}"
        )
        self._row_by_id = sql(
            "SELECT {id}, originator_id, originator_version, topic, state FROM {events} "
            "WHERE {id} = %s"
        )
        self._row_by_stream = sql(
            "SELECT {id}, originator_id, originator_version, topic, state FROM {events} "
            "WHERE originator_id = %s AND originator_version = %s"
        )
        self._count_ids = sql("SELECT COUNT(*), MAX({id}) FROM {events}")
        self._id_at_offset = sql("SELECT {id} FROM {events} ORDER BY {id} LIMIT 1 OFFSET %s")
        self._tail = sql(
            "SELECT leaf_index, notification_id FROM {leaves} ORDER BY leaf_index DESC LIMIT 1"
        )
        self._leaf = sql("SELECT leaf_hash FROM {leaves} WHERE leaf_index = %s")
        self._leaves_range = sql(
            "SELECT leaf_index, notification_id, leaf_hash FROM {leaves} "
            "WHERE leaf_index >= %s AND leaf_index < %s ORDER BY leaf_index"
        )
        self._leaf_of = sql("SELECT leaf_index FROM {leaves} WHERE notification_id = %s")
        self._node = sql("SELECT hash FROM {nodes} WHERE level = %s AND idx = %s")
        self._insert_leaf = sql(
            "INSERT INTO {leaves} (leaf_index, notification_id, leaf_hash) VALUES (%s, %s, %s)"
        )
        self._insert_node = sql("INSERT INTO {nodes} (level, idx, hash) VALUES (%s, %s, %s)")
        self._insert_checkpoint = sql(
            "INSERT INTO {checkpoints} (tree_size, root, note) VALUES (%s, %s, %s)"
        )
        self._checkpoints = sql("SELECT note FROM {checkpoints} ORDER BY tree_size")
        self._latest = sql("SELECT note FROM {checkpoints} ORDER BY tree_size DESC LIMIT 1")
        self._is_sqlite = recorder.dialect == "sqlite"

    def _key(self, stream: str) -> object:
        if self._is_sqlite:
            try:
                return UUID(stream).hex
            except ValueError:
                return stream
        return UUID(stream)

    # Events, raw and in log order.
    def rows_after(self, after_id: int, limit: int) -> list[Row]:
        with self.recorder.read() as cursor:
            cursor.execute(self._rows_after, (after_id, limit))
            rows: list[Row] = cursor.fetchall()
            return rows

    def rows_between(self, after_id: int, last_id: int) -> list[Row]:
        with self.recorder.read() as cursor:
            cursor.execute(self._rows_between, (after_id, last_id))
            rows: list[Row] = cursor.fetchall()
            return rows

    def row_by_id(self, notification_id: int) -> Row | None:
        with self.recorder.read() as cursor:
            cursor.execute(self._row_by_id, (notification_id,))
            row = cursor.fetchone()
        return tuple(row) if row else None

    def row_by_stream(self, stream: str, version: int) -> Row | None:
        with self.recorder.read() as cursor:
            cursor.execute(self._row_by_stream, (self._key(stream), version))
            row = cursor.fetchone()
        return tuple(row) if row else None

    def event_count(self) -> tuple[int, int]:
        """(number of events, highest notification id or 0)."""
        with self.recorder.read() as cursor:
            cursor.execute(self._count_ids)
            count, highest = cursor.fetchone()
        return int(count), int(highest or 0)

    def id_at_offset(self, offset: int) -> int | None:
        with self.recorder.read() as cursor:
            cursor.execute(self._id_at_offset, (offset,))
            row = cursor.fetchone()
        return int(row[0]) if row else None

    # The Merkle tables.
    def tail(self) -> tuple[int, int]:
        """(tree size, notification id of the last leaf or 0)."""
        with self.recorder.read() as cursor:
            cursor.execute(self._tail)
            row = cursor.fetchone()
        return (int(row[0]) + 1, int(row[1])) if row else (0, 0)

    def leaf_hash(self, index: int) -> bytes | None:
        with self.recorder.read() as cursor:
            cursor.execute(self._leaf, (index,))
            row = cursor.fetchone()
        return bytes(row[0]) if row else None

    def leaves(self, begin: int, end: int) -> list[LeafRow]:
        with self.recorder.read() as cursor:
            cursor.execute(self._leaves_range, (begin, end))
            return [(int(i), int(n), bytes(h)) for i, n, h in cursor.fetchall()]

    def leaf_index_of(self, notification_id: int) -> int | None:
        with self.recorder.read() as cursor:
            cursor.execute(self._leaf_of, (notification_id,))
            row = cursor.fetchone()
        return int(row[0]) if row else None

    def node(self, level: int, index: int) -> bytes | None:
        if level == 0:
            return self.leaf_hash(index)
        with self.recorder.read() as cursor:
            cursor.execute(self._node, (level, index))
            row = cursor.fetchone()
        return bytes(row[0]) if row else None

    def append(
        self, leaves: Sequence[LeafRow], nodes: Sequence[NodeRow], checkpoint: Checkpoint | None
    ) -> None:
        """Store new leaves, their completed subtrees and a checkpoint, atomically."""
        with self.recorder.write() as cursor:
            for leaf in leaves:
                cursor.execute(self._insert_leaf, leaf)
            for node in nodes:
                cursor.execute(self._insert_node, node)
            if checkpoint is not None:
                cursor.execute(
                    self._insert_checkpoint,
                    (checkpoint.size, checkpoint.root, checkpoint.to_note()),
                )

    def checkpoints(self) -> list[Checkpoint]:
        with self.recorder.read() as cursor:
            cursor.execute(self._checkpoints)
            notes = [r[0] for r in cursor.fetchall()]
        return [Checkpoint.from_note(note) for note in notes]

    def latest_checkpoint(self) -> Checkpoint | None:
        with self.recorder.read() as cursor:
            cursor.execute(self._latest)
            row = cursor.fetchone()
        return Checkpoint.from_note(row[0]) if row else None

    def subtree_reader(self) -> SubtreeReader:
        return SubtreeReader(self)


class SubtreeReader:
    """MTH of any leaf range [begin, end) from stored perfect subtrees.

    A perfect aligned range is one stored node; any other range splits at the
    largest power of two below its size (RFC 9162's own split), so a proof
    needs O(log n) lookups, never the whole log.
    """

    def __init__(self, tables: MerkleLogTables) -> None:
        self._tables = tables
        self._cached = lru_cache(maxsize=4096)(self._compute)

    def __call__(self, begin: int, end: int) -> bytes:
        return self._cached(begin, end)

    def _compute(self, begin: int, end: int) -> bytes:
        size = end - begin
        if size & (size - 1) == 0 and begin % size == 0:
            level = size.bit_length() - 1
            found = self._tables.node(level, begin >> level)
            if found is None:
                raise LookupError(f"no stored Merkle node for leaves [{begin}, {end})")
            return found
        split = 1 << ((size - 1).bit_length() - 1)
        return hash_children(self(begin, begin + split), self(begin + split, end))
