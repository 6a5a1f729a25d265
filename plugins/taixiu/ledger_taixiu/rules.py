"""Tài Xỉu / Sic Bo: the 50-bet catalogue, paytables as data, pure settlement.

The winning conditions are the game's and never change (docs/rules.md §1.1, seeds
000 and 004); only the multipliers differ from house to house. So a paytable
is plain data (bet id -> "pays X:1"), hashable into the rules profile, and
every function takes it as a parameter: the Vietnamese table and, say, an
Atlantic City Sic Bo table settle through the same code.

Money is integers only: a paytable holds integer multipliers, a win returns
`stake * (1 + X)`, and theoretical returns are exact `Fraction`s found by
enumerating all 216 equally likely outcomes.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations, product
from types import MappingProxyType
from typing import Final, TypeGuard

from ledger.plugins import ConfigError, InvalidCommandError

Dice = tuple[int, int, int]
# "Pays X:1" as the integer X; `single:N` pays by how many dice show N (1, 2, 3).
Payout = int | tuple[int, int, int]
Paytable = Mapping[str, Payout]

FACES: Final = range(1, 7)

# The catalogue, in a fixed display order (the paytable's keys are exactly these).
BET_IDS: Final[tuple[str, ...]] = (
    "small",
    "big",
    *(f"single:{n}" for n in FACES),
    *(f"specific_triple:{n}" for n in FACES),
    "any_triple",
    *(f"total:{t}" for t in range(4, 18)),
    *(f"specific_double:{n}" for n in FACES),
    *(f"combination:{a}-{b}" for a, b in combinations(FACES, 2)),
)
_BET_SET: Final = frozenset(BET_IDS)

# Every ordered throw of three fair dice, each with probability 1/216.
ALL_OUTCOMES: Final[tuple[Dice, ...]] = tuple(product(FACES, FACES, FACES))


def _is_multiplier(value: object) -> TypeGuard[int]:
    # bool is an int subclass; True must not pass for "pays 1:1".
    return type(value) is int and value >= 0


def check_paytable(paytable: Paytable) -> None:
    """Raise ConfigError unless `paytable` prices exactly the 50 bets with integers.

    Checked once when a table is built, so a typo (a float, a missing bet, a
    bet no code settles) fails at start-up, not at settlement.
    """
    keys = set(paytable)
    if keys != _BET_SET:
        missing = sorted(_BET_SET - keys)
        extra = sorted(map(str, keys - _BET_SET))
        raise ConfigError(
            f"paytable must price exactly the 50 bets: missing {missing}, extra {extra}"
        )
    for bet, pays in paytable.items():
        if bet.startswith("single:"):
            ok = isinstance(pays, tuple) and len(pays) == 3 and all(map(_is_multiplier, pays))
        else:
            ok = _is_multiplier(pays)
        if not ok:
            raise ConfigError(f"paytable entry {bet}: bad multiplier {pays!r}")


def make_paytable(
    *,
    small_big: int,
    single: tuple[int, int, int],
    specific_triple: int,
    any_triple: int,
    totals: tuple[int, int, int, int, int, int, int],
    specific_double: int,
    combination: int,
) -> Paytable:
    """A full, read-only paytable from the handful of numbers a house publishes.

    `totals` gives totals 4..10; T and 21 - T pay the same (the sum's
    distribution is symmetric), so 17..11 mirror them.
    """
    table: dict[str, Payout] = {"small": small_big, "big": small_big}
    table.update({f"single:{n}": single for n in FACES})
    table.update({f"specific_triple:{n}": specific_triple for n in FACES})
    table["any_triple"] = any_triple
    for low, pays in zip(range(4, 11), totals, strict=True):
        table[f"total:{low}"] = pays
        table[f"total:{21 - low}"] = pays
    table.update({f"specific_double:{n}": specific_double for n in FACES})
    table.update({f"combination:{a}-{b}": combination for a, b in combinations(FACES, 2)})
    ordered = {bet: table[bet] for bet in BET_IDS}
    check_paytable(ordered)
    return MappingProxyType(ordered)


# The paytable of docs/rules.md §1.1 (profiles `taixiu` and `sicbo-void`: the same table).
TAIXIU_PAYTABLE: Final = make_paytable(
    small_big=1,
    single=(1, 2, 3),
    specific_triple=150,
    any_triple=24,
    totals=(50, 18, 14, 12, 8, 6, 6),
    specific_double=8,
    combination=5,
)

# A common Atlantic City Sic Bo table, to show another house reuses the code.
ATLANTIC_CITY_PAYTABLE: Final = make_paytable(
    small_big=1,
    single=(1, 2, 3),
    specific_triple=180,
    any_triple=30,
    totals=(60, 30, 17, 12, 8, 6, 6),
    specific_double=10,
    combination=5,
)


def paytable_profile(paytable: Paytable) -> dict[str, int | list[int]]:
    """The paytable as JSON-safe data (lists, not tuples) for the signed rules profile."""
    check_paytable(paytable)
    return {bet: list(pays) if isinstance(pays, tuple) else pays for bet, pays in paytable.items()}


def parse_bet(bet: Mapping[str, object]) -> str:
    """The bet id of a bet given as `{"bet": "<id>"}`; InvalidCommandError otherwise.

    Ids must match the catalogue exactly (no `combination:2-1`, no
    `total:04`): one bet, one spelling, so equal bets hash equally.
    """
    if not isinstance(bet, Mapping) or set(bet) != {"bet"}:
        raise InvalidCommandError(
            f'a bet is {{"bet": <id>}}, got {reprlib.repr(bet)}', code="invalid_bet", param="bet"
        )
    bet_id = bet["bet"]
    if not isinstance(bet_id, str) or bet_id not in _BET_SET:
        raise InvalidCommandError(
            f"unknown bet {reprlib.repr(bet_id)}", code="unknown_bet", param="bet"
        )
    return bet_id


def _is_face(value: object) -> TypeGuard[int]:
    return type(value) is int and 1 <= value <= 6


def check_dice(dice: object) -> Dice:
    """Exactly three ints 1..6 (a list from JSON or a tuple), else InvalidCommandError."""
    if isinstance(dice, list | tuple) and len(dice) == 3:
        a, b, c = dice
        if _is_face(a) and _is_face(b) and _is_face(c):
            return (a, b, c)
    raise InvalidCommandError(
        f"dice must be three integers 1..6, got {reprlib.repr(dice)}",
        code="invalid_draw",
        param="dice",
    )


def _hits(bet_id: str, dice: Dice) -> int:
    """0 if the bet loses; else how it wins (dice showing N for `single:N`, 1 otherwise)."""
    kind, _, arg = bet_id.partition(":")
    total = sum(dice)
    triple = dice[0] == dice[1] == dice[2]
    if kind == "small":  # a triple loses even inside 4..10 (both seeds)
        return int(4 <= total <= 10 and not triple)
    if kind == "big":
        return int(11 <= total <= 17 and not triple)
    if kind == "any_triple":
        return int(triple)
    if kind == "combination":
        a, b = (int(face) for face in arg.split("-"))
        return int(a in dice and b in dice)
    n = int(arg)
    if kind == "single":
        return dice.count(n)
    if kind == "specific_triple":
        return int(dice.count(n) == 3)
    if kind == "specific_double":  # at least two: a triple of N wins too (docs/rules.md §1.1)
        return int(dice.count(n) >= 2)
    if kind == "total":
        return int(total == n)
    raise InvalidCommandError(
        f"unknown bet {bet_id!r}", code="unknown_bet", param="bet"
    )  # unreachable for catalogue ids


def returned(bet_id: str, stake: int, dice: Dice, paytable: Paytable) -> int:
    """What goes back to the wallet: 0 on a loss, `stake * (1 + X)` on an X:1 win.

    `single:N` pays k:1 when k dice show N, so its X is the paytable's k-th
    entry.
    """
    if not isinstance(bet_id, str) or bet_id not in _BET_SET:
        raise InvalidCommandError(
            f"unknown bet {reprlib.repr(bet_id)}", code="unknown_bet", param="bet"
        )
    if type(stake) is not int or stake < 1:
        raise InvalidCommandError(
            f"stake must be a positive integer, got {stake!r}", code="invalid_amount", param="stake"
        )
    hits = _hits(bet_id, check_dice(dice))
    if hits == 0:
        return 0
    try:
        pays = paytable[bet_id]
    except KeyError:
        raise ConfigError(f"paytable has no entry for {bet_id}") from None
    multiplier = pays[hits - 1] if isinstance(pays, tuple) else pays
    if not _is_multiplier(multiplier):
        raise ConfigError(f"paytable entry {bet_id}: bad multiplier {pays!r}")
    return stake * (1 + multiplier)


def theoretical_return(bet_id: str, paytable: Paytable) -> Fraction:
    """Expected amount returned per unit staked, exact, over all 216 outcomes.

    1 is a fair bet; 1 - return is the house edge.
    """
    back = sum(returned(bet_id, 1, dice, paytable) for dice in ALL_OUTCOMES)
    return Fraction(back, len(ALL_OUTCOMES))


@dataclass(frozen=True)
class PaytableRow:
    """One line of the displayed paytable."""

    bet: str
    pays: str  # "8:1", or "1:1 / 2:1 / 3:1" for a single
    theoretical_return: Fraction

    @property
    def house_edge(self) -> Fraction:
        return 1 - self.theoretical_return


def paytable_rows(paytable: Paytable) -> list[PaytableRow]:
    """The whole paytable, in catalogue order, with each bet's exact return."""
    check_paytable(paytable)
    rows = []
    for bet in BET_IDS:
        pays = paytable[bet]
        text = " / ".join(f"{x}:1" for x in pays) if isinstance(pays, tuple) else f"{pays}:1"
        rows.append(PaytableRow(bet, text, theoretical_return(bet, paytable)))
    return rows
