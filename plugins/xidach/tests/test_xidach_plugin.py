"""The distribution: found through its entry point, profiles as data, the contract's shape."""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

import ledger_xidach.plugin
import pytest
from ledger_xidach.game import XiDach
from ledger_xidach.profile_files import PROFILES, XIDACH
from ledger_xidach.rules import XiDachRules

from ledger.crypto.canonical import canonical
from ledger.errors import ConfigError
from ledger.games.api import SETTLEMENT_API
from ledger.plugins.registry import rules_hash


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
        assert game.capabilities == frozenset()  # no exact paytable: decisions matter
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
