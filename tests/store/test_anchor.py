"""A bounded unanchored window: every writing node keeps the log under checkpoints,
so a node killed at any point leaves at most its window unanchored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.audit.proofs import newest_checkpoint
from ledger.cli.main import main
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keystore import KeyDirectory
from ledger.errors import ConfigError, VerificationError
from ledger.node import Node, open_node
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE
from tests.demo_table import Table


def save(node: Node, events: int) -> None:
    table = Table(name="T", dealer="D")
    for _ in range(events - 1):
        table.throw_dice([2, 2, 5])
    node.app.save(table)


def covered(store_url: str, keys: KeyDirectory) -> tuple[int, int]:
    """(events in the log, events under the newest valid checkpoint)."""
    reader = open_node(store_url, str(keys.path), writable=False)
    try:
        newest = newest_checkpoint(reader.app, reader.keyring)
        return reader.app.tables.event_count()[0], newest.size if newest else 0
    finally:
        reader.close()


def wait_until_covered(store_url: str, keys: KeyDirectory, events: int) -> None:
    """Poll (bounded) until a checkpoint covers `events`: the anchor runs in the background."""
    for _ in range(300):
        if covered(store_url, keys)[1] >= events:
            return
        time.sleep(0.1)
    pytest.fail(f"no checkpoint covered {events} events within 30 s")


def test_closing_a_node_anchors_what_it_wrote(store_url: str, keys: KeyDirectory) -> None:
    node = open_node(
        store_url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=1000
    )
    assert node.anchor is not None
    save(node, 3)
    node.close()
    assert covered(store_url, keys) == (3, 3)


def test_a_checkpoint_follows_writes_within_the_window(store_url: str, keys: KeyDirectory) -> None:
    node = open_node(
        store_url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0.2, anchor_events=0
    )
    try:
        save(node, 4)
        wait_until_covered(store_url, keys, 4)
        save(node, 2)
        wait_until_covered(store_url, keys, 6)
    finally:
        node.close()


def test_enough_waiting_events_trigger_a_checkpoint(store_url: str, keys: KeyDirectory) -> None:
    node = open_node(
        store_url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=5
    )
    try:
        save(node, 3)  # below the count, and no time trigger: not anchored until close
        save(node, 3)
        wait_until_covered(store_url, keys, 6)
    finally:
        node.close()


def test_anchor_settings(
    store_url: str, keys: KeyDirectory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    off = open_node(
        store_url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0
    )
    assert off.anchor is None
    off.close()
    monkeypatch.setenv("LEDGER_ANCHOR_SECONDS", "soon")
    with pytest.raises(ConfigError, match="LEDGER_ANCHOR_SECONDS='soon'"):
        open_node(store_url, str(keys.path), passphrase=PASSPHRASE)
    monkeypatch.setenv("LEDGER_ANCHOR_SECONDS", "2.5")
    monkeypatch.setenv("LEDGER_ANCHOR_EVENTS", "-1")
    with pytest.raises(ConfigError, match="LEDGER_ANCHOR_EVENTS='-1'"):
        open_node(store_url, str(keys.path), passphrase=PASSPHRASE)
    # Without the checkpoint private key a node cannot anchor (`ledger checkpoint --follow`
    # runs where that key is).
    (keys.path / "checkpoint.pem").unlink()
    monkeypatch.delenv("LEDGER_ANCHOR_EVENTS")
    writer = open_node(store_url, str(keys.path), passphrase=PASSPHRASE)
    assert writer.anchor is None
    writer.close()


def test_an_anchor_that_finds_the_store_tampered_says_so_on_close(
    store_url: str, keys: KeyDirectory
) -> None:
    node = open_node(
        store_url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=1000
    )
    save(node, 6)
    node.close()
    attacker = Attacker(store_url)
    try:
        attacker.sql("UPDATE ledger_merkle_nodes SET hash = ? WHERE level = 2", (bytes(32),))
    finally:
        attacker.close()
    node = open_node(
        store_url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=1000
    )
    save(node, 2)
    with pytest.raises(VerificationError, match=r"Merkle node \(2, 0\)"):
        node.close()
    assert covered(store_url, keys) == (8, 6)


WRITER = """
import sys, time
from tests.demo_table import Table
from ledger.node import open_node

