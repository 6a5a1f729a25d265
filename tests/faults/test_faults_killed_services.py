"""Killed services (issue 22): under a burst of bets on `ledger serve
--workers 2`, the checkpointer (`checkpoint --follow`), the projection
follower (`projections update --follow`) and one HTTP worker are each killed
with SIGKILL and restarted. The unanchored window stays within its bound,
the projections resume exactly where they stopped (verify --projections
rebuilds them from the log and finds the stored rows equal), and no
acknowledged request is lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fault_scenarios import SERVICE_NAMES, killed_services


@pytest.mark.postgres
def test_killed_services_resume_and_lose_nothing(tmp_path: Path) -> None:
    outcomes = killed_services(tmp_path)
    assert [o.fault for o in outcomes] == list(SERVICE_NAMES.values())
    for outcome in outcomes:
        assert outcome.lost == 0, outcome
        assert outcome.recovery is not None, outcome
