"""`SealedRecorder`: the recorder a store opens, SQLite's or PostgreSQL's.

A name for type checkers only, kept apart from both recorders' modules: the
PostgreSQL one imports psycopg, which a process on SQLite never needs
(ledger.store.pg_recorder), and it imports the SQLite one's module for the
tables both share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from ledger.store.pg_recorder import SealedPostgresApplicationRecorder
    from ledger.store.recorders import SealedSQLiteApplicationRecorder

SealedRecorder: TypeAlias = "SealedSQLiteApplicationRecorder | SealedPostgresApplicationRecorder"
