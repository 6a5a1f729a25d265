"""The wiring once (issue 39, item 4): `ledger.cli.main` opens the one ledger a
command works on, hands it to the command and closes it; no command opens a
ledger of its own."""

from __future__ import annotations

import ast
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ledger.casino.opened as opened
from ledger.cli.main import main
from tests.cli.test_cli_bad_input import RIGHT
from tests.reproducible import reproducible_session

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "ledger" / "cli"
OPENERS = {"open_ledger", "open_ledger_from_args", "open_node", "open_from_args"}
# Where an opener may be called: main's one opening (common.py), and `serve`'s
# check before its workers start (each worker process opens its own, from the
# same settings, and builds its HTTP service from that ledger: Service.of).
ALLOWED = {("common.py", "run_with_ledger"), ("serve.py", "_prepare")}


def _callers(path: Path) -> set[tuple[str, str]]:
    """(file, function) for every call of an opener in `path`."""
    found = set()
    for function in ast.walk(ast.parse(path.read_text())):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", None))
                if name in OPENERS:
                    found.add((path.name, function.name))
    return found


def test_only_main_s_one_opening_opens_a_ledger() -> None:
    callers = set().union(*(_callers(path) for path in sorted(CLI.glob("*.py"))))
    # open_ledger_from_args is called by run_with_ledger; nothing else calls it.
    assert callers - {("common.py", "open_ledger_from_args")} == ALLOWED


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEDGER_PASSPHRASE", RIGHT)
    monkeypatch.delenv("LEDGER_KEYS", raising=False)
    monkeypatch.setenv("LEDGER_STORE", f"sqlite:///{tmp_path / 'ledger.db'}")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    with reproducible_session(2) as seeds:
        assert main(["simulate", "--rounds", "2", "--players", "2", "--tables", "1", *seeds]) == 0
    return tmp_path


@pytest.fixture
def openings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Each ledger opened, with whether it was writable and whether it was closed."""
    seen: list[dict[str, Any]] = []
    real = opened.open_ledger

    def spying(*args: Any, **kwargs: Any) -> opened.Ledger:
        ledger = real(*args, **kwargs)
        record = {"writable": kwargs.get("writable"), "closed": False}
        seen.append(record)
        close = ledger.close

        def closing() -> None:
            record["closed"] = True
            close()

        monkeypatch.setattr(ledger, "close", closing)
        return ledger

    monkeypatch.setattr(opened, "open_ledger", spying)
    yield seen


def _first_column(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out.splitlines()[1].split()[0]


@pytest.mark.parametrize(
    ("argv", "writable"),
    [
        (["events"], False),
        (["balances"], False),
        (["rounds"], False),
        (["projections", "update"], False),
        (["seeds"], False),
        (["checkpoint"], False),  # signs with the checkpoint key, writes no event
        (["migrate", "--dry-run"], False),
        (["migrate"], True),
        (["tiles", "tiles-out"], False),
        (["export", "bundle-out"], False),
        (["recall", "{round}"], False),
        (["rounds", "throw", "{round}"], True),  # refused: the round is settled
        (["tokens", "create", "--role", "table-device", "--table", "{table}"], False),
    ],
)
def test_each_command_is_handed_one_ledger_opened_and_closed_for_it(
    recorded: Path,
    capsys: pytest.CaptureFixture[str],
    openings: list[dict[str, Any]],
    argv: list[str],
    writable: bool,
) -> None:
    round_id, table_id = _first_column(capsys, "rounds"), _table()
    openings.clear()
    main([part.format(round=round_id, table=table_id) for part in argv])
    capsys.readouterr()
    assert [(o["writable"], o["closed"]) for o in openings] == [(writable, True)]


def _table() -> str:
    from ledger.projections import queries

    with opened.open_ledger(writable=False) as ledger:
        return queries.tables(ledger.node.app)[0][0]
