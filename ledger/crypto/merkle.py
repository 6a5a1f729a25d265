"""RFC 9162 (Certificate Transparency v2) Merkle tree hashing and proofs.

The log's checkpoints commit to every event through one Merkle Tree Hash
(MTH), so an auditor can check that an event is in the log (inclusion proof)
and that a later checkpoint only appended to an earlier one (consistency
proof) with O(log n) hashes instead of the whole log.

Everything here is a small pure function over 32-byte SHA-256 hashes; leaves
are passed already hashed (`hash_leaf`). Proof generation takes a
`subtree(begin, end)` callable instead of a list of leaves so a caller can
serve subtree hashes from wherever it keeps them (a node table, a list...).
Every failed check raises `VerificationError`; misuse of the API (negative
sizes, an index outside the tree, non-adjacent ranges) raises `ValueError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Final

from ledger.crypto.native import native
from ledger.errors import VerificationError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "AlignedLeaves",
    "CompactRange",
    "consistency_proof",
    "hash_children",
    "hash_leaf",
    "inclusion_proof",
    "root_from_inclusion",
    "root_of",
    "subtree_from_leaves",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE: Final = 32
# MTH of the empty tree (RFC 9162 §2.1.1): the hash of the empty string.
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()

# Domain separation (RFC 9162 §2.1.1): a leaf can never be read as a node.
LEAF_PREFIX: Final = b"\x00"
_LEAF_PREFIX: Final = LEAF_PREFIX
_NODE_PREFIX: Final = b"\x01"
_sha256 = hashlib.sha256

Subtree = Callable[[int, int], bytes]


def hash_leaf(data: bytes) -> bytes:
    """MTH of one entry: SHA-256(0x00 || data)."""
    return _sha256(_LEAF_PREFIX + data).digest()


def hash_children(left: bytes, right: bytes) -> bytes:
    """Hash of an interior node: SHA-256(0x01 || left || right)."""
    return _sha256(_NODE_PREFIX + left + right).digest()


def root_of(leaf_hashes: Sequence[bytes]) -> bytes:
    """MTH over already-hashed leaves; `EMPTY_ROOT` for none.

    Level by level, pairing neighbours and carrying an odd last node up
    unchanged: this builds exactly RFC 9162's tree (left subtree of the
    largest power of two below n) without recursion.
    """
    level = list(leaf_hashes)
    if not level:
        return EMPTY_ROOT
    while len(level) > 1:
        paired = [hash_children(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def _split(n: int) -> int:
    """The largest power of two strictly below `n` (n >= 2): RFC 9162's k."""
    return 1 << ((n - 1).bit_length() - 1)


def _range_sizes(begin: int, end: int) -> list[int]:
    """Sizes of the perfect, aligned subtrees that exactly cover [begin, end).

    Greedy from the left: at each position take the largest aligned subtree
    that still fits; this is the unique minimal cover.
    """
    sizes = []
    pos = begin
    while pos < end:
        width = 1 << ((end - pos).bit_length() - 1)
        if pos:
            width = min(width, pos & -pos)
        sizes.append(width)
        pos += width
    return sizes


