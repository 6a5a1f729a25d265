"""Revoking a key: an operator-signed fact, recorded in the log and in the keyring.

The log's `KeyRevoked` event is what a verifier trusts without trusting the
keys directory; the keyring entry's `revoked_at` makes public copies of the
keyring carry the revocation too. Both say the same time; verify takes the
earlier of the two when they differ.
"""

from __future__ import annotations

from eventsourcing.application import AggregateNotFoundError

from ledger.crypto.actor import sign_fact
from ledger.crypto.envelope import now_micros
from ledger.crypto.keys import PublicKeyRecord, Role, from_micros
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.signing import Signer
from ledger.crypto.validity import operator_may_sign_now
from ledger.domain.key_registry import KEY_REGISTRY_ID, KeyRegistry, revocation_fact
from ledger.errors import InvalidCommandError, KeyStoreError
from ledger.store.application import LedgerApplication


def find_key(keys: KeyDirectory, key: str) -> PublicKeyRecord:
    """A keyring entry by key id or by name."""
    for record in keys.keyring():
        if key in (record.key_id, record.name):
            return record
    raise KeyStoreError(f"no key {key!r} in {keys.keyring_path}")


def revoke_key(
    app: LedgerApplication,
    keys: KeyDirectory,
    key: str,
    reason: str,
    operator: Signer,
    revoked_at: int,
) -> PublicKeyRecord:
    """Record that `key` is revoked from `revoked_at` (µs), signed by `operator`."""
    record = find_key(keys, key)
    reason = reason.strip()
    if not reason:
        raise InvalidCommandError(
            "a revocation needs a reason (--reason TEXT)", code="reason_required", param="reason"
        )
    if record.revoked_at is not None:
        raise InvalidCommandError(
            f"key {record.name!r} is already revoked (at {record.revoked_at.isoformat()})",
            code="key_refused",
        )
    node_signer = app.mapper.signer  # type: ignore[attr-defined]
    if node_signer is not None and node_signer.key_id == record.key_id:
        raise InvalidCommandError(
            f"key {record.name!r} signs this node's events: create another ledger-node key "
            "and `ledger keys use` it, then revoke this one",
            code="key_refused",
        )
    if record.role is Role.CHECKPOINT and _signs_checkpoints_here(keys, record):
        raise InvalidCommandError(
            f"key {record.name!r} signs this node's checkpoints: create another checkpoint key "
            "and `ledger keys use` it, then revoke this one",
            code="key_refused",
        )
    try:
        registry: KeyRegistry = app.repository.get(KEY_REGISTRY_ID)
    except AggregateNotFoundError:
        registry = KeyRegistry()
    if record.key_id in registry.revoked:
        raise InvalidCommandError(
            f"key {record.name!r} is already revoked in the log", code="key_refused"
        )
    operator_may_sign_now(app.signing_keyring(), operator.key_id, now_micros())
    fact = revocation_fact(record.key_id, reason, revoked_at)
    signature = sign_fact(operator, fact, Role.OPERATOR)
    registry.revoke(
        key_id=record.key_id,
        reason=reason,
        revoked_at=revoked_at,
        operator={"key_id": signature["key_id"], "signature": signature["signature"]},
    )
    app.save(registry)
    return keys.mark_revoked(record.key_id, from_micros(revoked_at), reason)


def _signs_checkpoints_here(keys: KeyDirectory, record: PublicKeyRecord) -> bool:
    """Whether this keys directory would sign checkpoints with `record`."""
    if not keys.private_key_path(record.name).exists():
        return False
    try:
        return keys.choose(Role.CHECKPOINT).key_id == record.key_id
    except KeyStoreError:  # several, or none usable: it signs nothing by itself
        return False
