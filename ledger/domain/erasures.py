"""The erasure register: the one stream where erasures of personal data are recorded.

Its id is fixed (a uuid5 of a well-known name), like the key registry's. Each
erasure is a fact an operator signs (`personal-data-erased`: the data
subject's id and the reason; never a personal value), recorded before the
subject's key is destroyed (docs/privacy.md), so a crash between the two is
finished on the next erase or start: a recorded erasure whose key still
exists is completed first.
"""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

ERASURES_ID = uuid5(NAMESPACE_URL, "casino-ledger/erasures")
ERASURE_KIND = "personal-data-erased"
ERASED_TOPIC = "ledger.domain.erasures:Erasures.SubjectErased"  # a test holds it to the class


def erasure_fact(subject: str, reason: str) -> dict[str, Any]:
    """Exactly what the operator signs for an erasure."""
    return {"kind": ERASURE_KIND, "subject": subject, "reason": reason}


class Erasures(Aggregate):
    """Erased data subjects, in the order they were erased."""

    @staticmethod
    def create_id() -> UUID:
        return ERASURES_ID

    @event("Created")
    def __init__(self) -> None:
        self.erased: list[str] = []

    @event("SubjectErased")
    def erase(self, subject: str, reason: str, operator: dict[str, str]) -> None:
        """`operator` is the operator's signature over `erasure_fact(subject, reason)`."""
        self.erased.append(subject)
