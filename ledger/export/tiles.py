"""`ledger tiles DIR`: the log as C2SP tlog-tiles, written from checked data.

What is written (docs/tiles.md): `checkpoint` (the newest stored checkpoint
whose signature verifies, as stored), the hash tiles `tile/<L>/<N>[.p/<W>]`
and the entry bundles `tile/entries/<N>[.p/<W>]`, whose entries are the
events' envelope headers: the bytes whose RFC 9162 leaf hash is in the tree.

Nothing stored is taken on trust. The hashes are recomputed from the events'
own bytes (each envelope parsed, its row's stream, version and type checked
against it, its payload against the header's hash), and the tree they make
must have the signed root of that checkpoint before anything is published. A
stored Merkle leaf that disagrees with its event stops the run too. The
directory's own files are the attacker's as well: the run resumes from the
published checkpoint only once its signature verifies and its partial tiles
hash to its root, and the events' hashes must agree with the tiles published.

Full tiles are immutable, so a run writes only what is new: the full tiles and
bundles completed since the published checkpoint and the new partial ones.
New files go to `DIR/.pending` first and are moved into place once the root
checks; the checkpoint is replaced last, so a crash publishes nothing half.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ledger.audit.proofs import newest_checkpoint
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import check_row, open_envelope
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import hash_leaf
from ledger.crypto.tiles import (
    TILE_WIDTH,
    TileError,
    TileFrontier,
    TilePath,
    encode_bundle,
    partial_tiles,
    split_hashes,
)
from ledger.errors import ConfigError, VerificationError
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import StoredRowError, parse_checkpoint_row, stream_of
from ledger.store.witnessing import CosignatureTable

CHECKPOINT_FILE = "checkpoint"
PENDING = ".pending"
LOCK = ".lock"
BATCH = 1000


@dataclass(frozen=True)
class TilesWritten:
    """What a run published: the checkpoint's size, the size it extended, files."""

    size: int
    previous: int
    tiles: int
    bundles: int


def read_published(directory: Path, keyring: Keyring, origin: str | None) -> Checkpoint | None:
    """The directory's checkpoint, once its signature verifies; None when there is none."""
    path = directory / CHECKPOINT_FILE
    if not path.exists():
        return None
    try:
        checkpoint = Checkpoint.from_note(path.read_bytes().decode("utf-8"))
        checkpoint.verify(keyring, origin=origin)
    except (UnicodeDecodeError, VerificationError) as exc:
        raise VerificationError(f"{path}: {exc}: nothing was written") from None
    except OSError as exc:
        raise VerificationError(f"{path} cannot be read ({exc.strerror})") from None
    return checkpoint


def read_hash_tile(directory: Path, tile: TilePath) -> list[bytes]:
    path = directory / str(tile)
    try:
        return split_hashes(path.read_bytes(), tile.width)
    except FileNotFoundError:
        raise TileError(f"{tile} is missing") from None
    except OSError as exc:  # a directory in its place, no permission: the files are not ours alone
        raise TileError(f"{tile} cannot be read ({exc.strerror})") from None
    except TileError as exc:
        raise TileError(f"{tile} {exc}") from None


def published_frontier(directory: Path, checkpoint: Checkpoint) -> TileFrontier:
    """The partial tiles of the published checkpoint, checked against its signed root."""
    size = checkpoint.size
    rows: list[list[bytes]] = []
    try:
        for tile in partial_tiles(size):
            while len(rows) < (tile.level or 0):
                rows.append([])
            rows.append(read_hash_tile(directory, tile))
    except TileError as exc:
        raise VerificationError(f"{directory}: {exc}: nothing was written") from None
    frontier = TileFrontier(size, rows)
    if frontier.root() != checkpoint.root:
        raise VerificationError(
            f"{directory}: the partial tiles of the published checkpoint of size {size} do "
            "not hash to its signed root (a tile was altered): nothing was written"
        )
    return frontier


