"""Stores written before "who asked" was recorded (`Request.Completed` v1,
`Round.BetPlaced` v1 and v2): their signed payloads hold no `asked_by`, they
read with `asked_by` None (upcast, the stored bytes unchanged), their rounds
recall with no asker for a bet, and they still verify."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.recall import recall_round
from ledger.export.records import decode_payload, split_envelope
from ledger.node import open_node
from ledger.plugins.manager import get_plugin_manager
from tests.attacker import Attacker
from tests.casino_support import domain_events
from tests.store.test_release_store import verify

DATA = Path(__file__).parents[1] / "data"
REQUEST = "ledger.domain.request:Request.Completed"
BET = "ledger.domain.round:Round.BetPlaced"


def raw_payloads(store: Path) -> list[tuple[str, dict[str, Any]]]:
    """(topic, payload as its signed bytes hold it) of each request record and bet."""
    attacker = Attacker(f"sqlite:///{store / 'ledger.db'}")
    try:
        rows = attacker.sql(
            "SELECT topic, state FROM stored_events WHERE topic IN (?, ?)", (REQUEST, BET)
        )
    finally:
        attacker.close()
    return [(topic, decode_payload(split_envelope(bytes(state))[3])) for topic, state in rows]


@pytest.mark.parametrize(
    ("release", "versions"),
    [
        ("release-0.2-store", {(REQUEST, 1), (BET, 1)}),
        ("pre-rename-store", {(REQUEST, 1), (BET, 2)}),
    ],
)
def test_an_old_stores_requests_read_as_asked_by_no_one_and_verify(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    release: str,
    versions: set[tuple[str, int]],
) -> None:
    store = tmp_path / release
    shutil.copytree(DATA / release, store)
    stored = raw_payloads(store)
    assert {(topic, p.get("class_version", 1)) for topic, p in stored} == versions
    assert not [p for _, p in stored if "asked_by" in p]  # written before the field
    node = open_node(f"sqlite:///{store / 'ledger.db'}", str(store / "keys"), writable=False)
    try:
        read = [
            (type(event).__qualname__, getattr(event, "asked_by"))  # noqa: B009
            for _, event in domain_events(node.app)
            if type(event).__qualname__ in ("Request.Completed", "Round.BetPlaced")
        ]
        assert Counter(kind for kind, _ in read) == Counter(
            "Request.Completed" if topic == REQUEST else "Round.BetPlaced" for topic, _ in stored
        )
        assert {asked for _, asked in read} == {None}
        round_id = str(
            next(
                event.originator_id
                for _, event in domain_events(node.app)
                if type(event).__qualname__ == "Round.BetPlaced"
            )
        )
        games = get_plugin_manager().games()
        recall = recall_round(node.app, node.keyring, games, round_id)
        bets = [e for e in recall.events if e.kind == "BetPlaced"]
        assert bets and not recall.problems and {e.asked for e in bets} == {None}
    finally:
        node.close()
    assert raw_payloads(store) == stored  # nothing stored was changed by reading
    code, output = verify(store, capsys, "--trusted", str(store / "kept.txt"))
    assert code == 0, output
