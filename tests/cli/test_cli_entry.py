"""The `ledger` script's module imports nothing of the ledger at load: every
worker process `ledger verify` spawns re-imports the script before its first
chunk, and should not spend a second importing commands it never runs."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from importlib.metadata import entry_points

import pytest


def test_the_console_script_is_the_light_entry_point() -> None:
    [script] = [e for e in entry_points(group="console_scripts") if e.name == "ledger"]
    assert script.value == "ledger.cli.entry:main"


def test_loading_the_entry_point_imports_no_command() -> None:
    code = (
        "import json, sys, ledger.cli.entry; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ledger'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == ["ledger", "ledger.cli", "ledger.cli.entry"]


def test_the_entry_point_runs_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from ledger.cli.entry import main; sys.exit(main())",
         "--help"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0 and "usage: ledger" in done.stdout


def test_the_parser_is_built_once_and_keeps_nothing_from_a_parse() -> None:
    from ledger.cli.main import _parser

    assert _parser() is _parser()
    first = _parser().parse_args(["verify", "--store", "sqlite:///a.db", "--level", "integrity"])
    assert (first.store, first.level) == ("sqlite:///a.db", "integrity")
    again = _parser().parse_args(["verify"])
    assert again.store is None and again.level == "settlement"
    assert _parser().parse_args(["--keys", "k", "events"]).keys == "k"
    assert _parser().parse_args(["events"]).keys is None


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_the_command_table_is_the_whole_parsers_commands_in_order() -> None:
    from ledger.cli.main import COMMANDS, build_parser

    whole = subparsers(build_parser())
    listed = [name for _, _, names in COMMANDS for name in names]
    assert sorted(listed) == sorted(whole) and len(set(listed)) == len(listed)
    for module, function, names in COMMANDS:  # each function adds just the names listed
        parser = argparse.ArgumentParser()
        getattr(importlib.import_module(module), function)(parser.add_subparsers())
        assert set(subparsers(parser)) == set(names), module


def test_a_command_alone_parses_and_helps_as_in_the_whole_parser() -> None:
    from ledger.cli.main import KNOWN, build_parser

    whole = subparsers(build_parser())
    for name in sorted(KNOWN):
        alone = subparsers(build_parser(name))[name]
        assert alone.format_help() == whole[name].format_help(), name
    argv = ["--store", "sqlite:///a.db", "verify", "--keys", "k", "--level", "integrity"]
    assert vars(build_parser("verify").parse_args(argv)) == vars(build_parser().parse_args(argv))


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["verify"], "verify"),
        (["--store", "sqlite:///a.db", "--keys", "k", "balances", "--json"], "balances"),
        (["--store=sqlite:///a.db", "rounds", "list"], "rounds"),
        (["--help"], None),
        (["--store", "x", "--help", "verify"], None),
        (["verfy"], None),  # misspelt: the whole parser lists the choices
        ([], None),
        (["--store"], None),
    ],
)
def test_the_command_is_found_before_parsing(argv: list[str], named: str | None) -> None:
    from ledger.cli.main import command_named

    assert command_named(argv) == named


def test_a_command_imports_no_other_commands_parser() -> None:
    code = (
        "import json, sys; from ledger.cli.main import _parser; _parser('balances'); "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ledger.cli.'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert "ledger.cli.projections" in loaded
    assert not loaded & {"ledger.cli.serve", "ledger.cli.archive", "ledger.cli.audit"}, loaded


def test_a_misspelt_command_is_refused_with_every_choice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ledger.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["verfy"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "invalid choice: 'verfy'" in error and "'witness'" in error and "'keys'" in error
