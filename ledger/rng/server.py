"""The RNG server's side of provably fair draws: it holds each secret seed from
its commitment until it is retired, and draws dice from it (a round's cards
come from the deck its seed shuffles).

Seeds live in memory, or in a directory of 0600 files when one is given (so
a restart does not lose a committed seed); never in the event store until
they are revealed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ledger.errors import InvalidCommandError
from ledger.rng.dice import SEED_BYTES, Dice, commitment, throw


class RngServer:
    def __init__(self, directory: Path | None = None) -> None:
        self._seeds: dict[str, bytes] = {}
        self._directory = directory
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            for path in directory.glob("*.seed"):
                self._seeds[path.stem] = bytes.fromhex(path.read_text().strip())

    def new_seed(self) -> tuple[str, str]:
        """A fresh secret seed: (its id, its public commitment)."""
        seed = secrets.token_bytes(SEED_BYTES)
        seed_id = secrets.token_hex(8)
        if self._directory is not None:
            keep_seed(self._directory, seed_id, seed)
        self._seeds[seed_id] = seed
        return seed_id, commitment(seed)

    def seed(self, seed_id: str) -> bytes:
        try:
            return self._seeds[seed_id]
        except KeyError:
            raise InvalidCommandError(
                f"this RNG does not hold seed {seed_id}", code="seed_missing"
            ) from None

    def throw(self, seed_id: str, round_id: str, counter: int) -> Dice:
        return throw(self.seed(seed_id), round_id, counter)


def keep_seed(directory: Path, seed_id: str, seed: bytes) -> None:
    """Write a secret seed as `<id>.seed` (hex, readable by its owner only) in
    `directory`, before it is committed: the RNG must be able to reveal it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{seed_id}.seed"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # a replayed session (a fixed --dice-seed) derives the same seeds
        if path.read_text().strip() != seed.hex():
            raise InvalidCommandError(
                f"{path} already holds another seed", code="seed_conflict"
            ) from None
        return
    with os.fdopen(fd, "w") as handle:
        handle.write(seed.hex())


def default_rng_dir(keys: Path) -> Path:
    """Where a node keeps its RNG seeds: `rng-seeds` beside its keys directory."""
    return keys.parent / "rng-seeds"
