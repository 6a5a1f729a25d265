"""Verifying one range of the global log, independently of every other range.

A chunk is a run of leaves starting at a multiple of its (power of two)
size, so its Merkle subtree is self-contained; the chain links that cross
its edges are handed back for the merge. Chunks run in worker processes.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

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
    time_problem,
    where,
)
from ledger.crypto.keys import NEVER, Keyring
from ledger.crypto.merkle import LEAF_PREFIX, AlignedLeaves, CompactRange
from ledger.crypto.signing import verify_signature
from ledger.errors import VerificationError
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.recorders import Row

Window = tuple[int, int, int]  # a key's (not_before, not_after, revoked_at), µs


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


@dataclass
class Problem:
    position: int  # log position (leaf index) of the event at fault
    message: str

    def as_error(self) -> VerificationError:
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
    problem: Problem | None = None

    @property
    def count(self) -> int:
        return self.leaves.size


def _limits(window: Window, bound: int | None) -> tuple[int, int]:
    """The signing times [low, high] trusted for one key under one checkpoint bound."""
    not_before, not_after, revoked_at = window
    high = not_after - 1
    if bound is not None and bound < high:
        high = bound
    if revoked_at != NEVER and (bound is None or bound >= revoked_at):
        high = not_before - 1  # nothing this key signed here is trusted
    return not_before, high


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


def verify_rows(spec: ChunkSpec, rows: list[Row], signer_check: SignerCheck) -> ChunkResult:
    """All checks that need only this chunk's rows.

    Fast path: once the signing key is known, every field of a v2 header but
    its signing time is predictable from the row and the stream's previous
    event, and the fields vary only at fixed offsets. So the stored header is
    checked by rebuilding its canonical bytes and comparing (one comparison
    instead of parsing and seven), and the time by two integer comparisons
    against the key's window under the covering checkpoint. A stream's first
    event in the chunk takes the same path, its `prev` read at its fixed
    offset (the merge checks that link). Anything else takes the full,
    explaining path. Leaf hashes are collected and hashed into the chunk's
    subtree once, level by level, at the end.
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
    template = PLAIN_HEADER
    position = spec.first_leaf
    cover = _Cover(spec.covering, wanted, position)
    names: dict[object, str] = {}  # row's stream id -> envelope form, for plain names only
    plain_topics: set[str] = set()
    key_id, public_key = "", b""  # the signer of the last event taken on the full path
    window: Window = (0, 0, 0)
    low, high = _limits(window, cover.bound)
    stream, version = "", 0
    problem = None
    try:
        for _, originator_id, version, topic, state in rows:
            if type(state) is not bytes or type(topic) is not str or type(version) is not int:
                state = _checked_columns(originator_id, version, topic, state)
            fast = key_id
            stream = names.get(originator_id)  # type: ignore[assignment]
            if stream is None:
                if originator_id is None:
                    raise VerificationError("stream id column is NULL", where=where("?", version))
                stream = stream_of(originator_id)
                if is_plain(stream):
                    names[originator_id] = stream
                else:
                    fast = ""
            if fast and topic not in plain_topics:
                if is_plain(topic):
                    plain_topics.add(topic)
                else:
                    fast = ""
            last = lasts.get(stream)
            entry_hash = None
            if fast:
                prev = None
                try:
                    magic, size = unpack(state)
                    header_end = start + size
                    header = state[start:header_end]
                    try:
                        signed_at = int(header[at : header.find(b",", at)])
                    except ValueError:
                        signed_at = -1  # fails the range test: the full path says why
                    if last is not None:
                        if version == last[0] + 1:
                            prev = last[1]
                    elif 0 <= version < JSON_SAFE_INT:
                        prev = _hex_or_none(state[prev_at:prev_end])
                except struct.error:
                    prev = None  # truncated: the full path says so
                if (
                    prev is not None
                    and magic == MAGIC
                    and 0 <= signed_at < JSON_SAFE_INT
                    and len(state) >= header_end + 64
                    and header
                    == (
                        template
                        % (
                            key_id,
                            sha256(state[header_end + 64 :]).hexdigest(),
                            prev.hex(),
                            signed_at,
                            stream,
                            topic,
                            version,
                        )
                    ).encode()
                ):
                    if not low <= signed_at <= high:
                        raise VerificationError(
                            time_problem(signed_at, window, cover.bound, cover.size) or "",
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
                        firsts[stream] = (position, version, prev)
                    entry_hash = sha256(LEAF_PREFIX + header).digest()
            if entry_hash is None:
                envelope, public_key = _full_check(
                    spec, stream, version, topic, state, last, signer_check, firsts, position, cover
                )
                key_id, entry_hash = envelope.key_id, envelope.entry_hash
                window = signer_check.windows[key_id]
                low, high = _limits(window, cover.bound)
            lasts[stream] = (version, entry_hash)
            add_leaf(entry_hash)
            position += 1
            if position == cover.next_change:
                if position in wanted:
                    cuts.append(position)
                cover.advance(position)
                low, high = _limits(window, cover.bound)
    except VerificationError as exc:
        problem = Problem(position, str(exc))
    except struct.error:
        problem = Problem(position, f"{where(stream, version)}: malformed envelope")
    tree = AlignedLeaves(spec.first_leaf, hashes)
    result = ChunkResult(spec, tree.compact_range(), firsts=firsts, lasts=lasts, problem=problem)
    result.at_size = {size: tree.compact_range(size) for size in cuts}
    return result


def _hex_or_none(text: bytes) -> bytes | None:
    """The bytes hex digits stand for, or None (the full path then says what is wrong)."""
    try:
        return bytes.fromhex(text.decode())
    except ValueError:
        return None


def _checked_columns(originator_id: object, version: object, topic: object, state: object) -> bytes:
    """A row's columns with the types the ledger wrote, else a clear error."""
    label = where(stream_of(originator_id) if originator_id is not None else "?", version)
    if type(version) is not int:
        kind = "NULL" if version is None else f"a {type(version).__name__}, not an integer"
        raise VerificationError(f"version column is {kind}", where=label)
    if type(topic) is not str:
        kind = "NULL" if topic is None else f"a {type(topic).__name__}, not text"
        raise VerificationError(f"topic column is {kind}", where=label)
    if isinstance(state, bytearray | memoryview):
        return bytes(state)
    if type(state) is not bytes:
        kind = "NULL" if state is None else f"a {type(state).__name__}, not bytes"
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
    problem = time_problem(
        signed_at, signer_check.windows[envelope.key_id], cover.bound, cover.size
    )
    if problem:
        raise VerificationError(problem, where=where(stream, version))
    if last is None:
        firsts[stream] = (position, version, envelope.prev_hash)
    elif version != last[0] + 1:
        raise VerificationError(
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
        )
    if prev_hash != expected_hash:
        return Problem(
            position,
            f"{where(stream, version)}: chain broken: previous-envelope hash does not match "
            "the stream's previous event",
        )
    return None


# Worker-process state, set once per process by `init_worker`; the
# application is kept so its connection pool stays open.
_worker: tuple[MerkleLogTables, SignerCheck, object] | None = None


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
    return verify_rows(spec, tables.rows_between(spec.after_id, spec.last_id), signer_check)
