"""Step 6's second half: the Merkle rows a store keeps, held to the tree its
events give.

A store serves inclusion and consistency proofs, tiles and its checkpointer's
frontier from its Merkle tables (`ledger_merkle_leaves`, `_nodes`). Those
rows are derived data and, like every row, an attacker's to edit: a leaf or
node changed there makes every proof through it fail for whoever checks it.
So `verify` compares each stored leaf (its index, the row it names, its
hash) and each stored node with the tree it recomputes from the events,
under the newest checkpoint (where the checkpointer must have written them;
past it the tree may not be stored yet). A chunk's own leaves and nodes are
compared where the chunk is verified; the nodes that span chunks, as the
merge makes them. Per chunk one finding names the first bad leaf and one the
first bad node, with how many more there are; rows under an event already
found altered are set aside (the tree stored is the events' as written).
"""

from __future__ import annotations

import bisect
import hashlib
from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from ledger.crypto.merkle import AlignedLeaves

TreeRows = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]  # (leaves, nodes) as stored
Node = tuple[int, int, bytes]  # (level, index at that level, hash)

CONSEQUENCE = "the proofs and tiles the store gives from it would not verify"


def expected_leaves(first: int, ids: Sequence[int], tree: AlignedLeaves, end: int) -> list[Any]:
    """(leaf index, row id, leaf hash) of leaves [first, end), as they should be stored."""
    count = end - first
    return list(zip(range(first, end), ids[:count], tree.level(0)[:count], strict=True))


def expected_nodes(first: int, tree: AlignedLeaves, end: int) -> list[Node]:
    """(level, index, hash) of every perfect subtree inside leaves [first, end)."""
    nodes: list[Node] = []
    level = 1
    while (1 << level) <= end - first:
        low, high = first >> level, end >> level
        nodes += zip(repeat(level), range(low, high), tree.level(level)[: high - low])
        level += 1
    return nodes


# A stored row found bad: (the first leaf under it, one past its last, message).
Bad = tuple[int, int, str]
LISTED = 64  # bad rows a chunk names, at most (a wiped table has as many as events)


@dataclass
class Mismatches:
    """The stored rows of one kind (leaf rows, node rows) of one range that are
    not the tree's: the first `LISTED` of them, and how many there are."""

    what: str
    listed: list[Bad] = field(default_factory=list)
    total: int = 0

    def add(self, start: int, end: int, message: str) -> None:
        self.total += 1
        if len(self.listed) < LISTED:
            self.listed.append((start, end, message))

    def explained_by(self, positions: Collection[int], since: int | None = None) -> Mismatches:
        """Those left once rows under an event already found altered (or over
        positions from `since` on) are set aside: the stored tree is the
        events' as written, the events changed."""
        if not positions and since is None:
            return self
        ordered = sorted(positions)
        kept = [
            bad
            for bad in self.listed
            if not _any_within(ordered, bad[0], bad[1]) and (since is None or bad[1] <= since)
        ]
        return Mismatches(self.what, kept, self.total - (len(self.listed) - len(kept)))

    def finding(self) -> tuple[int, str] | None:
        """The first as (its first leaf, message), naming how many more there are."""
        if not self.listed:
            return None
        start, _, message = self.listed[0]
        more = f" (and {self.total - 1} more {self.what} here)" if self.total > 1 else ""
        return start, f"{message}: {CONSEQUENCE}{more}"


def _any_within(ordered: list[int], start: int, end: int) -> bool:
    at = bisect.bisect_left(ordered, start)
    return at < len(ordered) and ordered[at] < end


def compare_leaves(expected: list[Any], stored: list[tuple[Any, ...]]) -> Mismatches:
    """The stored leaf rows (index, row id, hash) against the expected ones."""
    found = Mismatches("leaf rows")
    if stored == expected:  # each row a tuple of ints and bytes: one comparison
        return found
    by_index: dict[object, tuple[Any, ...]] = {}
    twice: set[object] = set()
    for held in stored:
        if held[0] in by_index:
            twice.add(held[0])
        by_index[held[0]] = held
    for index, row_id, leaf_hash in expected:
        row = by_index.get(index)
        where = f"the store's Merkle leaf row for log position {index}"
        if row is None:
            found.add(
                index, index + 1, f"the store holds no Merkle leaf row for log position {index}"
            )
        elif index in twice:
            found.add(
                index, index + 1, f"the store holds two Merkle leaf rows for log position {index}"
            )
        elif row[1] != row_id:
            found.add(
                index,
                index + 1,
                f"{where} names row id {row[1]!r}, not the event there (row id {row_id})",
            )
        elif not _same_hash(row[2], leaf_hash):
            found.add(index, index + 1, f"{where} does not hold the leaf hash of the event there")
    return found


def compare_nodes(expected: Iterable[Node], stored: Mapping[tuple[int, int], object]) -> Mismatches:
    """The stored node rows ((level, index) -> hash; a key stored twice is
    missing from the map, and named as such) against the expected ones."""
    found = Mismatches("node rows")
    for level, index, value in expected:
        row = stored.get((level, index))
        start, end = index << level, (index + 1) << level
        name = f"Merkle node (level {level}, index {index})"
        if row is None:
            found.add(start, end, f"the store holds no row (or two) for the {name}")
        elif not _same_hash(row, value):
            found.add(
                start,
                end,
                f"the store's row for the {name} does not hold the hash of the "
                f"{1 << level} events under it",
            )
    return found


def node_map(stored: list[tuple[Any, ...]]) -> dict[tuple[int, int], object]:
    """Stored node rows (level, index, hash) by key; a key stored twice left out."""
    found: dict[tuple[int, int], object] = {}
    twice: set[tuple[int, int]] = set()
    for level, index, value in stored:
        key = (level, index)
        if key in found:
            twice.add(key)
        found[key] = value
    for key in twice:
        del found[key]
    return found


def _same_hash(value: object, expected: bytes) -> bool:
    return isinstance(value, bytes | bytearray | memoryview) and bytes(value) == expected


def _below(row: tuple[Any, ...], bound: int, node: bool) -> bool:
    if node:
        level, index = row[0], row[1]
        return type(level) is int and type(index) is int and (index + 1) << level <= bound
    return type(row[0]) is int and row[0] < bound


def under(rows: TreeRows, bound: int) -> TreeRows:
    """The rows of leaves below `bound`, and of nodes whose subtree ends at or
    below it (what a saved state's digest covers), in their order."""
    leaves, nodes = rows
    return [r for r in leaves if _below(r, bound, False)], [
        r for r in nodes if _below(r, bound, True)
    ]


def over(rows: TreeRows, bound: int) -> TreeRows:
    """The rows `under` leaves out."""
    leaves, nodes = rows
    return (
        [r for r in leaves if not _below(r, bound, False)],
        [r for r in nodes if not _below(r, bound, True)],
    )


def tree_rows_digest(rows: TreeRows) -> str:
    """SHA-256 over every column of these rows, column-wise as `rows_digest`
    does events' (no Python code per row); rows of odd types, value by value."""
    digest = hashlib.sha256(b"merkle rows")
    for table in rows:
        if not table:
            digest.update(b"()")
            continue
        *keys, hashes = zip(*table, strict=True)
        try:
            digest.update(repr((*keys, tuple(map(len, hashes)))).encode())
            deque(map(digest.update, hashes), maxlen=0)
        except TypeError:  # a hash column that is not bytes: every value tagged
            for row in table:
                for value in row:
                    data = repr(bytes(value) if isinstance(value, memoryview) else value)
                    digest.update(b"%d|%s" % (len(data), data.encode()))
    return digest.hexdigest()
