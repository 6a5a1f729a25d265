"""Restarts and dropped connections (issue 22): one `ledger serve` under one
burst of bets on a private PostgreSQL cluster, which is restarted `-m fast`,
restarted `-m immediate`, and has every client backend terminated
(`pg_terminate_backend`), in turn. The server recovers each time without a
restart of its own: a command in flight is retried by the node (where that is
safe: see docs/operations.md) or answered 503 with Retry-After, and the
client's retry with the same Idempotency-Key gets the first result.
Afterwards every acknowledged bet is in the log exactly once, nothing is
half-written, and verify passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fault_scenarios import RESTARTS, restarts


@pytest.mark.postgres
def test_a_burst_survives_restarts_and_terminated_backends(tmp_path: Path) -> None:
    outcomes = restarts(tmp_path)
    assert len(outcomes) == len(RESTARTS)
    for outcome in outcomes:
        assert outcome.lost == 0, outcome
        assert outcome.recovery is not None and outcome.recovery < 30, outcome
