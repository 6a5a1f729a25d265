"""`ledger verify`: check a whole log, trusting nothing in it, as a checklist.

`Verifier.run` calls the eleven steps in the order docs/auditing.md numbers
them (`CHECKLIST` is that list in code; a test holds the two together):

1. keys, 2. checkpoints, 3. recorded runs: what the log says about itself,
   read first (`ledger.audit.log`);
4. envelopes, 5. chains, 6. merkle: the log cut into chunks of 2^k leaves,
   each verified on its own (in parallel over all cores), the results merged
   in log order (`ledger.audit.log.merge`); 7. proofs meanwhile;
8. money, 9. sources, 10. round rules, 11. payouts: at level settlement,
   everything the events say, re-derived (`ledger.audit.games`); a round no
   installed game re-derives fails with `CannotReDeriveError`, never an OK.

Levels: ``integrity`` (steps 1-7 without the envelopes' signatures),
``signatures`` (with them), ``settlement`` (all eleven, the default). The
source is a store (`StoreLog`) or a whole-log bundle (`BundleLog`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from ledger.audit.findings import Finding, Findings, Step
from ledger.audit.games.money import MoneyAudit
from ledger.audit.games.resettle import Resettler
from ledger.audit.games.round_rules import RoundRulesAudit
from ledger.audit.games.settlement import SettlementAudit
from ledger.audit.games.sources import SourceAudit
from ledger.audit.level import Level as Level  # where the rest of the ledger imports it from
from ledger.audit.log.archives import (
    ArchivedSummary,
    check_archived_table,
    check_resumable,
    recorded_archives,
)
from ledger.audit.log.checkpoints import load_checkpoints, unanchored_note
from ledger.audit.log.chunks import (
    CHUNK_LEAVES,
    ChunkResult,
    ChunkSpec,
    Problem,
    no_cycle_collection,
)
from ledger.audit.log.erasures import RecordedErasure, recorded_erasures
from ledger.audit.log.key_times import Coverage, checkpoint_times
from ledger.audit.log.log_events import Event
from ledger.audit.log.log_source import LogSource, StoreLog, prepare_workers
from ledger.audit.log.merge import ChunkMerge, Merge, known_roots
from ledger.audit.log.parallel import run_chunks
from ledger.audit.log.revocations import (
    LogRevocation,
    check_revokers,
    earliest,
    log_revocations,
    merged,
)
from ledger.audit.log.verifications import RecordedRun, recorded_runs
from ledger.audit.verify_report import VerificationReport as VerificationReport
from ledger.audit.verify_state import SavedChunk, VerifyState
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import SignerCheck, now_micros
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import CompactRange
from ledger.errors import ConfigError, FindingKind, VerificationError
from ledger.plugins.registry import LoadedGame
from ledger.store.application import LedgerApplication


@dataclass(frozen=True)
class VerifyOptions:
    """What a run checks and how: one value, handed down whole."""

    level: Level = Level.SETTLEMENT
    trusted: Checkpoint | None = None  # the auditor's kept checkpoint
    workers: int | None = None  # processes verifying chunks (None: a core each)
    chunk_leaves: int = CHUNK_LEAVES  # a power of two
    # At level settlement, the games rounds are re-derived by (the caller's: an
    # opened ledger's `games`, or `Plugins.games()`; this layer loads no plugin).
    games: Mapping[str, LoadedGame] | None = None
    resume: VerifyState | None = None  # go on from a saved state (`verify --resume`)
    save_state: bool = False  # leave the next state in the report when nothing was found
    # Resumed: read the stored Merkle rows the state vouches for again (False: a
    # mirror's pass between its periodic re-reads).
    reread_tree: bool = True


@dataclass(frozen=True)
class Sinks:
    """Where a run tells what it finds as it goes (none: the first finding raises)."""

    findings: Findings | None = None  # every finding left here instead of raised
    progress: Callable[[int], None] | None = None  # events verified so far, in steps
    on_total: Callable[[int], None] | None = None  # the events the run will verify


class Verifier:
    """One run of `ledger verify` over one log: `run` is the checklist."""

    def __init__(
        self,
        log: LogSource,
        keyring: Keyring,
        options: VerifyOptions = VerifyOptions(),
        sinks: Sinks = Sinks(),
    ) -> None:
        if options.resume is not None and options.resume.level != options.level.value:
            level = options.resume.level
            raise ConfigError(
                f"the saved state was made at level {level}: resume at that level "
                f"(--level {level}), or verify in full"
            )
        if options.chunk_leaves & (options.chunk_leaves - 1):
            raise ValueError("chunk size must be a power of two")
        if options.level is Level.SETTLEMENT and options.games is None:
            raise ValueError("level settlement re-derives every round: VerifyOptions(games=...)")
        self.log, self.keyring, self.options, self.sinks = log, keyring, options, sinks
        self.found = sinks.findings if sinks.findings is not None else Findings()
        self.workers = options.workers or os.cpu_count() or 1
        self.report = VerificationReport(
            level=options.level, workers=self.workers, findings=self.found
        )
        self.checkpoints_read: list[Checkpoint] = []
        self.runs: list[RecordedRun] = []
        self.erasures: list[RecordedErasure] = []
        self.archived = ArchivedSummary()
        self.coverage = Coverage([])
        self.times: list[tuple[int, int]] = []
        self._key_problems: list[VerificationError] = []
        self._revocations: list[LogRevocation] = []
        self._settled_state: dict[str, Any] | None = None  # steps 8-11's, for a saved state

    # -- the checklist -------------------------------------------------------

    def run(self) -> VerificationReport:
        """Every step, in order; the report, or the first finding raised (no sink)."""
        started, started_at = time.perf_counter(), now_micros()
        try:
            prepare_workers(self.log, self.workers, self.options.chunk_leaves)
            resume = self.options.resume
            # The log is cut into chunks (index seeks) while steps 1-3 read.
            self.log.start_plan(
                self.options.chunk_leaves, (resume.size, resume.last_id) if resume else (0, 0)
            )
            self.keys()
            self.checkpoints()
            self.recorded_runs()
            merge, count, specs = self._read_the_log()  # 4-6 in chunks; 7 meanwhile; 8-11
            self._archived_markers(merge)
        finally:
            self.log.end_plan()  # the cut has stopped reading: the store may close
        if self.found and self.sinks.findings is None:
            headline = self.found.headline()
            assert headline is not None
            raise headline
        self._fill_report(merge, count, specs, started_at)
        self.report.seconds = time.perf_counter() - started
        return self.report

    def keys(self) -> None:
        """Step 1: the log's key revocations, each signed by an operator key, merged
        with the keyring's own (the earlier wins). Who signed each is judged once
        step 2 has the checkpoints' times (`_judge_revokers`)."""
        log = self.log
        self._revocations = log_revocations(
            log.rows, log.transcoder, self.keyring, self._key_problems
        )
        self.keyring = merged(self.keyring, earliest(self._revocations))

    def checkpoints(self) -> None:
        """Step 2: every stored checkpoint's note, signature and key; no fork; issue
        times in order; the kept checkpoint's."""
        problems: list[VerificationError] = []
        trusted = self.options.trusted
        self.checkpoints_read = load_checkpoints(self.log.rows, self.keyring, trusted, problems)
        self._add(Step.CHECKPOINTS, problems)
        everyone = self.checkpoints_read + ([trusted] if trusted is not None else [])
        self.times = checkpoint_times(everyone)
        self.coverage = Coverage(self.times)
        self._judge_revokers()

    def _judge_revokers(self) -> None:
        """Step 1's end: each revocation's operator key valid when a checkpoint says
        it was signed; a saved state judged by keys that changed since is not enough."""
        check_revokers(self._revocations, self.keyring, self.coverage, self._key_problems)
        self._add(Step.KEYS, self._key_problems)
        resume = self.options.resume
        for change in resume.judged_keys(self.keyring) if resume is not None else []:
            self.found.add(Finding(FindingKind.NOT_CHECKED, Step.KEYS, f"{change}; verify in full"))

    def recorded_runs(self) -> None:
        """Step 3: every auditor's recorded verification run, its signature (its
        size and root are held to the tree at step 6); every operator's recorded
        erasure of personal data, its signature."""
        problems: list[VerificationError] = []
        log = self.log
        self.runs = recorded_runs(log.rows, log.transcoder, self.keyring, self.coverage, problems)
        self.erasures = recorded_erasures(
            log.rows, log.transcoder, self.keyring, self.coverage, problems
        )
        if isinstance(log, StoreLog):
            recorded = recorded_archives(log.rows, log.transcoder, self.keyring, problems)
            resume = self.options.resume
            start = resume.size if resume is not None else 0
            self.archived = check_archived_table(log.archived_table, recorded, start, problems)
            if resume is not None:
                check_resumable(self.archived, resume.size)
        self._add(Step.RUNS, problems)

    def envelopes(self, merge: Merge, result: ChunkResult) -> None:
        """Step 4: every row's envelope against the row, a signer valid at its
        signing time, its signature (not at level integrity), as a chunk found them."""
        merge.envelopes(result)

    def chains(self, merge: Merge, result: ChunkResult) -> None:
        """Step 5: every stream's versions and links, inside the chunk and across its edges."""
        merge.chains(result)

    def merkle(self, merge: Merge, result: ChunkResult) -> None:
        """Step 6: the tree the events give, its root at every checkpoint, the kept
        checkpoint and recorded run sizes (the stored tree once all are merged)."""
        merge.merkle(result)

    def proofs(self, proven: list[Checkpoint]) -> None:
        """Step 7: the consistency proofs the source serves between checkpoints."""
        try:
            self.log.check_proofs(proven, self.options.trusted)
        except VerificationError as exc:
            self.found.add_error(Step.PROOFS, exc, kind=FindingKind.ALTERED)

    def settlement(self, audit: SettlementAudit, events: Iterator[Event]) -> None:
        """Steps 8 money, 9 sources, 10 round rules, 11 payouts: each event read once,
        by the four audits in that order (`ledger.audit.games.settlement`)."""
        for event in events:
            audit.observe(event)

    # -- how the log is read -------------------------------------------------

    def _read_the_log(self) -> tuple[Merge, int, list[ChunkSpec]]:
        """Steps 4-11 over the log in chunks: workers verify chunks (4-6 inside
        each), this process merges them in log order and, at level settlement,
        settles each merged chunk while the workers verify the next; step 7 runs
        while the first chunks are taken."""
        options, log, report = self.options, self.log, self.report
        level, resume, trusted = options.level, options.resume, options.trusted
        claimed = {r.tree_size: r for r in self.runs if r.root is not None}
        expected_roots = {c.size: c.root for c in self.checkpoints_read}
        sizes = set(expected_roots) | ({trusted.size} if trusted else set()) | set(claimed)
        if trusted is not None:
            report.trusted_size = trusted.size
        start = (resume.size, resume.last_id) if resume is not None else (0, 0)
        if resume is not None:  # roots inside the state come from it, not from the events
            known_roots(resume, sizes, expected_roots, claimed, trusted, self.found)
            sizes = {size for size in sizes if size > resume.size}
        count, specs = log.plan(
            sorted(sizes), level is not Level.INTEGRITY, options.chunk_leaves, self.times, start
        )
        specs, tree_to = self._chunks_to_read(specs, start)
        if self.sinks.on_total:
            self.sinks.on_total(count)
        report.workers = min(self.workers, max(1, len(specs))) if log.parallel else 1
        # With several processes, workers verify the chunks while this one settles
        # each chunk once it is merged (its envelope findings known by then).
        pipelined = level is Level.SETTLEMENT and report.workers > 1
        expected_accounts = {c.size: c.accounts for c in self.checkpoints_read if c.accounts}
        merge: Merge = log.merger(self.found) or ChunkMerge(
            self.found, claimed, expected_roots, trusted, log, resume, tree_to, expected_accounts
        )
        audit = self._settlement_audit()
        proven = self._proofs_to_check()
        ran_in: set[int] = set()  # the processes that verified chunks, for the report
        signer_check = SignerCheck(self.keyring)
        results = run_chunks(
            specs,
            lambda spec: log.verify_chunk(signer_check, spec),
            plan=log.worker_plan(self.keyring.to_json()),
            processes=report.workers,
            caller_works=not pipelined,
            meanwhile=lambda: self.proofs(proven),
            ran_in=ran_in,
        )
        # The merge and the settlement make millions of short-lived objects and next
        # to no reference cycle (83 objects in one of a 285k-event run): the cyclic
        # collector would walk them again and again to free nothing (5% of the CPU).
        with no_cycle_collection():
            # closing: stops the workers even when the merge stops early; the heads'
            # scratch file goes.
            with closing(results), closing(merge):
                for result in results:
                    merge.record(result)
                    self.envelopes(merge, result)
                    self.chains(merge, result)
                    self.merkle(merge, result)
                    if audit is not None and pipelined and not result.spec.digest_only:
                        self.settlement(audit, self._chunk_events(result))
                    if self.sinks.progress:
                        self.sinks.progress(result.count)
            # What the OK line names: the processes that did verify chunks, not those asked for.
            report.workers = max(1, len(ran_in))
            merge.finish(count, sizes)
            merge.check_stored_tree()
            try:
                log.finish_chunks()
            except VerificationError as exc:
                self.found.add_error(Step.CHAINS, exc, kind=FindingKind.ALTERED)
            if audit is not None:
                if not pipelined:
                    self.settlement(audit, log.events(start=start))
                self._settled_state = audit.saved() if options.save_state else None
                report.settlement = audit.finish()
                report.rounds = audit.archive
        empty = claimed.get(0)
        if empty is not None and empty.root != CompactRange(0).root():
            problem = Problem(
                empty.position, "a recorded verification run claims a wrong empty root"
            )
            self.found.add_error(Step.RUNS, problem.as_error(), kind=FindingKind.ALTERED)
        return merge, count, specs

    def _chunks_to_read(
        self, specs: list[ChunkSpec], start: tuple[int, int]
    ) -> tuple[list[ChunkSpec], int]:
        """The chunks as planned, told what more to do: a digest of their rows (to
        settle them in this process, or for a saved state), the stored tree to
        compare up to, and (resumed) the chunks of the state to re-hash first."""
        options, log = self.options, self.log
        level, resume = options.level, options.resume
        # At level settlement this process reads each chunk's rows again to settle
        # them: their digests tell it they are the rows the chunk verified.
        if options.save_state or (level is Level.SETTLEMENT and self.workers > 1):
            specs = [replace(spec, digest=True) for spec in specs]
        # Step 6's stored tree: the store's Merkle rows under the newest checkpoint,
        # against the tree the events give (below level settlement only when a state
        # will vouch for them, or vouched for them: it costs a read of 2 rows an event).
        covered = self.checkpoints_read[-1].size if self.checkpoints_read else 0
        is_store = isinstance(log, StoreLog)
        tree_to = covered if is_store and _checks_tree(level, options.save_state, resume) else 0
        self.report.tree_checked_to = tree_to if is_store else None
        if tree_to:
            specs = [replace(spec, tree_to=tree_to) for spec in specs]
        if resume is not None:
            # The heads of the streams the new events touch come from the rows re-hashed.
            assert isinstance(log, StoreLog)  # (a bundle cannot start past 0: plan refused it)
            touched = frozenset(
                log.tables.streams_between(start[1], specs[-1].last_id) if specs else ()
            )
            rehashed = [
                _rehash(chunk, touched, tree_to, options.reread_tree) for chunk in resume.chunks
            ]
            specs = rehashed + specs
        return specs, tree_to

    def _archived_markers(self, merge: Merge) -> None:
        """Step 6's end: the archived events' marker rows the walk met are the
        table's rows the register's digests hold (none turned into one, none lost)."""
        if not isinstance(merge, ChunkMerge) or merge.archived == self.archived.from_start:
            return
        message = (
            f"the log reads {merge.archived} archived events' marker rows where the archive "
            f"register's archives hold {self.archived.from_start}: an event was replaced "
            "by a marker, or a marker removed"
        )
        self.found.add(Finding(FindingKind.ALTERED, Step.MERKLE, message))

    def _settlement_steps(self) -> tuple[Step, ...]:
        """The settlement steps the log's events can show: with events archived and
        not given back, a round's own (10, 11), not money or seeds across rounds."""
        steps = self.log.settlement_steps
        if self.archived.applied and not getattr(self.log, "fills_archived", False):
            return tuple(step for step in steps if step in (Step.RULES, Step.PAYOUTS))
        return steps

    def _settlement_audit(self) -> SettlementAudit | None:
        """Steps 8-11's audit at level settlement (restored from a saved state)."""
        if self.options.level is not Level.SETTLEMENT:
            return None
        games = self.options.games
        assert games is not None  # (refused without them at level settlement)
        audit = SettlementAudit(
            self.keyring, games, self.coverage, self.found, steps=self._settlement_steps()
        )
        if self.options.resume is not None:
            audit.restore(*self.options.resume.saved_settlement())
        return audit

    def _proofs_to_check(self) -> list[Checkpoint]:
        """The checkpoints step 7 proves consistent (resumed: from the newest inside
        the state on; those between older ones were checked for the state)."""
        resume, checkpoints = self.options.resume, self.checkpoints_read
        if not isinstance(self.log, StoreLog):
            self.report.proofs = (
                "a bundle serves no stored tree: every root was recomputed from its events"
            )
        if resume is None:
            return checkpoints
        inside = [c for c in checkpoints if c.size <= resume.size]
        if isinstance(self.log, StoreLog):
            self.report.proofs = (
                "consistency proofs the store serves from the newest checkpoint inside the "
                "saved state to each later one verified (those between older ones were "
                "verified when the state was made, and are NOT re-checked)"
            )
        return inside[-1:] + [c for c in checkpoints if c.size > resume.size]

    def _chunk_events(self, result: ChunkResult) -> Iterator[Event]:
        return chunk_events(self.log, result, self.found)

    def _add(self, step: Step, problems: list[VerificationError]) -> None:
        for exc in problems:
            self.found.add_error(step, exc, kind=FindingKind.ALTERED, position=exc.position)

    def _fill_report(
        self, merge: Merge, count: int, specs: list[ChunkSpec], started_at: int
    ) -> None:
        report, checkpoints, options = self.report, self.checkpoints_read, self.options
        report.recorded_runs = len(self.runs)
        report.erasures = len(self.erasures)
        report.archived = self.archived
        report.archived_filled = bool(getattr(self.log, "fills_archived", False))
        report.revocations = len(self._revocations)
        report.root = merge.root()
        report.checkpoint_root = checkpoints[-1].root.hex() if checkpoints else None
        report.events = count
        report.streams = merge.streams()
        report.account_heads = merge.account_heads()
        report.checkpoints = len(checkpoints)
        report.covered = checkpoints[-1].size if checkpoints else 0
        newest = checkpoints[-1] if checkpoints else None
        report.unanchored = unanchored_note(count, newest, datetime.now(UTC))
        report.resumed_from = options.resume.size if options.resume is not None else None
        if not (options.save_state and not self.found):
            report.rounds = None
            return
        assert isinstance(merge, ChunkMerge)  # (a saved state is a store's: its log in order)
        report.state = VerifyState(
            level=options.level.value,
            size=count,
            last_id=specs[-1].last_id if specs else 0,
            tree=merge.tree,
            chunks=merge.saved,
            streams=report.streams,
            roots=merge.roots,
            keys=[record.key_id for record in self.keyring],
            revocations=VerifyState.revocations_of(self.keyring),
            saved_at=started_at,
            spanning=merge.spanning_kept(),
            settlement=self._settled_state,
            account_heads=list(merge.accounts.heads.values()),
        )


