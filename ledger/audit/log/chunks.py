"""Verifying one range of the global log, independently of every other range.

A chunk is a run of leaves starting at a multiple of its (power of two)
size, so its Merkle subtree is self-contained; the chain links that cross
its edges are handed back for the merge. Chunks run in worker processes.
"""

from __future__ import annotations

import gc
import hashlib
import struct
from binascii import hexlify, unhexlify
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

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
from ledger.crypto.canonical import ENVELOPE_DOMAIN
from ledger.crypto.envelope import (
    ENVELOPE_PREFIX,
    GENESIS_HASH,
    JSON_SAFE_INT,
    MAGIC,
    PLAIN_HEADER,
    PREV_OFFSET,
    SIGNED_AT_OFFSET,
    Envelope,
    SignerCheck,
    check_row,
    is_plain,
    open_envelope,
    where,
)
from ledger.crypto.keys import NEVER, Keyring
from ledger.crypto.merkle import LEAF_PREFIX, AlignedLeaves, CompactRange
from ledger.crypto.native import native
from ledger.crypto.signing import sign_open_address, verify_signature
from ledger.crypto.validity import Window, signing_problem, trusted_span
from ledger.errors import VerificationError, with_article
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.recorders import Row


@dataclass(frozen=True)
class ChunkSpec:
    """Leaves [first_leaf, first_leaf + expected) = rows with id in (after_id, last_id]."""

    first_leaf: int
    after_id: int
    last_id: int
    checkpoint_sizes: tuple[int, ...]  # sizes s with first_leaf < s <= chunk end
    check_signatures: bool
    # (size, issued_at µs) of the valid checkpoints covering this chunk's events,
    # ascending: from the first of size > first_leaf to the first reaching the chunk's end.
    covering: tuple[tuple[int, int], ...] = ()
    offset: int = 0  # a bundle's chunk: the byte offset of its first line
    # A resumable run's chunk: also the digest of its rows (`rows_digest`); with
    # `digest_only`, nothing else (rows a saved state already vouches for).
    digest: bool = False
    digest_only: bool = False
    # A digest-only chunk's rows of these streams (stream id columns as stored):
    # their heads, for the events after the state to link on.
    heads_of: frozenset[object] = frozenset()
    # The store's Merkle rows under leaves [first_leaf, tree_to) (cut at the
    # chunk's end) are compared with the tree the events give (0: not read);
    # those under [first_leaf, tree_vouched) a saved state's digest vouches for.
    tree_to: int = 0
    tree_vouched: int = 0
    # A digest-only chunk's Merkle rows that its saved state vouches for are
    # read and digested again (False, when no row was stored under it since:
    # taken as the state found them, the saved digest kept).
    reread_tree: bool = True


class StreamGap(VerificationError):
    """An event that passed its own checks, after a gap in its stream's versions."""


@dataclass
class Problem:
    position: int  # log position (leaf index) of the event at fault
    message: str
    located: bool = False  # the message names the position already
    stream: str | None = None  # the event's stream, when known
    # The event itself is as signed and in place; only events before it in its
    # stream are missing: what it says is still read at the settlement level
    # (e.g. a settlement whose wallet credits would otherwise look unposted).
    readable: bool = False

    def as_error(self) -> VerificationError:
        if self.located:
            return VerificationError(self.message)
        return VerificationError(f"{self.message} (log position {self.position})")


