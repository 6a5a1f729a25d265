"""`ledger simulate`: a casino session recorded, verified and summarised.

Every number the summary prints is checked against the store: per bet family
and per table, stakes and returns re-derived from the recorded events, and
the projections' house results and round statuses.
"""

from __future__ import annotations

import io
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pytest
from ledger_taixiu.families import FAMILIES, family_of

from ledger.casino import Casino
from ledger.cli.main import main
from ledger.crypto.keystore import KeyDirectory
from ledger.domain.game_table import GameTable
from ledger.domain.round import Round
from ledger.errors import ConfigError
from ledger.node import Node, open_node
from ledger.plugins.manager import get_plugin_manager
from ledger.projections import ProjectionRunner, queries
from ledger.simulation import (
    SessionConfig,
    default_tables,
    dice_source,
    parse_seed,
    percent,
    run_session,
)
from ledger.simulation.device import simulated_device
from ledger.simulation.session import Session
from tests.casino_support import domain_events
from tests.conftest import PASSPHRASE
from tests.reproducible import reproducible_session

RNG_SEED = "5e" * 32


@dataclass
class Totals:
    bets: int = 0
    staked: int = 0
    returned: int = 0


@dataclass
class TableLine:
    dice: str  # rng or device
    rounds: int
    voided: int
    faults: int
    bets: int
    turnover: int
    house: int


def number(text: str) -> int:
    return int(text.replace(",", ""))


def simulate(capsys: pytest.CaptureFixture[str], store: str, keys: Path, *argv: str) -> str:
    code = main(["--store", store, "--keys", str(keys), "simulate", *argv])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    return out


def section(out: str, header: str) -> list[str]:
    """The lines of the table whose header starts with `header`, up to a blank line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header)) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def printed_families(out: str) -> dict[str, Totals]:
    found = {}
    for line in section(out, "bet family"):
        match = re.match(r"^(.+?)\s{2,}([\d,]+)\s+([\d,]+)\s+([\d,]+)\s", line)
        if match:
            found[match[1]] = Totals(number(match[2]), number(match[3]), number(match[4]))
    return found


def printed_tables(out: str) -> dict[str, TableLine]:
    found = {}
    for line in section(out, "table "):
        fields = line.split()
        if fields[0] == "all":
            continue
        rounds, voided, faults, bets, turnover, house = (number(f) for f in fields[4:10])
        found[fields[0]] = TableLine(fields[2], rounds, voided, faults, bets, turnover, house)
    return found


def summary_block(out: str) -> list[str]:
    """The session's summary: everything from `session:` to the returns' footnote."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("session: "))
    end = next(i for i, line in enumerate(lines) if line.startswith("(return = "))
    return lines[start : end + 1]


@dataclass
class FromEvents:
    families: dict[str, Totals]
    tables: dict[str, TableLine]
    game_of: dict[str, str]  # table name -> game
    settlements: int  # Round.Settled events: a dice round's one, a card round's steps


def printed_games(out: str) -> dict[str, tuple[int, int, int, int]]:
    """game -> (rounds, bets, turnover, house result) as printed."""
    found = {}
    for line in section(out, "game "):
        name, rounds, bets, turnover, house, _ = line.split()
        found[name] = (number(rounds), number(bets), number(turnover), number(house))
    return found