#: The checklist, in docs/auditing.md's order: each step and the code that does it.
CHECKLIST: Final[tuple[tuple[Step, Callable[..., Any]], ...]] = (
    (Step.KEYS, Verifier.keys),
    (Step.CHECKPOINTS, Verifier.checkpoints),
    (Step.RUNS, Verifier.recorded_runs),
    (Step.ENVELOPES, Verifier.envelopes),
    (Step.CHAINS, Verifier.chains),
    (Step.MERKLE, Verifier.merkle),
    (Step.PROOFS, Verifier.proofs),
    (Step.MONEY, MoneyAudit.observe),
    (Step.SOURCES, SourceAudit.observe),
    (Step.RULES, RoundRulesAudit.observe),
    (Step.PAYOUTS, Resettler.observe),
)


def verify_log(
    log: LogSource,
    keyring: Keyring,
    options: VerifyOptions = VerifyOptions(),
    sinks: Sinks = Sinks(),
) -> VerificationReport:
    """Verify a log, from a store or a bundle: `Verifier(...).run()`."""
    return Verifier(log, keyring, options, sinks).run()


def verify_store(
    app: LedgerApplication,
    keyring: Keyring,
    options: VerifyOptions = VerifyOptions(),
    sinks: Sinks = Sinks(),
) -> VerificationReport:
    """Verify a store; return the report or raise the first `VerificationError`
    (or `CannotCheckError` when the level cannot be fully checked). With a
    findings sink, every finding is left there (and in the report) instead."""
    return Verifier(StoreLog(app), keyring, options, sinks).run()


