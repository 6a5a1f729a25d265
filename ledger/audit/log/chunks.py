"""Verifying one range of the global log, independently of every other range.

A chunk is a run of leaves starting at a multiple of its (power of two)
size, so its Merkle subtree is self-contained; the chain links that cross
its edges are handed back for the merge. Chunks run in worker processes.
"""

from __future__ import annotations

import gc
import hashlib
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from typing import Any, Final

from ledger.audit.log.chunk_types import ChunkResult as ChunkResult
from ledger.audit.log.chunk_types import ChunkSpec as ChunkSpec
from ledger.audit.log.chunk_types import Problem as Problem
from ledger.audit.log.chunk_types import StreamGap as StreamGap
from ledger.audit.log.chunk_walk import leaf_anyway, verify_batches, verify_rows
from ledger.audit.log.stored_tree import (
    Mismatches,
    TreeRows,
    compare_leaves,
    compare_nodes,
    expected_leaves,
    expected_nodes,
    node_map,
    over,
    tree_rows_digest,
    under,
)
from ledger.crypto.envelope import GENESIS_HASH, SignerCheck, where
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import AlignedLeaves, CompactRange
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.recorders import Row

# Small enough that the processes finish together (a worker starts late and
# the last chunks are shared out finely), large enough that a chunk's query
# and its result's trip back cost little next to its events.
CHUNK_LEAVES = 1 << 12


def link_problem(
    stream: str, position: int, version: int, prev_hash: bytes, head: tuple[int, bytes] | None
) -> Problem | None:
    """Check a stream's first event in a chunk against the stream's head so far."""
    expected_version, expected_hash = (head[0] + 1, head[1]) if head else (1, GENESIS_HASH)
    if version != expected_version:
        return Problem(
            position,
            f"{where(stream, version)}: expected version {expected_version} next in this "
            "stream: an event is missing or out of order",
            stream=stream,
            readable=version > expected_version,
        )
    if prev_hash != expected_hash:
        return Problem(
            position,
            f"{where(stream, version)}: chain broken: previous-envelope hash does not match "
            "the stream's previous event",
            stream=stream,
        )
    return None


# Worker-process state, set once per process by `init_worker`; the
# application is kept so its connection pool stays open.
_worker: tuple[MerkleLogTables, SignerCheck, object] | None = None


def worker_modules(store: str) -> tuple[str, ...]:
    """What `init_worker` and `verify_chunk` import for the store at this URL
    (a fork server imports them once for every worker: ledger.audit.log.parallel)."""
    modules = ["ledger.audit.log.chunks", "ledger.store.application"]
    if store.startswith(("postgresql:", "postgres:")):
        modules += [
            "psycopg",
            "psycopg_pool",
            "ledger.store.pg_recorder",
            "ledger.store.pg_factory",
        ]
    return tuple(modules)


def init_worker(store: str, keyring_json: str) -> None:
    from ledger.store.application import LedgerApplication

    global _worker
    keyring = Keyring.from_json(keyring_json)
    app = LedgerApplication(store, keyring=keyring, create=False)
    _worker = (app.tables, SignerCheck(keyring), app)


def verify_chunk(spec: ChunkSpec) -> ChunkResult:
    assert _worker is not None, "init_worker not called"
    tables, signer_check, _ = _worker
    return verify_chunk_with(tables, signer_check, spec)


def verify_chunk_with(
    tables: MerkleLogTables, signer_check: SignerCheck, spec: ChunkSpec
) -> ChunkResult:
    with no_cycle_collection():
        return _verify_chunk_with(tables, signer_check, spec)


# Rows read and checked at a time: a few hundred kilobytes, which stay in the
# CPU's cache between the read and the checks (a whole chunk is megabytes).
READ_BATCH: Final = 128


class _Counted:
    """The batches passed through, their rows counted (and their ids kept, when
    the chunk's stored Merkle rows are to be compared: the leaves name them)."""

    def __init__(self, batches: Iterable[list[Row]], keep_ids: bool) -> None:
        self._batches = batches
        self._keep_ids = keep_ids
        self.rows = 0
        self.ids: list[Any] = []

    def __iter__(self) -> Iterator[list[Row]]:
        for batch in self._batches:
            self.rows += len(batch)
            if self._keep_ids:
                self.ids += [row[0] for row in batch]
            yield batch


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """A chunk makes thousands of row tuples and no reference cycle: the cyclic
    collector would walk them all again and again (about a tenth of a chunk's
    time) to free nothing. Reference counting still frees each at once."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _verify_chunk_with(
    tables: MerkleLogTables, signer_check: SignerCheck, spec: ChunkSpec
) -> ChunkResult:
    if not spec.digest:  # (a digest is over the whole chunk's columns: read at once)
        batches = closing(tables.row_batches(spec.after_id, spec.last_id, READ_BATCH))
        with batches as read:
            counted = _Counted(read, keep_ids=spec.tree_to > 0)
            result = verify_batches(spec, counted, signer_check, keep_tree=spec.tree_to > 0)
        result.rows = counted.rows
        _check_stored_tree(tables, result, counted.ids)
        return result
    rows = tables.rows_between(spec.after_id, spec.last_id)
    if spec.digest_only:
        return _rehashed(tables, spec, rows)
    result = verify_rows(spec, rows, signer_check, keep_tree=spec.tree_to > 0)
    result.rows = len(rows)
    stored = _check_stored_tree(tables, result, [row[0] for row in rows])
    result.digest = rows_digest(rows)
    result.tree_digest = _tree_digest(stored)
    return result


def _tree_end(spec: ChunkSpec, rows: int) -> int:
    """Where the chunk's Merkle rows to compare end: its end, or `tree_to` before it."""
    return max(spec.first_leaf, min(spec.first_leaf + rows, spec.tree_to))


