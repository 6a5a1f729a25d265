"""The significant events the report lists, and the latest recorded verification runs.

`ledger.audit.significant.iter_significant` streams them in log order; the
report keeps a count per kind, the newest `SHOWN` of them (memory bounded
however long the log), the newest auditor's recorded verification run and
the newest of the node's own scheduled ones.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ledger.audit.significant import SignificantEvent, scan_significant
from ledger.store.application import LedgerApplication

SHOWN = 1_000


@dataclass
class Significant:
    counts: Counter[str] = field(default_factory=Counter)
    newest: deque[SignificantEvent] = field(default_factory=lambda: deque(maxlen=SHOWN))
    last_verification: SignificantEvent | None = None
    last_self_verification: SignificantEvent | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def collect(app: LedgerApplication, progress: Callable[[int], None] | None = None) -> Significant:
    found = Significant()
    for event in scan_significant(app, progress=progress):
        found.counts[event.kind] += 1
        found.newest.append(event)
        if event.kind == "verification":
            found.last_verification = event
        elif event.kind == "self-verification":
            found.last_self_verification = event
    return found
