"""One setting picks the store: a URL, from `--store` or `LEDGER_STORE`.

``sqlite:///path/to/file.db`` (the default: ``ledger.db`` in the working
directory) or ``postgresql://user[:password]@host[:port]/dbname[?schema=name]`` (a
schema name is letters, digits and ``_``; writers create it, readers need it).
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
# A plain PostgreSQL identifier: it is spliced into DDL (triggers, functions).
_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


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
        dbname = unquote(parts.path.lstrip("/"))
        if not parts.hostname or not dbname:
            raise ConfigError(
                f"bad store URL {describe(url)!r}: use postgresql://user@host:port/dbname"
            )
        try:
            port = parts.port or 5432
        except ValueError as exc:
            raise ConfigError(f"bad port in store URL {describe(url)!r}") from exc
        query = parse_qs(parts.query, keep_blank_values=True)
        unknown = sorted(set(query) - {"schema"})
        if unknown:
            raise ConfigError(
                f"unknown store URL option {unknown[0]!r} in {describe(url)!r}: only ?schema=NAME"
            )
        schema = query.get("schema", ["public"])
        if len(schema) != 1 or not _SCHEMA.fullmatch(schema[0]):
            raise ConfigError(
                f"bad schema name {'&'.join(schema)!r} in store URL: letters, digits and _ only "
                "(up to 63, not starting with a digit)"
            )
        return {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": dbname,
            "POSTGRES_HOST": parts.hostname,
            "POSTGRES_PORT": str(port),
            "POSTGRES_USER": unquote(parts.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(parts.password or ""),
            "POSTGRES_SCHEMA": schema[0],
            "POSTGRES_CONNECT_TIMEOUT": "5",
            "POSTGRES_LOCK_TIMEOUT": "10",
            "APPLICATION_RECORDER_TOPIC": f"{_RECORDERS}:SealedPostgresApplicationRecorder",
            "CREATE_TABLE": "y" if create else "n",
        }
    raise ConfigError(
        f"unknown store URL {describe(url)!r}: expected sqlite:///FILE or postgresql://..."
    )
