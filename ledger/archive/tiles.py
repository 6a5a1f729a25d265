"""An archive's hash tiles, written by a thread while the events are read.

The tiles of the tree at the checkpoint come from the store's leaf hashes,
and the whole tree is held to the checkpoint's signed root once the last
leaf is in. The events' pass reads each event's leaf from its level-0 tile
on disk (`level0`), waiting for the thread to have written that tile: the
thread runs ahead (a leaf costs it far less than an event costs the pass).
Nothing is accepted before the root is checked: `finish`, which the archive
waits for before anything else, raises what the thread found. Every tile is
then put on disk, one fsync a file after all are written, so the disk's
journal commits once, not once a tile.
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Final

from ledger.archive.check import level0_reader
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.tiles import TILE_WIDTH, TileFrontier, TilePath
from ledger.errors import VerificationError
from ledger.inputs import sync_path
from ledger.store.merkle_log import MerkleLogTables

_LEAVES_BATCH: Final = 1 << 14
_ALL: Final = 1 << 62  # every level-0 tile written


class ArchiveTiles:
    """The tiles being written into `directory` (module doc)."""

    def __init__(self, directory: Path, tables: MerkleLogTables, checkpoint: Checkpoint) -> None:
        self.directory, self.tables, self.checkpoint = directory, tables, checkpoint
        self._read = level0_reader(directory, checkpoint.size)
        self._written = -1  # the level-0 tiles on disk: those of index <= this
        self._stopped = False  # the thread wrote its last tile, or failed
        self._changed = threading.Condition()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="archive-tiles")
        self._files: Future[dict[str, str]] = self._pool.submit(self._write)

    def level0(self, position: int) -> bytes:
        """The leaf hash the level-0 tile holds at `position`, once it is written."""
        index = position // TILE_WIDTH
        if index > self._written:
            with self._changed:
                self._changed.wait_for(lambda: index <= self._written or self._stopped)
            if index > self._written:
                self._files.result()  # (raises what the thread found)
        return self._read(position)

    def finish(self) -> dict[str, str]:
        """Wait for every tile to be written, held to the signed root and on disk:
        each tile's path -> SHA-256. Raises `VerificationError` for a leaf missing
        or a tree that is not the signed one."""
        try:
            return self._files.result()
        finally:
            self._pool.shutdown()

    def close(self) -> None:
        """Wait for the thread (after a failure elsewhere: nothing of it is used)."""
        self._pool.shutdown()

    def _write(self) -> dict[str, str]:
        try:
            files = self._tiles()
        finally:
            with self._changed:
                self._stopped = True
                self._changed.notify_all()
        self._sync(list(files))
        return files

    def _tiles(self) -> dict[str, str]:
        size, frontier, files = self.checkpoint.size, TileFrontier(), {}
        for begin in range(0, size, _LEAVES_BATCH):
            for index, _, leaf in self.tables.leaves(begin, min(size, begin + _LEAVES_BATCH)):
                if index != frontier.size:
                    raise VerificationError(f"the store's Merkle leaf {frontier.size} is missing")
                for tile, hashes in frontier.append(bytes(leaf)):
                    files[str(tile)] = self._put(tile, hashes)
                    if tile.level == 0:
                        self._published(tile.index)
        if frontier.size != size:
            raise VerificationError(f"the store holds {frontier.size} Merkle leaves, not {size}")
        for tile, hashes in frontier.partial():
            files[str(tile)] = self._put(tile, hashes)
        self._published(_ALL)
        if frontier.root() != self.checkpoint.root:
            raise VerificationError(
                f"the store's Merkle leaves do not hash to the root its checkpoint at {size} signs"
            )
        return files

    def _published(self, index: int) -> None:
        with self._changed:
            self._written = index
            self._changed.notify_all()

    def _put(self, tile: TilePath, hashes: list[bytes]) -> str:
        path = self.directory / str(tile)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = b"".join(hashes)
        path.write_bytes(data)
        return hashlib.sha256(data).hexdigest()

    def _sync(self, names: list[str]) -> None:
        """Each tile on disk, then the folders that name them (a new file is
        durable once its directory is)."""
        directory = self.directory
        folders = {directory}
        for name in names:
            sync_path(directory / name)
            folders.update(p for p in (directory / name).parents if p.is_relative_to(directory))
        for folder in folders:
            sync_path(folder)
