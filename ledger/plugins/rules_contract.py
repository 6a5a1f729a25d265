"""The contract of ``ledger_game_from_rules`` (part of `GameContract`): a plugin
that builds games from rules data builds, from each of its games' rules, a
game that plays exactly as that game, and builds nothing from data with an
option it does not know. A hook that ignores the data it is given (its
default game under the given rules, or another game's rules) fails here, as
does one that takes an unknown option for a default.

`legal_walk` is the seeded random walk both contracts replay a game along."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Final

import pytest

from ledger.errors import InvalidCommandError, PluginError
from ledger.games.api import DECK_SIZE, BetView, RecordedAction, Step
from ledger.plugins.manager import Plugins
from ledger.plugins.registry import LoadedGame

MAX_ACTIONS: Final = 200  # a walk longer than this is a game that never ends
WALKS: Final = 10  # seeded walks a game built from rules data replays
#: An option no game knows: rules data holding it are no game's.
UNKNOWN_OPTION: Final = "contract-unknown-option"

Walked = tuple[dict[str, BetView], list[RecordedAction], Step]
ArgsFor = Callable[[LoadedGame, str], dict[str, Any]]


def legal_walk(game: LoadedGame, rng: random.Random, args_for: ArgsFor) -> Iterator[Walked]:
    """A few catalogue bets, then moves the game offers chosen with `rng` (dice
    in its declared range, cards off a shuffled deck) until the round is over:
    the bets, the actions so far and the step after them, at each point."""
    bets: dict[str, BetView] = {}
    for n in range(rng.randint(1, 3)):
        try:
            canonical = game.validate_bet({"bet": rng.choice(list(game.bets))}, bets)
        except InvalidCommandError:
            continue  # refused given those placed (a seat taken)
        bets[f"b{n}"] = {"account_id": f"a{n}", "bet": canonical, "stake": 100 * (n + 1)}
    deck = list(range(DECK_SIZE))
    rng.shuffle(deck)
    actions: list[RecordedAction] = []
    for _ in range(MAX_ACTIONS):
        step = game.step(bets, actions)
        yield bets, actions, step
        moves = [(a, m, d) for a, offered in step["moves"].items() for m, d in offered.items()]
        if step["over"] or not moves:
            return
        actor, action, draw = rng.choice(moves)
        drawn: list[int] = []
        if draw is not None and draw["kind"] == "dice":
            faces = game.draw_range("dice")
            drawn = [rng.randint(faces["low"], faces["high"]) for _ in range(draw["count"])]
        elif draw is not None:
            drawn, deck = deck[: draw["count"]], deck[draw["count"] :]
        given = args_for(game, action)
        try:
            args = game.validate_args(actor, action, given)
        except InvalidCommandError as exc:
            pytest.fail(
                f"{game.id}: the walk's {actor} {action} {given} is refused ({exc}): is it "
                f"the game's fault? its fault_action is {game.fault_action!r}; else give the "
                "move's arguments in action_args"
            )
        actions = [*actions, {"actor": actor, "action": action, "args": args, "drawn": drawn}]
    pytest.fail(f"{game.id}: no end after {MAX_ACTIONS} actions")


class GameRulesContract:
    """The ``ledger_game_from_rules`` tests; `GameContract` keeps them only for a
    plugin that implements the hook."""

    plugin: ClassVar[Any]
    plugin_name: ClassVar[str]

    def args_for(self, game: LoadedGame, action: str) -> dict[str, Any]:
        raise NotImplementedError  # `GameContract.args_for`

    def plugins_under_test(self) -> Plugins:
        raise NotImplementedError  # `GameContract.plugins_under_test`

    def test_game_from_rules_plays_as_each_of_its_games(self, games: dict[str, LoadedGame]) -> None:
        plugins = self.plugins_under_test()
        for game in games.values():
            rebuilt = f"{game.id}-from-rules"
            try:
                built = plugins.game_from_rules(rebuilt, copy.deepcopy(dict(game.rules)))
            except PluginError as exc:
                pytest.fail(f"{game.id}: ledger_game_from_rules ignores the rules data: {exc}")
            assert built is not None, (
                f"{game.id}: ledger_game_from_rules builds no game from {game.id}'s own rules"
            )
            declared = (built.close_action, built.fault_action, dict(built.draws))
            assert declared == (game.close_action, game.fault_action, dict(game.draws)), (
                f"{game.id}: the game built from its rules data declares {declared}"
            )
            for seed in range(WALKS):
                for bets, actions, step in legal_walk(game, random.Random(seed), self.args_for):
                    assert built.step(bets, actions) == step, (
                        f"{game.id}: the game ledger_game_from_rules builds from its rules "
                        f"data plays otherwise after {len(actions)} actions (walk {seed}): "
                        "the hook ignores the rules data it is given"
                    )

    def test_game_from_rules_refuses_an_option_it_does_not_know(
        self, games: dict[str, LoadedGame]
    ) -> None:
        plugins = self.plugins_under_test()
        for game in games.values():
            data = {**copy.deepcopy(dict(game.rules)), UNKNOWN_OPTION: True}
            try:
                built = plugins.game_from_rules(game.id, data)
            except PluginError as exc:
                pytest.fail(
                    f"{game.id}: ledger_game_from_rules accepts rules with an option it "
                    f"does not know ({UNKNOWN_OPTION!r}) and builds another game: {exc}"
                )
            assert built is None, (
                f"{game.id}: ledger_game_from_rules accepts rules with an option it does "
                f"not know ({UNKNOWN_OPTION!r})"
            )


def implements_game_from_rules(plugin: Any) -> bool:
    return callable(getattr(plugin, "ledger_game_from_rules", None))
