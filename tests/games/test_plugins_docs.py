"""docs/plugins.md's example runs as written: a plugin building a game from
rules data it recognises (`ledger_game_from_rules`), and nothing from data
it does not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ledger.plugins import hookimpl
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import GameRegistry

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def test_the_example_builds_a_game_from_rules_data(capsys: pytest.CaptureFixture[str]) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)[1:]
    exec(compile(code, str(DOC), "exec"), {})
    (line,) = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"coin-1999 my-coin 0\.1 [0-9a-f]{12}", line)


def test_every_hook_the_core_declares_is_documented() -> None:
    from ledger.plugins import spec

    hooks = {name for name in vars(spec) if name.startswith("ledger_")}
    assert hooks == {"ledger_register_games", "ledger_game_from_rules"}  # one hook a job
    text = DOC.read_text()
    for hook in hooks:
        assert f"| `{hook}(" in text


class _FirstNamePlugin:
    """A plugin written for the hook's first name, `ledger_register_variants`."""

    @staticmethod
    def game() -> object:
        from tests.coin_game import CoinDefinition

        return CoinDefinition()

    @hookimpl
    def ledger_register_variants(self, registry: GameRegistry) -> None:
        registry.add(self.game())


def test_a_plugin_on_the_hooks_first_name_still_registers_its_games() -> None:
    plugins = get_plugin_manager(
        load_entry_points=False, extra=[("first-name", _FirstNamePlugin(), "0.9")]
    )
    game = plugins.game("coin")
    assert (game.plugin, game.version) == ("first-name", "0.9")


def test_every_hook_is_implemented_by_a_plugin_the_tests_load() -> None:
    """Each hook the core declares has an implementation in the shipped plugins
    or the tests' plugins, so each is called by the suite."""
    from ledger.plugins import spec

    root = DOC.parent.parent
    sources = [
        *root.glob("tests/**/*.py"),
        *root.glob("plugins/*/ledger_*/**/*.py"),
    ]
    text = "\n".join(path.read_text() for path in sources)
    from ledger.plugins.manager import RENAMED_HOOKS

    hooks = [name for name in vars(spec) if name.startswith("ledger_")]
    for hook in [*hooks, *RENAMED_HOOKS]:
        assert re.search(rf"@hookimpl\n\s+def {hook}\(", text), f"no plugin implements {hook}"
