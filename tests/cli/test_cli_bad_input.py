"""Bad input to the CLI: one `ledger: error:` line, the right exit code, no
traceback, and nothing written (files and store rows are left exactly as they were).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from base64 import b64decode
from pathlib import Path

import pytest

from ledger.cli.main import main
from ledger.crypto.note import key_hash
from tests.reproducible import reproducible_session

RIGHT = "right"
TABLES = ("stored_events", "ledger_merkle_leaves", "ledger_merkle_nodes", "ledger_checkpoints")
UNREACHABLE_PG = "postgresql://postgres@127.0.0.1:1/test"

Snapshot = dict[str, tuple[str, int, int, str]]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEDGER_PASSPHRASE", RIGHT)
    for name in ("LEDGER_KEYS", "LEDGER_STORE", "LEDGER_ORIGIN"):
        monkeypatch.delenv(name, raising=False)
    # Never a terminal: a missing passphrase must be an error, not a prompt.
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, ""), err
    return out


def snapshot(root: Path) -> Snapshot:
    """Every file and directory under `root`: kind, size, mtime and content digest."""
    found: Snapshot = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if path.is_dir():
            found[str(path.relative_to(root))] = ("dir", 0, info.st_mtime_ns, "")
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(root))] = ("file", info.st_size, info.st_mtime_ns, digest)
    return found


def row_counts(root: Path) -> dict[str, dict[str, int]]:
    """Rows per ledger table in every SQLite store under `root`.

    Counted in a copy outside `root`: even a read-only connection to a WAL
    database creates `-wal`/`-shm` files beside it.
    """
    counts: dict[str, dict[str, int]] = {}
    for db in sorted(root.rglob("*.db")):
        with tempfile.TemporaryDirectory() as scratch:
            for part in db.parent.glob(f"{db.name}*"):  # the db and any -wal/-shm
                shutil.copy2(part, Path(scratch) / part.name)
            connection = sqlite3.connect(Path(scratch) / db.name)
            try:
                counts[str(db.relative_to(root))] = {
                    table: connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                    for table in TABLES
                }
            finally:
                connection.close()
    return counts


def assert_one_error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ledger: error: "), err
    return lines[0]


def refused(
    capsys: pytest.CaptureFixture[str], root: Path, *argv: str, code: int = 2
) -> tuple[str, str]:
    """Run the CLI on bad input; check the error contract and that nothing changed."""
    files_before, rows_before = snapshot(root), row_counts(root)
    got, out, err = run(capsys, *argv)
    line = assert_one_error_line(err)
    assert got == code, err
    assert snapshot(root) == files_before
    assert row_counts(root) == rows_before
    return line, out


def make_store(capsys: pytest.CaptureFixture[str], *global_args: str, rounds: int = 3) -> int:
    """`ledger simulate` (a small session, the same every run) into a store; return
    the number of events it recorded."""
    with reproducible_session(rounds) as seeds:
        out = ok(
            capsys, *global_args, "simulate", "--rounds", str(rounds), "--players", "4", *seeds
        )
    match = re.search(r"^recorded (\d+) sealed events", out, re.MULTILINE)
    assert match, out
    return int(match.group(1))


def keyring_entries(keys: Path) -> dict[str, dict[str, str]]:
    return {e["name"]: e for e in json.loads((keys / "keyring.json").read_text())["keys"]}


# Keys and passphrases.


def test_wrong_passphrase(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_store(capsys)
    monkeypatch.setenv("LEDGER_PASSPHRASE", "wrong")
    line, out = refused(capsys, workdir, "simulate", "--rounds", "2")
    assert out == ""
    assert "ledger-node.pem" in line
    assert "wrong passphrase" in line


def test_missing_ledger_node_key_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_store(capsys)
    (workdir / "keys" / "ledger-node.pem").unlink()
    line, out = refused(capsys, workdir, "simulate", "--rounds", "2")
    assert out == ""
    assert "no valid ledger-node private key" in line


def test_missing_checkpoint_key_file_fails_before_recording(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(capsys)
    (workdir / "keys" / "checkpoint.pem").unlink()
    line, _ = refused(capsys, workdir, "simulate", "--rounds", "2")
    assert "no valid checkpoint private key" in line


@pytest.mark.parametrize("name", ["ledger-node", "checkpoint"])
@pytest.mark.parametrize(
    "garbage",
    [b"this is not a key\n", b"", b"\x00" * 64, b"-----BEGIN PRIVATE KEY-----\nAAAA\n"],
    ids=["text", "empty", "binary", "bad-pem"],
)
def test_malformed_key_file(
    name: str, garbage: bytes, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(capsys)
    (workdir / "keys" / f"{name}.pem").write_bytes(garbage)
    line, _ = refused(capsys, workdir, "simulate", "--rounds", "2")
    assert f"{name}.pem" in line
    assert "malformed key file" in line


def test_key_file_that_is_a_directory(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_store(capsys)
    pem = workdir / "keys" / "ledger-node.pem"
    pem.unlink()
    pem.mkdir()
    line, _ = refused(capsys, workdir, "simulate", "--rounds", "2")
    assert "ledger-node.pem" in line


_FORMAT = "casino-ledger/keyring/v1"


@pytest.mark.parametrize(
    "content",
    [
        b"{ this is not json",
        b"",
        b"\xff\xfe\x00garbage",
        b"[]",
        json.dumps({"format": "other/v9", "keys": []}).encode(),
        json.dumps({"format": _FORMAT, "keys": None}).encode(),
        json.dumps({"format": _FORMAT, "keys": 5}).encode(),
        json.dumps({"format": _FORMAT, "keys": [1]}).encode(),
        json.dumps({"format": _FORMAT, "keys": [{"name": "x"}]}).encode(),
    ],
    ids=[
        "not-json",
        "empty",
        "not-utf8",
        "list",
        "wrong-format",
        "keys-null",
        "keys-int",
        "entry-int",
        "entry-missing-fields",
    ],
)
@pytest.mark.parametrize("command", [["simulate", "--rounds", "2"], ["verify"]])
def test_malformed_keyring(
    content: bytes, command: list[str], workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(capsys)
    (workdir / "keys" / "keyring.json").write_bytes(content)
    line, out = refused(capsys, workdir, *command)
    assert out == ""
    assert "keyring" in line


def test_keyring_entry_with_a_tampered_public_key(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(capsys)
    path = workdir / "keys" / "keyring.json"
    data = json.loads(path.read_text())
    data["keys"][0]["public_key"] = "A" * 43 + "="  # 32 zero bytes: not its key id
    path.write_text(json.dumps(data))
    line, _ = refused(capsys, workdir, "verify")
    assert "key id does not match its key" in line


def test_keyring_that_is_a_directory(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_store(capsys)
    keyring = workdir / "keys" / "keyring.json"
    keyring.unlink()
    keyring.mkdir()
    line, _ = refused(capsys, workdir, "simulate", "--rounds", "2")
    assert "keyring" in line


def test_no_passphrase_on_a_fresh_directory(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LEDGER_PASSPHRASE")
    assert not sys.stdin.isatty()
    line, out = refused(capsys, workdir, "simulate", "--rounds", "2")
    assert out == ""
    assert "LEDGER_PASSPHRASE" in line
    assert list(workdir.iterdir()) == []


def test_no_passphrase_with_existing_keys(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_store(capsys)
    monkeypatch.delenv("LEDGER_PASSPHRASE")
    line, _ = refused(capsys, workdir, "simulate", "--rounds", "2")
    assert "LEDGER_PASSPHRASE" in line


# Stores.


def test_unreachable_postgres(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_store(capsys)
    line, out = refused(capsys, workdir, "--store", UNREACHABLE_PG, "verify")
    assert out == ""
    assert "cannot open store" in line
    assert "127.0.0.1:1" in line


@pytest.mark.parametrize("command", [["verify"], ["simulate", "--rounds", "2"]])
def test_sqlite_store_in_a_missing_directory(
    command: list[str], workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(capsys)
    line, _ = refused(capsys, workdir, "--store", "sqlite:///no/such/dir/ledger.db", *command)
    assert "does not exist" in line


def test_sqlite_store_in_a_missing_directory_on_a_fresh_directory(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No keys yet: simulate must not create them for a store it cannot open.
    line, out = refused(
        capsys, workdir, "--store", "sqlite:///no/such/dir/ledger.db", "simulate", "--rounds", "2"
    )
    assert out == ""
    assert "does not exist" in line
    assert list(workdir.iterdir()) == []


def test_verify_never_creates_a_store(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_store(capsys)  # keys and ./ledger.db exist; the auditor mistypes the file name
    line, out = refused(capsys, workdir, "--store", "sqlite:///typo.db", "verify")
    assert out == ""
    assert "no store at typo.db" in line
    assert not (workdir / "typo.db").exists()


@pytest.mark.postgres
def test_verify_on_a_postgres_schema_without_a_ledger(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import PG_URL, drop_pg_schema, new_pg_schema, require_postgres

    require_postgres()
    make_store(capsys)
    schema = new_pg_schema()
    try:
        line, _ = refused(capsys, workdir, "--store", f"{PG_URL}?schema={schema}", "verify")
        assert "no ledger in store" in line
    finally:
        drop_pg_schema(schema)


@pytest.mark.parametrize("command", [["verify"], ["simulate", "--rounds", "2"]])
def test_bad_store_url_scheme(
    command: list[str], workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(capsys)
    line, out = refused(capsys, workdir, "--store", "mysql://x", *command)
    assert out == ""
    assert "unknown store URL 'mysql://x'" in line


def test_bad_store_url_scheme_on_a_fresh_directory(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line, out = refused(capsys, workdir, "--store", "mysql://x", "simulate", "--rounds", "2")
    assert out == ""
    assert "unknown store URL" in line
    assert list(workdir.iterdir()) == []


def test_unknown_verify_level(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_store(capsys)
    line, out = refused(capsys, workdir, "verify", "--level", "bogus")
    assert out == ""
    assert "unknown verify level 'bogus'" in line
    assert "integrity" in line
    assert "signatures" in line


# A store sealed by keys the auditor's keyring does not hold.


def test_store_sealed_by_keys_missing_from_the_keyring(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(capsys)
    make_store(capsys, "--keys", "other", "--store", "sqlite:///other.db", rounds=2)
    entry = keyring_entries(workdir / "keys")["checkpoint"]
    # C2SP checkpoints name their key by name and key hash (both keyrings have a
    # key named "checkpoint": the hash tells them apart).
    hashed = key_hash("checkpoint", b64decode(entry["public_key"]))
    store_checkpoint_key = f"checkpoint+{hashed.hex()}"

    line, out = refused(capsys, workdir, "--keys", "other", "verify", code=1)
    assert out.startswith("FAILED: ")  # the findings report
    # Checkpoints are verified before events, so the first failure is the
    # store's checkpoint, signed by a key the `other` keyring does not hold.
    assert re.match(r"ledger: error: checkpoint of size \d+: ", line), line
    assert f"signed by unknown key {store_checkpoint_key} (the keyring's key" in line

    # At the integrity level too.
    line, _ = refused(capsys, workdir, "--keys", "other", "verify", "--level", "integrity", code=1)
    assert f"unknown key {store_checkpoint_key}" in line


@pytest.mark.parametrize("level", ["signatures", "integrity"])
def test_events_sealed_by_a_ledger_node_key_missing_from_the_keyring(
    level: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_store(capsys)
    make_store(capsys, "--keys", "other", "--store", "sqlite:///other.db", rounds=2)
    # Trust the store's checkpoint key, but not the key that sealed its events.
    mine = keyring_entries(workdir / "keys")
    other_path = workdir / "other" / "keyring.json"
    other = json.loads(other_path.read_text())
    other["keys"].append(mine["checkpoint"])
    other_path.write_text(json.dumps(other))
    node_key = mine["ledger-node"]["key_id"]

    line, out = refused(capsys, workdir, "--keys", "other", "verify", "--level", level, code=1)
    assert out.startswith("FAILED: ")  # the findings report
    assert re.match(
        r"ledger: error: stream [0-9a-f-]{36} version 1: "
        rf"signed by key {node_key[:16]}, which is not in the keyring \(log position 0\) "
        r"\[keyring [0-9a-f]{64}\]$",  # the fingerprint of the keyring the verdict rests on
        line,
    ), line


# The happy path.


def test_simulate_then_verify(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recorded = make_store(capsys, rounds=6)
    assert recorded >= 50
    assert row_counts(workdir)["ledger.db"]["stored_events"] == recorded
    assert row_counts(workdir)["ledger.db"]["ledger_merkle_leaves"] == recorded

    before = snapshot(workdir)
    out = ok(capsys, "verify")
    first = out.splitlines()[0]
    assert first.startswith("OK: ")
    assert f"OK: {recorded} events in " in first
    assert "at level settlement" in first  # the default: everything

    out = ok(capsys, "verify", "--level", "integrity")
    first = out.splitlines()[0]
    assert first.startswith(f"OK: {recorded} events in ")
    assert "at level integrity" in first
    assert snapshot(workdir) == before  # verifying writes nothing


# The real process: stderr holds exactly the one line (no log noise, no warnings).


@pytest.mark.parametrize(
    ("setup", "argv", "code", "needle"),
    [
        ("wrong-passphrase", ["simulate", "--rounds", "2"], 2, "wrong passphrase"),
        ("bad-keyring", ["verify"], 2, "keyring"),
        ("none", ["--store", UNREACHABLE_PG, "verify"], 2, "cannot open store"),
        ("none", ["verify", "--level", "bogus"], 2, "unknown verify level"),
    ],
)
def test_error_contract_in_a_real_process(
    setup: str,
    argv: list[str],
    code: int,
    needle: str,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_store(capsys, rounds=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["LEDGER_PASSPHRASE"] = "wrong" if setup == "wrong-passphrase" else RIGHT
    if setup == "bad-keyring":
        (workdir / "keys" / "keyring.json").write_text('{"format": "casino-ledger/keyring/v1"')
    before, rows = snapshot(workdir), row_counts(workdir)
    result = subprocess.run(
        [sys.executable, "-m", "ledger.cli.main", *argv],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == code, result.stderr
    line = assert_one_error_line(result.stderr)
    assert needle in line
    assert result.stdout == ""
    assert snapshot(workdir) == before
    assert row_counts(workdir) == rows


def test_unreachable_postgres_on_a_fresh_directory(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No keys yet: simulate must not create them for a store it cannot reach.
    line, out = refused(capsys, workdir, "--store", UNREACHABLE_PG, "simulate", "--rounds", "2")
    assert out == ""
    assert "cannot open store" in line
    assert list(workdir.iterdir()) == []
