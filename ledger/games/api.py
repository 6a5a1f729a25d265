"""The games contract, settlement API 2: a game is a pure function over recorded actions.

A round is bets plus a sequence of recorded actions. Given the bets standing
now and every action recorded so far (each with the randomness it consumed),
a game returns a `Step`: its state (plain JSON, stored with the action), who
may do what next and what randomness each move consumes, which bets the last
action settles and what each returns, whether the rules void the round, and
whether it is over. The core keeps money (postings), sequencing (a command is
legal only if the last step offers it), randomness (commit, draw, reveal) and
signatures; the game decides nothing but rules.

Everything crossing this seam is plain JSON-safe data: stored events never
point into plugin code. Dice are a one-step game (the throw settles every
bet); a card game deals, takes turns, and settles bets a few at a time.

Vocabulary the core relies on:

- An *actor* is a string: ``dealer``, ``device`` (a physical table's dealer
  device), ``seat:N`` (the player at seat N), or another name the game uses.
- An *action* is a string the game chooses (``close_betting``, ``throw``,
  ``fault``, ``deal``, ``hit``, ``stand``, ``draw``, ``check:3``, ``stop``).
  The core knows no action by name: the game declares the two it treats
  apart. `Game.close_action` closes betting (the move the core's
  close-betting alias and `ledger simulate` take). `Game.fault_action`, if
  not None, is a physical device's draw that could not be used (cocked dice,
  a misdeal), with ``args["reason"]``; the core refuses it on an RNG table
  (an RNG draw is never faulty, RULES §1.4).
- *Who attests* an action is the core's business, not the game's: at a
  physical table every action comes in a dealer device's signed report (or,
  later, a player's authenticated session); at an RNG table the core draws
  the randomness from the round's committed seed and records the rest as the
  node's own command.
- *Randomness* is dice or cards, each kind the game consumes declared in
  `Game.draws` with its value range (`DrawRange`): dice ``low`` 1 to
  ``high`` = the number of faces (6 for the shipped games), cards always
  ``low`` 0 to ``high`` 51, the core's deck. A card is an int 0..51:
  ``rank = card // 4 + 1`` (1 ace, 2..10, 11 jack, 12 queen, 13 king) and
  ``suit = card % 4`` (0 clubs, 1 diamonds, 2 hearts, 3 spades). One fresh
  deck per round; the core never deals a card twice from it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, Protocol, TypedDict, runtime_checkable

#: The contract version a game declares and every round records: re-settling
#: needs a game that declares the same version and the same rules hash.
SETTLEMENT_API: Final = 2

DECK_SIZE: Final = 52


class DrawRange(TypedDict):
    """The values one kind of randomness takes, both ends included."""

    low: int
    high: int


#: The one card range the core deals from: its 52-card deck.
CARDS: Final[DrawRange] = {"low": 0, "high": DECK_SIZE - 1}


class Draw(TypedDict):
    """Randomness a move consumes: the core draws it (RNG) or a device reports it."""

    kind: Literal["dice", "cards"]
    count: int


class RecordedAction(TypedDict):
    """One action as the core recorded it (what the game sees on replay)."""

    actor: str
    action: str
    args: dict[str, Any]  # as the game's `validate_args` returned them
    drawn: list[int]  # dice faces, or cards; empty when the move draws nothing


class BetView(TypedDict):
    """A bet standing in the round (placed, not withdrawn, not yet settled or not)."""

    account_id: str
    bet: dict[str, Any]  # as the game's `validate_bet` returned it
    stake: int  # minor units


class Step(TypedDict):
    """What the game says after the actions so far."""

    state: dict[str, Any]  # plain JSON the game derives (hands, scores, whose turn)
    betting: bool  # bets may be placed and withdrawn now
    moves: dict[str, dict[str, Draw | None]]  # actor -> action -> randomness it consumes
    settle: dict[
        str, int
    ]  # bet id -> amount returned (0, the stake, stake + win), by the last action
    void: str | None  # the rules void the round, and why: every unsettled stake goes back
    over: bool  # every bet is settled or voided: no move is offered
    flags: list[str]  # notes for review recorded with the action (e.g. a penalised hand)


class Game(Protocol):
    """What a game plugin provides for each profile it registers."""

    #: Stable id recorded on every round (e.g. ``taixiu``, ``xidach``).
    id: str
    #: The rules profile as data (paytable and every option); the core hashes it.
    rules: Mapping[str, Any]
    #: The bet catalogue, for listings (the kinds of bet a player may place).
    bets: Sequence[str]
    #: The contract version this game implements (`SETTLEMENT_API`).
    settlement_api: int
    #: Optional capabilities the game declares, e.g. ``{"exact-paytable"}``.
    capabilities: frozenset[str]
    #: The action that closes betting, offered by the game's first step
    #: (e.g. ``close_betting``).
    close_action: str
    #: The action by which a physical table's dealer device reports a draw it
    #: could not use (``args["reason"]``), or None if the game has none.
    fault_action: str | None
    #: Each kind of randomness the game's moves consume (``dice``, ``cards``)
    #: with its values: ``{"dice": {"low": 1, "high": 6}}``; empty if none.
    draws: Mapping[str, DrawRange]

    def validate_bet(self, bet: Mapping[str, Any], placed: Mapping[str, BetView]) -> dict[str, Any]:
        """The bet in canonical form given the bets already placed, or raise
        InvalidCommandError (the game's own refusal: nothing is recorded).

        `placed` is a read-only view of the round's bets, not a copy: a game
        reads only what it needs (most need none), so a bet's check costs the
        same however many bets the round holds."""
        ...

    def validate_args(self, actor: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """An action's arguments in canonical form (e.g. a fault's reason), or raise
        InvalidCommandError."""
        ...

    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
        """Pure and deterministic: the step after `actions` (empty: betting just
        opened), with `bets` the bets standing when the last action was taken."""
        ...


EXACT_PAYTABLE: Final = "exact-paytable"


class Stepping(Protocol):
    """What replaying a round needs of a game: its step and the two actions it
    declares (a stored round's own close and fault entries stand for them). The
    core passes the plugin's game guarded (`ledger.plugins.registry.LoadedGame`),
    whose step is checked for shape; this layer only names what it calls."""

    @property
    def close_action(self) -> str: ...

    @property
    def fault_action(self) -> str | None: ...

    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step: ...


@runtime_checkable
class ExactPaytable(Protocol):
    """Capability ``exact-paytable``: a game whose outcomes, once betting closes,
    are finitely many equally likely action sequences (dice, not decisions)."""

    def sample_bets(self) -> Sequence[dict[str, Any]]:
        """One canonical bet per line of the paytable."""
        ...

    def pays(self, bet: Mapping[str, Any]) -> str:
        """What the bet pays, for people (e.g. ``"1:1"``, ``"1:1 / 2:1 / 3:1"``)."""
        ...

    def equally_likely(self) -> Sequence[Sequence[RecordedAction]]:
        """Every way the round can go after betting closes, each equally likely,
        as the actions the core would record (e.g. 216 draws of three dice)."""
        ...


BET_FAMILIES: Final = "bet-families"


@runtime_checkable
class BetFamilies(Protocol):
    """Capability ``bet-families``: the game sorts its bets into families, so the
    report gives a return per family and `ledger simulate` a line per family.
    Without it a bet's family is its label's kind (``seat`` of ``seat:2``)."""

    def families(self) -> Mapping[str, Sequence[str]]:
        """Each family's name, in the order people read them, with its catalogue
        bets: every bet of the catalogue in exactly one family."""
        ...

    def family_of(self, bet: Mapping[str, Any]) -> str:
        """The family of a bet in canonical form (as `validate_bet` returned it)."""
        ...


SIMULATED_PLAY: Final = "simulated-play"


class SimulatedRound(Protocol):
    """One round as the game's simulated dealer and players play it: the game's
    own replica of the round, so choosing a move needs no replay."""

    def next_move(self) -> tuple[str, str, Draw | None] | None:
        """The move its strategies choose next (actor, action, the randomness it
        draws), or None when the round is over."""
        ...

    def apply(self, actor: str, action: str, drawn: Sequence[int]) -> None:
        """The move as the core recorded it, with what it drew."""
        ...


@runtime_checkable
class SimulatedPlay(Protocol):
    """Capability ``simulated-play``: how `ledger simulate`'s players play the game.

    A round is played in one of two shapes, as the game says (`seats`):

    - one draw (`seats` 0): each player places bets it picks (`pick_bet`), the
      dealer closes betting, then one move draws dice and settles every bet; at
      an RNG table the core draws them from the table's committed seed, at a
      physical table the dealer device reports them, or first a faulty draw
      (`fault_reasons`), and the game's step says what follows (draw again,
      betting reopened, the round voided).
    - turns (`seats` N > 0): up to N players play, each on the next catalogue
      bet in catalogue order (a seat); then the game's own strategies choose
      every move (`simulated_round`, `SimulatedRound.next_move`) and the core
      records it, drawing its randomness (RNG) or taking it from the dealer
      device's report (a physical table).
    """

    def seats(self) -> int:
        """How many players a round of turns seats; 0: the round is one draw."""
        ...

    def pick_bet(self, rng: random.Random) -> str:
        """A catalogue bet a player picks (one-draw rounds), chosen with `rng` only."""
        ...

    def stake_multipliers(self, bet: str) -> Sequence[int]:
        """What a stake on this catalogue bet is: the player's usual bet times one
        of these, each equally likely (repeat one to make it likelier)."""
        ...

    def fault_reasons(self) -> Sequence[str]:
        """What a dealer device says of a faulty draw (one-draw rounds); empty if
        the game has no faulty draw."""
        ...

    def simulated_round(self, bets: Mapping[str, BetView]) -> SimulatedRound | None:
        """A round of turns over the bets placed, played by the game's strategies
        (None for a one-draw game: the core plays it)."""
        ...
