"""Our witness against Go's golang.org/x/mod/sumdb/{note,tlog} (code we did not
write; Debian's golang-golang-x-mod-dev).

- A checkpoint our witness cosigned, read by Go's note package: it knows
  Ed25519 note signatures (type 0x01) only, so the log's own signature still
  verifies on the cosigned note, the cosignature line is set aside as an
  unknown key's (the signed-note rule), and a witness key (type 0x04) is not
  taken for a note key.
- A log written in Go (its checkpoints signed by Go's note package, its
  consistency proofs made by Go's tlog) asks our witness over HTTP for
  cosignatures, and checks each one with Go's crypto/ed25519 exactly as
  tlog-cosignature defines it; its rewritten history is refused.

The cosignature bytes are also checked in Python in tests/mirror/test_witness.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.crypto.cosignature import Cosigner, cosigner_verifier_key
from ledger.crypto.keys import Role
from ledger.crypto.note import parse_verifier_key, split_note
from ledger.witness.state import WitnessState
from ledger.witness.witness import Witness
from tests.witness_support import Log, ServedWitness, make_witness, signer

PROGRAMS = Path(__file__).parents[1] / "go"
PROGRAM = PROGRAMS / "cosigned_note" / "main.go"
GOPATH = Path("/usr/share/gocode")


def go_env(tmp_path: Path) -> tuple[str, dict[str, str]]:
    go = shutil.which("go")
    if go is None or not (GOPATH / "src/golang.org/x/mod/sumdb/note").is_dir():
        message = "needs Go and golang-golang-x-mod-dev (tools/bootstrap.py test installs them)"
        if os.environ.get("CI"):
            pytest.fail(message)  # never a skip in CI
        pytest.skip(message)
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": str(GOPATH),
        "GOCACHE": str(tmp_path / "gocache"),
    }
    return go, env


def go_note(tmp_path: Path, note: str, *keys: str) -> dict[str, object]:
    go, env = go_env(tmp_path)
    done = subprocess.run(
        [go, "run", str(PROGRAM), *keys],
        input=note.encode(),
        capture_output=True,
        env=env,
        check=True,
        timeout=300,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_go_reads_a_cosigned_checkpoint(tmp_path: Path) -> None:
    log = Log(12)
    witness = make_witness(tmp_path, log)
    checkpoint = log.checkpoint(12)
    answer = witness.add_checkpoint(log.request(0, 12))
    assert answer.status == 200
    cosigned = checkpoint.to_note() + answer.body.decode()
    assert split_note(cosigned)[1][1].name == witness.name  # two lines: the log's, the witness's
    witness_key = cosigner_verifier_key(witness.name, witness.signer.public_key)
    found = go_note(tmp_path, cosigned, log.verifier_key, witness_key)
    assert "error" not in found, found
    assert found["text"] == checkpoint.text
    assert found["verified"] == [f"log-key+{checkpoint.key_hash.hex()}"]  # type: ignore[union-attr]
    label = Cosigner(witness.name, witness.signer.public_key).label
    assert found["unverified"] == [label]
    assert found["other_key_error"] == "unknown verifier algorithm"  # 0x04: not a note key
    # An edited text fails in Go as in ours: the cosignature does not rescue it.
    edited = cosigned.replace("\n12\n", "\n13\n", 1)
    assert "error" in go_note(tmp_path, edited, log.verifier_key)


def test_a_go_log_is_witnessed(tmp_path: Path) -> None:
    logs: dict[str, list[tuple[str, bytes]]] = {}
    state = WitnessState(tmp_path / "w.db")
    witness = Witness("witness.example/w1", signer(Role.WITNESS, "w"), logs, state)
    go, env = go_env(tmp_path)
    with ServedWitness(witness) as served:
        client = subprocess.Popen(
            [
                go,
                "run",
                str(PROGRAMS / "witness_client" / "main.go"),
                served.url,
                served.verifier_key,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert client.stdin is not None and client.stdout is not None
        go_key = client.stdout.readline().strip()  # the Go log's note verifier key
        logs["go.example/log"] = [parse_verifier_key(go_key)]
        out, _ = client.communicate("configured\n", timeout=300)
    assert client.returncode == 0
    first, stale, proved, fork, grown = json.loads(out)
    assert (first["Status"], first["Cosigned"]) == (200, True), first
    assert (stale["Status"], stale["ContentType"], stale["Body"]) == (
        409,
        "text/x.tlog.size",
        "5\n",
    )
    assert (proved["Status"], proved["Cosigned"]) == (200, True), proved
    assert fork["Status"] == 422 and "does not extend" in fork["Body"]
    assert (grown["Status"], grown["Cosigned"]) == (200, True), grown
    assert state.known("go.example/log").size == 40
    assert [r.status for r in state.refusals()] == [422]