@dataclass
class ChunkResult:
    spec: ChunkSpec
    leaves: CompactRange
    # Partial ranges [first_leaf, s) for each checkpoint size s inside the chunk.
    at_size: dict[int, CompactRange] = field(default_factory=dict)
    # Per stream: first event here (position, version, prev hash) and last (version, hash).
    firsts: dict[str, tuple[int, int, bytes]] = field(default_factory=dict)
    lasts: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)  # by position: every bad row
    facts: Any = None  # what a source's own chunk reader found, for its merge
    digest: str | None = None  # the rows' digest, when the spec asks for it
    rows: int = 0  # rows read (a digest-only chunk has no leaves)
    # The digest of the stored Merkle rows under it that were compared (or, in a
    # digest-only chunk, that its saved state vouched for; `next_tree_digest`:
    # with those compared since): a saved state keeps it beside the rows'.
    tree_digest: str | None = None
    next_tree_digest: str | None = None
    tree_kept: bool = False  # a digest-only chunk's vouched Merkle rows not read again
    tree_to: int = 0  # the Merkle rows below it were checked (or vouched for)
    tree_problems: list[Mismatches] = field(default_factory=list)  # stored Merkle rows found bad
    # The chunk's subtree, kept for the store's Merkle rows to be compared with
    # it where the chunk was verified (never sent back: `None` by then).
    tree: AlignedLeaves | None = None

    @property
    def problem(self) -> Problem | None:
        """The first problem in the chunk."""
        return self.problems[0] if self.problems else None

    @problem.setter
    def problem(self, value: Problem | None) -> None:  # a source's own, found first
        if value is not None:
            self.problems.insert(0, value)

    @property
    def count(self) -> int:
        return self.leaves.size


class _Cover:
    """Walks the covering checkpoints forward with the log position."""

    def __init__(
        self, covering: tuple[tuple[int, int], ...], wanted: set[int], first_leaf: int
    ) -> None:
        self._covering = covering
        self._stops = sorted(wanted | {size for size, _ in covering})
        self._index = self._stop = 0
        self.size: int | None = None  # the first covering checkpoint's size and issue time
        self.bound: int | None = None
        self.next_change = NEVER  # the next position where a Merkle range or `bound` changes
        self.advance(first_leaf)

    def advance(self, position: int) -> None:
        covering, index = self._covering, self._index
        while index < len(covering) and covering[index][0] <= position:
            index += 1
        self._index = index
        self.size, self.bound = covering[index] if index < len(covering) else (None, None)
        stops, stop = self._stops, self._stop
        while stop < len(stops) and stops[stop] <= position:
            stop += 1
        self._stop = stop
        self.next_change = stops[stop] if stop < len(stops) else NEVER


def verify_rows(
    spec: ChunkSpec,
    rows: list[Row],
    signer_check: SignerCheck,
    *,
    use_native: bool = True,
    keep_tree: bool = False,
) -> ChunkResult:
    """All checks that need only this chunk's rows (see `verify_batches`)."""
    return verify_batches(spec, [rows], signer_check, use_native=use_native, keep_tree=keep_tree)


