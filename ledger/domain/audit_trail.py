"""The audit trail: the one stream where verification runs are recorded.

Its id is fixed (a uuid5 of a well-known name), so `ledger verify` checks
every recorded run by an indexed stream lookup, never a scan. Each run is a
fact an auditor signs with their own `auditor` key (`verification-run`: what
was checked, against which tree size and root, the result and the counts);
the node seals the event like any other.

A node's own scheduled self-verification (`ledger serve`, `ledger checkpoint
--follow`) is recorded here too, as its own event (`SelfVerificationRecorded`):
the same run, with no auditor's signature. It is the node's claim about
itself, signed by the ledger-node key that seals its envelope (that signature
covers every byte of the run): an auditor key kept in a running node would let
whoever takes the node sign as the auditor, and a run it made must never read
as an independent auditor's.
"""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

AUDIT_TRAIL_ID = uuid5(NAMESPACE_URL, "casino-ledger/audit-trail")
VERIFICATION_KIND = "verification-run"
RECORDED_TOPIC = "ledger.domain.audit_trail:AuditTrail.VerificationRecorded"  # a test holds it
SELF_RECORDED_TOPIC = "ledger.domain.audit_trail:AuditTrail.SelfVerificationRecorded"


def verification_fact(run: dict[str, Any]) -> dict[str, Any]:
    """Exactly what the auditor signs for a verification run."""
    return {"kind": VERIFICATION_KIND, **run}


class AuditTrail(Aggregate):
    """Verification runs, in the order they were recorded."""

    @staticmethod
    def create_id() -> UUID:
        return AUDIT_TRAIL_ID

    @event("Created")
    def __init__(self) -> None:
        self.runs = 0

    @event("VerificationRecorded")
    def record_verification(self, run: dict[str, Any], auditor: dict[str, str]) -> None:
        """`auditor` is the auditor's signature over `verification_fact(run)`."""
        self.runs += 1

    @event("SelfVerificationRecorded")
    def record_self_verification(self, run: dict[str, Any]) -> None:
        """The node's own scheduled run, signed by the node's envelope alone."""
        self.runs += 1
