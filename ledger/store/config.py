"""One setting picks the store: a URL, from `--store` or `LEDGER_STORE`.

``sqlite:///path/to/file.db`` (the default: ``ledger.db`` in the working
directory) or ``postgresql://user[:password]@host[:port][,host[:port]...]/dbname``
with the options ``?schema=name`` (letters, digits and ``_``; writers create it,
readers need it) and ``target_session_attrs=...`` (libpq's). Several hosts are
a primary and its standbys: libpq tries them in order and keeps the first that
matches the target, ``read-write`` unless another is given, so a node reaches
whichever server is the primary now (after a failover, the promoted standby).
It becomes eventsourcing's own environment-style settings.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from ledger.errors import ConfigError

STORE_ENV = "LEDGER_STORE"
DEFAULT_STORE = "sqlite:///ledger.db"
_RECORDERS = "ledger.store.recorders"
_PG_RECORDER = "ledger.store.pg_recorder"  # imports psycopg: named only for PostgreSQL
# A plain PostgreSQL identifier: it is spliced into DDL (triggers, functions).
_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# libpq's values of target_session_attrs (PostgreSQL 14 and later).
TARGETS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\[\]:,/]+)(?::(\d{1,5}))?")
FACTORY = "ledger.store.pg_factory:LedgerPostgresFactory"


def store_url(given: str | None = None) -> str:
    return given or os.environ.get(STORE_ENV) or DEFAULT_STORE


def describe(url: str) -> str:
    """The URL without its password, for messages and summaries."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return parts._replace(netloc=netloc).geturl()
    return url


def environment_for(url: str, *, create: bool = True) -> dict[str, str]:
    """eventsourcing settings for a store URL; a clear ConfigError if it is malformed.

    With `create` false (auditing, reading) nothing is created: a SQLite file
    must already exist, and no table is made on either store.
    """
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        path = unquote(parts.path)
        if parts.netloc or not path.startswith("/") or path == "/":
            raise ConfigError(
                f"bad store URL {url!r}: use sqlite:///relative.db or sqlite:////absolute/path.db"
            )
        db_path = Path(path[1:])  # sqlite:///x.db is relative, sqlite:////x.db absolute
        if not db_path.parent.exists():
            raise ConfigError(f"store directory {db_path.parent} does not exist")
        if not create and not db_path.exists():
            raise ConfigError(f"no store at {db_path}")
        return {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": str(db_path),
            "SQLITE_LOCK_TIMEOUT": "30",
            "APPLICATION_RECORDER_TOPIC": f"{_RECORDERS}:SealedSQLiteApplicationRecorder",
            "CREATE_TABLE": "y" if create else "n",
        }
    if parts.scheme in ("postgresql", "postgres"):
        return _postgres_environment(url, create)
    raise ConfigError(
        f"unknown store URL {describe(url)!r}: expected sqlite:///FILE or postgresql://..."
    )


def _hosts(url: str, netloc: str) -> tuple[str, str]:
    """The host list of a URL's netloc (after any user@) as libpq's comma lists."""
    hosts: list[str] = []
    ports: list[str] = []
    for entry in netloc.rpartition("@")[2].split(","):
        found = _HOST.fullmatch(entry)
        port = int(found.group(2) or 5432) if found else 0
        if found is None or not 0 < port < 65536:
            raise ConfigError(
                f"bad host {entry!r} in store URL {describe(url)!r}: use host[:port], "
                "several separated by commas"
            )
        hosts.append(unquote(found.group(1).strip("[]")))
        ports.append(str(port))
    return ",".join(hosts), ",".join(ports)


def _postgres_environment(url: str, create: bool) -> dict[str, str]:
    parts = urlsplit(url)
    dbname = unquote(parts.path.lstrip("/"))
    netloc = parts.netloc
    if not netloc.rpartition("@")[2] or not dbname:
        raise ConfigError(
            f"bad store URL {describe(url)!r}: use postgresql://user@host:port/dbname"
        )
    hosts, ports = _hosts(url, netloc)
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"schema", "target_session_attrs"})
    if unknown:
        raise ConfigError(
            f"unknown store URL option {unknown[0]!r} in {describe(url)!r}: only ?schema=NAME "
            "and target_session_attrs"
        )
    schema = query.get("schema", ["public"])
    if len(schema) != 1 or not _SCHEMA.fullmatch(schema[0]):
        raise ConfigError(
            f"bad schema name {'&'.join(schema)!r} in store URL: letters, digits and _ only "
            "(up to 63, not starting with a digit)"
        )
    several = "," in hosts
    target = query.get("target_session_attrs", ["read-write" if several else "any"])
    if len(target) != 1 or target[0] not in TARGETS:
        raise ConfigError(
            f"bad target_session_attrs {'&'.join(target)!r} in store URL: one of "
            f"{', '.join(TARGETS)}"
        )
    userinfo = netloc.rpartition("@")[0] if "@" in netloc else ""
    user, _, password = userinfo.partition(":")
    return {
        "PERSISTENCE_MODULE": FACTORY,
        "POSTGRES_DBNAME": dbname,
        "POSTGRES_HOST": hosts,
        "POSTGRES_PORT": ports,
        "POSTGRES_USER": unquote(user or "postgres"),
        "POSTGRES_PASSWORD": unquote(password),
        "POSTGRES_SCHEMA": schema[0],
        "POSTGRES_TARGET_SESSION_ATTRS": target[0],
        "POSTGRES_CONNECT_TIMEOUT": "5",
        "POSTGRES_LOCK_TIMEOUT": "10",
        # A connection the pool hands out is checked first: one the server
        # dropped (a restart, a failover, a terminated backend) is replaced
        # instead of failing the next command.
        "POSTGRES_PRE_PING": "y",
        # One connection kept open, up to 15 made as concurrent work asks for
        # them (eventsourcing's default keeps 5 open from the start). A command,
        # a verify worker or a mirror reads on one connection at a time, and
        # each idle connection is a server process that was forked, set up and
        # kept for nothing; `ledger serve` grows its pool under load (and lets
        # it shrink back after psycopg_pool's max_idle, 10 minutes).
        "POSTGRES_POOL_SIZE": "1",
        "POSTGRES_MAX_OVERFLOW": "14",
        "APPLICATION_RECORDER_TOPIC": f"{_PG_RECORDER}:SealedPostgresApplicationRecorder",
        "CREATE_TABLE": "y" if create else "n",
    }
