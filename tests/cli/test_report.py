"""`ledger report`: what one pass over the log counts, checked against what the
scenario did and against the ledger's own balances (both stores); the
interval arithmetic against a direct computation; the theory sources; the
page's self-containment; and attacks on the rows the report reads."""

from __future__ import annotations

import json
import math
import re
import sys
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from statistics import NormalDist
from types import SimpleNamespace
from typing import Any

import pytest
from eventsourcing.utils import get_topic

from ledger.audit.verify import Level
from ledger.casino import Casino
from ledger.cli.main import main
from ledger.errors import ConfigError, VerificationError
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import rules_hash
from ledger.report import tally as tally_module
from ledger.report.html import render
from ledger.report.reader import read_log
from ledger.report.returns import MIN_ROUNDS, Cluster, Returns
from ledger.report.significant import collect
from ledger.report.status import not_verified, run_verifier
from ledger.report.tally import OpenRound, ReportTally
from ledger.report.theory import NONE, Theories, load_edges
from tests.attacker import Attacker
from tests.casino_support import (
    HEADS,
    TAILS,
    domain_events,
    operator_signer,
    seen,
    seen_faulty,
)
from tests.coin_game import COIN_GAMES
from tests.games.test_step_corrections import played
from tests.high_card import high_card_games
from tests.reproducible import reproducible_session

ROOT = Path(__file__).resolve().parents[2]
EDGE = ROOT / "docs" / "xidach_edge.json"
GAMES = {**COIN_GAMES, **high_card_games()}
COIN_LIMITS: Any = {"min_bet": 10, "max_bet": 500, "max_round": 800}


def scenario(node: Node) -> dict[str, Any]:
    """Coin rounds (EUR, physical table): settled, settled after a fault, voided by an
    operator, resumed then settled (a push), one left open; and a high-card round
    (VND) corrected after it ended."""
    casino = Casino(node.app, GAMES)
    table = casino.open_table(
        request_id="coin",
        name="C1",
        game="coin",
        kind="physical",
        currency="EUR",
        limits=COIN_LIMITS,
    )
    alice = casino.open_account(request_id="acc-alice", owner="alice", currency="EUR")
    bob = casino.open_account(request_id="acc-bob", owner="bob", currency="EUR")
    for who in (alice, bob):
        casino.deposit(request_id=f"d-{who}", account_id=who, amount=10_000)
    operator = operator_signer(node)

    def round_with(name: str, bets: list[tuple[str, dict[str, Any], int]]) -> str:
        round_id = casino.open_round(request_id=name, table_id=table, dealer="D")
        for n, (who, bet, stake) in enumerate(bets):
            casino.place_bet(
                request_id=f"{name}-{n}", round_id=round_id, account_id=who, bet=bet, stake=stake
            )
        return round_id

    def toss(name: str, round_id: str, face: str) -> None:
        casino.record_outcome(
            request_id=f"{name}-toss",
            round_id=round_id,
            outcome={"face": face},
            source=seen(node, casino, round_id, {"face": face}),
        )

    r1 = round_with("r1", [(alice, HEADS, 100), (bob, TAILS, 200)])
    casino.close_betting(request_id="r1-close", round_id=r1)
    toss("r1", r1, "heads")  # alice +100 back 200, bob loses 200: house +100
    r2 = round_with("r2", [(alice, TAILS, 300)])
    casino.close_betting(request_id="r2-close", round_id=r2)
    casino.record_fault(
        request_id="r2-fault",
        round_id=r2,
        reason="cocked",
        source=seen_faulty(node, casino, r2, "cocked"),
    )
    toss("r2", r2, "tails")  # alice wins 300: house -300
    r3 = round_with("r3", [(bob, HEADS, 50)])
    casino.close_betting(request_id="r3-close", round_id=r3)
    casino.void_round(request_id="r3-void", round_id=r3, reason="table shaken", operator=operator)
    r4 = round_with("r4", [(alice, HEADS, 70)])
    casino.close_betting(request_id="r4-close", round_id=r4)
    casino.resume_round(request_id="r4-resume", round_id=r4, reason="power back", operator=operator)
    toss("r4", r4, "edge")  # a push: house 0
    round_with("r5", [(bob, TAILS, 40)])  # still open
    high_card_table, *_ = played(node, casino)
    casino.correct_step(
        request_id="fix",
        round_id=_round_of(node, high_card_table),
        step=1,
        drawn=[48],
        reason="the camera shows the king of clubs",
        operator=operator,
    )
    return {
        "coin": str(table),
        "coin_house": str(casino.table(table).house_account),
        "high_card": str(high_card_table),
        "high_card_house": str(casino.table(high_card_table).house_account),
        "casino": casino,
    }


