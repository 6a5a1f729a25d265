"""What a retention policy makes due, read from the log (`ledger retention plan`).

Personal data: each data subject's relationship ends when a player's account
is closed (`Account.Closed`), and for a dealer with the last round they dealt;
the subject is due for erasure `erase_after_years` after that, and an open
account is never due. Game records: a round whose last event is older than
`keep_years` has been kept as long as the policy asks. Every event is read
through its checked envelope (`log_envelopes`), never from a read model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ledger.audit.significant import log_envelopes
from ledger.erasure import erased_subjects
from ledger.privacy.sealed import is_sealed
from ledger.retention.policy import Policy, years_after
from ledger.store.application import LedgerApplication

_ACCOUNT = "ledger.domain.account:Account."
_ROUND = "ledger.domain.round:Round."
_ENDED = {f"{_ROUND}Settled", f"{_ROUND}Voided"}


@dataclass(frozen=True)
class Due:
    subject: str
    ended: str  # what ended the relationship: "account closed", "last round dealt"
    ended_at: datetime
    due_at: datetime

    def reason(self, policy: Policy) -> str:
        """The erasure's signed reason: the rule, the dates; no personal data."""
        return (
            f"retention policy {policy.jurisdiction} ({policy.sha256[:16]}): personal data "
            f"erased {policy.erase_personal_after_years} years after the relationship ended "
            f"({self.ended} {self.ended_at.date().isoformat()})"
        )


@dataclass
class RetentionPlan:
    policy: Policy
    at: datetime
    due: list[Due] = field(default_factory=list)
    later: list[Due] = field(default_factory=list)  # relationships ended, not yet due
    ongoing: int = 0  # subjects whose relationship goes on (an open account)
    erased: int = 0  # subjects erased already
    rounds_past_keep: int = 0  # rounds kept as long as the policy asks
    rounds_kept: int = 0
    rounds_to_archive: int = 0  # finished rounds in the store past the policy's archive age
    archive_before: datetime | None = None  # the archive horizon, when the policy has one

    def to_json(self) -> dict[str, Any]:
        def row(d: Due) -> dict[str, str]:
            return {
                "subject": d.subject,
                "ended": d.ended,
                "ended_at": d.ended_at.isoformat(),
                "due_at": d.due_at.isoformat(),
            }

        return {
            "policy": {"jurisdiction": self.policy.jurisdiction, "sha256": self.policy.sha256},
            "at": self.at.isoformat(),
            "erase": [row(d) for d in self.due],
            "not_yet_due": [row(d) for d in self.later],
            "ongoing": self.ongoing,
            "erased": self.erased,
            "rounds_past_keep": self.rounds_past_keep,
            "rounds_kept": self.rounds_kept,
            "rounds_to_archive": self.rounds_to_archive,
            "archive_before": None
            if self.archive_before is None
            else self.archive_before.isoformat(),
        }


def plan_retention(
    app: LedgerApplication,
    policy: Policy,
    at: datetime,
    progress: Callable[[int], None] | None = None,
) -> RetentionPlan:
    transcoder = app.mapper.transcoder
    accounts: dict[str, datetime | None] = {}  # subject -> closed at (None: open)
    dealers: dict[str, datetime] = {}  # subject -> the last round they dealt
    rounds: dict[str, tuple[datetime, bool]] = {}  # round -> (last event, ended)
    for _, stream, _, topic, envelope in log_envelopes(app, progress):
        if not topic.startswith((_ACCOUNT, _ROUND)):
            continue
        payload: dict[str, Any] = transcoder.decode(envelope.payload)
        when: datetime = payload["timestamp"]
        if topic == f"{_ACCOUNT}Opened" and is_sealed(payload.get("owner")):
            accounts[payload["owner"]["subject"]] = None
        elif topic == f"{_ACCOUNT}Closed":
            subject = f"account-{stream}"
            if subject in accounts:
                accounts[subject] = when
        elif topic.startswith(_ROUND):
            if topic == f"{_ROUND}Opened" and is_sealed(payload.get("dealer")):
                dealers[payload["dealer"]["subject"]] = when
            ended = rounds.get(stream, (when, False))[1] or topic in _ENDED
            rounds[stream] = (when, ended)
    plan = RetentionPlan(policy, at)
    erased = erased_subjects(app)
    ends: list[tuple[str, str, datetime | None]] = [
        (subject, "account closed", closed) for subject, closed in accounts.items()
    ]
    ends += [(subject, "last round dealt", dealt) for subject, dealt in dealers.items()]
    for subject, what, ended_at in ends:
        if subject in erased:
            plan.erased += 1
        elif ended_at is None:
            plan.ongoing += 1
        else:
            due = Due(subject, what, ended_at, _due(policy, ended_at))
            (plan.due if due.due_at <= at else plan.later).append(due)
    plan.due.sort(key=lambda d: d.due_at)
    plan.later.sort(key=lambda d: d.due_at)
    horizon = years_after(at, -policy.keep_game_records_years)
    if policy.archive_after_days is not None:
        plan.archive_before = at - timedelta(days=policy.archive_after_days)
        plan.rounds_to_archive = sum(
            over and last < plan.archive_before for last, over in rounds.values()
        )
    for last, over in rounds.values():
        if over and last < horizon:
            plan.rounds_past_keep += 1
        else:
            plan.rounds_kept += 1
    return plan


def _due(policy: Policy, ended_at: datetime) -> datetime:
    years = max(policy.erase_personal_after_years, policy.keep_personal_at_least_years)
    return years_after(ended_at, years)
