"""RFC 9162 Merkle hashing: upstream vectors, known answers, properties."""

from __future__ import annotations

import base64
import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.crypto.merkle import (
    EMPTY_ROOT,
    AlignedLeaves,
    CompactRange,
    consistency_proof,
    hash_children,
    hash_leaf,
    inclusion_proof,
    root_of,
    subtree_from_leaves,
    verify_consistency,
    verify_inclusion,
)
from ledger.errors import VerificationError

VECTORS = Path(__file__).parents[1] / "vectors" / "merkle" / "testdata"
INCLUSION_FILES = sorted((VECTORS / "inclusion").glob("**/*.json"))
CONSISTENCY_FILES = sorted((VECTORS / "consistency").glob("**/*.json"))

# The RFC 6962 test tree used by transparency-dev/merkle (testonly).
LEAF_DATA = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    b"\x50\x51\x52\x53\x54\x55\x56\x57",
    b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
]
KNOWN_ROOTS = {
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}
TEST_LEAVES = [hash_leaf(d) for d in LEAF_DATA]

# Distinct leaves of varied lengths for the property tests.
MAX_LEAVES = 300
LEAVES = [hash_leaf(i.to_bytes(2, "big") + bytes(i % 7)) for i in range(MAX_LEAVES)]


def _load(path: Path) -> dict[str, Any]:
    probe: dict[str, Any] = json.loads(path.read_text())
    return probe


def _b64(text: str) -> bytes:
    return base64.b64decode(text)


def _proof(probe: dict[str, Any]) -> list[bytes]:
    return [_b64(p) for p in probe["proof"] or []]


def _id(path: Path) -> str:
    return str(path.relative_to(VECTORS))


# --- upstream vectors -------------------------------------------------------


def test_vector_directories_are_populated() -> None:
    for files in (INCLUSION_FILES, CONSISTENCY_FILES):
        assert len(files) > 0
        assert any(not _load(f)["wantErr"] for f in files)
        assert any(_load(f)["wantErr"] for f in files)


@pytest.mark.parametrize("path", INCLUSION_FILES, ids=_id)
def test_inclusion_vector(path: Path) -> None:
    probe = _load(path)
    args = (
        probe["leafIdx"],
        probe["treeSize"],
        _b64(probe["leafHash"]),
        _proof(probe),
        _b64(probe["root"]),
    )
    if probe["wantErr"]:
        with pytest.raises(VerificationError):
            verify_inclusion(*args)
    else:
        verify_inclusion(*args)


@pytest.mark.parametrize("path", CONSISTENCY_FILES, ids=_id)
def test_consistency_vector(path: Path) -> None:
    probe = _load(path)
    args = (
        probe["size1"],
        probe["size2"],
        _proof(probe),
        _b64(probe["root1"]),
        _b64(probe["root2"]),
    )
    if probe["wantErr"]:
        with pytest.raises(VerificationError):
            verify_consistency(*args)
    else:
        verify_consistency(*args)


def _happy(files: list[Path]) -> list[Path]:
    return [f for f in files if f.name == "happy-path.json"]


@pytest.mark.parametrize("path", _happy(INCLUSION_FILES), ids=_id)
def test_generated_inclusion_proof_matches_vector(path: Path) -> None:
    probe = _load(path)
    index, size = probe["leafIdx"], probe["treeSize"]
    assert _b64(probe["leafHash"]) == TEST_LEAVES[index]
    assert _b64(probe["root"]).hex() == KNOWN_ROOTS[size]
    assert inclusion_proof(index, size, subtree_from_leaves(TEST_LEAVES)) == _proof(probe)


@pytest.mark.parametrize("path", _happy(CONSISTENCY_FILES), ids=_id)
def test_generated_consistency_proof_matches_vector(path: Path) -> None:
    probe = _load(path)
    size1, size2 = probe["size1"], probe["size2"]
    assert _b64(probe["root1"]).hex() == KNOWN_ROOTS[size1]
    assert _b64(probe["root2"]).hex() == KNOWN_ROOTS[size2]
    assert consistency_proof(size1, size2, subtree_from_leaves(TEST_LEAVES)) == _proof(probe)


# --- known answers ----------------------------------------------------------


def test_empty_root_is_sha256_of_nothing() -> None:
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert root_of([]) == EMPTY_ROOT
    assert CompactRange().root() == EMPTY_ROOT


