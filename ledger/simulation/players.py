"""Players: a wallet, a usual bet size and a seat; joining, topping up, leaving.

Each player's balance is mirrored here from what the casino's commands
return and pay, so the simulation never asks for a stake the wallet lacks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ledger.casino import Casino
from ledger.simulation import behaviour
from ledger.simulation.request_ids import RequestIds
from ledger.simulation.tally import Tally


@dataclass
class Player:
    name: str
    account_id: str
    unit: int  # the usual stake
    table: str  # the table they sit at
    balance: int
    deposited: int
    top_ups: int = 0


@dataclass
class Cashier:
    """The cage: opens wallets, takes deposits, pays out leavers."""

    casino: Casino
    ids: RequestIds
    tally: Tally
    currency: str
    joined: int = 0

    def join(self, rng: random.Random, unit: int, table: str) -> Player:
        """A new player at `table` who usually bets `unit`: a wallet and a deposit."""
        self.joined += 1
        name = f"player-{self.joined:04d}"
        account_id = self.casino.open_account(
            request_id=self.ids.next("open"), owner=name, currency=self.currency
        )
        amount = behaviour.pick_bankroll(rng, unit)
        balance = self.casino.deposit(
            request_id=self.ids.next("deposit"), account_id=account_id, amount=amount
        )
        self.tally.deposited += amount
        return Player(name, account_id, unit, table, balance, amount)

    def top_up(self, rng: random.Random, player: Player) -> None:
        amount = behaviour.pick_top_up(rng, player.unit)
        player.balance = self.casino.deposit(
            request_id=self.ids.next("top-up"), account_id=player.account_id, amount=amount
        )
        player.deposited += amount
        player.top_ups += 1
        self.tally.top_ups += 1
        self.tally.deposited += amount

    def leave(self, player: Player, reason: str) -> None:
        """Cash out the whole balance and close the wallet."""
        if player.balance:
            self.casino.withdraw(
                request_id=self.ids.next("cash-out"),
                account_id=player.account_id,
                amount=player.balance,
            )
            self.tally.withdrawn += player.balance
            player.balance = 0
        self.casino.close_account(
            request_id=self.ids.next("close"), account_id=player.account_id, reason=reason
        )
        self.tally.players_left += 1
