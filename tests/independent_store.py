"""A store holding every kind of event the ledger writes, for the independent
verifier (`tests/export/test_export_independent.py`), which runs this as a separate
program, as it runs `ledger`: it never imports this module (nor anything of
the ledger's), it only reads the bundle `ledger export` makes of the store.

    python tests/independent_store.py STORE_URL KEYS_DIR   (LEDGER_PASSPHRASE set)

On top of a `ledger simulate` session (RNG and physical dice and card tables,
faulty throws): a wallet emptied and closed, and scripted rounds at physical
tables whose dealer device reports exactly the cards and dice chosen here. An
operator's void, a resume, a correction of a throw and of a drawn card, both
fault policies (betting reopened, the round voided), rounds with no bet, and
Xì dách hands that meet every rule: naturals (paid at the deal, and against a
dealer's natural), ngũ linh (against the dealer's too), aces by hand size, a
hit while bust (penalised), checks, the dealer's 28 rule, a misdeal after a
natural was paid, 3:2 on an odd stake under `xidach-house`. Then a
checkpoint, a key revocation (the dealer device key these rounds used), a
dealer's personal data erased, the installed games' rules recorded in the
rules register (`ledger games check`), a recorded verification run signed by an
auditor key, the node's own scheduled self-verification run, and a last
checkpoint.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from reproducible import reproducible_session  # beside this program

from ledger.audit.self_verification import SelfVerifier
from ledger.casino import Casino
from ledger.cli.main import main
from ledger.crypto.keys import Role
from ledger.devices import DealerDevice
from ledger.node import Node, open_node
from ledger.plugins.manager import get_plugin_manager

LIMITS: Any = {"min_bet": 100, "max_bet": 100_000, "max_round": 200_000}
DEVICE = "dealer-device-2"
OPERATOR = "operator-1"
AUDITOR = "auditor-1"


def card(rank: int, suit: int = 0) -> int:
    """rank 1 (ace) .. 13 (king), suit 0..3: the card's number 0..51."""
    return (rank - 1) * 4 + suit


class Script:
    """Rounds played at physical tables, every report signed by one dealer device."""

    def __init__(self, node: Node, casino: Casino, device: DealerDevice, passphrase: bytes):
        self.node, self.casino, self.device = node, casino, device
        self.operator = node.keys.signer(Role.OPERATOR, passphrase, OPERATOR)
        self.ids = (f"script-{n}" for n in itertools.count())
        self.players = [self._player(n) for n in range(1, 5)]
        # A player who leaves: the wallet emptied to the cashier, then closed.
        leaving = self._player(5)
        casino.withdraw(request_id=next(self.ids), account_id=leaving, amount=1_000_000)
        casino.close_account(request_id=next(self.ids), account_id=leaving, reason="moved away")

    def _player(self, number: int) -> str:
        account = self.casino.open_account(
            request_id=next(self.ids), owner=f"scripted player {number}", currency="VND"
        )
        self.casino.deposit(request_id=next(self.ids), account_id=account, amount=1_000_000)
        return account

    def table(self, name: str, game: str) -> str:
        return self.casino.open_table(
            request_id=next(self.ids),
            name=name,
            game=game,
            kind="physical",
            currency="VND",
            limits=LIMITS,
        )

    def round(
        self, table: str, bets: list[tuple[int, dict[str, Any], int]]
    ) -> tuple[str, list[str]]:
        round_id = self.casino.open_round(request_id=next(self.ids), table_id=table, dealer="D9")
        placed = [
            self.casino.place_bet(
                request_id=next(self.ids),
                round_id=round_id,
                account_id=self.players[player],
                bet=bet,
                stake=stake,
            )
            for player, bet, stake in bets
        ]
        return round_id, placed

    def act(self, round_id: str, actor: str, action: str, drawn: list[int] | None = None) -> Any:
        """A move: the node's command while betting is open and nothing is drawn,
        else the device's signed report of it."""
        step = self.casino.round(round_id).actions
        args = {"reason": "a card was exposed in the deal"} if action == "fault" else {}
        source = self.device.act(round_id, step, actor, action, args, list(drawn or []))
        return self.casino.act(
            request_id=next(self.ids),
            round_id=round_id,
            actor=actor,
            action=action,
            args=args,
            source=source,
        )

    def close(self, round_id: str) -> None:
        self.casino.close_betting(request_id=next(self.ids), round_id=round_id)

    def throw(self, round_id: str, dice: list[int]) -> None:
        counter = self.casino.round(round_id).draws
        self.casino.record_outcome(
            request_id=next(self.ids),
            round_id=round_id,
            outcome={"dice": dice},
            source=self.device.throw(round_id, counter, {"dice": dice}),
        )

    def fault(self, round_id: str, reason: str) -> dict[str, Any]:
        counter = self.casino.round(round_id).draws
        return self.casino.record_fault(
            request_id=next(self.ids),
            round_id=round_id,
            reason=reason,
            source=self.device.fault(round_id, counter, reason),
        )

    def void(self, round_id: str, reason: str) -> None:
        self.casino.void_round(
            request_id=next(self.ids), round_id=round_id, reason=reason, operator=self.operator
        )

    def resume(self, round_id: str, reason: str) -> None:
        self.casino.resume_round(
            request_id=next(self.ids), round_id=round_id, reason=reason, operator=self.operator
        )


