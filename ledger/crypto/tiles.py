"""C2SP tlog-tiles (https://c2sp.org/tlog-tiles): the Merkle tree as static files.

A tile is 256 consecutive hashes of one tile level: at level 0 the leaf hashes,
at level L the Merkle Tree Hashes of the full level L-1 tiles. The rightmost
tile of a level is partial (1 to 255 hashes, path suffix `.p/<W>`). An entry
bundle holds the entries of one level-0 tile, each prefixed by its length as a
big-endian uint16. Everything here is pure: paths, bundle framing, and the
`TileFrontier` that turns leaf hashes into tiles and the tree's root.

Go's golang.org/x/mod/sumdb/tlog reads the same tiles with height 8: its path
`tile/8/<L>/<N>` is ours without the `8/`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from ledger.crypto.merkle import EMPTY_ROOT, HASH_SIZE, hash_children, root_of
from ledger.crypto.native import native

__all__ = [
    "ENTRY_MAX",
    "TILE_WIDTH",
    "TileError",
    "TileFrontier",
    "TilePath",
    "decode_bundle",
    "encode_bundle",
    "partial_widths",
]

TILE_HEIGHT: Final = 8
TILE_WIDTH: Final = 1 << TILE_HEIGHT  # 256 hashes, 8,192 bytes for a full tile
ENTRY_MAX: Final = 0xFFFF  # an entry's length is a uint16
_MAX_LEVEL: Final = 63
_ELEMENT = re.compile(r"x[0-9]{3}")
_LAST = re.compile(r"[0-9]{3}")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


class TileError(ValueError):
    """A tile path, tile or entry bundle that is not well formed."""


@dataclass(frozen=True, order=True)
class TilePath:
    """One tile (`level` 0..63) or entry bundle (`level` None) of `width` hashes."""

    level: int | None
    index: int
    width: int = TILE_WIDTH

    @property
    def full(self) -> bool:
        return self.width == TILE_WIDTH

    @property
    def is_entries(self) -> bool:
        return self.level is None

    def __str__(self) -> str:
        digits = f"{self.index % 1000:03d}"
        n = self.index // 1000
        while n:
            digits = f"x{n % 1000:03d}/{digits}"
            n //= 1000
        level = "entries" if self.level is None else str(self.level)
        suffix = "" if self.full else f".p/{self.width}"
        return f"tile/{level}/{digits}{suffix}"

    @classmethod
    def parse(cls, path: str) -> TilePath:
        """The tile a path names, in its one canonical spelling; else `TileError`."""
        parts = path.split("/")
        if len(parts) < 3 or parts[0] != "tile":
            raise TileError(f"{path!r} is not a tile path (tile/<L>/<N>[.p/<W>])")
        level: int | None
        if parts[1] == "entries":
            level = None
        elif _DECIMAL.fullmatch(parts[1]) and int(parts[1]) <= _MAX_LEVEL:
            level = int(parts[1])
        else:
            raise TileError(f"{path!r}: the level is not 0 to 63")
        elements, width = parts[2:], TILE_WIDTH
        if len(elements) >= 2 and elements[-2].endswith(".p"):
            if not _DECIMAL.fullmatch(elements[-1]) or not 0 < int(elements[-1]) < TILE_WIDTH:
                raise TileError(f"{path!r}: a partial tile's width is 1 to 255")
            width = int(elements[-1])
            elements = [*elements[:-2], elements[-2].removesuffix(".p")]
        if not _LAST.fullmatch(elements[-1]) or not all(map(_ELEMENT.fullmatch, elements[:-1])):
            raise TileError(f"{path!r}: the index is not written as x001/x234/067")
        index = 0
        for element in elements:
            index = index * 1000 + int(element.removeprefix("x"))
        tile = cls(level, index, width)
        if str(tile) != path:  # e.g. x000 leading elements: one spelling per tile
            raise TileError(f"{path!r} is not the canonical path of {tile}")
        return tile

    def entry_range(self) -> tuple[int, int]:
        """The log positions [begin, end) this tile's hashes span."""
        level = self.level or 0
        span = TILE_WIDTH**level
        begin = self.index * TILE_WIDTH * span
        return begin, begin + self.width * span


def partial_widths(size: int) -> list[int]:
    """Per level from 0, the width of the tree's rightmost partial tile (0: none)."""
    widths = []
    level = 0
    while size >> (TILE_HEIGHT * level):
        widths.append(size >> (TILE_HEIGHT * level) & (TILE_WIDTH - 1))
        level += 1
    return widths


def partial_tiles(size: int) -> list[TilePath]:
    """The partial hash tiles a tree of `size` leaves has (empty tiles are none)."""
    return [
        TilePath(level, size >> (TILE_HEIGHT * (level + 1)), width)
        for level, width in enumerate(partial_widths(size))
        if width
    ]


def encode_bundle(entries: Sequence[bytes]) -> bytes:
    """An entry bundle: each entry as a big-endian uint16 length, then its bytes."""
    parts = []
    for entry in entries:
        if len(entry) > ENTRY_MAX:
            raise TileError(f"an entry of {len(entry)} bytes does not fit a uint16 length")
        parts.append(len(entry).to_bytes(2, "big") + entry)
    return b"".join(parts)


