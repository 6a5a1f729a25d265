"""A batch of bets on one round in one request (`POST /v1/rounds/{id}/bets/batch`,
`Casino.place_bets`), on both stores: each bet accepted or refused on its own,
with the status and error the single-bet route answers it with, nothing
recorded for a refused one; a retried batch answers each bet as the first
time; a batch malformed as a whole is refused whole, recording nothing."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ledger.casino import MAX_BETS, BetRequest
from ledger.errors import InvalidCommandError, NotFoundError, RequestIdReusedError
from ledger.node import Node
from tests.http_support import LIMITS, Api, make_api


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def batch(api: Api, round_id: str, bets: Any, role: str = "operator") -> tuple[int, Any]:
    response = api.client.post(
        f"/v1/rounds/{round_id}/bets/batch",
        content=bets if isinstance(bets, bytes) else json.dumps({"bets": bets}).encode(),
        headers={**api.headers(role, None), "content-type": "application/json"},
    )
    return response.status_code, response.json()


def single(api: Api, round_id: str, bet: dict[str, Any]) -> tuple[int, Any]:
    """The single-bet route's answer to the same bet (under its request id)."""
    body = {k: v for k, v in bet.items() if k != "request_id"}
    response = api.post(f"/v1/rounds/{round_id}/bets", body, key=bet["request_id"])
    return response.status_code, response.json()


def test_each_bet_is_answered_on_its_own_as_the_single_route_would(api: Api) -> None:
    wallet, broke = api.wallet(100_000), api.wallet(50)
    round_id = api.round(api.table())
    good = {"account_id": wallet, "bet": {"on": "heads"}, "stake": 100}
    bets = [{**good, "request_id": f"good-{n}"} for n in range(5)]
    bad = {
        "an unknown account": {**good, "account_id": str(uuid.uuid4())},
        "a stake over the limit": {**good, "stake": LIMITS["max_bet"] + 1},
        "a wallet without the money": {**good, "account_id": broke},
        "an unknown bet": {**good, "bet": {"on": "edge"}},
        "an account id that is no account": {**good, "account_id": round_id},
    }
    for n, body in enumerate(bad.values()):
        bets.insert(2 * n + 1, {**body, "request_id": f"bad-{n}"})
    before = api.events()
    status, answer = batch(api, round_id, bets)
    assert status == 200, answer
    assert (answer["placed"], answer["refused"]) == (5, len(bad))
    assert [a["request_id"] for a in answer["bets"]] == [b["request_id"] for b in bets]
    assert api.events() - before == 5 * 2  # each placed bet's two events, nothing else
    for bet, got in zip(bets, answer["bets"], strict=True):
        if bet["request_id"].startswith("good"):
            assert got["status"] == 201 and got["error"] is None and got["detail"] is None
            assert got["bet_id"] in api.service.casino.round(round_id).bets
            # The single route, asked again under the bet's request id: its first result.
            assert single(api, round_id, bet) == (201, {"bet_id": got["bet_id"]})
        else:
            assert got["status"] >= 400 and got["bet_id"] is None, got
            # The same bet sent alone (a new request id: the first try recorded nothing).
            alone = single(api, round_id, {**bet, "request_id": str(uuid.uuid4())})
            fields = ("detail", "error", "code") + (("param",) if got["param"] else ())
            assert alone == (got["status"], {name: got[name] for name in fields})
    assert api.events() - before == 5 * 2


def test_a_retried_batch_answers_each_bet_as_the_first_time(api: Api) -> None:
    wallet = api.wallet(100_000)
    round_id = api.round(api.table())
    bets = [
        {"request_id": f"r{n}", "account_id": wallet, "bet": {"on": "tails"}, "stake": 10 + n}
        for n in range(20)
    ]
    bets[7]["stake"] = 10**7  # refused, and refused again the same way
    first = batch(api, round_id, bets)
    events = api.events()
    assert batch(api, round_id, bets) == first
    assert api.events() == events  # nothing new
    # A request id sent again with other arguments: that bet alone is refused.
    changed = [dict(b) for b in bets]
    changed[3]["stake"] = 11
    status, again = batch(api, round_id, changed)
    assert status == 200 and api.events() == events
    assert again["bets"][3]["status"] == 409
    assert again["bets"][3]["error"] == "RequestIdReusedError"
    assert again["bets"][:3] == first[1]["bets"][:3]
    assert again["bets"][4:] == first[1]["bets"][4:]


