"""Submitting checkpoints to witnesses (C2SP tlog-witness), in the background.

`WitnessSubmitter.offer` hands over each new checkpoint and returns at once.
Each witness has a thread of its own, which sends it the newest checkpoint
offered with a consistency proof from the size that witness last cosigned
(learnt from its `409 text/x.tlog.size` answer, or from the cosignatures
already stored), and stores each cosigned note in `ledger_cosignatures`.
A witness that is down or slow costs its own cosignature only: its whole
exchange for one checkpoint has one deadline (not a time-out per read, which
a witness trickling its answer a byte at a time would never meet), no other
witness waits for it, and its next checkpoint tries again.

A witness that refuses because our checkpoint does not extend what it
cosigned (`422`), or states another root for the same size (`409` that is
not a size), has seen a split view of this log: `on_split_view` is told, and
the node records it in the log as a significant event.

Configured by `LEDGER_WITNESSES`: entries separated by `;` or newlines, each
``<submission prefix URL> <witness verifier key>``.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from eventsourcing.persistence import OperationalError, ProgrammingError

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.cosignature import Cosigner, is_line_of, verify_cosignature
from ledger.crypto.merkle import consistency_proof
from ledger.crypto.note import NoteError, split_note
from ledger.crypto.witness_policy import with_cosignatures
from ledger.crypto.witness_wire import SIZE_CONTENT_TYPE, AddCheckpoint, decode_size
from ledger.errors import ConfigError, VerificationError
from ledger.store.drivers import loaded_errors
from ledger.store.merkle_log import MerkleLogTables

WITNESSES_ENV = "LEDGER_WITNESSES"
# One witness's whole exchange for one checkpoint (docs/witnesses.md).
DEADLINE_SECONDS = 5.0
MAX_ANSWER = 64 * 1024  # a witness answers a few signature lines
log = logging.getLogger(__name__)
# What reading a table that does not exist raises, on either store.
_MISSING_TABLE = (OperationalError, ProgrammingError, sqlite3.Error)


def _missing_table() -> tuple[type[BaseException], ...]:
    return _MISSING_TABLE + loaded_errors("psycopg:Error")


@dataclass(frozen=True)
class WitnessEndpoint:
    url: str  # the submission prefix: `<url>/add-checkpoint` is posted to
    cosigner: Cosigner


def parse_witnesses(setting: str | None) -> list[WitnessEndpoint]:
    """`LEDGER_WITNESSES`'s value: `URL VERIFIER-KEY` entries, `;` or newline apart."""
    found: list[WitnessEndpoint] = []
    for entry in (setting or "").replace("\n", ";").split(";"):
        if not entry.strip():
            continue
        parts = entry.split()
        if len(parts) != 2 or not parts[0].startswith(("http://", "https://")):
            raise ConfigError(
                f"{WITNESSES_ENV}: {entry.strip()!r} is not '<http(s) URL> <witness verifier key>'"
            )
        try:
            cosigner = Cosigner.parse(parts[1])
        except NoteError as exc:
            raise ConfigError(f"{WITNESSES_ENV}: {exc}") from None
        found.append(WitnessEndpoint(parts[0].rstrip("/"), cosigner))
    return found


@dataclass(frozen=True)
class SplitView:
    """A witness's refusal that shows the log it saw is not this one."""

    witness: str  # name+keyID
    url: str
    status: int
    reason: str  # the witness's own words
    checkpoint: Checkpoint  # ours, that it refused
    witness_size: int  # the size it last cosigned, as far as we know


@dataclass(frozen=True)
class Outcome:
    witness: str
    result: str  # "cosigned", "ahead", "split-view", "unreachable", "refused"
    detail: str = ""


