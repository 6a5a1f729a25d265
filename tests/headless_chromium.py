"""A page opened in Debian's headless Chromium, driven over the DevTools
protocol through a pipe (`--remote-debugging-pipe`: JSON messages separated
by NUL bytes on file descriptors 3 and 4), so the tests need no WebSocket
client and no browser download: only the `chromium` package.

`open_page` loads a file, waits for its load event, and returns what a test
checks: every console message and uncaught exception (with its level), every
log entry (a failed resource load is one), each image's natural size, and a
PNG screenshot of the whole page.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TIMEOUT = 60.0


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Page:
    console: list[tuple[str, str]] = field(default_factory=list)  # (level, text)
    images: list[dict[str, Any]] = field(default_factory=list)  # alt, naturalWidth/Height
    screenshot: bytes = b""

    @property
    def errors(self) -> list[tuple[str, str]]:
        return [(level, text) for level, text in self.console if level in ("error", "exception")]


class _Pipe:
    def __init__(self, write_fd: int, read_fd: int) -> None:
        self._write, self._read = write_fd, read_fd
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._receive()
            self.events.append(event)
            if event.get("method") == method:
                return event

    def _receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        parsed: dict[str, Any] = json.loads(message)
        return parsed


def _console_entries(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(
                str(arg.get("value", arg.get("description", ""))) for arg in params["args"]
            )
            found.append((params["type"], text))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            found.append(
                ("exception", str(details.get("exception", {}).get("description", details)))
            )
        elif method == "Log.entryAdded":
            entry = params["entry"]
            found.append((entry["level"], f"{entry['source']}: {entry['text']}"))
    return found


IMAGES = (
    "JSON.stringify(Array.from(document.images).map(i => "
    "({alt: i.alt, complete: i.complete, naturalWidth: i.naturalWidth, "
    "naturalHeight: i.naturalHeight})))"
)


def open_page(path: Path, width: int = 1200) -> Page:
    binary = chromium()
    if binary is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()

    def descriptors() -> None:  # in the child: the pipe on 3 (commands) and 4 (replies)
        commands, replies = os.dup(to_browser_r), os.dup(from_browser_w)  # out of the way
        os.dup2(commands, 3)
        os.dup2(replies, 4)

    process = subprocess.Popen(
        [
            binary,
            "--headless",
            "--no-sandbox",  # root in CI containers
            "--disable-gpu",
            "--remote-debugging-pipe",
            "--no-first-run",
            f"--user-data-dir={path.parent / '.chromium-profile'}",
            "about:blank",
        ],
        preexec_fn=descriptors,
        pass_fds=(3, 4),  # kept open in the child (set by `descriptors`)
        stdout=subprocess.DEVNULL,
        stderr=None if os.environ.get("CHROMIUM_DEBUG") else subprocess.DEVNULL,
    )
    os.close(to_browser_r)
    os.close(from_browser_w)
    pipe = _Pipe(to_browser_w, from_browser_r)
    try:
        target = pipe.send("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            pipe.send(domain, session)
        pipe.send(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=width,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        pipe.send("Page.navigate", session, url=path.resolve().as_uri())
        pipe.wait_for("Page.loadEventFired")
        images = pipe.send("Runtime.evaluate", session, expression=IMAGES, returnByValue=True)
        shot = pipe.send(
            "Page.captureScreenshot", session, format="png", captureBeyondViewport=True
        )
        page = Page(
            console=_console_entries(pipe.events),
            images=json.loads(images["result"]["value"]),
            screenshot=base64.b64decode(shot["data"]),
        )
        with contextlib.suppress(RuntimeError):  # it may close the pipe before answering
            pipe.send("Browser.close")
        return page
    finally:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        os.close(to_browser_w)
        os.close(from_browser_r)
