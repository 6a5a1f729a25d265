"""What a node's writer sealed, told to the node's anchor process.

Before it extends the tree over a row, a checkpointer checks the row: its
envelope parsed, its Ed25519 signature verified (a forged row must never be
anchored). A checkpointer in the process that sealed the row skips the
verify for a row byte-identical to what it sealed (`SealingMapper`). Under
`ledger serve` the rows are sealed in the writer process and the HTTP
workers, and checkpointed in the anchor process, which verified every
signature again: two Ed25519 verifies a bet, a third of the CPU a bet cost.

So the processes that seal tell the anchor process what they sealed: for
each row, the SHA-256 of its stored bytes, its entry hash, stream, version
and type, in datagrams on a Unix socket in the server's private directory
(mode 0700: only the serving user, who can read these processes' memory
anyway, can send there). The anchor's mapper remembers them as rows it
sealed itself, so a row byte-identical to one it was told of is checked as
the sealing process itself would; any other row
is checked in full. The telling is best-effort: a datagram that cannot be
sent at once is dropped, and its rows are verified instead.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger("ledger.anchor")
SEALED_ENV = "LEDGER_SERVE_SEALED"  # the Unix socket `ledger serve`'s anchor process listens on
# (SHA-256 of the stored bytes, entry hash, stream, version, type)
SealedRow = tuple[bytes, bytes, str, int, str]
_HEAD = struct.Struct(">32s32sqHH")
DATAGRAM_BYTES = 60_000  # under the kernel's default maximum for a Unix datagram


def pack(rows: Sequence[SealedRow]) -> list[bytes]:
    """The rows as datagrams, each at most DATAGRAM_BYTES."""
    datagrams: list[bytes] = []
    part = bytearray()
    for key, entry_hash, stream, version, topic in rows:
        names = stream.encode() + topic.encode()
        one = _HEAD.pack(key, entry_hash, version, len(stream.encode()), len(topic.encode()))
        if part and len(part) + len(one) + len(names) > DATAGRAM_BYTES:
            datagrams.append(bytes(part))
            part = bytearray()
        part += one + names
    if part:
        datagrams.append(bytes(part))
    return datagrams


def unpack(datagram: bytes) -> list[SealedRow]:
    rows: list[SealedRow] = []
    at = 0
    while at < len(datagram):
        key, entry_hash, version, stream_size, topic_size = _HEAD.unpack_from(datagram, at)
        at += _HEAD.size
        stream = datagram[at : at + stream_size].decode()
        at += stream_size
        topic = datagram[at : at + topic_size].decode()
        at += topic_size
        rows.append((key, entry_hash, stream, version, topic))
    return rows


class SealedRowsSender:
    """A sealing process's end: `send` never blocks and never raises."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.setblocking(False)

    def send(self, rows: Sequence[SealedRow]) -> None:
        for datagram in pack(rows):
            try:
                self._socket.sendto(datagram, self._path)
            except OSError:  # full, or no anchor listening: it verifies these itself
                return


class SealedRowsReceiver:
    """The anchor process's end: hands each datagram's rows to `remember`
    (its mapper's memory of sealed rows, `SealingMapper.remember_rows`)."""

    def __init__(self, path: Path, remember: Callable[[list[SealedRow]], None]) -> None:
        path.unlink(missing_ok=True)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(str(path))
        os.chmod(path, 0o600)
        self._remember = remember
        threading.Thread(target=self._receive, name="ledger-sealed-rows", daemon=True).start()

    def _receive(self) -> None:
        while True:
            try:
                datagram = self._socket.recv(DATAGRAM_BYTES + 1024)
            except OSError:
                return  # closed
            try:
                rows = unpack(datagram)
            except (struct.error, UnicodeDecodeError):
                log.warning("a malformed datagram of sealed rows was ignored")
                continue
            self._remember(rows)

    def close(self) -> None:
        self._socket.close()
