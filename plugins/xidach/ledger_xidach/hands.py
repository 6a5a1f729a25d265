"""Cards, hand scores, hand classes and the comparison of two hands (RULES §2.2, §2.4).

A card is an int 0..51 (the contract's encoding): ``rank = card // 4 + 1``
(1 ace .. 13 king). Only ranks matter here; suits never do.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import combinations_with_replacement
from typing import Final

from ledger_xidach.rules import NGU_LINH_MIN

XI_BAN: Final = "xi-ban"  # two aces
XI_DACH: Final = "xi-dach"  # an ace and a ten-card
NGU_LINH: Final = "ngu-linh"  # five cards scoring 16..21
DU_TUOI: Final = "du-tuoi"  # of age: min_score..21
NON: Final = "non"  # below the minimum
QUAC: Final = "quac"  # bust: over 21

# Best first; a natural exists only on the first two cards (phase 1).
CLASS_RANK: Final[dict[str, int]] = {
    XI_BAN: 6,
    XI_DACH: 5,
    NGU_LINH: 4,
    DU_TUOI: 3,
    NON: 2,
    QUAC: 1,
}
NATURALS: Final = frozenset({XI_BAN, XI_DACH})


def rank(card: int) -> int:
    return card // 4 + 1


def ace_values(ace_rule: str, n_cards: int) -> tuple[int, ...]:
    """What one ace may count in a hand of `n_cards` cards."""
    if ace_rule == "any":
        return (1, 10, 11)
    if ace_rule == "one-or-ten":
        return (1, 10)
    # by-hand-size (the seed's default): 2 cards 11 or 10, 3 cards 10 or 1, else 1.
    if n_cards <= 2:
        return (10, 11)
    if n_cards == 3:
        return (1, 10)
    return (1,)


@lru_cache(maxsize=4096)
def _score(ace_rule: str, n_cards: int, others: int, aces: int) -> int:
    totals = {
        others + sum(choice)
        for choice in combinations_with_replacement(ace_values(ace_rule, n_cards), aces)
    }
    fitting = [t for t in totals if t <= 21]
    return max(fitting) if fitting else min(totals)


def score(cards: Sequence[int], ace_rule: str) -> int:
    """The highest total not over 21 over the allowed ace values, else the lowest."""
    others = 0
    aces = 0
    for card in cards:
        r = card // 4 + 1
        if r == 1:
            aces += 1
        else:
            others += 10 if r > 10 else r
    return _score(ace_rule, len(cards), others, aces)


def natural(cards: Sequence[int], xi_dach_tens: bool) -> str | None:
    """Xì bàn or xì dách on exactly two cards, else None."""
    if len(cards) != 2:
        return None
    a, b = sorted(rank(c) for c in cards)
    if a != 1:
        return None
    if b == 1:
        return XI_BAN
    if b >= 11 or (b == 10 and xi_dach_tens):
        return XI_DACH
    return None


def hand_class(cards: Sequence[int], points: int, min_score: int, xi_dach_tens: bool) -> str:
    """The class of a hand whose score is `points`."""
    found = natural(cards, xi_dach_tens)
    if found is not None:
        return found
    if points > 21:
        return QUAC
    if len(cards) == 5 and points >= NGU_LINH_MIN:
        return NGU_LINH
    if points >= min_score:
        return DU_TUOI
    return NON


def compare(player: str, player_score: int, dealer: str, dealer_score: int) -> int:
    """+1 the player wins, 0 push, -1 the dealer wins (§2.3, §2.4)."""
    mine, theirs = CLASS_RANK[player], CLASS_RANK[dealer]
    if mine != theirs:
        return 1 if mine > theirs else -1
    if player == NGU_LINH:  # between two ngũ linh the lower score wins
        return (player_score < dealer_score) - (player_score > dealer_score)
    if player == DU_TUOI:
        return (player_score > dealer_score) - (player_score < dealer_score)
    return 0  # equal naturals, non against non, bust against bust: push