class CompactRange:
    """Leaves [begin, end) as the minimal list of perfect, aligned subtree hashes.

    Left to right, at most about 2·log2(n) hashes, so a log of any size can be
    appended to (and its root taken) in O(log n) memory. Adjacent ranges
    merge with `extend`, so ranges built in parallel can be joined.
    """

    __slots__ = ("_begin", "_end", "_hashes")

    def __init__(
        self, begin: int = 0, end: int | None = None, hashes: list[bytes] | None = None
    ) -> None:
        if end is None:
            end = begin
        if begin < 0 or end < begin:
            raise ValueError(f"invalid range [{begin}, {end})")
        hashes = [] if hashes is None else list(hashes)
        expected = len(_range_sizes(begin, end))
        if len(hashes) != expected:
            raise ValueError(f"range [{begin}, {end}) needs {expected} hashes, got {len(hashes)}")
        self._begin = begin
        self._end = end
        self._hashes = hashes

    @property
    def begin(self) -> int:
        """Index of the first leaf covered."""
        return self._begin

    @property
    def end(self) -> int:
        """Index one past the last leaf covered."""
        return self._end

    @property
    def size(self) -> int:
        """Number of leaves covered."""
        return self._end - self._begin

    @property
    def hashes(self) -> list[bytes]:
        """A copy of the subtree hashes, left to right."""
        return list(self._hashes)

    def append(
        self, leaf_hash: bytes, completed: list[tuple[int, int, bytes]] | None = None
    ) -> None:
        """Add the leaf at index `end`, merging completed subtrees.

        The new node is a right child at each level where `end` has a 1 bit;
        its left sibling is then the last hash (if inside the range), so the
        two merge. Amortised O(1) hashes, O(log n) worst case. Each merge
        completes a perfect subtree; if `completed` is given, each is added
        to it as (level, index at that level, hash), for a node store.
        """
        end = self._end
        hashes = self._hashes
        node = leaf_hash
        width = 1
        level = 0
        while end & width and end + 1 - 2 * width >= self._begin:
            node = _sha256(_NODE_PREFIX + hashes.pop() + node).digest()
            width <<= 1
            level += 1
            if completed is not None:
                completed.append((level, end >> level, node))
        hashes.append(node)
        self._end = end + 1

    def _push(
        self, node: bytes, width: int, completed: list[tuple[int, int, bytes]] | None
    ) -> None:
        """Add a perfect subtree of `width` leaves at index `end` (aligned)."""
        start = self._end
        self._end = start + width
        hashes = self._hashes
        # Merge while the node is a right child whose left sibling is in range.
        while start & width and start - width >= self._begin:
            node = hash_children(hashes.pop(), node)
            start -= width
            width <<= 1
            if completed is not None:
                level = width.bit_length() - 1
                completed.append((level, start >> level, node))
        hashes.append(node)

    def extend(
        self, other: CompactRange, completed: list[tuple[int, int, bytes]] | None = None
    ) -> None:
        """Append the adjacent range `other` ([self.end, other.end)).

        Each of other's subtrees is aligned, so pushing them left to right
        and merging like `append` keeps the cover minimal. The subtrees the
        merges complete (those spanning both ranges) are added to `completed`,
        when given, as (level, index at that level, hash).
        """
        if other.begin != self._end:
            raise ValueError(
                f"cannot extend [{self._begin}, {self._end}) "
                f"with non-adjacent [{other.begin}, {other.end})"
            )
        nodes = list(other._hashes)
        for node, width in zip(nodes, _range_sizes(other.begin, other.end), strict=True):
            self._push(node, width, completed)

    def root(self) -> bytes:
        """MTH of the tree of the first `end` leaves (needs begin == 0).

        The cover of [0, n) is n's binary decomposition, largest subtree
        first; folding it right to left rebuilds RFC 9162's tree.
        """
        if self._begin != 0:
            raise ValueError(f"root of [{self._begin}, {self._end}): range must start at 0")
        if not self._hashes:
            return EMPTY_ROOT
        node = self._hashes[-1]
        for left in reversed(self._hashes[:-1]):
            node = hash_children(left, node)
        return node

    def copy(self) -> CompactRange:
        """An independent copy (hashes are immutable bytes, the list is new)."""
        return CompactRange(self._begin, self._end, self._hashes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompactRange):
            return NotImplemented
        return (self._begin, self._end, self._hashes) == (
            other._begin,
            other._end,
            other._hashes,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"CompactRange({self._begin}, {self._end}, [{len(self._hashes)} hashes])"


class AlignedLeaves:
    """Every perfect subtree over leaves [begin, begin + n), hashed level by level.

    For a run of leaves whose start is a multiple of a power of two >= n (a
    verification chunk), every aligned subtree inside it is one node of these
    levels, so the compact range of any prefix is read off them: the same n - 1
    node hashes `CompactRange.append` would compute, in list comprehensions
    instead of one Python call per leaf (or in C, `ledger.crypto.native`, where
    it was built).
    """

    __slots__ = ("_begin", "_levels")

    def __init__(self, begin: int, leaf_hashes: list[bytes], *, use_native: bool = True) -> None:
        n = len(leaf_hashes)
        if begin < 0 or (n > 1 and begin % (1 << (n - 1).bit_length())):
            raise ValueError(f"leaves from {begin} are not aligned to a power of two >= {n}")
        self._begin = begin
        level = leaf_hashes
        self._levels = [level]
        sha256, prefix = _sha256, _NODE_PREFIX
        node_level = native.node_level if use_native and native is not None else None
        while len(level) > 1:
            if node_level is not None:
                level = node_level(level)
            else:
                level = [
                    sha256(prefix + level[i] + level[i + 1]).digest()
                    for i in range(0, len(level) - 1, 2)
                ]
            self._levels.append(level)

    @property
    def end(self) -> int:
        return self._begin + len(self._levels[0])

    def level(self, level: int) -> list[bytes]:
        """The hashes of the perfect subtrees of 2**level leaves, left to right
        (level 0: the leaves), the first at index begin >> level of its level."""
        return self._levels[level] if level < len(self._levels) else []

    def compact_range(self, end: int | None = None) -> CompactRange:
        """Leaves [begin, end) (all of them by default) as a `CompactRange`."""
        begin = self._begin
        end = self.end if end is None else end
        if not begin <= end <= self.end:
            raise ValueError(f"[{begin}, {end}) is not inside [{begin}, {self.end})")
        hashes, position = [], begin
        for width in _range_sizes(begin, end):
            level = width.bit_length() - 1
            hashes.append(self._levels[level][(position - begin) >> level])
            position += width
        return CompactRange(begin, end, hashes)


def subtree_from_leaves(leaf_hashes: Sequence[bytes]) -> Subtree:
    """A `subtree(begin, end)` that hashes from an in-memory list of leaf hashes."""

    def subtree(begin: int, end: int) -> bytes:
        if not 0 <= begin < end <= len(leaf_hashes):
            raise ValueError(f"subtree [{begin}, {end}) outside {len(leaf_hashes)} leaves")
        return root_of(leaf_hashes[begin:end])

    return subtree


def _inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The subtrees whose hashes make PATH(index, D[size]), leaf to root.

    RFC 9162 §2.1.3.1, unrolled: descend from the root, each step keeping the
    half holding `index` and recording the other half's range.
    """
    ranges = []
    lo, hi = 0, size
    while hi - lo > 1:
        mid = lo + _split(hi - lo)
        if index < mid:
            ranges.append((mid, hi))
            hi = mid
        else:
            ranges.append((lo, mid))
            lo = mid
    ranges.reverse()
    return ranges


def _consistency_ranges(size1: int, size2: int) -> list[tuple[int, int]]:
    """The subtrees whose hashes make PROOF(size1, D[size2]), in proof order.

    RFC 9162 §2.1.4.1 SUBPROOF(m, D[n], b), unrolled: descend while m < n,
    recording the sibling half; when m == n, the subtree itself is included
    unless it is the whole old tree (b still true, the verifier knows it).
    """
    ranges = []
    lo, hi = 0, size2
    m = size1
    whole_old_tree = True  # RFC 9162's b
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo += k
            m -= k
            whole_old_tree = False
    if not whole_old_tree:
        ranges.append((lo, hi))
    ranges.reverse()
    return ranges


def inclusion_proof(index: int, size: int, subtree: Subtree) -> list[bytes]:
    """Audit path for leaf `index` in the tree of the first `size` leaves."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} outside tree of size {size}")
    return [subtree(b, e) for b, e in _inclusion_ranges(index, size)]


