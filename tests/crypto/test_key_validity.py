"""Key validity and revocation, attacked on both stores: every signed envelope
carries its signing time, judged against its key's validity period, the
checkpoints that cover it, and revocations (issue 7, item 3)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from eventsourcing.utils import get_topic

from ledger.cli.main import main
from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keys import KEYRING_FILE, Keyring, Role, read_private_key, to_micros
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.signing import InMemorySigner
from ledger.domain.key_registry import KEY_REGISTRY_ID, REVOKED_TOPIC, KeyRegistry
from ledger.errors import KeyStoreError
from ledger.node import Node, open_node
from ledger.store.application import LedgerApplication
from ledger.store.checkpointer import Checkpointer
from tests.attacker import ThiefApplication, unrevoked
from tests.conftest import PASSPHRASE
from tests.demo_table import Table
from tests.verdict import verdict

HOUR = 3600 * 1_000_000


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    for name in ("LEDGER_KEYS", "LEDGER_STORE", "LEDGER_ORIGIN", "LEDGER_NODE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("LEDGER_CHECKPOINT_KEY", raising=False)


def cli(node: Node, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, verdict(code, out, err)


def verify(node: Node, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    return cli(node, capsys, "verify", "--level", "signatures", *extra)


def save_tables(app: LedgerApplication, count: int, name: str = "T") -> list[str]:
    streams = []
    for number in range(count):
        table = Table(name=f"{name}{number}", dealer="D1")
        table.throw_dice([1, 2, 3])
        app.save(table)
        streams.append(str(table.id))
    return streams


def position_of(node: Node, stream: str, version: int) -> int:
    wanted = node.app.tables.row_by_stream(stream, version)
    assert wanted is not None
    rows = node.app.tables.rows_after(0, 100_000)
    return [r[0] for r in rows].index(wanted[0])


def stolen(keys: KeyDirectory, name: str, role: Role) -> InMemorySigner:
    """What a thief holding the key file (and its passphrase) signs with."""
    return InMemorySigner(read_private_key(keys.private_key_path(name), PASSPHRASE), role, name)


def one_error_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    return lines[0]


# Validity periods.


def test_envelope_signed_before_its_key_is_valid_fails(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    save_tables(node.app, 2)
    not_before = node.keyring.with_role(Role.LEDGER_NODE)[0].not_before
    node.app.mapper.clock = lambda: to_micros(not_before) - 1  # type: ignore[attr-defined]
    (stream,) = save_tables(node.app, 1, "early")
    node.checkpointer().catch_up()
    code, output = verify(node, capsys)
    assert code == 1
    line = one_error_line(output)
    assert f"stream {stream} version 1" in line
    assert "before its key is valid" in line
    assert f"(log position {position_of(node, stream, 1)})" in line


def test_envelope_signed_after_its_key_expired_fails(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = KeyDirectory(tmp_path / "keys")
    start = datetime.now(UTC) - timedelta(hours=12)
    record = keys.create("node", Role.LEDGER_NODE, PASSPHRASE, valid_days=1, now=start)
    keys.create("checkpoint", Role.CHECKPOINT, PASSPHRASE)
    node = open_node(store_url, str(keys.path), passphrase=PASSPHRASE)
    try:
        save_tables(node.app, 2)
        assert record.not_after is not None
        after = to_micros(record.not_after) + 1
        node.app.mapper.clock = lambda: after  # type: ignore[attr-defined]
        (stream,) = save_tables(node.app, 1, "late")
        code, output = verify(node, capsys)
        assert code == 1
        line = one_error_line(output)
        assert f"stream {stream} version 1" in line
        assert "after its key expired" in line
        assert f"(log position {position_of(node, stream, 1)})" in line
    finally:
        node.close()


def test_signing_time_later_than_the_covering_checkpoint_fails(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    save_tables(node.app, 3)
    future = to_micros(datetime.now(UTC)) + HOUR  # dated after the checkpoint that follows
    node.app.mapper.clock = lambda: future  # type: ignore[attr-defined]
    (stream,) = save_tables(node.app, 1, "future")
    node.checkpointer().catch_up()
    code, output = verify(node, capsys)
    assert code == 1
    line = one_error_line(output)
    assert f"stream {stream} version 1" in line
    assert "later than the checkpoint of size 8 that covers it was issued" in line
    assert "(log position 6)" in line


def test_honest_signing_times_verify_at_every_level(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    save_tables(node.app, 3)
    node.checkpointer().catch_up()
    save_tables(node.app, 2, "tail")  # not yet under a checkpoint: judged by validity alone
    for level in ("integrity", "signatures", "settlement"):
        code, output = cli(node, capsys, "verify", "--level", level)
        assert code == 0, output


# Revocation.


@pytest.fixture
def rotated(node: Node, capsys: pytest.CaptureFixture[str]) -> Iterator[Node]:
    """Events under a checkpoint, then the node key replaced and revoked with the CLI."""
    save_tables(node.app, 3)
    node.checkpointer().catch_up()
    keys = node.keys
    keys.create("ops", Role.OPERATOR, PASSPHRASE)
    keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)
    assert cli(node, capsys, "keys", "use", "ledger-node-2")[0] == 0
    old = keys.keyring().with_role(Role.LEDGER_NODE)
    (revoked,) = [r for r in old if r.name == "ledger-node"]
    code, output = cli(node, capsys, "keys", "revoke", revoked.key_id, "--reason", "laptop stolen")
    assert code == 0, output
    assert "revoked ledger-node key ledger-node" in output
    yield node


def test_revocation_is_recorded_in_the_log_and_the_keyring(
    rotated: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = {e["name"]: e for e in json.loads(rotated.keys.keyring_path.read_text())["keys"]}
    assert entry["ledger-node"]["revocation_reason"] == "laptop stolen"
    assert entry["ledger-node"]["revoked_at"]
    row = rotated.app.tables.row_by_stream(str(KEY_REGISTRY_ID), 2)
    assert row is not None and row[3] == REVOKED_TOPIC
    assert get_topic(KeyRegistry.KeyRevoked) == REVOKED_TOPIC  # type: ignore[attr-defined]
    # Events signed before the revocation, under a checkpoint issued before it: trusted.
    code, output = verify(rotated, capsys)
    assert code == 0, output
    code, output = cli(rotated, capsys, "keys", "list")
    assert "revoked" in output and "laptop stolen" in output


def test_back_dated_event_by_a_revoked_key_fails_even_once_checkpointed(
    rotated: Node, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = rotated.keys
    thief = stolen(keys, "ledger-node", Role.LEDGER_NODE)
    (record,) = [r for r in keys.keyring() if r.name == "ledger-node"]
    back_dated = to_micros(record.not_before) + 1  # inside its validity, before the revocation
    app = ThiefApplication(
        store_url, keyring=keys.keyring(), signer=thief, clock=lambda: back_dated
    )
    try:
        (stream,) = save_tables(app, 1, "forged")
    finally:
        app.close()
    position = position_of(rotated, stream, 1)
    code, output = verify(rotated, capsys)
    assert code == 1
    line = one_error_line(output)
    assert f"stream {stream} version 1" in line
    assert "revoked at" in line and "no checkpoint issued before the revocation" in line
    assert f"(log position {position})" in line
    # The honest checkpointer covering it now cannot help: its checkpoint is after.
    Checkpointer(
        rotated.app.tables,
        signer=keys.signer(Role.CHECKPOINT, PASSPHRASE),
        signer_check=SignerCheck(keys.keyring()),
        keyring=keys.keyring(),
    ).catch_up()
    code, output = verify(rotated, capsys)
    assert code == 1
    assert f"(log position {position})" in one_error_line(output)


def test_a_keyring_revocation_absent_from_the_log_is_honoured(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    (stream,) = save_tables(node.app, 1)
    node_key = node.keyring.with_role(Role.LEDGER_NODE)[0]
    node.keys.mark_revoked(node_key.key_id, datetime.now(UTC), "compromised")
    code, output = verify(node, capsys)  # no checkpoint at all covers the event
    assert code == 1
    line = one_error_line(output)
    assert f"stream {stream} version 1" in line and "revoked at" in line
    assert "(log position 0)" in line


def test_checkpoint_signed_by_a_revoked_checkpoint_key_fails(
    rotated: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = rotated.keys
    checkpoint_key = keys.keyring().with_role(Role.CHECKPOINT)[0]
    # The key this node signs checkpoints with is not revoked from under it...
    code, output = cli(rotated, capsys, "keys", "revoke", "checkpoint", "--reason", "lost")
    assert code == 2 and "signs this node's checkpoints" in one_error_line(output)
    keys.create("checkpoint-2", Role.CHECKPOINT, PASSPHRASE)
    assert cli(rotated, capsys, "keys", "use", "checkpoint-2")[0] == 0
    assert cli(rotated, capsys, "keys", "revoke", "checkpoint", "--reason", "lost")[0] == 0
    # ...and once replaced and revoked, the node refuses to sign with it...
    with pytest.raises(KeyStoreError, match="revoked"):
        keys.signer(Role.CHECKPOINT, PASSPHRASE, "checkpoint")
    # ...but a thief holding it signs a checkpoint after the revocation, over an
    # event written since (by a node opened now, on the ledger-node key in use:
    # `rotated` still holds the keyring it opened with, and once its one-second
    # signer re-check is due it cannot read the revocation ledger-node-2 signed).
    writer = open_node(
        rotated.app.store_url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0,
        anchor_events=0,
    )  # fmt: skip
    try:
        save_tables(writer.app, 1, "late")
    finally:
        writer.close()
    Checkpointer(
        rotated.app.tables,
        signer=stolen(keys, checkpoint_key.name, Role.CHECKPOINT),
        signer_check=SignerCheck(keys.keyring()),
        keyring=keys.keyring(),
        keyring_source=lambda: unrevoked(keys.keyring()),  # the thief's code does not ask
    ).catch_up()
    code, output = verify(rotated, capsys)
    assert code == 1
    line = one_error_line(output)
    assert "checkpoint of size" in line and "by a checkpoint key revoked at" in line


def test_revoke_refuses_the_key_the_node_signs_with(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    node.keys.create("ops", Role.OPERATOR, PASSPHRASE)
    before = node.app.tables.event_count()
    code, output = cli(node, capsys, "keys", "revoke", "ledger-node", "--reason", "x")
    assert code == 2
    assert "signs this node's events" in one_error_line(output)
    assert node.app.tables.event_count() == before
    assert "revoked_at" not in node.keys.keyring_path.read_text()


def test_revoke_needs_an_operator_key(node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    node.keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)
    code, output = cli(node, capsys, "keys", "revoke", "ledger-node-2", "--reason", "x")
    assert code == 2
    assert "no valid operator private key" in one_error_line(output)
    assert "revoked_at" not in node.keys.keyring_path.read_text()


# Which key signs now.


def test_keys_list_marks_the_key_that_signs_now(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    code, output = cli(node, capsys, "keys", "list")
    assert code == 0
    marked = [line for line in output.splitlines() if line.endswith("[signs now]")]
    assert {line.split()[1] for line in marked} == {"ledger-node", "checkpoint"}
    # A second node key: ambiguous, so nothing is marked for the role...
    node.keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)
    output = cli(node, capsys, "keys", "list")[1]
    marked = [line for line in output.splitlines() if line.endswith("[signs now]")]
    assert [line.split()[1] for line in marked] == ["checkpoint"]
    # ...until one is chosen.
    assert cli(node, capsys, "keys", "use", "ledger-node-2")[0] == 0
    output = cli(node, capsys, "keys", "list")[1]
    (line,) = [line for line in output.splitlines() if " ledger-node " in line and "[signs" in line]
    assert " ledger-node-2 " in line


def test_a_node_refuses_an_ambiguous_signing_key(
    node: Node, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = node.keys.choose(Role.LEDGER_NODE)
    node.keys.create("ops", Role.OPERATOR, PASSPHRASE)
    node.keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)
    with pytest.raises(KeyStoreError, match=r"2 valid ledger-node keys .*ledger keys use NAME"):
        open_node(node.app.store_url, str(node.keys.path), passphrase=PASSPHRASE)
    code, output = cli(node, capsys, "keys", "revoke", "ledger-node-2", "--reason", "x")
    assert code == 2 and "LEDGER_NODE_KEY" in one_error_line(output)
    # The environment names one: used, and nothing else.
    monkeypatch.setenv("LEDGER_NODE_KEY", "ledger-node")
    other = open_node(node.app.store_url, str(node.keys.path), passphrase=PASSPHRASE)
    try:
        assert other.app.mapper.signer.key_id == first.key_id  # type: ignore[attr-defined]
    finally:
        other.close()
    # `keys use` stores the choice; the environment still overrides it.
    node.keys.use("ledger-node-2")
    assert node.keys.choose(Role.LEDGER_NODE).key_id == first.key_id
    monkeypatch.delenv("LEDGER_NODE_KEY")
    assert node.keys.choose(Role.LEDGER_NODE).name == "ledger-node-2"


# The auditor's own keyring, and its fingerprint.


def test_verify_with_the_auditors_own_keyring_and_its_fingerprint(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    save_tables(node.app, 2)
    node.checkpointer().catch_up()
    own = tmp_path / "auditor" / "keyring.json"
    own.parent.mkdir()
    shutil.copy(node.keys.keyring_path, own)
    fingerprint = Keyring.load(own).fingerprint()
    capsys.readouterr()
    code = main(
        [
            "--store",
            node.app.store_url,
            "--keys",
            str(tmp_path / "nowhere"),
            "verify",
            "--keyring",
            str(own),
        ]
    )
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert f"trusted keyring {fingerprint}" in out

    # A keyring without the node key: the verdict fails and says which keyring it rests on.
    data = json.loads(own.read_text())
    data["keys"] = [k for k in data["keys"] if k["role"] != "ledger-node"]
    own.write_text(json.dumps(data))
    other = Keyring.load(own).fingerprint()
    assert other != fingerprint
    code = main(["--store", node.app.store_url, "verify", "--keyring", str(own)])
    out, err = capsys.readouterr()
    assert code == 1
    line = one_error_line(verdict(code, out, err))
    assert "not in the keyring" in line and f"[keyring {other}]" in line


def test_fingerprint_is_of_the_canonical_records(tmp_path: Path) -> None:
    keys = KeyDirectory(tmp_path / "keys")
    record = keys.create("ops", Role.OPERATOR, PASSPHRASE)
    text = keys.keyring_path.read_text()
    fingerprint = Keyring.from_json(text).fingerprint()
    # Layout does not change it; a revocation does.
    assert Keyring.from_json(json.dumps(json.loads(text))).fingerprint() == fingerprint
    keys.mark_revoked(record.key_id, datetime.now(UTC), "gone")
    assert Keyring.load(tmp_path / "keys" / KEYRING_FILE).fingerprint() != fingerprint
