"""What makes commands fast must never make them wrong (both stores):

- the step cache continues a round's replay only while the round as loaded has
  the bets and the log prefix it remembered, and what it hands out or is handed
  cannot change what it remembers;
- aggregates copied structurally (`PlainCopy`) are deep copies;
- the aggregate cache, refreshed with what a save committed, still sees what
  other writers commit, and a caller's later edits never reach it.
"""

from __future__ import annotations

import copy
from typing import Any
from uuid import UUID

from ledger.casino import Casino
from ledger.domain.round import Round
from ledger.games.replay import replay
from ledger.games.step_cache import StepCache
from ledger.node import Node, open_node
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.server import RngServer
from tests.casino_support import HEADS, LIMITS, casino_on, event_count
from tests.conftest import PASSPHRASE
from tests.games.test_xidach_rounds import LIMITS as XD_LIMITS
from tests.games.test_xidach_rounds import seated, simple_move

GAMES = get_plugin_manager().games()


def played_rng_round(
    node: Node, tmp_path: Any, min_steps: int = 8
) -> tuple[Casino, str, list[dict[str, Any]]]:
    """A whole Xì dách round on an RNG table through Casino.act, of at least
    `min_steps` steps (a short round, e.g. a dealt blackjack, is followed by another);
    the step the casino's cache gave after every action, next to a full replay's."""
    casino = Casino(node.app, GAMES)
    rng = RngServer(tmp_path / "seeds")
    table = casino.open_table(
        request_id="t", name="XD", game="xidach", kind="rng", currency="VND", limits=XD_LIMITS
    )
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    round_id, players = seated(casino, table, {1: 100, 2: 200, 3: 300})
    for attempt in range(50):
        if attempt:  # the same players in a new round
            round_id = casino.open_round(request_id=f"r{attempt}", table_id=table, dealer="D")
            for seat, who in players.items():
                casino.place_bet(
                    request_id=f"b{seat}-{attempt}",
                    round_id=round_id,
                    account_id=who,
                    bet={"bet": f"seat:{seat}"},
                    stake=100 * seat,
                )
        pairs = play_to_the_end(casino, round_id, rng, f"{attempt}-")
        if len(pairs) >= min_steps:
            return casino, round_id, pairs
    raise AssertionError(f"no round of {min_steps} steps in 50")


def play_to_the_end(
    casino: Casino, round_id: str, rng: RngServer, prefix: str
) -> list[dict[str, Any]]:
    pairs: list[dict[str, Any]] = []
    number = 0
    while True:
        game_round = casino.round(round_id)
        game = GAMES[game_round.game]
        bets = dict(game_round.bets)
        full = replay(game, bets, game_round.log)
        cached = casino.steps.replay(game, game_round.id, bets, game_round.log)
        pairs.append({"full": full, "cached": cached})
        if full[1]["over"]:
            return pairs
        actor, action = simple_move(full[1])
        casino.act(
            request_id=f"a{prefix}{number}", round_id=round_id, actor=actor, action=action, rng=rng
        )
        number += 1


def test_the_step_cache_gives_what_a_full_replay_gives(node: Node, tmp_path: Any) -> None:
    casino, _, pairs = played_rng_round(node, tmp_path)
    assert len(pairs) >= 8
    for pair in pairs:
        assert pair["cached"] == pair["full"]
    # It continued replays rather than starting over: at least one hit per action.
    assert casino.steps.hits >= len(pairs) - 1


def test_the_step_cache_is_not_used_when_the_log_differs(node: Node, tmp_path: Any) -> None:
    casino, round_id, _ = played_rng_round(node, tmp_path)
    game_round = casino.round(round_id)
    game, bets, log = GAMES[game_round.game], dict(game_round.bets), game_round.log
    truth = replay(game, bets, log)
    # Poison what is remembered: a wrong step after an entry the round does not have.
    remembered = casino.steps._rounds[game_round.id]
    wrong_log = (*remembered.log[:-1], {"action": {**log[-1]["action"], "args": {"x": 1}}})
    poisoned = {**remembered.step, "over": False, "settle": {"nope": 1}}
    casino.steps._rounds[game_round.id] = type(remembered)(
        remembered.game, remembered.bets, wrong_log, remembered.actions, poisoned
    )
    assert casino.steps.replay(game, game_round.id, bets, log) == truth
    # Other bets than remembered: replayed from the start too.
    casino.steps._rounds[game_round.id] = type(remembered)(
        remembered.game, {}, remembered.log, remembered.actions, poisoned
    )
    assert casino.steps.replay(game, game_round.id, bets, log) == truth
    # Another game object under the same round: not used either.
    other = StepCache()
    other._rounds[game_round.id] = type(remembered)(
        GAMES["taixiu"], remembered.bets, remembered.log, remembered.actions, poisoned
    )
    assert other.replay(game, game_round.id, bets, log) == truth


