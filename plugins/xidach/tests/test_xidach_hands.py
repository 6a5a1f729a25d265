"""Scores and classes against a brute-force enumeration of ace values (RULES §2.2)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations_with_replacement, product

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ledger_xidach.hands import (
    DU_TUOI,
    NGU_LINH,
    NON,
    QUAC,
    XI_BAN,
    XI_DACH,
    compare,
    hand_class,
    natural,
    score,
)

# docs/rules.md §2.2, written out independently of the code under test.
ACE_TABLE = {
    "by-hand-size": {2: (11, 10), 3: (10, 1), 4: (1,), 5: (1,)},
    "any": dict.fromkeys(range(2, 6), (1, 10, 11)),
    "one-or-ten": dict.fromkeys(range(2, 6), (1, 10)),
}


def brute_score(ranks: Sequence[int], ace_rule: str) -> int:
    choices = [ACE_TABLE[ace_rule][len(ranks)] if r == 1 else (min(r, 10),) for r in ranks]
    totals = [sum(values) for values in product(*choices)]
    fitting = [t for t in totals if t <= 21]
    return max(fitting) if fitting else min(totals)


def brute_class(ranks: Sequence[int], points: int, min_score: int, tens: bool) -> str:
    if len(ranks) == 2 and sorted(ranks) == [1, 1]:
        return XI_BAN
    if len(ranks) == 2 and 1 in ranks:
        other = max(ranks)
        if other in (11, 12, 13) or (other == 10 and tens):
            return XI_DACH
    if points > 21:
        return QUAC
    if len(ranks) == 5 and 16 <= points <= 21:
        return NGU_LINH
    return DU_TUOI if points >= min_score else NON


def as_cards(ranks: Sequence[int]) -> list[int]:
    seen: dict[int, int] = {}
    cards = []
    for r in ranks:
        cards.append((r - 1) * 4 + seen.get(r, 0))
        seen[r] = seen.get(r, 0) + 1
    return cards


def all_rank_hands() -> list[tuple[int, ...]]:
    """Every multiset of 2..5 ranks a single deck can deal (at most four of a rank)."""
    hands = []
    for n in range(2, 6):
        for ranks in combinations_with_replacement(range(1, 14), n):
            if all(ranks.count(r) <= 4 for r in set(ranks)):
                hands.append(ranks)
    return hands


@pytest.mark.parametrize("ace_rule", sorted(ACE_TABLE))
def test_every_hand_of_two_to_five_cards_scores_and_classes_as_brute_force(ace_rule: str) -> None:
    hands = all_rank_hands()
    assert len(hands) > 8000  # 2..5 cards: every multiset, nothing silently skipped
    for ranks in hands:
        cards = as_cards(ranks)
        points = score(cards, ace_rule)
        assert points == brute_score(ranks, ace_rule), (ranks, ace_rule)
        for min_score, tens in ((16, True), (14, False)):
            assert hand_class(cards, points, min_score, tens) == brute_class(
                ranks, points, min_score, tens
            ), (ranks, ace_rule, min_score, tens)


@given(
    st.lists(st.integers(0, 51), min_size=2, max_size=5, unique=True),
    st.sampled_from(sorted(ACE_TABLE)),
    st.sampled_from([14, 15, 16]),
    st.booleans(),
)
def test_any_dealt_hand_scores_as_brute_force(
    cards: list[int], ace_rule: str, min_score: int, tens: bool
) -> None:
    ranks = [c // 4 + 1 for c in cards]
    points = score(cards, ace_rule)
    assert points == brute_score(ranks, ace_rule)
    assert hand_class(cards, points, min_score, tens) == brute_class(ranks, points, min_score, tens)
    # Order never matters: the same cards in reverse score the same.
    assert score(cards[::-1], ace_rule) == points


def test_ace_by_hand_size_worked_examples() -> None:
    ace, two, five, nine, ten, king = 0, 4, 16, 32, 36, 48
    assert score([ace, five], "by-hand-size") == 16  # 11 + 5: never 1 in two cards
    assert score([ace, 1], "by-hand-size") == 21  # two aces: 11 + 10
    assert score([ace, five, two], "by-hand-size") == 17  # 10 + 5 + 2 in three cards
    assert score([ace, five, nine], "by-hand-size") == 15  # 1 + 5 + 9 (10 would bust)
    assert score([ace, two, 5, 8, 12], "by-hand-size") == 12  # 1 + 2 + 2 + 3 + 4 in five
    assert score([ace, five], "one-or-ten") == 15  # 10 + 5: never 11
    assert score([ace, two, 5, 8], "any") == 18  # 11 + 2 + 2 + 3 in four
    assert score([ten, nine, king], "by-hand-size") == 29  # bust: the lowest total


def test_classes_and_comparisons() -> None:
    assert natural([0, 1], xi_dach_tens=True) == XI_BAN
    assert natural([0, 36], xi_dach_tens=True) == XI_DACH  # A + 10
    assert natural([0, 36], xi_dach_tens=False) is None  # only J, Q, K then
    assert natural([0, 40], xi_dach_tens=False) == XI_DACH  # A + J
    assert compare(XI_BAN, 0, XI_DACH, 0) == 1
    assert compare(XI_DACH, 0, XI_DACH, 0) == 0
    assert compare(DU_TUOI, 21, XI_DACH, 0) == -1
    assert compare(NGU_LINH, 17, NGU_LINH, 20) == 1  # lower wins between two ngũ linh
    assert compare(NGU_LINH, 20, NGU_LINH, 17) == -1
    assert compare(NGU_LINH, 18, NGU_LINH, 18) == 0
    assert compare(NGU_LINH, 21, DU_TUOI, 21) == 1
    assert compare(DU_TUOI, 19, DU_TUOI, 18) == 1
    assert compare(DU_TUOI, 18, DU_TUOI, 18) == 0
    assert compare(NON, 12, DU_TUOI, 16) == -1  # non loses when checked
    assert compare(NON, 12, NON, 9) == 0  # non against non pushes
    assert compare(QUAC, 25, QUAC, 23) == 0  # bust against bust pushes
    assert compare(QUAC, 22, NON, 10) == -1  # bust is worse than non
    assert compare(NON, 15, QUAC, 24) == 1
