"""The house's result per table and UTC day, from settlements.

For every settled round: the stakes of its bets, what went back to the
wallets, and the difference, the house's result (positive: the house won),
in the round's currency, added to its table's row for the UTC day of the
settlement. A void moves no money to or from the house and is not counted.
A correction is booked on the UTC day it was made, like its compensating
postings: what goes back to the wallets changes by the difference between the
new and the reversed returns, and the house's result by its opposite (no
round, bet or stake is counted again).

The projection keeps its own index of rounds (`proj_house_rounds`: table and
currency, from Round.Opened) so it never depends on another projection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ledger.domain.round import Round
from ledger.projections.base import Handler, Projection, ProjectionError, utc_day
from ledger.projections.sql import Tx


class HouseResults(Projection):
    name = "house"
    tables: ClassVar[Mapping[str, str]] = {
        "proj_house_rounds": (
            "round_id TEXT PRIMARY KEY, table_id TEXT NOT NULL, currency TEXT NOT NULL"
        ),
        "proj_house_results": (
            "table_id TEXT NOT NULL, day TEXT NOT NULL, currency TEXT NOT NULL, "
            "rounds INTEGER NOT NULL, bets INTEGER NOT NULL, stakes BIGINT NOT NULL, "
            "returned BIGINT NOT NULL, result BIGINT NOT NULL, "
            "PRIMARY KEY (table_id, day, currency)"
        ),
    }

    def handlers(self) -> Mapping[type[Any], Handler]:
        return {
            Round.Opened: self.opened,
            Round.Settled: self.settled,
            Round.Corrected: self.corrected,
        }

    def opened(self, event: Round.Opened, tx: Tx) -> None:
        tx.execute(
            "INSERT INTO {proj_house_rounds} (round_id, table_id, currency) VALUES (%s, %s, %s)",
            (str(event.originator_id), str(event.table_id), event.currency),
        )

    def settled(self, event: Round.Settled, tx: Tx) -> None:
        table_id, currency = _table_of(event, tx)
        stakes = sum((int(r["stake"]) for r in event.results), start=0)
        returned = sum((int(r["returned"]) for r in event.results), start=0)
        tx.execute(
            "INSERT INTO {proj_house_results} AS h (table_id, day, currency, rounds, bets, "
            "stakes, returned, result) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (table_id, day, currency) DO UPDATE SET rounds = h.rounds + "
            "excluded.rounds, bets = h.bets + excluded.bets, stakes = h.stakes + "
            "excluded.stakes, returned = h.returned + excluded.returned, "
            "result = h.result + excluded.result",
            (
                table_id,
                utc_day(event.timestamp),
                currency,
                1 if event.over else 0,  # a round counts once, when its last bets settle
                len(event.results),
                stakes,
                returned,
                stakes - returned,
            ),
        )

    def corrected(self, event: Round.Corrected, tx: Tx) -> None:
        table_id, currency = _table_of(event, tx)
        change = sum((int(r["returned"]) for r in event.results), start=0) - sum(
            (int(r["returned"]) for r in event.reversed_results), start=0
        )
        tx.execute(
            "INSERT INTO {proj_house_results} AS h (table_id, day, currency, rounds, bets, "
            "stakes, returned, result) VALUES (%s, %s, %s, 0, 0, 0, %s, %s) "
            "ON CONFLICT (table_id, day, currency) DO UPDATE SET "
            "returned = h.returned + excluded.returned, result = h.result + excluded.result",
            (table_id, utc_day(event.timestamp), currency, change, -change),
        )


def _table_of(event: Round.Settled | Round.Corrected, tx: Tx) -> tuple[str, str]:
    round_id = str(event.originator_id)
    found = tx.row(
        "SELECT table_id, currency FROM {proj_house_rounds} WHERE round_id = %s", (round_id,)
    )
    if found is None:
        raise ProjectionError(
            f"settled round {round_id} is not in proj_house_rounds: rebuild the projections"
        )
    return str(found[0]), str(found[1])
