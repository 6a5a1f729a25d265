"""`ledger verify --record`: a verification run's result appended to the log,
signed by the auditor who ran it (an `auditor` key) and sealed by the node;
a node's own scheduled run (`ledger.audit.self_verification`), sealed by the
node alone, as its own event.

The run states exactly what was checked: the level, the tree size and the
log's root the events gave, the newest checkpoint it verified against, the
kept checkpoint if any, the result and the counts. Only integers and text:
the fact is signed in canonical JSON, which has no floats.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from ledger.audit.verify import VerificationReport
from ledger.crypto.actor import sign_fact
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.domain.audit_trail import AUDIT_TRAIL_ID, AuditTrail, verification_fact
from ledger.store.application import LedgerApplication


def passed_run(report: VerificationReport, keyring: str, verified_at: int) -> dict[str, Any]:
    counts: dict[str, Any] = {
        "events": report.events,
        "streams": report.streams,
        "checkpoints": report.checkpoints,
        "recorded_runs": report.recorded_runs,
    }
    if report.settlement is not None:
        settled = asdict(report.settlement)
        settled.pop("other_code")
        counts |= {name: int(value) for name, value in settled.items()}
    return {
        "level": report.level.value,
        "result": "passed",
        "tree_size": report.events,
        "root": report.root,
        "checkpoint": (
            {"size": report.covered, "root": report.checkpoint_root}
            if report.checkpoint_root is not None
            else None
        ),
        "trusted_size": report.trusted_size,
        "counts": counts,
        "message": "",
        "keyring": keyring,
        "verified_at": verified_at,
    }


def failed_run(
    level: str, tree_size: int, message: str, keyring: str, verified_at: int
) -> dict[str, Any]:
    """A run that failed (or could not check): no root is claimed."""
    return {
        "level": level,
        "result": "failed",
        "tree_size": tree_size,
        "root": None,
        "checkpoint": None,
        "trusted_size": None,
        "counts": {},
        "message": message,
        "keyring": keyring,
        "verified_at": verified_at,
    }


def record_run(app: LedgerApplication, run: dict[str, Any], auditor: Signer) -> None:
    """Append `run`, signed by `auditor` (refused unless it is an auditor key)."""
    signature = sign_fact(auditor, verification_fact(run), Role.AUDITOR)
    trail = _trail(app)
    trail.record_verification(
        run=run, auditor={"key_id": signature["key_id"], "signature": signature["signature"]}
    )
    app.save(trail)


def record_self_run(app: LedgerApplication, run: dict[str, Any], attempts: int = 3) -> None:
    """Append the node's own run, sealed by the node's key. An auditor's run
    recorded at the same moment takes the trail's next version first: read
    the trail again and append after it."""
    for attempt in range(attempts):
        trail = _trail(app)
        trail.record_self_verification(run=run)
        try:
            app.save(trail)
            return
        except IntegrityError:
            if attempt == attempts - 1:
                raise


def _trail(app: LedgerApplication) -> AuditTrail:
    try:
        trail: AuditTrail = app.repository.get(AUDIT_TRAIL_ID)
    except AggregateNotFoundError:
        trail = AuditTrail()
    return trail
