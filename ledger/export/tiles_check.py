"""`ledger tiles DIR --check`: read a tiles directory as a monitor would, trusting
nothing in it but what the keyring's checkpoint key signed.

The checkpoint's signature is checked first; then every entry bundle is read
in order (strict uint16 framing, exactly the tile's count of entries), each
entry hashed as an RFC 9162 leaf, and the tiles rebuilt from those hashes:
every full tile and every partial tile the checkpoint's size calls for must be
byte for byte the file there, and the tree must have the checkpoint's root.
So a truncated, altered, missing or extra-long tile or bundle is named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import hash_leaf
from ledger.crypto.tiles import (
    TILE_WIDTH,
    TileError,
    TileFrontier,
    TilePath,
    decode_bundle,
    split_hashes,
)
from ledger.errors import VerificationError
from ledger.export.tiles import CHECKPOINT_FILE, read_published


@dataclass(frozen=True)
class TilesChecked:
    size: int
    tiles: int
    bundles: int
    origin: str


def _read(directory: Path, tile: TilePath) -> bytes:
    try:
        return (directory / str(tile)).read_bytes()
    except FileNotFoundError:
        raise VerificationError(f"{tile} is missing", where=str(directory)) from None
    except OSError as exc:  # a directory in its place, no permission
        raise VerificationError(f"{tile} cannot be read ({exc.strerror})") from None


def check_tiles(
    directory: Path,
    keyring: Keyring,
    *,
    origin: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> TilesChecked:
    """Check every tile and bundle under the directory's signed checkpoint, else raise."""
    checkpoint = read_published(directory, keyring, origin)
    if checkpoint is None:
        raise VerificationError(f"{directory} holds no {CHECKPOINT_FILE} file")
    size = checkpoint.size
    frontier = TileFrontier()
    tiles = bundles = 0
    for index in range((size + TILE_WIDTH - 1) // TILE_WIDTH):
        width = min(TILE_WIDTH, size - index * TILE_WIDTH)
        bundle = TilePath(None, index, width)
        try:
            entries = decode_bundle(_read(directory, bundle), width)
        except TileError as exc:
            raise VerificationError(f"entry bundle {bundle} {exc}") from None
        bundles += 1
        level0 = TilePath(0, index, width)
        try:
            hashes = split_hashes(_read(directory, level0), width)
        except TileError as exc:
            raise VerificationError(f"tile {level0} {exc}") from None
        for number, entry in enumerate(entries):
            if hash_leaf(entry) != hashes[number]:
                raise VerificationError(
                    f"entry {number} of bundle {bundle} does not hash to its leaf hash in "
                    f"tile {level0} (log position {index * TILE_WIDTH + number})"
                )
            for tile, row in frontier.append(hashes[number]):
                if tile.level and _read(directory, tile) != b"".join(row):
                    raise VerificationError(
                        f"tile {tile} is not the tile of the hashes below it (altered or truncated)"
                    )
                tiles += 1
        if progress is not None:
            progress(width)
    for tile, row in frontier.partial():
        if tile.level and _read(directory, tile) != b"".join(row):
            raise VerificationError(
                f"partial tile {tile} is not the tile of the entries (altered or truncated)"
            )
        tiles += 1
    if frontier.root() != checkpoint.root:
        raise VerificationError(
            f"the tiles do not hash to the signed root of the checkpoint of size {size}"
        )
    return TilesChecked(size, tiles, bundles, checkpoint.origin)
