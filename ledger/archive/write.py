"""An archive written from the store, checked as it is written, then read back.

The tiles are written first and held to the signed root (`tiles`). As each
archived event's line is written it passes the checks an auditor's `archive
check` makes (`event_checks`: envelope, payload, signer, signature in another
process, chain, leaf against the level-0 tile read back from disk).
`check_written` then reads every file back from disk and holds it to the
SHA-256 of the bytes that passed: what is on disk is what was checked,
without parsing and checking each event a second time (which, when the
archive did it, cost more than writing it)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ledger.archive.due import log_batches
from ledger.archive.envelopes import Envelopes
from ledger.archive.event_checks import EventChecks
from ledger.archive.files import ARCHIVED, CHECKPOINT, EVENTS, KEYRING, MANIFEST, Manifest
from ledger.archive.tiles import ArchiveTiles
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.errors import VerificationError
from ledger.export.records import event_line
from ledger.store.archived import entry_line
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.witnessing import CosignatureTable

_LINES_BATCH: Final = 1000
SEGMENT: Final = 1 << 26  # 64 MiB of events.jsonl a digest (read back in parallel)
_READ: Final = 1 << 20


@dataclass(frozen=True)
class Chosen:
    """What `due` chose: each round's stream id column (as stored) to its
    currency, from the rows up to `last_id`, which must be the id of the row
    at the checkpoint's last position (the write holds it to the one it reads)."""

    rounds: Mapping[object, str | None]
    last_id: int


@dataclass(frozen=True)
class Written:
    events: int
    digest: str  # of archived.txt: what the manifest names and the register signs
    files: dict[str, str]  # each file written but events.jsonl (path) -> SHA-256 of its bytes
    events_file: Segments  # events.jsonl, a SHA-256 a segment


