"""Reading the projections: typed rows for the CLI, an API, and tests.

Read only: nothing here catches up. The rows are as current as the last
`catch_up`; `ProjectionRunner.status()` says how far behind the log they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.domain.names import PersonalValue, personal_from_text
from ledger.projections.rounds import FINAL_STATUSES
from ledger.projections.sql import Sql
from ledger.store.application import LedgerApplication


@dataclass(frozen=True)
class Balance:
    account: str  # a ledger account name: wallet:<id>, in-play:<round>, cashier:<CUR>
    currency: str
    balance: int  # minor units
    postings: int


@dataclass(frozen=True)
class AccountTotals:
    account_id: str
    kind: str
    owner: PersonalValue  # sealed, unless recorded in clear before sealing (docs/privacy.md)
    currency: str
    status: str
    deposits: int
    withdrawals: int
    staked: int  # bets placed, less bets withdrawn
    returned: int  # paid back by settlements and voids
    opened_at: str
    closed_at: str | None


@dataclass(frozen=True)
class RoundSummary:
    round_id: str
    table_id: str
    table_name: str | None
    game: str
    game_version: str
    currency: str
    dealer: PersonalValue
    status: str
    bets: int
    bets_withdrawn: int
    stakes: int
    returned: int
    opened_at: str
    betting_closed_at: str | None
    decided_at: str | None
    ended_at: str | None
    last_event_at: str


@dataclass(frozen=True)
class HouseResult:
    table_id: str
    day: str  # YYYY-MM-DD, UTC
    currency: str
    rounds: int
    bets: int
    stakes: int
    returned: int
    result: int  # stakes - returned: what the house won (negative: lost)


def balances(app: LedgerApplication, account: str | None = None) -> list[Balance]:
    """Every ledger account's balance per currency (or one account's), by name."""
    sql = Sql(app.sealed_recorder)
    query = "SELECT account, currency, balance, postings FROM {proj_balances}"
    with sql.read() as tx:
        if account is None:
            rows = tx.rows(query + " ORDER BY account, currency")
        else:
            rows = tx.rows(query + " WHERE account = %s ORDER BY currency", (account,))
    return [Balance(str(a), str(c), int(b), int(n)) for a, c, b, n in rows]


def currency_totals(app: LedgerApplication) -> dict[str, int]:
    """Per currency, the sum of every account's balance: zero if the postings balance."""
    sql = Sql(app.sealed_recorder)
    with sql.read() as tx:
        rows = tx.rows(
            "SELECT currency, SUM(balance) FROM {proj_balances} GROUP BY currency ORDER BY currency"
        )
    return {str(currency): int(total) for currency, total in rows}


# An account's row in its read model, as `AccountTotals` holds it (in this order).
ACCOUNT_COLUMNS = (
    "account_id, kind, owner, currency, status, deposits, withdrawals, staked, returned, "
    "opened_at, closed_at"
)


AccountFields = tuple[str, str, PersonalValue, str, str, int, int, int, int, str, str | None]


def account_fields(r: Sequence[Any]) -> AccountFields:
    """`AccountTotals`' fields from a row of `ACCOUNT_COLUMNS`."""
    return (
        str(r[0]),
        str(r[1]),
        personal_from_text(str(r[2])),
        str(r[3]),
        str(r[4]),
        int(r[5]),
        int(r[6]),
        int(r[7]),
        int(r[8]),
        str(r[9]),
        _text(r[10]),
    )


def accounts(app: LedgerApplication, account_id: str | None = None) -> list[AccountTotals]:
    sql = Sql(app.sealed_recorder)
    query = f"SELECT {ACCOUNT_COLUMNS} FROM {{proj_accounts}}"
    with sql.read() as tx:
        if account_id is None:
            rows = tx.rows(query + " ORDER BY opened_at, account_id")
        else:
            rows = tx.rows(query + " WHERE account_id = %s", (account_id,))
    return [AccountTotals(*account_fields(r)) for r in rows]


# A round summary's columns, `r` the round's row and `t` its table's (`round_summary`).
ROUND_COLUMNS = (
    "r.round_id, r.table_id, t.name, r.game, r.game_version, r.currency, "
    "r.dealer, r.status, r.bets, r.bets_withdrawn, r.stakes, r.returned, r.opened_at, "
    "r.betting_closed_at, r.decided_at, r.ended_at, r.last_event_at"
)


def rounds(app: LedgerApplication, *, open_only: bool = False) -> list[RoundSummary]:
    """Every round, oldest first; with `open_only`, those neither settled nor voided."""
    sql = Sql(app.sealed_recorder)
    query = (
        f"SELECT {ROUND_COLUMNS} "
        "FROM {proj_rounds} r LEFT JOIN {proj_tables} t ON t.table_id = r.table_id"
    )
    params: tuple[str, ...] = ()
    if open_only:
        query += " WHERE r.status NOT IN (%s, %s)"
        params = FINAL_STATUSES
    with sql.read() as tx:
        rows = tx.rows(query + " ORDER BY r.opened_at, r.round_id", params)
    return [round_summary(r) for r in rows]


def round_summary(r: tuple[Any, ...]) -> RoundSummary:
    """A row of `ROUND_COLUMNS`."""
    return RoundSummary(
        str(r[0]),
        str(r[1]),
        _text(r[2]),
        str(r[3]),
        str(r[4]),
        str(r[5]),
        personal_from_text(str(r[6])),
        str(r[7]),
        int(r[8]),
        int(r[9]),
        int(r[10]),
        int(r[11]),
        str(r[12]),
        _text(r[13]),
        _text(r[14]),
        _text(r[15]),
        str(r[16]),
    )


def tables(app: LedgerApplication) -> list[tuple[str, str]]:
    """(table id, name) of every table, oldest first (a hint: the table's own
    events say what it is)."""
    sql = Sql(app.sealed_recorder)
    with sql.read() as tx:
        rows = tx.rows("SELECT table_id, name FROM {proj_tables} ORDER BY opened_at, table_id", ())
    return [(str(r[0]), str(r[1])) for r in rows]


def house_results(app: LedgerApplication) -> list[HouseResult]:
    sql = Sql(app.sealed_recorder)
    with sql.read() as tx:
        rows = tx.rows(
            "SELECT table_id, day, currency, rounds, bets, stakes, returned, result "
            "FROM {proj_house_results} ORDER BY day, table_id, currency"
        )
    return [
        HouseResult(str(t), str(d), str(c), int(n), int(b), int(s), int(ret), int(res))
        for t, d, c, n, b, s, ret, res in rows
    ]


def _text(value: object) -> str | None:
    return None if value is None else str(value)
