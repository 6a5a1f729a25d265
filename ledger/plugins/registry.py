"""Games as the core sees them: each wrapped once, at load, in a `LoadedGame`
that knows its provenance (plugin, distribution version, rules hash, code
hash) and turns any exception or malformed result from the plugin into one
`PluginError` naming the plugin and version, except the game's own refusal
of a bad command (`InvalidCommandError`)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from rfc8785 import CanonicalizationError

from ledger.crypto.canonical import canonical, json_problem
from ledger.error_codes import CODES
from ledger.errors import InvalidCommandError, LedgerError, PluginError
from ledger.games.api import (
    BET_FAMILIES,
    EXACT_PAYTABLE,
    SETTLEMENT_API,
    SIMULATED_PLAY,
    BetFamilies,
    BetView,
    Draw,
    DrawRange,
    ExactPaytable,
    Game,
    RecordedAction,
    SimulatedPlay,
    SimulatedRound,
    Step,
)
from ledger.plugins.declarations import declaration_problem, move_problem

#: Settlement APIs this core can run (1 is read from old stores only, translated).
SUPPORTED_SETTLEMENT_APIS = frozenset({SETTLEMENT_API})
#: Capabilities the core knows, each with the protocol a game must implement.
CAPABILITIES: Mapping[str, type] = {
    EXACT_PAYTABLE: ExactPaytable,
    BET_FAMILIES: BetFamilies,
    SIMULATED_PLAY: SimulatedPlay,
}

T = TypeVar("T")


def rules_hash(rules: Mapping[str, Any]) -> str:
    """SHA-256 of the rules profile's canonical bytes: what a round pins."""
    return hashlib.sha256(canonical(dict(rules))).hexdigest()


