"""`ledger retention apply`: the erasures a policy makes due, each an operator-signed
erasure in the log whose reason names the policy and the rule (`ledger.erasure`).

Each erasure is its own signed, significant event, recorded before its key is
destroyed, so an apply stopped half-way has erased some subjects completely
and left the rest as they were; applying again erases what is still due."""

from __future__ import annotations

from dataclasses import dataclass

from ledger.crypto.signing import Signer
from ledger.erasure import Erased, erase_subject
from ledger.privacy.personal import PersonalData
from ledger.retention.plan import Due, RetentionPlan
from ledger.store.application import LedgerApplication


@dataclass(frozen=True)
class Applied:
    erased: list[Erased]
    not_held: list[Due]  # due, but no key for them on this node: erase them where they are


def apply_retention(
    app: LedgerApplication, personal: PersonalData, plan: RetentionPlan, operator: Signer
) -> Applied:
    erased, not_held = [], []
    for due in plan.due:
        if not personal.holds(due.subject):
            not_held.append(due)
            continue
        erased.append(erase_subject(app, personal, due.subject, due.reason(plan.policy), operator))
    return Applied(erased, not_held)