def verify_batches(
    spec: ChunkSpec,
    batches: Iterable[list[Row]],
    signer_check: SignerCheck,
    *,
    use_native: bool = True,
    keep_tree: bool = False,
) -> ChunkResult:
    """All checks that need only this chunk's rows, given in consecutive batches.

    Read in batches (`READ_BATCH`), each batch is checked while its rows are
    still in the CPU's cache, instead of reading the whole chunk (megabytes)
    and then walking it again from memory.

    Fast path: once the signing key is known, every field of a v2 header but
    its signing time is predictable from the row and the stream's previous
    event, and the fields vary only at fixed offsets. So the stored header is
    checked by rebuilding its canonical bytes and comparing (one comparison
    instead of parsing and seven), and the time by two integer comparisons
    against the key's window under the covering checkpoint. The time's digits
    are parsed (and held to canonical form) only when they differ from the
    previous event's: a batch shares one signing time. A stream's first event
    in the chunk takes the same path, its `prev` read at its fixed offset (the
    merge checks that link). Anything else takes the full, explaining path.
    Leaf hashes are collected and hashed into the chunk's subtree once, level
    by level, at the end.

    With the C fast path built (`ledger.crypto.native`) and `use_native`, runs of
    rows that pass the fast path are checked there, with the same effects;
    the first row of a run that does not pass comes back to this loop, which
    says what is wrong with it.
    """
    firsts: dict[str, tuple[int, int, bytes]] = {}
    lasts: dict[str, tuple[int, bytes]] = {}
    hashes: list[bytes] = []
    add_leaf = hashes.append
    cuts: list[int] = []  # checkpoint sizes inside the chunk, as reached
    wanted = set(spec.checkpoint_sizes)
    check_signatures = spec.check_signatures
    sha256 = hashlib.sha256
    unpack = ENVELOPE_PREFIX.unpack_from
    start = ENVELOPE_PREFIX.size
    at = SIGNED_AT_OFFSET
    prev_at, prev_end = start + PREV_OFFSET, start + PREV_OFFSET + 64
    template = _FAST_HEADER
    position = spec.first_leaf
    cover = _Cover(spec.covering, wanted, position)
    # Row's stream id -> (envelope form, its bytes), for plain names only.
    names: dict[object, tuple[str, bytes]] = {}
    topics: dict[str, bytes] = {}  # plain event types -> their bytes
    uuid_names: dict[int, tuple[str, bytes]] = {}  # the C path's, for UUID stream ids
    key_id, key_bytes, public_key = "", b"", b""  # the last full-path event's signer
    window: Window = (0, 0, 0)
    low, high = trusted_span(window, cover.bound)
    time_digits, signed_at = b"", -1  # the last signing time parsed, as stored and as an int
    stream, version = "", 0
    problems: list[Problem] = []

    def name_of(originator_id: object) -> tuple[str, bytes] | None:
        stream = stream_of(originator_id)
        if not is_plain(stream):
            return None
        named = names[originator_id] = (stream, stream.encode())
        return named

    def topic_of(topic: str) -> bytes | None:
        if not is_plain(topic):
            return None
        encoded = topics[topic] = topic.encode()
        return encoded

    scan = native.scan if use_native and native is not None else None
    # libsodium's own entry point where PyNaCl exposes it, else the Python call.
    verify = (sign_open_address() or verify_signature) if check_signatures else None
    clock: list[Any] = [time_digits, signed_at]
    for rows in batches:
        count, index, batch_first = len(rows), 0, position
        while index < count:
            if scan is not None and key_id:
                clock[0], clock[1] = time_digits, signed_at
                done = scan(
                    rows,
                    index,
                    min(count, index + cover.next_change - position),
                    batch_first,
                    key_bytes,
                    low,
                    high,
                    clock,
                    names,
                    name_of,
                    topics,
                    topic_of,
                    lasts,
                    firsts,
                    hashes,
                    verify,
                    public_key,
                    ENVELOPE_DOMAIN,
                    uuid_names,
                )
                time_digits, signed_at = clock
                if done > index:
                    position += done - index
                    index = done
                    if position == cover.next_change:
                        if position in wanted:
                            cuts.append(position)
                        cover.advance(position)
                        low, high = trusted_span(window, cover.bound)
                    continue
            _, originator_id, version, topic, state = rows[index]
            index += 1
            stream = "?"  # until this row's stream id is read
            try:
                if type(state) is not bytes or type(topic) is not str or type(version) is not int:
                    state = _checked_columns(originator_id, version, topic, state)
                fast = key_id
                named = names.get(originator_id)
                if named is None:
                    if originator_id is None:
                        raise VerificationError(
                            "stream id column is NULL", where=where("?", version)
                        )
                    stream = stream_of(originator_id)
                    if is_plain(stream):
                        named = names[originator_id] = (stream, stream.encode())
                    else:
                        named, fast = (stream, b""), ""  # (not encodable, maybe)
                stream, stream_bytes = named
                topic_bytes = topics.get(topic)
                if topic_bytes is None and fast:
                    if is_plain(topic):
                        topic_bytes = topics[topic] = topic.encode()
                    else:
                        fast = ""
                last = lasts.get(stream)
                entry_hash = None
                if fast:
                    prev_hex = None
                    try:
                        magic, size = unpack(state)
                        header_end = start + size
                        header = state[start:header_end]
                        digits = header[at : header.find(b",", at)]
                        if digits != time_digits:
                            time_digits, signed_at = digits, _signing_time(digits)
                        if 0 <= version < JSON_SAFE_INT:  # (no header holds another)
                            if last is None:
                                prev_hex = _hex_or_none(state[prev_at:prev_end])
                            elif version == last[0] + 1:
                                prev_hex = hexlify(last[1])
                    except struct.error:
                        prev_hex = None  # truncated: the full path says so
                    if (
                        prev_hex is not None
                        and signed_at >= 0
                        and magic == MAGIC
                        and len(state) >= header_end + 64
                        and header
                        == template
                        % (
                            key_bytes,
                            sha256(state[header_end + 64 :]).hexdigest().encode(),
                            prev_hex,
                            digits,
                            stream_bytes,
                            topic_bytes,
                            version,
                        )
                    ):
                        if not low <= signed_at <= high:
                            raise VerificationError(
                                signing_problem(signed_at, window, cover.bound, cover.size) or "",
                                where=where(stream, version),
                            )
                        if check_signatures and not verify_signature(
                            public_key,
                            ENVELOPE_DOMAIN + header,
                            state[header_end : header_end + 64],
                        ):
                            raise VerificationError(
                                "envelope signature is invalid", where=where(stream, version)
                            )
                        if last is None:
                            firsts[stream] = (position, version, unhexlify(prev_hex))
                        entry_hash = sha256(LEAF_PREFIX + header).digest()
                if entry_hash is None:
                    envelope, public_key = _full_check(
                        spec,
                        stream,
                        version,
                        topic,
                        state,
                        last,
                        signer_check,
                        firsts,
                        position,
                        cover,
                    )
                    key_id, entry_hash = envelope.key_id, envelope.entry_hash
                    key_bytes = key_id.encode()
                    window = signer_check.windows[key_id]
                    low, high = trusted_span(window, cover.bound)
            except VerificationError as exc:
                problems.append(
                    Problem(
                        position,
                        str(exc),
                        stream=None if stream == "?" else stream,
                        readable=isinstance(exc, StreamGap),
                    )
                )
                entry_hash = _leaf_anyway(state)
            except struct.error:
                problems.append(
                    Problem(
                        position, f"{where(stream, version)}: malformed envelope", stream=stream
                    )
                )
                entry_hash = _leaf_anyway(state)
            # A bad row still takes its place in the stream and the tree: the next
            # event links to its header (unchanged when only its payload was
            # altered), and the roots it changes are found at the merge.
            if stream != "?" and type(version) is int:
                lasts[stream] = (version, entry_hash)
            add_leaf(entry_hash)
            position += 1
            if position == cover.next_change:
                if position in wanted:
                    cuts.append(position)
                cover.advance(position)
                low, high = trusted_span(window, cover.bound)
    tree = AlignedLeaves(spec.first_leaf, hashes, use_native=use_native)
    result = ChunkResult(spec, tree.compact_range(), firsts=firsts, lasts=lasts, problems=problems)
    result.at_size = {size: tree.compact_range(size) for size in cuts}
    if keep_tree:  # for the stored Merkle rows: compared, then dropped (`_check_stored_tree`)
        result.tree = tree
    return result


