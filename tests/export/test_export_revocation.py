"""Partial bundles across a revocation (issue 18, item 2), on both stores.

A round or range bundle proves each event's inclusion against the newest
checkpoint; after the ledger-node key is rotated and revoked, what the old key
signed before the revocation is trusted only under a checkpoint issued before
it. So the bundle carries, in consistency.jsonl, the proof (RFC 9162) that the
newest checkpoint extends each older checkpoint that first covers one of its
events, and `verify --bundle` judges every event by its first covering
checkpoint, as `ledger verify` does on the store. An event the revoked key
signed after the revocation still fails; an edited or missing consistency
proof fails, named.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.cli.main import main
from ledger.crypto.keys import Role, read_private_key
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.signing import InMemorySigner
from tests.attacker import ThiefApplication
from tests.conftest import PASSPHRASE
from tests.demo_table import Table
from tests.reproducible import reproducible_session
from tests.schemas import schema


@dataclass
class Rotated:
    """A simulated store whose first ledger-node key signed everything up to a
    checkpoint, then was replaced and revoked (a checkpoint covers the revocation)."""

    store: str
    keys: Path
    covered_before: int  # the size of the last checkpoint issued before the revocation
    log_size: int

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        return run(capsys, "--store", self.store, "--keys", str(self.keys), *argv)

    def ok(self, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
        code, out, err = self.cli(capsys, *argv)
        assert code == 0, out + err
        return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def checkpoint_sizes(bundle: Path) -> list[int]:
    return sorted(c["tree_size"] for c in read_lines(bundle / "checkpoints.jsonl"))


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    for name in ("LEDGER_KEYS", "LEDGER_STORE", "LEDGER_ORIGIN", "LEDGER_NODE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("LEDGER_CHECKPOINT_KEY", raising=False)
    # Checkpoints only where this world makes them (on each command's clean close
    # and `ledger checkpoint`): the one-second anchor would add one more whenever a
    # loaded machine (parallel workers) makes `simulate` pause for a second.
    monkeypatch.setenv("LEDGER_ANCHOR_SECONDS", "0")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))


@pytest.fixture
def rotated(store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Rotated:
    keys = tmp_path / "keys"
    store = Rotated(store_url, keys, 0, 0)
    with reproducible_session(7) as seeds:
        store.ok(capsys, "simulate", "--rounds", "4", "--players", "3", "--tables", "1", *seeds)
    store.ok(capsys, "keys", "create", "ops", "--role", "operator")
    store.ok(capsys, "keys", "create", "ledger-node-2", "--role", "ledger-node")
    store.ok(capsys, "keys", "use", "ledger-node-2")
    (store.covered_before,) = checkpoint_sizes_of(store)
    out = store.ok(capsys, "keys", "revoke", "ledger-node", "--reason", "laptop stolen")
    assert "revoked ledger-node key ledger-node" in out
    store.ok(capsys, "checkpoint")  # the newest checkpoint is issued after the revocation
    store.log_size = max(checkpoint_sizes_of(store))
    assert store.log_size > store.covered_before
    # The store itself verifies: each event judged by its first covering checkpoint.
    store.ok(capsys, "verify", "--level", "signatures")
    return store


def checkpoint_sizes_of(store: Rotated) -> list[int]:
    from ledger.store.application import LedgerApplication

    keyring = KeyDirectory(store.keys).keyring()
    with LedgerApplication(store.store, keyring=keyring, create=False) as app:
        return sorted(int(size) for size, _ in app.tables.checkpoint_rows())


def export(
    store: Rotated, capsys: pytest.CaptureFixture[str], target: Path, *argv: str
) -> tuple[Path, str]:
    out = store.ok(capsys, "export", str(target), *argv)
    return target, out


def verify(capsys: pytest.CaptureFixture[str], bundle: Path, *argv: str) -> tuple[int, str, str]:
    return run(capsys, "verify", "--bundle", str(bundle), *argv)


def fails(capsys: pytest.CaptureFixture[str], bundle: Path) -> str:
    code, out, err = verify(capsys, bundle)
    assert code == 1 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def a_round(store: Rotated, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> str:
    """A settled round the old key signed, from a whole-log export."""
    whole, _ = export(store, capsys, tmp_path / "whole")
    opened, settled = [], set()
    for record in read_lines(whole / "events.jsonl"):
        if record["type"] == "Round.Opened":
            opened.append(record["stream"])
        elif record["type"] == "Round.Settled":
            settled.add(record["stream"])
    return next(r for r in opened if r in settled)


def test_round_and_range_bundles_signed_before_the_revocation_verify(
    rotated: Rotated, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    round_id = a_round(rotated, capsys, tmp_path)
    last = rotated.covered_before - 1
    bundles = [
        export(rotated, capsys, tmp_path / "round", "--round", round_id),
        export(rotated, capsys, tmp_path / "range", "--from", "0", "--to", str(last)),
        # Across it: the old key's events, the revocation and the new key's.
        export(rotated, capsys, tmp_path / "across", "--from", str(last - 3)),
    ]
    validate = schema("consistency")
    for bundle, _ in bundles:
        manifest = json.loads((bundle / "manifest.json").read_text())
        assert manifest["proofs_against"] == rotated.log_size
        proofs = read_lines(bundle / "consistency.jsonl")
        # One proof, from the checkpoint issued before the revocation to the newest.
        assert [(p["from_size"], p["to_size"]) for p in proofs] == [
            (rotated.covered_before, rotated.log_size)
        ]
        for record in proofs:
            validate.validate(record)
        for level in ("signatures", "settlement"):
            code, out, err = verify(capsys, bundle, "--level", level)
            assert code == 0, err
            assert (
                f"the checkpoint of size {rotated.log_size} extends the one of size "
                f"{rotated.covered_before} (consistency proven)" in out
            )
            assert "before the first checkpoint that covers it" in out


def test_a_bundle_with_every_event_under_the_newest_checkpoint_needs_no_proof(
    rotated: Rotated, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first = rotated.covered_before  # the revocation, signed by the new key
    bundle, _ = export(rotated, capsys, tmp_path / "tail", "--from", str(first))
    assert (bundle / "consistency.jsonl").read_text() == ""
    code, out, err = verify(capsys, bundle)
    assert code == 0, err
    assert "consistency" not in out


def test_an_edited_or_missing_consistency_proof_is_named(
    rotated: Rotated, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    last = rotated.covered_before - 1
    bundle, _ = export(rotated, capsys, tmp_path / "range", "--from", "0", "--to", str(last))
    pristine = read_lines(bundle / "consistency.jsonl")
    old, new = rotated.covered_before, rotated.log_size

    def edited(change: Any) -> str:
        records = json.loads(json.dumps(pristine))
        change(records)
        write_lines(bundle / "consistency.jsonl", records)
        return fails(capsys, bundle)

    def flip(records: list[dict[str, Any]]) -> None:
        hashes = records[0]["proof"]
        hashes[0] = base64.b64encode(bytes(32)).decode()

    line = edited(flip)
    assert line.startswith("ledger: error: bundle consistency.jsonl line 1: ")
    assert f"consistency proof from size {old} to size {new}" in line and "mismatch" in line

    def shorten(records: list[dict[str, Any]]) -> None:
        records[0]["proof"].pop()

    line = edited(shorten)
    assert "consistency.jsonl line 1: " in line and "hashes, expected" in line

    def elsewhere(records: list[dict[str, Any]]) -> None:
        records[0]["from_size"] = old - 1

    line = edited(elsewhere)
    assert f"consistency.jsonl line 1: no valid checkpoint of size {old - 1} in the bundle" in line

    def not_a_proof(records: list[dict[str, Any]]) -> None:
        records[0]["to_size"] = str(new)

    line = edited(not_a_proof)
    assert "consistency.jsonl line 1: not a consistency proof record" in line

    # Removed: the events it stood for are named, with the checkpoint they need.
    line = edited(lambda records: records.clear())
    assert "events.jsonl line 1 (log position 0)" in line
    assert f"no proof in consistency.jsonl that the checkpoint of size {new}" in line
    assert f"extends the one of size {old}, the first that covers it" in line

    # The whole file gone: a bundle from before it existed, judged by the newest
    # checkpoint alone, as that release did (and the old key's events fail).
    (bundle / "consistency.jsonl").unlink()
    line = fails(capsys, bundle)
    assert "(log position 0)" in line and "no checkpoint issued before the revocation" in line


def test_an_event_the_revoked_key_signed_after_the_revocation_still_fails(
    rotated: Rotated, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    keys = KeyDirectory(rotated.keys)
    thief = InMemorySigner(
        read_private_key(keys.private_key_path("ledger-node"), PASSPHRASE),
        Role.LEDGER_NODE,
        "ledger-node",
    )
    app = ThiefApplication(rotated.store, keyring=keys.keyring(), signer=thief)
    try:
        table = Table(name="forged", dealer="D1")
        table.throw_dice([6, 6, 6])
        app.save(table)
    finally:
        app.close()
    rotated.ok(capsys, "checkpoint")
    first = rotated.covered_before - 2  # the old key's honest events, then the forgery
    bundle, _ = export(rotated, capsys, tmp_path / "forged", "--from", str(first))
    position = rotated.log_size  # the first forged event
    line = fails(capsys, bundle)
    assert f"stream {table.id} version 1" in line and f"(log position {position})" in line
    assert "after its key was revoked" in line
    # The same bundle without the forgery verifies.
    shutil.rmtree(bundle)
    bundle, _ = export(
        rotated, capsys, tmp_path / "honest", "--from", str(first), "--to", str(position - 1)
    )
    code, _, err = verify(capsys, bundle)
    assert code == 0, err
