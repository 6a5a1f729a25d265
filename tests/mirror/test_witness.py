"""`ledger witness` per C2SP tlog-witness: each answer of `add-checkpoint`,
the cosignature bytes against tlog-cosignature's definition computed here by
hand (hashlib, struct and pyca/cryptography, none of the project's signing
code), the state kept across restarts and never rolled back by a race, and
each attack a witness must refuse: a fork, a smaller tree, a bad proof, a
replayed old checkpoint, a checkpoint from an unknown key or origin."""

from __future__ import annotations

import base64
import hashlib
import struct
import threading
import time
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.crypto.cosignature import Cosigner, cosigner_verifier_key
from ledger.crypto.keys import Role
from ledger.crypto.witness_wire import AddCheckpoint
from ledger.errors import ConfigError
from ledger.witness.config import WitnessConfig
from ledger.witness.state import WitnessState
from ledger.witness.witness import Witness
from tests.witness_support import ORIGIN, WITNESS_NAME, Log, make_witness, signer


def cosignature_of(answer_body: bytes) -> tuple[str, bytes]:
    (line,) = answer_body.decode().splitlines()
    dash, name, blob = line.split(" ")
    assert dash == "\u2014"
    return name, base64.b64decode(blob, validate=True)


def test_a_cosignature_is_the_specs_bytes(tmp_path: Path) -> None:
    log = Log(10)
    witness = make_witness(tmp_path, log)
    before = int(time.time())
    answer = witness.add_checkpoint(log.request(0, 10))
    assert (answer.status, answer.content_type) == (200, "text/plain; charset=utf-8")
    name, blob = cosignature_of(answer.body)
    assert name == WITNESS_NAME
    assert len(blob) == 4 + 8 + 64
    public = witness.signer.public_key
    # key ID = SHA-256(name || 0x0A || 0x04 || public key)[:4]
    assert blob[:4] == hashlib.sha256(WITNESS_NAME.encode() + b"\n\x04" + public).digest()[:4]
    (timestamp,) = struct.unpack(">Q", blob[4:12])
    assert before <= timestamp <= time.time()
    text = log.checkpoint(10).text  # the whole body, with the time extension line
    message = f"cosignature/v1\ntime {timestamp}\n".encode() + text.encode()
    Ed25519PublicKey.from_public_bytes(public).verify(blob[12:], message)
    with pytest.raises(InvalidSignature):  # the log's own message is not what it signs
        Ed25519PublicKey.from_public_bytes(public).verify(blob[12:], text.encode())
    # Its verifier key: name+keyID+base64(0x04 || key).
    vkey = cosigner_verifier_key(WITNESS_NAME, public)
    assert vkey == f"{WITNESS_NAME}+{blob[:4].hex()}+" + base64.b64encode(b"\x04" + public).decode()
    assert Cosigner.parse(vkey) == Cosigner(WITNESS_NAME, public)


def test_it_cosigns_only_what_extends_what_it_cosigned(tmp_path: Path) -> None:
    log = Log(40)
    witness = make_witness(tmp_path, log)
    assert witness.add_checkpoint(log.request(0, 10)).status == 200
    # The log's sender thought the witness knew nothing: 409, the size as text/x.tlog.size.
    stale = witness.add_checkpoint(log.request(0, 20))
    assert (stale.status, stale.content_type, stale.body) == (409, "text/x.tlog.size", b"10\n")
    assert witness.add_checkpoint(log.request(10, 20)).status == 200
    assert witness.add_checkpoint(log.request(20, 40)).status == 200
    assert witness.state.known(ORIGIN).size == 40
    # The same checkpoint again is cosigned again (nothing moves).
    assert witness.add_checkpoint(log.request(40, 40)).status == 200
    assert witness.state.refusals() == []


def test_a_fork_is_refused_and_kept_as_evidence(tmp_path: Path) -> None:
    log = Log(20)
    witness = make_witness(tmp_path, log)
    assert witness.add_checkpoint(log.request(0, 16)).status == 200
    forked = log.fork(3)  # the same key signs a rewritten history
    forked.grow(4)
    answer = witness.add_checkpoint(forked.request(16, 24))
    assert answer.status == 422
    assert "does not extend" in answer.body.decode()
    assert witness.state.known(ORIGIN).size == 16  # nothing moved
    (refusal,) = witness.state.refusals()
    assert (refusal.status, refusal.origin) == (422, ORIGIN)
    assert forked.checkpoint(24).text in refusal.request


