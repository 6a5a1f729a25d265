"""What a node's self-verification last found, as its health endpoint shows it.

The process that runs the schedule writes one small JSON file (whole: written
beside, then renamed) in the server's private directory; every HTTP worker
reads it when asked (`GET /v1/health`). It is the node's own memory of its
runs, not read from the store, so an edit of the store cannot make a failed
run look passed here; the runs themselves are recorded in the log too.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.crypto.keys import from_micros

STATUS_FILE = "self-verification.json"


@dataclass(frozen=True)
class SelfStatus:
    """The status file of one node, and its schedule (None: self-verification off)."""

    path: Path
    every: int | None

    def write(self, result: str, tree_size: int, verified_at: int, finding: str | None) -> None:
        data = {
            "last_run_at": from_micros(verified_at).isoformat(),
            "result": result,
            "tree_size": tree_size,
            "finding": finding,
        }
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(data) + "\n")
        os.replace(partial, self.path)

    def read(self) -> dict[str, Any]:
        """The schedule and the last run (nulls before the first one ends)."""
        last: dict[str, Any] = {"last_run_at": None, "result": None, "tree_size": None}
        last["finding"] = None
        try:
            stored = json.loads(self.path.read_text())
        except (OSError, ValueError):  # no run has ended yet
            stored = {}
        if isinstance(stored, dict):
            last |= {name: stored[name] for name in last if name in stored}
        return {"every_seconds": self.every, **last}
