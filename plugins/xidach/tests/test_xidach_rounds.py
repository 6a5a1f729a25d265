"""Worked examples, one per rule of docs/rules.md §2, through `Game.step` as the core calls it."""

from __future__ import annotations

import pytest
from ledger_xidach.game import XiDach
from ledger_xidach.profile_files import XIDACH, XIDACH_HOUSE
from ledger_xidach.rules import XiDachRules
from xidach_cards import Script, Shoe, act, bets, deal

from ledger.plugins import InvalidCommandError

GAME = XiDach("xidach", XIDACH)
HOUSE = XiDach("xidach-house", XIDACH_HOUSE)


# -- phase 1: naturals -------------------------------------------------------


def test_dealer_natural_ends_the_round_better_natural_wins_equal_pushes() -> None:
    play, shoe = Script(GAME, {1: 100, 2: 100, 3: 100}), Shoe()
    step = play.start(shoe, {1: "A A", 2: "A K", 3: "9 8"}, dealer="A Q")
    assert step["settle"] == {"b1": 200, "b2": 100, "b3": 0}
    assert step["over"] and step["moves"] == {}
    assert [play.seat(n)["result"] for n in (1, 2, 3)] == ["win", "push", "loss"]
    assert step["state"]["dealer"]["class"] == "xi-dach"


def test_house_profile_pays_naturals_more_with_floor_on_minor_units() -> None:
    play, shoe = Script(HOUSE, {1: 101, 2: 100}), Shoe()
    step = play.start(shoe, {1: "A K", 2: "A A"}, dealer="9 7")
    # xì dách 3:2 on 101 is 151.5: floored to 151; xì bàn 2:1.
    assert step["settle"] == {"b1": 101 + 151, "b2": 100 + 200}
    assert step["over"]
    play, shoe = Script(HOUSE, {1: 100}), Shoe()
    step = play.start(shoe, {1: "A A"}, dealer="A J")  # better natural than the dealer's
    assert step["settle"] == {"b1": 300}


def test_without_dealer_natural_player_naturals_win_and_the_rest_play_on() -> None:
    play, shoe = Script(GAME, {1: 100, 2: 100}), Shoe()
    step = play.start(shoe, {1: "A 10", 2: "9 5"}, dealer="10 7")
    assert step["settle"] == {"b1": 200}
    assert not step["over"] and step["state"]["turn"] == 2
    assert set(step["moves"]["seat:2"]) == {"hit", "stand"}


def test_ten_is_not_xi_dach_when_the_option_says_so() -> None:
    game = XiDach("strict", XiDachRules(xi_dach_tens=False))
    play, shoe = Script(game, {1: 100}), Shoe()
    step = play.start(shoe, {1: "A 10"}, dealer="10 7")
    assert step["settle"] == {} and step["state"]["turn"] == 1
    assert play.seat(1)["class"] == "du-tuoi" and play.seat(1)["score"] == 21


# -- the deal -----------------------------------------------------------------


def test_deal_is_one_card_at_a_time_seats_ascending_dealer_last_two_rounds() -> None:
    play = Script(GAME, {2: 100, 5: 100})
    play("dealer", "close_betting")
    assert play.step["moves"] == {
        "dealer": {"deal": {"kind": "cards", "count": 6}, "fault": None}  # fault: a misdeal
    }
    step = play("dealer", "deal", [8, 20, 36, 12, 24, 40])
    assert play.seat(2)["cards"] == [8, 12]
    assert play.seat(5)["cards"] == [20, 24]
    assert step["state"]["dealer"]["cards"] == [36, 40]


# -- phase 2: ngũ linh, non, bust, đền bài -----------------------------------


@pytest.mark.parametrize(
    ("dealer_draws", "dealer_score", "returned"),
    [("3 3 6", 20, 200), ("3 3 3", 17, 0), ("3 3 4", 18, 100)],
)
def test_between_two_ngu_linh_the_lower_score_wins(
    dealer_draws: str, dealer_score: int, returned: int
) -> None:
    play, shoe = Script(GAME, {1: 100}), Shoe()
    play.start(shoe, {1: "2 3"}, dealer="6 2")
    for name in ["4", "5", "4"]:
        play("seat:1", "hit", [shoe.card(name)])
    assert play.seat(1)["class"] == "ngu-linh" and play.seat(1)["score"] == 18
    assert play.step["state"]["turn"] is None  # five cards end the turn
    for name in dealer_draws.split():
        play("dealer", "draw", [shoe.card(name)])
    dealer = play.step["state"]["dealer"]
    assert (dealer["class"], dealer["score"]) == ("ngu-linh", dealer_score)
    assert "draw" not in play.step["moves"]["dealer"]  # five cards: no sixth
    assert play("dealer", "check:1")["settle"] == {"b1": returned}