def _leaf_anyway(state: object) -> bytes:
    """A bad row's leaf hash: its header's if it has one (a row whose payload
    alone was altered keeps its place in the chain), else its bytes'."""
    data = bytes(state) if isinstance(state, bytes | bytearray | memoryview) else b""
    try:
        _, size = ENVELOPE_PREFIX.unpack_from(data)
    except struct.error:
        return hashlib.sha256(LEAF_PREFIX + data).digest()
    start = ENVELOPE_PREFIX.size
    return hashlib.sha256(LEAF_PREFIX + data[start : start + size]).digest()


# PLAIN_HEADER as bytes, the signing time's digits spliced in as stored (held
# to canonical form by `_signing_time`, so the comparison still proves them).
_FAST_HEADER: Final = PLAIN_HEADER.encode().replace(b"%d", b"%s", 1)


def _signing_time(digits: bytes) -> int:
    """The signing time these digits canonically write, or -1 (the full path says why)."""
    try:
        value = int(digits)
    except ValueError:
        return -1
    if not 0 <= value < JSON_SAFE_INT or b"%d" % value != digits:
        return -1
    return value


def _hex_or_none(text: bytes) -> bytes | None:
    """The same 64 lowercase hex digits if that is what `text` is, else None
    (the full path then says what is wrong)."""
    try:
        value = bytes.fromhex(text.decode())
    except ValueError:
        return None
    return text if len(value) == 32 and hexlify(value) == text else None


