"""A table on the session's floor: what every game's round in a session reads."""

from __future__ import annotations

from dataclasses import dataclass

from ledger.simulation.config import TableSpec


@dataclass
class Table:
    spec: TableSpec
    table_id: str
    dealer: str
    dealt: int = 0  # rounds dealt so far
