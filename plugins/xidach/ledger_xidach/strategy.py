"""Simple play for the simulation: a player draws below a threshold, the dealer checks when ahead.

What each side may see (the seed: hands stay face down; the dealer "checks"
them; a five-card hand is shown whatever its score; naturals are shown and
settled in phase 1):

- a player sees only their own cards;
- the dealer sees its own hand, how many cards each unsettled seat holds,
  and the cards of five-card hands (shown). Nothing else.

Dealer play, once no player has a turn: draw while below the minimum; then
check every shown hand it beats, and every face-down hand of three or more
cards once its own score is at least `check_at` (a player who drew twice or
more is often bust or low); then draw while below `stand_at`; then stop
(checking the rest). The dealer never checks during the players' turns (the
seed calls that unprofitable) and never draws while bust (not offered).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledger.plugins import Draw
from ledger_xidach.hands import compare, hand_class, score
from ledger_xidach.rules import XiDachRules
from ledger_xidach.table import DEALER, Round, seat_actor


@dataclass(frozen=True)
class PlayerStrategy:
    draw_below: int = 16

    def choose(self, points: int, offered: Mapping[str, Draw | None]) -> str:
        """`hit` while the hand scores below the threshold, else `stand`."""
        return "hit" if points < self.draw_below and "hit" in offered else "stand"


@dataclass(frozen=True)
class DealerStrategy:
    check_at: int = 18  # check face-down hands of 3+ cards from this score
    stand_at: int = 17  # draw while below this (after checking)

    def choose(self, table: Round, offered: Mapping[str, Draw | None]) -> str:
        """The dealer's move once no player has a turn, from what the dealer may see."""
        rules = table.rules
        mine = table.dealer_score  # its own hand
        if "draw" in offered and mine < rules.min_score:
            return "draw"
        for seat in table.order:
            action = f"check:{seat}"
            if action not in offered:
                continue
            cards = table.hands[seat]
            if len(cards) == rules.max_cards:  # shown: the dealer may read it
                theirs = score(cards, rules.ace_rule)
                klass = hand_class(cards, theirs, rules.min_score, rules.xi_dach_tens)
                if compare(klass, theirs, table.dealer_class, mine) < 0:
                    return action
            elif len(cards) >= 3 and self.check_at <= mine <= 21:
                return action
        if "draw" in offered and mine < self.stand_at:
            return "draw"
        if "stop" in offered:
            return "stop"
        return next(iter(offered))  # unreachable: a dealer that may not draw may stop


def play_round(
    rules: XiDachRules,
    stakes: Mapping[int, int],
    rng: random.Random,
    player: PlayerStrategy,
    dealer: DealerStrategy,
) -> tuple[int, int, list[tuple[str, str, list[int]]]]:
    """One round from a freshly shuffled deck: (total staked, total returned, actions)."""
    table = Round(rules, {seat: (f"seat-{seat}", stake) for seat, stake in stakes.items()})
    deck = list(range(52))
    rng.shuffle(deck)
    taken = 0
    actions: list[tuple[str, str, list[int]]] = []
    while True:
        moves = table.moves()
        if not moves:
            break
        if table.turn is not None:
            actor = seat_actor(table.turn)
            action = player.choose(table.scores[table.turn], moves[actor])
        elif DEALER in moves and len(moves) == 1:
            actor = DEALER
            offered = moves[DEALER]
            action = next(iter(offered)) if table.phase != "play" else dealer.choose(table, offered)
        else:  # unreachable: with no player turn only the dealer moves
            raise AssertionError(f"unexpected moves {moves}")
        draw = moves[actor][action]
        count = 0 if draw is None else draw["count"]
        drawn = deck[taken : taken + count]
        taken += count
        table.apply(actor, action, drawn)
        actions.append((actor, action, drawn))
    return sum(stakes.values()), sum(table.returned.values()), actions


def replay(
    rules: XiDachRules, stakes: Mapping[int, int], actions: Sequence[tuple[str, str, list[int]]]
) -> Round:
    """A fresh round with `actions` applied (for determinism checks)."""
    table = Round(rules, {seat: (f"seat-{seat}", stake) for seat, stake in stakes.items()})
    for actor, action, drawn in actions:
        table.apply(actor, action, drawn)
    return table
