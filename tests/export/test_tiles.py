"""C2SP tlog-tiles: written from checked events, read back by our checker and by
Go's golang.org/x/mod/sumdb/tlog (tests/go/tlogcheck), which we did not write."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.cli.main import main
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import assemble, header_bytes, open_envelope
from ledger.crypto.keys import Keyring, PublicKeyRecord, Role
from ledger.crypto.merkle import hash_leaf, root_of
from ledger.crypto.note import verifier_key
from ledger.crypto.signing import InMemorySigner
from ledger.crypto.tiles import TileError, TileFrontier, TilePath, decode_bundle, encode_bundle
from ledger.errors import VerificationError
from ledger.export.tiles import write_tiles
from ledger.export.tiles_check import check_tiles
from ledger.node import Node, origin
from ledger.store.merkle_log import stream_of
from tests import go_tlog
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE
from tests.go_tlog import run_tlogcheck
from tests.store.test_checkpoints import leaf_hashes, record


def vkey_of(directory: Path, keyring: Keyring) -> str:
    checkpoint = Checkpoint.from_note((directory / "checkpoint").read_text())
    record = checkpoint.key_record(keyring)
    assert record is not None
    return verifier_key(record.name, record.public_key)


def publish(node: Node, directory: Path) -> None:
    node.checkpointer().catch_up()
    write_tiles(node.app, node.keyring, directory, origin=origin())


def files(directory: Path) -> dict[str, tuple[int, int]]:
    """Each published file and its (inode, mtime): what a rewrite would change."""
    return {
        str(p.relative_to(directory)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file() and p.name != ".lock"  # the writers' lock, not published
    }


def test_paths_and_bundles_are_the_specs() -> None:
    assert str(TilePath(0, 1234067)) == "tile/0/x001/x234/067"
    assert str(TilePath(1, 5, 17)) == "tile/1/005.p/17"
    assert str(TilePath(None, 0, 3)) == "tile/entries/000.p/3"
    for path in ("tile/0/x001/x234/067", "tile/entries/000.p/3", "tile/63/999"):
        assert str(TilePath.parse(path)) == path
    for bad in (
        "tile/0/1",
        "tile/0/x000/001",
        "tile/01/000",
        "tile/0/000.p/256",
        "tile/0/000.p/0",
        "tile/64/000",
        "tile/0/../000",
        "checkpoint",
        "tile/entries/x1/000",
    ):
        with pytest.raises(TileError):
            TilePath.parse(bad)
    bundle = encode_bundle([b"a", b"", b"xyz"])
    assert bundle == b"\x00\x01a\x00\x00\x00\x03xyz"  # big-endian uint16 length, then the entry
    assert decode_bundle(bundle, 3) == [b"a", b"", b"xyz"]
    for cut, width in ((bundle[:-1], 3), (bundle[:1], 1), (bundle + b"\x00", 3), (bundle, 4)):
        with pytest.raises(TileError):
            decode_bundle(cut, width)


@pytest.mark.parametrize("use_native", [True, False])
def test_a_full_tile_added_at_once_is_its_leaves_added_one_by_one(
    use_native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`TileFrontier.append_tile` (the archive's: a tile's hash taken in C) gives
    the tiles and leaves the frontier exactly as `append` of each leaf does,
    across the levels that fill up; off a tile's edge, or with a hash that is
    not 32 bytes, it refuses."""
    from ledger.crypto import tiles

    if not use_native:
        monkeypatch.setattr(tiles, "native", None)
    size = 256 * 256 + 3 * 256  # a level-1 tile fills up on the way
    leaves = [hashlib.sha256(n.to_bytes(4, "big")).digest() for n in range(size + 5)]
    one_by_one, at_once = TileFrontier(), TileFrontier()
    slow, fast = [], []
    for leaf in leaves[:size]:
        slow += one_by_one.append(leaf)
    for begin in range(0, size, 256):
        fast += at_once.append_tile(leaves[begin : begin + 256])
    assert [(str(t), h) for t, h in fast] == [(str(t), h) for t, h in slow]
    assert len([t for t, _ in fast if t.level == 1]) == 1
    for leaf in leaves[size:]:  # and both grow on the same
        assert at_once.append(leaf) == one_by_one.append(leaf)
    assert list(at_once.partial()) == list(one_by_one.partial())
    assert at_once.root() == one_by_one.root() == root_of(leaves)
    with pytest.raises(ValueError):
        at_once.append_tile(leaves[:256])  # 5 leaves past a tile's edge
    with pytest.raises(ValueError):
        TileFrontier().append_tile([*leaves[:255], b"short"])


