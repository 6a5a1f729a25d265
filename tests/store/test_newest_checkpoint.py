"""The newest checkpoint (every proof and `GET /v1/checkpoints/newest` asks
for it) is found without reading every checkpoint a long-running log has
signed, and still by its signed size, on both stores: a row whose size
column an attacker lowered or raised changes how much is read, not what is
found (a row whose column disagrees with its signed note is no checkpoint,
as it never was)."""

from __future__ import annotations

from typing import Any

import pytest

import ledger.audit.proofs as proofs
from ledger.audit.proofs import newest_checkpoint
from ledger.errors import VerificationError
from ledger.node import Node
from tests.attacker import Attacker
from tests.demo_table import Table


def many_checkpoints(node: Node, count: int) -> int:
    """`count` checkpoints, 2 events each; the newest's size."""
    table = Table(name="T", dealer="D")
    node.app.save(table)
    for _ in range(count):
        table.throw_dice([1, 2, 3])
        node.app.save(table)
        node.checkpointer().catch_up()
    return count + 1


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The checkpoint rows `newest_checkpoint` parses."""
    seen: list[Any] = []
    real = proofs.parse_checkpoint_row

    def counting(row: Any) -> Any:
        seen.append(row)
        return real(row)

    monkeypatch.setattr(proofs, "parse_checkpoint_row", counting)
    return seen


def test_the_newest_is_found_reading_one_row(node: Node, parsed: list[Any]) -> None:
    size = many_checkpoints(node, 40)
    assert len(node.app.tables.checkpoint_rows()) == 40
    found = newest_checkpoint(node.app, node.keys.keyring())
    assert found is not None and found.size == size
    assert len(parsed) == 1


@pytest.mark.parametrize("edit", ["the newest's column lowered", "an old one's column raised"])
def test_an_edited_size_column_is_read_past(
    node: Node, store_url: str, parsed: list[Any], edit: str
) -> None:
    size = many_checkpoints(node, 12)
    attacker = Attacker(store_url)
    if edit == "the newest's column lowered":
        attacker.sql("UPDATE ledger_checkpoints SET tree_size = 1 WHERE tree_size = ?", (size,))
    else:
        attacker.sql("UPDATE ledger_checkpoints SET tree_size = 500 WHERE tree_size = 5")
    found = newest_checkpoint(node.app, node.keys.keyring())
    assert len(parsed) > 1  # every row was read to find it
    # What reading every row finds: a row whose column disagrees with its
    # signed size is not a checkpoint (verify reports it), the rest by size.
    every = [proofs.parse_checkpoint_row(r) for r in node.app.tables.checkpoint_rows()
             if _parses(r)]  # fmt: skip
    expected = max(every, key=lambda c: c.size)
    assert found == expected
    if edit == "an old one's column raised":
        assert found is not None and found.size == size


def _parses(row: Any) -> bool:
    try:
        proofs.parse_checkpoint_row(row)
    except VerificationError:
        return False
    return True
