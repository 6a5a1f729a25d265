"""eventsourcing's PostgreSQL factory, with libpq's `target_session_attrs`.

eventsourcing hands the pool only the host, port, user, password and database.
A store URL naming a primary and its standbys needs the target too, so that a
connection (a new one after a failover among them) goes only to a server that
takes writes.

The pool is opened here, its first connection made before anything asks for
one: a request made while the pool was still making it would have it make a
second (ledger.store.config keeps one open)."""

from __future__ import annotations

from typing import Any

from eventsourcing.postgres import PostgresFactory

TARGET = "POSTGRES_TARGET_SESSION_ATTRS"


class LedgerPostgresFactory(PostgresFactory):
    def __init__(self, env: Any) -> None:
        super().__init__(env)
        target = self.env.get(TARGET)
        if target:
            kwargs = self.datastore.pool.kwargs
            assert isinstance(kwargs, dict)
            kwargs["target_session_attrs"] = target
        timeout = float(self.env.get("POSTGRES_CONNECT_TIMEOUT") or 5)
        self.datastore.pool.open(wait=True, timeout=timeout)
