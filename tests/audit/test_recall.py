"""`ledger recall`: a round replayed from its signed events, dice and cards
alike, on both stores; a tampered, removed or relabelled event is reported and
never shown; an unknown or malformed id is one error line (exit 2)."""

from __future__ import annotations

import io
import json
import re
import sys
import uuid
from pathlib import Path

import pytest

from ledger.audit.recall import Recall, recall_round
from ledger.casino import Casino
from ledger.cli.main import main
from ledger.cli.recall import render
from ledger.crypto.keys import Role
from ledger.node import Node
from ledger.projections import ProjectionRunner, queries
from tests.attacker import Attacker
from tests.casino_support import HEADS, LIMITS, operator_signer, seen, table_of
from tests.cli.test_cli_bad_input import RIGHT, assert_one_error_line
from tests.coin_game import coin_games
from tests.games.test_step_corrections import GAMES as HIGH_CARD
from tests.games.test_step_corrections import played
from tests.reproducible import reproducible_session

COIN = coin_games()


def coin_round(node: Node) -> tuple[str, str]:
    """A physical coin round: alice bets 1.00 EUR on heads, the device reports heads."""
    casino = Casino(node.app, COIN)
    table = table_of(casino, "coin", LIMITS)
    alice = casino.open_account(request_id="alice", owner="alice", currency="EUR")
    casino.deposit(request_id="dep", account_id=alice, amount=1_000)
    round_id = casino.open_round(request_id="round", table_id=table, dealer="D1")
    casino.place_bet(request_id="bet", round_id=round_id, account_id=alice, bet=HEADS, stake=100)
    casino.close_betting(request_id="close", round_id=round_id)
    casino.record_outcome(
        request_id="toss",
        round_id=round_id,
        outcome={"face": "heads"},
        source=seen(node, casino, round_id, {"face": "heads"}),
    )
    return round_id, alice


def test_a_round_is_recalled_with_every_fact_and_signer(node: Node) -> None:
    round_id, alice = coin_round(node)
    node.checkpointer().catch_up()
    recall = recall_round(node.app, node.keys.keyring(), COIN, round_id)
    assert recall.ok, recall.problems
    kinds = [e.kind for e in recall.events]
    assert kinds == ["Opened", "BetPlaced", "ActionRecorded", "ActionRecorded", "Settled"]
    assert [e.version for e in recall.events] == [1, 2, 3, 4, 5]
    positions = [e.position for e in recall.events]
    assert None not in positions and positions == sorted(positions)
    bet = recall.events[1].facts or {}
    assert (bet["account_id"], bet["stake"], bet["bet"]) == (alice, 100, HEADS)
    toss = recall.events[3]
    device = node.keys.keyring().with_role(Role.DEALER_DEVICE)[0]
    assert [(k.role, k.signed) for k in toss.keys] == [
        ("ledger-node", "envelope"),
        ("dealer-device", "dealer device report"),
    ]
    assert toss.keys[1].key_id == device.key_id and toss.keys[1].name == device.name
    settled = recall.events[4].facts or {}
    assert settled["results"][0]["returned"] == 200
    assert "1 dealer device reports verified" in " ".join(recall.checked)
    assert "1 settlements and corrections settled again (1 bets)" in " ".join(recall.checked)
    assert any("inclusion in a checkpoint" in line for line in recall.not_checked)

    text = render(recall)
    assert text.startswith(f"REPLAY of round {round_id}")
    assert "stake 1.00 EUR" in text and "returned 2.00" in text  # major units
    assert f"dealer device report signed by dealer-device key {device.name}" in text
    data = json.loads(json.dumps(recall.to_json()))
    assert data["replay"] is True and data["currency"] == "EUR" and data["verified"] is True
    assert data["events"][1]["facts"]["stake"] == 100  # minor units in JSON


def test_a_corrected_card_round_shows_the_operator_and_what_changed(node: Node) -> None:
    casino = Casino(node.app, HIGH_CARD)
    round_id = played(node, casino)[3]
    operator = operator_signer(node)
    casino.correct_step(
        request_id="fix",
        round_id=round_id,
        step=1,
        drawn=[48],
        reason="the camera shows the king of clubs",
        operator=operator,
    )
    recall = recall_round(node.app, node.keys.keyring(), HIGH_CARD, round_id)
    assert recall.ok, recall.problems
    corrected = recall.events[-1]
    assert corrected.kind == "Corrected"
    assert corrected.keys[1].key_id == operator.key_id and corrected.keys[1].role == "operator"
    assert (corrected.facts or {})["right_outcome"] == {"cards": [48]}
    text = render(recall)
    assert "CORRECTION at action #1 by an operator" in text
    assert "amounts in VND" in text and "stake 1,000 VND" in text  # VND has no minor unit
    actions = [e for e in recall.events if e.kind == "ActionRecorded"]
    assert [(e.facts or {})["drawn"] for e in actions] == [[], [20], [51], [4]]


