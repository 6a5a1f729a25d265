"""The hook specifications the core owns. Every hook is prefixed ``ledger_``.

The game itself is typed by `ledger.games.api.Game` (one contract); these
hooks only hand games to the core (docs/plugins.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ledger.plugins import hookspec

if TYPE_CHECKING:
    from ledger.games.api import Game
    from ledger.plugins.registry import GameRegistry


@hookspec
def ledger_register_games(registry: GameRegistry) -> None:
    """Register the games (rules profiles) this plugin provides.

    Called once per plugin, the first time the core asks for games (never at
    import time). Call ``registry.add(game)`` for each `Game`; return nothing.
    """


@hookspec
def ledger_game_from_rules(game_id: str, rules: Mapping[str, Any]) -> Game | None:
    """Build the game `game_id` plays under `rules`, if this plugin implements them.

    `rules` is a game's rules data as rounds pinned it (plain JSON: the object
    whose RFC 8785 canonical bytes hash to the rules hash; the core has checked
    that before the call, and hands the plugin a copy). Return a `Game` whose
    `id` is `game_id` and whose `rules` are exactly `rules` (the same canonical
    bytes), or None when this plugin does not recognise them, e.g. another
    game's rules or an option this release does not implement: that is not an
    error. Raising is the plugin failing (one `PluginError` naming it).

    The core asks only for (game id, rules hash) pairs no installed game
    declares, when a check needs one: `ledger verify --bundle` at level
    settlement, for the rules a bundle's games.jsonl carries. Rounds are only
    ever opened with installed games (`ledger_register_games`).
    """
