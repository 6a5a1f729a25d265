"""Tài Xỉu paytable: every (outcome, bet) against a table written out independently here.

Nothing below calls the module's win logic to compute an expectation: the bet
list, both paytables and the winning conditions are hard-coded in this file,
and the theoretical returns are exact fractions worked out by hand (counts of
winning outcomes out of 216 shown beside each).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from ledger_taixiu.rules import (
    ATLANTIC_CITY_PAYTABLE,
    BET_IDS,
    TAIXIU_PAYTABLE,
    check_dice,
    check_paytable,
    parse_bet,
    paytable_profile,
    paytable_rows,
    returned,
    theoretical_return,
)

from ledger.plugins import ConfigError, InvalidCommandError, canonical

# -- the independent table ------------------------------------------------------------------

ALL_BETS = [
    "small", "big",
    "single:1", "single:2", "single:3", "single:4", "single:5", "single:6",
    "specific_triple:1", "specific_triple:2", "specific_triple:3",
    "specific_triple:4", "specific_triple:5", "specific_triple:6",
    "any_triple",
    "total:4", "total:5", "total:6", "total:7", "total:8", "total:9", "total:10",
    "total:11", "total:12", "total:13", "total:14", "total:15", "total:16", "total:17",
    "specific_double:1", "specific_double:2", "specific_double:3",
    "specific_double:4", "specific_double:5", "specific_double:6",
    "combination:1-2", "combination:1-3", "combination:1-4", "combination:1-5",
    "combination:1-6", "combination:2-3", "combination:2-4", "combination:2-5",
    "combination:2-6", "combination:3-4", "combination:3-5", "combination:3-6",
    "combination:4-5", "combination:4-6", "combination:5-6",
]  # fmt: skip

# docs/rules.md §1.1, the totals column ("Bảng trả thưởng" / "Tỷ lệ thanh toán").
TAIXIU_TOTALS = {4: 50, 5: 18, 6: 14, 7: 12, 8: 8, 9: 6, 10: 6,
                 11: 6, 12: 6, 13: 8, 14: 12, 15: 14, 16: 18, 17: 50}  # fmt: skip
TAIXIU = {"triple": 150, "any_triple": 24, "double": 8, "combination": 5, "totals": TAIXIU_TOTALS}

AC_TOTALS = {4: 60, 5: 30, 6: 17, 7: 12, 8: 8, 9: 6, 10: 6,
             11: 6, 12: 6, 13: 8, 14: 12, 15: 17, 16: 30, 17: 60}  # fmt: skip
ATLANTIC_CITY = {"triple": 180, "any_triple": 30, "double": 10, "combination": 5,
                 "totals": AC_TOTALS}  # fmt: skip


def expected_returned(bet: str, a: int, b: int, c: int, table: dict[str, Any]) -> int:
    """What a stake of 100 gets back, by the rules as written in the seeds."""
    stake = 100
    total = a + b + c
    triple = a == b and b == c
    kind, _, arg = bet.partition(":")
    win_multiplier: int | None = None  # None: the bet loses
    if kind == "small":
        if total in range(4, 11) and not triple:
            win_multiplier = 1
    elif kind == "big":
        if total in range(11, 18) and not triple:
            win_multiplier = 1
    elif kind == "single":
        n = int(arg)
        shown = (a == n) + (b == n) + (c == n)
        if shown:
            win_multiplier = shown  # 1:1, 2:1, 3:1
    elif kind == "specific_triple":
        if a == b == c == int(arg):
            win_multiplier = table["triple"]
    elif kind == "any_triple":
        if triple:
            win_multiplier = table["any_triple"]
    elif kind == "total":
        if total == int(arg):
            win_multiplier = table["totals"][total]
    elif kind == "specific_double":
        n = int(arg)
        if (a == n and b == n) or (a == n and c == n) or (b == n and c == n):
            win_multiplier = table["double"]
    elif kind == "combination":
        low, high = arg.split("-")
        if {int(low), int(high)} <= {a, b, c}:
            win_multiplier = table["combination"]
    else:
        raise AssertionError(bet)
    return 0 if win_multiplier is None else stake + stake * win_multiplier


OUTCOMES = [(a, b, c) for a in range(1, 7) for b in range(1, 7) for c in range(1, 7)]
TABLES = {
    "taixiu": (TAIXIU_PAYTABLE, TAIXIU),
    "atlantic-city": (ATLANTIC_CITY_PAYTABLE, ATLANTIC_CITY),
}


# -- the catalogue ------------------------------------------------------------------------


def test_fifty_bets_exactly() -> None:
    assert len(ALL_BETS) == len(set(ALL_BETS)) == 50
    assert list(BET_IDS) == ALL_BETS
    assert list(TAIXIU_PAYTABLE) == ALL_BETS
    assert list(ATLANTIC_CITY_PAYTABLE) == ALL_BETS
    assert len(OUTCOMES) == 216


def test_paytable_data_as_the_seeds_print_it() -> None:
    for n in range(1, 7):
        assert TAIXIU_PAYTABLE[f"single:{n}"] == (1, 2, 3)
        assert TAIXIU_PAYTABLE[f"specific_triple:{n}"] == 150
        assert TAIXIU_PAYTABLE[f"specific_double:{n}"] == 8
    assert TAIXIU_PAYTABLE["small"] == TAIXIU_PAYTABLE["big"] == 1
    assert TAIXIU_PAYTABLE["any_triple"] == 24
    for total, pays in TAIXIU_TOTALS.items():
        assert TAIXIU_PAYTABLE[f"total:{total}"] == pays
    assert all(TAIXIU_PAYTABLE[b] == 5 for b in ALL_BETS if b.startswith("combination:"))


def test_paytables_are_read_only() -> None:
    with pytest.raises(TypeError):
        TAIXIU_PAYTABLE["small"] = 2  # type: ignore[index]


# -- every outcome x every bet ----------------------------------------------------------------


@pytest.mark.parametrize("name", TABLES)
def test_every_outcome_every_bet(name: str) -> None:
    paytable, table = TABLES[name]
    mismatches = [
        (dice, bet, returned(bet, 100, dice, paytable), expected_returned(bet, *dice, table))
        for dice in OUTCOMES
        for bet in ALL_BETS
        if returned(bet, 100, dice, paytable) != expected_returned(bet, *dice, table)
    ]
    assert mismatches == []


def test_some_throws_by_hand() -> None:
    t = TAIXIU_PAYTABLE
    assert returned("small", 100, (1, 2, 3), t) == 200
    assert returned("small", 100, (2, 2, 2), t) == 0  # a triple loses inside 4..10
    assert returned("big", 100, (5, 5, 5), t) == 0
    assert returned("big", 100, (4, 3, 4), t) == 200
    assert returned("single:4", 100, (4, 3, 4), t) == 300  # two fours: 2:1
    assert returned("single:6", 100, (6, 6, 6), t) == 400  # three sixes: 3:1
    assert returned("single:1", 100, (4, 3, 4), t) == 0
    assert returned("specific_double:4", 100, (4, 4, 4), t) == 900  # at least two
    assert returned("specific_triple:4", 100, (4, 4, 4), t) == 15_100
    assert returned("any_triple", 100, (4, 4, 4), t) == 2_500
    assert returned("combination:3-6", 100, (4, 3, 6), t) == 600  # combination 3-6: both show, 5:1
    assert returned("combination:3-6", 100, (3, 3, 4), t) == 0
    assert returned("total:17", 7, (6, 6, 5), t) == 7 * 51
    assert returned("total:4", 1, (1, 1, 2), ATLANTIC_CITY_PAYTABLE) == 61


# -- theoretical returns ----------------------------------------------------------------------

# Winning outcomes out of 216, by hand:
#   small: sum <= 10 in 1+3+6+10+15+21+25+27 = 108 outcomes (totals 3..10); minus the
#          triples 111, 222, 333 -> 105 wins; 105 * 2 / 216 = 35/36 (big by symmetry).
#   single:N: exactly one N 3*25 = 75 (x2), exactly two 3*5 = 15 (x3), three 1 (x4):
#          (150 + 45 + 4) / 216 = 199/216.
#   specific_triple: 1 outcome, 151/216.  any_triple: 6 outcomes, 6*25/216 = 150/216 = 25/36.
#   total:T ways 4:3 5:6 6:10 7:15 8:21 9:25 10:27 (symmetric): 4: 3*51 = 153/216 = 17/24,
#          5: 6*19 = 114/216 = 19/36, 6: 10*15 = 150/216 = 25/36, 7: 15*13 = 195/216 = 65/72,
#          8: 21*9 = 189/216 = 7/8, 9: 25*7 = 175/216, 10: 27*7 = 189/216 = 7/8.
#   specific_double: exactly two 15 + the triple 1 = 16; 16*9 = 144/216 = 2/3.
#   combination: 216 - 125 (no A) - 125 (no B) + 64 (neither) = 30; 30*6 = 180/216 = 5/6.
TAIXIU_RETURNS = {
    "small": Fraction(35, 36), "big": Fraction(35, 36),
    "single": Fraction(199, 216),
    "specific_triple": Fraction(151, 216),
    "any_triple": Fraction(25, 36),
    "total:4": Fraction(17, 24), "total:5": Fraction(19, 36), "total:6": Fraction(25, 36),
    "total:7": Fraction(65, 72), "total:8": Fraction(7, 8), "total:9": Fraction(175, 216),
    "total:10": Fraction(7, 8),
    "specific_double": Fraction(2, 3),
    "combination": Fraction(5, 6),
}  # fmt: skip
# Atlantic City: triple 181/216; any triple 6*31 = 186/216 = 31/36; double 16*11 = 176/216
# = 22/27; total 4: 3*61 = 183/216 = 61/72, 5: 6*31 = 31/36, 6: 10*18 = 180/216 = 5/6.
AC_RETURNS = {
    **TAIXIU_RETURNS,
    "specific_triple": Fraction(181, 216),
    "any_triple": Fraction(31, 36),
    "total:4": Fraction(61, 72), "total:5": Fraction(31, 36), "total:6": Fraction(5, 6),
    "specific_double": Fraction(22, 27),
}  # fmt: skip


def hand_return(bet: str, known: dict[str, Fraction]) -> Fraction:
    if bet in known:
        return known[bet]
    kind, _, arg = bet.partition(":")
    if kind == "total":  # T and 21 - T have the same ways and the same pay
        return known[f"total:{min(int(arg), 21 - int(arg))}"]
    return known[kind]


@pytest.mark.parametrize("name,known", [("taixiu", TAIXIU_RETURNS), ("atlantic-city", AC_RETURNS)])
def test_theoretical_returns(name: str, known: dict[str, Fraction]) -> None:
    paytable, _ = TABLES[name]
    for bet in ALL_BETS:
        got = theoretical_return(bet, paytable)
        assert isinstance(got, Fraction)
        assert got == hand_return(bet, known), bet


def test_a_few_returns_spelled_out() -> None:
    assert theoretical_return("small", TAIXIU_PAYTABLE) == Fraction(210, 216) == Fraction(35, 36)
    assert theoretical_return("any_triple", TAIXIU_PAYTABLE) == Fraction(150, 216)
    assert theoretical_return("single:3", TAIXIU_PAYTABLE) == Fraction(199, 216)
    assert theoretical_return("specific_double:2", TAIXIU_PAYTABLE) == Fraction(144, 216)


def test_paytable_rows_for_display() -> None:
    rows = paytable_rows(TAIXIU_PAYTABLE)
    assert [row.bet for row in rows] == ALL_BETS
    by_bet = {row.bet: row for row in rows}
    assert by_bet["single:2"].pays == "1:1 / 2:1 / 3:1"
    assert by_bet["total:4"].pays == "50:1"
    assert by_bet["small"].theoretical_return == Fraction(35, 36)
    assert by_bet["small"].house_edge == Fraction(1, 36)
    assert by_bet["combination:2-5"].house_edge == Fraction(1, 6)


def test_profile_is_canonical_json() -> None:
    profile = paytable_profile(TAIXIU_PAYTABLE)
    assert profile["single:1"] == [1, 2, 3]
    assert profile["total:9"] == 6
    encoded = canonical(profile)
    assert encoded == canonical(paytable_profile(TAIXIU_PAYTABLE))
    assert encoded != canonical(paytable_profile(ATLANTIC_CITY_PAYTABLE))


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize("bet", ALL_BETS)
def test_parse_every_bet(bet: str) -> None:
    assert parse_bet({"bet": bet}) == bet


BAD_BETS: list[Any] = [
    {"bet": "total:3"}, {"bet": "total:18"}, {"bet": "total:04"},
    {"bet": "combination:2-1"}, {"bet": "combination:1-1"}, {"bet": "combination:1-2-3"},
    {"bet": "single:0"}, {"bet": "single:7"}, {"bet": "specific_triple:"},
    {"bet": "specific_double:1.0"}, {"bet": "SMALL"}, {"bet": " small"}, {"bet": "tai"},
    {"bet": ""}, {"bet": 1}, {"bet": None}, {"bet": ["small"]},
    {"bet": "small", "stake": 100}, {"on": "small"}, {},
    "small", ["small"], None,
]  # fmt: skip


@pytest.mark.parametrize("bet", BAD_BETS, ids=repr)
def test_bad_bet_is_rejected(bet: Any) -> None:
    with pytest.raises(InvalidCommandError):
        parse_bet(bet)


@pytest.mark.parametrize("bet", ["total:3", "single:7", "combination:2-1", "", None])
def test_returned_rejects_unknown_bet(bet: Any) -> None:
    with pytest.raises(InvalidCommandError):
        returned(bet, 100, (1, 2, 3), TAIXIU_PAYTABLE)


@pytest.mark.parametrize("stake", [0, -1, True, 1.5, "100", None])
def test_returned_rejects_bad_stake(stake: Any) -> None:
    with pytest.raises(InvalidCommandError):
        returned("small", stake, (1, 2, 3), TAIXIU_PAYTABLE)


@pytest.mark.parametrize("dice", [[1, 2, 3], (6, 6, 6), [1, 1, 1]])
def test_good_dice(dice: Any) -> None:
    assert check_dice(dice) == tuple(dice)
    assert type(check_dice(dice)) is tuple


BAD_DICE: list[Any] = [
    [1, 2], [1, 2, 3, 4], [], [0, 1, 2], [7, 1, 1], [1, 2, -3],
    [True, 1, 1], [1, False, 1], [1.0, 2, 3], [1, 2, "3"], "123", b"\x01\x02\x03",
    {1, 2, 3}, {"a": 1, "b": 2, "c": 3}, None, 6, [[1], 2, 3],
]  # fmt: skip


@pytest.mark.parametrize("dice", BAD_DICE, ids=repr)
def test_bad_dice_are_rejected(dice: Any) -> None:
    with pytest.raises(InvalidCommandError):
        check_dice(dice)
    with pytest.raises(InvalidCommandError):
        returned("small", 100, dice, TAIXIU_PAYTABLE)


def _without(bet: str) -> dict[str, Any]:
    return {k: v for k, v in TAIXIU_PAYTABLE.items() if k != bet}


BAD_PAYTABLES: dict[str, Callable[[], dict[str, Any]]] = {
    "missing bet": lambda: _without("total:9"),
    "extra bet": lambda: {**TAIXIU_PAYTABLE, "total:3": 180},
    "float": lambda: {**TAIXIU_PAYTABLE, "any_triple": 24.0},
    "bool": lambda: {**TAIXIU_PAYTABLE, "small": True},
    "negative": lambda: {**TAIXIU_PAYTABLE, "big": -1},
    "single not a triple": lambda: {**TAIXIU_PAYTABLE, "single:1": 1},
    "single too short": lambda: {**TAIXIU_PAYTABLE, "single:1": (1, 2)},
    "single list": lambda: {**TAIXIU_PAYTABLE, "single:1": [1, 2, 3]},
    "tuple elsewhere": lambda: {**TAIXIU_PAYTABLE, "small": (1, 1, 1)},
}


@pytest.mark.parametrize("make", BAD_PAYTABLES.values(), ids=BAD_PAYTABLES.keys())
def test_bad_paytable_is_refused(make: Callable[[], dict[str, Any]]) -> None:
    with pytest.raises(ConfigError):
        check_paytable(make())
    with pytest.raises(ConfigError):
        paytable_rows(make())


def test_returned_refuses_a_bad_entry_it_needs() -> None:
    paytable: dict[str, Any] = {**TAIXIU_PAYTABLE, "any_triple": 24.0}
    assert returned("any_triple", 100, (1, 2, 3), paytable) == 0  # a loss reads no entry
    with pytest.raises(ConfigError):
        returned("any_triple", 100, (2, 2, 2), paytable)
    with pytest.raises(ConfigError):
        returned("any_triple", 100, (2, 2, 2), _without("any_triple"))
