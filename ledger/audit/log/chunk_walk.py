"""A chunk's rows walked in log order: steps 4 to 6 for one range of the log.

Each row takes the fast path (`ChunkWalk.fast`) when it can, and the
explaining path (`ChunkWalk.explain`) when it cannot: the first proves a row
right in one comparison, the second checks it field by field so that a
failure says exactly what is wrong.

Fast path: once the signing key is known, every field of a v2 header but its
signing time is predictable from the row and the stream's previous event, and
the fields vary only at fixed offsets. So the stored header is checked by
rebuilding its canonical bytes and comparing (one comparison instead of
parsing and seven), and the time by two integer comparisons against the key's
window under the covering checkpoint. The time's digits are parsed (and held
to canonical form) only when they differ from the previous event's: a batch
shares one signing time. A stream's first event in the chunk takes the same
path, its `prev` read at its fixed offset (the merge checks that link).

With the C fast path built (`ledger.crypto.native`), runs of rows that pass
the fast path are checked there, with the same effects; the first row of a
run that does not pass comes back to the Python walk, which says what is
wrong with it. Leaf hashes are collected and hashed into the chunk's subtree
once, level by level, at the end.
"""

from __future__ import annotations

import hashlib
import struct
from binascii import hexlify, unhexlify
from collections.abc import Iterable
from typing import Any, Final

from ledger.audit.log.chunk_types import ChunkResult, ChunkSpec, Problem, StreamGap
from ledger.crypto.canonical import ENVELOPE_DOMAIN
from ledger.crypto.envelope import (
    ENVELOPE_PREFIX,
    JSON_SAFE_INT,
    MAGIC,
    PLAIN_HEADER,
    PREV_OFFSET,
    SIGNED_AT_OFFSET,
    Envelope,
    SignerCheck,
    check_row,
    open_envelope,
    where,
)
from ledger.crypto.keys import NEVER
from ledger.crypto.merkle import HASH_SIZE, LEAF_PREFIX, AlignedLeaves, CompactRange
from ledger.crypto.native import native
from ledger.crypto.plain_names import PlainNames
from ledger.crypto.signing import sign_open_address, verify_signature
from ledger.crypto.validity import Window, signing_problem, trusted_span
from ledger.errors import VerificationError, with_article
from ledger.store.account_heads import is_account_event
from ledger.store.merkle_log import stream_of
from ledger.store.recorders import Row

# PLAIN_HEADER as bytes, the signing time's digits spliced in as stored (held
# to canonical form by `_signing_time`, so the comparison still proves them).
_FAST_HEADER: Final = PLAIN_HEADER.encode().replace(b"%d", b"%s", 1)
_START: Final = ENVELOPE_PREFIX.size
_AT: Final = SIGNED_AT_OFFSET
_PREV_AT, _PREV_END = _START + PREV_OFFSET, _START + PREV_OFFSET + 64


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
    """All checks that need only this chunk's rows, given in consecutive batches
    (each checked while its rows are still in the CPU's cache, instead of
    reading the whole chunk, megabytes, and walking it again from memory).
    `keep_tree`: leave the chunk's subtree in the result, for the store's
    Merkle rows to be compared with it."""
    walk = ChunkWalk(spec, signer_check, use_native)
    for rows in batches:
        walk.batch(rows)
    return walk.result(keep_tree, use_native)


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


