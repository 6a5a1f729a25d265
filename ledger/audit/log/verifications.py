"""Recorded verification runs (`ledger verify --record`), as `ledger verify` checks them.

Read from the audit trail stream by its fixed id, version by version (an
indexed lookup, never a scan). Each run counts only once checked: its
envelope against its row, the node's signature, the chain, the auditor's own
signature over the run (an `auditor` key of the keyring, valid and not
revoked when the run was made, never after the event was signed), and the
claims it makes about the log: the tree size it verified is no larger than
the log before it, and `verify_store` checks its root against the log's root
at that size like a checkpoint's.

A node's own scheduled run (`AuditTrail.SelfVerificationRecorded`) carries no
auditor's signature: the node's envelope signature, checked like every
envelope's (a ledger-node key valid when it signed), is its signature, and
it makes the same claims, checked the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import Transcoder

from ledger.audit.log.fixed_streams import StreamEvent, stream_events
from ledger.audit.log.key_times import Coverage, SignedWhen
from ledger.audit.log.log_rows import LogRows
from ledger.crypto.actor import actor_signature, check_fact_signature
from ledger.crypto.envelope import SignerCheck, where
from ledger.crypto.keys import Keyring, Role, from_micros
from ledger.crypto.validity import key_problem
from ledger.domain.audit_trail import (
    AUDIT_TRAIL_ID,
    RECORDED_TOPIC,
    SELF_RECORDED_TOPIC,
    verification_fact,
)
from ledger.errors import VerificationError

_STREAM = str(AUDIT_TRAIL_ID)


@dataclass(frozen=True)
class RecordedRun:
    position: int  # log position of the event recording it
    tree_size: int
    root: bytes | None  # the log's root at tree_size the run verified (None: it failed)
    result: str
    by_node: bool = False  # the node's own scheduled run, not an auditor's


def recorded_runs(
    tables: LogRows,
    transcoder: Transcoder,
    keyring: Keyring,
    coverage: Coverage,
    problems: list[VerificationError] | None = None,
) -> list[RecordedRun]:
    """Every recorded run, checked; raise `VerificationError` naming the first bad
    one (with `problems`: add it there and read the trail no further)."""
    runs: list[RecordedRun] = []
    try:
        for event in stream_events(tables, _STREAM, SignerCheck(keyring)):
            if event.topic in (RECORDED_TOPIC, SELF_RECORDED_TOPIC):
                runs.append(_recorded(transcoder, event, keyring, coverage))
    except VerificationError as exc:
        problem = VerificationError(
            f"audit trail: {exc} (log position {exc.position})",
            position=exc.position,
            kind=exc.kind,
        )
        if problems is None:
            raise problem from exc
        problems.append(problem)
    return runs


def _recorded(
    transcoder: Transcoder, event: StreamEvent, keyring: Keyring, coverage: Coverage
) -> RecordedRun:
    """One recorded run, checked, and the claims it makes about the log."""
    envelope, version, position = event.envelope, event.version, event.position
    try:
        when = coverage.when(position, envelope.signed_at)
        by_node = event.topic == SELF_RECORDED_TOPIC
        run = _checked_run(transcoder, envelope.payload, keyring, version, when, by_node)
        if envelope.signed_at is not None and run["verified_at"] > envelope.signed_at:
            raise VerificationError(
                "verification run made after the event recording it was signed",
                where=event.label,
            )
        if run["tree_size"] > position:
            raise VerificationError(
                f"verification run claims a tree of {run['tree_size']} events, more "
                f"than the log held before it ({position})",
                where=event.label,
            )
    except VerificationError as exc:
        exc.position = position
        raise
    root = bytes.fromhex(run["root"]) if run["root"] is not None else None
    return RecordedRun(position, run["tree_size"], root, run["result"], by_node)


def _checked_run(
    transcoder: Transcoder,
    payload: bytes,
    keyring: Keyring,
    version: int,
    when: SignedWhen,
    by_node: bool = False,
) -> dict[str, Any]:
    label = where(_STREAM, version)
    try:
        data: dict[str, Any] = transcoder.decode(payload)
        run = data["run"]
        signed = None if by_node else actor_signature(data["auditor"])
        size, root, at = run["tree_size"], run["root"], run["verified_at"]
        result = run["result"]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise VerificationError(f"malformed verification run: {exc}", where=label) from exc
    if (
        type(size) is not int
        or size < 0
        or type(at) is not int
        or result not in ("passed", "failed")
    ):
        raise VerificationError("malformed verification run: wrong field types", where=label)
    if root is not None and (type(root) is not str or len(root) != 64):
        raise VerificationError("malformed verification run: root is not a hash", where=label)
    if root is not None:
        try:
            bytes.fromhex(root)
        except ValueError:
            raise VerificationError(
                "malformed verification run: root is not hex", where=label
            ) from None
    try:
        from_micros(at)
    except OverflowError:
        raise VerificationError("verification time out of range", where=label) from None
    if signed is None:  # the node's own: its envelope's signature, already checked
        return dict(run)
    auditor = check_fact_signature(keyring, verification_fact(run), signed, Role.AUDITOR, label)
    # Judged at the run's own time and at its event's: both must be inside the
    # key's validity, and a revoked key's run counts only under a checkpoint
    # older than the revocation (`ledger.crypto.validity`).
    for moment in (at, when.at):
        problem = key_problem(auditor, moment, when.covered_at, when.covered_size)
        if problem is not None:
            raise VerificationError(f"auditor key {auditor.name}: {problem}", where=label)
    return dict(run)