@dataclass(frozen=True)
class LoadedGame:
    """A plugin's game with its provenance, guarded at every call."""

    game: Game
    plugin: str
    version: str  # the plugin distribution's version (information: rounds pin rules)
    rules_hash: str
    code_hash: str  # SHA-256 over the plugin package's files (information)
    settlement_api: int
    capabilities: frozenset[str]

    @property
    def id(self) -> str:
        return self.game.id

    @property
    def rules(self) -> Mapping[str, Any]:
        return self.game.rules

    @property
    def bets(self) -> Sequence[str]:
        return self.game.bets

    # The declarations the core reads instead of knowing names (checked at load:
    # `declarations.checked`).
    @property
    def close_action(self) -> str:
        return self.game.close_action

    @property
    def fault_action(self) -> str | None:
        return self.game.fault_action

    @property
    def draws(self) -> Mapping[str, DrawRange]:
        return self.game.draws

    def draw_range(self, kind: str) -> DrawRange:
        """The values of one kind the game declares (its moves consume no other)."""
        return self.game.draws[kind]

    def _fail(self, message: str) -> PluginError:
        return PluginError(self.plugin, self.version, message)

    def _call(self, what: str, call: Callable[..., T], *args: Any) -> T:
        try:
            return call(*args)
        except InvalidCommandError as exc:
            if exc.code not in CODES:  # a program reads only the catalogue's codes
                exc.code = "invalid_command"
            raise  # the game refusing bad input is not the plugin failing
        except LedgerError:
            raise
        except Exception as exc:
            raise self._fail(f"{what} raised {type(exc).__name__}: {exc}") from exc

    def _json_safe(self, what: str, value: Any) -> None:
        problem = json_problem(value)
        if problem is not None:
            raise self._fail(f"{what} returned data that is not plain JSON: {problem}")

    def validate_bet(
        self, bet: Mapping[str, Any], placed: Mapping[str, BetView] | None = None
    ) -> dict[str, Any]:
        if not isinstance(bet, Mapping):
            raise InvalidCommandError(
                f"a bet is an object, not {bet!r}", code="invalid_bet", param="bet"
            )
        # The bets placed, read-only and not copied: a bet's check costs the same
        # whatever the round holds (a game reads what it needs of them, if anything).
        view = (
            placed if isinstance(placed, MappingProxyType) else MappingProxyType(dict(placed or {}))
        )
        result = self._call("validate_bet", self.game.validate_bet, bet, view)
        if not isinstance(result, dict):
            raise self._fail(f"validate_bet returned {type(result).__name__}, not a dict")
        self._json_safe("validate_bet", result)
        return result

    def validate_args(self, actor: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(args, Mapping):
            raise InvalidCommandError(
                f"an action's arguments are an object, not {args!r}",
                code="invalid_action_args",
                param="args",
            )
        result = self._call("validate_args", self.game.validate_args, actor, action, args)
        if not isinstance(result, dict):
            raise self._fail(f"validate_args returned {type(result).__name__}, not a dict")
        self._json_safe("validate_args", result)
        return result

    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
        """The game's step, checked for shape: a malformed step is the plugin failing."""
        result = self._call("step", self.game.step, bets, actions)
        self._check_step(result, bets)
        return result

    def _check_step(self, step: Any, bets: Mapping[str, BetView]) -> None:
        if not isinstance(step, dict):
            raise self._fail(f"step returned {type(step).__name__}, not a Step")
        missing = {"state", "betting", "moves", "settle", "void", "over", "flags"} - set(step)
        if missing:
            raise self._fail(f"step returned no {', '.join(sorted(missing))}")
        self._json_safe("step", step)
        if not isinstance(step["state"], dict) or not isinstance(step["flags"], list):
            raise self._fail("step's state must be an object and its flags a list")
        if type(step["betting"]) is not bool or type(step["over"]) is not bool:
            raise self._fail("step's betting and over must be booleans")
        if step["void"] is not None and not (isinstance(step["void"], str) and step["void"]):
            raise self._fail("step's void must be null or a reason")
        moves = step["moves"]
        if not isinstance(moves, dict) or not all(
            isinstance(offered, dict) and all(_is_draw(d) for d in offered.values())
            for offered in moves.values()
        ):
            raise self._fail("step's moves must map actor -> action -> null or a Draw")
        problem = move_problem(self.game, moves)
        if problem is not None:
            raise self._fail(f"step {problem}")
        if step["over"] and any(moves.values()):
            raise self._fail("step is over but still offers moves")
        settle = step["settle"]
        if not isinstance(settle, dict) or not set(settle) <= set(bets):
            raise self._fail("step settles a bet that is not standing")
        for bet_id, returned in settle.items():
            if type(returned) is not int or returned < 0:
                raise self._fail(f"step returns {returned!r} for bet {bet_id}: not an int >= 0")

    # Capability "exact-paytable".
    def exact_paytable(self) -> ExactPaytable:
        """The game's exact paytable, or say plainly that it offers none."""
        if EXACT_PAYTABLE not in self.capabilities:
            raise InvalidCommandError(
                f"game {self.id} offers no exact paytable: its return depends on how it "
                "is played; estimate it by simulation (`tools/xidach_edge.py` for Xì dách, "
                "whose file `ledger report --edge FILE` compares the observed return with)",
                code="no_paytable",
            )
        game: Any = self.game  # declared and checked at load (`GameRegistry.add`)
        return _GuardedPaytable(self, game)

    # Capability "bet-families".
    def bet_families(self) -> BetFamilies | None:
        """The game's bet families, or None when it declares none."""
        if BET_FAMILIES not in self.capabilities:
            return None
        game: Any = self.game
        return _GuardedFamilies(self, game)

    # Capability "simulated-play".
    def simulated_play(self) -> SimulatedPlay | None:
        """How `ledger simulate` plays the game, or None when it does not say."""
        if SIMULATED_PLAY not in self.capabilities:
            return None
        game: Any = self.game
        return _GuardedPlay(self, game)


class _GuardedPaytable:
    """`ExactPaytable` calls, guarded like every other plugin call."""

    def __init__(self, loaded: LoadedGame, game: ExactPaytable) -> None:
        self._loaded, self._game = loaded, game

    def sample_bets(self) -> Sequence[dict[str, Any]]:
        return list(self._loaded._call("sample_bets", self._game.sample_bets))

    def pays(self, bet: Mapping[str, Any]) -> str:
        return str(self._loaded._call("pays", self._game.pays, bet))

    def equally_likely(self) -> Sequence[Sequence[RecordedAction]]:
        return list(self._loaded._call("equally_likely", self._game.equally_likely))


class _GuardedFamilies:
    """`BetFamilies` calls, guarded and checked for shape."""

    def __init__(self, loaded: LoadedGame, game: BetFamilies) -> None:
        self._loaded, self._game = loaded, game

    def families(self) -> Mapping[str, Sequence[str]]:
        found = self._loaded._call("families", self._game.families)
        if not isinstance(found, Mapping) or not all(
            isinstance(name, str) and all(isinstance(b, str) for b in bets)
            for name, bets in found.items()
        ):
            raise self._loaded._fail("families must map family names to catalogue bets")
        return {str(name): tuple(bets) for name, bets in found.items()}

    def family_of(self, bet: Mapping[str, Any]) -> str:
        family = self._loaded._call("family_of", self._game.family_of, bet)
        if not isinstance(family, str) or not family:
            raise self._loaded._fail(f"family_of returned {family!r}, not a family name")
        return family


class _GuardedPlay:
    """`SimulatedPlay` calls, guarded and checked for shape."""

    def __init__(self, loaded: LoadedGame, game: SimulatedPlay) -> None:
        self._loaded, self._game = loaded, game

    def seats(self) -> int:
        seats = self._loaded._call("seats", self._game.seats)
        if type(seats) is not int or seats < 0:
            raise self._loaded._fail(f"seats returned {seats!r}, not an int >= 0")
        return seats

    def pick_bet(self, rng: random.Random) -> str:
        bet = self._loaded._call("pick_bet", self._game.pick_bet, rng)
        if bet not in self._loaded.bets:
            raise self._loaded._fail(f"pick_bet picked {bet!r}, not a catalogue bet")
        return str(bet)

    def stake_multipliers(self, bet: str) -> Sequence[int]:
        found = tuple(self._loaded._call("stake_multipliers", self._game.stake_multipliers, bet))
        if not found or not all(type(m) is int and m > 0 for m in found):
            raise self._loaded._fail(f"stake_multipliers of {bet!r} are not positive ints")
        return found

    def fault_reasons(self) -> Sequence[str]:
        found = tuple(self._loaded._call("fault_reasons", self._game.fault_reasons))
        if not all(isinstance(reason, str) and reason.strip() for reason in found):
            raise self._loaded._fail("fault_reasons must be non-empty strings")
        if found and self._loaded.fault_action is None:
            raise self._loaded._fail(
                "fault_reasons gives reasons, but the game has no fault_action"
            )
        return found

    def simulated_round(self, bets: Mapping[str, BetView]) -> SimulatedRound | None:
        found = self._loaded._call("simulated_round", self._game.simulated_round, bets)
        return None if found is None else _GuardedRound(self._loaded, found)


class _GuardedRound:
    """A `SimulatedRound`, its moves checked against the shape of a Draw."""

    def __init__(self, loaded: LoadedGame, played: SimulatedRound) -> None:
        self._loaded, self._played = loaded, played

    def next_move(self) -> tuple[str, str, Draw | None] | None:
        move = self._loaded._call("next_move", self._played.next_move)
        if move is None:
            return None
        if not (
            isinstance(move, tuple)
            and len(move) == 3
            and isinstance(move[0], str)
            and isinstance(move[1], str)
            and _is_draw(move[2])
        ):
            raise self._loaded._fail(f"next_move returned {move!r}, not (actor, action, draw)")
        return move

    def apply(self, actor: str, action: str, drawn: Sequence[int]) -> None:
        self._loaded._call("apply", self._played.apply, actor, action, drawn)


def _moves_text(moves: Mapping[str, Mapping[str, Any]]) -> str:
    found = [f"{actor} may {action}" for actor, offered in moves.items() for action in offered]
    return "; ".join(found) or "no move"


def _is_draw(value: Any) -> bool:
    if value is None:
        return True
    draw: Draw = value
    return (
        isinstance(value, dict)
        and draw.get("kind") in ("dice", "cards")
        and type(draw.get("count")) is int
        and draw["count"] > 0
    )


@dataclass
class GameRegistry:
    """Handed to ``ledger_register_games``; collects one plugin's games."""

    plugin: str = "?"
    version: str = "?"
    code_hash: str = ""
    games: dict[str, LoadedGame] = field(default_factory=dict)

    def _fail(self, message: str) -> PluginError:
        return PluginError(self.plugin, self.version, message)

    def add(self, game: Game) -> None:
        """Check the game's declarations and keep it, guarded."""
        try:
            game_id = game.id
            rules = game.rules
            catalogue = list(game.bets)
            api = game.settlement_api
            capabilities = frozenset(game.capabilities)
        except Exception as exc:
            raise self._fail(f"invalid game: {type(exc).__name__}: {exc}") from exc
        if not isinstance(game_id, str) or not game_id or game_id.strip() != game_id:
            raise self._fail("a game needs a non-empty string id")
        problem = declaration_problem(game)
        if problem is not None:
            raise self._fail(f"game {game_id} {problem}")
        try:
            profile = rules_hash(rules)
        except (CanonicalizationError, TypeError, ValueError) as exc:
            raise self._fail(f"game {game_id}: its rules are not plain JSON: {exc}") from exc
        if not catalogue or not all(isinstance(b, str) for b in catalogue):
            raise self._fail(f"game {game_id} has no bet catalogue")
        if api not in SUPPORTED_SETTLEMENT_APIS:
            raise self._fail(
                f"game {game_id} declares settlement API {api!r}; this ledger runs "
                f"{', '.join(map(str, sorted(SUPPORTED_SETTLEMENT_APIS)))}"
            )
        for capability in capabilities:
            protocol = CAPABILITIES.get(capability)
            if protocol is None:
                raise self._fail(f"game {game_id} declares unknown capability {capability!r}")
            if not isinstance(game, protocol):
                raise self._fail(
                    f"game {game_id} declares {capability!r} but does not implement it"
                )
        if game_id in self.games:
            other = self.games[game_id]
            raise self._fail(
                f"game {game_id} is already provided by {other.plugin} {other.version}"
            )
        loaded = LoadedGame(
            game, self.plugin, self.version, profile, self.code_hash, api, capabilities
        )
        first = loaded.step({}, [])  # checked for shape, and its moves against the draws
        if not any(game.close_action in offered for offered in first["moves"].values()):
            raise self._fail(
                f"game {game_id} declares close_action {game.close_action!r} but its first "
                f"step does not offer it ({_moves_text(first['moves'])})"
            )
        self.games[game_id] = loaded
