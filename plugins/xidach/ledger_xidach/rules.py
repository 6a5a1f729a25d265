"""Xì dách profiles as data (RULES.md §2): every option an operator may set.

A profile is a plain JSON-safe dict (the core hashes it into the rules hash
every round pins) parsed once into a typed, validated `XiDachRules`, so a
typo fails at start-up (ConfigError), never at settlement.

Payouts are ``[numerator, denominator]`` of integers: a win returns
``stake + stake * numerator // denominator`` minor units (floor: a house
that pays 3:2 on an odd stake keeps the half unit; no float touches money).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ledger.errors import ConfigError

ACE_RULES: Final = ("by-hand-size", "any", "one-or-ten")
MAX_SEATS: Final = 9  # a table has 1..9 player seats (RULES §2)
DEFAULT_SEATS: Final = 5
# Ngũ linh is five cards scoring 16-21 whatever the minimum (seed: "16 - 21").
NGU_LINH_MIN: Final = 16


@dataclass(frozen=True)
class XiDachRules:
    ace_rule: str = "by-hand-size"
    xi_dach_tens: bool = True  # false: only A+J/Q/K is xì dách
    min_score: int = 16  # "đủ tuổi"; some houses 14
    seats: int = DEFAULT_SEATS
    max_cards: int = 5
    deck: int = 52
    win_pays: tuple[int, int] = (1, 1)
    xi_ban_pays: tuple[int, int] = (1, 1)
    xi_dach_pays: tuple[int, int] = (1, 1)
    dealer_bust_pays_all_at: int = 28  # "rút 28 trở lên vẫn phải đền"

    def __post_init__(self) -> None:
        if self.ace_rule not in ACE_RULES:
            raise ConfigError(f"ace_rule must be one of {', '.join(ACE_RULES)}: {self.ace_rule!r}")
        if type(self.xi_dach_tens) is not bool:
            raise ConfigError("xi_dach_tens must be true or false")
        _int_in("min_score", self.min_score, 2, 21)
        _int_in("seats", self.seats, 1, MAX_SEATS)
        if self.max_cards != 5 or self.deck != 52:
            raise ConfigError("xì dách is played with a 52-card deck and five cards at most")
        _int_in("dealer_bust_pays_all_at", self.dealer_bust_pays_all_at, 22, 99)
        for name in ("win_pays", "xi_ban_pays", "xi_dach_pays"):
            pays = getattr(self, name)
            if not (
                isinstance(pays, tuple)
                and len(pays) == 2
                and all(type(x) is int for x in pays)
                and pays[0] >= 0
                and pays[1] >= 1
            ):
                raise ConfigError(f"{name} must be [numerator >= 0, denominator >= 1]: {pays!r}")

    def profile(self) -> dict[str, Any]:
        """The JSON-safe rules data the core hashes."""
        return {
            "game": "xidach",
            "ace_rule": self.ace_rule,
            "xi_dach_tens": self.xi_dach_tens,
            "min_score": self.min_score,
            "ngu_linh_min": NGU_LINH_MIN,
            "seats": self.seats,
            "max_cards": self.max_cards,
            "deck": self.deck,
            "win_pays": list(self.win_pays),
            "xi_ban_pays": list(self.xi_ban_pays),
            "xi_dach_pays": list(self.xi_dach_pays),
            "rounding": "floor",
            "dealer_bust_pays_all_at": self.dealer_bust_pays_all_at,
            # Seat 1 is at the dealer's right: dealing right to left is seat 1, 2, ...
            "deal_order": "ascending-seats-then-dealer",
        }

    @classmethod
    def from_profile(cls, data: Mapping[str, Any]) -> XiDachRules:
        """Parse operator data (e.g. a JSON profile); unknown keys are refused."""
        known = {f for f in cls.__dataclass_fields__}
        derived = {"game", "ngu_linh_min", "rounding", "deal_order"}
        extra = set(data) - known - derived
        if extra:
            raise ConfigError(f"unknown xì dách option(s): {', '.join(sorted(extra))}")
        options: dict[str, Any] = {}
        for key in known & set(data):
            value = data[key]
            options[key] = tuple(value) if isinstance(value, list) else value
        rules = cls(**options)
        if rules.profile() != {**rules.profile(), **dict(data)}:
            raise ConfigError("a derived xì dách option differs from what the code implements")
        return rules


def _int_in(name: str, value: object, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise ConfigError(f"{name} must be an integer {low}..{high}: {value!r}")


def paid(stake: int, pays: tuple[int, int]) -> int:
    """What a winning bet returns: the stake plus the win, floored to a minor unit."""
    return stake + stake * pays[0] // pays[1]


# The seed as written: every win 1:1, minimum 16, aces by hand size.
XIDACH: Final = XiDachRules()
# A house variant, configured without code: lower minimum, richer naturals.
XIDACH_HOUSE: Final = XiDachRules(
    ace_rule="any", min_score=14, xi_ban_pays=(2, 1), xi_dach_pays=(3, 2)
)
PROFILES: Final[dict[str, XiDachRules]] = {"xidach": XIDACH, "xidach-house": XIDACH_HOUSE}
