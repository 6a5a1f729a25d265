"""`ledger tiles DIR --check`: read a tiles directory as a monitor would, trusting
nothing in it but what the keyring's checkpoint key signed.

The checkpoint's signature is checked first; then every path of the directory
is listed (no symbolic link followed): each must be the checkpoint, a tile or
an entry bundle of the tree up to the checkpoint's size (or the writer's own
`.pending` and `.checkpoint.new`), a regular file, else it is named. Every
entry bundle is read in order (strict uint16 framing, exactly the tile's
count of entries), each entry hashed as an RFC 9162 leaf, and the tiles
rebuilt from those hashes: every full tile and every partial tile the
checkpoint's size calls for must be byte for byte the file there, and the
tree must have the checkpoint's root. The partial tiles and bundles of
earlier, smaller checkpoints are read too: each must be the start of the tile
or bundle now at its index. So a truncated, altered, missing, extra-long or
stray file is named.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import hash_leaf
from ledger.crypto.tiles import (
    TILE_HEIGHT,
    TILE_WIDTH,
    TileError,
    TileFrontier,
    TilePath,
    decode_bundle,
    encode_bundle,
    split_hashes,
)
from ledger.errors import ConfigError, VerificationError
from ledger.export.tiles import (
    CHECKPOINT_FILE,
    PENDING,
    limit_of,
    older_partial_problem,
    read_published,
)
from ledger.export.tiles_directory import RefusedFile, TilesDirectory

# The writer's own files, never served: a run under way (or cut short) leaves
# them; `.lock` is the lock file of earlier releases (a lock now creates none).
WRITERS_FILES = frozenset({f".{CHECKPOINT_FILE}.new", ".lock"})

Older = dict[tuple[int | None, int], list[TilePath]]  # (level, index) -> narrower partials


@dataclass(frozen=True)
class TilesChecked:
    size: int
    tiles: int
    bundles: int
    origin: str
    older: int = 0  # partial tiles and bundles of earlier checkpoints, each checked


def _read(tree: TilesDirectory, tile: TilePath) -> bytes:
    try:
        return tree.read(str(tile), limit_of(tile))
    except RefusedFile as exc:
        raise VerificationError(str(exc), where=str(tree.path)) from None


def tree_width(size: int, level: int | None, index: int) -> int:
    """The width of tile `index` of `level` (None: the entry bundles) in the
    tree of `size` leaves; 0 when the tree has no such tile."""
    hashes = size >> (TILE_HEIGHT * (level or 0))  # the level's hashes
    return max(0, min(TILE_WIDTH, hashes - index * TILE_WIDTH))


class _Survey:
    """Every path of the directory sorted into what the check reads: the
    older partials, and what is no file of the log at all."""

    def __init__(self, tree: TilesDirectory, size: int) -> None:
        self.older: Older = defaultdict(list)
        self.stray: list[str] = []
        for relative, kind in tree.walk(skip=frozenset({PENDING})):
            problem = self._problem(relative, kind, size)
            if problem is not None:
                self.stray.append(f"{relative} {problem}")

    def _problem(self, relative: str, kind: str, size: int) -> str | None:
        if kind == "symlink":
            return "is a symbolic link (none is followed, nor served)"
        if kind == "deep":
            return "is a directory deeper than any tile's"
        if kind != "file":
            return "is not a regular file (a fifo, a socket or a device)"
        if relative == CHECKPOINT_FILE or relative in WRITERS_FILES:
            return None
        try:
            tile = TilePath.parse(relative)
        except TileError:
            return "is not a tile, an entry bundle or the checkpoint"
        width = tree_width(size, tile.level, tile.index)
        if tile.width == width:
            return None  # read below, as the tree calls for it
        if tile.width < width:  # necessarily partial: of an earlier, smaller tree
            self.older[(tile.level, tile.index)].append(tile)
            return None
        return f"is no tile of the tree of size {size}"

    def raise_stray(self, directory: Path) -> None:
        if self.stray:
            more = len(self.stray) - 1
            others = f" (and {more} other path{'' if more == 1 else 's'})" if more else ""
            raise VerificationError(
                f"{directory}: {self.stray[0]}{others}: a tiles directory holds only the "
                "checkpoint, the tiles and the entry bundles"
            )


def _check_older(
    tree: TilesDirectory, older: Older, tile: TilePath, start: Callable[[int], bytes]
) -> int:
    """Each older partial at `tile`'s index must be its start; how many there were."""
    found = older.pop((tile.level, tile.index), [])
    for partial in found:
        problem = older_partial_problem(tree, partial, tile, start(partial.width))
        if problem is not None:
            kind = "bundle" if partial.is_entries else "tile"
            raise VerificationError(
                f"the partial {kind} {partial} of an earlier checkpoint {problem}",
                where=str(tree.path),
            )
    return len(found)


