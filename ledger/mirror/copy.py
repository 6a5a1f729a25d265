"""`ledger mirror`: a regulator's own copy of a node's log, checked as it arrives.

Each pass asks the source for its newest checkpoint, reads the feed up to
it, and checks the new events and the checkpoint with `verify` itself
(`ledger.audit.verify.verify_log`), resumed from the mirror's saved state
over the mirror store's rows followed by the new ones (`pending.py`): every
envelope against its row and the source's public keyring, every signature,
every chain link, the Merkle tree rebuilt from the events with the root at
each checkpoint size, each checkpoint's signature, origin, time order and
consistency with the ones before. Only then are the rows written, byte for
byte as the source stores them, with the mirror's own Merkle rows and the
source's checkpoint, in one transaction, and the next state saved. So the
mirror store is an ordinary ledger store: `verify`, `export` and `serve`
read it as they read the source, and its roots are the source's.

What the source sends is the attacker's: a pass that finds anything wrong
writes nothing, raises one `VerificationError` naming it, and leaves every
finding in `refused.jsonl` in the mirror's directory. Besides the new
events, each pass re-reads part of the history it already holds from the
source (`recheck` events, cycling through the log, and always the last one)
and compares the bytes: an event edited in the source after the mirror
copied it is a refusal too. Following, both that re-read and the re-read of
the mirror's own Merkle rows its state vouches for (two rows an event) come
every `recheck_every` seconds rather than every pass.

A crash between the commit and the saved state is recovered on the next
start: the state is brought up to the store by `verify --resume` over the
store itself, so nothing is copied twice and nothing is skipped.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from ledger.audit.findings import Finding, Findings, Step
from ledger.audit.log.checkpoints import valid_checkpoints
from ledger.audit.log.chunks import CHUNK_LEAVES
from ledger.audit.log.log_source import StoreLog
from ledger.audit.verify import (
    Level,
    Sinks,
    VerificationReport,
    VerifyOptions,
    verify_log,
)
from ledger.audit.verify_state import STATE_FILE, VerifyState
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import CompactRange, hash_leaf
from ledger.errors import ConfigError, FindingKind, VerificationError
from ledger.export.records import split_envelope
from ledger.mirror.limits import BATCH, RECHECK
from ledger.mirror.pending import PendingTables
from ledger.mirror.source import FeedEvent, Source
from ledger.plugins.registry import LoadedGame
from ledger.store.account_heads import AccountHeadsTable, Head
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import CheckpointRow, MerkleLogTables, parse_checkpoint_row
from ledger.store.recorder_type import SealedRecorder
from ledger.store.recorders import (
    Cursor,
    LeafRow,
    NodeRow,
    Row,
    SealedSQLiteApplicationRecorder,
)

MIRROR_FILE = "mirror.json"
REFUSED_FILE = "refused.jsonl"
STATE_DIR = "state"
# Each pass leaves its new events' chunks in the saved state (aligned to their
# size, so many small ones): past this many beyond the aligned whole-log
# chunking the state is made again by a full verify of the mirror store, or
# every pass would re-read the store in ever more, ever smaller pieces.
COMPACT_AFTER = 512


@dataclass(frozen=True)
class Pass:
    """What one pass copied."""

    events: int  # events added
    size: int  # events the mirror holds now
    checkpoint: int  # the size of the newest checkpoint it holds
    source_checkpoint: int  # the size of the source's newest checkpoint
    rechecked: int  # events of the history compared with the source
    lag_seconds: float | None  # now minus the signing time of the newest event copied


class Mirror:
    """A mirror store following one source. `directory` is the mirror's own
    (its saved verify state, the source it follows, the refusals it made)."""

    def __init__(
        self,
        app: LedgerApplication,
        keyring: Keyring,
        source: Source,
        directory: Path,
        *,
        level: Level = Level.SIGNATURES,
        games: Mapping[str, LoadedGame] | None = None,
        batch: int = BATCH,
        recheck: int = RECHECK,
        recheck_every: float = 0.0,
        compact_after: int = COMPACT_AFTER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app = app
        self.keyring = keyring
        self.source = source
        self.directory = directory
        self.level = level
        self.games = games
        self.batch = batch
        self.recheck = recheck
        # Seconds between re-reads of the history (following: every pass would
        # re-read `recheck` events of the source several times a second).
        self.recheck_every = recheck_every
        self._rechecked_at: float | None = None
        # The same period for re-reading the mirror's own Merkle rows that its
        # state vouches for (two rows an event: most of a following pass's reading).
        self._tree_read_at: float | None = None
        self.compact_after = compact_after
        self.clock = clock
        # Asked between batches: a follower told to stop ends after the batch it is in.
        self.stop: Callable[[], bool] = lambda: False
        self.settings = self._settings()
        self.state = self._recover()

    # The mirror's own files.
    def _settings(self) -> dict[str, object]:
        path = self.directory / MIRROR_FILE
        if not path.exists():
            return {"source": self.source.base, "level": self.level.value, "recheck_next": 0}
        try:
            settings: dict[str, object] = json.loads(path.read_text())
        except ValueError as exc:
            raise ConfigError(f"{path} is not a mirror's settings ({exc})") from None
        if settings.get("source") != self.source.base:
            raise ConfigError(
                f"this mirror follows {settings.get('source')}, not {self.source.base}: "
                "a mirror copies one source (give it a store and keys directory of its own)"
            )
        if settings.get("level") != self.level.value:
            raise ConfigError(
                f"this mirror checks at level {settings.get('level')}: run it with "
                f"--level {settings.get('level')}"
            )
        return settings

    def _save(self, state: VerifyState, report: VerificationReport) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        state.save(self.directory / STATE_DIR, report.rounds)
        state.source = self.directory / STATE_DIR
        self.state = state
        self._write_settings()

    def _claim(self) -> None:
        """Before the first write: the settings that mark the store as this
        mirror's (a run that finds events and no settings refuses the store)."""
        if not (self.directory / MIRROR_FILE).exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            self._write_settings()

    def _write_settings(self) -> None:
        path = self.directory / MIRROR_FILE
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(self.settings, sort_keys=True) + "\n")
        os.replace(partial, path)

    def _refuse(self, message: str, findings: Findings | None = None) -> VerificationError:
        """Record a refusal beside the state; the error names it in one line."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / REFUSED_FILE).open("a", encoding="utf-8") as out:
            line = {"at": self.clock(), "source": self.source.base, "refused": message}
            out.write(json.dumps(line) + "\n")
            if findings is not None:
                findings.write_jsonl(out)
        held = self.size
        kept = f"nothing written past log position {held - 1}" if held else "nothing written"
        return VerificationError(
            f"mirror refused the source {self.source.base}: {message}; {kept} "
            f"({REFUSED_FILE} in {self.directory})"
        )

    @property
    def size(self) -> int:
        return self.state.size if self.state is not None else 0

    def _recover(self) -> VerifyState | None:
        """The saved state, brought up to what the store holds (a crash after a
        commit left the state behind it): `verify --resume` over the store."""
        state_dir = self.directory / STATE_DIR
        try:
            state = VerifyState.load(state_dir) if (state_dir / STATE_FILE).exists() else None
        except ConfigError:  # an earlier release's format: made again from the store itself
            state = None
        stored = self.app.tables.event_count()[0]
        if state is not None and state.size > stored:
            raise VerificationError(
                f"the mirror's saved state holds {state.size} events but its store only "
                f"{stored}: events were removed from the mirror store (verify it)"
            )
        if state is not None and state.size == stored:
            return state
        if state is None and stored == 0:
            return None
        found, report = self._verify_store(resume=state)
        if found or report.state is None:
            headline = found.headline()
            raise VerificationError(
                f"the mirror store does not verify from its saved state: {headline}"
            )
        self._save(report.state, report)
        return report.state

    def _verify_store(
        self, resume: VerifyState | None, save_state: bool = True
    ) -> tuple[Findings, VerificationReport]:
        """`verify` of the mirror store itself, from `resume` (None: all of it),
        making the state the next pass resumes from when `save_state`."""
        return self._verify(self.app.tables, resume, save_state)

    def _verify(
        self, tables: MerkleLogTables, resume: VerifyState | None, save_state: bool
    ) -> tuple[Findings, VerificationReport]:
        """`verify` over `tables` (the store, or the store with a batch pending),
        resumed from `resume`. A state whose verdict on the history no longer
        holds (the log now revokes a key from before the state was made: the
        events before it were judged without that revocation) is set aside, and
        the whole copy verified again, as `verify` in full would."""
        found = Findings()
        report = self._run_verify(tables, resume, save_state, found)
        if resume is not None and found and all(_stale_judgement(f) for f in found.items):
            found = Findings()
            report = self._run_verify(tables, None, save_state, found)
        return found, report

    def _run_verify(
        self,
        tables: MerkleLogTables,
        resume: VerifyState | None,
        save_state: bool,
        found: Findings,
    ) -> VerificationReport:
        return verify_log(
            StoreLog(self.app, tables),
            self.keyring,
            VerifyOptions(
                level=self.level,
                workers=1,
                games=self.games,
                resume=resume,
                save_state=save_state,
                reread_tree=self._tree_due(),
            ),
            sinks=Sinks(findings=found),
        )

    def _tree_due(self) -> bool:
        """Whether this verify re-reads the Merkle rows the state vouches for: at
        most every `recheck_every` seconds (every pass when not following)."""
        now = time.monotonic()
        if self._tree_read_at is not None and now - self._tree_read_at < self.recheck_every:
            return False
        self._tree_read_at = now
        return True

    def _compact(self) -> None:
        """Make the saved state again from a full verify of the mirror store (its
        chunks aligned over the whole log, as one run makes them)."""
        found, report = self._verify_store(resume=None)
        if found or report.state is None:
            first = found.ordered()[0].text if found else "no state made"
            raise _altered_here(first)
        self._save(report.state, report)

    def _held_checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint the mirror holds among those its state verified:
        the stored row of the largest such size whose note gives the state's root
        there (rows are the attacker's: one that does not is passed over)."""
        if self.state is None:
            return None
        roots, size = self.state.roots, self.state.size
        for verified in sorted((s for s in roots if s <= size), reverse=True)[:8]:
            for row in self.app.tables.checkpoint_rows(from_size=verified):
                try:
                    checkpoint = parse_checkpoint_row(row)
                except VerificationError:
                    continue
                if checkpoint.size == verified and checkpoint.root == roots[verified]:
                    return checkpoint
        held = [  # the newest rows all changed: every row, the slow way
            c
            for c in valid_checkpoints(self.app.tables, self.keyring)
            if c.size <= size and roots.get(c.size) == c.root
        ]
        return held[-1] if held else None

    # One pass.
    def sync(self) -> Pass:
        """Copy what the source's newest checkpoint covers beyond what the mirror
        holds; raise (writing nothing) when the source does not extend it."""
        note = self.source.newest_checkpoint()
        rechecked = self._recheck()
        held = self._held_checkpoint()
        if note is None:
            if self.size:
                raise self._refuse(
                    f"it has no checkpoint, but the mirror holds {self.size} of its events"
                )
            return Pass(0, 0, 0, 0, rechecked, None)
        try:
            newest = Checkpoint.from_note(note)
        except VerificationError as exc:
            raise self._refuse(f"its newest checkpoint is not one ({exc})") from None
        held_size = held.size if held is not None else 0
        if held is not None and newest.size < held.size:
            raise self._refuse(
                f"its newest checkpoint (size {newest.size}) is older than the one the mirror "
                f"holds (size {held.size}): its log was rolled back"
            )
        if held is not None and newest.size == held.size:
            if newest.root != held.root:
                raise self._refuse(
                    f"its checkpoint of size {newest.size} states another root than the one "
                    "the mirror holds of that size (a forked checkpoint)"
                )
            return Pass(0, self.size, held_size, newest.size, rechecked, None)
        if newest.size < self.size:
            raise self._refuse(
                f"its newest checkpoint (size {newest.size}) covers fewer events than the "
                f"mirror already copied from it ({self.size}): its log was rolled back"
            )
        added, lag, under = 0, None, held_size
        while self.size < newest.size:
            covering = self._covering(newest)
            events = self._fetch(self.size, covering[-1].size)
            lag = self._commit(events, covering)
            added, under = added + len(events), covering[-1].size
            if self.stop():
                break
        return Pass(added, self.size, under, newest.size, rechecked, lag)

    def _covering(self, newest: Checkpoint) -> list[Checkpoint]:
        """The source's checkpoints above the mirror's size that the next commit
        writes with its events: up to the largest at most `batch` events on (the
        first one when none is that close), `newest` the last it may reach. Each
        is verified with the events it covers; the list is the source's claim."""
        listed: list[Checkpoint] = []
        for note in self.source.checkpoints(self.size):
            try:
                checkpoint = Checkpoint.from_note(note)
            except VerificationError as exc:
                raise self._refuse(f"it lists a checkpoint that is not one ({exc})") from None
            floor = listed[-1].size if listed else self.size
            if checkpoint.size <= floor:
                raise self._refuse(
                    f"it lists a checkpoint of size {checkpoint.size} after one of size "
                    f"{floor}: its checkpoint list is not one per size above {self.size}"
                )
            if checkpoint.size == newest.size and checkpoint.root != newest.root:
                raise self._refuse(
                    f"it lists a checkpoint of size {newest.size} with another root than its "
                    "newest checkpoint of that size (a forked checkpoint)"
                )
            if checkpoint.size >= newest.size:
                break
            listed.append(checkpoint)
        listed.append(newest)
        reach = self.size + self.batch
        last = max((i for i, c in enumerate(listed) if c.size <= reach), default=0)
        return listed[: last + 1]

    def _fetch(self, begin: int, end: int, reach: str = "") -> list[FeedEvent]:
        """The feed's events at log positions [begin, end), each where it says it is
        (`reach` says why the feed must reach `end`)."""
        reach = reach or f"its checkpoint covers {end} events"
        events: list[FeedEvent] = []
        while begin + len(events) < end:
            want = end - begin - len(events)
            after = begin + len(events) - 1
            page = self.source.events(after if after >= 0 else None, want)
            if not page:
                raise self._refuse(
                    f"its feed ends at log position {begin + len(events) - 1}, but {reach}: "
                    "events are missing"
                )
            for event in page[:want]:
                expected = begin + len(events)
                if event.position != expected:
                    what = "skipped" if event.position > expected else "repeated"
                    raise self._refuse(
                        f"its feed {what} an event: position {event.position} came where "
                        f"{expected} was due"
                    )
                events.append(event)
        return events

    def _recheck(self) -> int:
        """Compare `recheck` events the mirror holds (from where the last pass
        stopped, cycling; and the newest one) with what the source serves now."""
        size = self.size
        now = time.monotonic()
        if size == 0 or (
            self._rechecked_at is not None and now - self._rechecked_at < self.recheck_every
        ):
            return 0
        self._rechecked_at = now
        start = self.settings.get("recheck_next", 0)
        start = start if type(start) is int and 0 <= start < size else 0
        count = min(self.recheck, size)
        spans = [(start, min(start + count, size))]
        if spans[0][1] - spans[0][0] < count:
            spans.append((0, count - (spans[0][1] - spans[0][0])))
        if not any(b <= size - 1 < e for b, e in spans):
            spans.append((size - 1, size))
        compared = 0
        for begin, end in spans:
            theirs = self._fetch(begin, end, f"the mirror copied {size} events from it")
            after = self.app.tables.id_at_offset(begin - 1) if begin else 0
            ours = self.app.tables.rows_after(after or 0, end - begin)
            for event, row in zip(theirs, ours, strict=False):
                if event.envelope != bytes(row[4]):
                    self._check_own_rows()  # which side changed: the mirror's store, or the source
                    raise self._refuse(
                        f"its event at log position {event.position} is not the one the mirror "
                        "copied and verified there (its history was rewritten)"
                    )
            compared += len(theirs)
        self.settings["recheck_next"] = (start + count) % size
        return compared

    def _check_own_rows(self) -> None:
        """Raise when the mirror store's rows are no longer the ones its state
        verified (`verify --resume` over the store: a raw re-read and re-hash)."""
        found, _ = self._verify_store(resume=self.state, save_state=False)
        if found:
            first = found.ordered()[0]
            raise _altered_here(first.text)

    def _pending_rows(self, events: list[FeedEvent]) -> tuple[list[Row], list[bytes]]:
        """The rows the events will be stored as (ids after the store's highest),
        and their Merkle leaf hashes (the entry hashes of their headers)."""
        tables = self.app.tables
        next_id = tables.highest_id() + 1
        rows: list[Row] = []
        hashes: list[bytes] = []
        for offset, event in enumerate(events):
            try:
                _, header, _, _ = split_envelope(event.envelope)
                topic = json.loads(header)["type"]
                key = tables.stream_key(str(UUID(event.stream)))
            except (ValueError, KeyError, TypeError):
                raise self._refuse(
                    f"its event at log position {event.position} is not a sealed envelope of a "
                    "ledger stream"
                ) from None
            if type(topic) is not str:
                raise self._refuse(f"its event at log position {event.position} names no type")
            rows.append((next_id + offset, key, event.version, topic, event.envelope))  # type: ignore[arg-type]
            hashes.append(hash_leaf(header))
        return rows, hashes

    def _commit(self, events: list[FeedEvent], checkpoints: list[Checkpoint]) -> float | None:
        """Verify `events` after what the mirror holds, with the source's
        `checkpoints` over them (the last one's size is where they end); write
        them together, in one transaction, and save the state."""
        rows, hashes = self._pending_rows(events)
        tree = self.state.tree.copy() if self.state is not None else CompactRange(0)
        first_leaf = tree.end
        nodes: list[NodeRow] = []
        leaves: list[LeafRow] = []
        for offset, (row, leaf_hash) in enumerate(zip(rows, hashes, strict=True)):
            leaves.append((first_leaf + offset, row[0], leaf_hash))
            tree.append(leaf_hash, nodes)
        notes: list[CheckpointRow] = [(c.size, c.to_note()) for c in checkpoints]
        pending = PendingTables(self.app.tables, rows, leaves, nodes, notes)
        found, report = self._verify(pending, self.state, save_state=True)
        if found or report.state is None:
            ours = [f for f in found.items if f.position is not None and f.position < self.size]
            if ours:  # the rows the mirror already holds: its own store was changed
                raise _altered_here(ours[0].text)
            raise self._refuse(f"{found.headline()}", found)
        self._claim()
        # The account heads the batch moved, for the map its last checkpoint signs
        # (verify recomputed it: a history is proven from a mirror as from a node).
        moved = [h for h in report.state.account_heads if h.position >= first_leaf]
        self._write(rows, leaves, nodes, checkpoints, moved)
        self._save(report.state, report)
        if len(report.state.chunks) > self.compact_after + report.state.size // CHUNK_LEAVES:
            self._compact()
        if not events:
            return None
        signed_at = json.loads(split_envelope(events[-1].envelope)[1]).get("signed_at")
        return self.clock() - signed_at / 1e6 if type(signed_at) is int else None

    def _write(
        self,
        rows: list[Row],
        leaves: list[LeafRow],
        nodes: list[NodeRow],
        checkpoints: list[Checkpoint],
        moved: list[Head],
    ) -> None:
        """One transaction: the rows under the ids they were verified with, the
        Merkle rows, the checkpoints and the account heads they sign; refused if
        anyone else wrote meanwhile."""
        tables = self.app.tables
        recorder = tables.recorder
        expected = rows[0][0] - 1 if rows else tables.highest_id()
        with recorder.write() as cursor:
            _lock(recorder, cursor)
            if tables.highest_id(cursor) != expected:
                raise ConfigError(
                    "the mirror store was written to while the mirror copied (another mirror "
                    "or a node on the same store): nothing was written"
                )
            if rows:
                insert = recorder.sql(
                    "INSERT INTO {events} ({id}, originator_id, originator_version, topic, state) "
                    "VALUES (%s, %s, %s, %s, %s)"
                )
                cursor.executemany(insert, rows)
                if not isinstance(recorder, SealedSQLiteApplicationRecorder):
                    # The ids were given: the sequence moves past them, so anything
                    # the library itself inserts later comes after them.
                    from psycopg.sql import SQL  # PostgreSQL only: imported already

                    table = f'"{recorder.datastore.schema}"."{recorder.events_table}"'
                    cursor.execute(
                        SQL("SELECT setval(pg_get_serial_sequence(%s, 'notification_id'), %s)"),
                        (table, rows[-1][0]),
                    )
            tables.append(leaves, nodes, None, cursor)
            for checkpoint in checkpoints:
                tables.append([], [], checkpoint, cursor)
            if checkpoints:
                AccountHeadsTable(recorder).upsert(moved, checkpoints[-1].size, cursor)


def _altered_here(what: str) -> VerificationError:
    return VerificationError(
        f"the mirror store's own rows no longer verify ({what}): they were changed after "
        "they were copied; nothing was copied (run `ledger verify` on the mirror store)"
    )


def _lock(recorder: SealedRecorder, cursor: Cursor) -> None:
    """Take the store's write lock before reading its end (as the library's
    inserts and the checkpointer do)."""
    if isinstance(recorder, SealedSQLiteApplicationRecorder):
        cursor.execute(recorder.sql("DELETE FROM {checkpoints} WHERE 0 = 1"))
    else:
        cursor.execute(recorder.sql("LOCK TABLE {events} IN EXCLUSIVE MODE"))


def _stale_judgement(finding: Finding) -> bool:
    """A resumed verify's "verify in full": the keys its state judged by changed."""
    return finding.kind is FindingKind.NOT_CHECKED and finding.step is Step.KEYS
