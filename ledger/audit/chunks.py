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
    MAGIC,
    Envelope,
    SignerCheck,
    check_row,
    header_bytes,
    open_envelope,
    where,
)
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import CompactRange, hash_leaf
from ledger.crypto.signing import verify_signature
from ledger.errors import VerificationError
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


def verify_rows(spec: ChunkSpec, rows: list[Row], signer_check: SignerCheck) -> ChunkResult:
    """All checks that need only this chunk's rows.

    Fast path: once a stream's previous event and the signing key are known,
    every field of the next header is predictable, so the stored header is
    checked by rebuilding its canonical bytes and comparing (one comparison
    instead of parsing and six). Anything else takes the full, explaining path.
    """
    result = ChunkResult(spec, CompactRange(spec.first_leaf))
    leaves, firsts, lasts = result.leaves, result.firsts, result.lasts
    wanted = set(spec.checkpoint_sizes)
    sha256 = hashlib.sha256
    unpack = ENVELOPE_PREFIX.unpack_from
    start = ENVELOPE_PREFIX.size
    position = spec.first_leaf
    names: dict[object, str] = {}  # row's stream id -> envelope form, parsed once per stream
    key_id, public_key = "", b""  # the signer of the last event taken on the full path
    try:
        for _, originator_id, version, topic, state in rows:
            stream = names.get(originator_id)
            if stream is None:
                stream = names[originator_id] = stream_of(originator_id)
            state = bytes(state)
            last = lasts.get(stream)
            entry_hash = None
            if last is not None and key_id and version == last[0] + 1:
                magic, size = unpack(state)
                header_end = start + size
                header = state[start:header_end]
                expected = header_bytes(
                    key_id,
                    sha256(state[header_end + 64 :]).hexdigest(),
                    last[1].hex(),
                    stream,
                    topic,
                    version,
                )
                if magic == MAGIC and header == expected:
                    if spec.check_signatures and not verify_signature(
                        public_key,
                        ENVELOPE_DOMAIN + header,
                        state[header_end : header_end + 64],
                    ):
                        raise VerificationError(
                            "envelope signature is invalid", where=where(stream, version)
                        )
                    entry_hash = hash_leaf(header)
            if entry_hash is None:
                envelope, public_key = _full_check(
                    spec, stream, version, topic, state, last, signer_check, firsts, position
                )
                key_id, entry_hash = envelope.key_id, envelope.entry_hash
            lasts[stream] = (version, entry_hash)
            leaves.append(entry_hash)
            position += 1
            if position in wanted:
                result.at_size[position] = leaves.copy()
    except (VerificationError, struct.error) as exc:
        message = str(exc) if isinstance(exc, VerificationError) else "malformed envelope"
        result.problem = Problem(position, message)
    return result


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
) -> tuple[Envelope, bytes]:
    """Every check, one by one, so a failure says exactly what is wrong.

    Returns the envelope and its signer's public key."""
    envelope = open_envelope(state, stream=stream, version=version)
    check_row(envelope, stream=stream, version=version, topic=topic)
    public_key = signer_check.check_signer(envelope, stream=stream, version=version)
    if spec.check_signatures:
        signer_check.check_signature(envelope, stream=stream, version=version)
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
