"""The checkpoint steps of `ledger verify`, each a small function.

Every checkpoint row is read and parsed (a note that is not a canonical,
timezone-aware checkpoint, or a row whose `tree_size` column disagrees with
the size it signs, fails naming the row); every signature is checked, with
one origin for all; two checkpoints of one size must state one root;
checkpoint times never go backwards as size grows; consecutive checkpoints
must be provably consistent from the stored tree. The auditor's kept
checkpoint is checked against the log itself, never shadowed by a stored one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime

from ledger.audit.log.chunks import Problem
from ledger.audit.log.log_rows import LogRows
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import consistency_proof, consistency_ranges, verify_consistency
from ledger.errors import VerificationError
from ledger.store.merkle_log import CheckpointRow, MerkleLogTables, parse_checkpoint_row


def _label(checkpoint: Checkpoint) -> str:
    return f"checkpoint of size {checkpoint.size}"


def load_checkpoints(
    tables: LogRows,
    keyring: Keyring,
    trusted: Checkpoint | None,
    problems: list[VerificationError] | None = None,
) -> list[Checkpoint]:
    """Every stored checkpoint, checked, one per signed size, by size. The first
    bad one raises; with `problems`, each is added there and left out."""

    def found(exc: VerificationError) -> None:
        if problems is None:
            raise exc
        problems.append(exc)

    rows = sorted(tables.checkpoint_rows(), key=_by_column)  # the first bad row is named
    parsed = []
    for row in rows:
        try:
            parsed.append(parse_checkpoint_row(row))
        except VerificationError as exc:
            found(exc)
    parsed.sort(key=lambda c: (c.size, c.issued_at))
    if trusted is not None:
        trusted.verify(keyring)
    origin = trusted.origin if trusted else (parsed[0].origin if parsed else None)
    valid = []
    for checkpoint in parsed:
        try:
            checkpoint.verify(keyring, origin=origin)
        except VerificationError as exc:
            found(exc)
            continue
        valid.append(checkpoint)
    distinct: list[Checkpoint] = []
    for checkpoint in valid:
        if distinct and distinct[-1].size == checkpoint.size:
            # The same signed statement twice (a replayed copy) adds and hides
            # nothing; two roots for one size is a fork.
            if distinct[-1].root != checkpoint.root:
                found(
                    VerificationError(
                        "two signed checkpoints of this size state different roots (a fork)",
                        where=_label(checkpoint),
                    )
                )
            continue
        distinct.append(checkpoint)
    _check_times(distinct, found)
    return distinct


def valid_checkpoints(tables: LogRows, keyring: Keyring) -> list[Checkpoint]:
    """The stored checkpoints whose note parses and whose signature (and key)
    verifies, by size; the others are left out, not reported (a reader that
    only needs trusted times, as recall does: `ledger verify` reports them)."""
    found = []
    for row in tables.checkpoint_rows():
        try:
            checkpoint = parse_checkpoint_row(row)
            checkpoint.verify(keyring)
        except VerificationError:
            continue
        found.append(checkpoint)
    return sorted(found, key=lambda c: (c.size, c.issued_at))


def _by_column(row: CheckpointRow) -> tuple[int, int]:
    column = row[0]
    return (0, column) if type(column) is int else (1, 0)


def _check_times(checkpoints: list[Checkpoint], found: Callable[[VerificationError], None]) -> None:
    """Checkpoint times never go backwards as size grows."""
    latest: Checkpoint | None = None
    for checkpoint in checkpoints:
        if latest is not None and checkpoint.issued_at < latest.issued_at:
            found(
                VerificationError(
                    f"issued at {_time(checkpoint.issued_at)}, earlier than the checkpoint of "
                    f"size {latest.size} ({_time(latest.issued_at)}): checkpoint times go "
                    "backwards",
                    where=_label(checkpoint),
                )
            )
        latest = checkpoint


def _time(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


class CheckpointProblem(Problem):
    """A problem located at a checkpoint, not at one event (`position` only orders it)."""

    def __init__(self, position: int, where: str, message: str) -> None:
        super().__init__(position, message)
        self.where = where

    def as_error(self) -> VerificationError:
        return VerificationError(self.message, where=self.where)


def kept_mismatch(position: int, trusted: Checkpoint, stored: bytes | None) -> Problem:
    """The log's first `size` events do not hash to the kept checkpoint's root."""
    fork = (
        "; the store's checkpoint of that size states another root"
        if stored is not None and stored != trusted.root
        else ""
    )
    return CheckpointProblem(
        position,
        f"kept {_label(trusted)}",
        f"the first {trusted.size} events of the log do not hash to its root: the log the "
        f"auditor kept was rewritten{fork}",
    )


def check_not_rolled_back(checkpoints: list[Checkpoint], trusted: Checkpoint | None) -> None:
    """The newest checkpoint must be no older than the auditor's kept one."""
    if trusted is not None and checkpoints and checkpoints[-1].size < trusted.size:
        raise VerificationError(
            f"the store's newest checkpoint (size {checkpoints[-1].size}) is older than the "
            "kept one: the log was rolled back",
            where=f"kept {_label(trusted)}",
        )


def check_proofs(
    tables: MerkleLogTables,
    checkpoints: list[Checkpoint],
    trusted: Checkpoint | None,
    problems: list[VerificationError] | None = None,
) -> None:
    """Consecutive checkpoints, and the kept one with the newest, must be consistent
    by the proofs the store serves: the roots were already recomputed from the
    events, so this checks the stored tree an auditor's proofs come from."""
    with tables.reading() as cursor:  # one transaction: a proof per checkpoint pair
        subtree = tables.subtree_reader(cursor)
        pairs = [(a, b) for a, b in itertools.pairwise(checkpoints) if a.size > 0]
        if trusted is not None and checkpoints and trusted.size > 0:
            pairs.append((trusted, checkpoints[-1]))
        # Every proof's stored nodes in a few queries, not a round trip each.
        subtree.prefetch(
            part
            for older, newer in pairs
            if 0 < older.size <= newer.size
            for part in consistency_ranges(older.size, newer.size)
        )
        for older, newer in pairs:
            try:
                proof = consistency_proof(older.size, newer.size, subtree)
                verify_consistency(older.size, newer.size, proof, older.root, newer.root)
            except (VerificationError, LookupError, ValueError) as exc:
                kept = "kept " if older is trusted else ""
                problem = VerificationError(
                    "no valid consistency proof from it to the checkpoint of size "
                    f"{newer.size}: {exc}",
                    where=f"{kept}{_label(older)}",
                )
                if problems is None:
                    raise problem from exc
                problems.append(problem)


def unanchored_note(events: int, newest: Checkpoint | None, now: datetime) -> str | None:
    """What `verify` says of the events not yet under a checkpoint: how many, how old."""
    covered = newest.size if newest else 0
    if events <= covered:
        return None
    if newest is None:
        return f"{events} events and no checkpoint yet: none of the log is anchored"
    age = max(0.0, (now - newest.issued_at).total_seconds())
    return (
        f"{events - covered} newest events are not yet under a checkpoint "
        f"(unanchored tail; the newest checkpoint, of size {covered}, was signed {age:.1f} s ago)"
    )
