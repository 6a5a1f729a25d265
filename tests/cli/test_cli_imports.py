"""A `ledger` process imports what its command uses, and nothing more: no
PostgreSQL driver for a SQLite store, no verifier, node or store to print a
help text. The suite (and an operator's scripts) start hundreds of these
processes; each used to import nearly the whole package first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Imported only for a PostgreSQL store (ledger.store.pg_recorder).
POSTGRES_ONLY = ("psycopg", "psycopg_pool", "eventsourcing.postgres", "ledger.store.pg_recorder")
# What the commands run, not what their parsers need.
HEAVY = (
    "eventsourcing",
    "cryptography",
    "tqdm",
    "ledger.audit.verify",
    "ledger.casino",
    "ledger.node",
    "ledger.projections",
    "ledger.mirror.copy",
    "ledger.store.application",
    "ledger.http.app",
    *POSTGRES_ONLY,
)


def _loaded_after(code: str, cwd: Path) -> tuple[list[str], str]:
    """Run `code` in a fresh interpreter; the modules it left imported, and its output."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, check=True
    )
    return json.loads(done.stderr.splitlines()[-1]), done.stdout


def _present(loaded: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in names))


def test_commands_on_a_sqlite_store_never_import_the_postgresql_driver(tmp_path: Path) -> None:
    store = "sqlite:///ledger.db"
    code = f"""
from pathlib import Path

from ledger.cli.main import main
from ledger.crypto.keys import Keyring
from ledger.store.application import LedgerApplication

given = ["--store", {store!r}, "--keys", "keys"]
assert main(given + ["keys", "create", "a1", "--role", "auditor", "--unencrypted",
                     "--yes-unencrypted"]) == 0
LedgerApplication({store!r}, keyring=Keyring.load(Path("keys/keyring.json")), create=True).close()
assert main(given + ["events"]) == 0
assert main(given + ["events", "--significant"]) == 0
assert main(given + ["checkpoint", "--no-sign"]) == 0
assert main(given + ["verify", "--level", "integrity", "--workers", "1"]) == 0
"""
    loaded, out = _loaded_after(code, tmp_path)
    assert "0 events; checked" in out and "0 significant events" in out
    assert "the log is empty: nothing to checkpoint" in out
    assert "ledger.audit.verify" in loaded  # the store was opened and verified
    assert _present(loaded, POSTGRES_ONLY) == []


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["verify", "--help"], ["mirror", "--help"], ["keys", "create", "--help"]],
    ids=" ".join,
)
def test_a_help_text_imports_no_command(tmp_path: Path, argv: list[str]) -> None:
    code = f"""
from ledger.cli.main import main
try:
    main({argv!r})
except SystemExit as exit:
    assert exit.code == 0, exit.code
"""
    loaded, out = _loaded_after(code, tmp_path)
    assert out.startswith("usage: ledger")
    assert _present(loaded, HEAVY) == []


def test_importing_the_cli_imports_no_command(tmp_path: Path) -> None:
    loaded, _ = _loaded_after("import ledger.cli.main", tmp_path)
    assert _present(loaded, HEAVY) == []


def test_commands_that_open_no_private_key_never_load_pyca_cryptography(tmp_path: Path) -> None:
    """pyca/cryptography reads and writes the private key files; its library
    costs a command 40 ms to load, so reading, verifying and reporting leave
    it unloaded (signing itself is libsodium's)."""
    made = subprocess.run(
        [sys.executable, "-m", "ledger.cli.main", "simulate", "--rounds", "2", "--tables", "1"],
        cwd=tmp_path,
        env={**os.environ, "LEDGER_PASSPHRASE": "x"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    code = """
from ledger.cli.main import main
for argv in (["verify"], ["events"], ["balances"], ["rounds"], ["keys", "list"],
             ["export", "bundle"], ["verify", "--bundle", "bundle"]):
    assert main(argv) == 0, argv
"""
    loaded, out = _loaded_after(code, tmp_path)
    assert out.startswith("OK:")
    assert "ledger.audit.verify" in loaded and "ledger.projections" in loaded
    assert _present(loaded, ("cryptography",)) == []
