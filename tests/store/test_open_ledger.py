"""One way to open a ledger (issue 20, item 4): `open_ledger` gives the node,
the installed games and the Python API from the settings, and every opener
in the CLI, the HTTP app and simulation goes through it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ledger.casino import Casino, open_ledger
from ledger.crypto.keystore import KeyDirectory
from ledger.privacy.sealed import is_sealed
from tests.conftest import PASSPHRASE

LEDGER = Path(__file__).resolve().parents[2] / "ledger"


def test_it_opens_the_node_the_games_and_the_python_api(
    store_url: str, keys: KeyDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_STORE", store_url)
    monkeypatch.setenv("LEDGER_KEYS", str(keys.path))
    with open_ledger(passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0) as ledger:
        assert {"taixiu", "xidach"} <= set(ledger.games)
        assert isinstance(ledger.casino, Casino) and ledger.casino is ledger.casino
        account = ledger.casino.open_account(request_id="a", owner="ann", currency="EUR")
        assert ledger.casino.account(account).balance == 0
    with open_ledger(writable=False) as reader:  # the settings name the same ledger
        assert is_sealed(reader.casino.account(account).owner)  # the log holds it sealed
    with open_ledger(writable=False, passphrase=PASSPHRASE) as reader:  # the vault opens
        assert reader.casino.owner(account) == "ann"


def test_no_opener_outside_it_builds_a_node_or_a_casino_on_its_own() -> None:
    """Outside `ledger.casino.opened` (and `ledger.node`, which it calls), the
    CLI, the HTTP app and simulation call neither `open_node` nor `Casino(...)`;
    the HTTP app's Service is handed the games and builds its one casino."""
    allowed = {"ledger/casino/opened.py", "ledger/node.py", "ledger/http/service.py"}
    found = []
    for path in sorted(LEDGER.rglob("*.py")):
        name = str(path.relative_to(LEDGER.parent))
        if name in allowed or not name.startswith(("ledger/cli", "ledger/http", "ledger/sim")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            called = node.func if isinstance(node, ast.Call) else None
            if isinstance(called, ast.Name) and called.id in ("open_node", "Casino"):
                found.append(f"{name}:{node.lineno} {called.id}(...)")
    assert not found, found
