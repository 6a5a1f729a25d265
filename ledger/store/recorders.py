"""The recorders the ledger configures: eventsourcing's, plus append-only
triggers and the tables of the Merkle log and its checkpoints.

Nothing here ever updates or deletes a row: triggers refuse UPDATE and DELETE
(and TRUNCATE on PostgreSQL) on the events and on every ledger table, so a
correction can only ever be a new event. The PostgreSQL recorder is in
ledger.store.pg_recorder, imported only for a PostgreSQL store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

LEAVES = "ledger_merkle_leaves"
NODES = "ledger_merkle_nodes"
CHECKPOINTS = "ledger_checkpoints"
COSIGNATURES = "ledger_cosignatures"  # witnesses' cosigned checkpoints (ledger.store.witnessing)
# Each request id whose own event records it (a bet), to that event: where a
# retry finds its first result. An index, not a record: the signed event is
# the record, and a row that names the wrong event is refused when read.
REQUESTS = "ledger_request_index"
# Each account's stream head under the newest checkpoint, with its key and leaf
# in the account heads map (`ledger.crypto.heads_map`) the checkpoint signs.
# An index kept up to date (not append-only): every read is held to the signed
# root, and the events give it again when it does not match.
HEADS = "ledger_account_heads"
# Each archived event's place in the log once its row has left for a verified
# archive (`ledger.archive`): its stream, version and leaf hash, so the tree and
# the chains of newer events stay whole. Append-only; held by `verify` to the
# digest its archive register event signs.
ARCHIVED = "ledger_archived"
LEDGER_TABLES = (LEAVES, NODES, CHECKPOINTS, COSIGNATURES, REQUESTS, ARCHIVED)

# A raw event row: (notification id, stream id, version, topic, stored bytes).
Row = tuple[int, str, int, str, bytes]
LeafRow = tuple[int, int, bytes]  # (leaf index, notification id, leaf hash)
NodeRow = tuple[int, int, bytes]  # (level >= 1, index at that level, hash)
RequestIndexRow = tuple[str, UUID, int]  # (request id, stream, version of the event recording it)


class Cursor(Protocol):
    def execute(self, statement: Any, params: Any = ...) -> Any: ...
    def executemany(self, statement: Any, params_seq: Any) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def fetchone(self) -> Any: ...


class LedgerTables(Protocol):
    """What the checkpointer, the verifier and the proof builder need from a store."""

    dialect: str
    events_table: str

    def read(self) -> Any: ...
    def write(self) -> Any: ...
    def sql(self, template: str) -> Any: ...


def marker_leaf(topic: object, state: bytes) -> bytes | None:
    """An archived event's marker row (topic NULL; `ledger.store.archived`): its
    kept leaf hash; None for an event's row."""
    return state if topic is None and len(state) == 32 else None


def archived_source(recorder: Any) -> str:
    """What the log reads name `{archived}` by: the table, or where a store last
    opened for writing by an older release has none, no rows of its columns."""
    try:
        with recorder.read() as cursor:
            cursor.execute(recorder.sql("SELECT 1 FROM {archived} WHERE 1 = 0"))
            cursor.fetchall()
    except Exception:  # (the driver's own "no such table"; nothing else runs here)
        return _NO_ARCHIVED[recorder.dialect]
    return "{archived}"


_NO_ARCHIVED = {
    "sqlite": "(SELECT NULL AS notification_id, NULL AS position, NULL AS originator_id, "
    "NULL AS originator_version, NULL AS leaf_hash, NULL AS archive WHERE 0)",
    "postgresql": "(SELECT NULL::bigint AS notification_id, NULL::bigint AS position, "
    "NULL::uuid AS originator_id, NULL::bigint AS originator_version, NULL::bytea AS leaf_hash, "
    "NULL::text AS archive WHERE false) AS archived",
}


def _append_only_trigger(table: str, operation: str) -> str:
    return (
        f"CREATE TRIGGER IF NOT EXISTS {table}_append_only_{operation.lower()} "
        f"BEFORE {operation} ON {table} BEGIN SELECT RAISE(ABORT, "
        f"'ledger: {table} is append-only ({operation} refused)'); END"
    )


def sqlite_delete_guard(events: str) -> tuple[str, str]:
    """(drop, create) of the events' DELETE trigger: an archive's removal lifts it
    inside its own transaction and puts it back before the commit."""
    return f"DROP TRIGGER IF EXISTS {events}_append_only_delete", _append_only_trigger(
        events, "DELETE"
    )


