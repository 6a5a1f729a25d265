"""Rounds end to end (open, 10 bets from 10 wallets, close, the outcome that settles)
through the Casino API on the sealed store, vs plain eventsourcing appending
the same number of events in the same number of saves, in the same run; and
the projections' rebuild rate over the log the rounds made. Then Xì dách
rounds (5 players) at a physical table the same way: every card and every
decision a dealer device's signed report through `Casino.act`, the moves
chosen by the plugin's simple strategies.

    .venv/bin/python tools/bench_rounds.py [--store sqlite|postgres|both]
        [--rounds 300] [--repeats 5]
"""

from __future__ import annotations

import gc
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _benchlib as bench

NAME = "bench_rounds"
TARGET = 0.4
PLAYERS = 10
LIMITS = {"min_bet": 10, "max_bet": 10_000, "max_round": 10_000}


@dataclass
class Floor:
    """A physical table with funded wallets on a sealed store, every save's size counted."""

    app: Any
    casino: Any
    device: Any
    wallets: list[str]
    table: str
    sizes: list[int]


def open_floor(url: str, keys: bench.Keys, games: Any, game_id: str, players: int) -> Floor:
    from ledger.casino import Casino
    from ledger.crypto.keys import Role
    from ledger.crypto.keystore import KeyDirectory
    from ledger.devices import DealerDevice
    from ledger.privacy.personal import PersonalData
    from ledger.store.application import LedgerApplication

    # A physical table: every outcome is a dealer device's signed report.
    directory = KeyDirectory(keys.path)
    if not directory.keyring().with_role(Role.DEALER_DEVICE):
        directory.create("bench-device", Role.DEALER_DEVICE, None)
    device = DealerDevice(directory.signer(Role.DEALER_DEVICE, None))
    app = LedgerApplication(
        url,
        keyring=directory.keyring(),
        signer=keys.node_signer,
        personal=PersonalData(directory.path, None),  # owners and dealers sealed, as a node does
    )
    try:
        casino = Casino(app, games)
        wallets = []
        for p in range(players):
            wallet = casino.open_account(request_id=f"acc-{p}", owner=f"p{p}", currency="EUR")
            casino.deposit(request_id=f"dep-{p}", account_id=wallet, amount=10**9)
            wallets.append(wallet)
        table = casino.open_table(
            request_id="table",
            name="T1",
            game=game_id,
            kind="physical",
            currency="EUR",
            limits=LIMITS,
        )
    except BaseException:
        app.close()
        raise
    # Every committed save's size, the command runner's batches included (they
    # do not go through `save`): the application tells its listeners of each.
    sizes: list[int] = []
    app.on_recorded.append(sizes.append)
    return Floor(app, casino, device, wallets, table, sizes)


def play_rounds(url: str, keys: bench.Keys, rounds: int) -> tuple[float, list[int], float]:
    """(rounds/s, the size of every save, projection rebuild events/s)."""
    from ledger.projections import rebuild
    from ledger.store.application import LedgerApplication
    from tests.coin_game import COIN_GAMES

    floor = open_floor(url, keys, COIN_GAMES, "coin", PLAYERS)
    app, casino, device, wallets, table = (
        floor.app,
        floor.casino,
        floor.device,
        floor.wallets,
        floor.table,
    )
    try:
        gc.collect()
        with bench.progress("rounds", rounds) as advance:
            started = time.perf_counter()
            for r in range(rounds):
                round_id = casino.open_round(request_id=f"r{r}", table_id=table, dealer="D1")
                for p, wallet in enumerate(wallets):
                    casino.place_bet(
                        request_id=f"r{r}-b{p}",
                        round_id=round_id,
                        account_id=wallet,
                        bet={"on": "heads" if (r + p) % 2 else "tails"},
                        stake=100 + p,
                    )
                casino.close_betting(request_id=f"r{r}-c", round_id=round_id)
                face = "heads" if r % 3 else "tails"
                casino.record_outcome(
                    request_id=f"r{r}-o",
                    round_id=round_id,
                    outcome={"face": face},
                    source=device.throw(round_id, 0, {"face": face}),
                )
                advance(1)
            elapsed = time.perf_counter() - started
        events, _ = app.tables.event_count()
    finally:
        app.close()
    # Rebuild as a separate projection process would: a fresh application that
    # verifies every envelope it reads (none were sealed by it).
    reader = LedgerApplication(url, keyring=keys.keyring)
    try:
        started = time.perf_counter()
        rebuild(reader)
        rebuild_rate = events / (time.perf_counter() - started)
    finally:
        reader.close()
    return rounds / elapsed, floor.sizes, rebuild_rate


XIDACH_SEATS = 5


