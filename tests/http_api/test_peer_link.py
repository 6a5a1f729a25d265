"""The line between two nodes' writers (`ledger.casino.peer_link`): bets cross
it only between holders of the ledger-node key, both ways, and a line that
was altered, replayed or reordered drops the link (its bets are then placed
by the sender itself)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from ledger.casino import peer_link
from ledger.casino.bet_batches import BetRequest
from ledger.casino.bet_channel import BetChannel, serve_connection
from ledger.cli.serve import peers_address
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.roles import Role
from ledger.errors import ConfigError
from tests.conftest import PASSPHRASE
from tests.store.test_bet_channel import placing


def secret_of(directory: Path) -> bytes:
    keys = KeyDirectory(directory)
    keys.create_node_keys(PASSPHRASE)
    return peer_link.link_secret(keys.signer(Role.LEDGER_NODE, PASSPHRASE))


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """This ledger's secret and another ledger's."""
    return (
        secret_of(tmp_path_factory.mktemp("ours") / "keys"),
        secret_of(tmp_path_factory.mktemp("theirs") / "keys"),
    )


class PeerWriter:
    """A writer's TCP end holding `secret`; what it was sent, and how its handshakes went."""

    def __init__(self, secret: bytes) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.refused: list[str] = []
        self.accepting = threading.Thread(target=self._serve, args=(secret,), daemon=True)
        self.accepting.start()

    def _serve(self, secret: bytes) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            try:
                framing = peer_link.accept(connection, secret)
            except OSError as exc:
                self.refused.append(str(exc))
                connection.close()
                continue
            threading.Thread(
                target=serve_connection,
                args=(connection, placing("there"), framing),
                daemon=True,
            ).start()

    def close(self) -> None:
        # Shut down, wait for the accepting thread, then close: closed first, the
        # listener's descriptor number is free while that thread may be about to
        # accept on it, and the next test's listener, given the same number,
        # would be answered by this writer holding this test's secret (seen once:
        # a sender without the key "accepted" by the previous test's writer).
        self.listener.shutdown(socket.SHUT_RDWR)
        self.accepting.join()
        self.listener.close()


def test_the_same_key_derives_the_same_secret_and_another_key_another(
    secrets: tuple[bytes, bytes], tmp_path: Path
) -> None:
    ours, theirs = secrets
    keys = KeyDirectory(tmp_path / "keys")
    keys.create_node_keys(PASSPHRASE)
    signer = keys.signer(Role.LEDGER_NODE, PASSPHRASE)
    assert peer_link.link_secret(signer) == peer_link.link_secret(signer)
    assert len({ours, theirs, peer_link.link_secret(signer)}) == 3


def test_bets_cross_between_holders_of_the_key(secrets: tuple[bytes, bytes]) -> None:
    ours, _ = secrets
    writer = PeerWriter(ours)
    connection, framing = peer_link.connect(writer.address, ours)
    channel = BetChannel(connection, placing("here"), framing)
    bets = [BetRequest(f"r{n}", "a", {"bet": "big"}, 5) for n in range(3)]
    assert [f.result(5) for f in channel.submit("R", bets)] == [
        "there:R:r0",
        "there:R:r1",
        "there:R:r2",
    ]
    (again,) = channel.submit("R", [BetRequest("r9", "a", {"bet": "big"}, 5)])
    assert again.result(5) == "there:R:r9" and channel.connected
    channel.close()
    writer.close()


def test_a_writer_without_the_key_is_refused_by_the_sender(secrets: tuple[bytes, bytes]) -> None:
    """(An attacker pointed the round's row at a writer of their own.)"""
    ours, theirs = secrets
    writer = PeerWriter(theirs)
    with pytest.raises(peer_link.LinkError):
        peer_link.connect(writer.address, ours)
    writer.close()


def test_a_sender_without_the_key_is_refused_by_the_writer(secrets: tuple[bytes, bytes]) -> None:
    ours, theirs = secrets
    writer = PeerWriter(ours)
    with pytest.raises(peer_link.LinkError):
        peer_link.connect(writer.address, theirs)
    for _ in range(50):
        if writer.refused:
            break
        time.sleep(0.1)
    assert writer.refused and "does not hold" in writer.refused[0]
    writer.close()


def test_a_line_altered_replayed_or_reordered_is_refused() -> None:
    sender = peer_link.Tagged(b"k" * 32, b"w", b"s")
    writer = peer_link.Tagged(b"k" * 32, b"s", b"w")
    first, second = sender.seal(b'[0,"R",[]]'), sender.seal(b'[1,"R",[]]')
    assert writer.open(first) == b'[0,"R",[]]'
    with pytest.raises(peer_link.LinkError):
        writer.open(first)  # replayed
    with pytest.raises(peer_link.LinkError):
        writer.open(second.replace(b'"R"', b'"X"'))  # altered
    fresh = peer_link.Tagged(b"k" * 32, b"s", b"w")
    with pytest.raises(peer_link.LinkError):
        fresh.open(second)  # out of order
    with pytest.raises(peer_link.LinkError):
        peer_link.Tagged(b"k" * 32, b"w", b"s").open(first)  # its own direction back


def test_a_forged_line_drops_the_link_and_the_bets_are_placed_by_the_sender(
    secrets: tuple[bytes, bytes],
) -> None:
    """A man in the middle who alters a line after the handshake: the writer
    hangs up, and the sender places the unanswered bet itself."""
    ours, _ = secrets
    writer = PeerWriter(ours)
    connection, framing = peer_link.connect(writer.address, ours)

    class Forging:
        def seal(self, payload: bytes) -> bytes:
            return framing.seal(payload).replace(b"big", b"odd")

        def open(self, line: bytes) -> bytes:
            return framing.open(line)

    channel = BetChannel(connection, placing("here"), Forging())
    (answer,) = channel.submit("R", [BetRequest("r1", "a", {"bet": "big"}, 5)])
    assert answer.result(5) == "here:R:r1"
    assert not channel.connected
    writer.close()


PG = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.mark.parametrize(
    ("given", "url", "expected"),
    [
        ("auto", PG, "127.0.0.1:0"),
        ("auto", "sqlite:///ledger.db", "off"),
        ("off", PG, "off"),
        ("10.0.0.5:7400", PG, "10.0.0.5:7400"),
        ("[fd00::5]:7400", PG, "[fd00::5]:7400"),
    ],
)
def test_serve_peers_address(given: str, url: str, expected: str) -> None:
    assert peers_address(given, url) == expected


@pytest.mark.parametrize(
    ("given", "url", "said"),
    [
        ("10.0.0.5:7400", "sqlite:///ledger.db", "PostgreSQL store only"),
        ("0.0.0.0:7400", PG, "not a wildcard"),
        ("[::]:7400", PG, "not a wildcard"),
        ("node-b", PG, "give HOST:PORT"),
        ("node-b:http", PG, "give HOST:PORT"),
        ("node-b:70000", PG, "give HOST:PORT"),
    ],
)
def test_serve_refuses_a_peers_address_it_cannot_use(given: str, url: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        peers_address(given, url)
