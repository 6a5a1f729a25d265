"""`ledger publish` (issue 41, item 6) against a real NATS JetStream server, on
both stores: every event in log order, each message keyed by its position
and verifiable by a consumer from the keyring alone; resumed with no gap and
no duplicate after the publisher is killed with messages in flight, killed
at a random moment while the log grows, and across a broker restart; a slow
consumer loses nothing and holds up nothing; bad input is one line, exit 2,
nothing published."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.crypto.envelope import SignerCheck, open_envelope
from ledger.crypto.keys import Keyring
from ledger.crypto.signing import verify_signature
from tests.conftest import ledger_cli
from tests.nats_support import NatsServer, on_stream, stream_exists, stream_messages
from tests.reproducible import reproducible_session

LEDGER = Path(sys.executable).parent / "ledger"
WAIT = 120  # seconds: a loaded machine, not a speed held to anything


def _simulate(store_url: str, keys: Path, rounds: int, players: int = 30) -> None:
    with ledger_cli(store_url, keys) as run, reproducible_session(rounds) as seeds:
        assert run("simulate", "--rounds", rounds, "--players", players, "--tables", 1, *seeds) == 0


def _publish(
    store_url: str, keys: Path, url: str, stream: str, *more: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    command = [str(LEDGER), "--store", store_url, "--keys", str(keys), "publish", "--to", url]
    command += ["--stream", stream, "--prefix", stream.lower(), *more]
    return subprocess.Popen(
        command,
        env={**os.environ, "LEDGER_PROGRESS_INTERVAL": "off", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _done(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=WAIT)
    return process.returncode, out, err


def _log_size(store_url: str, keys: Path) -> int:
    from ledger.casino.opened import open_ledger

    ledger = open_ledger(store_url, str(keys), passphrase=None, writable=False)
    try:
        size, _ = ledger.node.app.tables.event_count()
        return int(size)
    finally:
        ledger.node.close()


def _keyring(store_url: str, keys: Path) -> Keyring:
    from ledger.casino.opened import open_ledger

    ledger = open_ledger(store_url, str(keys), passphrase=None, writable=False)
    try:
        return ledger.node.app.current_keyring()
    finally:
        ledger.node.close()


def _held_whole(url: str, stream: str, size: int, keyring: Keyring) -> None:
    """The stream is the log: positions 0..size-1 once each, in order, each
    message's predecessor named, its subject its signed type, and its envelope
    verifying against the keyring (what a consumer checks with no store)."""
    messages = stream_messages(url, stream)
    positions = [int(headers["Nats-Msg-Id"]) for _, headers, _ in messages]
    assert positions == list(range(size)), "a gap, a duplicate or another order"
    signer = SignerCheck(keyring)
    for seq, headers, body in messages:
        record = json.loads(body)
        assert record["position"] == int(headers["Nats-Msg-Id"]) == seq - 1
        assert int(headers["Ledger-Previous-Position"]) == record["position"] - 1
        state = base64.b64decode(record["envelope"])
        envelope = open_envelope(state, stream=record["stream"], version=record["version"])
        assert (envelope.stream, envelope.version) == (record["stream"], record["version"])
        public_key = signer.check_signer(envelope, stream=envelope.stream, version=envelope.version)
        assert verify_signature(public_key, envelope.signed_message, envelope.signature)


@pytest.fixture
def broker(tmp_path: Path) -> NatsServer:
    server = NatsServer(tmp_path / "jetstream").start()
    yield server  # type: ignore[misc]
    server.stop()


def test_every_event_is_published_in_log_order_and_verifies(
    tmp_path: Path, store_url: str, broker: NatsServer
) -> None:
    keys = tmp_path / "keys"
    _simulate(store_url, keys, 3)
    code, out, err = _done(_publish(store_url, keys, broker.url, "LEDGER"))
    assert code == 0 and "Traceback" not in err, err
    size = _log_size(store_url, keys)
    assert f"{size} events published" in out
    _held_whole(broker.url, "LEDGER", size, _keyring(store_url, keys))
    subjects = {
        headers.get("Nats-Msg-Id") for _, headers, _ in stream_messages(broker.url, "LEDGER")
    }
    assert len(subjects) == size
    _simulate(store_url, keys, 2)  # the log grows: only what is new goes out
    code, out, err = _done(_publish(store_url, keys, broker.url, "LEDGER"))
    grown = _log_size(store_url, keys)
    assert code == 0 and f"{grown - size} events published" in out, (out, err)
    _held_whole(broker.url, "LEDGER", grown, _keyring(store_url, keys))


def test_a_publisher_killed_with_messages_in_flight_resumes_with_no_gap(
    tmp_path: Path, store_url: str, broker: NatsServer
) -> None:
    keys = tmp_path / "keys"
    _simulate(store_url, keys, 32, players=40)
    size = _log_size(store_url, keys)
    assert size > 1500, size
    for stop_after in ("700", "1500"):  # inside the first batch, then the second
        killed = _publish(
            store_url, keys, broker.url, "LEDGER",
            env={"LEDGER_PUBLISH_STOP_AFTER_SENT": stop_after},
        )  # fmt: skip
        assert _done(killed)[0] == 137
        held = len(stream_messages(broker.url, "LEDGER"))
        assert held < size, "the kill came after everything was published"
    code, _, err = _done(_publish(store_url, keys, broker.url, "LEDGER"))
    assert code == 0, err
    _held_whole(broker.url, "LEDGER", size, _keyring(store_url, keys))


def test_a_publisher_killed_at_random_while_the_log_grows_leaves_no_gap(
    tmp_path: Path, store_url: str, broker: NatsServer
) -> None:
    keys = tmp_path / "keys"
    _simulate(store_url, keys, 4)
    for delay in (0.3, 1.1, 2.0):  # kill -9 wherever it happens to be
        follower = _publish(store_url, keys, broker.url, "LEDGER", "--follow")
        _simulate(store_url, keys, 3)
        time.sleep(delay)
        follower.send_signal(signal.SIGKILL)
        follower.wait(timeout=WAIT)
    code, _, err = _done(_publish(store_url, keys, broker.url, "LEDGER"))
    assert code == 0, err
    _held_whole(broker.url, "LEDGER", _log_size(store_url, keys), _keyring(store_url, keys))


def test_a_broker_restart_mid_stream_loses_nothing(
    tmp_path: Path, store_url: str, broker: NatsServer
) -> None:
    keys = tmp_path / "keys"
    _simulate(store_url, keys, 8)
    follower = _publish(store_url, keys, broker.url, "LEDGER", "--follow")
    try:
        _until(
            lambda: stream_exists(broker.url, "LEDGER") and stream_messages(broker.url, "LEDGER")
        )
        broker.stop(signal.SIGKILL)  # the broker dies mid-stream
        _simulate(store_url, keys, 4)  # the log goes on meanwhile
        time.sleep(1.5)
        broker.start()  # same port, same store
        size = _log_size(store_url, keys)
        _until(lambda: len(stream_messages(broker.url, "LEDGER")) >= size)
    finally:
        follower.send_signal(signal.SIGINT)
        _, _, err = _done(follower)
    assert "Traceback" not in err, err
    _held_whole(broker.url, "LEDGER", size, _keyring(store_url, keys))


def test_a_slow_consumer_loses_nothing_and_holds_up_nothing(
    tmp_path: Path, store_url: str, broker: NatsServer
) -> None:
    """A durable consumer that takes a message at a time, slowly: the publisher
    finishes without waiting for it, and it then reads every event, in order."""
    keys = tmp_path / "keys"
    _simulate(store_url, keys, 4)
    size = _log_size(store_url, keys)

    async def consume() -> list[int]:
        import nats

        client = await nats.connect(broker.url)
        try:
            js = client.jetstream()
            while True:  # the publisher makes the stream
                try:
                    await js.stream_info("LEDGER")
                    break
                except Exception:
                    await asyncio.sleep(0.05)
            pull = await js.pull_subscribe("ledger.>", durable="slow", stream="LEDGER")
            seen: list[int] = []
            while len(seen) < size:
                for message in await pull.fetch(1 if len(seen) < 20 else 200, timeout=WAIT):
                    seen.append(int(message.headers["Nats-Msg-Id"]))
                    await message.ack()
                if len(seen) < 20:
                    await asyncio.sleep(0.05)  # slow, for a while
            return seen
        finally:
            await client.close()

    publisher = _publish(store_url, keys, broker.url, "LEDGER")
    seen = asyncio.run(consume())
    code, out, err = _done(publisher)
    assert code == 0 and f"{size} events published" in out, err
    assert seen == list(range(size))


def _until(found: Callable[[], object]) -> None:
    """Poll `found` until it is truthy; a broker still starting (an API error
    while JetStream recovers its store) is "not yet"."""
    from nats.errors import Error

    deadline = time.monotonic() + WAIT
    while True:
        try:
            if found():
                return
        except (Error, OSError):
            pass
        assert time.monotonic() < deadline, "not within the wait"
        time.sleep(0.1)


def _stream_of_others(url: str, name: str, subjects: str, message: bytes | None) -> None:
    """A stream another system made on the broker, with a message of its own or none."""

    async def make(js: Any) -> None:
        await js.add_stream(name=name, subjects=[subjects])
        if message is not None:
            await js.publish(subjects.replace(">", "x"), message)

    on_stream(url, make)


def test_bad_input_is_one_line_and_publishes_nothing(
    tmp_path: Path, store_url: str, broker: NatsServer
) -> None:
    keys = tmp_path / "keys"
    _simulate(store_url, keys, 1)
    guarded = NatsServer(tmp_path / "guarded", credentials=("ledger", "right")).start()
    try:
        name = f"T{uuid.uuid4().hex[:8]}"
        cases = [
            (
                guarded.url.replace("nats://", "nats://ledger:wrong@"),
                name,
                "refused the credentials",
            ),
            ("nats://127.0.0.1:1", name, "does not answer"),
            ("http://127.0.0.1:4222", name, "a NATS URL"),
            (broker.url, "a.b", "a stream name"),
            (broker.url, "", "a stream name"),
        ]
        _stream_of_others(broker.url, "OTHER", "elsewhere.>", None)
        _stream_of_others(broker.url, "FOREIGN", "foreign.>", b"not a ledger's")
        cases += [
            (broker.url, "OTHER", "does not take the subjects"),
            (broker.url, "FOREIGN", "is not a ledger event"),
        ]
        for url, stream, said in cases:
            code, out, err = _done(_publish(store_url, keys, url, stream))
            assert code == 2, (url, stream, err)
            assert err.startswith("ledger: error: ") and err.count("\n") == 1, err
            assert said in err and out == ""
            assert "wrong" not in err  # a password is never shown
        assert not stream_exists(broker.url, name)
        assert len(stream_messages(broker.url, "FOREIGN")) == 1  # its own message alone
        assert stream_messages(broker.url, "OTHER") == []
    finally:
        guarded.stop()