def play_xidach_rounds(url: str, keys: bench.Keys, rounds: int) -> tuple[float, list[int]]:
    """(rounds/s, the size of every save) for Xì dách rounds of 5 players."""
    import random

    from ledger_xidach.profile_files import PROFILES
    from ledger_xidach.strategy import DealerStrategy, PlayerStrategy
    from ledger_xidach.table import DEALER, Round, seat_actor

    from ledger.plugins.manager import get_plugin_manager

    floor = open_floor(url, keys, get_plugin_manager().games(), "xidach", XIDACH_SEATS)
    app, casino, device, wallets, table = (
        floor.app,
        floor.casino,
        floor.device,
        floor.wallets,
        floor.table,
    )
    rules, player, dealer = PROFILES["xidach"], PlayerStrategy(), DealerStrategy()
    try:
        gc.collect()
        with bench.progress("xidach rounds", rounds) as advance:
            started = time.perf_counter()
            for r in range(rounds):
                round_id = casino.open_round(request_id=f"x{r}", table_id=table, dealer="D1")
                seats = {}
                for p, wallet in enumerate(wallets):
                    stake = 100 + p
                    seats[p + 1] = (
                        casino.place_bet(
                            request_id=f"x{r}-b{p}",
                            round_id=round_id,
                            account_id=wallet,
                            bet={"bet": f"seat:{p + 1}"},
                            stake=stake,
                        ),
                        stake,
                    )
                replica = Round(rules, seats)
                shoe = list(range(52))
                random.Random(r).shuffle(shoe)
                step = 0
                while moves := replica.moves():
                    if replica.turn is not None:
                        actor = seat_actor(replica.turn)
                        action = player.choose(replica.scores[replica.turn], moves[actor])
                    elif replica.phase != "play":
                        actor, action = DEALER, next(iter(moves[DEALER]))
                    else:
                        actor, action = DEALER, dealer.choose(replica, moves[DEALER])
                    draw = moves[actor][action]
                    cards, shoe = (
                        shoe[: draw["count"] if draw else 0],
                        shoe[draw["count"] if draw else 0 :],
                    )
                    casino.act(
                        request_id=f"x{r}-a{step}",
                        round_id=round_id,
                        actor=actor,
                        action=action,
                        source=device.act(round_id, step, actor, action, {}, cards),
                    )
                    replica.apply(actor, action, cards)
                    step += 1
                advance(1)
            elapsed = time.perf_counter() - started
    finally:
        app.close()
    return rounds / elapsed, floor.sizes


def plain_appends(url: str, sizes: list[int]) -> float:
    """Seconds for plain eventsourcing to append saves of exactly these sizes."""
    from eventsourcing.application import Application

    from tests.demo_table import Table

    batches = []
    for size in sizes:
        table = Table(name="T", dealer="D")
        for _ in range(size - 1):
            table.throw_dice([1, 2, 3])
        batches.append(list(table.collect_events()))
    app: Application[Any] = Application(env=bench.plain_env(url))
    try:
        gc.collect()
        with bench.progress("plain", len(batches)) as advance:
            started = time.perf_counter()
            for batch in batches:
                app.save(*batch)
                advance(1)
            return time.perf_counter() - started
    finally:
        app.close()


def main() -> int:
    p = bench.parser(__doc__.splitlines()[0], events=0)
    p.add_argument("--rounds", type=int, default=300, help="rounds per run (default 300)")
    args = p.parse_args()
    print(bench.machine_line())
    print(f"{args.rounds} rounds of {PLAYERS} bets per run, median of {args.repeats} runs")
    comparisons, measures = [], []
    with bench.temp_dir() as workdir:
        keys = bench.make_keys(workdir)
        for kind in bench.stores(args.store):
            c = bench.Comparison(
                kind,
                "rounds end to end",
                "plain appends (same events, same saves)",
                "Casino rounds",
                "events/s",
                TARGET,
            )
            m = bench.Measure(kind, "projection rebuild", "events/s", None)
            for run in range(args.repeats):
                with bench.fresh_store(kind, workdir) as url:
                    rate, sizes, rebuild_rate = play_rounds(url, keys, args.rounds)
                with bench.fresh_store(kind, workdir) as url:
                    plain_seconds = plain_appends(url, sizes)
                events = sum(sizes)
                round_events = events / (args.rounds / rate)
                c.add(events / plain_seconds, round_events)
                m.runs.append(rebuild_rate)
                bench.note(
                    f"{kind} run {run + 1}: {rate:,.1f} rounds/s ({round_events:,.0f} ev/s), "
                    f"plain {events / plain_seconds:,.0f} ev/s, rebuild {rebuild_rate:,.0f} ev/s"
                )
            per_round = sum(sizes) / args.rounds
            c.notes.append(
                f"{per_round:.1f} events and {len(sizes) / args.rounds:.1f} saves per round; "
                f"median {c.subject_median / per_round:,.1f} rounds/s"
            )
            comparisons.append(c)
            measures.append(m)
            x = bench.Comparison(
                kind,
                f"Xì dách rounds ({XIDACH_SEATS} players) end to end",
                "plain appends (same events, same saves)",
                "Casino.act rounds",
                "events/s",
                None,  # informational: reported, no target yet
            )
            for run in range(args.repeats):
                with bench.fresh_store(kind, workdir) as url:
                    rate, sizes = play_xidach_rounds(url, keys, args.rounds)
                with bench.fresh_store(kind, workdir) as url:
                    plain_seconds = plain_appends(url, sizes)
                events = sum(sizes)
                round_events = events / (args.rounds / rate)
                x.add(events / plain_seconds, round_events)
                bench.note(
                    f"{kind} xì dách run {run + 1}: {rate:,.1f} rounds/s "
                    f"({round_events:,.0f} ev/s), plain {events / plain_seconds:,.0f} ev/s"
                )
            per_round = sum(sizes) / args.rounds
            x.notes.append(
                f"Xì dách: {per_round:.1f} events and {len(sizes) / args.rounds:.1f} saves per "
                f"round; median {x.subject_median / per_round:,.1f} rounds/s"
            )
            comparisons.append(x)
    print()
    print(bench.comparison_table(comparisons))
    print()
    print(bench.measure_table(measures))
    for c in comparisons:
        for line in c.notes:
            print(f"{c.store}: {line}")
    path = bench.write_results(NAME, args, comparisons, measures)
    if path:
        print(f"\nwrote {path.relative_to(bench.TOOLS.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
