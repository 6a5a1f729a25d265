"""An archive directory: written from the store, checked offline.

    manifest.json   what it is: the log's origin, the archive's id and horizon,
                    the checkpoint, its counts and the digest of archived.txt
    checkpoint      the checkpoint it is verified against, as a C2SP signed
                    note with the witnesses' cosignatures the store holds
    tile/<L>/...    C2SP tlog-tiles hash tiles of the whole tree at that size
                    (no entry bundles: the archived events are in events.jsonl)
    events.jsonl    each archived event as an export bundle's event record
                    (docs/export.md), in log order
    archived.txt    each archived event's place: "position row-id stream
                    version leaf-hash", in log order (its SHA-256 is the digest
                    the archive register event signs)
    keyring.json    the public keys that signed it

`check_archive` trusts none of it: every envelope against its key and its
stream's chain from the stream's first event, every leaf hash against the
level-0 tile at its position, the tiles against the signed root, archived.txt
against the events and the manifest.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ledger.archive.due import log_rows
from ledger.archive.signatures import Signatures
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import ENVELOPE_PREFIX, GENESIS_HASH, SignerCheck, open_envelope
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import hash_leaf
from ledger.crypto.tiles import TILE_WIDTH, TileError, TileFrontier, TilePath, split_hashes
from ledger.errors import ConfigError, VerificationError
from ledger.export.records import event_line
from ledger.store.archived import ArchivedEntry
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.recorders import Row
from ledger.store.witnessing import CosignatureTable

FORMAT: Final = "casino-ledger-archive/1"
MANIFEST, CHECKPOINT, EVENTS, ARCHIVED, KEYRING = (
    "manifest.json",
    "checkpoint",
    "events.jsonl",
    "archived.txt",
    "keyring.json",
)
_LEAVES_BATCH: Final = 1 << 14


@dataclass(frozen=True)
class Manifest:
    archive: str
    origin: str
    horizon: str
    checkpoint_size: int
    checkpoint_root: str
    events: int
    rounds: int
    digest: str

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **self.__dict__}, indent=2) + "\n"

    @classmethod
    def read(cls, directory: Path) -> Manifest:
        try:
            data = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
            if data.pop("format") != FORMAT:
                raise ValueError(f"not {FORMAT}")
            return cls(**data)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise VerificationError(
                f"{directory / MANIFEST} is not an archive manifest: {exc}"
            ) from None


@dataclass(frozen=True)
class Written:
    events: int
    digest: str  # of archived.txt


def write_archive(
    directory: Path,
    checkpoint: Checkpoint,
    tables: MerkleLogTables,
    keyring: Keyring,
    rounds: Mapping[object, str | None],
    progress: Callable[[int], None] | None = None,
) -> Written:
    """Write the tiles, the events of `rounds` (stream id column -> currency) and
    their places into `directory` (which exists and is empty), reading the log
    once; each file flushed to disk. The caller writes the manifest last."""
    _write_tiles(directory, tables, checkpoint.size)
    digest, count, pending = hashlib.sha256(), 0, []
    with (
        (directory / EVENTS).open("w", encoding="utf-8") as events,
        (directory / ARCHIVED).open("wb") as listed,
    ):
        for position, (nid, originator_id, version, _, state) in log_rows(
            tables, checkpoint.size, progress
        ):
            if originator_id not in rounds:
                continue
            state = bytes(state)
            pending.append(event_line(position, state, rounds[originator_id]))
            header_end = ENVELOPE_PREFIX.size + int.from_bytes(state[4:6], "big")
            leaf = hash_leaf(state[ENVELOPE_PREFIX.size : header_end])
            line = ArchivedEntry(position, nid, stream_of(originator_id), version, leaf).line()
            listed.write(line)
            digest.update(line)
            count += 1
            if len(pending) == 1000:
                events.write("".join(pending))
                pending.clear()
        events.write("".join(pending))
        _sync(events)
        _sync(listed)
    # With the witnesses' cosignatures the store holds for it (none without witnesses).
    _write_text(directory / CHECKPOINT, CosignatureTable(tables).cosigned(checkpoint).to_note())
    _write_text(directory / KEYRING, keyring.to_json())
    return Written(count, digest.hexdigest())


def write_manifest(directory: Path, manifest: Manifest) -> None:
    _write_text(directory / MANIFEST, manifest.to_json())


def _write_text(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write(text)
        _sync(out)


def _sync(handle: Any) -> None:
    handle.flush()
    os.fsync(handle.fileno())


def _write_tiles(directory: Path, tables: MerkleLogTables, size: int) -> None:
    """The hash tiles of the tree of `size` leaves, from the stored leaf hashes
    (the check that follows holds them to the signed root)."""
    frontier = TileFrontier()
    for begin in range(0, size, _LEAVES_BATCH):
        for index, _, leaf in tables.leaves(begin, min(size, begin + _LEAVES_BATCH)):
            if index != frontier.size:
                raise VerificationError(f"the store's Merkle leaf {frontier.size} is missing")
            for tile, hashes in frontier.append(bytes(leaf)):
                _write_tile(directory, tile, hashes)
    if frontier.size != size:
        raise VerificationError(f"the store holds {frontier.size} Merkle leaves, not {size}")
    for tile, hashes in frontier.partial():
        _write_tile(directory, tile, hashes)


def _write_tile(directory: Path, tile: TilePath, hashes: list[bytes]) -> None:
    path = directory / str(tile)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        out.write(b"".join(hashes))
        _sync(out)


@dataclass(frozen=True)
class ArchiveChecked:
    manifest: Manifest
    checkpoint: Checkpoint  # with the cosignature lines it carries (`others`)
    events: int
    streams: int


def check_archive(directory: Path, keyring: Keyring) -> ArchiveChecked:
    """Check every file of an archive directory (module doc); else raise
    `VerificationError` naming the first thing wrong."""
    manifest = Manifest.read(directory)
    try:
        checkpoint = Checkpoint.from_note((directory / CHECKPOINT).read_text(encoding="utf-8"))
    except OSError as exc:
        raise VerificationError(f"{directory / CHECKPOINT}: {exc.strerror}") from None
    checkpoint.verify(keyring)
    if (checkpoint.size, checkpoint.root.hex(), checkpoint.origin) != (
        manifest.checkpoint_size,
        manifest.checkpoint_root,
        manifest.origin,
    ):
        raise VerificationError(f"{directory}: the manifest names another checkpoint")
    level0 = _check_tiles(directory, checkpoint)
    signer, signatures = SignerCheck(keyring), Signatures()
    try:
        count, streams, digest = _check_events(directory, checkpoint, level0, signer, signatures)
        signatures.finish()
    finally:
        signatures.close()
    if (count, digest) != (manifest.events, manifest.digest):
        raise VerificationError(f"{directory}: the manifest's count or digest is not its events'")
    return ArchiveChecked(manifest, checkpoint, count, streams)


def _check_events(
    directory: Path,
    checkpoint: Checkpoint,
    level0: Callable[[int], bytes],
    signer: SignerCheck,
    signatures: Signatures,
) -> tuple[int, int, str]:
    """Every event line against its listed place, its envelope, its stream's
    chain and its leaf (signatures handed to `signatures`): (events, streams,
    the digest of archived.txt)."""
    heads: dict[str, tuple[int, bytes]] = {}
    digest, count = hashlib.sha256(), 0
    listed = _listed_lines(directory / ARCHIVED)
    for line in _lines(directory / EVENTS):
        raw, entry = next(listed, (b"", None))
        label = f"{directory / EVENTS} line {count + 1}"
        if entry is None:
            raise VerificationError(f"{label}: {ARCHIVED} does not list it")
        digest.update(raw)
        position, stream, version = entry.position, entry.stream, entry.version
        label += f" (log position {position})"
        state, currency = _envelope_and_currency(line, label)
        # Its own line exactly: every field the envelope's, at the place listed.
        if line != event_line(position, state, currency):
            raise VerificationError(f"{label}: not the record of its envelope at its place")
        envelope = open_envelope(state, stream=stream, version=version)
        public_key = signer.check_signer(envelope, stream=stream, version=version)
        signatures.add(public_key, envelope.signed_message, envelope.signature, label)
        last = heads.get(stream, (0, GENESIS_HASH))
        if version != last[0] + 1 or envelope.prev_hash != last[1]:
            raise VerificationError(f"{label}: its stream's chain is broken (not whole)")
        heads[stream] = (version, envelope.entry_hash)
        leaf = envelope.entry_hash
        if position >= checkpoint.size or leaf != level0(position) or leaf != entry.leaf_hash:
            raise VerificationError(f"{label}: not the leaf the tiles hold at its position")
        count += 1
    if next(listed, None) is not None:
        raise VerificationError(f"{directory / ARCHIVED} lists events {EVENTS} does not hold")
    return count, len(heads), digest.hexdigest()


def archived_rows(directories: list[Path]) -> Callable[[str], list[Row]]:
    """A round's rows as the store held them, read from whichever archive has
    them (each archive checked by the caller first): its events in
    events.jsonl, their row ids in archived.txt."""

    def rows_of(stream: str) -> list[Row]:
        for directory in directories:
            places = {
                (e.stream, e.version): e.notification_id for e in _listed(directory / ARCHIVED)
            }
            found: list[Row] = []
            for record in _records(directory / EVENTS):
                if record["stream"] == stream:
                    state = base64.b64decode(record["envelope"], validate=True)
                    topic = open_envelope(
                        state, stream=stream, version=record["version"]
                    ).event_type
                    nid = places[(stream, record["version"])]
                    found.append((nid, stream, record["version"], topic, state))
            if found:
                return found
        raise ConfigError(f"round {stream} is in none of the archives given")

    return rows_of


def _envelope_and_currency(line: str, label: str) -> tuple[bytes, str | None]:
    """The envelope bytes and currency an event line holds (the caller holds the
    whole line to the one its envelope gives)."""
    at = line.find(',"currency":')
    end = line.find(',"envelope":"', at)
    stop = line.find('","header":', end)
    try:
        if min(at, end, stop) < 0:
            raise ValueError("not an event record")
        currency = json.loads(line[at + 12 : end])
        if currency is not None and type(currency) is not str:
            raise ValueError("a currency that is not text")
        return base64.b64decode(line[end + 13 : stop], validate=True), currency
    except ValueError as exc:
        raise VerificationError(f"{label}: {exc}") from None


def _lines(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8") as lines:
            yield from lines
    except (OSError, UnicodeDecodeError) as exc:
        raise VerificationError(f"{path}: {exc}") from None


def _listed_lines(path: Path) -> Iterator[tuple[bytes, ArchivedEntry]]:
    try:
        with path.open("rb") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    yield line, ArchivedEntry.from_line(line)
                except ValueError:
                    raise VerificationError(f"{path} line {number} is not an entry") from None
    except OSError as exc:
        raise VerificationError(f"{path}: {exc.strerror}") from None


def _records(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        raise ValueError("not an object")
                    yield record
                except ValueError as exc:
                    raise VerificationError(f"{path} line {number}: {exc}") from None
    except OSError as exc:
        raise VerificationError(f"{path}: {exc.strerror}") from None


def _listed(path: Path) -> Iterator[ArchivedEntry]:
    try:
        with path.open("rb") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    yield ArchivedEntry.from_line(line)
                except ValueError:
                    raise VerificationError(f"{path} line {number} is not an entry") from None
    except OSError as exc:
        raise VerificationError(f"{path}: {exc.strerror}") from None


def _check_tiles(directory: Path, checkpoint: Checkpoint) -> Callable[[int], bytes]:
    """The hash tiles hash to the signed root, each upper tile the one of the
    tiles below it; the leaf hash at a position, read from its level-0 tile."""
    size = checkpoint.size
    frontier = TileFrontier()
    for index in range((size + TILE_WIDTH - 1) // TILE_WIDTH):
        width = min(TILE_WIDTH, size - index * TILE_WIDTH)
        for leaf in _tile(directory, TilePath(0, index, width)):
            for tile, row in frontier.append(leaf):
                if tile.level and _read(directory, tile) != b"".join(row):
                    raise VerificationError(f"{directory}: tile {tile} is not its tiles' below")
    for tile, row in frontier.partial():
        if tile.level and _read(directory, tile) != b"".join(row):
            raise VerificationError(f"{directory}: tile {tile} is not its tiles' below")
    if frontier.root() != checkpoint.root:
        raise VerificationError(f"{directory}: the tiles do not hash to the signed root")

    held: dict[int, list[bytes]] = {}  # the level-0 tile last read (positions rise)

    def leaf_at(position: int) -> bytes:
        index = position // TILE_WIDTH
        if index not in held:
            width = min(TILE_WIDTH, size - index * TILE_WIDTH)
            held.clear()
            held[index] = _tile(directory, TilePath(0, index, width))
        return held[index][position % TILE_WIDTH]

    return leaf_at


def _tile(directory: Path, tile: TilePath) -> list[bytes]:
    try:
        return split_hashes(_read(directory, tile), tile.width)
    except TileError as exc:
        raise VerificationError(f"{directory}: tile {tile} {exc}") from None


def _read(directory: Path, tile: TilePath) -> bytes:
    try:
        return (directory / str(tile)).read_bytes()
    except OSError as exc:
        raise VerificationError(f"{directory}: tile {tile}: {exc.strerror}") from None