def consistency_proof(size1: int, size2: int, subtree: Subtree) -> list[bytes]:
    """Proof that the tree of `size2` leaves extends the one of `size1`.

    Empty when the sizes are equal; size1 == 0 is refused since
    `verify_consistency` rejects it (an empty tree proves nothing).
    """
    return [subtree(b, e) for b, e in consistency_ranges(size1, size2)]


def consistency_ranges(size1: int, size2: int) -> list[tuple[int, int]]:
    """The leaf ranges whose subtree hashes make that proof, in proof order:
    what a reader of stored nodes can fetch at once before building it."""
    if not 0 < size1 <= size2:
        raise ValueError(f"no consistency proof from size {size1} to size {size2}")
    return _consistency_ranges(size1, size2)


def _check_hashes(proof: Sequence[bytes], what: str) -> None:
    for i, element in enumerate(proof):
        if len(element) != HASH_SIZE:
            raise VerificationError(
                f"{what}: proof element {i} is {len(element)} bytes, not {HASH_SIZE}"
            )


def root_from_inclusion(index: int, size: int, leaf_hash: bytes, proof: Sequence[bytes]) -> bytes:
    """The root that `proof` implies for `leaf_hash` at `index` (RFC 9162 §2.1.3.2).

    Raises `VerificationError` if the proof cannot be a path for this index
    and size; the caller still has to compare the result with a trusted root.
    """
    what = f"inclusion proof for leaf {index} in tree of size {size}"
    if not 0 <= index < size:
        raise VerificationError(f"{what}: index out of range")
    if len(leaf_hash) != HASH_SIZE:
        raise VerificationError(f"{what}: leaf hash is {len(leaf_hash)} bytes, not {HASH_SIZE}")
    _check_hashes(proof, what)
    expected = len(_inclusion_ranges(index, size))
    if len(proof) != expected:
        raise VerificationError(f"{what}: {len(proof)} hashes, expected {expected}")
    fn, sn = index, size - 1
    r = leaf_hash
    for p in proof:
        if sn == 0:
            raise VerificationError(f"{what}: proof too long")
        if fn & 1 or fn == sn:
            r = hash_children(p, r)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            r = hash_children(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerificationError(f"{what}: proof too short")
    return r


def verify_inclusion(
    index: int, size: int, leaf_hash: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that `leaf_hash` is leaf `index` of the tree of `size` with MTH `root`."""
    computed = root_from_inclusion(index, size, leaf_hash, proof)
    if computed != root:
        raise VerificationError(
            f"inclusion proof for leaf {index} in tree of size {size}: root mismatch"
        )


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Check that the tree of `size2` with MTH `root2` extends `size1`/`root1`.

    RFC 9162 §2.1.4.2, with two edge cases decided here: size1 == 0 is
    always rejected (any tree "extends" the empty one, so such a proof
    proves nothing), and equal sizes verify only with an empty proof and
    identical roots.
    """
    what = f"consistency proof from size {size1} to size {size2}"
    if size1 <= 0:
        raise VerificationError(f"{what}: old tree must not be empty")
    if size1 > size2:
        raise VerificationError(f"{what}: old tree is larger than new tree")
    if size1 == size2:
        if proof:
            raise VerificationError(f"{what}: equal sizes need an empty proof")
        if root1 != root2:
            raise VerificationError(f"{what}: equal sizes but roots differ")
        return
    if len(root1) != HASH_SIZE or len(root2) != HASH_SIZE:
        raise VerificationError(f"{what}: roots must be {HASH_SIZE} bytes")
    _check_hashes(proof, what)
    expected = len(_consistency_ranges(size1, size2))
    if len(proof) != expected:
        raise VerificationError(f"{what}: {len(proof)} hashes, expected {expected}")

    # When size1 is a power of two the old root is itself a node of the new
    # tree, so the proof omits it and the verifier supplies it.
    path = list(proof)
    if size1 & (size1 - 1) == 0:
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise VerificationError(f"{what}: proof too long")
        if fn & 1 or fn == sn:
            fr = hash_children(c, fr)
            sr = hash_children(c, sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = hash_children(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerificationError(f"{what}: proof too short")
    if fr != root1:
        raise VerificationError(f"{what}: old root mismatch")
    if sr != root2:
        raise VerificationError(f"{what}: new root mismatch")
