"""`ledger mirror` as a regulator runs it: against a real `ledger serve`, killed
(SIGKILL) while it follows a node that keeps writing, resumed with no gap and
no duplicate; its copy verified, exported and served (and mirrored again from
there), on a SQLite and a PostgreSQL mirror store; bad input in one line."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.crypto.keys import Keyring
from ledger.store.application import LedgerApplication
from tests import local_http
from tests.attacker import Attacker
from tests.cli.test_cli_pipes import first_stream
from tests.conftest import PASSPHRASE, PG_URL, drop_pg_schema, new_pg_schema, require_postgres
from tests.http_api.test_http_serve import ledger, serving, token


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def mirror_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'mirror.db'}"
        return
    require_postgres()
    schema = new_pg_schema()
    try:
        yield f"{PG_URL}?schema={schema}"
    finally:
        drop_pg_schema(schema)


def rows_of(url: str, keyring: Path) -> list[tuple[object, ...]]:
    """(stream, version, topic, envelope) of every event, in log order."""
    app = LedgerApplication(url, keyring=Keyring.load(keyring), create=False)
    try:
        rows, after = [], 0
        while batch := app.tables.rows_after(after, 1000):
            rows += [(str(r[1]).replace("-", ""), r[2], r[3], bytes(r[4])) for r in batch]
            after = batch[-1][0]
        return rows
    finally:
        app.close()


def mirror_args(store: str, base: str) -> list[str]:
    return ["--store", store, "--keys", "mkeys", "mirror", "--from", base, "--token-file", "tok"]


def start_mirror(cwd: Path, store: str, base: str, *more: str) -> subprocess.Popen[str]:
    env = {**os.environ, "LEDGER_PASSPHRASE": PASSPHRASE.decode()}
    return subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", *mirror_args(store, base), *more],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_killed_while_following_a_busy_node_it_resumes_with_no_gap_or_duplicate(
    tmp_path: Path, mirror_store: str
) -> None:
    assert ledger(tmp_path, "simulate", "--rounds", "3", "--tables", "1", seed=3).returncode == 0
    with serving(tmp_path) as (base, _):
        (tmp_path / "tok").write_text(token(tmp_path, "auditor"))
        first = ledger(tmp_path, *mirror_args(mirror_store, base), "--keyring", "keys/keyring.json")
        assert first.returncode == 0, first.stderr
        assert first.stdout.startswith("mirror: +")
        env = {**os.environ, "LEDGER_PASSPHRASE": PASSPHRASE.decode()}
        writer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ledger.cli.main",
                "simulate",
                "--rounds",
                "2000",  # more than it has time for: it is stopped after the kills
                "--tables",
                "1",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        keyring = tmp_path / "keys/keyring.json"
        held = [len(rows_of(mirror_store, keyring))]
        pause = random.Random(37)  # how long after it copies again each kill lands
        try:
            for _ in range(3):  # each time: once it is copying again, kill it mid-flight
                follower = start_mirror(
                    tmp_path, mirror_store, base, "--follow", "--batch", "7", "--poll", "0.1"
                )
                deadline = time.monotonic() + 60
                while len(rows_of(mirror_store, keyring)) <= held[-1]:
                    assert time.monotonic() < deadline and writer.poll() is None
                    time.sleep(0.05)
                time.sleep(pause.uniform(0.0, 0.5))
                follower.send_signal(signal.SIGKILL)
                follower.wait(timeout=30)
                assert follower.returncode == -signal.SIGKILL
                held.append(len(rows_of(mirror_store, keyring)))
        finally:
            writer.send_signal(signal.SIGINT)  # the node stops writing (mid-round is fine)
            writer.wait(timeout=120)
        assert held == sorted(held) and len(set(held)) == 4  # it copied between the kills
        assert ledger(tmp_path, "checkpoint").returncode == 0  # the source covers every event
        follower = start_mirror(tmp_path, mirror_store, base, "--follow", "--poll", "0.1")
        deadline = time.monotonic() + 120
        source_rows = rows_of(f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path / "keys/keyring.json")
        while len(rows_of(mirror_store, tmp_path / "keys/keyring.json")) < len(source_rows):
            assert time.monotonic() < deadline and follower.poll() is None
            time.sleep(0.2)
        follower.send_signal(signal.SIGINT)
        _, progress = follower.communicate(timeout=30)
        assert follower.returncode == 130, progress
        assert "mirror: +" in progress  # its progress lines
    mirrored = rows_of(mirror_store, tmp_path / "keys/keyring.json")
    assert mirrored == source_rows  # every event once, in order, byte for byte
    checked = ledger(tmp_path, "--store", mirror_store, "--keys", "mkeys", "verify")
    assert checked.returncode == 0 and checked.stdout.startswith("OK:"), checked.stderr


def test_the_mirror_is_verified_exported_served_and_mirrored_again(
    tmp_path: Path, mirror_store: str
) -> None:
    assert ledger(tmp_path, "simulate", "--rounds", "4", "--tables", "2", seed=4).returncode == 0
    with serving(tmp_path) as (base, _):
        (tmp_path / "tok").write_text(token(tmp_path, "auditor"))
        done = ledger(tmp_path, *mirror_args(mirror_store, base), "--keyring", "keys/keyring.json")
        assert done.returncode == 0, done.stderr
    source = ledger(tmp_path, "verify", "--level", "signatures")
    copy = ledger(tmp_path, "--store", mirror_store, "--keys", "mkeys", "verify")
    assert copy.returncode == 0 and copy.stdout.startswith("OK:"), copy.stdout + copy.stderr
    exported = ledger(tmp_path, "--store", mirror_store, "--keys", "mkeys", "export", "bundle")
    assert exported.returncode == 0, exported.stderr
    bundle = ledger(tmp_path, "verify", "--bundle", "bundle", "--keyring", "keys/keyring.json")
    assert bundle.returncode == 0 and bundle.stdout.startswith("OK (bundle"), bundle.stderr
    # The same log, so the same roots: the export's events are the source's.
    events = (tmp_path / "bundle" / "events.jsonl").read_text().splitlines()
    assert len(events) == len(
        rows_of(f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path / "keys/keyring.json")
    )
    assert source.returncode == 0
    # Served read-only (no signing key: the source's private keys stay at the source),
    # and mirrored again from there: a copy of the copy is the source's log.
    made = ledger(tmp_path, "--keys", "mkeys", "tokens", "create", "--role", "auditor")
    (tmp_path / "tok").write_text(made.stdout.strip())
    cashier = ledger(tmp_path, "--keys", "mkeys", "tokens", "create", "--role", "cashier")
    third = f"sqlite:///{tmp_path / 'third.db'}"
    with serving(tmp_path, "--store", mirror_store, "--keys", "mkeys", serve=("--read-only",)) as (
        copy_base,
        _,
    ):
        refused = local_http.post(
            f"{copy_base}/v1/accounts",
            json={"owner": "a", "currency": "EUR"},
            headers={
                "Authorization": f"Bearer {cashier.stdout.strip()}",
                "Idempotency-Key": "a1",
            },
            timeout=30,
        )
        assert refused.status_code == 422 and "read-only" in refused.text
        again = ledger(
            tmp_path,
            "--store",
            third,
            "--keys",
            "m2keys",
            "mirror",
            "--from",
            copy_base,
            "--token-file",
            "tok",
            "--keyring",
            "keys/keyring.json",
        )
        assert again.returncode == 0, again.stderr
    keyring = tmp_path / "keys/keyring.json"
    original = rows_of(f"sqlite:///{tmp_path / 'ledger.db'}", keyring)
    assert rows_of(third, keyring) == rows_of(mirror_store, keyring) == original


def test_bad_input_is_one_line_and_an_exit_code(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'mirror.db'}"
    (tmp_path / "tok").write_text("t")
    cases = [
        (["mirror", "--from", "http://127.0.0.1:9"], "auditor token"),
        (["mirror", "--from", "http://127.0.0.1:9", "--token-file", "nope"], "no such file"),
        (["mirror", "--from", "http://127.0.0.1:9", "--token-file", "tok"], "no keyring"),
        (["mirror", "--from", "ftp://x", "--token-file", "tok"], "not an http(s) URL"),
        (
            ["mirror", "--from", "http://127.0.0.1:9", "--token-file", "tok", "--level", "x"],
            "unknown verify level",
        ),
    ]
    for args, says in cases:
        done = ledger(tmp_path, "--store", store, "--keys", "mkeys", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and says in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert ledger(tmp_path, "keys", "create", "n1", "--role", "ledger-node").returncode == 0
    unreachable = ledger(
        tmp_path,
        "--store",
        store,
        "--keys",
        "mkeys",
        "mirror",
        "--from",
        "http://127.0.0.1:9",
        "--token-file",
        "tok",
        "--keyring",
        "keys/keyring.json",
    )
    assert unreachable.returncode == 2 and "cannot reach the source" in unreachable.stderr
    assert unreachable.stderr.count("\n") == 1


def test_a_source_that_rewrote_its_history_is_refused_with_exit_code_1(
    tmp_path: Path, mirror_store: str
) -> None:
    assert ledger(tmp_path, "simulate", "--rounds", "2", "--tables", "1", seed=2).returncode == 0
    with serving(tmp_path) as (base, _):
        (tmp_path / "tok").write_text(token(tmp_path, "auditor"))
        args = mirror_args(mirror_store, base)
        assert ledger(tmp_path, *args, "--keyring", "keys/keyring.json").returncode == 0
        keyring = tmp_path / "keys/keyring.json"
        before = rows_of(mirror_store, keyring)
        attacker = Attacker(f"sqlite:///{tmp_path / 'ledger.db'}")
        try:
            stream, version = first_stream(attacker)
            state = attacker.row(stream, version)[4]
            at = state.rfind(b"1")  # a digit in the payload: still JSON, no longer what was signed
            attacker.set_state(stream, version, state[:at] + b"2" + state[at + 1 :])
        finally:
            attacker.close()
        again = ledger(tmp_path, *args)
    assert again.returncode == 1, again.stderr
    assert again.stderr.count("\n") == 1 and "history was rewritten" in again.stderr
    assert "nothing written past log position" in again.stderr
    assert rows_of(mirror_store, keyring) == before
    assert "rewritten" in (tmp_path / "mkeys" / "mirror" / "refused.jsonl").read_text()
