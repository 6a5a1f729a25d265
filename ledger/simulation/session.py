"""A casino session: tables open, players sit down, rounds are dealt, the draws decide.

Every command goes through the casino's API (ledger.casino), so the session
records exactly what a real floor would: wallets and deposits, bets and
withdrawn bets, faulty draws and what the game's fault policy made of them,
outcomes, settlements and voids, top-ups and players cashing out.

How each game is played is the game's to say (`ledger.games.api.SimulatedPlay`):
a one-draw round is played here (bets, close, one draw that settles them), a
round of turns by `turns`. Rounds are dealt at the tables in turn. Every
choice (who bets what, how much, which draws are faulty) comes from
`random.Random(config.seed)`. Who states the randomness is what
docs/rules.md §1.4 allows, nothing else:
- at an RNG table only the RNG (see `dice_source`): the table commits to a
  seed when it opens and again at every dealer shift, retiring (revealing)
  the old one, and retires its last seed when the session ends, so every
  draw can be recomputed by `ledger verify`; an RNG draw is never faulty;
- at a physical table only its dealer device (see `device`): the dealer
  shakes or deals, and the device reports each draw or faulty draw, signed
  with its own `dealer-device` key. Faulty draws happen only here.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ledger.casino import Casino
from ledger.devices import DealerDevice
from ledger.errors import ConfigError
from ledger.games.api import EXACT_PAYTABLE, Draw, SimulatedPlay
from ledger.games.one_draw import one_draw
from ledger.plugins.families import family_of
from ledger.plugins.paytable import paytable
from ledger.plugins.registry import LoadedGame
from ledger.rng.server import RngServer
from ledger.simulation import behaviour, turns
from ledger.simulation.behaviour import chance
from ledger.simulation.config import SessionConfig, check_config
from ledger.simulation.dice_source import SessionRng
from ledger.simulation.floor import Table
from ledger.simulation.players import Cashier, Player
from ledger.simulation.request_ids import RequestIds
from ledger.simulation.tally import TableTally, Tally

Progress = Callable[[int], None]


@dataclass
class Bet:
    player: Player
    bet: str
    family: str
    stake: int


@dataclass
class Betting:
    """One round's standing bets and what each player has staked in it."""

    round_id: str
    bets: dict[str, Bet] = field(default_factory=dict)
    staked: dict[str, int] = field(default_factory=dict)  # account id -> stake total


@dataclass(frozen=True)
class SessionResult:
    config: SessionConfig
    tally: Tally


