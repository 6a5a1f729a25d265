"""Any order of legal moves: every bet settled exactly once, deterministic replay, no dead end."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from ledger_xidach.game import XiDach
from ledger_xidach.plugin import games
from ledger_xidach.profile_files import XIDACH
from ledger_xidach.rules import XiDachRules, paid
from ledger_xidach.strategy import DealerStrategy, PlayerStrategy, play_round, replay
from xidach_cards import act, bets

from ledger.plugins import RecordedAction, canonical

PROFILES = [*games(), XiDach("nine-seats", XiDachRules(seats=9, ace_rule="one-or-ten"))]
# Close, deal, at most four hits and a stand per seat, the dealer's draws and checks.
MAX_ACTIONS = 2 + 9 * 5 + 3 + 9 + 1


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_sequence_of_legal_moves_settles_every_bet_exactly_once(data: st.DataObject) -> None:
    game = data.draw(st.sampled_from(PROFILES))
    seats = data.draw(
        st.sets(st.integers(1, game.table_rules.seats), min_size=1, max_size=game.table_rules.seats)
    )
    stakes = {seat: data.draw(st.integers(1, 10_000)) for seat in sorted(seats)}
    deck = data.draw(st.permutations(range(52)))
    standing = bets(stakes)
    actions: list[RecordedAction] = []
    returned: dict[str, int] = {}
    taken = 0
    step = game.step(standing, actions)
    while not step["over"]:
        assert step["moves"], f"a state that is not over offers no move: {step['state']}"
        assert len(actions) <= MAX_ACTIONS
        offered = sorted((a, m) for a, moves in step["moves"].items() for m in moves)
        actor, action = data.draw(st.sampled_from(offered))
        draw = step["moves"][actor][action]
        count = 0 if draw is None else draw["count"]
        done = act(actor, action, deck[taken : taken + count])
        if action == "fault":  # a misdeal its device reported
            done["args"] = {"reason": "misdeal"}
        actions.append(done)
        taken += count
        step = game.step(standing, actions)
        for bet_id, amount in step["settle"].items():
            assert bet_id not in returned, f"{bet_id} settled twice"
            returned[bet_id] = amount
        assert (step["void"] is not None) == (action == "fault")
        canonical({"state": step["state"]})  # plain JSON, as the core stores it
    assert step["moves"] == {}
    if step["void"] is not None:  # the core returns every stake not settled yet
        assert set(returned) <= set(standing)
        assert game.step(standing, actions) == step
        return
    assert set(returned) == set(standing)  # every bet, exactly once
    rules = game.table_rules
    for bet_id, amount in returned.items():
        stake = standing[bet_id]["stake"]
        wins = {paid(stake, p) for p in (rules.win_pays, rules.xi_ban_pays, rules.xi_dach_pays)}
        assert amount in {0, stake} | wins
    assert sorted(step["state"]["settled"]) == sorted(stakes)
    # Replay is deterministic: the same actions give the same final step.
    assert game.step(standing, actions) == step


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 9))
def test_strategies_finish_every_round_and_replay_rebuilds_it(seed: int, n_seats: int) -> None:
    rules = XiDachRules(seats=9)
    stakes = dict.fromkeys(range(1, n_seats + 1), 100)
    staked, back, actions = play_round(
        rules, stakes, random.Random(seed), PlayerStrategy(), DealerStrategy()
    )
    assert staked == 100 * n_seats and back >= 0
    table = replay(rules, stakes, actions)
    assert table.phase == "over" and sum(table.returned.values()) == back
    # The same seed plays the same round.
    again = play_round(rules, stakes, random.Random(seed), PlayerStrategy(), DealerStrategy())
    assert again == (staked, back, actions)


def test_incremental_round_and_step_replay_agree() -> None:
    game = XiDach("xidach", XIDACH)
    stakes = {1: 100, 2: 250, 4: 75}
    rng = random.Random(7)
    for _ in range(50):
        _, _, actions = play_round(XIDACH, stakes, rng, PlayerStrategy(), DealerStrategy())
        recorded = [act(actor, action, drawn) for actor, action, drawn in actions]
        # play_round names bets seat-N; the step sees the core's ids: compare by seat.
        step = game.step(bets(stakes), recorded)
        table = replay(XIDACH, stakes, actions)
        assert step["over"]
        for seat in stakes:
            assert step["state"]["seats"][str(seat)]["returned"] == table.returned[seat]
            assert step["state"]["seats"][str(seat)]["cards"] == table.hands[seat]
