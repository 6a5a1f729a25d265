"""`ledger archive`: the steps, in the order that loses nothing.

1. finish any archive recorded before a crash (its events not removed yet);
2. anchor the log and choose the finished rounds older than the horizon
   under the newest checkpoint (`due`);
3. write the archive into `.NAME.partial` beside the directory asked for,
   checking each event as `ledger archive check` would (its envelope, signer,
   signature, chain and leaf; the tiles against the signed root), every file
   flushed to disk (`write.write_archive`);
4. read every file back from disk: exactly the bytes that were checked
   (`write.check_written`);
5. rename it to the directory asked for;
6. record it in the archive register (a node-signed event naming its digest);
7. anchor that record under a checkpoint;
8. remove the archived events from the store and record their places, in one
   transaction (`ledger.store.archived`).

A crash anywhere leaves every event in the store or in a verified archive:
before 5 the store is untouched (the partial directory is removed on the
next run); between 5 and 6 the next run with the same directory adopts the
archive (checks it again, then records it); after 6 the next run, or the
next `ledger archive` of any directory, finishes the removal. Each step's end
can be made to stop the process (`LEDGER_ARCHIVE_STOP_AFTER`, for the tests
that kill it there: a test hook, like `tools/faults.py`'s).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final
from uuid import uuid4

from eventsourcing.application import AggregateNotFoundError

from ledger.archive.check import check_archive
from ledger.archive.due import due_rounds, merged, round_states_in
from ledger.archive.envelopes import Envelopes
from ledger.archive.files import ARCHIVED, Manifest
from ledger.archive.tiles import ArchiveTiles
from ledger.archive.write import (
    Chosen,
    check_written,
    envelope_workers,
    write_archive,
    write_manifest,
)
from ledger.audit.log.checkpoints import valid_checkpoints
from ledger.crypto.checkpoint import Checkpoint
from ledger.domain.archives import ARCHIVES_ID, Archives
from ledger.errors import ConfigError, VerificationError
from ledger.inputs import sync_path
from ledger.node import Node
from ledger.store.archived import ArchivedEntry, ArchivedTable, checked_entry
from ledger.store.round_rows import last_id_under

STEPS: Final = ("chosen", "written", "checked", "renamed", "recorded", "anchored", "removed")


@dataclass(frozen=True)
class Archived:
    archive: str | None  # None: nothing was due
    directory: Path
    events: int
    rounds: int
    checkpoint_size: int
    finished: list[str]  # archives recorded earlier whose removal this run finished


def _stop_after(step: str) -> None:
    if os.environ.get("LEDGER_ARCHIVE_STOP_AFTER") == step:
        os._exit(137)  # as a kill -9 would: no clean-up, no commit


def archive_rounds(
    node: Node,
    horizon: datetime,
    directory: Path,
    progress: Callable[[int], None] | None = None,
) -> Archived:
    """Archive the finished rounds older than `horizon` into `directory` (module doc)."""
    directory = directory.absolute()
    adopted = _adoptable(node, directory)
    recorded_here = adopted is None and (directory / "manifest.json").is_file()
    finished = finish_archives(node)
    if recorded_here:  # the same command again, after a crash: finished, or it was complete
        return Archived(None, directory, 0, 0, 0, finished)
    if adopted is None:
        _check_target(directory)
    checkpointer = node.checkpointer()
    checkpointer.catch_up(chase=False)
    if adopted is not None:
        manifest = adopted
    else:
        written = _choose_and_write(node, horizon, directory, progress)
        if not isinstance(written, Manifest):
            return Archived(None, directory, 0, 0, written, finished)
        manifest = written
        _stop_after("renamed")
    _record(node, manifest, directory)
    _stop_after("recorded")
    checkpointer.catch_up(chase=False)
    _stop_after("anchored")
    # (Checked by this process at step 4, or when adopted: `finish_archives` checks again.)
    removed = _remove(node, manifest.archive, directory, checked=True)
    _stop_after("removed")
    return Archived(
        manifest.archive, directory, removed, manifest.rounds, manifest.checkpoint_size, finished
    )


def _choose_and_write(
    node: Node, horizon: datetime, directory: Path, progress: Callable[[int], None] | None
) -> Manifest | int:
    """Steps 2 to 5: the rounds chosen under the newest checkpoint (by a worker,
    while this process makes the tiles), their archive written beside
    `directory`, checked and renamed into place. When no round is due, the
    checkpoint's size (nothing written)."""
    tables = node.app.tables
    newest = valid_checkpoints(tables, node.keyring)
    if not newest:
        raise ConfigError("the log has no checkpoint yet: nothing can be archived")
    checkpoint = newest[-1]
    last_id = last_id_under(tables, checkpoint.size)
    horizon_us = int(horizon.timestamp() * 1_000_000)
    envelopes = envelope_workers(node.app.current_keyring(), last_id)
    try:
        # The workers choose the rounds, half the log each, while this process
        # makes the tiles.
        half, store = last_id // 2, node.app.store_url
        states = [
            envelopes.submit(round_states_in, store, after, upto)
            for after, upto in ((0, half), (half, last_id))
        ]
        scratch = directory.parent / f".{directory.name}.partial"
        shutil.rmtree(scratch, ignore_errors=True)  # an earlier run's, never finished
        scratch.mkdir()
        try:
            tiles = ArchiveTiles(scratch, tables, checkpoint)
            rounds = due_rounds(merged([part.result() for part in states]), horizon_us)
        except VerificationError:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        _stop_after("chosen")
        if rounds:
            chosen = Chosen(rounds, last_id)
            return _write_checked(
                node, checkpoint, horizon, chosen, scratch, tiles, envelopes, directory, progress
            )
        tiles.cancel()
        shutil.rmtree(scratch, ignore_errors=True)
        return checkpoint.size
    finally:
        envelopes.close()


