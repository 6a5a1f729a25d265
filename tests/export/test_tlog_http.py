"""`ledger serve --tiles DIR`: the tiles read-only at /tlog/, to anyone, cacheable
as C2SP tlog-tiles asks (tiles immutable, the checkpoint not cached)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest
from fastapi.testclient import TestClient

from ledger.cli.main import main
from ledger.crypto.tiles import decode_bundle
from ledger.export.tiles import write_tiles
from ledger.export.tiles_check import check_tiles
from ledger.http.app import Service, create_app
from ledger.http.tlog import TlogFiles
from ledger.http.tokens import TokenStore
from ledger.node import Node, origin
from ledger.rng.server import RngServer
from tests import local_http
from tests.conftest import PASSPHRASE
from tests.http_support import all_games
from tests.ports import free_port
from tests.reproducible import PROGRAM as REPRODUCIBLE
from tests.store.test_checkpoints import record


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
    assert f"--tiles {missing} does not exist" in capsys.readouterr().err


def test_ledger_serve_tiles_serves_the_directory(tmp_path: Path) -> None:
    """The real command: `ledger serve --tiles DIR` hands DIR to its worker."""
    env = {
        **os.environ,
        "LEDGER_PASSPHRASE": PASSPHRASE.decode(),
        "LEDGER_PROGRESS_INTERVAL": "off",
    }
    run = [sys.executable, "-m", "ledger.cli.main"]
    for step in (
        [str(REPRODUCIBLE), "2", "simulate", "--rounds", "2", "--players", "2", "--tables", "1"],
        ["-m", "ledger.cli.main", "tiles", "tiles"],
    ):
        done = subprocess.run(
            [sys.executable, *step], cwd=tmp_path, env=env, capture_output=True, text=True
        )
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
                answer = local_http.get(f"{base}/tlog/checkpoint", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None, (tmp_path / "serve.log").read_text()
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert answer.status_code == 200
        assert answer.text == (tmp_path / "tiles" / "checkpoint").read_text()
        size = int(answer.text.split("\n")[1])
        partial = f"tile/0/{size // 256:03d}.p/{size % 256}"  # the session's last level-0 tile
        tile = local_http.get(f"{base}/tlog/{partial}", timeout=5)
        assert tile.content == (tmp_path / "tiles" / partial).read_bytes()
        assert local_http.serving(base)  # the API still asks for a token
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)


# Issue 37: every file of the tiles directory may be an attacker's. Only a
# regular file inside it, reached without a symbolic link, is served.


def _tlog_get(tiles: Path, path: str) -> tuple[int, bytes]:
    """GET `path` from the /tlog/ layer alone, the path exactly as a server
    hands it on (decoded), with no client to normalise it first."""
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    async def behind(scope: object, receive: object, send: object) -> None:
        raise AssertionError(f"{path} went past /tlog/")

    scope = {"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""}
    asyncio.run(TlogFiles(behind, tiles)(scope, receive, send))
    status = sent[0]["status"]
    body = sent[1]["body"]
    assert isinstance(status, int) and isinstance(body, bytes)
    return status, body


def test_a_link_to_the_keys_is_not_served(node: Node, served: tuple[TestClient, Path]) -> None:
    client, tiles = served
    secrets = [node.keys.path / "checkpoint.pem", node.keys.path / "keyring.json"]
    (tiles / "tile/0/770").symlink_to(secrets[0])
    (tiles / "tile/entries/770").symlink_to(secrets[1])
    for path in ("tile/0/770", "tile/entries/770"):
        answer = client.get(f"/tlog/{path}")
        assert (answer.status_code, answer.content) == (404, b"no such tile\n"), path
    # Nor the checkpoint, nor a tile, when the link's target is the genuine content.
    for path in ("checkpoint", "tile/0/000"):
        genuine = (tiles / path).read_bytes()
        copy = tiles.parent / f"copy-{path.replace('/', '-')}"
        copy.write_bytes(genuine)
        (tiles / path).unlink()
        (tiles / path).symlink_to(copy)
        assert client.get(f"/tlog/{path}").status_code == 404, path


def test_a_linked_directory_on_the_path_is_not_followed(
    node: Node, served: tuple[TestClient, Path]
) -> None:
    client, tiles = served
    outside = tiles.parent / "outside"
    (outside / "x001").mkdir(parents=True)
    (outside / "000").write_bytes(b"a secret beside the tiles")
    (outside / "x001" / "000").write_bytes(b"another secret")
    (tiles / "tile/5").symlink_to(outside)  # a whole level
    (tiles / "tile/0/x002").symlink_to(outside / "x001")  # an index group: tile/0/x002/000
    shutil.move(tiles / "tile/entries", tiles.parent / "entries")
    (tiles / "tile/entries").symlink_to(tiles.parent / "entries")  # the genuine bundles, linked
    for path in ("tile/5/000", "tile/0/x002/000", "tile/entries/000"):
        assert _tlog_get(tiles, f"/tlog/{path}") == (404, b"no such tile\n"), path
        assert client.get(f"/tlog/{path}").status_code == 404, path


def test_a_fifo_is_refused_at_once(served: tuple[TestClient, Path]) -> None:
    """A fifo in a tile's place: refused, not read (reading waits for a writer)."""
    _, tiles = served
    fifo = tiles / "tile/0/001.p/44"
    fifo.unlink()
    os.mkfifo(fifo)
    answered: list[tuple[int, bytes]] = []
    reader = threading.Thread(
        target=lambda: answered.append(_tlog_get(tiles, f"/tlog/{fifo.relative_to(tiles)}"))
    )
    reader.start()
    reader.join(30)  # an upper bound only: a refusal is immediate
    if reader.is_alive():  # the old code blocks in open(): a writer releases it
        os.close(os.open(fifo, os.O_WRONLY))
        reader.join(30)
    assert answered == [(404, b"no such tile\n")]


@pytest.mark.parametrize(
    "path",
    [
        "/tlog/tile/0/../../keys/keyring.json",
        "/tlog/tile/../checkpoint",
        "/tlog/./checkpoint",
        "/tlog//checkpoint",
        "/tlog/tile/0/000/..",
        "/tlog/tile/entries/..%2F..%2Fcheckpoint",
        "/tlog/tile/0/%2e%2e/000",
        "/tlog/../keys/keyring.json",
    ],
)
def test_traversal_is_refused(served: tuple[TestClient, Path], path: str) -> None:
    """As a server hands the path on, decoded (`%2F` as `/`) and not: 404."""
    _, tiles = served
    for given in (path, unquote(path)):
        if given.startswith("/tlog/"):
            assert _tlog_get(tiles, given) == (404, b"no such tile\n"), given
