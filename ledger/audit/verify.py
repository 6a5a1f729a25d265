"""`ledger verify`: check a whole store, trusting nothing in it.

Levels:
- ``integrity``: every envelope against its row (payload hash, type, stream,
  version), every signer against the keyring, every chain link and version
  step per stream, the Merkle root recomputed at every stored checkpoint and
  every checkpoint's signature, and the auditor's own kept checkpoint.
- ``signatures``: all of that plus every envelope's Ed25519 signature.
- ``settlement``: all of that plus everything the events say, re-derived
  (money, outcome sources, round rules and fault policies, payouts: see
  `ledger.audit.games.settlement`); a round that cannot be re-derived (its variant
  is not installed, or is blocked) fails with `CannotReDeriveError`, never an OK.

The log is cut into chunks of 2^k leaves; each chunk is verified on its own
(in parallel over all cores) and the results are merged in log order: chain
links across chunk edges, and Merkle subtrees into the full tree.
"""

from __future__ import annotations

import functools
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Concatenate, ParamSpec

from ledger.audit.findings import Finding, Findings, Step
from ledger.audit.games.round_archive import RoundArchive
from ledger.audit.games.round_games import installed_games
from ledger.audit.games.settlement import SETTLEMENT_STEPS, SettlementAudit, SettlementCounts
from ledger.audit.level import Level as Level  # where the rest of the ledger imports it from
from ledger.audit.log.checkpoints import (
    kept_mismatch,
    load_checkpoints,
    unanchored_note,
)
from ledger.audit.log.chunks import (
    ChunkResult,
    ChunkSpec,
    Problem,
    link_problem,
    no_cycle_collection,
)
from ledger.audit.log.key_times import Coverage, checkpoint_times
from ledger.audit.log.log_events import Event
from ledger.audit.log.log_source import LogSource, StoreLog
from ledger.audit.log.parallel import prepare as prepare_workers
from ledger.audit.log.parallel import run_chunks
from ledger.audit.log.revocations import check_revokers, earliest, log_revocations, merged
from ledger.audit.log.stored_tree import Mismatches, compare_nodes
from ledger.audit.log.stream_heads import StreamHeads
from ledger.audit.log.verifications import RecordedRun, recorded_runs
from ledger.audit.verify_state import SavedChunk, VerifyState
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import SignerCheck, now_micros
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import CompactRange
from ledger.errors import ConfigError, FindingKind, VerificationError
from ledger.plugins.registry import LoadedGame
from ledger.store.application import LedgerApplication

