"""Ended rounds, out of memory (`verify --level settlement`).

A correction may come for any round at any later point of the log, so a
round's facts are needed after it ends; kept in memory they grow with the
log. Instead each ended round is written, as one zlib-compressed JSON record,
to a scratch file the verifier owns (never to the store), and read back only
if a later event names the round. Memory keeps one small index entry per
ended round; the file is the auditor's own, beside a `--save-state` state.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import IO, Any


class RoundArchive:
    def __init__(self, index: dict[str, list[int]] | None = None) -> None:
        """A scratch file, deleted on close (`restored` fills it from a saved one)."""
        self.index: dict[str, list[int]] = dict(index or {})  # round id -> [offset, length]
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="ledger-rounds-")  # noqa: SIM115 (closed by close)
        self._end = 0

    def __contains__(self, round_id: object) -> bool:
        return round_id in self.index

    def __len__(self) -> int:
        return len(self.index)

    def put(self, round_id: str, facts: dict[str, Any]) -> None:
        record = zlib.compress(json.dumps(facts, separators=(",", ":")).encode(), 1)
        self._file.seek(self._end)
        self._file.write(record)
        self.index[round_id] = [self._end, len(record)]
        self._end += len(record)

    def take(self, round_id: str) -> dict[str, Any]:
        """The round's facts, out of the archive (put them back once it ends again)."""
        offset, length = self.index.pop(round_id)
        self._file.seek(offset)
        data: dict[str, Any] = json.loads(zlib.decompress(self._file.read(length)))
        return data

    @classmethod
    def restored(cls, path: Path, index: dict[str, list[int]]) -> RoundArchive:
        """A scratch copy of a saved archive (the saved file stays as it was)."""
        archive = cls(index={k: [int(o), int(n)] for k, (o, n) in index.items()})
        with path.open("rb") as saved:
            shutil.copyfileobj(saved, archive._file)
        archive._end = archive._file.tell()
        return archive

    def save_to(self, path: Path) -> None:
        """The archive's bytes, to `path` (its index goes in the state file)."""
        self._file.flush()
        self._file.seek(0)
        with path.open("wb") as out:
            shutil.copyfileobj(self._file, out)
        self._file.seek(self._end)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()
