"""Where the session's randomness comes from: the one place to swap the source.

At a physical table the dealer shakes real dice: `SessionRng.shaker` stands
in for them (a `random.Random` derived from the session seed, so a fixed
`--rng-seed` replays them too); the table's dealer device reports each
draw, signed (see `ledger.simulation.device`).

The other tables are RNG tables (ledger.casino's `commit_seed`, `act`,
`retire_seed`): each commits to a secret seed before its rounds open, every
dice draw is `ledger.rng.dice.throw(seed, round id, draw counter)` (cards:
the round's deck shuffled from the seed), and the seed is revealed when
retired, so `ledger verify` recomputes every draw.

`dice_source` gives the RNG that holds those seeds. Each committed seed is
derived from one secret session seed (drawn from `secrets`, or given with
`--rng-seed` for tests and replays) by HMAC-SHA256, so revealing a table's
seed reveals nothing about the session seed or any seed not yet revealed,
and a fixed session seed gives the same seeds in the same order.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import secrets
from pathlib import Path
from typing import Final

from ledger.errors import ConfigError, InvalidCommandError
from ledger.rng.dice import SEED_BYTES, commitment
from ledger.rng.server import RngServer, keep_seed

DERIVE_DOMAIN: Final = b"casino-ledger/simulation/seed/v1\n"
SHAKER_DOMAIN: Final = b"casino-ledger/simulation/shaker/v1\n"


class SessionRng(RngServer):
    """An RNG server whose seeds are derived, in turn, from one session seed.

    With `keep_in`, each seed is also written there as the RNG server writes
    its own (`<id>.seed`, owner-only), before it is committed: a session killed
    with a seed in use leaves it to `ledger seeds retire` (reveal), as a
    served table's would be."""

    def __init__(self, session_seed: bytes, keep_in: Path | None = None) -> None:
        super().__init__()
        if len(session_seed) != SEED_BYTES:
            raise ConfigError(f"a session seed is {SEED_BYTES} bytes")
        self._session_seed = session_seed
        self._derived: dict[str, bytes] = {}
        self._keep_in = keep_in

    def new_seed(self) -> tuple[str, str]:
        number = str(len(self._derived)).encode("ascii")
        seed = hmac.digest(self._session_seed, DERIVE_DOMAIN + number, "sha256")
        committed = commitment(seed)
        seed_id = hashlib.sha256(b"seed-id\n" + committed.encode()).hexdigest()[:16]
        if self._keep_in is not None:
            keep_seed(self._keep_in, seed_id, seed)
        self._derived[seed_id] = seed
        return seed_id, committed

    def shaker(self) -> random.Random:
        """The physical tables' dice (a simulation of hands, not of an RNG)."""
        derived = hmac.digest(self._session_seed, SHAKER_DOMAIN, "sha256")
        return random.Random(int.from_bytes(derived, "big"))

    def seed(self, seed_id: str) -> bytes:
        try:
            return self._derived[seed_id]
        except KeyError:
            raise InvalidCommandError(
                f"this RNG does not hold seed {seed_id}", code="seed_missing"
            ) from None


def parse_seed(text: str) -> bytes:
    """A session seed given as hex: exactly 32 bytes, else ConfigError."""
    try:
        seed = bytes.fromhex(text)
    except ValueError:
        seed = b""
    if len(seed) != SEED_BYTES:
        raise ConfigError(
            f"--rng-seed is {SEED_BYTES} bytes written as {2 * SEED_BYTES} hex digits"
        )
    return seed


def dice_source(session_seed: bytes | None = None, keep_in: Path | None = None) -> RngServer:
    """The session's RNG: seeds derived from a fresh secret session seed unless
    given one, each kept in `keep_in` when given."""
    seed = secrets.token_bytes(SEED_BYTES) if session_seed is None else session_seed
    return SessionRng(seed, keep_in)