def test_a_round_whose_game_is_not_installed_says_so(node: Node) -> None:
    round_id, _ = coin_round(node)
    recall = recall_round(node.app, node.keys.keyring(), {}, round_id)
    assert recall.ok  # the envelopes, money and sources were checked and passed
    assert recall.not_checked[0].startswith("the game's rules and payouts: could not check")
    assert not any(line.startswith("game:") for line in recall.checked)


def problems_of(node: Node, round_id: str) -> tuple[Recall, str]:
    recall = recall_round(node.app, node.keys.keyring(), COIN, round_id)
    return recall, render(recall)


def test_a_tampered_bet_is_reported_never_shown(node: Node, store_url: str) -> None:
    round_id, _ = coin_round(node)
    attacker = Attacker(store_url)
    row = attacker.row(round_id, 2)
    assert b'"stake":100' in row[4]
    attacker.set_state(round_id, 2, row[4].replace(b'"stake":100', b'"stake":900'))
    recall, text = problems_of(node, round_id)
    assert not recall.ok
    bet = recall.events[1]
    assert bet.facts is None and "payload bytes do not match" in (bet.problem or "")
    # The tampered stake as an amount, not inside a time (":29.000" matched it).
    assert re.search(r"(?<![\d.])9\.00(?!\d)", text) is None and "NOT SHOWN" in text
    assert "stopped at the first failure" in recall.not_checked[0]
    assert text.splitlines()[-1].startswith("RESULT: 1 problem(s)")


def test_a_removed_event_breaks_the_round(node: Node, store_url: str) -> None:
    round_id, _ = coin_round(node)
    Attacker(store_url).delete(round_id, 3)  # betting closed, gone
    recall, _ = problems_of(node, round_id)
    assert not recall.ok
    assert recall.events[2].version == 4
    assert "version 3 is missing" in (recall.events[2].problem or "")


def test_a_replaced_event_breaks_the_chain(node: Node, store_url: str) -> None:
    """An event from another round moved into this one: its envelope says so."""
    round_id, _ = coin_round(node)
    other = Casino(node.app, COIN).open_round(
        request_id="other",
        table_id=str(Casino(node.app, COIN).round(round_id).table_id),
        dealer="D2",
    )
    attacker = Attacker(store_url)
    attacker.set_state(round_id, 1, attacker.row(other, 1)[4])
    recall, text = problems_of(node, round_id)
    assert recall.events[0].facts is None
    assert "belongs to stream" in (recall.events[0].problem or "")
    assert "D2" not in text


def test_a_relabelled_event_is_not_shown(node: Node, store_url: str) -> None:
    round_id, _ = coin_round(node)
    Attacker(store_url).set_topic(round_id, 5, "ledger.domain.round:Round.Voided")
    recall, _ = problems_of(node, round_id)
    assert recall.events[4].facts is None and "signed type" in (recall.events[4].problem or "")


