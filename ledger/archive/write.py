"""An archive written from the store, checked as it is written, then read back.

As each archived event's line is written it passes the checks an auditor's
`archive check` makes (`event_checks`: envelope, signer, signature in another
process, chain, leaf against the level-0 tile read back from disk), and the
tiles are held to the signed root as they are written. `check_written` then
reads every file back from disk and holds it to the SHA-256 of the bytes that
passed: what is on disk is what was checked, without parsing and checking
each event a second time (which, when the archive did it, cost more than
writing it)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ledger.archive.check import level0_reader
from ledger.archive.due import log_rows
from ledger.archive.event_checks import EventChecks
from ledger.archive.files import ARCHIVED, CHECKPOINT, EVENTS, KEYRING, MANIFEST, Manifest
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.crypto.tiles import TileFrontier, TilePath
from ledger.errors import VerificationError
from ledger.export.records import event_line
from ledger.inputs import sync_path
from ledger.store.archived import ArchivedEntry
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.witnessing import CosignatureTable

_LEAVES_BATCH: Final = 1 << 14
_LINES_BATCH: Final = 1000


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
    files: dict[str, str]  # each file written (path in the archive) -> SHA-256 of its bytes


def write_archive(
    directory: Path,
    checkpoint: Checkpoint,
    tables: MerkleLogTables,
    keyring: Keyring,
    chosen: Chosen,
    progress: Callable[[int], None] | None = None,
) -> Written:
    """Write the tiles, the events of the chosen rounds and their places into
    `directory` (which exists and is empty), reading the log once and checking
    each event (module doc); every file on disk (the tiles' flushed by a thread
    while the log is read). Raises `VerificationError` for the first thing that
    does not check. The caller writes the manifest last."""
    files = _write_tiles(directory, tables, checkpoint)
    with ThreadPoolExecutor(1) as syncing:
        tiles_synced = syncing.submit(_sync_tiles, directory, list(files))
        count, files[EVENTS], files[ARCHIVED] = _write_events(
            directory, checkpoint, tables, keyring, chosen, progress
        )
        tiles_synced.result()
    # With the witnesses' cosignatures the store holds for it (none without witnesses).
    files[CHECKPOINT] = write_file(
        directory / CHECKPOINT, CosignatureTable(tables).cosigned(checkpoint).to_note().encode()
    )
    files[KEYRING] = write_file(directory / KEYRING, keyring.to_json().encode())
    return Written(count, files[ARCHIVED], files)


def _write_events(
    directory: Path,
    checkpoint: Checkpoint,
    tables: MerkleLogTables,
    keyring: Keyring,
    chosen: Chosen,
    progress: Callable[[int], None] | None,
) -> tuple[int, str, str]:
    """events.jsonl and archived.txt, each event checked as it is written, both on
    disk: (events, the SHA-256 of each file)."""

    def describe(where: Hashable) -> str:
        return f"the store's event at log position {where}"

    checks = EventChecks(
        keyring, level0_reader(directory, checkpoint.size), checkpoint.size, describe
    )
    rounds = chosen.rounds
    listed_digest, events_digest, count, last_id = hashlib.sha256(), hashlib.sha256(), 0, 0
    pending: list[str] = []
    try:
        with (directory / EVENTS).open("wb") as events, (directory / ARCHIVED).open("wb") as listed:

            def flush() -> None:
                chunk = "".join(pending).encode()
                events.write(chunk)
                events_digest.update(chunk)
                pending.clear()

            for position, (nid, originator_id, version, _, state) in log_rows(
                tables, checkpoint.size, progress
            ):
                last_id = nid
                if originator_id not in rounds:
                    continue
                state, stream = bytes(state), stream_of(originator_id)
                leaf = checks.check(position, stream, version, state, position)
                pending.append(event_line(position, state, rounds[originator_id]))
                line = ArchivedEntry(position, nid, stream, version, leaf).line()
                listed.write(line)
                listed_digest.update(line)
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
    return count, events_digest.hexdigest(), listed_digest.hexdigest()


def write_manifest(directory: Path, manifest: Manifest) -> None:
    write_file(directory / MANIFEST, manifest.to_json().encode())


def check_written(directory: Path, written: Written, manifest: Manifest) -> None:
    """Read the archive back from disk: every file exactly the bytes checked as
    they were written, the manifest the one given, nothing else there; else
    `VerificationError`."""
    for name, digest in written.files.items():
        try:
            with (directory / name).open("rb") as stored:
                found = hashlib.file_digest(stored, "sha256").hexdigest()
        except OSError as exc:
            raise VerificationError(f"{directory / name}: {exc.strerror}") from None
        if found != digest:
            raise VerificationError(f"{directory / name} does not hold what was written")
    if Manifest.read(directory) != manifest:
        raise VerificationError(f"{directory / MANIFEST} does not hold what was written")
    present = {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}
    if present != {*written.files, MANIFEST}:
        raise VerificationError(f"{directory} holds files that were not written")


def write_file(path: Path, data: bytes) -> str:
    """Write `data` to `path` and to disk; its SHA-256."""
    with path.open("wb") as out:
        out.write(data)
        _sync(out)
    return hashlib.sha256(data).hexdigest()


def _sync(handle: Any) -> None:
    handle.flush()
    os.fsync(handle.fileno())


def _write_tiles(
    directory: Path, tables: MerkleLogTables, checkpoint: Checkpoint
) -> dict[str, str]:
    """The hash tiles of the tree at the checkpoint, from the stored leaf hashes,
    held to its signed root; each tile's path -> SHA-256. Written first (the
    events are checked against them), put on disk by `_sync_tiles`."""
    size, frontier, files = checkpoint.size, TileFrontier(), {}
    for begin in range(0, size, _LEAVES_BATCH):
        for index, _, leaf in tables.leaves(begin, min(size, begin + _LEAVES_BATCH)):
            if index != frontier.size:
                raise VerificationError(f"the store's Merkle leaf {frontier.size} is missing")
            for tile, hashes in frontier.append(bytes(leaf)):
                files[str(tile)] = _write_tile(directory, tile, hashes)
    if frontier.size != size:
        raise VerificationError(f"the store holds {frontier.size} Merkle leaves, not {size}")
    for tile, hashes in frontier.partial():
        files[str(tile)] = _write_tile(directory, tile, hashes)
    if frontier.root() != checkpoint.root:
        raise VerificationError(
            f"the store's Merkle leaves do not hash to the root its checkpoint at {size} signs"
        )
    return files


def _sync_tiles(directory: Path, names: list[str]) -> None:
    """Each tile on disk, then the folders that name them (a new file is durable
    once its directory is): one fsync a file, after all are written, so the
    disk's journal commits once, not once a tile."""
    folders = {directory}
    for name in names:
        sync_path(directory / name)
        folders.update(p for p in (directory / name).parents if p.is_relative_to(directory))
    for folder in folders:
        sync_path(folder)


def _write_tile(directory: Path, tile: TilePath, hashes: list[bytes]) -> str:
    path = directory / str(tile)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(hashes)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()
