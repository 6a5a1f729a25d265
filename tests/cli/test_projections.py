"""Projections: read models rebuilt from the log, on SQLite and PostgreSQL.

A realistic casino day (accounts, deposits, withdrawals, rounds with bets and
withdrawn bets, settlements, a void, a round left open) is projected; the
projections must agree with the aggregates, balance per currency, come out
exactly the same whether caught up in small steps or rebuilt in one go, and
survive a crash (an exception mid-transaction, or a killed process) without
counting anything twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.projections import verify_projections
from ledger.casino import Casino
from ledger.cli.main import main
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.domain.account import HOUSE, PLAYER
from ledger.domain.money import cashier, in_play, wallet
from ledger.domain.round_records import SETTLED, Limits
from ledger.errors import CannotCheckError, ConfigError, VerificationError
from ledger.node import Node, open_node
from ledger.projections import (
    Balances,
    ProjectionRunner,
    catch_up,
    default_projections,
    queries,
    rebuild,
)
from ledger.projections.base import utc_day
from ledger.projections.sql import Tx
from tests.attacker import Attacker
from tests.casino_support import seen
from tests.coin_game import COIN_GAMES
from tests.conftest import PASSPHRASE
from tests.demo_table import Table

LIMITS: Limits = {"min_bet": 10, "max_bet": 1000, "max_round": 2000}
HEADS = {"on": "heads"}
TAILS = {"on": "tails"}
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Day:
    """The ids a casino day created."""

    accounts: dict[str, str] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    rounds: dict[str, str] = field(default_factory=dict)
    open_round: str = ""


def operator(node: Node) -> Signer:
    if not any(record.name == "op" for record in node.keys.keyring()):
        node.keys.create("op", Role.OPERATOR, PASSPHRASE)
    return node.keys.signer(Role.OPERATOR, PASSPHRASE)


def play_day(node: Node, step: Callable[[], None] = lambda: None) -> Day:
    """A day at the casino; `step()` runs after every few commands."""
    casino = Casino(node.app, COIN_GAMES)
    op = operator(node)
    day = Day()
    n = iter(range(1000))

    def rid(what: str) -> str:
        return f"{what}-{next(n)}"

    for owner, currency in (("alice", "EUR"), ("bob", "EUR"), ("carol", "USD"), ("dave", "EUR")):
        day.accounts[owner] = casino.open_account(
            request_id=rid("acc"), owner=owner, currency=currency
        )
    step()
    acc = day.accounts
    casino.deposit(request_id=rid("dep"), account_id=acc["alice"], amount=10_000)
    casino.deposit(request_id=rid("dep"), account_id=acc["bob"], amount=5_000)
    casino.deposit(request_id=rid("dep"), account_id=acc["carol"], amount=7_000)
    step()
    casino.deposit(request_id=rid("dep"), account_id=acc["dave"], amount=1_000)
    casino.withdraw(request_id=rid("wd"), account_id=acc["bob"], amount=1_500)
    casino.withdraw(request_id=rid("wd"), account_id=acc["dave"], amount=1_000)
    casino.close_account(request_id=rid("close"), account_id=acc["dave"], reason="moved away")
    step()
    for name, currency in (("T1", "EUR"), ("T2", "USD"), ("T3", "EUR")):
        day.tables[name] = casino.open_table(
            request_id=rid("tab"),
            name=name,
            game="coin",
            kind="physical",
            currency=currency,
            limits=LIMITS,
        )
    step()

    def round_on(
        table: str, bets: list[tuple[str, dict[str, str], int]], withdraw: int | None = None
    ) -> str:
        round_id = casino.open_round(request_id=rid("open"), table_id=day.tables[table], dealer="D")
        bet_ids = [
            casino.place_bet(
                request_id=rid("bet"), round_id=round_id, account_id=acc[who], bet=bet, stake=stake
            )
            for who, bet, stake in bets
        ]
        step()
        if withdraw is not None:
            who = bets[withdraw][0]
            casino.withdraw_bet(
                request_id=rid("wb"),
                round_id=round_id,
                account_id=acc[who],
                bet_id=bet_ids[withdraw],
            )
        return round_id

    def decide(round_id: str, face: str) -> None:
        casino.close_betting(request_id=rid("close"), round_id=round_id)
        casino.record_outcome(
            request_id=rid("out"),
            round_id=round_id,
            outcome={"face": face},
            source=seen(node, casino, round_id, {"face": face}),
        )
        step()

    # A win for alice, a loss for bob, a bet withdrawn before the close.
    r1 = round_on("T1", [("alice", HEADS, 300), ("bob", TAILS, 200), ("alice", TAILS, 100)], 2)
    decide(r1, "heads")
    # The coin lands on its edge: every stake pushes.
    r2 = round_on("T1", [("alice", HEADS, 500), ("bob", HEADS, 400)])
    decide(r2, "edge")
    step()
    # USD: one bet lost, one won, after a resume by the operator.
    r3 = round_on("T2", [("carol", HEADS, 1000), ("carol", TAILS, 250)])
    casino.close_betting(request_id=rid("close"), round_id=r3)
    casino.resume_round(
        request_id=rid("resume"), round_id=r3, reason="device restarted", operator=op
    )
    casino.record_outcome(
        request_id=rid("out"),
        round_id=r3,
        outcome={"face": "tails"},
        source=seen(node, casino, r3, {"face": "tails"}),
    )
    step()
    # A void: every stake goes back.
    r4 = round_on("T3", [("alice", HEADS, 200), ("bob", TAILS, 300)])
    casino.close_betting(request_id=rid("close"), round_id=r4)
    casino.void_round(request_id=rid("void"), round_id=r4, reason="dice fell off", operator=op)
    step()
    # A round without bets, settled.
    r5 = round_on("T3", [])
    decide(r5, "tails")
    # Another loss for the player on T1; the house wins.
    r6 = round_on("T1", [("bob", HEADS, 700), ("alice", HEADS, 50)], 1)
    decide(r6, "tails")
    step()
    # A round left open, bets still in play (the dealer's process died).
    r7 = round_on("T1", [("bob", TAILS, 100), ("alice", HEADS, 150)])
    step()
    day.rounds = {"r1": r1, "r2": r2, "r3": r3, "r4": r4, "r5": r5, "r6": r6, "r7": r7}
    day.open_round = r7
    return day


def log_end(node: Node) -> int:
    return int(node.app.recorder.max_notification_id() or 0)


# The read models against the aggregates.


def test_balances_match_the_aggregates(node: Node) -> None:
    day = play_day(node)
    casino = Casino(node.app, COIN_GAMES)
    assert catch_up(node.app) == log_end(node)

    by_name = {(b.account, b.currency): b.balance for b in queries.balances(node.app)}
    house_ids = {name: str(casino.table(t).house_account) for name, t in day.tables.items()}
    for account_id in [*day.accounts.values(), *house_ids.values()]:
        account = casino.account(account_id)
        assert by_name.get((wallet(account_id), account.currency), 0) == account.balance
    # Double entry: every currency sums to zero, over every kind of ledger account.
    assert queries.currency_totals(node.app) == {"EUR": 0, "USD": 0}
    kinds = {name.split(":")[0] for name, _ in by_name}
    assert kinds == {"wallet", "in-play", "cashier"}
    # In play: nothing left in a finished round, the open round's stakes in the open one.
    for key, round_id in day.rounds.items():
        expected = 250 if key == "r7" else 0
        assert by_name.get((in_play(round_id), casino.round(round_id).currency), 0) == expected
    # The cashier paid in what was deposited, less what was withdrawn.
    assert by_name[(cashier("EUR"), "EUR")] == -(10_000 + 5_000 + 1_000 - 1_500 - 1_000)
    assert by_name[(cashier("USD"), "USD")] == -7_000

    totals = {t.account_id: t for t in queries.accounts(node.app)}
    for owner, account_id in day.accounts.items():
        t = totals[account_id]
        assert t.kind == PLAYER and t.owner == casino.account(account_id).owner  # sealed
        assert node.app.personal is not None
        assert node.app.personal.reveal("owner", t.owner) == owner
        assert (
            t.deposits - t.withdrawals - t.staked + t.returned == casino.account(account_id).balance
        )
    alice = totals[day.accounts["alice"]]
    # Staked: 300 (won) + 500 (push) + 200 (voided) + 50 (withdrawn, no) + 150 (open); the
    # bet of 100 was withdrawn.
    assert (alice.deposits, alice.withdrawals, alice.staked) == (10_000, 0, 300 + 500 + 200 + 150)
    assert alice.returned == 600 + 500 + 200
    dave = totals[day.accounts["dave"]]
    assert (dave.status, dave.deposits, dave.withdrawals) == ("closed", 1_000, 1_000)
    assert dave.closed_at is not None
    for house_id in house_ids.values():
        assert (totals[house_id].kind, totals[house_id].staked) == (HOUSE, 0)


def test_round_summaries(node: Node) -> None:
    day = play_day(node)
    catch_up(node.app)
    casino = Casino(node.app, COIN_GAMES)
    summaries = {r.round_id: r for r in queries.rounds(node.app)}
    assert set(summaries) == set(day.rounds.values())
    for round_id, summary in summaries.items():
        game_round = casino.round(round_id)
        assert summary.status == game_round.status
        assert summary.table_id == str(game_round.table_id)
        assert (summary.game, summary.game_version) == ("coin", "1.0")
        assert summary.bets == len(game_round.bets)
        assert summary.stakes == sum(b["stake"] for b in game_round.bets.values())
        assert summary.returned == sum(r["returned"] for r in game_round.results)
        assert summary.opened_at.endswith("+00:00")
    r1 = summaries[day.rounds["r1"]]
    r1_counts = (r1.table_name, r1.bets, r1.bets_withdrawn, r1.stakes, r1.returned)
    assert r1_counts == ("T1", 2, 1, 500, 600)
    assert r1.opened_at <= (r1.betting_closed_at or "") <= (r1.decided_at or "")
    assert (r1.decided_at or "") <= (r1.ended_at or "")
    r4 = summaries[day.rounds["r4"]]
    assert (r4.status, r4.returned, r4.decided_at) == ("voided", 500, None)
    r7 = summaries[day.rounds["r7"]]
    assert (r7.status, r7.ended_at, r7.stakes) == ("betting", None, 250)
    assert [r.round_id for r in queries.rounds(node.app, open_only=True)] == [day.open_round]


def test_house_result_per_table_and_day(node: Node) -> None:
    day = play_day(node)
    catch_up(node.app)
    casino = Casino(node.app, COIN_GAMES)
    expected: dict[tuple[str, str, str], int] = defaultdict(int)
    stakes: dict[tuple[str, str, str], int] = defaultdict(int)
    for round_id in day.rounds.values():
        game_round = casino.round(round_id)
        if game_round.status != SETTLED:
            continue
        key = (str(game_round.table_id), utc_day(game_round.modified_on), game_round.currency)
        expected[key] += sum(r["stake"] - r["returned"] for r in game_round.results)
        stakes[key] += sum(r["stake"] for r in game_round.results)
    results = queries.house_results(node.app)
    assert {(h.table_id, h.day, h.currency): h.result for h in results} == expected
    assert {(h.table_id, h.day, h.currency): h.stakes for h in results} == stakes
    for h in results:
        assert h.result == h.stakes - h.returned
    # T1: r1 (+200 - 300), r2 (push), r6 (+700 lost by bob, alice's bet withdrawn).
    by_table: dict[str, int] = defaultdict(int)
    for h in results:
        by_table[h.table_id] += h.result
    assert by_table[day.tables["T1"]] == 200 - 300 + 700
    assert by_table[day.tables["T2"]] == 1000 - 250
    assert by_table[day.tables["T3"]] == 0  # a void and a round without bets
    rounds_t3 = sum(h.rounds for h in results if h.table_id == day.tables["T3"])
    assert rounds_t3 == 1  # the void is not a settlement
    # The house's wallet holds exactly its results (no deposits on a house).
    for name, table_id in day.tables.items():
        house = casino.account(casino.table(table_id).house_account)
        assert house.balance == by_table[table_id], name


def test_utc_day_of_a_moment_elsewhere() -> None:
    saigon = timezone(timedelta(hours=7))
    assert utc_day(datetime(2025, 3, 2, 5, 30, tzinfo=saigon)) == "2025-03-01"
    assert utc_day(datetime(2025, 3, 1, 23, 59, 59, 999999, tzinfo=UTC)) == "2025-03-01"


# Incremental, rebuilt, crashed, raced: always the same tables.


def test_incremental_catch_up_equals_a_rebuild(node: Node) -> None:
    steps = ProjectionRunner(node.app, batch_size=3)
    positions: list[int] = []

    def step() -> None:
        steps.catch_up()
        positions.append(min(steps.positions().values()))

    play_day(node, step)
    steps.catch_up()
    assert len(set(positions)) > 10  # really caught up in many small steps
    incremental = steps.snapshot()
    assert steps.positions() == dict.fromkeys(("balances", "house", "rounds"), log_end(node))

    one_go = ProjectionRunner(node.app, batch_size=1000)
    assert one_go.rebuild() == log_end(node)
    rebuilt = one_go.snapshot()
    assert rebuilt == incremental
    assert sum(len(rows) for rows in rebuilt.values()) > 40
    # One event per batch, from scratch: the same again.
    assert rebuild(node.app, batch_size=1) == log_end(node)
    assert one_go.snapshot() == incremental


def test_catch_up_twice_changes_nothing(node: Node) -> None:
    play_day(node)
    runner = ProjectionRunner(node.app, batch_size=7)
    runner.catch_up()
    before = runner.snapshot()
    assert runner.catch_up() == 0
    assert ProjectionRunner(node.app).catch_up() == 0
    assert runner.snapshot() == before


class Crash(Exception):
    pass


@pytest.mark.parametrize("after", [20, 61, 150])
def test_crash_mid_transaction_resumes_without_double_counting(
    node: Node, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    play_day(node)
    end = log_end(node)
    original = Tx.execute
    calls = 0

    def crashing(self: Tx, template: str, params: Any = ()) -> None:
        nonlocal calls
        calls += 1
        if calls > after:
            raise Crash(f"statement {calls}")
        original(self, template, params)

    monkeypatch.setattr(Tx, "execute", crashing)
    with pytest.raises(Crash):
        ProjectionRunner(node.app, batch_size=5).catch_up()
    monkeypatch.setattr(Tx, "execute", original)

    resumed = ProjectionRunner(node.app, batch_size=5)
    stopped_at = resumed.positions()
    assert max(stopped_at.values()) < end  # it did stop part way
    assert resumed.catch_up() == end - min(stopped_at.values())
    after_crash = resumed.snapshot()
    resumed.rebuild()
    assert resumed.snapshot() == after_crash


def test_a_killed_process_resumes_exactly_where_it_stopped(node: Node) -> None:
    play_day(node)
    end = log_end(node)
    script = textwrap.dedent(
        """
        import sys, time
        from ledger.node import open_node
        from ledger.projections import ProjectionRunner
        from ledger.projections.sql import Tx

        original = Tx.execute
        def slow(self, template, params=()):
            original(self, template, params)
            time.sleep(0.005)  # long transactions: the kill lands inside one
        Tx.execute = slow
        node = open_node(sys.argv[1], sys.argv[2], writable=False)
        ProjectionRunner(node.app, batch_size=4).catch_up(
            progress=lambda n: print(n, flush=True)
        )
        print("finished", flush=True)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, node.app.store_url, str(node.keys.path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert child.stdout is not None
        committed = [child.stdout.readline() for _ in range(3)]  # three batches committed
        assert all(line.strip() == "4" for line in committed), committed
        threading.Event().wait(0.03)  # well inside the next batch's transaction
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    runner = ProjectionRunner(node.app, batch_size=4)
    stopped_at = runner.positions()
    assert 12 <= min(stopped_at.values()) < end
    assert runner.catch_up() == end - min(stopped_at.values())
    resumed = runner.snapshot()
    runner.rebuild()
    assert runner.snapshot() == resumed


def test_racing_runners_apply_each_event_once(node: Node) -> None:
    play_day(node)
    others = [open_node(node.app.store_url, str(node.keys.path), writable=False) for _ in range(2)]
    errors: list[BaseException] = []

    def run(app_node: Node) -> None:
        try:
            ProjectionRunner(app_node.app, batch_size=2).catch_up()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(other,)) for other in (node, *others)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for other in others:
        other.close()
    assert not errors, errors
    runner = ProjectionRunner(node.app)
    raced = runner.snapshot()
    assert runner.positions() == dict.fromkeys(("balances", "house", "rounds"), log_end(node))
    runner.rebuild()
    assert runner.snapshot() == raced


