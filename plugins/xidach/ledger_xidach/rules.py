"""Xì dách rules as data (docs/rules.md §2): every option an operator may set.

A profile is a plain JSON-safe dict (the core hashes it into the rules hash
every round pins) parsed once into a typed, validated `XiDachRules`, so a
typo fails at start-up (ConfigError), never at settlement. The profiles
themselves are JSON files (`ledger_xidach.profile_files`).

Payouts are ``[numerator, denominator]`` of integers: a win returns
``stake + stake * numerator // denominator`` minor units (floor: a house
that pays 3:2 on an odd stake keeps the half unit; no float touches money).
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ledger.plugins import ConfigError

ACE_RULES: Final = ("by-hand-size", "any", "one-or-ten")
MAX_SEATS: Final = 9  # a table has 1..9 player seats (RULES §2)
DEFAULT_SEATS: Final = 5
# Ngũ linh is five cards scoring 16-21 whatever the minimum (seed: "16 - 21").
NGU_LINH_MIN: Final = 16
#: What an operator chooses: a profile file gives every one (max_cards and deck
#: are fixed by the game, the keys `profile()` adds are derived).
OPTIONS: Final = (
    "ace_rule",
    "xi_dach_tens",
    "min_score",
    "seats",
    "win_pays",
    "xi_ban_pays",
    "xi_dach_pays",
    "dealer_bust_pays_all_at",
)
# A payout's terms are bounded: a typo (300 for 3) is refused, not paid.
MAX_PAYS_TERM: Final = 100


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
            raise ConfigError(
                f"ace_rule must be one of {', '.join(ACE_RULES)}: {reprlib.repr(self.ace_rule)}"
            )
        if type(self.xi_dach_tens) is not bool:
            raise ConfigError("xi_dach_tens must be true or false")
        _int_in("min_score", self.min_score, 2, 21)
        _int_in("seats", self.seats, 1, MAX_SEATS)
        if (self.max_cards, self.deck) != (5, 52) or not (
            type(self.max_cards) is type(self.deck) is int
        ):
            raise ConfigError("xì dách is played with a 52-card deck and five cards at most")
        _int_in("dealer_bust_pays_all_at", self.dealer_bust_pays_all_at, 22, 99)
        for name in ("win_pays", "xi_ban_pays", "xi_dach_pays"):
            pays = getattr(self, name)
            if not (
                isinstance(pays, tuple)
                and len(pays) == 2
                and all(type(x) is int for x in pays)
                and 0 <= pays[0] <= MAX_PAYS_TERM
                and 1 <= pays[1] <= MAX_PAYS_TERM
            ):
                raise ConfigError(
                    f"{name} must be [numerator 0..{MAX_PAYS_TERM}, "
                    f"denominator 1..{MAX_PAYS_TERM}]: {reprlib.repr(_as_given(pays))}"
                )

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
        """Parse operator data (e.g. a profile file's options, or `profile()`'s
        own output); unknown keys are refused, and a derived key is accepted
        only with the value the code implements."""
        known = set(cls.__dataclass_fields__)
        derived = set(cls().profile()) - known
        extra = set(data) - known - derived
        if extra:
            raise ConfigError(f"unknown xì dách option(s): {', '.join(sorted(extra))}")
        options: dict[str, Any] = {}
        for key in known & set(data):
            value = data[key]
            options[key] = tuple(value) if isinstance(value, list) else value
        rules = cls(**options)
        implemented = rules.profile()
        for key in sorted(derived & set(data)):
            if data[key] != implemented[key]:
                raise ConfigError(
                    f"{key} is derived, not an option: this game implements "
                    f"{implemented[key]!r}, not {reprlib.repr(data[key])}"
                )
        return rules


def _int_in(name: str, value: object, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise ConfigError(f"{name} must be an integer {low}..{high}: {reprlib.repr(value)}")


def _as_given(value: object) -> object:
    # from_profile turns a JSON list into a tuple: show it as the operator wrote it.
    return list(value) if isinstance(value, tuple) else value


def paid(stake: int, pays: tuple[int, int]) -> int:
    """What a winning bet returns: the stake plus the win, floored to a minor unit."""
    return stake + stake * pays[0] // pays[1]
