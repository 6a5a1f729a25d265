"""An attacker with database rights: drops the append-only triggers and
edits the event tables directly, as the tamper tests need."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import psycopg

from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import hash_leaf
from ledger.export.records import split_envelope
from ledger.store.application import LedgerApplication
from ledger.store.recorders import LEDGER_TABLES

Row = tuple[int, str, int, str, bytes]


class Attacker:
    def __init__(self, store_url: str) -> None:
        parts = urlsplit(store_url)
        self.sqlite = parts.scheme == "sqlite"
        if self.sqlite:
            self.conn: Any = sqlite3.connect(parts.path[1:], isolation_level=None)
            self.events, self.id = "stored_events", "rowid"
            for table in (self.events, *LEDGER_TABLES):
                for op in ("update", "delete"):
                    self.conn.execute(f"DROP TRIGGER IF EXISTS {table}_append_only_{op}")
        else:
            schema = parse_qs(parts.query)["schema"][0]
            self.conn = psycopg.connect(
                host=parts.hostname,
                port=parts.port,
                user=parts.username,
                dbname=parts.path[1:],
                autocommit=True,
            )
            self.conn.execute(f'SET search_path TO "{schema}"')
            self.events, self.id = "ledger_events", "notification_id"
            for table in (self.events, *LEDGER_TABLES):
                self.conn.execute(f"DROP TRIGGER IF EXISTS ledger_append_only ON {table}")
                self.conn.execute(f"DROP TRIGGER IF EXISTS ledger_no_truncate ON {table}")

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if not self.sqlite:
            statement = statement.replace("?", "%s")
        cursor = self.conn.execute(statement, params)
        try:
            return list(cursor.fetchall())
        except (sqlite3.ProgrammingError, psycopg.ProgrammingError):
            return []

    def key(self, stream: str) -> Any:
        return UUID(stream).hex if self.sqlite else UUID(stream)

    def row(self, stream: str, version: int) -> Row:
        found = self.sql(
            f"SELECT {self.id}, originator_id, originator_version, topic, state "
            f"FROM {self.events} WHERE originator_id = ? AND originator_version = ?",
            (self.key(stream), version),
        )
        assert found, f"no row {stream} v{version}"
        n, s, v, t, state = found[0]
        return n, str(s), v, t, bytes(state)

    def _set(self, column: str, value: object, stream: str, version: int) -> None:
        self.sql(
            f"UPDATE {self.events} SET {column} = ? "
            "WHERE originator_id = ? AND originator_version = ?",
            (value, self.key(stream), version),
        )

    def set_state(self, stream: str, version: int, state: bytes) -> None:
        self._set("state", state, stream, version)

    def set_topic(self, stream: str, version: int, topic: str) -> None:
        self._set("topic", topic, stream, version)

    def delete(self, stream: str, version: int) -> None:
        self.sql(
            f"DELETE FROM {self.events} WHERE originator_id = ? AND originator_version = ?",
            (self.key(stream), version),
        )

    def insert(self, stream: str, version: int, topic: str, state: bytes) -> None:
        self.sql(
            f"INSERT INTO {self.events} (originator_id, originator_version, topic, state) "
            "VALUES (?, ?, ?, ?)",
            (self.key(stream), version, topic, state),
        )

    def rows(self) -> list[Row]:
        """Every event row in log order, its stream id hyphenated."""
        found = self.sql(
            f"SELECT {self.id}, originator_id, originator_version, topic, state "
            f"FROM {self.events} ORDER BY {self.id}"
        )
        return [(n, str(UUID(str(s))), v, t, bytes(state)) for n, s, v, t, state in found]

    def rewrite(self, rows: list[Row]) -> None:
        """Each row id given the stream, version, type and bytes listed (events moved
        in the log), and its Merkle leaf the entry hash of those bytes. The rows'
        (stream, version) pairs must be those they held, shuffled: each is set
        aside first, as no two rows may hold one at once."""
        for n, *_ in rows:
            self.sql(
                f"UPDATE {self.events} SET originator_version = ? WHERE {self.id} = ?", (-n, n)
            )
        for n, stream, version, topic, state in rows:
            self.sql(
                f"UPDATE {self.events} SET originator_id = ?, originator_version = ?, topic = ?, "
                f"state = ? WHERE {self.id} = ?",
                (self.key(stream), version, topic, state, n),
            )
            leaf = hash_leaf(split_envelope(state)[1])
            self.sql("UPDATE ledger_merkle_leaves SET leaf_hash = ? WHERE notification_id = ?",
                     (leaf, n))  # fmt: skip

    def unanchor_from(self, position: int) -> None:
        """Remove every checkpoint covering log position `position`, and every stored
        Merkle node above it: what the real checkpoint key no longer signs."""
        self.sql("DELETE FROM ledger_merkle_nodes WHERE (idx + 1) * (1 << level) > ?", (position,))
        self.sql("DELETE FROM ledger_checkpoints WHERE tree_size > ?", (position,))

    def delete_tail(self, keep: int) -> None:
        """Remove every event after the first `keep`, with its Merkle data and checkpoints."""
        ids = [r[0] for r in self.sql(f"SELECT {self.id} FROM {self.events} ORDER BY {self.id}")]
        cutoff = ids[keep - 1]
        self.sql(f"DELETE FROM {self.events} WHERE {self.id} > ?", (cutoff,))
        self.sql("DELETE FROM ledger_merkle_leaves WHERE leaf_index >= ?", (keep,))
        self.sql("DELETE FROM ledger_merkle_nodes WHERE (idx + 1) * (1 << level) > ?", (keep,))
        self.sql("DELETE FROM ledger_checkpoints WHERE tree_size > ?", (keep,))

    def loosen_checkpoints(self) -> None:
        """Drop the checkpoint table's constraints (key, NOT NULL, text type)."""
        if self.sqlite:
            self.sql("CREATE TABLE loose (tree_size, root, note)")
            self.sql("INSERT INTO loose SELECT tree_size, root, note FROM ledger_checkpoints")
            self.sql("DROP TABLE ledger_checkpoints")
            self.sql("ALTER TABLE loose RENAME TO ledger_checkpoints")
        else:
            self.sql("ALTER TABLE ledger_checkpoints DROP CONSTRAINT ledger_checkpoints_pkey")
            self.sql("ALTER TABLE ledger_checkpoints ALTER COLUMN note DROP NOT NULL")

    def make_notes_binary(self) -> None:
        """On PostgreSQL the note column becomes bytea (SQLite stores any type anyway)."""
        if not self.sqlite:
            self.sql(
                "ALTER TABLE ledger_checkpoints ALTER COLUMN note TYPE bytea "
                "USING convert_to(note, 'UTF8')"
            )

    def checkpoint_note(self, tree_size: int) -> str:
        found = self.sql("SELECT note FROM ledger_checkpoints WHERE tree_size = ?", (tree_size,))
        assert found, f"no checkpoint row {tree_size}"
        return str(found[0][0])

    def close(self) -> None:
        self.conn.close()


class ThiefApplication(LedgerApplication):
    """A writer run by whoever stole a key: the ledger's own writer refuses to
    seal with a revoked or expired key, the thief's code does not ask."""

    def check_node_key(self) -> None:
        return None


def unrevoked(keyring: Keyring) -> Keyring:
    """The keyring as a thief's own code sees it: no revocation recorded."""
    return Keyring([replace(r, revoked_at=None, revocation_reason=None) for r in keyring])
