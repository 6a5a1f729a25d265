"""`ledger verify`: check a whole store, trusting nothing in it.

Levels:
- ``integrity``: every envelope against its row (payload hash, type, stream,
  version), every signer against the keyring, every chain link and version
  step per stream, the Merkle root recomputed at every stored checkpoint and
  every checkpoint's signature, and the auditor's own kept checkpoint.
- ``signatures``: all of that plus every envelope's Ed25519 signature.
- ``settlement``: all of that plus everything the events say, re-derived
  (money, outcome sources, round rules and fault policies, payouts: see
  `ledger.audit.settlement`); a round that cannot be re-derived (its variant
  is not installed, or is blocked) fails with `CannotReDeriveError`, never an OK.

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
    kept_mismatch,
    load_checkpoints,
    unanchored_note,
)
from ledger.audit.chunks import ChunkSpec, Problem, link_problem
from ledger.audit.key_times import Coverage, checkpoint_times
from ledger.audit.log_source import LogSource, StoreLog
from ledger.audit.parallel import run_chunks
from ledger.audit.revocations import check_revokers, earliest, log_revocations, merged
from ledger.audit.round_variants import installed_variants
from ledger.audit.settlement import SettlementCounts, check_settlement
from ledger.audit.verifications import recorded_runs
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import CompactRange
from ledger.errors import ConfigError
from ledger.plugins.registry import LoadedGame as Variant
from ledger.store.application import LedgerApplication

# Small enough that the processes finish together (a worker starts late and
# the last chunks are shared out finely), large enough that a chunk's query
# and its result's trip back cost little next to its events.
CHUNK_LEAVES = 1 << 12


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


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


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
    settlement: SettlementCounts | None = None  # what the settlement level re-derived
    root: str = ""  # the whole log's Merkle root (hex) the events give
    checkpoint_root: str | None = None  # the newest valid checkpoint's root (hex)
    recorded_runs: int = 0  # recorded verification runs checked (signature, size, root)
    notes: list[str] = field(default_factory=list)

    @property
    def movements(self) -> int | None:
        return self.settlement.movements if self.settlement else None

    @property
    def resettled(self) -> int | None:
        return self.settlement.resettled if self.settlement else None

    @property
    def rng_throws(self) -> int:
        return self.settlement.rng_throws if self.settlement else 0

    @property
    def rng_pending(self) -> int:
        return self.settlement.rng_pending if self.settlement else 0

    @property
    def device_reports(self) -> int:
        return self.settlement.device_reports if self.settlement else 0

    def summary(self) -> str:
        lines = [
            f"OK: {_n(self.events, 'event')} in {_n(self.streams, 'stream')}, "
            f"{_n(self.checkpoints, 'checkpoint')} verified at level {self.level.value} "
            f"in {self.seconds:.2f} s ({self.workers} worker{'s' if self.workers > 1 else ''})",
        ]
        if self.settlement is not None:
            lines += _settlement_lines(self.settlement)
        if self.trusted_size is not None:
            lines.append(f"   consistent with the kept checkpoint of size {self.trusted_size}")
        if self.recorded_runs:
            lines.append(
                f"   {_n(self.recorded_runs, 'recorded verification run')} checked: auditor "
                "signatures, and each run's tree size and root against the log"
            )
        if self.unanchored:
            lines.append(f"   {self.unanchored}")
        return "\n".join(lines + [f"   {note}" for note in self.notes])


def _settlement_lines(counts: SettlementCounts) -> list[str]:
    """What the settlement level re-derived, said in counts; what it did not, said too."""
    lines = [
        f"   {counts.movements} money movements balanced; {counts.wallets} wallets match "
        "their postings; every account a posting names exists",
        f"   {counts.rounds} rounds re-derived (step order, voids, fault policy: "
        f"{counts.faults} faulty throws); {counts.resettled} settlements re-settled with "
        f"their own variant and rules ({counts.bets} bets)",
        f"   {counts.rng_throws} RNG throws recomputed from their round's committed seed; "
        f"{counts.device_reports} dealer device reports verified",
    ]
    if counts.rng_cards or counts.rng_cards_pending:
        lines.append(
            f"   {counts.rng_cards} RNG card draws recomputed from their round's shuffled deck"
        )
    if counts.rng_cards_pending:
        lines.append(
            f"   NOT CHECKED: {counts.rng_cards_pending} RNG card draws whose seed is not "
            "revealed yet (verify again once it is retired)"
        )
    if counts.other_code:
        total = sum(n for *_, n in counts.other_code)
        which = ", ".join(
            f"{game} {played} -> {now}: {n}" for game, played, now, n in counts.other_code
        )
        lines.append(
            f"   information: {total} rounds re-derived by different code than played them, "
            f"with the same rules hash and settlement API ({which})"
        )
    if counts.rng_pending:
        lines.append(
            f"   NOT CHECKED: {counts.rng_pending} RNG throws whose seed is not revealed yet "
            "(verify again once it is retired)"
        )
    return lines


def plan_chunks(
    app: LedgerApplication,
    sizes: list[int],
    level: Level,
    chunk_leaves: int,
    times: list[tuple[int, int]] | None = None,
) -> tuple[int, list[ChunkSpec]]:
    """Cut a store's log into chunks; `times` are the checkpoints' (size, issued_at µs)."""
    return StoreLog(app).plan(sizes, level is not Level.INTEGRITY, chunk_leaves, times or [])


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
    """Verify a store; return the report or raise the first `VerificationError`
    (or `CannotCheckError` when the level cannot be fully checked). At level
    settlement, `variants` defaults to the installed ones."""
    return verify_log(
        StoreLog(app),
        keyring,
        level=level,
        trusted=trusted,
        workers=workers,
        chunk_leaves=chunk_leaves,
        progress=progress,
        on_total=on_total,
        variants=variants,
    )


def verify_log(
    log: LogSource,
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
    """Verify a log, from a store or a bundle (see `verify_store`)."""
    started = time.perf_counter()
    if chunk_leaves & (chunk_leaves - 1):
        raise ValueError("chunk size must be a power of two")
    workers = workers or os.cpu_count() or 1
    report = VerificationReport(level=level, workers=workers)

    # Revocations: the log's KeyRevoked events and the keyring's, the earlier wins.
    revocations = log_revocations(log.rows, log.transcoder, keyring)
    keyring = merged(keyring, earliest(revocations))
    checkpoints = load_checkpoints(log.rows, keyring, trusted)
    if trusted is not None:
        report.trusted_size = trusted.size
    everyone = checkpoints + ([trusted] if trusted is not None else [])
    times = checkpoint_times(everyone)
    coverage = Coverage(times)
    check_revokers(revocations, keyring, coverage)
    runs = recorded_runs(log.rows, log.transcoder, keyring, coverage)
    claimed = {r.tree_size: r for r in runs if r.root is not None}
    expected_roots = {c.size: c.root for c in checkpoints}
    sizes = set(expected_roots) | ({trusted.size} if trusted else set()) | set(claimed)

    count, specs = log.plan(sorted(sizes), level is not Level.INTEGRITY, chunk_leaves, times)
    if on_total:
        on_total(count)
    report.workers = min(workers, max(1, len(specs)))
    problems: list[Problem] = []
    heads: dict[str, tuple[int, bytes]] = {}
    tree = CompactRange(0)
    signer_check = SignerCheck(keyring)
    results = run_chunks(
        specs,
        lambda spec: log.verify_chunk(signer_check, spec),
        plan=log.worker_plan(keyring.to_json()),
        processes=report.workers,
    )
    matched = 0  # the largest checkpoint size whose root the events reproduce
    with closing(results):  # stops the workers even when the merge stops early
        for result in results:
            problem = result.problem or log.merge(result)
            if problem:
                problems.append(problem)
                break  # later chunks cannot be merged past a broken one
            for stream, (position, version, prev_hash) in result.firsts.items():
                problem = link_problem(stream, position, version, prev_hash, heads.get(stream))
                if problem:
                    problems.append(problem)
            heads.update(result.lasts)
            for size, partial in sorted(result.at_size.items()):
                whole = tree.copy()
                whole.extend(partial)
                root = whole.root()
                run = claimed.get(size)
                if run is not None and root != run.root:
                    problems.append(
                        Problem(
                            run.position,
                            f"a recorded verification run claims the log's root at size {size} "
                            "is one the events do not give",
                        )
                    )
                    break
                if size in expected_roots and root != expected_roots[size]:
                    problems.append(log.root_mismatch(matched, size))
                    break
                if trusted is not None and size == trusted.size and root != trusted.root:
                    # The kept checkpoint against the log itself, never a stored one.
                    stored = expected_roots.get(size)
                    problems.append(kept_mismatch(result.spec.first_leaf, trusted, stored))
                    break
                matched = size
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
        first = min(problems, key=lambda p: p.position)
        # A removed event shows up later (its stream's next version, a root, the
        # tail): name the gap itself when the stored leaves show where it was.
        removed = log.first_removed(matched, first.position + 1)
        raise (removed if removed and removed.position <= first.position else first).as_error()

    log.finish_chunks()
    log.check_proofs(checkpoints, trusted)
    if level is Level.SETTLEMENT:
        report.settlement = check_settlement(
            log.events(),
            keyring,
            installed_variants() if variants is None else variants,
            coverage,
        )
    empty = claimed.get(0)
    if empty is not None and empty.root != CompactRange(0).root():
        raise Problem(
            empty.position, "a recorded verification run claims a wrong empty root"
        ).as_error()
    report.recorded_runs = len(runs)
    report.root = tree.root().hex()
    report.checkpoint_root = checkpoints[-1].root.hex() if checkpoints else None
    report.events = count
    report.streams = len(heads)
    report.checkpoints = len(checkpoints)
    report.covered = checkpoints[-1].size if checkpoints else 0
    newest = checkpoints[-1] if checkpoints else None
    report.unanchored = unanchored_note(count, newest, datetime.now(UTC))
    report.seconds = time.perf_counter() - started
    return report