# Small enough that the processes finish together (a worker starts late and
# the last chunks are shared out finely), large enough that a chunk's query
# and its result's trip back cost little next to its events.
CHUNK_LEAVES = 1 << 12
P = ParamSpec("P")


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
    revocations: int = 0  # revocations the log records, judged
    proofs: str = "consistency proofs the store serves between checkpoints verified"
    # The stored Merkle rows compared with the tree up to this size (0: not
    # compared, at level integrity); None: a bundle, which stores no tree.
    tree_checked_to: int | None = None
    notes: list[str] = field(default_factory=list)
    findings: Findings = field(default_factory=Findings)
    resumed_from: int | None = None  # the saved state's size, when resumed
    state: VerifyState | None = None  # the next state, when asked for and nothing was found
    rounds: RoundArchive | None = None  # its ended rounds' archive (level settlement)

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

    def summary(self, findings_shown: int = 20) -> str:
        """What was verified, step by step; a failed run (findings collected) opens
        with its findings, the first `findings_shown` of them listed."""
        head = (
            f"{_n(self.events, 'event')} in {_n(self.streams, 'stream')}, "
            f"{_n(self.checkpoints, 'checkpoint')} verified at level {self.level.value} "
            f"in {self.seconds:.2f} s ({self.workers} worker{'s' if self.workers > 1 else ''})"
        )
        found = self.findings
        if not found:
            lines = [f"OK: {head}"]
        else:
            lines = [f"{found.summary()}; {head}"]
            listed = found.ordered()
            lines += [f"   {finding.line()}" for finding in listed[:findings_shown]]
            if len(listed) > findings_shown:
                lines.append(
                    f"   ... and {len(listed) - findings_shown} more (--findings FILE lists all)"
                )
        per_step = Counter(f.step for f in found.items)
        for step, text in self._steps():
            if per_step[step]:
                text = f"{_n(per_step[step], 'finding')} (listed above); otherwise {text}"
            lines.append(f"   {step.value}: {text}")
        if self.unanchored:
            lines.append(f"   {self.unanchored}")
        return "\n".join(lines + [f"   {note}" for note in self.notes])

    def _steps(self) -> list[tuple[Step, str]]:
        kept = (
            f"; consistent with the kept checkpoint of size {self.trusted_size}"
            if self.trusted_size is not None
            else ""
        )
        signatures = (
            "every Ed25519 signature verified"
            if self.level is not Level.INTEGRITY
            else "signatures NOT checked (level integrity)"
        )
        steps = [
            (
                Step.KEYS,
                f"{_n(self.revocations, 'revocation')} recorded in the log, each operator "
                "signature and key judged; the keyring's own revocations applied",
            ),
            (
                Step.CHECKPOINTS,
                f"{_n(self.checkpoints, 'checkpoint')} (by size): notes, signatures and keys "
                f"verified, no fork, times in order{kept}",
            ),
            (
                Step.RUNS,
                f"{_n(self.recorded_runs, 'recorded verification run')} checked: auditor "
                "signatures, and each run's tree size and root against the log",
            ),
            (
                Step.ENVELOPES,
                "every envelope against its row, a ledger-node signer valid at its signing "
                f"time; {signatures}"
                + (
                    f" (from log position {self.resumed_from}: every row before it re-read "
                    "and re-hashed, the same bytes as the saved state was made from)"
                    if self.resumed_from is not None
                    else ""
                ),
            ),
            (Step.CHAINS, f"{_n(self.streams, 'stream')}: every version and link unbroken"),
            (
                Step.MERKLE,
                "the root at every checkpoint size recomputed from the events"
                + (" and the kept checkpoint's" if self.trusted_size is not None else "")
                + self._stored_tree(),
            ),
            (Step.PROOFS, self.proofs),
        ]
        if self.settlement is None:
            names = ", ".join(step.value for step in SETTLEMENT_STEPS)
            steps.append(
                (
                    Step.MONEY,
                    f"NOT CHECKED at level {self.level.value}: steps {names} "
                    "(use --level settlement)",
                )
            )
            return steps
        return steps + _settlement_steps(self.settlement)

    def _stored_tree(self) -> str:
        """What the MERKLE step says of the store's own Merkle rows."""
        if self.tree_checked_to is None:
            return ""
        if self.tree_checked_to == 0 and self.level is not Level.SETTLEMENT:
            return (
                f"; the stored Merkle rows NOT compared with it (level {self.level.value}; "
                "level settlement, the default, compares them)"
            )
        return (
            "; every stored Merkle leaf and node under the newest checkpoint "
            f"(size {self.tree_checked_to}) the tree's"
        )


def _settlement_steps(counts: SettlementCounts) -> list[tuple[Step, str]]:
    """What the settlement level re-derived, said in counts; what it did not, said too."""
    sources = (
        f"{counts.rng_throws} RNG throws recomputed from their round's committed seed; "
        f"{counts.device_reports} dealer device reports verified"
    )
    if counts.rng_cards or counts.rng_cards_pending:
        sources += (
            f"; {counts.rng_cards} RNG card draws recomputed from their round's shuffled deck"
        )
    steps = [
        (
            Step.MONEY,
            f"{counts.movements} money movements balanced; {counts.wallets} wallets match "
            "their postings; every account a posting names exists",
        ),
        (Step.SOURCES, sources),
        (
            Step.RULES,
            f"{counts.rounds} rounds re-derived (step order, voids, fault policy: "
            f"{counts.faults} faulty throws)",
        ),
        (
            Step.PAYOUTS,
            f"{counts.resettled} settlements re-settled with their own variant and rules "
            f"({counts.bets} bets)",
        ),
    ]
    if counts.rng_cards_pending:
        steps.append(
            (
                Step.SOURCES,
                f"NOT CHECKED: {counts.rng_cards_pending} RNG card draws whose seed is not "
                "revealed yet (verify again once it is retired)",
            )
        )
    if counts.rng_pending:
        steps.append(
            (
                Step.SOURCES,
                f"NOT CHECKED: {counts.rng_pending} RNG throws whose seed is not revealed yet "
                "(verify again once it is retired)",
            )
        )
    if counts.other_code:
        total = sum(n for *_, n in counts.other_code)
        which = ", ".join(
            f"{game} {played} -> {now}: {n}" for game, played, now, n in counts.other_code
        )
        steps.append(
            (
                Step.PAYOUTS,
                f"information: {total} rounds re-derived by different code than played them, "
                f"with the same rules hash and settlement API ({which})",
            )
        )
    return steps