def test_hash_prefixes() -> None:
    assert hash_leaf(b"").hex() == KNOWN_ROOTS[1]
    assert hash_children(TEST_LEAVES[0], TEST_LEAVES[1]).hex() == KNOWN_ROOTS[2]


@pytest.mark.parametrize("size", sorted(KNOWN_ROOTS))
def test_known_roots(size: int) -> None:
    assert root_of(TEST_LEAVES[:size]).hex() == KNOWN_ROOTS[size]
    cr = CompactRange()
    for leaf in TEST_LEAVES[:size]:
        cr.append(leaf)
    assert cr.root().hex() == KNOWN_ROOTS[size]


# --- edge cases -------------------------------------------------------------


def test_consistency_from_empty_tree_is_rejected() -> None:
    with pytest.raises(VerificationError):
        verify_consistency(0, 0, [], EMPTY_ROOT, EMPTY_ROOT)
    with pytest.raises(VerificationError):
        verify_consistency(0, 3, [], EMPTY_ROOT, root_of(LEAVES[:3]))
    with pytest.raises(ValueError):
        consistency_proof(0, 3, subtree_from_leaves(LEAVES))


def test_equal_sizes_need_empty_proof_and_equal_roots() -> None:
    root = root_of(LEAVES[:5])
    assert consistency_proof(5, 5, subtree_from_leaves(LEAVES)) == []
    verify_consistency(5, 5, [], root, root)
    with pytest.raises(VerificationError):
        verify_consistency(5, 5, [root], root, root)
    with pytest.raises(VerificationError):
        verify_consistency(5, 5, [], root, root_of(LEAVES[:4]))


def test_proof_generation_rejects_bad_arguments() -> None:
    subtree = subtree_from_leaves(LEAVES[:4])
    for index, size in ((-1, 4), (4, 4), (0, 0)):
        with pytest.raises(ValueError):
            inclusion_proof(index, size, subtree)
    with pytest.raises(ValueError):
        consistency_proof(5, 4, subtree)
    with pytest.raises(ValueError):
        subtree(2, 5)


def test_verify_rejects_negative_index() -> None:
    with pytest.raises(VerificationError):
        verify_inclusion(-1, 4, LEAVES[0], [], root_of(LEAVES[:4]))


def test_compact_range_misuse() -> None:
    with pytest.raises(ValueError):
        CompactRange(0, 3, [LEAVES[0]])  # [0, 3) needs two hashes
    with pytest.raises(ValueError):
        CompactRange(4, 2)
    with pytest.raises(ValueError):
        CompactRange(1, 2, [LEAVES[1]]).root()
    with pytest.raises(ValueError):
        CompactRange(0, 1, [LEAVES[0]]).extend(CompactRange(2, 3, [LEAVES[2]]))


def test_compact_range_copy_is_independent() -> None:
    cr = CompactRange()
    cr.append(LEAVES[0])
    twin = cr.copy()
    twin.append(LEAVES[1])
    assert (cr.size, twin.size) == (1, 2)
    assert cr.hashes == [LEAVES[0]]
    assert CompactRange(0, 2, twin.hashes) == twin


# --- properties -------------------------------------------------------------