class CosignatureTable:
    """`ledger_cosignatures`: one row per (tree size, witness): the checkpoint's
    note with that witness's cosignature lines. Untrusted like every row: readers
    verify each cosignature (`ledger.crypto.witness_policy`)."""

    def __init__(self, tables: MerkleLogTables) -> None:
        self.tables = tables
        sql = tables.recorder.sql
        self._insert = sql(
            "INSERT INTO {cosignatures} (tree_size, witness, note) VALUES (%s, %s, %s) "
            "ON CONFLICT (tree_size, witness) DO NOTHING"
        )
        self._for_size = sql(
            "SELECT tree_size, witness, note FROM {cosignatures} WHERE tree_size = %s"
        )
        self._all = sql("SELECT tree_size, witness, note FROM {cosignatures}")
        self._largest = sql("SELECT MAX(tree_size) FROM {cosignatures} WHERE witness = %s")

    def add(self, size: int, witness: str, note: str) -> None:
        with self.tables.recorder.write() as c:
            c.execute(self._insert, (size, witness, note))

    def notes(self, size: int | None = None) -> list[tuple[object, object, object]]:
        """(tree size, witness, note) rows, of one size or all; none from a store
        made before this table existed and not opened for writing since."""
        try:
            with self.tables.recorder.read() as c:
                if size is None:
                    c.execute(self._all)
                else:
                    c.execute(self._for_size, (size,))
                return [(row[0], row[1], row[2]) for row in c.fetchall()]
        except _missing_table():
            return []

    def largest(self, witness: str) -> int:
        """A hint only (the witness's answer corrects it)."""
        try:
            with self.tables.recorder.read() as c:
                c.execute(self._largest, (witness,))
                row = c.fetchone()
        except _missing_table():
            return 0
        value = row[0] if row else None
        return value if type(value) is int and value >= 0 else 0

    def cosigned(self, checkpoint: Checkpoint) -> Checkpoint:
        """`checkpoint` with the cosignature lines stored for it."""
        return with_cosignatures(checkpoint, [row[2] for row in self.notes(checkpoint.size)])


Post = Callable[[str, bytes, float], tuple[int, str, bytes]]


def http_post(url: str, body: bytes, seconds: float) -> tuple[int, str, bytes]:
    """(status, content type, body) of a POST answered in full within `seconds`
    (`ledger.outbound`: a witness trickling bytes is cut off then, not held
    open by each byte); network failures and the deadline raise OSError."""
    from ledger import outbound  # (http.client and ssl: 20 ms a process, only a witness needs them)

    answer = outbound.request(
        "POST",
        url,
        deadline=seconds,
        headers={"Content-Type": "text/plain"},
        body=body,
        max_bytes=MAX_ANSWER,
    )
    return answer.status, answer.content_type, answer.body


@dataclass
class _Lane:
    """One witness's thread and the newest checkpoint waiting for it."""

    witness: WitnessEndpoint
    pending: Checkpoint | None = None
    thread: threading.Thread | None = None