def _chunk_events(log: LogSource, result: ChunkResult, found: Findings) -> Iterator[Event]:
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
    games: Mapping[str, LoadedGame] | None = None,
    findings: Findings | None = None,
    resume: VerifyState | None = None,
    save_state: bool = False,
) -> VerificationReport:
    """Verify a store; return the report or raise the first `VerificationError`
    (or `CannotCheckError` when the level cannot be fully checked). With
    `findings`, every finding is left there (and in the report) instead. At
    level settlement, `games` defaults to the installed ones. `resume`: go
    on from a saved state (`ledger.audit.verify_state`); `save_state`: leave
    the next one in the report (`report.state`) when nothing was found."""
    return verify_log(
        StoreLog(app),
        keyring,
        level=level,
        trusted=trusted,
        workers=workers,
        chunk_leaves=chunk_leaves,
        progress=progress,
        on_total=on_total,
        games=games,
        findings=findings,
        resume=resume,
        save_state=save_state,
    )


def _cut_waited_for(
    run: Callable[Concatenate[LogSource, P], VerificationReport],
) -> Callable[Concatenate[LogSource, P], VerificationReport]:
    """However the run ends, the log's cut (`LogSource.start_plan`) has stopped
    reading before it returns: its caller may close the store at once."""

    @functools.wraps(run)
    def waited(log: LogSource, /, *args: P.args, **kwargs: P.kwargs) -> VerificationReport:
        try:
            return run(log, *args, **kwargs)
        finally:
            log.end_plan()

    return waited


