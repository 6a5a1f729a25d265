"""A game's paytable with each bet's exact theoretical return, for games that
offer the ``exact-paytable`` capability.

Computed by replaying each of the game's equally likely action sequences
through its own `step`, so what is printed is what the game actually pays,
not a second table that could disagree with it. A game without the
capability (a card game: its return depends on decisions) is refused plainly.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ledger.errors import PluginError
from ledger.games.api import BetView
from ledger.plugins.registry import LoadedGame


@dataclass(frozen=True)
class PaytableLine:
    bet: str
    pays: str
    theoretical_return: Fraction


# Computed paytables by what determines them: the game's class and code and its
# rules. Replaying every outcome of every bet costs about 0.25 s a game, and a
# server, a report or a simulation asks for the same table again and again.
_KNOWN: dict[tuple[object, ...], list[PaytableLine]] = {}


def paytable(game: LoadedGame) -> list[PaytableLine]:
    key = (type(game.game), game.id, game.plugin, game.version, game.rules_hash, game.code_hash)
    known = _KNOWN.get(key) if game.code_hash else None  # no file to hash: not cached
    if known is None:
        known = _replayed(game)
        if game.code_hash:
            _KNOWN[key] = known
    return list(known)


def _replayed(game: LoadedGame) -> list[PaytableLine]:
    exact = game.exact_paytable()  # InvalidCommandError, said plainly, without it
    outcomes = exact.equally_likely()
    if not outcomes:
        raise PluginError(game.plugin, game.version, "equally_likely returned no outcome")
    lines = []
    stake = 1
    for sample in exact.sample_bets():
        bet = game.validate_bet(sample, {})
        bets: dict[str, BetView] = {"b": {"account_id": "-", "bet": bet, "stake": stake}}
        back = 0
        for actions in outcomes:
            step = game.step(bets, list(actions))
            if "b" not in step["settle"]:
                raise PluginError(
                    game.plugin, game.version, "an equally likely outcome leaves a bet unsettled"
                )
            back += step["settle"]["b"]
        label = str(sample.get("bet", bet))
        lines.append(PaytableLine(label, exact.pays(bet), Fraction(back, stake * len(outcomes))))
    return lines