def _checked_columns(originator_id: object, version: object, topic: object, state: object) -> bytes:
    """A row's columns with the types the ledger wrote, else a clear error."""
    label = where(stream_of(originator_id) if originator_id is not None else "?", version)
    if type(version) is not int:
        kind = (
            "NULL" if version is None else f"{with_article(type(version).__name__)}, not an integer"
        )
        raise VerificationError(f"version column is {kind}", where=label)
    if type(topic) is not str:
        kind = "NULL" if topic is None else f"{with_article(type(topic).__name__)}, not text"
        raise VerificationError(f"topic column is {kind}", where=label)
    if isinstance(state, bytearray | memoryview):
        return bytes(state)
    if type(state) is not bytes:
        kind = "NULL" if state is None else f"{with_article(type(state).__name__)}, not bytes"
        raise VerificationError(f"state column is {kind}", where=label)
    return state


def _full_check(
    spec: ChunkSpec,
    stream: str,
    version: int,
    topic: str,
    state: bytes,
    last: tuple[int, bytes] | None,
    signer_check: SignerCheck,
    firsts: dict[str, tuple[int, int, bytes]],
    position: int,
    cover: _Cover,
) -> tuple[Envelope, bytes]:
    """Every check, one by one, so a failure says exactly what is wrong.

    Returns the envelope and its signer's public key."""
    envelope = open_envelope(state, stream=stream, version=version)
    check_row(envelope, stream=stream, version=version, topic=topic)
    public_key = signer_check.check_signer(envelope, stream=stream, version=version)
    if spec.check_signatures:
        signer_check.check_signature(envelope, stream=stream, version=version)
    signed_at = envelope.signed_at
    if signed_at is None:  # v1: no signing time; judged by the checkpoint covering it
        if cover.bound is None:
            raise VerificationError(
                "a v1 envelope (no signing time) that no checkpoint covers: "
                "its time cannot be judged",
                where=where(stream, version),
            )
        signed_at = cover.bound
    problem = signing_problem(
        signed_at, signer_check.windows[envelope.key_id], cover.bound, cover.size
    )
    if problem:
        raise VerificationError(problem, where=where(stream, version))
    if last is None:
        firsts[stream] = (position, version, envelope.prev_hash)
    elif version != last[0] + 1:
        # Checked last: a gap found here means the event passed every other check.
        error = StreamGap if version > last[0] + 1 else VerificationError
        raise error(
            f"stream jumps from version {last[0]} to {version}: "
            f"version {last[0] + 1} is missing or out of order",
            where=where(stream, version),
        )
    elif envelope.prev_hash != last[1]:
        raise VerificationError(
            "chain broken: previous-envelope hash does not match the stream's previous event",
            where=where(stream, version),
        )
    return envelope, public_key


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
    tree = AlignedLeaves(first, [_leaf_anyway(row[4]) for row in rows])
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
            heads[stream_of(originator_id)] = (version, _leaf_anyway(state))
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
