"""An authenticated line between two nodes' writers, over TCP.

Nodes on one store forward a round's bets to the one writer that sequences
the round (`ledger.casino.round_routes`). The address they forward to is read
from a table of the store, which an attacker with database rights may edit;
so a node sends a bet only to a peer that proves it holds the ledger-node
key, and takes an answer (a bet id) only from one. Every node of a ledger
holds that key already (each signs the events it writes).

- The shared secret is the ledger-node key's signature of `CONTEXT`:
  Ed25519 signs deterministically, so every holder of the key derives the
  same 64 bytes and nobody else can. The ledger never signs this message
  otherwise (it signs 32-byte entry hashes and checkpoint notes).
- The handshake (each side sends a fresh 16-byte nonce) proves the secret
  both ways and gives the connection a key of its own.
- Every line after it carries an HMAC-SHA256 tag (16 bytes) over its
  direction, its number on the connection and its bytes: a line altered,
  dropped, replayed or reordered breaks the connection.

It authenticates; it does not encrypt (bets cross as JSON): run the nodes on
a private network, or under TLS or WireGuard where that is not enough.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
from typing import Final, Protocol

from ledger.crypto.signing import Signer

CONTEXT: Final = b"casino-ledger: the secret of the bet line between nodes, version 1\n"
GREETING: Final = b"ledger-bets/1"
NONCE_BYTES = 16
TAG_BYTES = 16
HANDSHAKE_SECONDS = 10.0
_TO_WRITER, _TO_SENDER = b"w", b"s"


class LinkError(ConnectionError):
    """The peer did not prove the key, or a line's tag is wrong: the link is dropped."""


class Framing(Protocol):
    """How a line is sent and read on a connection (newline excluded)."""

    def seal(self, payload: bytes) -> bytes: ...
    def open(self, line: bytes) -> bytes: ...


class Plain:
    """A local socket's lines: the socket's permissions are its protection."""

    def seal(self, payload: bytes) -> bytes:
        return payload + b"\n"

    def open(self, line: bytes) -> bytes:
        return line


PLAIN: Final = Plain()


def link_secret(signer: Signer) -> bytes:
    """The secret every holder of the ledger-node key derives, and only they."""
    return hashlib.sha256(b"ledger bet line\0" + signer.sign(CONTEXT)).digest()


class Tagged:
    """A TCP connection's lines, each with its tag. `seal` is called under the
    sender's lock, `open` by the one reading thread."""

    def __init__(self, key: bytes, sending: bytes, receiving: bytes) -> None:
        self._key = key
        self._sending, self._receiving = sending, receiving
        self._sent = self._read = 0

    def _tag(self, direction: bytes, number: int, payload: bytes) -> bytes:
        message = direction + number.to_bytes(8, "big") + payload
        return hmac.digest(self._key, message, "sha256")[:TAG_BYTES]

    def seal(self, payload: bytes) -> bytes:
        tag = self._tag(self._sending, self._sent, payload)
        self._sent += 1
        return tag.hex().encode() + b" " + payload + b"\n"

    def open(self, line: bytes) -> bytes:
        tag, _, payload = line.rstrip(b"\n").partition(b" ")
        expected = self._tag(self._receiving, self._read, payload)
        if not hmac.compare_digest(tag, expected.hex().encode()):
            raise LinkError("a line from the peer failed its tag: the link is dropped")
        self._read += 1
        return payload


def _proof(secret: bytes, who: bytes, nonces: bytes) -> bytes:
    return hmac.digest(secret, who + nonces, "sha256")


def _read_line(connection: socket.socket, limit: int = 256) -> bytes:
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = connection.recv(1)
        if not chunk or len(line) > limit:
            raise LinkError("the peer hung up or spoke out of turn during the handshake")
        line += chunk
    return bytes(line[:-1])


def _hex(text: bytes, size: int) -> bytes:
    try:
        value = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        value = b""
    if len(value) != size:
        raise LinkError("the peer's handshake is malformed")
    return value


def connect(
    address: str, secret: bytes, timeout: float = HANDSHAKE_SECONDS
) -> tuple[socket.socket, Tagged]:
    """A connection to the writer at `address` (host:port) that proved the key."""
    host, _, port = address.rpartition(":")
    connection = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    try:
        greeting, _, theirs = _read_line(connection).partition(b" ")
        if greeting != GREETING:
            raise LinkError(f"{address} is not a ledger writer")
        server_nonce = _hex(theirs, NONCE_BYTES)
        client_nonce = os.urandom(NONCE_BYTES)
        nonces = server_nonce + client_nonce
        proof = _proof(secret, b"sender", nonces)
        connection.sendall(client_nonce.hex().encode() + b" " + proof.hex().encode() + b"\n")
        answer = _hex(_read_line(connection), 32)
        if not hmac.compare_digest(answer, _proof(secret, b"writer", nonces)):
            raise LinkError(f"{address} does not hold this ledger's key")
    except BaseException:
        connection.close()
        raise
    connection.settimeout(None)
    return connection, Tagged(_proof(secret, b"line", nonces), _TO_WRITER, _TO_SENDER)


def accept(connection: socket.socket, secret: bytes, timeout: float = HANDSHAKE_SECONDS) -> Tagged:
    """The writer's side of `connect`: the sender proved the key (else LinkError)."""
    connection.settimeout(timeout)
    server_nonce = os.urandom(NONCE_BYTES)
    connection.sendall(GREETING + b" " + server_nonce.hex().encode() + b"\n")
    theirs, _, proof = _read_line(connection).partition(b" ")
    nonces = server_nonce + _hex(theirs, NONCE_BYTES)
    if not hmac.compare_digest(_hex(proof, 32), _proof(secret, b"sender", nonces)):
        raise LinkError("a peer that does not hold this ledger's key was refused")
    connection.sendall(_proof(secret, b"writer", nonces).hex().encode() + b"\n")
    connection.settimeout(None)
    return Tagged(_proof(secret, b"line", nonces), _TO_SENDER, _TO_WRITER)
