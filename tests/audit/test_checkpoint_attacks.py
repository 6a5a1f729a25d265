"""An attacker with database rights against checkpoints, Merkle rows and
proof bundles: each attack is caught and located, on both stores, and never
makes `verify`, `checkpoint` or a bundle check crash."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.proofs import inclusion_of, verify_inclusion_bundle
from ledger.cli.main import main
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory
from ledger.errors import ConfigError, VerificationError
from ledger.node import Node, open_node
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE
from tests.demo_table import Table
from tests.verdict import verdict

CheckpointEdit = Callable[[Attacker, Node], None]


def record(node: Node, events: int) -> str:
    """One stream of `events` events; returns its id."""
    table = Table(name="T", dealer="D")
    for _ in range(events - 1):
        table.throw_dice([1, 2, 3])
    node.app.save(table)
    return str(table.id)


def checkpointed(node: Node) -> None:
    """20 events under checkpoints of size 8, 16 and 20."""
    record(node, 20)
    node.checkpointer(batch_size=8).catch_up()
    assert [c.size for c in node.app.tables.checkpoints()] == [8, 16, 20]


def run(node: Node, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), *argv])
    except SystemExit as exc:  # argparse refuses a malformed argument (one line, exit 2)
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, verdict(code, captured.out, captured.err)


def attack(node: Node, edit: Callable[[Attacker], Any]) -> None:
    attacker = Attacker(node.app.store_url)
    try:
        edit(attacker)
    finally:
        attacker.close()


def resign(node: Node, checkpoint: Checkpoint, **changes: Any) -> str:
    """A checkpoint re-signed with the real key (a fork, or a checkpointer with a bad clock)."""
    fields = {
        "origin": checkpoint.origin,
        "size": checkpoint.size,
        "root": checkpoint.root,
        "now": checkpoint.issued_at,
    } | changes
    signer = node.keys.signer(Role.CHECKPOINT, PASSPHRASE)
    return Checkpoint.sign(signer=signer, **fields).to_note()


def by_size(node: Node, size: int) -> Checkpoint:
    return next(c for c in node.app.tables.checkpoints() if c.size == size)


@pytest.fixture
def signing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())


# -- 1. Export hands over the newest checkpoint whose signature verifies --------


def test_reinserted_old_checkpoint_neither_exported_nor_accepted(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path, signing: None
) -> None:
    record(node, 57)
    node.checkpointer(batch_size=16).catch_up()
    first = by_size(node, 16)
    # The original exploit: an old checkpoint re-inserted under a larger size column...
    attack(
        node,
        lambda a: a.sql(
            "INSERT INTO ledger_checkpoints (tree_size, root, note) VALUES (?, ?, ?)",
            (10_000, first.root, first.to_note()),
        ),
    )
    kept = tmp_path / "kept.txt"
    code, output = run(node, capsys, "checkpoint", "--no-sign", "--export", str(kept))
    assert code == 0, output
    assert Checkpoint.from_note(kept.read_text()).size == 57  # by signed size, not the column
    assert "covers every event of the log" in output
    # ...and the checkpointer, holding the key, refuses to sign past the altered row.
    code, output = run(node, capsys, "checkpoint", "--export", str(tmp_path / "k2.txt"))
    assert code == 1
    assert "checkpoint of size 16: its row says size 10000" in output
    assert len(output.strip().splitlines()) == 1
    # ...so deleting the 52 newest events cannot get past the auditor's kept checkpoint.
    attack(node, lambda a: a.delete_tail(keep=5))
    code, output = run(node, capsys, "verify", "--trusted", str(kept))
    assert code == 1
    assert "kept checkpoint of size 57" in output
    assert len(output.strip().splitlines()) == 1


def test_export_with_the_public_keyring_alone_signs_nothing(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(node, 12)
    node.checkpointer().catch_up()
    record(node, 5)  # not under a checkpoint
    auditor = tmp_path / "auditor-keys"
    auditor.mkdir()
    shutil.copy(node.keys.keyring_path, auditor / node.keys.keyring_path.name)
    monkeypatch.delenv("LEDGER_PASSPHRASE", raising=False)
    rows = len(node.app.tables.checkpoint_rows())
    kept = tmp_path / "kept.txt"
    capsys.readouterr()
    code = main(["--store", node.app.store_url, "--keys", str(auditor), "checkpoint"])
    assert code == 0
    code = main(
        ["--store", node.app.store_url, "--keys", str(auditor), "checkpoint", "--export", str(kept)]
    )
    output = capsys.readouterr().out
    assert code == 0
    assert "the 5 newest events of the log are not under it" in output
    assert Checkpoint.from_note(kept.read_text()).size == 12
    assert len(node.app.tables.checkpoint_rows()) == rows  # nothing signed


def test_export_with_the_key_catches_up_first(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path, signing: None
) -> None:
    record(node, 9)
    kept = tmp_path / "kept.txt"
    code, output = run(node, capsys, "checkpoint", "--export", str(kept))
    assert code == 0, output
    assert Checkpoint.from_note(kept.read_text()).size == 9
    assert "covers every event" in output


def test_export_refuses_when_still_behind_after_catching_up(
    node: Node,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    signing: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record(node, 9)
    node.checkpointer().catch_up()
    record(node, 3)
    # A checkpointer that (for whatever reason) covers nothing new.
    monkeypatch.setattr("ledger.store.checkpointer.Checkpointer.catch_up", lambda *a, **k: None)
    kept = tmp_path / "kept.txt"
    code, output = run(node, capsys, "checkpoint", "--export", str(kept))
    assert code == 1
    assert "newest valid checkpoint (size 9) still covers fewer than the 12 events" in output
    assert not kept.exists()


@pytest.mark.parametrize("where", ["missing/kept.txt", "."])
def test_export_to_a_bad_path_is_one_line(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str
) -> None:
    record(node, 3)
    code, output = run(node, capsys, "checkpoint", "--no-sign", "--export", str(tmp_path / where))
    assert code == 2
    assert "cannot export to" in output
    assert len(output.strip().splitlines()) == 1


def test_checkpoint_times_never_go_backwards(node: Node) -> None:
    record(node, 4)
    node.checkpointer().catch_up()
    first = by_size(node, 4)
    record(node, 2)
    checkpointer = node.checkpointer()
    checkpointer.clock = lambda: first.issued_at - timedelta(hours=1)  # a clock set back
    made = checkpointer.catch_up()
    assert made is not None and made.size == 6
    assert made.issued_at == first.issued_at


# -- 2. The checkpointer checks where it resumes before it signs ---------------


def edit_right_edge_node(attacker: Attacker) -> None:
    attacker.sql(
        "UPDATE ledger_merkle_nodes SET hash = ? WHERE level = 2 AND idx = 4", (bytes(32),)
    )


def leaf_far_ahead(attacker: Attacker) -> None:
    attacker.sql(
        "UPDATE ledger_merkle_leaves SET notification_id = ? WHERE leaf_index = 19", (10**9,)
    )


def leaf_hash_edited(attacker: Attacker) -> None:
    attacker.sql(
        "UPDATE ledger_merkle_leaves SET leaf_hash = ? WHERE leaf_index = 19", (bytes(32),)
    )


def last_checkpoint_deleted(attacker: Attacker) -> None:
    attacker.sql("DELETE FROM ledger_checkpoints WHERE tree_size = 20")


def newest_leaves_deleted(attacker: Attacker) -> None:
    attacker.sql("DELETE FROM ledger_merkle_leaves WHERE leaf_index >= 18")


RESUME_ATTACKS: dict[str, tuple[Callable[[Attacker], None], str]] = {
    "edited right-edge node": (edit_right_edge_node, "Merkle node (2, 4): the stored frontier"),
    "leaf notification id set far ahead": (
        leaf_far_ahead,
        "Merkle leaf 19: names event 1000000000, which is not in the log",
    ),
    "last leaf hash edited": (leaf_hash_edited, "Merkle leaf 19"),
    "newest checkpoint deleted": (
        last_checkpoint_deleted,
        "Merkle leaf 16: the Merkle log holds 20 leaves but the newest signed checkpoint covers 16",
    ),
    "newest leaves deleted": (
        newest_leaves_deleted,
        "Merkle leaf 18: the newest signed checkpoint",
    ),
}


@pytest.mark.parametrize("name", list(RESUME_ATTACKS))
def test_checkpointer_signs_nothing_past_a_bad_resume_point(
    node: Node, capsys: pytest.CaptureFixture[str], signing: None, name: str
) -> None:
    checkpointed(node)
    edit, message = RESUME_ATTACKS[name]
    attack(node, edit)
    record(node, 5)  # new events to checkpoint
    rows = len(node.app.tables.checkpoint_rows())
    code, output = run(node, capsys, "checkpoint")
    assert code == 1, output
    assert message in output
    assert len(output.strip().splitlines()) == 1
    assert len(node.app.tables.checkpoint_rows()) == rows  # signed nothing
    with pytest.raises(VerificationError):
        node.checkpointer().catch_up()


def test_a_running_checkpointer_checks_again_before_extending(node: Node) -> None:
    record(node, 6)
    checkpointer = node.checkpointer(batch_size=4)
    checkpointer.catch_up()
    attack(
        node,
        lambda a: a.sql(
            "UPDATE ledger_merkle_nodes SET hash = ? WHERE level = 1 AND idx = 2", (bytes(32),)
        ),
    )
    record(node, 2)
    with pytest.raises(VerificationError, match=r"Merkle node \(1, 2\)"):
        checkpointer.catch_up()


# -- 3. Racing checkpointers ---------------------------------------------------


def test_racing_checkpointers_sign_one_consistent_log(
    node: Node, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [
        open_node(
            store_url,
            str(node.keys.path),
            passphrase=PASSPHRASE,
            anchor_seconds=0,
            anchor_events=0,
        )
        for _ in range(3)
    ]
    errors: list[BaseException] = []

    def checkpoint(racer: Node) -> None:
        try:
            for _ in range(5):
                racer.checkpointer(batch_size=3).catch_up()
        except BaseException as exc:  # reported below
            errors.append(exc)

    try:
        for _ in range(4):
            record(node, 7)
            threads = [threading.Thread(target=checkpoint, args=(racer,)) for racer in nodes]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        for racer in nodes:
            racer.close()
    assert errors == []
    sizes = [c.size for c in node.app.tables.checkpoints()]
    assert sizes == sorted(set(sizes)) and sizes[-1] == 28
    code, output = run(node, capsys, "verify", "--level", "integrity")
    assert code == 0, output


# -- 7. Checkpoint and Merkle rows never crash verify, and are located ---------


def garbage_note(a: Attacker, node: Node) -> None:
    a.sql("UPDATE ledger_checkpoints SET note = ? WHERE tree_size = 16", ("garbage",))


def null_note(a: Attacker, node: Node) -> None:
    a.loosen_checkpoints()
    a.sql("UPDATE ledger_checkpoints SET note = NULL WHERE tree_size = 16")


def binary_note(a: Attacker, node: Node) -> None:
    a.make_notes_binary()
    a.sql("UPDATE ledger_checkpoints SET note = ? WHERE tree_size = 16", (b"\x00\xff",))


def naive_time(a: Attacker, node: Node) -> None:
    note = a.checkpoint_note(16).replace("+00:00", "")
    a.sql("UPDATE ledger_checkpoints SET note = ? WHERE tree_size = 16", (note,))


def size_column_altered(a: Attacker, node: Node) -> None:
    a.sql("UPDATE ledger_checkpoints SET tree_size = 99 WHERE tree_size = 8")


def forked_duplicate(a: Attacker, node: Node) -> None:
    a.loosen_checkpoints()
    fork = resign(node, by_size(node, 16), root=bytes(32))
    a.sql("INSERT INTO ledger_checkpoints VALUES (?, ?, ?)", (16, bytes(32), fork))


def times_backwards(a: Attacker, node: Node) -> None:
    later = by_size(node, 20).issued_at + timedelta(minutes=5)
    note = resign(node, by_size(node, 16), now=later)
    a.sql("UPDATE ledger_checkpoints SET note = ? WHERE tree_size = 16", (note,))


def missing_node(a: Attacker, node: Node) -> None:
    a.sql("DELETE FROM ledger_merkle_nodes WHERE level = 3 AND idx = 1")


def node_holds_text(a: Attacker, node: Node) -> None:
    a.sql("UPDATE ledger_merkle_nodes SET hash = ? WHERE level = 3 AND idx = 1", ("abc",))


def other_origin(a: Attacker, node: Node) -> None:
    note = resign(node, by_size(node, 20), origin="another-ledger")
    a.sql("UPDATE ledger_checkpoints SET note = ? WHERE tree_size = 20", (note,))


def bad_signature(a: Attacker, node: Node) -> None:
    note = a.checkpoint_note(8)
    body, signature = note.rsplit(" ", 1)
    # Characters 6.. of the base64 encode the signature (0-5 hold the 4-byte key hash).
    flipped = signature[:8] + ("B" if signature[8] == "A" else "A") + signature[9:]
    a.sql("UPDATE ledger_checkpoints SET note = ? WHERE tree_size = 8", (f"{body} {flipped}",))


ROW_ATTACKS: dict[str, tuple[CheckpointEdit, str]] = {
    "garbage note": (garbage_note, "checkpoint row 16: malformed checkpoint"),
    "NULL note": (null_note, "checkpoint row 16: malformed checkpoint: the note is NoneType"),
    # (on PostgreSQL the column's type changes, so every row holds bytes: row 8 is named)
    "binary note": (binary_note, ": malformed checkpoint: the note is bytes, not text"),
    "naive time": (naive_time, "checkpoint row 16: malformed checkpoint: its time has no UTC"),
    "size column altered": (size_column_altered, "checkpoint of size 8: its row says size 99"),
    "two roots for one size": (
        forked_duplicate,
        "checkpoint of size 16: two signed checkpoints of this size state different roots",
    ),
    "times going backwards": (
        times_backwards,
        "checkpoint of size 20: issued at",
    ),
    "consistency proof cannot be built": (
        missing_node,
        "checkpoint of size 8: no valid consistency proof from it to the checkpoint of size 16",
    ),
    "Merkle node holding text": (
        node_holds_text,
        "checkpoint of size 8: no valid consistency proof from it to the checkpoint of size 16: "
        "Merkle node (3, 1) does not hold a 32-byte hash",
    ),
    "another origin": (other_origin, "checkpoint of size 20: origin is 'another-ledger'"),
    "bad signature": (bad_signature, "checkpoint of size 8: bad signature"),
}


@pytest.mark.parametrize("name", list(ROW_ATTACKS))
def test_verify_names_the_checkpoint_at_fault(
    node: Node, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    checkpointed(node)
    edit, message = ROW_ATTACKS[name]
    attack(node, lambda a: edit(a, node))
    code, output = run(node, capsys, "verify", "--level", "integrity")
    assert code == 1, output
    assert message in output
    assert len(output.strip().splitlines()) == 1


def test_an_identical_copy_of_a_checkpoint_is_harmless(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replayed copy of a genuine signed statement adds and hides nothing: accepted."""
    checkpointed(node)

    def duplicate(a: Attacker) -> None:
        a.loosen_checkpoints()
        a.sql("INSERT INTO ledger_checkpoints VALUES (?, ?, ?)", (16, b"", a.checkpoint_note(16)))

    attack(node, duplicate)
    code, output = run(node, capsys, "verify", "--level", "integrity")
    assert code == 0, output
    assert "3 checkpoints verified" in output


