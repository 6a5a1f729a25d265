"""The witness's own state: per log origin, the last checkpoint it cosigned
(size, root, note), and the refused submissions that may prove a log's
misbehaviour. One SQLite file of its own (never the ledger's store).

`advance` checks the old size against the stored size and stores the new
checkpoint in one write transaction (`BEGIN IMMEDIATE`), so two submissions
racing each other can never roll the recorded size back (tlog-witness).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from ledger.errors import ConfigError

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS cosigned (origin TEXT PRIMARY KEY, size INTEGER NOT NULL, "
    "root BLOB NOT NULL, note TEXT NOT NULL, cosigned_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS refused (at TEXT NOT NULL, origin TEXT NOT NULL, "
    "status INTEGER NOT NULL, reason TEXT NOT NULL, request TEXT NOT NULL)",
)
T = TypeVar("T")


@dataclass(frozen=True)
class Known:
    """The last checkpoint cosigned for one origin (size 0 and no root: none yet)."""

    size: int
    root: bytes | None


@dataclass(frozen=True)
class Refusal:
    at: str
    origin: str
    status: int
    reason: str
    request: str


class WitnessState:
    def __init__(self, path: Path, mode: str = "rwc") -> None:
        """The state at `path` (SQLite's open modes): "rwc" makes an empty one
        when there is none; "rw" opens only a witness's existing state (a
        missing or empty file is none) and "ro" reads it and writes nothing."""
        self.path = path
        uri = f"{path.resolve().as_uri()}?mode={mode}"
        try:
            self._db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            if mode == "rwc":
                for statement in _SCHEMA:
                    self._db.execute(statement)
            else:
                self._check_tables()
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open the witness state {path}: {exc}") from None
        self._lock = threading.Lock()

    @classmethod
    def existing(cls, path: Path, *, read_only: bool = False) -> WitnessState:
        return cls(path, "ro" if read_only else "rw")

    def _check_tables(self) -> None:
        rows = self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        if not {"cosigned", "refused"} <= {row[0] for row in rows}:
            self._db.close()
            raise ConfigError(f"{self.path} is not a witness state (no cosigned, refused tables)")

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def known(self, origin: str) -> Known:
        with self._lock:
            row = self._db.execute(
                "SELECT size, root FROM cosigned WHERE origin = ?", (origin,)
            ).fetchone()
        return Known(int(row[0]), bytes(row[1])) if row else Known(0, None)

    def advance(
        self,
        origin: str,
        decide: Callable[[Known], tuple[T, tuple[int, bytes, str] | None]],
    ) -> T:
        """Run `decide` on what is known for `origin` and store the checkpoint it
        returns (size, root, note), if any, in the same transaction."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT size, root FROM cosigned WHERE origin = ?", (origin,)
            ).fetchone()
            known = Known(int(row[0]), bytes(row[1])) if row else Known(0, None)
            answer, new = decide(known)
            if new is not None:
                size, root, note = new
                db.execute(
                    "INSERT INTO cosigned (origin, size, root, note, cosigned_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (origin) DO UPDATE SET "
                    "size = excluded.size, root = excluded.root, note = excluded.note, "
                    "cosigned_at = excluded.cosigned_at",
                    (origin, size, root, note, datetime.now(UTC).isoformat()),
                )
            return answer

    def refuse(self, origin: str, status: int, reason: str, request: str) -> None:
        """Keep a refused submission whose log signature verified: evidence."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO refused (at, origin, status, reason, request) VALUES (?, ?, ?, ?, ?)",
                (datetime.now(UTC).isoformat(), origin, status, reason, request),
            )

    def refusals(self) -> list[Refusal]:
        with self._lock:
            rows = self._db.execute(
                "SELECT at, origin, status, reason, request FROM refused ORDER BY rowid"
            ).fetchall()
        return [Refusal(*row) for row in rows]
