"""C2SP signed notes and checkpoints: the published known answer (the Go
`golang.org/x/mod/sumdb/note` example key and note, tests/data/signed-note/)
is verified and produced byte for byte; our checkpoints are checked by a
verifier written here from the spec alone; old-form checkpoints still verify."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ledger.cli.main import main
from ledger.crypto.canonical import CHECKPOINT_DOMAIN
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keys import Keyring, PublicKeyRecord, Role
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.note import (
    NoteError,
    key_hash,
    parse_verifier_key,
    sign_note,
    split_note,
    verifier_key,
)
from ledger.crypto.signing import InMemorySigner, verify_signature
from ledger.errors import ConfigError, VerificationError
from ledger.node import Node, open_node
from ledger.store.checkpointer import Checkpointer
from tests.audit.test_checkpoint_attacks import record, run
from tests.conftest import PASSPHRASE
from tests.demo_table import Table
from tests.verdict import verdict

DATA = Path(__file__).parents[1] / "data"
VECTOR = json.loads((DATA / "signed-note" / "vector.json").read_text())
EPOCH = datetime(2020, 1, 1, tzinfo=UTC)


def spec_key_hash(name: str, public_key: bytes) -> bytes:
    """From the spec, not from `ledger`: SHA-256(name || 0x0A || 0x01 || key)[:4]."""
    return hashlib.sha256(name.encode() + b"\x0a\x01" + public_key).digest()[:4]


def spec_verify(note: str, name: str, public_key: bytes) -> str:
    """A signed-note verifier from the spec alone: returns the text, else raises."""
    text, _, signatures = note.rpartition("\n\n")
    text += "\n"
    (line,) = signatures.removesuffix("\n").split("\n")
    dash, line_name, encoded = line.split(" ")
    assert (dash, line_name) == ("\u2014", name)
    blob = base64.b64decode(encoded, validate=True)
    assert blob[:4] == spec_key_hash(name, public_key)
    Ed25519PublicKey.from_public_bytes(public_key).verify(blob[4:], text.encode())
    return text


def kat_signer() -> tuple[str, InMemorySigner]:
    """The vector's private key: PRIVATE+KEY+name+hash+base64(0x01 || seed)."""
    private, key, name, hash_hex, encoded = VECTOR["signer_key"].split("+", 4)
    assert (private, key) == ("PRIVATE", "KEY")
    typed = base64.b64decode(encoded)
    assert typed[0] == 1 and len(typed) == 33
    seed = Ed25519PrivateKey.from_private_bytes(typed[1:])
    signer = InMemorySigner(seed, Role.CHECKPOINT, name)
    assert key_hash(name, signer.public_key).hex() == hash_hex
    return name, signer


# -- The known answer ------------------------------------------------------------


def test_the_known_answer_verifier_key_parses_and_is_written_back_exactly() -> None:
    name, public_key = parse_verifier_key(VECTOR["verifier_key"])
    assert name == "PeterNeumann"
    assert key_hash(name, public_key) == spec_key_hash(name, public_key)
    assert key_hash(name, public_key).hex() == "c74f20a3"
    assert verifier_key(name, public_key) == VECTOR["verifier_key"]


def test_the_known_answer_note_is_produced_byte_for_byte() -> None:
    name, signer = kat_signer()
    assert signer.public_key == parse_verifier_key(VECTOR["verifier_key"])[1]
    note = sign_note(VECTOR["text"], name, signer.public_key, signer)
    assert note.encode() == VECTOR["note"].encode()