class Stop(Exception):
    pass


def test_a_runner_with_stale_positions_is_overtaken_not_applied(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    play_day(node)
    first, late = ProjectionRunner(node.app, batch_size=5), ProjectionRunner(node.app, batch_size=5)
    first.setup()
    stale = late.positions()  # read before the first runner's batch...

    def stop(_: int) -> None:
        raise Stop  # ...which commits exactly one batch, the very one `late` will read

    with pytest.raises(Stop):
        first.catch_up(progress=stop)
    assert set(first.positions().values()) == {5}
    reads = iter([stale])
    fresh = late.positions
    monkeypatch.setattr(late, "positions", lambda: next(reads, None) or fresh())
    assert late.catch_up() == log_end(node) - 5  # the stale batch was rolled back, not counted
    raced = late.snapshot()
    late.rebuild()
    assert late.snapshot() == raced


def test_a_projection_added_later_starts_from_the_first_event(node: Node) -> None:
    day = play_day(node)
    assert catch_up(node.app, [Balances()], batch_size=10) == log_end(node)
    casino = Casino(node.app, COIN_GAMES)
    casino.deposit(request_id="late", account_id=day.accounts["alice"], amount=5)
    full = ProjectionRunner(node.app, batch_size=10)
    full.catch_up()
    both = full.snapshot()
    full.rebuild()
    assert full.snapshot() == both


def test_rebuild_repairs_edited_rows_and_other_events_are_skipped(node: Node) -> None:
    # Events no projection reads (a simulated table's dice) only move the positions.
    table = Table(name="sim", dealer="D9")
    table.throw_dice([1, 2, 3])
    node.app.save(table)
    day = play_day(node)
    runner = ProjectionRunner(node.app)
    runner.catch_up()
    good = runner.snapshot()
    # Projection tables are not event tables: no trigger stops an edit, or a drop.
    with runner.sql.write() as tx:
        tx.execute(
            "UPDATE {proj_balances} SET balance = balance + 1 WHERE account = %s",
            (wallet(day.accounts["alice"]),),
        )
        tx.execute("DELETE FROM {proj_rounds} WHERE round_id = %s", (day.open_round,))
    assert runner.snapshot() != good
    runner.rebuild()
    assert runner.snapshot() == good


def test_a_projection_an_earlier_release_built_is_rebuilt_from_the_events(node: Node) -> None:
    """A read model whose table has other columns than the code declares (the
    rounds' `game`, `variant` before issue 39) is dropped and rebuilt by the
    next setup; `verify --projections` says so until then. The others stay."""
    play_day(node)
    runner = ProjectionRunner(node.app, batch_size=10)
    runner.catch_up()
    good = runner.snapshot()
    assert runner.built_before() == []
    with runner.sql.write() as tx:  # as the release before left it
        for table in ("proj_rounds", "proj_tables"):
            tx.execute(f"ALTER TABLE {{{table}}} RENAME COLUMN game TO variant")
        tx.execute("UPDATE {proj_balances} SET balance = balance + 1")  # not rebuilt: kept
    assert runner.built_before() == ["rounds"]
    with pytest.raises(CannotCheckError, match="rounds were built by an earlier release"):
        verify_projections(node.app)
    edited = runner.snapshot()["proj_balances"]
    again = ProjectionRunner(node.app, batch_size=10)
    assert again.catch_up() == log_end(node)  # the rounds read the whole log again
    assert again.built_before() == []
    found = again.snapshot()
    assert {t: rows for t, rows in found.items() if t != "proj_balances"} == {
        t: rows for t, rows in good.items() if t != "proj_balances"
    }
    assert found["proj_balances"] == edited  # only the projection built before was rebuilt
    assert again.catch_up() == 0


def test_a_forged_event_stops_the_projections_before_it(node: Node) -> None:
    day = play_day(node)
    runner = ProjectionRunner(node.app, batch_size=1)
    attacker = Attacker(node.app.store_url)
    try:
        deposit_id, _, _, _, state = attacker.row(day.accounts["bob"], 2)  # bob's deposit
        attacker.set_state(day.accounts["bob"], 2, state[:-2] + b"9" + state[-1:])
    finally:
        attacker.close()
    with pytest.raises(VerificationError):
        runner.catch_up()
    assert set(runner.positions().values()) == {deposit_id - 1}


def test_runner_settings_are_checked(node: Node) -> None:
    with pytest.raises(ConfigError):
        ProjectionRunner(node.app, batch_size=0)
    with pytest.raises(ConfigError):
        ProjectionRunner(node.app, [Balances(), Balances()])
    assert [p.name for p in ProjectionRunner(node.app).projections] == sorted(
        p.name for p in default_projections()
    )


def test_follow_until_stopped(node: Node) -> None:
    day = play_day(node)
    runner = ProjectionRunner(node.app, batch_size=50)
    polls = iter(range(3))
    runner.follow(poll_seconds=0.01, stop=lambda: next(polls, None) is None)
    assert min(runner.positions().values()) == log_end(node)
    assert [r.round_id for r in queries.rounds(node.app, open_only=True)] == [day.open_round]


# The command line: read-only, no passphrase needed.


@pytest.fixture
def cli(
    node: Node, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Callable[..., tuple[int, str, str]]]:
    monkeypatch.delenv("LEDGER_PASSPHRASE", raising=False)  # read-only: never asked

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), *argv])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return code, captured.out, captured.err

    yield run