def test_one_request_id_twice_in_a_batch(api: Api) -> None:
    """The same bet twice is placed once (both answered with its id); the same
    request id for another bet is refused for that bet alone."""
    wallet = api.wallet(100_000)
    round_id = api.round(api.table())
    bet = {"request_id": "twice", "account_id": wallet, "bet": {"on": "heads"}, "stake": 100}
    other = {**bet, "stake": 200}
    before = api.events()
    status, answer = batch(api, round_id, [bet, bet, other])
    assert status == 200
    first, repeated, reused = answer["bets"]
    assert first["status"] == repeated["status"] == 201
    assert first["bet_id"] == repeated["bet_id"]
    assert reused["status"] == 409 and reused["error"] == "RequestIdReusedError"
    assert api.events() - before == 2  # the bet and its debit


@pytest.mark.parametrize(
    "case",
    ["not JSON", "no bets", "too many bets", "a bet without a request id", "a float stake"],
)
def test_a_batch_malformed_as_a_whole_is_refused_whole(api: Api, case: str) -> None:
    wallet = api.wallet(100_000)
    round_id = api.round(api.table())
    good = {"request_id": "x", "account_id": wallet, "bet": {"on": "heads"}, "stake": 100}
    body: Any = {
        "not JSON": b"{bets: [",
        "no bets": [],
        "too many bets": [{**good, "request_id": f"k{n}"} for n in range(MAX_BETS + 1)],
        "a bet without a request id": [good, {k: v for k, v in good.items() if k != "request_id"}],
        "a float stake": [good, {**good, "request_id": "y", "stake": 1.5}],
    }[case]
    before = api.events()
    status, answer = batch(api, round_id, body)
    assert status == 422 and answer["error"] == "InvalidRequest", answer
    assert "\n" not in answer["detail"]
    assert api.events() == before


def test_a_batch_for_no_round_is_refused_whole(api: Api) -> None:
    wallet = api.wallet(100_000)
    table = api.table()
    bets = [{"request_id": "n1", "account_id": wallet, "bet": {"on": "heads"}, "stake": 100}]
    before = api.events()
    missing = str(uuid.uuid4())
    status, answer = batch(api, missing, bets)
    assert status == 404 and answer["error"] == "NotFoundError" and missing in answer["detail"]
    status, answer = batch(api, table, bets)  # a table's id where a round's goes
    assert (status, answer["detail"]) == (404, f"{table} is a table, not a round")
    assert api.events() == before


def test_a_batch_of_a_thousand_bets_fits_and_one_over_the_size_limit_is_413(api: Api) -> None:
    wallet = api.wallet(10**9)
    round_id = api.round(api.table())
    bets = [
        {"request_id": f"{n:06d}", "account_id": wallet, "bet": {"on": "heads"}, "stake": 10}
        for n in range(MAX_BETS)
    ]
    status, answer = batch(api, round_id, bets)
    assert status == 200 and answer["placed"] == MAX_BETS
    before = api.events()
    padded = {"on": "heads", "note": "x" * 2000}
    status, answer = batch(api, round_id, [{**b, "bet": padded} for b in bets])
    assert status == 413 and answer["error"] == "BodyTooLarge"
    assert api.events() == before


def test_a_table_device_batches_on_its_own_table_only(api: Api) -> None:
    wallet = api.wallet(100_000)
    table, other = api.table(), api.table()
    round_id = api.round(table)
    bets = [{"request_id": "d1", "account_id": wallet, "bet": {"on": "heads"}, "stake": 100}]
    api.device_token(other)
    before = api.events()
    status, answer = batch(api, round_id, bets, role="table-device")
    assert status == 403 and "another table" in answer["detail"]
    assert api.events() == before
    api.device_token(table)
    status, answer = batch(api, round_id, bets, role="table-device")
    assert status == 200 and answer["placed"] == 1
    assert batch(api, round_id, bets, role="cashier")[0] == 403


def test_the_python_api_answers_each_bet_on_its_own(api: Api) -> None:
    casino = api.service.casino
    wallet = api.wallet(100_000)
    round_id = api.round(api.table())
    bets = [
        BetRequest("p1", wallet, {"on": "heads"}, 100),
        BetRequest("p2", str(uuid.uuid4()), {"on": "heads"}, 100),
        BetRequest("", wallet, {"on": "heads"}, 100),  # no request id
        BetRequest("p1", wallet, {"on": "heads"}, 200),  # p1 again, other arguments
    ]
    placed, unknown, no_id, reused = casino.place_bets(round_id=round_id, bets=bets)
    assert placed.error is None and placed.bet_id in casino.round(round_id).bets
    assert isinstance(unknown.error, NotFoundError) and unknown.bet_id is None
    assert isinstance(no_id.error, InvalidCommandError) and "request id" in str(no_id.error)
    assert isinstance(reused.error, RequestIdReusedError)
    with pytest.raises(InvalidCommandError, match=r"a batch holds 1\.\.1000 bets"):
        casino.place_bets(round_id=round_id, bets=[])
