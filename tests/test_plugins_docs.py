"""docs/plugins.md's example runs as written: a plugin building a game from
rules data it recognises (`ledger_game_from_rules`), and nothing from data
it does not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "plugins.md"


def test_the_example_builds_a_game_from_rules_data(capsys: pytest.CaptureFixture[str]) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)[1:]
    exec(compile(code, str(DOC), "exec"), {})
    (line,) = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"coin-1999 my-coin 0\.1 [0-9a-f]{12}", line)


def test_every_hook_the_core_declares_is_documented() -> None:
    from ledger.plugins import spec

    hooks = {name for name in vars(spec) if name.startswith("ledger_")}
    assert hooks == {"ledger_register_games", "ledger_register_variants", "ledger_game_from_rules"}
    text = DOC.read_text()
    for hook in hooks:
        assert f"| `{hook}(" in text