def round_ids(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()[1:] if line.strip()]


def test_cli_rounds_open_lists_exactly_the_open_round(
    node: Node, cli: Callable[..., tuple[int, str, str]]
) -> None:
    day = play_day(node)
    # Not built yet: listing catches the projections up first (issue 8, item 9).
    code, out, err = cli("rounds", "--open")
    assert (code, err) == (0, "")
    assert round_ids(out) == [day.open_round]
    (row,) = out.splitlines()[1:]
    # Status, table, game, bets, stakes and returns in major units, currency.
    assert row.split()[1:8] == ["betting", "T1", "coin", "2", "2.50", "0.00", "EUR"]
    code, out, _ = cli("rounds")
    assert sorted(round_ids(out)) == sorted(day.rounds.values())
    # Settle the open round: the projections are behind until updated.
    casino = Casino(node.app, COIN_GAMES)
    casino.void_round(
        request_id="void-r7", round_id=day.open_round, reason="shift over", operator=operator(node)
    )
    # Voided since the last listing: the next listing catches up, no update needed.
    code, out, err = cli("rounds", "--open")
    assert (code, round_ids(out), err) == (0, [], "no open rounds\n")
    code, out, _ = cli("projections", "update")
    assert code == 0 and f"notification {log_end(node)}" in out


