"""A step that advances a kept table is the step a fresh replay gives
(`ledger_xidach.replays`): on random rounds played move by move and
interleaved, after inputs edited in place, after a failed step, and from
threads stepping one round at once."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from ledger_xidach.game import XiDach
from ledger_xidach.profile_files import XIDACH
from ledger_xidach.replays import KEPT
from xidach_cards import act, bets

from ledger.plugins import BetView, InvalidCommandError, RecordedAction, Step


def fresh(bets_: dict[str, BetView], actions: list[RecordedAction]) -> Step:
    """The step replayed from nothing: a new game object keeps no table."""
    return XiDach("xidach", XIDACH).step(bets_, actions)


class RandomRound:
    """A round played by random offered moves, its cards from one shuffled deck."""

    def __init__(self, rng: random.Random, round_number: int) -> None:
        self.rng = rng
        seats = rng.sample(range(1, XIDACH.seats + 1), rng.randint(1, XIDACH.seats))
        self.bets = {
            f"r{round_number}-{k}": v
            for k, v in bets({s: rng.randint(1, 500) for s in seats}).items()
        }
        self.deck = list(range(52))
        rng.shuffle(self.deck)
        self.actions: list[RecordedAction] = []

    def next_action(self, step: Step) -> RecordedAction | None:
        offered = [(actor, action, draw) for actor, m in step["moves"].items()
                   for action, draw in m.items() if action != "fault"]  # fmt: skip
        if not offered:
            return None
        actor, action, draw = self.rng.choice(offered)
        count = draw["count"] if draw else 0
        drawn, self.deck = self.deck[:count], self.deck[count:]
        return act(actor, action, drawn)


@pytest.mark.parametrize("seed", range(6))
def test_interleaved_random_rounds_step_as_a_fresh_replay(seed: int) -> None:
    rng = random.Random(seed)
    game = XiDach("xidach", XIDACH)
    # More rounds in play than the game keeps tables: some are dropped and replayed.
    rounds = [RandomRound(rng, n) for n in range(KEPT + 8)]
    steps = {id(r): game.step(r.bets, []) for r in rounds}
    checked = 0
    while rounds:
        playing = rng.choice(rounds)
        action = playing.next_action(steps[id(playing)])
        if action is None:
            rounds.remove(playing)
            continue
        playing.actions.append(action)
        step = game.step(playing.bets, list(playing.actions))
        assert step == fresh(playing.bets, playing.actions)
        steps[id(playing)] = step
        checked += 1
    assert checked > 300  # the rounds really were played out


def test_an_action_or_bet_edited_in_place_is_replayed_not_taken_from_the_kept_table() -> None:
    game = XiDach("xidach", XIDACH)
    round_ = RandomRound(random.Random(7), 0)
    step = game.step(round_.bets, [])
    for _ in range(2):  # close betting, deal
        action = round_.next_action(step)
        assert action is not None
        round_.actions.append(action)
        step = game.step(round_.bets, round_.actions)
    dealt = round_.actions[1]["drawn"]
    dealt.reverse()  # the same list object, other cards: the kept table must not fit
    edited = game.step(round_.bets, round_.actions)
    assert edited == fresh(round_.bets, round_.actions) and edited != step
    while (action := round_.next_action(step)) is not None:  # to the end, its bets settled
        round_.actions.append(action)
        step = game.step(round_.bets, round_.actions)
    assert step["settle"]
    for view in round_.bets.values():
        view["stake"] += 1  # the same bet objects, other stakes
    edited = game.step(round_.bets, round_.actions)
    assert edited == fresh(round_.bets, round_.actions) and edited != step


def test_a_failed_step_keeps_nothing_and_the_round_steps_on() -> None:
    game = XiDach("xidach", XIDACH)
    round_ = RandomRound(random.Random(3), 0)
    step = game.step(round_.bets, [])
    action = round_.next_action(step)
    assert action is not None
    round_.actions.append(action)
    game.step(round_.bets, round_.actions)
    with pytest.raises(InvalidCommandError):
        game.step(round_.bets, [*round_.actions, act("dealer", "close_betting")])
    step = game.step(round_.bets, round_.actions)
    assert step == fresh(round_.bets, round_.actions)


def test_threads_stepping_one_round_each_get_the_fresh_replays_step() -> None:
    game = XiDach("xidach", XIDACH)
    round_ = RandomRound(random.Random(11), 0)
    prefixes: list[list[RecordedAction]] = [[]]
    step = game.step(round_.bets, [])
    while (action := round_.next_action(step)) is not None:
        round_.actions.append(action)
        prefixes.append(list(round_.actions))
        step = fresh(round_.bets, round_.actions)
    expected = [fresh(round_.bets, prefix) for prefix in prefixes]
    failures: list[Any] = []

    def walk(order: list[int]) -> None:
        for index in order:
            if game.step(round_.bets, prefixes[index]) != expected[index]:
                failures.append(index)

    rng = random.Random(5)
    orders = [sorted(range(len(prefixes)), key=lambda _: rng.random()) for _ in range(8)]
    orders += [list(range(len(prefixes)))] * 4  # in order: these take the kept table
    threads = [threading.Thread(target=walk, args=(o * 20,)) for o in orders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(prefixes) > 3 and not failures