def test_non_loses_when_checked() -> None:
    play, shoe = Script(GAME, {1: 100}), Shoe()
    play.start(shoe, {1: "9 5"}, dealer="10 7")
    play("seat:1", "stand")
    assert play.seat(1)["class"] == "non"
    step = play("dealer", "check:1")
    assert step["settle"] == {"b1": 0} and step["over"]


def test_non_dealer_pushes_non_and_beats_bust_when_it_can_draw_no_more() -> None:
    play, shoe = Script(GAME, {1: 100, 2: 100}), Shoe()
    play.start(shoe, {1: "9 5", 2: "10 8"}, dealer="A 2")
    play("seat:1", "stand")
    play("seat:2", "hit", [shoe.card("K")])
    play("seat:2", "stand")
    for name in ["2", "2", "3"]:
        play("dealer", "draw", [shoe.card(name)])
    assert play.step["state"]["dealer"]["score"] == 10  # A counts 1 in five cards
    # Below the minimum: no check (a misdeal its device reports is always offered).
    assert play.step["moves"] == {"dealer": {"stop": None, "fault": None}}
    step = play("dealer", "stop")
    assert step["settle"] == {"b1": 100, "b2": 0} and step["over"]


def test_den_bai_is_flagged_and_loses_even_against_a_dealer_bust() -> None:
    play, shoe = Script(GAME, {1: 100, 2: 100}), Shoe()
    play.start(shoe, {1: "10 9", 2: "10 6"}, dealer="10 8")
    play("seat:1", "hit", [shoe.card("5")])
    assert play.seat(1)["class"] == "quac" and play.step["flags"] == []
    step = play("seat:1", "hit", [shoe.card("2")])
    assert step["settle"] == {"b1": 0}
    assert step["flags"] and step["flags"][0].startswith("den-bai: seat 1")
    assert play.seat(1)["penalised"] and step["state"]["turn"] == 2
    play("seat:2", "stand")
    step = play("dealer", "draw", [shoe.card("K")])  # 28: the dealer pays the unsettled
    assert step["state"]["dealer"]["score"] == 28
    assert step["settle"] == {"b2": 200} and step["over"]
    assert play.seat(1)["returned"] == 0


def test_dealer_bust_at_28_pays_every_unsettled_player_bust_ones_included() -> None:
    play, shoe = Script(GAME, {1: 100, 2: 100}), Shoe()
    play.start(shoe, {1: "10 9", 2: "10 7"}, dealer="10 8")
    play("seat:1", "hit", [shoe.card("5")])
    play("seat:1", "stand")
    play("seat:2", "stand")
    step = play("dealer", "draw", [shoe.card("Q")])
    assert step["settle"] == {"b1": 200, "b2": 200} and step["over"]


def test_dealer_bust_below_28_pushes_bust_players_and_loses_to_the_rest() -> None:
    play, shoe = Script(GAME, {1: 100, 2: 100}), Shoe()
    play.start(shoe, {1: "10 9", 2: "10 7"}, dealer="10 6")
    play("seat:1", "hit", [shoe.card("5")])
    play("seat:1", "stand")
    play("seat:2", "stand")
    step = play("dealer", "draw", [shoe.card("6")])
    assert step["state"]["dealer"]["score"] == 22 and step["settle"] == {}
    # Bust is not of age: no check, no draw; stopping checks everyone as the hand is.
    assert step["moves"] == {"dealer": {"stop": None, "fault": None}}
    step = play("dealer", "stop")
    assert step["settle"] == {"b1": 100, "b2": 200} and step["over"]


# -- dealer checks, one seat at a time, against the hand as it is ----------


