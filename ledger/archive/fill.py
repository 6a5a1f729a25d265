"""`ledger verify --archive DIR`: a store whose archived events are read back
from their archives, so every step runs over the whole log again.

Each archive is checked first, offline (`check.check_archive`: envelopes,
chains from each stream's first event, leaves against its tiles, the tiles
against its signed checkpoint). Steps 4-6 read the store as always (an
archived position's leaf is the one kept in the store, held to the signed
roots); the settlement pass (8-11) gets, at each archived position, the
archive's event, whose leaf hash must be the one the store keeps there.
"""

from __future__ import annotations

import base64
import heapq
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledger.archive.check import check_archive
from ledger.archive.files import EVENTS
from ledger.audit.log.chunks import ChunkResult, ChunkSpec
from ledger.audit.log.log_events import Event
from ledger.audit.log.log_source import StoreLog
from ledger.crypto.envelope import open_envelope
from ledger.crypto.keys import Keyring
from ledger.errors import ConfigError, VerificationError
from ledger.store.application import LedgerApplication
from ledger.store.archived import ArchivedTable
from ledger.store.recorders import Row

_Archived = tuple[int, bytes, Event]  # (position, leaf hash, the event)


class ArchivedStoreLog(StoreLog):
    """A `StoreLog` whose settlement pass reads archived events from their archives."""

    fills_archived = True

    def __init__(self, app: LedgerApplication, directories: list[Path], keyring: Keyring) -> None:
        super().__init__(app)
        checked = [check_archive(directory, keyring) for directory in directories]
        given = {c.manifest.archive for c in checked}
        missing = sorted(set(ArchivedTable(app.tables).counts()) - given)
        if missing:
            raise ConfigError(
                f"the store archived events into archive(s) {', '.join(missing)}: give each "
                "with --archive DIR (ledger archive's directories)"
            )
        self.archives = checked
        self._archived: Iterator[_Archived] = heapq.merge(
            *(self._read(directory) for directory in directories), key=lambda item: item[0]
        )

    def _read(self, directory: Path) -> Iterator[_Archived]:
        with (directory / EVENTS).open(encoding="utf-8") as lines:
            for line in lines:
                record: dict[str, Any] = json.loads(line)
                position, stream, version = record["position"], record["stream"], record["version"]
                state = base64.b64decode(record["envelope"])
                envelope = open_envelope(state, stream=stream, version=version)
                payload = self.transcoder.decode(envelope.payload)
                event = (
                    position,
                    stream,
                    version,
                    envelope.event_type,
                    payload,
                    envelope.signed_at,
                )
                yield position, envelope.entry_hash, event

    def _filled(self, rows: list[Row], first: int, live: Iterator[Event]) -> Iterator[Event]:
        """The rows' live events, and in each marker row's place its archived event."""
        archived: list[Event] = []
        for offset, row in enumerate(rows):
            if row[3] is not None:
                continue
            position = first + offset
            found = next(self._archived, None)
            if found is None or found[0] != position or found[1] != bytes(row[4]):
                raise VerificationError(
                    "the archives given do not hold the event archived at this position, "
                    "with the leaf hash the store keeps",
                    where=f"log position {position}",
                )
            archived.append(found[2])
        return heapq.merge(live, archived, key=lambda event: event[0])

    def chunk_events(self, spec: ChunkSpec, verified: ChunkResult) -> Iterator[Event]:
        live = super().chunk_events(spec, verified)
        rows = self.tables.rows_between(spec.after_id, spec.last_id)
        return self._filled(rows, spec.first_leaf, live)

    def events_of_chunk(self, spec: ChunkSpec) -> Iterator[Event]:
        live = super().events_of_chunk(spec)
        rows = self.tables.rows_between(spec.after_id, spec.last_id)
        return self._filled(rows, spec.first_leaf, live)

    def events(self, progress: Any = None, start: tuple[int, int] = (0, 0)) -> Iterator[Event]:
        from ledger.audit.log.log_events import READ_BATCH, events_of_rows

        position, after = start
        while rows := self.tables.rows_after(after, READ_BATCH):
            if progress:
                progress(len(rows))
            live = events_of_rows(rows, position, self.transcoder)
            yield from self._filled(rows, position, live)
            position += len(rows)
            after = rows[-1][0]