node = open_node(sys.argv[1], sys.argv[2], passphrase=sys.argv[3].encode())
total = node.app.tables.event_count()[0]
print("ready", flush=True)
while True:
    table = Table(name="T", dealer="D")
    for _ in range(4):
        table.throw_dice([3, 1, 4])
    node.app.save(table)
    total += 5
    print(total, time.time(), flush=True)
    time.sleep(0.02)  # a busy table's pace, not a core's worth of saves
"""

WINDOW = 0.25  # LEDGER_ANCHOR_SECONDS for the writer
SLACK = 3.0  # a loaded machine: scheduling, a catch-up in progress at the kill
# Seconds after the writer is ready, one kill each: anywhere in its writes,
# and the later ones past WINDOW + SLACK, so some saves are due by then.
KILL_AFTER = (1.5, 2.5, 4.0, 5.0)


def test_killed_writers_leave_at_most_the_window_unanchored(
    store_url: str, keys: KeyDirectory, capsys: pytest.CaptureFixture[str]
) -> None:
    """A writer killed with SIGKILL at points of its writes (4 times): every time, `verify`
    passes and every event saved more than WINDOW + SLACK before the kill is
    under a checkpoint."""
    env = dict(os.environ, LEDGER_ANCHOR_SECONDS=str(WINDOW), LEDGER_ANCHOR_EVENTS="1000")
    root = Path(__file__).resolve().parents[2]
    bounded = 0  # kills where some saves were old enough for the window to bind
    for after in KILL_AFTER:
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, store_url, str(keys.path), PASSPHRASE.decode()],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=root,
        )
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        time.sleep(after)
        writer.send_signal(signal.SIGKILL)
        killed_at = time.time()
        writer.wait()
        # The kill may cut the last line short: keep the whole ones.
        saves = [f for f in map(str.split, writer.stdout.read().splitlines()) if len(f) == 2]
        writer.stdout.close()
        assert saves, "the writer saved nothing"
        events, anchored = covered(store_url, keys)
        assert events >= int(saves[-1][0])  # every save it reported is in the log
        due = [int(total) for total, at in saves if float(at) <= killed_at - WINDOW - SLACK]
        assert anchored >= max(due, default=0), (anchored, events, len(saves))
        bounded += bool(due)
        capsys.readouterr()
        code = main(
            ["--store", store_url, "--keys", str(keys.path), "verify", "--level", "integrity"]
        )
        output = capsys.readouterr().out
        assert code == 0, output
        if events > anchored:
            assert f"{events - anchored} newest events are not yet under a checkpoint" in output
    assert bounded > 0, "no kill came late enough for the window to be tested"


def test_checkpoint_follow_is_the_service_beside_writers(
    store_url: str, keys: KeyDirectory
) -> None:
    """`ledger checkpoint --follow` anchors what a node without the checkpoint key writes."""
    (keys.path / "checkpoint.pem").rename(keys.path / "elsewhere.pem.off")
    writer = open_node(store_url, str(keys.path), passphrase=PASSPHRASE)
    assert writer.anchor is None
    service_keys = keys.path.parent / "service-keys"
    service_keys.mkdir()
    (service_keys / keys.keyring_path.name).write_bytes(keys.keyring_path.read_bytes())
    (keys.path / "elsewhere.pem.off").rename(service_keys / "checkpoint.pem")
    env = dict(os.environ, LEDGER_PASSPHRASE=PASSPHRASE.decode())
    argv = ["--store", store_url, "--keys", str(service_keys), "checkpoint", "--follow"]
    service = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", *argv],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        save(writer, 5)
        wait_until_covered(store_url, keys, 5)
        save(writer, 4)
        wait_until_covered(store_url, keys, 9)
    finally:
        writer.close()
        service.send_signal(signal.SIGINT)
        out, err = service.communicate(timeout=60)
    assert service.returncode == 130, err  # interrupted, as Ctrl-C is everywhere
    assert Checkpoint.from_note(out).size == 9  # prints the newest checkpoint on exit