def from_events(node: Node) -> FromEvents:
    """Per family and per table, re-derived from the recorded events alone."""
    names: dict[str, str] = {}
    table_of: dict[str, str] = {}
    bet_of: dict[tuple[str, str], str] = {}
    families = {family: Totals() for family in FAMILIES}
    tables: dict[str, TableLine] = {}
    game_of: dict[str, str] = {}
    settlements = 0
    for _, event in domain_events(node.app):
        stream = str(event.originator_id)
        if isinstance(event, GameTable.Opened):
            names[stream] = event.name
            game_of[event.name] = event.game
        elif isinstance(event, Round.ActionRecorded):
            # A card round: every card drawn from the table's kind of source, and
            # at a physical table every action (cards and decisions) a device's.
            # A dice round too: the throw is its action, and faults are actions.
            kind = tables[table_of[stream]].dice
            if event.action == "close_betting" and kind == "device":
                # Closing betting while it is open may be the node's own command.
                assert event.source["kind"] in ("command", "device"), event.source
            elif event.drawn or kind == "device":
                assert event.source["kind"] == kind, event.source
            if event.action == "fault":
                assert event.source["kind"] == kind == "device"
                tables[table_of[stream]].faults += 1
        elif isinstance(event, Round.Opened):
            table_of[stream] = names[str(event.table_id)]
            # A round on an RNG table names the committed seed it draws from.
            dice = "device" if event.seed_id is None else "rng"
            line = tables.setdefault(table_of[stream], TableLine(dice, 0, 0, 0, 0, 0, 0))
            assert line.dice == dice, "a table changed kind mid-session"
        elif isinstance(event, Round.OutcomeRecorded):
            assert event.source["kind"] == tables[table_of[stream]].dice
        elif isinstance(event, Round.BetPlaced):
            bet_of[stream, event.bet_id] = event.bet.get("bet", "")  # a card seat: no family
        elif isinstance(event, Round.FaultRecorded):
            assert event.source["kind"] == tables[table_of[stream]].dice == "device"
            tables[table_of[stream]].faults += 1
        elif isinstance(event, Round.Voided):
            tables[table_of[stream]].rounds += 1
            tables[table_of[stream]].voided += 1
        elif isinstance(event, Round.Settled):
            settlements += 1
            table = tables[table_of[stream]]
            table.rounds += event.over  # a card round settles a few bets at a time
            for result in event.results:
                kind = bet_of[stream, result["bet_id"]]
                if kind:
                    family = families[family_of(kind)]
                    family.bets += 1
                    family.staked += result["stake"]
                    family.returned += result["returned"]
                table.bets += 1
                table.turnover += result["stake"]
                table.house += result["stake"] - result["returned"]
    return FromEvents(families, tables, game_of, settlements)


def check_against_the_store(out: str, store: str, keys: Path) -> None:
    node = open_node(store, str(keys), writable=False)
    try:
        # The printed per-family and per-table numbers are the events'.
        derived = from_events(node)
        families = printed_families(out)
        for family in FAMILIES:
            assert families[family] == derived.families[family], family
        assert families["all"] == Totals(
            sum(t.bets for t in derived.families.values()),
            sum(t.staked for t in derived.families.values()),
            sum(t.returned for t in derived.families.values()),
        )
        tables = printed_tables(out)
        assert set(tables) == {"TX-1", "SB-1", "TX-2", "SB-2", "XD-1", "XD-2"}
        assert tables == derived.tables
        assert {n for n, t in tables.items() if t.dice == "device"} == {"SB-1", "TX-2", "XD-2"}
        assert tables["XD-1"].bets > 0 and tables["XD-2"].bets > 0
        # Per game: the sums of its tables' lines.
        games: dict[str, tuple[int, int, int, int]] = {}
        for name, line in tables.items():
            rounds, bets, turnover, house = games.get(derived.game_of[name], (0, 0, 0, 0))
            games[derived.game_of[name]] = (
                rounds + line.rounds,
                bets + line.bets,
                turnover + line.turnover,
                house + line.house,
            )
        assert printed_games(out) == games
        assert set(games) == {"taixiu", "sicbo-void", "xidach"}
        assert all(t.faults == 0 for t in tables.values() if t.dice == "rng")
        assert sum(t.staked for t in families.values()) > 0

        # And the projections' (brought up to date by simulate itself).
        assert not ProjectionRunner(node.app).status().behind
        table_names = {r.table_id: r.table_name for r in queries.rounds(node.app)}
        house: dict[str, Counter[str]] = defaultdict(Counter)
        for row in queries.house_results(node.app):
            house[str(table_names[row.table_id])].update(
                {"rounds": row.rounds, "bets": row.bets, "stakes": row.stakes, "result": row.result}
            )
        statuses = Counter((r.table_name, r.status) for r in queries.rounds(node.app))
        for name, line in tables.items():
            assert house[name]["rounds"] == line.rounds - line.voided
            assert house[name]["bets"] == line.bets
            assert house[name]["stakes"] == line.turnover
            assert house[name]["result"] == line.house
            assert statuses[name, "voided"] == line.voided
            assert statuses[name, "settled"] == line.rounds - line.voided
    finally:
        node.close()


