"""A `ledger simulate` session that is the same every run, in this process or
in a process of its own.

`--seed` and `--rng-seed` are not enough: an RNG table's draw is made from
its seed and the round's id, a random UUID, and every later choice depends on
the wallets those draws leave. So the ids (aggregates', bets', a session's
request ids) are drawn from `random.Random(seed)`, and the background anchor,
which checkpoints after a time or a count of events, is off (simulate signs
its checkpoints at its end).

As a program, for tests that run the ledger in a process of its own (it
imports nothing from `tests`, so it runs from anywhere):

    python tests/reproducible.py SEED LEDGER-ARGS...   (`ledger LEDGER-ARGS...`)
"""

from __future__ import annotations

import random
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pytest

PROGRAM: Final = Path(__file__).resolve()  # `python PROGRAM SEED ARGS...`
# Where the ledger and eventsourcing draw the ids a session makes.
ID_SOURCES = ("eventsourcing.domain", "ledger.casino.tables", "ledger.simulation.request_ids")


def simulate_seeds(seed: int) -> tuple[str, ...]:
    """`ledger simulate`'s own seeds: the players' choices, the dice and cards."""
    return ("--seed", str(seed), "--rng-seed", f"{seed:064x}")


@contextmanager
def reproducible_session(seed: int) -> Iterator[tuple[str, ...]]:
    """Within it, `ledger simulate` run in this process (`main`, `ledger_cli`, the
    Python API) records the same session every time; it yields the seeds to
    pass. Use one seed per store: the same seed twice on one store would draw
    the same ids again."""
    ids = random.Random(seed)

    def uuid4() -> uuid.UUID:
        return uuid.UUID(bytes=ids.randbytes(16), version=4)

    with pytest.MonkeyPatch.context() as patch:
        for where in ID_SOURCES:
            patch.setattr(f"{where}.uuid4", uuid4)
        patch.setenv("LEDGER_ANCHOR_SECONDS", "0")
        patch.setenv("LEDGER_ANCHOR_EVENTS", "0")
        yield simulate_seeds(seed)


def run(argv: list[str]) -> int:
    """`ledger ARGS...` in a reproducible session of seed `argv[0]`; a `simulate`
    among the arguments gets the seeds added."""
    from ledger.cli.main import main

    seed, *args = argv
    with reproducible_session(int(seed)) as seeds:
        return main([*args, *seeds] if "simulate" in args else args)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