class _Staging:
    """New files, kept aside until the tree they make is checked."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.root = directory / PENDING
        self.paths: list[str] = []

    def add(self, tile: TilePath, data: bytes) -> None:
        path = self.root / str(tile)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())  # on disk before a checkpoint can name it
        self.paths.append(str(tile))

    def publish(self) -> None:
        parents = set()
        for relative in self.paths:
            target = self.directory / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.root / relative, target)
            parents.add(target.parent)
        for parent in sorted(parents):  # the renames on disk, each directory once
            _fsync_dir(parent)
        self.discard()

    def discard(self) -> None:
        if not self.root.exists():
            return
        for path in sorted(self.root.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        self.root.rmdir()


def _fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.new")
    with open(temporary, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    _fsync_dir(path.parent)


class _EventReader:
    """The store's events from one log position on, each checked on its own and
    hashed from its header bytes (the entry)."""

    def __init__(self, app: LedgerApplication, position: int) -> None:
        self.tables = app.tables
        self.position = position
        self.after_id = self._id_before(position)
        self._streams: dict[object, str] = {}  # stream column -> id, as many events share one

    def _id_before(self, position: int) -> int:
        """Where to start reading: the event of the stored leaf before `position`.

        A locator only: the leaves table is the attacker's, but an event read
        from the wrong place hashes to something the checks below refuse."""
        if position == 0:
            return 0
        try:
            found = self.tables.leaves(position - 1, position)
        except StoredRowError as exc:
            raise VerificationError(f"{exc}: nothing was written") from None
        if not found:
            raise VerificationError(
                f"the store has no Merkle leaf {position - 1}: nothing was written",
                where=f"Merkle leaf {position - 1}",
            )
        return found[0][1]

    def _stream(self, column: object) -> str:
        if len(self._streams) > 10_000:
            self._streams.clear()
        stream = self._streams[column] = stream_of(column)
        return stream

    def batch(self, limit: int) -> list[tuple[int, bytes, bytes]]:
        """Up to `limit` events: (log position, entry, leaf hash)."""
        rows = self.tables.rows_after(self.after_id, limit)
        if not rows:
            return []
        first = self.position
        try:
            leaves = self.tables.leaves(first, first + len(rows))
            stored = {index: leaf for index, _, leaf in leaves}
        except StoredRowError as exc:
            raise VerificationError(f"{exc}: nothing was written") from None
        out = []
        for notification_id, originator_id, version, topic, state in rows:
            position = self.position
            stream = self._streams.get(originator_id) or self._stream(originator_id)
            if not isinstance(state, bytes | bytearray | memoryview) or type(version) is not int:
                raise VerificationError(
                    "the event is malformed: nothing was written", where=f"log position {position}"
                )
            try:
                envelope = open_envelope(bytes(state), stream=stream, version=version)
                check_row(envelope, stream=stream, version=version, topic=str(topic))
            except VerificationError as exc:
                raise VerificationError(
                    f"{exc}: nothing was written", where=f"log position {position}"
                ) from None
            leaf = hash_leaf(envelope.header)
            if stored.get(position) != leaf:
                raise VerificationError(
                    f"the stored Merkle leaf is not the entry hash of event {notification_id} "
                    "(the store was altered; run `ledger verify`): nothing was written",
                    where=f"Merkle leaf {position}",
                )
            out.append((position, envelope.header, leaf))
            self.position += 1
            self.after_id = notification_id
        return out


def write_tiles(
    app: LedgerApplication,
    keyring: Keyring,
    directory: Path,
    *,
    origin: str,
    progress: Callable[[int], None] | None = None,
) -> TilesWritten | None:
    """Bring `directory` up to the newest stored checkpoint whose signature
    verifies; None when the store holds none. Raises `VerificationError` and
    publishes nothing when the store or the directory does not check."""
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"cannot write tiles to {directory}: it is not a directory")
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        return _write_locked(app, keyring, directory, origin, progress)


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One writer of a directory at a time (`tiles` beside `checkpoint --follow`)."""
    with open(directory / LOCK, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _newest_stored(app: LedgerApplication, keyring: Keyring, at_least: int) -> Checkpoint | None:
    """The stored checkpoint of the largest signed size whose signature verifies,
    among the rows whose size column is at least `at_least` (an index range: a
    follow turn checks the new checkpoints, not the thousands before); all rows
    when none is there, to say what the store holds instead."""
    newest = None
    for row in app.tables.checkpoint_rows(at_least or None):
        try:
            checkpoint = parse_checkpoint_row(row)
            checkpoint.verify(keyring)
        except VerificationError:
            continue  # a row that is not a valid checkpoint proves nothing
        if newest is None or checkpoint.size > newest.size:
            newest = checkpoint
    if newest is None and at_least:
        return newest_checkpoint(app, keyring)
    return newest


def _write_locked(
    app: LedgerApplication,
    keyring: Keyring,
    directory: Path,
    origin: str,
    progress: Callable[[int], None] | None,
) -> TilesWritten | None:
    published = read_published(directory, keyring, origin)
    frontier = TileFrontier() if published is None else published_frontier(directory, published)
    previous = frontier.size
    target = _newest_stored(app, keyring, previous)
    if target is None:
        if published is not None:
            raise VerificationError(
                f"the directory publishes a checkpoint of size {previous} but no checkpoint of "
                "the store verifies: the store is not the log these tiles are of"
            )
        return None
    if target.legacy:
        raise ConfigError(
            f"the newest checkpoint (size {target.size}) is in the old, pre-C2SP form: "
            "sign a new one with `ledger checkpoint` first"
        )
    if target.origin != origin:
        raise ConfigError(
            f"this node's origin is {origin!r} but the store's checkpoints are for "
            f"{target.origin!r} (set LEDGER_ORIGIN): nothing was written"
        )
    if target.size < previous:
        raise VerificationError(
            f"the directory publishes a checkpoint of size {previous} but the store's newest "
            f"is of size {target.size}: the store is not the log these tiles are of"
        )
    if target.size == previous:
        if published is not None and published.root != target.root:
            raise VerificationError(
                f"the store's checkpoint of size {previous} and the published one have "
                "different roots (two views of the log): nothing was written"
            )
        if published is not None:  # cosignatures that came in since go out too
            note = _published_note(app, target)
            if (directory / CHECKPOINT_FILE).read_bytes() != note:
                _write_atomically(directory / CHECKPOINT_FILE, note)
        return TilesWritten(previous, previous, 0, 0)
    staging = _Staging(directory)
    staging.discard()  # a crashed run's leftovers
    try:
        counts = _extend(app, frontier, target, staging, progress)
        if frontier.root() != target.root:
            raise VerificationError(
                f"the events up to log position {target.size - 1} do not hash to the signed "
                f"root of the checkpoint of size {target.size} (the store was altered; run "
                "`ledger verify`): nothing was written"
            )
        staging.publish()
    finally:
        staging.discard()
    _write_atomically(directory / CHECKPOINT_FILE, _published_note(app, target))
    return TilesWritten(target.size, previous, *counts)


def _published_note(app: LedgerApplication, target: Checkpoint) -> bytes:
    """The checkpoint file: the log's signed note with the cosignatures the
    witnesses returned for it (a client that trusts no witness ignores them)."""
    return CosignatureTable(app.tables).cosigned(target).to_note().encode()


def _extend(
    app: LedgerApplication,
    frontier: TileFrontier,
    target: Checkpoint,
    staging: _Staging,
    progress: Callable[[int], None] | None,
) -> tuple[int, int]:
    """Read the events from the start of the published partial entry bundle up
    to `target.size`, hash them into `frontier` and stage the new tiles."""
    published = frontier.size
    start = published - published % TILE_WIDTH
    known = frontier.row(0)  # the published leaf hashes of [start, published)
    reader = _EventReader(app, start)
    bundle: list[bytes] = []
    tiles = bundles = 0
    while reader.position < target.size:
        events = reader.batch(min(BATCH, target.size - reader.position))
        if not events:
            raise VerificationError(
                f"the store holds {reader.position} events, fewer than its checkpoint of "
                f"size {target.size} covers: nothing was written"
            )
        for position, entry, leaf in events:
            bundle.append(entry)
            if position < published:
                if leaf != known[position - start]:
                    raise VerificationError(
                        "the event's entry hash is not the one the published tiles hold (the "
                        "store or the tiles were altered): nothing was written",
                        where=f"log position {position}",
                    )
                continue
            for tile, hashes in frontier.append(leaf):
                staging.add(tile, b"".join(hashes))
                tiles += 1
            if len(bundle) == TILE_WIDTH:
                staging.add(TilePath(None, position // TILE_WIDTH), encode_bundle(bundle))
                bundles += 1
                bundle = []
        if progress is not None:
            progress(len(events))
    unchanged = set(partial_tiles(published))  # a level whose partial tile did not grow
    for tile, hashes in frontier.partial():
        if tile not in unchanged:
            staging.add(tile, b"".join(hashes))
            tiles += 1
    if bundle:
        staging.add(TilePath(None, target.size // TILE_WIDTH, len(bundle)), encode_bundle(bundle))
        bundles += 1
    return tiles, bundles