class Session:
    def __init__(
        self,
        casino: Casino,
        games: Mapping[str, LoadedGame],
        config: SessionConfig,
        rng: RngServer,
        device: DealerDevice | None = None,
    ) -> None:
        check_config(config, games)
        if device is None and any(spec.physical for spec in config.tables):
            raise ConfigError("physical tables need a dealer device to report their draws")
        self.casino = casino
        self.config = config
        self.rng = rng  # the RNG tables' seeds
        self.device = device
        # The dice the dealers shake and the shoes they shuffle at physical tables.
        self.shaker = rng.shaker() if isinstance(rng, SessionRng) else random.Random()
        self.choices = random.Random(config.seed)
        self.ids = RequestIds()
        self.tally = Tally()
        self.cashier = Cashier(casino, self.ids, self.tally, config.currency)
        self.games = {spec.game: games[spec.game] for spec in config.tables}
        # How each game is played: its own say (checked by `check_config`).
        self.plays: dict[str, SimulatedPlay] = {}
        for game_id, game in self.games.items():
            play = game.simulated_play()
            assert play is not None
            self.plays[game_id] = play
        self.turn_games = {game_id for game_id, play in self.plays.items() if play.seats()}
        # A one-draw game's draw: what the dealer device reports at a physical table.
        self.draws: dict[str, Draw] = {}
        for game_id in self.games.keys() - self.turn_games:
            found = one_draw(self.games[game_id])
            assert found is not None
            self.draws[game_id] = found[2]
        # Each bet's exact theoretical return, as `ledger paytable` prints it.
        self.returns: dict[str, dict[str, Fraction]] = {
            game_id: {line.bet: line.theoretical_return for line in paytable(game)}
            for game_id, game in self.games.items()
            if game_id not in self.turn_games and EXACT_PAYTABLE in game.capabilities
        }
        # The family table's lines: the one-draw games' families, in their order.
        for game_id, game in self.games.items():
            families = game.bet_families()
            if game_id not in self.turn_games and families is not None:
                for family in families.families():
                    self.tally.family(family)
        self.dealers = [f"D{n:02d}" for n in range(1, 2 * len(config.tables) + 1)]
        self.tables: list[Table] = []
        self.players: list[Player] = []

    def run(self, progress: Progress | None = None) -> SessionResult:
        self.open_tables()
        for _ in range(self.config.players):
            self.seat_newcomer()
        self.tally.players_seated = len(self.players)
        for number in range(self.config.rounds):
            table = self.tables[number % len(self.tables)]
            self.play_round(table)
            self.between_rounds(table)
            if progress is not None:
                progress(1)
        for table in self.tables:
            if not table.spec.physical:
                self.retire_seed(table)
        return SessionResult(self.config, self.tally)

    # The floor.
    def open_tables(self) -> None:
        for spec, dealer in zip(self.config.tables, self.dealers, strict=False):
            table_id = self.casino.open_table(
                request_id=self.ids.next("table"),
                name=spec.name,
                game=spec.game,
                kind="physical" if spec.physical else "rng",
                currency=self.config.currency,
                limits=spec.limits,
            )
            table = Table(spec, table_id, dealer)
            self.tables.append(table)
            self.tally.tables[spec.name] = TableTally(spec, turns=spec.game in self.turn_games)
            if not spec.physical:
                self.commit_seed(table)

    def commit_seed(self, table: Table) -> None:
        self.casino.commit_seed(
            request_id=self.ids.next("commit-seed"), table_id=table.table_id, rng=self.rng
        )
        self.tally.seeds_committed += 1

    def retire_seed(self, table: Table) -> None:
        self.casino.retire_seed(
            request_id=self.ids.next("retire-seed"), table_id=table.table_id, rng=self.rng
        )
        self.tally.seeds_revealed += 1

    def seated(self, table: Table) -> list[Player]:
        return [p for p in self.players if p.table == table.spec.name]

    def suitable(self, unit: int) -> list[Table]:
        return [t for t in self.tables if t.spec.limits["min_bet"] <= unit]

    def seat_newcomer(self) -> None:
        """A player whose usual bet suits a table sits at the emptiest such table."""
        unit = behaviour.pick_unit(self.choices)
        tables = self.suitable(unit)
        if not tables:  # every table's minimum is above this bet: play the lowest
            unit = min(t.spec.limits["min_bet"] for t in self.tables)
            tables = self.suitable(unit)
        crowd = {t.spec.name: len(self.seated(t)) for t in tables}
        emptiest = [t for t in tables if crowd[t.spec.name] == min(crowd.values())]
        table = self.choices.choice(emptiest)
        self.players.append(self.cashier.join(self.choices, unit, table.spec.name))

    def between_rounds(self, table: Table) -> None:
        """Players who ran low top up or leave; winners may cash out; some move."""
        for player in self.seated(table):
            if player.balance < player.unit:
                if player.top_ups < behaviour.MAX_TOP_UPS and chance(
                    self.choices, behaviour.TOP_UP_CHANCE
                ):
                    self.cashier.top_up(self.choices, player)
                else:
                    self.depart(player, "ran out of money")
            elif player.balance >= 2 * player.deposited and chance(
                self.choices, behaviour.CASH_OUT_CHANCE
            ):
                self.depart(player, "cashed out")
            elif chance(self.choices, behaviour.MOVE_CHANCE):
                others = [t for t in self.suitable(player.unit) if t is not table]
                if others:
                    player.table = self.choices.choice(others).spec.name

    def depart(self, player: Player, reason: str) -> None:
        self.cashier.leave(player, reason)
        self.players.remove(player)
        if chance(self.choices, behaviour.REPLACE_CHANCE):
            self.seat_newcomer()
            self.tally.players_joined += 1

    # A round.
    def play_round(self, table: Table) -> None:
        if table.dealt and table.dealt % behaviour.DEALER_SHIFT == 0:
            # A new dealer, and a new seed: the last one is revealed.
            dealing = {t.dealer for t in self.tables}
            table.dealer = self.choices.choice([d for d in self.dealers if d not in dealing])
            if not table.spec.physical:
                self.retire_seed(table)
                self.commit_seed(table)
        table.dealt += 1
        tally = self.tally.tables[table.spec.name]
        round_id = self.casino.open_round(
            request_id=self.ids.next("round"), table_id=table.table_id, dealer=table.dealer
        )
        game_id = table.spec.game
        if game_id in self.turn_games:
            turns.play_round(self, table, round_id, self.games[game_id], self.plays[game_id])
            return
        betting = Betting(round_id)
        self.take_bets(table, betting, reopened=False)
        self.close(betting)
        reasons = self.plays[game_id].fault_reasons()
        draws = 0
        while True:
            counter, draws = draws, draws + 1
            # Only a physical draw can go wrong: an RNG draw is never faulty.
            if reasons and table.spec.physical and chance(self.choices, self.config.fault_rate):
                tally.faults += 1
                reason = self.choices.choice(reasons)
                after = self.casino.record_fault(
                    request_id=self.ids.next("fault"),
                    round_id=round_id,
                    reason=reason,
                    source=self.reporter().fault(round_id, counter, reason),
                )
                self.tally.device_reports += 1
                then = after["then"]
                if then == "voided":
                    self.refund(table, betting)
                    return
                if then == "betting reopened":
                    tally.reopened += 1
                    self.take_bets(table, betting, reopened=True)
                    self.close(betting)
                elif then != "throw again":
                    raise RuntimeError(f"unexpected answer to a faulty draw: {after}")
                continue
            self.draw(table, betting, counter)
            self.settle(table, betting)
            return

    def take_bets(self, table: Table, betting: Betting, *, reopened: bool) -> None:
        rng = self.choices
        for player in self.seated(table):
            if reopened:  # after a faulty draw: some take bets back, a few add one
                for bet_id, bet in list(betting.bets.items()):
                    if bet.player is player and chance(rng, behaviour.REOPENED_WITHDRAW_CHANCE):
                        self.withdraw(betting, bet_id)
                count = int(chance(rng, behaviour.REOPENED_BET_CHANCE))
            else:
                count = behaviour.pick_bet_count(rng) if chance(rng, behaviour.PLAY_CHANCE) else 0
            for _ in range(count):
                self.place(table, betting, player)
        if not reopened:  # second thoughts before the dealer closes betting
            for bet_id in list(betting.bets):
                if chance(rng, behaviour.WITHDRAW_CHANCE):
                    self.withdraw(betting, bet_id)

    def place(self, table: Table, betting: Betting, player: Player) -> None:
        game, play = self.games[table.spec.game], self.plays[table.spec.game]
        bet = play.pick_bet(self.choices)
        family = family_of(game, game.validate_bet({"bet": bet}, {}))
        limits = table.spec.limits
        room = limits["max_round"] - betting.staked.get(player.account_id, 0)
        stake = behaviour.pick_stake(
            self.choices, player.unit, play.stake_multipliers(bet), limits, room, player.balance
        )
        if stake is None:
            return
        bet_id = self.casino.place_bet(
            request_id=self.ids.next("bet"),
            round_id=betting.round_id,
            account_id=player.account_id,
            bet={"bet": bet},
            stake=stake,
        )
        player.balance -= stake
        betting.staked[player.account_id] = betting.staked.get(player.account_id, 0) + stake
        betting.bets[bet_id] = Bet(player, bet, family, stake)
        self.tally.bets_placed += 1

    def withdraw(self, betting: Betting, bet_id: str) -> None:
        bet = betting.bets.pop(bet_id)
        self.casino.withdraw_bet(
            request_id=self.ids.next("withdraw-bet"),
            round_id=betting.round_id,
            account_id=bet.player.account_id,
            bet_id=bet_id,
        )
        bet.player.balance += bet.stake
        betting.staked[bet.player.account_id] -= bet.stake
        self.tally.bets_withdrawn += 1

    def close(self, betting: Betting) -> None:
        self.casino.close_betting(request_id=self.ids.next("close"), round_id=betting.round_id)

    def reporter(self) -> DealerDevice:
        assert self.device is not None  # checked when the session was set up
        return self.device

    def draw(self, table: Table, betting: Betting, counter: int) -> None:
        """The round's good draw: from its committed seed, or shaken and reported."""
        if not table.spec.physical:
            self.casino.throw_dice(
                request_id=self.ids.next("throw"), round_id=betting.round_id, rng=self.rng
            )
            return
        draw = self.draws[table.spec.game]  # dice (`check_config`)
        faces = self.games[table.spec.game].draw_range(draw["kind"])  # as the game declares
        shaken = [self.shaker.randint(faces["low"], faces["high"]) for _ in range(draw["count"])]
        outcome: dict[str, Any] = {draw["kind"]: shaken}
        self.casino.record_outcome(
            request_id=self.ids.next("throw"),
            round_id=betting.round_id,
            outcome=outcome,
            source=self.reporter().throw(betting.round_id, counter, outcome),
        )
        self.tally.device_reports += 1

    def settle(self, table: Table, betting: Betting) -> None:
        """Pay what the draw settled (the game's draw settled the round itself)."""
        results = self.casino.round(betting.round_id).results
        returns = self.returns.get(table.spec.game, {})
        for result in results:
            bet = betting.bets[result["bet_id"]]
            if result["stake"] != bet.stake:
                raise RuntimeError(f"bet {result['bet_id']} settled on {result['stake']}")
            bet.player.balance += result["returned"]
            self.tally.settled(
                table.spec.name, bet.family, bet.stake, result["returned"], returns.get(bet.bet)
            )
        if len(results) != len(betting.bets):
            raise RuntimeError(f"round {betting.round_id} settled {len(results)} bets")
        self.tally.tables[table.spec.name].rounds_settled += 1

    def refund(self, table: Table, betting: Betting) -> None:
        """A voided round: every standing stake went back to its wallet."""
        for bet in betting.bets.values():
            bet.player.balance += bet.stake
            self.tally.voided(table.spec.name, bet.stake)
        self.tally.tables[table.spec.name].rounds_voided += 1


def run_session(
    casino: Casino,
    games: Mapping[str, LoadedGame],
    config: SessionConfig,
    rng: RngServer,
    progress: Progress | None = None,
    device: DealerDevice | None = None,
) -> SessionResult:
    return Session(casino, games, config, rng, device).run(progress)
