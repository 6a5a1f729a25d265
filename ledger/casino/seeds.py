"""Provably fair randomness: a table commits to a secret seed before a round
draws from it, and reveals it once no round draws from it any more."""

from __future__ import annotations

from eventsourcing.domain import Aggregate

from ledger.casino.runner import Body, Work
from ledger.errors import InvalidCommandError
from ledger.rng.server import RngServer


def commit_seed(table_id: str, rng: RngServer) -> Body:
    def body(work: Work) -> tuple[str, list[Aggregate]]:
        table = work.table(table_id)
        table.check_no_seed_in_use()  # before the RNG makes a seed nobody will use
        seed_id, committed = rng.new_seed()
        table.commit_seed(seed_id, committed)
        return seed_id, [table]

    return body


def retire_seed(table_id: str, rng: RngServer) -> Body:
    def body(work: Work) -> tuple[str, list[Aggregate]]:
        table = work.table(table_id)
        if table.active_seed is None:
            raise InvalidCommandError(f"table {table.name} has no seed in use", code="seed_missing")
        seed_id = table.active_seed
        table.reveal_seed(seed_id, rng.seed(seed_id).hex())
        return seed_id, [table]

    return body