def _hash_prefix(row: list[bytes]) -> Callable[[int], bytes]:
    return lambda width: b"".join(row[:width])


def _bundle_prefix(entries: list[bytes]) -> Callable[[int], bytes]:
    return lambda width: encode_bundle(entries[:width])


def check_tiles(
    directory: Path,
    keyring: Keyring,
    *,
    origin: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> TilesChecked:
    """Check every file of the directory under its signed checkpoint, else raise."""
    try:
        tree = TilesDirectory(directory)
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        raise ConfigError(f"cannot read tiles directory {directory}: {reason}") from None
    with tree:
        return _check(tree, keyring, origin, progress)


def _check(
    tree: TilesDirectory,
    keyring: Keyring,
    origin: str | None,
    progress: Callable[[int], None] | None,
) -> TilesChecked:
    checkpoint = read_published(tree, keyring)
    if checkpoint is None:
        raise VerificationError(f"{tree.path} holds no {CHECKPOINT_FILE} file")
    if origin is not None and checkpoint.origin != origin:
        raise VerificationError(
            f"{tree.path / CHECKPOINT_FILE}: the log is {checkpoint.origin!r}, not {origin!r}"
        )
    size = checkpoint.size
    survey = _Survey(tree, size)
    survey.raise_stray(tree.path)
    frontier = TileFrontier()
    tiles = bundles = older = 0
    for index in range((size + TILE_WIDTH - 1) // TILE_WIDTH):
        width = min(TILE_WIDTH, size - index * TILE_WIDTH)
        bundle = TilePath(None, index, width)
        try:
            entries = decode_bundle(_read(tree, bundle), width)
        except TileError as exc:
            raise VerificationError(f"entry bundle {bundle} {exc}") from None
        bundles += 1
        older += _check_older(tree, survey.older, bundle, _bundle_prefix(entries))
        level0 = TilePath(0, index, width)
        try:
            hashes = split_hashes(_read(tree, level0), width)
        except TileError as exc:
            raise VerificationError(f"tile {level0} {exc}") from None
        for number, entry in enumerate(entries):
            if hash_leaf(entry) != hashes[number]:
                raise VerificationError(
                    f"entry {number} of bundle {bundle} does not hash to its leaf hash in "
                    f"tile {level0} (log position {index * TILE_WIDTH + number})"
                )
            for tile, row in frontier.append(hashes[number]):
                if tile.level and _read(tree, tile) != b"".join(row):
                    raise VerificationError(
                        f"tile {tile} is not the tile of the hashes below it (altered or truncated)"
                    )
                older += _check_older(tree, survey.older, tile, _hash_prefix(row))
                tiles += 1
        if progress is not None:
            progress(width)
    for tile, row in frontier.partial():
        if tile.level and _read(tree, tile) != b"".join(row):
            raise VerificationError(
                f"partial tile {tile} is not the tile of the entries (altered or truncated)"
            )
        older += _check_older(tree, survey.older, tile, _hash_prefix(row))
        tiles += 1
    if frontier.root() != checkpoint.root:
        raise VerificationError(
            f"the tiles do not hash to the signed root of the checkpoint of size {size}"
        )
    return TilesChecked(size, tiles, bundles, checkpoint.origin, older)
