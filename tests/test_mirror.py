"""`ledger mirror` (issue 21, items 4 and 5): a regulator's copy of a node's
log, verified as it arrives, that refuses a source rewriting its history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.audit.verify import Level, verify_store
from ledger.errors import VerificationError
from ledger.node import Node
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import stream_of
from tests.attacker import Attacker
from tests.http_support import Api
from tests.mirror_support import ClientSource, mirror_url, opened_mirror, source_api, write_events


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return source_api(node, tmp_path)


@pytest.fixture
def mirror_store(store_url: str, tmp_path: Path) -> Iterator[str]:
    yield from mirror_url(store_url, tmp_path)


def all_rows(app: LedgerApplication) -> list[tuple[object, ...]]:
    rows, after = [], 0
    while batch := app.tables.rows_after(after, 500):
        rows += [tuple(r[1:]) for r in batch]
        after = batch[-1][0]
    return rows


def test_one_shot_catch_up_copies_the_sealed_rows_and_the_roots(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    write_events(node)
    source = ClientSource(api)
    with opened_mirror(mirror_store, node.keyring, source, tmp_path / "m") as mirror:
        done = mirror.sync()
        assert done.events == node.app.tables.event_count()[0] > 0
        assert mirror.sync().events == 0  # nothing new: nothing copied twice
        copy = mirror.app
        assert all_rows(copy) == all_rows(node.app)
        report = verify_store(copy, node.keyring, level=Level.SETTLEMENT, workers=1)
        theirs = verify_store(node.app, node.keyring, level=Level.SIGNATURES, workers=1)
        assert report.root == theirs.root and report.checkpoint_root == theirs.checkpoint_root
        write_events(node, accounts=2)
        assert mirror.sync().events > 0
        assert all_rows(copy) == all_rows(node.app)


def test_an_event_edited_in_the_source_after_it_was_copied_is_refused(
    node: Node, api: Api, mirror_store: str, store_url: str, tmp_path: Path
) -> None:
    write_events(node)
    source = ClientSource(api)
    with opened_mirror(mirror_store, node.keyring, source, tmp_path / "m") as mirror:
        mirror.sync()
        held = mirror.app.tables.event_count()[0]
        row = node.app.tables.rows_after(0, 3)[2]
        attacker = Attacker(store_url)
        try:
            altered = bytes(row[4]).replace(b'"amount":500', b'"amount":900')
            assert altered != bytes(row[4])
            attacker.set_state(stream_of(row[1]), row[2], altered)
        finally:
            attacker.close()
        write_events(node, accounts=1)
        with pytest.raises(VerificationError, match="history was rewritten"):
            mirror.sync()
        assert mirror.app.tables.event_count()[0] == held
    assert "rewritten" in (tmp_path / "m" / "refused.jsonl").read_text()
