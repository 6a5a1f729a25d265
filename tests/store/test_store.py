"""The sealed store: envelopes on write, checks on read, append-only tables."""

from __future__ import annotations

import json

import pytest
from eventsourcing.persistence import IntegrityError, PersistenceError

from ledger.crypto.canonical import ENVELOPE_DOMAIN
from ledger.crypto.envelope import GENESIS_HASH, MAGIC, open_envelope
from ledger.crypto.keys import Role
from ledger.crypto.signing import verify_signature
from ledger.errors import VerificationError
from ledger.node import Node, open_node
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE
from tests.demo_table import Table


def test_every_stored_event_is_a_signed_envelope(node: Node) -> None:
    node.app.mapper.clock = lambda: 1_767_225_600_123_456  # type: ignore[attr-defined]
    table = Table(name="T1", dealer="D7")
    table.throw_dice([1, 2, 3])
    node.app.save(table)
    rows = node.app.tables.rows_after(0, 10)
    assert len(rows) == 2
    signer_key = node.keyring.with_role(Role.LEDGER_NODE)[0]
    previous = GENESIS_HASH
    for version, (_, _, stored_version, topic, state) in enumerate(rows, start=1):
        state = bytes(state)
        assert state.startswith(MAGIC)
        envelope = open_envelope(state, stream=str(table.id), version=version)
        header = json.loads(envelope.header)
        assert header == {
            "key_id": signer_key.key_id,
            "payload_sha256": header["payload_sha256"],
            "prev": previous.hex(),
            "signed_at": 1_767_225_600_123_456,
            "stream": str(table.id),
            "type": topic,
            "version": stored_version,
        }
        assert envelope.signed_at == 1_767_225_600_123_456
        assert verify_signature(
            signer_key.public_key, ENVELOPE_DOMAIN + envelope.header, envelope.signature
        )
        previous = envelope.entry_hash
    assert node.app.repository.get(table.id).throws == [[1, 2, 3]]


def test_a_new_process_continues_the_chain(node: Node, store_url: str) -> None:
    table = Table(name="T1", dealer="D1")
    node.app.save(table)
    other = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE)
    try:  # a fresh application has no cached stream heads: it must read the chain
        again = other.app.repository.get(table.id)
        again.throw_dice([6, 6, 6])
        other.app.save(again)
    finally:
        other.close()
    fresh = Table(name="T2", dealer="D1")
    node.app.save(fresh)
    assert node.app.repository.get(table.id).throws == [[6, 6, 6]]


def test_concurrent_writers_conflict_and_the_chain_stays_whole(node: Node, store_url: str) -> None:
    table = Table(name="T1", dealer="D1")
    node.app.save(table)
    other = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE)
    try:
        mine, theirs = node.app.repository.get(table.id), other.app.repository.get(table.id)
        mine.throw_dice([1, 1, 2])
        theirs.throw_dice([5, 5, 6])
        node.app.save(mine)
        with pytest.raises(IntegrityError):
            other.app.save(theirs)
    finally:
        other.close()
    assert node.app.repository.get(table.id).throws == [[1, 1, 2]]


def test_reads_check_the_envelope(node: Node) -> None:
    table = Table(name="T1", dealer="D1")
    table.throw_dice([2, 2, 2])
    node.app.save(table)
    attacker = Attacker(node.app.store_url)
    try:
        state = attacker.row(str(table.id), 2)[4]
        attacker.set_state(str(table.id), 2, state.replace(b"[2,2,2]", b"[2,2,3]"))
    finally:
        attacker.close()
    with pytest.raises(VerificationError, match=f"stream {table.id} version 2.*payload"):
        node.app.repository.get(table.id)


def test_reads_check_the_chain(node: Node) -> None:
    table = Table(name="T1", dealer="D1")
    for _ in range(3):
        table.throw_dice([3, 4, 5])
    node.app.save(table)
    attacker = Attacker(node.app.store_url)
    try:
        attacker.delete(str(table.id), 2)
    finally:
        attacker.close()
    with pytest.raises(VerificationError, match=f"stream {table.id} version 3.*chain broken"):
        node.app.repository.get(table.id)


def test_a_read_only_node_cannot_write(node: Node, store_url: str) -> None:
    reader = open_node(store_url, str(node.keys.path), writable=False)
    try:
        with pytest.raises(VerificationError, match="read-only"):
            reader.app.save(Table(name="T9", dealer="D1"))
    finally:
        reader.close()
    assert node.app.tables.event_count() == (0, 0)


@pytest.mark.parametrize("table", ["events", "ledger_merkle_leaves", "ledger_checkpoints"])
@pytest.mark.parametrize("statement", ["UPDATE", "DELETE", "TRUNCATE"])
def test_tables_are_append_only(node: Node, table: str, statement: str) -> None:
    node.app.save(Table(name="T1", dealer="D1"))
    node.checkpointer().catch_up()
    recorder = node.app.sealed_recorder
    name = "{events}" if table == "events" else "{" + table.removeprefix("ledger_merkle_") + "}"
    name = {"{ledger_checkpoints}": "{checkpoints}"}.get(name, name)
    if statement == "TRUNCATE" and recorder.dialect == "sqlite":
        statement = "DELETE"  # SQLite has no TRUNCATE; DELETE without WHERE is its form
    sql = {
        "UPDATE": f"UPDATE {name} SET {{column}} = {{column}}",
        "DELETE": f"DELETE FROM {name}",
        "TRUNCATE": f"TRUNCATE {name}",
    }[statement]
    column = "topic" if table == "events" else "leaf_hash" if "leaves" in table else "note"
    refused = pytest.raises((PersistenceError, Exception), match="append-only")
    with refused, recorder.write() as cursor:
        cursor.execute(recorder.sql(sql.replace("{column}", column)))
    assert node.app.tables.event_count()[0] == 1
    assert len(node.app.tables.checkpoints()) == 1


def test_an_envelope_read_back_skips_no_check_when_its_signature_changed(node: Node) -> None:
    from eventsourcing.persistence import StoredEvent

    table = Table(name="T1", dealer="D1")
    node.app.save(table)
    _, originator_id, version, topic, state = node.app.tables.rows_after(0, 1)[0]
    stored = StoredEvent(originator_id, version, topic, bytes(state))
    node.app.mapper.open(stored)  # sealed here: the same bytes need no second verify
    header_size = int.from_bytes(state[4:6], "big")
    signature_byte = 6 + header_size + 10
    bad_signature = bytearray(state)
    bad_signature[signature_byte] ^= 1
    with pytest.raises(VerificationError, match="signature is invalid"):
        node.app.mapper.open(StoredEvent(originator_id, version, topic, bytes(bad_signature)))
