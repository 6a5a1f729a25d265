"""The newest signed checkpoint, kept where a lost store cannot take it along.

A checkpoint is a promise: the log of that size has that root, forever. The
store keeps its checkpoints, but a store can go back in time (an asynchronous
standby promoted after missing the last commits, a restored backup), and a
checkpointer that trusted it would then sign a second, different checkpoint
for a size it already published: a fork, caught only later by whoever kept
the first. So every checkpoint is first written here, with a compare-and-swap
on the one before it (Sunlight keeps its latest checkpoint the same way), and
a checkpointer signs only a tree that extends what is here.

A log is named by its origin and its first entry's hash (leaf 0): a store
that went back in time still starts with the same event, while another log
signed with the same keys directory (a second store tried beside the first)
is kept apart instead of being refused as a fork of the first.

Two places to keep it (`LEDGER_CHECKPOINT_LOCK`):

- files (the default: the directory `kept-checkpoints` in the keys
  directory, beside the checkpoint key whose promises they record; one file
  per log), swapped under an exclusive `flock` by writing a new file,
  fsyncing it and renaming it over the old;
- a PostgreSQL database that is *not* the store's (nor its standby's): one
  row per log origin, swapped by a conditional `UPDATE`. Several nodes
  writing one store must share one lock: point them all at the same database.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Protocol
from urllib.parse import urlsplit

from ledger.errors import ConfigError

if TYPE_CHECKING:
    import psycopg

LOCK_ENV = "LEDGER_CHECKPOINT_LOCK"
DEFAULT_DIRECTORY = "kept-checkpoints"


class CheckpointLock(Protocol):
    """Compare-and-swap cells, one per log (its origin and first entry hash),
    each holding the note of the log's newest signed checkpoint."""

    def latest(self, origin: str, genesis: bytes) -> str | None:
        """The note kept for the log, or None when none was kept yet."""

    def swap(self, origin: str, genesis: bytes, old: str | None, new: str) -> bool:
        """Keep `new` if what is kept now is exactly `old`; False (nothing kept) if not."""

    def knows(self, origin: str) -> bool:
        """Whether any log of `origin` is kept here."""

    def describe(self) -> str:
        """Where it is kept, for messages."""


class FileCheckpointLock:
    """One file per log in a directory (named by the log's first entry hash),
    swapped under `flock`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def describe(self) -> str:
        return str(self.directory)

    def path(self, genesis: bytes) -> Path:
        return self.directory / genesis.hex()

    def latest(self, origin: str, genesis: bytes) -> str | None:
        path = self.path(genesis)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        if _origin_of(text) != origin:
            _other_origin(path, text, origin)
        return text

    def knows(self, origin: str) -> bool:
        if not self.directory.is_dir():
            return False
        for path in self.directory.iterdir():
            if "." not in path.name and path.is_file():
                with suppress(OSError, UnicodeDecodeError):
                    if _origin_of(path.read_text(encoding="utf-8")) == origin:
                        return True
        return False

    def swap(self, origin: str, genesis: bytes, old: str | None, new: str) -> bool:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(genesis)
        guard = path.with_name(path.name + ".lock")
        with open(guard, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            if self.latest(origin, genesis) != old:
                return False
            fresh = path.with_name(path.name + ".new")
            with open(fresh, "w", encoding="utf-8") as out:
                out.write(new)
                out.flush()
                os.fsync(out.fileno())
            os.replace(fresh, path)
            _fsync_directory(self.directory)
        return True


class PostgresCheckpointLock:
    """The note in a row of its own database, swapped by a conditional UPDATE."""

    TABLE = "ledger_kept_checkpoints"

    def __init__(self, url: str) -> None:
        self.url = url
        with self._connect() as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.TABLE} "
                "(origin text, genesis bytea, note text NOT NULL, PRIMARY KEY (origin, genesis))"
            )

    def describe(self) -> str:
        parts = urlsplit(self.url)
        return f"the database {parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path}"

    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        import psycopg  # only where a PostgreSQL lock is configured

        return psycopg.connect(_libpq_url(self.url), autocommit=True, connect_timeout=10)

    def latest(self, origin: str, genesis: bytes) -> str | None:
        with self._connect() as conn:
            row = conn.execute(
                f"SELECT note FROM {self.TABLE} WHERE origin = %s AND genesis = %s",
                (origin, genesis),
            ).fetchone()
        return None if row is None else str(row[0])

    def knows(self, origin: str) -> bool:
        with self._connect() as conn:
            row = conn.execute(
                f"SELECT 1 FROM {self.TABLE} WHERE origin = %s LIMIT 1", (origin,)
            ).fetchone()
        return row is not None

    def swap(self, origin: str, genesis: bytes, old: str | None, new: str) -> bool:
        with self._connect() as conn:
            if old is None:
                done = conn.execute(
                    f"INSERT INTO {self.TABLE} (origin, genesis, note) VALUES (%s, %s, %s) "
                    "ON CONFLICT (origin, genesis) DO NOTHING",
                    (origin, genesis, new),
                )
            else:
                done = conn.execute(
                    f"UPDATE {self.TABLE} SET note = %s "
                    "WHERE origin = %s AND genesis = %s AND note = %s",
                    (new, origin, genesis, old),
                )
            return bool(done.rowcount == 1)


def open_lock(setting: str | None, keys_path: Path) -> CheckpointLock:
    """The lock a setting names: a PostgreSQL URL, a directory (`file:` or
    plain), or, unset, the directory in the keys directory."""
    if not setting:
        return FileCheckpointLock(keys_path / DEFAULT_DIRECTORY)
    scheme = urlsplit(setting).scheme
    if scheme in ("postgresql", "postgres"):
        return PostgresCheckpointLock(setting)
    if scheme == "file":
        return FileCheckpointLock(Path(urlsplit(setting).path))
    if scheme:
        raise ConfigError(
            f"{LOCK_ENV}={setting!r}: give a directory or a postgresql:// URL of a database "
            "that is not the store's"
        )
    return FileCheckpointLock(Path(setting))


def _origin_of(note: str) -> str:
    return note.split("\n", 1)[0]


def _other_origin(path: Path, text: str, origin: str) -> NoReturn:
    raise ConfigError(
        f"{path} keeps the checkpoints of the log {_origin_of(text)!r}, not of {origin!r}, "
        f"though both start with the same event: was the origin changed ({LOCK_ENV})?"
    )


def _libpq_url(url: str) -> str:
    """The URL without the query parameters libpq does not know (`schema`)."""
    parts = urlsplit(url)
    query = "&".join(p for p in parts.query.split("&") if p and not p.startswith("schema="))
    return parts._replace(query=query).geturl()


def _fsync_directory(directory: Path) -> None:
    with suppress(OSError):  # not every file system lets a directory be opened
        handle = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
