"""Witness reports: the one stream where a node records that a witness refused
one of its checkpoints because the witness had seen a different log (a split
view: another root for a size it cosigned, or a tree this checkpoint does not
extend). `ledger significant` lists each as `split-view`.

The witness's answer is not signed (tlog-witness gives none), so the event
states what was asked and answered: the witness, its HTTP status and words,
our refused checkpoint note, and the size the witness last cosigned. The
node's envelope signature says which node heard it.
"""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

WITNESS_REPORTS_ID = uuid5(NAMESPACE_URL, "casino-ledger/witness-reports")
SPLIT_VIEW_TOPIC = "ledger.domain.witness_reports:WitnessReports.SplitViewReported"


class WitnessReports(Aggregate):
    @staticmethod
    def create_id() -> UUID:
        return WITNESS_REPORTS_ID

    @event("Created")
    def __init__(self) -> None:
        self.reports = 0

    @event("SplitViewReported")
    def report_split_view(
        self,
        witness: str,
        url: str,
        status: int,
        reason: str,
        checkpoint: str,
        witness_size: int,
    ) -> None:
        self.reports += 1
