"""Round summaries: where each round stands, with its bets and its money.

`proj_rounds` has one row per round: its table, game, dealer and currency,
its status (betting, closed, decided, settled, voided), how many bets stand
(placed and not withdrawn) and their stakes, what was paid back, and when it
opened, closed for betting, got its outcome and ended (settled or voided).
A correction leaves the round settled and sets each bet's return, and the
round's, to what the right outcome returns.
`proj_round_bets` has one row per bet, `proj_tables` one per game table.

A round whose status is neither settled nor voided is open: left open by a
dealer who is still playing it, or by a process that died.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ledger.domain.game_table import GameTable
from ledger.domain.names import personal_text
from ledger.domain.round import Round
from ledger.domain.round_records import BETTING, CLOSED, DECIDED, SETTLED, VOIDED
from ledger.domain.stored_names import is_fault
from ledger.projections.base import Handler, Projection, ProjectionError, utc_text
from ledger.projections.sql import Tx

OPEN_STATUSES = (BETTING, CLOSED, DECIDED)
FINAL_STATUSES = (SETTLED, VOIDED)


class Rounds(Projection):
    name = "rounds"
    tables: ClassVar[Mapping[str, str]] = {
        "proj_tables": (
            "table_id TEXT PRIMARY KEY, name TEXT NOT NULL, game TEXT NOT NULL, "
            "currency TEXT NOT NULL, house_account TEXT NOT NULL, opened_at TEXT NOT NULL"
        ),
        "proj_rounds": (
            "round_id TEXT PRIMARY KEY, table_id TEXT NOT NULL, game TEXT NOT NULL, "
            "game_version TEXT NOT NULL, currency TEXT NOT NULL, dealer TEXT NOT NULL, "
            "status TEXT NOT NULL, bets INTEGER NOT NULL, bets_withdrawn INTEGER NOT NULL, "
            "stakes BIGINT NOT NULL, returned BIGINT NOT NULL, opened_at TEXT NOT NULL, "
            "betting_closed_at TEXT, decided_at TEXT, ended_at TEXT, "
            "last_event_at TEXT NOT NULL, version INTEGER NOT NULL"
        ),
        "proj_round_bets": (
            "round_id TEXT NOT NULL, bet_id TEXT NOT NULL, account_id TEXT NOT NULL, "
            "stake BIGINT NOT NULL, status TEXT NOT NULL, returned BIGINT, "
            "placed_at TEXT NOT NULL, PRIMARY KEY (round_id, bet_id)"
        ),
    }

    def handlers(self) -> Mapping[type[Any], Handler]:
        return {
            GameTable.Opened: self.table_opened,
            Round.Opened: self.opened,
            Round.BetPlaced: self.bet_placed,
            Round.BetWithdrawn: self.bet_withdrawn,
            Round.BettingClosed: self.betting_closed,
            Round.OutcomeRecorded: self.outcome_recorded,
            Round.ActionRecorded: self.action_recorded,
            Round.Resumed: self.resumed,
            Round.Settled: self.settled,
            Round.Voided: self.voided,
            Round.Corrected: self.corrected,
        }

    def table_opened(self, event: GameTable.Opened, tx: Tx) -> None:
        tx.execute(
            "INSERT INTO {proj_tables} (table_id, name, game, currency, house_account, "
            "opened_at) VALUES (%s, %s, %s, %s, %s, %s)",
            (
                str(event.originator_id),
                event.name,
                event.game,
                event.currency,
                str(event.house_account),
                utc_text(event.timestamp),
            ),
        )

    def opened(self, event: Round.Opened, tx: Tx) -> None:
        at = utc_text(event.timestamp)
        tx.execute(
            "INSERT INTO {proj_rounds} (round_id, table_id, game, game_version, "
            "currency, dealer, status, bets, bets_withdrawn, stakes, returned, opened_at, "
            "last_event_at, version) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, 0, 0, 0, 0, %s, %s, %s)",
            (
                str(event.originator_id),
                str(event.table_id),
                event.game,
                event.game_version,
                event.currency,
                personal_text(event.dealer),
                BETTING,
                at,
                at,
                event.originator_version,
            ),
        )

    def bet_placed(self, event: Round.BetPlaced, tx: Tx) -> None:
        round_id = str(event.originator_id)
        tx.execute(
            "INSERT INTO {proj_round_bets} (round_id, bet_id, account_id, stake, status, "
            "placed_at) VALUES (%s, %s, %s, %s, 'placed', %s)",
            (round_id, event.bet_id, event.account_id, event.stake, utc_text(event.timestamp)),
        )
        tx.execute(
            "UPDATE {proj_rounds} SET bets = bets + 1, stakes = stakes + %s, "
            "last_event_at = %s, version = %s WHERE round_id = %s",
            (event.stake, utc_text(event.timestamp), event.originator_version, round_id),
        )

    def bet_withdrawn(self, event: Round.BetWithdrawn, tx: Tx) -> None:
        round_id = str(event.originator_id)
        found = tx.row(
            "SELECT stake FROM {proj_round_bets} WHERE round_id = %s AND bet_id = %s",
            (round_id, event.bet_id),
        )
        if found is None:  # the round placed it first: these tables are out of step
            raise ProjectionError(
                f"bet {event.bet_id} withdrawn from round {round_id} is not in proj_round_bets: "
                "rebuild the projections"
            )
        tx.execute(
            "UPDATE {proj_round_bets} SET status = 'withdrawn' WHERE round_id = %s AND bet_id = %s",
            (round_id, event.bet_id),
        )
        tx.execute(
            "UPDATE {proj_rounds} SET bets = bets - 1, bets_withdrawn = bets_withdrawn + 1, "
            "stakes = stakes - %s, last_event_at = %s, version = %s WHERE round_id = %s",
            (int(found[0]), utc_text(event.timestamp), event.originator_version, round_id),
        )

    def betting_closed(self, event: Round.BettingClosed, tx: Tx) -> None:
        self._move(event, tx, CLOSED, "betting_closed_at")

    def outcome_recorded(self, event: Round.OutcomeRecorded, tx: Tx) -> None:
        self._move(event, tx, DECIDED, "decided_at")

    def action_recorded(self, event: Round.ActionRecorded, tx: Tx) -> None:
        """Settlement API 2: betting closes when an action says so; the round is
        decided (its play under way) from its first move after that, faults
        aside. A faulty draw after which betting is open reopened it."""
        fault = is_fault(event.action, event.source)
        if event.betting:
            if fault:
                self._status(event, tx, BETTING)
            else:
                self._touch(event, tx)
            return
        at = utc_text(event.timestamp)
        # The move that closes betting is the one taken while it was open.
        tx.execute(
            "UPDATE {proj_rounds} SET decided_at = CASE WHEN %s AND status <> %s "
            "THEN COALESCE(decided_at, %s) ELSE decided_at END, "
            "status = CASE WHEN %s AND status <> %s THEN %s ELSE %s END, "
            "betting_closed_at = COALESCE(betting_closed_at, %s), "
            "last_event_at = %s, version = %s WHERE round_id = %s",
            (
                not fault,
                BETTING,
                at,
                not fault,
                BETTING,
                DECIDED,
                CLOSED,
                at,
                at,
                event.originator_version,
                str(event.originator_id),
            ),
        )

    def resumed(self, event: Round.Resumed, tx: Tx) -> None:
        self._touch(event, tx)

    def settled(self, event: Round.Settled, tx: Tx) -> None:
        # A step may settle some bets and leave the round in play (settlement API 2).
        self._end(event, tx, SETTLED, event.results, ends=event.over)

    def voided(self, event: Round.Voided, tx: Tx) -> None:
        self._end(event, tx, VOIDED, event.returns)

    def corrected(self, event: Round.Corrected, tx: Tx) -> None:
        round_id = str(event.originator_id)
        for result in event.results:
            tx.execute(
                "UPDATE {proj_round_bets} SET returned = %s WHERE round_id = %s AND bet_id = %s",
                (result["returned"], round_id, result["bet_id"]),
            )
        change = sum((int(r["returned"]) for r in event.results), start=0) - sum(
            (int(r["returned"]) for r in event.reversed_results), start=0
        )
        tx.execute(
            "UPDATE {proj_rounds} SET returned = returned + %s WHERE round_id = %s",
            (change, round_id),
        )
        self._touch(event, tx)

    def _end(
        self, event: Round.Event, tx: Tx, status: str, results: Any, ends: bool = True
    ) -> None:
        round_id = str(event.originator_id)
        for result in results:
            tx.execute(
                "UPDATE {proj_round_bets} SET status = %s, returned = %s "
                "WHERE round_id = %s AND bet_id = %s",
                (status, result["returned"], round_id, result["bet_id"]),
            )
        returned = sum((int(result["returned"]) for result in results), start=0)
        tx.execute(
            "UPDATE {proj_rounds} SET returned = returned + %s WHERE round_id = %s",
            (returned, round_id),
        )
        if ends:
            self._move(event, tx, status, "ended_at")
        else:
            self._touch(event, tx)

    def _move(self, event: Round.Event, tx: Tx, status: str, when: str) -> None:
        assert when in ("betting_closed_at", "decided_at", "ended_at")
        at = utc_text(event.timestamp)
        tx.execute(
            f"UPDATE {{proj_rounds}} SET status = %s, {when} = %s, last_event_at = %s, "
            "version = %s WHERE round_id = %s",
            (status, at, at, event.originator_version, str(event.originator_id)),
        )

    def _status(self, event: Round.Event, tx: Tx, status: str) -> None:
        tx.execute(
            "UPDATE {proj_rounds} SET status = %s, last_event_at = %s, version = %s "
            "WHERE round_id = %s",
            (status, utc_text(event.timestamp), event.originator_version, str(event.originator_id)),
        )

    def _touch(self, event: Round.Event, tx: Tx) -> None:
        tx.execute(
            "UPDATE {proj_rounds} SET last_event_at = %s, version = %s WHERE round_id = %s",
            (utc_text(event.timestamp), event.originator_version, str(event.originator_id)),
        )
