"""Keys: ids, key files, the keyring, `ledger keys`, signers."""

from __future__ import annotations

import base64
import hashlib
import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.cli.main import main
from ledger.crypto.keys import (
    KEYRING_FILE,
    KEYRING_FORMAT,
    Keyring,
    PublicKeyRecord,
    Role,
    key_id_of,
    read_private_key,
)
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.signing import InMemorySigner, Signer, verify_signature
from ledger.errors import KeyStoreError

PASSPHRASE = "correct horse battery staple"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE)
    for name in ("LEDGER_KEYS", "LEDGER_STORE", "LEDGER_ORIGIN"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def raw_public(private_key: Ed25519PrivateKey) -> bytes:
    return private_key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


def keyring_entries(keys: Path) -> dict[str, dict[str, str | None]]:
    data = json.loads((keys / KEYRING_FILE).read_text())
    assert data["format"] == KEYRING_FORMAT
    return {entry["name"]: entry for entry in data["keys"]}


def files_under(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def assert_one_error_line(err: str) -> None:
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ledger: error: ")


# Key ids.


def test_key_id_is_sha256_of_the_raw_public_key() -> None:
    private_key = Ed25519PrivateKey.generate()
    raw = raw_public(private_key)
    expected = hashlib.sha256(raw).hexdigest()
    assert len(raw) == 32
    assert key_id_of(raw) == expected
    assert InMemorySigner(private_key, Role.OPERATOR).key_id == expected
    assert PublicKeyRecord("k", Role.OPERATOR, raw, datetime.now(UTC)).key_id == expected


# `ledger keys create`.


def test_keys_create_writes_an_encrypted_pkcs8_key_and_a_keyring_entry(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = datetime.now(UTC)
    code, out, err = run(
        capsys, "keys", "create", "pit-boss", "--role", "operator", "--valid-days", "30"
    )
    after = datetime.now(UTC)
    assert (code, err) == (0, "")

    pem_path = workdir / "keys" / "pit-boss.pem"
    pem = pem_path.read_bytes()
    assert pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----\n")
    assert stat.S_IMODE(pem_path.stat().st_mode) == 0o600

    private_key = serialization.load_pem_private_key(pem, PASSPHRASE.encode())
    assert isinstance(private_key, Ed25519PrivateKey)
    with pytest.raises(ValueError):
        serialization.load_pem_private_key(pem, b"not the passphrase")
    with pytest.raises(TypeError):
        serialization.load_pem_private_key(pem, None)

    raw = raw_public(private_key)
    key_id = hashlib.sha256(raw).hexdigest()
    assert key_id in out

    entries = keyring_entries(workdir / "keys")
    assert list(entries) == ["pit-boss"]
    entry = entries["pit-boss"]
    assert entry["key_id"] == key_id
    assert entry["role"] == "operator"
    assert base64.b64decode(str(entry["public_key"])) == raw
    not_before = datetime.fromisoformat(str(entry["not_before"]))
    not_after = datetime.fromisoformat(str(entry["not_after"]))
    assert before <= not_before <= after
    assert not_after - not_before == timedelta(days=30)

    # Only the key file and the keyring: no temporary file left behind.
    assert sorted(p.name for p in (workdir / "keys").iterdir()) == ["keyring.json", "pit-boss.pem"]


def test_keys_create_without_valid_days_never_expires(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "keys", "create", "aud", "--role", "auditor")
    assert (code, err) == (0, "")
    assert keyring_entries(workdir / "keys")["aud"]["not_after"] is None


@pytest.mark.parametrize("role", list(Role))
def test_keys_create_accepts_every_role(
    role: Role, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "keys", "create", f"k-{role.value}", "--role", role.value)
    assert (code, err) == (0, "")
    assert keyring_entries(workdir / "keys")[f"k-{role.value}"]["role"] == role.value
    keyring = KeyDirectory(workdir / "keys").keyring()
    assert [r.role for r in keyring] == [role]


def test_all_six_roles_exist() -> None:
    assert {r.value for r in Role} == {
        "ledger-node",
        "checkpoint",
        "dealer-device",
        "operator",
        "auditor",
        "witness",  # cosigns other logs' checkpoints (docs/witnesses.md)
    }


def test_keys_create_refuses_an_unknown_role(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["keys", "create", "x", "--role", "croupier"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    assert not (workdir / "keys").exists()


def test_unencrypted_without_confirmation_is_refused_and_writes_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "keys", "create", "plain", "--role", "operator", "--unencrypted")
    assert code == 2
    assert out == ""
    assert_one_error_line(err)
    assert "--yes-unencrypted" in err
    assert list(workdir.iterdir()) == []


def test_unencrypted_with_confirmation_writes_a_plain_key(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LEDGER_PASSPHRASE")  # no passphrase needed for a plain key
    code, _, err = run(
        capsys,
        "keys",
        "create",
        "plain",
        "--role",
        "dealer-device",
        "--unencrypted",
        "--yes-unencrypted",
    )
    assert (code, err) == (0, "")
    pem_path = workdir / "keys" / "plain.pem"
    pem = pem_path.read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----\n")
    assert b"ENCRYPTED" not in pem
    assert stat.S_IMODE(pem_path.stat().st_mode) == 0o600
    private_key = serialization.load_pem_private_key(pem, None)
    assert isinstance(private_key, Ed25519PrivateKey)
    entry = keyring_entries(workdir / "keys")["plain"]
    assert entry["key_id"] == hashlib.sha256(raw_public(private_key)).hexdigest()
    # The plain key signs through the key directory without a passphrase.
    signer = KeyDirectory(workdir / "keys").signer(Role.DEALER_DEVICE, None)
    assert signer.key_id == entry["key_id"]


def test_duplicate_name_is_refused_and_nothing_changes(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "keys", "create", "ops", "--role", "operator")[0] == 0
    keys = workdir / "keys"
    before = files_under(keys)

    code, out, err = run(capsys, "keys", "create", "ops", "--role", "auditor")
    assert code == 2
    assert out == ""
    assert_one_error_line(err)
    assert "already exists" in err
    assert files_under(keys) == before
    assert keyring_entries(keys)["ops"]["role"] == "operator"


def test_keys_list_prints_every_key(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = {f"key-{role.value}": role for role in Role}
    for name, role in names.items():
        assert run(capsys, "keys", "create", name, "--role", role.value)[0] == 0

    code, out, err = run(capsys, "keys", "list")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == len(names)
    entries = keyring_entries(workdir / "keys")
    for name, role in names.items():
        key_id = entries[name]["key_id"]
        (line,) = [line for line in lines if line.startswith(f"{key_id} ")]
        assert f" {name} " in line
        assert role.value in line
        assert "no expiry" in line


def test_keys_list_without_a_keyring_is_one_error_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "keys", "list")
    assert (code, out) == (2, "")
    assert_one_error_line(err)
    assert "no keyring" in err


# The key directory's signer.


def test_key_directory_signer_signs_verifiably(tmp_path: Path) -> None:
    directory = KeyDirectory(tmp_path / "keys")
    record = directory.create("ops", Role.OPERATOR, b"pw")
    directory.create("aud", Role.AUDITOR, b"pw")

    signer = directory.signer(Role.OPERATOR, b"pw")
    assert signer.key_id == record.key_id
    assert signer.role is Role.OPERATOR
    message = b"table T1: dice 3 4 5"
    signature = signer.sign(message)
    assert len(signature) == 64
    assert verify_signature(record.public_key, message, signature)
    assert not verify_signature(record.public_key, message + b"!", signature)
    # And with pyca/cryptography, independently.
    Ed25519PublicKey.from_public_bytes(record.public_key).verify(signature, message)


def test_key_directory_signer_refuses_a_wrong_passphrase(tmp_path: Path) -> None:
    directory = KeyDirectory(tmp_path / "keys")
    directory.create("ops", Role.OPERATOR, b"pw")
    with pytest.raises(KeyStoreError, match="wrong passphrase"):
        directory.signer(Role.OPERATOR, b"not-pw")
    with pytest.raises(KeyStoreError, match="passphrase is needed"):
        directory.signer(Role.OPERATOR, None)


def _passphrase_past_the_padding_check(pem: bytes) -> bytes:
    """A wrong passphrase whose decryption ends in valid CBC padding (about one in
    400), so OpenSSL's failure is a parse error, not "incorrect password"."""
    for i in range(50_000):
        guess = b"guess-%d" % i
        try:
            serialization.load_pem_private_key(pem, guess)
        except ValueError as exc:
            if "incorrect password" not in str(exc).lower():
                return guess
    raise AssertionError("no wrong passphrase got past the padding check in 50,000")


def test_a_wrong_passphrase_that_decrypts_to_valid_padding_is_still_wrong(tmp_path: Path) -> None:
    # Seen as a 1-in-400 flake: `keys create` under another passphrase created the key.
    directory = KeyDirectory(tmp_path / "keys")
    directory.create("ops", Role.OPERATOR, b"pw")
    path = directory.private_key_path("ops")
    unlucky = _passphrase_past_the_padding_check(path.read_bytes())
    with pytest.raises(KeyStoreError, match="wrong passphrase"):
        read_private_key(path, unlucky)
    with pytest.raises(KeyStoreError, match="does not open the keys already"):
        directory.create("op2", Role.OPERATOR, unlucky)
    assert [record.name for record in directory.keyring()] == ["ops"]
    assert not directory.private_key_path("op2").exists()
    # A cut file is still corrupt, not a wrong passphrase, and creates nothing.
    pem = path.read_bytes()
    path.write_bytes(pem[: len(pem) // 2])
    with pytest.raises(KeyStoreError, match="malformed key file"):
        read_private_key(path, b"pw")
    with pytest.raises(KeyStoreError, match="no key created"):
        directory.create("op3", Role.OPERATOR, b"pw")


def test_key_directory_signer_refuses_a_key_file_not_matching_its_entry(tmp_path: Path) -> None:
    directory = KeyDirectory(tmp_path / "keys")
    directory.create("ops", Role.OPERATOR, b"pw")
    directory.create("aud", Role.AUDITOR, b"pw")
    # Swap in another key's file under the operator key's name.
    directory.private_key_path("ops").write_bytes(directory.private_key_path("aud").read_bytes())
    with pytest.raises(KeyStoreError, match="does not match its keyring entry"):
        directory.signer(Role.OPERATOR, b"pw")


def test_key_directory_signer_skips_expired_keys(tmp_path: Path) -> None:
    directory = KeyDirectory(tmp_path / "keys")
    directory.create(
        "old", Role.OPERATOR, b"pw", valid_days=1, now=datetime.now(UTC) - timedelta(days=2)
    )
    with pytest.raises(KeyStoreError, match="no valid operator private key"):
        directory.signer(Role.OPERATOR, b"pw")
    fresh = directory.create("new", Role.OPERATOR, b"pw")
    assert directory.signer(Role.OPERATOR, b"pw").key_id == fresh.key_id


# RFC 8032 determinism: libsodium and pyca/cryptography sign identically.


@settings(max_examples=200, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32), message=st.binary(max_size=512))
def test_in_memory_signer_matches_pyca_cryptography(seed: bytes, message: bytes) -> None:
    private_key = Ed25519PrivateKey.from_private_bytes(seed)
    signer = InMemorySigner(private_key, Role.LEDGER_NODE)
    signature = signer.sign(message)
    assert signature == private_key.sign(message)
    assert signer.sign(message) == signature  # deterministic
    assert signer.public_key == raw_public(private_key)
    assert verify_signature(signer.public_key, message, signature)


def test_in_memory_signer_rfc8032_test_vector_1() -> None:
    # RFC 8032 section 7.1, TEST 1 (empty message).
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    expected_public = bytes.fromhex(
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    )
    expected_signature = bytes.fromhex(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    signer = InMemorySigner(Ed25519PrivateKey.from_private_bytes(seed), Role.CHECKPOINT)
    assert signer.public_key == expected_public
    assert signer.sign(b"") == expected_signature


def test_verify_signature_rejects_bad_inputs() -> None:
    private_key = Ed25519PrivateKey.generate()
    public = raw_public(private_key)
    signature = private_key.sign(b"m")
    assert verify_signature(public, b"m", signature)
    assert not verify_signature(public, b"m", signature[:63])
    assert not verify_signature(public, b"m", bytes([signature[0] ^ 1]) + signature[1:])
    assert not verify_signature(raw_public(Ed25519PrivateKey.generate()), b"m", signature)
    assert not verify_signature(public[:31], b"m", signature)


def test_a_short_public_key_never_verifies() -> None:
    # A 31-byte key whose missing 32nd byte is zero: libsodium alone would read
    # the byte after the buffer and accept (1 key in 256 before the fix).
    while True:
        private_key = Ed25519PrivateKey.generate()
        public = raw_public(private_key)
        if public[31] == 0:
            break
    signature = private_key.sign(b"m")
    assert verify_signature(public, b"m", signature)
    assert not verify_signature(public[:31], b"m", signature)


# The keyring file.


def _record(name: str, role: Role, *, days: int | None = None) -> PublicKeyRecord:
    start = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    return PublicKeyRecord(
        name=name,
        role=role,
        public_key=raw_public(Ed25519PrivateKey.generate()),
        not_before=start,
        not_after=start + timedelta(days=days) if days else None,
    )


def test_keyring_json_round_trip() -> None:
    records = [
        _record("node", Role.LEDGER_NODE),
        _record("cp", Role.CHECKPOINT, days=365),
        _record("dealer", Role.DEALER_DEVICE, days=7),
        _record("ops", Role.OPERATOR),
        _record("aud", Role.AUDITOR),
    ]
    keyring = Keyring(records)
    text = keyring.to_json()
    loaded = Keyring.from_json(text)
    assert len(loaded) == len(records)
    for record in records:
        assert loaded.get(record.key_id) == record
    assert loaded.to_json() == text
    data = json.loads(text)
    assert data["format"] == KEYRING_FORMAT
    assert [e["name"] for e in data["keys"]] == sorted(r.name for r in records)


def test_keyring_save_and_load(tmp_path: Path) -> None:
    keyring = Keyring([_record("a", Role.AUDITOR), _record("b", Role.OPERATOR, days=3)])
    path = tmp_path / KEYRING_FILE
    keyring.save(path)
    assert Keyring.load(path).to_json() == keyring.to_json()
    assert [p.name for p in tmp_path.iterdir()] == [KEYRING_FILE]


def test_keyring_entry_with_a_mismatched_key_id_is_refused() -> None:
    data = json.loads(Keyring([_record("ops", Role.OPERATOR)]).to_json())
    data["keys"][0]["key_id"] = key_id_of(raw_public(Ed25519PrivateKey.generate()))
    with pytest.raises(KeyStoreError, match="key id does not match its key"):
        Keyring.from_json(json.dumps(data))


def test_cli_refuses_a_keyring_with_a_mismatched_key_id(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "keys", "create", "ops", "--role", "operator")[0] == 0
    path = workdir / "keys" / KEYRING_FILE
    data = json.loads(path.read_text())
    data["keys"][0]["key_id"] = "0" * 64
    path.write_text(json.dumps(data))
    code, out, err = run(capsys, "keys", "list")
    assert (code, out) == (2, "")
    assert_one_error_line(err)
    assert "key id does not match" in err


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        json.dumps({"format": "something/else", "keys": []}),
        json.dumps({"format": KEYRING_FORMAT, "keys": None}),
        json.dumps({"format": KEYRING_FORMAT, "keys": 5}),
        json.dumps({"format": KEYRING_FORMAT, "keys": [1]}),
        json.dumps({"format": KEYRING_FORMAT, "keys": [{"name": "x"}]}),
        json.dumps(
            {
                "format": KEYRING_FORMAT,
                "keys": [
                    {"name": "x", "role": "operator", "public_key": "AAAA", "not_before": "2024"}
                ],
            }
        ),
    ],
    ids=[
        "not-json",
        "list",
        "wrong-format",
        "keys-null",
        "keys-int",
        "entry-int",
        "entry-missing-fields",
        "short-public-key",
    ],
)
def test_malformed_keyring_is_a_keystore_error(text: str) -> None:
    with pytest.raises(KeyStoreError):
        Keyring.from_json(text)


# The Signer seam.


def test_in_memory_signer_is_a_runtime_signer() -> None:
    signer = InMemorySigner(Ed25519PrivateKey.generate(), Role.AUDITOR)
    assert isinstance(signer, Signer)
    assert signer.role is Role.AUDITOR


def test_signer_protocol_accepts_other_implementations_and_rejects_non_signers() -> None:
    class RemoteSigner:
        key_id = "ab" * 32
        role = Role.CHECKPOINT

        def sign(self, message: bytes) -> bytes:
            return bytes(64)

    class NoSign:
        key_id = "ab" * 32
        role = Role.CHECKPOINT

    assert isinstance(RemoteSigner(), Signer)
    assert not isinstance(NoSign(), Signer)
    assert not isinstance(Ed25519PrivateKey.generate(), Signer)