@_cut_waited_for
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
    games: Mapping[str, LoadedGame] | None = None,
    findings: Findings | None = None,
    resume: VerifyState | None = None,
    save_state: bool = False,
    reread_tree: bool = True,
) -> VerificationReport:
    """Verify a log, from a store or a bundle (see `verify_store`), in numbered
    steps (`ledger.audit.findings.Step`). Every finding is collected, the run
    going on past each; with `findings` given they are left there for the
    caller (the report's `findings`), else the first is raised. Resumed with
    `reread_tree` False, the stored Merkle rows `resume` vouches for are not read
    again (a mirror's pass between its periodic re-reads); rows stored since are."""
    started, started_at = time.perf_counter(), now_micros()
    if resume is not None and resume.level != level.value:
        raise ConfigError(
            f"the saved state was made at level {resume.level}: resume at that level "
            f"(--level {resume.level}), or verify in full"
        )
    if chunk_leaves & (chunk_leaves - 1):
        raise ValueError("chunk size must be a power of two")
    workers = workers or os.cpu_count() or 1
    if workers > 1:  # a fork server, where one is needed, imports while steps 1-3 run
        prepare_workers(log.worker_modules)
    # The log is cut into chunks (index seeks) while the keys and checkpoints load.
    log.start_plan(chunk_leaves, (resume.size, resume.last_id) if resume else (0, 0))
    collect = findings is not None
    found = findings if findings is not None else Findings()
    report = VerificationReport(level=level, workers=workers, findings=found)

    def add(step: Step, problems: list[VerificationError]) -> None:
        for exc in problems:
            found.add_error(step, exc, kind=FindingKind.ALTERED, position=exc.position)

    # 1 keys: the log's KeyRevoked events and the keyring's, the earlier wins.
    key_problems: list[VerificationError] = []
    revocations = log_revocations(log.rows, log.transcoder, keyring, key_problems)
    keyring = merged(keyring, earliest(revocations))
    # 2 checkpoints: each note, signature and key; forks; times.
    checkpoint_problems: list[VerificationError] = []
    checkpoints = load_checkpoints(log.rows, keyring, trusted, checkpoint_problems)
    add(Step.CHECKPOINTS, checkpoint_problems)
    if trusted is not None:
        report.trusted_size = trusted.size
    everyone = checkpoints + ([trusted] if trusted is not None else [])
    times = checkpoint_times(everyone)
    coverage = Coverage(times)
    check_revokers(revocations, keyring, coverage, key_problems)
    add(Step.KEYS, key_problems)
    for change in resume.judged_keys(keyring) if resume is not None else []:
        found.add(Finding(FindingKind.NOT_CHECKED, Step.KEYS, f"{change}; verify in full"))
    # 3 recorded runs.
    run_problems: list[VerificationError] = []
    runs = recorded_runs(log.rows, log.transcoder, keyring, coverage, run_problems)
    add(Step.RUNS, run_problems)
    claimed = {r.tree_size: r for r in runs if r.root is not None}
    expected_roots = {c.size: c.root for c in checkpoints}
    sizes = set(expected_roots) | ({trusted.size} if trusted else set()) | set(claimed)

    # 4 envelopes, 5 chains, 6 merkle: the log in chunks, merged in log order
    # (resumed: the rows before the state re-hashed, the events after it checked).
    start = (resume.size, resume.last_id) if resume is not None else (0, 0)
    if resume is not None:
        _known_roots(resume, sizes, expected_roots, claimed, trusted, found)
        sizes = {size for size in sizes if size > resume.size}
    count, specs = log.plan(
        sorted(sizes), level is not Level.INTEGRITY, chunk_leaves, times, start=start
    )
    # At level settlement this process reads each chunk's rows again to settle
    # them: their digests tell it they are the rows the chunk verified.
    if save_state or (level is Level.SETTLEMENT and workers > 1):
        specs = [replace(spec, digest=True) for spec in specs]
    # 6 the stored tree: the store's Merkle rows under the newest checkpoint,
    # against the tree the events give (below level settlement only when a state
    # will vouch for them, or vouched for them: it costs a read of 2 rows an event).
    covered = checkpoints[-1].size if checkpoints else 0
    tree_to = (
        covered if isinstance(log, StoreLog) and _checks_tree(level, save_state, resume) else 0
    )
    report.tree_checked_to = tree_to if isinstance(log, StoreLog) else None
    if tree_to:
        specs = [replace(spec, tree_to=tree_to) for spec in specs]
    if resume is not None:
        # The heads of the streams the new events touch come from the rows re-hashed.
        assert isinstance(log, StoreLog)  # (a bundle cannot start past 0: plan refused it)
        touched = frozenset(
            log.tables.streams_between(start[1], specs[-1].last_id) if specs else ()
        )
        specs = [_rehash(chunk, touched, tree_to, reread_tree) for chunk in resume.chunks] + specs
    if on_total:
        on_total(count)
    report.workers = min(workers, max(1, len(specs)))
    # With several processes, workers verify the chunks while this one settles
    # each chunk once it is merged (its envelope findings known by then).
    pipelined = level is Level.SETTLEMENT and report.workers > 1
    merge = _Merge(found, claimed, expected_roots, trusted, log, resume, tree_to)
    signer_check = SignerCheck(keyring)
    audit: SettlementAudit | None = None
    if level is Level.SETTLEMENT:  # 8-11: what the events say (ledger.audit.games.settlement)
        audit = SettlementAudit(
            keyring, installed_games() if games is None else games, coverage, found
        )
        if resume is not None:
            audit.restore(*resume.saved_settlement())
    # 7 proofs: the consistency proofs the store serves between checkpoints,
    # checked by this process while the workers take the first chunks.
    if not isinstance(log, StoreLog):
        report.proofs = "a bundle serves no stored tree: every root was recomputed from its events"
    proven = checkpoints
    if resume is not None:  # those between older checkpoints were checked for the state
        inside = [c for c in checkpoints if c.size <= resume.size]
        proven = inside[-1:] + [c for c in checkpoints if c.size > resume.size]
        if isinstance(log, StoreLog):
            report.proofs = (
                "consistency proofs the store serves from the newest checkpoint inside the "
                "saved state to each later one verified (those between older ones were "
                "verified when the state was made, and are NOT re-checked)"
            )

    def check_proofs() -> None:
        try:
            log.check_proofs(proven, trusted)
        except VerificationError as exc:
            found.add_error(Step.PROOFS, exc, kind=FindingKind.ALTERED)

    ran_in: set[int] = set()  # the processes that verified chunks, for the report
    results = run_chunks(
        specs,
        lambda spec: log.verify_chunk(signer_check, spec),
        plan=log.worker_plan(keyring.to_json()),
        processes=report.workers,
        caller_works=not pipelined,
        meanwhile=check_proofs,
        ran_in=ran_in,
    )
    # The merge and the settlement make millions of short-lived objects and next
    # to no reference cycle (83 objects in one of a 285k-event run): the cyclic
    # collector would walk them again and again to free nothing (5% of the CPU).
    with no_cycle_collection():
        # closing: stops the workers even when the merge stops early; the heads'
        # scratch file goes.
        with closing(results), closing(merge.heads):
            for result in results:
                merge.chunk(result)
                if audit is not None and pipelined and not result.spec.digest_only:
                    for event in _chunk_events(log, result, found):
                        audit.observe(event)
                if progress:
                    progress(result.count)
        # What the OK line names: the processes that did verify chunks, not those asked for.
        report.workers = max(1, len(ran_in))
        merge.finish(count, sizes)
        merge.check_stored_tree()
        try:
            log.finish_chunks()
        except VerificationError as exc:
            found.add_error(Step.CHAINS, exc, kind=FindingKind.ALTERED)
        if audit is not None:
            if not pipelined:
                for event in log.events(start=start):
                    audit.observe(event)
            settled_state = audit.saved() if save_state else None
            report.settlement = audit.finish()
    empty = claimed.get(0)
    if empty is not None and empty.root != CompactRange(0).root():
        problem = Problem(empty.position, "a recorded verification run claims a wrong empty root")
        found.add_error(Step.RUNS, problem.as_error(), kind=FindingKind.ALTERED)
    if found and not collect:
        headline = found.headline()
        assert headline is not None
        raise headline
    report.recorded_runs = len(runs)
    report.revocations = len(revocations)
    report.root = merge.tree.root().hex()
    report.checkpoint_root = checkpoints[-1].root.hex() if checkpoints else None
    report.events = count
    report.streams = merge.streams()
    report.checkpoints = len(checkpoints)
    report.covered = checkpoints[-1].size if checkpoints else 0
    newest = checkpoints[-1] if checkpoints else None
    report.unanchored = unanchored_note(count, newest, datetime.now(UTC))
    report.resumed_from = resume.size if resume is not None else None
    if save_state and not found:
        report.state = VerifyState(
            level=level.value,
            size=count,
            last_id=specs[-1].last_id if specs else 0,
            tree=merge.tree,
            chunks=merge.saved,
            streams=report.streams,
            roots=merge.roots,
            keys=[record.key_id for record in keyring],
            revocations=VerifyState.revocations_of(keyring),
            saved_at=started_at,
            spanning=merge.spanning_kept(),
            settlement=settled_state if audit is not None else None,
        )
        report.rounds = audit.archive if audit is not None else None
    report.seconds = time.perf_counter() - started
    return report


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


