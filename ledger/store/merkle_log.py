"""The Merkle log's tables: leaves in global log order, perfect subtree nodes,
and signed checkpoints. Derived data, append-only like the events; the
verifier never trusts it, only recomputes it and compares.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Collection, Generator, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import lru_cache
from typing import Any, Final, TypeGuard
from uuid import UUID

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.merkle import HASH_SIZE, hash_children
from ledger.errors import VerificationError
from ledger.store.recorder_type import SealedRecorder
from ledger.store.recorders import Cursor, LeafRow, NodeRow, Row, archived_source

CheckpointRow = tuple[object, object]  # (tree_size column, note column), both untrusted


class StoredRowError(LookupError):
    """A Merkle row is missing or does not hold what its table promises."""


def _is_hash(value: object) -> TypeGuard[bytes | bytearray | memoryview]:
    return isinstance(value, bytes | bytearray | memoryview) and len(value) == HASH_SIZE


def as_hash(value: object, what: str) -> bytes:
    """A stored hash column as 32 bytes, or `StoredRowError` naming the row."""
    if _is_hash(value):
        return bytes(value)
    raise StoredRowError(f"{what} does not hold a {HASH_SIZE}-byte hash")


def parse_checkpoint_row(row: CheckpointRow) -> Checkpoint:
    """Parse a stored checkpoint; a bad note or a row whose `tree_size` column
    disagrees with the size it signs is named by that column."""
    column, note = row
    try:
        checkpoint = Checkpoint.from_note(note)
    except VerificationError as exc:
        raise VerificationError(str(exc), where=f"checkpoint row {column!r}") from exc
    if column != checkpoint.size:
        raise VerificationError(
            f"its row says size {column!r} (the row was altered or re-inserted)",
            where=f"checkpoint of size {checkpoint.size}",
        )
    return checkpoint


_HEX_ID: Final = re.compile("[0-9a-fA-F]{32}")


_LEVEL_INDEX = operator.itemgetter(0, 1)


def _tuples(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Rows as plain tuples: our read cursors give them already (a caller's write
    cursor may give `sqlite3.Row`s); a Merkle read is hundreds of thousands of rows."""
    return rows if not rows or type(rows[0]) is tuple else [tuple(row) for row in rows]


