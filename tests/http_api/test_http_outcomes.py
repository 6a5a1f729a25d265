"""What an integrator reads back: a game's rules data (its canonical hash is the
rules hash every round pins), and a settled round's outcome in its view (dice
or cards, as corrected), with `/settle` refusing a round its draw settled
(both stores)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import rfc8785

from ledger.casino import Casino
from ledger.node import Node
from tests.http_api.test_http_attestation import (
    play_over_http,
    rng_xidach_over_http,
    seated_round,
)
from tests.http_api.test_http_roles import SCENARIOS, physical_dice_round, rng_round
from tests.http_support import Api, all_games, make_api


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def test_each_games_rules_hash_to_its_listed_rules_hash(api: Api) -> None:
    listed = api.get("/v1/games").json()["games"]
    assert {"taixiu", "xidach"} <= {g["id"] for g in listed}
    for game in listed:
        found = api.get(f"/v1/games/{game['id']}")
        assert found.status_code == 200, found.text
        read = found.json()
        assert {k: v for k, v in read.items() if k != "rules"} == game
        assert read["rules"], game["id"]  # every shipped game has rules data
        assert hashlib.sha256(rfc8785.dumps(read["rules"])).hexdigest() == game["rules_hash"]
    round_id = api.round(api.table("taixiu"))
    pinned = api.get(f"/v1/rounds/{round_id}").json()["rules_hash"]
    assert pinned == api.get("/v1/games/taixiu").json()["rules_hash"]
    missing = api.get("/v1/games/baucua")
    assert missing.status_code == 404 and "baucua" in missing.json()["detail"]


def test_a_dice_round_shows_its_dice_once_settled_and_settles_once(api: Api) -> None:
    _, round_id = rng_round(api, closed=True)
    assert api.get(f"/v1/rounds/{round_id}").json()["outcome"] is None
    drawn = api.ok(f"/v1/rounds/{round_id}/draw")["drawn"]
    view = api.get(f"/v1/rounds/{round_id}").json()
    assert view["status"] == "settled"
    assert view["outcome"] == drawn == {"dice": view["log"][-1]["action"]["drawn"]}
    before = api.events()
    for role in ("operator", "table-device"):
        if role == "table-device":
            api.device_token(view["table_id"])
        refused = api.post(f"/v1/rounds/{round_id}/settle", role=role)
        assert refused.status_code == 400, refused.text
        assert refused.json()["detail"] == f"round {round_id} is already settled"
    assert api.events() == before
    assert api.get(f"/v1/rounds/{round_id}").json()["results"] == view["results"]


def test_a_physical_dice_round_shows_its_corrected_dice(api: Api) -> None:
    _, round_id = physical_dice_round(api)
    assert api.get(f"/v1/rounds/{round_id}").json()["outcome"] == {"dice": [1, 2, 4]}
    correction = SCENARIOS["POST /v1/rounds/{round_id}/step-corrections"](api)
    corrected_round = correction.path.split("/")[3]
    api.ok(correction.path, correction.body)
    assert api.get(f"/v1/rounds/{corrected_round}").json()["outcome"] == {"dice": [6, 6, 5]}


def test_a_card_round_shows_its_cards_once_settled(api: Api) -> None:
    api.tokens["terminal"] = api.tokens["operator"]  # who plays the seats' moves
    table, round_id = rng_xidach_over_http(api)
    casino = Casino(api.node.app, all_games())
    for _ in range(20):  # the cards decide: a natural at the deal ends the round at once
        api.ok(f"/v1/rounds/{round_id}/act", {"actor": "dealer", "action": "close_betting"})
        api.ok(f"/v1/rounds/{round_id}/act", {"actor": "dealer", "action": "deal"})
        dealt = api.get(f"/v1/rounds/{round_id}").json()
        if dealt["status"] != "settled":
            break
        round_id = seated_round(api, table)
    else:
        pytest.fail("every deal of 20 ended its round")
    assert dealt["dealt"] and dealt["outcome"] is None  # in play: no outcome yet
    play_over_http(api, casino, round_id)
    view = api.get(f"/v1/rounds/{round_id}").json()
    assert view["status"] == "settled"
    drawn = [card for entry in view["log"] for card in entry["action"]["drawn"]]
    assert view["outcome"] == {"cards": view["dealt"]} and view["dealt"] == drawn
