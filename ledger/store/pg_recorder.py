"""eventsourcing's PostgreSQL recorder with the ledger's append-only triggers
and tables (ledger.store.recorders has the SQLite one and what both share).

A module of its own so that psycopg and eventsourcing.postgres are imported
only by a process that opens a PostgreSQL store: the store URL's settings name
this recorder (ledger.store.config), and eventsourcing imports it by that name.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import (
    InterfaceError,
    OperationalError,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import retry
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composable, Identifier, Literal

from ledger.store.recorders import (
    ARCHIVED,
    CHECKPOINTS,
    COSIGNATURES,
    HEADS,
    LEAVES,
    LEDGER_TABLES,
    NODES,
    REQUESTS,
    Cursor,
    RequestIndexRow,
)

_COMPOSED_KEPT = 256  # statements composed and kept, a recorder
_PG_REFUSE = """
CREATE OR REPLACE FUNCTION {schema}.ledger_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger: % is append-only (% refused)', TG_TABLE_NAME, TG_OP;
END $$
"""


class SealedPostgresApplicationRecorder(PostgresApplicationRecorder):
    """eventsourcing's PostgreSQL recorder with append-only triggers and ledger tables."""

    dialect = "postgresql"

    def __init__(self, datastore: Any, *, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        self.events_table = events_table_name
        self._names = self._table_names()
        self._composed: dict[str, Composable] = {}
        schema = Identifier(self.datastore.schema)
        self.insert_rows_statement = SQL(
            "INSERT INTO {schema}.{t} (originator_id, originator_version, topic, state) "
            "VALUES (%s, %s, %s, %s) RETURNING notification_id"
        ).format(schema=schema, t=Identifier(events_table_name))
        # Taken before eventsourcing's tables are written, in create_table's one
        # transaction: several processes may create the schema at once, and
        # CREATE OR REPLACE FUNCTION/TRIGGER are not safe concurrently.
        self.sql_create_statements.insert(
            0, SQL("SELECT pg_advisory_xact_lock(hashtext('casino-ledger-schema'))").format()
        )
        self.sql_create_statements += [
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{t} (leaf_index bigint PRIMARY KEY, "
                "notification_id bigint NOT NULL UNIQUE, leaf_hash bytea NOT NULL)"
            ).format(schema=schema, t=Identifier(LEAVES)),
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{t} (level int NOT NULL, idx bigint NOT NULL, "
                "hash bytea NOT NULL, PRIMARY KEY (level, idx))"
            ).format(schema=schema, t=Identifier(NODES)),
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{t} (tree_size bigint PRIMARY KEY, "
                "root bytea NOT NULL, note text NOT NULL)"
            ).format(schema=schema, t=Identifier(CHECKPOINTS)),
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{t} (tree_size bigint NOT NULL, "
                "witness text NOT NULL, note text NOT NULL, PRIMARY KEY (tree_size, witness))"
            ).format(schema=schema, t=Identifier(COSIGNATURES)),
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{t} (request_id text PRIMARY KEY, "
                "originator_id uuid NOT NULL, originator_version bigint NOT NULL)"
            ).format(schema=schema, t=Identifier(REQUESTS)),
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{t} (account uuid PRIMARY KEY, "
                "tree_size bigint NOT NULL, key bytea NOT NULL, leaf bytea NOT NULL, "
                "version bigint NOT NULL, position bigint NOT NULL, entry_hash bytea NOT NULL)"
            ).format(schema=schema, t=Identifier(HEADS)),
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{t} (notification_id bigint PRIMARY KEY, "
                "position bigint NOT NULL UNIQUE, originator_id uuid NOT NULL, "
                "originator_version bigint NOT NULL, leaf_hash bytea NOT NULL, "
                "archive text NOT NULL)"
            ).format(schema=schema, t=Identifier(ARCHIVED)),
            SQL(_PG_REFUSE).format(schema=schema),
        ]
        self.insert_requests_statement = SQL(
            "INSERT INTO {schema}.{t} (request_id, originator_id, originator_version) "
            "VALUES (%s, %s, %s)"
        ).format(schema=schema, t=Identifier(REQUESTS))
        for table in (events_table_name, *LEDGER_TABLES):
            self.sql_create_statements += [
                SQL(
                    "CREATE OR REPLACE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE "
                    "ON {schema}.{t} FOR EACH ROW EXECUTE FUNCTION {schema}.ledger_refuse_change()"
                ).format(schema=schema, t=Identifier(table)),
                SQL(
                    "CREATE OR REPLACE TRIGGER ledger_no_truncate BEFORE TRUNCATE "
                    "ON {schema}.{t} FOR EACH STATEMENT "
                    "EXECUTE FUNCTION {schema}.ledger_refuse_change()"
                ).format(schema=schema, t=Identifier(table)),
            ]
        self.notify_statement = SQL("NOTIFY {}").format(Identifier(self.channel_name))

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        requests: Sequence[RequestIndexRow] = (),
        **kwargs: Any,
    ) -> Sequence[int] | None:
        """What eventsourcing's insert does, and as it does it: in one pipelined
        transaction, lock the table (so notification ids commit in their order),
        NOTIFY the channel its subscribers listen on, insert the rows and return
        their ids. The rows go as plain parameters of one `executemany`: the
        library's own insert builds a composite value of each row in Python for
        an `unnest` and costs about twice as much a batch. The requests' index
        rows go in the same transaction (a request id indexed twice conflicts)."""
        if not stored_events:
            return None
        rows = [(e.originator_id, e.originator_version, e.topic, e.state) for e in stored_events]
        failure: Exception | None = None
        ids: list[int] = []
        with self.datastore.get_connection() as conn:
            try:
                with conn.pipeline() as pipeline, conn.transaction(), conn.cursor() as curs:
                    try:
                        for statement in self.lock_table_statements:
                            curs.execute(statement, prepare=True)
                        curs.execute(self.notify_statement)
                        curs.executemany(self.insert_rows_statement, rows, returning=True)
                        # Sync now, so a conflict raises IntegrityError here, not at commit.
                        pipeline.sync()
                        while True:  # the lock's and notify's results, then one set a row
                            if (curs.statusmessage or "").startswith("INSERT"):
                                ids += [row["notification_id"] for row in curs.fetchall()]
                            if not curs.nextset():
                                break
                        if requests:  # after the ids are read: these return no rows
                            curs.executemany(self.insert_requests_statement, list(requests))
                            pipeline.sync()  # a request id indexed twice raises here
                    except (
                        Exception
                    ) as exc:  # raised once the pipeline is closed, as the library does
                        failure = exc
            except Exception:
                # Closing an aborted transaction fails too ("pipeline aborted"):
                # the first failure is the one that says what happened (a
                # full disk, a conflict). Nothing was committed either way.
                if failure is None:
                    raise
            if failure is not None:
                raise failure
        if len(ids) != len(stored_events):
            raise ProgrammingError(
                f"couldn't get all notification IDs (got {len(ids)}, expected {len(stored_events)})"
            )
        return ids

    @contextmanager
    def read(self) -> Iterator[Cursor]:
        # Results in PostgreSQL's binary format: an envelope (bytea) comes as its
        # bytes, not as hex text to decode; verify reads twice as many rows a second.
        with self.datastore.get_connection() as conn, conn.transaction():
            yield conn.cursor(row_factory=tuple_row, binary=True)

    @contextmanager
    def snapshot(self) -> Iterator[Cursor]:
        """A read transaction whose statements all see one state of the store:
        REPEATABLE READ (a plain transaction is READ COMMITTED, each statement
        seeing what committed just before it)."""
        with self.datastore.get_connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn.cursor(row_factory=tuple_row, binary=True)

    @contextmanager
    def write(self) -> Iterator[Cursor]:
        with self.datastore.get_connection() as conn, conn.transaction():
            yield conn.cursor(row_factory=tuple_row)

    @contextmanager
    def writer_lock(self, name: str) -> Iterator[None]:
        """A session advisory lock named `name` (in this schema) held around a
        batch: the processes of one node write one batch at a time, so they
        never lose races to each other (other nodes still write concurrently,
        with optimistic concurrency). A connection that dies releases it."""
        key = f"{self.datastore.schema}:{name}"
        with self.datastore.get_connection() as conn:
            conn.execute(SQL("SELECT pg_advisory_lock(hashtext({}))").format(Literal(key)))
            try:
                yield
            finally:
                conn.execute(SQL("SELECT pg_advisory_unlock(hashtext({}))").format(Literal(key)))

    def lock_checkpointers(self, cursor: Cursor) -> None:
        """One checkpointer's batch at a time (this schema's), the lock held to
        the transaction's end: a transaction-scoped advisory lock."""
        name = f"casino-ledger-checkpointer:{self.datastore.schema}"
        cursor.execute(SQL("SELECT pg_advisory_xact_lock(hashtext({}))").format(Literal(name)))

    def sql(self, template: str) -> Composable:
        """`template` with this schema's table names, composed once: the store's
        reads and writes ask for the same few statements over and over, and
        composing one (ten `SQL.format` calls) took about 45 us every query."""
        found = self._composed.get(template)
        if found is None:
            if len(self._composed) >= _COMPOSED_KEPT:  # (templates with N placeholders vary)
                self._composed.clear()
            found = self._composed[template] = SQL(template).format(**self._names)
        return found

    def _table_names(self) -> dict[str, Composable]:
        schema = Identifier(self.datastore.schema)
        tables = {
            "events": self.events_table_name,
            "leaves": LEAVES,
            "nodes": NODES,
            "checkpoints": CHECKPOINTS,
            "cosignatures": COSIGNATURES,
            "requests": REQUESTS,
            "heads": HEADS,
            "archived": ARCHIVED,
        }
        names = {key: SQL("{}.{}").format(schema, Identifier(t)) for key, t in tables.items()}
        return {**names, "id": SQL("notification_id")}