def chunk_events(log: LogSource, result: ChunkResult, found: Findings) -> Iterator[Event]:
    """A merged chunk's events for the settlement pass; rows changed since the
    chunk verified them are a finding, and are read (and checked) as they are."""
    try:
        return log.chunk_events(result.spec, result)
    except VerificationError as exc:
        found.add_error(Step.ENVELOPES, exc, kind=FindingKind.ALTERED)
        return log.events_of_chunk(result.spec)


def plan_chunks(
    app: LedgerApplication,
    sizes: list[int],
    level: Level,
    chunk_leaves: int,
    times: list[tuple[int, int]] | None = None,
) -> tuple[int, list[ChunkSpec]]:
    """Cut a store's log into chunks; `times` are the checkpoints' (size, issued_at µs)."""
    return StoreLog(app).plan(sizes, level is not Level.INTEGRITY, chunk_leaves, times or [])


def _checks_tree(level: Level, save_state: bool, resume: VerifyState | None) -> bool:
    """Whether the stored Merkle rows are compared with the tree: at level
    settlement, the full audit (next to re-deriving every event, two rows' read
    is little; at level signatures it was a tenth of a PostgreSQL run), and
    whenever a saved state vouches or will vouch for them (a mirror's passes)."""
    return level is Level.SETTLEMENT or save_state or resume is not None


def _rehash(
    chunk: SavedChunk, heads_of: frozenset[object], tree_to: int, reread_tree: bool
) -> ChunkSpec:
    """A chunk of rows a saved state vouches for: read and re-hashed (its Merkle
    rows with them, those the state vouches for; any stored since under the
    newest checkpoint, `tree_to`, compared with its tree), and the heads of
    these streams taken, nothing more."""
    return ChunkSpec(
        chunk.first_leaf,
        chunk.after_id,
        chunk.last_id,
        (),
        False,
        digest=True,
        digest_only=True,
        heads_of=heads_of,
        tree_to=max(tree_to, chunk.tree_to),
        tree_vouched=chunk.tree_to,
        reread_tree=reread_tree,
    )
