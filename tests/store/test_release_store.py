"""A store written by release 0.1 (v1 envelopes, no signing times) keeps
verifying, and takes new (v2) events beside its old ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ledger.cli.main import main
from ledger.crypto.envelope import MAGIC, MAGIC_V1
from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory
from ledger.node import open_node
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE
from tests.demo_table import Table
from tests.verdict import verdict

RELEASE = Path(__file__).parents[1] / "data" / "release-0.1-store"


@pytest.fixture
def copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("LEDGER_KEYS", "LEDGER_STORE", "LEDGER_ORIGIN", "LEDGER_NODE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    target = tmp_path / "release"
    shutil.copytree(RELEASE, target)
    return target


def verify(copy: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    store = f"sqlite:///{copy / 'ledger.db'}"
    code = main(["--store", store, "--keys", str(copy / "keys"), "verify", *extra])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, verdict(code, out, err)


def magics(copy: Path) -> list[bytes]:
    attacker = Attacker(f"sqlite:///{copy / 'ledger.db'}")
    try:
        return [bytes(r[0][:4]) for r in attacker.sql("SELECT state FROM stored_events")]
    finally:
        attacker.close()


@pytest.mark.parametrize("level", ["integrity", "signatures", "settlement"])
def test_release_store_verifies_at_every_level(
    copy: Path, capsys: pytest.CaptureFixture[str], level: str
) -> None:
    assert set(magics(copy)) == {MAGIC_V1}  # really the old format
    kept = str(copy / "kept.txt")
    code, output = verify(copy, capsys, "--trusted", kept, "--level", level)
    assert code == 0, output
    assert "850 events" in output
    assert "consistent with the kept checkpoint of size 850" in output


def test_release_store_takes_v2_events_and_the_mixed_store_verifies(
    copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = KeyDirectory(copy / "keys")  # the old private keys are gone: new ones sign now
    keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)
    keys.create("checkpoint-2", Role.CHECKPOINT, PASSPHRASE)
    node = open_node(f"sqlite:///{copy / 'ledger.db'}", str(keys.path), passphrase=PASSPHRASE)
    try:
        table = Table(name="T-new", dealer="D9")
        table.throw_dice([2, 4, 6])
        node.app.save(table)
        node.checkpointer().catch_up()
        assert node.app.repository.get(table.id).throws == [[2, 4, 6]]
    finally:
        node.close()
    assert sorted(set(magics(copy))) == sorted({MAGIC, MAGIC_V1})
    for level in ("integrity", "signatures", "settlement"):
        code, output = verify(copy, capsys, "--trusted", str(copy / "kept.txt"), "--level", level)
        assert code == 0, output
        assert "852 events" in output


def test_a_v1_event_no_checkpoint_covers_fails_naming_its_position(
    copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    attacker = Attacker(f"sqlite:///{copy / 'ledger.db'}")
    try:  # as if the store had been copied before its last checkpoint
        attacker.sql("DELETE FROM ledger_checkpoints")
    finally:
        attacker.close()
    code, output = verify(copy, capsys, "--level", "integrity")
    assert code == 1
    assert "v1 envelope (no signing time) that no checkpoint covers" in output
    assert "(log position 0)" in output  # the very first event: nothing covers it
    assert len(output.strip().splitlines()) == 1


RELEASE_0_2 = Path(__file__).parents[1] / "data" / "release-0.2-store"


@pytest.mark.parametrize("level", ["integrity", "signatures", "settlement"])
def test_release_0_2_store_verifies_at_every_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], level: str
) -> None:
    """Release 0.2: v2 envelopes, RNG and physical tables, faults, a correction, a void."""
    target = tmp_path / "release-0.2"
    shutil.copytree(RELEASE_0_2, target)
    assert set(magics(target)) == {MAGIC}
    code, output = verify(target, capsys, "--trusted", str(target / "kept.txt"), "--level", level)
    assert code == 0, output
    assert "750 events" in output
    assert "consistent with the kept checkpoint of size 750" in output
    if level == "settlement":
        assert "41 rounds re-derived" in output
        assert "22 dealer device reports verified" in output