def test_cli_balances_and_rebuild(node: Node, cli: Callable[..., tuple[int, str, str]]) -> None:
    day = play_day(node)
    code, out, _ = cli("projections", "rebuild")
    assert code == 0 and "events/s" in out and f"from {log_end(node)} events" in out
    code, out, _ = cli("balances")
    assert code == 0
    assert "total EUR: 0.00 " in out and "total USD: 0.00 " in out
    assert cashier("USD") in out and in_play(day.open_round) in out
    alice_balance = Casino(node.app, COIN_GAMES).account(day.accounts["alice"]).balance
    code, out, _ = cli("balances", day.accounts["alice"])
    assert code == 0
    major = f"{alice_balance // 100:,}.{alice_balance % 100:02d}"  # EUR: 2 decimals
    assert "owner        [sealed]" in out and f"balance      {major}\n" in out
    code, out, err = cli("balances", day.accounts["alice"], "--reveal")  # no passphrase given
    assert code == 2 and "passphrase" in err and "alice" not in out
    os.environ["LEDGER_PASSPHRASE"] = PASSPHRASE.decode()  # the cli fixture's monkeypatch undoes it
    code, out, _ = cli("balances", day.accounts["alice"], "--reveal")  # personal data, asked
    assert code == 0 and "owner        alice" in out
    code, out, _ = cli("balances", "cashier:EUR")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["cashier:EUR", "EUR", "-135.00"]
    code, out, _ = cli("balances", day.open_round)
    assert code == 0 and out.splitlines()[1].split()[2] == "2.50"
    code, _, err = cli("balances", "nobody")
    assert code == 2 and "no ledger account 'nobody'" in err


