"""The command path: every write of the Python API, applied in order, saved in batches.

Concurrent commands reaching a node (HTTP requests, Python API calls from
several threads) share a commit, as transparency logs and payment ledgers
batch their writes (group commit). One writer thread takes the commands
waiting (up to `size`, waiting up to `wait` for more while others keep
arriving), applies each in turn to the live aggregates of the working set,
seals their events and saves them in one transaction, then answers each.
Meanwhile the next commands queue up and form the next batch.

Each command stays what it was on its own:

- **atomic**: a refused command records nothing and spoils nothing (what it
  may have changed half-way is dropped; commands before it in the batch are
  committed first when it touched their aggregates);
- **idempotent**: its request id names a `Request` record saved with its
  events; a retry gets the first result back (from the same batch, from the
  node's memory of recent requests, or from the store, looked up for the
  whole batch in one query), and the same id for other arguments is refused;
- **acknowledged after the commit** of its batch, never before;
- **optimistic between nodes**: a batch that conflicts with another writer's
  commit (the same stream extended first) is applied again from fresh state;
  one that keeps conflicting is split into single commands. The processes of
  one node hold the store's writer lock for that node around a batch, so
  they never race each other.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError
from rfc8785 import CanonicalizationError

from ledger.casino.working_set import WorkingSet
from ledger.crypto.canonical import canonical
from ledger.domain.account import Account
from ledger.domain.asked_by import by_problem
from ledger.domain.game_table import GameTable
from ledger.domain.request import Request, request_uuid
from ledger.domain.round import Round
from ledger.errors import (
    ConfigError,
    ConflictError,
    InvalidCommandError,
    RequestIdReusedError,
    VerificationError,
)
from ledger.store.application import LedgerApplication
from ledger.store.recorders import Cursor, RequestIndexRow
from ledger.store.stream_ids import Kind, parse_id, require_aggregate

A = TypeVar("A", bound=Aggregate)
Result = Any  # JSON-safe: it is stored with the request
MAX_REQUEST_ID = 200
SIZE_ENV = "LEDGER_BATCH_SIZE"
WAIT_ENV = "LEDGER_BATCH_WAIT_MS"
DEFAULT_SIZE = 256  # Tessera's batch size; a batch of bets is a few hundred events
DEFAULT_WAIT_MS = 1.0  # waited only while other commands keep arriving
RECENT_REQUESTS = 100_000  # request ids this node answered, kept for retries
IDLE = 2.0  # seconds without a command before the writer thread stops


@dataclass(frozen=True)
class BatchSettings:
    """At most `size` commands a commit; wait up to `wait` seconds for more."""

    size: int = DEFAULT_SIZE
    wait: float = DEFAULT_WAIT_MS / 1000

    @classmethod
    def from_env(cls) -> BatchSettings:
        size = _env(SIZE_ENV, DEFAULT_SIZE, int, 1, 10_000)
        wait = _env(WAIT_ENV, DEFAULT_WAIT_MS, float, 0, 1_000)
        return cls(int(size), wait / 1000)


def _env(
    name: str, default: float, kind: type[float] | type[int], low: float, high: float
) -> float:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected a number from {low} to {high}") from None
    if not low <= value <= high:
        raise ConfigError(f"{name}={text!r}: expected a number from {low} to {high}")
    return value


class Work:
    """What one command reads and changes: live aggregates, no copies; and the
    request it runs for (a command whose own event records its request reads
    `request_id`, `fingerprint` and `asked_by` here)."""

    def __init__(
        self,
        live: WorkingSet,
        request_id: str = "",
        fingerprint: str = "",
        asked_by: dict[str, str] | None = None,
    ) -> None:
        self._live = live
        self._handed: list[Aggregate] = []
        self.request_id = request_id
        self.fingerprint = fingerprint
        self.asked_by = asked_by  # the session that asked (None: the node's own command)

    def get(self, cls: type[A], aggregate_id: UUID | str, kind: Kind) -> A:
        """The live aggregate `aggregate_id` names when it is a `kind` (else the
        one refusal of `ledger.store.stream_ids`: unknown, or of another kind)."""
        key = parse_id(aggregate_id, kind)
        try:
            found: Aggregate | None = self._live.get(key)
        except AggregateNotFoundError:
            found = None
        checked = require_aggregate(found, aggregate_id, kind, self._live.tables)
        assert isinstance(checked, cls)
        self._handed.append(checked)
        return checked

    def account(self, account_id: UUID | str) -> Account:
        return self.get(Account, account_id, Kind.ACCOUNT)

    def round(self, round_id: UUID | str) -> Round:
        """The live round, for a command to change: one still open under
        settlement API 1 (release 0.2 and before) is refused until `ledger
        migrate` ended it (`ledger.casino.migrate`, which alone reads it with
        `get`): the write path has one generation."""
        game_round = self.get(Round, round_id, Kind.ROUND)
        if game_round.settlement_api < 2 and game_round.is_open:
            raise InvalidCommandError(
                f"round {game_round.id} is still open under settlement API 1 (release 0.2 and "
                "before), which this release no longer plays: run `ledger migrate` first "
                "(it settles the round on its recorded outcome, or voids it)",
                code="needs_migration",
            )
        return game_round

    def table(self, table_id: UUID | str) -> GameTable:
        return self.get(GameTable, table_id, Kind.TABLE)

    def dirty(self) -> list[Aggregate]:
        """Aggregates this command was handed that hold events not collected yet."""
        return [a for a in self._handed if WorkingSet.pending(a)]


Body = Callable[[Work], tuple[Result, Sequence[Aggregate]]]
# The argument binding a request to the session that asked for it
# (`Casino.asked_by`): the same request id from another session is another
# request (refused). A request recorded with no session (the CLI's, the Python
# API's, or one recorded before requests were bound) still answers its retry.
# Its value is also recorded as who asked (`Request.Completed.asked_by`, or the
# `asked_by` of the event recording the request).
SESSION_ARG = "attested_by"


@dataclass(eq=False)
class _Command:
    command: str
    request_id: str
    fingerprint: str
    body: Body
    answer: Future[Result] = field(default_factory=Future)
    dry: bool = False  # asked what it would do: run, answered, nothing kept
    # Its own event records its request (request id and fingerprint, signed):
    # the store gets an index row to that event, not a `Request` record.
    recorded_in_event: bool = False
    # Its arguments without the session that asked (SESSION_ARG), when it has one:
    # hashed only when a stored request with its id has another fingerprint
    # (rare: a retry of a request recorded with no session), not for every bet.
    unbound_args: dict[str, Any] | None = None
    asked_by: dict[str, str] | None = None  # that session, recorded with the command
    done: bool = False
    followers: list[_Command] = field(default_factory=list)  # the same request, sent again

    def succeed(self, result: Result) -> None:
        for command in (self, *self.followers):
            command.done = True
            command.answer.set_result(result)

    def fail(self, error: BaseException) -> None:
        for command in (self, *self.followers):
            command.done = True
            command.answer.set_exception(error)


def _unbound(command: _Command) -> str | None:
    """The command's fingerprint without the session that asked, if it has one."""
    if command.unbound_args is None:
        return None
    unbound = {"command": command.command, "args": command.unbound_args}
    return hashlib.sha256(canonical(unbound)).hexdigest()