def test_the_known_answer_note_verifies_over_the_text_with_no_prefix() -> None:
    name, public_key = parse_verifier_key(VECTOR["verifier_key"])
    text, (line,) = split_note(VECTOR["note"])
    assert text == VECTOR["text"]
    assert line.name == name and line.blob[:4] == key_hash(name, public_key)
    assert verify_signature(public_key, text.encode(), line.blob[4:])
    assert not verify_signature(public_key, CHECKPOINT_DOMAIN + text.encode(), line.blob[4:])
    assert not verify_signature(
        public_key, text.replace("answer", "Answer").encode(), line.blob[4:]
    )
    assert spec_verify(VECTOR["note"], name, public_key) == VECTOR["text"]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "is not its key's"),
        ("PeterNeumann+c74f20a3+ApRc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "not an Ed25519"),
        ("PeterNeumann+c74f20a3", "name+hash+base64"),
        (
            "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW==",
            "not canonical base64",
        ),
        ("Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "without spaces"),
        ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TX", "is not its key's"),
    ],
)
def test_a_bad_verifier_key_is_refused(key: str, message: str) -> None:
    with pytest.raises(NoteError, match=re.escape(message)):
        parse_verifier_key(key)


# -- Our checkpoints are C2SP notes ------------------------------------------------


def kat_keyring(role: Role = Role.CHECKPOINT) -> Keyring:
    name, signer = kat_signer()
    return Keyring([PublicKeyRecord(name, role, signer.public_key, EPOCH)])


def test_a_checkpoint_is_a_c2sp_note_any_verifier_checks() -> None:
    name, signer = kat_signer()
    root = hashlib.sha256(b"root").digest()
    moment = datetime(2026, 11, 30, 20, 0, 0, 123456, tzinfo=UTC)
    checkpoint = Checkpoint.sign(
        origin="casino.example/ledger", size=1234, root=root, signer=signer, now=moment
    )
    note = checkpoint.to_note()
    text = spec_verify(note, name, signer.public_key)  # checked from the spec alone
    assert text == (
        "casino.example/ledger\n1234\n"
        f"{base64.b64encode(root).decode()}\n"
        "time 2026-11-30T20:00:00.123456+00:00\n"
    )
    assert note.startswith(text + "\n\u2014 PeterNeumann ")
    # Produced byte for byte by the generic signed-note code too.
    assert note == sign_note(text, name, signer.public_key, signer)
    parsed = Checkpoint.from_note(note)
    assert parsed == checkpoint and not parsed.legacy
    parsed.verify(kat_keyring(), origin="casino.example/ledger")
    with pytest.raises(InvalidSignature):
        spec_verify(note.replace("\n1234\n", "\n1235\n"), name, signer.public_key)


def test_a_checkpoint_signed_by_another_role_or_outside_its_validity_fails() -> None:
    _, signer = kat_signer()
    checkpoint = Checkpoint.sign(origin="o", size=1, root=bytes(32), signer=signer, now=EPOCH)
    with pytest.raises(VerificationError, match="signed by an auditor key"):
        checkpoint.verify(kat_keyring(Role.AUDITOR))
    early = Checkpoint.sign(
        origin="o", size=1, root=bytes(32), signer=signer, now=datetime(2019, 1, 1, tzinfo=UTC)
    )
    with pytest.raises(VerificationError, match="before its key is valid"):
        early.verify(kat_keyring())
    with pytest.raises(VerificationError, match="origin is 'o', expected 'p'"):
        checkpoint.verify(kat_keyring(), origin="p")


def test_two_keys_of_one_name_the_one_that_signed_is_found() -> None:
    name, signer = kat_signer()
    other = Ed25519PrivateKey.generate()
    other_signer = InMemorySigner(other, Role.CHECKPOINT, name)
    keyring = Keyring(
        [
            PublicKeyRecord(name, Role.CHECKPOINT, other_signer.public_key, EPOCH),
            PublicKeyRecord(name, Role.CHECKPOINT, signer.public_key, EPOCH),
        ]
    )
    for used in (signer, other_signer):
        checkpoint = Checkpoint.sign(origin="o", size=2, root=bytes(32), signer=used, now=EPOCH)
        checkpoint.verify(keyring)
        record = checkpoint.key_record(keyring)
        assert record is not None and record.public_key == used.public_key


