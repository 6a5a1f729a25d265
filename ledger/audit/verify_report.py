"""What `ledger verify` verified, said step by step: its report.

Counts, not just a yes (TUF's `VerificationResult` idea): every step of the
checklist (`ledger.audit.verify.CHECKLIST`) says what it checked, and what it
could not check is named as NOT CHECKED.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ledger.audit.findings import Findings, Step
from ledger.audit.games.round_archive import RoundArchive
from ledger.audit.games.settlement import SETTLEMENT_STEPS, SettlementCounts
from ledger.audit.level import Level
from ledger.audit.log.archives import ArchivedSummary
from ledger.audit.verify_state import VerifyState


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


@dataclass
class VerificationReport:
    """What was verified (TUF's `VerificationResult` idea): counts, not just a yes."""

    level: Level
    events: int = 0
    streams: int = 0
    account_heads: str = "the account heads maps not read"  # step 6's, as the merge says
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
    erasures: int = 0  # recorded erasures of personal data checked (operator signature)
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
    archived: ArchivedSummary | None = None  # a store's archived events, as step 3 read them
    archived_filled: bool = False  # their archives were given and read (`verify --archive`)

    @property
    def movements(self) -> int | None:
        return self.settlement.movements if self.settlement else None

    @property
    def resettled(self) -> int | None:
        return self.settlement.resettled if self.settlement else None

    @property
    def rng_dice(self) -> int:
        return self.settlement.rng_dice if self.settlement else 0

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
        lines += [f"   {line}" for line in self._archived_lines()]
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
                "signatures, and each run's tree size and root against the log"
                + (
                    f"; {_n(self.erasures, 'erasure')} of personal data: operator signatures"
                    if self.erasures
                    else ""
                ),
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
                + self._stored_tree()
                + f"; {self.account_heads}",
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
        settled = _settlement_steps(self.settlement)
        if self.archived is not None and self.archived.applied and not self.archived_filled:
            unread = (
                f"NOT CHECKED: {_n(self.archived.events, 'event')} of finished rounds are "
                "archived, not in the store (`ledger verify --archive DIR` re-reads them)"
            )
            settled = [
                (step, unread if step in (Step.MONEY, Step.SOURCES) else text)
                for step, text in settled
            ]
        return steps + settled

    def _archived_lines(self) -> list[str]:
        """Which positions left the store for archives, and what that leaves unread."""
        archived = self.archived
        if archived is None or not archived.applied:
            return []
        lines = []
        for record in archived.recorded:
            if record.archive not in archived.applied:
                continue
            count, first, last = archived.applied[record.archive]
            read = (
                "re-read from the archive, every event checked and its leaf held to the stored one"
                if self.archived_filled
                else "NOT re-read (their leaf hashes, kept in the store, hold the roots)"
            )
            lines.append(
                f"ARCHIVED: {_n(count, 'event')} ({_n(record.rounds, 'round')}) at log positions "
                f"{first} to {last}, each listed in archive {record.archive}'s archived.txt "
                f"(the table's rows match the digest its register event signs): {read}"
            )
        return lines

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
        f"{counts.rng_dice} RNG dice draws recomputed from their round's committed seed; "
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
            f"{counts.faults} faulty draws)",
        ),
        (
            Step.PAYOUTS,
            f"{counts.resettled} settlements re-settled with their own game and rules "
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
                f"NOT CHECKED: {counts.rng_pending} RNG dice draws whose seed is not revealed yet "
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
