"""The projections' SQL, one text for both stores.

A statement names its tables in braces (``{proj_balances}``) and its
parameters as ``%s``; `Sql` makes it PostgreSQL (schema-qualified
identifiers) or SQLite (bare names, ``?``). Only ``proj_`` tables can be named:
a projection never writes to the events or the Merkle log.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from eventsourcing.persistence import OperationalError

from ledger.errors import ConfigError
from ledger.store.recorder_type import SealedRecorder
from ledger.store.recorders import Cursor, SealedSQLiteApplicationRecorder

if TYPE_CHECKING:
    from psycopg.sql import Composable

PREFIX = "proj_"
TRACKING = "proj_tracking"
Query: TypeAlias = "str | Composable"
_NAME = re.compile(r"\{(\w+)\}")
_SAFE_NAME = re.compile(r"^proj_[a-z0-9_]+$")


def check_table_name(name: str) -> str:
    if not _SAFE_NAME.match(name):
        raise ConfigError(f"a projection table is named proj_<lowercase>, not {name!r}")
    return name


def sqlite_statement(template: str) -> str:
    names = {check_table_name(name) for name in _NAME.findall(template)}
    return template.format(**{name: name for name in names}).replace("%s", "?")


class Statements(Protocol):
    def __call__(self, template: str) -> Query: ...


class Sql:
    """Dialect-specific statements for the proj_ tables of one store."""

    def __init__(self, recorder: SealedRecorder) -> None:
        self.recorder = recorder
        self.dialect = recorder.dialect
        self._schema: str | None = None
        if not isinstance(recorder, SealedSQLiteApplicationRecorder):  # PostgreSQL
            self._schema = recorder.datastore.schema
        self._cache: dict[str, Query] = {}

    def __call__(self, template: str) -> Query:
        """The statement for `template`, made once and kept."""
        found = self._cache.get(template)
        if found is None:
            found = self._cache[template] = self._make(template)
        return found

    def _make(self, template: str) -> Query:
        if self._schema is None:
            return sqlite_statement(template)
        from psycopg.sql import SQL, Identifier  # PostgreSQL only: imported already

        names = {check_table_name(name) for name in _NAME.findall(template)}
        schema = self._schema
        return SQL(template).format(**{name: Identifier(schema, name) for name in names})

    @contextmanager
    def write(self) -> Iterator[Tx]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        if not isinstance(self.recorder, SealedSQLiteApplicationRecorder):  # PostgreSQL
            with self.recorder.write() as cursor:
                yield Tx(self, cursor)
            return
        # SQLite: BEGIN IMMEDIATE takes the write lock first (waiting for it
        # up to the store's lock timeout). A plain BEGIN would read first and
        # then fail at once (SQLITE_BUSY) if another process wrote meanwhile.
        with self.recorder.datastore.get_connection(commit=True) as connection:
            cursor = connection.cursor()
            cursor.sqlite_cursor.row_factory = None
            try:
                cursor.execute("BEGIN IMMEDIATE")
                try:
                    yield Tx(self, cursor)
                except BaseException:
                    connection.rollback()
                    raise
                connection.commit()
            except sqlite3.OperationalError as exc:  # locked, or gone: as eventsourcing says it
                raise OperationalError(exc) from exc
            finally:
                cursor.sqlite_cursor.close()

    @contextmanager
    def read(self) -> Iterator[Tx]:
        with self.recorder.read() as cursor:
            yield Tx(self, cursor)

    def existing_tables(self) -> set[str]:
        """The proj_ tables present in the store."""
        with self.read() as tx:
            if self._schema is None:
                rows = tx.rows(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE %s",
                    (f"{PREFIX}%",),
                )
            else:
                rows = tx.rows(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = %s AND table_name LIKE %s",
                    (self._schema, f"{PREFIX}%"),
                )
        return {str(row[0]) for row in rows}

    def columns(self, tx: Tx, table: str) -> set[str]:
        """The columns proj_ table `table` has in the store (none: it does not exist)."""
        if self._schema is None:
            return {str(row[1]) for row in tx.rows(f"PRAGMA table_info({{{table}}})")}
        rows = tx.rows(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s",
            (self._schema, check_table_name(table)),
        )
        return {str(row[0]) for row in rows}


class MemorySql:
    """The same statements on a private in-memory SQLite database: where
    `verify --projections` rebuilds every read model from the events alone."""

    dialect = "sqlite"

    def __init__(self) -> None:
        self.connection = sqlite3.connect(":memory:")
        self._cache: dict[str, str] = {}

    def __call__(self, template: str) -> str:
        found = self._cache.get(template)
        if found is None:
            found = self._cache[template] = sqlite_statement(template)
        return found

    @contextmanager
    def write(self) -> Iterator[Tx]:
        cursor = self.connection.cursor()
        try:
            yield Tx(self, cursor)
            self.connection.commit()
        finally:
            cursor.close()

    def columns(self, table: str) -> tuple[list[str], list[str]]:
        """A table's column names, and its primary key's, in order."""
        info = self.connection.execute(f"PRAGMA table_info({check_table_name(table)})").fetchall()
        names = [str(row[1]) for row in info]
        key = [str(row[1]) for row in sorted(info, key=lambda row: row[5]) if row[5]]
        return names, key

    def close(self) -> None:
        self.connection.close()


class Tx:
    """A cursor inside one transaction, speaking the `Sql` templates."""

    def __init__(self, sql: Statements, cursor: Cursor) -> None:
        self.sql = sql
        self.cursor = cursor

    def execute(self, template: str, params: Sequence[Any] = ()) -> None:
        self.cursor.execute(self.sql(template), tuple(params))

    def changed(self, template: str, params: Sequence[Any] = ()) -> int:
        """Run an UPDATE or DELETE; return how many rows it changed."""
        self.execute(template, params)
        # eventsourcing wraps sqlite3's cursor; psycopg's is used as is.
        driver_cursor: Any = getattr(self.cursor, "sqlite_cursor", self.cursor)
        return int(driver_cursor.rowcount)

    def row(self, template: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        self.execute(template, params)
        found = self.cursor.fetchone()
        return tuple(found) if found is not None else None

    def rows(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self.execute(template, params)
        return [tuple(r) for r in self.cursor.fetchall()]
