"""An archive's hash tiles: made from the store's leaf hashes and held to the
checkpoint's signed root before the first event is read, then put on disk by
a thread while the events are read (one fsync a file after all are written,
so the disk's journal commits once, not once a tile).

The leaf hashes are read raw, a batch at a time (`store.leaf_hashes`), and
each full level-0 tile's hash is taken at once, in C where it is built
(`TileFrontier.append_tile`): the tiles take a second or two where the events
take many.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from ledger.archive.check import level0_reader
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.tiles import TILE_WIDTH, TileFrontier, TilePath
from ledger.errors import VerificationError
from ledger.inputs import sync_path
from ledger.store.leaf_hashes import LeafHashes
from ledger.store.merkle_log import MerkleLogTables, as_hash

_LEAVES_BATCH: Final = 1 << 14  # (a multiple of the tile width)


class ArchiveTiles:
    """The tiles of the tree at `checkpoint`, written into `directory` and held to
    its signed root when made (else `VerificationError`); on disk once `finish`
    returns."""

    def __init__(self, directory: Path, tables: MerkleLogTables, checkpoint: Checkpoint) -> None:
        self.directory = directory
        self.files = _write_tiles(directory, tables, checkpoint)
        self.level0 = level0_reader(directory, checkpoint.size)  # the leaf hash at a position
        self._cancelled = False
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="archive-tiles")
        self._synced = self._pool.submit(self._sync, list(self.files))

    def finish(self) -> dict[str, str]:
        """Wait for every tile to be on disk: each tile's path -> SHA-256."""
        try:
            self._synced.result()
        finally:
            self._pool.shutdown()
        return dict(self.files)

    def close(self) -> None:
        """Wait for the thread (after a failure: nothing of it is used)."""
        self._pool.shutdown()

    def cancel(self) -> None:
        """Stop putting the tiles on disk and wait for the thread (they will not
        be used: nothing was due)."""
        self._cancelled = True
        self.close()

    def _sync(self, names: list[str]) -> None:
        """Each tile on disk, then the folders that name them (a new file is
        durable once its directory is)."""
        directory = self.directory
        folders = {directory}
        for name in names:
            if self._cancelled:
                return
            sync_path(directory / name)
            folders.update(p for p in (directory / name).parents if p.is_relative_to(directory))
        for folder in folders:
            sync_path(folder)


def _write_tiles(
    directory: Path, tables: MerkleLogTables, checkpoint: Checkpoint
) -> dict[str, str]:
    """Every tile of the tree at the checkpoint written (not yet synced), the tree
    held to its signed root: each tile's path -> SHA-256."""
    size, frontier, files = checkpoint.size, TileFrontier(), {}
    leaves = LeafHashes(tables)
    for begin in range(0, size, _LEAVES_BATCH):
        rows = leaves.between(begin, min(size, begin + _LEAVES_BATCH))
        if [index for index, _ in rows] != list(range(begin, begin + len(rows))):
            missing = next(
                (n for n, (index, _) in enumerate(rows, begin) if index != n), begin + len(rows)
            )
            raise VerificationError(f"the store's Merkle leaf {missing} is missing")
        for tile, hashes in _added(frontier, [leaf for _, leaf in rows], begin):
            files[str(tile)] = _put(directory, tile, hashes)
    if frontier.size != size:
        raise VerificationError(f"the store holds {frontier.size} Merkle leaves, not {size}")
    for tile, hashes in frontier.partial():
        files[str(tile)] = _put(directory, tile, hashes)
    if frontier.root() != checkpoint.root:
        raise VerificationError(
            f"the store's Merkle leaves do not hash to the root its checkpoint at {size} signs"
        )
    return files


def _added(
    frontier: TileFrontier, leaves: list[Any], begin: int
) -> list[tuple[TilePath, list[bytes]]]:
    """`leaves` (positions from `begin`) added to `frontier`: a full level-0 tile
    at once where one starts, each leaf alone elsewhere; the tiles completed.
    A hash column that is not a 32-byte hash raises `StoredRowError` naming it."""
    completed, at = [], 0
    while at < len(leaves):
        if frontier.size % TILE_WIDTH == 0 and len(leaves) - at >= TILE_WIDTH:
            tile = leaves[at : at + TILE_WIDTH]
            try:
                completed += frontier.append_tile(tile)
            except ValueError:
                for offset, leaf in enumerate(tile):
                    as_hash(leaf, f"Merkle leaf {begin + at + offset}")
                raise
            at += TILE_WIDTH
        else:
            completed += frontier.append(as_hash(leaves[at], f"Merkle leaf {begin + at}"))
            at += 1
    return completed


def _put(directory: Path, tile: TilePath, hashes: list[bytes]) -> str:
    path = directory / str(tile)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(hashes)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()
