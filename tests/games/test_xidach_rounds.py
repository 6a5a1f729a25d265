"""Xì dách through the casino (issue 10): whole rounds on an RNG table (cards from
the committed deck, recomputed by verify) and on a physical table (every card and
decision in a dealer device's signed report), illegal actions refused naming
round, actor and action with nothing recorded, and verify re-settling every
round, on both stores."""

from __future__ import annotations

from typing import Any

import pytest
from ledger_xidach.game import XiDach
from ledger_xidach.profile_files import PROFILES

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.domain.round_records import SETTLED
from ledger.errors import InvalidCommandError, VerificationError
from ledger.games.replay import replay
from ledger.node import Node
from ledger.plugins import hookimpl
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import GameRegistry, LoadedGame
from ledger.rng.deck import shuffled_deck
from ledger.rng.server import RngServer
from tests.casino_support import dealer_device, event_count

LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 50_000}
GAMES = get_plugin_manager().games()
FUNDS = 10_000


def seated(casino: Casino, table: str, stakes: dict[int, int]) -> tuple[str, dict[int, str]]:
    """A round on `table` with one player per seat, each with FUNDS, betting `stakes`."""
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    players: dict[int, str] = {}
    for seat, stake in stakes.items():
        who = casino.open_account(request_id=f"p{seat}", owner=f"p{seat}", currency="VND")
        casino.deposit(request_id=f"dep{seat}", account_id=who, amount=FUNDS)
        casino.place_bet(
            request_id=f"b{seat}",
            round_id=round_id,
            account_id=who,
            bet={"bet": f"seat:{seat}"},
            stake=stake,
        )
        players[seat] = who
    return round_id, players


def offered(casino: Casino, round_id: str) -> dict[str, Any]:
    game_round = casino.round(round_id)
    return replay(GAMES[game_round.game], dict(game_round.bets), game_round.log)[1]


def simple_move(step: dict[str, Any]) -> tuple[str, str]:
    """Players draw below 16; the dealer draws below 17, then stops."""
    state, moves = step["state"], step["moves"]
    if state["turn"] is not None:
        actor = f"seat:{state['turn']}"
        points = state["seats"][str(state["turn"])]["score"]
        return actor, "hit" if points < 16 and "hit" in moves[actor] else "stand"
    dealer = moves["dealer"]
    if "draw" in dealer and (state["dealer"]["score"] or 0) < 17:
        return "dealer", "draw"
    return "dealer", next(a for a in ("close_betting", "deal", "stop") if a in dealer)


def test_rng_round_deals_the_committed_deck_and_verify_recomputes_it(
    node: Node, tmp_path: Any
) -> None:
    casino = Casino(node.app, GAMES)
    rng = RngServer(tmp_path / "seeds")
    table = casino.open_table(
        request_id="t", name="XD", game="xidach", kind="rng", currency="VND", limits=LIMITS
    )
    seed_id = casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    stakes = {1: 100, 2: 200, 3: 300, 4: 400, 5: 500}
    round_id, players = seated(casino, table, stakes)
    deck = shuffled_deck(rng.seed(seed_id), round_id)
    dealt: list[int] = []
    returned: dict[str, int] = {}
    steps = draws = settling = 0
    while not (step := offered(casino, round_id))["over"]:
        actor, action = simple_move(step)
        done = casino.act(
            request_id=f"a{steps}", round_id=round_id, actor=actor, action=action, rng=rng
        )
        dealt += done["drawn"]
        draws += bool(done["drawn"])
        settling += bool(done["settled"])
        for result in done["settled"]:
            assert result["bet_id"] not in returned  # every bet settled exactly once
            returned[result["bet_id"]] = result["returned"]
        steps += 1
    assert dealt == deck[: len(dealt)] and len(dealt) >= 12  # the deck, in order
    game_round = casino.round(round_id)
    assert game_round.status == SETTLED and set(returned) == set(game_round.bets)
    seats = step["state"]["seats"]
    for seat, who in players.items():
        back = seats[str(seat)]["returned"]
        assert back == returned[seats[str(seat)]["bet"]]
        assert casino.account(who).balance == FUNDS - stakes[seat] + back
    house = casino.account(casino.table(table).house_account).balance
    assert house == sum(stakes.values()) - sum(returned.values())  # money conserved

    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )
    assert report.settlement is not None and report.settlement.rng_cards_pending == draws
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )
    assert report.settlement is not None
    assert (report.settlement.rng_cards, report.settlement.rng_cards_pending) == (draws, 0)
    assert report.resettled == settling >= 1  # every settling step re-derived
    assert "NOT CHECKED" not in report.summary()


