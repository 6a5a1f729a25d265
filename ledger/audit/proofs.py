"""Proofs an auditor can check offline, with the keyring and nothing else."""

from __future__ import annotations

import base64
from typing import Any

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import open_envelope
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import (
    consistency_proof,
    hash_leaf,
    inclusion_proof,
    verify_consistency,
    verify_inclusion,
)
from ledger.errors import ConfigError, VerificationError
from ledger.store.application import LedgerApplication

Bundle = dict[str, Any]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def inclusion_of(app: LedgerApplication, stream: str, version: int) -> Bundle:
    """The event's signed header, its leaf index, the newest checkpoint and the path."""
    row = app.tables.row_by_stream(stream, version)
    if row is None:
        raise ConfigError(f"no event at stream {stream} version {version}")
    index = app.tables.leaf_index_of(row[0])
    checkpoint = app.tables.latest_checkpoint()
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


def verify_inclusion_bundle(bundle: Bundle, keyring: Keyring) -> Checkpoint:
    """Offline check of an `inclusion_of` bundle; returns the checkpoint it proves against."""
    try:
        checkpoint = Checkpoint.from_note(bundle["checkpoint"])
        header = base64.b64decode(bundle["header"], validate=True)
        proof = [base64.b64decode(p, validate=True) for p in bundle["proof"]]
        index = int(bundle["leaf_index"])
    except (KeyError, TypeError, ValueError) as exc:
        raise VerificationError(f"malformed inclusion bundle: {exc}") from exc
    checkpoint.verify(keyring)
    verify_inclusion(index, checkpoint.size, hash_leaf(header), proof, checkpoint.root)
    return checkpoint


def consistency_from(app: LedgerApplication, trusted: Checkpoint) -> Bundle:
    newest = app.tables.latest_checkpoint()
    if newest is None or newest.size < trusted.size:
        raise VerificationError("the store has no checkpoint as large as the kept one")
    proof = consistency_proof(trusted.size, newest.size, app.tables.subtree_reader())
    verify_consistency(trusted.size, newest.size, proof, trusted.root, newest.root)
    return {
        "from": trusted.to_note(),
        "to": newest.to_note(),
        "proof": [_b64(p) for p in proof],
    }
