"""What a chunk of the log is (`ChunkSpec`) and what verifying it found
(`ChunkResult`, a `Problem` for each bad row)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ledger.audit.log.stored_tree import Mismatches
from ledger.crypto.merkle import AlignedLeaves, CompactRange
from ledger.errors import VerificationError


@dataclass(frozen=True)
class ChunkSpec:
    """Leaves [first_leaf, first_leaf + expected) = rows with id in (after_id, last_id]."""

    first_leaf: int
    after_id: int
    last_id: int
    checkpoint_sizes: tuple[int, ...]  # sizes s with first_leaf < s <= chunk end
    check_signatures: bool
    # (size, issued_at µs) of the valid checkpoints covering this chunk's events,
    # ascending: from the first of size > first_leaf to the first reaching the chunk's end.
    covering: tuple[tuple[int, int], ...] = ()
    offset: int = 0  # a bundle's chunk: the byte offset of its first line
    # A resumable run's chunk: also the digest of its rows (`rows_digest`); with
    # `digest_only`, nothing else (rows a saved state already vouches for).
    digest: bool = False
    digest_only: bool = False
    # A digest-only chunk's rows of these streams (stream id columns as stored):
    # their heads, for the events after the state to link on.
    heads_of: frozenset[object] = frozenset()
    # The store's Merkle rows under leaves [first_leaf, tree_to) (cut at the
    # chunk's end) are compared with the tree the events give (0: not read);
    # those under [first_leaf, tree_vouched) a saved state's digest vouches for.
    tree_to: int = 0
    tree_vouched: int = 0
    # A digest-only chunk's Merkle rows that its saved state vouches for are
    # read and digested again (False, when no row was stored under it since:
    # taken as the state found them, the saved digest kept).
    reread_tree: bool = True
    # Leaves from a multiple of a power of two, a subtree of the log (False: a
    # partial bundle's run of positions, whose events prove their inclusion).
    aligned: bool = True


class StreamGap(VerificationError):
    """An event that passed its own checks, after a gap in its stream's versions."""


@dataclass
class Problem:
    position: int  # log position (leaf index) of the event at fault
    message: str
    located: bool = False  # the message names the position already
    stream: str | None = None  # the event's stream, when known
    # The event itself is as signed and in place; only events before it in its
    # stream are missing: what it says is still read at the settlement level
    # (e.g. a settlement whose wallet credits would otherwise look unposted).
    readable: bool = False

    def as_error(self) -> VerificationError:
        if self.located:
            return VerificationError(self.message)
        return VerificationError(f"{self.message} (log position {self.position})")


@dataclass
class ChunkResult:
    spec: ChunkSpec
    leaves: CompactRange
    # Partial ranges [first_leaf, s) for each checkpoint size s inside the chunk.
    at_size: dict[int, CompactRange] = field(default_factory=dict)
    # Per stream: first event here (position, version, prev hash) and last (version, hash).
    firsts: dict[str, tuple[int, int, bytes]] = field(default_factory=dict)
    lasts: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)  # by position: every bad row
    # Every account event: (position, stream, version, entry hash), for the
    # account heads map the checkpoints sign (`ledger.audit.log.account_heads`).
    accounts: list[tuple[int, str, int, bytes]] = field(default_factory=list)
    archived: int = 0  # archived events' marker rows in it (`ledger.store.archived`)
    facts: Any = None  # what a source's own chunk reader found, for its merge
    digest: str | None = None  # the rows' digest, when the spec asks for it
    rows: int = 0  # rows read (a digest-only chunk has no leaves)
    # The digest of the stored Merkle rows under it that were compared (or, in a
    # digest-only chunk, that its saved state vouched for; `next_tree_digest`:
    # with those compared since): a saved state keeps it beside the rows'.
    tree_digest: str | None = None
    next_tree_digest: str | None = None
    tree_kept: bool = False  # a digest-only chunk's vouched Merkle rows not read again
    tree_to: int = 0  # the Merkle rows below it were checked (or vouched for)
    tree_problems: list[Mismatches] = field(default_factory=list)  # stored Merkle rows found bad
    # The chunk's subtree, kept for the store's Merkle rows to be compared with
    # it where the chunk was verified (never sent back: `None` by then).
    tree: AlignedLeaves | None = None

    @property
    def problem(self) -> Problem | None:
        """The first problem in the chunk."""
        return self.problems[0] if self.problems else None

    @problem.setter
    def problem(self, value: Problem | None) -> None:  # a source's own, found first
        if value is not None:
            self.problems.insert(0, value)

    @property
    def count(self) -> int:
        return self.leaves.size


class Merge(Protocol):
    """Steps 4 to 6 across a source's chunks, as `Verifier` calls them in log order."""

    def record(self, result: ChunkResult) -> None: ...
    def envelopes(self, result: ChunkResult) -> None: ...
    def chains(self, result: ChunkResult) -> None: ...
    def merkle(self, result: ChunkResult) -> None: ...
    def finish(self, count: int, sizes: set[int]) -> None: ...
    def check_stored_tree(self) -> None: ...
    def streams(self) -> int: ...
    def account_heads(self) -> str:
        """What step 6 made of the account heads maps the checkpoints sign."""
        ...

    def root(self) -> str:
        """The log's root as the events give it (hex)."""
        ...

    def close(self) -> None: ...