# The physical round: two seats; the deal goes seat 1, seat 2, dealer, twice.
DEAL = [36, 16, 32, 24, 12, 17]  # seat 1: 10, 7 (17); seat 2: 5, 4 (9); dealer: 9, 5 (14)


def physical_round(node: Node, casino: Casino) -> tuple[str, dict[int, str], Any]:
    table = casino.open_table(
        request_id="t", name="XDP", game="xidach", kind="physical", currency="VND", limits=LIMITS
    )
    round_id, players = seated(casino, table, {1: 1_000, 2: 500})
    return round_id, players, dealer_device(node)


def reported(
    casino: Casino, device: Any, round_id: str, actor: str, action: str, cards: list[int]
) -> dict[str, Any]:
    """`actor` `action` as the dealer device reports it (signed), through Casino.act."""
    number = casino.round(round_id).actions
    source = device.act(round_id, number, actor, action, {}, cards)
    return dict(
        casino.act(
            request_id=f"{number}-{actor}-{action}",
            round_id=round_id,
            actor=actor,
            action=action,
            source=source,
        )
    )


def refused(
    node: Node, casino: Casino, round_id: str, actor: str, action: str, match: str = ""
) -> None:
    before = event_count(node.app)
    with pytest.raises(
        InvalidCommandError, match=rf"round {round_id} \(xidach\): {actor} may not {action} now"
    ) as caught:
        casino.act(request_id=f"x-{actor}-{action}", round_id=round_id, actor=actor, action=action)
    assert match in str(caught.value)
    assert event_count(node.app) == before


def test_physical_round_every_card_and_decision_signed_and_illegal_moves_refused(
    node: Node,
) -> None:
    casino = Casino(node.app, GAMES)
    round_id, players, device = physical_round(node, casino)
    refused(node, casino, round_id, "dealer", "deal")  # before betting closed
    reported(casino, device, round_id, "dealer", "close_betting", [])
    dealt = reported(casino, device, round_id, "dealer", "deal", DEAL)
    assert dealt["state"]["dealer"]["score"] == 14 and dealt["settled"] == []
    # A bet after the deal.
    late = casino.open_account(request_id="late", owner="late", currency="VND")
    casino.deposit(request_id="dep-late", account_id=late, amount=FUNDS)
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match=rf"round {round_id} is not taking bets"):
        casino.place_bet(
            request_id="bl", round_id=round_id, account_id=late, bet={"bet": "seat:3"}, stake=100
        )
    assert event_count(node.app) == before
    refused(node, casino, round_id, "seat:2", "hit")  # out of turn: seat 1 plays first
    refused(node, casino, round_id, "dealer", "check:1")  # the dealer's 14 is below 16
    refused(node, casino, round_id, "dealer", "stop")  # seat 1 still has a turn
    reported(casino, device, round_id, "seat:1", "stand", [])
    refused(node, casino, round_id, "seat:1", "hit")  # after the turn passed
    for card in (8, 4):  # 3, 2: seat 2 holds 5 4 3 2 (14)
        reported(casino, device, round_id, "seat:2", "hit", [card])
    # A card already dealt from this deck (seat 1's 10) is refused, nothing recorded.
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="card 36 was already dealt"):
        reported(casino, device, round_id, "seat:2", "hit", [36])
    assert event_count(node.app) == before
    five = reported(casino, device, round_id, "seat:2", "hit", [6])  # a 2: five cards, 16
    assert five["state"]["seats"]["2"]["class"] == "ngu-linh" and five["state"]["turn"] is None
    refused(node, casino, round_id, "seat:2", "hit")  # a sixth card
    reported(casino, device, round_id, "dealer", "draw", [7])  # a 2: the dealer holds 16
    checked = reported(casino, device, round_id, "dealer", "check:1", [])
    assert [(r["stake"], r["returned"]) for r in checked["settled"]] == [(1_000, 2_000)]
    refused(node, casino, round_id, "dealer", "check:1")  # seat 1 is settled
    stop = reported(casino, device, round_id, "dealer", "stop", [])
    assert stop["over"] and [(r["stake"], r["returned"]) for r in stop["settled"]] == [(500, 1_000)]
    assert casino.account(players[1]).balance == FUNDS + 1_000
    assert casino.account(players[2]).balance == FUNDS + 500

    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )
    assert report.device_reports == 9  # every card and every decision, signature checked
    assert report.resettled == 2  # the check and the stop, re-derived from the rules