@pytest.fixture
def workdir(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small simulated store: dice (RNG and physical) and Xì dách tables."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEDGER_PASSPHRASE", RIGHT)
    monkeypatch.delenv("LEDGER_KEYS", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setenv("LEDGER_STORE", store_url)
    with reproducible_session(7) as seeds:
        assert main(["simulate", "--rounds", "8", "--players", "4", "--tables", "2", *seeds]) == 0
    return tmp_path


def simulated_rounds(store_url: str) -> list[queries.RoundSummary]:
    from ledger.node import open_node

    node = open_node(store_url, "keys", writable=False)
    try:
        ProjectionRunner(node.app).catch_up()
        return queries.rounds(node.app)
    finally:
        node.close()


def test_cli_recalls_dice_and_card_rounds_alike(
    workdir: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rounds = simulated_rounds(store_url)
    assert {r.game for r in rounds} >= {"taixiu", "xidach"}
    capsys.readouterr()
    sources: set[str] = set()
    for found in rounds:
        assert main(["recall", found.round_id, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["verified"] and data["problems"] == []
        assert all(e["facts"] is not None for e in data["events"])
        for event in data["events"]:
            source = (event["facts"] or {}).get("source") or {}
            if source:
                sources.add(f"{source['kind']}:{source.get('draw', '')}")
        assert main(["recall", found.round_id]) == 0
        text = capsys.readouterr().out
        assert "RESULT: every event verified" in text and "REPLAY of round" in text
    assert {"rng:dice", "rng:cards", "device:dice", "device:cards"} <= sources


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["recall", "not-a-round"], "is not a UUID"),
        (["recall", str(uuid.uuid4())], "no round"),
    ],
)
def test_cli_unknown_or_malformed_round(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == 2
    assert message in assert_one_error_line(capsys.readouterr().err)


def test_cli_a_stream_that_is_not_a_round(
    workdir: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    account = str(
        Attacker(store_url).sql(
            f"SELECT originator_id FROM {_events(store_url)} WHERE topic = ?",
            ("ledger.domain.account:Account.Opened",),
        )[0][0]
    )
    capsys.readouterr()
    assert main(["recall", str(uuid.UUID(account))]) == 2
    assert f"{uuid.UUID(account)} is an account, not a round" in assert_one_error_line(
        capsys.readouterr().err
    )


def _events(store_url: str) -> str:
    return "stored_events" if store_url.startswith("sqlite") else "ledger_events"


def test_cli_a_tampered_round_exits_1(
    workdir: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    round_id = simulated_rounds(store_url)[0].round_id
    attacker = Attacker(store_url)
    attacker.set_state(round_id, 2, attacker.row(round_id, 2)[4][:-2] + b"9}")
    capsys.readouterr()
    assert main(["recall", round_id, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["verified"] is False and data["events"][1]["facts"] is None


def test_a_round_voided_by_its_rules_is_recalled_and_significant(node: Node) -> None:
    """Two faulty throws void a physical taixiu round by its rules: the recall
    shows each fault with its device signature and the void; the significant
    events list it as a `void` (no operator)."""
    from ledger.audit.significant import iter_significant
    from ledger.plugins.manager import get_plugin_manager
    from tests.casino_support import seen_faulty
    from tests.games.test_taixiu_rounds import table_with_players

    games = get_plugin_manager().games()
    casino = Casino(node.app, get_plugin_manager().games())
    table, (an, _) = table_with_players(casino, "taixiu")
    round_id = casino.open_round(request_id="r1", table_id=table, dealer="D1")
    casino.place_bet(
        request_id="b1", round_id=round_id, account_id=an, bet={"bet": "big"}, stake=2_000
    )
    casino.close_betting(request_id="c", round_id=round_id)
    for n, reason in enumerate(("die not flat", "dice stacked")):
        casino.record_fault(
            request_id=f"f{n}",
            round_id=round_id,
            reason=reason,
            source=seen_faulty(node, casino, round_id, reason),
        )
    recall = recall_round(node.app, node.keys.keyring(), games, round_id)
    assert recall.ok, recall.problems
    assert recall.events[-1].kind == "Voided"
    text = render(recall)
    assert "VOIDED by the game's rules" in text and "stake 2,000 VND" in text
    faults = [e for e in recall.events if (e.facts or {}).get("action") == "fault"]
    assert len(faults) == 2 and all(e.keys[1].role == "dealer-device" for e in faults)
    voids = [e for e in iter_significant(node.app) if e.kind == "void"]
    assert [v.stream for v in voids] == [round_id]
    assert voids[0].details["operator_key_id"] is None


def test_an_rng_round_is_recomputed_once_its_seed_is_revealed(
    node: Node, store_url: str, tmp_path: Path
) -> None:
    """While the seed is secret the throw is listed as not checked; once it is
    revealed, recomputed; a reveal edited in the table's stream is a problem."""
    from ledger.plugins.manager import get_plugin_manager
    from ledger.rng.server import RngServer
    from tests.games.test_taixiu_rounds import table_with_players

    games = get_plugin_manager().games()
    casino = Casino(node.app, get_plugin_manager().games())
    rng = RngServer(tmp_path / "seeds")
    table, (an, _) = table_with_players(casino, "taixiu", "rng")
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=an, bet={"bet": "big"}, stake=1_000
    )
    casino.close_betting(request_id="c", round_id=round_id)
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    secret = recall_round(node.app, node.keys.keyring(), games, round_id)
    assert secret.ok
    assert secret.not_checked[0].startswith(
        "1 RNG dice draws and 0 RNG card draws: the seed is not"
    )
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    revealed = recall_round(node.app, node.keys.keyring(), games, round_id)
    assert revealed.ok
    assert "1 RNG dice draws and 0 RNG card draws recomputed" in " ".join(revealed.checked)
    assert not any("not revealed" in line for line in revealed.not_checked)

    attacker = Attacker(store_url)
    version = next(v for v in range(1, 20) if attacker.row(table, v)[3].endswith("SeedRevealed"))
    row = attacker.row(table, version)
    state = bytearray(row[4])
    state[-10] ^= 1  # a bit of the payload of the table's reveal of the seed
    attacker.set_state(table, version, bytes(state))
    edited = recall_round(node.app, node.keys.keyring(), games, round_id)
    assert not edited.ok
    assert f"table {table} version {version}" in edited.problems[0]


def test_a_tampered_opening_is_still_recalled_as_a_round(node: Node, store_url: str) -> None:
    """Relabelling the round's first row does not make it "not a round": its
    signed header says it is; the opening is not shown, the bets still are, in
    the currency their postings name."""
    round_id, _ = coin_round(node)
    Attacker(store_url).set_topic(round_id, 1, "ledger.domain.account:Account.Opened")
    recall, text = problems_of(node, round_id)
    assert not recall.ok and recall.events[0].facts is None
    assert "signed type" in (recall.events[0].problem or "")
    assert recall.currency == "EUR" and "stake 1.00 EUR" in text
