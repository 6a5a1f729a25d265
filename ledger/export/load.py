"""A whole-log bundle loaded into a temporary SQLite store, so that `ledger
verify` itself, unchanged, checks it at every level.

The store is scratch space on the auditor's machine: its event rows are the
bundle's envelopes at their log positions, its checkpoint rows the bundle's
notes as exported, and its Merkle rows are computed here from the envelopes
(the verifier recomputes every root from the events anyway; the stored rows
only serve to locate a difference and to prove consistency between
checkpoints, which the verifier then checks against the signed roots).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import CompactRange, hash_leaf
from ledger.errors import VerificationError
from ledger.export.bundle_files import EVENTS
from ledger.export.reader import Bundle
from ledger.export.records import split_envelope
from ledger.store.application import LedgerApplication
from ledger.store.recorders import CHECKPOINTS, LEAVES, NODES

BATCH = 5000


def _column(stream: str) -> str:
    """The stream id as the SQLite recorder stores it (UUIDs as bare hex)."""
    try:
        return UUID(stream).hex
    except ValueError:
        return stream


def load_bundle(
    bundle: Bundle,
    path: Path,
    keyring: Keyring,
    progress: Callable[[int], None] | None = None,
) -> LedgerApplication:
    """Create a store at `path` holding the bundle's log; return it opened read-only."""
    LedgerApplication(f"sqlite:///{path}", keyring=keyring, create=True).close()
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=OFF")
        connection.execute("PRAGMA synchronous=OFF")
        connection.execute("BEGIN")
        _load_events(connection, bundle, progress)
        rows = []
        for column, note, label in bundle.checkpoints():
            try:
                root = Checkpoint.from_note(note).root
            except VerificationError:
                root = bytes(32)  # `verify` parses the note itself and names the row
            rows.append((column, root, note, label))
        for column, root, note, label in rows:
            try:
                connection.execute(
                    f"INSERT INTO {CHECKPOINTS} (tree_size, root, note) VALUES (?, ?, ?)",
                    (column, root, note),
                )
            except (sqlite3.IntegrityError, sqlite3.InterfaceError) as exc:
                raise VerificationError(
                    f"bundle {label}: a second checkpoint row of size {column!r} ({exc})"
                ) from None
        connection.execute("COMMIT")
    finally:
        connection.close()
    return LedgerApplication(f"sqlite:///{path}", keyring=keyring, create=False)


def _load_events(
    connection: sqlite3.Connection, bundle: Bundle, progress: Callable[[int], None] | None
) -> None:
    insert_event = (
        "INSERT INTO stored_events (rowid, originator_id, originator_version, topic, state) "
        "VALUES (?, ?, ?, ?, ?)"
    )
    tree = CompactRange(0)
    events: list[tuple[int, str, int, str, bytes]] = []
    leaves: list[tuple[int, int, bytes]] = []
    nodes: list[tuple[int, int, bytes]] = []

    def flush() -> None:
        try:
            connection.execute("SAVEPOINT batch")
            connection.executemany(insert_event, events)
            connection.execute("RELEASE batch")
        except sqlite3.IntegrityError:
            connection.execute("ROLLBACK TO batch")
            for row in events:  # one by one, to name the repeated event
                try:
                    connection.execute(insert_event, row)
                except sqlite3.IntegrityError:
                    raise VerificationError(
                        f"bundle {EVENTS}: log position {row[0] - 1} repeats stream "
                        f"{row[1]} version {row[2]} (an event copied or replayed)"
                    ) from None
            raise
        connection.executemany(
            f"INSERT INTO {LEAVES} (leaf_index, notification_id, leaf_hash) VALUES (?, ?, ?)",
            leaves,
        )
        connection.executemany(f"INSERT INTO {NODES} (level, idx, hash) VALUES (?, ?, ?)", nodes)
        if progress:
            progress(len(events))
        events.clear()
        leaves.clear()
        nodes.clear()

    for expected, event in enumerate(bundle.events()):
        if event.position != expected:
            raise VerificationError(
                f"bundle {event.label}: expected log position {expected} next: the bundle "
                "holds the whole log, so an event is missing, repeated or out of order"
            )
        leaf = hash_leaf(split_envelope(event.envelope)[1])
        events.append(
            (expected + 1, _column(event.stream), event.version, event.topic, event.envelope)
        )
        leaves.append((expected, expected + 1, leaf))
        tree.append(leaf, nodes)
        if len(events) >= BATCH:
            flush()
    flush()