class Segments:
    """The SHA-256 of each `SEGMENT` bytes of a file as it is written (the last
    one shorter): read back, the segments are hashed by several threads at
    once, the file's size held to theirs."""

    def __init__(self) -> None:
        self.digests: list[str] = []
        self.size = 0
        self._current = hashlib.sha256()

    def update(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            part = view[: SEGMENT - self.size % SEGMENT]
            self._current.update(part)
            self.size += len(part)
            view = view[len(part) :]
            if self.size % SEGMENT == 0:
                self.digests.append(self._current.hexdigest())
                self._current = hashlib.sha256()

    def finish(self) -> Segments:
        if self.size % SEGMENT or not self.size:
            self.digests.append(self._current.hexdigest())
        return self


def envelope_workers(keyring: Keyring, log_events: int) -> Envelopes:
    """The workers that will check the archived events' envelopes (started now:
    they can choose the rounds first), for a log of `log_events`."""
    return Envelopes(keyring, _describe, log_events)


def _describe(where: Hashable) -> str:
    return f"the store's event at log position {where}"


def write_archive(
    directory: Path,
    checkpoint: Checkpoint,
    tables: MerkleLogTables,
    chosen: Chosen,
    tiles: ArchiveTiles,
    envelopes: Envelopes,
    progress: Callable[[int], None] | None = None,
) -> Written:
    """Write the events of the chosen rounds and their places into `directory`,
    where the `tiles` are (made and held to the signed root, their fsyncs under
    way), reading the log once and checking each event (module doc), the
    envelopes by the `envelopes` workers; every file on disk. Raises
    `VerificationError` for the first thing that does not check. The caller
    writes the manifest last."""
    keyring = envelopes.keyring
    try:
        count, events_digest, listed_digest = _write_events(
            directory, checkpoint, tables, chosen, tiles.level0, envelopes, progress
        )
        files = tiles.finish()
    finally:
        tiles.close()
    files[ARCHIVED] = listed_digest
    # With the witnesses' cosignatures the store holds for it (none without witnesses).
    files[CHECKPOINT] = write_file(
        directory / CHECKPOINT, CosignatureTable(tables).cosigned(checkpoint).to_note().encode()
    )
    files[KEYRING] = write_file(directory / KEYRING, keyring.to_json().encode())
    return Written(count, files[ARCHIVED], files, events_digest)


def _write_events(
    directory: Path,
    checkpoint: Checkpoint,
    tables: MerkleLogTables,
    chosen: Chosen,
    level0: Callable[[int], bytes],
    envelopes: Envelopes,
    progress: Callable[[int], None] | None,
) -> tuple[int, Segments, str]:
    """events.jsonl and archived.txt, each event checked as it is written (its
    leaf against `level0`), both on disk: (events, the digests of each file)."""
    checks = EventChecks(envelopes, level0, checkpoint.size, _describe)
    # Each chosen stream id column -> (its stream, its round's currency).
    rounds = {key: (stream_of(key), currency) for key, currency in chosen.rounds.items()}
    listed_digest, events_digest, count, last_id = hashlib.sha256(), Segments(), 0, 0
    pending: list[str] = []
    places: list[bytes] = []
    try:
        with (directory / EVENTS).open("wb") as events, (directory / ARCHIVED).open("wb") as listed:

            def flush() -> None:
                chunk = "".join(pending).encode()
                events.write(chunk)
                events_digest.update(chunk)
                pending.clear()
                chunk = b"".join(places)
                listed.write(chunk)
                listed_digest.update(chunk)
                places.clear()

            for first, rows in log_batches(tables, checkpoint.size, progress):
                last_id = rows[-1][0]
                # (Only the chosen rounds' rows go on: most of the log is not theirs.)
                taken = [(at, row) for at, row in enumerate(rows, first) if row[1] in rounds]
                for position, (nid, originator_id, version, _, state) in taken:
                    stream, currency = rounds[originator_id]
                    state = bytes(state)
                    leaf = checks.check(position, stream, version, state, position)
                    pending.append(event_line(position, state, currency))
                    places.append(entry_line(position, nid, stream, version, leaf))
                    count += 1
                    if len(pending) == _LINES_BATCH:
                        flush()
            flush()
            _sync(events)
            _sync(listed)
        checks.finish()
    finally:
        checks.close()
    if last_id != chosen.last_id:
        raise VerificationError(
            f"the store's Merkle leaf {checkpoint.size - 1} names row {chosen.last_id}, not the "
            f"row at that position ({last_id})"
        )
    return count, events_digest.finish(), listed_digest.hexdigest()


def write_manifest(directory: Path, manifest: Manifest) -> None:
    write_file(directory / MANIFEST, manifest.to_json().encode())


def check_written(directory: Path, written: Written, manifest: Manifest) -> None:
    """Read the archive back from disk: every file exactly the bytes checked as
    they were written (events.jsonl's segments by several threads at once), the
    manifest the one given, nothing else there; else `VerificationError`."""
    for name, digest in written.files.items():
        try:
            with (directory / name).open("rb") as stored:
                found = hashlib.file_digest(stored, "sha256").hexdigest()
        except OSError as exc:
            raise VerificationError(f"{directory / name}: {exc.strerror}") from None
        if found != digest:
            raise VerificationError(f"{directory / name} does not hold what was written")
    _check_segments(directory / EVENTS, written.events_file)
    if Manifest.read(directory) != manifest:
        raise VerificationError(f"{directory / MANIFEST} does not hold what was written")
    present = {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}
    if present != {*written.files, EVENTS, MANIFEST}:
        raise VerificationError(f"{directory} holds files that were not written")


def _check_segments(path: Path, segments: Segments) -> None:
    """The file at `path` read back: its size and each segment's SHA-256 the
    ones written."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise VerificationError(f"{path}: {exc.strerror}") from None
    try:
        if os.fstat(fd).st_size != segments.size:
            raise VerificationError(f"{path} does not hold what was written")

        def digest(number: int) -> str:
            found, offset = hashlib.sha256(), number * SEGMENT
            end = min(segments.size, offset + SEGMENT)
            while offset < end and (data := os.pread(fd, min(_READ, end - offset), offset)):
                found.update(data)
                offset += len(data)
            return found.hexdigest()

        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            found = list(pool.map(digest, range(len(segments.digests))))
    except OSError as exc:
        raise VerificationError(f"{path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if found != segments.digests:
        raise VerificationError(f"{path} does not hold what was written")


def write_file(path: Path, data: bytes) -> str:
    """Write `data` to `path` and to disk; its SHA-256."""
    with path.open("wb") as out:
        out.write(data)
        _sync(out)
    return hashlib.sha256(data).hexdigest()


def _sync(handle: Any) -> None:
    handle.flush()
    os.fsync(handle.fileno())