def _known_roots(
    resume: VerifyState,
    sizes: set[int],
    expected_roots: Mapping[int, bytes],
    claimed: Mapping[int, RecordedRun],
    trusted: Checkpoint | None,
    found: Findings,
) -> None:
    """Roots at sizes inside a saved state come from the state, the events
    before it not being read: each checkpoint, recorded run and the kept
    checkpoint of such a size against the state's root there."""
    for size in sorted(s for s in sizes if s <= resume.size):
        root = resume.roots.get(size)
        said = [
            (what, claim)
            for what, claim in (
                ("a checkpoint", expected_roots.get(size)),
                ("a recorded verification run", claimed[size].root if size in claimed else None),
                ("the kept checkpoint", trusted.root if trusted and trusted.size == size else None),
            )
            if claim is not None
        ]
        for what, claim in said:
            if root is None:
                found.add(
                    Finding(
                        FindingKind.NOT_CHECKED,
                        Step.MERKLE,
                        f"{what} of size {size}, inside the saved state (size {resume.size}), "
                        "is one the state never saw: its root needs the events before the "
                        "state (verify in full)",
                    )
                )
            elif claim != root:
                found.add(
                    Finding(
                        FindingKind.ALTERED,
                        Step.MERKLE,
                        f"{what} of size {size} has a root other than the one the saved "
                        f"state verified there ({root.hex()[:16]}...)",
                        size,
                    )
                )


def _changed_while_read(position: int) -> VerificationError:
    """A chunk read fewer rows than the plan counted: every later position is off."""
    return Problem(
        position,
        "the log changed while it was read: a chunk holds fewer rows than the log held "
        "when it was cut (someone is removing events from the store during the run)",
    ).as_error()


