"""`ledger verify`: check a whole store, trusting nothing in it.

Levels:
- ``integrity``: every envelope against its row (payload hash, type, stream,
  version), every signer against the keyring, every chain link and version
  step per stream, the Merkle root recomputed at every stored checkpoint and
  every checkpoint's signature, and the auditor's own kept checkpoint.
- ``signatures``: all of that plus every envelope's Ed25519 signature.

The log is cut into chunks of 2^k leaves; each chunk is verified on its own
(in parallel over all cores) and the results are merged in log order: chain
links across chunk edges, and Merkle subtrees into the full tree.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from ledger.audit.checkpoints import (
    CheckpointProblem,
    check_proofs,
    kept_mismatch,
    load_checkpoints,
    unanchored_note,
)
from ledger.audit.chunks import (
    ChunkSpec,
    Problem,
    link_problem,
    verify_chunk_with,
)
from ledger.audit.dice import DiceAudit
from ledger.audit.money import check_money
from ledger.audit.parallel import run_chunks
from ledger.audit.resettle import Resettler
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import SignerCheck, open_envelope
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import CompactRange
from ledger.errors import ConfigError, LedgerError
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import stream_of
from ledger.variants.api import Variant

CHUNK_LEAVES = 1 << 14


class Level(StrEnum):
    INTEGRITY = "integrity"
    SIGNATURES = "signatures"
    SETTLEMENT = "settlement"  # signatures, then the money re-derived from the events

    @classmethod
    def parse(cls, text: str) -> Level:
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(level.value for level in cls)
            raise ConfigError(f"unknown verify level {text!r}: choose one of {choices}") from None


@dataclass
class VerificationReport:
    """What was verified (TUF's `VerificationResult` idea): counts, not just a yes."""

    level: Level
    events: int = 0
    streams: int = 0
    checkpoints: int = 0
    covered: int = 0  # events under the newest checkpoint
    unanchored: str | None = None  # the tail not under a checkpoint: its size and age
    trusted_size: int | None = None
    seconds: float = 0.0
    workers: int = 1
    movements: int | None = None  # money movements re-derived (settlement level)
    resettled: int | None = None  # rounds settled again with their own rules
    rng_throws: int = 0  # RNG throws recomputed from revealed seeds
    rng_pending: int = 0  # RNG throws whose seed is not revealed yet
    device_reports: int = 0  # dealer device reports whose signature verified
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"OK: {self.events} events in {self.streams} streams, "
            f"{self.checkpoints} checkpoints verified at level {self.level.value} "
            f"in {self.seconds:.2f} s ({self.workers} worker{'s' if self.workers > 1 else ''})",
        ]
        if self.movements is not None:
            lines.append(
                f"   {self.movements} money movements balanced; every wallet matches its postings"
            )
        if self.resettled is not None:
            lines.append(f"   {self.resettled} rounds re-settled with their own variant and rules")
        if self.rng_throws or self.rng_pending or self.device_reports:
            lines.append(
                f"   {self.rng_throws} RNG throws recomputed from revealed seeds "
                f"({self.rng_pending} await their seed's reveal); "
                f"{self.device_reports} dealer device reports verified"
            )
        if self.trusted_size is not None:
            lines.append(f"   consistent with the kept checkpoint of size {self.trusted_size}")
        if self.unanchored:
            lines.append(f"   {self.unanchored}")
        return "\n".join(lines + [f"   {note}" for note in self.notes])


def plan_chunks(
    app: LedgerApplication, sizes: list[int], level: Level, chunk_leaves: int
) -> tuple[int, list[ChunkSpec]]:
    count, highest = app.tables.event_count()
    specs, first, after = [], 0, 0
    while first < count:
        end = min(first + chunk_leaves, count)
        last_id = highest if end == count else app.tables.id_at_offset(end - 1)
        assert last_id is not None
        inside = tuple(s for s in sizes if first < s <= end)
        specs.append(ChunkSpec(first, after, last_id, inside, level is not Level.INTEGRITY))
        first, after = end, last_id
    return count, specs


