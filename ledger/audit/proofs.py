"""Proofs an auditor can check offline, with the keyring and nothing else."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any
from uuid import UUID

from ledger.crypto.checkpoint import Checkpoint, newest_valid
from ledger.crypto.envelope import (
    ENVELOPE_PREFIX,
    MAGIC,
    MAGIC_V1,
    SignerCheck,
    open_envelope,
    where,
)
from ledger.crypto.keys import Keyring, to_micros
from ledger.crypto.merkle import (
    consistency_proof,
    inclusion_proof,
    verify_consistency,
    verify_inclusion,
)
from ledger.crypto.validity import signing_problem
from ledger.errors import ConfigError, VerificationError, with_article
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import CheckpointRow, StoredRowError, parse_checkpoint_row

Bundle = dict[str, Any]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


MAX_VERSION = 2**63 - 1  # both stores keep versions as 64-bit integers


def newest_checkpoint(app: LedgerApplication, keyring: Keyring) -> Checkpoint | None:
    """The newest stored checkpoint whose signature verifies, by its signed size.

    A log signs a checkpoint a second while it is written: reading and
    verifying every row on each call (each proof, `GET
    /v1/checkpoints/newest`) would grow without end. The newest is of the
    stored tree's size (the checkpointer stores both in one transaction), so
    the rows whose size column is at least that are read first; only when
    none of them verifies with a signed size that large is every row read.
    The column only chooses what to read first: a row whose column was edited
    (raised or lowered) is still judged by its signed size."""

    def parsed(rows: list[CheckpointRow]) -> Iterator[Checkpoint]:  # one at a time
        for row in rows:
            try:
                yield parse_checkpoint_row(row)
            except VerificationError:
                continue  # a row that is not a checkpoint proves nothing: skip it

    try:
        size = app.tables.tail()[0]
    except StoredRowError:
        size = 0  # a malformed leaf row: read every checkpoint
    if size:
        found = newest_valid(parsed(app.tables.checkpoint_rows(size)), keyring)[0]
        if found is not None and found.size >= size:
            return found
    return newest_valid(parsed(app.tables.checkpoint_rows()), keyring)[0]


def checkpoints_after(
    app: LedgerApplication, keyring: Keyring, after: int, limit: int
) -> list[Checkpoint]:
    """Up to `limit` stored checkpoints of sizes above `after` whose signature
    verifies, by size, one per size (what a mirror copies the log under: the
    checkpoints that cover each event, the earliest one included)."""
    found: dict[int, Checkpoint] = {}
    for row in app.tables.checkpoint_rows(from_size=after + 1):
        try:
            checkpoint = parse_checkpoint_row(row)
            if checkpoint.size <= after or checkpoint.size in found:
                continue
            checkpoint.verify(keyring)
        except VerificationError:
            continue  # a row that is not a valid checkpoint proves nothing: skip it
        found[checkpoint.size] = checkpoint
    return [found[size] for size in sorted(found)[:limit]]


def inclusion_of(app: LedgerApplication, stream: str, version: int, keyring: Keyring) -> Bundle:
    """The event's signed header, its leaf index, the newest checkpoint and the path."""
    try:
        UUID(stream)
    except ValueError:
        raise ConfigError(f"stream {stream!r} is not a stream id (a UUID)") from None
    if not 1 <= version <= MAX_VERSION:
        raise ConfigError(f"version {version} is out of range (1 to {MAX_VERSION})")
    row = app.tables.row_by_stream(stream, version)
    if row is None:
        raise ConfigError(f"no event at stream {stream} version {version}")
    index = app.tables.leaf_index_of(row[0])
    checkpoint = newest_checkpoint(app, keyring)
    if index is None or checkpoint is None or index >= checkpoint.size:
        raise ConfigError("that event is not under a checkpoint yet: run `ledger checkpoint`")
    envelope = open_envelope(bytes(row[4]), stream=stream, version=version)
    proof = inclusion_proof(index, checkpoint.size, app.tables.subtree_reader())
    bundle: Bundle = {
        "stream": stream,
        "version": version,
        "leaf_index": index,
        "header": _b64(envelope.header),
        "signature": _b64(envelope.signature),
        "proof": [_b64(p) for p in proof],
        "checkpoint": checkpoint.to_note(),
    }
    return bundle


_FIELDS: dict[str, type] = {
    "stream": str,
    "version": int,
    "leaf_index": int,
    "header": str,
    "signature": str,
    "proof": list,
    "checkpoint": str,
}


