"""The betting window's fast path answers exactly as the FastAPI route does
(`ledger.http.bet_fast_path`): the same requests, sent to an app with it and
to one without it, get the same statuses and bodies, on both stores; what it
does not take (other roles, bad keys or bodies) reaches the route and is
answered as documented; a table device's bet is checked against its table
both ways alike."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ledger.http.app import create_app
from ledger.node import Node
from tests.http_support import Api, make_api


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def both(api: Api) -> tuple[TestClient, TestClient]:
    """The served app (fast path on) and the same service without it."""
    plain = TestClient(create_app(api.service, fast_bets=False), raise_server_exceptions=False)
    return api.client, plain


def send(
    client: TestClient, api: Api, path: str, body: Any, role: str = "operator", key: Any = "new"
) -> tuple[int, Any]:
    headers = api.headers(role, None)
    if key is not None:
        headers["Idempotency-Key"] = str(uuid.uuid4()) if key == "new" else key
    response = client.post(
        path,
        content=body if isinstance(body, bytes) else None,
        json=None if isinstance(body, bytes) else body,
        headers=headers,
    )
    return response.status_code, response.json()


def test_the_fast_path_answers_every_request_as_the_route_does(api: Api) -> None:
    fast, plain = both(api)
    wallet, broke = api.wallet(1_000), api.wallet(50)
    round_id = api.round(api.table())
    path = f"/v1/rounds/{round_id}/bets"
    good = {"account_id": wallet, "bet": {"on": "heads"}, "stake": 100}
    cases: list[tuple[str, Any, dict[str, Any]]] = [
        ("an unknown account", {**good, "account_id": str(uuid.uuid4())}, {}),
        ("a stake over the limit", {**good, "stake": 10**7}, {}),
        ("a wallet without the money", {**good, "account_id": broke}, {}),
        ("an unknown bet", {**good, "bet": {"on": "edge"}}, {}),
        ("a malformed account id", {**good, "account_id": "x"}, {}),
        ("a stake that is not an integer", {**good, "stake": 1.5}, {}),
        ("a body that is not JSON", b"{not json", {}),
        ("an extra field", {**good, "extra": 1}, {}),
        ("no Idempotency-Key", good, {"key": None}),
        ("an empty Idempotency-Key", good, {"key": ""}),
        ("a key too long", good, {"key": "k" * 201}),
        ("a cashier's token", good, {"role": "cashier"}),
        ("an unknown round", good, {"path": f"/v1/rounds/{uuid.uuid4()}/bets"}),
    ]
    for name, body, how in cases:
        where = how.get("path", path)
        options = {k: v for k, v in how.items() if k in ("role", "key")}
        answers = [send(client, api, where, body, **options) for client in (fast, plain)]
        assert answers[0] == answers[1], name
        assert answers[0][0] >= 400, (name, answers[0])
    before = api.events()
    # A good bet, and its retry the other way: the first bet's id, nothing new.
    for first, second in ((fast, plain), (plain, fast)):
        key = str(uuid.uuid4())
        status, placed = send(first, api, path, good, key=key)
        assert status == 201 and set(placed) == {"bet_id"}
        assert send(second, api, path, good, key=key) == (201, placed)
        reused = send(second, api, path, {**good, "stake": 200}, key=key)
        assert reused == send(first, api, path, {**good, "stake": 200}, key=key)
        assert reused[0] == 409 and reused[1]["error"] == "RequestIdReusedError"
    assert api.events() - before == 2 * 2  # two bets, two events each
    # After betting closed: refused the same way.
    api.ok(f"/v1/rounds/{round_id}/close-betting")
    late = [send(client, api, path, good) for client in (fast, plain)]
    assert late[0] == late[1] and late[0][0] == 400 and "not taking bets" in late[0][1]["detail"]


def test_a_table_devices_bet_is_answered_as_the_route_does(api: Api) -> None:
    """A device's token is checked against the round's table, the same both
    ways: another table's device is refused (nothing recorded), an unknown round
    is 404, and the table's own device places the bet and retries it."""
    fast, plain = both(api)
    wallet = api.wallet(1_000)
    table, other = api.table(), api.table()
    round_id = api.round(table)
    path = f"/v1/rounds/{round_id}/bets"
    body = {"account_id": wallet, "bet": {"on": "heads"}, "stake": 100}
    api.device_token(other)
    before = api.events()
    for where in (path, f"/v1/rounds/{uuid.uuid4()}/bets"):
        answers = [send(c, api, where, body, role="table-device") for c in (fast, plain)]
        assert answers[0] == answers[1] and answers[0][0] in (403, 404), answers
    assert send(fast, api, path, body, role="table-device")[1]["detail"] == (
        "this table device's token is for another table"
    )
    assert api.events() == before
    api.device_token(table)
    for first, second in ((fast, plain), (plain, fast)):
        key = str(uuid.uuid4())
        status, placed = send(first, api, path, body, role="table-device", key=key)
        assert status == 201 and set(placed) == {"bet_id"}
        assert send(second, api, path, body, role="table-device", key=key) == (201, placed)
    assert api.events() - before == 2 * 2  # two bets, two events each


def test_a_table_devices_bet_takes_the_fast_path(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the route's: a device pays no more per bet than an operator."""
    wallet = api.wallet(1_000)
    table = api.table()
    round_id = api.round(table)
    api.device_token(table)

    def routed(**_: object) -> None:
        raise AssertionError("the bet reached the FastAPI route")

    monkeypatch.setattr(api.service.casino, "place_bet", routed)
    body = {"account_id": wallet, "bet": {"on": "heads"}, "stake": 100}
    status, placed = send(api.client, api, f"/v1/rounds/{round_id}/bets", body, role="table-device")
    assert status == 201 and set(placed) == {"bet_id"}
