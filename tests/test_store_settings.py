"""A store given by URL goes where the URL says, whatever the environment holds.

eventsourcing reads `<APP NAME>_<SETTING>` and plain `SQLITE_DBNAME`,
`POSTGRES_*`, `PERSISTENCE_MODULE`... from the process environment; the
ledger's application must read none of them (issue 8, item 2).
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from ledger.casino import Casino
from ledger.crypto.keystore import KeyDirectory
from ledger.node import open_node
from ledger.plugins.manager import get_plugin_manager
from ledger.store.application import LedgerApplication
from tests.conftest import PASSPHRASE, PG_DSN, drop_pg_schema, new_pg_schema
from tests.test_cli_new_user import store_rows


def stray_environment(tmp_path: Path, decoy_schema: str) -> dict[str, str]:
    """Every variable that could plausibly redirect a store, pointing at decoys."""
    decoy_db = str(tmp_path / "decoy.db")
    stray = {
        # The ledger's own, documented settings (a URL given explicitly beats LEDGER_STORE).
        "LEDGER_STORE": f"sqlite:///{decoy_db}",
        "LEDGER_KEYS": str(tmp_path / "decoy-keys"),
        "LEDGER_ORIGIN": "decoy-origin",
        "LEDGER_PASSPHRASE": "decoy",
        "LEDGER_PLUGINS_BLOCK": "nothing-installed",
    }
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
            casino = Casino(node.app, get_plugin_manager(load_entry_points=False).variants())
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
