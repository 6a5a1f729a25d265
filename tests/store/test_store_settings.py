"""A store given by URL goes where the URL says, whatever the environment holds.

eventsourcing reads `<APP NAME>_<SETTING>` and plain `SQLITE_DBNAME`,
`POSTGRES_*`, `PERSISTENCE_MODULE`... from the process environment; the
ledger's application must read none of them (issue 8, item 2).
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from ledger.casino import Casino
from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory, key_env
from ledger.node import open_node
from ledger.plugins.manager import get_plugin_manager
from ledger.store.application import LedgerApplication
from tests.cli.test_cli_new_user import store_rows
from tests.conftest import PASSPHRASE, PG_DSN, drop_pg_schema, new_pg_schema
from tests.house.test_readme import CLI_DOC

ROLE_KEYS = {key_env(role) for role in Role}


def documented_settings() -> set[str]:
    """Every LEDGER_* variable in the environment column of docs/cli.md's
    Settings table; a "…" beside a role's key variable stands for every role's."""
    section = CLI_DOC.read_text().split("\n## Settings\n", 1)[1].split("\n#", 1)[0]
    header, _, *rows = [line.split("|") for line in section.splitlines() if line.startswith("|")]
    column = [cell.strip() for cell in header].index("environment")
    names: set[str] = set()
    for row in rows:
        found = set(re.findall(r"LEDGER_[A-Z_]+", row[column]))
        names |= found | (ROLE_KEYS if "…" in row[column] and found & ROLE_KEYS else set())
    return names


def test_the_settings_table_is_read() -> None:
    documented = documented_settings()
    assert {"LEDGER_STORE", "LEDGER_ANCHOR_EVENTS", "LEDGER_OPERATOR_KEY"} <= documented
    assert len(documented) >= 14


def documented_decoys(tmp_path: Path, decoy_db: str) -> dict[str, str]:
    """A decoy for every documented LEDGER_* setting (a URL given explicitly
    beats LEDGER_STORE). Settings the node reads get values it accepts; any
    other, a newly documented one included, points at the decoy store."""
    accepted = {
        "LEDGER_KEYS": str(tmp_path / "decoy-keys"),
        "LEDGER_ORIGIN": "decoy-origin",
        "LEDGER_CHECKPOINT_LOCK": str(tmp_path / "decoy-lock"),  # where it keeps, not a store
        "LEDGER_PASSPHRASE": "decoy",
        "LEDGER_PLUGINS_ALLOW": "nothing-installed",
        "LEDGER_PLUGINS_BLOCK": "nothing-installed",
        "LEDGER_PROGRESS_INTERVAL": "off",
        # Anchor after every write: the checkpoints must land in the URL's store too.
        "LEDGER_ANCHOR_SECONDS": "1",
        "LEDGER_ANCHOR_EVENTS": "1",
        # Commits of one command each, or of many: either way into the URL's store.
        "LEDGER_BATCH_SIZE": "2",
        "LEDGER_BATCH_WAIT_MS": "0",
        # No witness: submitting to one writes only to the URL's store (its own tests).
        "LEDGER_WITNESSES": "",
        # The keys this node holds (choosing a key is not choosing a store).
        key_env(Role.LEDGER_NODE): "ledger-node",
        key_env(Role.CHECKPOINT): "checkpoint",
    }
    return {name: accepted.get(name, f"sqlite:///{decoy_db}") for name in documented_settings()}


def stray_environment(tmp_path: Path, decoy_schema: str) -> dict[str, str]:
    """Every variable that could plausibly redirect a store, pointing at decoys."""
    decoy_db = str(tmp_path / "decoy.db")
    stray = documented_decoys(tmp_path, decoy_db)
    settings = {
        "PERSISTENCE_MODULE": "eventsourcing.popo",
        "SQLITE_DBNAME": decoy_db,
        "POSTGRES_DBNAME": "decoy_db",
        "POSTGRES_HOST": "decoy.invalid",
        "POSTGRES_PORT": "1",
        "POSTGRES_USER": "decoy",
        "POSTGRES_SCHEMA": decoy_schema,
        "CREATE_TABLE": "n",
        "APPLICATION_RECORDER_TOPIC": "eventsourcing.popo:POPOApplicationRecorder",
        "MAPPER_TOPIC": "eventsourcing.persistence:Mapper",
        "CIPHER_TOPIC": "eventsourcing.cipher:AESCipher",
        "COMPRESSOR_TOPIC": "zlib",
    }
    for prefix in ("", "LEDGER_", f"{LedgerApplication.name.upper()}_"):
        stray |= {prefix + name: value for name, value in settings.items()}
    return stray


def test_the_application_name_is_no_user_prefix() -> None:
    assert not LedgerApplication.name.upper().startswith("LEDGER")


def test_no_environment_variable_redirects_a_store_given_by_url(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = KeyDirectory(tmp_path / "keys")
    keys.create_node_keys(PASSPHRASE)
    decoy_schema = new_pg_schema()
    try:
        for name, value in stray_environment(tmp_path, decoy_schema).items():
            monkeypatch.setenv(name, value)
        node = open_node(store_url, str(keys.path), passphrase=PASSPHRASE)
        try:
            casino = Casino(node.app, get_plugin_manager(load_entry_points=False).games())
            account = casino.open_account(request_id="a", owner="Alice", currency="EUR")
            casino.deposit(request_id="d", account_id=account, amount=100)
            written = node.app.tables.event_count()[0]
        finally:
            node.close()
        # The rows are where the URL says, read behind the ledger's back...
        assert written >= 2
        events_table = "stored_events" if store_url.startswith("sqlite") else "ledger_events"
        assert store_rows(store_url)[events_table] == written
        # ...and nowhere else.
        assert not (tmp_path / "decoy.db").exists()
        assert not (tmp_path / "decoy-keys").exists()
        with psycopg.connect(PG_DSN) as connection:
            tables = connection.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (decoy_schema,)
            ).fetchone()
        assert tables == (0,)
    finally:
        drop_pg_schema(decoy_schema)