class WitnessSubmitter:
    def __init__(
        self,
        tables: MerkleLogTables,
        witnesses: list[WitnessEndpoint],
        *,
        on_split_view: Callable[[SplitView], None] = lambda _: None,
        timeout: float = DEADLINE_SECONDS,
        post: Post = http_post,
    ) -> None:
        self.tables = tables
        self.witnesses = witnesses
        self.cosignatures = CosignatureTable(tables)
        self.on_split_view = on_split_view
        self.timeout = timeout  # one witness's whole exchange for one checkpoint
        self.post = post
        self._known: dict[str, int] = {}
        self._lanes = [_Lane(witness) for witness in witnesses]
        self._wake = threading.Condition()
        self._closed = False

    def offer(self, checkpoint: Checkpoint) -> None:
        """Submit `checkpoint` to every witness in the background (for each, a
        newer one offered before it is sent replaces it); never blocks on a witness."""
        with self._wake:
            if self._closed:
                return
            for lane in self._lanes:
                if lane.pending is None or checkpoint.size >= lane.pending.size:
                    lane.pending = checkpoint
                if lane.thread is None:
                    lane.thread = threading.Thread(
                        target=self._run,
                        args=(lane,),
                        name=f"witness-{lane.witness.cosigner.name}",
                        daemon=True,
                    )
                    lane.thread.start()
            self._wake.notify_all()

    def close(self, wait: float = 0.0) -> bool:
        """Stop once each witness was sent the checkpoint offered last, waiting
        at most `wait` seconds in all (the threads are daemons: a process never
        hangs on a witness). True when every witness's thread has ended."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
            threads = [lane.thread for lane in self._lanes if lane.thread is not None]
        until = time.monotonic() + wait
        for thread in threads:
            thread.join(max(0.0, until - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)

    def _run(self, lane: _Lane) -> None:
        while True:
            with self._wake:
                while lane.pending is None and not self._closed:
                    self._wake.wait()
                if lane.pending is None:
                    return  # closed, and nothing left to send
                checkpoint, lane.pending = lane.pending, None
            try:
                self._submit_one(lane.witness, checkpoint)
            except Exception:  # a store error: the next checkpoint tries again
                log.exception(
                    "submitting checkpoint %s to witness %s failed",
                    checkpoint.size,
                    lane.witness.cosigner.label,
                )

    def submit(self, checkpoint: Checkpoint) -> list[Outcome]:
        """Send `checkpoint` to every witness now, all at once, each within its
        deadline: their outcomes, in the configured order."""
        outcomes: list[Outcome | None] = [None] * len(self.witnesses)
        failures: list[BaseException] = []

        def ask(index: int, witness: WitnessEndpoint) -> None:
            try:
                outcomes[index] = self._submit_one(witness, checkpoint)
            except BaseException as exc:  # raised again in the caller's thread
                failures.append(exc)

        threads = [
            threading.Thread(target=ask, args=(i, w), name="witness-submit", daemon=True)
            for i, w in enumerate(self.witnesses)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
        return [outcome for outcome in outcomes if outcome is not None]

    def _submit_one(self, witness: WitnessEndpoint, checkpoint: Checkpoint) -> Outcome:
        label = witness.cosigner.label
        if label not in self._known:
            # A stored row is the attacker's: a size beyond ours is no reason to
            # skip the witness (only its own 409 says it is ahead); ask it.
            hint = self.cosignatures.largest(label)
            self._known[label] = hint if hint <= checkpoint.size else 0
        note = checkpoint.bare().to_note()
        deadline = time.monotonic() + self.timeout
        for _ in range(3):  # a stale size, corrected by the witness's 409, then the real try
            old = self._known[label]
            if old > checkpoint.size:
                return Outcome(label, "ahead", f"it cosigned size {old} already")
            proof = (
                consistency_proof(old, checkpoint.size, self.tables.subtree_reader())
                if 0 < old < checkpoint.size
                else []
            )
            body = AddCheckpoint(old, tuple(proof), note).encode()
            left = deadline - time.monotonic()
            if left <= 0:
                detail = f"timed out: no complete answer within {self.timeout:g} s"
                return Outcome(label, "unreachable", detail)
            try:
                status, kind, answer = self.post(f"{witness.url}/add-checkpoint", body, left)
            except (OSError, ValueError) as exc:
                from ledger.outbound import DeadlinePassed

                timed_out = isinstance(exc, DeadlinePassed)
                log.warning("witness %s unreachable: %s", label, exc)
                return Outcome(label, "unreachable", f"timed out: {exc}" if timed_out else str(exc))
            if status == 200:
                return self._cosigned(witness, checkpoint, answer)
            text = answer.decode("utf-8", errors="replace").strip()
            if status == 409 and kind.split(";")[0].strip() == SIZE_CONTENT_TYPE:
                try:
                    self._known[label] = decode_size(answer)
                except NoteError:
                    return Outcome(label, "refused", f"409 with a malformed size {text[:60]!r}")
                if self._known[label] == old:
                    return Outcome(label, "refused", f"409 for the size it states, {old}")
                continue
            if status in (409, 422):
                view = SplitView(label, witness.url, status, text[:500], checkpoint, old)
                log.error("witness %s refused checkpoint %s: %s", label, checkpoint.size, text)
                self.on_split_view(view)
                return Outcome(label, "split-view", text)
            log.warning("witness %s answered %s: %s", label, status, text[:200])
            return Outcome(label, "refused", f"{status}: {text[:200]}")
        return Outcome(label, "refused", "its size kept changing")

    def _cosigned(self, witness: WitnessEndpoint, checkpoint: Checkpoint, answer: bytes) -> Outcome:
        label = witness.cosigner.label
        try:
            _, lines = split_note(checkpoint.text + "\n" + answer.decode("utf-8"))
        except (NoteError, UnicodeDecodeError) as exc:
            return Outcome(label, "refused", f"200 but not signature lines: {exc}")
        good = []
        for line in lines:
            if not is_line_of(line, witness.cosigner):
                continue  # another key of the witness's: not ours to judge
            try:
                verify_cosignature(line, checkpoint.text, witness.cosigner)
            except VerificationError as exc:
                return Outcome(label, "refused", f"its cosignature does not verify: {exc}")
            good.append(line)
        if not good:
            return Outcome(label, "refused", "200 without a cosignature by its configured key")
        note = checkpoint.bare().to_note() + "".join(line.format() for line in good)
        self.cosignatures.add(checkpoint.size, label, note)
        self._known[label] = checkpoint.size
        return Outcome(label, "cosigned")