# Corrections, and `verify --projections`.


def corrected_round(node: Node) -> tuple[Casino, dict[str, str], str, str]:
    """Alice bets heads, Bob tails; recorded heads, settled, then corrected to tails."""
    casino = Casino(node.app, COIN_GAMES)
    who = {}
    for owner in ("alice", "bob"):
        who[owner] = casino.open_account(request_id=f"acc-{owner}", owner=owner, currency="EUR")
        casino.deposit(request_id=f"dep-{owner}", account_id=who[owner], amount=1_000)
    table = casino.open_table(
        request_id="tab", name="T1", game="coin", kind="physical", currency="EUR", limits=LIMITS
    )
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b1", round_id=round_id, account_id=who["alice"], bet=HEADS, stake=300
    )
    casino.place_bet(
        request_id="b2", round_id=round_id, account_id=who["bob"], bet=TAILS, stake=200
    )
    casino.close_betting(request_id="c", round_id=round_id)
    casino.record_outcome(
        request_id="o",
        round_id=round_id,
        outcome={"face": "heads"},
        source=seen(node, casino, round_id, {"face": "heads"}),
    )
    catch_up(node.app)  # the projections saw the first settlement
    casino.correct(
        request_id="fix",
        round_id=round_id,
        outcome={"face": "tails"},
        reason="the camera shows tails",
        operator=operator(node),
    )
    return casino, who, table, round_id


