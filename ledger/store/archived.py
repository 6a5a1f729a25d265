"""The archived events' table: each event that left the store for a verified
archive (`ledger.archive`) keeps its place in the log here.

One row per archived event: its position, row id, stream, version and leaf
hash (which is also the chain link its stream's next event names). The log
reads (`MerkleLogTables`) merge these rows, as marker rows whose topic is
NULL, with the events in id order, so positions, the tree and the chains of
newer events stay as they were. Its rows are the attacker's to edit like any
other: `ledger verify` holds them to the digest the archive register event
signs (`entries_digest`), and the tree holds each leaf hash to the signed roots.

Rows arrive only with the removal of the events they stand for, in one
transaction (`remove_events`): at any moment an event is in the store or
here, never both and never neither.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, NamedTuple

from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.recorders import archived_source, sqlite_delete_guard

_NUMBER = rb"(0|[1-9][0-9]*)"
_LINE: Final = re.compile(
    _NUMBER
    + b" "
    + _NUMBER
    + rb" ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}) "
    + _NUMBER
    + rb" ([0-9a-f]{64})\n"
)

#: Rows removed and recorded per statement batch (one transaction in all).
BATCH: Final = 5000


class ArchivedEntry(NamedTuple):
    """An archived event's place (a tuple: a removal or a verify reads hundreds of
    thousands)."""

    position: int
    notification_id: int
    stream: str  # hyphenated, as the envelope signs it
    version: int
    leaf_hash: bytes

    def line(self) -> bytes:
        """The entry as the digest reads it (and an archive's `archived.txt` holds it)."""
        return entry_line(
            self.position, self.notification_id, self.stream, self.version, self.leaf_hash
        )

    @classmethod
    def from_line(cls, line: bytes) -> ArchivedEntry:
        """One `line()`, in its one form; ValueError when it is not one."""
        match = _LINE.fullmatch(line)
        if match is None:
            raise ValueError("not an archived entry in its one form")
        position, notification_id, stream, version, leaf = match.groups()
        return cls(
            int(position),
            int(notification_id),
            stream.decode(),
            int(version),
            bytes.fromhex(leaf.decode()),
        )


def checked_entry(line: bytes) -> ArchivedEntry:
    """An entry of an `archived.txt` whose bytes were held to the digest of what
    was checked (each line checked in its one form already, by `from_line` or
    by building it): split, not matched again (a removal reads every line).
    ValueError for a line that is not an entry at all."""
    position, notification_id, stream, version, leaf = line.split(b" ")
    leaf_hash = bytes.fromhex(leaf.decode())  # (the newline ignored)
    if len(leaf_hash) != 32:
        raise ValueError("not an archived entry")
    return ArchivedEntry(
        int(position), int(notification_id), stream.decode(), int(version), leaf_hash
    )


def entry_line(
    position: int, notification_id: int, stream: str, version: int, leaf: bytes
) -> bytes:
    """`ArchivedEntry(...).line()`, without building the entry."""
    return f"{position} {notification_id} {stream} {version} {leaf.hex()}\n".encode()


def entries_digest(entries: Iterable[ArchivedEntry]) -> str:
    """SHA-256 (hex) of the entries' lines in position order: what an archive
    register event signs."""
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(entry.line())
    return digest.hexdigest()


class ArchivedTable:
    """Reading the archived events' rows, and the one write that adds them."""

    def __init__(self, tables: MerkleLogTables) -> None:
        self.tables = tables
        recorder = tables.recorder
        self._sqlite = recorder.dialect == "sqlite"
        # (A store an older release last wrote has no table yet: no rows, read as such.)
        source = archived_source(recorder)
        self._entries = recorder.sql(
            "SELECT position, notification_id, originator_id, originator_version, leaf_hash, "
            f"archive FROM {source} ORDER BY position"
        )
        self._count = recorder.sql(f"SELECT archive, COUNT(*) FROM {source} GROUP BY archive")
        self._insert = recorder.sql(
            "INSERT INTO {archived} (notification_id, position, originator_id, "
            "originator_version, leaf_hash, archive) VALUES (%s, %s, %s, %s, %s, %s)"
        )
        self._keys: dict[str, object] = {}
        self._delete = recorder.sql(
            "DELETE FROM {events} WHERE {id} = %s AND originator_id = %s "
            "AND originator_version = %s"
        )

    def counts(self) -> dict[str, int]:
        """Rows per archive id (an archive with none has not removed its events yet)."""
        with self.tables.recorder.read() as cursor:
            cursor.execute(self._count)
            return {str(archive): int(count) for archive, count in cursor.fetchall()}

    def entries(self) -> Iterator[tuple[str, ArchivedEntry | None]]:
        """(archive id, entry) of every row in position order; a row whose columns
        are not an entry's gives None in its place (an edit: the digest says so)."""
        with self.tables.recorder.read() as cursor:
            cursor.execute(self._entries)
            source: Any = getattr(cursor, "sqlite_cursor", cursor)
            while batch := source.fetchmany(BATCH):
                for position, nid, stream, version, leaf, archive in batch:
                    yield str(archive), _entry(position, nid, stream, version, leaf)

    def remove_events(self, archive: str, entries: Iterable[ArchivedEntry]) -> int:
        """Record `entries` as archived in `archive` and remove their events, in one
        transaction; each event must be there as the entry names it (else
        nothing changes: `LookupError`). The number removed."""
        recorder = self.tables.recorder
        removed = 0
        with recorder.write() as cursor, self._fast_delete(cursor):
            if self._sqlite:
                drop, create = sqlite_delete_guard(recorder.events_table)
                cursor.execute(drop)
            else:
                cursor.execute(recorder.sql("ALTER TABLE {events} DISABLE TRIGGER USER"))
            batch: list[ArchivedEntry] = []
            for entry in entries:
                batch.append(entry)
                if len(batch) == BATCH:
                    removed += self._remove(cursor, archive, batch)
                    batch = []
            if batch:
                removed += self._remove(cursor, archive, batch)
            if self._sqlite:
                cursor.execute(create)
            else:
                cursor.execute(recorder.sql("ALTER TABLE {events} ENABLE TRIGGER USER"))
        return removed

    @contextmanager
    def _fast_delete(self, cursor: Any) -> Iterator[None]:
        """On SQLite, the removal with `secure_delete` FAST (as it was set again
        after): a build that zeroes every deleted byte (Debian's default) would
        also write each page the removal frees, which costs it a third more.
        The removed events are the archive's, on disk in full before this; the
        pages the removal writes anyway are still zeroed where they were."""
        if not self._sqlite:
            yield
            return
        cursor.execute("PRAGMA secure_delete")
        (setting,) = cursor.fetchone()
        cursor.execute("PRAGMA secure_delete = FAST")
        try:
            yield
        finally:
            cursor.execute(f"PRAGMA secure_delete = {int(setting)}")

    def _remove(self, cursor: Any, archive: str, batch: list[ArchivedEntry]) -> int:
        keys = self._keys
        rows = [
            (e.notification_id, keys.get(e.stream) or self._key(e.stream), e.version) for e in batch
        ]
        cursor.executemany(self._delete, rows)
        # (Both drivers count the rows an executemany changed in all.)
        if getattr(cursor, "sqlite_cursor", cursor).rowcount != len(batch):
            raise LookupError(
                f"an event of log positions {batch[0].position} to {batch[-1].position} is not in "
                "the store as its archive names it: nothing was removed"
            )
        cursor.executemany(
            self._insert,
            [
                (nid, e.position, key, e.version, e.leaf_hash, archive)
                for (nid, key, _), e in zip(rows, batch, strict=True)
            ],
        )
        return len(batch)

    def _key(self, stream: str) -> object:
        """The stream id column of `stream`, parsed once per stream (a round's
        hundreds of events share one)."""
        if len(self._keys) > 10_000:
            self._keys.clear()
        key = self._keys[stream] = self.tables.stream_key(stream)
        return key


def _entry(
    position: object, nid: object, stream: object, version: object, leaf: object
) -> ArchivedEntry | None:
    if not (type(position) is int and type(nid) is int and type(version) is int):
        return None
    if not isinstance(leaf, bytes | bytearray | memoryview) or len(leaf) != 32 or stream is None:
        return None
    return ArchivedEntry(position, nid, stream_of(stream), version, bytes(leaf))
