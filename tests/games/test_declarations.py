"""What a game declares for the core (issue 41, item 2): `close_action`,
`fault_action` and `draws` are required, checked when the game loads and
against every step; a game without them, or with ones its moves contradict,
is refused with one PluginError naming the plugin and its version."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import ledger.plugins
from ledger.errors import PluginError
from ledger.plugins import CARDS, BetView, Draw, DrawRange, RecordedAction, Step, hookimpl
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import GameRegistry, LoadedGame
from tests.coin_game import CoinDefinition


def loaded(game: Any) -> dict[str, LoadedGame]:
    class Plugin:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(game)

    return get_plugin_manager(load_entry_points=False, extra=[("odd", Plugin(), "4.2")]).games()


class Undeclared:
    """The coin with one declaration taken away (the attribute raises, as if absent)."""

    def __init__(self, missing: str) -> None:
        self._coin, self._missing = CoinDefinition(), missing

    def __getattr__(self, name: str) -> Any:
        if name == self._missing:
            raise AttributeError(name)
        return getattr(self._coin, name)


def declaring(**declared: Any) -> CoinDefinition:
    game = CoinDefinition()
    for name, value in declared.items():
        setattr(game, name, value)
    return game


def test_the_declarations_are_part_of_the_plugin_api() -> None:
    assert {"DrawRange", "CARDS"} <= set(ledger.plugins.__all__)
    assert CARDS == {"low": 0, "high": 51}
    assert ledger.plugins.Game.__annotations__.keys() >= {"close_action", "fault_action", "draws"}


@pytest.mark.parametrize("missing", ["close_action", "fault_action", "draws"])
def test_a_game_that_declares_one_less_is_refused(missing: str) -> None:
    with pytest.raises(PluginError, match=rf"^plugin odd 4\.2: game coin declares no {missing} "):
        loaded(Undeclared(missing))


@pytest.mark.parametrize(
    ("declared", "says"),
    [
        ({"close_action": "no_more_bets"}, "declares close_action 'no_more_bets' but its first"),
        ({"close_action": ""}, "declares close_action '': not an action name"),
        ({"fault_action": "close_betting"}, "'close_betting' as both its close_action and"),
        ({"fault_action": 7}, "declares fault_action 7: not an action name"),
        ({"draws": ["dice"]}, "declares draws ['dice']: not a mapping"),
        ({"draws": {"coins": {"low": 0, "high": 1}}}, "of kind 'coins': the core draws only"),
        ({"draws": {"dice": {"low": 1, "high": 8}}}, "this ledger draws and checks dice 1..6"),
        ({"draws": {"cards": {"low": 0, "high": 53}}}, "this ledger draws and checks cards 0..51"),
    ],
)
def test_inconsistent_declarations_are_refused(declared: dict[str, Any], says: str) -> None:
    with pytest.raises(PluginError, match=r"^plugin odd 4\.2: game coin ") as refused:
        loaded(declaring(**declared))
    assert says in str(refused.value)


class DrawsUndeclaredCards(CoinDefinition):
    """Declares it draws nothing, then offers a move that deals a card."""

    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
        step = super().step(bets, actions)
        if step["moves"].get("dealer", {}).get("toss", 0) is None:
            card: Draw = {"kind": "cards", "count": 1}
            step["moves"]["dealer"]["peek"] = card
        return step


class OffersAnUndeclaredFault(CoinDefinition):
    fault_action = "misthrow"  # but its steps still offer the stored name `fault`


def test_a_step_contradicting_the_declarations_is_the_plugin_failing() -> None:
    closing: RecordedAction = {
        "actor": "dealer",
        "action": "close_betting",
        "args": {},
        "drawn": [],
    }
    for game, says in (
        (DrawsUndeclaredCards(), "offers dealer peek drawing cards, which the game does not"),
        (OffersAnUndeclaredFault(), "offers dealer 'fault', the name stored rounds give a faulty"),
    ):
        (coin,) = loaded(game).values()  # its first step is consistent: it loads
        with pytest.raises(PluginError, match=r"^plugin odd 4\.2: step ") as refused:
            coin.step({}, [closing])
        assert says in str(refused.value)


def test_the_range_a_game_declares_is_the_one_the_core_reads() -> None:
    declared: Mapping[str, DrawRange] = {"cards": CARDS}
    (coin,) = loaded(declaring(draws=declared)).values()
    assert coin.draw_range("cards") == CARDS
    assert (coin.close_action, coin.fault_action) == ("close_betting", "fault")


def test_simulated_faults_need_a_declared_fault() -> None:
    sys.path.insert(0, str(Path(__file__).parents[1] / "plugins" / "bau_cua"))
    from ledger_bau_cua.plugin import BauCua

    class NoFault(BauCua):
        fault_action = None  # yet its simulated dealer reports faulty draws

        def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
            step = super().step(bets, actions)
            for offered in step["moves"].values():
                offered.pop("misthrow", None)
            return step

    (game,) = loaded(NoFault("bau-cua")).values()
    play = game.simulated_play()
    assert play is not None
    with pytest.raises(PluginError, match="fault_reasons gives reasons, but the game has no"):
        play.fault_reasons()
