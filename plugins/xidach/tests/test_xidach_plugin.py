"""The distribution: found through its entry point, profiles as data, the contract's shape."""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

import ledger_xidach.plugin
import pytest
from ledger_xidach.game import XiDach
from ledger_xidach.profile_files import PROFILES, XIDACH
from ledger_xidach.rules import XiDachRules

from ledger.plugins import SETTLEMENT_API, ConfigError, canonical, rules_hash
from ledger.plugins.manager import get_plugin_manager


class Collecting:
    def __init__(self) -> None:
        self.added: list[Any] = []
        self.games: dict[str, Any] = {}  # no other plugin's games

    def add(self, game: Any) -> None:
        self.added.append(game)


def test_the_entry_point_names_the_plugin_module() -> None:
    found = [p for p in entry_points(group="casino_ledger") if p.name == "xidach"]
    assert len(found) == 1 and found[0].value == "ledger_xidach.plugin"
    assert found[0].dist is not None and found[0].dist.name == "casino-ledger-xidach"
    assert found[0].load() is ledger_xidach.plugin


def test_the_hook_registers_both_profiles_on_the_games_contract() -> None:
    registry = Collecting()
    ledger_xidach.plugin.ledger_register_games(registry)  # type: ignore[arg-type]
    assert [g.id for g in registry.added] == ["xidach", "xidach-house"]
    for game in registry.added:
        assert game.settlement_api == SETTLEMENT_API == 2
        # No exact paytable (decisions matter); simulate plays it by its strategies.
        assert game.capabilities == frozenset({"simulated-play"})
        assert list(game.bets) == [f"seat:{n}" for n in range(1, game.table_rules.seats + 1)]
        canonical(dict(game.rules))  # plain JSON, hashable by the core
        for name in ("validate_bet", "validate_args", "step"):
            assert callable(getattr(game, name))


def test_profiles_carry_every_option_of_rules_section_2() -> None:
    seed = XiDach("xidach", XIDACH).rules
    assert seed == {
        "game": "xidach",
        "ace_rule": "by-hand-size",
        "xi_dach_tens": True,
        "min_score": 16,
        "ngu_linh_min": 16,
        "seats": 5,
        "max_cards": 5,
        "deck": 52,
        "win_pays": [1, 1],
        "xi_ban_pays": [1, 1],
        "xi_dach_pays": [1, 1],
        "rounding": "floor",
        "dealer_bust_pays_all_at": 28,
        "deal_order": "ascending-seats-then-dealer",
    }
    house = PROFILES["xidach-house"].profile()
    assert (house["min_score"], house["xi_ban_pays"], house["xi_dach_pays"]) == (14, [2, 1], [3, 2])
    assert house["ace_rule"] == "any"
    assert rules_hash(seed) != rules_hash(house)  # the hash covers the options


def test_an_operator_profile_round_trips_and_bad_options_are_refused() -> None:
    data = PROFILES["xidach-house"].profile()
    assert XiDachRules.from_profile(data) == PROFILES["xidach-house"]
    assert XiDachRules.from_profile({"min_score": 15, "seats": 9}).profile()["seats"] == 9
    for bad, why in [
        ({"ace_rule": "eleven"}, "ace_rule"),
        ({"seats": 10}, "seats"),
        ({"seats": 0}, "seats"),
        ({"min_score": 16.0}, "min_score"),
        ({"xi_ban_pays": [1.5, 1]}, "xi_ban_pays"),
        ({"xi_dach_pays": [3, 0]}, "xi_dach_pays"),
        ({"xi_dach_tens": "yes"}, "xi_dach_tens"),
        ({"max_cards": 6}, "five cards"),
        ({"colour": "red"}, "unknown"),
        ({"ngu_linh_min": 15}, "derived"),
    ]:
        with pytest.raises(ConfigError, match=why):
            XiDachRules.from_profile(bad)


def test_a_game_is_built_from_any_valid_profiles_rules_data() -> None:
    """`ledger_game_from_rules`: the rules data a round pinned (a bundle carries
    them) make the game again, under the id the round recorded."""
    vip = XiDachRules.from_profile({**XIDACH.profile(), "seats": 7, "xi_dach_pays": [2, 1]})
    for game_id, rules in [
        ("xidach-vip", vip),
        ("xidach", XIDACH),
        ("house-2019", PROFILES["xidach-house"]),
    ]:
        data = rules.profile()
        game = ledger_xidach.plugin.ledger_game_from_rules(game_id=game_id, rules=data)
        assert isinstance(game, XiDach) and game.id == game_id
        assert game.table_rules == rules and rules_hash(game.rules) == rules_hash(data)
    # Through the plugin manager, as the core calls it: checked and guarded.
    built = get_plugin_manager().game_from_rules("xidach-vip", vip.profile())
    assert built is not None and built.plugin == "casino-ledger-xidach"
    assert list(built.bets)[-1] == "seat:7"


def test_rules_data_that_are_not_exactly_a_profiles_build_nothing() -> None:
    data = XIDACH.profile()
    hook = ledger_xidach.plugin.ledger_game_from_rules
    for other in [
        {"game": "three-dice", "paytable": {}, "faults": {}},  # another game's
        {k: v for k, v in data.items() if k != "seats"},  # would take a default: not these
        {**data, "seats": 10},  # an invalid option
        {**data, "side_bet": "pairs"},  # an option this release does not implement
        {**data, "ngu_linh_min": 15},  # a derived value the code does not implement
        {**data, "win_pays": [1.0, 1]},  # spelled otherwise: another hash
    ]:
        assert hook(game_id="xidach", rules=other) is None, other
