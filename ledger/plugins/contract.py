"""The contract every game plugin must pass: subclass `GameContract`, set
`plugin` (the plugin object: module or instance), and run it with pytest in
the plugin's tests. It needs pytest and hypothesis, which the core's
`plugin-testing` extra installs (`pip install "casino-ledger[plugin-testing]"`).

Like eventsourcing's recorder contract tests: the core states once what a
game must do, and every plugin proves it, with hypothesis walking random
legal paths through each of its games:

- replaying the same actions gives the same step (and changes no input);
- every reachable step offers some move, or is over;
- no bet is settled twice, and a step settles only standing bets;
- every settlement conserves money (returns are ints >= 0) and an over round
  has every bet settled or voided;
- what a game declares for the report and `ledger simulate` holds:
  ``bet-families`` puts every catalogue bet in exactly one family, the one
  `family_of` names; ``simulated-play`` picks catalogue bets, stakes them by
  positive multipliers, and either plays a one-draw round (betting closes,
  then one move draws dice) or plays rounds of turns to their end with moves
  its own step offers;
- what the core reads of the game holds: its first step offers its
  `close_action`, taking it closes betting, its `fault_action` (if any) is a
  move its play offers and takes a reason, and every draw is of a kind it
  declares, in its declared range (a renamed action fails here);
- a plugin implementing ``ledger_game_from_rules`` builds from each of its
  games' rules data a game that plays exactly as that game, and refuses
  rules data with an option it does not know (`GameRulesContract`,
  `ledger.plugins.rules_contract`).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.errors import InvalidCommandError
from ledger.games.api import DECK_SIZE, SETTLEMENT_API, BetView, Draw, RecordedAction, Step
from ledger.games.one_draw import one_draw
from ledger.plugins.manager import Plugins, get_plugin_manager
from ledger.plugins.registry import LoadedGame, rules_hash
from ledger.plugins.rules_contract import (
    MAX_ACTIONS,
    GameRulesContract,
    implements_game_from_rules,
    legal_walk,
)


class GameContract(GameRulesContract):
    """Subclass with `plugin` = the plugin object; optionally `action_args`."""

    plugin: ClassVar[Any]
    plugin_name: ClassVar[str] = "plugin-under-test"
    #: Arguments the walk gives an action (by action name); others get {}, and
    #: the game's `fault_action` a reason.
    action_args: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    def plugins_under_test(self) -> Plugins:
        """The plugin alone, loaded as the core loads every plugin."""
        return get_plugin_manager(
            load_entry_points=False, extra=[(self.plugin_name, self.plugin, "0+contract")]
        )

    @pytest.fixture
    def games(self) -> dict[str, LoadedGame]:
        found = self.plugins_under_test().games()
        assert found, "the plugin registers no game"
        return found

    def args_for(self, game: LoadedGame, action: str) -> dict[str, Any]:
        """The arguments a walk gives `action` of `game`."""
        if action in self.action_args:
            return dict(self.action_args[action])
        return {"reason": "cocked"} if action == game.fault_action else {}

    def test_its_close_action_closes_betting(self, games: dict[str, LoadedGame]) -> None:
        for game in games.values():
            first = game.step({}, [])
            closers = [a for a, offered in first["moves"].items() if game.close_action in offered]
            assert closers, (
                f"{game.id}: declares close_action {game.close_action!r}, its first step "
                f"offers {first['moves']}"
            )
            args = game.validate_args(closers[0], game.close_action, {})
            closing: RecordedAction = {
                "actor": closers[0],
                "action": game.close_action,
                "args": args,
                "drawn": [],
            }
            assert not game.step({}, [closing])["betting"], (
                f"{game.id}: its close_action {game.close_action!r} leaves betting open"
            )

    def test_its_fault_action_is_a_move_it_offers(self, games: dict[str, LoadedGame]) -> None:
        for game in games.values():
            fault = game.fault_action
            if fault is None:
                continue
            offered: set[str] = set()
            found = self._fault_offered(game, fault, offered)
            assert found is not None, (
                f"{game.id}: declares fault_action {fault!r}, but no step of 20 walks "
                f"offers it (they offer {', '.join(sorted(offered))})"
            )
            args = game.validate_args(found, fault, {"reason": "cocked"})
            assert args.get("reason") == "cocked", f"{game.id}: {fault} drops its reason: {args}"

    def _fault_offered(self, game: LoadedGame, fault: str, offered: set[str]) -> str | None:
        """The first actor seeded walks find offered `fault`, noting every move seen."""
        for seed in range(20):
            for _, _, step in legal_walk(game, random.Random(seed), self.args_for):
                for actor, moves in step["moves"].items():
                    offered.update(moves)
                    if fault in moves:
                        return actor
        return None

    def test_declares_id_rules_bets_and_api(self, games: dict[str, LoadedGame]) -> None:
        for game_id, game in games.items():
            assert game.id == game_id and game_id.strip() == game_id
            json.dumps(game.rules, allow_nan=False)  # plain JSON data
            assert game.rules_hash == rules_hash(copy.deepcopy(dict(game.rules)))
            bets = list(game.bets)
            assert bets and len(bets) == len(set(bets))
            assert game.settlement_api == SETTLEMENT_API

    def test_betting_opens_first(self, games: dict[str, LoadedGame]) -> None:
        for game in games.values():
            step = game.step({}, [])
            assert step["betting"] and not step["over"] and not step["settle"]

    def test_every_catalogue_bet_validates(self, games: dict[str, LoadedGame]) -> None:
        for game in games.values():
            for bet_id in game.bets:
                canonical = game.validate_bet({"bet": bet_id}, {})
                assert game.validate_bet(canonical, {}) == canonical  # idempotent

    def test_unknown_bets_are_refused(self, games: dict[str, LoadedGame]) -> None:
        for game in games.values():
            for bad in ({"bet": "no-such-bet"}, {}, {"bet": 7}):
                with pytest.raises(InvalidCommandError):
                    game.validate_bet(bad, {})

    def test_bet_families_hold_the_catalogue(self, games: dict[str, LoadedGame]) -> None:
        for game in games.values():
            families = game.bet_families()
            if families is None:
                continue
            listed = [bet for bets in families.families().values() for bet in bets]
            assert sorted(listed) == sorted(game.bets), f"{game.id}: families != catalogue"
            for family, bets in families.families().items():
                for bet_id in bets:
                    canonical = game.validate_bet({"bet": bet_id}, {})
                    assert families.family_of(canonical) == family, f"{game.id}: {bet_id}"

    def test_simulated_play_picks_and_stakes_catalogue_bets(
        self, games: dict[str, LoadedGame]
    ) -> None:
        for game in games.values():
            play = game.simulated_play()
            if play is None:
                continue
            rng = random.Random(0)
            for _ in range(50):
                assert play.pick_bet(rng) in game.bets  # (checked when guarded, too)
            for bet_id in game.bets:
                assert all(m > 0 for m in play.stake_multipliers(bet_id))
            assert all(reason.strip() for reason in play.fault_reasons())
            assert 0 <= play.seats() <= len(game.bets), f"{game.id}: more seats than bets"

    def test_simulated_rounds_play_to_their_end(self, games: dict[str, LoadedGame]) -> None:
        for game in games.values():
            play = game.simulated_play()
            if play is None:
                continue
            if not play.seats():
                assert one_draw(game) is not None, f"{game.id}: a one-draw game with no draw"
                assert play.simulated_round({}) is None
                continue
            for seed in range(5):
                self._play_simulated(game, play.seats(), random.Random(seed))

    @staticmethod
    def _play_simulated(game: LoadedGame, seats: int, rng: random.Random) -> None:
        play = game.simulated_play()
        assert play is not None
        bets: dict[str, BetView] = {}
        for n, bet_id in enumerate(list(game.bets)[:seats]):
            canonical = game.validate_bet({"bet": bet_id}, bets)
            bets[f"b{n}"] = {"account_id": f"a{n}", "bet": canonical, "stake": 100}
        replica = play.simulated_round(bets)
        assert replica is not None, f"{game.id}: seats players but gives no round to play"
        actions: list[RecordedAction] = []
        deck = list(range(DECK_SIZE))
        rng.shuffle(deck)
        for _ in range(MAX_ACTIONS):
            step = game.step(bets, actions)
            move = replica.next_move()
            if move is None:
                assert step["over"], f"{game.id}: its strategies stop before the round ends"
                return
            actor, action, draw = move
            offered = step["moves"].get(actor, {})
            assert action in offered, f"{game.id}: strategy chose {actor} {action}, not offered"
            assert offered[action] == draw, f"{game.id}: {action} draws other than its step says"
            count = 0 if draw is None else draw["count"]
            if draw is not None and draw["kind"] == "dice":
                faces = game.draw_range("dice")
                drawn = [rng.randint(faces["low"], faces["high"]) for _ in range(count)]
            else:
                drawn, deck = deck[:count], deck[count:]
            args = game.validate_args(actor, action, {})
            actions.append({"actor": actor, "action": action, "args": args, "drawn": drawn})
            replica.apply(actor, action, drawn)
        pytest.fail(f"{game.id}: a simulated round with no end after {MAX_ACTIONS} actions")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # One hypothesis test per subclass: a test inherited by several contract
        # classes would run from several executors in one session, which
        # hypothesis refuses (HealthCheck.differing_executors: the suite failed
        # whenever two plugins' contract tests ran in one process).
        cls.test_random_legal_walks_keep_the_contract = _walks_test()  # type: ignore[method-assign]
        plugin = getattr(cls, "plugin", None)
        if plugin is not None and not implements_game_from_rules(plugin):
            # No hook: nothing of it to test (pytest collects no None).
            cls.test_game_from_rules_plays_as_each_of_its_games = None  # type: ignore[assignment]
            cls.test_game_from_rules_refuses_an_option_it_does_not_know = None  # type: ignore[assignment]

    def test_random_legal_walks_keep_the_contract(
        self, games: dict[str, LoadedGame], data: st.DataObject
    ) -> None:
        """Replaced in every subclass by `_walks_test()` (see `__init_subclass__`)."""
        raise NotImplementedError  # GameContract itself is never collected

    def _walk(self, game: LoadedGame, data: st.DataObject) -> None:
        catalogue = list(game.bets)
        count = data.draw(st.integers(1, 6), label="bets")
        bets: dict[str, BetView] = {}
        for i in range(count):
            bet_id = data.draw(st.sampled_from(catalogue), label="bet")
            stake = data.draw(st.integers(1, 10_000), label="stake")
            try:
                bet = game.validate_bet({"bet": bet_id}, bets)
            except InvalidCommandError:
                # A game may refuse a bet given those placed (a seat taken):
                # the first bet on an empty table is always accepted above.
                if not bets:
                    raise
                continue
            bets[f"b{i}"] = {"account_id": f"a{i % 3}", "bet": bet, "stake": stake}
        actions: list[RecordedAction] = []
        dealt: set[int] = set()
        settled: dict[str, int] = {}
        step = game.step(bets, actions)
        for _ in range(MAX_ACTIONS):
            self._check_replay(game, bets, actions, step)
            if step["over"]:
                break
            moves = [(a, m, d) for a, offered in step["moves"].items() for m, d in offered.items()]
            assert moves, f"{game.id}: a step that is not over offers no move: {step['state']}"
            actor, action, draw = data.draw(st.sampled_from(moves), label="move")
            args = game.validate_args(actor, action, self.args_for(game, action))
            drawn = self._draw(game, data, draw, dealt)
            actions.append({"actor": actor, "action": action, "args": args, "drawn": drawn})
            step = game.step(bets, actions)
            for bet_id, returned in step["settle"].items():
                assert bet_id not in settled, f"{game.id}: bet {bet_id} settled twice"
                assert type(returned) is int and returned >= 0
                settled[bet_id] = returned
            if step["void"] is not None:
                assert step["over"], f"{game.id}: a void that does not end the round"
        else:
            pytest.fail(f"{game.id}: no end after {MAX_ACTIONS} actions")
        if step["void"] is None:
            assert set(settled) == set(bets), f"{game.id}: over with bets unsettled"

    @staticmethod
    def _draw(
        game: LoadedGame, data: st.DataObject, draw: Draw | None, dealt: set[int]
    ) -> list[int]:
        if draw is None:
            return []
        assert draw["kind"] in game.draws, f"{game.id}: draws {draw['kind']}, not declared"
        if draw["kind"] == "dice":
            faces = game.draw_range("dice")
            values = st.integers(faces["low"], faces["high"])
            return [data.draw(values, label="die") for _ in range(draw["count"])]
        left = sorted(set(range(DECK_SIZE)) - dealt)
        cards = data.draw(st.permutations(left), label="cards")[: draw["count"]]
        dealt.update(cards)
        return list(cards)

    @staticmethod
    def _check_replay(
        game: LoadedGame, bets: dict[str, BetView], actions: list[RecordedAction], step: Step
    ) -> None:
        frozen = copy.deepcopy((bets, actions))
        again = game.step(copy.deepcopy(bets), copy.deepcopy(actions))
        assert again == step, f"{game.id}: replaying the same actions gave another step"
        assert (bets, actions) == frozen, f"{game.id}: step changed its inputs"


def _walks_test() -> Any:
    # A walk draws many values per example: on a loaded machine (or in a long
    # suite, with a large heap to collect) drawing them can exceed hypothesis's
    # one-second too_slow budget, which fails the test without any counterexample.
    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )
    @given(data=st.data())
    def test_random_legal_walks_keep_the_contract(
        self: GameContract, games: dict[str, LoadedGame], data: st.DataObject
    ) -> None:
        """Random legal walks through every game keep the contract."""
        for game in games.values():
            self._walk(game, data)

    return test_random_legal_walks_keep_the_contract


# The name plugins' tests used before games.
VariantContract = GameContract
