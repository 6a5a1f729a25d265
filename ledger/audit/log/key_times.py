"""The times `ledger verify` judges signing keys by: checkpoints' issue times,
and for each log position the first checkpoint that covers it."""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import to_micros
from ledger.errors import VerificationError


def checkpoint_times(checkpoints: list[Checkpoint]) -> list[tuple[int, int]]:
    """(size, issued_at µs) per size, ascending, of checkpoints whose signature
    (and key, revocation included: `Checkpoint.verify`) already verified. For
    two of one size, the earlier time: both are signed evidence the events
    existed then."""
    earliest: dict[int, int] = {}
    for checkpoint in checkpoints:
        issued_at = checkpoint.issued_at
        if issued_at.tzinfo is None or issued_at.utcoffset() is None:
            raise VerificationError(
                "its time has no time zone", where=f"checkpoint of size {checkpoint.size}"
            )
        micros = to_micros(issued_at)
        earliest[checkpoint.size] = min(micros, earliest.get(checkpoint.size, micros))
    return sorted(earliest.items())


class SignedWhen(NamedTuple):
    """When the event carrying a signed fact was signed, and the first checkpoint
    covering it: what `ledger.crypto.validity` judges the fact's key by."""

    at: int  # µs: the envelope's signing time (v1: the covering checkpoint's time)
    covered_at: int | None = None  # the first covering checkpoint's issue time (µs)
    covered_size: int | None = None


class Coverage:
    """For each log position, the first checkpoint (size, issued_at µs) covering it.

    `times` as `checkpoint_times` gives them; earlier issue times of larger
    checkpoints cannot occur (checkpoint times never go backwards)."""

    def __init__(self, times: list[tuple[int, int]]) -> None:
        self._sizes = [size for size, _ in times]
        self._times = times

    def first_covering(self, position: int) -> tuple[int | None, int | None]:
        """(issued_at µs, size) of the first checkpoint with size > position, or (None, None)."""
        index = bisect_right(self._sizes, position)
        if index == len(self._times):
            return None, None
        size, issued_at = self._times[index]
        return issued_at, size

    def when(self, position: int, signed_at: int | None) -> SignedWhen:
        covered_at, size = self.first_covering(position)
        if signed_at is None:  # a v1 envelope: judged by the checkpoint covering it
            signed_at = covered_at if covered_at is not None else -1
        return SignedWhen(signed_at, covered_at, size)
