"""Request ids for a session's commands: unique per session, so a second
session on the same store never replays the first one's results."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import uuid4


@dataclass
class RequestIds:
    session: str = field(default_factory=lambda: uuid4().hex[:16])
    issued: int = 0

    def next(self, what: str) -> str:
        self.issued += 1
        return f"sim-{self.session}-{self.issued}-{what}"
