"""A full disk (issue 22), on both stores: the store's filesystem (a small
tmpfs) fills up under a burst of bets over HTTP and is then freed. While it
is full every bet is answered 503 naming the full disk, with Retry-After; the
same server takes bets again once space is freed; every acknowledged bet is
in the log exactly once and nothing is half-written. `ledger simulate` on the
full disk ends with one line naming it and exit 2; the store verifies, and
takes writes again once space is freed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fault_scenarios import disk_full


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_full_disk_is_named_and_survived(tmp_path: Path, backend: str) -> None:
    outcome = disk_full(tmp_path, backend)
    assert outcome.lost == 0
    assert outcome.recovery is not None and outcome.recovery < 30
