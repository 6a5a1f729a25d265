"""The event feed: the log in the export format from any position, each event
with its leaf index, pages and the stream agreeing; a consumer killed
mid-stream while writers write resumes with no gap and no duplicate (both
stores)."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.proofs import verify_inclusion_bundle
from ledger.export.records import event_record
from ledger.node import Node
from tests import local_http
from tests.http_api.test_http_serve import serving, token
from tests.http_support import Api, make_api

ROOT = Path(__file__).resolve().parents[2]
CONSUMER = ROOT / "tests" / "feed_consumer.py"


def consumed_lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    made = make_api(node, tmp_path)
    for _ in range(3):
        player = made.wallet(1_000)
        round_id = made.round(made.table())
        made.ok(
            f"/v1/rounds/{round_id}/bets",
            {"account_id": player, "bet": {"on": "heads"}, "stake": 100},
        )
    return made


def all_rows(node: Node) -> list[Any]:
    rows: list[Any] = []
    after = 0
    while batch := node.app.tables.rows_after(after, 500):
        rows += batch
        after = batch[-1][0]
    return rows


def test_pages_follow_the_log_in_the_export_format_with_leaf_indexes(api: Api) -> None:
    rows = all_rows(api.node)
    seen: list[dict[str, Any]] = []
    after = None
    while True:
        params = {"limit": 4} | ({} if after is None else {"after": after})
        page = api.get("/v1/events", **params).json()
        if not page["events"]:
            assert page["next_after"] == after
            break
        seen += page["events"]
        after = page["next_after"]
    assert [r["position"] for r in seen] == list(range(len(rows)))
    for record, row in zip(seen, rows, strict=True):
        assert base64.b64decode(record["envelope"]) == bytes(row[4])
        expected = event_record(record["position"], bytes(row[4]), record["currency"])
        assert {k: v for k, v in record.items() if k != "leaf_index"} == expected
        assert record["leaf_index"] is None  # nothing checkpointed yet
    bets = [r for r in seen if r["type"] == "Round.BetPlaced"]
    assert len(bets) == 3 and all(r["currency"] == "EUR" for r in bets)


def test_leaf_indexes_and_proofs_of_what_was_read(api: Api) -> None:
    api.node.checkpointer().catch_up()
    records = api.get("/v1/events", limit=1000).json()["events"]
    assert [r["leaf_index"] for r in records] == [r["position"] for r in records]
    chosen = records[len(records) // 2]
    bundle = api.get("/v1/proofs/inclusion", stream=chosen["stream"], version=chosen["version"])
    assert bundle.json()["leaf_index"] == chosen["leaf_index"]
    verify_inclusion_bundle(bundle.json(), api.node.keyring)


def test_the_stream_is_the_pages_and_bad_positions_are_refused(api: Api) -> None:
    pages = api.get("/v1/events", limit=1000).json()["events"]
    streamed = api.get("/v1/events/stream")
    assert streamed.headers["content-type"].startswith("application/x-ndjson")
    assert [json.loads(line) for line in streamed.text.splitlines()] == pages
    tail = api.get("/v1/events/stream", after=len(pages) - 3).text.splitlines()
    assert [json.loads(line) for line in tail] == pages[-2:]
    assert api.get("/v1/events", after=len(pages) - 1).json() == {
        "events": [],
        "next_after": len(pages) - 1,
    }
    past = api.get("/v1/events", after=len(pages))
    assert past.status_code == 400 and "past the end" in past.json()["detail"]
    assert api.get("/v1/events/stream", after=len(pages) + 5).status_code == 400
    assert api.get("/v1/events", limit=0).status_code == 422
    assert api.get("/v1/events", after=-1).status_code == 422


def anchored(base: str, token: str) -> bool:
    """Whether the log's first event is under a checkpoint yet (it has a leaf index)."""
    first = local_http.get(
        f"{base}/v1/events", params={"limit": 1}, headers={"Authorization": f"Bearer {token}"}
    )
    assert first.status_code == 200, first.text
    events = first.json()["events"]
    return bool(events) and events[0]["leaf_index"] is not None


def test_a_consumer_killed_mid_stream_resumes_without_gap_or_duplicate(
    store_url: str, tmp_path: Path
) -> None:
    with serving(tmp_path, "--store", store_url) as (base, _):
        cashier, auditor = token(tmp_path, "cashier"), token(tmp_path, "auditor")
        writing = threading.Event()
        writing.set()
        written = [0]

        def writer() -> None:
            with local_http.client(base_url=base, timeout=60) as http:
                headers = {"Authorization": f"Bearer {cashier}"}
                n = 0
                while writing.is_set():
                    n += 1
                    response = http.post(
                        "/v1/accounts",
                        json={"owner": f"w{n}", "currency": "EUR"},
                        headers={**headers, "Idempotency-Key": f"acc-{n}"},
                    )
                    assert response.status_code == 201, response.text
                    written[0] += 1

        writers = [threading.Thread(target=writer) for _ in range(2)]
        for thread in writers:
            thread.start()
        out = tmp_path / "consumed.jsonl"
        try:
            for _ in range(3):  # start it, let it read some events, kill it mid-stream
                had = consumed_lines(out)
                consumer = subprocess.Popen(
                    [sys.executable, str(CONSUMER), base, auditor, str(out)], cwd=ROOT
                )
                deadline = time.monotonic() + 60
                while consumed_lines(out) < had + 5:
                    assert consumer.poll() is None, "the consumer stopped by itself"
                    assert time.monotonic() < deadline, "the consumer read nothing in 60 s"
                    time.sleep(0.05)
                consumer.send_signal(signal.SIGKILL)
                consumer.wait()
            # Keep writing until the server's background anchor (1 s after a
            # write) has checkpointed some of it: on a fast machine the kills
            # above are over sooner than that.
            deadline = time.monotonic() + 60
            while not anchored(base, auditor):
                assert time.monotonic() < deadline, "the server anchored nothing in 60 s"
                time.sleep(0.1)
        finally:
            writing.clear()
            for thread in writers:
                thread.join()
        assert written[0] > 0
        # The last run: resume and drain to the end of the (now still) log.
        size = local_http.get(
            f"{base}/v1/events", params={"limit": 1}, headers={"Authorization": f"Bearer {auditor}"}
        )
        assert size.status_code == 200
        final = subprocess.Popen([sys.executable, str(CONSUMER), base, auditor, str(out)], cwd=ROOT)
        deadline = time.monotonic() + 60
        expected = None
        while time.monotonic() < deadline:
            log = local_http.get(
                f"{base}/v1/events/stream",
                headers={"Authorization": f"Bearer {auditor}"},
                timeout=60,
            ).text.splitlines()
            expected = [json.loads(line) for line in log]
            text = out.read_text()
            if text.endswith("\n") and len(text.splitlines()) >= len(expected):
                break
            time.sleep(0.3)
        final.send_signal(signal.SIGKILL)
        final.wait()
    consumed = [json.loads(line) for line in out.read_text().splitlines()]
    assert expected is not None and len(expected) > 6  # the writers wrote while it was killed
    assert [r["position"] for r in consumed] == list(range(len(expected)))  # no gap, no duplicate
    # Every record is the log's; the leaf index appears once the server's
    # background anchoring has put the event in the Merkle log.
    assert [{**r, "leaf_index": None} for r in consumed] == [
        {**r, "leaf_index": None} for r in expected
    ]
    assert all(r["leaf_index"] in (None, r["position"]) for r in consumed + expected)
    assert any(r["leaf_index"] is not None for r in expected)
