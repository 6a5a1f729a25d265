"""`ledger serve` anchors from a process of its own (issue 38, item 4: the
checkpointing takes the second core, not a third of the serving process's
GIL), on both stores: it keeps the log anchored within the window, anchors
what is left when the server stops, and ends with the server however it
ends, kill -9 included. With anchoring off it is not started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory
from ledger.http.side_process import process_name
from ledger.node import open_node
from ledger.store.checkpoint_lock import DEFAULT_DIRECTORY
from tests import local_http
from tests.conftest import PASSPHRASE
from tests.http_api.test_http_serve import call, token
from tests.ports import free_port

ANCHOR_MODULE = "ledger.http.anchor_process"


def started(cwd: Path, store: str, log: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    output = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", "--store", store, "serve", "--port", str(port)],
        cwd=cwd,
        env={**os.environ, "LEDGER_PASSPHRASE": PASSPHRASE.decode()},
        stdout=output,
        stderr=output,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        if local_http.serving(base):
            return process, base
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)


@contextmanager
def serving(
    cwd: Path, store: str, log: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`ledger serve` running, stopped with Ctrl-C (SIGINT) at the end."""
    server, base = started(cwd, store, log)
    try:
        yield server, base
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)


def side_children(parent: int, module: str) -> list[int]:
    """The side processes of `module` whose parent is `parent`: forked from it
    (named `ledger-<name>`, `ledger.http.side_process`) or started as
    `python -m module` (when the server ran threads)."""
    name = process_name(module).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            comm = (entry / "comm").read_bytes().strip()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if ppid == parent and (comm == name or module.encode() in command):
            found.append(int(entry.name))
    return found


def anchor_children(parent: int) -> list[int]:
    """The anchor processes whose parent is `parent`."""
    return side_children(parent, ANCHOR_MODULE)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def anchored(cwd: Path, store: str) -> tuple[int, int]:
    """(events in the log, size of the newest checkpoint)."""
    node = open_node(store, str(cwd / "keys"), writable=False)
    try:
        events, _ = node.app.tables.event_count()
        newest = node.app.tables.checkpoints()
        return events, newest[-1].size if newest else 0
    finally:
        node.close()


def write_some(base: str, cashier: str, count: int) -> None:
    for _ in range(count):
        key = str(uuid.uuid4())
        made = call(base, "POST", "/v1/accounts", cashier, {"owner": key, "currency": "EUR"}, key)
        assert made.status_code == 201, made.text


def test_serve_anchors_from_a_process_of_its_own(tmp_path: Path, store_url: str) -> None:
    cashier = token(tmp_path, "cashier")
    with serving(tmp_path, store_url) as (server, base):
        (anchor,) = anchor_children(server.pid)
        write_some(base, cashier, 5)
        deadline = time.monotonic() + 10
        while (found := anchored(tmp_path, store_url))[1] < found[0]:
            assert time.monotonic() < deadline, f"not anchored within 10 s: {found}"
            time.sleep(0.2)
        write_some(base, cashier, 3)
    assert not alive(anchor), "the anchor process outlived the server"
    events, size = anchored(tmp_path, store_url)
    assert size == events  # what was left at the stop was anchored


def test_a_server_stopped_as_soon_as_it_wrote_still_anchors_what_it_wrote(
    tmp_path: Path, store_url: str
) -> None:
    """Stopped within a second of starting, while the anchor process may still be
    starting: the stop waits for it to be ready, and it anchors what is left."""
    cashier = token(tmp_path, "cashier")
    with serving(tmp_path, store_url) as (server, base):
        write_some(base, cashier, 1)
    assert server.returncode == 0
    events, size = anchored(tmp_path, store_url)
    assert events > 0 and size == events


def test_the_anchor_process_ends_with_a_killed_server(tmp_path: Path, store_url: str) -> None:
    token(tmp_path, "cashier")
    server, _ = started(tmp_path, store_url)
    (anchor,) = anchor_children(server.pid)
    server.kill()
    server.wait()
    deadline = time.monotonic() + 10
    while alive(anchor):
        assert time.monotonic() < deadline, "the anchor process outlived a killed server"
        time.sleep(0.1)


def test_with_anchoring_off_there_is_no_anchor_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_ANCHOR_SECONDS", "0")
    monkeypatch.setenv("LEDGER_ANCHOR_EVENTS", "0")
    token(tmp_path, "cashier")
    with serving(tmp_path, f"sqlite:///{tmp_path}/ledger.db") as (server, _):
        assert anchor_children(server.pid) == []


def test_an_anchor_that_refuses_to_sign_is_said_and_serve_exits_with_it(tmp_path: Path) -> None:
    """The lock holds a checkpoint the store contradicts (the store forked from
    what was published): the anchor process says so and stops; the server goes
    on serving, and when it stops it says the log was not anchored, exit 1."""
    store = f"sqlite:///{tmp_path}/ledger.db"
    cashier = token(tmp_path, "cashier")
    with serving(tmp_path, store) as (server, base):
        write_some(base, cashier, 2)
    (cell,) = [p for p in (tmp_path / "keys" / DEFAULT_DIRECTORY).iterdir() if "." not in p.name]
    honest = Checkpoint.from_note(cell.read_text())
    signer = KeyDirectory(tmp_path / "keys").signer(Role.CHECKPOINT, PASSPHRASE)
    forged = Checkpoint.sign(
        origin=honest.origin, size=honest.size, root=bytes(32), signer=signer, now=honest.issued_at
    )
    cell.write_text(forged.to_note())
    with serving(tmp_path, store, tmp_path / "serve.log") as (server, base):
        write_some(base, cashier, 1)
        deadline = time.monotonic() + 20
        # (It may have stopped before the server took requests: its first look
        # at the lock refuses, while the writer process is starting.)
        while any(alive(anchor) for anchor in anchor_children(server.pid)):
            assert time.monotonic() < deadline, "the anchor process signed on, or hung"
            time.sleep(0.1)
        write_some(base, cashier, 1)  # still serving
    said = (tmp_path / "serve.log").read_text()
    assert server.returncode == 1, said
    assert "anchoring stopped: refusing to sign a checkpoint" in said
    assert "the log was not anchored after the anchor process stopped (exit 1)" in said
    assert "Traceback" not in said
    assert anchored(tmp_path, store)[1] == honest.size  # nothing signed past it
