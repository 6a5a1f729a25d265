"""A checkpoint cosigned by our witness, read by Go's golang.org/x/mod/sumdb/note
(an implementation we did not write; Debian's golang-golang-x-mod-dev). That
package knows Ed25519 note signatures (type 0x01) only, so it checks what it
can: the log's own signature still verifies on the cosigned note, the
witness's cosignature line is kept aside as a signature by an unknown key
(the signed-note rule every verifier follows), and a witness's verifier key
(type 0x04) is not taken for a note key. The cosignature bytes themselves are
checked against the spec's definition in tests/test_witness.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.crypto.cosignature import Cosigner, cosigner_verifier_key
from ledger.crypto.note import split_note
from tests.witness_support import Log, make_witness

PROGRAM = Path(__file__).parent / "go" / "cosigned_note" / "main.go"
GOPATH = Path("/usr/share/gocode")


def go_note(tmp_path: Path, note: str, *keys: str) -> dict[str, object]:
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