def test_a_decision_report_is_signed_for_its_step(node: Node) -> None:
    casino = Casino(node.app, GAMES)
    round_id, _, device = physical_round(node, casino)
    reported(casino, device, round_id, "dealer", "close_betting", [])
    reported(casino, device, round_id, "dealer", "deal", DEAL)
    before = event_count(node.app)
    # Signed for another step of the round, or for another seat: refused.
    for number, actor in ((3, "seat:1"), (2, "seat:2")):
        signed = device.act(round_id, number, actor, "stand", {}, [])
        with pytest.raises(InvalidCommandError, match="dealer device report refused"):
            casino.act(
                request_id=f"s{number}",
                round_id=round_id,
                actor="seat:1",
                action="stand",
                source=signed,
            )
    # A decision on a physical table reported by no device is the node's own
    # command; a report that is not a device's is refused.
    with pytest.raises(InvalidCommandError, match="only from a dealer device's signed report"):
        casino.act(
            request_id="k", round_id=round_id, actor="seat:1", action="stand", source={"x": 1}
        )
    assert event_count(node.app) == before


class PaysSeatOneDouble(XiDach):
    """A lying release (same id, same rules): a check of seat 1 returns one more stake."""

    def step(self, bets: Any, actions: Any) -> Any:
        step = super().step(bets, actions)
        if actions and actions[-1]["action"] == "check:1":
            extra = {b: r + 1_000 for b, r in step["settle"].items()}
            return {**step, "settle": extra}
        return step


def test_attack_a_signed_node_records_a_wrong_partial_settlement(node: Node) -> None:
    class LyingPlugin:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(PaysSeatOneDouble("xidach", PROFILES["xidach"]))

    lying: dict[str, LoadedGame] = get_plugin_manager(
        load_entry_points=False, extra=[("casino-ledger-xidach", LyingPlugin(), "1.0.0")]
    ).games()
    assert lying["xidach"].rules_hash == GAMES["xidach"].rules_hash
    casino = Casino(node.app, lying)
    round_id, players, device = physical_round(node, casino)
    reported(casino, device, round_id, "dealer", "close_betting", [])
    reported(casino, device, round_id, "dealer", "deal", DEAL)
    reported(casino, device, round_id, "seat:1", "stand", [])
    for card in (8, 4, 6):
        reported(casino, device, round_id, "seat:2", "hit", [card])
    reported(casino, device, round_id, "dealer", "draw", [7])
    reported(casino, device, round_id, "dealer", "check:1", [])
    reported(casino, device, round_id, "dealer", "stop", [])
    assert (
        casino.account(players[1]).balance == FUNDS + 2_000
    )  # paid one stake too many (1 000 won + 1 000)
    # Every event is sealed by the node and money balances: only re-deriving the
    # partial settlement with the real rules catches it.
    verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=lying))
    with pytest.raises(
        VerificationError, match=rf"round {round_id} at .*returned 3000, the rules pay 2000"
    ):
        verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES))