def verify_store(
    app: LedgerApplication,
    keyring: Keyring,
    *,
    level: Level = Level.SETTLEMENT,
    trusted: Checkpoint | None = None,
    workers: int | None = None,
    chunk_leaves: int = CHUNK_LEAVES,
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
    variants: Mapping[str, Variant] | None = None,
) -> VerificationReport:
    """Verify everything; return the report or raise the first `VerificationError`."""
    started = time.perf_counter()
    if chunk_leaves & (chunk_leaves - 1):
        raise ValueError("chunk size must be a power of two")
    workers = workers or os.cpu_count() or 1
    report = VerificationReport(level=level, workers=workers)

    checkpoints = load_checkpoints(app.tables, keyring, trusted)
    if trusted is not None:
        report.trusted_size = trusted.size
    expected_roots = {c.size: c.root for c in checkpoints}
    sizes = set(expected_roots) | ({trusted.size} if trusted else set())

    count, specs = plan_chunks(app, sorted(sizes), level, chunk_leaves)
    if on_total:
        on_total(count)
    report.workers = min(workers, max(1, len(specs)))
    problems: list[Problem] = []
    heads: dict[str, tuple[int, bytes]] = {}
    tree = CompactRange(0)
    signer_check = SignerCheck(keyring)
    results = run_chunks(
        specs,
        lambda spec: verify_chunk_with(app.tables, signer_check, spec),
        store=app.store_url,
        keyring_json=keyring.to_json(),
        processes=report.workers,
    )
    with closing(results):  # stops the workers even when the merge stops early
        for result in results:
            if result.problem:
                problems.append(result.problem)
                break  # later chunks cannot be merged past a broken one
            for stream, (position, version, prev_hash) in result.firsts.items():
                problem = link_problem(stream, position, version, prev_hash, heads.get(stream))
                if problem:
                    problems.append(problem)
            heads.update(result.lasts)
            for size, partial in result.at_size.items():
                whole = tree.copy()
                whole.extend(partial)
                root = whole.root()
                if size in expected_roots and root != expected_roots[size]:
                    problems.append(_root_mismatch(app, size, result.spec.first_leaf))
                if trusted is not None and size == trusted.size and root != trusted.root:
                    # The kept checkpoint against the log itself, never a stored one.
                    stored = expected_roots.get(size)
                    problems.append(kept_mismatch(result.spec.first_leaf, trusted, stored))
            tree.extend(result.leaves)
            if problems:
                break
            if progress:
                progress(result.count)

    missing = [size for size in sizes if size > count]
    if missing and not problems:
        size = max(missing)
        kind = "the kept checkpoint" if trusted and size == trusted.size else "a checkpoint"
        problems.append(
            Problem(
                count,
                f"the log holds {count} events but {kind} of size {size} covers more: "
                f"the event at log position {count} and every later one are missing",
            )
        )
    if problems:
        raise min(problems, key=lambda p: p.position).as_error()

    check_proofs(app.tables, checkpoints, trusted)
    if level is Level.SETTLEMENT:
        resettler = Resettler(variants) if variants is not None else None
        dice = DiceAudit(keyring)
        report.movements = check_money(
            app.tables, app.mapper.transcoder, keyring, resettler=resettler, dice=dice
        )
        report.resettled = resettler.resettled if resettler else None
        report.rng_throws, report.rng_pending = dice.finish()
        report.device_reports = dice.device_reports
    report.events = count
    report.streams = len(heads)
    report.checkpoints = len(checkpoints)
    report.covered = checkpoints[-1].size if checkpoints else 0
    newest = checkpoints[-1] if checkpoints else None
    report.unanchored = unanchored_note(count, newest, datetime.now(UTC))
    report.seconds = time.perf_counter() - started
    return report


def _root_mismatch(app: LedgerApplication, size: int, from_leaf: int) -> Problem:
    """Locate the first event that differs from what the checkpointer saw."""
    where = f"checkpoint of size {size}"
    reader = app.tables
    try:
        for index, notification_id, stored_hash in reader.leaves(0, size):
            row = reader.row_by_id(notification_id)
            if row is None:
                return Problem(index, f"event {notification_id} under the {where} is missing")
            stream = stream_of(row[1])
            envelope = open_envelope(bytes(row[4]), stream=stream, version=row[2])
            if envelope.entry_hash != stored_hash:
                return Problem(
                    index,
                    f"stream {stream} version {row[2]}: differs from the event the {where} signed",
                )
    except (LedgerError, LookupError, TypeError, ValueError) as exc:
        return CheckpointProblem(
            from_leaf, where, f"the Merkle root of the first {size} events does not match ({exc})"
        )
    return CheckpointProblem(
        from_leaf, where, f"the Merkle root of the first {size} events does not match it"
    )