class CommandRunner:
    """Runs commands through batches on one node (see the module docstring)."""

    def __init__(
        self,
        app: LedgerApplication,
        settings: BatchSettings | None = None,
        *,
        max_attempts: int = 50,
    ) -> None:
        self.app = app
        self.settings = settings or BatchSettings.from_env()
        self.max_attempts = max_attempts
        self.live = WorkingSet(app)
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # the writer waiting for commands
        self._queue: deque[_Command] = deque()
        self._writer: threading.Thread | None = None
        self._last_batch = 1  # commands in the last batch taken
        self._recent: OrderedDict[str, tuple[str, str, Result]] = OrderedDict()
        self._lock_name: str | None = None  # the node's writer lock, named on first write
        self.batches = 0  # committed batches (for tests and benchmarks)
        self.commands = 0  # commands they carried

    # The queue: one writer thread takes the commands in order and runs the
    # batches; callers wait for their own answer (a thread on `run`, a
    # coroutine on the future `submit` returns). Batches and every store access
    # of the write path stay on that one thread, and the HTTP event loop never
    # blocks on a commit.

    def run(
        self, command: str, request_id: str, args: dict[str, Any], body: Body, *, dry: bool = False
    ) -> Result:
        """Run `body` (it returns its result and every aggregate it changed) and
        save what it changed with the request's record, once; return its result
        once committed, or raise what it raised. `dry`: run it on the same state,
        in turn with the others, and keep nothing of it (no request record)."""
        return self.submit(command, request_id, args, body, dry=dry).result()

    def submit(
        self,
        command: str,
        request_id: str,
        args: dict[str, Any],
        body: Body,
        *,
        dry: bool = False,
        recorded_in_event: bool = False,
    ) -> Future[Result]:
        """`run`, answered through a future (wrap it with `asyncio.wrap_future`).
        `recorded_in_event`: `body` records the request in one of its events
        (the `request_id` and `fingerprint` of its `Work`; its result is that
        event's `bet_id`), and a retry is answered from that event."""
        if not isinstance(request_id, str) or not 0 < len(request_id) <= MAX_REQUEST_ID:
            raise InvalidCommandError(
                f"a request id is 1..{MAX_REQUEST_ID} characters",
                code="invalid_value",
                param="request_id",
            )
        try:
            fingerprint = hashlib.sha256(canonical({"command": command, "args": args})).hexdigest()
        except CanonicalizationError as exc:  # e.g. an int past 2**53, NaN, bytes
            raise InvalidCommandError(
                f"{command}: arguments are not plain JSON: {exc}", code="invalid_value"
            ) from None
        mine = _Command(
            command, request_id, fingerprint, body, dry=dry, recorded_in_event=recorded_in_event
        )
        if SESSION_ARG in args:  # what the same request recorded with no session has
            mine.unbound_args = {name: value for name, value in args.items() if name != SESSION_ARG}
            mine.asked_by = _session(command, args[SESSION_ARG])
        with self._lock:
            self._queue.append(mine)
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(
                    target=self._write, name="ledger-writer", daemon=True
                )
                self._writer.start()
            else:
                self._arrived.notify()
        return mine.answer

    def _write(self) -> None:
        """The writer thread: batch after batch while commands come, gone when idle.

        The node's writer lock is taken before the batch: what arrives while
        another process of the node holds it joins this batch."""
        while self._wait_for_commands():
            batch: list[_Command] = []
            conflicted = False
            try:
                with self.app.sealed_recorder.writer_lock(self._writer_lock()):
                    batch = self._take()
                    conflicted = self._attempt(batch)
            except Exception as exc:  # the lock itself failed (the store went away)
                for command in batch or self._take():
                    if not command.done:
                        command.fail(exc)
                continue
            if conflicted:
                self._retry(batch)

    def _wait_for_commands(self) -> bool:
        """Wait for a command; False (and the thread ends) after `IDLE` seconds of none."""
        with self._lock:
            while not self._queue:
                if not self._arrived.wait(IDLE) and not self._queue:
                    self._writer = None  # the next command starts another
                    return False
            return True

    def _take(self) -> list[_Command]:
        """The next batch. When commands arrive together (the last batch carried
        several), wait up to `wait` for the callers just answered to send their
        next command beside those that queued meanwhile: waiting here (off the
        GIL) lets them, so the callers keep meeting in one commit instead of
        splitting into groups that take turns."""
        size, wait = self.settings.size, self.settings.wait
        with self._lock:
            expected = min(size, len(self._queue) + self._last_batch)
            if wait and self._last_batch > 1 and len(self._queue) < expected:
                deadline = time.monotonic() + wait
                while len(self._queue) < expected and (left := deadline - time.monotonic()) > 0:
                    self._arrived.wait(left)
            batch = [self._queue.popleft() for _ in range(min(size, len(self._queue)))]
            self._last_batch = len(batch)
            return batch

    # A batch.

    def _attempt(self, batch: list[_Command]) -> bool:
        """Apply and commit `batch` (the node's writer lock held); True when it
        conflicted with another writer and must be applied again."""
        todo: list[_Command] = []
        try:
            # Looked up under the lock: this node's other processes have
            # committed what they did before we look.
            with self.app.sealed_recorder.read() as cursor:  # one read for both
                todo = self._unanswered(batch, cursor)
                if todo:
                    self.live.catch_up(cursor)
            if todo:
                self._apply(todo)
            return False
        except IntegrityError:
            # Another writer extended one of these streams, or did one of these
            # requests, first: again from what they wrote.
            self.live.clear()
            return True
        except BaseException as exc:  # the store failed: nothing of it was committed
            self.live.clear()
            for command in todo or batch:  # (the lookup itself may have failed)
                if not command.done:
                    command.fail(exc)
            if not isinstance(exc, Exception):
                raise
            return False

    def _retry(self, batch: list[_Command]) -> None:
        """Apply a batch that conflicted again, from fresh state; one that keeps
        conflicting is split into single commands."""
        for attempt in range(1, self.max_attempts):
            time.sleep(random.uniform(0, 0.002 * attempt))  # racers spread out
            if attempt >= 2 and sum(not c.done for c in batch) > 1:
                for command in batch:
                    if not command.done:
                        self._retry([command])
                return
            try:
                with self.app.sealed_recorder.writer_lock(self._writer_lock()):
                    if not self._attempt(batch):
                        return
            except Exception as exc:  # the lock itself failed (the store went away)
                for command in batch:
                    if not command.done:
                        command.fail(exc)
                return
        for command in batch:
            if not command.done:
                command.fail(
                    ConflictError(
                        f"{command.command}: still conflicting after {self.max_attempts} attempts"
                    )
                )

    def _writer_lock(self) -> str:
        """One lock per node (its signing key): its processes write one batch at a time."""
        if self._lock_name is None:
            signer = getattr(self.app.mapper, "signer", None)
            self._lock_name = f"casino-ledger-writer:{signer.key_id if signer else 'read-only'}"
        return self._lock_name

    def _unanswered(self, batch: list[_Command], cursor: Cursor) -> list[_Command]:
        """The commands still to apply: a request already done (earlier in this
        batch, recently by this node, or in the store) gets its first result."""
        todo: list[_Command] = []
        first: dict[str, _Command] = {}
        for command in batch:
            if command.done:
                continue
            earlier = first.get(command.request_id)
            if earlier is not None:
                if earlier.fingerprint != command.fingerprint:
                    command.fail(self._reused(command.request_id, earlier.command))
                else:
                    earlier.followers.append(command)
                continue
            known = self._recent.get(command.request_id)
            if known is not None:
                self._answer_known(command, *known)
                continue
            first[command.request_id] = command
            todo.append(command)
        if not todo:
            return todo
        indexed = self.app.tables.indexed_requests([c.request_id for c in todo], cursor)
        stored = self.app.tables.existing_streams(
            [request_uuid(c.request_id) for c in todo if c.request_id not in indexed], cursor
        )
        if not stored and not indexed:
            return todo
        still: list[_Command] = []
        for command in todo:
            if command.request_id in indexed:
                try:
                    name, fingerprint, result = self._recorded_in_event(
                        command.request_id, *indexed[command.request_id], cursor
                    )
                except VerificationError as exc:  # that request alone cannot be answered
                    command.fail(exc)
                    continue
                self._answer_known(command, name, fingerprint, result)
            elif request_uuid(command.request_id) in stored:
                found: Aggregate = self.app.repository.get(request_uuid(command.request_id))
                assert isinstance(found, Request)
                self._answer_known(command, found.command, found.fingerprint, found.result)
            else:
                still.append(command)
        return still

    def _recorded_in_event(
        self, request_id: str, stream: UUID, version: int, cursor: Cursor
    ) -> tuple[str, str, Result]:
        """(command, fingerprint, result) of a request its own event records, read
        from that event (its envelope and signature checked as every read is):
        the index row only says where to look, and one that names an event not
        recording this request is refused (someone edited the index)."""
        row = self.app.tables.row_by_stream(str(stream), version, cursor)
        if row is not None and row[3] is None:  # (ledger.store.archived)
            raise VerificationError(
                f"request {request_id!r} was recorded in stream {stream}, which is archived: "
                "its result is in the archive (docs/archive.md)"
            )
        event: Any = None if row is None else self.app.decode_row(row)
        if (
            event is None
            or getattr(event, "request_id", None) != request_id
            or not getattr(event, "fingerprint", None)
        ):
            raise VerificationError(
                f"the request index names stream {stream} version {version} for request "
                f"{request_id!r}, and no event there records it (the index was edited)"
            )
        return RECORDED_IN[type(event).__qualname__], event.fingerprint, event.bet_id

    def _answer_known(self, command: _Command, name: str, fingerprint: str, result: Result) -> None:
        if fingerprint != command.fingerprint and fingerprint != _unbound(command):
            command.fail(self._reused(command.request_id, name))
        else:
            command.succeed(result)

    @staticmethod
    def _reused(request_id: str, command: str) -> RequestIdReusedError:
        return RequestIdReusedError(
            f"request id {request_id!r} was already used for a different {command}"
        )

    def _apply(self, todo: list[_Command]) -> None:
        """Apply each command to the live aggregates, then commit them together."""
        ready: list[_Ready] = []
        for command in todo:
            if command.dry:  # it answers from committed state: what came before it is saved
                self._commit(ready)
            work = Work(self.live, command.request_id, command.fingerprint, command.asked_by)
            try:
                result, changed = command.body(work)
            except Exception as exc:
                self._forget(work, ready)
                command.fail(exc)
                continue
            if command.dry:  # answered, its changes forgotten
                self._forget(work, ready)
                command.succeed(result)
                continue
            events: list[Any] = []
            for aggregate in changed:
                events += aggregate.collect_events()
                self.live.keep(aggregate)
            index = _recording_event(command, events) if command.recorded_in_event else None
            if index is None:
                record = Request(
                    request_id=command.request_id,
                    command=command.command,
                    fingerprint=command.fingerprint,
                    result=result,
                    asked_by=command.asked_by,
                )
                events += record.collect_events()
            ready.append(_Ready(command, result, events, index))
        self._commit(ready)

    def _forget(self, work: Work, ready: list[_Ready]) -> None:
        """Undo what one command changed: commit the commands before it (they may
        have changed the same aggregates), then drop its aggregates."""
        dirty = work.dirty()
        if dirty:
            self._commit(ready)
            for aggregate in dirty:
                aggregate.collect_events()
                self.live.drop(aggregate.id)

    def _commit(self, ready: list[_Ready]) -> None:
        if not ready:
            return
        events = [event for one in ready for event in one.events]
        index = [one.index for one in ready if one.index is not None]
        recordings = self.app.record_events(events, requests=index)
        self.live.committed([r.notification.id for r in recordings])
        self.batches += 1
        self.commands += len(ready)
        for one in ready:
            self._remember(one.command, one.result)
            one.command.succeed(one.result)
        ready.clear()

    def _remember(self, command: _Command, result: Result) -> None:
        self._recent[command.request_id] = (command.command, command.fingerprint, result)
        if len(self._recent) > RECENT_REQUESTS:
            self._recent.popitem(last=False)


def _session(command: str, by: Any) -> dict[str, str]:
    """The session that asked, as it is recorded: of the one shape `by_problem` allows."""
    if (problem := by_problem(by)) is not None:
        raise InvalidCommandError(
            f"{command}: the session that asked is malformed: {problem}", code="invalid_value"
        )
    return dict(by)


# The commands whose own event records their request, by that event's type.
RECORDED_IN = {"Round.BetPlaced": "place_bet"}


@dataclass
class _Ready:
    """A command applied, waiting for its commit: its events, and the index row
    to the event that records its request (None: a `Request` record among them)."""

    command: _Command
    result: Result
    events: list[Any]
    index: RequestIndexRow | None


def _recording_event(command: _Command, events: list[Any]) -> RequestIndexRow | None:
    """The index row to the event of `events` that records `command`'s request."""
    for event in events:
        if (
            getattr(event, "fingerprint", None) == command.fingerprint
            and getattr(event, "request_id", None) == command.request_id
        ):
            return (command.request_id, event.originator_id, event.originator_version)
    return None
