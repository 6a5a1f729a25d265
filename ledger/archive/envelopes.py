"""Each archived event's envelope opened and its signature verified in other
processes, one a core, while this one reads, writes and holds each event to
its chain and leaf (`event_checks`): an Ed25519 verification costs more than
everything else an event needs, and a machine has more than one core. (A log
shorter than `WORKERS_FROM` events is checked in this process: the workers'
start would cost more than they save.)

A worker opens the envelope as `ledger verify` does (well formed, canonical,
the stream and version its row names, its payload the one its header's
SHA-256 signs), checks its signer is a ledger-node key of the keyring and
verifies its signature. Batches go out as met; at most `IN_FLIGHT` a worker
are out at once, so memory stays bounded whatever the number of events, and
the first bad envelope raises, named by the caller's `describe`, at the
latest at `finish`.

With the C fast path built (`ledger.crypto.native`, `ledger verify`'s), a
worker checks runs of envelopes there: once an envelope has passed the
Python checks, its key's next envelopes pass when each header is, byte for
byte, the canonical header rebuilt from that key, its payload's SHA-256, its
row's stream and version (and the signed type and link it holds) and the
signature verifies. The first one that does not comes back to the Python
checks, which pass it (its key then the run's) or say what is wrong."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from multiprocessing.connection import wait
from typing import Any, Final, TypeVar

from ledger.audit.log.parallel import start_method
from ledger.crypto.canonical import ENVELOPE_DOMAIN
from ledger.crypto.envelope import JSON_SAFE_INT, SignerCheck, open_envelope
from ledger.crypto.keys import Keyring
from ledger.crypto.native import native
from ledger.crypto.plain_names import PlainNames
from ledger.crypto.signing import sign_open_address, verify_signature
from ledger.errors import VerificationError

BATCH: Final = 2000  # envelopes a trip to a worker (~1.5 MB)
IN_FLIGHT: Final = 3  # batches a worker may have out and unanswered
# Below this many events the checks run in this process: a worker's start (a
# fork, its imports, the store opened again to choose rounds) costs about
# 0.2-0.3 s of CPU, what checking some 5,000 envelopes here costs (~58 us each).
# `ledger archive` of a SQLite log, here / with two workers (wall, medians of 5):
# 1,907 events 0.64 / 0.80 s, 7,210 0.83 / 0.99 s, 22,291 2.10 / 1.65 s.
WORKERS_FROM = 10_000

Sent = tuple[str, int, bytes]  # (stream, version, stored envelope)
_T = TypeVar("_T")
_TYPE, _VERSION = b'","type":"', b'","version":'


class EnvelopeCheck:
    """A worker's checks (module doc), with the key of the last envelope the
    Python checks passed: the one the C runs hold the next headers to."""

    def __init__(self, keyring: Keyring, *, use_native: bool = True) -> None:
        self.signer = SignerCheck(keyring)
        self.scan = native.scan if use_native and native is not None else None
        self.verify = sign_open_address() or verify_signature
        self.key_id, self.public_key = b"", b""
        self.plain = PlainNames(str)  # (the streams come as the envelopes sign them)

    def first_bad(self, batch: list[Sent]) -> tuple[int, str] | None:
        """(index, what is wrong) of the first envelope in `batch` that does not
        open as its row's event, holds another payload than the one it signs, is
        not a ledger-node key's or is not validly signed; None when every one
        passes."""
        rows = [
            (0, stream, version, _signed_type(state), state) for stream, version, state in batch
        ]
        lasts: dict[str, tuple[int, bytes]] = {}
        index = 0
        while index < len(rows):
            if self.scan is not None and self.key_id:
                index = self._run(rows, index, lasts)
                if index >= len(rows):
                    break
            stream, version, state = batch[index]
            try:
                entry_hash = self.checked(stream, version, state)
            except VerificationError as exc:
                return index, str(exc)
            lasts[stream] = (version, entry_hash)
            index += 1
        return None

    def checked(self, stream: str, version: int, state: bytes) -> bytes:
        """One envelope through every check in Python; its entry hash, its key the
        C runs' from now on. Raises `VerificationError` saying what is wrong."""
        envelope = open_envelope(state, stream=stream, version=version)
        if envelope.stream != stream or envelope.version != version:
            raise VerificationError("its envelope is another event's")
        if hashlib.sha256(envelope.payload).digest() != envelope.payload_hash:
            raise VerificationError("its payload is not the one its envelope signs")
        public_key = self.signer.check_signer(envelope, stream=stream, version=version)
        if not verify_signature(public_key, envelope.signed_message, envelope.signature):
            raise VerificationError("its envelope signature is invalid")
        self.key_id, self.public_key = envelope.key_id.encode(), public_key
        return envelope.entry_hash

    def _run(
        self,
        rows: list[tuple[int, str, int, str, bytes]],
        index: int,
        lasts: dict[str, tuple[int, bytes]],
    ) -> int:
        """The index of the first row from `index` the C run did not pass."""
        assert self.scan is not None
        return self.scan(
            rows,
            index,
            len(rows),
            0,
            self.key_id,
            0,
            JSON_SAFE_INT - 1,
            [b"", -1],
            self.plain.names,
            self.plain.name,
            self.plain.topics,
            self.plain.topic,
            lasts,
            {},
            [],
            self.verify,
            self.public_key,
            ENVELOPE_DOMAIN,
            {},
        )


