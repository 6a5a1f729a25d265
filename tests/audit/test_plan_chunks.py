"""How verification cuts a store's log into chunks (`StoreLog.plan`): every row
in exactly one chunk, in id order, each chunk's leaves aligned to its subtree,
the last whole chunks cut into parts so the processes finish together, and
the count the plan gives the real number of rows, without a COUNT(*) of the
log. Both stores, ids with gaps (rows an attacker removed) included."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ledger.audit import verify
from ledger.audit.log import store_plan
from ledger.audit.log.chunks import ChunkSpec
from ledger.audit.log.log_source import StoreLog
from ledger.audit.log.store_plan import TAIL_CHUNKS, TAIL_PARTS
from ledger.audit.verify import VerifyOptions
from ledger.errors import VerificationError
from ledger.node import Node
from ledger.store.merkle_log import stream_of
from tests.attacker import Attacker
from tests.demo_table import Table
from tests.installed import installed_games

CHUNK = 8


def seal(node: Node, streams: int, per_stream: int) -> None:
    for number in range(streams):
        table = Table(name=f"T{number}", dealer="D1")
        for _ in range(per_stream - 1):
            table.throw_dice([1, 2, 3])
        node.app.save(table)


def held_rows(node: Node, specs: list[ChunkSpec], count: int) -> list[int]:
    """Each chunk's rows, checked to be the leaves the plan says, in order."""
    tables = node.app.tables
    sizes = []
    for spec, following in zip(specs, [*specs[1:], None], strict=True):
        end = following.first_leaf if following else count
        rows = tables.rows_between(spec.after_id, spec.last_id)
        assert len(rows) == end - spec.first_leaf, spec
        assert rows[-1][0] == spec.last_id
        n = len(rows)
        assert n == 1 or spec.first_leaf % (1 << (n - 1).bit_length()) == 0, spec
        if following:
            assert following.after_id == spec.last_id
        sizes.append(n)
    return sizes


@pytest.mark.parametrize("events", [1, 7, 8, 9, 16, 17, 40, 77])
def test_every_row_is_in_exactly_one_aligned_chunk(node: Node, events: int) -> None:
    seal(node, streams=events, per_stream=1)
    count, specs = StoreLog(node.app).plan([], True, CHUNK, [])
    assert count == events == node.app.tables.event_count()[0]
    assert sum(held_rows(node, specs, count)) == events
    assert specs[0].first_leaf == 0 and specs[0].after_id == 0


def test_the_last_whole_chunks_are_cut_into_parts(node: Node) -> None:
    seal(node, streams=10, per_stream=5)  # 50 events: 6 chunks of 8, then 2
    count, specs = StoreLog(node.app).plan([], True, CHUNK, [])
    sizes = held_rows(node, specs, count)
    part = CHUNK // TAIL_PARTS
    whole = 50 // CHUNK - (TAIL_CHUNKS - 1)  # the rest of the log and the last whole chunk
    assert sizes == [CHUNK] * whole + [part] * TAIL_PARTS + [part]


def test_ids_with_gaps_and_a_resumed_start(node: Node, store_url: str) -> None:
    seal(node, streams=30, per_stream=2)
    rows = node.app.tables.rows_between(0, 1 << 62)
    attacker = Attacker(store_url)
    try:
        for number in (3, 4, 11, 40, 41, 42):
            attacker.delete(stream_of(rows[number][1]), rows[number][2])
    finally:
        attacker.close()
    count, specs = StoreLog(node.app).plan([], False, CHUNK, [])
    assert count == 54 == node.app.tables.event_count()[0]
    assert sum(held_rows(node, specs, count)) == 54
    # Resumed at position 21: chunks of 1 and 2 up to the boundary at 24, then whole ones.
    after = node.app.tables.rows_between(0, 1 << 62)[20][0]
    count, resumed = StoreLog(node.app).plan([], False, CHUNK, [], start=(21, after))
    assert count == 54
    assert (resumed[0].first_leaf, resumed[0].after_id) == (21, after)
    assert held_rows(node, resumed, count)[:3] == [1, 2, CHUNK]
    assert sum(held_rows(node, resumed, count)) == 54 - 21


