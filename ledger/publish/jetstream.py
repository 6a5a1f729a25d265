"""Publishing the log to a NATS JetStream stream, in log order, at least once.

Why JetStream holds the stream to the log with no gap and no duplicate (the
broker checks it, not only this publisher):

- each message's id (`Nats-Msg-Id`) is its log position: within the stream's
  duplicate window the broker drops a second copy of a position;
- each publish names the id of the message that must be the stream's last
  (`Nats-Expected-Last-Msg-Id`; `Nats-Expected-Last-Sequence: 0` for the
  first): the broker refuses a message that would follow anything but its
  predecessor, so a lost message stops the ones after it instead of leaving
  a hole;
- on a refusal, a time-out, a broker restart or a publisher restart (kill -9
  included) the publisher asks the stream for its last message and goes on
  from the position after it: nothing kept locally, nothing to go stale.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from ledger.errors import ConfigError
from ledger.publish.records import LogMessages, Message
from ledger.store.merkle_log import MerkleLogTables

ACK_TIMEOUT: Final = 10.0  # seconds for a batch's acknowledgements
IN_FLIGHT: Final = 4000  # messages sent and not yet acknowledged
FOLLOW_POLL: Final = 0.2  # seconds between looks at the log's end
RETRY_WAIT: Final = 1.0  # seconds before publishing again after a failure
CONNECT_TIMEOUT: Final = 5.0
DUPLICATE_WINDOW: Final = 3600.0  # seconds the broker remembers message ids


@dataclass(frozen=True)
class Target:
    url: str  # nats://[user:password@]host:port
    stream: str = "LEDGER"
    prefix: str = "ledger"  # subjects: PREFIX.<event type>, e.g. ledger.Round.BetPlaced


def _stop_after_sent() -> int | None:
    """`LEDGER_PUBLISH_STOP_AFTER_SENT=N`: end the process as kill -9 would once N
    messages are sent, their acknowledgements not awaited (a test hook, like
    `ledger archive`'s: the tests that kill the publisher in flight)."""
    value = os.environ.get("LEDGER_PUBLISH_STOP_AFTER_SENT", "")
    return int(value) if value.isdigit() else None


class _Retry(Exception):
    """A batch not acknowledged whole: publish again from the stream's last message."""


def check_target(target: Target) -> None:
    parts = urlsplit(target.url)
    if parts.scheme not in ("nats", "tls") or not parts.hostname:
        raise ConfigError(f"--to {target.url}: a NATS URL (nats://host:4222), not that")
    if not target.stream or any(c in target.stream for c in " \t.*>/\\"):
        raise ConfigError(f"--stream {target.stream!r}: a stream name (no spaces, . * > / \\)")
    tokens = target.prefix.split(".")
    if not all(tokens) or any(c in target.prefix for c in " \t*>"):
        raise ConfigError(f"--prefix {target.prefix!r}: subject tokens (a.b; no spaces, * or >)")


async def publish_log(
    tables: MerkleLogTables,
    target: Target,
    *,
    follow: bool,
    say: Callable[[str], None],
    advance: Callable[[int], None] | None = None,
) -> int:
    """Publish every event after the stream's last message; with `follow`, go on
    as the log grows (until cancelled). The number of messages published."""
    client = await _connect(target.url)
    try:
        stream = client.jetstream()
        await _ensure_stream(stream, target)
        acks = _Acks(client, advance)
        await acks.start()
        while True:
            try:
                await _publish_from_last(tables, stream, acks, target, follow)
                return acks.acknowledged
            except _Retry as exc:
                say(f"publishing again from the stream's last message ({exc})")
                await asyncio.sleep(RETRY_WAIT)
    finally:
        await client.close()


async def _connect(url: str) -> Any:
    """A connection that reconnects through broker restarts, once a first
    attempt (no retries) showed the broker answers and takes the credentials:
    a client told to reconnect forever would wait forever on a wrong URL."""
    import nats
    from nats.errors import Error, NoServersError

    failures: list[str] = []

    async def failed(exc: Exception) -> None:
        failures.append(str(exc) or type(exc).__name__)

    try:
        probe = await nats.connect(
            url,
            connect_timeout=CONNECT_TIMEOUT,
            allow_reconnect=False,
            max_reconnect_attempts=1,  # (0 is "for ever" to the client)
            reconnect_time_wait=0.1,
            error_cb=failed,
        )
    except (TimeoutError, NoServersError, OSError) as exc:
        raise ConfigError(f"the broker at {_shown(url)} does not answer ({exc})") from None
    except Error as exc:
        said = " ".join([str(exc), *failures]).lower()
        what = "refused the credentials" if "authoriz" in said else f"refused us ({exc})"
        raise ConfigError(f"the broker at {_shown(url)} {what}") from None
    await probe.close()
    return await nats.connect(
        url,
        connect_timeout=CONNECT_TIMEOUT,
        allow_reconnect=True,
        max_reconnect_attempts=-1,  # through broker restarts, however long
        reconnect_time_wait=0.5,
        error_cb=_quiet,  # (the client prints a traceback a failed attempt otherwise)
    )


async def _quiet(exc: Exception) -> None:
    """A lost connection: the client reconnects, and a batch it cut is sent again."""


def _shown(url: str) -> str:
    """The URL without its password (error lines go to logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


async def _ensure_stream(stream: Any, target: Target) -> None:
    from nats.js.api import StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    subjects = [f"{target.prefix}.>"]
    try:
        info = await stream.stream_info(target.stream)
    except NotFoundError:
        config = StreamConfig(
            name=target.stream,
            subjects=subjects,
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW,
        )
        await stream.add_stream(config)
        return
    if subjects[0] not in (info.config.subjects or []):
        raise ConfigError(
            f"the stream {target.stream} does not take the subjects {subjects[0]} "
            f"(it takes {', '.join(info.config.subjects or [])})"
        )


async def last_published(stream: Any, name: str) -> int | None:
    """The log position of the stream's last message (None: the stream is empty)."""
    info = await stream.stream_info(name)
    if info.state.last_seq == 0 or info.state.messages == 0:
        return None
    message = await stream.get_msg(name, seq=info.state.last_seq)
    headers = message.headers or {}
    held = headers.get("Nats-Msg-Id")
    if held is None or not held.isdigit() or "Ledger-Previous-Position" not in headers:
        raise ConfigError(
            f"the stream {name}'s last message is not a ledger event (its id not a position): "
            "publish to a stream of its own"
        )
    return int(held)


async def _publish_from_last(
    tables: MerkleLogTables,
    stream: Any,
    acks: _Acks,
    target: Target,
    follow: bool,
) -> None:
    from nats.errors import Error

    try:
        last = await last_published(stream, target.stream)
    except (TimeoutError, OSError, Error) as exc:
        raise _Retry(f"the stream did not answer: {exc or type(exc).__name__}") from None
    log = LogMessages(tables)
    after_id = log.start_id(last)
    position = 0 if last is None else last + 1
    previous = last
    acks.restart()
    while True:
        messages, after_id, read = log.batch(after_id, position, previous)
        if not read:
            await acks.wait()  # the log's end: everything out acknowledged
            if not follow:
                return
            await asyncio.sleep(FOLLOW_POLL)
            continue
        await _send(acks, target, messages, _stop_after_sent())
        position += read
        if messages:
            previous = messages[-1].position


class _Acks:
    """The broker's acknowledgements, on one subscription. Only a batch's last
    message asks for one (its reply subject names its position): every message
    names its predecessor as the stream's last, so the broker stores the last
    only after all the others, in order, and one acknowledgement proves the
    batch; a message refused or lost makes the ones after it refused, the last
    one's answer says so, and the batch goes again. Up to `IN_FLIGHT` messages
    are out at once, so the broker stores one batch while the next is sent."""

    def __init__(self, client: Any, advance: Callable[[int], None] | None) -> None:
        self.client = client
        self.inbox = client.new_inbox()
        self.acknowledged = 0  # messages, across tries
        self._advance = advance
        self._waiting: dict[int, int] = {}  # a batch's last position -> its messages
        self._outstanding = 0
        self._refused: list[str] = []
        self._limit = 0
        self._room = asyncio.Event()

    async def start(self) -> None:
        await self.client.subscribe(f"{self.inbox}.*", cb=self._answer)

    def restart(self) -> None:
        """A new try: answers to the batches of an earlier one are ignored."""
        self._waiting, self._outstanding, self._refused = {}, 0, []

    def add(self, last: int, messages: int) -> None:
        self._waiting[last] = messages
        self._outstanding += messages

    async def _answer(self, message: Any) -> None:
        position = int(message.subject.rpartition(".")[2])
        if position not in self._waiting:
            return  # an answer to an earlier try
        if b'"error"' in message.data:
            self._refused.append(f"position {position}: {_error_of(message.data)}")
            self._room.set()
            return
        messages = self._waiting.pop(position)
        self._outstanding -= messages
        self.acknowledged += messages
        if self._advance is not None:
            self._advance(messages)
        if self._outstanding <= self._limit:
            self._room.set()

    async def wait(self, limit: int = 0) -> None:
        """Until at most `limit` messages are unacknowledged; `_Retry` for a
        refusal or a time-out."""
        self._limit = limit
        if self._outstanding > limit and not self._refused:
            self._room.clear()
            try:
                await asyncio.wait_for(self._room.wait(), timeout=ACK_TIMEOUT)
            except TimeoutError:
                raise _Retry(f"{self._outstanding} messages not acknowledged in time") from None
        if self._refused:
            raise _Retry(f"the broker refused {self._refused[0]}")


def _error_of(data: bytes) -> str:
    try:
        return str(json.loads(data)["error"].get("description", "refused"))
    except (ValueError, KeyError, AttributeError, TypeError):
        return "refused"


async def _send(
    acks: _Acks, target: Target, messages: list[Message], stop_after: int | None = None
) -> None:
    """Send a batch, once fewer than `IN_FLIGHT` messages are unacknowledged;
    `_Retry` when an acknowledgement is missing or a refusal came."""
    from nats.errors import Error

    await acks.wait(IN_FLIGHT)
    if not messages:
        return
    acks.add(messages[-1].position, len(messages))
    last = messages[-1]
    try:
        for message in messages:
            previous = -1 if message.previous is None else message.previous
            headers = {  # (the message id is the position: one header less a message)
                "Nats-Msg-Id": str(message.position),
                "Ledger-Previous-Position": str(previous),  # -1: none
            }
            if message.previous is None:
                headers["Nats-Expected-Last-Sequence"] = "0"
            else:
                headers["Nats-Expected-Last-Msg-Id"] = str(previous)
            await acks.client.publish(
                f"{target.prefix}.{message.type}",
                message.body,
                reply=f"{acks.inbox}.{message.position}" if message is last else "",
                headers=headers,
            )
            if stop_after is not None and message.position + 1 >= stop_after:
                await acks.client.flush()  # (on the wire, then gone as kill -9 leaves them)
                os._exit(137)
    except (Error, OSError) as exc:
        raise _Retry(str(exc) or type(exc).__name__) from None


def rate_line(published: int, started: float) -> str:
    seconds = max(time.monotonic() - started, 1e-9)
    return f"{published} events published in {seconds:.1f} s ({published / seconds:,.0f}/s)"
