"""docs/publish.md's examples run as a user types them, on the machine's own
NATS server (127.0.0.1:4222): the store published, the page's consumer takes
every event in order with each signature verified, and fails on a message
whose envelope was forged. The stream and subjects get a name of the test's
own (JetStream refuses two streams whose subjects overlap)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.doc_pages import blocks, run_block, user_env
from tests.nats_support import SYSTEM_NATS, delete_stream, on_stream, stream_messages

PAGE = Path(__file__).resolve().parents[2] / "docs" / "publish.md"


def test_every_runnable_block_of_the_publish_page_runs(tmp_path: Path) -> None:
    name = f"DOCS{uuid.uuid4().hex[:10].upper()}"
    env = user_env("publish passphrase")

    def own(body: str) -> str:
        return body.replace(
            "--stream LEDGER --prefix ledger", f"--stream {name} --prefix {name.lower()}"
        ).replace(
            '"ledger.>", durable="back-office", stream="LEDGER"',
            f'"{name.lower()}.>", durable="back-office", stream="{name}"',
        )

    try:
        outputs = [run_block(lang, own(body), tmp_path, env) for lang, body in blocks(PAGE)]
        published, consumed = [out for out in outputs if out]
        size = len(stream_messages(SYSTEM_NATS, name))
        assert size > 20 and f"{size} events published" in published
        assert consumed.strip() == f"{size} events taken in order, each signature verified"
        assert name.lower() in published or name in published
        consumer = own(next(body for lang, body in blocks(PAGE) if lang == "python"))
        _forge_the_last_message(name)
        # A new consumer from the start: every honest message passes, the forged one does not.
        forged = run_block_failing(consumer.replace("back-office", "second-reader"), tmp_path, env)
        assert "BadSignatureError" in forged, forged
    finally:
        delete_stream(SYSTEM_NATS, name)


def _forge_the_last_message(name: str) -> None:
    """A copy of the last message added at the stream's end as the next position,
    a bit of its signature flipped (what a broker's insider could do)."""
    import base64
    import json

    _, headers, body = stream_messages(SYSTEM_NATS, name)[-1]
    record = json.loads(body)
    stored = bytearray(base64.b64decode(record["envelope"]))
    stored[6 + int.from_bytes(stored[4:6], "big") + 5] ^= 1  # a bit of its signature
    record["envelope"] = base64.b64encode(bytes(stored)).decode()
    position = int(headers["Nats-Msg-Id"])

    async def add(js: Any) -> None:
        await js.publish(
            f"{name.lower()}.Forged",
            json.dumps(record).encode(),
            headers={"Nats-Msg-Id": str(position + 1), "Ledger-Previous-Position": str(position)},
        )

    on_stream(SYSTEM_NATS, add)


def run_block_failing(body: str, cwd: Path, env: dict[str, str]) -> str:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", body], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0, done.stdout
    return done.stderr