def test_a_signer_without_a_note_name_signs_nothing() -> None:
    bare = InMemorySigner(Ed25519PrivateKey.generate(), Role.CHECKPOINT)
    with pytest.raises(ConfigError, match="needs its key name"):
        Checkpoint.sign(origin="o", size=1, root=bytes(32), signer=bare)
    spaced = InMemorySigner(Ed25519PrivateKey.generate(), Role.CHECKPOINT, "a b")
    with pytest.raises(ConfigError, match="without spaces or"):
        Checkpoint.sign(origin="o", size=1, root=bytes(32), signer=spaced)


def test_the_checkpointer_refuses_a_signer_named_unlike_its_keyring_entry(tmp_path: Path) -> None:
    keys = KeyDirectory(tmp_path / "keys")
    keys.create_node_keys(b"pw")
    private = Ed25519PrivateKey.from_private_bytes(b"\x00" * 32)
    for signer in (
        InMemorySigner(private, Role.CHECKPOINT),  # no name at all
        InMemorySigner(private, Role.CHECKPOINT, "renamed"),
    ):
        keyring = Keyring(
            [*keys.keyring(), PublicKeyRecord("x", Role.CHECKPOINT, signer.public_key, EPOCH)]
        )
        with pytest.raises(ConfigError, match="is not its keyring name"):
            Checkpointer(None, signer=signer, signer_check=None, keyring=keyring)  # type: ignore[arg-type]
    assert keys.signer(Role.CHECKPOINT, b"pw").name == "checkpoint"  # the real one is named


# -- Old checkpoints keep verifying --------------------------------------------------


@pytest.mark.parametrize("release", ["release-0.1-store", "release-0.2-store"])
def test_old_form_kept_checkpoints_still_parse_and_verify(release: str) -> None:
    store = DATA / release
    note = (store / "kept.txt").read_text()
    checkpoint = Checkpoint.from_note(note)
    assert checkpoint.legacy and checkpoint.to_note() == note
    keyring = KeyDirectory(store / "keys").keyring()
    checkpoint.verify(keyring)
    record = checkpoint.key_record(keyring)
    assert record is not None and record.key_id == checkpoint.key_name
    # The old form is signed over the domain-prefixed text, never the bare text.
    assert verify_signature(
        record.public_key, CHECKPOINT_DOMAIN + checkpoint.text.encode(), checkpoint.signature
    )
    assert not verify_signature(record.public_key, checkpoint.text.encode(), checkpoint.signature)


# -- End to end: what `keys list` prints checks what `checkpoint --export` writes --------


def test_the_listed_verifier_key_checks_the_exported_checkpoint(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    record(node, 5)
    kept = tmp_path / "kept.txt"
    code, output = run(node, capsys, "checkpoint", "--export", str(kept))
    assert code == 0, output
    code, output = run(node, capsys, "keys", "list")
    assert code == 0, output
    (line,) = [line for line in output.splitlines() if " checkpoint " in line]
    listed = line.split("verifier-key ", 1)[1].split()[0]
    name, hash_hex, encoded = listed.split("+", 2)
    public_key = base64.b64decode(encoded)[1:]
    assert name == "checkpoint" and bytes.fromhex(hash_hex) == spec_key_hash(name, public_key)
    (record_,) = [r for r in node.keyring if r.role is Role.CHECKPOINT]
    assert public_key == record_.public_key
    text = spec_verify(kept.read_text(), name, public_key)
    assert text.split("\n")[:2] == ["casino-ledger", "5"]
    # Keys of other roles sign no notes: no verifier key is listed for them.
    others = [line for line in output.splitlines() if " checkpoint " not in line]
    assert others and not any("verifier-key" in line for line in others)


# -- The documentation's worked example ------------------------------------------------

DOC = Path(__file__).parents[2] / "docs" / "checkpoints.md"


def doc_block(language: str) -> str:
    (block,) = re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.DOTALL)
    return str(block)


