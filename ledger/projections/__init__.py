"""Read models rebuilt from the log: balances, round summaries, house results.

Never the source of truth: every row can be dropped and rebuilt from the
events (`rebuild`), and `catch_up` applies new events exactly once, keeping
each projection's position in the same transaction as its rows.
"""

from __future__ import annotations

from ledger.projections.balances import Balances
from ledger.projections.base import Projection, ProjectionError
from ledger.projections.house import HouseResults
from ledger.projections.rounds import Rounds
from ledger.projections.runner import (
    ProjectionRunner,
    Status,
    catch_up,
    default_projections,
    follow,
    rebuild,
)

__all__ = [
    "Balances",
    "HouseResults",
    "Projection",
    "ProjectionError",
    "ProjectionRunner",
    "Rounds",
    "Status",
    "catch_up",
    "default_projections",
    "follow",
    "rebuild",
]
