"""One pass over the log, aggregated per game, bet family, table and UTC day.

Memory is O(days x tables + games x families + rounds still open): a round's
bets are held only while it is open and folded into the sums when it ends.
A correction, rare and usually long after its round ended, is booked by
re-reading that one round's stream (found by its id, never by a scan).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from fractions import Fraction
from typing import Any
from uuid import UUID

from ledger.domain.game_table import GameTable
from ledger.domain.round import Round
from ledger.domain.stored_names import is_fault
from ledger.errors import VerificationError
from ledger.plugins.families import bet_label, family_of
from ledger.plugins.registry import LoadedGame
from ledger.projections.base import utc_day
from ledger.report.returns import Cluster, Returns
from ledger.report.theory import Theories, Theory


@dataclass
class Counts:
    """What happened to rounds, beside the money."""

    rounds: int = 0  # ended: every bet settled, or voided
    voided_by_rules: int = 0  # the game's fault policy or an RNG failure
    voided_by_operator: int = 0
    resumed: int = 0  # interrupted rounds an operator resumed
    faults: int = 0  # faulty draws (dice or a misdeal)
    corrections: int = 0
    bets: int = 0  # settled bets
    staked: int = 0
    returned: int = 0

    def merge(self, other: Counts) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def voided(self) -> int:
        return self.voided_by_rules + self.voided_by_operator

    @property
    def house(self) -> int:
        return self.staked - self.returned


@dataclass
class OpenRound:
    table: str
    game: str
    currency: str
    theory: Theory
    game_played: LoadedGame | None = None  # the installed game of that id: it names bet families
    bets: dict[str, tuple[str, Fraction | None]] = field(default_factory=dict)  # family, theory
    clusters: dict[str, Cluster] = field(default_factory=dict)  # per family

    def settle(self, result: Mapping[str, Any], sign: int = 1) -> None:
        kind, theory = self.bets[result["bet_id"]]
        cluster = self.clusters.setdefault(kind, Cluster())
        if sign > 0:
            cluster.settle(int(result["stake"]), int(result["returned"]), theory)
        else:  # a correction reverses a settlement: the bet settles again after
            cluster.bets -= 1
            cluster.staked -= int(result["stake"])
            cluster.returned -= int(result["returned"])
            if theory is None:
                cluster.unpriced -= int(result["stake"])
            else:
                cluster.expected -= int(result["stake"]) * theory


#: Time buckets of the house result's chart, finest first: minute, hour, day, week
#: (a week of Unix time starts on a Thursday; the chart only needs equal steps).
RESOLUTIONS = (60, 3600, 86400, 7 * 86400)
MAX_BUCKETS = 20_000

GameKey = tuple[str, str]  # game id, currency
DayKey = tuple[str, str]  # UTC day, table id


@dataclass
class ReportTally:
    theories: Theories
    #: Reads one round's stream (version order), for corrections of ended rounds.
    read_round: Callable[[UUID], Iterable[Any]]
    tables: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # name, game, currency
    open: dict[str, OpenRound] = field(default_factory=dict)
    returns: dict[GameKey, dict[str, Returns]] = field(default_factory=dict)
    games: dict[GameKey, Counts] = field(default_factory=dict)
    theory_sources: dict[GameKey, set[str]] = field(default_factory=dict)
    days: dict[DayKey, Counts] = field(default_factory=dict)
    #: House result per time bucket (its start, Unix seconds), game and currency: the
    #: chart's series. Buckets start at a minute and coarsen (hour, day, week) whenever
    #: there are more than `MAX_BUCKETS`, so memory stays bounded however long the log.
    timeline: dict[tuple[int, str, str], int] = field(default_factory=dict)
    resolution: int = RESOLUTIONS[0]
    first: str | None = None  # UTC day of the first and last event counted
    last: str | None = None
    events: int = 0  # log positions read
    end: int = 0  # the log's last position when the pass began

    # Dispatch.
    def handlers(self) -> dict[type[Any], Callable[[Any], None]]:
        return {
            GameTable.Opened: self._table_opened,
            Round.Opened: self._opened,
            Round.BetPlaced: self._bet_placed,
            Round.BetWithdrawn: self._bet_withdrawn,
            Round.FaultRecorded: self._fault,
            Round.ActionRecorded: self._action,
            Round.Settled: self._settled,
            Round.Voided: self._voided,
            Round.Resumed: self._resumed,
            Round.Corrected: self._corrected,
        }

    def seen(self, at: Any) -> None:
        """An event decoded: the span of days the report covers."""
        day = utc_day(at)
        if self.first is None:
            self.first = day
        self.last = day

    def _counts(self, event: Any, round_: OpenRound) -> tuple[Counts, Counts]:
        key = (round_.game, round_.currency)
        day = self.days.setdefault((utc_day(event.timestamp), round_.table), Counts())
        return self.games.setdefault(key, Counts()), day

    def _round(self, event: Any) -> OpenRound | None:
        return self.open.get(str(event.originator_id))

    def _hourly(self, event: Any, round_: OpenRound, house: int) -> None:
        second = int(event.timestamp.timestamp())
        key = (second - second % self.resolution, round_.game, round_.currency)
        self.timeline[key] = self.timeline.get(key, 0) + house
        if len(self.timeline) > MAX_BUCKETS and self.resolution < RESOLUTIONS[-1]:
            self.resolution = RESOLUTIONS[RESOLUTIONS.index(self.resolution) + 1]
            coarse: dict[tuple[int, str, str], int] = {}
            for (start, game, currency), amount in self.timeline.items():
                bucket = (start - start % self.resolution, game, currency)
                coarse[bucket] = coarse.get(bucket, 0) + amount
            self.timeline = coarse

    # Handlers.
    def _table_opened(self, event: GameTable.Opened) -> None:
        self.tables[str(event.originator_id)] = (event.name, event.game, event.currency)

    def _opened(self, event: Round.Opened) -> None:
        theory = self.theories.of(event.game, event.rules_hash)
        key = (event.game, event.currency)
        self.theory_sources.setdefault(key, set()).add(theory.source)
        self.open[str(event.originator_id)] = OpenRound(
            str(event.table_id),
            event.game,
            event.currency,
            theory,
            self.theories.game(event.game),
        )

    def _bet_placed(self, event: Round.BetPlaced) -> None:
        round_ = self._round(event)
        if round_ is not None:
            label = bet_label(event.bet)
            family = family_of(round_.game_played, event.bet)
            round_.bets[event.bet_id] = (family, round_.theory.of(label))

    def _bet_withdrawn(self, event: Round.BetWithdrawn) -> None:
        round_ = self._round(event)
        if round_ is not None:
            round_.bets.pop(event.bet_id, None)

    def _fault(self, event: Any) -> None:
        round_ = self._round(event)
        if round_ is not None:
            for counts in self._counts(event, round_):
                counts.faults += 1

    def _action(self, event: Round.ActionRecorded) -> None:
        if is_fault(event.action, event.source):
            self._fault(event)

    def _resumed(self, event: Round.Resumed) -> None:
        round_ = self._round(event)
        if round_ is not None:
            for counts in self._counts(event, round_):
                counts.resumed += 1

    def _settled(self, event: Round.Settled) -> None:
        round_ = self._round(event)
        if round_ is None:
            return
        for result in event.results:
            round_.settle(result)
        staked = sum(int(r["stake"]) for r in event.results)
        returned = sum(int(r["returned"]) for r in event.results)
        for counts in self._counts(event, round_):
            counts.bets += len(event.results)
            counts.staked += staked
            counts.returned += returned
        self._hourly(event, round_, staked - returned)
        if event.over:
            self._end(event, round_)

    def _voided(self, event: Round.Voided) -> None:
        round_ = self._round(event)
        if round_ is None:
            return
        for counts in self._counts(event, round_):
            if event.operator is None:
                counts.voided_by_rules += 1
            else:
                counts.voided_by_operator += 1
        self._end(event, round_)

    def _end(self, event: Any, round_: OpenRound) -> None:
        del self.open[str(event.originator_id)]
        for counts in self._counts(event, round_):
            counts.rounds += 1
        families = self.returns.setdefault((round_.game, round_.currency), {})
        for kind, cluster in round_.clusters.items():
            if cluster.bets:
                families.setdefault(kind, Returns()).add(cluster)

    def _corrected(self, event: Round.Corrected) -> None:
        round_id = str(event.originator_id)
        round_ = self.open.get(round_id)
        ended = round_ is None
        if round_ is None:
            round_ = self._replay(event.originator_id, event.originator_version)
        before = {kind: (c.staked, c.returned) for kind, c in round_.clusters.items()}
        for result in event.reversed_results:
            round_.settle(result, -1)
        for result in event.results:
            round_.settle(result)
        change = sum(int(r["returned"]) for r in event.results) - sum(
            int(r["returned"]) for r in event.reversed_results
        )
        for counts in self._counts(event, round_):
            counts.corrections += 1
            counts.returned += change
        self._hourly(event, round_, -change)
        if ended:  # its clusters are in the sums already: change their returns
            families = self.returns.setdefault((round_.game, round_.currency), {})
            for kind, cluster in round_.clusters.items():
                staked, old = before.get(kind, (0, 0))
                if staked != cluster.staked:
                    raise VerificationError(f"correction of round {round_id} changed a stake")
                families.setdefault(kind, Returns()).rereturn(staked, old, cluster.returned)

    def _replay(self, round_id: UUID, before_version: int) -> OpenRound:
        """The round as it stood before event `before_version`, from its own stream."""
        saved, self.open = self.open, {}
        handlers = self.handlers()
        replayed = None
        try:
            for event in self.read_round(round_id):
                if event.originator_version >= before_version:
                    break
                if isinstance(event, Round.Corrected):
                    replayed = self.open.get(str(round_id)) or replayed
                    if replayed is not None:
                        for result in event.reversed_results:
                            replayed.settle(result, -1)
                        for result in event.results:
                            replayed.settle(result)
                    continue
                if type(event) in (Round.Opened, Round.BetPlaced, Round.BetWithdrawn):
                    handlers[type(event)](event)
                elif isinstance(event, Round.Settled):
                    found = self.open[str(round_id)]
                    for result in event.results:
                        found.settle(result)
                    replayed = found
            replayed = self.open.get(str(round_id)) or replayed
        finally:
            self.open = saved
        if replayed is None:
            raise VerificationError(f"corrected round {round_id} has no Round.Opened in its stream")
        return replayed

    # Reading the result.
    def daily(self) -> list[tuple[date, str, Counts]]:
        return [
            (date.fromisoformat(day), table, c) for (day, table), c in sorted(self.days.items())
        ]
