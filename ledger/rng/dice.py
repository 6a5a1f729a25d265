"""Provably fair dice: committed seed, HMAC-SHA256 byte stream, rejection sampling.

Before betting opens the server publishes `commitment(seed)`; once the seed is
retired and revealed, anyone can recompute every throw with `throw` and check
it with `verify_throw` (docs/design.md, "Outcomes an auditor can verify").

The byte stream for a message is the concatenation of blocks

    block i = HMAC-SHA256(key=seed, msg=message + b"\\n" + ASCII decimal of i),  i = 0, 1, ...

Only a caller-chosen `message` varies, and it must begin with the caller's
own domain prefix. Block numbers are decimal digits after the message's last
newline, so (message, block) pairs never collide.

A throw's message is

    b"casino-ledger/dice/v1\\n" + UTF-8(round_id) + b"\\n" + ASCII decimal of throw_counter

and each die takes the next stream byte b: b >= 252 is rejected (252 = 6 * 42,
so each face keeps exactly 42 of the 256 byte values, no modulo bias) and
otherwise the die is b % 6 + 1. Three dice almost always come from block 0;
the stream simply continues into block 1 if 30 or more of its 32 bytes are
rejected.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

DICE_DOMAIN: Final = b"casino-ledger/dice/v1\n"
SEED_BYTES: Final = 32
# Largest multiple of 6 not above 256: bytes from here up are rejected.
DIE_LIMIT: Final = 252

Dice = tuple[int, int, int]


def _check_seed(seed: bytes) -> None:
    # A short seed could be brute-forced from its public commitment.
    if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
        raise ValueError(f"a seed must be exactly {SEED_BYTES} bytes")


def commitment(seed: bytes) -> str:
    """Hex SHA-256 of the seed: published before betting, checked after reveal."""
    _check_seed(seed)
    return hashlib.sha256(seed).hexdigest()


def byte_stream(seed: bytes, message: bytes) -> Iterator[int]:
    """The endless stream of bytes for `message` (block by block, see module doc)."""
    _check_seed(seed)  # now, not at the first byte: a generator body runs late

    def blocks() -> Iterator[int]:
        block = 0
        while True:
            yield from hmac.digest(seed, message + b"\n" + str(block).encode("ascii"), "sha256")
            block += 1

    return blocks()


@dataclass
class Sampler:
    """Uniform integers drawn in turn from one message's byte stream.

    Shuffle-ready: `below(52)`, `below(51)`, ... is a Fisher-Yates deal. Each
    draw reads the fewest big-endian bytes that can hold `n` values and
    rejects readings at or above the largest multiple of `n`, so every value
    is exactly equally likely. `rejected` lists the stream positions of the
    first byte of each rejected reading, so an auditor can see a retry.
    """

    seed: bytes
    message: bytes
    position: int = 0
    rejected: list[int] = field(default_factory=list)
    _bytes: Iterator[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._bytes = byte_stream(self.seed, self.message)

    def below(self, n: int) -> int:
        """A uniform integer in [0, n)."""
        if type(n) is not int or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        width = max(1, ((n - 1).bit_length() + 7) // 8)
        span = 1 << (8 * width)
        limit = span - span % n
        while True:
            start = self.position
            value = 0
            for _ in range(width):
                value = value << 8 | next(self._bytes)
            self.position += width
            if value < limit:
                return value % n
            self.rejected.append(start)


def uniform(seed: bytes, message: bytes, n: int) -> Iterator[int]:
    """Endless uniform integers in [0, n) from `message`'s stream (see `Sampler`)."""
    sampler = Sampler(seed, message)
    while True:
        yield sampler.below(n)


def throw_message(round_id: str, throw_counter: int) -> bytes:
    """The message naming one throw: domain, round id, counter (see module doc)."""
    if not isinstance(round_id, str):
        raise ValueError(f"round_id must be a str, got {round_id!r}")
    if type(throw_counter) is not int or throw_counter < 0:
        raise ValueError(f"throw_counter must be a non-negative integer, got {throw_counter!r}")
    return DICE_DOMAIN + round_id.encode("utf-8") + b"\n" + str(throw_counter).encode("ascii")


@dataclass(frozen=True)
class ThrowTrace:
    """A throw with its working: what an auditor (or a test vector) records."""

    dice: Dice
    bytes_read: bytes  # every stream byte consumed, rejected ones included
    rejected_positions: tuple[int, ...]  # indexes into bytes_read


def throw_trace(seed: bytes, round_id: str, throw_counter: int) -> ThrowTrace:
    """`throw`, also returning the bytes read and which of them were rejected."""
    stream = byte_stream(seed, throw_message(round_id, throw_counter))
    read = bytearray()
    rejected: list[int] = []
    faces: list[int] = []
    while len(faces) < 3:
        byte = next(stream)
        if byte >= DIE_LIMIT:
            rejected.append(len(read))
        else:
            faces.append(byte % 6 + 1)
        read.append(byte)
    return ThrowTrace((faces[0], faces[1], faces[2]), bytes(read), tuple(rejected))


def throw(seed: bytes, round_id: str, throw_counter: int) -> Dice:
    """The three dice of throw `throw_counter` in round `round_id`."""
    _check_seed(seed)
    digest = hmac.digest(seed, throw_message(round_id, throw_counter) + b"\n0", "sha256")
    faces = [byte % 6 + 1 for byte in digest if byte < DIE_LIMIT]
    if len(faces) >= 3:  # the fast path: block 0 is all but certain to suffice
        return (faces[0], faces[1], faces[2])
    return throw_trace(seed, round_id, throw_counter).dice


def verify_throw(
    seed: bytes, commitment_hex: str, round_id: str, throw_counter: int, dice: Sequence[int]
) -> bool:
    """True iff `seed` matches the published commitment and yields exactly `dice`.

    `commitment_hex` is compared as `commitment` writes it (lowercase hex). A
    revealed seed of the wrong length cannot be the committed one: False.
    """
    if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
        return False
    if not isinstance(commitment_hex, str) or not commitment_hex.isascii():
        return False
    if not hmac.compare_digest(commitment(seed), commitment_hex):
        return False
    claimed = tuple(dice)
    if len(claimed) != 3 or any(type(face) is not int for face in claimed):
        return False
    return claimed == throw(seed, round_id, throw_counter)
