"""What a session did, counted in integers as it happens.

Stakes and returns are whole minor units; `expected` is the exact amount the
paytable would return on average for the same stakes (each stake times its
bet's theoretical return, a `Fraction`), so an observed return can be set
beside the theoretical one without a float.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ledger.simulation.config import TableSpec


@dataclass
class Stakes:
    """Settled bets: how many, staked, returned, and the paytable's expectation."""

    bets: int = 0
    staked: int = 0
    returned: int = 0
    expected: Fraction = field(default_factory=Fraction)
    unpriced: int = 0  # stakes on bets with no exact return (a card game's)

    def add(self, stake: int, returned: int, theoretical: Fraction | None) -> None:
        self.bets += 1
        self.staked += stake
        self.returned += returned
        if theoretical is None:
            self.unpriced += stake
        else:
            self.expected += stake * theoretical

    def merge(self, other: Stakes) -> None:
        self.bets += other.bets
        self.staked += other.staked
        self.returned += other.returned
        self.expected += other.expected
        self.unpriced += other.unpriced

    @property
    def house(self) -> int:
        """The house's result: stakes kept less winnings paid (negative: it lost)."""
        return self.staked - self.returned

    @property
    def observed_return(self) -> Fraction | None:
        return Fraction(self.returned, self.staked) if self.staked else None

    @property
    def theoretical_return(self) -> Fraction | None:
        """The paytable's return for this mix of bets (stake-weighted); None when
        some of them have no exact return."""
        return self.expected / self.staked if self.staked and not self.unpriced else None


@dataclass
class TableTally:
    spec: TableSpec
    turns: bool = False  # its game is played in turns (else one draw a round)
    rounds_settled: int = 0
    rounds_voided: int = 0
    faults: int = 0
    reopened: int = 0  # faulty draws after which betting reopened
    voided_stakes: int = 0  # stakes handed back by voided rounds
    settled: Stakes = field(default_factory=Stakes)

    @property
    def rounds(self) -> int:
        return self.rounds_settled + self.rounds_voided


@dataclass
class Tally:
    tables: dict[str, TableTally] = field(default_factory=dict)
    families: dict[str, Stakes] = field(default_factory=dict)  # of one-draw games' bets
    bets_placed: int = 0
    bets_withdrawn: int = 0
    bets_voided: int = 0  # standing in a round that was voided
    players_seated: int = 0  # at the start
    players_joined: int = 0  # later
    players_left: int = 0
    top_ups: int = 0
    seeds_committed: int = 0
    seeds_revealed: int = 0
    device_reports: int = 0  # one-draw games' draws and faulty draws a device reported, signed
    card_reports: int = 0  # moves of games played in turns a dealer device reported, signed
    deposited: int = 0
    withdrawn: int = 0  # cashed out by players who left

    def family(self, name: str) -> Stakes:
        """A family's line of the family table (made, in order, when first named)."""
        return self.families.setdefault(name, Stakes())

    def settled(
        self, table: str, family: str, stake: int, returned: int, theory: Fraction | None
    ) -> None:
        self.tables[table].settled.add(stake, returned, theory)
        self.family(family).add(stake, returned, theory)

    def settled_unpriced(self, table: str, stake: int, returned: int) -> None:
        """A bet of a game played in turns: counted by its table (and game), in no family."""
        self.tables[table].settled.add(stake, returned, None)

    def voided(self, table: str, stake: int) -> None:
        self.bets_voided += 1
        self.tables[table].voided_stakes += stake

    @property
    def total(self) -> Stakes:
        whole = Stakes()
        for table in self.tables.values():
            whole.merge(table.settled)
        return whole

    @property
    def family_bets(self) -> Stakes:
        """Every bet of the family table (its `all` line): the one-draw games'."""
        whole = Stakes()
        for family in self.families.values():
            whole.merge(family)
        return whole

    def games(self) -> dict[str, tuple[int, Stakes]]:
        """Per game, in table order: rounds played and settled bets."""
        found: dict[str, tuple[int, Stakes]] = {}
        for table in self.tables.values():
            rounds, stakes = found.get(table.spec.game, (0, Stakes()))
            stakes.merge(table.settled)
            found[table.spec.game] = (rounds + table.rounds, stakes)
        return found

    @property
    def rounds_settled(self) -> int:
        return sum(t.rounds_settled for t in self.tables.values())

    @property
    def rounds_voided(self) -> int:
        return sum(t.rounds_voided for t in self.tables.values())

    @property
    def faults(self) -> int:
        return sum(t.faults for t in self.tables.values())