def _write_checked(
    node: Node,
    checkpoint: Checkpoint,
    horizon: datetime,
    chosen: Chosen,
    scratch: Path,
    tiles: ArchiveTiles,
    envelopes: Envelopes,
    directory: Path,
    progress: Callable[[int], None] | None,
) -> Manifest:
    """Steps 3 to 5: the archive written into `scratch` (where its `tiles` are),
    checked, renamed into `directory`; on a finding, the partial directory
    removed and nothing else done."""
    try:
        written = write_archive(
            scratch, checkpoint, node.app.tables, chosen, tiles, envelopes, progress
        )
        manifest = Manifest(
            archive=str(uuid4()),
            origin=checkpoint.origin,
            horizon=horizon.isoformat(),
            checkpoint_size=checkpoint.size,
            checkpoint_root=checkpoint.root.hex(),
            events=written.events,
            rounds=len(chosen.rounds),
            digest=written.digest,
        )
        write_manifest(scratch, manifest)
        _stop_after("written")
        check_written(scratch, written, manifest)
    except VerificationError:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    _stop_after("checked")
    if directory.exists():
        directory.rmdir()  # (checked empty by the caller)
    scratch.rename(directory)
    sync_path(directory.parent)
    return manifest


def finish_archives(node: Node) -> list[str]:
    """Remove the events of every recorded archive that has not removed them yet
    (a crash after its record); the archives finished."""
    register = _register(node)
    applied = ArchivedTable(node.app.tables).counts()
    finished = []
    for archive, directory in register.sealed.items():
        if archive not in applied:
            _remove(node, archive, Path(directory))
            finished.append(archive)
    return finished


def _remove(node: Node, archive: str, directory: Path, *, checked: bool = False) -> int:
    """Check the archive (unless this process just did), then remove its events
    from the store."""
    if not checked:
        try:
            found = check_archive(directory, node.keyring).manifest.archive
        except VerificationError as exc:
            raise ConfigError(
                f"archive {archive} is recorded but {directory} does not check ({exc}): its "
                "events stay in the store; put the archive back where it was written"
            ) from None
        if found != archive:
            raise ConfigError(f"{directory} holds archive {found}, not {archive}")
    entries = _entries(directory / ARCHIVED)
    try:
        return ArchivedTable(node.app.tables).remove_events(archive, entries)
    except LookupError as exc:
        raise ConfigError(str(exc)) from None


def _entries(path: Path) -> Iterator[ArchivedEntry]:
    """The entries of an archive's archived.txt, the archive checked (by this
    process as written, or by `check_archive`) just before."""
    with path.open("rb") as lines:
        for line in lines:
            yield checked_entry(line)


def _record(node: Node, manifest: Manifest, directory: Path) -> None:
    register = _register(node)
    register.seal(
        archive=manifest.archive,
        directory=str(directory),
        horizon=manifest.horizon,
        checkpoint_size=manifest.checkpoint_size,
        checkpoint_root=manifest.checkpoint_root,
        events=manifest.events,
        rounds=manifest.rounds,
        digest=manifest.digest,
    )
    node.app.save(register)


def _register(node: Node) -> Archives:
    try:
        found: Archives = node.app.repository.get(ARCHIVES_ID)
    except AggregateNotFoundError:
        return Archives()
    return found


def _adoptable(node: Node, directory: Path) -> Manifest | None:
    """An archive a crashed run renamed into `directory` and never recorded:
    checked again, it is taken up where that run stopped."""
    if not (directory / "manifest.json").is_file():
        return None
    checked = check_archive(directory, node.keyring)
    if checked.manifest.archive in _register(node).sealed:
        return None  # recorded: `_check_target` refuses the directory
    return checked.manifest


def _check_target(directory: Path) -> None:
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ConfigError(f"{directory} exists and is not an empty directory: nothing archived")
    parent = directory.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write in {parent}: nothing archived")
