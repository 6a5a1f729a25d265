"""Where the archive's envelope checks run (`ledger.archive.envelopes`): in
worker processes for a log of `WORKERS_FROM` events or more, in the command's
own process below that (a worker's start costs more than it saves there).
Both ways write the same archive and refuse the same edits, on both stores;
the other archive tests run on small logs, so this file is where the workers'
way is held to the other."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ledger.archive import envelopes
from ledger.archive.check import check_archive
from ledger.archive.files import EVENTS
from ledger.archive.run import archive_rounds
from ledger.errors import VerificationError
from ledger.node import Node
from tests.archive.test_archive import _flip_signature, _played
from tests.attacker import Attacker


@dataclass
class Pools:
    """Which way the archive was made to take, and the worker counts of the
    pools it started."""

    by_workers: bool
    started: list[int] = field(default_factory=list)


@pytest.fixture(params=["here", "workers"])
def pools(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Pools:
    """The workers' way ("workers": from a log of 0 events) or the default for
    these small logs."""
    pools = Pools(by_workers=request.param == "workers")

    class Counted(ProcessPoolExecutor):
        def __init__(self, workers: int, *args: Any, **kwargs: Any) -> None:
            pools.started.append(workers)
            super().__init__(workers, *args, **kwargs)

    monkeypatch.setattr(envelopes, "ProcessPoolExecutor", Counted)
    monkeypatch.setattr(envelopes.os, "cpu_count", lambda: 2)  # (a one-core host has none)
    if pools.by_workers:
        monkeypatch.setattr(envelopes, "WORKERS_FROM", 0)
    return pools


def test_the_archive_written_and_checked_either_way(
    node: Node, tmp_path: Path, pools: Pools
) -> None:
    _played(node, 3)
    done = archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    checked = check_archive(done.directory, node.keyring)
    assert checked.events == done.events and checked.streams == 3
    assert pools.started == ([2, 2] if pools.by_workers else [])  # the writing's, the check's
    lines = (done.directory / EVENTS).read_text().splitlines(keepends=True)
    lines[1] = _flip_signature(lines[1])
    (done.directory / EVENTS).write_text("".join(lines))
    with pytest.raises(VerificationError, match=r"line 2 \(log position.*signature is invalid"):
        check_archive(done.directory, node.keyring)


def test_a_forged_signature_in_the_store_is_refused_either_way(
    node: Node, tmp_path: Path, store_url: str, pools: Pools
) -> None:
    tables = _played(node, 2)
    attacker = Attacker(store_url)
    try:
        stream = tables.rounds[0]
        _, _, _, _, state = attacker.row(stream, 3)
        header_end = 6 + int.from_bytes(state[4:6], "big")
        attacker.set_state(stream, 3, state[:header_end] + bytes(64) + state[header_end + 64 :])
    finally:
        attacker.close()
    with pytest.raises(VerificationError, match="its envelope signature is invalid"):
        archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    assert pools.started == ([2] if pools.by_workers else [])  # the way named was taken
    assert not [p for p in tmp_path.iterdir() if "a1" in p.name]