def _fields(bundle: object) -> None:
    """Exactly the bundle's fields, each of its JSON type (no int as a string, no bool)."""
    if not isinstance(bundle, dict):
        raise VerificationError("malformed inclusion bundle: not a JSON object")
    for name, kind in _FIELDS.items():
        if name not in bundle:
            raise VerificationError(f"malformed inclusion bundle: {name!r} is missing")
        value = bundle[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise VerificationError(
                f"malformed inclusion bundle: {name!r} must be {with_article(kind.__name__)}, "
                f"not {type(value).__name__}"
            )
    extra = sorted(set(bundle) - set(_FIELDS), key=str)
    if extra:
        raise VerificationError(f"malformed inclusion bundle: unexpected field {extra[0]!r}")
    if not all(isinstance(p, str) for p in bundle["proof"]):
        raise VerificationError("malformed inclusion bundle: 'proof' must hold strings")


def _decode(name: str, text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise VerificationError(f"malformed inclusion bundle: {name!r} is not base64") from exc


def verify_inclusion_bundle(
    bundle: Bundle, keyring: Keyring, *, origin: str | None = None
) -> Checkpoint:
    """Offline check of an `inclusion_of` bundle, whole; returns the checkpoint it
    proves against. Checked: every field's presence and type; the checkpoint
    (canonical, timezone-aware, signed by a checkpoint key, of `origin` when
    given); the envelope header's signature by a ledger-node key; that the
    claimed stream and version are the signed header's; and the leaf's
    inclusion at `leaf_index` under the checkpoint's root. Anything wrong
    raises `VerificationError`, never another exception."""
    _fields(bundle)
    checkpoint = Checkpoint.from_note(bundle["checkpoint"])
    checkpoint.verify(keyring, origin=origin)
    header = _decode("header", bundle["header"])
    signature = _decode("signature", bundle["signature"])
    proof = [_decode("proof", p) for p in bundle["proof"]]
    stream, version, index = bundle["stream"], bundle["version"], bundle["leaf_index"]
    if len(header) > 0xFFFF:
        raise VerificationError("malformed inclusion bundle: header too long")
    # The header and signature as they were stored (no payload: only its hash is
    # signed). A release-0.1 (v1) header carries no signing time.
    magic = MAGIC if b'"signed_at":' in header else MAGIC_V1
    envelope = open_envelope(
        ENVELOPE_PREFIX.pack(magic, len(header)) + header + signature,
        stream=stream,
        version=version,
    )
    if envelope.stream != stream or envelope.version != version:
        raise VerificationError(
            f"the bundle claims stream {stream} version {version} but the signed header is "
            f"stream {envelope.stream} version {envelope.version}"
        )
    signer_check = SignerCheck(keyring)
    signer_check.check_signature(envelope, stream=stream, version=version)
    # Signed inside its key's validity, revocation included, and no later than the
    # checkpoint that proves it (a v1 envelope is judged by that checkpoint alone).
    issued = to_micros(checkpoint.issued_at)
    signed_at = issued if envelope.signed_at is None else envelope.signed_at
    window = signer_check.windows[envelope.key_id]
    problem = signing_problem(signed_at, window, issued, checkpoint.size)
    if problem:
        raise VerificationError(problem, where=where(stream, version))
    if not 0 <= index < checkpoint.size:
        raise VerificationError(
            f"leaf index {index} is outside the checkpoint of size {checkpoint.size}"
        )
    verify_inclusion(index, checkpoint.size, envelope.entry_hash, proof, checkpoint.root)
    return checkpoint


def consistency_from(app: LedgerApplication, trusted: Checkpoint, keyring: Keyring) -> Bundle:
    trusted.verify(keyring)
    newest = newest_checkpoint(app, keyring)
    if newest is None or newest.size < trusted.size:
        raise VerificationError("the store has no checkpoint as large as the kept one")
    try:
        proof = consistency_proof(trusted.size, newest.size, app.tables.subtree_reader())
    except (LookupError, ValueError) as exc:
        raise VerificationError(f"no consistency proof from the kept checkpoint: {exc}") from exc
    verify_consistency(trusted.size, newest.size, proof, trusted.root, newest.root)
    return {
        "from": trusted.to_note(),
        "to": newest.to_note(),
        "proof": [_b64(p) for p in proof],
    }
