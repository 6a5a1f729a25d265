"""The plugin machinery: discovery, the typed facade, and a misbehaving plugin
surfacing as one PluginError that names it, with nothing recorded."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any, ClassVar

import pytest

import ledger.plugins.manager as manager_module
from ledger.casino import Casino
from ledger.errors import ConfigError, NotFoundError, PluginError
from ledger.node import Node
from ledger.plugins import hookimpl
from ledger.plugins.contract import GameContract
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.paytable import paytable
from ledger.plugins.registry import GameRegistry, LoadedGame, rules_hash
from tests.casino_support import event_count, seen
from tests.coin_game import CoinDefinition, CoinPlugin


class TestCoinPluginContract(GameContract):
    plugin: ClassVar[Any] = CoinPlugin()
    action_args: ClassVar[dict[str, dict[str, Any]]] = {
        "toss": {"face": "edge"},
        "fault": {"reason": "fell"},
    }


def coin(version: str = "2.1") -> LoadedGame:
    plugins = get_plugin_manager(
        load_entry_points=False, extra=[("coin-plugin", CoinPlugin(), version)]
    )
    return plugins.game("coin")


def test_a_registered_variant_carries_its_provenance() -> None:
    game = coin()
    assert (game.plugin, game.version) == ("coin-plugin", "2.1")
    assert game.rules_hash == rules_hash(CoinDefinition.rules)
    with pytest.raises(NotFoundError, match=r"unknown game 'dice'.*coin"):
        get_plugin_manager(load_entry_points=False, extra=[("c", CoinPlugin(), "1")]).game("dice")


class Broken(CoinDefinition):
    def __init__(self, fault: str) -> None:
        self.fault = fault

    def step(self, bets: Any, actions: Any) -> Any:
        step = super().step(bets, actions)
        if not step["settle"]:
            return step
        if self.fault == "raises":
            raise ZeroDivisionError("oops")
        if self.fault == "stranger bet":
            return {**step, "settle": {"nobody": 1}}
        if self.fault == "float":
            return {**step, "settle": {bet_id: 1.5 for bet_id in bets}}
        if self.fault == "negative":
            return {**step, "settle": {bet_id: -1 for bet_id in bets}}
        if self.fault == "no state":
            return {k: v for k, v in step.items() if k != "state"}
        return step

    def validate_bet(self, bet: Any, placed: Any) -> Any:
        if self.fault == "bet not a dict":
            return ["heads"]
        if self.fault == "bet raises":
            raise KeyError("on")
        return super().validate_bet(bet, placed)


def broken_plugin(fault: str) -> Any:
    class Plugin:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(Broken(fault))

    return Plugin()


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("raises", "step raised ZeroDivisionError"),
        ("stranger bet", "settles a bet that is not standing"),
        ("no state", "step returned no state"),
        ("float", "not plain JSON: a float"),
        ("negative", "not an int >= 0"),
    ],
)
def test_a_misbehaving_settlement_is_one_plugin_error_and_records_nothing(
    node: Node, fault: str, message: str
) -> None:
    games = get_plugin_manager(
        load_entry_points=False, extra=[("bad-coin", broken_plugin(fault), "0.9")]
    ).games()
    casino = Casino(node.app, games)
    alice = casino.open_account(request_id="a", owner="alice", currency="EUR")
    casino.deposit(request_id="d", account_id=alice, amount=1000)
    limits = {"min_bet": 1, "max_bet": 500, "max_round": 500}
    table = casino.open_table(
        request_id="t", name="T", game="coin", kind="physical", currency="EUR", limits=limits
    )  # type: ignore[arg-type]
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=alice, bet={"on": "heads"}, stake=100
    )
    casino.close_betting(request_id="c", round_id=round_id)
    before = event_count(node.app)
    with pytest.raises(PluginError, match=f"plugin bad-coin 0.9: .*{message}"):
        casino.record_outcome(
            request_id="o",
            round_id=round_id,
            outcome={"face": "heads"},
            source=seen(node, casino, round_id, {"face": "heads"}),
        )
    assert event_count(node.app) == before
    assert casino.account(alice).balance == 900


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("bet not a dict", "validate_bet returned list, not a dict"),
        ("bet raises", "validate_bet raised KeyError"),
    ],
)
def test_a_misbehaving_bet_check_is_one_plugin_error(fault: str, message: str) -> None:
    game = get_plugin_manager(
        load_entry_points=False, extra=[("bad-coin", broken_plugin(fault), "0.9")]
    ).game("coin")
    with pytest.raises(PluginError, match=f"plugin bad-coin 0.9: {message}"):
        game.validate_bet({"on": "heads"}, {})


def test_a_plugin_that_fails_to_register_is_named() -> None:
    class Exploding:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            raise RuntimeError("no config")

    plugins = get_plugin_manager(load_entry_points=False, extra=[("boom", Exploding(), "3.0")])
    with pytest.raises(PluginError, match=r"plugin boom 3\.0: ledger_register_games raised"):
        plugins.games()


def test_a_plugin_refusing_its_own_configuration_is_its_line_under_its_name() -> None:
    class Misconfigured:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            raise ConfigError("profile /etc/games/vip.json: seats must be an integer 1..9: 10")

    plugins = get_plugin_manager(load_entry_points=False, extra=[("cfg", Misconfigured(), "1.2")])
    with pytest.raises(PluginError) as caught:
        plugins.games()
    # On purpose, so no "raised ConfigError(...)": the plugin's message, as it wrote it.
    assert str(caught.value) == (
        "plugin cfg 1.2: profile /etc/games/vip.json: seats must be an integer 1..9: 10"
    )


def test_two_plugins_cannot_claim_one_variant() -> None:
    plugins = get_plugin_manager(
        load_entry_points=False, extra=[("one", CoinPlugin(), "1"), ("two", CoinPlugin(), "2")]
    )
    with pytest.raises(PluginError, match="game coin is already provided by"):
        plugins.games()


def test_a_hookimpl_that_does_not_fit_the_spec_is_refused() -> None:
    class Misspelt:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry, extra: int) -> None:
            """Asks for an argument the spec does not have."""

    with pytest.raises(PluginError, match="does not fit the hook specs"):
        get_plugin_manager(load_entry_points=False, extra=[("misspelt", Misspelt(), "1")])


def fake_entry_points(points: list[EntryPoint]) -> Any:
    return lambda group: [p for p in points if p.group == group]


def test_entry_points_with_allow_and_block_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    points = [
        EntryPoint("coin", "tests.coin_game:coin_plugin", "casino_ledger"),
        EntryPoint("other", "tests.coin_game:other_coin_plugin", "casino_ledger"),
        EntryPoint("elsewhere", "tests.coin_game:coin_plugin", "another_host"),
    ]
    monkeypatch.setattr(manager_module, "entry_points", fake_entry_points(points))
    monkeypatch.setenv("LEDGER_PLUGINS_ALLOW", "coin")
    assert [p.name for p in get_plugin_manager().plugins] == ["coin"]
    monkeypatch.delenv("LEDGER_PLUGINS_ALLOW")
    monkeypatch.setenv("LEDGER_PLUGINS_BLOCK", "other")
    assert [p.name for p in get_plugin_manager().plugins] == ["coin"]
    monkeypatch.delenv("LEDGER_PLUGINS_BLOCK")
    assert sorted(p.name for p in get_plugin_manager().plugins) == ["coin", "other"]


def test_an_installed_but_broken_plugin_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    points = [EntryPoint("ghost", "no_such_module_here:Plugin", "casino_ledger")]
    monkeypatch.setattr(manager_module, "entry_points", fake_entry_points(points))
    with pytest.raises(PluginError, match="installed but broken: ModuleNotFoundError"):
        get_plugin_manager()


def test_nothing_loads_at_import_time() -> None:
    import importlib

    import ledger.plugins

    reloaded = importlib.reload(ledger.plugins)
    assert not hasattr(reloaded, "plugin_manager")
    assert not hasattr(manager_module, "PLUGINS")


def test_the_shipped_plugin_is_discovered_and_priced(capsys: pytest.CaptureFixture[str]) -> None:
    from ledger.cli.main import main

    assert main(["games"]) == 0
    listed = capsys.readouterr().out
    assert "taixiu" in listed and "sicbo-void" in listed and "casino-ledger-taixiu" in listed
    assert main(["paytable", "taixiu"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:]}
    assert len(rows) == 50
    assert rows["small"][1:3] == ["1:1", "35/36"]
    assert rows["specific_triple:4"][1:3] == ["150:1", "151/216"]
    assert rows["total:4"][1:3] == ["50:1", "17/24"]
    assert rows["combination:2-5"][1:3] == ["5:1", "5/6"]
    assert main(["paytable", "no-such-game"]) == 2
    assert "unknown game 'no-such-game'" in capsys.readouterr().err


class NoPaytable(CoinDefinition):
    id = "coin-no-paytable"


class DeclaresPaytable(CoinDefinition):
    id = "coin-claims"
    capabilities = frozenset({"exact-paytable"})


def test_a_game_without_an_exact_paytable_says_so() -> None:
    class Plugin:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(NoPaytable())

    game = get_plugin_manager(load_entry_points=False, extra=[("p", Plugin(), "1")]).game(
        "coin-no-paytable"
    )
    with pytest.raises(NotFoundError.__bases__[0], match="offers no exact paytable"):
        paytable(game)


def test_a_declared_capability_must_be_implemented() -> None:
    class Plugin:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(DeclaresPaytable())

    plugins = get_plugin_manager(load_entry_points=False, extra=[("liar", Plugin(), "1")])
    with pytest.raises(PluginError, match="declares 'exact-paytable' but does not implement"):
        plugins.games()


def test_a_game_of_another_settlement_api_is_refused() -> None:
    class Old(CoinDefinition):
        settlement_api = 1

    class Plugin:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(Old())

    plugins = get_plugin_manager(load_entry_points=False, extra=[("old", Plugin(), "1")])
    with pytest.raises(PluginError, match="declares settlement API 1"):
        plugins.games()


def test_rules_that_are_not_json_are_refused() -> None:
    class Floaty(CoinDefinition):
        rules: ClassVar[dict[str, Any]] = {"pays": float("nan")}

    class Plugin:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(Floaty())

    plugins = get_plugin_manager(load_entry_points=False, extra=[("nan", Plugin(), "1")])
    with pytest.raises(PluginError, match="rules are not plain JSON"):
        plugins.games()


def test_hooks_go_through_pluggy_so_wrappers_see_them() -> None:
    seen_calls: list[str] = []

    class Tracer:
        @hookimpl(wrapper=True)
        def ledger_register_games(self, registry: GameRegistry) -> Any:
            seen_calls.append(registry.plugin)
            return (yield)

    plugins = get_plugin_manager(
        load_entry_points=False, extra=[("coin", CoinPlugin(), "1"), ("tracer", Tracer(), "1")]
    )
    assert "coin" in plugins.games()
    assert "coin" in seen_calls


def test_the_code_hash_changes_with_the_code_not_the_version() -> None:
    assert coin("1.0").code_hash == coin("2.0").code_hash != ""


# `ledger_game_from_rules`: a game built from rules data (a bundle's games.jsonl).


class CoinWithPays(CoinDefinition):
    """The coin under rules data of its own kind: `{"pays": ..., "edge": ...}`."""

    def __init__(self, game_id: str, rules: dict[str, Any]) -> None:
        self.id = game_id
        self.rules = rules  # type: ignore[misc]


class CoinFromRules:
    @hookimpl
    def ledger_game_from_rules(self, game_id: str, rules: dict[str, Any]) -> Any:
        if set(rules) != {"pays", "edge"}:
            return None  # not a coin's rules: not an error
        return CoinWithPays(game_id, rules)


def test_a_plugin_builds_a_game_from_rules_data_it_recognises() -> None:
    plugins = get_plugin_manager(
        load_entry_points=False,
        extra=[("coin", CoinPlugin(), "1"), ("coin-rules", CoinFromRules(), "2.5")],
    )
    rules = {"pays": {"heads": 2, "tails": 1}, "edge": "lose"}
    built = plugins.game_from_rules("old-coin", rules)
    assert built is not None and built.id == "old-coin"
    assert (built.plugin, built.version, built.rules_hash) == (
        "coin-rules",
        "2.5",
        rules_hash(rules),
    )
    assert built.settlement_api == CoinDefinition.settlement_api and built.code_hash
    assert plugins.game_from_rules("old-coin", rules) is built  # built once
    # Data no plugin recognises: none, and the installed games are unchanged.
    assert plugins.game_from_rules("old-coin", {"pays": {}}) is None
    assert set(plugins.games()) == {"coin"}


def test_a_plugin_failing_to_build_from_rules_data_is_named() -> None:
    class Exploding:
        @hookimpl
        def ledger_game_from_rules(self, game_id: str, rules: dict[str, Any]) -> Any:
            raise KeyError("ace_rule")

    class Impostor:
        @hookimpl
        def ledger_game_from_rules(self, game_id: str, rules: dict[str, Any]) -> Any:
            return CoinWithPays(game_id, {**rules, "edge": "win"})

    class Renamer:
        @hookimpl
        def ledger_game_from_rules(self, game_id: str, rules: dict[str, Any]) -> Any:
            return CoinWithPays("another", rules)

    class NotAGame:
        @hookimpl
        def ledger_game_from_rules(self, game_id: str, rules: dict[str, Any]) -> Any:
            return "coin"

    rules = {"pays": {"heads": 1}, "edge": "push"}
    cases = [
        (Exploding(), r"plugin boom 3\.0: ledger_game_from_rules raised KeyError\('ace_rule'\)"),
        (Impostor(), r"plugin boom 3\.0: ledger_game_from_rules built game coin .* must be that"),
        (Renamer(), r"plugin boom 3\.0: ledger_game_from_rules built game another \(rules "),
        (NotAGame(), r"plugin boom 3\.0: invalid game"),
    ]
    for plugin, message in cases:
        plugins = get_plugin_manager(load_entry_points=False, extra=[("boom", plugin, "3.0")])
        with pytest.raises(PluginError, match=message):
            plugins.game_from_rules("coin", rules)


def test_the_first_plugin_by_name_that_recognises_the_data_builds_it() -> None:
    calls: list[str] = []

    class Declining:
        @hookimpl
        def ledger_game_from_rules(self, game_id: str, rules: dict[str, Any]) -> Any:
            calls.append("a-declines")
            return None

    plugins = get_plugin_manager(
        load_entry_points=False,
        extra=[("z-coin", CoinFromRules(), "1"), ("a-none", Declining(), "1")],
    )
    built = plugins.game_from_rules("coin", {"pays": {"heads": 1}, "edge": "push"})
    assert built is not None and built.plugin == "z-coin" and calls == ["a-declines"]
