"""The checkpointer: follows the notification log, extends the Merkle tree over
it, and signs a checkpoint after each batch.

The same code runs on SQLite and PostgreSQL: it only reads rows after the last
leaf's notification id (the global log order) and appends to the Merkle
tables. It checks each envelope's signature before the event enters the tree,
so it never signs a tree head over a forged event.

Every stored row is the attacker's to edit, so before it extends anything it
checks where it resumes from (`_check_resume_point`): the stored frontier
must hash to the root of the newest checkpoint whose signature verifies, of
the same size, and the last leaf must be the entry hash of the event it names,
with exactly that many events up to it. Any mismatch signs nothing.

Each batch is worked out on a read snapshot (the resume point checked, the
new rows read, checked and hashed), then stored in one short write
transaction that first takes the checkpointers' lock (a PostgreSQL advisory
lock; SQLite's own write lock) and checks that the tail has not moved: several
writing nodes may run checkpointers at once, and on SQLite the writers'
commits are not held up while a batch is hashed.

A store can also go back in time (a lagging standby promoted, an older backup
restored). So the newest signed checkpoint is also kept in a compare-and-swap
lock outside the store (`ledger.store.checkpoint_lock`): a checkpoint is
signed only over a tree that extends the kept one, and kept (swapped in)
before the store commits it. A store behind the lock is brought up to it with
the kept checkpoint itself once its events are there again; one whose events
differ gets no checkpoint at all (`CheckpointRefusedError`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NoReturn
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import SignerCheck, check_row, open_envelope
from ledger.crypto.keys import Keyring, Role, to_micros
from ledger.crypto.merkle import CompactRange, hash_children, inclusion_proof, verify_inclusion
from ledger.crypto.signing import NamedSigner
from ledger.crypto.validity import key_problem
from ledger.errors import ConfigError, ConflictError, VerificationError
from ledger.store.account_heads import AccountHeadsTable, Head, HeadsTracker, is_account_event
from ledger.store.checkpoint_lock import CheckpointLock
from ledger.store.merkle_log import MerkleLogTables, StoredRowError, parse_checkpoint_row, stream_of
from ledger.store.outage import follow_through_outages
from ledger.store.recorders import Cursor, LeafRow, NodeRow
from ledger.store.recorders import marker_leaf as archived_leaf

DEFAULT_ORIGIN = "casino-ledger"
RACE_RETRIES = 20


def load_compact_range(
    tables: MerkleLogTables, size: int, cursor: Cursor | None = None
) -> CompactRange:
    """The right edge of the stored tree: one perfect subtree per set bit of `size`."""
    hashes, offset = [], 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            stored = tables.node(level, offset >> level, cursor)
            if stored is None:
                raise StoredRowError(f"Merkle node ({level}, {offset >> level}) is missing")
            hashes.append(stored)
            offset += 1 << level
    return CompactRange(0, size, hashes)


class CheckpointRefusedError(VerificationError):
    """The store's log does not extend the newest checkpoint this log signed:
    signing would fork it, so nothing is signed."""


class _Moved(Exception):
    """Another checkpointer moved first (the store's tail, or the lock): read
    everything again."""


class _Short(Exception):
    """The snapshot held fewer events than the kept checkpoint covers (`_recount`)."""

    def __init__(self, kept: Checkpoint) -> None:
        super().__init__(kept.size)
        self.kept = kept


@dataclass
class _Plan:
    """A batch worked out on a read snapshot, stored if nothing moved since."""

    size: int  # the stored tree's size it extends
    last_id: int  # and its last leaf's notification id
    anchor: Checkpoint | None  # the store's newest checkpoint (of `size`)
    genesis: bytes | None
    kept_note: str | None
    kept: Checkpoint | None
    frontier: CompactRange
    leaves: list[LeafRow]
    nodes: list[NodeRow]
    accounts: bytes  # the account heads map's root once the batch is in


@dataclass(frozen=True)
class _Verified:
    """A resume point already checked in this process: (checkpoint, last leaf's id)."""

    checkpoint: Checkpoint
    last_id: int


class Checkpointer:
    """Extends the Merkle log over new events and signs checkpoints."""

    def __init__(
        self,
        tables: MerkleLogTables,
        *,
        signer: NamedSigner,
        signer_check: SignerCheck,
        keyring: Keyring | None = None,
        origin: str = DEFAULT_ORIGIN,
        batch_size: int = 1000,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        signed_here: Callable[[bytes], bytes | None] = lambda _: None,
        sealed_entry: Callable[[bytes, str, int, str], bytes | None] = lambda *_: None,
        keyring_source: Callable[[], Keyring] | None = None,
        on_checkpoint: Callable[[Checkpoint], None] = lambda _: None,
        lock: CheckpointLock | None = None,
    ) -> None:
        if signer.role is not Role.CHECKPOINT:
            raise ConfigError(f"checkpoints need a checkpoint key, not {signer.role.value}")
        if keyring is None:
            raise ConfigError("the checkpointer needs the keyring to check the signed checkpoints")
        record = keyring.get(signer.key_id)
        if signer.name is None or (record is not None and record.name != signer.name):
            # C2SP checkpoints name their key: a wrong name signs notes nobody can check.
            raise ConfigError(
                f"the checkpoint signer's key name {signer.name!r} is not its keyring name"
            )
        self.tables = tables
        self.signer = signer
        self.signer_check = signer_check
        self.keyring = keyring
        self.origin = origin
        self.batch_size = batch_size
        self.clock = clock
        # In a writing node, the envelopes it sealed itself (entry hash ->
        # signature): one byte-identical to what we signed needs no second
        # Ed25519 verify, so the anchor keeps up with the writes.
        self.signed_here = signed_here
        self.sealed_entry = sealed_entry  # a row this node sealed, byte for byte: its entry hash
        # The keyring as it is now (revocations since opening included), which
        # the signing key is judged by before every checkpoint it signs.
        self.keyring_source = keyring_source or (lambda: keyring)
        # Told of each checkpoint once it is committed (the witnesses' submitter:
        # it must return at once, a witness never delays the log's anchoring).
        self.on_checkpoint = on_checkpoint
        # Where the newest signed checkpoint is kept out of the store's reach
        # (None: the store alone; a test or a read-only tool).
        self.lock = lock
        self.heads = HeadsTracker(AccountHeadsTable(tables.recorder), self._checked_entry_hash)
        self._first: tuple[int, bytes] | None = None  # the log's first event, once read
        # The first catch_up counts every event up to the resume point; later
        # ones only those since the point this process last checked.
        self._verified: _Verified | None = None

    def catch_up(
        self, progress: Callable[[int], None] | None = None, *, chase: bool = True
    ) -> Checkpoint | None:
        """Cover every event stored so far; return the newest checkpoint made.

        With `chase=False` it stops once the events stored when it started are
        covered: beside a busy writer, chasing would sign a checkpoint for every
        few events that arrive meanwhile (the anchor and `follow` checkpoint
        what is there, then wait for their next turn)."""
        target = None if chase else self.tables.highest_id()
        newest = None
        while True:
            made, count = self._batch_with_retries()
            if made is None:
                return newest
            newest = made
            if progress:
                progress(count)
            verified = self._verified
            if target is not None and verified is not None and verified.last_id >= target:
                return newest

    def _batch_with_retries(self) -> tuple[Checkpoint | None, int]:
        for attempt in range(RACE_RETRIES):
            if attempt:
                time.sleep(random.uniform(0, 0.005 * attempt))  # racers spread out
            try:
                return self._batch()
            except (IntegrityError, _Moved):
                # Another checkpointer (without the store's lock: an older
                # release; or on another store sharing the checkpoint lock) won
                # the race: forget what we knew and re-read the state.
                self._verified = None
        raise ConflictError("other checkpointers kept winning the race; try again")

    def _batch(self) -> tuple[Checkpoint | None, int]:
        keyring = self.keyring_source()  # read before the write lock is taken
        # The work (checking the resume point, reading, checking and hashing the
        # new rows) is done on a read snapshot, without the store's write lock:
        # on SQLite that lock is the writers' too, and holding it while hashing
        # stalled every commit behind the checkpointer.
        try:
            return self._planned_batch(keyring)
        except BaseException:
            self.heads.forget()  # its map may hold a batch that was not stored
            raise

    def _planned_batch(self, keyring: Keyring) -> tuple[Checkpoint | None, int]:
        try:
            with self.tables.recorder.snapshot() as cursor:  # one state, every statement
                plan = self._plan(cursor)
        except _Short as short:
            self._recount(short.kept)
        if plan is None:
            return None, 0
        # Under the lock: nothing moved since (another checkpointer would have
        # moved the tail), then sign, keep and store.
        with self.tables.recorder.write() as cursor:
            self.tables.recorder.lock_checkpointers(cursor)
            if self.tables.tail(cursor) != (plan.size, plan.last_id):
                raise _Moved()
            if plan.kept is not None and plan.kept.size > plan.size:
                checkpoint = plan.kept  # signed once already: stored, not signed again
            else:
                checkpoint = self._sign(keyring, plan)
                self._keep(plan.genesis, plan.kept_note, checkpoint)
            self.tables.append(plan.leaves, plan.nodes, checkpoint, cursor)
            self.heads.table.upsert(self.heads.pending.values(), checkpoint.size, cursor)
        self.heads.stored(checkpoint.size)
        self._verified = _Verified(checkpoint, plan.leaves[-1][1])
        self.on_checkpoint(checkpoint)
        return checkpoint, len(plan.leaves)

    def _plan(self, cursor: Cursor) -> _Plan | None:
        """The next batch as the snapshot `cursor` reads it: the resume point
        checked, the new rows checked and hashed into the tree (None: nothing to
        checkpoint)."""
        size, last_id = self.tables.tail(cursor)
        known = self._verified
        if (
            known is not None
            and known.checkpoint.size == size
            and known.last_id == last_id
            and self.tables.highest_id(cursor) == last_id
        ):
            return None  # nothing new since the resume point we checked
        anchor = self._check_resume_point(cursor, size, last_id)
        genesis, kept_note, kept = self._kept(cursor, anchor, size)
        behind = kept is not None and kept.size > size  # the store is behind the lock
        limit = kept.size - size if kept is not None and behind else self.batch_size
        rows = self.tables.rows_after(last_id, limit, cursor)
        if not rows or (behind and len(rows) < limit):
            self._verified = _Verified(anchor, last_id) if anchor else None
            if rows and kept is not None:
                raise _Short(kept)
            return None
        frontier = load_compact_range(self.tables, size, cursor)
        self.heads.at(size, last_id, anchor.accounts if anchor else None, cursor)
        leaves: list[LeafRow] = []
        nodes: list[NodeRow] = []
        moved: dict[UUID, Head] = {}  # each account's last event in the batch
        for notification_id, originator_id, version, topic, state in rows:
            leaf_hash = self._checked_entry_hash(
                notification_id, originator_id, version, topic, state
            )
            if is_account_event(topic):
                account = UUID(stream_of(originator_id))
                moved[account] = Head(account, version, frontier.end, leaf_hash)
            leaves.append((frontier.end, notification_id, leaf_hash))
            frontier.append(leaf_hash, nodes)
        accounts = self.heads.advance(moved)
        if kept is not None and behind and frontier.root() != kept.root:
            raise self._refusal(kept, f"the store's first {kept.size} events differ")
        if kept is not None and behind and kept.accounts not in (None, accounts):
            raise self._refusal(kept, f"the store's account heads at {kept.size} differ")
        return _Plan(
            size, last_id, anchor, genesis, kept_note, kept, frontier, leaves, nodes, accounts
        )

    def _keep(self, genesis: bytes | None, kept_note: str | None, checkpoint: Checkpoint) -> None:
        """Swap the lock from the note read to `checkpoint`, before the store commits it."""
        if self.lock is None or genesis is None:
            return
        if not self.lock.swap(self.origin, genesis, kept_note, checkpoint.to_note()):
            raise _Moved()

    def _sign(self, keyring: Keyring, plan: _Plan) -> Checkpoint:
        now = self.clock()
        for earlier in (plan.anchor, plan.kept):
            if earlier is not None and earlier.issued_at > now:
                now = earlier.issued_at  # times never go backwards as size grows
        self._check_signing_key(keyring, now)
        return Checkpoint.sign(
            origin=self.origin,
            size=plan.frontier.end,
            root=plan.frontier.root(),
            signer=self.signer,
            now=now,
            accounts=plan.accounts,
        )

    def _kept(
        self, cursor: Cursor, anchor: Checkpoint | None, size: int
    ) -> tuple[bytes | None, str | None, Checkpoint | None]:
        """The log's first entry hash, and the lock's note and checkpoint for the
        log, checked against the store's newest (`anchor`, of the stored tree's
        `size`). A lock that lags the store (new, or kept by a release without
        one) is brought up to it when the store's tree extends what it keeps; a
        store that contradicts it is refused."""
        first = self._first_event(cursor, anchor)
        if self.lock is None or first is None:
            return None, None, None
        first_id, genesis = first
        note = self.lock.latest(self.origin, genesis)
        if note is None:
            if anchor is None:
                return genesis, None, None
            if self.lock.knows(self.origin):
                # A log new to a lock that keeps others of this origin: unless
                # its first event is leaf 0 under its checkpoint, it is a known
                # log dressed up as a new one (first event removed or renumbered)
                # to escape what is kept for it.
                self._prove_first(cursor, first_id, genesis, anchor)
            if not self.lock.swap(self.origin, genesis, None, anchor.to_note()):
                raise _Moved()
            return genesis, anchor.to_note(), anchor
        if anchor is not None and note == anchor.to_note():
            return genesis, note, anchor  # the usual case: checked as the resume point
        kept = Checkpoint.from_note(note)
        assert self.keyring is not None
        kept.verify(self.keyring, origin=self.origin)
        if anchor is None or kept.size > size:
            return genesis, note, kept  # checked as the store's events come back (`_batch`)
        if kept.size == size:
            if kept.root != anchor.root:
                raise self._refusal(kept, f"the store's first {kept.size} events differ")
            return genesis, note, kept
        if kept.size and self._root_at(cursor, kept.size) != kept.root:
            raise self._refusal(kept, f"the store's first {kept.size} events differ")
        if not self.lock.swap(self.origin, genesis, note, anchor.to_note()):
            raise _Moved()
        return genesis, anchor.to_note(), anchor

    def _first_event(self, cursor: Cursor, anchor: Checkpoint | None) -> tuple[int, bytes] | None:
        """The log's first event: its notification id and entry hash (what names
        the log in the lock, with the origin); None: no event yet. Its signature
        and payload are `verify`'s to check, as for every event already under a
        checkpoint: one edited in the header names another log, which
        `_prove_first` refuses."""
        if self._first is not None:
            return self._first  # the lock's cell for it stays the reference
        first = self.tables.rows_after(0, 1, cursor)
        if not first:
            if anchor is not None:
                raise VerificationError("the log holds no event but a checkpoint covers some")
            return None
        notification_id, originator_id, version, _, state = first[0]
        if not isinstance(state, bytes | bytearray | memoryview):
            raise VerificationError(f"event {notification_id} is malformed: nothing was signed")
        envelope = open_envelope(bytes(state), stream=stream_of(originator_id), version=version)
        self._first = (notification_id, envelope.entry_hash)
        return self._first

    def _prove_first(
        self, cursor: Cursor, first_id: int, genesis: bytes, anchor: Checkpoint
    ) -> None:
        size = anchor.size
        try:
            proof = inclusion_proof(0, size, self.tables.subtree_reader(cursor))
            verify_inclusion(0, size, genesis, proof, anchor.root)
        except (VerificationError, StoredRowError) as exc:
            raise VerificationError(
                f"the log's first event (event {first_id}) is not leaf 0 under the "
                f"checkpoint of size {size}: nothing was signed",
                where="Merkle leaf 0",
            ) from exc

    def _root_at(self, cursor: Cursor, size: int) -> bytes:
        """The root of the stored tree's first `size` leaves."""
        try:
            return self.tables.subtree_reader(cursor)(0, size)
        except StoredRowError as exc:
            raise VerificationError(f"{exc}: nothing was signed") from exc

    def _recount(self, kept: Checkpoint) -> NoReturn:
        """The store held fewer events than the kept checkpoint covers: lost events,
        or a snapshot older than the note, read after the snapshot began (another
        checkpointer, the server's anchor say, signed, kept and stored one over
        events committed since). Counted again on a snapshot begun after the note
        was read, which holds every event under it: refused only if still short."""
        with self.tables.recorder.snapshot() as cursor:
            size, last_id = self.tables.tail(cursor)
            held = size + len(self.tables.rows_after(last_id, max(kept.size - size, 0), cursor))
        if held < kept.size:
            raise self._refusal(kept, f"the store holds only {held} events")
        raise _Moved()

    def _refusal(self, kept: Checkpoint, holds: str) -> CheckpointRefusedError:
        where = self.lock.describe() if self.lock is not None else "the lock"
        return CheckpointRefusedError(
            f"refusing to sign a checkpoint: this log signed one of size {kept.size} (kept in "
            f"{where}) and {holds}: the store lost events (a lagging standby promoted, an "
            "older backup restored); nothing is signed until they are back "
            "(docs/operations.md: Checkpoints that never fork)"
        )

    def _check_signing_key(self, keyring: Keyring, now: datetime) -> None:
        """Sign nothing with a checkpoint key that may not sign at `now` (expired,
        or revoked: `ledger.crypto.validity`)."""
        record = keyring.get(self.signer.key_id)
        if record is None:
            problem: str | None = "it is not in the keyring"
        else:
            problem = key_problem(record, to_micros(now))
        if problem is not None:
            raise ConfigError(
                f"checkpoint key {self.signer.name} may not sign now: {problem}; no checkpoint "
                "was signed (create another checkpoint key and `ledger keys use` it)"
            )

    def _checked_entry_hash(
        self, notification_id: int, originator_id: object, version: int, topic: str, state: object
    ) -> bytes:
        stream = stream_of(originator_id)
        if not isinstance(state, bytes | bytearray | memoryview) or type(version) is not int:
            raise VerificationError(
                f"event {notification_id} is malformed: nothing was checkpointed past it"
            )
        state = bytes(state)
        # An archived event's kept leaf (the caller holds it to the root), or exactly
        # what this node sealed (checked as it was made).
        known = archived_leaf(topic, state)
        if known is None and type(topic) is str:
            known = self.sealed_entry(state, stream, version, topic)
        if known is not None:
            return known
        envelope = open_envelope(state, stream=stream, version=version)
        check_row(envelope, stream=stream, version=version, topic=topic)
        if self.signed_here(envelope.entry_hash) == envelope.signature:
            self.signer_check.check_signer(envelope, stream=stream, version=version)
        else:
            self.signer_check.check_signature(envelope, stream=stream, version=version)
        return envelope.entry_hash

    def _newest_signed(self, cursor: Cursor, size: int) -> Checkpoint | None:
        """The newest checkpoint whose signature verifies, by its signed size, among
        the rows whose `tree_size` column is at least the stored tail's `size`.

        The column only selects which rows to read (an index range, so a store
        with millions of checkpoints resumes in O(1)); every row read is parsed
        and a column that disagrees with its signed size stops the checkpointer.
        A genuine larger checkpoint hidden under a smaller column is not seen
        here, but anything signed past it then forks from it, which `verify`
        (reading every row) reports.
        """
        keyring = self.keyring
        assert keyring is not None
        newest: Checkpoint | None = None
        rows = self.tables.checkpoint_rows(size, cursor)
        if not rows and size:
            rows = self.tables.checkpoint_rows(None, cursor)  # something is wrong: say what
        for row in rows:
            checkpoint = parse_checkpoint_row(row)
            checkpoint.verify(keyring)
            if checkpoint.origin != self.origin:
                raise ConfigError(
                    f"this node's origin is {self.origin!r} but the store's checkpoints are "
                    f"for {checkpoint.origin!r} (set LEDGER_ORIGIN): nothing was signed"
                )
            if newest is not None and checkpoint.size == newest.size:
                if checkpoint.root != newest.root:
                    raise VerificationError(
                        f"two signed checkpoints of size {checkpoint.size} with different roots",
                        where=f"checkpoint of size {checkpoint.size}",
                    )
            elif newest is None or checkpoint.size > newest.size:
                newest = checkpoint
        return newest

    def _check_resume_point(self, cursor: Cursor, size: int, last_id: int) -> Checkpoint | None:
        """Check the stored frontier and last leaf against the newest signed checkpoint."""
        try:
            newest = self._newest_signed(cursor, size)
            if newest is None:
                if size:
                    raise VerificationError(
                        f"the Merkle log holds {size} leaves but no signed checkpoint covers them",
                        where=f"Merkle leaf {size - 1}",
                    )
                return None
            if newest.size > size:
                raise VerificationError(
                    f"the newest signed checkpoint covers {newest.size} events but the Merkle "
                    f"log stops at {size} leaves: leaves from {size} on are missing",
                    where=f"Merkle leaf {size}",
                )
            if newest.size < size:
                raise VerificationError(
                    f"the Merkle log holds {size} leaves but the newest signed checkpoint "
                    f"covers {newest.size}: leaves from {newest.size} on were not signed",
                    where=f"Merkle leaf {newest.size}",
                )
            frontier = load_compact_range(self.tables, size, cursor)
            if frontier.root() != newest.root:
                raise VerificationError(
                    "the stored frontier does not hash to the signed root of the checkpoint "
                    f"of size {size}",
                    where=self._bad_frontier_node(cursor, size),
                )
            self._check_last_leaf(cursor, newest, last_id)
        except StoredRowError as exc:
            raise VerificationError(f"{exc}: nothing was signed") from exc
        return newest

    def _bad_frontier_node(self, cursor: Cursor, size: int) -> str:
        """The first frontier node that does not hash from its own children."""
        offset = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                index = offset >> level
                if level > 0:
                    node = self.tables.node(level, index, cursor)
                    left = self.tables.node(level - 1, 2 * index, cursor)
                    right = self.tables.node(level - 1, 2 * index + 1, cursor)
                    if left is None or right is None or node != hash_children(left, right):
                        return f"Merkle node ({level}, {index})"
                offset += 1 << level
        return f"the Merkle frontier at size {size}"

    def _check_last_leaf(self, cursor: Cursor, newest: Checkpoint, last_id: int) -> None:
        """The last leaf is the event at its notification id, under the signed root,
        and exactly `size` events come up to it."""
        size = newest.size
        where = f"Merkle leaf {size - 1}"
        row = self.tables.row_by_id(last_id, cursor)
        if row is None:
            raise VerificationError(f"names event {last_id}, which is not in the log", where=where)
        entry_hash = self._checked_entry_hash(*row)
        if self.tables.leaf_hash(size - 1, cursor) != entry_hash:
            raise VerificationError(
                f"is not the entry hash of event {last_id}, the event it names", where=where
            )
        proof = inclusion_proof(size - 1, size, self.tables.subtree_reader(cursor))
        try:
            verify_inclusion(size - 1, size, entry_hash, proof, newest.root)
        except VerificationError as exc:
            raise VerificationError(
                f"event {last_id} is not the last event under the checkpoint of size {size}",
                where=where,
            ) from exc
        known = self._verified
        if known is not None and known.last_id <= last_id:
            counted = known.checkpoint.size + self.tables.count_between(
                known.last_id, last_id, cursor
            )
        else:
            counted = self.tables.count_between(0, last_id, cursor)
        if counted != size:
            raise VerificationError(
                f"names event {last_id}, but {counted} events (not {size}) come up to it",
                where=where,
            )

    def follow(
        self,
        poll_seconds: float = 0.5,
        stop: Callable[[], bool] = lambda: False,
        then: Callable[[], None] = lambda: None,
    ) -> None:
        """Keep the log checkpointed until `stop()` says otherwise, through store
        outages (a restart, a failover): after one, the resume point is checked
        again in full, on what the store holds now. `then` runs after each turn
        (publishing the tiles, say)."""

        def step() -> bool:
            self.catch_up(chase=False)
            then()
            return False

        follow_through_outages(step, stop, poll_seconds, "checkpointer", self._forget_verified)

    def _forget_verified(self) -> None:
        # The server may be another one (a promoted standby): what this
        # process checked before is checked again before anything is signed.
        self._verified = None
