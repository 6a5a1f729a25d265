"""Steps 4 to 6 across chunks, in log order: what each chunk found in its own
rows (4 envelopes), the chain links across its edges (5 chains), and the
Merkle tree grown to every checkpoint size (6 merkle)."""

from __future__ import annotations

from collections.abc import Mapping

from ledger.audit.findings import Finding, Findings, Step
from ledger.audit.log.account_heads import AccountHeadsCheck
from ledger.audit.log.checkpoints import kept_mismatch
from ledger.audit.log.chunk_types import Merge as Merge
from ledger.audit.log.chunks import ChunkResult, Problem, link_problem
from ledger.audit.log.log_source import LogSource, StoreLog
from ledger.audit.log.stored_tree import Mismatches, compare_nodes
from ledger.audit.log.stream_heads import StreamHeads
from ledger.audit.log.verifications import RecordedRun
from ledger.audit.verify_state import SavedChunk, VerifyState
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.merkle import CompactRange
from ledger.errors import FindingKind, VerificationError


def known_roots(
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


def changed_while_read(position: int) -> VerificationError:
    """A chunk read fewer rows than the plan counted: every later position is off."""
    return Problem(
        position,
        "the log changed while it was read: a chunk holds fewer rows than the log held "
        "when it was cut (someone is removing events from the store during the run)",
    ).as_error()


class ChunkMerge:
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
        expected_accounts: Mapping[int, bytes] | None = None,
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
        self.archived = 0  # archived events' marker rows the chunks passed
        # Step 6, the stored tree: the nodes the merges make (they span chunks,
        # so no chunk compared them), up to `tree_to`.
        self.tree_to = tree_to
        self.spanning: list[tuple[int, int, bytes]] = []
        self.tree_found: list[Mismatches] = []  # the chunks' stored rows found bad
        # The account heads map: from the saved state's heads when resumed.
        self.accounts = AccountHeadsCheck(
            expected_accounts or {}, resume.account_heads if resume else ()
        )

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

    def record(self, result: ChunkResult) -> None:
        """A chunk as read: kept for the next saved state; its stored Merkle rows'
        findings held for `check_stored_tree`; read where the last one ended."""
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
        self.archived += result.archived
        if not spec.digest_only and spec.first_leaf != self.tree.end:
            raise changed_while_read(self.tree.end)

    def envelopes(self, result: ChunkResult) -> None:
        """Step 4: what the chunk found in its rows, and what the source finds
        across chunks; a chunk before a saved state, the same bytes as then."""
        if result.spec.digest_only:
            self._rehashed(result)
            return
        own = self.log.merge(result)
        for problem in [*result.problems, *([own] if own else [])]:
            self._problem(Step.ENVELOPES, problem)

    def chains(self, result: ChunkResult) -> None:
        """Step 5: each stream's first event in the chunk links to its head before it."""
        if not result.spec.digest_only:
            for stream, (position, version, prev_hash) in result.firsts.items():
                head = self.heads.get(stream)
                self.new_streams += head is None
                link = link_problem(stream, position, version, prev_hash, head)
                if link:
                    self._problem(Step.CHAINS, link)
            for stream in result.lasts.keys() - result.firsts.keys():  # a bad first row
                self.new_streams += self.heads.get(stream) is None
        self.heads.update(result.lasts)

    def merkle(self, result: ChunkResult) -> None:
        """Step 6: the tree grown by the chunk's leaves, its root at every
        checkpoint size inside it against the checkpoint's."""
        if result.spec.digest_only:
            return
        for size, partial in sorted(result.at_size.items()):
            whole = self.tree.copy()
            whole.extend(partial)
            self._root(size, whole.root(), result.spec.first_leaf)
        first = result.spec.first_leaf
        for size, message in self.accounts.observe(first, first + result.count, result.accounts):
            self._problem(Step.MERKLE, Problem(size - 1, message, located=True))
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

    def root(self) -> str:
        return self.tree.root().hex()

    def close(self) -> None:
        self.heads.close()  # (its scratch file goes)

    def account_heads(self) -> str:
        checked = self.accounts.checked
        if not checked:
            return "no checkpoint read signs an account heads map"
        return f"the account heads map at {checked} checkpoint sizes recomputed from the events"

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
            raise changed_while_read(self.tree.end)
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
