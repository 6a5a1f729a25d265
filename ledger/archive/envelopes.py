"""Each archived event's envelope opened and its signature verified in other
processes, one a core, while this one reads, writes and holds each event to
its chain and leaf (`event_checks`): an Ed25519 verification costs more than
everything else an event needs, and a machine has more than one core.

A worker opens the envelope as `ledger verify` does (well formed, canonical,
the stream and version its row names, its payload the one its header's
SHA-256 signs), checks its signer is a ledger-node key of the keyring and
verifies its signature. Batches go out as met; at most
`IN_FLIGHT` a worker are out at once, so memory stays bounded whatever the
number of events, and the first bad envelope raises, named by the caller's
`describe`, at the latest at `finish`."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from typing import Final

from ledger.audit.log.parallel import start_method
from ledger.crypto.envelope import SignerCheck, open_envelope
from ledger.crypto.keys import Keyring
from ledger.crypto.signing import verify_signature
from ledger.errors import VerificationError

BATCH: Final = 2000  # envelopes a trip to a worker (~1.5 MB)
IN_FLIGHT: Final = 3  # batches a worker may have out and unanswered

Sent = tuple[str, int, bytes]  # (stream, version, stored envelope)
_signer: list[SignerCheck] = []  # a worker's, set by `_start`


def _start(keyring: str) -> None:
    _signer[:] = [SignerCheck(Keyring.from_json(keyring))]


def first_bad(batch: list[Sent]) -> tuple[int, str] | None:
    """(index, what is wrong) of the first envelope in `batch` that does not
    open as its row's event, holds another payload than the one it signs, is
    not a ledger-node key's or is not validly signed; None when every one passes."""
    signer = _signer[0]
    for index, (stream, version, state) in enumerate(batch):
        try:
            envelope = open_envelope(state, stream=stream, version=version)
            if envelope.stream != stream or envelope.version != version:
                return index, "its envelope is another event's"
            if hashlib.sha256(envelope.payload).digest() != envelope.payload_hash:
                return index, "its payload is not the one its envelope signs"
            public_key = signer.check_signer(envelope, stream=stream, version=version)
        except VerificationError as exc:
            return index, str(exc)
        if not verify_signature(public_key, envelope.signed_message, envelope.signature):
            return index, "its envelope signature is invalid"
    return None


class Envelopes:
    """Envelopes handed in as met, checked in batches by the workers (in this
    process on a single core)."""

    def __init__(self, keyring: Keyring, describe: Callable[[Hashable], str]) -> None:
        workers = os.cpu_count() or 1
        if workers > 1:
            self._pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
                workers,
                mp_context=get_context(start_method()),
                initializer=_start,
                initargs=(keyring.to_json(),),
            )
        else:
            self._pool = None
            _start(keyring.to_json())
        self._in_flight = IN_FLIGHT * workers
        self._describe = describe
        self._batch: list[Sent] = []
        self._wheres: list[Hashable] = []
        self._sent: list[tuple[Future[tuple[int, str] | None], list[Hashable]]] = []

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
