"""Checkpoints over the global log, proofs from the stored tree, chunked verify."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.audit.findings import Findings
from ledger.audit.proofs import consistency_from, inclusion_of, verify_inclusion_bundle
from ledger.audit.verify import Level, Sinks, VerifyOptions, verify_store
from ledger.cli.main import main
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import open_envelope
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.merkle import hash_leaf, root_of
from ledger.crypto.signing import InMemorySigner
from ledger.errors import VerificationError
from ledger.node import Node
from ledger.store.merkle_log import stream_of
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE
from tests.demo_table import Table
from tests.installed import installed_games


def record(node: Node, events: int) -> None:
    table = Table(name="T", dealer="D")
    for _ in range(events - 1):
        table.throw_dice([4, 5, 6])
    node.app.save(table)


def leaf_hashes(node: Node) -> list[bytes]:
    rows = node.app.tables.rows_after(0, 10_000)
    return [
        hash_leaf(open_envelope(bytes(r[4]), stream=stream_of(r[1]), version=r[2]).header)
        for r in rows
    ]


def test_checkpoints_commit_to_the_log_in_order(node: Node) -> None:
    record(node, 37)
    checkpointer = node.checkpointer(batch_size=8)
    assert checkpointer.catch_up() is not None
    assert checkpointer.catch_up() is None  # nothing new, nothing signed
    record(node, 10)
    checkpointer.catch_up()
    leaves = leaf_hashes(node)
    checkpoints = node.app.tables.checkpoints()
    assert [c.size for c in checkpoints] == [8, 16, 24, 32, 37, 45, 47]
    for checkpoint in checkpoints:
        checkpoint.verify(node.keyring)
        assert checkpoint.root == root_of(leaves[: checkpoint.size])


def test_beside_a_busy_writer_the_anchor_signs_what_was_there(node: Node) -> None:
    """`catch_up(chase=False)`, what the anchor and `follow` run, covers the events
    stored when it began and stops; chasing a busy writer instead signs a
    checkpoint for every few events that arrive meanwhile."""
    record(node, 20)
    checkpointer = node.checkpointer(batch_size=50)
    arrivals = 0

    def busy_writer(_: int) -> None:  # called after each committed batch
        nonlocal arrivals
        if arrivals < 5:
            arrivals += 1
            record(node, 3)

    checkpointer.catch_up(busy_writer, chase=False)
    assert [c.size for c in node.app.tables.checkpoints()] == [20]
    assert arrivals == 1  # the writer wrote 3 more meanwhile: left for the next turn
    arrivals = 0
    checkpointer.catch_up(busy_writer)  # chasing: one checkpoint per arrival
    assert [c.size for c in node.app.tables.checkpoints()] == [20, 23, 26, 29, 32, 35, 38]


def test_inclusion_proofs_verify_offline(node: Node) -> None:
    record(node, 21)
    node.checkpointer(batch_size=5).catch_up()
    stream = stream_of(node.app.tables.rows_after(0, 1)[0][1])
    for version in range(1, 22):
        bundle = json.loads(json.dumps(inclusion_of(node.app, stream, version, node.keyring)))
        checkpoint = verify_inclusion_bundle(bundle, node.keyring)
        assert checkpoint.size == 21
    forged = dict(bundle, header=bundle["header"][:-4] + "AAA=")
    with pytest.raises(VerificationError):
        verify_inclusion_bundle(forged, node.keyring)
    with pytest.raises(VerificationError, match="unknown key"):
        verify_inclusion_bundle(bundle, Keyring())


def test_consistency_between_checkpoints(node: Node) -> None:
    record(node, 13)
    node.checkpointer(batch_size=4).catch_up()
    first = node.app.tables.checkpoints()[0]
    bundle = consistency_from(node.app, first, node.keyring)
    assert len(bundle["proof"]) > 0
    record(node, 9)
    node.checkpointer(batch_size=4).catch_up()
    for earlier in node.app.tables.checkpoints():
        consistency_from(node.app, earlier, node.keyring)  # raises if not consistent
    lying = replace(first, root=bytes(32))
    with pytest.raises(VerificationError):
        consistency_from(node.app, lying, node.keyring)


def test_checkpoint_notes_are_signed_and_canonical(node: Node) -> None:
    record(node, 3)
    checkpoint = node.checkpointer().catch_up()
    assert checkpoint is not None
    note = checkpoint.to_note()
    assert Checkpoint.from_note(note) == checkpoint
    bigger = note.replace("\n3\n", "\n4\n", 1)
    with pytest.raises(VerificationError, match="bad signature"):
        Checkpoint.from_note(bigger).verify(node.keyring)
    node_signer = node.keys.signer(Role.LEDGER_NODE, PASSPHRASE)
    wrong_role = Checkpoint.sign(origin="x", size=1, root=bytes(32), signer=node_signer)
    with pytest.raises(VerificationError, match="ledger-node key"):
        wrong_role.verify(node.keyring)
    with pytest.raises(VerificationError, match="malformed"):
        Checkpoint.from_note("not a checkpoint")


def test_checkpointer_needs_a_checkpoint_key(node: Node) -> None:
    from ledger.errors import ConfigError
    from ledger.store.checkpointer import Checkpointer

    signer = node.keys.signer(Role.LEDGER_NODE, PASSPHRASE)
    assert isinstance(signer, InMemorySigner)
    with pytest.raises(ConfigError):
        Checkpointer(node.app.tables, signer=signer, signer_check=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("workers", [1, 2])
def test_chunked_verify_matches_serial(node: Node, workers: int) -> None:
    for _ in range(5):
        record(node, 23)
    node.checkpointer(batch_size=7).catch_up()
    report = verify_store(
        node.app,
        node.keyring,
        VerifyOptions(workers=workers, chunk_leaves=8, games=installed_games()),
    )
    assert (report.events, report.streams, report.checkpoints) == (115, 5, 17)
    integrity = verify_store(
        node.app,
        node.keyring,
        VerifyOptions(level=Level.INTEGRITY, workers=workers, chunk_leaves=16),
    )
    assert integrity.events == 115

    stream = stream_of(node.app.tables.rows_after(30, 1)[0][1])
    attacker = Attacker(node.app.store_url)
    try:
        attacker.delete(stream, 9)  # crosses a chunk edge at 8-leaf chunks
    finally:
        attacker.close()
    with pytest.raises(VerificationError, match=f"stream {stream} version 9: event missing"):
        verify_store(
            node.app,
            node.keyring,
            VerifyOptions(workers=workers, chunk_leaves=8, games=installed_games()),
        )


def test_cli_checkpoint_export_and_proofs(node: Node, tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    record(node, 12)
    base = ["--store", node.app.store_url, "--keys", str(node.keys.path)]
    kept = tmp_path / "kept.txt"
    assert main([*base, "checkpoint", "--export", str(kept)]) == 0
    assert Checkpoint.from_note(kept.read_text()).size == 12
    capsys.readouterr()
    stream = stream_of(node.app.tables.rows_after(0, 1)[0][1])
    assert main([*base, "proof", "inclusion", stream, "4"]) == 0
    bundle = json.loads(capsys.readouterr().out)
    assert verify_inclusion_bundle(bundle, node.keyring).size == 12
    record(node, 5)
    assert main([*base, "checkpoint"]) == 0
    capsys.readouterr()
    assert main([*base, "proof", "consistency", "--since", str(kept)]) == 0
    assert json.loads(capsys.readouterr().out)["proof"]


def test_verify_checks_the_stored_tree_that_serves_proofs(node: Node) -> None:
    record(node, 20)
    node.checkpointer(batch_size=6).catch_up()
    options = VerifyOptions(games=installed_games())
    verify_store(node.app, node.keyring, options)
    attacker = Attacker(node.app.store_url)
    try:
        attacker.sql(
            "UPDATE ledger_merkle_nodes SET hash = ? WHERE level = 2 AND idx = 0", (bytes(32),)
        )
    finally:
        attacker.close()
    found = Findings()
    verify_store(node.app, node.keyring, options, Sinks(findings=found))
    texts = [f.text for f in found.items]
    assert any("checkpoint of size 6: no valid consistency proof" in t for t in texts), texts
    assert any("Merkle node (level 2, index 0) does not hold the hash" in t for t in texts), texts


def test_checkpoint_with_unencrypted_keys_asks_no_passphrase(
    store_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Keys kept without a passphrase (`keys create --unencrypted`): `ledger
    checkpoint` signs with no LEDGER_PASSPHRASE and no terminal to ask on."""
    import io
    import sys

    from ledger.crypto.keystore import KeyDirectory
    from ledger.store.application import LedgerApplication

    directory = KeyDirectory(tmp_path / "plain-keys")
    directory.create_node_keys(None)
    app = LedgerApplication(
        store_url, keyring=directory.keyring(), signer=directory.signer(Role.LEDGER_NODE, None)
    )
    app.save(Table(name="T", dealer="D"))
    app.close()
    monkeypatch.delenv("LEDGER_PASSPHRASE", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    args = ["--store", store_url, "--keys", str(directory.path), "checkpoint"]
    assert main(args) == 0
    signed = Checkpoint.from_note(capsys.readouterr().out)
    assert signed.size == 1
    signed.verify(directory.keyring())
