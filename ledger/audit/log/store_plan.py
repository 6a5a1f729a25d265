"""Cutting a store's log into verification chunks, in a thread of its own.

Where the ids after the start are dense (one COUNT(*) over the id index says
so: n rows in a range of n ids is every id in it), a chunk's end is
arithmetic. Elsewhere (ids with gaps: rows removed, or PostgreSQL sequence
values a rolled-back insert used) it is found by an index seek from the
previous one. Either way the database does the work with the GIL released,
so `verify_log` starts the cut first and loads the checkpoints meanwhile.
"""

from __future__ import annotations

import threading
from typing import Protocol

from ledger.audit.log.chunks import Problem
from ledger.store.merkle_log import MerkleLogTables

TAIL_CHUNKS = 2  # whole chunks at the end of a plan, cut into TAIL_PARTS each
TAIL_PARTS = 4

Ends = list[tuple[int, int]]  # (end position, last row id) of each chunk, in log order


class Ids(Protocol):
    """Where rows are, by id: the store's index, or arithmetic over dense ids."""

    def id_after(self, after_id: int, offset: int) -> int | None: ...

    def count_between(self, after_id: int, last_id: int) -> int: ...


class DenseIds:
    """Ids known to hold a row each, up to `highest`: no seek needed to find one."""

    def __init__(self, highest: int) -> None:
        self.highest = highest

    def id_after(self, after_id: int, offset: int) -> int | None:
        wanted = after_id + 1 + offset
        return wanted if wanted <= self.highest else None

    def count_between(self, after_id: int, last_id: int) -> int:
        return max(0, min(last_id, self.highest) - after_id)


def row_ids(tables: MerkleLogTables, after: int, highest: int) -> Ids:
    """Arithmetic where the rows in (after, highest] fill every id there, else the index.

    From before the lowest id (a whole run) every row counts: a count the store
    takes from a small index, where a count of an id range walks the table's
    rows. A row removed after this count makes a chunk read fewer rows than
    planned, which the merge reports, exactly as when it is removed after a seek."""
    if highest <= after:
        return tables
    if after < tables.lowest_id():
        inside = tables.row_count()
    else:
        inside = tables.count_between(after, highest)
    return DenseIds(highest) if inside == highest - after else tables


def chunk_ends(tables: MerkleLogTables, chunk_leaves: int, start: tuple[int, int]) -> Ends:
    """The chunks of the rows after `start` (log position, the row id before
    it). Rows appended meanwhile (ids above the highest read first) wait for
    the next run."""
    highest = tables.highest_id()
    ends: Ends = []
    first, after = start
    ids = row_ids(tables, after, highest)
    while after < highest:
        # A chunk's leaves start aligned to its size (its subtree): a log resumed
        # at an odd position takes smaller chunks up to the next boundary.
        size = min(chunk_leaves, first & -first or chunk_leaves)
        last_id = ids.id_after(after, size - 1)
        if last_id is None or last_id > highest:  # the rest: a partial chunk
            end, last_id = first + ids.count_between(after, highest), highest
            if end == first:  # rows vanished while planning
                raise Problem(first, "the log changed while it was read").as_error()
        else:
            end = first + size
        ends.append((end, last_id))
        first, after = end, last_id
    return split_tail(ids, start, ends, chunk_leaves)


def split_tail(ids: Ids, start: tuple[int, int], ends: Ends, chunk_leaves: int) -> Ends:
    """The last whole chunks cut into aligned parts, so the processes finish
    together instead of one waiting while another verifies a last whole chunk."""
    part = chunk_leaves // TAIL_PARTS
    if part < 1 or len(ends) < TAIL_CHUNKS:
        return ends
    keep = len(ends) - TAIL_CHUNKS
    first, after = ends[keep - 1] if keep else start
    split = ends[:keep]
    for end, last_id in ends[keep:]:
        while end - first > part and first % part == 0:
            part_id = ids.id_after(after, part - 1)
            if part_id is None or part_id >= last_id:
                break
            split.append((first + part, part_id))
            first, after = first + part, part_id
        split.append((end, last_id))
        first, after = end, last_id
    return split


class Cutting(threading.Thread):
    """`chunk_ends` run by `start()` in a thread (or by `run()` here); `result()`
    waits for it and raises what it raised."""

    def __init__(self, tables: MerkleLogTables, chunk_leaves: int, start: tuple[int, int]) -> None:
        super().__init__(name="ledger-verify-plan", daemon=True)
        self.asked = (chunk_leaves, start)
        self._tables = tables
        self._ends: Ends | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._ends = chunk_ends(self._tables, *self.asked)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def result(self) -> Ends:
        if self.ident is not None:
            self.join()
        if self._error is not None:
            raise self._error
        assert self._ends is not None
        return self._ends