@st.composite
def index_and_size(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(st.integers(1, MAX_LEAVES))
    return draw(st.integers(0, size - 1)), size


@st.composite
def two_sizes(draw: st.DrawFn) -> tuple[int, int]:
    size2 = draw(st.integers(1, MAX_LEAVES))
    return draw(st.integers(1, size2)), size2


def _flip(data: bytes, bit: int) -> bytes:
    bit %= len(data) * 8
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


@given(index_and_size())
def test_inclusion_proofs_verify(case: tuple[int, int]) -> None:
    index, size = case
    proof = inclusion_proof(index, size, subtree_from_leaves(LEAVES))
    verify_inclusion(index, size, LEAVES[index], proof, root_of(LEAVES[:size]))


@given(two_sizes())
def test_consistency_proofs_verify(case: tuple[int, int]) -> None:
    size1, size2 = case
    proof = consistency_proof(size1, size2, subtree_from_leaves(LEAVES))
    verify_consistency(size1, size2, proof, root_of(LEAVES[:size1]), root_of(LEAVES[:size2]))


@given(index_and_size(), st.data())
def test_inclusion_bit_flip_is_rejected(case: tuple[int, int], data: st.DataObject) -> None:
    index, size = case
    proof = inclusion_proof(index, size, subtree_from_leaves(LEAVES))
    root, leaf = root_of(LEAVES[:size]), LEAVES[index]
    bit = data.draw(st.integers(0, 255))
    with pytest.raises(VerificationError):
        verify_inclusion(index, size, _flip(leaf, bit), proof, root)
    with pytest.raises(VerificationError):
        verify_inclusion(index, size, leaf, proof, _flip(root, bit))
    if proof:
        at = data.draw(st.integers(0, len(proof) - 1))
        proof[at] = _flip(proof[at], bit)
        with pytest.raises(VerificationError):
            verify_inclusion(index, size, leaf, proof, root)


@given(two_sizes(), st.data())
def test_consistency_bit_flip_is_rejected(case: tuple[int, int], data: st.DataObject) -> None:
    size1, size2 = case
    proof = consistency_proof(size1, size2, subtree_from_leaves(LEAVES))
    root1, root2 = root_of(LEAVES[:size1]), root_of(LEAVES[:size2])
    bit = data.draw(st.integers(0, 255))
    with pytest.raises(VerificationError):
        verify_consistency(size1, size2, proof, _flip(root1, bit), root2)
    with pytest.raises(VerificationError):
        verify_consistency(size1, size2, proof, root1, _flip(root2, bit))
    if proof:
        at = data.draw(st.integers(0, len(proof) - 1))
        proof[at] = _flip(proof[at], bit)
        with pytest.raises(VerificationError):
            verify_consistency(size1, size2, proof, root1, root2)


@settings(max_examples=30)
@given(st.integers(1, MAX_LEAVES))
def test_compact_range_matches_root_at_every_size(size: int) -> None:
    cr = CompactRange()
    for n, leaf in enumerate(LEAVES[:size], start=1):
        cr.append(leaf)
        assert cr.size == n
        assert cr.root() == root_of(LEAVES[:n])
        assert len(cr.hashes) == n.bit_count()


def _cover(begin: int, end: int) -> list[tuple[int, int]]:
    """Maximal aligned perfect subtrees inside [begin, end), by brute force."""
    nodes = []
    for level in range(end.bit_length() + 1):
        width = 1 << level
        for start in range(begin - begin % width, end, width):
            inside = begin <= start and start + width <= end
            parent = start - start % (2 * width)
            parent_inside = begin <= parent and parent + 2 * width <= end
            if inside and not parent_inside:
                nodes.append((start, start + width))
    return sorted(nodes)


def _range_of(begin: int, end: int) -> CompactRange:
    cr = CompactRange(begin)
    for leaf in LEAVES[begin:end]:
        cr.append(leaf)
    return cr


@given(st.lists(st.integers(0, MAX_LEAVES), min_size=1, max_size=4))
def test_compact_range_split_and_extend(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), MAX_LEAVES]
    pieces = [_range_of(b, e) for b, e in pairwise(bounds)]
    for piece in pieces:
        want = [root_of(LEAVES[b:e]) for b, e in _cover(piece.begin, piece.end)]
        assert piece.hashes == want
    whole = pieces[0].copy()
    for piece in pieces[1:]:
        whole.extend(piece)
    assert whole == _range_of(0, MAX_LEAVES)
    assert whole.root() == root_of(LEAVES)
    # Joining the later pieces first (a range not starting at 0) works too.
    tail = pieces[-1]
    for piece in reversed(pieces[1:-1]):
        joined = piece.copy()
        joined.extend(tail)
        tail = joined
    assert tail == _range_of(bounds[1], MAX_LEAVES)


@given(st.integers(0, 5), st.integers(0, 3), st.data())
def test_aligned_leaves_equal_appending(k: int, block: int, data: st.DataObject) -> None:
    """The verifier's level-by-level chunk subtree equals CompactRange.append at every prefix."""
    width = 1 << k
    begin = block * width
    count = data.draw(st.integers(0, min(width, MAX_LEAVES - begin)))
    leaves = LEAVES[begin : begin + count]
    aligned = AlignedLeaves(begin, list(leaves))
    assert aligned.end == begin + count
    for end in range(begin, begin + count + 1):
        assert aligned.compact_range(end) == _range_of(begin, end)
    assert aligned.compact_range() == _range_of(begin, begin + count)


def test_aligned_leaves_refuse_misuse() -> None:
    with pytest.raises(ValueError, match="not aligned"):
        AlignedLeaves(2, list(LEAVES[2:5]))  # 3 leaves need a start that is a multiple of 4
    with pytest.raises(ValueError, match="not inside"):
        AlignedLeaves(4, list(LEAVES[4:6])).compact_range(7)
