"""eventsourcing's PostgreSQL factory, with libpq's `target_session_attrs`.

eventsourcing hands the pool only the host, port, user, password and database.
A store URL naming a primary and its standbys needs the target too, so that a
connection (a new one after a failover among them) goes only to a server that
takes writes.

The pool is opened here, its first connection made before anything asks for
one: a request made while the pool was still making it would have it make a
second (ledger.store.config keeps one open). That first connection is the
store's probe (ledger.store.pg_probe): what is wrong with the store is named
at once, and opening it forks one server process, not two."""

from __future__ import annotations

from typing import Any

from eventsourcing.postgres import PostgresFactory

from ledger.store.pg_probe import HandOver, first_connection

TARGET = "POSTGRES_TARGET_SESSION_ATTRS"
DESCRIBED = "LEDGER_STORE_DESCRIBED"  # the store URL without its password, for messages


class LedgerPostgresFactory(PostgresFactory):
    def __init__(self, env: Any) -> None:
        super().__init__(env)
        pool = self.datastore.pool
        kwargs = pool.kwargs
        assert isinstance(kwargs, dict)
        target = self.env.get(TARGET)
        if target:
            kwargs["target_session_attrs"] = target
        create = self.env.get("CREATE_TABLE") == "y"
        first = first_connection(
            {name: self.env.get(name) or "" for name in _PROBED},
            self.env.get(DESCRIBED) or "a PostgreSQL store",
            create=create,
            make_schema=create,
            connection_class=pool.connection_class,
            kwargs=kwargs,
        )
        usual = pool.connection_class
        handover = HandOver(first, usual)
        pool.connection_class = handover  # type: ignore[assignment]
        timeout = float(self.env.get("POSTGRES_CONNECT_TIMEOUT") or 5)
        try:
            pool.open(wait=True, timeout=timeout)
        finally:
            pool.connection_class = usual
            handover.close_unused()


_PROBED = ("POSTGRES_SCHEMA", "POSTGRES_CONNECT_TIMEOUT", "POSTGRES_TARGET_SESSION_ATTRS")
