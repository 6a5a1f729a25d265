"""The Ed25519 signatures of an archive's events, verified in another process
while this one checks everything else: a signature costs about as much as all
the other checks of an event together, and a machine has a second core."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from typing import Final

from ledger.audit.log.parallel import start_method
from ledger.crypto.signing import verify_signature
from ledger.errors import VerificationError

BATCH: Final = 2000  # signatures a trip to the other process (~1 MB)
IN_FLIGHT: Final = 4  # batches sent and not yet answered: memory stays bounded

Signed = tuple[bytes, bytes, bytes]  # (public key, signed message, signature)


def first_bad(batch: list[Signed]) -> int:
    """The index of the first signature in `batch` that does not verify, or -1."""
    for index, (public_key, message, signature) in enumerate(batch):
        if not verify_signature(public_key, message, signature):
            return index
    return -1


class Signatures:
    """Signatures handed in as met, verified in batches (in another process where
    there is a second core); a bad one raises, named by `describe(where)` for
    the `where` it came with, at the latest by `finish`. Once `IN_FLIGHT`
    batches are out, handing one more in waits for the oldest."""

    def __init__(self, describe: Callable[[Hashable], str]) -> None:
        parallel = (os.cpu_count() or 1) > 1
        context = get_context(start_method())
        self._pool = ProcessPoolExecutor(1, mp_context=context) if parallel else None
        self._describe = describe
        self._batch: list[Signed] = []
        self._wheres: list[Hashable] = []
        self._sent: list[tuple[Future[int], list[Hashable]]] = []

    def add(self, public_key: bytes, message: bytes, signature: bytes, where: Hashable) -> None:
        self._batch.append((public_key, message, signature))
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
        if len(self._sent) > IN_FLIGHT:
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

    def _raise_at(self, index: int, wheres: list[Hashable]) -> None:
        if index >= 0:
            raise VerificationError(
                f"{self._describe(wheres[index])}: its envelope signature is invalid"
            )