def dice_rounds(script: Script) -> None:
    casino = script.casino
    taixiu = script.table("TX-P", "taixiu")
    sicbo = script.table("SB-P", "sicbo-void")
    big, small = {"bet": "big"}, {"bet": "small"}
    # An operator voids a round whose betting closed, before any throw.
    voided, _ = script.round(taixiu, [(0, big, 1_000), (1, small, 2_000)])
    script.close(voided)
    script.void(voided, "the shaker jammed before the throw")
    # Interrupted, resumed by an operator, then thrown.
    resumed, _ = script.round(taixiu, [(0, {"bet": "single:4"}, 1_000), (1, big, 500)])
    script.close(resumed)
    script.resume(resumed, "power came back")
    script.throw(resumed, [4, 4, 2])
    # A throw the device misread, corrected by an operator (its last action).
    corrected, _ = script.round(
        taixiu, [(0, {"bet": "total:10"}, 1_000), (2, {"bet": "specific_double:3"}, 700)]
    )
    script.close(corrected)
    script.throw(corrected, [1, 2, 3])
    casino.correct(
        request_id=next(script.ids),
        round_id=corrected,
        outcome={"dice": [3, 3, 4]},
        reason="the camera misread the first die",
        operator=script.operator,
    )
    # taixiu: a faulty throw, bets locked, the re-throw faulty too: void.
    twice, _ = script.round(taixiu, [(0, big, 1_000), (3, {"bet": "any_triple"}, 300)])
    script.close(twice)
    script.fault(twice, "a die cocked against the rim")
    script.fault(twice, "the dice did not bounce")
    # sicbo-void: a faulty throw reopens betting; a bet taken back, another placed.
    reopened, bets = script.round(sicbo, [(0, big, 1_000), (1, {"bet": "combination:2-5"}, 400)])
    script.close(reopened)
    script.fault(reopened, "stacked dice")
    casino.withdraw_bet(
        request_id=next(script.ids),
        round_id=reopened,
        account_id=script.players[0],
        bet_id=bets[0],
    )
    casino.place_bet(
        request_id=next(script.ids),
        round_id=reopened,
        account_id=script.players[2],
        bet={"bet": "total:9"},
        stake=900,
    )
    script.close(reopened)
    script.throw(reopened, [2, 5, 2])
    # No bets at all: the throw still ends the round, with an empty settlement.
    empty, _ = script.round(taixiu, [])
    script.close(empty)
    script.throw(empty, [6, 6, 6])


