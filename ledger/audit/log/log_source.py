"""Where `ledger verify` reads a log from: a store, or an export bundle.

`verify_log` runs the same checks on either. A source says how the log is
cut into chunks and read (in this process and in worker processes), hands the
settlement level every event in log order, and says what it can about where
a failure lies: a store has the Merkle rows its checkpointer wrote, a bundle
has only its events.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Protocol

from eventsourcing.persistence import Transcoder

from ledger.audit.findings import SETTLEMENT_STEPS, Findings, Step
from ledger.audit.log.checkpoints import check_not_rolled_back, check_proofs
from ledger.audit.log.chunk_types import Merge
from ledger.audit.log.chunks import (
    ChunkResult,
    ChunkSpec,
    Problem,
    init_worker,
    rows_digest,
    verify_chunk,
    verify_chunk_with,
    worker_modules,
)
from ledger.audit.log.locate import first_difference, first_removed
from ledger.audit.log.log_events import Event, events, events_of_rows, verified_events
from ledger.audit.log.log_rows import LogRows
from ledger.audit.log.parallel import WorkerPlan, prepare
from ledger.audit.log.store_plan import Cutting
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import SignerCheck
from ledger.errors import VerificationError
from ledger.store.application import LedgerApplication
from ledger.store.archived import ArchivedTable
from ledger.store.merkle_log import MerkleLogTables


class LogSource(Protocol):
    #: Whether `root_mismatch` names the event where the log departs (a store's
    #: Merkle rows can), or only that it does somewhere (a bundle's).
    locates_roots: bool
    #: Whether its chunks are verified in worker processes (a small partial
    #: bundle is read in the calling one).
    parallel: bool
    #: The settlement steps its events can show (a part of the log cannot show
    #: a wallet's balance or a seed's draws).
    settlement_steps: tuple[Step, ...]

    @property
    def rows(self) -> LogRows: ...
    @property
    def transcoder(self) -> Transcoder: ...

    def plan(
        self,
        sizes: list[int],
        check_signatures: bool,
        chunk_leaves: int,
        times: list[tuple[int, int]],
        start: tuple[int, int] = (0, 0),
    ) -> tuple[int, list[ChunkSpec]]:
        """(events in the log, its chunks from `start`: (log position, the row id
        before it); a source that cannot start past 0 raises ConfigError)."""
        ...

    def start_plan(self, chunk_leaves: int, start: tuple[int, int] = (0, 0)) -> None:
        """Begin cutting the log into chunks, while the caller does other work
        (`plan` then takes the cut)."""
        ...

    def longer_than(self, leaves: int) -> bool:
        """Whether the log looks longer than `leaves` (more than one chunk: its
        workers will run, and a fork server is worth starting now). A hint read
        from what the source says of itself, never a finding: verification
        reads and checks the log whatever it answers."""
        ...

    def end_plan(self) -> None:
        """Wait for a cut begun and not taken: nothing reads the log after this."""
        ...

    def verify_chunk(self, signer_check: SignerCheck, spec: ChunkSpec) -> ChunkResult: ...
    def worker_plan(self, keyring_json: str) -> WorkerPlan: ...
    @property
    def worker_modules(self) -> tuple[str, ...]:
        """What its workers import (`WorkerPlan.modules`), known before the keyring is."""
        ...

    def merge(self, result: ChunkResult) -> Problem | None:
        """Checks across chunks the source itself needs (in log order)."""
        ...

    def merger(self, found: Findings) -> Merge | None:
        """How steps 4-6 join its chunks, when not as one log in order (a
        partial bundle proves each event's inclusion instead); None: in order."""
        ...

    def finish_chunks(self) -> None:
        """After every chunk merged: raise what the chunks together show."""
        ...

    def root_mismatch(self, matched: int, size: int) -> Problem:
        """Where the log departs from a checkpoint's root, as well as the source can say."""
        ...

    def first_removed(self, begin: int, end: int) -> Problem | None: ...
    def check_proofs(self, checkpoints: list[Checkpoint], trusted: Checkpoint | None) -> None: ...
    def events(self, progress: Any = None, start: tuple[int, int] = (0, 0)) -> Iterator[Event]: ...
    def chunk_events(self, spec: ChunkSpec, verified: ChunkResult) -> Iterator[Event]:
        """The events of one chunk, `verified` its result, for the settlement
        pass. Raises `VerificationError` (before any event) when the chunk's
        rows are no longer the ones verified; `events_of_chunk` then reads them
        as they are now."""
        ...

    def events_of_chunk(self, spec: ChunkSpec) -> Iterator[Event]:
        """The events of one chunk, every envelope opened and checked again."""
        ...


def prepare_workers(log: LogSource, workers: int | None, chunk_leaves: int) -> None:
    """Where `log` will run workers (more than one asked for, None: a core each,
    and a log longer than one chunk), their fork server, where one is needed,
    started now: it imports what they need while the caller goes on. A log of
    one chunk runs none and starts nothing."""
    if (workers or os.cpu_count() or 1) > 1 and log.longer_than(chunk_leaves):
        prepare(log.worker_modules)


class StoreLog:
    """A store, read through its tables (and in workers, by its URL)."""

    locates_roots = True
    parallel = True
    settlement_steps = SETTLEMENT_STEPS

    def __init__(self, app: LedgerApplication, tables: MerkleLogTables | None = None) -> None:
        """`tables`: the store's own by default; a mirror passes its store's rows
        with the events it is about to add (`ledger.mirror.pending`)."""
        self.app = app
        self.tables = app.tables if tables is None else tables
        self.rows = self.tables
        self.transcoder = app.mapper.transcoder
        self._cutting: Cutting | None = None

    @property
    def archived_table(self) -> ArchivedTable:
        return ArchivedTable(self.tables)

    def plan(
        self,
        sizes: list[int],
        check_signatures: bool,
        chunk_leaves: int,
        times: list[tuple[int, int]],
        start: tuple[int, int] = (0, 0),
    ) -> tuple[int, list[ChunkSpec]]:
        cutting = self._cutting
        if cutting is None or cutting.asked != (chunk_leaves, start):
            self.end_plan()
            cutting = Cutting(self.tables, chunk_leaves, start)
            cutting.run()
        self._cutting = None
        specs: list[ChunkSpec] = []
        first, after = start
        for end, last_id in cutting.result():
            specs.append(chunk_spec(first, end, after, last_id, sizes, check_signatures, times))
            first, after = end, last_id
        return first, specs

    def start_plan(self, chunk_leaves: int, start: tuple[int, int] = (0, 0)) -> None:
        self.end_plan()
        self._cutting = Cutting(self.tables, chunk_leaves, start)
        self._cutting.start()

    def longer_than(self, leaves: int) -> bool:
        try:
            return self.tables.tail()[0] > leaves  # the stored last leaf: a hint only
        except Exception:  # a malformed row: verification names it; workers may run
            return True

    def end_plan(self) -> None:
        cutting, self._cutting = self._cutting, None
        if cutting is not None and cutting.ident is not None:
            cutting.join()

    def verify_chunk(self, signer_check: SignerCheck, spec: ChunkSpec) -> ChunkResult:
        return verify_chunk_with(self.tables, signer_check, spec)

    def worker_plan(self, keyring_json: str) -> WorkerPlan:
        args = (self.app.store_url, keyring_json)
        return WorkerPlan(init_worker, args, verify_chunk, self.worker_modules)

    @property
    def worker_modules(self) -> tuple[str, ...]:
        return worker_modules(self.app.store_url)

    def merge(self, result: ChunkResult) -> Problem | None:
        return None

    def merger(self, found: Findings) -> Merge | None:
        return None

    def finish_chunks(self) -> None:
        return None

    def root_mismatch(self, matched: int, size: int) -> Problem:
        return first_difference(self.tables, matched, size)

    def first_removed(self, begin: int, end: int) -> Problem | None:
        return first_removed(self.tables, begin, end)

    def check_proofs(self, checkpoints: list[Checkpoint], trusted: Checkpoint | None) -> None:
        check_not_rolled_back(checkpoints, trusted)
        check_proofs(self.tables, checkpoints, trusted)

    def events(self, progress: Any = None, start: tuple[int, int] = (0, 0)) -> Iterator[Event]:
        return events(self.tables, self.transcoder, progress, start)

    def chunk_events(self, spec: ChunkSpec, verified: ChunkResult) -> Iterator[Event]:
        # Read again here (sending rows back from the workers costs more): the
        # digest proves they are the bytes the chunk verified, or says they were
        # changed meanwhile (by someone writing to the database during the run).
        rows = self.tables.rows_between(spec.after_id, spec.last_id)
        if verified.digest is None:
            return events_of_rows(rows, spec.first_leaf, self.transcoder)
        if rows_digest(rows) != verified.digest:
            raise VerificationError(
                f"the rows of log positions {spec.first_leaf} to "
                f"{spec.first_leaf + verified.rows - 1} changed while they were being "
                "verified: someone is writing to the store's past"
            )
        found = {problem.position for problem in verified.problems}
        return verified_events(rows, spec.first_leaf, self.transcoder, found)

    def events_of_chunk(self, spec: ChunkSpec) -> Iterator[Event]:
        rows = self.tables.rows_between(spec.after_id, spec.last_id)
        return events_of_rows(rows, spec.first_leaf, self.transcoder)


def chunk_spec(
    first: int,
    end: int,
    after_id: int,
    last_id: int,
    sizes: list[int],
    check_signatures: bool,
    times: list[tuple[int, int]],
    offset: int = 0,
) -> ChunkSpec:
    """The chunk of leaves [first, end): the checkpoint sizes inside it and the
    checkpoints (size, issued_at µs) that cover its events."""
    inside = tuple(s for s in sizes if first < s <= end)
    covering = [t for t in times if t[0] > first]
    reach = next((i for i, t in enumerate(covering) if t[0] >= end), len(covering) - 1)
    return ChunkSpec(
        first,
        after_id,
        last_id,
        inside,
        check_signatures,
        tuple(covering[: reach + 1]),
        offset,
    )
