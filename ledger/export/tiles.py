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
The partial tiles and bundles of earlier checkpoints stay (a client holding
such a checkpoint may still ask for them), and each must be the start of the
tile or bundle a run writes at its index, else the run stops. Every file is
reached through `TilesDirectory`: no symbolic link is followed, no fifo read.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ledger.audit.proofs import newest_checkpoint
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import check_row, open_envelope
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import HASH_SIZE, hash_leaf
from ledger.crypto.tiles import (
    ENTRY_MAX,
    TILE_WIDTH,
    TileError,
    TileFrontier,
    TilePath,
    encode_bundle,
    partial_tiles,
    split_hashes,
)
from ledger.errors import ConfigError, VerificationError
from ledger.export.tiles_directory import RefusedFile, TilesDirectory
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import StoredRowError, parse_checkpoint_row, stream_of
from ledger.store.witnessing import CosignatureTable

CHECKPOINT_FILE: Final = "checkpoint"
PENDING: Final = ".pending"
BATCH: Final = 1000
CHECKPOINT_LIMIT: Final = 1 << 20  # a note and its cosignature lines: far less
BUNDLE_LIMIT: Final = TILE_WIDTH * (2 + ENTRY_MAX)
NOTHING_WRITTEN: Final = "nothing was written"


@dataclass(frozen=True)
class TilesWritten:
    """What a run published: the checkpoint's size, the size it extended, files."""

    size: int
    previous: int
    tiles: int
    bundles: int


def limit_of(tile: TilePath) -> int:
    """The size of the largest file `tile` can be: a read stops past it."""
    return BUNDLE_LIMIT if tile.is_entries else tile.width * HASH_SIZE


def read_published(tree: TilesDirectory, keyring: Keyring) -> Checkpoint | None:
    """The directory's checkpoint, once its signature verifies; None when there is none."""
    path = tree.path / CHECKPOINT_FILE
    try:
        data = tree.read(CHECKPOINT_FILE, CHECKPOINT_LIMIT)
    except RefusedFile as exc:
        if exc.missing:
            return None
        raise VerificationError(f"{path} {exc.reason}") from None
    try:
        checkpoint = Checkpoint.from_note(data.decode("utf-8"))
        checkpoint.verify(keyring)
    except (UnicodeDecodeError, VerificationError) as exc:
        raise VerificationError(f"{path}: {exc}") from None
    return checkpoint


def read_hash_tile(tree: TilesDirectory, tile: TilePath) -> list[bytes]:
    try:
        return split_hashes(tree.read(str(tile), limit_of(tile)), tile.width)
    except RefusedFile as exc:
        raise TileError(str(exc)) from None
    except TileError as exc:
        raise TileError(f"{tile} {exc}") from None


def published_frontier(tree: TilesDirectory, checkpoint: Checkpoint) -> TileFrontier:
    """The partial tiles of the published checkpoint, checked against its signed root."""
    size = checkpoint.size
    rows: list[list[bytes]] = []
    try:
        for tile in partial_tiles(size):
            while len(rows) < (tile.level or 0):
                rows.append([])
            rows.append(read_hash_tile(tree, tile))
    except TileError as exc:
        raise VerificationError(f"{tree.path}: {exc}: {NOTHING_WRITTEN}") from None
    frontier = TileFrontier(size, rows)
    if frontier.root() != checkpoint.root:
        raise VerificationError(
            f"{tree.path}: the partial tiles of the published checkpoint of size {size} do "
            f"not hash to its signed root (a tile was altered): {NOTHING_WRITTEN}"
        )
    return frontier


def older_partial_problem(
    tree: TilesDirectory, older: TilePath, wider: TilePath, start: bytes
) -> str | None:
    """Why the partial tile or bundle `older`, of an earlier checkpoint, is not
    `start` (the first `older.width` hashes or entries of `wider`, the tile now
    at its index); None when it is."""
    try:
        data = tree.read(str(older), limit_of(older))
    except RefusedFile as exc:
        return exc.reason
    if data != start:
        what = "entries" if older.is_entries else "hashes"
        return f"is not the first {older.width} {what} of {wider} (it was altered)"
    return None


def _older_partials(tree: TilesDirectory, tile: TilePath) -> list[TilePath]:
    """The partials the directory holds at `tile`'s level and index, narrower than it."""
    folder = f"{TilePath(tile.level, tile.index)}.p"
    try:
        names = tree.names(folder)
    except RefusedFile as exc:
        raise VerificationError(f"{tree.path}: {exc}: {NOTHING_WRITTEN}") from None
    found = []
    for name in names:
        try:
            older = TilePath.parse(f"{folder}/{name}")
        except TileError:
            continue  # not a tile: never served, and `--check` names it
        if older.width < tile.width:
            found.append(older)
    return found


