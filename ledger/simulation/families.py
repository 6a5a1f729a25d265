"""Bet families: the seven kinds of three-dice bet, by the bet id's prefix."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ledger.errors import ConfigError

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
