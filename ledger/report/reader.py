"""Stream the log once into a `ReportTally`, in batches.

Every event's envelope is checked (row, signed type, signature, signer), the
ones the report does not count included: which events are counted is decided
by the event type, and the row's topic column is the attacker's to edit, so
it is trusted only once the signed envelope agrees with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

from eventsourcing.utils import get_topic

from ledger.report.tally import ReportTally
from ledger.report.theory import Theories
from ledger.store.application import LedgerApplication
from ledger.store.sealing import SealingMapper

BATCH = 2_000


def read_log(
    app: LedgerApplication,
    theories: Theories,
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> ReportTally:
    """Aggregate the log as it stands now (positions 1..its end when the pass began)."""

    def read_round(round_id: UUID) -> Iterator[Any]:
        for stored in app.recorder.select_events(round_id):
            yield app.mapper.to_domain_event(stored)

    mapper = app.mapper
    assert isinstance(mapper, SealingMapper)  # every LedgerApplication seals
    tally = ReportTally(theories, read_round)
    by_topic = {get_topic(cls): handler for cls, handler in tally.handlers().items()}
    end = int(app.recorder.max_notification_id() or 0)
    tally.end = end
    if on_total:
        on_total(end)
    position = 0
    while position < end:
        batch = app.recorder.select_notifications(
            position, BATCH, stop=end, inclusive_of_start=False
        )
        if not batch:
            break
        for notification in batch:
            handler = by_topic.get(notification.topic)
            tally.events += 1
            if handler is None:
                mapper.open(notification)  # its signed type is not one the report counts
                continue
            event: Any = app.mapper.to_domain_event(notification)
            tally.seen(event.timestamp)
            handler(event)
        position = batch[-1].id
        if progress:
            progress(len(batch))
    return tally
