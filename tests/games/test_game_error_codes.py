"""A game's refusals carry the catalogue's codes (issue 41, item 4): the
shipped games name the bet or the arguments at fault; a code a plugin makes up
reaches a program as `invalid_command` (only the catalogue's codes go out),
with the plugin's message and param unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ledger.errors import InvalidCommandError
from ledger.games.api import BetView
from ledger.plugins import hookimpl
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import GameRegistry
from tests.coin_game import CoinDefinition, coin_games


class MadeUpCode(CoinDefinition):
    def validate_bet(self, bet: Mapping[str, Any], placed: Mapping[str, BetView]) -> dict[str, Any]:
        raise InvalidCommandError("no bets today", code="closed_for_lunch", param="bet")


class MadeUpCodePlugin:
    @hookimpl
    def ledger_register_games(self, registry: GameRegistry) -> None:
        registry.add(MadeUpCode())


def refusal(call: Any, *args: Any) -> InvalidCommandError:
    with pytest.raises(InvalidCommandError) as refused:
        call(*args)
    return refused.value


def test_the_shipped_games_name_the_bet_and_the_arguments_at_fault() -> None:
    games = get_plugin_manager().games()
    taixiu, xidach = games["taixiu"], games["xidach"]
    unknown = refusal(taixiu.validate_bet, {"bet": "purple"})
    assert (unknown.code, unknown.param) == ("unknown_bet", "bet")
    shapeless = refusal(taixiu.validate_bet, {"on": "big"})
    assert (shapeless.code, shapeless.param) == ("invalid_bet", "bet")
    no_reason = refusal(taixiu.validate_args, "dealer", "fault", {})
    assert (no_reason.code, no_reason.param) == ("invalid_action_args", "args")
    seat = refusal(xidach.validate_bet, {"bet": "seat:99"})
    assert (seat.code, seat.param) == ("unknown_bet", "bet")


def test_a_code_a_plugin_makes_up_goes_out_as_invalid_command() -> None:
    game = coin_games(plugin=MadeUpCodePlugin())["coin"]
    refused = refusal(game.validate_bet, {"on": "heads"})
    assert (refused.code, refused.param, str(refused)) == (
        "invalid_command",
        "bet",
        "no bets today",
    )
