"""A game's paytable is replayed once per process for its code and rules,
then served from memory: the same lines, never another game's or another
rule set's, and never for a game with no file to identify its code."""

from __future__ import annotations

import dataclasses

import pytest

from ledger.plugins import paytable as module
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import LoadedGame


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The games replayed, in order, from an empty cache."""
    seen: list[str] = []
    real = module._replayed

    def counted(game: LoadedGame) -> list[module.PaytableLine]:
        seen.append(game.id)
        return real(game)

    monkeypatch.setattr(module, "_KNOWN", {})
    monkeypatch.setattr(module, "_replayed", counted)
    return seen


def test_a_paytable_is_replayed_once_and_then_the_same(replays: list[str]) -> None:
    taixiu = get_plugin_manager().game("taixiu")
    first = module.paytable(taixiu)
    first.clear()  # a caller's list is its own
    again = module.paytable(get_plugin_manager().game("taixiu"))
    assert replays == ["taixiu"]
    assert again and again == module.paytable(taixiu) == module._replayed(taixiu)


def test_other_rules_or_games_are_replayed_for_themselves(replays: list[str]) -> None:
    manager = get_plugin_manager()
    taixiu, sicbo = manager.game("taixiu"), manager.game("sicbo-void")
    module.paytable(taixiu), module.paytable(sicbo)
    other_rules = dataclasses.replace(taixiu, rules_hash="0" * 64)
    module.paytable(other_rules)
    assert replays == ["taixiu", "sicbo-void", "taixiu"]


def test_a_game_with_no_code_to_hash_is_never_cached(replays: list[str]) -> None:
    scripted = dataclasses.replace(get_plugin_manager().game("taixiu"), code_hash="")
    assert module.paytable(scripted) == module.paytable(scripted)
    assert replays == ["taixiu", "taixiu"]