class ChunkWalk:
    """One chunk's rows, batch by batch: each row's leaf hash, each stream's
    first and last event here, and every row found bad (a `Problem` each)."""

    def __init__(self, spec: ChunkSpec, signer_check: SignerCheck, use_native: bool) -> None:
        self.spec, self.signer_check = spec, signer_check
        self.firsts: dict[str, tuple[int, int, bytes]] = {}
        self.lasts: dict[str, tuple[int, bytes]] = {}
        self.hashes: list[bytes] = []
        self.problems: list[Problem] = []
        self.accounts: list[tuple[int, str, int, bytes]] = []
        self.cuts: list[int] = []  # checkpoint sizes inside the chunk, as reached
        self.archived = 0  # archived events' marker rows passed
        self.wanted = set(spec.checkpoint_sizes)
        self.position = spec.first_leaf
        self.cover = _Cover(spec.covering, self.wanted, self.position)
        self.plain = PlainNames(stream_of)  # plain streams' and types' bytes
        self.uuid_names: dict[int, tuple[str, bytes]] = {}  # the C path's, for UUID ids
        # The last explained event's signer: the fast path needs one.
        self.key_id, self.key_bytes, self.public_key = "", b"", b""
        self.window: Window = (0, 0, 0)
        self.low, self.high = trusted_span(self.window, self.cover.bound)
        # The last signing time parsed, as stored and as an int (a list: the C path's).
        self.clock: list[Any] = [b"", -1]
        self.scan = native.scan if use_native and native is not None else None
        # libsodium's own entry point where PyNaCl exposes it, else the Python call.
        checks = spec.check_signatures
        self.verify = (sign_open_address() or verify_signature) if checks else None

    def batch(self, rows: list[Row]) -> None:
        count, index, batch_first = len(rows), 0, self.position
        while index < count:
            if self.scan is not None and self.key_id:
                done = self._native_run(rows, index, count, batch_first)
                if done > index:
                    self._moved(done - index)
                    index = done
                    continue
            self.row(rows[index])
            index += 1
        self._account_events(rows, batch_first)

    def _account_events(self, rows: list[Row], batch_first: int) -> None:
        """The batch's account events, once their entry hashes are known (the
        topic column is held to the signed header by the walk itself)."""
        offset = batch_first - self.spec.first_leaf
        for index, (_, originator_id, version, topic, _) in enumerate(rows):
            if is_account_event(topic) and type(version) is int:
                entry_hash = self.hashes[offset + index]
                stream = stream_of(originator_id)
                self.accounts.append((batch_first + index, stream, version, entry_hash))

    def row(self, row: Row) -> None:
        """One row: the fast path, else the explaining one; a bad row still takes
        its place in its stream and the tree (the next event links to its header,
        unchanged when only its payload was altered; the roots it changes are
        found at the merge)."""
        _, originator_id, version, topic, state = row
        if topic is None and type(state) is bytes and len(state) == HASH_SIZE:
            self._archived(originator_id, version, state)
            return
        stream = "?"  # until this row's stream id is read
        try:
            if type(state) is not bytes or type(topic) is not str or type(version) is not int:
                state = _checked_columns(originator_id, version, topic, state)
            stream, stream_bytes = self._name(originator_id, version)
            topic_bytes = self.plain.topic(topic) if stream_bytes else None
            last = self.lasts.get(stream)
            entry_hash = None
            if self.key_id and topic_bytes is not None:
                entry_hash = self.fast(stream, stream_bytes, topic_bytes, version, state, last)
            if entry_hash is None:
                entry_hash = self.explain(stream, version, topic, state, last)
        except VerificationError as exc:
            known = None if stream == "?" else stream
            gap = isinstance(exc, StreamGap)
            self.problems.append(Problem(self.position, str(exc), stream=known, readable=gap))
            entry_hash = leaf_anyway(state)
        except struct.error:
            message = f"{where(stream, version)}: malformed envelope"
            self.problems.append(Problem(self.position, message, stream=stream))
            entry_hash = leaf_anyway(state)
        if stream != "?" and type(version) is int:
            self.lasts[stream] = (version, entry_hash)
        self.hashes.append(entry_hash)
        self._moved(1)

    def _archived(self, originator_id: object, version: object, entry_hash: bytes) -> None:
        """An archived event's marker row (`ledger.store.archived`): its kept leaf
        hash takes its place in the tree and, as its entry hash, in its stream
        (the next event's link). The count is held to the archive register (a
        NULL type beside anything but a hash is a row gone bad: explained)."""
        self.archived += 1
        if originator_id is not None and type(version) is int:
            self.lasts[stream_of(originator_id)] = (version, entry_hash)
        self.hashes.append(entry_hash)
        self._moved(1)

    def fast(
        self,
        stream: str,
        stream_bytes: bytes,
        topic_bytes: bytes,
        version: int,
        state: bytes,
        last: tuple[int, bytes] | None,
    ) -> bytes | None:
        """The row's entry hash when its header is the one the key, the row and the
        stream's previous event predict; None when it is not (explain it). Raises
        only what it proves: a signing time outside the key's window, a bad signature."""
        clock = self.clock
        try:
            magic, size = ENVELOPE_PREFIX.unpack_from(state)
            header_end = _START + size
            header = state[_START:header_end]
            digits = header[_AT : header.find(b",", _AT)]
            if digits != clock[0]:
                clock[0], clock[1] = digits, _signing_time(digits)
            if not 0 <= version < JSON_SAFE_INT:  # (no header holds another)
                return None
            if last is None:
                prev_hex = _hex_or_none(state[_PREV_AT:_PREV_END])
            elif version == last[0] + 1:
                prev_hex = hexlify(last[1])
            else:
                return None
        except struct.error:
            return None  # truncated: the explaining path says so
        signed_at = clock[1]
        if (
            prev_hex is None
            or signed_at < 0
            or magic != MAGIC
            or len(state) < header_end + 64
            or header
            != _FAST_HEADER
            % (
                self.key_bytes,
                hashlib.sha256(state[header_end + 64 :]).hexdigest().encode(),
                prev_hex,
                digits,
                stream_bytes,
                topic_bytes,
                version,
            )
        ):
            return None
        if not self.low <= signed_at <= self.high:
            cover = self.cover
            raise VerificationError(
                signing_problem(signed_at, self.window, cover.bound, cover.size) or "",
                where=where(stream, version),
            )
        signature = state[header_end : header_end + 64]
        if self.verify is not None and not verify_signature(
            self.public_key, ENVELOPE_DOMAIN + header, signature
        ):
            raise VerificationError("envelope signature is invalid", where=where(stream, version))
        if last is None:
            self.firsts[stream] = (self.position, version, unhexlify(prev_hex))
        return hashlib.sha256(LEAF_PREFIX + header).digest()

    def explain(
        self, stream: str, version: int, topic: str, state: bytes, last: tuple[int, bytes] | None
    ) -> bytes:
        """Every check, one by one, so a failure says exactly what is wrong; the
        row's entry hash when it passes. Its signer becomes the fast path's key."""
        envelope, public_key = _full_check(
            self.spec,
            stream,
            version,
            topic,
            state,
            last,
            self.signer_check,
            self.firsts,
            self.position,
            self.cover,
        )
        self.key_id, self.public_key = envelope.key_id, public_key
        self.key_bytes = self.key_id.encode()
        self.window = self.signer_check.windows[self.key_id]
        self.low, self.high = trusted_span(self.window, self.cover.bound)
        return envelope.entry_hash

    def result(self, keep_tree: bool, use_native: bool) -> ChunkResult:
        spec = self.spec
        if not spec.aligned:  # a run of a partial bundle: its leaves, not a subtree
            leaves = CompactRange(spec.first_leaf)
            for entry_hash in self.hashes:
                leaves.append(entry_hash)
            return ChunkResult(
                spec,
                leaves,
                firsts=self.firsts,
                lasts=self.lasts,
                problems=self.problems,
                accounts=self.accounts,
                archived=self.archived,
            )
        tree = AlignedLeaves(spec.first_leaf, self.hashes, use_native=use_native)
        result = ChunkResult(
            spec,
            tree.compact_range(),
            firsts=self.firsts,
            lasts=self.lasts,
            problems=self.problems,
            accounts=self.accounts,
            archived=self.archived,
        )
        result.at_size = {size: tree.compact_range(size) for size in self.cuts}
        if keep_tree:  # for the stored Merkle rows: compared, then dropped
            result.tree = tree
        return result

    def _native_run(self, rows: list[Row], index: int, count: int, batch_first: int) -> int:
        """The C fast path over rows[index:] up to the next cover change; the index
        of the first row it did not pass."""
        assert self.scan is not None
        return int(
            self.scan(
                rows,
                index,
                min(count, index + self.cover.next_change - self.position),
                batch_first,
                self.key_bytes,
                self.low,
                self.high,
                self.clock,
                self.plain.names,
                self.plain.name,
                self.plain.topics,
                self.plain.topic,
                self.lasts,
                self.firsts,
                self.hashes,
                self.verify,
                self.public_key,
                ENVELOPE_DOMAIN,
                self.uuid_names,
            )
        )

    def _moved(self, rows: int) -> None:
        """`rows` rows on: a checkpoint size reached is a cut; the cover moves on."""
        self.position += rows
        if self.position == self.cover.next_change:
            if self.position in self.wanted:
                self.cuts.append(self.position)
            self.cover.advance(self.position)
            self.low, self.high = trusted_span(self.window, self.cover.bound)

    def _name(self, originator_id: object, version: object) -> tuple[str, bytes]:
        """The row's stream and its bytes (empty: not plain, the fast path is not for it)."""
        named = self.plain.names.get(originator_id)
        if named is not None:
            return named
        if originator_id is None:
            raise VerificationError("stream id column is NULL", where=where("?", version))
        named = self.plain.name(originator_id)
        return named or (stream_of(originator_id), b"")  # (b"": not plain, maybe not encodable)


def leaf_anyway(state: object) -> bytes:
    """A bad row's leaf hash: its header's if it has one (a row whose payload
    alone was altered keeps its place in the chain), else its bytes'."""
    data = bytes(state) if isinstance(state, bytes | bytearray | memoryview) else b""
    try:
        _, size = ENVELOPE_PREFIX.unpack_from(data)
    except struct.error:
        return hashlib.sha256(LEAF_PREFIX + data).digest()
    return hashlib.sha256(LEAF_PREFIX + data[_START : _START + size]).digest()


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