def _require_older_partials(
    tree: TilesDirectory, tile: TilePath, start: Callable[[int], bytes]
) -> None:
    """Before `tile` is written, each narrower partial at its index (from an
    earlier checkpoint) must be its start (`start(w)`: its first w hashes or
    entries as bytes), else nothing is written."""
    for older in _older_partials(tree, tile):
        problem = older_partial_problem(tree, older, tile, start(older.width))
        if problem is not None:
            raise VerificationError(
                f"{tree.path}: {older} {problem}: {NOTHING_WRITTEN} (restore it from a copy, "
                "or remove it, and run again)"
            )


class _Staging:
    """New files, kept aside until the tree they make is checked."""

    def __init__(self, tree: TilesDirectory) -> None:
        self.tree = tree
        self.paths: list[str] = []

    def add(self, tile: TilePath, data: bytes) -> None:
        self.tree.write_new(f"{PENDING}/{tile}", data)
        self.paths.append(str(tile))

    def publish(self) -> None:
        self.tree.move_all(PENDING, self.paths)
        self.discard()

    def discard(self) -> None:
        self.tree.remove(PENDING)


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
            raise VerificationError(f"{exc}: {NOTHING_WRITTEN}") from None
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
            raise VerificationError(f"{exc}: {NOTHING_WRITTEN}") from None
        out = []
        for notification_id, originator_id, version, topic, state in rows:
            position = self.position
            if topic is None:  # (ledger.store.archived)
                raise VerificationError(
                    "the event left the store for an archive (ledger archive): its entry is in "
                    f"the archive, not here; tiles are written before rounds are archived: "
                    f"{NOTHING_WRITTEN}",
                    where=f"log position {position}",
                )
            stream = self._streams.get(originator_id) or self._stream(originator_id)
            if not isinstance(state, bytes | bytearray | memoryview) or type(version) is not int:
                raise VerificationError(
                    f"the event is malformed: {NOTHING_WRITTEN}", where=f"log position {position}"
                )
            try:
                envelope = open_envelope(bytes(state), stream=stream, version=version)
                check_row(envelope, stream=stream, version=version, topic=str(topic))
            except VerificationError as exc:
                raise VerificationError(
                    f"{exc}: {NOTHING_WRITTEN}", where=f"log position {position}"
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
    publishes nothing when the store or the directory does not check; a
    directory refused, or with nothing to publish, is not created."""
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"cannot write tiles to {directory}: it is a file, not a directory")
    known = None
    created = not directory.exists()
    if created:
        known = _publishable(app, keyring, origin, 0)
        if known is None:
            return None
        directory.mkdir()
    try:
        with TilesDirectory(directory) as tree, tree.locked():  # one writer at a time
            return _write_locked(app, keyring, tree, origin, progress, known)
    except OSError as exc:  # no permission, no room: the checkpoint was not replaced
        reason = (exc.strerror or type(exc).__name__).lower()
        raise ConfigError(
            f"cannot write tiles to {directory}: {reason}: nothing was published"
        ) from None
    finally:
        if created and not (directory / CHECKPOINT_FILE).exists():
            _remove_if_empty(directory)


def _remove_if_empty(directory: Path) -> None:
    with suppress(OSError):  # another writer's files, or gone already: not ours to remove
        directory.rmdir()


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


def _publishable(
    app: LedgerApplication, keyring: Keyring, origin: str, at_least: int
) -> Checkpoint | None:
    """The checkpoint to publish (`_newest_stored`), refused in the node's
    settings' terms when it is of the old form or of another origin."""
    target = _newest_stored(app, keyring, at_least)
    if target is None:
        return None
    if target.legacy:
        raise ConfigError(
            f"the newest checkpoint (size {target.size}) is in the old, pre-C2SP form: "
            "sign a new one with `ledger checkpoint` first"
        )
    if target.origin != origin:
        raise ConfigError(
            f"this node's origin is {origin!r} but the store's checkpoints are for "
            f"{target.origin!r} (set LEDGER_ORIGIN): {NOTHING_WRITTEN}"
        )
    return target


def _published_for_writing(
    tree: TilesDirectory, keyring: Keyring, origin: str
) -> Checkpoint | None:
    try:
        published = read_published(tree, keyring)
    except VerificationError as exc:
        raise VerificationError(f"{exc}: {NOTHING_WRITTEN}") from None
    if published is not None and published.origin != origin:
        raise ConfigError(
            f"{tree.path / CHECKPOINT_FILE} is a checkpoint of the log {published.origin!r}, "
            f"not of this node's {origin!r} (set LEDGER_ORIGIN, or name another directory): "
            f"{NOTHING_WRITTEN}"
        )
    return published


def _write_locked(
    app: LedgerApplication,
    keyring: Keyring,
    tree: TilesDirectory,
    origin: str,
    progress: Callable[[int], None] | None,
    known: Checkpoint | None,
) -> TilesWritten | None:
    published = _published_for_writing(tree, keyring, origin)
    frontier = TileFrontier() if published is None else published_frontier(tree, published)
    previous = frontier.size
    if known is not None and published is None:  # checked before the directory was made
        target: Checkpoint | None = known
    else:
        target = _publishable(app, keyring, origin, previous)
    if target is None:
        if published is not None:
            raise VerificationError(
                f"the directory publishes a checkpoint of size {previous} but no checkpoint of "
                "the store verifies: the store is not the log these tiles are of"
            )
        return None
    if target.size < previous:
        raise VerificationError(
            f"the directory publishes a checkpoint of size {previous} but the store's newest "
            f"is of size {target.size}: the store is not the log these tiles are of"
        )
    if target.size == previous:
        if published is not None and published.root != target.root:
            raise VerificationError(
                f"the store's checkpoint of size {previous} and the published one have "
                f"different roots (two views of the log): {NOTHING_WRITTEN}"
            )
        if published is not None:  # cosignatures that came in since go out too
            note = _published_note(app, target)
            if tree.read(CHECKPOINT_FILE, CHECKPOINT_LIMIT) != note:
                tree.replace(CHECKPOINT_FILE, note)
        return TilesWritten(previous, previous, 0, 0)
    staging = _Staging(tree)
    try:
        staging.discard()  # a crashed run's leftovers
        counts = _extend(app, frontier, target, staging, progress)
        if frontier.root() != target.root:
            raise VerificationError(
                f"the events up to log position {target.size - 1} do not hash to the signed "
                f"root of the checkpoint of size {target.size} (the store was altered; run "
                f"`ledger verify`): {NOTHING_WRITTEN}"
            )
        staging.publish()
    except RefusedFile as exc:  # a link or a directory in the way of a new file
        raise VerificationError(f"{tree.path}: {exc}: {NOTHING_WRITTEN}") from None
    finally:
        staging.discard()
    tree.replace(CHECKPOINT_FILE, _published_note(app, target))
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
    tree = staging.tree
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
                f"size {target.size} covers: {NOTHING_WRITTEN}"
            )
        for position, entry, leaf in events:
            bundle.append(entry)
            if position < published:
                if leaf != known[position - start]:
                    raise VerificationError(
                        "the event's entry hash is not the one the published tiles hold (the "
                        f"store or the tiles were altered): {NOTHING_WRITTEN}",
                        where=f"log position {position}",
                    )
                continue
            for tile, hashes in frontier.append(leaf):
                _stage_tile(tree, staging, tile, hashes)
                tiles += 1
            if len(bundle) == TILE_WIDTH:
                _stage_bundle(tree, staging, TilePath(None, position // TILE_WIDTH), bundle)
                bundles += 1
                bundle = []
        if progress is not None:
            progress(len(events))
    unchanged = set(partial_tiles(published))  # a level whose partial tile did not grow
    for tile, hashes in frontier.partial():
        if tile not in unchanged:
            _stage_tile(tree, staging, tile, hashes)
            tiles += 1
    if bundle:
        _stage_bundle(tree, staging, TilePath(None, target.size // TILE_WIDTH, len(bundle)), bundle)
        bundles += 1
    return tiles, bundles


def _stage_tile(
    tree: TilesDirectory, staging: _Staging, tile: TilePath, hashes: list[bytes]
) -> None:
    data = b"".join(hashes)
    _require_older_partials(tree, tile, lambda width: data[: width * HASH_SIZE])
    staging.add(tile, data)


def _stage_bundle(
    tree: TilesDirectory, staging: _Staging, tile: TilePath, entries: list[bytes]
) -> None:
    _require_older_partials(tree, tile, lambda width: encode_bundle(entries[:width]))
    staging.add(tile, encode_bundle(entries))