class _Merge:
    """Steps 4-6 across chunks, in log order: each chunk's own problems, the chain
    links across its edges, and the Merkle tree grown to every checkpoint size
    (each root against its checkpoint, the kept one and recorded runs). A root
    that differs makes every later one differ: only the first is a finding."""

    def __init__(
        self,
        found: Findings,
        claimed: Mapping[int, RecordedRun],
        expected_roots: Mapping[int, bytes],
        trusted: Checkpoint | None,
        log: LogSource,
        resume: VerifyState | None = None,
        tree_to: int = 0,
    ) -> None:
        self.found = found
        self.claimed = claimed
        self.expected_roots = expected_roots
        self.trusted = trusted
        self.log = log
        self.resume = resume
        # Resumed: only the streams the new events touch, from the rows re-hashed.
        self.heads = StreamHeads()
        self.new_streams = 0  # streams whose first event is after the saved state
        self.tree = resume.tree.copy() if resume else CompactRange(0)
        # the largest checkpoint size whose root the events reproduce
        self.matched = resume.size if resume else 0
        self.root_differs = False
        self.first_bad: int | None = None  # the first position a chunk or link failed at
        self.roots: dict[int, bytes] = dict(resume.roots) if resume else {}  # size -> root
        self.saved: list[SavedChunk] = []  # the chunks read, for the next saved state
        # Step 6, the stored tree: the nodes the merges make (they span chunks,
        # so no chunk compared them), up to `tree_to`.
        self.tree_to = tree_to
        self.spanning: list[tuple[int, int, bytes]] = []
        self.tree_found: list[Mismatches] = []  # the chunks' stored rows found bad

    def _problem(self, step: Step, problem: Problem) -> None:
        if self.first_bad is None or problem.position < self.first_bad:
            self.first_bad = problem.position
        self.found.add(
            Finding(
                FindingKind.ALTERED,
                step,
                str(problem.as_error()),
                problem.position,
                problem.stream,
            ),
            readable=problem.readable,
        )

    def chunk(self, result: ChunkResult) -> None:
        spec = result.spec
        if result.digest is not None:
            tree_digest = result.next_tree_digest or result.tree_digest
            if result.tree_kept:  # (not read again: as the saved state found them)
                assert self.resume is not None
                tree_digest = self.resume.chunks[len(self.saved)].tree_digest
            self.saved.append(
                SavedChunk(
                    spec.first_leaf,
                    spec.after_id,
                    spec.last_id,
                    result.rows,
                    result.digest,
                    tree_digest,
                    max(spec.first_leaf, result.tree_to),
                )
            )
        self.tree_found += result.tree_problems
        if spec.digest_only:
            self._rehashed(result)
            self.heads.update(result.lasts)
            return
        if spec.first_leaf != self.tree.end:
            raise _changed_while_read(self.tree.end)
        own = self.log.merge(result)
        for problem in [*result.problems, *([own] if own else [])]:
            self._problem(Step.ENVELOPES, problem)
        for stream, (position, version, prev_hash) in result.firsts.items():
            head = self.heads.get(stream)
            self.new_streams += head is None
            link = link_problem(stream, position, version, prev_hash, head)
            if link:
                self._problem(Step.CHAINS, link)
        for stream in result.lasts.keys() - result.firsts.keys():  # a bad first row
            self.new_streams += self.heads.get(stream) is None
        self.heads.update(result.lasts)
        for size, partial in sorted(result.at_size.items()):
            whole = self.tree.copy()
            whole.extend(partial)
            self._root(size, whole.root(), result.spec.first_leaf)
        self.tree.extend(result.leaves, self.spanning if self.tree_to else None)

    def spanning_kept(self) -> list[tuple[int, int, bytes]]:
        """The spanning nodes compared, for the next state: the saved state's and
        this run's, under `tree_to`."""
        kept = list(self.resume.spanning) if self.resume else []
        return kept + [n for n in self.spanning if (n[1] + 1) << n[0] <= self.tree_to]

    def check_stored_tree(self) -> None:
        """After every chunk: the stored nodes that span chunks against those the
        merge made (and a saved state's, which must still be stored as it found
        them); then each range's stored Merkle rows that are not the tree's, but
        for those under an event found altered, or past where the events stop
        giving the signed roots (the tree stored is the events' as written: the
        events changed, not it)."""
        if self.tree_to:
            assert isinstance(self.log, StoreLog)
            expected = self.spanning_kept()
            stored = self.log.tables.nodes_at([(level, index) for level, index, _ in expected])
            self.tree_found.append(compare_nodes(expected, stored))
        altered = {
            f.position
            for f in self.found.items
            if f.position is not None and f.step in (Step.ENVELOPES, Step.CHAINS)
        }
        # Past the last checkpoint whose root the events give, when one does not:
        # the events differ from those the tree was stored for (moved, say, each
        # still as signed); before it, the events are the signed ones.
        since = self.matched if self.root_differs else None
        for mismatches in self.tree_found:
            first = mismatches.explained_by(altered, since).finding()
            if first is not None:
                position, message = first
                text = str(Problem(position, message).as_error())
                self.found.add(Finding(FindingKind.ALTERED, Step.MERKLE, text, position))

    def streams(self) -> int:
        """Streams in the log: a resumed run's state's and the new ones."""
        return (self.resume.streams if self.resume else 0) + self.new_streams

    def _rehashed(self, result: ChunkResult) -> None:
        """A chunk before the saved state: the same rows, byte for byte, or a finding."""
        assert self.resume is not None
        spec = result.spec
        saved = self.resume.chunks[len(self.saved) - 1]
        end = spec.first_leaf + saved.rows
        if (result.rows, result.digest) != (saved.rows, saved.digest):
            self._problem(
                Step.ENVELOPES,
                Problem(
                    spec.first_leaf,
                    f"the rows at log positions {spec.first_leaf}..{end - 1} (row ids "
                    f"{spec.after_id + 1}..{spec.last_id}) are not the bytes the saved state "
                    f"was made from ({result.rows} rows now, {saved.rows} then): an event there "
                    "was altered, inserted or removed since (verify in full to name it)",
                ),
            )
        elif not result.tree_kept and result.tree_digest != saved.tree_digest:
            changed = Mismatches("rows")
            last = max(saved.tree_to, spec.first_leaf + 1) - 1
            changed.add(
                spec.first_leaf,
                last + 1,
                f"the stored Merkle rows under log positions {spec.first_leaf}..{last} are "
                "not those the saved state compared with the tree there: a leaf or node row "
                "was altered, inserted or removed since (verify in full to name it)",
            )
            self.tree_found.append(changed)

    def _root(self, size: int, root: bytes, first_leaf: int) -> None:
        self.roots[size] = root
        run = self.claimed.get(size)
        if run is not None and root != run.root:
            self.found.add(
                Finding(
                    FindingKind.ALTERED,
                    Step.RUNS,
                    str(
                        Problem(
                            run.position,
                            f"a recorded verification run claims the log's root at size {size} "
                            "is one the events do not give",
                        ).as_error()
                    ),
                    run.position,
                )
            )
        trusted = self.trusted
        if size in self.expected_roots and root != self.expected_roots[size]:
            if not self.root_differs:
                self.root_differs = True
                mismatch = self.log.root_mismatch(self.matched, size)
                explained = self.first_bad is not None and self.first_bad < size
                # A row already found bad changes the root: a source that cannot say
                # where else the log departs (a bundle) adds nothing by saying so.
                if not explained or (
                    self.log.locates_roots and mismatch.position != self.first_bad
                ):
                    self._problem(Step.MERKLE, mismatch)
        elif trusted is not None and size == trusted.size and root != trusted.root:
            # The kept checkpoint against the log itself, never a stored one.
            if not self.root_differs:
                self.root_differs = True
                stored = self.expected_roots.get(size)
                self._problem(Step.MERKLE, kept_mismatch(first_leaf, trusted, stored))
        elif not self.root_differs:
            self.matched = size

    def finish(self, count: int, sizes: set[int]) -> None:
        if self.tree.end < count:
            raise _changed_while_read(self.tree.end)
        missing = [size for size in sizes if size > count]
        if missing:
            size = max(missing)
            trusted = self.trusted
            kind = "the kept checkpoint" if trusted and size == trusted.size else "a checkpoint"
            self._problem(
                Step.CHAINS,
                Problem(
                    count,
                    f"the log holds {count} events but {kind} of size {size} covers more: "
                    f"the event at log position {count} and every later one are missing",
                ),
            )
        if self.first_bad is not None:
            # A removed event shows up later (its stream's next version, a root, the
            # tail): name the gap itself when the stored leaves show where it was.
            removed = self.log.first_removed(self.matched, self.first_bad + 1)
            if removed is not None and removed.position <= self.first_bad:
                self.found.add(
                    Finding(
                        FindingKind.ALTERED,
                        Step.CHAINS,
                        str(removed.as_error()),
                        removed.position,
                        removed.stream,
                    ),
                    front=True,
                )
