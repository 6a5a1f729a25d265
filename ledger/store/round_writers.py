"""Which node's writer sequences a round, for nodes writing one PostgreSQL store.

A round's bets are placed by one writer at a time, so that nodes never
follow each other's bets (each one would read and check every event the
others wrote, and lose races on the round's version). A writer claims a
round with a session advisory lock of PostgreSQL's, held on a connection of
its own, and writes its address beside it in `ledger_round_writers`; a writer
that cannot take the lock reads the address there and forwards the round's
bets to it (`ledger.casino.round_routes`). A writer that dies (or loses its
connection) loses its locks with it, and the next writer to ask claims the
round.

Nothing here decides what is recorded. The store's optimistic concurrency
and the request index keep every bet placed once whoever places it, so a
row an attacker edited, deleted or pointed elsewhere costs speed, never
correctness; and a forwarded bet goes only to a peer that proves it holds
the ledger-node key (`ledger.casino.peer_link`). So the table is mutable,
like a read model, and outside the ledger's append-only tables.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from ledger.store.config import environment_for

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("ledger.rounds")
TABLE = "ledger_round_writers"
IDLE_SECONDS = 600.0  # a round nobody bet on for this long is let go (its lock, its row)


class RoundWriters:
    """This writer's claims on rounds, and the addresses of the others' claims."""

    def __init__(self, url: str, address: str) -> None:
        env = environment_for(url)
        self.schema = env["POSTGRES_SCHEMA"]
        self.address = address
        self._connect_args: dict[str, Any] = {
            "host": env["POSTGRES_HOST"],
            "port": env["POSTGRES_PORT"],
            "dbname": env["POSTGRES_DBNAME"],
            "user": env["POSTGRES_USER"],
            "password": env["POSTGRES_PASSWORD"] or None,
            "target_session_attrs": env["POSTGRES_TARGET_SESSION_ATTRS"],
            "connect_timeout": int(env["POSTGRES_CONNECT_TIMEOUT"]),
            "autocommit": True,
        }
        self._lock = threading.Lock()
        self._connection: psycopg.Connection[tuple[Any, ...]] | None = None
        self._held: dict[str, float] = {}  # round -> when a bet last asked for it

    def _table(self) -> str:
        return f'"{self.schema}".{TABLE}'

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        import psycopg

        if self._connection is not None and not self._connection.closed:
            return self._connection
        self._held.clear()  # a new session holds no lock
        connection = psycopg.connect(**self._connect_args)
        with connection.transaction():  # writers may start together
            connection.execute("SELECT pg_advisory_xact_lock(hashtext('casino-ledger-schema'))")
            connection.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table()} "
                "(round_id text PRIMARY KEY, address text NOT NULL)"
            )
        self._connection = connection
        return connection

    def _key(self, round_id: str) -> int:
        digest = hashlib.sha256(f"{self.schema}:round-writer:{round_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def writer_of(self, round_id: str) -> str | None:
        """None when this writer sequences `round_id` (it holds the round's lock,
        now claimed if nobody held it); else the address of the writer that
        does ("" while it has not written it yet). On a store that cannot be
        reached: None (the bets are placed here, and fail here if they must)."""
        import psycopg

        with self._lock:
            try:
                return self._writer_of(round_id)
            except psycopg.Error as exc:
                log.warning("which writer sequences round %s: %s (placing here)", round_id, exc)
                self.close()
                return None

    def _writer_of(self, round_id: str) -> str | None:
        connection = self._connect()
        now = time.monotonic()
        if round_id in self._held:
            connection.execute("SELECT 1")  # the session, and so the lock, still holds
            self._held[round_id] = now
            return None
        self._let_go_of_idle(connection, now)
        claimed = connection.execute(
            "SELECT pg_try_advisory_lock(%s)", (self._key(round_id),)
        ).fetchone()
        if claimed and claimed[0]:
            connection.execute(
                f"INSERT INTO {self._table()} (round_id, address) VALUES (%s, %s) "
                "ON CONFLICT (round_id) DO UPDATE SET address = EXCLUDED.address",
                (round_id, self.address),
            )
            self._held[round_id] = now
            return None
        row = connection.execute(
            f"SELECT address FROM {self._table()} WHERE round_id = %s", (round_id,)
        ).fetchone()
        return str(row[0]) if row else ""

    def _let_go_of_idle(self, connection: psycopg.Connection[tuple[Any, ...]], now: float) -> None:
        for round_id, used in list(self._held.items()):
            if now - used > IDLE_SECONDS:
                connection.execute(
                    f"DELETE FROM {self._table()} WHERE round_id = %s AND address = %s",
                    (round_id, self.address),
                )
                connection.execute("SELECT pg_advisory_unlock(%s)", (self._key(round_id),))
                del self._held[round_id]

    def held(self) -> set[str]:
        """The rounds this writer sequences now."""
        with self._lock:
            return set(self._held)

    def close(self) -> None:
        """Let go of every round (the session's locks end with it)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._held.clear()
