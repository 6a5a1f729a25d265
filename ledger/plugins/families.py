"""A bet's label and family, as its game declares them (capability
``bet-families``), else the label's kind: ``seat`` of ``seat:2``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.errors import InvalidCommandError
from ledger.plugins.registry import LoadedGame


def bet_label(bet: Mapping[str, Any]) -> str:
    """The bet as its game's paytable names it (``small``, ``total:4``), else its fields."""
    if "bet" in bet:
        return str(bet["bet"])
    return ",".join(sorted(bet))


def family_of(game: LoadedGame | None, bet: Mapping[str, Any]) -> str:
    """The family `game` puts the canonical `bet` in; the label's kind when the
    game is not installed, declares no families or does not know the bet (a
    bet of rules it no longer plays)."""
    families = None if game is None else game.bet_families()
    if families is not None:
        try:
            return families.family_of(bet)
        except InvalidCommandError:
            pass
    return bet_label(bet).partition(":")[0]
