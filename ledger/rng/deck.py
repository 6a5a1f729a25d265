"""Provably fair decks: one shuffled 52-card deck per round, from the committed seed.

The deck of a round is fixed by the table's committed seed (the same seed and
commitment as the dice, `ledger.rng.dice`) and the round id, before betting
opens; cards are dealt from it by position (0 is the top card), and once the
seed is revealed anyone can recompute the whole deck with `shuffled_deck` and
check every card dealt.

Cards are ints 0..51 (``rank = card // 4 + 1``, ``suit = card % 4``: the
encoding of `ledger.games.api`). The byte stream is `ledger.rng.dice`'s, for
the message

    b"casino-ledger/deck/v1\\n" + UTF-8(round_id)

(block i = HMAC-SHA256(key=seed, msg=message + b"\\n" + ASCII decimal of i)).
The shuffle is Fisher-Yates from the bottom: start from 0, 1, ..., 51; for
i = 51 down to 1, draw j uniform in [0, i] and swap positions i and j. Each
draw takes the next stream byte b and rejects b >= 256 - 256 % (i + 1) (the
largest multiple of i + 1 not above 256), else j = b % (i + 1): no modulo
bias, so each of the 52! orders is equally likely (as far as HMAC-SHA256 is
a pseudo-random function). This is `Sampler.below(i + 1)`; 51 draws usually
read two blocks (64 bytes) and rarely a third.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ledger.games.api import DECK_SIZE
from ledger.rng.dice import Sampler

DECK_DOMAIN: Final = b"casino-ledger/deck/v1\n"


def deck_message(round_id: str) -> bytes:
    """The message naming one round's deck: domain and round id (see module doc)."""
    if not isinstance(round_id, str):
        raise ValueError(f"round_id must be a str, got {round_id!r}")
    return DECK_DOMAIN + round_id.encode("utf-8")


@dataclass(frozen=True)
class ShuffleTrace:
    """A shuffle with its working: what an auditor (or a test vector) records."""

    deck: tuple[int, ...]
    swaps: tuple[int, ...]  # j drawn for i = 51, 50, ..., 1
    bytes_read: int  # stream bytes consumed, rejected ones included
    rejected_positions: tuple[int, ...]  # stream positions of rejected bytes


def shuffle_trace(seed: bytes, round_id: str) -> ShuffleTrace:
    """`shuffled_deck`, also returning the draws and which bytes were rejected."""
    sampler = Sampler(seed, deck_message(round_id))
    deck = list(range(DECK_SIZE))
    swaps: list[int] = []
    for i in range(DECK_SIZE - 1, 0, -1):
        j = sampler.below(i + 1)
        swaps.append(j)
        deck[i], deck[j] = deck[j], deck[i]
    return ShuffleTrace(tuple(deck), tuple(swaps), sampler.position, tuple(sampler.rejected))


def shuffled_deck(seed: bytes, round_id: str) -> list[int]:
    """Round `round_id`'s deck, top card first: ValueError for a seed not of 32 bytes."""
    return list(shuffle_trace(seed, round_id).deck)


def verify_cards(
    seed: bytes, round_id: str, positions: Sequence[int], cards: Sequence[int]
) -> bool:
    """True iff the cards at `positions` of the round's deck are exactly `cards`."""
    if len(positions) != len(cards):
        return False
    if any(type(p) is not int or not 0 <= p < DECK_SIZE for p in positions):
        return False
    if any(type(c) is not int for c in cards):
        return False
    deck = shuffled_deck(seed, round_id)
    return [deck[p] for p in positions] == list(cards)
