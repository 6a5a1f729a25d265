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

from ledger.audit.log.fixed_streams import StreamEvent, stream_events
from ledger.audit.log.key_times import Coverage
from ledger.audit.log.log_rows import LogRows
from ledger.crypto.actor import actor_signature, check_fact_signature
from ledger.crypto.envelope import SignerCheck
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
    found: list[RecordedErasure] = []
    try:
        for event in stream_events(tables, _STREAM, SignerCheck(keyring)):
            if event.topic == ERASED_TOPIC:
                found.append(_checked(transcoder, event, keyring, coverage))
    except VerificationError as exc:
        problems.append(
            VerificationError(
                f"erasure register: {exc} (log position {exc.position})",
                position=exc.position,
                kind=exc.kind,
            )
        )
    return found


def _checked(
    transcoder: Transcoder, event: StreamEvent, keyring: Keyring, coverage: Coverage
) -> RecordedErasure:
    label = event.label
    try:
        try:
            data: dict[str, Any] = transcoder.decode(event.envelope.payload)
            subject, reason = data["subject"], data["reason"]
            signed = actor_signature(data["operator"])
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise VerificationError(f"malformed erasure: {exc}", where=label) from exc
        if type(subject) is not str or type(reason) is not str:
            raise VerificationError("malformed erasure: wrong field types", where=label)
        fact = erasure_fact(subject, reason)
        operator = check_fact_signature(keyring, fact, signed, Role.OPERATOR, label)
        when = coverage.when(event.position, event.envelope.signed_at)
        problem = key_problem(operator, when.at, when.covered_at, when.covered_size)
        if problem is not None:
            raise VerificationError(f"operator key {operator.name}: {problem}", where=label)
    except VerificationError as exc:
        exc.position = event.position
        raise
    return RecordedErasure(event.position, subject, operator.key_id)
