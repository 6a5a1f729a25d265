"""Following the log into the projections, exactly once, on SQLite and PostgreSQL.

eventsourcing's `ProjectionRunner` needs `subscribe()`, which its SQLite
recorder lacks; this runner polls the notification log instead, so the same
code runs on both stores:

1. read each projection's position (the last notification id it processed)
   from `proj_tracking`;
2. read the next batch of notifications after the lowest position, and
   decode (and so verify) every one whose topic some projection handles;
3. in ONE transaction of the same database, move each projection's position
   with a compare-and-set (``UPDATE ... WHERE last_id = <the position read>``)
   and apply the batch's events to its tables.

The rows and the position are committed together or not at all: a process
that dies mid-batch leaves both as they were, and the next run redoes exactly
that batch. Two runners racing on one store cannot both apply a batch: the
compare-and-set of the second finds the position moved (PostgreSQL blocks it
on the first one's row lock; SQLite serialises writers), its transaction is
rolled back, and it reads the positions again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Notification
from eventsourcing.utils import get_topic

from ledger.errors import ConfigError
from ledger.projections.balances import Balances
from ledger.projections.base import Handler, Projection, ProjectionError
from ledger.projections.house import HouseResults
from ledger.projections.rounds import Rounds
from ledger.projections.sql import TRACKING, Sql, Tx
from ledger.store.application import LedgerApplication
from ledger.store.outage import follow_through_outages

DEFAULT_BATCH_SIZE = 500
Progress = Callable[[int], None]


def default_projections() -> list[Projection]:
    return [Balances(), Rounds(), HouseResults()]


class _Overtaken(Exception):
    """Another runner moved a position first: this batch is not ours to apply."""


@dataclass(frozen=True)
class Status:
    """How far the projections are: each one's position, and the log's end."""

    positions: Mapping[str, int]
    log_end: int

    @property
    def behind(self) -> bool:
        return any(position < self.log_end for position in self.positions.values())


class ProjectionRunner:
    """Keeps a set of projections up to date with one application's log."""

    def __init__(
        self,
        app: LedgerApplication,
        projections: Sequence[Projection] | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"a batch holds at least one event, not {batch_size}")
        chosen = list(default_projections() if projections is None else projections)
        names = [p.name for p in chosen]
        if len(set(names)) != len(names):
            raise ConfigError(f"two projections share a name: {names}")
        tables = [table for p in chosen for table in p.table_names()]
        if len(set(tables)) != len(tables) or TRACKING in tables:
            raise ConfigError(f"two projections share a table: {tables}")
        # Sorted by name: racing runners take the tracking rows' locks in one order.
        self.projections = sorted(chosen, key=lambda p: p.name)
        self.app = app
        self.batch_size = batch_size
        self.sql = Sql(app.sealed_recorder)
        self._handlers: dict[type[Any], list[tuple[str, Handler]]] = {}
        for projection in self.projections:
            for event_class, handler in projection.handlers().items():
                self._handlers.setdefault(event_class, []).append((projection.name, handler))
        self._topics = frozenset(get_topic(cls) for cls in self._handlers)
        self._ready = False

    # Tables.
    def setup(self) -> None:
        """Create the tables and tracking rows that are missing (never touches
        rows), once the tables of a projection an earlier release built with
        other columns (`built_before`) are dropped and its position moved back
        to the log's start: the catch-up that follows rebuilds it from the
        events, as a read model always can be: how a column is renamed (as
        `proj_rounds.game` was) with no schema version to keep."""
        with self.sql.write() as tx:
            if self.sql.dialect != "sqlite":
                # CREATE TABLE IF NOT EXISTS races with itself on PostgreSQL.
                tx.execute("SELECT pg_advisory_xact_lock(hashtext('casino-ledger-projections'))")
            tx.execute(
                "CREATE TABLE IF NOT EXISTS {proj_tracking} "
                "(projection TEXT PRIMARY KEY, last_id BIGINT NOT NULL)"
            )
            for projection in self.projections:
                if self._built_before(tx, projection):
                    for table in projection.table_names():
                        tx.execute(f"DROP TABLE IF EXISTS {{{table}}}")
                    tx.execute(
                        "UPDATE {proj_tracking} SET last_id = 0 WHERE projection = %s",
                        (projection.name,),
                    )
                for table, columns in projection.tables.items():
                    tx.execute(f"CREATE TABLE IF NOT EXISTS {{{table}}} ({columns})")
                tx.execute(
                    "INSERT INTO {proj_tracking} (projection, last_id) VALUES (%s, 0) "
                    "ON CONFLICT (projection) DO NOTHING",
                    (projection.name,),
                )
        self._ready = True

    def drop(self) -> None:
        """Drop these projections' tables and forget their positions (one transaction)."""
        existing = self.sql.existing_tables()
        with self.sql.write() as tx:
            for projection in self.projections:
                for table in projection.table_names():
                    tx.execute(f"DROP TABLE IF EXISTS {{{table}}}")
                if TRACKING in existing:
                    tx.execute(
                        "DELETE FROM {proj_tracking} WHERE projection = %s", (projection.name,)
                    )
        self._ready = False

    def _built_before(self, tx: Tx, projection: Projection) -> bool:
        """Whether a table of `projection` exists with other columns than it declares."""
        for table in projection.table_names():
            found = self.sql.columns(tx, table)
            if found and found != projection.columns(table):
                return True
        return False

    def built_before(self) -> list[str]:
        """The projections an earlier release built with other columns (`setup`
        rebuilds them)."""
        with self.sql.read() as tx:
            return [p.name for p in self.projections if self._built_before(tx, p)]

    def is_built(self) -> bool:
        """Whether every table of these projections exists (not whether it is current)."""
        wanted = {TRACKING, *(t for p in self.projections for t in p.table_names())}
        return wanted <= self.sql.existing_tables()

    def require_built(self) -> None:
        if not self.is_built():
            raise ProjectionError(
                "the projections are not built in this store: run `ledger projections update`"
            )

    # Positions.
    def positions(self) -> dict[str, int]:
        with self.sql.read() as tx:
            rows = tx.rows("SELECT projection, last_id FROM {proj_tracking}")
        stored = {str(name): int(last_id) for name, last_id in rows}
        return {p.name: stored.get(p.name, 0) for p in self.projections}

    def status(self) -> Status:
        return Status(self.positions(), int(self.app.recorder.max_notification_id() or 0))

    # Following the log.
    def catch_up(self, progress: Progress | None = None) -> int:
        """Apply every notification recorded so far; return how many were read."""
        if not self._ready:
            self.setup()
        done = 0
        while True:
            positions = self.positions()
            start = min(positions.values(), default=0)
            batch = self.app.recorder.select_notifications(
                start, self.batch_size, inclusive_of_start=False
            )
            if not batch:
                return done
            try:
                self._apply(batch, positions)
            except _Overtaken:
                continue  # another runner applied it: read the positions again
            done += len(batch)
            if progress is not None:
                progress(len(batch))

    def rebuild(self, progress: Progress | None = None) -> int:
        """Drop the tables and positions, then apply the whole log again."""
        self.drop()
        self.setup()
        return self.catch_up(progress)

    def follow(
        self,
        poll_seconds: float = 0.5,
        stop: Callable[[], bool] = lambda: False,
        progress: Progress | None = None,
    ) -> None:
        """Keep catching up until `stop()` says otherwise (a separate process's
        loop), through store outages: each batch commits with its positions, so
        the next one after an outage starts where the store says."""
        follow_through_outages(
            lambda: self.catch_up(progress) > 0, stop, poll_seconds, "projections"
        )

    def _apply(self, batch: Sequence[Notification], positions: Mapping[str, int]) -> None:
        # Decode (verify every envelope) before the transaction: no lock held for it.
        events = [(n.id, self._decode(n)) for n in batch]
        last = batch[-1].id
        with self.sql.write() as tx:
            # The compare-and-set comes first: it is the transaction's first
            # write, so SQLite takes its write lock here, before any read.
            for projection in self.projections:
                old = positions[projection.name]
                if old >= last:
                    continue
                # Reading the position back would not do: a racer that applied
                # this very batch left it where this one would put it.
                moved = tx.changed(
                    "UPDATE {proj_tracking} SET last_id = %s "
                    "WHERE projection = %s AND last_id = %s",
                    (last, projection.name, old),
                )
                if moved != 1:
                    raise _Overtaken
            for notification_id, event in events:
                if event is None:
                    continue
                for name, handler in self._handlers.get(type(event), ()):
                    if notification_id > positions[name]:
                        handler(event, tx)

    def _decode(self, notification: Notification) -> DomainEventProtocol[Any] | None:
        if notification.topic not in self._topics:
            return None
        return self.app.mapper.to_domain_event(notification)

    # Reading.
    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table of these projections, in a stable order."""
        contents: dict[str, list[tuple[Any, ...]]] = {}
        with self.sql.read() as tx:
            for projection in self.projections:
                for table in projection.table_names():
                    rows = tx.rows(f"SELECT * FROM {{{table}}}")
                    contents[table] = sorted(rows, key=repr)
        return contents


def catch_up(
    app: LedgerApplication,
    projections: Sequence[Projection] | None = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
) -> int:
    """Bring the projections up to the end of the log; return the notifications read."""
    return ProjectionRunner(app, projections, batch_size=batch_size).catch_up(progress)


def rebuild(
    app: LedgerApplication,
    projections: Sequence[Projection] | None = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
) -> int:
    """Drop the projections and build them again from the first event."""
    return ProjectionRunner(app, projections, batch_size=batch_size).rebuild(progress)


def follow(
    app: LedgerApplication,
    projections: Sequence[Projection] | None = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    poll_seconds: float = 0.5,
    stop: Callable[[], bool] = lambda: False,
    progress: Progress | None = None,
) -> None:
    """Poll the log and keep the projections current until `stop()`."""
    runner = ProjectionRunner(app, projections, batch_size=batch_size)
    runner.follow(poll_seconds, stop, progress)
