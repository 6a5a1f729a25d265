"""The plugin: the shipped profiles of Xì dách and an operator's own, all data
(RULES.md §2, `ledger_xidach.profile_files`)."""

from __future__ import annotations

from collections.abc import Mapping

from ledger.plugins import hookimpl
from ledger.plugins.registry import GameRegistry
from ledger_xidach.game import XiDach
from ledger_xidach.profile_files import PROFILES, operator_profiles


def games(taken: Mapping[str, str] | None = None) -> list[XiDach]:
    """Every profile this plugin provides: the shipped ones, then those in
    $LEDGER_XIDACH_PROFILES (read on each call); `taken` maps the game ids
    other plugins already provide to who provides them."""
    owners = {**(taken or {}), **{game_id: "shipped with the plugin" for game_id in PROFILES}}
    profiles = {**PROFILES, **operator_profiles(owners)}
    return [XiDach(game_id, rules) for game_id, rules in profiles.items()]


@hookimpl
def ledger_register_games(registry: GameRegistry) -> None:
    # The games registered so far are other plugins': an operator's profile
    # claiming one of their ids is refused naming its file.
    taken = {
        game_id: f"provided by {g.plugin} {g.version}" for game_id, g in registry.games.items()
    }
    for game in games(taken):
        registry.add(game)
