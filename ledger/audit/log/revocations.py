"""Key revocations as `ledger verify` trusts them.

From the log: every `KeyRevoked` event of the key registry stream (read by
its fixed id, version by version: an indexed lookup, never a scan), each
checked before it counts (envelope, chain, node signature, the operator's
signature over the fact). From the keyring: each entry's `revoked_at`,
honoured even when the log holds no such event (the keyring is the auditor's
own trust). The earlier time wins.

Whether the operator key could sign the revocation when its event was signed
depends on the checkpoints (a revoked operator key signs nothing but what a
checkpoint older than its revocation covers), and which checkpoints are
valid depends on the revocations: so the revocations are read first, and
their operator keys judged once the checkpoints are known
(`check_revokers`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from eventsourcing.persistence import Transcoder

from ledger.audit.log.fixed_streams import stream_events
from ledger.audit.log.key_times import Coverage
from ledger.audit.log.log_rows import LogRows
from ledger.crypto.actor import actor_signature, check_fact_signature
from ledger.crypto.envelope import SignerCheck, where
from ledger.crypto.keys import Keyring, Role, from_micros
from ledger.crypto.validity import key_problem
from ledger.domain.key_registry import KEY_REGISTRY_ID, REVOKED_TOPIC, revocation_fact
from ledger.errors import FindingKind, VerificationError

_STREAM = str(KEY_REGISTRY_ID)


@dataclass(frozen=True)
class LogRevocation:
    """One `KeyRevoked` event whose signatures verified."""

    key_id: str
    revoked_at: int  # µs
    operator_key: str  # the key id that signed the fact
    position: int  # log position of the event
    signed_at: int | None  # the envelope's signing time (None: a v1 envelope)
    label: str


def log_revocations(
    tables: LogRows,
    transcoder: Transcoder,
    keyring: Keyring,
    problems: list[VerificationError] | None = None,
) -> list[LogRevocation]:
    """Every revocation recorded in the log, signatures checked, in log order.
    A bad event raises; with `problems`, it is added there and the registry is
    read no further (what follows a broken link cannot be told apart)."""
    found: list[LogRevocation] = []
    try:
        for event in stream_events(tables, _STREAM, SignerCheck(keyring)):
            if event.topic == REVOKED_TOPIC:
                payload = event.envelope.payload
                try:
                    key_id, at, operator = _checked_fact(
                        transcoder, payload, keyring, event.version
                    )
                except VerificationError as exc:
                    exc.position = event.position
                    raise
                signed_at = event.envelope.signed_at
                found.append(
                    LogRevocation(key_id, at, operator, event.position, signed_at, event.label)
                )
    except VerificationError as exc:
        problem = VerificationError(
            f"key registry: {exc} (log position {exc.position})", position=exc.position
        )
        if problems is None:
            raise problem from exc
        problems.append(problem)
    return found


def earliest(revocations: list[LogRevocation]) -> dict[str, int]:
    """Key id -> its earliest revocation time (µs) among `revocations`."""
    revoked: dict[str, int] = {}
    for revocation in revocations:
        at = revocation.revoked_at
        revoked[revocation.key_id] = min(at, revoked.get(revocation.key_id, at))
    return revoked


def check_revokers(
    revocations: list[LogRevocation],
    keyring: Keyring,
    coverage: Coverage,
    problems: list[VerificationError] | None = None,
) -> None:
    """Each revocation's operator key could sign when its event was signed (a
    revocation that fails still counts: revoking early flags more, never less)."""
    for revocation in revocations:
        record = keyring.get(revocation.operator_key)
        assert record is not None  # its signature verified with it
        if (
            revocation.operator_key == revocation.key_id
            and record.window_micros()[2] >= revocation.revoked_at
        ):
            # A key may sign its own revocation (the last operator key, or a key
            # whose holder lost it): judged as it stood before that revocation.
            record = replace(record, revoked_at=None, revocation_reason=None)
        when = coverage.when(revocation.position, revocation.signed_at)
        problem = key_problem(record, when.at, when.covered_at, when.covered_size)
        if problem is not None:
            error = VerificationError(
                f"key registry: {revocation.label}: the revocation's operator key "
                f"{record.name}: {problem} (log position {revocation.position})",
                kind=FindingKind.ALTERED,
                position=revocation.position,
            )
            if problems is None:
                raise error
            problems.append(error)


def _checked_fact(
    transcoder: Transcoder, payload: bytes, keyring: Keyring, version: int
) -> tuple[str, int, str]:
    label = where(_STREAM, version)
    try:
        data: dict[str, Any] = transcoder.decode(payload)
        key_id, reason, at = data["key_id"], data["reason"], data["revoked_at"]
        signed = actor_signature(data["operator"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise VerificationError(f"malformed revocation: {exc}", where=label) from exc
    if type(key_id) is not str or type(reason) is not str or type(at) is not int:
        raise VerificationError("malformed revocation: wrong field types", where=label)
    try:
        from_micros(at)
    except OverflowError:
        raise VerificationError("revocation time out of range", where=label) from None
    fact = revocation_fact(key_id, reason, at)
    record = check_fact_signature(keyring, fact, signed, Role.OPERATOR, label)
    return key_id, at, record.key_id


def merged(keyring: Keyring, from_log: dict[str, int]) -> Keyring:
    """`keyring` with each key's revocation the earlier of the keyring's and the log's."""
    return keyring.with_revocations(from_log)
