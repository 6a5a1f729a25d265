"""One generation on the write path (issue 39, item 2): a round still open
under settlement API 1 takes no command, through the Python API, the CLI or
HTTP, until `ledger migrate` ended it: each is refused with one line naming
the round and `ledger migrate`, and nothing is recorded. A round settled
under API 1 stays readable and re-settles (verify), and its result is not
corrected by the write path of API 2. A store of release 0.2 with a round
left open migrates and still verifies against the checkpoint kept then."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.casino import BetRequest, Casino
from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory
from ledger.domain.round_records import SETTLED
from ledger.errors import InvalidCommandError
from ledger.node import Node, open_node
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.server import RngServer
from tests.api_1_rounds import api_1_round
from tests.casino_support import (
    HEADS,
    LIMITS,
    dealer_device,
    event_count,
    operator_signer,
    table_of,
)
from tests.conftest import PASSPHRASE, ledger_cli
from tests.http_support import make_api
from tests.store.test_release_store import RELEASE_0_2, verify

MIGRATE_FIRST = (
    "is still open under settlement API 1 (release 0.2 and before), which this release "
    "no longer plays: run `ledger migrate` first (it settles the round on its recorded "
    "outcome, or voids it)"
)


def refusal(round_id: str) -> str:
    return f"round {round_id} {MIGRATE_FIRST}"


@pytest.fixture
def casino(node: Node) -> Casino:
    return Casino(node.app, get_plugin_manager().games())


def wallet(casino: Casino, name: str = "alice") -> str:
    account = casino.open_account(request_id=f"a-{name}", owner=name, currency="EUR")
    casino.deposit(request_id=f"d-{name}", account_id=account, amount=5_000)
    return account


def test_every_command_on_a_round_open_under_api_1_is_refused(
    node: Node, casino: Casino, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alice = wallet(casino)
    table = table_of(casino, "taixiu", LIMITS)
    betting = api_1_round(node, casino, table)
    bet = betting.bet(alice, {"bet": "big"}, 100)
    closed = api_1_round(node, casino, table)
    closed.bet(alice, {"bet": "small"}, 50)
    closed.close_betting()
    decided = api_1_round(node, casino, table)
    decided.bet(alice, {"bet": "small"}, 50)
    decided.close_betting().outcome({"dice": [1, 2, 3]})
    operator = operator_signer(node)
    rng = RngServer(tmp_path / "rng")
    device = dealer_device(node)
    before = event_count(node.app)

    def commands(round_id: str) -> dict[str, Callable[[], Any]]:
        key = f"k-{round_id}"
        return {
            "place_bet": lambda: casino.place_bet(
                request_id=f"{key}-b",
                round_id=round_id,
                account_id=alice,
                bet={"bet": "big"},
                stake=100,
            ),
            "withdraw_bet": lambda: casino.withdraw_bet(
                request_id=f"{key}-w", round_id=round_id, account_id=alice, bet_id=bet
            ),
            "close_betting": lambda: casino.close_betting(request_id=f"{key}-c", round_id=round_id),
            "record_outcome": lambda: casino.record_outcome(
                request_id=f"{key}-o",
                round_id=round_id,
                outcome={"dice": [4, 5, 6]},
                source=device.throw(round_id, 0, {"dice": [4, 5, 6]}),
            ),
            "record_fault": lambda: casino.record_fault(
                request_id=f"{key}-f",
                round_id=round_id,
                reason="cocked",
                source=device.fault(round_id, 0, "cocked"),
            ),
            "throw_dice": lambda: casino.throw_dice(
                request_id=f"{key}-t", round_id=round_id, rng=rng
            ),
            "settle": lambda: casino.settle(request_id=f"{key}-s", round_id=round_id),
            "act": lambda: casino.act(
                request_id=f"{key}-a",
                round_id=round_id,
                actor="dealer",
                action="throw",
                source=device.act(round_id, 1, "dealer", "throw", {}, [4, 5, 6]),
            ),
            "void_round": lambda: casino.void_round(
                request_id=f"{key}-v", round_id=round_id, reason="x", operator=operator
            ),
            "resume_round": lambda: casino.resume_round(
                request_id=f"{key}-r", round_id=round_id, reason="x", operator=operator
            ),
            "fact_to_sign": lambda: casino.fact_to_sign(
                command="void", round_id=round_id, key_id=operator.key_id, reason="x"
            ),
        }

    for game_round in (betting, closed, decided):
        for name, command in commands(game_round.id).items():
            with pytest.raises(InvalidCommandError) as refused:
                command()
            assert str(refused.value) == refusal(game_round.id), name
            assert refused.value.code == "needs_migration", name
        (outcome,) = casino.place_bets(
            round_id=game_round.id, bets=[BetRequest(f"batch-{game_round.id}", alice, HEADS, 10)]
        )
        assert str(outcome.error) == refusal(game_round.id)
        assert casino.moves(game_round.id) == {}
    assert event_count(node.app) == before

    # The CLI: one error line, exit 2.
    with ledger_cli(node.app.store_url, node.keys.path) as ledger:
        for argv in (
            ("rounds", "void", closed.id, "--reason", "x"),
            ("rounds", "resume", closed.id, "--reason", "x"),
            ("rounds", "settle", decided.id),
            ("rounds", "act", closed.id, "dealer", "throw", "--rng-dir", str(tmp_path)),
        ):
            capsys.readouterr()
            assert ledger(*argv) == 2, argv
            out, err = capsys.readouterr()
            assert (out, err) == ("", f"ledger: error: {refusal(argv[2])}\n"), argv
    # HTTP: 400, the same line.
    api = make_api(node, tmp_path)
    for path, body in (
        (
            f"/v1/rounds/{betting.id}/bets",
            {"account_id": alice, "bet": {"bet": "big"}, "stake": 100},
        ),
        (f"/v1/rounds/{betting.id}/close-betting", None),
        (f"/v1/rounds/{closed.id}/act", {"actor": "dealer", "action": "throw"}),
        (f"/v1/rounds/{decided.id}/settle", None),
    ):
        answer = api.post(path, body)
        assert answer.status_code == 400, answer.text
        assert answer.json() == {
            "detail": refusal(path.split("/")[3]),
            "error": "InvalidCommandError",
            "code": "needs_migration",
        }
    assert event_count(node.app) == before

    # Once migrated, the rounds are ended: each command answers as for any ended round.
    done = casino.migrate(operator=operator)
    assert [m.action for m in done] == ["void", "void", "settle"]
    with pytest.raises(InvalidCommandError, match="is already settled"):
        casino.settle(request_id="after", round_id=decided.id)
    with pytest.raises(InvalidCommandError, match="is not taking bets"):
        casino.place_bet(
            request_id="after-b", round_id=betting.id, account_id=alice, bet={"bet": "big"},
            stake=100,
        )  # fmt: skip


def test_a_round_settled_under_api_1_reads_re_settles_and_is_not_corrected(
    node: Node, casino: Casino, capsys: pytest.CaptureFixture[str]
) -> None:
    alice = wallet(casino)
    table = table_of(casino, "taixiu", LIMITS)
    decided = api_1_round(node, casino, table)
    decided.bet(alice, {"bet": "big"}, 100)
    decided.close_betting().outcome({"dice": [6, 5, 6]})
    casino.migrate()
    settled = casino.round(decided.id)
    assert (settled.status, settled.settlement_api, settled.outcome) == (
        SETTLED,
        1,
        {"dice": [6, 5, 6]},
    )
    assert [r["returned"] for r in settled.results] == [200]
    # A round API 1 settled with its own command: a retry of that request still
    # gets its first answer, and nothing more is settled.
    old = api_1_round(node, casino, table)
    old.bet(alice, {"bet": "small"}, 100)
    first = old.close_betting().outcome({"dice": [1, 2, 3]}).settle("settle-before-upgrade")
    assert [r["returned"] for r in first] == [200]
    assert casino.settle(request_id="settle-before-upgrade", round_id=old.id) == first
    operator = operator_signer(node)
    before = event_count(node.app)
    line = (
        f"round {decided.id} was settled under settlement API 1 (release 0.2 and before), "
        "which this release reads and re-settles but no longer writes: its result is not "
        "corrected here"
    )
    with pytest.raises(InvalidCommandError) as refused:
        casino.correct(
            request_id="c-1",
            round_id=decided.id,
            outcome={"dice": [1, 1, 2]},
            reason="misread",
            operator=operator,
        )
    assert str(refused.value) == line
    with pytest.raises(InvalidCommandError) as refused:
        casino.correct_step(
            request_id="c-2",
            round_id=decided.id,
            step=1,
            drawn=[1, 1, 2],
            reason="misread",
            operator=operator,
        )
    assert str(refused.value) == line
    assert event_count(node.app) == before
    node.checkpointer().catch_up()
    with ledger_cli(node.app.store_url, node.keys.path) as ledger:
        capsys.readouterr()
        assert ledger("verify", "--level", "settlement") == 0
        out, _ = capsys.readouterr()
        assert out.startswith("OK")
        assert ledger("recall", decided.id) == 0
        out, _ = capsys.readouterr()
        assert "settlement API 1" in out


def test_a_release_0_2_store_with_a_round_left_open_migrates_and_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Release 0.2's own store: a round left open at one of its physical tables
    (written as release 0.2 wrote it), migrated by today's node with new keys;
    the store verifies at level settlement against the checkpoint kept then."""
    for name in ("LEDGER_KEYS", "LEDGER_STORE", "LEDGER_ORIGIN", "LEDGER_NODE_KEY"):
        monkeypatch.delenv(name, raising=False)
    target = tmp_path / "release-0.2"
    shutil.copytree(RELEASE_0_2, target)
    keys = KeyDirectory(target / "keys")  # only the public keyring was kept: new keys sign
    keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)
    keys.create("checkpoint-2", Role.CHECKPOINT, PASSPHRASE)
    keys.create("operator-2", Role.OPERATOR, PASSPHRASE)
    store = f"sqlite:///{target / 'ledger.db'}"
    node = open_node(store, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0)
    try:
        casino = Casino(node.app, get_plugin_manager().games())
        assert casino.rounds_to_migrate() == []  # every round of it ended
        old = casino.round(next(iter(migrated_rounds(node))))
        table = str(old.table_id)
        assert casino.table(table).kind is None  # a table of release 0.2
        player = casino.open_account(request_id="p", owner="late", currency=old.currency)
        casino.deposit(request_id="d", account_id=player, amount=10 * old.limits["max_bet"])
        left = api_1_round(node, casino, table)
        left.bet(player, {"bet": "big"}, old.limits["min_bet"])
        left.close_betting()
        node.checkpointer().catch_up()
    finally:
        node.close()
    with ledger_cli(store, keys.path) as ledger:
        capsys.readouterr()
        assert ledger("migrate", "--operator-key", "operator-2") == 0
        out, err = capsys.readouterr()
        assert err == "" and out.startswith(f"voided round {left.id} ")
        assert ledger("checkpoint") == 0
    code, output = verify(target, capsys, "--trusted", str(target / "kept.txt"))
    assert code == 0, output
    assert "42 rounds re-derived" in output
    assert "consistent with the kept checkpoint of size 750" in output


def migrated_rounds(node: Node) -> list[str]:
    """The physical rounds release 0.2 played, settled under settlement API 1."""
    found: list[str] = []
    after = 0
    while batch := node.app.recorder.select_notifications(
        start=after, limit=500, topics=["ledger.domain.round:Round.Opened"],
        inclusive_of_start=False,
    ):  # fmt: skip
        for row in batch:
            game_round = node.app.repository.get(row.originator_id)
            if game_round.seed_id is None and game_round.status == SETTLED:
                found.append(str(game_round.id))
        after = batch[-1].id
    return found