def _round_of(node: Node, table: str) -> str:
    from ledger.domain.round import Round

    (opened,) = [
        e
        for _, e in domain_events(node.app)
        if isinstance(e, Round.Opened) and str(e.table_id) == table
    ]
    return str(opened.originator_id)


def test_one_pass_counts_what_happened_and_matches_the_house_balances(node: Node) -> None:
    made = scenario(node)
    casino: Casino = made["casino"]
    tally = read_log(node.app, Theories(GAMES, []))
    assert tally.events == tally.end == node.app.tables.event_count()[0]
    coin = tally.games[("coin", "EUR")]
    assert (coin.rounds, coin.bets, coin.staked) == (4, 4, 100 + 200 + 300 + 70)
    assert (coin.voided_by_operator, coin.voided_by_rules, coin.resumed, coin.faults) == (
        1,
        0,
        1,
        1,
    )
    assert coin.corrections == 0
    # The house result is the house account's balance, read through the ledger itself.
    assert coin.house == casino.account(made["coin_house"]).balance == 100 - 300
    card = tally.games[("high-card", "VND")]
    assert (card.rounds, card.bets, card.corrections) == (1, 3, 1)
    assert card.house == casino.account(made["high_card_house"]).balance == 500
    assert [(r.game, len(r.bets)) for r in tally.open.values()] == [("coin", 1)]
    # Per family, over round clusters: the coin's "on" family had 3 settled rounds.
    on = tally.returns[("coin", "EUR")]["on"]
    assert (on.rounds, on.bets, on.staked, on.returned) == (3, 4, 670, 200 + 600 + 70)
    assert (on.staked_sq, on.returned_sq, on.cross) == (
        300**2 + 300**2 + 70**2,
        200**2 + 600**2 + 70**2,
        300 * 200 + 300 * 600 + 70 * 70,
    )
    # The correction came after the round ended: its cluster's return was replaced.
    seat = tally.returns[("high-card", "VND")]["seat"]
    assert (seat.rounds, seat.bets, seat.staked, seat.returned) == (1, 3, 1_800, 1_300)
    assert (seat.returned_sq, seat.cross) == (1_300**2, 1_800 * 1_300)
    # Per table and day: the same sums, split.
    per_table: dict[str, int] = {}
    for _, table, counts in tally.daily():
        per_table[table] = per_table.get(table, 0) + counts.house
    assert per_table == {made["coin"]: -200, made["high_card"]: 500}
    assert sum(tally.timeline.values()) == -200 + 500
    (source,) = tally.theory_sources[("coin", "EUR")]
    assert source.startswith("none: coin has no exact paytable")


def test_the_page_is_self_contained_and_says_what_was_verified(node: Node, tmp_path: Path) -> None:
    scenario(node)
    keyring = node.keys.keyring()
    node.checkpointer().catch_up()
    tally = read_log(node.app, Theories(GAMES, []))
    unverified = render(tally, not_verified(node.app, keyring), "store")
    assert (
        '<p class="not-verified">NOT VERIFIED</p>' in unverified
        and "the log was not checked against it" in unverified
    )
    verified_status = run_verifier(node.app, keyring, Level.SETTLEMENT, GAMES)
    assert verified_status.verdict == "verified"
    assert verified_status.checkpoint is not None
    assert verified_status.checkpoint.size == tally.end
    page = render(tally, verified_status, "store")
    assert '<p class="verified">VERIFIED</p>' in page and f">{tally.end:,}</td>" in page
    assert "verified at level settlement" in page
    references = _references(page)
    assert references, "the page has charts"
    assert all(ref.startswith("data:image/png;base64,") for ref in references), references
    assert "<script" not in page and "<link" not in page and "url(" not in page
    text = _text(page)
    assert "-2.00 EUR" in text and "6.70 EUR" in text and "500 VND" in text  # minor units


