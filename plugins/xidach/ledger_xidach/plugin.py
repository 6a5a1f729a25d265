"""The plugin: two profiles of Xì dách, declared as data (RULES.md §2)."""

from __future__ import annotations

from ledger.plugins import hookimpl
from ledger.plugins.registry import GameRegistry
from ledger_xidach.game import XiDach
from ledger_xidach.rules import PROFILES


def games() -> list[XiDach]:
    """Every profile this plugin provides, in a fixed order."""
    return [XiDach(game_id, rules) for game_id, rules in PROFILES.items()]


@hookimpl
def ledger_register_games(registry: GameRegistry) -> None:
    for game in games():
        registry.add(game)