def test_what_the_step_cache_hands_out_cannot_change_what_it_remembers(
    node: Node, tmp_path: Any
) -> None:
    casino, round_id, _ = played_rng_round(node, tmp_path)
    game_round = casino.round(round_id)
    game, bets, log = GAMES[game_round.game], dict(game_round.bets), game_round.log
    truth = replay(game, bets, log)
    actions, step = casino.steps.replay(game, game_round.id, bets, log)
    step["state"].clear()
    step["settle"]["x"] = 5
    actions[0]["args"]["y"] = 1
    actions.clear()
    log[0]["action"]["drawn"].append(99)  # the caller's round, edited after the fact
    assert casino.steps.replay(game, game_round.id, bets, casino.round(round_id).log) == truth


def test_a_plain_copy_is_a_deep_copy(node: Node) -> None:
    casino = casino_on(node)
    table = casino.open_table(
        request_id="t", name="T", game="coin", kind="physical", currency="EUR", limits=LIMITS
    )
    wallet = casino.open_account(request_id="a", owner="alice", currency="EUR")
    casino.deposit(request_id="d", account_id=wallet, amount=1_000)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(request_id="b", round_id=round_id, account_id=wallet, bet=HEADS, stake=100)
    casino.close_betting(request_id="c", round_id=round_id)
    original = casino.round(round_id)
    made = copy.deepcopy(original)
    assert type(made) is Round and made.__dict__ == original.__dict__
    for name, value in original.__dict__.items():
        if isinstance(value, dict | list | set):
            assert made.__dict__[name] is not value, name
    bet = next(iter(made.bets.values()))
    bet["bet"]["on"] = "tails"
    made.log.append({"fault": "edited"})
    assert next(iter(original.bets.values()))["bet"] == HEADS
    assert original.log[-1] != {"fault": "edited"}
    # A cycle (never in an aggregate's state) falls back to copy.deepcopy.
    loop: list[Any] = []
    loop.append(loop)
    original.__dict__["odd"] = loop
    odd = copy.deepcopy(original).__dict__["odd"]
    assert odd is not loop and odd[0] is odd


def test_the_refreshed_aggregate_cache_still_sees_other_writers(node: Node, store_url: str) -> None:
    casino = casino_on(node)
    wallet = casino.open_account(request_id="a", owner="alice", currency="EUR")
    casino.deposit(request_id="d1", account_id=wallet, amount=100)
    assert casino.account(wallet).balance == 100  # cached here from now on
    other = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE)
    try:
        Casino(other.app, casino.games).deposit(request_id="d2", account_id=wallet, amount=20)
    finally:
        other.close()
    assert casino.account(wallet).balance == 120  # the other node's deposit, read
    assert casino.deposit(request_id="d3", account_id=wallet, amount=3) == 123
    assert node.app.repository.get(UUID(wallet)).balance == 123


def test_edits_after_a_save_never_reach_the_aggregate_cache(node: Node) -> None:
    casino = casino_on(node)
    wallet = casino.open_account(request_id="a", owner="alice", currency="EUR")
    account = casino.account(wallet)
    account.deposit(50, "by-hand")
    node.app.save(account)
    count = event_count(node.app)
    account.balance = 10**9  # a caller's own object, edited after its save
    sealed = dict(account.owner)
    account.owner = "mallory"
    cached = node.app.repository.get(UUID(wallet))
    assert (cached.balance, cached.owner) == (50, sealed)
    assert event_count(node.app) == count


def test_every_cached_aggregate_is_what_its_events_make_it(node: Node, store_url: str) -> None:
    """After whole rounds (device cards with a step correction, a void), each
    aggregate the command runners keep live (changed in place, never re-read)
    equals the one another node rebuilds from the store, and so does what this
    node's repository hands out: commands change exactly what the events say."""
    from tests.casino_support import notifications, operator_signer
    from tests.games.test_step_corrections import GAMES as HIGH_CARD
    from tests.games.test_step_corrections import played

    cards = Casino(node.app, HIGH_CARD)
    _, _, _, round_id = played(node, cards)
    cards.correct_step(
        request_id="fix",
        round_id=round_id,
        step=1,
        drawn=[48],
        reason="misread",
        operator=operator_signer(node),
    )
    coins = casino_on(node)
    table = coins.open_table(
        request_id="ct", name="C", game="coin", kind="physical", currency="EUR", limits=LIMITS
    )
    wallet = coins.open_account(request_id="cw", owner="carl", currency="EUR")
    coins.deposit(request_id="cd", account_id=wallet, amount=500)
    voided = coins.open_round(request_id="cr", table_id=table, dealer="D")
    coins.place_bet(request_id="cb", round_id=voided, account_id=wallet, bet=HEADS, stake=100)
    coins.void_round(
        request_id="cv", round_id=voided, reason="table fault", operator=operator_signer(node)
    )
    streams = {n.originator_id for n in notifications(node.app)}
    other = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE, writable=False)
    try:
        compared = 0
        for casino in (cards, coins):
            for live in casino.runner.live:
                assert live.id in streams
                rebuilt = other.app.repository.get(live.id)
                assert live.__dict__ == rebuilt.__dict__, live.id
                assert node.app.repository.get(live.id).__dict__ == rebuilt.__dict__
                compared += 1
    finally:
        other.close()
    assert compared >= 8  # rounds, tables, wallets, houses
