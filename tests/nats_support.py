"""A NATS server of the test's own (JetStream on, its store in the test's
directory, on a port of the worker's), stopped and started again as a
broker restart does; and a stream read back whole, message by message."""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.ports import free_port

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
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


def stream_messages(url: str, stream: str) -> list[tuple[int, dict[str, str], bytes]]:
    """Every message of `stream`: (sequence, headers, body), in stream order."""

    async def read() -> list[tuple[int, dict[str, str], bytes]]:
        import nats

        client = await nats.connect(url)
        try:
            js = client.jetstream()
            info = await js.stream_info(stream)
            if info.state.messages == 0:
                return []
            found = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                message: Any = await js.get_msg(stream, seq=seq)
                found.append((seq, dict(message.headers or {}), bytes(message.data)))
            return found
        finally:
            await client.close()

    return asyncio.run(read())


def stream_exists(url: str, stream: str) -> bool:
    async def look() -> bool:
        import nats
        from nats.js.errors import NotFoundError

        client = await nats.connect(url)
        try:
            await client.jetstream().stream_info(stream)
            return True
        except NotFoundError:
            return False
        finally:
            await client.close()

    return asyncio.run(look())


def delete_stream(url: str, stream: str) -> None:
    async def delete() -> None:
        import nats
        from nats.js.errors import NotFoundError

        client = await nats.connect(url)
        try:
            await client.jetstream().delete_stream(stream)
        except NotFoundError:
            pass
        finally:
            await client.close()

    asyncio.run(delete())
