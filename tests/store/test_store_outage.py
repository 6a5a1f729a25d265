"""The loop `checkpoint --follow` and `projections update --follow` run
through store outages (ledger.store.outage): a transient failure is retried
with a growing pause and said once (and once that the store is back), the
step after an outage starts from a clean slate, and anything else (a failed
check above all) stops the loop."""

from __future__ import annotations

import logging
import sqlite3

import psycopg
import pytest
from eventsourcing.persistence import OperationalError

from ledger.errors import VerificationError
from ledger.store import outage
from ledger.store.outage import describe_outage, disk_full, follow_through_outages


def test_an_outage_is_retried_said_once_and_forgotten_after(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(outage.time, "sleep", pauses.append)
    script: list[BaseException | bool] = [
        True,
        OperationalError("server closed the connection unexpectedly"),
        OperationalError("connection refused"),
        OperationalError("connection refused"),
        False,
        True,
    ]
    calls: list[str] = []

    def step() -> bool:
        calls.append("step")
        item = script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    with caplog.at_level(logging.WARNING, logger=outage.__name__):
        follow_through_outages(
            step, lambda: not script, 0.5, "checkpointer", lambda: calls.append("forget")
        )
    # Growing pauses while the store is away, the poll once it is back and idle.
    assert pauses == [0.2, 0.4, 0.8, 0.5]
    assert calls == ["step", "step", "forget", "step", "forget", "step", "forget", "step", "step"]
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "checkpointer: store unavailable, retrying: server closed the connection unexpectedly",
        "checkpointer: store available again",
    ]


def test_the_pause_stops_growing(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(outage.time, "sleep", pauses.append)

    def step() -> bool:
        raise psycopg.OperationalError("no server")

    follow_through_outages(step, lambda: len(pauses) >= 8, 0.5, "projections")
    assert max(pauses) == outage.MAX_PAUSE and pauses[-1] == outage.MAX_PAUSE


def test_a_failed_check_stops_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outage.time, "sleep", lambda _: None)

    def step() -> bool:
        raise VerificationError("the stored frontier does not hash to the signed root")

    with pytest.raises(VerificationError):
        follow_through_outages(step, lambda: False, 0.5, "checkpointer")


def test_a_full_disk_is_named_whichever_store_says_it() -> None:
    sqlite_full = OperationalError("database or disk is full")
    server_full = OperationalError("could not extend file")
    server_full.__cause__ = psycopg.errors.DiskFull("could not extend file")
    for full in (sqlite_full, server_full, sqlite3.OperationalError("database or disk is full")):
        assert disk_full(full)
        assert describe_outage(full).startswith("its disk is full (")
    gone = OperationalError("server closed the connection unexpectedly\nmore")
    assert not disk_full(gone)
    assert describe_outage(gone) == "server closed the connection unexpectedly"
