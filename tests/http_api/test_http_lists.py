"""The lists: `GET /v1/tables`, `/v1/accounts` and `/v1/rounds`, a page at a
time with an opaque cursor, filtered, in a stable order; a cursor that is not
one is a 400 that records nothing (both stores)."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger.node import Node
from tests.http_support import LIMITS, Api, make_api

CURSOR_DOMAIN = b"casino-ledger/cursor/v1\n"  # what the checksum of ledger.http.cursors covers


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def every_page(api: Api, path: str, key: str, **params: Any) -> list[list[dict[str, Any]]]:
    """Each page of a list, following `next_cursor` to the end."""
    pages: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        asked = {**params, **({"cursor": cursor} if cursor else {})}
        response = api.get(path, **asked)
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append(body[key])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages


def open_table(api: Api, name: str, game: str, currency: str) -> str:
    body = {"name": name, "game": game, "kind": "physical", "currency": currency}
    return str(api.ok("/v1/tables", {**body, "limits": LIMITS})["table_id"])


def test_tables_page_through_in_opening_order_and_filter(api: Api) -> None:
    kinds = [
        ("coin", "EUR"),
        ("taixiu", "EUR"),
        ("coin", "USD"),
        ("coin", "EUR"),
        ("xidach", "EUR"),
    ]
    opened = [open_table(api, f"T{n}", game, currency) for n, (game, currency) in enumerate(kinds)]
    pages = every_page(api, "/v1/tables", "tables", limit=2)
    assert [len(page) for page in pages] == [2, 2, 1]
    assert [t["table_id"] for page in pages for t in page] == opened
    first = pages[0][0]
    assert (first["name"], first["game"], first["currency"]) == ("T0", "coin", "EUR")
    assert first["house_account"] == api.get(f"/v1/tables/{opened[0]}").json()["house_account"]
    coins = every_page(api, "/v1/tables", "tables", limit=1, game="coin", currency="EUR")
    assert [t["table_id"] for page in coins for t in page] == [opened[0], opened[3]]
    assert api.get("/v1/tables", game="none-such").json() == {"tables": [], "next_cursor": None}


def test_accounts_page_through_with_balances_and_filter(api: Api) -> None:
    wallets = [api.wallet(1_000 * (n + 1), currency="EUR" if n < 3 else "USD") for n in range(4)]
    api.ok(f"/v1/accounts/{wallets[1]}/withdrawals", {"amount": 2_000}, "cashier")
    api.ok(f"/v1/accounts/{wallets[1]}/close", {"reason": "asked by the player"}, "cashier")
    house = api.get(f"/v1/tables/{api.table()}").json()["house_account"]
    listed = [a for page in every_page(api, "/v1/accounts", "accounts", limit=3) for a in page]
    assert [a["account_id"] for a in listed] == [*wallets, house]
    for account in listed:  # the read model agrees with each account's own events
        own = api.get(f"/v1/accounts/{account['account_id']}").json()
        assert (account["balance"], account["owner"], account["kind"]) == (
            own["balance"],
            own["owner"],
            own["kind"],
        )
        assert (account["status"] == "closed") == own["closed"]
    assert listed[0]["deposits"] == 1_000 and listed[0]["opened_at"] < listed[1]["opened_at"]
    players = every_page(api, "/v1/accounts", "accounts", kind="player", status="open")
    assert [a["account_id"] for page in players for a in page] == [wallets[0], *wallets[2:]]
    dollars = api.get("/v1/accounts", currency="USD").json()["accounts"]
    assert [a["account_id"] for a in dollars] == [wallets[3]]


def test_rounds_by_table_status_and_time(api: Api) -> None:
    player = api.wallet(10_000)
    one, two = api.table(), api.table()
    at_one = [api.round(one) for _ in range(3)]
    at_two = api.round(two)
    bet = {"account_id": player, "bet": {"on": "heads"}, "stake": 100}
    api.ok(f"/v1/rounds/{at_one[0]}/bets", bet)
    api.ok(f"/v1/rounds/{at_one[0]}/close-betting")
    pages = every_page(api, "/v1/rounds", "rounds", limit=2, table_id=one)
    assert [len(page) for page in pages] == [2, 1]
    assert [r["round_id"] for page in pages for r in page] == at_one
    closed = api.get("/v1/rounds", status="closed").json()["rounds"]
    assert [r["round_id"] for r in closed] == [at_one[0]]
    betting = every_page(api, "/v1/rounds", "rounds", status="betting", open="true")
    assert [r["round_id"] for page in betting for r in page] == [*at_one[1:], at_two]
    now = datetime.now(UTC)
    later = (now + timedelta(hours=1)).isoformat()
    earlier = (now - timedelta(hours=1)).isoformat()
    assert api.get("/v1/rounds", opened_since=later).json()["rounds"] == []
    span = api.get("/v1/rounds", opened_since=earlier, opened_before=later).json()["rounds"]
    assert [r["round_id"] for r in span] == [*at_one, at_two]
    yesterday = (now - timedelta(days=1)).date().isoformat()  # a date: its midnight, UTC
    assert len(api.get("/v1/rounds", opened_since=yesterday).json()["rounds"]) == 4
    assert api.get("/v1/rounds", opened_before=yesterday).json()["rounds"] == []


def test_a_cursor_that_is_not_one_is_a_400_and_records_nothing(api: Api) -> None:
    table = api.table()
    for _ in range(3):
        api.round(table)
    cursor = api.get("/v1/rounds", limit=1, table_id=table).json()["next_cursor"]
    assert cursor
    body, _, checksum = cursor.partition(".")
    edited = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).replace(b"20", b"19", 1)
    tampered = base64.urlsafe_b64encode(edited).decode().rstrip("=") + "." + checksum
    forged_body = b"[1, 2]"  # as a client who read the code might make one
    forged = f"{b64(forged_body)}.{b64(hashlib.sha256(CURSOR_DOMAIN + forged_body).digest()[:12])}"
    tables_cursor = every_page(api, "/v1/tables", "tables")  # one page: no cursor of its own
    assert tables_cursor == [[*api.get("/v1/tables").json()["tables"]]]
    api.table()
    other_list = api.get("/v1/tables", limit=1).json()["next_cursor"]
    before = api.events()
    for bad, params in (
        ("garbage", {"table_id": table}),
        ("a.b", {"table_id": table}),
        ("é" * 10, {"table_id": table}),
        (tampered, {"table_id": table}),
        (other_list, {"table_id": table}),  # another list's
        (forged, {"table_id": table}),  # its checksum right, its body not a cursor's
        (cursor, {}),  # the same list asked with other filters
        (cursor, {"table_id": table, "status": "closed"}),
    ):
        response = api.get("/v1/rounds", limit=1, cursor=bad, **params)
        assert response.status_code == 400, (bad, response.text)
        detail = response.json()["detail"]
        assert "cursor" in detail and "\n" not in detail
    assert api.events() == before
    assert api.get("/v1/rounds", limit=1, cursor=cursor, table_id=table).status_code == 200


def test_list_parameters_are_checked(api: Api) -> None:
    before = api.events()
    for path, params, status in (
        ("/v1/rounds", {"limit": 1001}, 422),  # over the documented maximum
        ("/v1/tables", {"limit": 0}, 422),
        ("/v1/accounts", {"currency": "eur"}, 422),
        ("/v1/accounts", {"status": "frozen"}, 422),
        ("/v1/rounds", {"status": "lost"}, 422),
        ("/v1/rounds", {"opened_since": "yesterday"}, 400),
        ("/v1/rounds", {"opened_before": "2026-12-01T10:00"}, 400),  # whose zone?
        ("/v1/rounds", {"opened_since": "0001-01-01T00:00+14:00"}, 400),  # before year 1 in UTC
        ("/v1/rounds", {"open": "true", "status": "settled"}, 400),
    ):
        response = api.get(path, **params)
        assert response.status_code == status, (path, params, response.text)
        assert "\n" not in response.json()["detail"]
    assert api.events() == before
    assert api.get("/v1/rounds", limit=1000).status_code == 200


def test_a_page_reads_the_read_models_not_the_log(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the read models are caught up, paging reads no event: not the log's
    notifications, not an aggregate's stream."""
    for _ in range(3):
        api.round(api.table())
        api.wallet(100)
    assert api.get("/v1/rounds").status_code == 200  # caught up

    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("a list read the event log")

    monkeypatch.setattr(api.node.app.recorder, "select_notifications", no_reading)
    monkeypatch.setattr(api.node.app.repository, "get", no_reading)
    for path, key in (
        ("/v1/tables", "tables"),
        ("/v1/accounts", "accounts"),
        ("/v1/rounds", "rounds"),
    ):
        pages = every_page(api, path, key, limit=2)
        assert sum(len(page) for page in pages) >= 3