def test_a_run_that_stops_early_has_stopped_reading_the_log(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cut runs in a thread beside the checkpoints' loading: a run that
    fails there waits for it, so no query runs on a store its caller closes."""
    seal(node, streams=3, per_stream=3)
    finished: list[int] = []
    real = store_plan.chunk_ends

    def slow(*args: Any) -> store_plan.Ends:
        time.sleep(0.3)
        ends = real(*args)
        finished.append(len(ends))
        return ends

    def failing(*args: Any) -> None:
        raise RuntimeError("the checkpoints could not be read")

    monkeypatch.setattr(store_plan, "chunk_ends", slow)
    monkeypatch.setattr(verify, "load_checkpoints", failing)
    with pytest.raises(RuntimeError, match="could not be read"):
        verify.verify_store(
            node.app,
            node.keys.keyring(),
            VerifyOptions(chunk_leaves=CHUNK, games=installed_games()),
        )
    assert len(finished) == 1  # the cut ran to its end before the error came back


def count_seeks(node: Node, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seeks: list[int] = []
    real = node.app.tables.id_after

    def id_after(after_id: int, offset: int) -> int | None:
        seeks.append(after_id)
        return real(after_id, offset)

    monkeypatch.setattr(node.app.tables, "id_after", id_after)
    return seeks


def test_dense_ids_are_cut_by_arithmetic_to_the_same_chunks(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    seal(node, streams=20, per_stream=4)
    seeks = count_seeks(node, monkeypatch)
    count, specs = StoreLog(node.app).plan([], True, CHUNK, [])
    assert seeks == []  # every id in the range holds a row: no seek needed
    monkeypatch.setattr(store_plan, "row_ids", lambda tables, after, highest: tables)
    assert StoreLog(node.app).plan([], True, CHUNK, []) == (count, specs)
    assert len(seeks) >= len(specs) - 1  # the same plan, by the index
    assert sum(held_rows(node, specs, count)) == count == node.app.tables.event_count()[0]


def test_ids_with_a_gap_are_cut_by_the_index(
    node: Node, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seal(node, streams=20, per_stream=4)
    rows = node.app.tables.rows_between(0, 1 << 62)
    attacker = Attacker(store_url)
    try:
        attacker.delete(stream_of(rows[-30][1]), rows[-30][2])  # one id near the end
    finally:
        attacker.close()
    seeks = count_seeks(node, monkeypatch)
    count, specs = StoreLog(node.app).plan([], True, CHUNK, [])
    assert seeks  # one missing id is enough to stop the arithmetic
    assert count == len(rows) - 1 == sum(held_rows(node, specs, count))


@pytest.mark.parametrize("removed", ["middle", "last"])
def test_rows_removed_after_the_cut_are_reported_not_misplaced(
    node: Node, store_url: str, monkeypatch: pytest.MonkeyPatch, removed: str
) -> None:
    """A writer removing events during a run: a chunk reads fewer rows than
    the plan counted. Verify says the log changed; it does not shift every
    later event to a wrong position, nor fail with an internal error."""
    seal(node, streams=20, per_stream=4)
    rows = node.app.tables.rows_between(0, 1 << 62)
    victim = rows[len(rows) // 2] if removed == "middle" else rows[-1]
    real = StoreLog.plan

    def plan_then_remove(self: StoreLog, *args: Any, **kwargs: Any) -> Any:
        planned = real(self, *args, **kwargs)
        attacker = Attacker(store_url)
        try:
            attacker.delete(stream_of(victim[1]), victim[2])
        finally:
            attacker.close()
        return planned

    monkeypatch.setattr(StoreLog, "plan", plan_then_remove)
    with pytest.raises(VerificationError, match="the log changed while it was read"):
        verify.verify_store(
            node.app,
            node.keys.keyring(),
            VerifyOptions(chunk_leaves=CHUNK, workers=1, games=installed_games()),
        )
