"""Archived events, as `ledger verify` checks a store that archived some.

Read at step 3 beside the recorded runs: the archive register (its fixed id,
version by version, each envelope checked as every fixed stream's is), then
the store's archived-events table (`ledger.store.archived`) in position order,
each archive's rows held to the digest and the count its register event
signs. The marker rows the walk meets (steps 4-6, each a leaf hash the signed
roots hold) are then counted against the table: a live event turned into a
marker, a marker added or removed, or a row edited is a finding. An archive
whose rows are not in the table yet has not removed its events (a crash
between its record and the removal: `ledger archive` finishes it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.persistence import Transcoder

from ledger.audit.log.fixed_streams import stream_events
from ledger.audit.log.log_rows import LogRows
from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keys import Keyring
from ledger.domain.archives import ARCHIVES_ID, SEALED_TOPIC
from ledger.errors import StateOutdatedError, VerificationError
from ledger.store.archived import ArchivedTable

_STREAM = str(ARCHIVES_ID)
_FIELDS = {
    "archive": str,
    "directory": str,
    "horizon": str,
    "checkpoint_size": int,
    "checkpoint_root": str,
    "events": int,
    "rounds": int,
    "digest": str,
}


@dataclass(frozen=True)
class RecordedArchive:
    position: int  # log position of the event recording it
    archive: str
    directory: str
    horizon: str
    checkpoint_size: int
    checkpoint_root: str
    events: int
    rounds: int
    digest: str


@dataclass
class ArchivedSummary:
    """What the table holds, checked: per archive applied, its rows' count and
    first and last position; how many lie at or past `start` (the walk's)."""

    recorded: list[RecordedArchive] = field(default_factory=list)
    applied: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # id -> n, first, last
    from_start: int = 0

    @property
    def events(self) -> int:
        return sum(count for count, _, _ in self.applied.values())


def recorded_archives(
    tables: LogRows, transcoder: Transcoder, keyring: Keyring, problems: list[VerificationError]
) -> list[RecordedArchive]:
    """Every recorded archive, its envelope checked; a bad one is added to
    `problems` and the register is read no further."""
    found: list[RecordedArchive] = []
    try:
        for event in stream_events(tables, _STREAM, SignerCheck(keyring)):
            if event.topic != SEALED_TOPIC:
                continue
            try:
                data: dict[str, Any] = transcoder.decode(event.envelope.payload)
                values = {name: data[name] for name in _FIELDS}
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                error = VerificationError(f"malformed archive record: {exc}", where=event.label)
                error.position = event.position
                raise error from None
            if any(type(values[name]) is not kind for name, kind in _FIELDS.items()):
                error = VerificationError(
                    "malformed archive record: field types", where=event.label
                )
                error.position = event.position
                raise error
            found.append(RecordedArchive(event.position, **values))
    except VerificationError as exc:
        problems.append(
            VerificationError(
                f"archive register: {exc} (log position {exc.position})",
                position=exc.position,
                kind=exc.kind,
            )
        )
    return found


def check_resumable(summary: ArchivedSummary, saved_size: int) -> None:
    """A saved state's chunks hold the rows of its first `saved_size` positions:
    an archive recorded after it (at or past that size) that removed some of
    those rows changed them, as recorded. `StateOutdatedError` says so."""
    for record in summary.recorded:
        applied = summary.applied.get(record.archive)
        if applied is not None and record.position >= saved_size and applied[1] < saved_size:
            raise StateOutdatedError(
                f"archive {record.archive} (recorded at log position {record.position}, after "
                f"the saved state of size {saved_size}) moved {applied[0]} events, some of them "
                "under the state, out of the store: verify in full once, and save a new state"
            )


def check_archived_table(
    table: ArchivedTable,
    recorded: list[RecordedArchive],
    start: int,
    problems: list[VerificationError],
) -> ArchivedSummary:
    """The table's rows, each archive's held to its record's digest and count."""
    summary = ArchivedSummary(recorded)
    by_id = {record.archive: record for record in recorded}
    digests: dict[str, Any] = {}
    spans: dict[str, list[int]] = {}
    for archive, entry in table.entries():
        if entry is None:
            problems.append(
                VerificationError(
                    f"archive {archive}: a row of the archived events' table is malformed"
                )
            )
            continue
        if archive not in digests:
            digests[archive] = hashlib.sha256()
            spans[archive] = [0, entry.position, entry.position]
        digests[archive].update(entry.line())
        span = spans[archive]
        span[0] += 1
        span[2] = entry.position
        summary.from_start += entry.position >= start
    for archive, digest in digests.items():
        record = by_id.get(archive)
        count, first, last = spans[archive]
        summary.applied[archive] = (count, first, last)
        if record is None:
            problems.append(
                VerificationError(
                    f"the archived events' table holds {count} rows of archive {archive!r}, "
                    "which the archive register does not record: events were removed "
                    "from the store with no archive"
                )
            )
        elif digest.hexdigest() != record.digest or count != record.events:
            problems.append(
                VerificationError(
                    f"archive {archive}: the archived events' table ({count} rows) is not "
                    f"what its register event signs ({record.events} events, digest "
                    f"{record.digest[:16]}...): rows were added, removed or edited",
                    position=record.position,
                )
            )
    return summary
