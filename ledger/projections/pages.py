"""Pages of the read models: tables, accounts and rounds, filtered, in a stable order.

Each list is read from its projection (no event of the log is read), in the
order the rows were opened, ties broken by id: `(opened_at, id)`, which never
changes for a row. A page starts after a key (`after`, the last row of the page
before) and asks for one row more than it returns, to know whether another
page follows. Keyset paging costs the same for the thousandth page as for the
first, where an offset would read every row before it.

Read only, like `ledger.projections.queries`: nothing here catches up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ledger.projections.queries import (
    ACCOUNT_COLUMNS,
    ROUND_COLUMNS,
    AccountTotals,
    RoundSummary,
    account_fields,
    round_summary,
)
from ledger.projections.sql import Sql
from ledger.store.application import LedgerApplication

Row = TypeVar("Row")
Key = tuple[str, str]  # (opened_at, id): where a page ends, and the next starts after


@dataclass(frozen=True)
class Page(Generic[Row]):
    rows: list[Row]
    last: Key | None  # the key of the last row, when another page follows; else None


@dataclass(frozen=True)
class TableSummary:
    table_id: str
    name: str
    game: str
    currency: str
    house_account: str
    opened_at: str


@dataclass(frozen=True)
class AccountSummary(AccountTotals):
    balance: int  # minor units


# The accounts' columns as a page reads them, beside their balance ("a" the accounts' table).
ACCOUNT_COLUMNS_OF_A = ", ".join(f"a.{c.strip()}" for c in ACCOUNT_COLUMNS.split(","))

Filters = Sequence[tuple[str, Any]]  # (SQL condition with one %s, its value)


def tables_page(
    app: LedgerApplication,
    *,
    after: Key | None,
    limit: int,
    game: str | None = None,
    currency: str | None = None,
) -> Page[TableSummary]:
    filters = _given(("game = %s", game), ("currency = %s", currency))
    query = "SELECT table_id, name, game, currency, house_account, opened_at FROM {proj_tables}"
    return _page(
        app,
        query,
        ("opened_at", "table_id"),
        filters,
        after,
        limit,
        lambda r: TableSummary(*(str(value) for value in r)),
    )


def accounts_page(
    app: LedgerApplication,
    *,
    after: Key | None,
    limit: int,
    kind: str | None = None,
    currency: str | None = None,
    status: str | None = None,
) -> Page[AccountSummary]:
    filters = _given(
        ("a.kind = %s", kind), ("a.currency = %s", currency), ("a.status = %s", status)
    )
    # A wallet's balance is its ledger account's (`ledger.domain.money.wallet`).
    query = (
        f"SELECT {ACCOUNT_COLUMNS_OF_A}, COALESCE(b.balance, 0) "
        "FROM {proj_accounts} a LEFT JOIN {proj_balances} b "
        "ON b.account = 'wallet:' || a.account_id AND b.currency = a.currency"
    )
    return _page(app, query, ("a.opened_at", "a.account_id"), filters, after, limit, _account)


def rounds_page(
    app: LedgerApplication,
    *,
    after: Key | None,
    limit: int,
    table_id: str | None = None,
    statuses: Sequence[str] = (),
    opened_since: str | None = None,
    opened_before: str | None = None,
) -> Page[RoundSummary]:
    """Rounds oldest first; `statuses`, when given, those in one of them;
    `opened_since` (inclusive) and `opened_before` (exclusive) are UTC times
    as the projection stores them (`ledger.projections.base.utc_text`)."""
    filters = [
        *_given(
            ("r.table_id = %s", table_id),
            ("r.opened_at >= %s", opened_since),
            ("r.opened_at < %s", opened_before),
        ),
        *(
            [(f"r.status IN ({', '.join(['%s'] * len(statuses))})", tuple(statuses))]
            if statuses
            else []
        ),
    ]
    query = (
        f"SELECT {ROUND_COLUMNS} FROM {{proj_rounds}} r "
        "LEFT JOIN {proj_tables} t ON t.table_id = r.table_id"
    )
    return _page(app, query, ("r.opened_at", "r.round_id"), filters, after, limit, round_summary)


def _given(*conditions: tuple[str, Any]) -> list[tuple[str, Any]]:
    return [(sql, value) for sql, value in conditions if value is not None]


def _page(
    app: LedgerApplication,
    select: str,
    key: tuple[str, str],
    filters: Filters,
    after: Key | None,
    limit: int,
    make: Callable[[tuple[Any, ...]], Row],
) -> Page[Row]:
    conditions = [sql for sql, _ in filters]
    params: list[Any] = []
    for _, value in filters:
        params.extend(value if isinstance(value, tuple) else (value,))
    at, row_id = key
    if after is not None:
        conditions.append(f"({at} > %s OR ({at} = %s AND {row_id} > %s))")
        params += [after[0], after[0], after[1]]
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    # The key's columns first, then the row's own.
    query = f"SELECT {at}, {row_id}, {select.removeprefix('SELECT ')}{where} "
    query += f"ORDER BY {at}, {row_id} LIMIT %s"
    with Sql(app.sealed_recorder).read() as tx:
        found = tx.rows(query, (*params, limit + 1))
    rows = [make(r[2:]) for r in found[:limit]]
    last = found[limit - 1][:2] if len(found) > limit else None
    return Page(rows, None if last is None else (str(last[0]), str(last[1])))


def _account(r: tuple[Any, ...]) -> AccountSummary:
    return AccountSummary(*account_fields(r), int(r[11]))  # the balance last
