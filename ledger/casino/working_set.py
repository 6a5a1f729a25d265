"""The aggregates the node's commands work on, kept current as events are applied.

A command used to load what it touched from the repository, which hands out a
deep copy of its cached aggregate: a round with n bets cost O(n) to copy for
every bet placed on it. The working set keeps one live copy of each aggregate
a command touched, owned by the command runner (one batch at a time), and
commands change it in place: a bet costs the same whatever the round holds.

It never trusts itself over the store. Before each batch it catches up with
the log: one query reads the events committed since the last notification id
it reflects, and each one that extends a live aggregate (another process or
node wrote it) is checked like every read (envelope, signature, chain) and
applied. An aggregate a failed command may have
changed half-way, or any aggregate of a batch that did not commit, is dropped
and read again from the store when next wanted.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from uuid import UUID

from eventsourcing.domain import Aggregate

from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.recorders import Cursor
from ledger.store.sealing import SealedEventStore

# Aggregates kept (least recently used dropped first): a busy table's rounds
# and the wallets betting on them.
MAX_LIVE = 20_000
# More events than this since the last batch (another node is busy): start
# afresh rather than catch up event by event.
CATCH_UP_LIMIT = 5_000


class WorkingSet:
    def __init__(self, app: LedgerApplication, maxsize: int = MAX_LIVE) -> None:
        self._app = app
        self._maxsize = maxsize
        self._live: OrderedDict[UUID, Aggregate] = OrderedDict()
        # The notification id the live aggregates reflect the log up to (None:
        # nothing is live yet, so nothing before the first catch-up matters).
        self._seen: int | None = None

    @property
    def tables(self) -> MerkleLogTables:
        return self._app.tables

    def __contains__(self, aggregate_id: UUID) -> bool:
        return aggregate_id in self._live

    def __iter__(self) -> Iterator[Aggregate]:
        return iter(list(self._live.values()))

    def get(self, aggregate_id: UUID) -> Aggregate:
        """The live aggregate (read from the store on first use); raises
        `AggregateNotFoundError` when the store has no such stream."""
        found = self._live.get(aggregate_id)
        if found is not None:
            self._live.move_to_end(aggregate_id)
            return found
        loaded: Aggregate = self._app.repository.get(aggregate_id)  # a copy of our own
        self.keep(loaded)
        return loaded

    def keep(self, aggregate: Aggregate) -> None:
        """Make `aggregate` (just created or loaded) the live one."""
        self._live[aggregate.id] = aggregate
        self._live.move_to_end(aggregate.id)
        while len(self._live) > self._maxsize:
            self._live.popitem(last=False)

    def drop(self, aggregate_id: UUID) -> None:
        self._live.pop(aggregate_id, None)

    def clear(self) -> None:
        self._live.clear()
        self._seen = None

    def catch_up(self, cursor: Cursor | None = None) -> None:
        """Apply what other writers committed to the live aggregates since the
        last batch, read in one query and checked as every read is (this node's
        own batches are skipped by version)."""
        if self._seen is None:
            self._live.clear()
            self._seen = self._app.tables.highest_id(cursor)
            return
        rows = self._app.tables.rows_after(self._seen, CATCH_UP_LIMIT, cursor)
        if len(rows) == CATCH_UP_LIMIT:
            self.clear()
            self.catch_up(cursor)
            return
        store = self._app.events
        assert isinstance(store, SealedEventStore)
        for _, originator_id, version, topic, state in rows:
            key = UUID(stream_of(originator_id))
            live = self._live.get(key)
            if live is None or version <= live.version:
                continue  # not live here, or committed by this node's own batch
            try:
                event = store.follow(key, version, topic, bytes(state))
                if event is None or version != live.version + 1:
                    raise LookupError("read the stream afresh")
                self._live[key] = event.mutate(live)  # type: ignore[attr-defined]
            except Exception:
                self.drop(key)  # (a bad row then fails that read, saying what is wrong)
        if rows:
            self._seen = rows[-1][0]

    def committed(self, notification_ids: list[int]) -> None:
        """A batch of ours committed with these ids: when nothing else came in
        between, the set reflects the log up to the last of them."""
        if self._seen is not None and notification_ids and min(notification_ids) == self._seen + 1:
            self._seen = max(notification_ids)

    @staticmethod
    def pending(aggregate: Aggregate) -> bool:
        """Whether `aggregate` has events triggered but not yet collected."""
        return bool(aggregate.pending_events)