def card_rounds(script: Script) -> None:
    casino = script.casino
    table = script.table("XD-P", "xidach")
    house = script.table("XD-H", "xidach-house")
    seat = [{"seat": n} for n in range(0, 6)]  # seat[n] is a bet on seat n
    A, J, Q, K = 1, 11, 12, 13
    # The dealer draws to 28: every seat not settled is paid, the bust one too.
    r, _ = script.round(table, [(0, seat[1], 1_000), (1, seat[2], 2_000)])
    script.close(r)
    # Dealt seat 1, seat 2, dealer, twice: seat 1 10+7, seat 2 9+9, dealer 10+8.
    script.act(r, "dealer", "deal", [card(10), card(9), card(10, 1), card(7), card(9, 1), card(8)])
    script.act(r, "seat:1", "stand")
    script.act(r, "seat:2", "hit", [card(8, 1)])  # 26: bust
    script.act(r, "seat:2", "stand")
    script.act(r, "dealer", "draw", [card(K)])  # 28
    # A natural paid at the deal, then a misdeal: the rest get their stakes back.
    r, _ = script.round(table, [(0, seat[1], 1_000), (1, seat[2], 1_500), (2, seat[3], 800)])
    script.close(r)
    script.act(
        r,
        "dealer",
        "deal",
        [card(A), card(5), card(9), card(10), card(K), card(6), card(4), card(7)],
    )
    script.act(r, "dealer", "fault")
    # Ngũ linh, a hit while bust (penalised), a check during play, then stop.
    r, _ = script.round(table, [(0, seat[1], 1_000), (1, seat[2], 1_000), (2, seat[3], 1_000)])
    script.close(r)
    script.act(
        r,
        "dealer",
        "deal",
        [card(2), card(10), card(9), card(10, 1), card(3), card(6), card(7), card(7, 1)],
    )  # seat 1 2+3, seat 2 10+6, seat 3 9+7, dealer 10+7
    script.act(r, "dealer", "check:3")  # 16 against the dealer's 17: the dealer wins
    script.act(r, "seat:1", "hit", [card(4)])
    script.act(r, "seat:1", "hit", [card(5)])
    script.act(r, "seat:1", "hit", [card(2, 1)])  # five cards, 16: ngũ linh, turn over
    script.act(r, "seat:2", "hit", [card(J)])  # 26: bust
    script.act(r, "seat:2", "hit", [card(2, 2)])  # drew while bust: loses at once
    script.act(r, "dealer", "stop")
    # A drawn card the device misread, corrected by an operator (action 2, the hit).
    r, _ = script.round(table, [(0, seat[1], 1_000)])
    script.close(r)
    script.act(r, "dealer", "deal", [card(10), card(10, 1), card(6), card(8)])
    script.act(r, "seat:1", "hit", [card(2)])  # 18
    script.act(r, "seat:1", "stand")
    script.act(r, "dealer", "stop")  # 18 against 18: a push
    casino.correct_step(
        request_id=next(script.ids),
        round_id=r,
        step=2,
        drawn=[card(3)],
        reason="the shoe read a three as a two",
        operator=script.operator,
    )
    # The dealer's natural ends the round: a better natural wins, the rest lose.
    r, _ = script.round(table, [(0, seat[1], 1_000), (1, seat[2], 1_000)])
    script.close(r)
    script.act(r, "dealer", "deal", [card(A), card(9), card(A, 1), card(A, 2), card(9, 1), card(Q)])
    # Aces by hand size: 10 in a three-card hand (21), 1 in a four-card one (10, non).
    r, _ = script.round(table, [(0, seat[1], 1_000), (1, seat[2], 1_000)])
    script.close(r)
    script.act(
        r,
        "dealer",
        "deal",
        [card(9, 2), card(2, 3), card(10, 2), card(2, 2), card(3, 3), card(7, 3)],
    )  # seat 1 9+2, seat 2 2+3, dealer 10+7
    script.act(r, "seat:1", "hit", [card(A)])
    script.act(r, "seat:1", "stand")
    script.act(r, "seat:2", "hit", [card(4, 3)])
    script.act(r, "seat:2", "hit", [card(A, 2)])
    script.act(r, "seat:2", "stand")
    script.act(r, "dealer", "stop")
    # Ngũ linh against ngũ linh: the lower score wins.
    r, _ = script.round(table, [(2, seat[1], 1_000)])
    script.close(r)
    script.act(r, "dealer", "deal", [card(2), card(4), card(3), card(4, 1)])
    for drawn in (card(4, 2), card(5), card(3, 1)):  # 2+3+4+5+3 = 17, five cards
        script.act(r, "seat:1", "hit", [drawn])
    for drawn in (card(2, 1), card(3, 2), card(5, 1)):  # 4+4+2+3+5 = 18, five cards
        script.act(r, "dealer", "draw", [drawn])
    script.act(r, "dealer", "stop")
    # An operator voids a card round before its first card is dealt.
    r, _ = script.round(table, [(3, seat[4], 2_500)])
    script.close(r)
    script.void(r, "the shoe was not shuffled")
    # No bets: closing betting ends the round, with an empty settlement.
    r, _ = script.round(table, [])
    script.close(r)
    # xidach-house: xì dách pays 3:2 (an odd stake, rounded down), aces count any value.
    r, _ = script.round(house, [(0, seat[1], 1_001), (1, seat[2], 1_000)])
    script.close(r)
    script.act(r, "dealer", "deal", [card(A), card(5), card(9), card(K), card(4), card(4, 1)])
    script.act(r, "seat:2", "hit", [card(A, 1)])  # 5+4+A: 20 (an ace may be 11 here)
    script.act(r, "seat:2", "stand")
    script.act(r, "dealer", "draw", [card(5, 1)])  # 9+4+5 = 18
    script.act(r, "dealer", "stop")