def _by_key(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Node rows by (level, index): as each level's index range reads them
    (already in order, so the sort only checks it), without an ORDER BY over
    the union, which SQLite answers with a sort of every row. Keys of odd
    types (an edit) keep the order they came in."""
    try:
        return sorted(rows, key=_LEVEL_INDEX)
    except TypeError:
        return rows


def stream_of(originator_id: object) -> str:
    """The stream id as the envelope signs it (UUIDs hyphenated on every store)."""
    if isinstance(originator_id, UUID):
        return str(originator_id)
    text = str(originator_id)
    if len(text) == 32 and _HEX_ID.fullmatch(text):
        # What str(UUID(hex=text)) gives for 32 hex digits, without building one
        # (a verify reads a stream id per stream per chunk); any other text of 32
        # characters UUID() may still take ("0x" and "_" are int syntax) below.
        low = text.lower()
        return f"{low[:8]}-{low[8:12]}-{low[12:16]}-{low[16:20]}-{low[20:]}"
    if len(text) == 32:
        try:
            return str(UUID(hex=text))
        except ValueError:
            pass
    return text


# Keys looked up in one statement: 800 placeholders, under every SQLite's limit.
_KEYS_PER_QUERY: Final = 400


class _LogStatements:
    """The log's rows: the events, and in the place of each event that left for
    an archive its marker row (`ledger.store.archived`: its stream, version and
    leaf hash, topic NULL), merged in id order. Each part's index gives its own
    order: the databases merge the two without a sort."""

    def __init__(self, recorder: SealedRecorder) -> None:
        self.recorder = recorder
        self.archived = archived_source(recorder)

    def sql(self, template: str) -> Any:
        return self.recorder.sql(template.replace("{archived}", self.archived))

    def log(self, columns: str, where: str, tail: str = "") -> Any:
        marker = columns.replace("topic, state", "NULL, leaf_hash").replace(
            "{id}", "notification_id"
        )
        return self.sql(
            f"SELECT {columns} FROM {{events}} WHERE {where} UNION ALL "
            f"SELECT {marker} FROM {{archived}} "
            f"WHERE {where.replace('{id}', 'notification_id')}{tail}"
        )

    def count(self, where: str) -> Any:
        marker = where.replace("{id}", "notification_id")
        return self.sql(
            f"SELECT (SELECT COUNT(*) FROM {{events}} WHERE {where}) + "
            f"(SELECT COUNT(*) FROM {{archived}} WHERE {marker})"
        )


class MerkleLogTables:
    """Typed access to the log (the events, raw, in log order, with each archived
    event's place among them: `_LogStatements`) and the Merkle tables."""

    def __init__(self, recorder: SealedRecorder) -> None:
        self.recorder = recorder
        self._is_sqlite = recorder.dialect == "sqlite"
        statements = _LogStatements(recorder)
        sql, log, count = statements.sql, statements.log, statements.count
        row = "{id}, originator_id, originator_version, topic, state"
        self._rows_after = log(row, "{id} > %s", " ORDER BY 1 LIMIT %s")
        self._rows_between = log(row, "{id} > %s AND {id} <= %s", " ORDER BY 1")
        self._row_by_id = log(row, "{id} = %s")
        self._row_by_stream = log(row, "originator_id = %s AND originator_version = %s")
        self._position_of = count("{id} < %s")
        self._count_ids = sql(
            "SELECT (SELECT COUNT(*) FROM {events}) + (SELECT COUNT(*) FROM {archived}), "
            "(SELECT MAX(m) FROM (SELECT MAX({id}) AS m FROM {events} UNION ALL "
            "SELECT MAX(notification_id) FROM {archived}) AS t)"
        )
        self._id_at_offset = log("{id}", "1 = 1", " ORDER BY 1 LIMIT 1 OFFSET %s")
        self._id_after = log("{id}", "{id} > %s", " ORDER BY 1 LIMIT 1 OFFSET %s")
        self._tail = sql(
            "SELECT leaf_index, notification_id FROM {leaves} ORDER BY leaf_index DESC LIMIT 1"
        )
        self._leaf = sql("SELECT leaf_hash FROM {leaves} WHERE leaf_index = %s")
        self._leaves_range = sql(
            "SELECT leaf_index, notification_id, leaf_hash FROM {leaves} "
            "WHERE leaf_index >= %s AND leaf_index < %s ORDER BY leaf_index"
        )
        self._leaf_of = sql("SELECT leaf_index FROM {leaves} WHERE notification_id = %s")
        self._leaves_of = sql(
            "SELECT notification_id, leaf_index FROM {leaves} "
            "WHERE notification_id >= %s AND notification_id <= %s"
        )
        self._node = sql("SELECT hash FROM {nodes} WHERE level = %s AND idx = %s")
        self._insert_leaf = sql(
            "INSERT INTO {leaves} (leaf_index, notification_id, leaf_hash) VALUES (%s, %s, %s)"
        )
        self._insert_node = sql("INSERT INTO {nodes} (level, idx, hash) VALUES (%s, %s, %s)")
        self._insert_checkpoint = sql(
            "INSERT INTO {checkpoints} (tree_size, root, note) VALUES (%s, %s, %s)"
        )
        self._checkpoint_rows = sql("SELECT tree_size, note FROM {checkpoints}")
        self._checkpoint_rows_from = sql(
            "SELECT tree_size, note FROM {checkpoints} WHERE tree_size >= %s"
        )
        self._newest_checkpoint_row = sql(
            "SELECT tree_size, note FROM {checkpoints} ORDER BY tree_size DESC LIMIT 1"
        )
        self._highest_id = sql(
            "SELECT MAX(m) FROM (SELECT MAX({id}) AS m FROM {events} UNION ALL "
            "SELECT MAX(notification_id) FROM {archived}) AS t"
        )
        self._lowest_id = sql(
            "SELECT MIN(m) FROM (SELECT MIN({id}) AS m FROM {events} UNION ALL "
            "SELECT MIN(notification_id) FROM {archived}) AS t"
        )
        self._row_count = sql(
            "SELECT (SELECT COUNT(*) FROM {events}) + (SELECT COUNT(*) FROM {archived})"
        )
        self._count_between = count("{id} > %s AND {id} <= %s")
        self._streams_between = sql(
            "SELECT originator_id FROM {events} WHERE {id} > %s AND {id} <= %s UNION "
            "SELECT originator_id FROM {archived} WHERE notification_id > %s "
            "AND notification_id <= %s"
        )
        self._last_row = log(row, "1 = 1", " ORDER BY 1 DESC LIMIT 1")
        self._nodes_under_sql: dict[int, Any] = {}

    def stream_key(self, stream: str) -> object:
        """The stream id column as this store holds it (SQLite: bare hex text)."""
        return self._key(stream)

    def _key(self, stream: str) -> object:
        if self._is_sqlite:
            try:
                return UUID(stream).hex
            except ValueError:
                return stream
        return UUID(stream)

    @contextmanager
    def _reading(self, cursor: Cursor | None) -> Iterator[Cursor]:
        """The caller's cursor (inside its transaction), or a read transaction of our own."""
        if cursor is not None:
            yield cursor
            return
        with self.recorder.read() as own:
            yield own

    def _one(self, statement: Any, params: tuple[Any, ...], cursor: Cursor | None) -> Any:
        with self._reading(cursor) as c:
            c.execute(statement, params)
            return c.fetchone()

    # Events, raw and in log order.
    def rows_after(self, after_id: int, limit: int, cursor: Cursor | None = None) -> list[Row]:
        with self._reading(cursor) as c:
            c.execute(self._rows_after, (after_id, after_id, limit))
            rows: list[Row] = c.fetchall()
            return rows

    def existing_streams(self, streams: list[UUID], cursor: Cursor | None = None) -> set[UUID]:
        """Which of `streams` have a first event: one query, however many."""
        if not streams:
            return set()
        marks = ", ".join(["%s"] * len(streams))
        statement = self.recorder.sql(
            f"SELECT originator_id FROM {{events}} WHERE originator_version = 1 "
            f"AND originator_id IN ({marks})"
        )
        keys = tuple(s.hex if self._is_sqlite else s for s in streams)
        with self._reading(cursor) as c:
            c.execute(statement, keys)
            return {UUID(stream_of(row[0])) for row in c.fetchall()}

    def rows_between(self, after_id: int, last_id: int) -> list[Row]:
        with self.recorder.read() as cursor:
            cursor.execute(self._rows_between, (after_id, last_id, after_id, last_id))
            rows: list[Row] = cursor.fetchall()
            return rows

    def row_batches(self, after_id: int, last_id: int, size: int) -> Generator[list[Row]]:
        """The rows of `rows_between`, `size` at a time (one query, one read)."""
        with self.recorder.read() as cursor:
            cursor.execute(self._rows_between, (after_id, last_id, after_id, last_id))
            # eventsourcing's SQLite cursor wraps sqlite3's without its fetchmany.
            source: Any = getattr(cursor, "sqlite_cursor", cursor)
            fetchmany = source.fetchmany
            while batch := fetchmany(size):
                yield batch

    def streams_between(self, after_id: int, last_id: int) -> set[object]:
        """The stream id columns (as stored) of the rows with id in (after_id, last_id]."""
        with self.recorder.read() as cursor:
            cursor.execute(self._streams_between, (after_id, last_id, after_id, last_id))
            return {row[0] for row in cursor.fetchall()}

    def row_by_id(self, notification_id: int, cursor: Cursor | None = None) -> Row | None:
        row = self._one(self._row_by_id, (notification_id, notification_id), cursor)
        return tuple(row) if row else None

    def row_by_stream(self, stream: str, version: int, cursor: Cursor | None = None) -> Row | None:
        key = self._key(stream)
        row = self._one(self._row_by_stream, (key, version, key, version), cursor)
        return tuple(row) if row else None

    def indexed_requests(
        self, request_ids: list[str], cursor: Cursor | None = None
    ) -> dict[str, tuple[UUID, int]]:
        """Which of `request_ids` an event records, and where (stream, version):
        the request index, one query however many (where to look, not what)."""
        found: dict[str, tuple[UUID, int]] = {}
        with self._reading(cursor) as c:
            for start in range(0, len(request_ids), _KEYS_PER_QUERY):
                part = request_ids[start : start + _KEYS_PER_QUERY]
                marks = ", ".join(["%s"] * len(part))
                c.execute(
                    self.recorder.sql(
                        "SELECT request_id, originator_id, originator_version FROM {requests} "
                        f"WHERE request_id IN ({marks})"
                    ),
                    tuple(part),
                )
                found.update((r[0], (UUID(stream_of(r[1])), r[2])) for r in c.fetchall())
        return found

    def last_row(self) -> Row | None:
        """The event with the highest notification id, if any."""
        row = self._one(self._last_row, (), None)
        return tuple(row) if row else None

    def event_count(self) -> tuple[int, int]:
        """(number of events, highest notification id or 0)."""
        count, highest = self._one(self._count_ids, (), None)
        return int(count), int(highest or 0)

    def highest_id(self, cursor: Cursor | None = None) -> int:
        """The highest notification id, or 0: one index lookup, unlike a count."""
        row = self._one(self._highest_id, (), cursor)
        return int(row[0] or 0)

    def lowest_id(self) -> int:
        """The lowest notification id, or 0."""
        return int(self._one(self._lowest_id, (), None)[0] or 0)

    def row_count(self) -> int:
        """Every event row: a count with no range, which a store may take from
        its smallest index (SQLite walks the stream index, not the table)."""
        return int(self._one(self._row_count, (), None)[0])

    def count_between(self, after_id: int, last_id: int, cursor: Cursor | None = None) -> int:
        """How many events have ids in (after_id, last_id]. From the log's start, in
        the caller's SQLite transaction, when that is every row: a count with no range
        (SQLite takes it from its smallest index); a count from a later id asks no more."""
        if after_id <= 0 and cursor is not None and self._is_sqlite:
            high = self._one(self._highest_id, (), cursor)[0]
            if high is not None and high <= last_id:
                return int(self._one(self._row_count, (), cursor)[0])
        return int(
            self._one(self._count_between, (after_id, last_id, after_id, last_id), cursor)[0]
        )

    def position_of(self, notification_id: int) -> int:
        """The log position of the row with this notification id (rows before it)."""
        return int(self._one(self._position_of, (notification_id, notification_id), None)[0])

    def id_at_offset(self, offset: int) -> int | None:
        row = self._one(self._id_at_offset, (offset,), None)
        return int(row[0]) if row else None

    def id_after(self, after_id: int, offset: int) -> int | None:
        """The id `offset` rows past the first event after `after_id`: from a known
        id, an index seek skips only those rows (`id_at_offset` skips all before)."""
        row = self._one(self._id_after, (after_id, after_id, offset), None)
        return int(row[0]) if row else None

    # The Merkle tables. Their rows are untrusted: a column that does not
    # hold what the table promises raises `StoredRowError`, never a TypeError.
    def tail(self, cursor: Cursor | None = None) -> tuple[int, int]:
        """(tree size, notification id of the last leaf or 0)."""
        row = self._one(self._tail, (), cursor)
        if not row:
            return 0, 0
        index, notification_id = row[0], row[1]
        if type(index) is not int or type(notification_id) is not int:
            raise StoredRowError(f"the last Merkle leaf row ({index!r}) is malformed")
        return index + 1, notification_id

    def leaf_hash(self, index: int, cursor: Cursor | None = None) -> bytes | None:
        row = self._one(self._leaf, (index,), cursor)
        return as_hash(row[0], f"Merkle leaf {index}") if row else None

    def leaves(self, begin: int, end: int) -> list[LeafRow]:
        with self.recorder.read() as cursor:
            cursor.execute(self._leaves_range, (begin, end))
            found = cursor.fetchall()
        leaves = []
        for index, notification_id, leaf_hash in found:
            if type(notification_id) is not int:
                raise StoredRowError(f"Merkle leaf {index} names no notification id")
            leaves.append((int(index), notification_id, as_hash(leaf_hash, f"Merkle leaf {index}")))
        return leaves

    def tree_rows(
        self, begin: int, end: int, cursor: Cursor | None = None
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The Merkle rows under leaves [begin, end), as stored (untyped: the
        caller compares them with the tree it computed): the leaves (index,
        notification id, hash) by index, and each node whose subtree lies inside
        (level, index, hash) by level and index. `begin` is a multiple of a power
        of two >= end - begin (a verification chunk), so a level's nodes are a
        range of indexes."""
        if end <= begin:
            return [], []
        levels = (end - begin).bit_length() - 1
        with self._reading(cursor) as c:
            c.execute(self._leaves_range, (begin, end))
            leaves = _tuples(c.fetchall())
            if not levels:
                return leaves, []
            c.execute(
                self._nodes_under(levels),
                tuple(n for lv in range(1, levels + 1) for n in (lv, begin >> lv, end >> lv)),
            )
            return leaves, _by_key(_tuples(c.fetchall()))

    def _nodes_under(self, levels: int) -> Any:
        """`tree_rows`' node query for levels 1..`levels`: an index range each."""
        found = self._nodes_under_sql.get(levels)
        if found is None:
            part = (
                "SELECT level, idx, hash FROM {nodes} WHERE level = %s AND idx >= %s AND idx < %s"
            )
            found = self._nodes_under_sql[levels] = self.recorder.sql(
                " UNION ALL ".join([f"SELECT * FROM ({part}) AS l{lv}" for lv in range(levels)])
            )
        return found

    def leaf_index_of(self, notification_id: int) -> int | None:
        row = self._one(self._leaf_of, (notification_id,), None)
        return int(row[0]) if row else None

    def leaf_indexes(self, first_id: int, last_id: int) -> dict[int, int]:
        """Notification id -> leaf index of the leaves naming ids in [first_id,
        last_id]: one query for a page of events (the feed's)."""
        with self.recorder.read() as cursor:
            cursor.execute(self._leaves_of, (first_id, last_id))
            return {int(row[0]): int(row[1]) for row in cursor.fetchall()}

    def nodes_at(
        self, keys: Collection[tuple[int, int]], cursor: Cursor | None = None
    ) -> dict[tuple[int, int], bytes]:
        """The stored subtree hashes of many (level, index) keys (level 0: leaves),
        a query per table per _KEYS_PER_QUERY keys. A lookup each is a round trip
        each on PostgreSQL: the proofs between a log's checkpoints took a third
        of a verify. A key stored twice, or not as a hash, is left out: the
        one-by-one lookup (`node`) then names what is wrong with it."""
        found: dict[tuple[int, int], bytes] = {}
        leaves = sorted(index for level, index in keys if level == 0)
        nodes = sorted(key for key in keys if key[0] != 0)
        with self._reading(cursor) as c:
            for start in range(0, len(leaves), _KEYS_PER_QUERY):
                part = leaves[start : start + _KEYS_PER_QUERY]
                c.execute(self.leaves_query(len(part)), tuple(part))
                for index, value in c.fetchall():
                    if _is_hash(value):
                        found[(0, int(index))] = bytes(value)
            for start in range(0, len(nodes), _KEYS_PER_QUERY):
                pairs = nodes[start : start + _KEYS_PER_QUERY]
                c.execute(
                    self.nodes_query(len(pairs)),
                    tuple(number for pair in pairs for number in pair),
                )
                twice: set[tuple[int, int]] = set()
                for level, index, value in c.fetchall():
                    key = (int(level), int(index))
                    if key in found:  # only by an edit (the primary key forbids it)
                        twice.add(key)
                    if _is_hash(value):
                        found[key] = bytes(value)
                for key in twice:
                    found.pop(key, None)
        return found

    def leaves_query(self, count: int) -> Any:
        """`nodes_at`'s query for `count` leaf indexes."""
        marks = ", ".join(["%s"] * count)
        return self.recorder.sql(
            f"SELECT leaf_index, leaf_hash FROM {{leaves}} WHERE leaf_index IN ({marks})"
        )

    def nodes_query(self, count: int) -> Any:
        """`nodes_at`'s query for `count` (level, index) pairs, flattened. A join on
        the keys, not `(level, idx) IN (VALUES ...)`: SQLite answers that
        row-value IN by scanning the whole table (a million-event verify spent
        seconds there)."""
        marks = ", ".join(["(%s, %s)"] * count)
        return self.recorder.sql(
            f"WITH wanted (level, idx) AS (VALUES {marks}) "
            "SELECT n.level, n.idx, n.hash FROM wanted "
            "JOIN {nodes} AS n ON n.level = wanted.level AND n.idx = wanted.idx"
        )

    def node(self, level: int, index: int, cursor: Cursor | None = None) -> bytes | None:
        if level == 0:
            return self.leaf_hash(index, cursor)
        row = self._one(self._node, (level, index), cursor)
        return as_hash(row[0], f"Merkle node ({level}, {index})") if row else None

    def append(
        self,
        leaves: Sequence[LeafRow],
        nodes: Sequence[NodeRow],
        checkpoint: Checkpoint | None,
        cursor: Cursor | None = None,
    ) -> None:
        """Store new leaves, their completed subtrees and a checkpoint, atomically
        (in the caller's transaction when given its cursor)."""
        if cursor is None:
            with self.recorder.write() as own:
                self.append(leaves, nodes, checkpoint, own)
            return
        # One batched statement per table: a round trip per row made PostgreSQL
        # checkpointing slower than the writes it must keep up with.
        if leaves:
            cursor.executemany(self._insert_leaf, leaves)
        if nodes:
            cursor.executemany(self._insert_node, nodes)
        if checkpoint is not None:
            cursor.execute(
                self._insert_checkpoint,
                (checkpoint.size, checkpoint.root, checkpoint.to_note()),
            )

    def checkpoint_rows(
        self, from_size: int | None = None, cursor: Cursor | None = None
    ) -> list[CheckpointRow]:
        """Raw checkpoint rows (every one, or those whose column is >= `from_size`,
        a hint only: callers parse the note and check the column against it)."""
        with self._reading(cursor) as c:
            if from_size is None:
                c.execute(self._checkpoint_rows)
            else:
                c.execute(self._checkpoint_rows_from, (from_size,))
            return [(r[0], r[1]) for r in c.fetchall()]

    def newest_checkpoint_row(self) -> CheckpointRow | None:
        """The row with the largest `tree_size` column (a hint: parse and check it)."""
        row = self._one(self._newest_checkpoint_row, (), None)
        return (row[0], row[1]) if row else None

    def checkpoints(self) -> list[Checkpoint]:
        """Every stored checkpoint, parsed, by signed size (signatures not checked)."""
        parsed = [parse_checkpoint_row(row) for row in self.checkpoint_rows()]
        return sorted(parsed, key=lambda c: (c.size, c.issued_at))

    def latest_checkpoint(self) -> Checkpoint | None:
        """The stored checkpoint of the largest signed size (signature not checked:
        see `checkpoint.newest_valid` for one to trust)."""
        checkpoints = self.checkpoints()
        return checkpoints[-1] if checkpoints else None

    def subtree_reader(self, cursor: Cursor | None = None) -> SubtreeReader:
        """Subtree hashes read through `cursor` (one read transaction for many
        proofs: a proof per checkpoint is thousands of lookups), else each its own."""
        return SubtreeReader(self, cursor)

    def reading(self) -> AbstractContextManager[Cursor]:
        """One read transaction, for many lookups through the same cursor."""
        return self.recorder.read()


class SubtreeReader:
    """MTH of any leaf range [begin, end) from stored perfect subtrees.

    A perfect aligned range is one stored node; any other range splits at the
    largest power of two below its size (RFC 9162's own split), so a proof
    needs O(log n) lookups, never the whole log.
    """

    def __init__(self, tables: MerkleLogTables, cursor: Cursor | None = None) -> None:
        self._tables = tables
        self._cursor = cursor
        self._cached = lru_cache(maxsize=4096)(self._compute)
        self._fetched: dict[tuple[int, int], bytes] = {}

    def __call__(self, begin: int, end: int) -> bytes:
        return self._cached(begin, end)

    def prefetch(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Read at once the stored nodes these ranges are made of (many proofs'
        ranges: `merkle.consistency_ranges`); a node not found is looked up,
        and missing, refused, when its range is asked for."""
        keys: set[tuple[int, int]] = set()
        for begin, end in ranges:
            keys.update(_perfect_parts(begin, end))
        self._fetched.update(self._tables.nodes_at(keys, self._cursor))

    def _compute(self, begin: int, end: int) -> bytes:
        size = end - begin
        if size & (size - 1) == 0 and begin % size == 0:
            level = size.bit_length() - 1
            found = self._fetched.get((level, begin >> level))
            if found is None:
                found = self._tables.node(level, begin >> level, self._cursor)
            if found is None:
                raise StoredRowError(f"no stored Merkle node for leaves [{begin}, {end})")
            return found
        split = 1 << ((size - 1).bit_length() - 1)
        return hash_children(self(begin, begin + split), self(begin + split, end))


def _perfect_parts(begin: int, end: int) -> Iterator[tuple[int, int]]:
    """The (level, index) of the stored perfect subtrees `SubtreeReader` builds
    [begin, end) from, splitting as it does."""
    size = end - begin
    if size <= 0:
        return
    if size & (size - 1) == 0 and begin % size == 0:
        level = size.bit_length() - 1
        yield level, begin >> level
        return
    split = 1 << ((size - 1).bit_length() - 1)
    yield from _perfect_parts(begin, begin + split)
    yield from _perfect_parts(begin + split, end)
