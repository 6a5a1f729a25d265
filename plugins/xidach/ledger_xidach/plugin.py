"""The plugin: the shipped profiles of Xì dách and an operator's own, all data
(docs/rules.md §2, `ledger_xidach.profile_files`), and the game of any valid
profile's rules data, wherever it comes from (a bundle's games.jsonl)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.plugins import ConfigError, GameRegistry, hookimpl, rules_hash
from ledger_xidach.game import XiDach
from ledger_xidach.profile_files import PROFILES, operator_profiles
from ledger_xidach.rules import XiDachRules


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


def game_from_rules(game_id: str, rules: Mapping[str, Any]) -> XiDach | None:
    """The game `game_id` under the rules data of a Xì dách profile (what
    `XiDachRules.profile()` gives, so what rounds pinned), or None: data of
    another game, options this release does not implement, or data that parse
    but are not exactly a profile's (a key missing, a value spelled otherwise)."""
    if rules.get("game") != "xidach":
        return None
    try:
        game = XiDach(game_id, XiDachRules.from_profile(rules))
    except ConfigError:
        return None
    return game if rules_hash(game.rules) == rules_hash(rules) else None


@hookimpl
def ledger_game_from_rules(game_id: str, rules: Mapping[str, Any]) -> XiDach | None:
    # An operator's profile verified on a machine where its file is not installed.
    return game_from_rules(game_id, rules)
