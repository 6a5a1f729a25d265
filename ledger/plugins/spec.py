"""The hook specifications the core owns. Every hook is prefixed ``ledger_``.

The game itself is typed by `ledger.games.api.Game` (one contract); these
hooks only hand games to the core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.plugins import hookspec

if TYPE_CHECKING:
    from ledger.plugins.registry import GameRegistry


@hookspec
def ledger_register_games(registry: GameRegistry) -> None:
    """Register the games (rules profiles) this plugin provides.

    Called once per plugin, the first time the core asks for games (never at
    import time). Call ``registry.add(game)`` for each `Game`; return nothing.
    """


@hookspec
def ledger_register_variants(registry: GameRegistry) -> None:
    """The same hook under its first name, kept so plugins written for it still
    load: the registry takes `Game` objects all the same."""
