"""Reading what a user names: a file to read, a JSON object, a path a
command will write.

Every command reads its paths through these, so the same mistakes get the
same one line (a `LedgerError`, exit 2 unless the caller's error says
otherwise) on every command: a missing file, a directory where a file
belongs, a path under a file or under a missing directory, a file that is
not JSON or JSON of the wrong shape. Checking creates nothing: a command
that refuses its input leaves the file system as it found it.

An id a user names (a round, a table, an account) is read the one way too,
but from the store, whose layer is above this one: `ledger.store.stream_ids`.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger.errors import ConfigError, LedgerError

ErrorType = type[LedgerError]


def _os_reason(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()


def read_bytes(path: Path, what: str, error: ErrorType = ConfigError) -> bytes:
    """The bytes of the file `path` (`what` names it in the error: "keyring")."""
    if path.is_dir():
        raise error(f"cannot read {what} {path}: it is a directory, not a file")
    blocker = _blocker(path)
    if blocker is not None:
        raise error(f"cannot read {what} {path}: {blocker} is not a directory")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise error(f"cannot read {what} {path}: no such file") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {_os_reason(exc)}") from None


def read_text(path: Path, what: str, error: ErrorType = ConfigError) -> str:
    """The UTF-8 text of the file `path`."""
    try:
        return read_bytes(path, what, error).decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{what} {path} is not UTF-8 text") from None


def read_json_object(path: Path, what: str, error: ErrorType = ConfigError) -> dict[str, Any]:
    """The JSON object the file `path` holds: anything else (not JSON, a
    list, a number) is one line naming the file and what it holds."""
    try:
        data = json.loads(read_text(path, what, error))
    except ValueError as exc:
        raise error(f"{what} {path} is not JSON ({exc})") from None
    if type(data) is not dict:
        raise error(f"{what} {path} is not a JSON object (it holds {json_kind(data)})")
    return data


def json_kind(value: object) -> str:
    """What a JSON value is, in words ("a list"), for an error line."""
    if value is None:
        return "null"
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    return names.get(type(value), type(value).__name__)


def _blocker(path: Path) -> Path | None:
    """The nearest existing ancestor of `path` that is not a directory."""
    for ancestor in path.parents:
        if ancestor.exists():
            return None if ancestor.is_dir() else ancestor
    return None


def _parent_problem(path: Path) -> str | None:
    """Why `path` cannot be made where it is named (None: its parent is a
    writable directory)."""
    parent = path.parent
    blocker = _blocker(path)
    if blocker is not None:
        return f"{blocker} is not a directory"
    if not parent.is_dir():
        existing = next((p for p in parent.parents if p.exists()), None)
        below = f" (nothing below {existing})" if existing not in (None, Path(".")) else ""
        return f"directory {parent} does not exist{below}"
    if not os.access(parent, os.W_OK):
        return f"directory {parent} is not writable"
    return None


def output_file(given: str | Path, doing: str) -> Path:
    """A file a command will write (`doing`: "export to", "write the report
    to"): a path that cannot be written fails in one line before any work."""
    path = Path(given)
    if path.is_dir():
        raise ConfigError(f"cannot {doing} {given}: it is a directory")
    problem = _parent_problem(path)
    if problem is not None:
        raise ConfigError(f"cannot {doing} {given}: {problem}")
    return path


def output_directory(given: str | Path, doing: str, *, empty: bool = False) -> Path:
    """A directory a command will create (when missing) or write into:
    refused in one line, creating nothing, when it is a file, lies under a
    file or a missing directory, or (`empty`) holds something already."""
    path = Path(given)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"cannot {doing} {given}: it is a file, not a directory")
        if empty and any(path.iterdir()):
            raise ConfigError(f"cannot {doing} {given}: it exists and is not an empty directory")
        if not os.access(path, os.W_OK):
            raise ConfigError(f"cannot {doing} {given}: directory {given} is not writable")
        return path
    problem = _parent_problem(path)
    if problem is not None:
        raise ConfigError(f"cannot {doing} {given}: {problem}")
    return path


def existing_directory(given: str | Path, what: str) -> Path:
    """A directory a command reads (a witness's, a tiles directory to check)."""
    path = Path(given)
    if not path.exists():
        blocker = _blocker(path)
        if blocker is not None:
            raise ConfigError(f"{what} {given}: {blocker} is not a directory")
        raise ConfigError(f"{what} {given} does not exist")
    if not path.is_dir():
        raise ConfigError(f"{what} {given} is a file, not a directory")
    return path


def parse_moment(text: str, option: str) -> datetime:
    """A date (`2026-12-01`: its midnight, UTC) or an ISO 8601 time with a UTC
    offset, as `option` was given; a time without one is refused (whose zone?)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"{option} {text!r} is not a date (YYYY-MM-DD) or an ISO 8601 time"
        ) from None
    if moment.tzinfo is None:
        if len(text) != 10:
            raise ConfigError(f"{option} {text!r} has no UTC offset (add +00:00 or Z)")
        moment = moment.replace(tzinfo=UTC)
    return moment


def sync_path(path: Path) -> None:
    """Flush a file's or a directory's entries to disk (a rename is durable only
    once its directory is)."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
