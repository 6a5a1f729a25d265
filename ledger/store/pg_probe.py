"""A PostgreSQL store's first connection, made directly: what is wrong with
the store is named at once, in one line (a pool would retry until its timeout
and say less), and the connection goes on to serve as the pool's first.

Opening a store used to make two server processes: the probe's, closed at
once, then the pool's own. The pool now starts with the probe's connection
(`HandOver`), so a command on PostgreSQL forks one backend, not two.
Imported only for a PostgreSQL store (it imports psycopg).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
import psycopg.sql

from ledger.errors import ConfigError, StoreUnavailableError
from ledger.store.drivers import first_line


def first_connection(
    settings: Mapping[str, str],
    described: str,
    *,
    create: bool,
    make_schema: bool,
    connection_class: Any = psycopg.Connection,
    kwargs: Mapping[str, Any] | None = None,
) -> Any:
    """A checked connection to the store `settings` name (ledger.store.config's
    environment): its schema there (made when `make_schema`, refused when
    missing unless `create`). `kwargs` are the pool's connection arguments,
    when the connection is to become the pool's; the caller closes it."""
    schema = settings.get("POSTGRES_SCHEMA") or "public"
    given = {**(kwargs if kwargs is not None else _arguments(settings))}
    given["target_session_attrs"] = settings.get("POSTGRES_TARGET_SESSION_ATTRS") or "any"
    try:
        connection = connection_class.connect(
            **given,
            connect_timeout=int(settings.get("POSTGRES_CONNECT_TIMEOUT") or 5),
            autocommit=True,
        )
    except psycopg.Error as exc:
        raise StoreUnavailableError(f"cannot open store {described}: {first_line(exc)}") from exc
    try:
        found = connection.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
        ).fetchone()
        if found is None and not create:
            raise ConfigError(
                f"schema {schema!r} does not exist in store {described}: "
                "a writer (`ledger simulate`) creates it, or check the URL"
            )
        if found is None and make_schema:
            # The name passed config.py's identifier check; quoted all the same.
            connection.execute(
                psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    psycopg.sql.Identifier(schema)
                )
            )
    except psycopg.Error as exc:
        connection.close()
        raise StoreUnavailableError(f"cannot open store {described}: {first_line(exc)}") from exc
    except BaseException:
        connection.close()
        raise
    return connection


def _arguments(settings: Mapping[str, str]) -> dict[str, Any]:
    return {
        "host": settings["POSTGRES_HOST"],
        "port": settings["POSTGRES_PORT"],
        "user": settings["POSTGRES_USER"],
        "password": settings["POSTGRES_PASSWORD"] or None,
        "dbname": settings["POSTGRES_DBNAME"],
    }


class HandOver:
    """A pool's connection class for as long as it holds a connection made
    before it: psycopg_pool makes its connections with
    `connection_class.connect(conninfo, **kwargs)`; the first call gets the
    held connection, and every call after it a new one of the usual class."""

    def __init__(self, held: Any, usual: Any) -> None:
        self._held: Any = held
        self._usual = usual

    def connect(self, conninfo: str = "", **kwargs: Any) -> Any:
        held, self._held = self._held, None
        if held is not None and not held.closed:
            return held
        return self._usual.connect(conninfo, **kwargs)

    def close_unused(self) -> None:
        """Close the held connection if the pool never took it (it failed to open)."""
        held, self._held = self._held, None
        if held is not None:
            held.close()

    def __getattr__(self, name: str) -> Any:  # anything else the pool asks of the class
        return getattr(self._usual, name)