def test_kept_checkpoint_is_checked_against_the_log_not_a_stored_one(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The auditor kept a checkpoint of size 16 over another history: a stored
    checkpoint of the same size never stands in for it."""
    checkpointed(node)
    kept = tmp_path / "kept.txt"
    kept.write_text(resign(node, by_size(node, 16), root=bytes(32)))
    code, output = run(node, capsys, "verify", "--level", "integrity", "--trusted", str(kept))
    assert code == 1
    assert "kept checkpoint of size 16: the first 16 events of the log do not hash to its root" in (
        output
    )
    assert "the store's checkpoint of that size states another root" in output
    assert len(output.strip().splitlines()) == 1


def test_verify_reports_the_unanchored_tail(node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    checkpointed(node)
    record(node, 3)
    code, output = run(node, capsys, "verify", "--level", "integrity")
    assert code == 0
    assert "3 newest events are not yet under a checkpoint (unanchored tail; the newest" in output
    assert "checkpoint, of size 20, was signed" in output


# -- 8. A node refuses to ruin a store -----------------------------------------


def test_a_node_with_other_keys_writes_nothing(
    node: Node, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], signing: None
) -> None:
    checkpointed(node)
    count = node.app.tables.event_count()[0]
    fresh = tmp_path / "fresh-keys"
    with pytest.raises(ConfigError, match="which this keyring does not hold"):
        open_node(store_url, _fresh_keys(fresh), passphrase=PASSPHRASE)
    capsys.readouterr()
    code = main(["--store", store_url, "--keys", str(fresh), "simulate", "--rounds", "2"])
    output = capsys.readouterr()
    assert code == 2
    assert "this keyring does not hold" in output.err
    assert len(output.err.strip().splitlines()) == 1
    assert node.app.tables.event_count()[0] == count


def _fresh_keys(path: Path) -> str:
    from ledger.crypto.keystore import KeyDirectory

    KeyDirectory(path).create_node_keys(PASSPHRASE)
    return str(path)


def test_a_node_with_another_origin_writes_nothing(
    node: Node, store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointed(node)
    count = node.app.tables.event_count()[0]
    monkeypatch.setenv("LEDGER_ORIGIN", "another-ledger")
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    with pytest.raises(ConfigError, match="origin is 'another-ledger'"):
        open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE)
    for command in (["simulate", "--rounds", "2"], ["checkpoint"]):
        code, output = run(node, capsys, *command)
        assert code == 2, output
        assert "origin is 'another-ledger' but the store's checkpoints are for" in output
        assert len(output.strip().splitlines()) == 1
    assert node.app.tables.event_count()[0] == count
    assert [c.size for c in node.app.tables.checkpoints()] == [8, 16, 20]


# -- 6. Proof bundles are checked whole ---------------------------------------


def genuine_bundle(node: Node) -> dict[str, Any]:
    stream = record(node, 6)
    node.checkpointer().catch_up()
    bundle = json.loads(json.dumps(inclusion_of(node.app, stream, 4, node.keyring)))
    assert verify_inclusion_bundle(bundle, node.keyring, origin="casino-ledger").size == 6
    return bundle


def _flip(text: str) -> str:
    return ("B" if text[0] == "A" else "A") + text[1:]


def _other_stream(bundle: dict[str, Any]) -> str:
    return "00000000-0000-0000-0000-000000000001"


ALTERED: dict[str, Callable[[dict[str, Any]], Any]] = {
    "stream": _other_stream,
    "version": lambda b: b["version"] + 1,
    "leaf_index": lambda b: b["leaf_index"] + 1,
    "header": lambda b: _flip(b["header"]),
    "signature": lambda b: _flip(b["signature"]),
    "proof": lambda b: [_flip(b["proof"][0]), *b["proof"][1:]],
    "checkpoint": lambda b: b["checkpoint"].replace("\n6\n", "\n7\n", 1),
}

WRONG_TYPES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "stream": lambda b: 7,
    "version": lambda b: str(b["version"]),
    "leaf_index": lambda b: str(b["leaf_index"]),
    "header": lambda b: None,
    "signature": lambda b: "not base64!",
    "proof": lambda b: [1, 2],
    "checkpoint": lambda b: {"note": b["checkpoint"]},
}


@pytest.mark.parametrize("field", list(ALTERED))
def test_every_bundle_field_is_checked(node: Node, field: str) -> None:
    bundle = genuine_bundle(node)
    for change in (ALTERED[field], WRONG_TYPES[field]):
        with pytest.raises(VerificationError):
            verify_inclusion_bundle(dict(bundle, **{field: change(bundle)}), node.keyring)
    removed = {k: v for k, v in bundle.items() if k != field}
    with pytest.raises(VerificationError, match=f"'{field}' is missing"):
        verify_inclusion_bundle(removed, node.keyring)


def test_bundle_messages_say_what_is_wrong(node: Node) -> None:
    bundle = genuine_bundle(node)
    cases: list[tuple[dict[str, Any], str]] = [
        (dict(bundle, signature=_flip(bundle["signature"])), "envelope signature is invalid"),
        (dict(bundle, version=5), "the bundle claims stream .* version 5 but the signed header"),
        (dict(bundle, stream=_other_stream(bundle)), "the bundle claims stream 0000"),
        (dict(bundle, version="4"), "'version' must be an int, not str"),
        (dict(bundle, version=True), "'version' must be an int, not bool"),
        (dict(bundle, checkpoint=7), "'checkpoint' must be a str"),
        (dict(bundle, extra=1), "unexpected field 'extra'"),
        (
            dict(bundle, checkpoint=bundle["checkpoint"].replace("+00:00", "")),
            "no UTC offset",
        ),
        (dict(bundle, leaf_index=99), "leaf index 99 is outside the checkpoint of size 6"),
    ]
    for altered, message in cases:
        with pytest.raises(VerificationError, match=message):
            verify_inclusion_bundle(altered, node.keyring)
    with pytest.raises(VerificationError, match="origin is 'casino-ledger'"):
        verify_inclusion_bundle(bundle, node.keyring, origin="another-ledger")
    with pytest.raises(VerificationError, match="malformed inclusion bundle: not a JSON object"):
        verify_inclusion_bundle([bundle], node.keyring)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stream", "version", "message"),
    [
        ("not-a-uuid", "1", "is not a UUID"),
        ("6d3c2ad8-5b47-4e34-8e33-2f6c6a0e2b8e", str(10**20), "must be 1.."),
        ("6d3c2ad8-5b47-4e34-8e33-2f6c6a0e2b8e", "0", "must be 1.."),
    ],
)
def test_proof_inclusion_bad_input_is_one_line(
    node: Node, capsys: pytest.CaptureFixture[str], stream: str, version: str, message: str
) -> None:
    record(node, 3)
    node.checkpointer().catch_up()
    code, output = run(node, capsys, "proof", "inclusion", stream, version)
    assert code == 2
    assert message in output
    assert len(output.strip().splitlines()) == 1


def test_bundle_against_the_newest_valid_checkpoint(node: Node) -> None:
    """A re-inserted old checkpoint under a larger column does not become the proof's root."""
    stream = record(node, 9)
    node.checkpointer(batch_size=4).catch_up()
    old = by_size(node, 4)
    attack(
        node,
        lambda a: a.sql(
            "INSERT INTO ledger_checkpoints VALUES (?, ?, ?)", (500, old.root, old.to_note())
        ),
    )
    bundle = inclusion_of(node.app, stream, 2, node.keyring)
    assert verify_inclusion_bundle(bundle, node.keyring).size == 9


def test_checkpoint_times_must_be_aware() -> None:
    naive = datetime(2026, 1, 1)
    aware = naive.replace(tzinfo=UTC)
    note = f"o\n1\n{'A' * 43}=\ntime {naive.isoformat()}\n\n\u2014 k {'A' * 86}==\n"
    with pytest.raises(VerificationError, match="no UTC offset"):
        Checkpoint.from_note(note)
    assert Checkpoint.from_note(note.replace(naive.isoformat(), aware.isoformat())).size == 1


def test_proofs_read_their_stored_nodes_at_once_and_still_name_a_bad_one(node: Node) -> None:
    # One query for every checkpoint pair's nodes (a round trip each was a third
    # of a PostgreSQL verify), the same proofs as looked up one by one.
    from ledger.crypto.merkle import consistency_proof, consistency_ranges
    from ledger.store.merkle_log import StoredRowError

    record(node, 40)
    node.checkpointer(batch_size=3).catch_up()
    tables = node.app.tables
    sizes = [c.size for c in tables.checkpoints()]
    pairs = [(a, b) for a in sizes for b in sizes if a <= b]
    one_by_one = {p: consistency_proof(*p, tables.subtree_reader()) for p in pairs}
    prefetched = tables.subtree_reader()
    prefetched.prefetch(r for p in pairs for r in consistency_ranges(*p))
    lookups: list[tuple[int, int]] = []
    single = tables.node

    def counted(level: int, index: int, cursor: Any = None) -> bytes | None:
        lookups.append((level, index))
        return single(level, index, cursor)

    tables.node = counted  # type: ignore[method-assign]
    try:
        assert {p: consistency_proof(*p, prefetched) for p in pairs} == one_by_one
        assert lookups == []
        assert any(len(proof) > 2 for proof in one_by_one.values())
        attack(node, short_node)
        edited = tables.subtree_reader()
        edited.prefetch(r for p in pairs for r in consistency_ranges(*p))
        with pytest.raises(StoredRowError, match=r"Merkle node \(2, 1\) does not hold"):
            for p in pairs:
                consistency_proof(*p, edited)
        assert (2, 1) in lookups  # left to the lookup that names it
    finally:
        del tables.node


def short_node(attacker: Attacker) -> None:
    attacker.sql(
        "UPDATE ledger_merkle_nodes SET hash = ? WHERE level = 2 AND idx = 1", (b"x" * 31,)
    )


def test_many_nodes_are_found_by_the_primary_key_not_a_scan(tmp_path: Path) -> None:
    # `(level, idx) IN (VALUES ...)` made SQLite scan the whole node table for
    # every 400 keys: a million-event verify at integrity ran at half speed.
    import sqlite3

    from tests.conftest import new_store

    with new_store("sqlite", tmp_path) as url:
        keys = KeyDirectory(tmp_path / "keys")
        keys.create_node_keys(PASSPHRASE)
        opened = open_node(url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0)
        try:
            record(opened, 12)
            opened.checkpointer(batch_size=4).catch_up()
            tables = opened.app.tables
            wanted = [(1, 0), (2, 1), (1, 5), (3, 0)]
            found = tables.nodes_at([*wanted, (0, 3), (0, 7)])
            assert set(found) == set(wanted) | {(0, 3), (0, 7)}
            assert found[(2, 1)] == tables.node(2, 1)
            nodes, leaves = tables.nodes_query(4), tables.leaves_query(2)
        finally:
            opened.close()
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            for query, args in ((nodes, [n for key in wanted for n in key]), (leaves, [3, 7])):
                rows = db.execute(f"EXPLAIN QUERY PLAN {query}", args)
                plan = " | ".join(row[-1] for row in rows)
                assert "SEARCH" in plan and "SCAN ledger_merkle" not in plan, plan