def _sqlite_schema(events: str) -> list[str]:
    statements = [
        f"CREATE TABLE IF NOT EXISTS {LEAVES} (leaf_index INTEGER PRIMARY KEY, "
        "notification_id INTEGER NOT NULL UNIQUE, leaf_hash BLOB NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {NODES} (level INTEGER NOT NULL, idx INTEGER NOT NULL, "
        "hash BLOB NOT NULL, PRIMARY KEY (level, idx)) WITHOUT ROWID",
        f"CREATE TABLE IF NOT EXISTS {CHECKPOINTS} (tree_size INTEGER PRIMARY KEY, "
        "root BLOB NOT NULL, note TEXT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {COSIGNATURES} (tree_size INTEGER NOT NULL, "
        "witness TEXT NOT NULL, note TEXT NOT NULL, PRIMARY KEY (tree_size, witness))",
        f"CREATE TABLE IF NOT EXISTS {REQUESTS} (request_id TEXT PRIMARY KEY, "
        "originator_id TEXT NOT NULL, originator_version INTEGER NOT NULL) WITHOUT ROWID",
        f"CREATE TABLE IF NOT EXISTS {HEADS} (account TEXT PRIMARY KEY, "
        "tree_size INTEGER NOT NULL, key BLOB NOT NULL, leaf BLOB NOT NULL, "
        "version INTEGER NOT NULL, position INTEGER NOT NULL, entry_hash BLOB NOT NULL) "
        "WITHOUT ROWID",
        f"CREATE TABLE IF NOT EXISTS {ARCHIVED} (notification_id INTEGER PRIMARY KEY, "
        "position INTEGER NOT NULL UNIQUE, originator_id TEXT NOT NULL, "
        "originator_version INTEGER NOT NULL, leaf_hash BLOB NOT NULL, archive TEXT NOT NULL)",
    ]
    for table in (events, *LEDGER_TABLES):
        for operation in ("UPDATE", "DELETE"):
            statements.append(_append_only_trigger(table, operation))
    return statements


class SealedSQLiteApplicationRecorder(SQLiteApplicationRecorder):
    """eventsourcing's SQLite recorder with append-only triggers and ledger tables."""

    dialect = "sqlite"

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name)
        self.events_table = events_table_name

    def construct_create_table_statements(self) -> list[str]:
        return super().construct_create_table_statements() + _sqlite_schema(self.events_table_name)

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        requests: Sequence[RequestIndexRow] = (),
        **kwargs: Any,
    ) -> Sequence[int] | None:
        """eventsourcing's insert (one transaction, each row's id as it is
        inserted), with the requests' index rows in the same transaction (a
        request id indexed twice conflicts: `IntegrityError`, as a stream does)."""
        if not requests:
            return super().insert_events(stored_events, **kwargs)
        with self.datastore.transaction(commit=True) as c:
            ids = []
            for event in stored_events:
                stream = event.originator_id
                c.execute(
                    self.insert_events_statement,
                    (
                        stream.hex if isinstance(stream, UUID) else stream,
                        event.originator_version,
                        event.topic,
                        event.state,
                    ),
                )
                ids.append(c.lastrowid)
            c.executemany(
                f"INSERT INTO {REQUESTS} (request_id, originator_id, originator_version) "
                "VALUES (?, ?, ?)",
                [(request, stream.hex, version) for request, stream, version in requests],
            )
            return ids

    @contextmanager
    def read(self) -> Iterator[Cursor]:
        with self.datastore.transaction(commit=False) as cursor:
            cursor.sqlite_cursor.row_factory = None  # plain tuples: verify reads millions
            yield cursor

    @contextmanager
    def snapshot(self) -> Iterator[Cursor]:
        """A read transaction whose statements all see one state of the store
        (SQLite's read transactions do: WAL mode keeps the snapshot)."""
        with self.read() as cursor:
            yield cursor

    @contextmanager
    def write(self) -> Iterator[Cursor]:
        with self.datastore.transaction(commit=True) as cursor:
            yield cursor

    @contextmanager
    def writer_lock(self, name: str) -> Iterator[None]:
        """One writer at a time per `name`: on SQLite the process's own leader
        already is the only writer (several processes conflict and retry)."""
        yield

    def lock_checkpointers(self, cursor: Cursor) -> None:
        """One checkpointer's batch at a time, the lock held to the transaction's
        end: a write statement touching no row makes SQLite take its write lock
        now, waiting for it, so what the checkpointer reads next is the latest."""
        cursor.execute(self.sql("DELETE FROM {checkpoints} WHERE 0 = 1"))

    def sql(self, template: str) -> str:
        return template.format(
            events=self.events_table_name,
            leaves=LEAVES,
            nodes=NODES,
            checkpoints=CHECKPOINTS,
            cosignatures=COSIGNATURES,
            requests=REQUESTS,
            heads=HEADS,
            archived=ARCHIVED,
            id="rowid",
        ).replace("%s", "?")


def as_rows(raw: Sequence[Any]) -> list[Row]:
    return [(r[0], str(r[1]), r[2], r[3], bytes(r[4])) for r in raw]
