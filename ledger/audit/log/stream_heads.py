"""Each stream's head while verify walks the log, in bounded memory.

A log holds a stream per round, wallet and table, and one per request record:
half a million streams at a million events. Holding every head in a dict
made verify's memory grow with the log (120 MB of its 200 MB there). Most
streams end long before the log does, so the recently written heads stay in
memory and the rest go to a scratch SQLite file, deleted on close: a lookup
that misses memory is one index lookup there.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Mapping
from itertools import islice
from pathlib import Path

Head = tuple[int, bytes]  # (the stream's last version, that event's entry hash)

HOT_HEADS = 1 << 16  # heads kept in memory (about 18 MB); twice this, and half go to disk


class StreamHeads:
    def __init__(self, hot: int | None = None) -> None:
        self._hot: dict[str, Head] = {}
        self._limit = hot or HOT_HEADS
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self._db: sqlite3.Connection | None = None

    def get(self, stream: str) -> Head | None:
        head = self._hot.get(stream)
        if head is None and self._db is not None:
            row = self._db.execute(
                "SELECT version, hash FROM heads WHERE stream = ?", (stream,)
            ).fetchone()
            if row is not None:
                head = (int(row[0]), bytes(row[1]))
        return head

    def update(self, heads: Mapping[str, Head]) -> None:
        hot = self._hot
        for stream, head in heads.items():
            hot.pop(stream, None)  # to the end: the oldest heads go to disk first
            hot[stream] = head
        if len(hot) > 2 * self._limit:
            self._spill(len(hot) - self._limit)

    def _spill(self, count: int) -> None:
        if self._db is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="ledger-verify-heads-")
            self._db = sqlite3.connect(Path(self._scratch.name) / "heads.db")
            self._db.executescript(
                "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
                "CREATE TABLE heads (stream TEXT PRIMARY KEY, version INTEGER NOT NULL,"
                " hash BLOB NOT NULL) WITHOUT ROWID;"
            )
        oldest = list(islice(self._hot.items(), count))
        self._db.executemany(
            "INSERT OR REPLACE INTO heads VALUES (?, ?, ?)",
            [(stream, version, digest) for stream, (version, digest) in oldest],
        )
        for stream, _ in oldest:
            del self._hot[stream]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
