"""A property test: whatever an attacker does to one event row (or two),
`ledger verify` exits 1 with one line naming the log position it mutated (or
the earliest one the mutation broke), never a traceback; on both stores."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.cli.main import main
from ledger.crypto.keystore import KeyDirectory
from ledger.node import open_node
from ledger.store.recorders import LEDGER_TABLES
from tests.attacker import Attacker
from tests.conftest import (
    PASSPHRASE,
    PG_DSN,
    PG_URL,
    drop_pg_schema,
    new_pg_schema,
    require_postgres,
)
from tests.demo_table import Table
from tests.verdict import verdict

MUTATIONS = ["flip", "truncate", "null", "retype", "delete", "swap"]


def record_ledger(store: str, keys: Path) -> int:
    """Three tables whose events interleave in the log, all under checkpoints of
    16 (no background anchor: a slow run would add checkpoints of its own)."""
    node = open_node(store, str(keys), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0)
    try:
        tables = [Table(name=f"T{n}", dealer="D1") for n in range(3)]
        for turn in range(4):
            for number, table in enumerate(tables):
                for throw in range(3):
                    table.throw_dice([1 + (turn + number + throw) % 6, 2, 3])
                node.app.save(table)
        node.checkpointer(batch_size=16).catch_up()
        return node.app.tables.event_count()[0]
    finally:
        node.close()


class Recorded:
    """record_ledger's ledger, recorded once per backend for a module, and a
    copy of it for each example to mutate and verify: the SQLite file copied,
    or its rows copied into a schema the node laid out anew (tables, triggers
    and functions as a node makes them). The rows are those recording it
    again would give (one key directory: verify only reads it), without each
    example's 12 saves and 3 signed checkpoints."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.keys = KeyDirectory(workdir / "keys")
        self.keys.create_node_keys(PASSPHRASE)
        self._recorded: dict[str, tuple[str, int]] = {}  # backend -> (store, events)
        self._schemas: list[str] = []

    def _original(self, backend: str) -> tuple[str, int]:
        if backend not in self._recorded:
            if backend == "sqlite":
                store = f"sqlite:///{self.workdir / 'recorded.db'}"
            else:
                require_postgres()
                self._schemas.append(new_pg_schema())
                store = f"{PG_URL}?schema={self._schemas[-1]}"
            self._recorded[backend] = (store, record_ledger(store, self.keys.path))
        return self._recorded[backend]

    @contextmanager
    def copy(self, backend: str, directory: Path) -> Iterator[tuple[str, int]]:
        """A store of its own holding the recorded ledger, and its event count."""
        original, count = self._original(backend)
        if backend == "sqlite":
            with (
                closing(sqlite3.connect(original.removeprefix("sqlite:///"))) as source,
                closing(sqlite3.connect(directory / "ledger.db")) as target,
            ):
                source.backup(target)
            yield f"sqlite:///{directory / 'ledger.db'}", count
            return
        schema = new_pg_schema()
        try:
            store = f"{PG_URL}?schema={schema}"
            laid_out = open_node(
                store, str(self.keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0
            )
            laid_out.close()
            from_schema = original.rpartition("schema=")[2]
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                for table in ("ledger_events", *LEDGER_TABLES):
                    conn.execute(
                        f'INSERT INTO "{schema}".{table} OVERRIDING SYSTEM VALUE '
                        f'SELECT * FROM "{from_schema}".{table}'
                    )
                conn.execute(
                    "SELECT setval(pg_get_serial_sequence(%s, 'notification_id'), "
                    f'(SELECT max(notification_id) FROM "{schema}".ledger_events))',
                    (f'"{schema}".ledger_events',),
                )
            yield store, count
        finally:
            drop_pg_schema(schema)

    def close(self) -> None:
        for schema in self._schemas:
            drop_pg_schema(schema)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    made = Recorded(tmp_path_factory.mktemp("recorded"))
    try:
        yield made
    finally:
        made.close()


def mutate(attacker: Attacker, data: st.DataObject, count: int) -> int:
    """Apply one random mutation; return the log position it must be named at."""
    rows = attacker.sql(
        f"SELECT {attacker.id}, state FROM {attacker.events} ORDER BY {attacker.id}"
    )
    assert len(rows) == count
    position = data.draw(st.integers(0, count - 1), label="position")
    row_id, state = rows[position][0], bytes(rows[position][1])
    kind = data.draw(st.sampled_from(MUTATIONS), label="mutation")
    table, key = attacker.events, attacker.id

    def set_column(column: str, value: Any) -> None:
        attacker.sql(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (value, row_id))

    if kind == "flip":
        index = data.draw(st.integers(0, len(state) - 1), label="byte")
        mask = data.draw(st.integers(1, 255), label="mask")
        set_column("state", state[:index] + bytes([state[index] ^ mask]) + state[index + 1 :])
    elif kind == "truncate":
        set_column("state", state[: data.draw(st.integers(0, len(state) - 1), label="length")])
    elif kind == "null":
        columns = ["state", "topic"]
        if attacker.sqlite:  # PostgreSQL declares the stream id and version NOT NULL
            columns += ["originator_id", "originator_version"]
        set_column(data.draw(st.sampled_from(columns), label="column"), None)
    elif kind == "retype":
        if attacker.sqlite:  # values SQLite keeps with their own type in these columns
            column, value = data.draw(
                st.sampled_from(
                    [
                        ("state", "text, not bytes"),
                        ("topic", b"\x00bytes"),
                        ("originator_version", "seven"),
                        ("originator_version", 2.5),
                    ]
                ),
                label="retype",
            )
        else:  # PostgreSQL's columns are typed: the nearest is a wrong value of the type
            column, value = data.draw(
                st.sampled_from([("topic", "ledger.domain.table:Table.Closed"), ("topic", "")]),
                label="retype",
            )
        set_column(column, value)
    elif kind == "delete":
        attacker.sql(f"DELETE FROM {table} WHERE {key} = ?", (row_id,))
    else:  # swap two rows' envelopes: the earlier one is named
        other = data.draw(st.integers(0, count - 1).filter(lambda p: p != position), label="other")
        first, second = sorted((position, other))
        states = [bytes(rows[first][1]), bytes(rows[second][1])]
        attacker.sql(f"UPDATE {table} SET state = ? WHERE {key} = ?", (states[1], rows[first][0]))
        attacker.sql(f"UPDATE {table} SET state = ? WHERE {key} = ?", (states[0], rows[second][0]))
        position = first
    return position


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_row_mutation_is_one_line_naming_its_position(
    backend: str,
    data: st.DataObject,
    recorded: Recorded,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with recorded.copy(backend, tmp_path_factory.mktemp("fuzz")) as (store, count):
        attacker = Attacker(store)
        try:
            expected = mutate(attacker, data, count)
        finally:
            attacker.close()
        capsys.readouterr()
        keys = recorded.keys.path
        code = main(["--store", store, "--keys", str(keys), "verify", "--workers", "1"])
        out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == 1, out + err
    lines = verdict(code, out, err).strip().splitlines()
    assert len(lines) == 1, out + err
    found = re.findall(r"\(log position (\d+)\)", lines[0])
    assert found == [str(expected)], lines[0]


@pytest.mark.parametrize("leaves_too", [False, True])
def test_two_events_trading_places_are_located_by_the_stored_leaves(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], leaves_too: bool
) -> None:
    """Every envelope and chain still checks out; only the Merkle root sees the
    new order. The stored leaves name the first position that moved; when the
    attacker reorders them too, the message names the range it must lie in."""
    keys = KeyDirectory(tmp_path / "keys")
    keys.create_node_keys(PASSPHRASE)
    record_ledger(store_url, keys.path)
    attacker = Attacker(store_url)
    try:
        columns = "originator_id, originator_version, topic, state"
        rows = attacker.sql(
            f"SELECT {attacker.id}, {columns} FROM {attacker.events} ORDER BY {attacker.id}"
        )
        (a_id, *a), (b_id, *b) = rows[3], rows[4]  # T0's last of a save, T1's first event
        assert a[0] != b[0]
        sets = "originator_id = ?, originator_version = ?, topic = ?, state = ?"
        update = f"UPDATE {attacker.events} SET {sets} WHERE {attacker.id} = ?"
        attacker.sql(update, (a[0], -1, a[2], a[3], a_id))  # out of the way of the key
        attacker.sql(update, (*a, b_id))
        attacker.sql(update, (*b, a_id))
        if leaves_too:
            hashes = attacker.sql(
                "SELECT leaf_index, leaf_hash FROM ledger_merkle_leaves "
                "WHERE leaf_index IN (3, 4) ORDER BY leaf_index"
            )
            swap = "UPDATE ledger_merkle_leaves SET leaf_hash = ? WHERE leaf_index = ?"
            attacker.sql(swap, (bytes(hashes[1][1]), 3))
            attacker.sql(swap, (bytes(hashes[0][1]), 4))
    finally:
        attacker.close()
    capsys.readouterr()
    code = main(["--store", store_url, "--keys", str(keys.path), "verify", "--workers", "1"])
    out, err = capsys.readouterr()
    assert code == 1
    (line,) = verdict(code, out, err).strip().splitlines()
    if leaves_too:
        assert "an event at a log position from 0 to 15 was changed, removed or inserted" in line
        assert "(log position 0)" in line
    else:
        assert "differs from the event the checkpoint of size 16 signed" in line
        assert "(log position 3)" in line