def test_the_page_counts_positions_from_0_names_tables_with_ids_and_draws_plain_amounts(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Positions as `verify` and proofs count them; a table's name beside its
    id's first digits (two tables may share a name); the house chart's axis in
    whole amounts, with no "1e7" offset to add."""
    from ledger.report import charts

    scenario(node)
    tally = read_log(node.app, Theories(GAMES, []))
    drawn: list[Any] = []
    real = charts._data_uri

    def keep(figure: Any) -> str:
        figure.canvas.draw()
        drawn.append([axes.yaxis.get_offset_text().get_text() for axes in figure.axes])
        drawn[-1] += [t.get_text() for axes in figure.axes for t in axes.get_yticklabels()]
        return real(figure)

    monkeypatch.setattr(charts, "_data_uri", keep)
    text = _text(render(tally, not_verified(node.app, node.keys.keyring()), "store"))
    assert f"log positions 0 to {tally.events - 1:,} ({tally.events:,} events read)" in text
    for table_id, (name, _, _) in tally.tables.items():
        assert f"{name} ({str(table_id)[:8]})" in text
    assert drawn and all(labels[0] == "" for labels in drawn)  # no offset text
    # Where matplotlib would write "1e7" beside the axis: large, close amounts.
    moments = [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=h) for h in range(3)]
    charts.house_over_time("t", "EUR", [charts.Series("g", moments, [1e7, 1e7 + 3, 1e7 + 5])])
    offset, *ticks = drawn[-1]
    assert offset == "" and any("10,000,00" in tick for tick in ticks), drawn[-1]
    assert charts._amounts()(12_345_678.0, 0) == "12,345,678"
    assert charts._amounts()(-2.5, 0) == "-2.50"


def test_the_page_lists_the_significant_events(node: Node) -> None:
    scenario(node)
    found = collect(node.app)
    assert found.counts["interrupted-round-voided"] == 1
    assert found.counts["round-resumed"] == 1 and found.counts["correction"] == 1
    assert found.last_verification is None
    tally = read_log(node.app, Theories(GAMES, []))
    status = not_verified(node.app, node.keys.keyring(), found.last_verification)
    page = render(tally, status, "store", found)
    text = _text(page)
    assert "Significant events" in text and "No verification run is recorded" in text
    for event in found.newest:
        assert escape(event.summary) in page
    assert len(found.newest) == found.total  # fewer than SHOWN: every one listed


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [v or "" for k, v in attrs if k in ("src", "href", "srcset", "data")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _references(page: str) -> list[str]:
    parser = _Refs()
    parser.feed(page)
    return parser.found


def _text(page: str) -> str:
    parser = _Refs()
    parser.feed(page)
    return " ".join(parser.text)


def test_a_forged_settlement_stops_the_report(node: Node) -> None:
    """The attacker raises a round's recorded return in the row: the envelope no
    longer matches, and the report refuses rather than count it."""
    made = scenario(node)
    from ledger.domain.round import Round

    (first,) = [e for _, e in domain_events(node.app) if isinstance(e, Round.Settled)][:1]
    attacker = Attacker(node.app.store_url)
    _, _, _, _, state = attacker.row(str(first.originator_id), first.originator_version)
    forged = state.replace(b'"returned":0', b'"returned":9')
    assert forged != state
    attacker.set_state(str(first.originator_id), first.originator_version, forged)
    with pytest.raises(VerificationError):
        read_log(node.app, Theories(GAMES, []))
    assert made


def test_a_settlement_renamed_to_be_skipped_stops_the_report(node: Node) -> None:
    """The attacker gives a settlement's row the topic of an event the report does
    not count: the signed type disagrees, and the report refuses."""
    scenario(node)
    from ledger.domain.account import Account
    from ledger.domain.round import Round

    settled = [e for _, e in domain_events(node.app) if isinstance(e, Round.Settled)]
    Attacker(node.app.store_url).set_topic(
        str(settled[0].originator_id),
        settled[0].originator_version,
        get_topic(Account.Deposited),
    )
    with pytest.raises(VerificationError, match="signed type"):
        read_log(node.app, Theories(GAMES, []))


def test_a_deleted_settlement_is_caught_when_the_report_runs_the_verifier(node: Node) -> None:
    """Deleting an event leaves every other envelope intact, so reading alone cannot
    see it (the report says it did not verify); with the verifier it is FAILED."""
    scenario(node)
    node.checkpointer().catch_up()
    from ledger.domain.round import Round

    settled = [e for _, e in domain_events(node.app) if isinstance(e, Round.Settled)]
    Attacker(node.app.store_url).delete(
        str(settled[0].originator_id), settled[0].originator_version
    )
    keyring = node.keys.keyring()
    assert not_verified(node.app, keyring).verdict == "not verified"
    status = run_verifier(node.app, keyring, Level.INTEGRITY, None)
    assert status.verdict == "FAILED" and status.failed
    assert "log position" in status.lines[0]
    page = render(read_log(node.app, Theories(GAMES, [])), status, "store")
    assert '<p class="failed">FAILED</p>' in page and "No checkpoint was checked." in page


def test_the_interval_matches_a_direct_computation() -> None:
    clusters = [(100 + 7 * i, (i * 37) % 250) for i in range(MIN_ROUNDS + 11)]
    stats = Returns()
    for staked, returned in clusters:
        cluster = Cluster()
        cluster.settle(staked, returned, Fraction(1))
        stats.add(cluster)
    total_s = sum(s for s, _ in clusters)
    total_y = sum(y for _, y in clusters)
    ratio = total_y / total_s
    n = len(clusters)
    variance = n / (n - 1) * sum((y - ratio * s) ** 2 for s, y in clusters) / total_s**2
    interval = stats.interval()
    Z = NormalDist().inv_cdf(0.975)
    assert interval is not None
    assert interval[0] == pytest.approx(ratio - Z * math.sqrt(variance), rel=1e-9)
    assert interval[1] == pytest.approx(ratio + Z * math.sqrt(variance), rel=1e-9)
    assert stats.observed == Fraction(total_y, total_s) and stats.theoretical == 1
    few = Returns()
    for staked, returned in clusters[: MIN_ROUNDS - 1]:
        cluster = Cluster()
        cluster.settle(staked, returned, None)
        few.add(cluster)
    assert few.interval() is None and few.theoretical is None  # unpriced: no theory


def test_theory_comes_from_the_exact_paytable_or_the_simulated_edge(tmp_path: Path) -> None:
    games = get_plugin_manager().games()
    taixiu = games["taixiu"]
    exact = Theories(games, []).of("taixiu", taixiu.rules_hash)
    assert exact.of("small") == Fraction(35, 36) and exact.source.startswith("exact paytable")
    other = Theories(games, []).of("taixiu", "0" * 64)
    assert other.of("small") is None and "other rules" in other.source
    data = json.loads(EDGE.read_text())
    xidach = games["xidach"]
    assert rules_hash(data["rules"]["xidach"]) == xidach.rules_hash
    simulated = Theories(games, load_edges([str(EDGE)])).of("xidach", xidach.rules_hash)
    result = data["results"]["xidach"]
    assert simulated.of("seat:1") == Fraction(result["returned"], result["turnover"])
    assert simulated.flat_interval == (1 - result["ci95_high"], 1 - result["ci95_low"])
    assert Theories(games, []).of("xidach", xidach.rules_hash).of("seat:1") is None
    assert Theories({}, []).of("xidach", xidach.rules_hash) is NONE
    bad = tmp_path / "edge.json"
    bad.write_text(json.dumps({"results": {"x": {"returned": 1.5, "turnover": 2}}}))
    with pytest.raises(ConfigError, match="not a simulated edge file"):
        load_edges([str(bad)])


def test_the_timeline_coarsens_and_keeps_every_amount(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tally_module, "MAX_BUCKETS", 50)
    tally = ReportTally(Theories({}, []), lambda _: iter(()))
    round_ = OpenRound("t", "g", "EUR", NONE)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    total = 0
    for minute in range(0, 60 * 24 * 3, 7):  # three days, every 7 minutes
        house = minute % 13 - 6
        total += house
        tally._hourly(SimpleNamespace(timestamp=start + timedelta(minutes=minute)), round_, house)
    assert tally.resolution == 86400 and len(tally.timeline) == 3
    assert sum(tally.timeline.values()) == total


@pytest.fixture
def workdir(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEDGER_PASSPHRASE", "report-test")
    monkeypatch.delenv("LEDGER_KEYS", raising=False)
    monkeypatch.setenv("LEDGER_STORE", store_url)
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(""))
    with reproducible_session(12) as seeds:
        assert main(["simulate", "--rounds", "12", "--players", "4", "--tables", "3", *seeds]) == 0
    return tmp_path


def test_the_command_writes_the_report_and_says_what_it_checked(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["report", "out.html", "--edge", str(EDGE), "--verify"]) == 0
    said = capsys.readouterr().out
    assert re.fullmatch(r"wrote out\.html: [\d,]+ events, verification: verified\n", said)
    page = (workdir / "out.html").read_text()
    text = _text(page)
    assert '<p class="verified">VERIFIED</p>' in page and "simulated: profile xidach" in text
    assert "exact paytable of casino-ledger-taixiu" in text
    assert not list(workdir.glob(".out.html.*.part"))


def test_the_exit_code_is_the_one_verify_gives(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report whose verifier could not re-derive a round exits as `ledger verify`
    does (3), never 0 and never 1 (which says the log failed)."""
    monkeypatch.setenv("LEDGER_PLUGINS_BLOCK", "taixiu")
    capsys.readouterr()
    assert main(["report", "out.html", "--edge", str(EDGE), "--verify"]) == 3
    assert main(["verify"]) == 3
    out = capsys.readouterr().out
    assert "verification: could not check" in out
    assert "could not check" in _text((workdir / "out.html").read_text())


def test_without_matplotlib_it_says_so_before_reading(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    capsys.readouterr()
    assert main(["report", "out.html"]) == 2
    err = capsys.readouterr().err
    assert "casino-ledger[report]" in err and err.count("\n") == 1
    assert not (workdir / "out.html").exists()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["report", "out.txt"], "does not end in .html"),
        (["report", "missing/out.html"], "directory missing does not exist"),
        (["report", "out.html", "--verify", "--level", "deep"], "unknown verify level"),
        (["report", "out.html", "--edge", "nowhere.json"], "cannot read simulated edge"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ledger: error:") and said in err and err.count("\n") == 1
    assert not list(workdir.glob("*.html")) and not list(workdir.glob(".*.part"))