def run(argv: list[str]) -> int:
    # The same store every run: the session's ids, choices and dice; no time anchor.
    with reproducible_session(3) as seeds:
        return build(*argv, seeds)


def build(store: str, keys: str, seeds: tuple[str, ...]) -> int:
    passphrase = os.environ["LEDGER_PASSPHRASE"].encode()
    cli = ["--store", store, "--keys", keys]
    steps = [
        ["simulate", "--rounds", "24", "--players", "4", "--tables", "4", "--card-tables", "2",
         "--fault-rate", "25", *seeds],
        ["keys", "create", OPERATOR, "--role", "operator"],
        ["keys", "create", AUDITOR, "--role", "auditor"],
        ["keys", "create", DEVICE, "--role", "dealer-device"],
    ]  # fmt: skip
    for step in steps:
        if main([*cli, *step]) != 0:
            return 1
    node = open_node(store, keys, passphrase=passphrase)
    try:
        casino = Casino(node.app, get_plugin_manager().games())
        device = DealerDevice(node.keys.signer(Role.DEALER_DEVICE, passphrase, DEVICE))
        script = Script(node, casino, device, passphrase)
        dice_rounds(script)
        card_rounds(script)
    finally:
        node.close()
    # The device's reports anchored under a checkpoint, then its key revoked; a
    # verification run recorded, signed by the auditor; all of it checkpointed.
    for step in (
        ["checkpoint"],
        ["keys", "revoke", DEVICE, "--reason", "the shoe was sent for repair"],
        ["erase", "--dealer", "D01", "--reason", "the dealer asked, 2026-12-05"],
        ["games", "check"],  # the installed games' rules, in the rules register
        ["verify", "--record", "--workers", "1"],
    ):
        if main([*cli, *step]) != 0:
            return 1
    self_verify(store, keys, passphrase)
    return 0 if main([*cli, "checkpoint"]) == 0 else 1


def self_verify(store: str, keys: str, passphrase: bytes) -> None:
    """One run of the node's scheduled self-verification, recorded."""
    node = open_node(store, keys, passphrase=passphrase, anchor_seconds=0)
    try:
        with tempfile.TemporaryDirectory() as state:
            found = SelfVerifier(node.app, get_plugin_manager().games(), Path(state)).run_once()
        assert found.finding is None, found.finding
    finally:
        node.close()


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
