"""The shipped plugin passes the core's games contract (both profiles)."""

from __future__ import annotations

from typing import Any, ClassVar

import ledger_xidach.plugin
import pytest

from ledger.cli.main import main
from ledger.plugins.contract import GameContract


class TestXiDachPluginContract(GameContract):
    plugin: ClassVar[Any] = ledger_xidach.plugin
    plugin_name = "casino-ledger-xidach"


def test_ledger_games_lists_both_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["games"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    for profile in ("xidach", "xidach-house"):
        assert "casino-ledger-xidach" in rows[profile]
        assert "5 bets  settlement API 2" in rows[profile]
        assert "exact-paytable" not in rows[profile]


def test_ledger_paytable_says_plainly_there_is_none(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["paytable", "xidach"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing printed before the refusal
    assert "game xidach offers no exact paytable: its return depends on how it is played" in (
        captured.err
    )
    assert "Traceback" not in captured.err
