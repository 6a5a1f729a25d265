"""Checkpoints that never fork (issue 38, item 6): the newest signed checkpoint
is kept in a compare-and-swap lock outside the store, and a checkpointer signs
only a tree that extends it. A store gone back in time (its newest events lost,
as a lagging standby promoted or an older backup restored) gets no checkpoint
of any size until the lost events are back; on both stores, with both locks.
The standby itself: tests/store/test_checkpoint_lock_standby.py."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from ledger.cli.main import main
from ledger.crypto.checkpoint import Checkpoint
from ledger.errors import ConfigError, VerificationError
from ledger.node import Node, open_node
from ledger.store.checkpoint_lock import (
    DEFAULT_DIRECTORY,
    LOCK_ENV,
    FileCheckpointLock,
    PostgresCheckpointLock,
    open_lock,
)
from ledger.store.checkpointer import CheckpointRefusedError
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE, PG_URL
from tests.demo_table import Table
from tests.verdict import verdict

ORIGIN = "casino-ledger"


def record(node: Node, events: int) -> None:
    table = Table(name="T", dealer="D")
    for _ in range(events - 1):
        table.throw_dice([1, 2, 3])
    node.app.save(table)


def cell(node: Node) -> Path:
    """The lock's file for the node's log (the only log its keys signed here)."""
    (found,) = [p for p in (node.keys.path / DEFAULT_DIRECTORY).iterdir() if "." not in p.name]
    return found


def kept(node: Node) -> Checkpoint:
    return Checkpoint.from_note(cell(node).read_text())


def sizes(node: Node) -> list[int]:
    return [c.size for c in node.app.tables.checkpoints()]


def attack(node: Node, edit: str, *params: int) -> None:
    attacker = Attacker(node.app.store_url)
    try:
        if edit == "delete_tail":
            attacker.delete_tail(*params)
        else:
            attacker.sql(edit, params)
    finally:
        attacker.close()


def cli(
    node: Node, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str
) -> tuple[int, str]:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    capsys.readouterr()
    code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, verdict(code, captured.out, captured.err)


# -- the locks themselves: a compare-and-swap, nothing more --------------------


def swaps(lock: FileCheckpointLock | PostgresCheckpointLock, origin: str) -> None:
    log, other = b"\x01" * 32, b"\x02" * 32
    assert lock.latest(origin, log) is None
    assert lock.swap(origin, log, None, f"{origin}\n1\n")
    assert not lock.swap(origin, log, None, f"{origin}\n2\n")  # someone kept one first
    assert not lock.swap(origin, log, f"{origin}\n9\n", f"{origin}\n2\n")  # not what is kept
    assert lock.latest(origin, log) == f"{origin}\n1\n"
    assert lock.swap(origin, log, f"{origin}\n1\n", f"{origin}\n2\n")
    assert lock.latest(origin, log) == f"{origin}\n2\n"
    assert lock.knows(origin) and not lock.knows(f"{origin}-other")
    assert lock.latest(origin, other) is None  # another log, kept apart
    assert lock.swap(origin, other, None, f"{origin}\n7\n")
    assert lock.latest(origin, log) == f"{origin}\n2\n"


def test_the_file_lock_swaps_only_over_what_it_keeps(tmp_path: Path) -> None:
    swaps(FileCheckpointLock(tmp_path / "cell"), "log-a")


def test_the_file_lock_refuses_another_logs_origin(tmp_path: Path) -> None:
    lock = FileCheckpointLock(tmp_path / "cells")
    assert lock.swap("log-a", bytes(32), None, "log-a\n1\n")
    with pytest.raises(ConfigError, match="keeps the checkpoints of the log 'log-a'"):
        lock.latest("log-b", bytes(32))


@pytest.mark.postgres
def test_the_postgresql_lock_swaps_only_over_what_it_keeps() -> None:
    lock = open_lock(PG_URL, Path("unused"))
    assert isinstance(lock, PostgresCheckpointLock)
    swaps(lock, f"log-{uuid.uuid4()}")


def test_a_lock_setting_that_names_neither_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="give a directory or a postgresql:// URL"):
        open_lock("redis://127.0.0.1/0", tmp_path)
    assert isinstance(open_lock(None, tmp_path), FileCheckpointLock)
    assert open_lock(f"file://{tmp_path}/x", tmp_path).describe() == f"{tmp_path}/x"


# -- the checkpointer against a store gone back in time ------------------------


def test_every_checkpoint_signed_is_kept_first(node: Node) -> None:
    record(node, 10)
    node.checkpointer(batch_size=4).catch_up()
    assert sizes(node) == [4, 8, 10]
    assert kept(node).to_note() == node.app.tables.checkpoints()[-1].to_note()


def test_a_store_that_lost_its_newest_events_gets_no_checkpoint(
    node: Node, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    record(node, 10)
    node.checkpointer(batch_size=5).catch_up()
    published = kept(node)
    assert published.size == 10
    attack(node, "delete_tail", 5)  # back in time: 5 events under the checkpoint of size 5
    record(node, 3)  # other events where the lost ones were
    with pytest.raises(CheckpointRefusedError, match="the store holds only 8 events"):
        node.checkpointer().catch_up()
    record(node, 10)  # past the published size: still not an extension of it
    with pytest.raises(CheckpointRefusedError, match="the store's first 10 events differ"):
        node.checkpointer().catch_up()
    assert sizes(node) == [5]  # no different checkpoint of size 10, smaller or larger
    assert kept(node) == published
    code, output = cli(node, capsys, monkeypatch, "checkpoint")
    assert code == 1
    assert output.count("\n") <= 1 and "refusing to sign a checkpoint" in output, output
    assert str(node.keys.path / DEFAULT_DIRECTORY) in output


def test_a_rival_checkpointer_past_this_ones_snapshot_is_not_lost_events(node: Node) -> None:
    """Two checkpointers on one store (the server's anchor and `checkpoint
    --follow`): one reads the kept note after its snapshot began, and in
    between the other signed, kept and stored a checkpoint over events
    committed since. Its snapshot then holds fewer events than the kept
    checkpoint covers, and none is lost: it counts again on a snapshot begun
    after the note and goes on (it refused once, "the store lost events",
    and stopped: a full suite's run saw it in the killed-services test)."""
    record(node, 5)
    node.checkpointer().catch_up()
    record(node, 2)  # in the late one's snapshot
    late, rival = node.checkpointer(), node.checkpointer()
    assert late.lock is not None
    read_note = late.lock.latest
    raced: list[int] = []

    def latest(origin: str, genesis: bytes) -> str | None:
        if not raced:  # its snapshot has begun: the rival (its own thread) moves on
            rival_thread = threading.Thread(target=lambda: (record(node, 3), rival.catch_up()))
            rival_thread.start()
            rival_thread.join()
            raced.append(kept(node).size)
        return read_note(origin, genesis)

    late.lock.latest = latest  # type: ignore[method-assign]
    late.catch_up()
    assert raced == [10]  # the kept note it read was past its snapshot's 7 events
    assert sizes(node) == [5, 10]
    record(node, 1)
    late.catch_up()
    assert sizes(node) == [5, 10, 11] and kept(node).size == 11


def test_a_store_behind_the_lock_catches_up_with_the_kept_checkpoint(
    node: Node, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The events are there but their Merkle rows and checkpoint are not (the
    store's commit of a checkpoint already kept failed): the kept checkpoint
    itself is stored once the tree over those events has its root."""
    record(node, 10)
    node.checkpointer(batch_size=5).catch_up()
    published = kept(node)
    attack(node, "DELETE FROM ledger_checkpoints WHERE tree_size > 5")
    attack(node, "DELETE FROM ledger_merkle_leaves WHERE leaf_index >= 5")
    attack(node, "DELETE FROM ledger_merkle_nodes WHERE (idx + 1) * (1 << level) > 5")
    record(node, 4)
    node.checkpointer(batch_size=3).catch_up()
    stored = {c.size: c for c in node.app.tables.checkpoints()}
    assert sorted(stored) == [5, 10, 13, 14]
    assert stored[10].to_note() == published.to_note()  # not signed a second time
    assert kept(node).size == 14
    code, output = cli(node, capsys, monkeypatch, "verify", "--level", "integrity")
    assert code == 0, output


def test_a_store_written_before_the_lock_starts_it(node: Node) -> None:
    record(node, 6)
    node.checkpointer().catch_up()
    cell(node).unlink()  # as a release without the lock left it
    record(node, 2)
    node.checkpointer().catch_up()
    assert kept(node).size == 8 and sizes(node) == [6, 8]


def test_a_lagging_lock_is_brought_up_to_a_store_that_extends_it(node: Node) -> None:
    record(node, 6)
    node.checkpointer().catch_up()
    older = kept(node).to_note()
    record(node, 3)
    node.checkpointer().catch_up()
    cell(node).write_text(older)  # a copy of the lock from before
    record(node, 1)
    node.checkpointer().catch_up()
    assert kept(node).size == 10 and sizes(node) == [6, 9, 10]


def test_a_lock_that_contradicts_the_store_signs_nothing(
    node: Node, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint of the store's size but another root in the lock: the store
    already forked from what was published, and nothing more is signed on it."""
    record(node, 6)
    node.checkpointer().catch_up()
    honest = kept(node)
    other = Checkpoint.sign(
        origin=ORIGIN,
        size=6,
        root=bytes(32),
        signer=node.checkpointer().signer,
        now=honest.issued_at,
    )
    cell(node).write_text(other.to_note())
    record(node, 2)
    with pytest.raises(CheckpointRefusedError, match="the store's first 6 events differ"):
        node.checkpointer().catch_up()
    assert sizes(node) == [6]


def test_a_forged_lock_is_not_believed(node: Node) -> None:
    record(node, 3)
    node.checkpointer().catch_up()
    note = kept(node).to_note()
    cell(node).write_text(note.replace("\n3\n", "\n4\n", 1))
    record(node, 1)
    with pytest.raises(Exception, match="bad signature"):
        node.checkpointer().catch_up()
    assert sizes(node) == [3]


def test_another_log_signed_with_the_same_keys_is_kept_apart(node: Node, tmp_path: Path) -> None:
    """A second store tried with the same keys directory is another log (its first
    event differs), not a store that went back in time."""
    record(node, 5)
    node.checkpointer().catch_up()
    other = open_node(
        f"sqlite:///{tmp_path}/other.db",
        str(node.keys.path),
        passphrase=PASSPHRASE,
        anchor_seconds=0,
        anchor_events=0,
    )
    try:
        record(other, 2)
        other.checkpointer().catch_up()
        assert [c.size for c in other.app.tables.checkpoints()] == [2]
    finally:
        other.close()
    assert len(list((node.keys.path / DEFAULT_DIRECTORY).glob("*[!k]"))) == 2


def test_a_removed_first_event_does_not_make_another_log(node: Node) -> None:
    """Deleting the first event (or editing leaf 0) would name another log with
    nothing kept: the first event must be leaf 0 under the store's checkpoint."""
    record(node, 4)
    node.checkpointer().catch_up()
    attacker = Attacker(node.app.store_url)
    try:
        (first,) = attacker.sql(f"SELECT MIN({attacker.id}) FROM {attacker.events}")[0]
        attacker.sql(f"DELETE FROM {attacker.events} WHERE {attacker.id} = ?", (first,))
    finally:
        attacker.close()
    record(node, 6)
    with pytest.raises(VerificationError):
        node.checkpointer().catch_up()
    assert sizes(node) == [4]


def test_a_rewritten_first_event_does_not_make_another_log(node: Node) -> None:
    """A store gone back in time whose first event's header was also edited (so
    it would name another log, with nothing kept for it): refused."""
    record(node, 10)
    node.checkpointer(batch_size=5).catch_up()
    attack(node, "delete_tail", 5)
    attacker = Attacker(node.app.store_url)
    try:
        stream, version = attacker.rows()[0][1:3]
        state = attacker.row(stream, version)[4]
        at = state.index(b'"signed_at":') + len(b'"signed_at":')
        digit = b"1" if state[at : at + 1] != b"1" else b"2"
        attacker.set_state(stream, version, state[:at] + digit + state[at + 1 :])
    finally:
        attacker.close()
    record(node, 8)
    with pytest.raises(VerificationError, match="is not leaf 0 under the checkpoint of size 5"):
        node.checkpointer().catch_up()
    assert sizes(node) == [5]


@pytest.mark.postgres
def test_nodes_sharing_a_postgresql_lock_never_fork(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock named by LEDGER_CHECKPOINT_LOCK, in a database of its own: the
    checkpoints signed are kept there, and a store gone back refuses the same."""
    monkeypatch.setenv("LEDGER_ORIGIN", f"log-{uuid.uuid4()}")
    monkeypatch.setenv(LOCK_ENV, PG_URL)
    record(node, 8)
    node.checkpointer(batch_size=4).catch_up()
    lock = open_lock(PG_URL, node.keys.path)
    genesis = node.app.tables.leaf_hash(0)
    assert genesis is not None
    note = lock.latest(node.checkpointer().origin, genesis)
    assert note is not None and Checkpoint.from_note(note).size == 8
    assert not (node.keys.path / DEFAULT_DIRECTORY).exists()
    attack(node, "delete_tail", 4)
    record(node, 6)
    with pytest.raises(CheckpointRefusedError, match="the store's first 8 events differ"):
        node.checkpointer().catch_up()
    assert sizes(node) == [4]