def test_a_split_view_of_one_size_is_refused(tmp_path: Path) -> None:
    log = Log(16)
    witness = make_witness(tmp_path, log)
    assert witness.add_checkpoint(log.request(0, 16)).status == 200
    other = log.fork(0)
    answer = witness.add_checkpoint(other.request(16, 16))
    assert (answer.status, answer.content_type) == (409, "text/plain; charset=utf-8")
    assert answer.body.decode().startswith("split view:")
    assert [r.status for r in witness.state.refusals()] == [409]


def test_a_smaller_tree_or_a_replayed_old_checkpoint_is_refused(tmp_path: Path) -> None:
    log = Log(30)
    witness = make_witness(tmp_path, log)
    assert witness.add_checkpoint(log.request(0, 10)).status == 200
    old_request = log.request(10, 20)
    assert witness.add_checkpoint(old_request).status == 200
    assert witness.add_checkpoint(log.request(20, 30)).status == 200
    # The cosigned checkpoint of size 20, replayed as it was sent: the size it
    # states is not the witness's any more.
    replay = witness.add_checkpoint(old_request)
    assert (replay.status, replay.body) == (409, b"30\n")
    # A smaller tree claiming the witness's own size as its old size.
    assert witness.add_checkpoint(log.request(30, 10)).status == 400
    assert witness.state.known(ORIGIN).size == 30


def test_a_bad_proof_is_422(tmp_path: Path) -> None:
    log = Log(20)
    witness = make_witness(tmp_path, log)
    assert witness.add_checkpoint(log.request(0, 8)).status == 200
    note = log.checkpoint(20).to_note()
    proof = log.proof(8, 20)
    for bad in (proof[:-1], [*proof, proof[0]], [proof[0][::-1], *proof[1:]], []):
        answer = witness.add_checkpoint(AddCheckpoint(8, tuple(bad), note).encode())
        assert answer.status == 422, bad
    # A proof from size 0 must be empty.
    fresh = make_witness(tmp_path, log, "witness.example/w2")
    answer = fresh.add_checkpoint(AddCheckpoint(0, (proof[0],), note).encode())
    assert answer.status == 422


def test_unknown_logs_and_keys(tmp_path: Path) -> None:
    log = Log(8)
    witness = make_witness(tmp_path, log)
    stranger = Log(8)  # another key under our origin
    assert witness.add_checkpoint(stranger.request(0, 8)).status == 403
    # The log's key with another name, or its signature moved to another text.
    renamed = log.checkpoint(8).to_note().replace("\u2014 log-key ", "\u2014 other-key ")
    assert witness.add_checkpoint(AddCheckpoint(0, (), renamed).encode()).status == 403
    note = log.checkpoint(8).to_note()
    edited = note.replace(f"{ORIGIN}\n8\n", f"{ORIGIN}\n9\n")
    assert witness.add_checkpoint(AddCheckpoint(0, (), edited).encode()).status == 403
    elsewhere = note.replace(ORIGIN, "other.example/log")
    assert witness.add_checkpoint(AddCheckpoint(0, (), elsewhere).encode()).status == 404
    assert witness.state.known(ORIGIN).size == 0


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"old 1\n",
        b"old 01\n\nx",
        b"old -1\n\nx",
        b"old 0\nnot base64!\n\nx",
        b"old 0\n" + base64.b64encode(b"short") + b"\n\nx",
        b"old 0\n\norigin\n5\nnot-a-root\n\n\xe2\x80\x94 k AAAA\n",
        b"old 0\n" + b"A" * 10 + b"\xff\n\n",
        b"old 0\n" + b"".join([base64.b64encode(bytes(32)) + b"\n"] * 64) + b"\nx",
    ],
)
def test_malformed_requests_are_400(tmp_path: Path, body: bytes) -> None:
    witness = make_witness(tmp_path, Log(1))
    assert witness.add_checkpoint(body).status == 400


def test_its_state_survives_a_restart(tmp_path: Path) -> None:
    log = Log(20)
    witness = make_witness(tmp_path, log)
    assert witness.add_checkpoint(log.request(0, 12)).status == 200
    witness.state.close()
    again = Witness(WITNESS_NAME, witness.signer, log.trusted, WitnessState(witness.state.path))
    assert again.add_checkpoint(log.request(0, 20)).body == b"12\n"
    assert again.add_checkpoint(log.request(12, 20)).status == 200


def test_racing_submissions_never_roll_it_back(tmp_path: Path) -> None:
    """tlog-witness's race: from one old size, several growths at once. The check
    and the update are one transaction, so one wins and the others get 409."""
    log = Log(64)
    witness = make_witness(tmp_path, log)
    assert witness.add_checkpoint(log.request(0, 8)).status == 200
    requests = [log.request(8, size) for size in range(9, 65)]
    statuses: list[int] = []
    barrier = threading.Barrier(len(requests))

    def send(body: bytes) -> None:
        barrier.wait()
        statuses.append(witness.add_checkpoint(body).status)

    threads = [threading.Thread(target=send, args=(r,)) for r in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] + [409] * (len(requests) - 1)
    assert witness.state.known(ORIGIN).size > 8