def test_a_correction_moves_the_read_models_as_it_moves_the_money(node: Node) -> None:
    casino, who, table, round_id = corrected_round(node)
    catch_up(node.app)
    house = str(casino.table(table).house_account)
    # The wallets: Alice's win taken back, Bob paid; the house won 100 instead of losing 100.
    assert [casino.account(who[o]).balance for o in ("alice", "bob")] == [700, 1_200]
    assert casino.account(house).balance == 100
    by_name = {b.account: b.balance for b in queries.balances(node.app)}
    for account_id in (*who.values(), house):
        assert by_name[wallet(account_id)] == casino.account(account_id).balance
    assert by_name[in_play(round_id)] == 0
    for totals in queries.accounts(node.app):
        if totals.kind == PLAYER:
            balance = totals.deposits - totals.withdrawals - totals.staked + totals.returned
            assert balance == casino.account(totals.account_id).balance
    (summary,) = queries.rounds(node.app)
    assert (summary.status, summary.stakes, summary.returned) == (SETTLED, 500, 400)
    runner = ProjectionRunner(node.app)
    with runner.sql.read() as tx:
        bets = sorted(tx.rows("SELECT account_id, returned FROM {proj_round_bets}"))
    assert bets == sorted([(who["alice"], 0), (who["bob"], 400)])
    (result,) = queries.house_results(node.app)
    assert (result.rounds, result.stakes, result.returned, result.result) == (1, 500, 400, 100)
    # The same rows whether followed step by step or rebuilt, and they match the events.
    followed = runner.snapshot()
    runner.rebuild()
    assert runner.snapshot() == followed
    report = verify_projections(node.app)
    assert report.tables == 7 and report.rows > 0
    assert "projections match the events" in report.summary()
    assert "behind" not in report.summary()


