"""Failover (issue 22): a primary and its synchronous standby on loopback,
`ledger serve` and `ledger checkpoint --follow` on a store URL naming both
(libpq's host list, read-write target). The primary is killed (`immediate`)
in the middle of a burst of bets and the standby promoted; the same server
and checkpointer processes carry on against it by themselves.

Afterwards every acknowledged bet is in the log exactly once, nothing is
half-written, every checkpoint signed before the failover is in the promoted
store unchanged and the checkpointer has signed past it, and verify passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fault_scenarios import failover


@pytest.mark.postgres
def test_a_burst_survives_failover_to_the_synchronous_standby(tmp_path: Path) -> None:
    outcome = failover(tmp_path)
    assert outcome.lost == 0
    assert outcome.recovery is not None and outcome.recovery < 30