def test_each_check_settles_against_the_dealers_hand_at_that_moment() -> None:
    play, shoe = Script(GAME, {1: 100, 2: 100}), Shoe()
    play.start(shoe, {1: "10 7", 2: "10 9"}, dealer="10 6")
    play("seat:1", "stand")
    play("seat:2", "stand")
    assert play("dealer", "check:1")["settle"] == {"b1": 200}  # 17 beats 16
    assert "check:1" not in play.step["moves"]["dealer"]  # settled: never checked twice
    play("dealer", "draw", [shoe.card("3")])  # 19
    step = play("dealer", "check:2")
    assert step["settle"] == {"b2": 100} and step["over"]  # 19 pushes 19


def test_dealer_of_age_may_check_during_the_players_turns_but_not_stop_or_draw() -> None:
    play, shoe = Script(GAME, {1: 100, 2: 100}), Shoe()
    step = play.start(shoe, {1: "9 5", 2: "10 8"}, dealer="10 Q")
    assert step["moves"]["dealer"] == {"check:1": None, "check:2": None, "fault": None}
    step = play("dealer", "check:1")  # the seat whose turn it is
    assert step["settle"] == {"b1": 0} and step["state"]["turn"] == 2
    assert "seat:1" not in step["moves"]


def test_check_below_the_minimum_is_not_offered() -> None:
    play, shoe = Script(GAME, {1: 100}), Shoe()
    step = play.start(shoe, {1: "10 7"}, dealer="10 5")
    assert step["moves"]["dealer"] == {"fault": None}  # not of age: only a misdeal
    step = play("seat:1", "stand")
    assert step["moves"] == {"dealer": {"draw": {"kind": "cards", "count": 1}, "fault": None}}
    with pytest.raises(InvalidCommandError, match="dealer may not check:1 now"):
        GAME.step(play.bets, [*play.actions, act("dealer", "check:1")])


def test_house_minimum_14_lets_the_dealer_check_at_14() -> None:
    play, shoe = Script(HOUSE, {1: 100}), Shoe()
    step = play.start(shoe, {1: "10 3"}, dealer="10 4")
    assert "check:1" in step["moves"]["dealer"]
    assert play("dealer", "check:1")["settle"] == {"b1": 0}  # 13 is non under min 14


# -- illegal moves are simply not offered, and refused on replay --------------


def test_sixth_card_is_not_offered() -> None:
    play, shoe = Script(GAME, {1: 100, 2: 100}), Shoe()
    play.start(shoe, {1: "2 3", 2: "10 7"}, dealer="10 8")
    for name in ["A", "4"]:
        play("seat:1", "hit", [shoe.card(name)])
    assert "hit" in play.step["moves"]["seat:1"]  # four cards: a fifth is fine
    play("seat:1", "hit", [shoe.card("4")])
    assert "seat:1" not in play.step["moves"] and play.step["state"]["turn"] == 2
    with pytest.raises(InvalidCommandError, match="seat:1 may not hit now"):
        GAME.step(play.bets, [*play.actions, act("seat:1", "hit", [shoe.card("2")])])


def test_acting_out_of_turn_is_not_offered() -> None:
    play, shoe = Script(GAME, {1: 100, 2: 100}), Shoe()
    step = play.start(shoe, {1: "9 5", 2: "10 4"}, dealer="10 5")
    assert set(step["moves"]) == {"seat:1", "dealer"}
    assert step["moves"]["dealer"] == {"fault": None}
    with pytest.raises(InvalidCommandError, match="seat:2 may not stand now"):
        GAME.step(play.bets, [*play.actions, act("seat:2", "stand")])
    play("seat:1", "stand")
    with pytest.raises(InvalidCommandError, match="seat:1 may not hit now"):  # turn passed
        GAME.step(play.bets, [*play.actions, act("seat:1", "hit", [shoe.card("2")])])


def test_stop_is_not_offered_while_a_player_has_a_turn() -> None:
    play, shoe = Script(GAME, {1: 100}), Shoe()
    step = play.start(shoe, {1: "9 5"}, dealer="10 9")
    assert "stop" not in step["moves"]["dealer"] and "draw" not in step["moves"]["dealer"]
    with pytest.raises(InvalidCommandError, match="dealer may not stop now"):
        GAME.step(play.bets, [*play.actions, act("dealer", "stop")])
    assert "stop" in play("seat:1", "stand")["moves"]["dealer"]


