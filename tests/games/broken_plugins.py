"""Plugins that break the games contract on purpose, each in one way the
contract tests must catch (tests/games/test_contract_catches.py runs
`GameContract` against each): a renamed close, a renamed fault, and a
``ledger_game_from_rules`` hook that ignores the rules data it is given.
Each is Bầu Cua (tests/plugins/bau_cua, on the path) with one thing wrong;
`Honest` is the control: two profiles and a hook that builds either."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger_bau_cua.plugin import BauCua, from_rules

from ledger.plugins import GameRegistry, hookimpl

PROFILES = ((1, 2), (2, 3))  # (pays, void_after) of "bau-cua" and "bau-cua-rich"


def register_profiles(registry: GameRegistry) -> None:
    registry.add(BauCua("bau-cua", *PROFILES[0]))
    registry.add(BauCua("bau-cua-rich", *PROFILES[1]))


class Honest:
    @hookimpl
    def ledger_register_games(self, registry: GameRegistry) -> None:
        register_profiles(registry)

    @hookimpl
    def ledger_game_from_rules(self, game_id: str, rules: Mapping[str, Any]) -> BauCua | None:
        return from_rules(game_id, rules)


class ClosesUnderAnotherName(BauCua):
    close_action = "close_betting"  # what the core once assumed; its step offers no_more_bets


class RenamedClose:
    @hookimpl
    def ledger_register_games(self, registry: GameRegistry) -> None:
        registry.add(ClosesUnderAnotherName("bau-cua"))


class FaultsUnderAnotherName(BauCua):
    fault_action = "fumble"  # declared; its step still offers misthrow


class RenamedFault:
    @hookimpl
    def ledger_register_games(self, registry: GameRegistry) -> None:
        registry.add(FaultsUnderAnotherName("bau-cua"))


class DefaultForAnyRules(Honest):
    """Its default game, whatever Bầu Cua rules it is given."""

    @hookimpl
    def ledger_game_from_rules(self, game_id: str, rules: Mapping[str, Any]) -> BauCua | None:
        return BauCua(game_id) if rules.get("game") == "bau-cua" else None


class Relabelled(BauCua):
    def __init__(self, game_id: str, rules: Mapping[str, Any]) -> None:
        super().__init__(game_id)  # plays the default...
        self.rules = dict(rules)  # ...under the rules it was given


class RelabelsItsDefault(Honest):
    """Its default game's play under the rules it is given."""

    @hookimpl
    def ledger_game_from_rules(self, game_id: str, rules: Mapping[str, Any]) -> BauCua | None:
        return Relabelled(game_id, rules) if rules.get("game") == "bau-cua" else None


class TakesAnyOption(BauCua):
    def __init__(self, game_id: str, rules: Mapping[str, Any]) -> None:
        super().__init__(game_id, rules["pays"], rules["void_after"])
        self.rules = dict(rules)  # an unknown option kept, and ignored


class AcceptsUnknownOptions(Honest):
    """Reads the options it knows and keeps whatever else the data hold."""

    @hookimpl
    def ledger_game_from_rules(self, game_id: str, rules: Mapping[str, Any]) -> BauCua | None:
        return TakesAnyOption(game_id, rules) if rules.get("game") == "bau-cua" else None