def test_tiles_are_the_tree_and_grow_without_rewriting(node: Node, tmp_path: Path) -> None:
    tiles = tmp_path / "tiles"
    record(node, 300)
    publish(node, tiles)
    leaves = leaf_hashes(node)
    assert (tiles / "tile/0/000").read_bytes() == b"".join(leaves[:256])
    assert (tiles / "tile/0/001.p/44").read_bytes() == b"".join(leaves[256:300])
    assert (tiles / "tile/1/000.p/1").read_bytes() == root_of(leaves[:256])
    entries = decode_bundle((tiles / "tile/entries/000").read_bytes(), 256)
    assert [hash_leaf(e) for e in entries] == leaves[:256]  # the entries are the leaf bytes
    first = files(tiles)
    assert set(first) == {
        "checkpoint",
        "tile/0/000",
        "tile/0/001.p/44",
        "tile/1/000.p/1",
        "tile/entries/000",
        "tile/entries/001.p/44",
    }
    record(node, 500)
    publish(node, tiles)
    second = files(tiles)
    for path, stamp in first.items():  # nothing published is rewritten but the checkpoint
        assert path == "checkpoint" or second[path] == stamp, path
    assert set(second) - set(first) == {
        "tile/0/001",
        "tile/0/002",
        "tile/0/003.p/32",
        "tile/1/000.p/3",
        "tile/entries/001",
        "tile/entries/002",
        "tile/entries/003.p/32",
    }
    assert not (tiles / ".pending").exists()
    checked = check_tiles(tiles, node.keyring)
    assert (checked.size, checked.bundles) == (800, 4)
    leaves = leaf_hashes(node)
    assert (tiles / "tile/1/000.p/3").read_bytes() == b"".join(
        root_of(leaves[i : i + 256]) for i in (0, 256, 512)
    )
    # Nothing new: nothing written.
    assert write_tiles(node.app, node.keyring, tiles, origin=origin()).tiles == 0
    assert files(tiles) == second


def test_go_x_mod_tlog_reads_the_tiles_alone(node: Node, tmp_path: Path, tlogcheck: Path) -> None:
    tiles = tmp_path / "tiles"
    record(node, 300)
    publish(node, tiles)
    old = tmp_path / "old-checkpoint"
    shutil.copy(tiles / "checkpoint", old)
    record(node, 500)
    publish(node, tiles)
    vkey = vkey_of(tiles, node.keyring)
    done = run_tlogcheck(
        tlogcheck, tiles, vkey, old=old, sample=[0, 1, 255, 256, 299, 511, 777, 799]
    )
    assert done.returncode == 0, done.stderr
    assert "OK checkpoint casino-ledger size 800" in done.stdout
    assert "OK every entry of 800 entries hashes to its leaf in the tiles" in done.stdout
    assert "OK entry 777 is in the tree of size 800" in done.stdout
    assert "OK the tree of size 800 extends the one of size 300" in done.stdout
    # The Go checker is not a rubber stamp: another log's key is refused.
    other = run_tlogcheck(tlogcheck, tiles, verifier_key("checkpoint", bytes(32)))
    assert other.returncode == 1


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-1])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


