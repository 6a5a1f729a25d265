"""A NATS server of the test's own (JetStream on, its store in the test's
directory, on a port of the worker's), stopped and started again as a
broker restart does; and a stream read back whole, message by message."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.ports import free_port

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
T = TypeVar("T")
SYSTEM_NATS = "nats://127.0.0.1:4222"  # the machine's own (docs examples use it)


class NatsServer:
    def __init__(self, directory: Path, credentials: tuple[str, str] | None = None) -> None:
        self.directory = directory
        self.port = free_port()
        self.credentials = credentials
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> NatsServer:
        auth = (
            ["--user", self.credentials[0], "--pass", self.credentials[1]]
            if self.credentials
            else []
        )
        command = [
            NATS_SERVER,
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-js",
            "-sd",
            str(self.directory),
            *auth,
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                assert self.process.poll() is None, "nats-server ended at start"
                assert time.monotonic() < deadline, "nats-server did not listen within 30 s"
                time.sleep(0.05)

    def stop(self, how: signal.Signals = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(how)
            self.process.wait(timeout=30)
        self.process = None


def on_stream(url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """`work(jetstream)` on a connection of its own to `url`, closed after."""

    async def run() -> T:
        import nats

        client = await nats.connect(url)
        try:
            return await work(client.jetstream())
        finally:
            await client.close()

    return asyncio.run(run())


def stream_messages(url: str, stream: str) -> list[tuple[int, dict[str, str], bytes]]:
    """Every message of `stream`: (sequence, headers, body), in stream order."""

    async def read(js: Any) -> list[tuple[int, dict[str, str], bytes]]:
        info = await js.stream_info(stream)
        if info.state.messages == 0:
            return []
        found = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            message: Any = await js.get_msg(stream, seq=seq)
            found.append((seq, dict(message.headers or {}), bytes(message.data)))
        return found

    return on_stream(url, read)


def stream_exists(url: str, stream: str) -> bool:
    from nats.js.errors import NotFoundError

    async def look(js: Any) -> bool:
        try:
            await js.stream_info(stream)
            return True
        except NotFoundError:
            return False

    return on_stream(url, look)


def delete_stream(url: str, stream: str) -> None:
    from nats.js.errors import NotFoundError

    async def delete(js: Any) -> None:
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(stream)

    on_stream(url, delete)
