"""The store's own Merkle rows held to the tree its events give (issue 37,
attack 6): an attacker with database rights edits, deletes or moves a leaf
or node row that proofs and tiles are served from; `verify` names it, a
resumed run finds it through the saved state, on both stores, and rows
under an altered event are not blamed for it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.audit.findings import Findings, Step
from ledger.audit.log.log_source import StoreLog
from ledger.audit.verify import (
    Level,
    Sinks,
    VerificationReport,
    VerifyOptions,
    verify_log,
    verify_store,
)
from ledger.audit.verify_state import VerifyState
from ledger.errors import FindingKind
from ledger.node import Node
from tests.attacker import Attacker
from tests.casino_support import casino_on
from tests.installed import installed_games

CHUNK = 4  # leaves per verification chunk: nodes above level 2 span chunks


def events(node: Node, accounts: int, checkpoint: bool = True) -> int:
    casino = casino_on(node)
    for _ in range(accounts):
        account = casino.open_account(request_id=str(uuid.uuid4()), owner="p", currency="EUR")
        casino.deposit(request_id=str(uuid.uuid4()), account_id=account, amount=500)
    if checkpoint:
        node.checkpointer().catch_up()
    return node.app.tables.event_count()[0]


def verified(node: Node, level: Level = Level.SETTLEMENT, **options: object) -> VerificationReport:
    found = Findings()
    return verify_store(
        node.app,
        node.keyring,
        VerifyOptions(
            level=level, workers=1, chunk_leaves=CHUNK, **options, games=installed_games()
        ),  # type: ignore[arg-type]
        Sinks(findings=found),
    )


def merkle_findings(report: VerificationReport) -> list[str]:
    return [f.text for f in report.findings.items if f.step is Step.MERKLE]


def attack(store_url: str, statement: str, params: tuple[object, ...]) -> None:
    attacker = Attacker(store_url)
    try:
        attacker.sql(statement, params)
    finally:
        attacker.close()


EDITS: dict[str, tuple[str, tuple[object, ...], str]] = {
    "leaf-hash": (
        "UPDATE ledger_merkle_leaves SET leaf_hash = ? WHERE leaf_index = ?",
        (bytes(32), 5),
        "leaf row for log position 5 does not hold the leaf hash",
    ),
    "leaf-names-another-row": (
        "UPDATE ledger_merkle_leaves SET notification_id = notification_id + 1000000 "
        "WHERE leaf_index = ?",
        (6,),
        "leaf row for log position 6 names row id",
    ),
    "leaf-deleted": (
        "DELETE FROM ledger_merkle_leaves WHERE leaf_index = ?",
        (7,),
        "no Merkle leaf row for log position 7",
    ),
    "node-inside-a-chunk": (
        "UPDATE ledger_merkle_nodes SET hash = ? WHERE level = 1 AND idx = ?",
        (bytes(32), 2),
        "Merkle node (level 1, index 2) does not hold the hash of the 2 events",
    ),
    "node-spanning-chunks": (
        "UPDATE ledger_merkle_nodes SET hash = ? WHERE level = 3 AND idx = ?",
        (bytes(32), 1),
        "Merkle node (level 3, index 1) does not hold the hash of the 8 events",
    ),
    "node-deleted": (
        "DELETE FROM ledger_merkle_nodes WHERE level = 2 AND idx = ?",
        (1,),
        "no row (or two) for the Merkle node (level 2, index 1)",
    ),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_merkle_row_is_named(node: Node, store_url: str, edit: str) -> None:
    assert events(node, 8) >= 16
    assert verified(node).findings.items == []
    statement, params, says = EDITS[edit]
    attack(store_url, statement, params)
    report = verified(node)
    found = merkle_findings(report)
    assert len(found) == 1 and says in found[0], found
    assert "proofs and tiles the store gives from it would not verify" in found[0]
    assert all(f.kind is FindingKind.ALTERED for f in report.findings.items)
    assert [f.step for f in report.findings.items] == [Step.MERKLE]  # the events are intact


def test_rows_under_an_altered_event_are_not_blamed(node: Node, store_url: str) -> None:
    """The stored tree is the events' as written: an event changed under it
    makes its leaf differ, and that is the event's finding, not the tree's."""
    events(node, 8)
    row = node.app.tables.rows_after(0, 6)[5]
    attacker = Attacker(store_url)
    try:
        attacker.set_state(str(uuid.UUID(str(row[1]))), row[2], bytes(row[4])[:-1] + b" ")
    finally:
        attacker.close()
    report = verified(node)
    assert report.findings.items and not merkle_findings(report)


def test_the_ok_line_says_what_was_compared(node: Node) -> None:
    size = events(node, 4)
    events(node, 1, checkpoint=False)  # an unanchored tail: its rows not required yet
    report = verified(node)
    assert f"every stored Merkle leaf and node under the newest checkpoint (size {size})" in (
        report.summary()
    )
    for level in (Level.INTEGRITY, Level.SIGNATURES):
        quick = verified(node, level)
        assert f"stored Merkle rows NOT compared with it (level {level.value}" in quick.summary()


@pytest.mark.parametrize("level", [Level.INTEGRITY, Level.SIGNATURES])
def test_below_settlement_only_a_state_compares_them(
    node: Node, store_url: str, level: Level
) -> None:
    events(node, 8)
    statement, params, says = EDITS["leaf-hash"]
    attack(store_url, statement, params)
    assert verified(node, level).findings.items == []  # as its OK line says
    report = verified(node, level, save_state=True)
    assert any(says in text for text in merkle_findings(report))


RESUMED: dict[str, Callable[[Node, str], str]] = {
    "leaf": lambda node, url: attack(url, *EDITS["leaf-hash"][:2]) or "log positions 4..7",
    "spanning-node": lambda node, url: (
        attack(url, *EDITS["node-spanning-chunks"][:2]) or "level 3, index 1"
    ),
}


@pytest.mark.parametrize("edit", sorted(RESUMED))
def test_a_resumed_run_finds_a_merkle_row_edited_since_the_state(
    node: Node, store_url: str, tmp_path: Path, edit: str
) -> None:
    events(node, 8)
    first = verified(node, Level.SIGNATURES, save_state=True)
    assert first.state is not None and first.findings.items == []
    first.state.save(tmp_path / "state")
    says = RESUMED[edit](node, store_url)
    events(node, 2)
    report = verified(node, Level.SIGNATURES, resume=VerifyState.load(tmp_path / "state"))
    texts = [f.text for f in report.findings.items]
    assert len(texts) == 1 and says in texts[0], texts


def test_rows_written_under_the_state_since_are_compared_when_anchored(
    node: Node, store_url: str, tmp_path: Path
) -> None:
    """A state made while the newest events were not yet under a checkpoint
    (their Merkle rows not written): a later run compares them once they are,
    and an edited one is found, not vouched for."""
    events(node, 4)
    tail = events(node, 2, checkpoint=False)
    first = verified(node, Level.SIGNATURES, save_state=True)
    assert first.state is not None and first.state.size == tail
    first.state.save(tmp_path / "state")
    events(node, 1)  # the checkpointer writes the tail's rows now
    clean = verified(
        node, Level.SIGNATURES, resume=VerifyState.load(tmp_path / "state"), save_state=True
    )
    assert clean.findings.items == [] and clean.state is not None
    assert all(c.tree_to == c.first_leaf + c.rows for c in clean.state.chunks)
    attack(
        store_url,
        "UPDATE ledger_merkle_leaves SET leaf_hash = ? WHERE leaf_index = ?",
        (
            bytes(32),
            tail - 1,
        ),
    )
    first.state.save(tmp_path / "again")
    found = verified(node, Level.SIGNATURES, resume=VerifyState.load(tmp_path / "again"))
    texts = merkle_findings(found)
    assert len(texts) == 1 and f"log position {tail - 1}" in texts[0], texts


def test_a_run_told_not_to_re_read_keeps_the_digest_the_state_vouched_for(
    node: Node, store_url: str, tmp_path: Path
) -> None:
    """`reread_tree=False` (a following mirror between its periodic re-reads):
    the rows a state vouches for are not read, and the state it saves carries
    their digest as found, so the next run that reads them finds the edit."""
    events(node, 8)
    first = verified(node, Level.SIGNATURES, save_state=True)
    assert first.state is not None
    statement, params, _ = EDITS["leaf-hash"]
    attack(store_url, statement, params)
    events(node, 2)
    quick = verify_log(
        StoreLog(node.app),
        node.keyring,
        VerifyOptions(
            level=Level.SIGNATURES,
            workers=1,
            chunk_leaves=CHUNK,
            resume=first.state,
            save_state=True,
            reread_tree=False,
        ),
        sinks=Sinks(findings=Findings()),
    )
    assert quick.findings.items == [] and quick.state is not None
    assert [c.tree_digest for c in quick.state.chunks[: len(first.state.chunks)]] == [
        c.tree_digest for c in first.state.chunks
    ]
    report = verified(node, Level.SIGNATURES, resume=quick.state)
    texts = merkle_findings(report)
    assert len(texts) == 1 and "log positions 4..7" in texts[0], texts
