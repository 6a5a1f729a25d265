"""The mistakes of issue 19 that need a real process (the in-process ones are
rows of `test_cli_new_user.CASES`): `serve` given a file for its RNG
directory, a port in use or a host that does not resolve (one line, exit 2,
before it says it is serving); `serve --workers 2` whose parent is killed
(its workers stop with it); `checkpoint --follow` interrupted (exit 130)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import local_http
from tests.conftest import PASSPHRASE
from tests.ports import free_port

ENV = {**os.environ, "LEDGER_PASSPHRASE": PASSPHRASE.decode()}


def ledger(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", *args],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(cwd: Path, *args: str) -> tuple[int, str, str]:
    process = ledger(cwd, *args)
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"`ledger {' '.join(args)}` still running after 120 s:\n{out}\n{err}")
    return process.returncode, out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ledger: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    code, _, err = finished(root, "simulate", "--rounds", "1", "--players", "2", "--tables", "1")
    assert code == 0, err
    return root


@pytest.fixture
def workdir(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "work"
    shutil.copytree(template, root)
    return root


def test_serve_given_a_file_for_its_rng_directory(workdir: Path) -> None:
    (workdir / "seeds.txt").write_text("not a directory\n")
    code, out, err = finished(workdir, "serve", "--rng-dir", "seeds.txt", "--port", "1")
    line = one_error_line(err)
    assert code == 2 and "seeds.txt" in line and "not a directory" in line
    assert "serving" not in out + err


def test_serve_on_a_port_in_use(workdir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = finished(workdir, "serve", "--port", str(port))
    line = one_error_line(err)
    assert code == 2 and f"127.0.0.1:{port}" in line and "in use" in line, line
    assert "serving" not in out


def test_serve_on_a_host_that_does_not_resolve(workdir: Path) -> None:
    code, _, err = finished(workdir, "serve", "--host", "no-such-host.invalid", "--port", "8000")
    line = one_error_line(err)
    assert code == 2 and "no-such-host.invalid" in line, line


def _children(pid: int) -> set[int]:
    """Every live descendant of `pid`, from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def server(workdir: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = free_port()
    process = ledger(workdir, "serve", "--workers", "2", "--port", str(port))
    try:
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_serve_workers_stop_when_their_parent_is_killed(
    server: tuple[subprocess.Popen[str], int],
) -> None:
    process, port = server
    deadline = time.monotonic() + 90
    while True:
        if local_http.serving(f"http://127.0.0.1:{port}"):
            break
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the server never answered"
        time.sleep(0.3)
    workers = _children(process.pid)
    assert workers, "no worker processes"
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers):
        assert time.monotonic() < deadline, f"workers still alive: {sorted(workers)}"
        time.sleep(0.2)
    with pytest.raises(httpx.TransportError):
        local_http.get(f"http://127.0.0.1:{port}/openapi.json", timeout=2)


def test_checkpoint_follow_interrupted_exits_130(workdir: Path) -> None:
    process = ledger(workdir, "checkpoint", "--follow")
    try:
        assert process.stderr is not None
        said = process.stderr.readline()  # once it follows (not while it imports)
        assert "following the log" in said, said
        for _ in range(3):  # Ctrl-C during a batch or between two ends the loop alike
            process.send_signal(signal.SIGINT)
            time.sleep(0.05)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in err


def test_keys_gone_during_a_session_are_named_with_what_the_session_left(
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The keys directory deleted while `simulate` plays: one line that says
    so, how many events the session recorded (kept) and how to end the rounds
    it left open; not advice to create new keys."""
    import ledger.simulation as simulation
    from ledger.cli.main import main

    real = simulation.run_session

    def keys_deleted_meanwhile(*args: object, **kwargs: object) -> object:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        shutil.rmtree(workdir / "keys")
        return result

    monkeypatch.setattr(simulation, "run_session", keys_deleted_meanwhile)
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    monkeypatch.delenv("LEDGER_KEYS", raising=False)
    monkeypatch.delenv("LEDGER_STORE", raising=False)
    capsys.readouterr()
    code = main(["simulate", "--rounds", "2", "--players", "2", "--tables", "1"])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2
    for needle in ("lost its keyring during the session", "recorded", "events", "rounds --open"):
        assert needle in line, line
    assert "ledger keys create" not in line


def test_store_and_keys_may_follow_the_command(
    workdir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ledger.cli.main import main

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("LEDGER_STORE", raising=False)
    monkeypatch.delenv("LEDGER_KEYS", raising=False)
    store, keys = f"sqlite:///{workdir}/ledger.db", str(workdir / "keys")
    capsys.readouterr()
    assert main(["verify", "--store", store, "--keys", keys]) == 0
    after = capsys.readouterr().out.splitlines()[0]
    assert main(["--store", store, "--keys", keys, "verify"]) == 0
    before = capsys.readouterr().out.splitlines()[0]
    assert after.startswith("OK: ") and after.split(" in ")[0] == before.split(" in ")[0]
    assert list(elsewhere.iterdir()) == []  # no store or keys made where it ran