def _check_stored_tree(
    tables: MerkleLogTables, result: ChunkResult, ids: list[Any]
) -> TreeRows | None:
    """Compare the store's Merkle rows under the chunk (up to `tree_to`) with the
    subtree its events give; the rows read (None: none were asked for)."""
    spec, tree = result.spec, result.tree
    result.tree = None
    end = _tree_end(spec, result.rows)
    result.tree_to = end
    if tree is None or end == spec.first_leaf:
        return None
    stored = tables.tree_rows(spec.first_leaf, end)
    result.tree_problems = _compared(spec.first_leaf, ids, tree, end, stored, spec.first_leaf)
    return stored


def _compared(
    first: int, ids: list[Any], tree: AlignedLeaves, end: int, stored: TreeRows, since: int
) -> list[Mismatches]:
    """The stored rows against the tree, those of leaves from `since` on (and
    of nodes over them); each kind's mismatches, when there are any."""
    leaves = expected_leaves(first, ids, tree, end)
    nodes = expected_nodes(first, tree, end)
    if since > first:
        leaves = [leaf for leaf in leaves if leaf[0] >= since]
        nodes = [node for node in nodes if (node[1] + 1) << node[0] > since]
        stored = over(stored, since)
    found = [compare_leaves(leaves, stored[0])]
    if stored[1] != nodes:  # one comparison when they are the same
        found.append(compare_nodes(nodes, node_map(stored[1])))
    return [kind for kind in found if kind.total]


def _rehashed(tables: MerkleLogTables, spec: ChunkSpec, rows: list[Row]) -> ChunkResult:
    """A chunk a saved state vouches for: its rows (and the Merkle rows its digest
    covered) digested again; Merkle rows written under it since (then past the
    newest checkpoint, now under one) compared with its subtree."""
    result = ChunkResult(spec, CompactRange(spec.first_leaf), rows=len(rows))
    if spec.heads_of:
        result.lasts = prefix_heads(rows, spec.heads_of)
    first = spec.first_leaf
    vouched = max(first, min(first + len(rows), spec.tree_vouched))
    end = max(vouched, _tree_end(spec, len(rows)))
    result.tree_to = end
    result.digest = rows_digest(rows)
    if end == vouched and not spec.reread_tree:
        result.tree_kept = True
        return result
    stored = tables.tree_rows(first, end) if end > first else None
    # (Every row the range read lies under `vouched` when it is the end: no filter.)
    vouched_rows = stored if not stored or end == vouched else under(stored, vouched)
    result.tree_digest = _tree_digest(vouched_rows)
    if end == vouched:
        return result
    assert stored is not None
    # The rows are the bytes a full run verified (their digest is compared with
    # the state's): their header hashes are the leaves it found.
    tree = AlignedLeaves(first, [leaf_anyway(row[4]) for row in rows])
    result.tree_problems = _compared(first, [row[0] for row in rows], tree, end, stored, vouched)
    result.next_tree_digest = _tree_digest(stored)
    return result


def prefix_heads(rows: list[Row], streams: frozenset[object]) -> dict[str, tuple[int, bytes]]:
    """The last row of each of these streams here, as (version, entry hash).
    Rows a saved state vouches for (their digest checked beside this): their
    header's hash is the one a full run found for them."""
    heads: dict[str, tuple[int, bytes]] = {}
    for _, originator_id, version, _, state in rows:
        if originator_id in streams and type(version) is int:
            heads[stream_of(originator_id)] = (version, leaf_anyway(state))
    return heads


def _tree_digest(tree_rows: TreeRows | None) -> str | None:
    if not tree_rows or not (tree_rows[0] or tree_rows[1]):
        return None
    return tree_rows_digest(tree_rows)


def rows_digest(rows: list[Row]) -> str:
    """SHA-256 over every column of these rows: a saved state's proof that the
    rows it was made from are still the same bytes. The hash takes the `repr`
    of the chunk's id, version, stream and type columns and envelope lengths
    (which tells text from numbers and NULL, and quotes any separator), then
    the envelopes themselves: column-wise, so no Python code runs per row."""
    if not rows:
        return hashlib.sha256(b"()").hexdigest()
    ids, streams, versions, topics, states = zip(*rows, strict=True)
    digest = hashlib.sha256()
    try:
        lengths = tuple(map(len, states))
        digest.update(repr((ids, versions, streams, topics, lengths)).encode())
        deque(map(digest.update, states), maxlen=0)
    except TypeError:  # an envelope column that is not bytes: every column tagged
        return _odd_rows_digest(rows)
    return digest.hexdigest()


def _odd_rows_digest(rows: list[Row]) -> str:
    digest = hashlib.sha256(b"odd rows")  # apart from every `rows_digest` framing
    for row in rows:
        for value in row:
            data = repr(bytes(value) if isinstance(value, memoryview) else value).encode()
            digest.update(b"%d|" % len(data))
            digest.update(data)
    return digest.hexdigest()
