"""`ledger archive check`: an archive directory checked offline, trusting none
of it: the checkpoint's signature, the tiles against its signed root, every
event line exactly the record its envelope gives at the place archived.txt
lists, each event's envelope, payload, signer, signature, chain and leaf
(`event_checks`), and archived.txt against the manifest's count and digest."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ledger.archive.envelopes import Envelopes
from ledger.archive.event_checks import EventChecks
from ledger.archive.files import (
    ARCHIVED,
    CHECKPOINT,
    EVENTS,
    Manifest,
    lines,
    listed_lines,
    read_tile,
    tile_bytes,
)
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.crypto.tiles import TILE_WIDTH, TileFrontier, TilePath
from ledger.errors import VerificationError
from ledger.export.records import event_line


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
    check_tiles(directory, checkpoint)

    def describe(where: Hashable) -> str:
        return _label(directory, cast(tuple[int, int | None], where))

    envelopes = Envelopes(keyring, describe, manifest.events)  # (a count it is held to below)
    checks = EventChecks(
        envelopes, level0_reader(directory, checkpoint.size), checkpoint.size, describe
    )
    try:
        count, digest = _check_events(directory, checks)
        checks.finish()
    finally:
        checks.close()
    if (count, digest) != (manifest.events, manifest.digest):
        raise VerificationError(f"{directory}: the manifest's count or digest is not its events'")
    return ArchiveChecked(manifest, checkpoint, count, checks.streams)


def _check_events(directory: Path, checks: EventChecks) -> tuple[int, str]:
    """Every event line against its listed place and `checks`: (events, the
    digest of archived.txt)."""
    digest, count = hashlib.sha256(), 0
    listed = listed_lines(directory / ARCHIVED)
    for line in lines(directory / EVENTS):
        raw, entry = next(listed, (b"", None))
        where = (count + 1, entry.position if entry is not None else None)
        if entry is None:
            raise VerificationError(
                f"{directory / EVENTS} line {count + 1}: {ARCHIVED} does not list it"
            )
        digest.update(raw)
        state, currency = _envelope_and_currency(line, where, directory)
        # Its own line exactly: every field the envelope's, at the place listed.
        if line != event_line(entry.position, state, currency):
            raise VerificationError(
                f"{_label(directory, where)}: not the record of its envelope at its place"
            )
        leaf = checks.check(entry.position, entry.stream, entry.version, state, where)
        if leaf != entry.leaf_hash:
            raise VerificationError(f"{_label(directory, where)}: {ARCHIVED} lists another leaf")
        count += 1
    if next(listed, None) is not None:
        raise VerificationError(f"{directory / ARCHIVED} lists events {EVENTS} does not hold")
    return count, digest.hexdigest()


def _label(directory: Path, where: tuple[int, int | None]) -> str:
    return f"{directory / EVENTS} line {where[0]} (log position {where[1]})"


def _envelope_and_currency(
    line: str, where: tuple[int, int | None], directory: Path
) -> tuple[bytes, str | None]:
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
        raise VerificationError(f"{_label(directory, where)}: {exc}") from None


def check_tiles(directory: Path, checkpoint: Checkpoint) -> None:
    """The hash tiles hash to the signed root, each upper tile the one of the
    tiles below it."""
    size = checkpoint.size
    frontier = TileFrontier()
    for index in range((size + TILE_WIDTH - 1) // TILE_WIDTH):
        width = min(TILE_WIDTH, size - index * TILE_WIDTH)
        for leaf in read_tile(directory, TilePath(0, index, width)):
            for tile, row in frontier.append(leaf):
                if tile.level and tile_bytes(directory, tile) != b"".join(row):
                    raise VerificationError(f"{directory}: tile {tile} is not its tiles' below")
    for tile, row in frontier.partial():
        if tile.level and tile_bytes(directory, tile) != b"".join(row):
            raise VerificationError(f"{directory}: tile {tile} is not its tiles' below")
    if frontier.root() != checkpoint.root:
        raise VerificationError(f"{directory}: the tiles do not hash to the signed root")


def level0_reader(directory: Path, size: int) -> Callable[[int], bytes]:
    """The leaf hash at a position, read from its level-0 tile (the last one
    read held: positions rise)."""
    held: dict[int, list[bytes]] = {}

    def leaf_at(position: int) -> bytes:
        index = position // TILE_WIDTH
        if index not in held:
            width = min(TILE_WIDTH, size - index * TILE_WIDTH)
            held.clear()
            held[index] = read_tile(directory, TilePath(0, index, width))
        return held[index][position % TILE_WIDTH]

    return leaf_at