def test_verify_projections_names_every_edited_row(node: Node) -> None:
    day = play_day(node)
    catch_up(node.app)
    verify_projections(node.app)
    alice = day.accounts["alice"]
    attacker = Attacker(node.app.store_url)  # no trigger guards proj_ tables anyway
    try:
        attacker.sql(
            "UPDATE proj_balances SET balance = balance + 5 WHERE account = ?", (wallet(alice),)
        )
        attacker.sql("DELETE FROM proj_rounds WHERE round_id = ?", (day.open_round,))
        attacker.sql("UPDATE proj_house_results SET result = result - 1")
    finally:
        attacker.close()
    with pytest.raises(VerificationError) as caught:
        verify_projections(node.app)
    message = str(caught.value)
    balance = Casino(node.app, COIN_GAMES).account(alice).balance
    assert (
        f"proj_balances {wallet(alice)}/EUR: balance is {balance + 5}, the events say " in message
    )
    assert f"proj_rounds {day.open_round}: missing (the events make it)" in message
    assert "proj_house_results " in message and ": result is " in message
    houses = len(queries.house_results(node.app))
    assert message.startswith(f"{2 + houses} differences between the read models and the events")
    ProjectionRunner(node.app).rebuild()
    verify_projections(node.app)


def test_verify_projections_at_their_own_position(node: Node) -> None:
    day = play_day(node)
    runner = ProjectionRunner(node.app)
    runner.catch_up()
    Casino(node.app, COIN_GAMES).void_round(
        request_id="void-r7", round_id=day.open_round, reason="shift over", operator=operator(node)
    )
    # Behind the log: compared where they stand, and said so; not a difference.
    report = verify_projections(node.app)
    assert "they are behind the log" in report.summary()
    # A tracking row moved back claims fewer events than the rows hold: caught.
    with runner.sql.write() as tx:
        tx.execute("UPDATE {proj_tracking} SET last_id = 3 WHERE projection = 'rounds'")
    with pytest.raises(VerificationError, match=r"differences between the read models"):
        verify_projections(node.app)
    with runner.sql.write() as tx:
        tx.execute("UPDATE {proj_tracking} SET last_id = %s", (log_end(node) + 10,))
    with pytest.raises(VerificationError, match=r"past its end"):
        verify_projections(node.app)


def test_cli_verify_projections(node: Node, cli: Callable[..., tuple[int, str, str]]) -> None:
    day = play_day(node)
    code, _, err = cli("verify", "--level", "signatures", "--projections")
    assert code == 2 and "projections are not built" in err
    cli("projections", "update")
    code, out, err = cli("verify", "--level", "signatures", "--projections")
    assert (code, err) == (0, "") and "OK: projections match the events" in out
    with ProjectionRunner(node.app).sql.write() as tx:
        tx.execute(
            "UPDATE {proj_accounts} SET returned = 0 WHERE account_id = %s",
            (day.accounts["alice"],),
        )
    code, out, err = cli("verify", "--level", "signatures", "--projections")
    assert code == 1 and err.count("\n") == 1
    assert f"proj_accounts {day.accounts['alice']}: returned is 0, the events say 1300" in err
