"""A table is opened as RNG or physical, explicitly (issue 19, item 1): each
refuses the other kind's commands with a clear error and records nothing, and
`verify` fails a node that broke the rule (on both stores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.domain.game_table import GameTable
from ledger.errors import InvalidCommandError, VerificationError
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.server import RngServer
from tests.casino_support import event_count
from tests.http_support import make_api
from tests.installed import installed_games

LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}


@pytest.fixture
def casino(node: Node) -> Casino:
    return Casino(node.app, get_plugin_manager().games())


def table(casino: Casino, kind: str, name: str = "TX") -> str:
    return casino.open_table(
        request_id=f"table-{name}",
        name=name,
        game="taixiu",
        kind=kind,
        currency="VND",
        limits=LIMITS,
    )


def test_a_table_of_no_known_kind_is_refused_and_records_nothing(
    node: Node, casino: Casino
) -> None:
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="opened as 'rng' or 'physical', not 'dice'"):
        table(casino, "dice")
    assert event_count(node.app) == before


def test_an_rng_table_opens_rounds_only_on_a_seed(
    node: Node, casino: Casino, tmp_path: Path
) -> None:
    rng = RngServer(tmp_path / "seeds")
    table_id = table(casino, "rng")
    assert casino.table(table_id).kind == "rng"
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="TX is an RNG table with no seed in use"):
        casino.open_round(request_id="early", table_id=table_id, dealer="D")
    assert event_count(node.app) == before
    seed = casino.commit_seed(request_id="seed", table_id=table_id, rng=rng)
    round_id = casino.open_round(request_id="round", table_id=table_id, dealer="D")
    opened = casino.round(round_id)
    assert opened.seed_id == seed and opened.draws == 0
    casino.close_betting(request_id="close", round_id=round_id)
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    thrown = casino.round(round_id)
    assert thrown.draws == 1  # the next dice draw's RNG counter
    # The names before issue 20, kept as aliases while ledger/http reads them.
    assert (thrown.dice_seed, thrown.throws) == (thrown.seed_id, thrown.draws) == (seed, 1)
    casino.retire_seed(request_id="retire", table_id=table_id, rng=rng)
    with pytest.raises(InvalidCommandError, match="TX is an RNG table with no seed in use"):
        casino.open_round(request_id="after", table_id=table_id, dealer="D")
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=installed_games())
    )  # raises on a finding
    assert report.rng_dice == 1


def test_a_physical_table_takes_no_seed_and_its_rounds_no_throw(
    node: Node, casino: Casino, tmp_path: Path
) -> None:
    rng = RngServer(tmp_path / "seeds")
    table_id = table(casino, "physical")
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="TX is a physical table: its dice and cards"):
        casino.commit_seed(request_id="seed", table_id=table_id, rng=rng)
    assert event_count(node.app) == before
    round_id = casino.open_round(request_id="round", table_id=table_id, dealer="D")
    assert casino.round(round_id).seed_id is None
    casino.close_betting(request_id="close", round_id=round_id)
    with pytest.raises(InvalidCommandError, match="no RNG seed: a physical table"):
        casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)


def test_over_http_the_kind_is_required_and_each_kind_refuses_the_other(
    node: Node, tmp_path: Path
) -> None:
    api = make_api(node, tmp_path)
    body = {"name": "T", "game": "taixiu", "currency": "EUR", "limits": LIMITS}
    missing = api.post("/v1/tables", body)
    assert missing.status_code == 422 and "kind" in missing.text
    physical = api.table("taixiu", kind="physical")
    assert api.get(f"/v1/tables/{physical}").json()["kind"] == "physical"
    refused = api.post(f"/v1/tables/{physical}/seeds")
    assert refused.status_code == 400
    assert "is a physical table" in refused.json()["detail"]
    rng = api.table("taixiu", kind="rng")
    early = api.post("/v1/rounds", {"table_id": rng, "dealer": "D"})
    assert early.status_code == 400
    assert "is an RNG table with no seed in use" in early.json()["detail"]


def test_attack_a_node_that_opens_an_rng_tables_round_without_a_seed(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    table_id = table(casino, "rng")
    monkeypatch.setattr(GameTable, "check_rng_round", lambda self: None)
    round_id = casino.open_round(request_id="round", table_id=table_id, dealer="D")
    with pytest.raises(
        VerificationError,
        match=rf"round {round_id} opened on RNG table {table_id} without a seed",
    ):
        verify_store(
            node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=installed_games())
        )


def test_attack_a_node_that_commits_a_seed_on_a_physical_table(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    table_id = table(casino, "physical")
    monkeypatch.setattr(GameTable, "check_takes_seeds", lambda self: None)
    casino.commit_seed(request_id="seed", table_id=table_id, rng=RngServer(tmp_path / "s"))
    with pytest.raises(
        VerificationError,
        match=rf"table {table_id} was opened as a physical table, yet a seed was committed",
    ):
        verify_store(
            node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=installed_games())
        )
