"""The recorders the ledger configures (eventsourcing's, with our triggers and
ledger tables) pass eventsourcing's own recorder contract tests."""

from __future__ import annotations

import threading
from pathlib import Path
from tempfile import TemporaryDirectory

from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from eventsourcing.tests.persistence import ApplicationRecorderTestCase

from ledger.store.pg_recorder import SealedPostgresApplicationRecorder
from ledger.store.recorders import SealedSQLiteApplicationRecorder
from tests.conftest import drop_pg_schema, new_pg_schema, pg_params, require_postgres


class TestSealedSQLiteApplicationRecorder(
    ApplicationRecorderTestCase[SealedSQLiteApplicationRecorder]
):
    def setUp(self) -> None:
        self._dir = TemporaryDirectory()
        self.db_path = str(Path(self._dir.name) / "contract.db")

    def tearDown(self) -> None:
        self._dir.cleanup()

    def create_recorder(self) -> SealedSQLiteApplicationRecorder:
        recorder = SealedSQLiteApplicationRecorder(SQLiteDatastore(self.db_path))
        recorder.create_table()
        return recorder

    def test_has_append_only_triggers(self) -> None:
        recorder = self.create_recorder()
        with recorder.read() as cursor:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            names = {row[0] for row in cursor.fetchall()}
        assert "stored_events_append_only_update" in names
        assert "stored_events_append_only_delete" in names


class TestSealedPostgresApplicationRecorder(
    ApplicationRecorderTestCase[SealedPostgresApplicationRecorder]
):
    def setUp(self) -> None:
        require_postgres()
        self.schema = new_pg_schema()
        self.datastore = PostgresDatastore(**pg_params(), schema=self.schema)

    def tearDown(self) -> None:
        self.datastore.close()
        drop_pg_schema(self.schema)

    def create_recorder(self) -> SealedPostgresApplicationRecorder:
        recorder = SealedPostgresApplicationRecorder(
            self.datastore, events_table_name="ledger_events"
        )
        recorder.create_table()
        return recorder

    def test_has_append_only_triggers(self) -> None:
        recorder = self.create_recorder()
        with recorder.read() as cursor:
            cursor.execute(
                "SELECT tgname FROM pg_trigger JOIN pg_class c ON c.oid = tgrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relname = 'ledger_events'",
                (self.schema,),
            )
            names = {row[0] for row in cursor.fetchall()}
        assert names == {"ledger_append_only", "ledger_no_truncate"}

    def test_writers_create_the_tables_at_once(self) -> None:
        """Several writers opening a new store create its tables, functions and
        triggers at the same time: the schema lock taken first in create_table's
        transaction makes them take turns (CREATE OR REPLACE FUNCTION/TRIGGER
        fail when run concurrently). The composite type is made beforehand:
        eventsourcing creates it in a transaction of its own, outside the lock."""
        first = SealedPostgresApplicationRecorder(self.datastore, events_table_name="ledger_events")
        with self.datastore.transaction(commit=True) as cursor:
            for statement in first.sql_create_statements:
                if "CREATE TYPE" in statement.as_string():
                    cursor.execute(statement)
        writers = 6
        started = threading.Barrier(writers)
        errors: list[BaseException] = []

        def create() -> None:
            datastore = PostgresDatastore(**pg_params(), schema=self.schema)
            try:
                recorder = SealedPostgresApplicationRecorder(
                    datastore, events_table_name="ledger_events"
                )
                started.wait()
                recorder.create_table()
            except BaseException as exc:
                errors.append(exc)
            finally:
                datastore.close()

        threads = [threading.Thread(target=create) for _ in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert first.insert_events([]) is None
        assert first.max_notification_id() is None  # the events table is there, empty


del ApplicationRecorderTestCase  # the abstract base must not be collected itself
