"""An asynchronous standby that missed the newest checkpoint is promoted
(issue 38, item 6): a private primary and standby (tests/pg_cluster.py), the
standby stopped while the primary goes on and signs a checkpoint, the primary
then lost and the standby promoted. The node on the promoted store signs no
checkpoint at all: none of the published size or smaller, none larger that
would fork from it; `ledger checkpoint` says why in one line, and `verify`
against the published checkpoint fails."""

from __future__ import annotations

import time

import pytest

from ledger.cli.main import main
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keystore import KeyDirectory
from ledger.node import Node, open_node, origin
from ledger.store.checkpoint_lock import DEFAULT_DIRECTORY
from ledger.store.checkpointer import CheckpointRefusedError
from ledger.store.witnessing import WITNESSES_ENV
from tests.conftest import PASSPHRASE
from tests.demo_table import Table
from tests.mirror.test_witness_submission import log_witness
from tests.pg_cluster import Cluster, cluster_root
from tests.verdict import verdict
from tests.witness_support import ServedWitness


def record(node: Node, events: int) -> None:
    table = Table(name="T", dealer="D")
    for _ in range(events - 1):
        table.throw_dice([1, 2, 3])
    node.app.save(table)


def opened(url: str, keys: KeyDirectory) -> Node:
    return open_node(url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0)


def caught_up(primary: Cluster, standby: Cluster) -> None:
    """Wait until the standby has replayed everything the primary wrote so far."""
    (target,) = primary.execute("SELECT pg_current_wal_lsn()::text")[0]
    deadline = time.monotonic() + 30
    while True:
        replayed = standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,))
        if replayed == [(True,)]:
            return
        assert time.monotonic() < deadline, "the standby never caught up"
        time.sleep(0.05)


@pytest.mark.postgres
def test_a_promoted_standby_that_missed_the_newest_checkpoint_signs_nothing(
    keys: KeyDirectory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with cluster_root() as root:
        primary = Cluster(root, "primary")
        primary.init()  # asynchronous: a commit does not wait for the standby
        primary.start()
        standby = Cluster(root, "standby")
        standby.standby_of(primary)
        standby.start()

        node = opened(primary.url(), keys)
        witness = ServedWitness(log_witness(node, root)).__enter__()
        monkeypatch.setenv(WITNESSES_ENV, witness.setting)
        try:
            record(node, 10)
            node.checkpointer().catch_up()
            caught_up(primary, standby)
            standby.stop()  # it misses everything from here on
            record(node, 6)
            node.checkpointer().catch_up()
            assert node.witnesses is not None
            node.witnesses.close(wait=10)
        finally:
            node.close()
        assert witness.witness.state.known(origin()).size == 16  # published and witnessed
        (cell,) = [p for p in (keys.path / DEFAULT_DIRECTORY).iterdir() if "." not in p.name]
        note = cell.read_text()
        published = Checkpoint.from_note(note)
        assert published.size == 16
        (root / "published.txt").write_text(note)
        primary.stop("immediate")  # the primary is lost

        standby.start()
        standby.promote()
        promoted = opened(standby.url(), keys)
        try:
            assert [c.size for c in promoted.app.tables.checkpoints()] == [10]
            record(promoted, 4)  # the studio goes on: other events where the lost ones were
            with pytest.raises(CheckpointRefusedError, match="holds only 14 events"):
                promoted.checkpointer().catch_up()
            record(promoted, 8)  # past the published size
            with pytest.raises(CheckpointRefusedError, match="first 16 events differ"):
                promoted.checkpointer().catch_up()
            assert [c.size for c in promoted.app.tables.checkpoints()] == [10]
        finally:
            promoted.close()

        monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
        base = ["--store", standby.url(), "--keys", str(keys.path)]
        capsys.readouterr()
        code = main([*base, "checkpoint"])
        out = capsys.readouterr()
        line = verdict(code, out.out, out.err)
        assert code == 1 and "Traceback" not in out.err
        assert out.err.strip().count("\n") == 0, out.err
        assert "refusing to sign a checkpoint: this log signed one of size 16" in line
        code = main(
            [*base, "verify", "--level", "integrity", "--trusted", str(root / "published.txt")]
        )
        out = capsys.readouterr()
        found = verdict(code, out.out, out.err)
        assert code == 1 and "the first 16 events of the log do not hash to its root" in found
        # The witness agrees: it still holds the published checkpoint, and was
        # never shown another (no split view to refuse).
        witness.__exit__()
        assert witness.witness.state.known(origin()).size == 16
        assert witness.witness.state.refusals() == []
        assert cell.read_text() == note
