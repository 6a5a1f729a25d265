"""Key revocations as `ledger verify` trusts them.

From the log: every `KeyRevoked` event of the key registry stream (read by
its fixed id, version by version: an indexed lookup, never a scan), each
checked before it counts (envelope, chain, node signature, the operator's
signature over the fact, the operator key's validity at that time). From
the keyring: each entry's `revoked_at`, honoured even when the log holds no
such event (the keyring is the auditor's own trust). The earlier time wins.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from eventsourcing.persistence import Transcoder

from ledger.audit.log_rows import LogRows
from ledger.crypto.actor import actor_signature, verify_fact
from ledger.crypto.envelope import GENESIS_HASH, SignerCheck, check_row, open_envelope, where
from ledger.crypto.keys import Keyring, Role, from_micros, to_micros
from ledger.domain.key_registry import KEY_REGISTRY_ID, REVOKED_TOPIC, revocation_fact
from ledger.errors import VerificationError

_STREAM = str(KEY_REGISTRY_ID)


def log_revocations(tables: LogRows, transcoder: Transcoder, keyring: Keyring) -> dict[str, int]:
    """Key id -> earliest revocation time (µs) recorded in the log."""
    signer_check = SignerCheck(keyring)
    revoked: dict[str, int] = {}
    previous, version = GENESIS_HASH, 1
    while (row := tables.row_by_stream(_STREAM, version)) is not None:
        notification_id, _, _, topic, state = row
        try:
            envelope = open_envelope(state, stream=_STREAM, version=version)
            check_row(envelope, stream=_STREAM, version=version, topic=topic)
            signer_check.check_signature(envelope, stream=_STREAM, version=version)
            if envelope.prev_hash != previous:
                raise VerificationError("chain broken", where=where(_STREAM, version))
            if topic == REVOKED_TOPIC:
                key_id, at = _checked_fact(transcoder, envelope.payload, keyring, version)
                revoked[key_id] = min(at, revoked.get(key_id, at))
        except VerificationError as exc:
            position = tables.position_of(notification_id)
            raise VerificationError(f"key registry: {exc} (log position {position})") from exc
        previous, version = envelope.entry_hash, version + 1
    return revoked


def _checked_fact(
    transcoder: Transcoder, payload: bytes, keyring: Keyring, version: int
) -> tuple[str, int]:
    label = where(_STREAM, version)
    try:
        data: dict[str, Any] = transcoder.decode(payload)
        key_id, reason, at = data["key_id"], data["reason"], data["revoked_at"]
        signed = actor_signature(data["operator"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise VerificationError(f"malformed revocation: {exc}", where=label) from exc
    if type(key_id) is not str or type(reason) is not str or type(at) is not int:
        raise VerificationError("malformed revocation: wrong field types", where=label)
    verify_fact(keyring, revocation_fact(key_id, reason, at), signed, Role.OPERATOR, label)
    operator = keyring.get(signed["key_id"])
    assert operator is not None  # verify_fact found it
    try:
        moment = from_micros(at)
    except OverflowError:
        raise VerificationError("revocation time out of range", where=label) from None
    if not operator.valid_at(moment) or (
        operator.revoked_at is not None and operator.revoked_at < moment
    ):
        raise VerificationError(
            "revocation signed with an operator key not valid at its time", where=label
        )
    return key_id, at


def merged(keyring: Keyring, from_log: dict[str, int]) -> Keyring:
    """`keyring` with each key's revocation the earlier of the keyring's and the log's."""
    records = []
    for record in keyring:
        at = from_log.get(record.key_id)
        if at is not None and (record.revoked_at is None or at < to_micros(record.revoked_at)):
            record = replace(
                record,
                revoked_at=from_micros(at),
                revocation_reason=record.revocation_reason or "revoked in the log",
            )
        records.append(record)
    return Keyring(records)