def test_replay_refuses_a_card_dealt_twice_or_the_wrong_number_of_cards() -> None:
    play, shoe = Script(GAME, {1: 100}), Shoe()
    play.start(shoe, {1: "9 5"}, dealer="10 9")
    dealt = play.seat(1)["cards"][0]
    with pytest.raises(InvalidCommandError, match="already dealt"):
        GAME.step(play.bets, [*play.actions, act("seat:1", "hit", [dealt])])
    with pytest.raises(InvalidCommandError, match="takes 1 card"):
        GAME.step(play.bets, [*play.actions, act("seat:1", "hit", [])])
    with pytest.raises(InvalidCommandError, match="not a card"):
        GAME.step(play.bets, [*play.actions, act("seat:1", "hit", [52])])


# -- bets and arguments ---------------------------------------------------------


def test_betting_is_open_only_before_close_and_a_bet_after_the_deal_is_refused() -> None:
    play, shoe = Script(GAME, {1: 100}), Shoe()
    assert play.step["betting"] and play.step["moves"] == {"dealer": {"close_betting": None}}
    assert not play("dealer", "close_betting")["betting"]
    step = play("dealer", "deal", deal(shoe, {1: "9 5"}, "10 9"))
    assert not step["betting"]  # the core refuses a bet while betting is False


def test_close_betting_without_bets_ends_the_round() -> None:
    play = Script(GAME, {})
    step = play("dealer", "close_betting")
    assert step["over"] and step["moves"] == {} and step["settle"] == {}


def test_validate_bet_one_bet_per_seat_within_the_table() -> None:
    placed = bets({2: 100})
    assert GAME.validate_bet({"seat": 3}, placed) == {"seat": 3}
    for bad, why in [
        ({"seat": 2}, "already has a bet"),
        ({"seat": 0}, "1..5"),
        ({"seat": 6}, "1..5"),
        ({"seat": True}, "1..5"),
        ({"seat": "1"}, "1..5"),
        ({"seat": 1, "x": 1}, "is"),
        ({}, "is"),
    ]:
        with pytest.raises(InvalidCommandError, match=why):
            GAME.validate_bet(bad, placed)


def test_validate_args_refuses_malformed_actions() -> None:
    assert GAME.validate_args("dealer", "check:5", {}) == {}
    assert GAME.validate_args("seat:1", "hit", {}) == {}
    assert GAME.validate_args("dealer", "fault", {"reason": "misdeal"}) == {"reason": "misdeal"}
    for actor, action, args in [
        ("dealer", "stand", {}),
        ("seat:1", "draw", {}),
        ("seat:6", "hit", {}),
        ("seat:01", "hit", {}),
        ("dealer", "check:0", {}),
        ("dealer", "check:6", {}),
        ("dealer", "check:x", {}),
        ("dealer", "fault", {}),
        ("dealer", "fault", {"reason": " "}),
        ("seat:1", "fault", {"reason": "misdeal"}),
        ("dealer", "deal", {"n": 1}),
        ("player", "hit", {}),
    ]:
        with pytest.raises(InvalidCommandError):
            GAME.validate_args(actor, action, args)


def test_a_misdeal_voids_what_is_not_settled_and_ends_the_round() -> None:
    """RULES §1.4: a misdeal is a fault the device reports; it voids the round (the
    naturals the deal already paid stand), and nothing may follow it."""
    play, shoe = Script(GAME, {1: 100, 2: 100}), Shoe()
    step = play.start(shoe, {1: "A K", 2: "9 5"}, dealer="10 5")
    assert step["settle"] == {"b1": 200}  # seat 1's xì dách is paid at the deal
    play.actions.append(
        {"actor": "dealer", "action": "fault", "args": {"reason": "card exposed"}, "drawn": []}
    )
    step = GAME.step(play.bets, play.actions)
    assert step["void"] == "misdeal: card exposed"
    assert step["over"] and step["moves"] == {} and step["settle"] == {}
    assert step["state"]["phase"] == "voided"
    # Before the deal too: the misdeal replaces the deal.
    before = Script(GAME, {1: 100})
    before("dealer", "close_betting")
    before.actions.append(
        {"actor": "dealer", "action": "fault", "args": {"reason": "deck dropped"}, "drawn": []}
    )
    step = GAME.step(before.bets, before.actions)
    assert step["void"] == "misdeal: deck dropped" and step["over"]