def decode_bundle(data: bytes, width: int) -> list[bytes]:
    """The `width` entries of a bundle; a truncated bundle, trailing bytes or
    another count of entries is a `TileError`."""
    entries: list[bytes] = []
    offset = 0
    while offset < len(data):
        if offset + 2 > len(data):
            raise TileError(f"truncated after {len(entries)} entries (a length cut short)")
        length = int.from_bytes(data[offset : offset + 2], "big")
        end = offset + 2 + length
        if end > len(data):
            have = len(data) - offset - 2
            raise TileError(f"entry {len(entries)} is cut short ({have} of {length} bytes)")
        entries.append(data[offset + 2 : end])
        offset = end
    if len(entries) != width:
        raise TileError(f"holds {len(entries)} entries, not {width}")
    return entries


def split_hashes(data: bytes, width: int) -> list[bytes]:
    """A hash tile's `width` hashes; any other length is a `TileError`."""
    if len(data) != width * HASH_SIZE:
        raise TileError(f"is {len(data)} bytes, not {width} hashes ({width * HASH_SIZE} bytes)")
    return [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]


class TileFrontier:
    """The rightmost, incomplete tile of every level of a growing tree.

    That is all a tree of any size needs in order to grow and to give its root:
    each level holds the hashes of its partial tile; a level-L tile that fills
    up is a full tile, and its Merkle Tree Hash joins level L+1.
    """

    __slots__ = ("_levels", "_size")

    def __init__(self, size: int = 0, levels: Sequence[Sequence[bytes]] = ()) -> None:
        widths = partial_widths(size)
        rows = [list(row) for row in levels]
        while len(rows) < len(widths):
            rows.append([])
        if [len(row) for row in rows[: len(widths)]] != widths or any(rows[len(widths) :]):
            raise ValueError(f"a tree of {size} leaves has partial tiles of widths {widths}")
        self._size = size
        self._levels = rows[: len(widths)]

    @property
    def size(self) -> int:
        return self._size

    def row(self, level: int) -> list[bytes]:
        """The hashes of level `level`'s partial tile (a copy)."""
        return list(self._levels[level]) if level < len(self._levels) else []

    def partial(self) -> Iterator[tuple[TilePath, list[bytes]]]:
        """Each partial tile of the tree as it stands, with its hashes."""
        for tile in partial_tiles(self._size):
            yield tile, self.row(tile.level or 0)

    def append(self, leaf_hash: bytes) -> list[tuple[TilePath, list[bytes]]]:
        """Add a leaf; return the tiles it completed (level 0 first), with their hashes."""
        completed = self._carry(leaf_hash, 0, self._size)
        self._size += 1
        return completed

    def append_tile(self, leaf_hashes: list[bytes]) -> list[tuple[TilePath, list[bytes]]]:
        """Add a full level-0 tile's leaf hashes at once, the tree's size a
        multiple of the tile width: what `append` of each returns and leaves, the
        tile's hash taken level by level in C where it is built. ValueError for
        a tree not at a tile's edge, a tile not full, or a hash not 32 bytes."""
        if self._size % TILE_WIDTH or len(leaf_hashes) != TILE_WIDTH:
            raise ValueError("a full level-0 tile goes at a tile's edge")
        if not self._levels:
            self._levels.append([])
        completed = [(TilePath(0, self._size >> TILE_HEIGHT), list(leaf_hashes))]
        completed += self._carry(_full_tile_hash(leaf_hashes), 1, self._size)
        self._size += TILE_WIDTH
        return completed

    def _carry(self, node: bytes, level: int, position: int) -> list[tuple[TilePath, list[bytes]]]:
        """Put `node` (the hash at `position`'s place) in level `level`'s partial
        tile, and each tile that fills up into the level above: those tiles."""
        completed = []
        while True:
            if level == len(self._levels):
                self._levels.append([])
            row = self._levels[level]
            row.append(node)
            if len(row) < TILE_WIDTH:
                break
            index = position >> (TILE_HEIGHT * (level + 1))
            completed.append((TilePath(level, index), row))
            node = root_of(row)
            self._levels[level] = []
            level += 1
        return completed

    def root(self) -> bytes:
        """The tree's Merkle Tree Hash (RFC 9162), from the partial tiles alone.

        The top level's partial tile covers the leftmost leaves; within a row,
        its hashes split into perfect subtrees by the binary digits of its
        width, largest first. Folded right to left, they are the root."""
        subtrees = []
        for level in range(len(self._levels) - 1, -1, -1):
            row, start = self._levels[level], 0
            for bit in range(TILE_HEIGHT - 1, -1, -1):
                if len(row) >> bit & 1:
                    subtrees.append(root_of(row[start : start + (1 << bit)]))
                    start += 1 << bit
        if not subtrees:
            return EMPTY_ROOT
        node = subtrees[-1]
        for left in reversed(subtrees[:-1]):
            node = hash_children(left, node)
        return node


def _full_tile_hash(hashes: list[bytes]) -> bytes:
    """The Merkle Tree Hash of a full tile's 256 hashes (each held to 32 bytes)."""
    if native is None:
        if not all(type(h) is bytes and len(h) == HASH_SIZE for h in hashes):
            raise ValueError("a tile's hash is not 32 bytes")
        return root_of(hashes)
    level = hashes
    while len(level) > 1:
        level = native.node_level(level)  # (ValueError for a hash not 32 bytes)
    return level[0]
