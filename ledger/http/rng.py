"""The RNG's seeds shared by every worker of `ledger serve`: a seed committed by
one worker is read from the seeds directory by another when it first needs it."""

from __future__ import annotations

from pathlib import Path

from ledger.rng.server import RngServer


class SharedRngServer(RngServer):
    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self._shared = directory

    def seed(self, seed_id: str) -> bytes:
        path = self._shared / f"{seed_id}.seed"
        if seed_id.isalnum() and path.exists():
            self._seeds.setdefault(seed_id, bytes.fromhex(path.read_text().strip()))
        return super().seed(seed_id)
