"""The plugin: two profiles of Xì dách, declared as data (RULES.md §2)."""

from __future__ import annotations

from typing import Any, cast

from ledger.plugins import hookimpl
from ledger.plugins.registry import VariantRegistry
from ledger_xidach.game import XiDach
from ledger_xidach.rules import PROFILES


def games() -> list[XiDach]:
    """Every profile this plugin provides, in a fixed order."""
    return [XiDach(game_id, rules) for game_id, rules in PROFILES.items()]


@hookimpl
def ledger_register_variants(registry: VariantRegistry) -> None:
    for game in games():
        # The registry takes an api.Game once the core runs games through
        # the new contract; until then its annotation names the old protocol.
        registry.add(cast(Any, game))
