"""The roles a session of the API may have: what a recorded `by` may name
(`ledger.domain.asked_by`) and what each token grants (`ledger.http.tokens`)."""

from __future__ import annotations

from enum import StrEnum


class ApiRole(StrEnum):
    TABLE_DEVICE = "table-device"  # reports outcomes, cards and actions for its own table
    CASHIER = "cashier"  # accounts, deposits, withdrawals
    OPERATOR = "operator"  # tables, rounds, bets, void, resume, correct
    AUDITOR = "auditor"  # read only
    ADMIN = "admin"  # tokens
