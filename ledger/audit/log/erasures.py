"""Recorded erasures of personal data (`ledger erase`), as `ledger verify` checks them.

Read from the erasure register by its fixed id, version by version (an
indexed lookup, never a scan), at step 3 beside the recorded runs. Each
erasure counts only once checked: its envelope against its row, the node's
signature, the chain, and the operator's own signature over the erasure (an
`operator` key of the keyring, valid and not revoked when its event was
signed). An erasure changes no signed byte of any other event: the values it
made unreadable were sealed when recorded (docs/privacy.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import Transcoder

from ledger.audit.log.key_times import Coverage
from ledger.audit.log.log_rows import LogRows
from ledger.crypto.actor import actor_signature, check_fact_signature
from ledger.crypto.envelope import GENESIS_HASH, SignerCheck, check_row, open_envelope, where
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.validity import key_problem
from ledger.domain.erasures import ERASED_TOPIC, ERASURES_ID, erasure_fact
from ledger.errors import VerificationError

_STREAM = str(ERASURES_ID)


@dataclass(frozen=True)
class RecordedErasure:
    position: int  # log position of the event recording it
    subject: str
    operator_key: str


def recorded_erasures(
    tables: LogRows,
    transcoder: Transcoder,
    keyring: Keyring,
    coverage: Coverage,
    problems: list[VerificationError],
) -> list[RecordedErasure]:
    """Every recorded erasure, checked; a bad one is added to `problems` and the
    register is read no further (what follows a broken link cannot be told apart)."""
    signer_check = SignerCheck(keyring)
    found: list[RecordedErasure] = []
    previous, version = GENESIS_HASH, 1
    while (row := tables.row_by_stream(_STREAM, version)) is not None:
        notification_id, _, _, topic, state = row
        position = tables.position_of(notification_id)
        try:
            envelope = open_envelope(bytes(state), stream=_STREAM, version=version)
            check_row(envelope, stream=_STREAM, version=version, topic=topic)
            signer_check.check_signature(envelope, stream=_STREAM, version=version)
            if envelope.prev_hash != previous:
                raise VerificationError("chain broken", where=where(_STREAM, version))
            if topic == ERASED_TOPIC:
                when = coverage.when(position, envelope.signed_at)
                subject, operator = _checked(transcoder, envelope.payload, keyring, version)
                problem = key_problem(operator, when.at, when.covered_at, when.covered_size)
                if problem is not None:
                    raise VerificationError(
                        f"operator key {operator.name}: {problem}", where=where(_STREAM, version)
                    )
                found.append(RecordedErasure(position, subject, operator.key_id))
        except VerificationError as exc:
            problems.append(
                VerificationError(
                    f"erasure register: {exc} (log position {position})",
                    position=position,
                    kind=exc.kind,
                )
            )
            break
        previous, version = envelope.entry_hash, version + 1
    return found


def _checked(
    transcoder: Transcoder, payload: bytes, keyring: Keyring, version: int
) -> tuple[str, Any]:
    label = where(_STREAM, version)
    try:
        data: dict[str, Any] = transcoder.decode(payload)
        subject, reason = data["subject"], data["reason"]
        signed = actor_signature(data["operator"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise VerificationError(f"malformed erasure: {exc}", where=label) from exc
    if type(subject) is not str or type(reason) is not str:
        raise VerificationError("malformed erasure: wrong field types", where=label)
    fact = erasure_fact(subject, reason)
    return subject, check_fact_signature(keyring, fact, signed, Role.OPERATOR, label)