ATTACKS = {
    "truncated full tile": ("tile/0/001", _truncate),
    "altered full tile": ("tile/0/000", _flip),
    "altered partial tile": ("tile/0/003.p/32", _flip),
    "truncated partial tile": ("tile/0/003.p/32", _truncate),
    "altered level-1 tile": ("tile/1/000.p/3", _flip),
    "altered entry bundle": ("tile/entries/001", _flip),
    "truncated entry bundle": ("tile/entries/003.p/32", _truncate),
    "missing entry bundle": ("tile/entries/002", Path.unlink),
    "altered checkpoint": ("checkpoint", _flip),
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_an_altered_tile_is_caught_by_us_and_by_go(
    node: Node, tmp_path: Path, tlogcheck: Path, attack: str
) -> None:
    tiles = tmp_path / "tiles"
    record(node, 800)
    publish(node, tiles)
    vkey = vkey_of(tiles, node.keyring)
    assert run_tlogcheck(tlogcheck, tiles, vkey, sample=[5, 300, 790]).returncode == 0
    path, edit = ATTACKS[attack]
    edit(tiles / path)
    with pytest.raises(VerificationError):
        check_tiles(tiles, node.keyring)
    caught = run_tlogcheck(tlogcheck, tiles, vkey, sample=[5, 300, 790])
    assert caught.returncode == 1, caught.stdout
    # Nor does the writer extend a directory whose published tiles were altered
    # (an altered full tile or bundle is not read to extend: only the check sees it).
    record(node, 10)
    node.checkpointer().catch_up()
    if path in ("tile/0/003.p/32", "tile/1/000.p/3", "checkpoint"):
        with pytest.raises(VerificationError):
            write_tiles(node.app, node.keyring, tiles, origin=origin())


def test_cli_tiles_and_check(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    base = ["--store", node.app.store_url, "--keys", str(node.keys.path)]
    tiles = tmp_path / "tiles"
    assert main([*base, "tiles", str(tiles)]) == 0
    assert "no checkpoint verifies yet" in capsys.readouterr().out
    record(node, 40)
    assert main([*base, "checkpoint", "--tiles", str(tiles)]) == 0
    captured = capsys.readouterr()
    assert "wrote 1 tile and 1 entry bundle" in captured.err
    assert Checkpoint.from_note(captured.out).size == 40  # the note alone on stdout
    assert main([*base, "tiles", str(tiles)]) == 0
    assert "already publishes the checkpoint of size 40" in capsys.readouterr().out
    assert main([*base, "tiles", str(tiles), "--check"]) == 0
    assert "OK:" in capsys.readouterr().out
    _flip(tiles / "tile/entries/000.p/40")
    assert main([*base, "tiles", str(tiles), "--check"]) == 1
    assert "of bundle tile/entries/000.p/40 does not hash to its leaf" in capsys.readouterr().err


# An attacker with database rights edits the store; the writer publishes nothing
# that does not hash to the signed root, on both stores.


def _event(node: Node, position: int) -> tuple[int, str, int, str, bytes]:
    rows = node.app.tables.rows_after(0, position + 1)
    n, stream, version, topic, state = rows[position]
    return n, stream_of(stream), version, topic, bytes(state)


def _resealed(state: bytes, stream: str, version: int) -> tuple[bytes, bytes]:
    """The event with its signing time moved by 1 µs: a canonical header the
    node never signed. (state, its entry hash)"""
    envelope = open_envelope(state, stream=stream, version=version)
    header = header_bytes(
        envelope.key_id,
        envelope.payload_hash.hex(),
        envelope.prev_hash.hex(),
        envelope.signed_at + 1,
        envelope.stream,
        envelope.event_type,
        envelope.version,
    )
    return assemble(header, envelope.signature, envelope.payload), hash_leaf(header)


def _edit_payload(a: Attacker, node: Node, position: int) -> None:
    _, stream, version, _, state = _event(node, position)
    a.set_state(stream, version, state[:-2] + b" }")


def _edit_header_and_leaf(a: Attacker, node: Node, position: int) -> None:
    _, stream, version, _, state = _event(node, position)
    forged, leaf = _resealed(state, stream, version)
    a.set_state(stream, version, forged)
    a.sql("UPDATE ledger_merkle_leaves SET leaf_hash = ? WHERE leaf_index = ?", (leaf, position))


def _edit_leaf(a: Attacker, node: Node, position: int) -> None:
    a.sql(
        "UPDATE ledger_merkle_leaves SET leaf_hash = ? WHERE leaf_index = ?", (bytes(32), position)
    )


def _point_leaf_elsewhere(a: Attacker, node: Node, position: int) -> None:
    """Leaf `position` names the event 5 before it (that leaf moved out of the way)."""
    earlier = _event(node, position - 5)[0]
    a.sql(
        "UPDATE ledger_merkle_leaves SET notification_id = ? WHERE leaf_index = ?",
        (10**9, position - 5),
    )
    a.sql(
        "UPDATE ledger_merkle_leaves SET notification_id = ? WHERE leaf_index = ?",
        (earlier, position),
    )


def _delete_event(a: Attacker, node: Node, position: int) -> None:
    _, stream, version, _, _ = _event(node, position)
    a.delete(stream, version)


STORE_ATTACKS = {
    "payload edited": _edit_payload,
    "header re-sealed, its Merkle leaf too": _edit_header_and_leaf,
    "Merkle leaf edited": _edit_leaf,
    "event deleted": _delete_event,
}


@pytest.mark.parametrize("attack", STORE_ATTACKS)
def test_a_tampered_store_publishes_nothing(node: Node, tmp_path: Path, attack: str) -> None:
    tiles = tmp_path / "tiles"
    record(node, 300)
    node.checkpointer().catch_up()
    attacker = Attacker(node.app.store_url)
    try:
        STORE_ATTACKS[attack](attacker, node, 100)
    finally:
        attacker.close()
    with pytest.raises(VerificationError, match="nothing was written"):
        write_tiles(node.app, node.keyring, tiles, origin=origin())
    assert files(tiles) == {}  # not a tile, not a checkpoint
    assert not tiles.exists()  # nor the directory the run would have made


LATER_ATTACKS = {
    "payload edited": (_edit_payload, 290),
    "header re-sealed, its Merkle leaf too": (_edit_header_and_leaf, 290),
    # Leaf 255 locates where the next run resumes reading (the partial bundle's start).
    "Merkle leaf names another event": (_point_leaf_elsewhere, 255),
}


@pytest.mark.parametrize("attack", LATER_ATTACKS)
def test_a_published_event_edited_later_stops_the_next_run(
    node: Node, tmp_path: Path, attack: str
) -> None:
    """The events of the published partial bundle are read again to extend it:
    edited after publication (or looked for in the wrong place), they are
    refused, and nothing changes on disk."""
    tiles = tmp_path / "tiles"
    record(node, 300)
    publish(node, tiles)
    before = files(tiles)
    attacker = Attacker(node.app.store_url)
    try:
        edit, position = LATER_ATTACKS[attack]
        edit(attacker, node, position)
    finally:
        attacker.close()
    record(node, 20)
    node.checkpointer().catch_up()  # the checkpointer checks its frontier, not leaf 290
    with pytest.raises(VerificationError, match="nothing was written"):
        write_tiles(node.app, node.keyring, tiles, origin=origin())
    assert files(tiles) == before


def test_stored_merkle_nodes_are_not_read(node: Node, tmp_path: Path, tlogcheck: Path) -> None:
    """The tiles are hashed from the events, never copied from the stored
    Merkle nodes: zeroed node rows change nothing published."""
    honest, tiles = tmp_path / "honest", tmp_path / "tiles"
    record(node, 300)
    publish(node, honest)
    attacker = Attacker(node.app.store_url)
    try:
        attacker.sql("UPDATE ledger_merkle_nodes SET hash = ?", (bytes(32),))
    finally:
        attacker.close()
    write_tiles(node.app, node.keyring, tiles, origin=origin())
    assert {p: (tiles / p).read_bytes() for p in files(tiles)} == {
        p: (honest / p).read_bytes() for p in files(honest)
    }
    assert run_tlogcheck(tlogcheck, tiles, vkey_of(tiles, node.keyring)).returncode == 0


def test_checkpoint_follow_keeps_the_tiles_current(node: Node, tmp_path: Path) -> None:
    """`ledger checkpoint --follow --tiles DIR` publishes each new checkpoint."""
    tiles = tmp_path / "tiles"
    env = dict(os.environ, LEDGER_PASSPHRASE=PASSPHRASE.decode())
    argv = ["--store", node.app.store_url, "--keys", str(node.keys.path)]
    service = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ledger.cli.main",
            *argv,
            "checkpoint",
            "--follow",
            "--tiles",
            str(tiles),
        ],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def published() -> int:
        try:
            return Checkpoint.from_note((tiles / "checkpoint").read_text()).size
        except (FileNotFoundError, VerificationError):
            return -1

    def wait_for(size: int) -> None:
        deadline = time.monotonic() + 60
        while published() != size:
            assert service.poll() is None, service.communicate()[1]
            assert time.monotonic() < deadline, f"tiles at {published()}, not {size}"
            time.sleep(0.1)

    try:
        record(node, 30)
        wait_for(30)
        record(node, 270)
        wait_for(300)
    finally:
        service.send_signal(signal.SIGINT)
        _, err = service.communicate(timeout=60)
    assert service.returncode == 130, err
    assert check_tiles(tiles, node.keyring).size == 300
    assert (tiles / "tile/0/000").is_file() and (tiles / "tile/entries/001.p/44").is_file()


def test_one_writer_at_a_time(node: Node, tmp_path: Path) -> None:
    """A second writer of one directory (`tiles` beside `checkpoint --follow`)
    waits for the first: they would share DIR/.pending. The lock is on the
    directory itself, so taking it creates no file."""
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    record(node, 30)
    node.checkpointer().catch_up()
    done = threading.Event()

    def write() -> None:
        write_tiles(node.app, node.keyring, tiles, origin=origin())
        done.set()

    held = os.open(tiles, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        writer = threading.Thread(target=write)
        writer.start()
        assert not done.wait(0.5)  # blocked on the lock
        fcntl.flock(held, fcntl.LOCK_UN)
    finally:
        os.close(held)
    writer.join(30)
    assert done.is_set() and check_tiles(tiles, node.keyring).size == 30


def _synthetic_tiles(directory: Path, entries: list[bytes], signer: InMemorySigner) -> None:
    """A tiles directory of `entries`, built with our tile code alone (no store):
    to reach sizes whose full level-1 tiles a test store would take long to fill."""
    frontier = TileFrontier()
    for start in range(0, len(entries), 256):
        bundle = entries[start : start + 256]
        target = directory / str(TilePath(None, start // 256, len(bundle)))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(encode_bundle(bundle))
        for entry in bundle:
            for tile, hashes in frontier.append(hash_leaf(entry)):
                (directory / str(tile)).parent.mkdir(parents=True, exist_ok=True)
                (directory / str(tile)).write_bytes(b"".join(hashes))
    for tile, hashes in frontier.partial():
        (directory / str(tile)).parent.mkdir(parents=True, exist_ok=True)
        (directory / str(tile)).write_bytes(b"".join(hashes))
    checkpoint = Checkpoint.sign(
        origin="casino.example/tiles", size=frontier.size, root=frontier.root(), signer=signer
    )
    (directory / "checkpoint").write_text(checkpoint.to_note())


def test_a_tree_past_one_full_level_1_tile_reads_in_go(tmp_path: Path, tlogcheck: Path) -> None:
    """70,000 entries: 273 full level-0 tiles, a full level-1 tile and a level-2
    one, the spec's own example, read by x/mod with height 8."""
    signer = InMemorySigner(Ed25519PrivateKey.generate(), Role.CHECKPOINT, "tiles-test")
    keyring = Keyring(
        [
            PublicKeyRecord(
                "tiles-test", Role.CHECKPOINT, signer.public_key, datetime(2020, 1, 1, tzinfo=UTC)
            )
        ]
    )
    entries = [f"entry {i}".encode() * (1 + i % 5) for i in range(70_000)]
    old, new = tmp_path / "old", tmp_path / "new"
    _synthetic_tiles(old, entries[:65_536], signer)
    _synthetic_tiles(new, entries, signer)
    assert (new / "tile/0/273.p/112").stat().st_size == 112 * 32
    assert (new / "tile/1/000").stat().st_size == 8192
    assert (new / "tile/1/001.p/17").is_file() and (new / "tile/2/000.p/1").is_file()
    assert check_tiles(new, keyring).size == 70_000
    assert (new / "checkpoint").read_text().split("\n")[2] == base64.b64encode(
        root_of([hash_leaf(e) for e in entries])
    ).decode()
    vkey = verifier_key("tiles-test", signer.public_key)
    done = run_tlogcheck(tlogcheck, new, vkey, old=old / "checkpoint",
                         sample=[0, 65_535, 65_536, 69_999])  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "OK the tree of size 70000 extends the one of size 65536" in done.stdout
    _flip(new / "tile/1/000")  # a full level-1 tile, which only level 2 vouches for
    assert run_tlogcheck(tlogcheck, new, vkey, sample=[3]).returncode == 1
    with pytest.raises(VerificationError, match="tile/1/000 is not the tile"):
        check_tiles(new, keyring)


def test_without_go_the_interop_test_fails_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Go missing skips the interop tests on a developer's machine, and fails
    them under CI=true (nothing may skip there)."""
    monkeypatch.setattr(go_tlog.shutil, "which", lambda _: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="golang-golang-x-mod-dev"):
        go_tlog.build_tlogcheck(tmp_path)
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        go_tlog.build_tlogcheck(tmp_path)


def test_a_store_cut_back_below_the_published_tiles_is_refused(node: Node, tmp_path: Path) -> None:
    """The newest events deleted with their Merkle rows and checkpoints: the store
    alone cannot tell, the published tiles can."""
    tiles = tmp_path / "tiles"
    record(node, 200)
    node.checkpointer().catch_up()
    record(node, 100)
    publish(node, tiles)
    before = files(tiles)
    attacker = Attacker(node.app.store_url)
    try:
        attacker.delete_tail(200)  # the checkpoint of size 200 stays
        with pytest.raises(VerificationError, match="the store is not the log these tiles are"):
            write_tiles(node.app, node.keyring, tiles, origin=origin())
        attacker.delete_tail(150)  # no checkpoint at all
        with pytest.raises(VerificationError, match="the store is not the log these tiles are"):
            write_tiles(node.app, node.keyring, tiles, origin=origin())
    finally:
        attacker.close()
    assert files(tiles) == before


def test_a_tile_replaced_by_a_directory_is_a_failed_check(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever the directory holds, the checker and the writer say so in one line."""
    tiles = tmp_path / "tiles"
    record(node, 300)
    publish(node, tiles)
    (tiles / "tile/0/001.p/44").unlink()
    (tiles / "tile/0/001.p/44").mkdir()
    assert main(["--keys", str(node.keys.path), "tiles", str(tiles), "--check"]) == 1
    assert "tile/0/001.p/44 cannot be read" in capsys.readouterr().err
    with pytest.raises(VerificationError, match="cannot be read"):
        write_tiles(node.app, node.keyring, tiles, origin=origin())


# Issue 37: the partial tiles and bundles of earlier checkpoints. They stay
# (a client holding such a checkpoint may ask for them), `--check` reads them,
# and the writer refuses to build on one that is not the start of its tile.

STALE = {
    "level-0 tile": "tile/0/001.p/44",
    "entry bundle": "tile/entries/001.p/44",
    "level-1 tile": "tile/1/000.p/1",
}


def _published_at_300_then_800(node: Node, tmp_path: Path) -> tuple[Path, Path]:
    """Tiles published at 300 entries, then at 800: the partials of 300 are
    stale (their full tiles, or a wider partial, are there). (dir, old checkpoint)"""
    tiles = tmp_path / "tiles"
    record(node, 300)
    publish(node, tiles)
    old = tmp_path / "checkpoint-300"
    shutil.copy(tiles / "checkpoint", old)
    record(node, 500)
    publish(node, tiles)
    assert set(STALE.values()) <= set(files(tiles))
    return tiles, old


def _as_of(tiles: Path, checkpoint: Path, tmp_path: Path) -> Path:
    """What a client holding `checkpoint` reads: the directory under it."""
    copy = tmp_path / f"as-of-{checkpoint.name}"
    shutil.copytree(tiles, copy)
    shutil.copy(checkpoint, copy / "checkpoint")
    return copy


@pytest.mark.parametrize("stale", STALE)
def test_an_altered_stale_partial_is_caught_by_check(
    node: Node, tmp_path: Path, tlogcheck: Path, stale: str
) -> None:
    tiles, old = _published_at_300_then_800(node, tmp_path)
    vkey = vkey_of(tiles, node.keyring)
    assert check_tiles(tiles, node.keyring).size == 800
    # Go's x/mod, given the checkpoint of 300, reads exactly these stale files.
    assert run_tlogcheck(tlogcheck, _as_of(tiles, old, tmp_path), vkey).returncode == 0
    _flip(tiles / STALE[stale])
    with pytest.raises(VerificationError, match=f"{STALE[stale]} of an earlier checkpoint"):
        check_tiles(tiles, node.keyring)
    older_client = run_tlogcheck(tlogcheck, _as_of(tiles, old, tmp_path / "after"), vkey)
    assert older_client.returncode == 1, older_client.stdout


def test_check_says_which_stale_partial_and_names_no_write(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiles, _ = _published_at_300_then_800(node, tmp_path)
    _truncate(tiles / "tile/0/001.p/44")
    assert main(["--keys", str(node.keys.path), "tiles", str(tiles), "--check"]) == 1
    err = capsys.readouterr().err
    assert (
        "tile/0/001.p/44 of an earlier checkpoint is not the first 44 hashes of tile/0/001" in err
    )
    assert "nothing was written" not in err  # it only reads


@pytest.mark.parametrize("stale", ["tile/0/001.p/44", "tile/entries/001.p/44"])
def test_the_writer_refuses_to_complete_a_tile_over_an_altered_partial(
    node: Node, tmp_path: Path, stale: str
) -> None:
    """Published at 300, then 400 (001.p/44 is stale, 001.p/144 current); the
    stale one altered: completing tile 001 stops, and nothing changes."""
    tiles = tmp_path / "tiles"
    record(node, 300)
    publish(node, tiles)
    record(node, 100)
    publish(node, tiles)
    _flip(tiles / stale)
    before = files(tiles)
    record(node, 200)
    node.checkpointer().catch_up()
    with pytest.raises(
        VerificationError, match=f"{stale} is not the first 44 .* nothing was written"
    ):
        write_tiles(node.app, node.keyring, tiles, origin=origin())
    assert files(tiles) == before
    # As the error says: without the altered file, the run completes and checks.
    (tiles / stale).unlink()
    assert write_tiles(node.app, node.keyring, tiles, origin=origin()).size == 600
    assert check_tiles(tiles, node.keyring).size == 600


def _link_to_keys(tiles: Path, node: Node) -> None:
    (tiles / "tile/0/770").symlink_to(node.keys.path / "checkpoint.pem")


def _linked_directory(tiles: Path, node: Node) -> None:
    (tiles.parent / "elsewhere").mkdir()
    (tiles.parent / "elsewhere" / "000").write_bytes(b"x" * 32)
    (tiles / "tile/7").symlink_to(tiles.parent / "elsewhere")


def _fifo(tiles: Path, node: Node) -> None:
    os.mkfifo(tiles / "tile/0/001.p/9")  # a stale partial's name: read if taken for one


STRAYS = {
    "link to the keys": (_link_to_keys, "tile/0/770 is a symbolic link"),
    "linked directory": (_linked_directory, "tile/7 is a symbolic link"),
    "fifo": (_fifo, "tile/0/001.p/9 is not a regular file"),
    "stray file": (lambda t, n: (t / "notes.txt").write_text("hi"), "notes.txt is not a tile"),
    "tile beyond the tree": (
        lambda t, n: shutil.copy(t / "tile/0/000", t / "tile/0/009"),
        "tile/0/009 is no tile of the tree of size 800",
    ),
    "partial beyond the tree": (
        lambda t, n: (t / "tile/0/003.p/33").write_bytes(bytes(33 * 32)),
        "tile/0/003.p/33 is no tile of the tree of size 800",
    ),
}


@pytest.mark.parametrize("stray", STRAYS)
def test_check_names_every_path_that_is_not_the_logs(
    node: Node, tmp_path: Path, stray: str
) -> None:
    """A tiles directory holds the checkpoint, tiles and bundles: anything
    else is named (the server answers none of it), and nothing is followed."""
    tiles, _ = _published_at_300_then_800(node, tmp_path)
    plant, named = STRAYS[stray]
    plant(tiles, node)
    with pytest.raises(VerificationError, match=named):
        check_tiles(tiles, node.keyring)


def test_the_writers_leftovers_are_not_strays(node: Node, tmp_path: Path) -> None:
    tiles, _ = _published_at_300_then_800(node, tmp_path)
    (tiles / ".pending/tile/0").mkdir(parents=True)  # a run cut short
    (tiles / ".pending/tile/0/003").write_bytes(b"half")
    (tiles / ".checkpoint.new").write_bytes(b"half")
    (tiles / ".lock").touch()  # earlier releases locked with it
    checked = check_tiles(tiles, node.keyring)
    assert (checked.size, checked.older) == (800, len(STALE))  # each stale partial read


# The writer, too, reaches nothing through a link the directory holds.


def test_the_writer_removes_a_linked_pending_not_what_it_points_at(
    node: Node, tmp_path: Path
) -> None:
    tiles = tmp_path / "tiles"
    record(node, 300)
    publish(node, tiles)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "ledger-node.pem").write_bytes(b"a key")
    (tiles / ".pending").symlink_to(precious)
    record(node, 20)
    publish(node, tiles)
    assert (precious / "ledger-node.pem").read_bytes() == b"a key"
    assert check_tiles(tiles, node.keyring).size == 320


def test_the_writer_does_not_write_through_a_planted_link(node: Node, tmp_path: Path) -> None:
    tiles = tmp_path / "tiles"
    record(node, 300)
    publish(node, tiles)
    keyring = tmp_path / "keyring-copy.json"
    keyring.write_bytes(b"the keyring")
    (tiles / ".checkpoint.new").symlink_to(keyring)  # the checkpoint's temporary file
    record(node, 20)
    publish(node, tiles)
    assert keyring.read_bytes() == b"the keyring"
    assert check_tiles(tiles, node.keyring).size == 320


def test_the_writer_puts_no_tile_through_a_linked_directory(node: Node, tmp_path: Path) -> None:
    tiles = tmp_path / "tiles"
    record(node, 300)
    publish(node, tiles)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(tiles / "tile/entries", elsewhere)
    (tiles / "tile/entries").symlink_to(elsewhere)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir() if p.is_file()}
    record(node, 500)
    node.checkpointer().catch_up()
    with pytest.raises(VerificationError, match="tile/entries is a symbolic link"):
        write_tiles(node.app, node.keyring, tiles, origin=origin())
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir() if p.is_file()} == before
    assert Checkpoint.from_note((tiles / "checkpoint").read_text()).size == 300


def test_a_fifo_for_a_published_tile_is_refused_at_once(node: Node, tmp_path: Path) -> None:
    """The writer and the checker read the published partial tiles: a fifo in
    one's place is refused, not waited on."""
    tiles = tmp_path / "tiles"
    record(node, 300)
    publish(node, tiles)
    fifo = tiles / "tile/0/001.p/44"
    fifo.unlink()
    os.mkfifo(fifo)
    record(node, 20)
    node.checkpointer().catch_up()
    errors: list[str] = []

    def attempt(run: object) -> None:
        try:
            run()  # type: ignore[operator]
        except VerificationError as exc:
            errors.append(str(exc))

    for run in (
        lambda: write_tiles(node.app, node.keyring, tiles, origin=origin()),
        lambda: check_tiles(tiles, node.keyring),
    ):
        worker = threading.Thread(target=attempt, args=(run,))
        worker.start()
        worker.join(60)  # an upper bound only: a refusal is immediate
        if worker.is_alive():  # the old code waits in open(): a writer releases it
            os.close(os.open(fifo, os.O_WRONLY))
            worker.join(60)
    assert len(errors) == 2 and all("tile/0/001.p/44" in e for e in errors), errors
    assert all("not a regular file" in e for e in errors), errors
