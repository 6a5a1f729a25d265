"""`ledger migrate` (issue 39, item 2): a store upgraded with rounds still open
under settlement API 1 gets each ended, on both stores: a round with its
outcome recorded settled on it, any other voided (every stake back, signed by
an operator key); the balances follow, `verify --level settlement` passes, a
second run and `--dry-run` record nothing, and a refusal records nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.casino import Casino
from ledger.domain.round_records import SETTLED, VOIDED
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.server import RngServer
from tests.api_1_rounds import Api1Round, api_1_round
from tests.casino_support import HEADS, LIMITS, event_count, operator_signer, table_of
from tests.coin_game import COIN_GAMES as COIN
from tests.conftest import ledger_cli


def run(node: Node, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`ledger ARGS...` on the node's store and keys: (exit code, stdout, stderr)."""
    capsys.readouterr()
    with ledger_cli(node.app.store_url, node.keys.path) as ledger:
        code = ledger(*args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


class Floor:
    """A store as an upgrade finds it: rounds of settlement API 1 left open at
    a physical and an RNG table, beside a round of API 2."""

    def __init__(self, node: Node, rng: RngServer) -> None:
        self.node = node
        self.casino = casino = Casino(node.app, {**get_plugin_manager().games(), **COIN})
        self.alice = self.wallet("alice")
        self.bob = self.wallet("bob")
        physical = table_of(casino, "taixiu", LIMITS, name="TX-1", request_id="t-physical")
        rng_table = table_of(casino, "taixiu", LIMITS, kind="rng", name="TX-2", request_id="t-rng")
        casino.commit_seed(request_id="seed", table_id=rng_table, rng=rng)
        self.rng_table = rng_table
        # Decided: the device's throw recorded (after a faulty one), not settled.
        self.decided = api_1_round(node, casino, physical)
        self.decided.bet(self.alice, {"bet": "big"}, 100)
        self.decided.bet(self.bob, {"bet": "small"}, 50)
        self.decided.close_betting().fault("cocked dice").outcome({"dice": [4, 5, 6]})
        # Closed after a faulty draw, no outcome.
        self.faulted = api_1_round(node, casino, physical)
        self.faulted.bet(self.alice, {"bet": "small"}, 30)
        self.faulted.bet(self.bob, {"bet": "big"}, 20)
        self.faulted.close_betting().fault("a die off the table")
        # Betting still open.
        self.betting = api_1_round(node, casino, physical)
        self.betting.bet(self.bob, {"bet": "single:6"}, 10)
        # An RNG round closed before its throw.
        self.rng_round = api_1_round(node, casino, rng_table)
        self.rng_round.bet(self.alice, {"bet": "big"}, 40)
        self.rng_round.close_betting()
        # A round of API 2 beside them: not migrate's.
        self.current = casino.open_round(request_id="r-now", table_id=physical, dealer="D1")
        casino.place_bet(
            request_id="b-now",
            round_id=self.current,
            account_id=self.bob,
            bet={"bet": "big"},
            stake=10,
        )

    def wallet(self, owner: str) -> str:
        account = self.casino.open_account(request_id=f"a-{owner}", owner=owner, currency="EUR")
        self.casino.deposit(request_id=f"d-{owner}", account_id=account, amount=1_000)
        return account

    @property
    def open_api_1(self) -> list[Api1Round]:
        return [self.decided, self.faulted, self.betting, self.rng_round]

    def balance(self, account: str) -> int:
        return self.casino.account(account).balance


@pytest.fixture
def floor(node: Node, tmp_path: Path) -> Floor:
    return Floor(node, RngServer(tmp_path / "rng-seeds"))


def test_migrate_settles_the_decided_and_voids_the_rest(
    node: Node, floor: Floor, capsys: pytest.CaptureFixture[str]
) -> None:
    casino = floor.casino
    assert (floor.balance(floor.alice), floor.balance(floor.bob)) == (830, 910)
    house = casino.round(floor.decided.id).house_account
    house_before = casino.account(house).balance
    before = event_count(node.app)

    code, out, err = run(node, capsys, "migrate", "--dry-run")
    assert (code, err) == (0, ""), err
    lines = out.splitlines()
    assert lines[0] == (
        f"would settle round {floor.decided.id} (taixiu) on its recorded outcome "
        '{"dice": [4, 5, 6]}: 2 bets, 2.00 EUR returned'
    )
    assert lines[1] == (
        f"would void round {floor.faulted.id} (taixiu, closed, 1 faulty draw): 2 bets, "
        "0.50 EUR in stakes returned"
    )
    assert lines[2] == (
        f"would void round {floor.betting.id} (taixiu, betting): 1 bet, 0.10 EUR in stakes returned"
    )
    assert lines[3].startswith(f"would void round {floor.rng_round.id} (taixiu, closed): 1 bet")
    assert lines[4] == (
        "dry run: 4 rounds open under settlement API 1 (1 to settle, 3 to void); nothing recorded"
    )
    assert event_count(node.app) == before

    # No operator key to sign the voids: one line, nothing recorded.
    code, out, err = run(node, capsys, "migrate")
    assert code == 2 and out == ""
    assert err.startswith("ledger: error: ") and len(err.splitlines()) == 1, err
    assert "operator" in err
    assert event_count(node.app) == before
    signer = operator_signer(node)

    code, out, err = run(node, capsys, "migrate", "--reason", "upgrade to one generation")
    assert (code, err) == (0, ""), err
    lines = out.splitlines()
    assert lines[0].startswith(f"settled round {floor.decided.id} (taixiu) on its recorded")
    assert lines[1].endswith(f"signed by operator key {signer.key_id[:16]}")
    assert lines[-1] == (
        "migrated 4 rounds open under settlement API 1 (1 settled, 3 voided): "
        "none is left open under it"
    )

    decided = casino.round(floor.decided.id)
    assert decided.status == SETTLED and decided.settlement_api == 1
    assert sorted(r["returned"] for r in decided.results) == [0, 200]  # big on 15 wins
    for voided in (floor.faulted, floor.betting, floor.rng_round):
        game_round = casino.round(voided.id)
        assert game_round.status == VOIDED
        assert all(r["returned"] == r["stake"] for r in game_round.results)
    # alice: 1000 - 100 + 200 (won) - 30 + 30 - 40 + 40; bob: 1000 - 50 (lost) - 10 (API 2 bet)
    assert (floor.balance(floor.alice), floor.balance(floor.bob)) == (1_100, 940)
    assert casino.account(house).balance == house_before + 50 - 100
    assert casino.round(floor.current).is_open  # the API-2 round is not migrate's

    node.checkpointer().catch_up()
    code, out, err = run(node, capsys, "verify", "--level", "settlement")
    assert (code, err) == (0, ""), err
    assert out.startswith("OK")

    after = event_count(node.app)
    code, out, err = run(node, capsys, "migrate")  # again: nothing left to do
    assert (code, err) == (0, "")
    assert out == "no round is open under settlement API 1: nothing to migrate\n"
    code, out, _ = run(node, capsys, "migrate", "--dry-run")
    assert out.splitlines()[-1] == (
        "dry run: no round is open under settlement API 1; nothing recorded"
    )
    assert event_count(node.app) == after

    # The RNG table counts no round in play: its seed can be revealed.
    code, out, err = run(node, capsys, "seeds", "retire", floor.rng_table)
    assert (code, err) == (0, ""), err


def test_a_decided_round_whose_game_is_not_installed_is_not_migrated(
    node: Node, floor: Floor, capsys: pytest.CaptureFixture[str]
) -> None:
    """The coin is no installed plugin: its decided round cannot be settled, so
    nothing is migrated, and the line says what to install."""
    coin = table_of(floor.casino, "coin", LIMITS, name="C-2", request_id="t-coin-2")
    tossed = api_1_round(node, floor.casino, coin)
    tossed.bet(floor.alice, HEADS, 10)
    tossed.close_betting().outcome({"face": "heads"})
    operator_signer(node)
    before = event_count(node.app)
    code, out, err = run(node, capsys, "migrate")
    assert (code, out) == (2, "")
    assert err == (
        f"ledger: error: cannot settle round {tossed.id} on its recorded outcome: unknown "
        "game 'coin'; install a release of its game declaring its rules, then run "
        "ledger migrate again\n"
    )
    assert event_count(node.app) == before
    # Through the Python API, with the coin installed, it is settled with the rest.
    done = floor.casino.migrate(operator=operator_signer(node))
    assert {m.round_id: m.action for m in done} == {
        floor.decided.id: "settle",
        floor.faulted.id: "void",
        floor.betting.id: "void",
        floor.rng_round.id: "void",
        tossed.id: "settle",
    }
    assert floor.casino.rounds_to_migrate() == []
    assert floor.casino.migrate(operator=operator_signer(node)) == []


def test_migrate_refuses_a_bad_reason_and_records_nothing(
    node: Node, floor: Floor, capsys: pytest.CaptureFixture[str]
) -> None:
    operator_signer(node)
    before = event_count(node.app)
    for reason in ("", "   ", "x" * 5_000):
        code, out, err = run(node, capsys, "migrate", "--reason", reason)
        assert (code, out) == (2, ""), (reason, out)
        assert err.startswith("ledger: error: --reason") and len(err.splitlines()) == 1, err
    code, out, err = run(node, capsys, "migrate", "--operator-key", "nobody")
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1, err
    assert event_count(node.app) == before
