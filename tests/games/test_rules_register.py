"""The store's rules register (docs/plugins.md, "Changing a game's rules or its
code"): each game's rules data recorded once, read back as written, used only
when they hash to the rules hash they name, and recorded once when two nodes
record at the same moment."""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError

from ledger.audit.games.recorded_games import games_of_store
from ledger.domain.game_rules import GameRules
from ledger.errors import VerificationError
from ledger.node import Node
from ledger.plugins.registry import GameRegistry, LoadedGame, rules_hash
from ledger.plugins.rules_register import record_rules, recorded_rules
from tests.coin_game import CoinDefinition


def coin(game_id: str, rules: dict[str, Any]) -> LoadedGame:
    game = CoinDefinition()
    game.id, game.rules = game_id, rules  # type: ignore[misc]
    registry = GameRegistry("ledger-coin", "1.0.0")
    registry.add(game)
    return registry.games[game_id]


OLD = coin("coin", {"pays": {"heads": 1, "tails": 1}, "edge": "push"})
NEW = coin("coin", {"pays": {"heads": 1, "tails": 1}, "edge": "lose"})


def test_each_rules_version_is_recorded_once_and_read_back(node: Node) -> None:
    app = node.app
    assert recorded_rules(app) == []
    assert record_rules(app, [OLD]) == [OLD]
    assert record_rules(app, [OLD]) == []  # already held: nothing written
    assert record_rules(app, [OLD, NEW]) == [NEW]
    records = recorded_rules(app)
    assert [(r.game, r.rules_hash, r.plugin, r.plugin_version) for r in records] == [
        ("coin", OLD.rules_hash, "ledger-coin", "1.0.0"),
        ("coin", NEW.rules_hash, "ledger-coin", "1.0.0"),
    ]
    assert all(rules_hash(r.rules) == r.rules_hash for r in records)


def test_a_record_whose_data_do_not_hash_to_its_rules_hash_fails(node: Node) -> None:
    register = GameRules()
    register.record(
        game="coin",
        rules_hash=OLD.rules_hash,
        settlement_api=2,
        rules=dict(NEW.rules),  # another version's data under this hash
        plugin="ledger-coin",
        plugin_version="1.0.0",
    )
    node.app.save(register)
    with pytest.raises(VerificationError, match="do not hash to its rules hash"):
        games_of_store(node.app, {"coin": NEW}, lambda game_id, rules: None)


def test_the_games_of_a_store_include_those_built_from_its_register(node: Node) -> None:
    record_rules(node.app, [OLD])
    asked: list[tuple[str, str]] = []

    def build(game_id: str, rules: Any) -> LoadedGame | None:
        asked.append((game_id, rules_hash(rules)))
        return OLD

    games = games_of_store(node.app, {"coin": NEW}, build)
    assert games["coin"] is NEW  # the installed default profile, as it is
    assert games.built("coin", OLD.rules_hash) is OLD  # the old version, rebuilt
    assert asked == [("coin", OLD.rules_hash)]  # only the rules no installed game declares


def test_two_nodes_recording_at_once_record_each_version_once(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = node.app
    save = app.save
    raced: list[object] = []

    def another_node_first(*aggregates: Any, **kwargs: Any) -> Any:
        if not raced:  # another node writes the same record between our read and write
            raced.append(aggregates)
            register = GameRules()
            register.record(
                game="coin",
                rules_hash=OLD.rules_hash,
                settlement_api=2,
                rules=dict(OLD.rules),
                plugin="ledger-coin",
                plugin_version="1.0.0",
            )
            save(register)
        return save(*aggregates, **kwargs)

    monkeypatch.setattr(app, "save", another_node_first)
    assert record_rules(app, [OLD, NEW]) == [NEW]  # the other node's record kept
    assert raced
    assert [r.rules_hash for r in recorded_rules(app)] == [OLD.rules_hash, NEW.rules_hash]
    with pytest.raises(IntegrityError):  # the conflict was real: a stale register is refused
        stale = GameRules()
        save(stale)