@pytest.fixture
def passphrase(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))


# The CLI, on SQLite and PostgreSQL.


@pytest.mark.usefixtures("passphrase")
def test_a_session_verifies_and_its_summary_is_the_stores(
    store_url: str, keys: KeyDirectory, capsys: pytest.CaptureFixture[str]
) -> None:
    with reproducible_session(11) as seeds:
        out = simulate(capsys, store_url, keys.path, "--rounds", "30", *seeds)
    assert re.search(r"^recorded \d+ sealed events in ", out, re.MULTILINE)
    rounds = re.search(r"^rounds: 30 \((\d+) settled, (\d+) voided\)", out, re.MULTILINE)
    assert rounds, out
    assert re.search(r"^OK: \d+ events in .* at level settlement", out, re.MULTILINE)
    tables = printed_tables(out)
    # Every RNG throw recomputed from its round's seed (all revealed at the end);
    # every shaken throw and fault reported by the signed dealer device; every
    # card at a Xì dách RNG table recomputed from its round's deck, and every
    # card and decision at a physical one reported by the device.
    dice = {n: t for n, t in tables.items() if not n.startswith("XD")}
    rng = sum(t.rounds for t in dice.values() if t.dice == "rng")
    shaken = sum(t.rounds - t.voided + t.faults for t in dice.values() if t.dice == "device")
    cards = re.search(r"^turns: 2 tables \(xidach\); (\d+) moves at physical", out, re.MULTILINE)
    assert cards and int(cards[1]) > 0
    assert rng > 0 and shaken > 0
    assert (
        f"   9 sources: {rng} RNG dice draws recomputed from their round's committed seed; " in out
    )
    assert f"; {shaken + int(cards[1])} dealer device reports verified" in out
    assert re.search(r"; [1-9]\d* RNG card draws recomputed", out), out
    assert "NOT CHECKED" not in out
    assert f"{shaken} draws reported by a signed dealer device" in out
    node = open_node(store_url, str(keys.path), writable=False)
    try:
        settlements = from_events(node).settlements
    finally:
        node.close()
    assert f"   11 payouts: {settlements} settlements re-settled with their own game and " in out
    assert settlements > int(rounds[1])  # Xì dách rounds settle seat by seat
    check_against_the_store(out, store_url, keys.path)


@pytest.mark.usefixtures("passphrase")
def test_a_high_fault_rate_reopens_betting_and_voids_rounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'ledger.db'}"
    with reproducible_session(3) as seeds:
        out = simulate(
            capsys, store, tmp_path / "keys", "--rounds", "30", "--fault-rate", "60", *seeds
        )
    faults = re.search(
        r"^rounds: 30 \(\d+ settled, (\d+) voided\); faulty draws: (\d+) "
        r"\((\d+) reopened betting\)",
        out,
        re.MULTILINE,
    )
    assert faults, out
    voided, thrown_bad, reopened = int(faults[1]), int(faults[2]), int(faults[3])
    assert voided > 0 and thrown_bad > voided and reopened > 0
    tables = printed_tables(out)
    # Both profiles' policies happened: taixiu voids on the second fault,
    # sicbo-void reopens betting and voids on the third.
    assert any(line.voided for name, line in tables.items() if name.startswith("TX"))
    assert any(line.voided for name, line in tables.items() if name.startswith("SB"))
    assert "OK: " in out
    check_against_the_store(out, store, tmp_path / "keys")


@pytest.mark.usefixtures("passphrase")
def test_fixed_seeds_give_the_same_session_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # RNG draws are bound to the round's ledger id (a random UUID), so
    # reproducible_session makes the ids reproducible too; then --seed and
    # --rng-seed fix the rest.
    outputs = []
    for run in ("one", "two"):
        store = f"sqlite:///{tmp_path / f'{run}.db'}"
        with reproducible_session(99) as seeds:
            argv = ("--rounds", "20", "--fault-rate", "20", *seeds)
            outputs.append(simulate(capsys, store, tmp_path / "keys", *argv))
    first, second = outputs
    assert summary_block(first) == summary_block(second)
    recorded = [re.search(r"^recorded \d+ sealed events", out, re.MULTILINE) for out in outputs]
    assert recorded[0] and recorded[1] and recorded[0][0] == recorded[1][0]
    assert "seed 99" in summary_block(first)[0]


