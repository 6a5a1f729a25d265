"""The seven kinds of three-dice bet (families), and how a simulated player
plays them: which family it picks how often, and how bold its stakes are.

The core asks for these through the games contract (capabilities
``bet-families`` and ``simulated-play``): the report's return per family,
`ledger simulate`'s players and its family table.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Final

from ledger.plugins import ConfigError

# Display order, with the bet-id prefixes each family covers.
FAMILIES: Final[dict[str, tuple[str, ...]]] = {
    "small/big": ("small", "big"),
    "single": ("single",),
    "specific triple": ("specific_triple",),
    "any triple": ("any_triple",),
    "total": ("total",),
    "specific double": ("specific_double",),
    "combination": ("combination",),
}
_BY_KIND: Final = {kind: family for family, kinds in FAMILIES.items() for kind in kinds}

# How often a simulated player picks each family, like a real three-dice
# table: small/big (Tài/Xỉu) most, then singles, totals and combinations,
# triples rarely. The order is the draw's: changing it changes every session.
FAMILY_WEIGHTS: Final = (
    ("small/big", 55),
    ("single", 11),
    ("total", 11),
    ("combination", 9),
    ("specific double", 7),
    ("any triple", 4),
    ("specific triple", 3),
)
# A stake is the player's unit times one of these: bolder on even money, small on long shots.
MULTIPLIERS: Final[Mapping[str, tuple[int, ...]]] = {
    "small/big": (1, 1, 1, 2, 2, 3, 5, 10),
    "single": (1, 1, 1, 2, 3),
    "combination": (1, 1, 2),
    "specific double": (1, 1, 2),
    "total": (1, 1, 2),
    "any triple": (1, 1, 2),
    "specific triple": (1,),
}
# What a dealer device says of a throw that cannot be used.
FAULT_REASONS: Final = (
    "die not flat",
    "dice stacked",
    "cocked die",
    "fewer than one bounce",
    "die left the bowl",
)


def family_of(bet_id: str) -> str:
    kind = bet_id.partition(":")[0]
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise ConfigError(f"bet {bet_id!r} is in no three-dice bet family") from None


def by_family(bet_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """A catalogue's bets grouped by family, every family present, catalogue order kept."""
    grouped: dict[str, list[str]] = {family: [] for family in FAMILIES}
    for bet_id in bet_ids:
        grouped[family_of(bet_id)].append(bet_id)
    empty = [family for family, bets in grouped.items() if not bets]
    if empty:
        raise ConfigError(f"the catalogue has no bets of the families {empty}")
    return {family: tuple(bets) for family, bets in grouped.items()}


def pick_bet(rng: random.Random, catalogue: Mapping[str, tuple[str, ...]]) -> str:
    """A family by how popular it is, then any of its bets."""
    families = [family for family, _ in FAMILY_WEIGHTS]
    weights = [weight for _, weight in FAMILY_WEIGHTS]
    return rng.choice(catalogue[rng.choices(families, weights=weights)[0]])