def test_the_documented_note_is_what_the_ledger_signs_and_verifies() -> None:
    note = doc_block("note")
    name, public_key = parse_verifier_key(VECTOR["verifier_key"])
    spec_verify(note, name, public_key)
    checkpoint = Checkpoint.from_note(note)
    checkpoint.verify(kat_keyring(), origin="casino.example/ledger")
    _, signer = kat_signer()
    resigned = Checkpoint.sign(
        origin=checkpoint.origin,
        size=checkpoint.size,
        root=checkpoint.root,
        signer=signer,
        now=checkpoint.issued_at,
    )
    assert resigned.to_note() == note  # Ed25519 is deterministic: the same bytes


def test_the_documented_snippet_runs_and_prints_what_the_docs_say(
    capsys: pytest.CaptureFixture[str],
) -> None:
    snippet = doc_block("python")
    assert "ledger" not in snippet.replace("casino.example/ledger", "")  # standalone
    exec(compile(snippet, str(DOC), "exec"), {})
    printed = capsys.readouterr().out
    stated = DOC.read_text().split("It prints:\n\n```\n", 1)[1].split("```", 1)[0]
    assert printed == stated
    # A forged note fails the snippet's own check.
    forged = snippet.replace("casino.example/ledger\\n2\\n", "casino.example/ledger\\n3\\n")
    assert forged != snippet
    with pytest.raises(InvalidSignature):
        exec(compile(forged, str(DOC), "exec"), {})


def test_a_release_0_2_store_takes_c2sp_checkpoints_beside_its_old_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both forms in one store: the old kept checkpoint and a new C2SP one both
    verify the upgraded store, and the consistency proofs cross the forms."""
    for name in ("LEDGER_KEYS", "LEDGER_STORE", "LEDGER_ORIGIN", "LEDGER_CHECKPOINT_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    store = tmp_path / "release"
    shutil.copytree(DATA / "release-0.2-store", store)
    keys = KeyDirectory(store / "keys")
    keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)  # the old private keys are gone
    keys.create("checkpoint-2", Role.CHECKPOINT, PASSPHRASE)
    url = f"sqlite:///{store / 'ledger.db'}"

    def ledger(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["--store", url, "--keys", str(keys.path), *argv])
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return code, verdict(code, out, err)

    node = open_node(url, str(keys.path), passphrase=PASSPHRASE, writable=False)
    try:
        Checkpointer(
            node.app.tables,
            signer=keys.signer(Role.CHECKPOINT, PASSPHRASE),
            signer_check=SignerCheck(keys.keyring()),
            keyring=keys.keyring(),
        ).catch_up()  # nothing new to cover: nothing signed
        forms = {c.legacy for c in node.app.tables.checkpoints()}
    finally:
        node.close()
    assert forms == {True}
    code, output = ledger("checkpoint", "--export", str(tmp_path / "old.txt"))
    assert code == 0, output
    assert Checkpoint.from_note((tmp_path / "old.txt").read_text()).legacy
    node = open_node(url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0)
    try:
        table = Table(name="T-new", dealer="D9")
        table.throw_dice([2, 4, 6])
        node.app.save(table)
        newest = node.checkpointer().catch_up()
        stored = node.app.tables.checkpoints()
    finally:
        node.close()
    assert newest is not None and not newest.legacy and newest.key_name == "checkpoint-2"
    assert {c.legacy for c in stored} == {True, False}
    (tmp_path / "new.txt").write_text(newest.to_note())
    for kept in (store / "kept.txt", tmp_path / "old.txt"):
        code, output = ledger("verify", "--level", "integrity", "--trusted", str(kept))
        assert code == 0, output
    code, output = ledger("verify", "--level", "integrity", "--trusted", str(tmp_path / "new.txt"))
    assert code == 0, output
    assert f"consistent with the kept checkpoint of size {newest.size}" in output
