"""`ledger verify --projections`: the read models must say what the events say.

Every projection (balances, round summaries, house results) is rebuilt in a
private in-memory database from the events alone, up to the position its
tracking row says it reached, with the very code that maintains it, and the
stored proj_ rows are compared with that, row by row and column by column.
Every difference is a `VerificationError` naming the table, the row's key and
the column (the first few, and how many in all). Projections behind the log
are compared at their own position, and the report says how far behind they
are; a position past the end of the log is itself a difference.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from eventsourcing.domain import DomainEventProtocol
from eventsourcing.utils import get_topic

from ledger.errors import CannotCheckError, VerificationError
from ledger.projections.base import Projection
from ledger.projections.runner import ProjectionRunner
from ledger.projections.sql import MemorySql, Tx
from ledger.store.application import LedgerApplication

SHOWN = 5  # differences named in the message; the rest are counted
READ_BATCH = 1000


@dataclass(frozen=True)
class ProjectionsReport:
    positions: dict[str, int]
    log_end: int
    tables: int
    rows: int

    def summary(self) -> str:
        lines = [
            f"OK: projections match the events: {self.rows} rows in {self.tables} tables "
            f"({', '.join(sorted(self.positions))}) rebuilt from the log and compared"
        ]
        behind = {name: p for name, p in self.positions.items() if p < self.log_end}
        if behind:
            at = min(behind.values())
            lines.append(
                f"   they are behind the log ({self.log_end - at} newest events not applied "
                f"yet): compared at their own position (notification {at}); run `ledger "
                "projections update` to bring them up to date"
            )
        return "\n".join(lines)


def verify_projections(
    app: LedgerApplication, projections: Sequence[Projection] | None = None
) -> ProjectionsReport:
    runner = ProjectionRunner(app, projections)
    if not runner.is_built():
        raise CannotCheckError(
            "the projections are not built in this store, so there is nothing to compare: "
            "run `ledger projections update`"
        )
    stale = runner.built_before()
    if stale:
        raise CannotCheckError(
            f"the read models {', '.join(stale)} were built by an earlier release, with other "
            "columns: run `ledger projections update`, which rebuilds them from the events"
        )
    status = runner.status()
    positions = dict(status.positions)
    for name, position in positions.items():
        if position > status.log_end:
            raise VerificationError(
                f"projection {name} claims to have applied the log up to notification "
                f"{position}, past its end ({status.log_end})",
                where="proj_tracking",
            )
    memory = MemorySql()
    try:
        _rebuild(app, runner.projections, positions, memory)
        differences, rows, tables = _compare(runner, memory)
    finally:
        memory.close()
    if differences:
        shown = "; ".join(differences[:SHOWN])
        more = f"; and {len(differences) - SHOWN} more" if len(differences) > SHOWN else ""
        raise VerificationError(
            f"{len(differences)} differences between the read models and the events: "
            f"{shown}{more} (run `ledger projections rebuild` to repair them)"
        )
    return ProjectionsReport(positions, status.log_end, tables, rows)


def _rebuild(
    app: LedgerApplication,
    projections: Sequence[Projection],
    positions: dict[str, int],
    memory: MemorySql,
) -> None:
    handlers: dict[str, list[tuple[Projection, Any]]] = {}
    for projection in projections:
        for event_class, handler in projection.handlers().items():
            handlers.setdefault(get_topic(event_class), []).append((projection, handler))
    with memory.write() as tx:
        for projection in projections:
            for table, columns in projection.tables.items():
                tx.execute(f"CREATE TABLE {{{table}}} ({columns})")
        for notification_id, event in _events(app, set(handlers), max(positions.values())):
            for projection, handler in handlers[get_topic(type(event))]:
                if notification_id <= positions[projection.name]:
                    handler(event, tx)


def _events(
    app: LedgerApplication, topics: set[str], until: int
) -> Iterator[tuple[int, DomainEventProtocol[Any]]]:
    """Every event a projection reads, decoded (and so its seal checked), up to `until`."""
    after = 0
    while after < until:
        batch = app.recorder.select_notifications(
            after, READ_BATCH, stop=until, inclusive_of_start=False
        )
        if not batch:
            return
        for notification in batch:
            if notification.topic in topics:
                yield notification.id, app.mapper.to_domain_event(notification)
        after = batch[-1].id


def _compare(runner: ProjectionRunner, memory: MemorySql) -> tuple[list[str], int, int]:
    differences: list[str] = []
    rows = tables = 0
    for projection in runner.projections:
        for table in projection.table_names():
            names, key = memory.columns(table)
            listed = ", ".join(names)
            query = f"SELECT {listed} FROM {{{table}}}"
            with memory.write() as tx:
                derived = _by_key(tx, query, names, key)
            with runner.sql.read() as stored_tx:
                stored = _by_key(stored_tx, query, names, key)
            differences += _differences(table, names, derived, stored)
            rows += len(stored)
            tables += 1
    return differences, rows, tables


def _by_key(
    tx: Tx, query: str, names: list[str], key: list[str]
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    at = [names.index(column) for column in key]
    return {tuple(row[i] for i in at): tuple(row) for row in tx.rows(query)}


def _differences(
    table: str,
    names: list[str],
    derived: dict[tuple[Any, ...], tuple[Any, ...]],
    stored: dict[tuple[Any, ...], tuple[Any, ...]],
) -> list[str]:
    found = []
    for key in sorted(derived.keys() | stored.keys(), key=repr):
        label = f"{table} {'/'.join(str(part) for part in key)}"
        if key not in stored:
            found.append(f"{label}: missing (the events make it)")
        elif key not in derived:
            found.append(f"{label}: stored, but no event makes it")
        else:
            for column, want, have in zip(names, derived[key], stored[key], strict=True):
                if _value(want) != _value(have):
                    found.append(f"{label}: {column} is {have!r}, the events say {want!r}")
    return found


def _value(value: Any) -> Any:
    """One representation on both stores (PostgreSQL's BIGINT and SQLite's INTEGER alike)."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else value
