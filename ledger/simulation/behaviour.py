"""How the simulated players and dealers behave: every choice, from one `random.Random`.

Pure functions of the generator and the state they are given, so a session
with the same seed makes the same choices. Amounts are integers (whole chips).
Which bet a player picks and how bold its stake is are the game's to say
(its ``simulated-play`` capability, `ledger.games.api.SimulatedPlay`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Final, TypeVar

from ledger.domain.round_records import Limits
from ledger.simulation.config import CHIP

T = TypeVar("T")

# A player's usual bet (the unit) and how common each is.
UNITS: Final = (
    (10_000, 25),
    (20_000, 20),
    (50_000, 25),
    (100_000, 15),
    (200_000, 8),
    (500_000, 5),
    (1_000_000, 2),
)
BETS_PER_TURN: Final = ((1, 50), (2, 30), (3, 15), (4, 5))

PLAY_CHANCE: Final = 75  # percent of seated players who bet in a round
WITHDRAW_CHANCE: Final = 3  # percent of bets taken back before betting closes
REOPENED_WITHDRAW_CHANCE: Final = 15  # ... once a faulty draw reopened betting
REOPENED_BET_CHANCE: Final = 25  # percent of seated players who add a bet then
TOP_UP_CHANCE: Final = 60  # a player who runs low tops up, else leaves
MAX_TOP_UPS: Final = 3
CASH_OUT_CHANCE: Final = 5  # per round, a player who has doubled their money leaves
MOVE_CHANCE: Final = 2  # per round, a player moves to another table
REPLACE_CHANCE: Final = 90  # a player who leaves is replaced by a newcomer
DEALER_SHIFT: Final = 20  # rounds a dealer deals before a break


def weighted(rng: random.Random, pairs: Sequence[tuple[T, int]]) -> T:
    values = [value for value, _ in pairs]
    return rng.choices(values, weights=[weight for _, weight in pairs])[0]


def chance(rng: random.Random, percent: int) -> bool:
    return rng.randrange(100) < percent


def pick_unit(rng: random.Random) -> int:
    return weighted(rng, UNITS)


def pick_bankroll(rng: random.Random, unit: int) -> int:
    return unit * rng.randint(30, 120)


def pick_top_up(rng: random.Random, unit: int) -> int:
    return unit * rng.randint(20, 60)


def pick_bet_count(rng: random.Random) -> int:
    return weighted(rng, BETS_PER_TURN)


def pick_stake(
    rng: random.Random,
    unit: int,
    multipliers: Sequence[int],
    limits: Limits,
    room: int,
    balance: int,
) -> int | None:
    """The unit times one of the game's multipliers for the bet, in whole chips
    within the table's limits, the player's room left in the round and the
    wallet; None if that is less than the minimum bet."""
    wanted = unit * rng.choice(multipliers)
    stake = min(wanted, limits["max_bet"], room, balance) // CHIP * CHIP
    return stake if stake >= limits["min_bet"] else None
