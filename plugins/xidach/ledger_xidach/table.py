"""One Xì dách round as a state machine: apply a recorded action, ask what is legal.

`Game.step` replays every recorded action through a fresh `Round`, so the
step the core stores is a pure function of the bets and the actions; the
simulation drives the very same `Round` incrementally (one `apply` per
action) to avoid replaying from the start at every move.

Seats and order. Seat 1 is at the dealer's right; the seed deals "from right
to left", so the deal and the players' turns go by ascending seat number over
the occupied seats, the dealer last.

Moves (RULES §2), each legal only where `moves()` offers it:

- ``dealer close_betting`` (betting) ends betting; with no bet the round is over.
- ``dealer deal`` draws ``2 * seats + 2`` cards, dealt one at a time in deal
  order, two rounds; phase 1 (naturals) is settled by that same action.
- ``seat:N hit`` (one card, fewer than five held) / ``seat:N stand``: the seat
  whose turn it is. A five-card hand ends the turn. A hit while already bust
  is đền bài: that seat loses at once, whatever the dealer will hold, and the
  step carries a flag.
- ``dealer check:N``: whenever the dealer is of age, scoring from the minimum
  to 21 (during the players' turns too: the seed lets the dealer check
  "before or during" the drawing), settles seat N against the dealer's hand
  as it is. A bust dealer is not of age: it may only stop.
- ``dealer draw`` (one card): once no player has a turn, while the dealer is
  not bust and holds fewer than five cards. Reaching `dealer_bust_pays_all_at`
  pays every unsettled seat and ends the round.
- ``dealer stop``: once no player has a turn, when the dealer is of age or
  can draw no more (five cards, or bust): checks every unsettled seat.
- ``dealer fault`` (``{"reason": ...}``): a misdeal, from betting closed until
  the round is over. Only a physical table's dealer device reports one, signed
  (the core refuses it at an RNG table); it voids the round: every bet not yet
  settled gets its stake back, the naturals already paid stand. An operator
  cannot void a round once its first card is dealt (RULES §1.4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ledger.plugins import Draw, InvalidCommandError
from ledger_xidach.hands import (
    NATURALS,
    QUAC,
    XI_BAN,
    XI_DACH,
    compare,
    hand_class,
    score,
)
from ledger_xidach.rules import XiDachRules, paid

DEALER: Final = "dealer"
ONE_CARD: Final[Draw] = {"kind": "cards", "count": 1}

BETTING: Final = "betting"
CLOSED: Final = "closed"  # betting closed, waiting for the deal
PLAY: Final = "play"
OVER: Final = "over"
VOIDED: Final = "voided"  # a misdeal the dealer device reported
FAULT: Final = "fault"

WIN: Final = "win"
PUSH: Final = "push"
LOSS: Final = "loss"


def seat_actor(seat: int) -> str:
    return f"seat:{seat}"


class Round:
    """The bets are fixed when betting closes: `seats` maps seat -> (bet id, stake)."""

    def __init__(self, rules: XiDachRules, seats: Mapping[int, tuple[str, int]]) -> None:
        self.rules = rules
        self.order: list[int] = sorted(seats)
        self.bet: dict[int, str] = {seat: seats[seat][0] for seat in self.order}
        self.stake: dict[int, int] = {seat: seats[seat][1] for seat in self.order}
        self.phase = BETTING
        self.hands: dict[int, list[int]] = {seat: [] for seat in self.order}
        self.scores: dict[int, int] = {}
        self.classes: dict[int, str] = {}
        self.dealer: list[int] = []
        self.dealer_score = 0
        self.dealer_class = ""
        self.done: set[int] = set()  # turn passed (stood, five cards, đền bài, settled)
        self.returned: dict[int, int] = {}  # settled seats -> amount returned
        self.results: dict[int, str] = {}  # settled seats -> win / push / loss
        self.penalised: set[int] = set()
        self.used: set[int] = set()  # every card dealt this round
        self.turn: int | None = None
        # What the last action did (the step reports only these).
        self.last_settle: dict[str, int] = {}
        self.last_flags: list[str] = []
        self.void_reason: str | None = None  # a misdeal voided the round

    # -- what is legal -------------------------------------------------------

    def moves(self) -> dict[str, dict[str, Draw | None]]:
        if self.phase == BETTING:
            return {DEALER: {"close_betting": None}}
        if self.phase == CLOSED:
            deal: Draw = {"kind": "cards", "count": 2 * len(self.order) + 2}
            return {DEALER: {"deal": deal, FAULT: None}}
        if self.phase in (OVER, VOIDED):
            return {}
        moves: dict[str, dict[str, Draw | None]] = {}
        rules = self.rules
        turn = self.turn
        if turn is not None:
            seat_moves: dict[str, Draw | None] = {"stand": None}
            if len(self.hands[turn]) < rules.max_cards:
                seat_moves["hit"] = ONE_CARD
            moves[seat_actor(turn)] = seat_moves
        dealer: dict[str, Draw | None] = {}
        # Only a dealer of age checks (seed: "nếu anh ta cũng đã đủ tuổi"): a bust one stops.
        of_age = rules.min_score <= self.dealer_score <= 21
        if turn is None:
            can_draw = self.dealer_score <= 21 and len(self.dealer) < rules.max_cards
            if can_draw:
                dealer["draw"] = ONE_CARD
            if of_age or not can_draw:
                dealer["stop"] = None
        if of_age:
            for seat in self.order:
                if seat not in self.returned:
                    dealer[f"check:{seat}"] = None
        # A misdeal (a card exposed, miscounted or misdealt) is a fault only the
        # physical table's dealer device reports, signed (RULES §1.4): the core
        # refuses it at an RNG table. It voids what is not settled yet.
        dealer[FAULT] = None
        moves[DEALER] = dealer
        return moves

    # -- doing it ------------------------------------------------------------

    def apply(self, actor: str, action: str, drawn: Sequence[int], reason: str = "") -> None:
        """Carry out one recorded action, or raise InvalidCommandError (state unchanged);
        `reason` is a fault's (a misdeal's) reason."""
        offered = self.moves().get(actor, {})
        if action not in offered:
            raise InvalidCommandError(
                f"xì dách: {actor} may not {action} now", code="move_not_offered", param="action"
            )
        draw = offered[action]
        wanted = 0 if draw is None else draw["count"]
        if len(drawn) != wanted:
            raise InvalidCommandError(
                f"xì dách: {actor} {action} takes {wanted} card(s), got {len(drawn)}",
                code="invalid_draw",
            )
        for card in drawn:
            if type(card) is not int or not 0 <= card < 52:
                raise InvalidCommandError(
                    f"xì dách: {card!r} is not a card (0..51)", code="invalid_draw"
                )
            if card in self.used:
                raise InvalidCommandError(
                    f"xì dách: card {card} was already dealt this round", code="invalid_draw"
                )
        if len(set(drawn)) != len(drawn):
            raise InvalidCommandError("xì dách: the same card drawn twice", code="invalid_draw")
        self.used.update(drawn)
        self.last_settle = {}
        self.last_flags = []
        if action == "close_betting":
            self.phase = CLOSED if self.order else OVER
        elif action == "deal":
            self._deal(drawn)
        elif action == "hit":
            self._hit(self._seat_of(actor), drawn[0])
        elif action == "stand":
            self._pass_turn(self._seat_of(actor))
        elif action == "draw":
            self._dealer_draw(drawn[0])
        elif action == FAULT:
            self.phase, self.turn = VOIDED, None
            self.void_reason = f"misdeal: {reason}"
            return
        elif action == "stop":
            for seat in self.order:
                if seat not in self.returned:
                    self._check(seat)
        else:  # check:N, the only other action moves() offers
            self._check(int(action.partition(":")[2]))
            if self.turn in self.returned:
                self._pass_turn(self.turn)
        if len(self.returned) == len(self.order):
            self.phase = OVER
            self.turn = None

    @staticmethod
    def _seat_of(actor: str) -> int:
        return int(actor.partition(":")[2])

    def _deal(self, cards: Sequence[int]) -> None:
        receivers: list[int | None] = [*self.order, None]  # None is the dealer
        for i, card in enumerate(cards):
            who = receivers[i % len(receivers)]
            (self.dealer if who is None else self.hands[who]).append(card)
        for seat in self.order:
            self._rescore(seat)
        self._rescore_dealer()
        self.phase = PLAY
        if self.dealer_class in NATURALS:  # the round ends: better wins, equal pushes
            for seat in self.order:
                mine = self.classes[seat]
                self._settle(seat, compare(mine, 0, self.dealer_class, 0), self._pays(mine))
            return
        for seat in self.order:
            if self.classes[seat] in NATURALS:
                self._settle(seat, 1, self._pays(self.classes[seat]))
        self._next_turn()

    def _pays(self, natural: str) -> tuple[int, int]:
        rules = self.rules
        if natural == XI_BAN:
            return rules.xi_ban_pays
        return rules.xi_dach_pays if natural == XI_DACH else rules.win_pays

    def _hit(self, seat: int, card: int) -> None:
        bust_before = self.classes[seat] == QUAC
        self.hands[seat].append(card)
        self._rescore(seat)
        if bust_before:  # đền bài: loses whatever the dealer holds, flagged for review
            self.penalised.add(seat)
            self.last_flags.append(
                f"den-bai: seat {seat} drew while bust, now {self.scores[seat]}: loses"
            )
            self._settle(seat, -1)
            self._pass_turn(seat)
        elif len(self.hands[seat]) >= self.rules.max_cards:
            self._pass_turn(seat)  # a five-card hand is shown and ends the turn

    def _dealer_draw(self, card: int) -> None:
        self.dealer.append(card)
        self._rescore_dealer()
        if self.dealer_score >= self.rules.dealer_bust_pays_all_at:
            for seat in self.order:  # bust players included
                if seat not in self.returned:
                    self._settle(seat, 1)

    def _check(self, seat: int) -> None:
        outcome = compare(
            self.classes[seat], self.scores[seat], self.dealer_class, self.dealer_score
        )
        self._settle(seat, outcome)

    def _settle(self, seat: int, outcome: int, pays: tuple[int, int] | None = None) -> None:
        stake = self.stake[seat]
        if outcome > 0:
            amount, result = paid(stake, pays or self.rules.win_pays), WIN
        elif outcome == 0:
            amount, result = stake, PUSH
        else:
            amount, result = 0, LOSS
        self.returned[seat] = amount
        self.results[seat] = result
        self.done.add(seat)
        self.last_settle[self.bet[seat]] = amount

    def _pass_turn(self, seat: int | None) -> None:
        if seat is not None:
            self.done.add(seat)
        self._next_turn()

    def _next_turn(self) -> None:
        self.turn = next((s for s in self.order if s not in self.done), None)

    def _rescore(self, seat: int) -> None:
        rules = self.rules
        cards = self.hands[seat]
        points = score(cards, rules.ace_rule)
        self.scores[seat] = points
        self.classes[seat] = hand_class(cards, points, rules.min_score, rules.xi_dach_tens)

    def _rescore_dealer(self) -> None:
        rules = self.rules
        self.dealer_score = score(self.dealer, rules.ace_rule)
        self.dealer_class = hand_class(
            self.dealer, self.dealer_score, rules.min_score, rules.xi_dach_tens
        )

    # -- what the core stores ------------------------------------------------

    def state(self) -> dict[str, Any]:
        seats: dict[str, Any] = {}
        for seat in self.order:
            cards = self.hands[seat]
            seats[str(seat)] = {
                "bet": self.bet[seat],
                "cards": list(cards),
                "score": self.scores.get(seat),
                "class": self.classes.get(seat),
                "done": seat in self.done,
                "penalised": seat in self.penalised,
                "result": self.results.get(seat),
                "returned": self.returned.get(seat),
            }
        dealt = bool(self.dealer)
        return {
            "phase": self.phase,
            "turn": self.turn,
            "seats": seats,
            "dealer": {
                "cards": list(self.dealer),
                "score": self.dealer_score if dealt else None,
                "class": self.dealer_class if dealt else None,
            },
            "settled": sorted(self.returned),
            "cards_dealt": len(self.used),
        }
