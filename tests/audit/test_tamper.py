"""An attacker with database rights edits the store underneath the ledger;
`ledger verify` must detect each edit and name the event, on both stores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.cli.main import main
from ledger.crypto.envelope import now_micros, open_envelope, seal
from ledger.crypto.keys import Role
from ledger.crypto.signing import InMemorySigner
from ledger.node import Node
from tests.attacker import Attacker
from tests.demo_table import Table
from tests.verdict import verdict


def record(node: Node, tables: int = 3, saves: int = 2) -> list[str]:
    streams = []
    for number in range(tables):
        table = Table(name=f"T{number}", dealer="D1")
        for save in range(saves):
            for throw in range(9):
                table.throw_dice([1 + (number + save + throw) % 6, 2, 3])
            node.app.save(table)
        streams.append(str(table.id))
    node.checkpointer(batch_size=16).catch_up()
    return streams


def verify(node: Node, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), "verify", *extra])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, verdict(code, captured.out, captured.err)


def flip_payload_byte(attacker: Attacker, streams: list[str]) -> tuple[str, int]:
    _, _, _, _, state = attacker.row(streams[1], 3)
    attacker.set_state(streams[1], 3, state[:-2] + bytes([state[-2] ^ 0x01]) + state[-1:])
    return streams[1], 3


def change_event_type(attacker: Attacker, streams: list[str]) -> tuple[str, int]:
    attacker.set_topic(streams[0], 5, "tests.demo_table:Table.Closed")
    return streams[0], 5


def delete_middle_event(attacker: Attacker, streams: list[str]) -> tuple[str, int]:
    attacker.delete(streams[2], 7)
    return streams[2], 7  # the message names the missing version


def swap_two_events(attacker: Attacker, streams: list[str]) -> tuple[str, int]:
    first, second = attacker.row(streams[0], 2)[4], attacker.row(streams[0], 3)[4]
    attacker.set_state(streams[0], 2, second)
    attacker.set_state(streams[0], 3, first)
    return streams[0], 2


def copy_from_other_stream(attacker: Attacker, streams: list[str]) -> tuple[str, int]:
    _, _, _, topic, state = attacker.row(streams[0], 19)
    attacker.insert(streams[1], 20, topic, state)
    return streams[1], 20


def forge_with_unknown_key(attacker: Attacker, streams: list[str]) -> tuple[str, int]:
    _, _, _, topic, state = attacker.row(streams[2], 19)
    last = open_envelope(state, stream=streams[2], version=19)
    rogue = InMemorySigner(Ed25519PrivateKey.generate(), Role.LEDGER_NODE)
    forged, _ = seal(
        stream=streams[2],
        version=20,
        event_type=topic,
        prev_hash=last.entry_hash,
        payload=last.payload,
        signer=rogue,
        signed_at=now_micros(),
    )
    attacker.insert(streams[2], 20, topic, forged)
    return streams[2], 20


TAMPERS: dict[str, tuple[Callable[[Attacker, list[str]], tuple[str, int]], str]] = {
    "flipped payload byte": (flip_payload_byte, "payload"),
    "changed event type": (change_event_type, "event type"),
    "deleted middle event": (delete_middle_event, "missing"),
    "two events swapped": (swap_two_events, "stored as version"),
    "copied from another stream": (copy_from_other_stream, "belongs to stream"),
    "forged with a key not in the keyring": (forge_with_unknown_key, "not in the keyring"),
}


@pytest.mark.parametrize("level", ["signatures", "integrity"])
@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_verify_detects_and_names_the_event(
    node: Node, capsys: pytest.CaptureFixture[str], tamper: str, level: str
) -> None:
    streams = record(node)
    assert verify(node, capsys, "--level", level)[0] == 0
    edit, what = TAMPERS[tamper]
    attacker = Attacker(node.app.store_url)
    try:
        stream, version = edit(attacker, streams)
    finally:
        attacker.close()
    code, output = verify(node, capsys, "--level", level)
    assert code == 1
    assert f"stream {stream} version" in output
    assert f"version {version}" in output
    assert what in output
    assert len(output.strip().splitlines()) == 1


def test_tail_deleted_after_a_kept_checkpoint(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record(node)
    kept = tmp_path / "kept-checkpoint.txt"
    latest = node.app.tables.latest_checkpoint()
    assert latest is not None and latest.size == 57
    kept.write_text(latest.to_note())
    assert verify(node, capsys, "--trusted", str(kept))[0] == 0

    attacker = Attacker(node.app.store_url)
    try:
        attacker.delete_tail(keep=52)  # and every checkpoint and Merkle row past it
    finally:
        attacker.close()
    # The store alone now looks like a consistent log of 52 events...
    code, output = verify(node, capsys)
    assert code == 0, output
    # ...but not to the auditor who kept the checkpoint of size 57.
    code, output = verify(node, capsys, "--trusted", str(kept))
    assert code == 1
    assert "log position 52" in output
    assert "kept checkpoint of size 57" in output


def test_tail_deleted_but_checkpoints_left(node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    record(node)
    attacker = Attacker(node.app.store_url)
    try:
        ids = [r[0] for r in attacker.sql(f"SELECT {attacker.id} FROM {attacker.events}")]
        attacker.sql(f"DELETE FROM {attacker.events} WHERE {attacker.id} > ?", (sorted(ids)[49],))
    finally:
        attacker.close()
    code, output = verify(node, capsys)
    assert code == 1
    assert "log position 50" in output