@pytest.mark.usefixtures("passphrase")
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--rounds", "0"], "--rounds must be"),
        (["--players", "0"], "--players must be"),
        (["--tables", "0"], "--tables must be"),
        (["--card-tables", "-1"], "--card-tables must be"),
        (["--tables", "4", "--card-tables", "23"], "--card-tables must be 0..22"),
        (["--fault-rate", "101"], "--fault-rate is a percentage"),
        (["--fault-rate", "-1"], "--fault-rate is a percentage"),
        (["--rng-seed", "not hex"], "--rng-seed is 32 bytes"),
        (["--dice-seed", "ab" * 31], "--rng-seed is 32 bytes"),  # its older name, an alias
        (["--game", "no-such-game"], "needs game 'no-such-game' ("),
    ],
)
def test_bad_session_settings_write_nothing(
    argv: list[str],
    needle: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("ledger: error: "), err
    assert needle in err
    assert list(tmp_path.iterdir()) == []  # no keys, no store


# The Python API.


def test_the_players_wallets_are_what_the_session_thinks(node: Node) -> None:
    installed = get_plugin_manager().games()
    config = SessionConfig(tables=default_tables(2, 2), players=8, rounds=16, fault_rate=40, seed=4)
    device = simulated_device(node.keys, PASSPHRASE)
    with reproducible_session(4):  # the round ids the RNG tables draw from
        session = Session(
            Casino(node.app, installed),
            installed,
            config,
            dice_source(parse_seed(RNG_SEED)),
            device,
        )
        result = session.run()
    casino = Casino(node.app, installed)
    assert session.players
    for player in session.players:
        assert casino.account(player.account_id).balance == player.balance
    tally = result.tally
    assert tally.rounds_settled + tally.rounds_voided == 16
    assert tally.bets_placed == (tally.total.bets + tally.bets_withdrawn + tally.bets_voided)
    assert tally.tables["TX-1"].faults == 0 < tally.tables["SB-1"].faults  # only shaken dice
    assert tally.device_reports == tally.tables["SB-1"].rounds_settled + tally.faults
    # Xì dách: both tables played; the physical one's every action a device report.
    assert tally.tables["XD-1"].rounds_settled == tally.tables["XD-2"].rounds_settled == 4
    assert tally.card_reports >= 4 * 3  # at least close, deal and stop per round
    assert tally.tables["XD-2"].settled.staked > 0


def test_physical_tables_need_a_dealer_device(node: Node) -> None:
    installed = get_plugin_manager().games()
    config = SessionConfig(tables=default_tables(2), players=2, rounds=2, seed=4)
    with pytest.raises(ConfigError, match="physical tables need a dealer device"):
        Session(Casino(node.app, installed), installed, config, dice_source())
    assert node.app.tables.event_count()[0] == 0


def test_run_session_is_the_session(node: Node) -> None:
    installed = get_plugin_manager().games()
    config = SessionConfig(tables=default_tables(1), players=3, rounds=2, seed=1)
    result = run_session(Casino(node.app, installed), installed, config, dice_source())
    assert result.tally.rounds_settled + result.tally.rounds_voided == 2
    assert result.tally.seeds_committed == result.tally.seeds_revealed == 1


@pytest.mark.parametrize(
    ("numerator", "denominator", "text"),
    [
        (35, 36, "97.22%"),
        (199, 216, "92.13%"),
        (1, 3, "33.33%"),
        (2, 3, "66.67%"),
        (1, 200000, "0.00%"),
        (-1, 200, "-0.50%"),
        (-1, 300000, "0.00%"),
        (102, 100, "102.00%"),
    ],
)
def test_percent_rounds_half_away_from_zero_in_integers(
    numerator: int, denominator: int, text: str
) -> None:
    assert percent(Fraction(numerator, denominator)) == text
