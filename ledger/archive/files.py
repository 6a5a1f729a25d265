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

`write.write_archive` writes one from the store; `check.check_archive`
checks one offline, trusting none of it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ledger.crypto.envelope import open_envelope
from ledger.crypto.tiles import TileError, TilePath, split_hashes
from ledger.errors import ConfigError, VerificationError
from ledger.store.archived import ArchivedEntry
from ledger.store.recorders import Row

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


def lines(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8") as lines:
            yield from lines
    except (OSError, UnicodeDecodeError) as exc:
        raise VerificationError(f"{path}: {exc}") from None


def listed_lines(path: Path) -> Iterator[tuple[bytes, ArchivedEntry]]:
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


def read_tile(directory: Path, tile: TilePath) -> list[bytes]:
    try:
        return split_hashes(tile_bytes(directory, tile), tile.width)
    except TileError as exc:
        raise VerificationError(f"{directory}: tile {tile} {exc}") from None


def tile_bytes(directory: Path, tile: TilePath) -> bytes:
    try:
        return (directory / str(tile)).read_bytes()
    except OSError as exc:
        raise VerificationError(f"{directory}: tile {tile}: {exc.strerror}") from None
