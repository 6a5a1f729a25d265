"""The account heads map as the checkpointer keeps it, and its table.

Each checkpoint signs the root of the map (`ledger.crypto.heads_map`) at its
size. The checkpointer keeps the map in memory between batches and, in the
checkpoint's own transaction, brings `ledger_account_heads` up to it: a row
per account (its key, its leaf, its head's version, position and entry hash)
as of the newest checkpoint. The rows are an index, the attacker's to edit,
and the one table that is updated in place: the map they give must hash to
the root the newest checkpoint signed before anything is added to it, else it
is built again from the checked events, and a log whose events do not give
the signed root gets no checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any
from uuid import UUID

from ledger.crypto.heads_map import HeadsMap, account_key, head_leaf
from ledger.errors import VerificationError
from ledger.store.recorders import Cursor, Row

ACCOUNT_TOPIC = "ledger.domain.account:Account."
BATCH = 10_000


def is_account_event(topic: object) -> bool:
    return type(topic) is str and topic.startswith(ACCOUNT_TOPIC)


@dataclass(frozen=True)
class Head:
    """An account stream's last event: its version, log position and entry hash."""

    account: UUID
    version: int
    position: int
    entry_hash: bytes

    @cached_property
    def key(self) -> bytes:
        return account_key(self.account)

    @cached_property
    def leaf(self) -> bytes:
        return head_leaf(self.key, self.version, self.position, self.entry_hash)


def heads_map(heads: Iterable[Head]) -> HeadsMap:
    return HeadsMap.of({head.key: head.leaf for head in heads})


class AccountHeadsTable:
    """The `ledger_account_heads` rows of a store (SQLite or PostgreSQL)."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        sql = recorder.sql
        self._sqlite = recorder.dialect == "sqlite"
        self._upsert = sql(
            "INSERT INTO {heads} (account, tree_size, key, leaf, version, position, entry_hash) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (account) DO UPDATE SET "
            "tree_size = excluded.tree_size, key = excluded.key, leaf = excluded.leaf, "
            "version = excluded.version, position = excluded.position, "
            "entry_hash = excluded.entry_hash"
        )
        self._leaves = sql("SELECT key, leaf, tree_size FROM {heads}")
        self._one = sql("SELECT version, position, entry_hash FROM {heads} WHERE account = %s")
        self._rows = sql(
            "SELECT {id}, originator_id, originator_version, topic, "
            f"CASE WHEN substr(topic, 1, {len(ACCOUNT_TOPIC)}) = '{ACCOUNT_TOPIC}' "
            "THEN state END FROM {events} WHERE {id} > %s AND {id} <= %s ORDER BY {id} LIMIT %s"
        )

    def _column(self, account: UUID) -> object:
        return account.hex if self._sqlite else account

    def upsert(self, heads: Iterable[Head], tree_size: int, cursor: Cursor) -> None:
        """The heads as of the checkpoint of `tree_size`, in its transaction."""
        rows = [
            (self._column(h.account), tree_size, h.key, h.leaf, h.version, h.position, h.entry_hash)
            for h in heads
        ]
        if rows:
            cursor.executemany(self._upsert, rows)

    def leaves(self, size: int, cursor: Cursor) -> HeadsMap | None:
        """The map the stored rows give, when every row is of a checkpoint of at
        most `size` (None: a newer checkpoint's rows; unchecked: hold its root
        to the signed one)."""
        cursor.execute(self._leaves)
        pairs: dict[bytes, bytes] = {}
        for key, leaf, tree_size in cursor.fetchall():
            if type(tree_size) is not int or tree_size > size:
                return None
            pairs[bytes(key)] = bytes(leaf)
        return HeadsMap.of(pairs)

    def one(self, account: UUID, cursor: Cursor) -> Head | None:
        cursor.execute(self._one, (self._column(account),))
        row = cursor.fetchone()
        return None if row is None else _head(account, row[0], row[1], row[2])

    def heads_from_events(
        self, last_id: int, cursor: Cursor, entry_hash: Callable[[Row], bytes]
    ) -> dict[UUID, Head]:
        """Every account's head up to `last_id`, read from the events, each
        event's entry hash as `entry_hash` gives it (checked, or not)."""
        heads: dict[UUID, Head] = {}
        for position, row in self.account_rows(last_id, cursor):
            account = UUID(row[1])
            heads[account] = Head(account, row[2], position, entry_hash(row))
        return heads

    def account_rows(self, last_id: int, cursor: Cursor) -> Iterable[tuple[int, Row]]:
        """(log position, row) of each account event up to `last_id`, in log order;
        the other events are counted, their bytes not read."""
        position, after = 0, 0
        while True:
            cursor.execute(self._rows, (after, last_id, BATCH))
            rows = cursor.fetchall()
            for notification_id, stream, version, topic, state in rows:
                if state is not None and is_account_event(topic):
                    yield position, (notification_id, str(stream), version, topic, bytes(state))
                position += 1
            if len(rows) < BATCH:
                return
            after = rows[-1][0]


def _head(account: object, version: object, position: object, entry: object) -> Head:
    digest = bytes(entry) if isinstance(entry, bytes | bytearray | memoryview) else b""
    if type(version) is not int or type(position) is not int or len(digest) != 32:
        raise VerificationError(f"a malformed account heads row for {account}")
    try:
        return Head(UUID(str(account)), version, position, digest)
    except ValueError as exc:
        raise VerificationError(f"a malformed account heads row: {exc}") from exc


class HeadsTracker:
    """The checkpointer's map, kept in step with the stored tree's size."""

    def __init__(
        self,
        table: AccountHeadsTable,
        checked_entry_hash: Callable[[int, object, int, str, object], bytes],
    ) -> None:
        self.table = table
        self._checked = checked_entry_hash
        self._map: HeadsMap | None = None
        self._size = -1
        self.pending: dict[UUID, Head] = {}  # moved since the stored rows: to store

    def forget(self) -> None:
        """After a failed or raced batch: read it all again next time."""
        self._map, self._size, self.pending = None, -1, {}

    def at(self, size: int, last_id: int, signed: bytes | None, cursor: Cursor) -> None:
        """Bring the map to the stored tree of `size` (whose newest checkpoint
        signed the root `signed`, or None: signed before the map existed)."""
        if self._map is not None and self._size == size:
            return
        self.forget()
        stored = self.table.leaves(size, cursor)
        if signed is not None and stored is not None and stored.root() == signed:
            self._map, self._size = stored, size
            return
        heads = self.table.heads_from_events(last_id, cursor, lambda row: self._checked(*row))
        built = heads_map(heads.values())
        if signed is not None and built.root() != signed:
            raise VerificationError(
                f"the account heads the checkpoint of size {size} signed do not match "
                "the log's events: nothing was checkpointed past it"
            )
        self._map, self._size, self.pending = built, size, heads

    def advance(self, heads: dict[UUID, Head]) -> bytes:
        """The root once `heads` (the batch's last event of each account moved) are in."""
        assert self._map is not None, "at() first"
        for head in heads.values():
            self._map.set(head.key, head.leaf)
        self.pending.update(heads)
        return self._map.root()

    def stored(self, size: int) -> None:
        self._size, self.pending = size, {}