def _signed_type(state: bytes) -> str:
    """The type a canonical header signs, read between its fixed neighbours (""
    when it is not there: the C run then does not pass the envelope, and the
    Python checks say why). What the C run compares it with is the header
    itself, so it proves nothing alone."""
    end = state.rfind(_VERSION, 0, 6 + int.from_bytes(state[4:6], "big"))
    start = state.rfind(_TYPE, 0, end) if end > 0 else -1
    if start < 0:
        return ""
    try:
        return state[start + len(_TYPE) : end].decode("ascii")
    except UnicodeDecodeError:
        return ""


_check: list[EnvelopeCheck] = []  # a worker's, set by `_start`


def _start(keyring: str) -> None:
    _check[:] = [EnvelopeCheck(Keyring.from_json(keyring))]


def _start_worker(keyring: str) -> None:
    """A worker's start: its checks, and its end with the process that started
    it (killed, that one leaves no worker waiting for work that never comes)."""
    _start(keyring)
    parent = multiprocessing.parent_process()
    if parent is not None:

        def watch() -> None:
            wait([parent.sentinel])
            os._exit(1)

        threading.Thread(target=watch, name="archive-parent-watch", daemon=True).start()


def first_bad(batch: list[Sent]) -> tuple[int, str] | None:
    """A worker's `EnvelopeCheck.first_bad`."""
    return _check[0].first_bad(batch)


class Envelopes:
    """Envelopes handed in as met, checked in batches by the workers (in this
    process on a single core, or for fewer than `WORKERS_FROM` events)."""

    def __init__(self, keyring: Keyring, describe: Callable[[Hashable], str], events: int) -> None:
        """`events`: about how many the work reads (the log, an archive's)."""
        workers = (os.cpu_count() or 1) if events >= WORKERS_FROM else 1
        if workers > 1:
            self._pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
                workers,
                mp_context=get_context(start_method()),
                initializer=_start_worker,
                initargs=(keyring.to_json(),),
            )
        else:
            self._pool = None
            _start(keyring.to_json())
        self.keyring = keyring
        self._in_flight = IN_FLIGHT * workers
        self._describe = describe
        self._batch: list[Sent] = []
        self._wheres: list[Hashable] = []
        self._sent: list[tuple[Future[tuple[int, str] | None], list[Hashable]]] = []

    def submit(self, work: Callable[..., _T], *args: Any) -> Future[_T]:
        """`work(*args)` in a worker (here, where there are none): the rounds are
        chosen there while this process makes the tiles."""
        if self._pool is not None:
            return self._pool.submit(work, *args)
        done: Future[_T] = Future()
        try:
            done.set_result(work(*args))
        except BaseException as exc:
            done.set_exception(exc)
        return done

    def add(self, stream: str, version: int, state: bytes, where: Hashable) -> None:
        self._batch.append((stream, version, state))
        self._wheres.append(where)
        if len(self._batch) == BATCH:
            self._send()

    def _send(self) -> None:
        batch, wheres = self._batch, self._wheres
        self._batch, self._wheres = [], []
        if self._pool is None:
            self._raise_at(first_bad(batch), wheres)
            return
        self._sent.append((self._pool.submit(first_bad, batch), wheres))
        if len(self._sent) > self._in_flight:
            future, oldest = self._sent.pop(0)
            self._raise_at(future.result(), oldest)

    def finish(self) -> None:
        try:
            if self._batch:
                self._send()
            for future, wheres in self._sent:
                self._raise_at(future.result(), wheres)
            self._sent.clear()
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def _raise_at(self, found: tuple[int, str] | None, wheres: list[Hashable]) -> None:
        if found is not None:
            index, problem = found
            raise VerificationError(f"{self._describe(wheres[index])}: {problem}")
