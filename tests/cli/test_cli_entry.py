"""The `ledger` script's module imports nothing of the ledger at load: every
worker process `ledger verify` spawns re-imports the script before its first
chunk, and should not spend a second importing commands it never runs."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points


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