def test_a_witness_signs_with_a_witness_key_only(tmp_path: Path) -> None:
    log = Log(1)
    state = WitnessState(tmp_path / "s.db")
    for role in (Role.CHECKPOINT, Role.OPERATOR, Role.LEDGER_NODE):
        with pytest.raises(ConfigError, match="witness key"):
            Witness(WITNESS_NAME, signer(role, "k"), log.trusted, state)


def ledger(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    from ledger.cli.main import main

    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse: one line, exit 2
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out + captured.err


def test_the_witness_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", "witness passphrase")
    directory = str(tmp_path / "w")
    code, out = ledger(capsys, "witness", "init", directory, "--name", WITNESS_NAME)
    assert code == 0, out
    shown = out.split("verifier key: ")[1].strip()
    code, out = ledger(capsys, "witness", "key", directory)
    assert (code, out.strip()) == (0, shown)
    (record,) = WitnessConfig.load(Path(directory)).keys.keyring()
    assert record.role is Role.WITNESS
    assert Cosigner.parse(shown) == Cosigner(WITNESS_NAME, record.public_key)
    log = Log(3)
    code, out = ledger(capsys, "witness", "add-log", directory, ORIGIN, log.verifier_key)
    assert code == 0 and "1 key(s)" in out
    assert WitnessConfig.load(Path(directory)).log_keys() == log.trusted
    code, out = ledger(capsys, "witness", "refusals", directory)
    assert (code, out.strip()) == (0, "no refused submission")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("witness", "init", "{d}", "--name", "has space"), "witness name"),
        (("witness", "init", "{d}", "--name", "a+b"), "witness name"),
        (("witness", "init", "{d}", "--name", "ok.example/w"), "already exists"),
        (("witness", "add-log", "{d}", "o", "not-a-key"), "log key"),
        (("witness", "add-log", "{d}", "", "{vkey}"), "origin"),
        (("witness", "add-log", "{d}", "o", "{wkey}"), "log key"),  # a witness key as a log's
        (("witness", "serve", "{missing}"), "ledger witness init"),
        (("witness", "key", "{missing}"), "ledger witness init"),
        (("witness", "serve", "{d}", "--port", "0"), "--port"),
    ],
)
def test_witness_command_mistakes_are_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: tuple[str, ...],
    said: str,
) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", "witness passphrase")
    directory = tmp_path / "w"
    if said != "witness name":
        assert ledger(capsys, "witness", "init", str(directory), "--name", WITNESS_NAME)[0] == 0
    values = {
        "d": str(directory),
        "missing": str(tmp_path / "nothing"),
        "vkey": Log(1).verifier_key,
        "wkey": cosigner_verifier_key("w", signer(Role.WITNESS, "w").public_key),
    }
    code, out = ledger(capsys, *(a.format(**values) for a in argv))
    assert code == 2, out
    assert said in out and len(out.strip().splitlines()) == 1, out


def serving(directory: Path, *flags: str) -> bool:
    """`ledger witness serve DIRECTORY` in a process of its own: True once it
    answers GET / (then stopped), False when it exits first."""
    import subprocess
    import sys
    import urllib.request

    from tests.ports import free_port

    port = free_port()
    command = [sys.executable, "-m", "ledger.cli.main", "witness", "serve", str(directory)]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--unencrypted", *flags], stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(600):
            if server.poll() is not None:
                return False
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).close()
                return True
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the witness neither served nor exited")
    finally:
        server.terminate()
        server.wait(30)


def test_a_witness_serves_from_the_state_init_made_and_from_nothing_only_when_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37: `init` makes the state, so a fresh witness serves with no flag;
    once its state is lost it serves again only with --new-state, which makes
    a new, empty one."""
    directory = tmp_path / "w"
    init = ("witness", "init", str(directory), "--name", WITNESS_NAME, "--unencrypted")
    assert ledger(capsys, *init)[0] == 0
    state = WitnessState.existing(directory / "state.db", read_only=True)
    assert state.known(ORIGIN).size == 0 and state.refusals() == []
    state.close()
    assert serving(directory)
    (directory / "state.db").unlink()
    assert not serving(directory)
    assert not (directory / "state.db").exists()
    assert serving(directory, "--new-state")
    WitnessState.existing(directory / "state.db").close()
