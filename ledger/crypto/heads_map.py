"""The account heads map: a sparse Merkle tree from each account to its stream's head.

A checkpoint proves what the log holds, and an inclusion proof that an event
is in it; neither shows that an account's newest event is the one a history
starts from. So each checkpoint also commits to this map (its `accounts`
line): for every account stream in the tree, its last event's version, log
position and entry hash. From a head the map proves, the account's chain
(each envelope's `prev`) leads back through every event of the account, so a
history walked from it misses nothing.

The tree (docs/history.md specifies it for outside programs):

- an account's **key** is SHA-256 of its id (lowercase, hyphenated, ASCII),
  read as 256 bits, the most significant first; bit *d* picks the side at
  depth *d* (0 left, 1 right);
- a **leaf** is SHA-256(0x02 ‖ key ‖ version ‖ position ‖ entry hash), the
  two numbers 8-byte unsigned big-endian;
- a subtree holding no account is 32 zero bytes; one holding exactly one
  account is that account's leaf (no nodes below it); any other is
  SHA-256(0x03 ‖ left ‖ right).

The prefixes 0x02 and 0x03 keep its hashes apart from the log's own RFC 9162
leaves (0x00) and nodes (0x01). The shape follows from the keys alone, so an
honest map has one root, and a proof is the siblings on the way down.
Updating an account costs about log2(accounts) hashes.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, insort
from collections.abc import Sequence
from typing import Final
from uuid import UUID

EMPTY: Final = bytes(32)
KEY_BITS: Final = 256
LEAF_PREFIX: Final = b"\x02"
NODE_PREFIX: Final = b"\x03"


def account_key(account: UUID | str) -> bytes:
    return hashlib.sha256(str(UUID(str(account))).encode("ascii")).digest()


def head_leaf(key: bytes, version: int, position: int, entry_hash: bytes) -> bytes:
    return hashlib.sha256(
        LEAF_PREFIX + key + version.to_bytes(8, "big") + position.to_bytes(8, "big") + entry_hash
    ).digest()


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def _bit(key: int, depth: int) -> int:
    return key >> (KEY_BITS - 1 - depth) & 1


def root_from_proof(key: bytes, leaf: bytes, siblings: Sequence[bytes]) -> bytes:
    """The root a proof leads to: `siblings` top-down, the leaf at their depth."""
    number = int.from_bytes(key, "big")
    digest = leaf
    for depth in range(len(siblings) - 1, -1, -1):
        sibling = siblings[depth]
        digest = node(sibling, digest) if _bit(number, depth) else node(digest, sibling)
    return digest


class HeadsMap:
    """The map in memory, updated in place: a node's hash is kept until an
    account under it moves (`set`), so a batch re-hashes only the touched paths."""

    def __init__(self) -> None:
        self._keys: list[int] = []  # sorted: a subtree is a slice of it
        self._leaves: dict[int, bytes] = {}
        self._nodes: dict[tuple[int, int], bytes] = {}  # (depth, prefix) -> hash
        self._deepest = -1  # no node is kept below this depth

    @classmethod
    def of(cls, leaves: dict[bytes, bytes]) -> HeadsMap:
        """A map built at once from key -> leaf (nothing to forget yet)."""
        built = cls()
        built._leaves = {int.from_bytes(key, "big"): leaf for key, leaf in leaves.items()}
        built._keys = sorted(built._leaves)
        return built

    def __len__(self) -> int:
        return len(self._keys)

    def set(self, key: bytes, leaf: bytes) -> None:
        number = int.from_bytes(key, "big")
        if number not in self._leaves:
            insort(self._keys, number)
        self._leaves[number] = leaf
        # The nodes above it, forgotten, from the deepest kept up: one found and
        # the next one up gone means an earlier `set` forgot the rest already.
        pop, found = self._nodes.pop, False
        for depth in range(self._deepest, -1, -1):
            if pop((depth, number >> (KEY_BITS - depth)), None) is not None:
                found = True
            elif found:
                break

    def root(self) -> bytes:
        return self._hash(0, 0, 0, len(self._keys))

    def leaf(self, key: bytes) -> bytes | None:
        return self._leaves.get(int.from_bytes(key, "big"))

    def proof(self, key: bytes) -> list[bytes]:
        """The siblings from the root down to `key`'s leaf (KeyError: not in the map)."""
        number = int.from_bytes(key, "big")
        if number not in self._leaves:
            raise KeyError(key.hex())
        siblings: list[bytes] = []
        depth, prefix, low, high = 0, 0, 0, len(self._keys)
        while high - low > 1:
            middle = self._middle(depth, prefix, low, high)
            left, right = prefix << 1, prefix << 1 | 1
            if _bit(number, depth):
                siblings.append(self._hash(depth + 1, left, low, middle))
                prefix, low = right, middle
            else:
                siblings.append(self._hash(depth + 1, right, middle, high))
                prefix, high = left, middle
            depth += 1
        return siblings

    def _middle(self, depth: int, prefix: int, low: int, high: int) -> int:
        return bisect_left(self._keys, (prefix << 1 | 1) << (KEY_BITS - 1 - depth), low, high)

    def _hash(self, depth: int, prefix: int, low: int, high: int) -> bytes:
        if high == low:
            return EMPTY
        if high - low == 1:
            return self._leaves[self._keys[low]]
        kept = self._nodes.get((depth, prefix))
        if kept is None:
            middle = self._middle(depth, prefix, low, high)
            left = self._leaves[self._keys[low]] if middle - low == 1 else None
            right = self._leaves[self._keys[middle]] if high - middle == 1 else None
            kept = hashlib.sha256(
                NODE_PREFIX
                + (left or self._hash(depth + 1, prefix << 1, low, middle))
                + (right or self._hash(depth + 1, prefix << 1 | 1, middle, high))
            ).digest()
            self._nodes[(depth, prefix)] = kept
            if depth > self._deepest:
                self._deepest = depth
        return kept
