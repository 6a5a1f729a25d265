"""`ledger serve --tiles DIR`: the tiles read-only at /tlog/, to anyone, cacheable
as C2SP tlog-tiles asks (tiles immutable, the checkpoint not cached)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from ledger.cli.main import main
from ledger.crypto.tiles import decode_bundle
from ledger.export.tiles import write_tiles
from ledger.export.tiles_check import check_tiles
from ledger.http.app import Service, create_app
from ledger.http.tokens import TokenStore
from ledger.node import Node, origin
from ledger.rng.server import RngServer
from tests.conftest import PASSPHRASE
from tests.http_support import all_games
from tests.ports import free_port
from tests.test_checkpoints import record


@pytest.fixture
def served(node: Node, tmp_path: Path) -> tuple[TestClient, Path]:
    tiles = tmp_path / "tiles"
    record(node, 300)
    node.checkpointer().catch_up()
    write_tiles(node.app, node.keyring, tiles, origin=origin())
    service = Service(
        node.app, all_games(), RngServer(tmp_path / "seeds"), TokenStore(node.keys.path)
    )
    return TestClient(create_app(service, tiles=tiles), raise_server_exceptions=False), tiles


def test_tiles_are_served_to_anyone_and_cached_as_the_spec_says(
    served: tuple[TestClient, Path],
) -> None:
    client, tiles = served
    checkpoint = client.get("/tlog/checkpoint")  # no token
    assert checkpoint.status_code == 200
    assert checkpoint.text == (tiles / "checkpoint").read_text()
    assert checkpoint.headers["content-type"] == "text/plain; charset=utf-8"
    assert checkpoint.headers["cache-control"] == "no-cache"
    for path in ("tile/0/000", "tile/0/001.p/44", "tile/1/000.p/1"):
        tile = client.get(f"/tlog/{path}")
        assert tile.status_code == 200, path
        assert tile.content == (tiles / path).read_bytes()
        assert tile.headers["content-type"] == "application/octet-stream"
        assert tile.headers["cache-control"] == "public, max-age=31536000, immutable"
    bundle = client.get("/tlog/tile/entries/001.p/44", headers={"accept-encoding": "gzip"})
    assert bundle.headers["content-encoding"] == "gzip"  # httpx decoded it
    assert len(decode_bundle(bundle.content, 44)) == 44
    raw = client.get("/tlog/tile/entries/000", headers={"accept-encoding": "identity"})
    assert "content-encoding" not in raw.headers
    assert raw.content == (tiles / "tile/entries/000").read_bytes()
    head = client.head("/tlog/tile/0/000")
    assert (head.status_code, head.content, head.headers["content-length"]) == (200, b"", "8192")


@pytest.mark.parametrize(
    "path",
    [
        "/tlog/tile/0/002",  # not written
        "/tlog/tile/0/1",  # not the spec's spelling
        "/tlog/tile/0/x000/000",
        "/tlog/tile/0/../../keys/keyring.json",
        "/tlog/.pending/tile/0/000",
        "/tlog/tile/0",
        "/tlog/",
    ],
)
def test_only_the_specs_paths_are_answered(served: tuple[TestClient, Path], path: str) -> None:
    client, _ = served
    assert client.get(path).status_code == 404


def test_tiles_are_read_only(node: Node, served: tuple[TestClient, Path]) -> None:
    client, tiles = served
    before = (tiles / "checkpoint").read_bytes()
    assert client.put("/tlog/checkpoint", content=b"forged").status_code == 405
    assert client.delete("/tlog/tile/0/000").status_code == 405
    assert (tiles / "checkpoint").read_bytes() == before
    assert check_tiles(tiles, node.keyring).size == 300


def test_the_api_still_needs_a_token(served: tuple[TestClient, Path]) -> None:
    client, _ = served
    assert client.get("/v1/balances").status_code == 401


def test_serve_refuses_a_tiles_path_that_is_not_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert main(["serve", "--tiles", str(missing)]) == 2
    assert f"--tiles {missing} is not a directory" in capsys.readouterr().err


def test_ledger_serve_tiles_serves_the_directory(tmp_path: Path) -> None:
    """The real command: `ledger serve --tiles DIR` hands DIR to its worker."""
    env = {
        **os.environ,
        "LEDGER_PASSPHRASE": PASSPHRASE.decode(),
        "LEDGER_PROGRESS_INTERVAL": "off",
    }
    run = [sys.executable, "-m", "ledger.cli.main"]
    for step in (
        ["simulate", "--rounds", "2", "--players", "2", "--tables", "1"],
        ["tiles", "tiles"],
    ):
        done = subprocess.run([*run, *step], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    port = free_port()
    with open(tmp_path / "serve.log", "w") as log:
        server = subprocess.Popen(
            [*run, "serve", "--port", str(port), "--tiles", "tiles"],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = httpx.get(f"{base}/tlog/checkpoint", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None, (tmp_path / "serve.log").read_text()
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert answer.status_code == 200
        assert answer.text == (tmp_path / "tiles" / "checkpoint").read_text()
        size = int(answer.text.split("\n")[1])
        tile = httpx.get(f"{base}/tlog/tile/0/000.p/{size}", timeout=5)
        assert tile.content == (tmp_path / "tiles" / f"tile/0/000.p/{size}").read_bytes()
        assert httpx.get(f"{base}/v1/games", timeout=5).status_code == 401  # the API still isn't
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
