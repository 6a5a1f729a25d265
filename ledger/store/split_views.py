"""Recording a witness's split-view refusal in the log (`WitnessReports`)."""

from __future__ import annotations

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from ledger.domain.witness_reports import WITNESS_REPORTS_ID, WitnessReports
from ledger.store.application import LedgerApplication
from ledger.store.witnessing import SplitView

RETRIES = 5


def record_split_view(app: LedgerApplication, view: SplitView) -> None:
    """Append one `SplitViewReported` (retried when another node appends at once)."""
    for attempt in range(RETRIES):
        try:
            reports: WitnessReports = app.repository.get(WITNESS_REPORTS_ID)
        except AggregateNotFoundError:
            reports = WitnessReports()
        reports.report_split_view(
            witness=view.witness,
            url=view.url,
            status=view.status,
            reason=view.reason,
            checkpoint=view.checkpoint.bare().to_note(),
            witness_size=view.witness_size,
        )
        try:
            app.save(reports)
            return
        except IntegrityError:
            if attempt == RETRIES - 1:
                raise
